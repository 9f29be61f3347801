//! Key extractors: who a rule counts, named from the request.
//!
//! An extractor turns a request's head into a [`Principal`], or a [`Rejection`]. A missing
//! or invalid principal is the extractor's decision — reject with a clear 4xx, or fall
//! back to another extractor with [`KeyExtractorExt::or_else`] — and never a shared empty
//! key.
//!
//! | extractor | principal | when absent |
//! |---|---|---|
//! | [`ClientIp`] | the client's IP (IPv6 by /64), through trusted proxies only | peer missing: 500 (a setup error) |
//! | [`HeaderKey`] | a header's value | 400 (or 401 with a challenge) |
//! | [`Bearer`] | `Authorization: Bearer <token>` as a user, hashed | 401 `WWW-Authenticate: Bearer` |
//! | [`ExtensionKey`] | a request extension set by an auth layer | 401 |
//! | [`Global`] | everybody | never |
//! | [`key_fn`] | whatever a closure returns | the closure's rejection |
//!
//! **Secrets never reach a key.** What these extractors read from `Authorization`,
//! `Proxy-Authorization` or `Cookie` (bearer tokens, session cookies: credentials), and
//! every principal of kind [`PrincipalKind::ApiKey`], is hashed before it becomes a key;
//! no setting turns that off. With [`HeaderKey::keyed`] / [`Bearer::keyed`] the hash is an
//! HMAC under your [`HashKey`], which a dictionary cannot reverse.
//!
//! ```
//! use ratekeeper_tower::core::{HashKey, PrincipalKind};
//! use ratekeeper_tower::extract::{Bearer, HeaderKey, KeyExtractor};
//!
//! let api_key = HeaderKey::new("x-api-key".parse().unwrap(), PrincipalKind::ApiKey);
//! let req = http::Request::builder().header("x-api-key", "sk_live_123").body(()).unwrap();
//! let (parts, _) = req.into_parts();
//! let p = api_key.extract(&parts).unwrap();
//! assert!(!p.as_str().contains("sk_live_123"));
//!
//! // Tokens hashed under the operator's key (the same on every instance).
//! let key = HashKey::new(std::env::var("RATE_LIMIT_HASH_KEY").unwrap_or("k".repeat(32)))?;
//! let user = Bearer::new().keyed(key);
//! # let _ = user;
//! # Ok::<(), ratekeeper_tower::core::ConfigError>(())
//! ```

use std::any::Any;
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use http::request::Parts;
use http::{HeaderName, HeaderValue};
use ratekeeper_core::{HashKey, Principal, PrincipalKind};

mod bearer;
mod forwarded;
mod ip;
mod rejection;

pub use bearer::Bearer;
pub use ip::{ClientIp, ForwardedSource};
/// A network (`"10.0.0.0/8".parse()`), for [`ClientIp::trusted_proxies`]: re-exported from
/// `ipnet`, so there is no crate to add.
pub use ipnet::IpNet;
pub use rejection::{Rejection, RejectionKind};

/// The default cap on a header principal's length, in bytes, where the value may be kept
/// readable in a key.
pub const DEFAULT_MAX_HEADER_LEN: usize = 128;

/// The default cap on a *hashed* principal's length, in bytes: a bearer token, an API key,
/// a credential header, or any header with [`HeaderKey::personal`] / [`HeaderKey::keyed`].
///
/// A hash has the same length whatever it hashes, so the only reason for a cap is the time
/// hashing takes, which grows with the length: 8 KiB holds a signed JWT with claims to
/// spare, and is nginx's default buffer for one header line. Raise or lower it with
/// `max_len`.
pub const DEFAULT_MAX_HASHED_LEN: usize = 8 * 1024;

/// Names a principal from a request's head.
///
/// You implement it when no extractor here names your principal (a claim of a verified
/// token, a tenant from the host); `key_fn` does it with a closure.
pub trait KeyExtractor: Any + Send + Sync {
    /// The principal, or why there is none.
    fn extract(&self, parts: &Parts) -> Result<Principal, Rejection>;

