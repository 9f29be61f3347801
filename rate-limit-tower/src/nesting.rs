//! Whether a request is on its way through another [`RateLimit`](crate::RateLimit) layer
//! above this one, so that this layer leaves its [`RateLimitInfo`](crate::RateLimitInfo)
//! on the response for the outer one to merge.
//!
//! The outer layer marks the thread while it calls, or polls, what is below it; an inner
//! layer's `call` runs inside that (tower services are called from their caller's `call`
//! or `poll`, on its thread), and reads the mark. The mark costs a thread-local counter,
//! where a marker in the request's extensions would cost a map for requests that have none.
//! A service that moves the call to another task between two layers (tower's `Buffer`)
//! hides the outer layer: the inner one then leaves its record only on refusals (always
//! there) and the outer headers describe the outer limits alone, unless the inner layer
//! sets [`RateLimitLayer::info_extension`](crate::RateLimitLayer::info_extension).

use std::cell::Cell;

thread_local! {
    static DEPTH: Cell<u32> = const { Cell::new(0) };
}

/// Whether a `RateLimit` layer is calling or polling below it on this thread.
pub(crate) fn under_another_layer() -> bool {
    DEPTH.with(Cell::get) > 0
}

/// Runs `f` (a call or a poll of the inner service) with the thread marked.
pub(crate) fn below<T>(f: impl FnOnce() -> T) -> T {
    struct Unmark;
    impl Drop for Unmark {
        fn drop(&mut self) {
            DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
        }
    }
    DEPTH.with(|d| d.set(d.get().saturating_add(1)));
    let _unmark = Unmark;
    f()
}
