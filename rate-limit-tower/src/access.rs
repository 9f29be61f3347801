//! Allow and deny lists: CIDRs (IPv4 and IPv6) and principals, checked before any limit.

use std::collections::HashSet;
use std::fmt;
use std::net::IpAddr;
use std::sync::{Arc, PoisonError, RwLock};

use http::request::Parts;
use ratekeeper_core::net::IpBlock;
use ratekeeper_core::{ConfigError, ConfigErrorKind, Principal};

use crate::extract::{ClientIp, KeyExtractor, Rejection};

/// One list: address ranges and principals. Lookups are a binary search over sorted,
/// merged ranges (at most 32 steps for IPv4, 128 for IPv6: about log₂ of the list) and a
/// hash lookup for principals.
#[derive(Debug, Clone, Default)]
pub struct List {
    v4: Vec<(u32, u32)>,
    v6: Vec<(u128, u128)>,
    /// The address entries as given, for an admin reading the list back.
    given: Vec<Box<str>>,
    principals: HashSet<String>,
}

impl List {
    /// A list of CIDRs (`10.0.0.0/8`, `2001:db8::/32`) and single addresses (`192.0.2.7`,
    /// `::1`). `access.entry_invalid`, naming the entry's position, for anything else.
    pub fn parse<S: AsRef<str>>(entries: &[S]) -> Result<Self, ConfigError> {
        let mut v4 = Vec::new();
        let mut v6 = Vec::new();
        for (i, e) in entries.iter().enumerate() {
            let block = e.as_ref().parse::<IpBlock>().map_err(|e| {
                ConfigError::new(
                    ConfigErrorKind::AccessEntryInvalid,
                    format!("access[{i}]"),
                    e.to_string(),
                )
            })?;
            match block {
                IpBlock::V4 { first, last } => v4.push((first, last)),
                IpBlock::V6 { first, last } => v6.push((first, last)),
            }
        }
        Ok(Self {
            v4: merge(v4),
            v6: merge(v6),
            given: entries.iter().map(|e| e.as_ref().trim().into()).collect(),
            principals: HashSet::new(),
        })
    }

    /// Adds principals (as rendered: [`Principal::as_str`]); a principal of a secret kind
    /// is compared hashed, as it is keyed.
    #[must_use]
    pub fn with_principals(mut self, principals: impl IntoIterator<Item = Principal>) -> Self {
        self.principals
            .extend(principals.into_iter().map(|p| p.as_str().to_owned()));
        self
    }

