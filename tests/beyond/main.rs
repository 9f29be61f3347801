//! Beyond refusing: counting by outcome, on the memory store, a real `redis-server` and a
//! real Redis Cluster, through the layer and the in-handler limiter, over TCP.

mod ban;
mod delay;
mod in_flight;
mod lines;
mod outcome;
