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

/// A limit's part of its keys' digests (see [`crate::Key`]): the PRF of its name.
pub(crate) fn limit_seed(limit_name: &str) -> [u64; 2] {
    local_digest(b"limit", limit_name.as_bytes())
}

/// The hasher of principals' parts of their keys' digests (see [`crate::Key`]), before any
/// principal is written: the same in every limit of the process, each keeping a copy so
/// that a key's digest starts from its limit's (and hashes only the principal's words).
pub(crate) fn principal_hasher() -> SipHasher13 {
    static HASHER: OnceLock<SipHasher13> = OnceLock::new();
    *HASHER.get_or_init(|| {
        let (k0, k1) = sip_keys();
        let mut h = SipHasher13::new_with_keys(k0, k1);
        // Apart from `local_digest`'s domains (which end in 0xff), and a whole word.
        h.write(b"principal\0\0\0\0\0\0\0");
        h
    })
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
