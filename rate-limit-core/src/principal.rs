//! Principals: who a limit counts (a participant, a user, an API key, an IP, a job, everybody).
//!
//! A principal renders to a canonical text `kind:value` that is safe inside any store key:
//!
//! - A value of 1 to 64 bytes of `A-Z a-z 0-9 . _ -` is kept as it is, so an operator can
//!   read it in Redis.
//! - Anything else (a `:`, `{`, `}`, NUL, CR LF, non-UTF-8 bytes, an e-mail address, a
//!   long value) is replaced by `~` and 32 hex digits of its SHA-256. `~` never appears in
//!   a literal value, so a hashed value cannot alias a literal one.
//! - A principal of kind [`PrincipalKind::ApiKey`], through every constructor, and every
//!   value given to [`Principal::personal`] or [`Principal::keyed`] is always hashed: no
//!   secret or e-mail address is ever written into a key. The other kinds are readable by
//!   design (an operator can find `u:alice` in Redis): pass credentials and personal data
//!   through `personal` or `keyed`, never `new`.
//! - [`Principal::keyed`] hashes with HMAC-SHA-256 under a [`HashKey`] the operator
//!   configures. Use it for low-entropy values (e-mail addresses, phone numbers, user
//!   names): anyone who can read the store can hash a dictionary of addresses with plain
//!   SHA-256 and match them, but not without the key. Every instance that shares a store
//!   must use the same key, or their counters part.
//! - Composite principals join encoded parts with `:`; parts never hold `:`, so
//!   `("a:b", "c")` and `("a", "b:c")` differ.
//! - A rendering longer than [`Principal::MAX_LEN`] is hashed whole.
//!
//! SHA-256 is stable across processes and versions (every instance sharing a Redis derives
//! the same key) and a client cannot craft a collision.

use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;

use hmac::{KeyInit, Mac};
use sha2::{Digest, Sha256};

use crate::error::{ConfigError, ConfigErrorKind};
use crate::name::{all_name_bytes, is_name_byte};

mod text;
use text::Text;

/// The longest literal value part, in bytes; longer parts are hashed.
pub(crate) const MAX_LITERAL_LEN: usize = 64;
/// The longest rendering `kind:value`, in bytes; longer renderings are hashed whole.
pub(crate) const MAX_PRINCIPAL_LEN: usize = 96;
const MAX_CUSTOM_KIND_LEN: usize = 32;

/// The kind of a principal.
///
/// It says what a key counts (a player, a user, an API key, an IP, a job) in keys, logs and
/// headers: pick it where an extractor or a `Principal` constructor asks, or make your own
/// with `PrincipalKind::custom`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PrincipalKind {
    /// A participant (a player in a game, a visitor with a session).
    Participant,
    /// A signed-in user or account.
    User,
    /// An API key: always hashed, whichever constructor or extractor builds it.
    ApiKey,
    /// A client IP address or network.
    Ip,
    /// A background job.
    Job,
    /// Everybody: one counter for all callers.
    Global,
    /// A kind named by the application, e.g. `visitor-game`.
    Custom(Arc<str>),
}

impl PrincipalKind {
    /// Whether a ban ([`Limit::ban`](crate::Limit::ban)) may name a principal of this kind:
    /// only one the requester controls — a client IP or an API key. An account anyone can
    /// name (a user name on a sign-in form) would let anyone lock its owner out.
    pub fn may_be_banned(&self) -> bool {
        matches!(self, Self::Ip | Self::ApiKey)
    }

    /// A custom kind: 1 to 32 bytes of `A-Z a-z 0-9 . _ -`.
    pub fn custom(name: &str) -> Result<Self, ConfigError> {
        if name.is_empty() || name.len() > MAX_CUSTOM_KIND_LEN || !name.bytes().all(is_name_byte) {
            return Err(ConfigError::new(
                ConfigErrorKind::NameInvalid,
                "principal_kind",
                "a custom principal kind is 1 to 32 bytes of A-Z a-z 0-9 . _ -",
            ));
        }
        Ok(Self::Custom(name.into()))
    }

    /// Whether values of this kind are secrets, hashed whatever the constructor.
    pub(crate) fn is_secret(&self) -> bool {
        matches!(self, Self::ApiKey)
    }

    fn tag(&self) -> &str {
        match self {
            Self::Participant => "p",
            Self::User => "u",
            Self::ApiKey => "k",
            Self::Ip => "ip",
            Self::Job => "job",
            Self::Global => "all",
            Self::Custom(name) => name,
        }
    }

