//! Process-local digests: one keyed PRF (SipHash-1-3, 128 bits, under a key drawn from the
//! OS once per process) for the memory store's keys and de-duplication ids.

use std::hash::{BuildHasher, Hasher};
use std::sync::OnceLock;

use siphasher::sip128::{Hasher128, SipHasher13};

fn sip_keys() -> (u64, u64) {
    static KEYS: OnceLock<(u64, u64)> = OnceLock::new();
    *KEYS.get_or_init(|| {
        // std's RandomState is seeded from the OS; hashing two constants with it yields two
        // unpredictable words without another dependency.
        let state = std::collections::hash_map::RandomState::new();
        let mut a = state.build_hasher();
        a.write_u64(0x5241_5445_4c49_4d31);
        let mut b = state.build_hasher();
        b.write_u64(0x5241_5445_4c49_4d32);
        (a.finish(), b.finish())
    })
}

/// The keyed hasher of `limit_name`'s keys with the name and its separator already
/// written: each limit keeps one, and a key's digest then hashes only its principal.
/// The name (which holds no `/` and no zero byte) is followed by `/` and zeros up to a
/// whole word, so that the principal's words are hashed as words.
pub(crate) fn key_hasher(limit_name: &str) -> SipHasher13 {
    let (k0, k1) = sip_keys();
    let mut h = SipHasher13::new_with_keys(k0, k1);
    h.write(limit_name.as_bytes());
    h.write_u8(b'/');
    let pad = (8 - (limit_name.len() + 1) % 8) % 8;
    h.write(&[0; 8][..pad]);
    h
}

/// A process-local 128-bit identity of `bytes` under `domain` (same keyed PRF as keys).
pub(crate) fn local_digest(domain: &[u8], bytes: &[u8]) -> [u64; 2] {
    let (k0, k1) = sip_keys();
    let mut h = SipHasher13::new_with_keys(k0, k1);
    h.write(domain);
    h.write_u8(0xff);
    h.write(bytes);
    let d = h.finish128();
    [d.h1, d.h2]
}
