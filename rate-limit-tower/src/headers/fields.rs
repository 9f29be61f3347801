//! Writing header fields: the structured lists of the IETF draft, integers without
//! allocation, `Server-Timing`, `Retry-After` and the CORS exposure.

use super::*;

const SERVER_TIMING: HeaderName = HeaderName::from_static("server-timing");

/// The `Server-Timing` metric of a held request (W3C Server Timing: shown by browsers'
/// developer tools), once: an outer layer rewriting the headers does not repeat it.
pub(super) fn write_held(headers: &mut HeaderMap, held: std::time::Duration) {
    const METRIC: &str = "rate-limit-hold;dur=";
    let seen = headers
        .get_all(SERVER_TIMING)
        .iter()
        .any(|v| v.as_bytes().starts_with(METRIC.as_bytes()));
    if seen {
        return;
    }
    let ms = itoa::Buffer::new().format(held.as_millis()).to_owned();
    if let Ok(v) = HeaderValue::from_str(&format!("{METRIC}{ms}")) {
        headers.append(SERVER_TIMING, v);
    }
}

/// The largest structured-field integer (RFC 9651 §3.3.1); larger counts are clamped.
const SF_INTEGER_MAX: u64 = 999_999_999_999_999;

/// The numbers 0 to 999, three digits each, for header values that need no allocation.
static SMALL: [[u8; 3]; 1000] = small_numbers();

const fn small_numbers() -> [[u8; 3]; 1000] {
    let mut table = [[0u8; 3]; 1000];
    let mut i = 0;
    while i < 1000 {
        // `i` < 1000: each digit fits a `u8`.
        #[allow(
            clippy::cast_possible_truncation,
            reason = "digits of a number below 1000"
        )]
        let digits = [
            b'0' + (i / 100) as u8,
            b'0' + (i / 10 % 10) as u8,
            b'0' + (i % 10) as u8,
        ];
        table[i] = digits;
        i += 1;
    }
    table
}

/// `n` as a header value: static under 1 000 (no allocation), clamped to the largest
/// structured-field integer.
pub(super) fn int_value(n: u64) -> HeaderValue {
    if let Some(digits) = usize::try_from(n).ok().and_then(|i| SMALL.get(i)) {
        let skip = match n {
            0..=9 => 2,
            10..=99 => 1,
            _ => 0,
        };
        if let Ok(s) = std::str::from_utf8(&digits[skip..]) {
            return HeaderValue::from_static(s);
        }
    }
    in_arena(15, |buf| put_int(buf, n)).unwrap_or_else(|| HeaderValue::from(n.min(SF_INTEGER_MAX)))
}

/// Sets `name` to `value`; removes it (no stale value) when there is none.
pub(super) fn put(headers: &mut HeaderMap, name: HeaderName, value: Option<HeaderValue>) {
    match value {
        Some(v) => {
            headers.insert(name, v);
        }
        None => {
            headers.remove(name);
        }
    }
}

/// How much one arena holds: values of ~20–60 bytes, so one allocation serves ~100 of them.
const ARENA: usize = 4096;

thread_local! {
    /// Where this thread renders header values: each is a slice of one shared buffer, so
    /// that a value costs a reference count, not an allocation of its own. A buffer is
    /// freed when the last value cut from it is dropped.
    static ARENA_BUF: std::cell::RefCell<BytesMut> = std::cell::RefCell::new(BytesMut::new());
}

/// A value rendered by `render` into this thread's arena; `at_most` bounds its length.
/// `None` when it rendered nothing, or not a valid field value.
fn in_arena(at_most: usize, render: impl FnOnce(&mut BytesMut)) -> Option<HeaderValue> {
    if at_most > ARENA / 4 {
        // Rare (many limits, or long names): a buffer of its own.
        let mut own = BytesMut::with_capacity(at_most);
        render(&mut own);
        return value_of(own.freeze());
    }
    ARENA_BUF.with(|arena| {
        let mut arena = arena.borrow_mut();
        if arena.capacity() - arena.len() < at_most {
            *arena = BytesMut::with_capacity(ARENA);
        }
        render(&mut arena);
        value_of(arena.split().freeze())
    })
}

fn value_of(bytes: bytes::Bytes) -> Option<HeaderValue> {
    if bytes.is_empty() {
        return None;
    }
    HeaderValue::from_maybe_shared(bytes).ok()
}

fn put_int(buf: &mut BytesMut, n: u64) {
    buf.extend_from_slice(itoa::Buffer::new().format(n.min(SF_INTEGER_MAX)).as_bytes());
}