    fn write_prefix(&self, out: &mut String) {
        if let Self::Custom(_) = self {
            // Built-in tags hold no '.', custom ones are prefixed "x.": they cannot meet.
            out.push_str("x.");
        }
        out.push_str(self.tag());
        out.push(':');
    }
}

/// Who a limit counts, rendered once into a canonical, bounded, injection-safe text.
///
/// ```
/// use ratekeeper_core::{Principal, PrincipalKind};
///
/// assert_eq!(Principal::participant("p-42").as_str(), "p:p-42");
/// // Unsafe bytes are hashed: no ':' or '{' ever reaches a store key.
/// let odd = Principal::user("a:b{c}");
/// assert!(odd.as_str().starts_with("u:~"));
/// // Personal data is always hashed.
/// let mail = Principal::personal(PrincipalKind::User, "Ann@Example.com");
/// assert!(!mail.as_str().contains("Example"));
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Principal {
    kind: PrincipalKind,
    text: Text,
}

impl fmt::Debug for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The rendering holds no raw client input beyond safe literals; still, keep it
        // out of Debug output so it cannot slip into logs.
        f.debug_struct("Principal")
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

fn hex32(digest: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(32);
    for &b in &digest[..16] {
        s.push(HEX[usize::from(b >> 4)] as char);
        s.push(HEX[usize::from(b & 0xf)] as char);
    }
    s
}

fn hashed(domain: &[u8], bytes: &[u8]) -> String {
    let mut h = Sha256::new();
    h.update(domain);
    h.update(bytes);
    let mut s = String::with_capacity(33);
    s.push('~');
    s.push_str(&hex32(&h.finalize()));
    s
}

/// The shortest [`HashKey`], in bytes (128 bits).
pub(crate) const MIN_HASH_KEY_LEN: usize = 16;

/// A secret key for [`Principal::keyed`]: HMAC-SHA-256, configured by the operator and the
/// same on every instance that shares a store.
///
/// Cheap to clone. Its `Debug` output never shows the key.
///
/// ```
/// use ratekeeper_core::{HashKey, Principal, PrincipalKind};
///
/// // In production, read it from a secret store or the environment.
/// let key = HashKey::new(b"0123456789abcdef0123456789abcdef")?;
/// let mail = Principal::keyed(PrincipalKind::User, &key, "ann@example.com");
/// assert!(mail.as_str().starts_with("u:~"));
/// assert_ne!(mail, Principal::personal(PrincipalKind::User, "ann@example.com"));
/// // Equal when made from the same bytes.
/// assert_eq!(key, HashKey::new(b"0123456789abcdef0123456789abcdef")?);
/// assert_ne!(key, HashKey::new(b"0123456789abcdef0123456789abcdeF")?);
/// # Ok::<(), ratekeeper_core::ConfigError>(())
/// ```
///
/// Two keys are equal when they were made from the same bytes (compared by a digest of
/// the key under a label of its own, never the key itself).
#[derive(Clone)]
pub struct HashKey {
    mac: Arc<hmac::Hmac<Sha256>>,
    id: [u8; 32],
}

impl PartialEq for HashKey {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
    }
}

impl Eq for HashKey {}

impl fmt::Debug for HashKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("HashKey(..)")
    }
}

impl HashKey {
    /// The shortest key, in bytes.
    pub const MIN_LEN: usize = MIN_HASH_KEY_LEN;

    /// A key of at least 16 bytes; `principal.hash_key_invalid` for a shorter one.
    pub fn new(key: impl AsRef<[u8]>) -> Result<Self, ConfigError> {
        let key = key.as_ref();
        if key.len() < MIN_HASH_KEY_LEN {
            return Err(ConfigError::new(
                ConfigErrorKind::HashKeyInvalid,
                "hash_key",
                "a hash key is at least 16 bytes; use 32 random bytes",
            ));
        }
        let mac = hmac::Hmac::<Sha256>::new_from_slice(key).map_err(|_| {
            ConfigError::new(
                ConfigErrorKind::HashKeyInvalid,
                "hash_key",
                "the hash key is not usable",
            )
        })?;
        // The label differs from `hashed`'s, so no principal's hash is this digest.
        let id = mac
            .clone()
            .chain_update(b"rate-limit/identity\0")
            .finalize()
            .into_bytes()
            .into();
        Ok(Self {
            mac: Arc::new(mac),
            id,
        })
    }

