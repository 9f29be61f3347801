//! The admin (`ratekeeper-admin`) end to end: the API and the page over real TCP with a
//! real HTTP client, on the memory store, standalone Redis and a Cluster; its gate against
//! guessing and bodies; a fleet of instances changed through one admin.

#![allow(clippy::too_many_lines, reason = "a test reads top to bottom")]

mod api;
mod fleet;
mod gate;
mod page;
mod spray;
