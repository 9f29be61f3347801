//! `Bearer`: the caller named by its bearer token, hashed.

use http::HeaderValue;
use http::request::Parts;
use ratekeeper_core::{HashKey, Principal, PrincipalKind};

use super::{DEFAULT_MAX_HASHED_LEN, Hashing, KeyExtractor, Rejection, visible_ascii};

/// `Authorization: Bearer <token>` as a [`User`](PrincipalKind::User) principal (or the
/// [`kind`](Bearer::kind) given), the token hashed (SHA-256, or HMAC under your key with [`keyed`](Self::keyed)): a bearer
/// token is a credential and never reaches a store key.
///
/// This names the caller; it does not authenticate anyone. Put it behind your auth layer,
/// or use [`ExtensionKey`](super::ExtensionKey) with the identity that layer sets. A missing or malformed
/// header is a 401 with `WWW-Authenticate: Bearer`. Tokens of any length up to
/// [`DEFAULT_MAX_HASHED_LEN`] (8 KiB; [`max_len`](Self::max_len)) are accepted: a signed
/// JWT is often 500 bytes to a few KiB, and its hash is 32 bytes whatever its length.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bearer {
    max: usize,
    hashing: Hashing,
    kind: PrincipalKind,
}

impl Default for Bearer {
    fn default() -> Self {
        Self {
            max: DEFAULT_MAX_HASHED_LEN,
            hashing: Hashing::Sha256,
            kind: PrincipalKind::User,
        }
    }
}

impl Bearer {
    /// The extractor, with tokens of at most [`DEFAULT_MAX_HASHED_LEN`] (8 KiB).
    pub fn new() -> Self {
        Self::default()
    }

    /// The longest accepted token, in bytes (default 8 KiB); a longer one is a 401
    /// `principal.too_long`.
    #[must_use]
    pub fn max_len(mut self, max: usize) -> Self {
        self.max = max;
        self
    }

    /// Hash tokens with HMAC-SHA-256 under `key` instead of plain SHA-256.
    #[must_use]
    pub fn keyed(mut self, key: HashKey) -> Self {
        self.hashing = Hashing::Keyed(key);
        self
    }

    /// What the token names (default [`PrincipalKind::User`]): an API key, a service, a
    /// kind of your own. Keys, metrics and the admin page show it.
    ///
    /// ```
    /// use ratekeeper_tower::core::PrincipalKind;
    /// use ratekeeper_tower::extract::Bearer;
    ///
    /// let api_keys = Bearer::new().kind(PrincipalKind::ApiKey);
    /// # let _ = api_keys;
    /// ```
    #[must_use]
    pub fn kind(mut self, kind: PrincipalKind) -> Self {
        self.kind = kind;
        self
    }
}

impl KeyExtractor for Bearer {
    fn extract(&self, parts: &Parts) -> Result<Principal, Rejection> {
        let challenge = HeaderValue::from_static("Bearer");
        let Some(value) = parts.headers.get(http::header::AUTHORIZATION) else {
            return Err(
                Rejection::missing("principal.missing", "a bearer token is required")
                    .unauthorized(challenge),
            );
        };
        let bytes = value.as_bytes();
        let token = bytes
            .get(..7)
            .filter(|p| p.eq_ignore_ascii_case(b"bearer "))
            .map(|_| &bytes[7..]);
        match token {
            Some(t) if !t.is_empty() => {
                let t = HeaderValue::from_bytes(t).map_err(|_| {
                    Rejection::invalid("principal.invalid", "malformed bearer token")
                        .unauthorized(challenge.clone())
                })?;
                visible_ascii(&t, self.max, "bearer token", false)
                    .map_err(|r| r.unauthorized(challenge.clone()))?;
                Ok(self.hashing.principal(&self.kind, t.as_bytes()))
            }
            _ => Err(Rejection::invalid(
                "principal.invalid",
                "expected Authorization: Bearer <token>",
            )
            .unauthorized(challenge)),
        }
    }

    fn same_key_as(&self, other: &dyn KeyExtractor) -> bool {
        super::same(self, other)
    }
}
