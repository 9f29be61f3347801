//! The examples, one per design document, end to end over TCP.

mod ask_ai;
mod edge_fallback;
mod food_api;
mod platform;
mod tokens;
