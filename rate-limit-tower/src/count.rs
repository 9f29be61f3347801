//! Counting by outcome: which responses a rule counts.

use std::fmt;
use std::sync::Arc;

use http::{Extensions, StatusCode};

type Predicate = dyn Fn(StatusCode, &Extensions) -> bool + Send + Sync;

/// Which responses a [`Rule`](crate::Rule) counts (express-rate-limit's
/// `skipSuccessfulRequests` / `skipFailedRequests`, and more): see
/// [`Rule::count_when`](crate::Rule::count_when).
///
/// The request's unit is reserved before the inner service runs, so concurrent requests
/// cannot all slip through while their outcomes are unknown; once the response is known,
/// a response this does not match gives its unit back (one more store call), and a
/// response it matches keeps it. Never counted after the fact.
///
/// ```
/// use http::StatusCode;
/// use ratekeeper_tower::CountWhen;
///
/// #[derive(Clone)]
/// struct SignInFailed; // set by the handler in the response's extensions
///
/// let failures = CountWhen::failed(); // 4xx and 5xx: failed sign-ins
/// let successes = CountWhen::succeeded(); // exports that produced a file
/// let unauthorized = CountWhen::status(StatusCode::UNAUTHORIZED);
/// let marked = CountWhen::extension::<SignInFailed>();
/// let custom = CountWhen::custom(|status, _| status == StatusCode::CONFLICT);
/// # let _ = (failures, successes, unauthorized, marked, custom);
/// ```
#[derive(Clone)]
pub struct CountWhen {
    predicate: Arc<Predicate>,
    what: &'static str,
}

impl fmt::Debug for CountWhen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("CountWhen").field(&self.what).finish()
    }
}

impl CountWhen {
    /// Counts failed requests: status 400 and above (skip successful requests).
    pub fn failed() -> Self {
        Self::named("failed", |s, _| s.is_client_error() || s.is_server_error())
    }

    /// Counts successful requests: status below 400 (skip failed requests).
    pub fn succeeded() -> Self {
        Self::named("succeeded", |s, _| {
            !(s.is_client_error() || s.is_server_error())
        })
    }

    /// Counts responses with this status only.
    pub fn status(status: StatusCode) -> Self {
        Self::named("status", move |s, _| s == status)
    }

    /// Counts responses whose extensions hold a `T`: the handler says what counts (e.g. a
    /// wrong password, whatever the status).
    pub fn extension<T: Clone + Send + Sync + 'static>() -> Self {
        Self::named("extension", |_, e| e.get::<T>().is_some())
    }

    /// Counts responses for which `f(status, extensions)` is true.
    pub fn custom(f: impl Fn(StatusCode, &Extensions) -> bool + Send + Sync + 'static) -> Self {
        Self::named("custom", f)
    }

    fn named(
        what: &'static str,
        f: impl Fn(StatusCode, &Extensions) -> bool + Send + Sync + 'static,
    ) -> Self {
        Self {
            predicate: Arc::new(f),
            what,
        }
    }

    /// Whether a response with this status and these extensions counts.
    pub fn counts(&self, status: StatusCode, extensions: &Extensions) -> bool {
        (self.predicate)(status, extensions)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone)]
    struct WrongPassword;

    #[test]
    fn each_predicate_counts_what_it_names() {
        let none = Extensions::new();
        let mut marked = Extensions::new();
        marked.insert(WrongPassword);
        let cases = [
            (CountWhen::failed(), StatusCode::UNAUTHORIZED, &none, true),
            (CountWhen::failed(), StatusCode::BAD_GATEWAY, &none, true),
            (CountWhen::failed(), StatusCode::OK, &none, false),
            (CountWhen::failed(), StatusCode::SEE_OTHER, &none, false),
            (CountWhen::succeeded(), StatusCode::CREATED, &none, true),
            (CountWhen::succeeded(), StatusCode::NOT_FOUND, &none, false),
            (
                CountWhen::status(StatusCode::CONFLICT),
                StatusCode::CONFLICT,
                &none,
                true,
            ),
            (
                CountWhen::status(StatusCode::CONFLICT),
                StatusCode::OK,
                &none,
                false,
            ),
            (
                CountWhen::extension::<WrongPassword>(),
                StatusCode::OK,
                &marked,
                true,
            ),
            (
                CountWhen::extension::<WrongPassword>(),
                StatusCode::UNAUTHORIZED,
                &none,
                false,
            ),
            (
                CountWhen::custom(|s, _| s.as_u16() == 418),
                StatusCode::IM_A_TEAPOT,
                &none,
                true,
            ),
        ];
        for (i, (when, status, ext, counts)) in cases.into_iter().enumerate() {
            assert_eq!(
                when.counts(status, ext),
                counts,
                "case {i}: {when:?} {status}"
            );
        }
    }
}