    /// Whether `other` names the same principal as this extractor from every request: a
    /// layer whose rules share an extractor runs it once a request and gives each rule
    /// the principal. The default, `false`, runs each rule's own. This crate's
    /// extractors compare their settings (an extractor and its clone are the same); an
    /// `Arc` of an extractor is the same as a clone of that `Arc`.
    fn same_key_as(&self, other: &dyn KeyExtractor) -> bool {
        let _ = other;
        false
    }
}

/// `other` is a `T` equal to `me` (the [`KeyExtractor::same_key_as`] of a `T` whose
/// equality is its settings').
fn same<T: PartialEq + Any>(me: &T, other: &dyn KeyExtractor) -> bool {
    (other as &dyn Any).downcast_ref::<T>() == Some(me)
}

impl<K: KeyExtractor + ?Sized> KeyExtractor for Arc<K> {
    fn extract(&self, parts: &Parts) -> Result<Principal, Rejection> {
        (**self).extract(parts)
    }

    fn same_key_as(&self, other: &dyn KeyExtractor) -> bool {
        match (other as &dyn Any).downcast_ref::<Self>() {
            Some(o) => Arc::ptr_eq(self, o),
            None => (**self).same_key_as(other),
        }
    }
}

/// Combinators for extractors.
///
/// You need it to fall back from one key to another (`or_else`): the signed-in user when
/// there is one, else the client's IP.
pub trait KeyExtractorExt: KeyExtractor + Sized {
    /// Falls back to `other` when this extractor finds the principal missing or invalid
    /// (never for a setup error).
    fn or_else<O: KeyExtractor>(self, other: O) -> OrElse<Self, O> {
        OrElse {
            first: self,
            second: other,
        }
    }
}

impl<K: KeyExtractor> KeyExtractorExt for K {}

/// See [`KeyExtractorExt::or_else`].
///
/// You name it only in types; `or_else` builds it.
#[derive(Debug, Clone)]
pub struct OrElse<A, B> {
    first: A,
    second: B,
}

impl<A: KeyExtractor, B: KeyExtractor> KeyExtractor for OrElse<A, B> {
    fn extract(&self, parts: &Parts) -> Result<Principal, Rejection> {
        match self.first.extract(parts) {
            Err(r) if r.kind() != RejectionKind::Misconfigured => self.second.extract(parts),
            other => other,
        }
    }

    fn same_key_as(&self, other: &dyn KeyExtractor) -> bool {
        (other as &dyn Any)
            .downcast_ref::<Self>()
            .is_some_and(|o| self.first.same_key_as(&o.first) && self.second.same_key_as(&o.second))
    }
}

/// Everybody: one counter for all requests.
///
/// You need it for a limit on the whole service (what a database behind it can take), not
/// on each client.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Global;

impl KeyExtractor for Global {
    fn extract(&self, _: &Parts) -> Result<Principal, Rejection> {
        Ok(Principal::global())
    }

    fn same_key_as(&self, other: &dyn KeyExtractor) -> bool {
        same(self, other)
    }
}

/// Checks a header principal: non-empty, visible ASCII (`!` to `~`; spaces too where
/// `spaces`, as in `Authorization: Basic …`), at most `max` bytes.
fn visible_ascii(
    value: &HeaderValue,
    max: usize,
    name: &str,
    spaces: bool,
) -> Result<(), Rejection> {
    let bytes = value.as_bytes();
    if bytes.is_empty() {
        return Err(Rejection::invalid(
            "principal.empty",
            format!("the {name} header is empty"),
        ));
    }
    if bytes.len() > max {
        return Err(Rejection::invalid(
            "principal.too_long",
            format!("the {name} header is longer than {max} bytes"),
        ));
    }
    let low: u8 = if spaces { 0x20 } else { 0x21 };
    if !all_within(bytes, low) {
        return Err(Rejection::invalid(
            "principal.invalid",
            format!("the {name} header must be visible ASCII"),
        ));
    }
    Ok(())
}

