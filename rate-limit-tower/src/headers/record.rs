//! What an admitted request's headers will say, carried in the response future until the
//! inner service answers.

use super::*;

/// The record of an admitted request.
///
/// The common case, a layer's one limit admitting without a hold, keeps its four numbers
/// inline: no [`RateLimitInfo`] is built, nothing is allocated and no name is cloned
/// unless something reads it (an outer layer, `info_extension`, an inner layer's record
/// to merge). Anything else is the full view, boxed, so that the response future stays
/// small.
#[derive(Debug)]
pub(crate) enum Record {
    /// Nothing to say: a store failure let the request through unchecked.
    Nothing,
    /// The layer's one limit (its first name), admitted.
    One(One),
    /// Each of the layer's limits, in order, admitted as [`One`] is (no ban, no hold);
    /// `headline` is the one the `RateLimit-Limit` trio describes.
    Many { headline: usize, limits: Box<[One]> },
    /// Any other view.
    Full(Box<RateLimitInfo>),
}

/// An admitted limit's numbers, as [`LimitStatus`] keeps them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct One {
    quota: u64,
    window: u64,
    remaining: u64,
    reset: u64,
}

impl Record {
    /// The record of an admitted chain whose limits are named `names`.
    pub(crate) fn admitted(names: &[Arc<str>], d: &ChainDecision) -> Self {
        let plain = |x: &Decision| {
            x.is_allowed() && !x.is_ban() && x.retry_after().is_none() && x.delay().is_zero()
        };
        match (d.decisions(), names) {
            ([x], [_, ..]) if plain(x) => Self::One(One::of(x)),
            (all, _) if all.len() >= 2 && all.len() == names.len() && all.iter().all(plain) => {
                Self::Many {
                    headline: d.headline_index().unwrap_or(0),
                    limits: all.iter().map(One::of).collect(),
                }
            }
            _ => RateLimitInfo::from_chain(names, d).into(),
        }
    }

    /// Writes the headers of `style` onto a response none of ours has touched, for one or
    /// several plainly admitted limits (`names`: the layer's), when `policy` has them
    /// rendered; `false` (nothing written) otherwise, and for any other record.
    pub(crate) fn write_fresh(
        &self,
        style: HeaderStyle,
        headers: &mut HeaderMap,
        names: &[Arc<str>],
        policy: &PolicyCache,
    ) -> bool {
        match self {
            Self::One(one) => names
                .first()
                .is_some_and(|name| one.write_fresh(style, headers, name, policy)),
            Self::Many { headline, limits } => {
                let Some((terms, policy)) = policy.plain(names, limits) else {
                    return false;
                };
                let (trio, ietf) = style.fields();
                headers.reserve(3 * usize::from(trio) + 2 * usize::from(ietf) + 1);
                if let (true, Some(h), Some(term)) =
                    (trio, limits.get(*headline), terms.get(*headline))
                {
                    headers.insert(RATELIMIT_LIMIT, term.quota_value.clone());
                    headers.insert(RATELIMIT_REMAINING, int_value(h.remaining));
                    headers.insert(RATELIMIT_RESET, int_value(h.reset));
                }
                if ietf {
                    headers.insert(RATELIMIT_POLICY, policy.clone());
                    let numbers = limits.iter().map(|l| (l.remaining, l.reset));
                    put(headers, RATELIMIT, now_from_terms(terms, numbers));
                }
                true
            }
            Self::Nothing | Self::Full(_) => false,
        }
    }

    /// The full view (`names`: the layer's limit names, as given to [`Record::admitted`]).
    pub(crate) fn into_info(self, names: &[Arc<str>]) -> Option<RateLimitInfo> {
        match self {
            Self::Nothing => None,
            Self::One(one) => {
                let name = Arc::clone(names.first()?);
                Some(RateLimitInfo {
                    allowed: true,
                    shadowed: false,
                    headline: 0,
                    limits: smallvec::smallvec![one.status(name)],
                    held: Duration::ZERO,
                })
            }
            Self::Many { headline, limits } => Some(RateLimitInfo {
                allowed: true,
                shadowed: false,
                headline,
                limits: limits
                    .iter()
                    .zip(names)
                    .map(|(l, name)| l.status(Arc::clone(name)))
                    .collect(),
                held: Duration::ZERO,
            }),
            Self::Full(info) => Some(*info),
        }
    }
}

impl From<Option<RateLimitInfo>> for Record {
    fn from(info: Option<RateLimitInfo>) -> Self {
        info.map_or(Self::Nothing, |i| Self::Full(Box::new(i)))
    }
}

impl One {
    fn of(x: &Decision) -> Self {
        let (window, reset) = window_and_reset(x, None);
        Self {
            quota: x.limit(),
            window,
            remaining: x.remaining(),
            reset,
        }
    }

    /// What `name`'s [`LimitStatus`] says of it.
    fn status(&self, name: Arc<str>) -> LimitStatus {
        LimitStatus {
            name,
            outcome: Outcome::Allowed,
            quota: self.quota,
            window: self.window,
            remaining: self.remaining,
            reset: self.reset,
            retry_after: None,
            concurrent: false,
        }
    }

    /// The quota and window (seconds) a policy describes.
    pub(super) fn terms(&self) -> (u64, u64) {
        (self.quota, self.window)
    }

    /// Writes the headers of `style` onto a response none of ours has touched, from the
    /// values `policy` rendered for `name`; `false` (nothing written) when `policy` does not
    /// describe this limit alone (not rendered yet, or the limit changed since).
    pub(crate) fn write_fresh(
        &self,
        style: HeaderStyle,
        headers: &mut HeaderMap,
        name: &Arc<str>,
        policy: &PolicyCache,
    ) -> bool {
        let Some((term, policy)) = policy.single(name, self.quota, self.window) else {
            return false;
        };
        let (trio, ietf) = style.fields();
        if trio {
            // As `RateLimitInfo::write_with`: room for ours and axum's `content-length` (the
            // IETF pair alone fits the room a handler's map has).
            headers.reserve(3 + 2 * usize::from(ietf) + 1);
            headers.insert(RATELIMIT_LIMIT, term.quota_value.clone());
            headers.insert(RATELIMIT_REMAINING, int_value(self.remaining));
            headers.insert(RATELIMIT_RESET, int_value(self.reset));
        }
        if ietf {
            headers.insert(RATELIMIT_POLICY, policy.clone());
            put(
                headers,
                RATELIMIT,
                now_from_terms(std::slice::from_ref(term), [(self.remaining, self.reset)]),
            );
        }
        true
    }
}