    /// How many address ranges (after merging) and principals the list holds.
    pub fn len(&self) -> usize {
        self.v4.len() + self.v6.len() + self.principals.len()
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether `ip` falls in one of the list's ranges (an IPv4-mapped IPv6 address is
    /// matched as IPv4).
    pub fn contains_ip(&self, ip: IpAddr) -> bool {
        match ip {
            IpAddr::V4(a) => within(&self.v4, u32::from(a)),
            IpAddr::V6(a) => match a.to_ipv4_mapped() {
                Some(v4) => within(&self.v4, u32::from(v4)),
                None => within(&self.v6, u128::from(a)),
            },
        }
    }

    /// The address entries, as given to [`parse`](Self::parse).
    pub fn addresses(&self) -> impl Iterator<Item = &str> {
        self.given.iter().map(|e| &**e)
    }

    /// The principals' renderings ([`Principal::as_str`]: a secret kind's hash), sorted.
    pub fn principals(&self) -> Vec<&str> {
        let mut out: Vec<&str> = self.principals.iter().map(String::as_str).collect();
        out.sort_unstable();
        out
    }

    /// Whether `principal` is on the list.
    pub fn contains_principal(&self, principal: &Principal) -> bool {
        !self.principals.is_empty() && self.principals.contains(principal.as_str())
    }
}

/// Sorts and merges overlapping or adjacent ranges.
fn merge<T: Ord + Copy + num::Successor>(mut ranges: Vec<(T, T)>) -> Vec<(T, T)> {
    ranges.sort_unstable();
    let mut out: Vec<(T, T)> = Vec::with_capacity(ranges.len());
    for (lo, hi) in ranges {
        match out.last_mut() {
            Some(last) if lo <= last.1.next_or_max() => last.1 = last.1.max(hi),
            _ => out.push((lo, hi)),
        }
    }
    out
}

fn within<T: Ord + Copy>(ranges: &[(T, T)], x: T) -> bool {
    // The last range starting at or before x.
    let i = ranges.partition_point(|&(lo, _)| lo <= x);
    i > 0 && x <= ranges[i - 1].1
}

mod num {
    /// The next value, saturating (to merge adjacent ranges).
    pub(super) trait Successor {
        fn next_or_max(self) -> Self;
    }
    impl Successor for u32 {
        fn next_or_max(self) -> Self {
            self.saturating_add(1)
        }
    }
    impl Successor for u128 {
        fn next_or_max(self) -> Self {
            self.saturating_add(1)
        }
    }
}

/// The allow and deny lists of a layer, and how a request's client IP and principal are
/// found for them. Cheap to clone; every clone (and every layer given one) sees a
/// [`replace`](Self::replace) at its next request: one atomic swap of the lists.
///
/// - **Deny** answers 403 with `{"error": "Forbidden.", "code": "access.denied"}` before any
///   store call. It is checked first: an entry on both lists is denied.
/// - **Allow** skips every limit of the layer (health checkers, internal callers), with
///   no rate-limit headers.
/// - **IP entries** match the client IP as the [`ClientIp`] given here resolves it through
///   its trusted proxies: an allow list is only as strong as that proxy configuration (a
///   client that can name its own address can name an allowed one).
///
/// ```
/// use ratekeeper_tower::access::{Access, List};
/// use ratekeeper_tower::extract::ClientIp;
/// use ratekeeper_tower::RateLimitLayer;
///
/// let access = Access::new(ClientIp::new())
///     .allow(List::parse(&["10.0.0.0/8", "::1"])?)
///     .deny(List::parse(&["203.0.113.0/24"])?);
/// let layer = RateLimitLayer::in_memory().access(access.clone());
/// // Later, from an admin endpoint: every clone sees it at its next request.
/// access.replace(List::parse(&["10.0.0.0/8"])?, List::parse(&["198.51.100.0/24"])?);
/// # let _ = layer;
/// # Ok::<(), ratekeeper_tower::core::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct Access {
    lists: Arc<RwLock<Arc<Lists>>>,
    ip: ClientIp,
    principal: Option<Arc<dyn KeyExtractor>>,
}

#[derive(Debug, Default)]
struct Lists {
    allow: List,
    deny: List,
}

impl Lists {
    /// Whether either list holds an address range.
    fn has_ips(&self) -> bool {
        [&self.allow, &self.deny]
            .iter()
            .any(|l| !l.v4.is_empty() || !l.v6.is_empty())
    }
}

impl fmt::Debug for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lists = self.current();
        f.debug_struct("Access")
            .field("allow", &lists.allow.len())
            .field("deny", &lists.deny.len())
            .finish_non_exhaustive()
    }
}

/// What the lists say about a request.
///
/// You read it only when you check the lists yourself (`Access::check`), outside a layer,
/// which acts on them for you.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listed {
    /// On the allow list: no limit applies.
    Allowed,
    /// On the deny list: 403.
    Denied,
    /// On neither: the limits decide.
    Neither,
    /// The lists hold addresses, and the client's cannot be told (a trusted proxy's
    /// forwarding header names no usable client: 400 `ip.forwarded_invalid`). Answered with
    /// the rejection: a request whose address is unknown is neither allowed nor let past a
    /// deny list.
    Unresolved(Rejection),
}

impl Access {
    /// Empty lists; IP entries match the client IP as `ip` resolves it.
    pub fn new(ip: ClientIp) -> Self {
        Self {
            lists: Arc::new(RwLock::new(Arc::new(Lists::default()))),
            ip,
            principal: None,
        }
    }

    /// Principal entries match the principal `key` extracts (a request it cannot name a
    /// principal for is matched by IP only).
    #[must_use]
    pub fn principal(mut self, key: impl KeyExtractor) -> Self {
        self.principal = Some(Arc::new(key));
        self
    }

