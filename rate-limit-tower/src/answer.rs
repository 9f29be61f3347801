//! Turning a limiter's [`Answer`] into HTTP: shared by the layer and by handlers that
//! check limits themselves, so both answer alike.

use std::fmt;
use std::sync::Arc;

use bytes::Bytes;
use http::header::{ORIGIN, RETRY_AFTER, WWW_AUTHENTICATE};
use http::{HeaderMap, HeaderValue, Response};
use ratekeeper_core::{Answer, Chain, ConfigError, ConfigErrorKind};

use crate::grpc::{self, GrpcResponder};
use crate::headers::{self, HeaderStyle, RateLimitInfo};
use crate::meters::{ByNames, Meters};
use crate::refusal::Refusal;
use crate::response::{JsonResponder, RedirectResponder, Responder};

/// What to do with a request once its limits answered: go ahead, or refuse it.
///
/// The one proceed-or-refuse value of the layer and of the in-handler limiter. `P` is what
/// an admitted response needs: for [`Answering::verdict_for`]'s callers, the headers' view
/// (`None` when a store failure let the request through unchecked).
#[derive(Debug)]
#[allow(
    clippy::large_enum_variant,
    reason = "a refusal is built once and moved into its response; boxing it would add an \
              allocation to every refusal, and the admitted path moves no verdict (measured \
              with callgrind: BENCHMARKS.md)"
)]
pub enum Verdict<P = Option<RateLimitInfo>> {
    /// Go ahead.
    Proceed(P),
    /// Refuse; [`Answering::respond`] makes the response.
    Refuse(Refusal),
}

/// What the request told us that a response needs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ctx {
    /// `Accept` has `text/html` and refusals redirect browsers (else not asked).
    pub(crate) wants_html: bool,
    pub(crate) origin: bool,
    /// Whether the response keeps its [`RateLimitInfo`] (for an outer layer, or because the
    /// layer was told to).
    pub(crate) record: bool,
    /// A gRPC call: refusals are gRPC statuses ([`GrpcResponder`](crate::GrpcResponder)).
    pub(crate) grpc: bool,
}

impl Ctx {
    /// What a request with these headers needs of its response; `redirects`: whether
    /// refusals send browsers to a page (else `Accept` is not read).
    #[inline]
    pub(crate) fn of(headers: &HeaderMap, redirects: bool, record: bool) -> Self {
        let grpc = grpc::is_grpc(headers);
        Self {
            wants_html: !grpc && redirects && accepts_html(headers),
            origin: headers.contains_key(ORIGIN),
            record,
            grpc,
        }
    }
}

/// How refusals and headers are written: header style, the 429 body, shadow mode, and
/// the page browsers are sent to.
///
/// One value, given to every layer ([`RateLimitLayer::answering`](crate::RateLimitLayer::answering))
/// and to the axum crate's in-handler limiter, so they all answer alike.
///
/// ```
/// use ratekeeper_tower::{Answering, HeaderStyle, RateLimitLayer};
///
/// let answering = Answering::new()
///     .headers(HeaderStyle::Ietf)
///     .redirect_browsers("/too-many-requests")?;
/// let layer = RateLimitLayer::in_memory().answering(answering.clone());
/// # let _ = layer;
/// // A Location must be a valid header value: a stable error code, not a panic.
/// let err = Answering::new().redirect_browsers("/bad\npage").unwrap_err();
/// assert_eq!(err.code(), "answer.redirect_invalid");
/// // The wait goes in the query, where the page's exemption does not see it.
/// assert!(Answering::new().redirect_browsers("/slow-down?wait={retry_after}").is_ok());
/// let err = Answering::new().redirect_browsers("/slow-{retry_after}").unwrap_err();
/// assert_eq!(err.code(), "answer.redirect_invalid");
/// # Ok::<(), ratekeeper_tower::core::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct Answering {
    pub(crate) style: HeaderStyle,
    pub(crate) responder: Arc<dyn Responder>,
    pub(crate) shadow: bool,
    pub(crate) redirect: Option<RedirectResponder>,
    /// The redirect target's path, exempt from every layer that answers this way.
    pub(crate) redirect_path: Option<String>,
    /// The most whole seconds added to a refusal's `Retry-After` (0: none).
    pub(crate) jitter: u64,
    /// The last `RateLimit-Policy` value written, for admitted and refused answers alike.
    pub(crate) policy: headers::PolicyCache,
    /// The series of the chains [`verdict_for`](Self::verdict_for) answers.
    pub(crate) meters: Arc<ByNames>,
}