    fn hashed(&self, bytes: &[u8]) -> String {
        let mut mac = (*self.mac).clone();
        mac.update(b"rate-limit/keyed\0");
        mac.update(bytes);
        let mut s = String::with_capacity(33);
        s.push('~');
        s.push_str(&hex32(&mac.finalize().into_bytes()));
        s
    }
}

/// Whether a value is kept as it is when it can be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hashing {
    /// Kept literal when short and safe, hashed otherwise.
    WhenNeeded,
    /// Always hashed (a secret).
    Always,
}

impl Hashing {
    fn of(kind: &PrincipalKind) -> Self {
        if kind.is_secret() {
            Self::Always
        } else {
            Self::WhenNeeded
        }
    }
}

fn push_part(out: &mut String, bytes: &[u8], hashing: Hashing) {
    let literal = hashing == Hashing::WhenNeeded
        && !bytes.is_empty()
        && bytes.len() <= MAX_LITERAL_LEN
        && all_name_bytes(bytes);
    match std::str::from_utf8(bytes) {
        Ok(s) if literal => out.push_str(s),
        _ => out.push_str(&hashed(b"rate-limit/part\0", bytes)),
    }
}

impl Principal {
    /// The longest literal value a principal keeps as it is (longer ones are hashed).
    pub const MAX_LITERAL_LEN: usize = MAX_LITERAL_LEN;
    /// The longest rendering of a principal, in bytes.
    pub const MAX_LEN: usize = MAX_PRINCIPAL_LEN;

    fn finish(kind: PrincipalKind, mut text: String) -> Self {
        if text.len() > MAX_PRINCIPAL_LEN {
            let mut short = String::with_capacity(48);
            kind.write_prefix(&mut short);
            short.push_str(&hashed(b"rate-limit/whole\0", text.as_bytes()));
            text = short;
        }
        Self {
            kind,
            text: Text::new(&text),
        }
    }

    fn one(kind: PrincipalKind, value: &[u8], hashing: Hashing) -> Self {
        let hashing = match Hashing::of(&kind) {
            Hashing::Always => Hashing::Always,
            Hashing::WhenNeeded => hashing,
        };
        // The common case, a short safe value under a built-in kind, never allocates.
        if hashing == Hashing::WhenNeeded
            && let Some(text) = Text::literal(&kind, value)
        {
            return Self { kind, text };
        }
        let mut text = String::with_capacity(8 + value.len().min(MAX_LITERAL_LEN));
        kind.write_prefix(&mut text);
        push_part(&mut text, value, hashing);
        Self::finish(kind, text)
    }

    /// A participant, e.g. the `x-participant-id` of a quiz player.
    pub fn participant(id: impl AsRef<[u8]>) -> Self {
        Self::one(PrincipalKind::Participant, id.as_ref(), Hashing::WhenNeeded)
    }

    /// A signed-in user by id. For an e-mail address use [`personal`](Self::personal).
    pub fn user(id: impl AsRef<[u8]>) -> Self {
        Self::one(PrincipalKind::User, id.as_ref(), Hashing::WhenNeeded)
    }

    /// An API key; always hashed, since it is a secret.
    pub fn api_key(key: impl AsRef<[u8]>) -> Self {
        Self::one(PrincipalKind::ApiKey, key.as_ref(), Hashing::Always)
    }

    /// A background job by name.
    pub fn job(name: impl AsRef<[u8]>) -> Self {
        Self::one(PrincipalKind::Job, name.as_ref(), Hashing::WhenNeeded)
    }

    /// Everybody: one shared counter.
    pub fn global() -> Self {
        Self::finish(PrincipalKind::Global, "all:*".to_owned())
    }

    /// A principal of any kind whose value is personal data or a secret (an e-mail
    /// address, a phone number, a token): always hashed, with SHA-256. For low-entropy
    /// values prefer [`keyed`](Self::keyed): a plain hash of an e-mail address can be
    /// matched against a dictionary of addresses.
    pub fn personal(kind: PrincipalKind, value: impl AsRef<[u8]>) -> Self {
        Self::one(kind, value.as_ref(), Hashing::Always)
    }

    /// A principal of any kind whose value is hashed with HMAC-SHA-256 under `key`: what
    /// to use for e-mail addresses and other guessable personal data (see [`HashKey`]).
    pub fn keyed(kind: PrincipalKind, key: &HashKey, value: impl AsRef<[u8]>) -> Self {
        let mut text = String::with_capacity(48);
        kind.write_prefix(&mut text);
        text.push_str(&key.hashed(value.as_ref()));
        Self::finish(kind, text)
    }

