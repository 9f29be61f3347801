//! Keys: a principal namespaced by a limit.

use std::fmt;
use std::hash::Hasher;

use siphasher::sip128::Hasher128;

use crate::limit::{Limit, Params};
use crate::principal::Principal;

/// A principal under one limit: what a store counts.
///
/// Its text form is `<principal>/<limit name>`; the limit name holds no `/` and the principal
/// no `/` either, so two keys are equal exactly when limit and principal are. The in-memory
/// store identifies a key by a 128-bit digest: the principal's 128-bit SipHash-1-3 under a
/// random per-process key, XORed with the same PRF of the limit's name (each limit hashes
/// its part once, and a principal checked under several limits is hashed once:
/// [`Limit::key_of`]). A client who does not know the key cannot aim a collision, and an
/// accidental one among `n` keys has odds of about `n²/2¹¹³` (the digest's low 16 bits
/// are the limit's class, so the memory store can tell a key's limit without storing it).
/// The Redis store writes the text itself, which is stable across processes.
#[derive(Clone)]
pub struct Key {
    limit: Limit,
    principal: Principal,
    digest: [u64; 2],
    /// An admin override for this principal, fixed when the key is built.
    custom: Option<Params>,
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Key")
            .field("limit", &self.limit.name())
            .field("principal", &self.principal)
            .finish_non_exhaustive()
    }
}

impl PartialEq for Key {
    fn eq(&self, other: &Self) -> bool {
        self.limit.name() == other.limit.name() && self.principal == other.principal
    }
}

impl Eq for Key {}

impl Key {
    /// The key of `principal` under `limit` (also [`Limit::key`]).
    #[inline]
    pub fn new(limit: Limit, principal: Principal) -> Self {
        // Whole words, then the length: SipHash's byte-wise tail handling is skipped.
        let mut h = limit.principal_hasher();
        let (len, words) = principal.as_words();
        h.write(words);
        h.write_u8(len);
        let d = h.finish128();
        Self::with_principal_digest(limit, principal, [d.h1, d.h2])
    }

    /// The key of `principal` (whose digest is `of_principal`) under `limit`.
    #[inline(always)]
    fn with_principal_digest(limit: Limit, principal: Principal, of_principal: [u64; 2]) -> Self {
        let seed = limit.key_seed();
        let custom = limit.override_for(&principal);
        let class = u64::from(limit.class());
        Self {
            digest: [
                of_principal[0] ^ seed[0],
                ((of_principal[1] ^ seed[1]) & !0xffff) | class,
            ],
            limit,
            principal,
            custom,
        }
    }
    /// The parameters this key is checked with: its override, or the limit's.
    pub(crate) fn params(&self) -> Params {
        self.custom.unwrap_or_else(|| self.limit.params())
    }

    /// The parameters a check at `now` (µs since the epoch) runs on: a calendar quota's
    /// period holding `now`, the others as [`params`](Self::params).
    pub(crate) fn params_at(&self, now: u64) -> Params {
        self.limit.resolve(self.params(), now)
    }

    /// The calendar a calendar quota's key counts periods by.
    #[cfg(feature = "calendar")]
    pub(crate) fn calendar(&self) -> Option<crate::limit::calendar::Calendar> {
        self.limit.calendar_for(self.params())
    }

    /// This key of a calendar quota counted from its own anchor (a customer's billing day)
    /// instead of the limit's calendar's: its periods are the calendar's, anchored there.
    /// Its override, if any, stays. A key of any other limit is returned as it is.
    ///
    /// A principal whose anchor changes mid-period counts in the period the new anchor
    /// gives, from that period's count: a period starting on another date is another
    /// counter, from nothing (the units used under the old anchor are not carried over).
    ///
    /// ```
    /// use ratekeeper_core::calendar::{Anchor, Calendar, Period};
    /// use ratekeeper_core::{Chain, Check, Limit, Principal};
    ///
    /// let plan = Limit::calendar("plan", 10_000, Calendar::new(Period::Month, "UTC")?)?;
    /// // This customer pays on the 31st: Feb 28 (29), Mar 31, Apr 30, ...
    /// let key = plan.key(Principal::api_key("k-123")).anchored(Anchor::day(31)?);
    /// let mut chain = Chain::new();
    /// chain.push(Check::new(key, 1));
    /// # Ok::<(), ratekeeper_core::ConfigError>(())
    /// ```
    #[cfg(feature = "calendar")]
    #[cfg_attr(docsrs, doc(cfg(feature = "calendar")))]
    #[must_use]
    pub fn anchored(mut self, anchor: crate::calendar::Anchor) -> Self {
        if let Params::Calendar { quota, length, .. } = self.params() {
            self.custom = Some(Params::Calendar {
                quota,
                length,
                anchor: anchor.code(),
            });
        }
        self
    }

    /// The limit.
    pub fn limit(&self) -> &Limit {
        &self.limit
    }

    /// The principal.
    pub fn principal(&self) -> &Principal {
        &self.principal
    }

    /// The in-process identity of the key (see the type docs).
    pub(crate) fn digest(&self) -> [u64; 2] {
        self.digest
    }

    /// The principal's part of the digest, the same under every limit (less the low bits
    /// of its second word, which the class replaced).
    #[inline]
    pub(crate) fn principal_digest(&self) -> [u64; 2] {
        let seed = self.limit.key_seed();
        [self.digest[0] ^ seed[0], self.digest[1] ^ seed[1]]
    }
}

impl Limit {
    /// The key of `principal` under this limit.
    #[inline]
    pub fn key(&self, principal: Principal) -> Key {
        Key::new(self.clone(), principal)
    }

    /// The key of `key`'s principal under this limit: `self.key(key.principal().clone())`,
    /// without hashing the principal again (a chain of several limits on one principal).
    #[inline]
    pub fn key_of(&self, key: &Key) -> Key {
        // Less the bits `key`'s class replaced, which this key's class replaces too.
        Key::with_principal_digest(self.clone(), key.principal.clone(), key.principal_digest())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn limit_namespaces_keys() {
        let a = Limit::fixed_window("a", 1, Duration::from_secs(1)).unwrap();
        let b = Limit::fixed_window("b", 1, Duration::from_secs(1)).unwrap();
        let ka = a.key(Principal::user("x"));
        let kb = b.key(Principal::user("x"));
        assert_ne!(ka, kb);
        assert_ne!(ka.digest(), kb.digest());
        assert_eq!(ka.digest(), a.key(Principal::user("x")).digest());
        // The same key, the principal hashed once.
        let kb2 = b.key_of(&ka);
        assert_eq!(kb2, kb);
        assert_eq!(kb2.digest(), kb.digest());
        assert_eq!(a.key_of(&kb).digest(), ka.digest());
        assert_ne!(
            a.key(Principal::user("y")).digest(),
            ka.digest(),
            "another principal, another digest"
        );
    }
}
