//! Failure domains: the parts of a store that fail apart (the nodes of a Redis Cluster).

/// A set of failure domains, numbered 0 to 63: domain 0 is the whole store (a store with
/// one domain, or a part the store cannot name yet); a Redis Cluster node is a domain from
/// 1 to 63, its own as long as the Cluster has at most 63 masters at once (numbers are
/// handed out per node address, in the order a process first sees them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Domains(u64);

impl Domains {
    /// The whole store.
    pub const WHOLE: Self = Self(1);
    /// No domain.
    pub const NONE: Self = Self(0);
    /// The number of domains.
    pub const COUNT: u32 = 64;

    /// One domain (taken modulo [`COUNT`](Self::COUNT)).
    pub const fn of(domain: u32) -> Self {
        Self(1 << (domain % Self::COUNT))
    }

    /// This set and `domain`.
    #[must_use]
    pub const fn with(self, domain: u32) -> Self {
        Self(self.0 | Self::of(domain).0)
    }

    /// Whether the set is empty.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The domains, ascending.
    pub fn iter(self) -> impl Iterator<Item = u32> {
        // Set bits only, lowest first: a test of all 64 cost ~300 instructions a call, three
        // calls per request that goes to the store.
        let mut bits = self.0;
        std::iter::from_fn(move || {
            if bits == 0 {
                return None;
            }
            let d = bits.trailing_zeros();
            bits &= bits - 1;
            Some(d)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_of_domains() {
        let d = Domains::NONE.with(3).with(63).with(3);
        assert_eq!(d.iter().collect::<Vec<_>>(), [3, 63]);
        assert_eq!(Domains::of(64), Domains::WHOLE);
        assert!(Domains::NONE.is_empty());
    }
}
