//! Every store, one behaviour: the conformance suite against the memory store, a
//! standalone `redis-server` and a three-master Redis Cluster that the tests start; then
//! what only Redis can get wrong (key hygiene, one command per chain, faults).

#![allow(clippy::too_many_lines, reason = "a test reads top to bottom")]

mod calendar;
mod cancel;
mod coalesce;
mod compat;
mod conformance;
mod conformance_bans;
mod deny_cache;
mod dragonfly;
mod exactness;
mod faults;
mod fleet;
mod fleet_history;
mod fleet_push;
mod fleet_top;
mod lease;
mod log;
mod metrics;
mod monitor;
mod node_down;
mod redis_only;
mod reshard;
mod secrets;
mod sentinel;
mod shared_state;
mod support;
mod tls;
mod upgrade;
mod verify;
mod windows;