    /// A principal of any kind with a plain value: kept readable when it is short and
    /// safe, hashed otherwise. [`PrincipalKind::ApiKey`] is always hashed.
    pub fn new(kind: PrincipalKind, value: impl AsRef<[u8]>) -> Self {
        Self::one(kind, value.as_ref(), Hashing::WhenNeeded)
    }

    /// A principal made of several parts, e.g. `(visitor, game)`. Each part is kept or
    /// hashed as [`new`](Self::new) would; under [`PrincipalKind::ApiKey`] every part is
    /// hashed.
    pub fn composite<I>(kind: PrincipalKind, parts: I) -> Self
    where
        I: IntoIterator,
        I::Item: AsRef<[u8]>,
    {
        let hashing = Hashing::of(&kind);
        let mut text = String::with_capacity(64);
        kind.write_prefix(&mut text);
        let mut first = true;
        for part in parts {
            if !first {
                text.push(':');
            }
            first = false;
            push_part(&mut text, part.as_ref(), hashing);
        }
        Self::finish(kind, text)
    }

    /// A client IP with the usual grouping: an IPv4 address by itself, an IPv6 address by
    /// its /64 (one household or device usually owns a whole /64). IPv4-mapped IPv6
    /// (`::ffff:1.2.3.4`) counts as the IPv4 address.
    pub fn ip(addr: IpAddr) -> Self {
        Self::ip_with_prefix(addr, 32, 64)
    }

    /// A client IP grouped by the given prefix lengths (clamped to 32 and 128).
    pub fn ip_with_prefix(addr: IpAddr, v4_prefix: u8, v6_prefix: u8) -> Self {
        let addr = match addr {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(addr, IpAddr::V4),
            v4 => v4,
        };
        let (masked, len, full) = match addr {
            IpAddr::V4(v4) => {
                let len = v4_prefix.min(32);
                let mask = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
                (IpAddr::V4((u32::from(v4) & mask).into()), len, 32)
            }
            IpAddr::V6(v6) => {
                let len = v6_prefix.min(128);
                let mask = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
                (IpAddr::V6((u128::from(v6) & mask).into()), len, 128)
            }
        };
        // ':' becomes '-' and '/' becomes '_': the value stays in the literal alphabet.
        let mut value = masked.to_string().replace(':', "-");
        if len < full {
            value.push('_');
            value.push_str(&len.to_string());
        }
        Self::one(PrincipalKind::Ip, value.as_bytes(), Hashing::WhenNeeded)
    }

    /// The kind.
    pub fn kind(&self) -> &PrincipalKind {
        &self.kind
    }

    /// The canonical rendering `kind:value`, at most [`Principal::MAX_LEN`] bytes of
    /// `A-Z a-z 0-9 . _ - : ~ *`.
    pub fn as_str(&self) -> &str {
        self.text.as_str()
    }

    /// The rendering's length and its bytes padded with zeros to whole 8-byte words, for a
    /// hash that reads words, not bytes (the length tells `a` from `a\0`).
    #[inline]
    pub(crate) fn as_words(&self) -> (u8, &[u8]) {
        (self.text.len, self.text.padded())
    }

    /// The principal whose rendering ([`as_str`](Self::as_str)) is `text` — as a store
    /// wrote it in a key name, or an admin copied it from a list of bans or heavy
    /// hitters — or `None` if `text` is not one. A secret kind's rendering is its hash:
    /// the principal it names is that hash, never re-hashed.
    pub fn from_rendered(text: &str) -> Option<Self> {
        let (tag, value) = text.split_once(':')?;
        let kind = match tag {
            "p" => PrincipalKind::Participant,
            "u" => PrincipalKind::User,
            "k" => PrincipalKind::ApiKey,
            "ip" => PrincipalKind::Ip,
            "job" => PrincipalKind::Job,
            "all" => PrincipalKind::Global,
            custom => PrincipalKind::custom(custom.strip_prefix("x.")?).ok()?,
        };
        let safe = |b: u8| is_name_byte(b) || matches!(b, b':' | b'~' | b'*');
        if value.is_empty() || text.len() > MAX_PRINCIPAL_LEN || !value.bytes().all(safe) {
            return None;
        }
        Some(Self {
            kind,
            text: Text::new(text),
        })
    }

    /// The value part of the rendering (after `kind:`): usable as one part of a
    /// [`composite`](Self::composite) principal.
    pub fn value(&self) -> &str {
        self.as_str().split_once(':').map_or("", |(_, v)| v)
    }
}

#[cfg(test)]
mod tests;