/// `RateLimit-Policy: "name";q=100;w=60, ...`
pub(super) fn policy_value(limits: &[LimitStatus]) -> Option<HeaderValue> {
    list_value(limits, [b";q=", b";w="], |l| [l.quota, l.window])
}

/// A structured-field list of the limits' names (sf-strings), each with two integer
/// parameters: `"name";q=100;w=60, ...`; `None` when no limit is shown. Limit names are
/// checked when a limit is built (`A-Z a-z 0-9 . _ -`), so they need no escaping; a name
/// that would (`"`, `\\`, or a byte outside printable ASCII) is left out rather than rendered
/// into an invalid field.
pub(super) fn list_value(
    limits: &[LimitStatus],
    keys: [&[u8]; 2],
    params: impl Fn(&LimitStatus) -> [u64; 2],
) -> Option<HeaderValue> {
    // Per limit: `, "` name `"`, then two of `;q=` and 15 digits, or `;qu="concurrent-requests"`.
    let at_most = limits.iter().map(|l| l.name.len() + 5 + 2 * 26).sum();
    in_arena(at_most, |buf| {
        let mut first = true;
        for l in limits {
            if !l
                .name
                .bytes()
                .all(|b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\')
            {
                continue;
            }
            if !first {
                buf.extend_from_slice(b", ");
            }
            first = false;
            buf.extend_from_slice(b"\"");
            buf.extend_from_slice(l.name.as_bytes());
            buf.extend_from_slice(b"\"");
            for (key, v) in keys.into_iter().zip(params(l)) {
                if l.concurrent && key == b";w=" {
                    // An in-flight limit has no window: its quota unit says what it counts.
                    buf.extend_from_slice(b";qu=\"concurrent-requests\"");
                    continue;
                }
                buf.extend_from_slice(key);
                put_int(buf, v);
            }
        }
    })
}

/// One layer's last `RateLimit-Policy` value and the limits it describes. The policy
/// changes only when a limit does (a quota changed at run time, a principal's override),
/// so most responses send the value rendered for the first one, shared, not rendered again;
/// the `RateLimit` field's names and the `RateLimit-Limit` values come pre-rendered with it.
#[derive(Debug, Clone, Default)]
pub(crate) struct PolicyCache(std::sync::OnceLock<(Vec<Term>, HeaderValue)>);

/// What a policy value says of one limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Term {
    name: Arc<str>,
    quota: u64,
    window: u64,
    concurrent: bool,
    /// `"name";r=`, the limit's start in the `RateLimit` field; `None` for a name the
    /// field leaves out.
    now_prefix: Option<Box<[u8]>>,
    /// The quota, as `RateLimit-Limit` sends it.
    pub(super) quota_value: HeaderValue,
}

impl Term {
    fn of(l: &LimitStatus) -> Self {
        let sayable = l
            .name
            .bytes()
            .all(|b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\');
        Self {
            name: Arc::clone(&l.name),
            quota: l.quota,
            window: l.window,
            concurrent: l.concurrent,
            now_prefix: sayable.then(|| format!("\"{}\";r=", l.name).into_bytes().into()),
            quota_value: int_value(l.quota),
        }
    }

    fn describes(&self, l: &LimitStatus) -> bool {
        (Arc::ptr_eq(&self.name, &l.name) || self.name == l.name)
            && self.quota == l.quota
            && self.window == l.window
            && self.concurrent == l.concurrent
    }
}

impl PolicyCache {
    /// The cached terms and policy value, when they describe `limits` (the first limits
    /// seen are cached); `None` when `limits` must be rendered afresh.
    pub(super) fn terms(&self, limits: &[LimitStatus]) -> Option<(&[Term], &HeaderValue)> {
        let (terms, policy) = match self.0.get() {
            Some(cached) => cached,
            None => {
                let policy = interned(policy_value(limits)?);
                let terms = limits.iter().map(Term::of).collect();
                // A race between two first requests keeps one of two equal values.
                let _ = self.0.set((terms, policy));
                self.0.get()?
            }
        };
        let same =
            terms.len() == limits.len() && terms.iter().zip(limits).all(|(t, l)| t.describes(l));
        same.then_some((terms.as_slice(), policy))
    }

    /// The cached terms and policy value when they describe the limits `names`, with the
    /// quotas and windows of `limits` (none in flight); `None` when they differ.
    pub(super) fn plain(
        &self,
        names: &[Arc<str>],
        limits: &[record::One],
    ) -> Option<(&[Term], &HeaderValue)> {
        let (terms, policy) = self.0.get()?;
        let same = terms.len() == limits.len()
            && terms.iter().zip(names).zip(limits).all(|((t, name), l)| {
                (Arc::ptr_eq(&t.name, name) || t.name == *name)
                    && (t.quota, t.window) == l.terms()
                    && !t.concurrent
            });
        same.then_some((terms.as_slice(), policy))
    }