/// Whether every byte is in `low..=0x7e` (`low` below `0x80`), eight bytes at a time: every
/// request's principal passes here, and a header value is a dozen bytes or so.
fn all_within(bytes: &[u8], low: u8) -> bool {
    const ONES: u64 = u64::from_le_bytes([0x01; 8]);
    const HIGH: u64 = ONES << 7;
    // Below 0x80, at least `low` (the high bit survives the subtraction), at most 0x7e
    // (adding one does not reach the high bit). No byte borrows from or carries into the
    // next: each is below 0x80 with the high bit set for the subtraction.
    let word = |x: u64| {
        x & HIGH == 0
            && ((x | HIGH) - ONES * u64::from(low)) & HIGH == HIGH
            && (x + ONES) & HIGH == 0
    };
    let mut chunks = bytes.chunks_exact(8);
    let whole = chunks.by_ref().fold(true, |ok, c| {
        ok & c.try_into().is_ok_and(|c| word(u64::from_le_bytes(c)))
    });
    // The tail, in a word of `~` (always within).
    let mut tail = [0x7e; 8];
    let rest = chunks.remainder();
    tail[..rest.len()].copy_from_slice(rest);
    whole && word(u64::from_le_bytes(tail))
}

/// How an extractor turns a value into a principal.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Hashing {
    /// Readable when short and safe ([`Principal::new`]).
    Plain,
    /// Always SHA-256 ([`Principal::personal`]).
    Sha256,
    /// Always HMAC-SHA-256 under the operator's key ([`Principal::keyed`]).
    Keyed(HashKey),
}

impl Hashing {
    fn principal(&self, kind: &PrincipalKind, value: &[u8]) -> Principal {
        match self {
            Self::Plain => Principal::new(kind.clone(), value),
            Self::Sha256 => Principal::personal(kind.clone(), value),
            Self::Keyed(key) => Principal::keyed(kind.clone(), key, value),
        }
    }

    /// At least SHA-256: credentials are never kept readable.
    fn at_least_hashed(self) -> Self {
        match self {
            Self::Plain => Self::Sha256,
            other => other,
        }
    }
}

/// Whether a header carries credentials (its value is always hashed).
fn is_credential(name: &HeaderName) -> bool {
    name == http::header::AUTHORIZATION
        || name == http::header::PROXY_AUTHORIZATION
        || name == http::header::COOKIE
}

/// A header's value as the principal, e.g. `x-participant-id`.
///
/// The value must be visible ASCII and at most 128 bytes, or
/// [`DEFAULT_MAX_HASHED_LEN`] (8 KiB) where it is hashed (see below), unless
/// [`max_len`](Self::max_len) says otherwise; anything else is a 400. A missing header is a 400, or a 401 with
/// [`unauthorized`](Self::unauthorized).
///
/// The value is kept readable in keys when it is short and safe, except: a principal of
/// kind [`PrincipalKind::ApiKey`] and the value of `Authorization`, `Proxy-Authorization`
/// or `Cookie` are always hashed; [`personal`](Self::personal) and
/// [`keyed`](Self::keyed) hash any header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderKey {
    name: HeaderName,
    kind: PrincipalKind,
    max: Option<usize>,
    hashing: Hashing,
    challenge: Option<HeaderValue>,
}

impl HeaderKey {
    /// The header `name`, counted as a principal of `kind`.
    pub fn new(name: HeaderName, kind: PrincipalKind) -> Self {
        let hashing = if is_credential(&name) {
            Hashing::Sha256
        } else {
            Hashing::Plain
        };
        Self {
            name,
            kind,
            max: None,
            hashing,
            challenge: None,
        }
    }

    /// The longest accepted value (default 128 bytes; 8 KiB when the value is hashed).
    #[must_use]
    pub fn max_len(mut self, max: usize) -> Self {
        self.max = Some(max);
        self
    }

    /// The longest value this extractor accepts.
    fn max(&self) -> usize {
        self.max.unwrap_or(
            if matches!(self.hashing, Hashing::Plain) && self.kind != PrincipalKind::ApiKey {
                DEFAULT_MAX_HEADER_LEN
            } else {
                DEFAULT_MAX_HASHED_LEN
            },
        )
    }

    /// Hash the value (SHA-256) even when it is short and plain (personal data, secrets).
    #[must_use]
    pub fn personal(mut self) -> Self {
        self.hashing = self.hashing.at_least_hashed();
        self
    }