    /// Sets the allow list.
    #[must_use]
    pub fn allow(self, list: List) -> Self {
        let deny = self.current().deny.clone();
        self.replace(list, deny);
        self
    }

    /// Sets the deny list.
    #[must_use]
    pub fn deny(self, list: List) -> Self {
        let allow = self.current().allow.clone();
        self.replace(allow, list);
        self
    }

    /// Replaces both lists at once, for every clone, at run time.
    pub fn replace(&self, allow: List, deny: List) {
        let next = Arc::new(Lists { allow, deny });
        *self.lists.write().unwrap_or_else(PoisonError::into_inner) = next;
    }

    /// The allow and deny lists in force.
    pub fn lists(&self) -> (List, List) {
        let l = self.current();
        (l.allow.clone(), l.deny.clone())
    }

    fn current(&self) -> Arc<Lists> {
        Arc::clone(&self.lists.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// What the lists say about a request.
    pub fn check(&self, parts: &Parts) -> Listed {
        let lists = self.current();
        if lists.allow.is_empty() && lists.deny.is_empty() {
            return Listed::Neither;
        }
        let ip = if lists.has_ips() {
            match self.ip.resolve(parts) {
                Ok(ip) => Some(ip),
                Err(rejection) => return Listed::Unresolved(rejection),
            }
        } else {
            None
        };
        let principal = self.principal.as_ref().and_then(|k| k.extract(parts).ok());
        let on = |l: &List| {
            ip.is_some_and(|ip| l.contains_ip(ip))
                || principal.as_ref().is_some_and(|p| l.contains_principal(p))
        };
        if on(&lists.deny) {
            Listed::Denied
        } else if on(&lists.allow) {
            Listed::Allowed
        } else {
            Listed::Neither
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_merge_and_match_at_their_edges() {
        let l = List::parse(&[
            "10.0.0.0/9",
            "10.128.0.0/9",
            "192.0.2.7",
            "2001:db8::/32",
            "::ffff:198.51.100.0/120",
        ])
        .unwrap();
        assert_eq!(l.v4.len(), 2, "10/9 and 10.128/9 merge into 10/8");
        for (ip, on) in [
            ("10.0.0.0", true),
            ("10.255.255.255", true),
            ("11.0.0.0", false),
            ("9.255.255.255", false),
            ("192.0.2.7", true),
            ("192.0.2.8", false),
            ("2001:db8:ffff::1", true),
            ("2001:db9::", false),
            ("::ffff:10.1.2.3", true),
        ] {
            assert_eq!(l.contains_ip(ip.parse().unwrap()), on, "{ip}");
        }
        let err = List::parse(&["10.0.0.0/8", "10.0.0.0/33"]).unwrap_err();
        assert_eq!(
            (err.code(), err.field()),
            ("access.entry_invalid", "access[1]")
        );
        assert!(List::parse(&["example.com"]).is_err());
    }

    #[test]
    fn principals_match_as_keyed_and_deny_wins() {
        use ratekeeper_core::PrincipalKind;

        use crate::extract::HeaderKey;

        let access = Access::new(ClientIp::new().peer_source(|_| Some([192, 0, 2, 1].into())))
            .principal(HeaderKey::new(
                http::HeaderName::from_static("x-api-key"),
                PrincipalKind::ApiKey,
            ))
            .allow(
                List::parse(&["192.0.2.0/24"])
                    .unwrap()
                    .with_principals([Principal::api_key("internal-key")]),
            )
            .deny(List::default().with_principals([Principal::api_key("leaked-key")]));
        let parts = |key: &str| {
            let (parts, ()) = http::Request::get("/")
                .header("x-api-key", key)
                .body(())
                .unwrap()
                .into_parts();
            parts
        };
        // The key is compared hashed, as it is keyed: a leaked key is denied even from an
        // allowed address.
        assert_eq!(access.check(&parts("leaked-key")), Listed::Denied);
        assert_eq!(access.check(&parts("internal-key")), Listed::Allowed);
        assert_eq!(access.check(&parts("other")), Listed::Allowed, "by address");
        access.replace(List::default(), List::default());
        assert_eq!(access.check(&parts("leaked-key")), Listed::Neither);
    }
}