    /// The cached term and policy value when they describe one admitted limit alone:
    /// `name`, with `quota` and `window` (seconds); `None` before the first response has
    /// filled the cache, or when they differ.
    pub(super) fn single(
        &self,
        name: &Arc<str>,
        quota: u64,
        window: u64,
    ) -> Option<(&Term, &HeaderValue)> {
        let ([term], policy) = self.0.get().map(|(t, p)| (t.as_slice(), p))? else {
            return None;
        };
        let same = (Arc::ptr_eq(&term.name, name) || term.name == *name)
            && term.quota == quota
            && term.window == window
            && !term.concurrent;
        same.then_some((term, policy))
    }
}

/// The most distinct policy values kept for the life of the process (see [`interned`]).
const MAX_INTERNED: usize = 1024;

/// `value` backed by static memory, so that each response's copy of it is free: a value
/// cut from the arena is reference-counted, and its clone and its drop were two atomic
/// operations on every response (perf: ~10 ns a request). Each distinct value is kept once
/// for the life of the process; a policy changes only when an operator changes a limit, and
/// past [`MAX_INTERNED`] distinct values the value is returned as it is.
pub(super) fn interned(value: HeaderValue) -> HeaderValue {
    static KEPT: std::sync::Mutex<Vec<&'static [u8]>> = std::sync::Mutex::new(Vec::new());
    let mut kept = KEPT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let bytes = value.as_bytes();
    let stat = match kept.iter().find(|k| **k == bytes) {
        Some(k) => *k,
        None if kept.len() < MAX_INTERNED => {
            let leaked: &'static [u8] = Box::leak(bytes.to_vec().into_boxed_slice());
            kept.push(leaked);
            leaked
        }
        None => return value,
    };
    HeaderValue::from_maybe_shared(bytes::Bytes::from_static(stat)).unwrap_or(value)
}

/// The `RateLimit` value of the limits `terms` describe, with their names pre-rendered;
/// `numbers`: each limit's remaining units and reset, in the same order.
pub(super) fn now_from_terms(
    terms: &[Term],
    numbers: impl IntoIterator<Item = (u64, u64)>,
) -> Option<HeaderValue> {
    let at_most = terms
        .iter()
        .map(|t| {
            t.now_prefix
                .as_ref()
                .map_or(0, |p| p.len() + 2 + 3 + 2 * 15)
        })
        .sum();
    in_arena(at_most, |buf| {
        let mut first = true;
        for (t, (remaining, reset)) in terms.iter().zip(numbers) {
            let Some(prefix) = &t.now_prefix else {
                continue;
            };
            if !first {
                buf.extend_from_slice(b", ");
            }
            first = false;
            buf.extend_from_slice(prefix);
            put_int(buf, remaining);
            buf.extend_from_slice(b";t=");
            put_int(buf, reset);
        }
    })
}

/// `RateLimit: "name";r=50;t=30, ...`
pub(super) fn now_value(limits: &[LimitStatus]) -> Option<HeaderValue> {
    list_value(limits, [b";r=", b";t="], |l| [l.remaining, l.reset])
}

/// `Retry-After` in whole seconds, rounded up, at least 1.
pub(crate) fn retry_after(secs: u64) -> HeaderValue {
    HeaderValue::from(secs.max(1))
}

/// For a request with `Origin` and no CORS layer: lists our headers in
/// `Access-Control-Expose-Headers` (adding to any list already there) and adds
/// `Vary: Origin`.
pub(crate) fn expose(headers: &mut HeaderMap) {
    let existing: Vec<String> = headers
        .get_all(ACCESS_CONTROL_EXPOSE_HEADERS)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|s| s.trim().to_ascii_lowercase())
        .filter(|s| !s.is_empty())
        .collect();
    if existing.iter().any(|s| s == "*") {
        return;
    }
    let mut names = existing.clone();
    for h in &EXPOSED_HEADERS {
        if !names.iter().any(|n| n == h.as_str()) {
            names.push(h.as_str().to_owned());
        }
    }
    if names.len() != existing.len()
        && let Ok(v) = HeaderValue::try_from(names.join(", "))
    {
        headers.insert(ACCESS_CONTROL_EXPOSE_HEADERS, v);
    }
    let varies = headers
        .get_all(VARY)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|s| s.trim().eq_ignore_ascii_case("origin") || s.trim() == "*");
    if !varies {
        headers.append(VARY, HeaderValue::from_static("origin"));
    }
}