impl fmt::Debug for Answering {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Answering")
            .field("style", &self.style)
            .field("shadow", &self.shadow)
            .field("redirect", &self.redirect)
            .finish_non_exhaustive()
    }
}

impl Default for Answering {
    fn default() -> Self {
        Self {
            style: HeaderStyle::Both,
            responder: Arc::new(JsonResponder),
            shadow: false,
            redirect: None,
            redirect_path: None,
            jitter: 0,
            policy: headers::PolicyCache::default(),
            meters: Arc::default(),
        }
    }
}

impl Answering {
    /// JSON 429s, both header styles, no shadow mode, no browser page.
    pub fn new() -> Self {
        Self::default()
    }

    /// Which rate-limit headers to write.
    #[must_use]
    pub fn headers(mut self, style: HeaderStyle) -> Self {
        self.style = style;
        self
    }

    /// Replaces the responder of every refusal but a gRPC call's and a redirected browser's
    /// (default [`JsonResponder`]; see [`Responder`]).
    #[must_use]
    pub fn with_responder(mut self, responder: impl Responder) -> Self {
        self.responder = Arc::new(responder);
        self
    }

    /// Shadow mode: refusals are logged and counted, and let through.
    #[must_use]
    pub fn shadow(mut self, on: bool) -> Self {
        self.shadow = on;
        self
    }

    /// Sends a refused request whose `Accept` includes `text/html` to this page with 303;
    /// `{retry_after}` in `path` becomes the wait in whole seconds
    /// (`/too-many-requests?wait={retry_after}`: see [`RedirectResponder`]).
    /// Every layer answering this way exempts the page, so a refused browser never loops
    /// (exempt it from limits applied elsewhere too). `answer.redirect_invalid` for a path
    /// that is not a valid `Location` value.
    pub fn redirect_browsers(mut self, path: &str) -> Result<Self, ConfigError> {
        let location = HeaderValue::from_str(path).map_err(|_| {
            ConfigError::new(
                ConfigErrorKind::RedirectInvalid,
                "redirect_browsers",
                "the page must be a valid Location header value (visible ASCII)",
            )
        })?;
        let page = path.split(['?', '#']).next().unwrap_or(path);
        if page.contains(crate::response::WAIT_PLACEHOLDER) {
            // The page is exempt by its path: a wait in the path would make each its own.
            return Err(ConfigError::new(
                ConfigErrorKind::RedirectInvalid,
                "redirect_browsers",
                "{retry_after} goes in the query (`/page?wait={retry_after}`), not the path",
            ));
        }
        self.redirect = Some(RedirectResponder::new(location));
        self.redirect_path = Some(page.to_owned());
        Ok(self)
    }

    /// Spreads refusals' `Retry-After` over up to `max` more (whole seconds, rounded up):
    /// when a room of clients polling in sync is refused together, they come back spread
    /// out instead of together again. Opt-in; off by default.
    ///
    /// - **Never early**: the true retry-after plus 0 to `max`; the body's `retry_after`
    ///   says the same. The `RateLimit` fields keep the true reset.
    /// - **Deterministic**: the extra is a hash of the refused principal, the limit and
    ///   the current window (wall-clock seconds ÷ the limit's window), so one client's
    ///   retries within a window are told the same, and a retry loop cannot fish for a
    ///   shorter wait.
    /// - **Per principal**: clients sharing one principal (a pub's IP, a global key) get one
    ///   value, so jitter cannot spread them; key such limits on something finer where a
    ///   stampede matters.
    #[must_use]
    pub fn jitter(mut self, max: std::time::Duration) -> Self {
        self.jitter = headers::ceil_secs(max);
        self
    }

