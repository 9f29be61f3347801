//! The examples' shared code: each scenario is a library function here, so `tests/` can
//! run it in-process, and a thin binary in `src/bin/`.

pub mod ask_ai;
pub mod bench_server;
pub mod edge_fallback;
pub mod food_api;
pub mod platform;
pub mod quiz_night;
pub mod simulate;
