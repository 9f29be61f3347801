//! The features beyond refusing, one module each: bans, delays (and their lines), in-flight
//! limits, counting by outcome. On the memory store, a real `redis-server` and a real Redis
//! Cluster, through the layer and the in-handler limiter, over TCP.

#![allow(clippy::too_many_lines, reason = "a test reads top to bottom")]

mod ban;
mod delay;
mod fleet;
mod in_flight;
mod lines;
mod outcome;
mod reset;
