//! The harness the tests and benches share: `redis-server` processes (standalone, or a
//! three-master Cluster) that this process starts on free ports and kills on drop. It never
//! touches a server it did not start.

pub mod redis;
pub mod tls;