    /// The extra seconds for a refusal of the principal behind `seed`, by a limit of
    /// `window_secs`.
    fn extra(&self, seed: u64, window_secs: u64) -> u64 {
        if self.jitter == 0 {
            return 0;
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let window = now / window_secs.max(1);
        splitmix(seed ^ splitmix(window)) % (self.jitter + 1)
    }

    /// The page refused browsers are sent to, if any.
    pub fn redirect(&self) -> Option<&str> {
        self.redirect_path.as_deref()
    }

    /// The verdict on `answer` for `chain`, whose limits name the policies in the headers;
    /// a refusal is answered with [`respond`](Self::respond).
    pub fn verdict_for(&self, answer: Answer, chain: &Chain) -> Verdict {
        let names: Vec<Arc<str>> = chain
            .checks()
            .iter()
            .map(|c| Arc::from(c.key().limit().name()))
            .collect();
        let seed = self.jitter_seed(&answer, chain);
        // Counted like a layer's decisions, in series kept per chain of limits.
        let meters = self.meters.get(&names);
        self.verdict(answer, &names, &meters, seed)
    }

    /// The response to `refusal` for a request with these headers: a gRPC call's status,
    /// a browser's redirect (when set and the refusal is a 429 with a wait), else the
    /// responder's; with `Retry-After`, the rate-limit headers, `WWW-Authenticate` for a
    /// 401, CORS exposure for a request with `Origin`, and the refusal's [`RateLimitInfo`]
    /// in the extensions.
    pub fn respond(&self, refusal: Refusal, request: &HeaderMap) -> Response<Bytes> {
        self.render(refusal, Ctx::of(request, self.redirect.is_some(), true))
    }

    /// The response to `refusal` (see [`respond`](Self::respond)).
    pub(crate) fn render(&self, mut refusal: Refusal, ctx: Ctx) -> Response<Bytes> {
        let mut resp = match &self.redirect {
            _ if ctx.grpc => GrpcResponder.respond(&refusal),
            Some(page) if ctx.wants_html && refusal.redirects() => page.respond(&refusal),
            _ => self.responder.respond(&refusal),
        };
        let h = resp.headers_mut();
        self.write_limit_fields(&refusal, h);
        if let Some(challenge) = refusal.challenge() {
            h.insert(WWW_AUTHENTICATE, challenge.clone());
        }
        if ctx.origin {
            headers::expose(h);
        }
        if let Some(info) = refusal.take_info() {
            resp.extensions_mut().insert(info);
        }
        resp
    }

    /// The fields an answer to `refusal` carries about its limits, as
    /// [`respond`](Self::respond) writes them: `Retry-After` and the `RateLimit*` fields of
    /// the configured style. For a refusal told another way than HTTP (a WebSocket's
    /// notice), with the same names and values.
    pub fn limit_fields(&self, refusal: &Refusal) -> HeaderMap {
        let mut h = HeaderMap::new();
        self.write_limit_fields(refusal, &mut h);
        h
    }

    fn write_limit_fields(&self, refusal: &Refusal, h: &mut HeaderMap) {
        if let Some(info) = refusal.info() {
            // A response of our own: nothing to replace, and the policy as last rendered.
            info.write_fresh(self.style, h, &self.policy);
        }
        if let Some(secs) = refusal.retry_after_secs() {
            h.insert(RETRY_AFTER, headers::retry_after(secs));
        }
    }

    /// Writes `info` as headers of the configured style (and nothing else).
    pub fn write(&self, info: &RateLimitInfo, headers: &mut HeaderMap) {
        info.write(self.style, headers);
    }

    /// The answer, with the chain's limit names given in order.
    pub(crate) fn verdict(
        &self,
        answer: Answer,
        names: &[Arc<str>],
        meters: &Meters,
        seed: u64,
    ) -> Verdict {
        match answer {
            Answer::Store(d) | Answer::Memory { decision: d, .. } => {
                if d.is_allowed() {
                    meters.admitted(&d);
                    crate::trace::admitted(names, &d);
                    return Verdict::Proceed(RateLimitInfo::from_chain(names, &d));
                }
                self.refused(&d, names, meters, seed)
            }
            Answer::Open(_) => {
                crate::trace::failed(true);
                Verdict::Proceed(None)
            }
            Answer::Closed { retry_after, .. } => {
                crate::trace::failed(false);
                Verdict::Refuse(Refusal::unavailable(retry_after))
            }
            // `Answer` is non-exhaustive; a kind this version does not know fails closed.
            _ => Verdict::Refuse(Refusal::unavailable(std::time::Duration::from_secs(1))),
        }
    }

    /// A refused chain's verdict: refused, or let through in shadow mode.
    fn refused(
        &self,
        d: &ratekeeper_core::ChainDecision,
        names: &[Arc<str>],
        meters: &Meters,
        seed: u64,
    ) -> Verdict {
        let (refused, ban, line_full) = d.denied_by().map_or((0, false, false), |(i, x)| {
            (i, x.is_ban(), x.is_line_full())
        });
        crate::trace::refused(names, d, self.shadow);
        let Some(info) = RateLimitInfo::from_chain(names, d) else {
            return Verdict::Proceed(None);
        };
        let denied = info
            .denied_by()
            .cloned()
            .unwrap_or_else(|| info.headline().clone());
        if self.shadow {
            meters.refused(refused, ban, true);
            tracing::info!(
                name: "rate_limit.shadow_limited",
                target: "rate_limit.shadow_limited",
                limit = denied.name(),
                "shadow mode: this request would have been refused"
            );
            return Verdict::Proceed(Some(info.shadow()));
        }
        meters.refused(refused, ban, false);
        let denied = match denied.retry_after_secs() {
            Some(secs) => {
                let extra = self.extra(seed, denied.window_secs());
                denied.with_retry_after(secs + extra)
            }
            None => denied,
        };
        Verdict::Refuse(Refusal::limited(denied, info, ban, line_full))
    }
}

impl Answering {
    /// A seed for the refused check of `answer` (its principal and limit), for jitter; 0
    /// when nothing was refused or jitter is off (a refusal flood hashes nothing then).
    pub(crate) fn jitter_seed(&self, answer: &Answer, chain: &Chain) -> u64 {
        if self.jitter == 0 {
            return 0;
        }
        refusal_seed(answer, chain)
    }
}

fn refusal_seed(answer: &Answer, chain: &Chain) -> u64 {
    let refused = answer
        .decision()
        .and_then(|d| d.denied_by())
        .and_then(|(i, _)| chain.checks().get(i));
    refused.map_or(0, |c| {
        let key = c.key();
        // FNV-1a over the principal's rendering and the limit's name.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in key
            .principal()
            .as_str()
            .bytes()
            .chain([b'/'])
            .chain(key.limit().name().bytes())
        {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        h
    })
}

/// SplitMix64's finaliser: spreads a seed's bits.
fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Whether a request's `Accept` includes `text/html` (a browser loading a page).
pub fn accepts_html(headers: &HeaderMap) -> bool {
    // Every request is asked: compare in place, without a lower-cased copy.
    headers.get_all(http::header::ACCEPT).iter().any(|v| {
        v.as_bytes()
            .windows(b"text/html".len())
            .any(|w| w.eq_ignore_ascii_case(b"text/html"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_is_recognised_in_any_case_and_any_accept_field() {
        let accept = |values: &[&[u8]]| {
            let mut h = HeaderMap::new();
            for v in values {
                h.append(http::header::ACCEPT, HeaderValue::from_bytes(v).unwrap());
            }
            accepts_html(&h)
        };
        assert!(accept(&[b"Text/HTML,application/xhtml+xml;q=0.9"]));
        assert!(accept(&[b"application/json", b"text/html"]));
        assert!(accept(&[b"\xfftext/html"]));
        assert!(!accept(&[b"*/*"]));
        assert!(!accept(&[b"application/json", b"text/htm"]));
        assert!(!accept(&[]));
    }
}
