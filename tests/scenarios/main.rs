//! The examples, one per scenario of docs/ARCHITECTURE.md, end to end over TCP.

#![allow(clippy::too_many_lines, reason = "a test reads top to bottom")]

mod ask_ai;
mod ask_ai_rest;
mod edge_fallback;
mod food_api;
mod platform;
mod tokens;
