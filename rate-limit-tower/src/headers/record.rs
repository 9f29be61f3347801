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
        if let ([x], [_, ..]) = (d.decisions(), names)
            && x.is_allowed()
            && !x.is_ban()
            && x.retry_after().is_none()
            && x.delay().is_zero()
        {
            let (window, reset) = window_and_reset(x, None);
            return Self::One(One {
                quota: x.limit(),
                window,
                remaining: x.remaining(),
                reset,
            });
        }
        RateLimitInfo::from_chain(names, d).into()
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
                    limits: smallvec::smallvec![LimitStatus {
                        name,
                        outcome: Outcome::Allowed,
                        quota: one.quota,
                        window: one.window,
                        remaining: one.remaining,
                        reset: one.reset,
                        retry_after: None,
                        concurrent: false,
                    }],
                    held: Duration::ZERO,
                })
            }
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
        let trio = matches!(style, HeaderStyle::Trio | HeaderStyle::Both);
        let ietf = matches!(style, HeaderStyle::Ietf | HeaderStyle::Both);
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
