//! Shared support for the end-to-end tests (servers, clients, `redis-server` processes).