    /// Hash the value with HMAC-SHA-256 under `key`: for guessable personal data (e-mail
    /// addresses) and secrets. See [`Principal::keyed`].
    #[must_use]
    pub fn keyed(mut self, key: HashKey) -> Self {
        self.hashing = Hashing::Keyed(key);
        self
    }

    /// Answer a missing header with 401 and this `WWW-Authenticate` challenge.
    #[must_use]
    pub fn unauthorized(mut self, challenge: HeaderValue) -> Self {
        self.challenge = Some(challenge);
        self
    }
}

impl KeyExtractor for HeaderKey {
    fn extract(&self, parts: &Parts) -> Result<Principal, Rejection> {
        let name = self.name.as_str();
        let Some(value) = parts.headers.get(&self.name) else {
            let r = Rejection::missing(
                "principal.missing",
                format!("the {name} header is required"),
            );
            return Err(match &self.challenge {
                Some(c) => r.unauthorized(c.clone()),
                None => r,
            });
        };
        visible_ascii(value, self.max(), name, is_credential(&self.name))?;
        Ok(self.hashing.principal(&self.kind, value.as_bytes()))
    }

    fn same_key_as(&self, other: &dyn KeyExtractor) -> bool {
        same(self, other)
    }
}

/// A request extension (set by an auth layer) turned into a principal by a function.
///
/// A missing extension is a 401: nobody is signed in.
pub struct ExtensionKey<T, F> {
    to_principal: F,
    _t: PhantomData<fn() -> T>,
}

impl<T, F> fmt::Debug for ExtensionKey<T, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExtensionKey")
            .field("type", &std::any::type_name::<T>())
            .finish()
    }
}

impl<T, F: Clone> Clone for ExtensionKey<T, F> {
    fn clone(&self) -> Self {
        Self {
            to_principal: self.to_principal.clone(),
            _t: PhantomData,
        }
    }
}

impl<T, F> ExtensionKey<T, F>
where
    T: Send + Sync + 'static,
    F: Fn(&T) -> Principal + Send + Sync + 'static,
{
    /// Reads a `T` from the request's extensions and names it with `to_principal`.
    pub fn new(to_principal: F) -> Self {
        Self {
            to_principal,
            _t: PhantomData,
        }
    }
}

impl<T, F> KeyExtractor for ExtensionKey<T, F>
where
    T: Send + Sync + 'static,
    F: Fn(&T) -> Principal + Send + Sync + 'static,
{
    fn extract(&self, parts: &Parts) -> Result<Principal, Rejection> {
        parts
            .extensions
            .get::<T>()
            .map(&self.to_principal)
            .ok_or_else(|| {
                Rejection::missing("principal.unauthenticated", "sign in to use this route")
                    .unauthorized(HeaderValue::from_static("Bearer"))
            })
    }
}

/// An extractor from a closure.
pub fn key_fn<F>(f: F) -> FnKey<F>
where
    F: Fn(&Parts) -> Result<Principal, Rejection> + Send + Sync + 'static,
{
    FnKey(f)
}

/// See [`key_fn`].
///
/// You name it only in types; `key_fn` builds it.
#[derive(Clone)]
pub struct FnKey<F>(F);

impl<F> fmt::Debug for FnKey<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("FnKey")
    }
}

impl<F> KeyExtractor for FnKey<F>
where
    F: Fn(&Parts) -> Result<Principal, Rejection> + Send + Sync + 'static,
{
    fn extract(&self, parts: &Parts) -> Result<Principal, Rejection> {
        (self.0)(parts)
    }
}

#[cfg(test)]
mod tests {
    /// Eight at a time says what one at a time says: every byte, at every place in values
    /// of every length up to three words.
    #[test]
    fn words_and_bytes_agree() {
        for low in [0x20, 0x21] {
            for len in 1..=24 {
                for at in 0..len {
                    for b in 0..=255u8 {
                        let mut v = vec![b'k'; len];
                        v[at] = b;
                        let one_by_one = v.iter().all(|&x| (low..=0x7e).contains(&x));
                        assert_eq!(super::all_within(&v, low), one_by_one, "{v:?} low {low}");
                    }
                }
            }
        }
    }
}
