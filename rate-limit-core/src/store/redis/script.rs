//! The chain script's calling convention: keys, then one argument holding every number
//! (the slack and the number of chains, then per chain its mode, its number of checks and
//! four numbers per check); and the answer's layout. `chain.lua` reads exactly this.
//!
//! Both directions are strings of 8-byte little-endian doubles, packed and unpacked by the
//! `struct` library every Redis since 2.6 and every Valkey embed in their Lua;
//! every number is a whole one below 2^53, exact as a double. Doubles, because of what
//! Redis's Lua pays per number (Redis 6.2 under callgrind, instructions): `tonumber` of a
//! text argument ~1 700 (`strtod`), `struct.unpack` ~250 a double; `struct.pack` ~450 a
//! double and ~1 200 an 8-byte integer. The answer was an array of integers before that:
//! redis-rs parses an array element by element (~1 000 instructions each, ten for a
//! one-check chain), a bulk string at once.

use redis::{Script, Value};

use super::error::bad_answer;
use crate::key::Key;
use crate::limit::Params;
use crate::protocol::StoreError;
use crate::protocol::{Decision, Outcome};

// The scripts that count a sliding log, each after `log.lua`: its functions.
pub(super) const CHAIN_LUA: &str = concat!(
    include_str!("log.lua"),
    include_str!("chain.lua"),
    include_str!("chain_run.lua")
);
pub(super) const WINDOW_LUA: &str = concat!(include_str!("log.lua"), include_str!("window.lua"));
pub(super) const REFUND_LUA: &str = concat!(include_str!("log.lua"), include_str!("refund.lua"));
pub(super) const SLOTS_LUA: &str = include_str!("slots.lua");
pub(super) const PACER_LUA: &str = include_str!("pacer.lua");
pub(super) const FLEET_LUA: &str = include_str!("fleet.lua");
pub(super) const FLEET_RESTORE_LUA: &str = include_str!("fleet_restore.lua");
pub(super) const FLEET_READ_LUA: &str = include_str!("fleet_read.lua");
pub(super) const TOP_PUT_LUA: &str = include_str!("top_put.lua");
/// The largest cost sent: Lua's doubles stay exact below 2^52.
const COST_CAP: u64 = 1 << 52;
/// The largest number a double holds exactly with every integer below it: 2^53.
const EXACT: f64 = 9_007_199_254_740_992.0;

/// `ARGV[1]` of the chain script: how a chain charges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ScriptMode {
    /// In order, all or nothing: the first refusal decides, nothing is charged.
    InOrder = 0,
    /// Every limit is charged, refused or not.
    ChargeAll = 1,
    /// A cost known after the work: always charged, overdrawing if need be.
    Overdraw = 2,
    /// Every limit charged in order up to and including the first refusal; none after it.
    CountAttempts = 3,
}

impl ScriptMode {
    pub(super) fn arg(self) -> u64 {
        self as u64
    }
}

/// The algorithm codes of `chain.lua`.
pub(super) const FIXED: u64 = 1;
pub(super) const SLIDING: u64 = 2;
pub(super) const LOG: u64 = 3;
pub(super) const BUCKET: u64 = 4;
const BAN: u64 = 5;
/// A calendar quota's period (periods.rs: its numbers).
pub(super) const PERIOD: u64 = 6;

/// A script call: `keys`, then `args`.
///
/// Sent as `EVALSHA`; on `NOSCRIPT` (the script did not run) as `EVAL` with the script's
/// text, which also caches it. Never `SCRIPT LOAD`: it carries no key, so on a Cluster it
/// goes to any node — a dead one included — and never to the node that needs the script.
#[derive(Debug)]
pub(super) struct Invocation<'a> {
    pub(super) script: &'a Script,
    pub(super) code: &'static str,
    pub(super) keys: &'a [String],
    pub(super) args: &'a [u64],
    /// The arguments as one string of little-endian doubles (the chain script's convention:
    /// Lua reads them with one `struct.unpack`, where a text argument costs Redis a
    /// `strtod`), else one text argument each.
    pub(super) doubles: bool,
}

/// How a script is sent: by its SHA (the script cache), or with its text (after
/// `NOSCRIPT`: Redis lost the cache).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Eval {
    /// `EVALSHA`.
    BySha,
    /// `EVAL` with the script's text.
    WithText,
}

impl Invocation<'_> {
    /// `EVALSHA sha …`, or `EVAL script …`.
    pub(super) fn cmd(&self, eval: Eval) -> redis::Cmd {
        let (name, body) = if eval == Eval::WithText {
            ("EVAL", self.code)
        } else {
            ("EVALSHA", self.script.get_hash())
        };
        // Sized once: grown argument by argument it reallocated its two buffers ~6 times
        // per call (3 440 instructions for a one-check chain).
        let data = name.len()
            + body.len()
            + 20
            + self.keys.iter().map(String::len).sum::<usize>()
            + 20 * self.args.len();
        let mut cmd = redis::Cmd::with_capacity(3 + self.keys.len() + self.args.len(), data);
        cmd.arg(name).arg(body).arg(self.keys.len()).arg(self.keys);
        if self.doubles {
            cmd.arg(as_doubles(self.args));
        } else {
            for a in self.args {
                cmd.arg(*a);
            }
        }
        cmd
    }
}

/// `args` as little-endian doubles, one string. Every argument is below 2^53 (costs are
/// capped at 2^52, quotas and codes far below), so each double is exact.
fn as_doubles(args: &[u64]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(8 * args.len());
    for &a in args {
        // An integer below 2^53 converts exactly (the cap is the caller's, checked here).
        debug_assert!(a < 1 << 53);
        bytes.extend_from_slice(&(a as f64).to_le_bytes());
    }
    bytes
}

/// The script's arguments for one check.
pub(super) fn push_params(args: &mut Vec<u64>, key: &Key, cost: u64) {
    push_lease(args, key.params(), cost, 0);
}

/// The script's arguments for one check with `params` that, if it fits, also takes up to
/// `extra` units for a lease (in-order chains only; 0: a plain check).
pub(super) fn push_lease(args: &mut Vec<u64>, params: Params, cost: u64, extra: u64) {
    let (algo, p1, p2) = match params {
        Params::Fixed { quota, window } => (FIXED, quota, window),
        Params::Sliding { quota, window } => (SLIDING, quota, window),
        Params::Log { quota, window } => (LOG, quota, window),
        Params::Bucket { capacity, interval } => (BUCKET, capacity, interval),
        // The code's lengths and the boundary are the candidate periods', written when the
        // call names its keys (periods.rs); a refund's key names the period charged.
        Params::Calendar { quota, .. } => (PERIOD, quota, 0),
        #[cfg(feature = "calendar")]
        Params::Period { quota, end, .. } => (PERIOD, quota, end),
        Params::Ban { after, within, ban } => {
            // The refusals one refusal counts ride in the code; the cost slot holds the
            // ban's length.
            let n = cost.min(u64::from(u32::MAX));
            args.extend([BAN | n << 4, after, within, ban]);
            return;
        }
    };
    // Quotas are at most 2³², so the code stays far below 2⁵³.
    let extra = extra.min(u64::from(u32::MAX));
    args.extend([algo | extra << 4, p1, p2, cost.min(COST_CAP)]);
}

/// Turns a check's arguments (four numbers from [`push_lease`]) that were granted `units`
/// into a plain check of everything it charged: what a refund must give back.
pub(super) fn as_charged(check: &mut [u64], units: u64) {
    check[0] &= 0xf;
    check[3] = check[3].saturating_add(units);
}

/// Marks the decisions of `checks`' bans as bans' (the script's answer does not say).
pub(super) fn mark_bans<'a>(checks: impl IntoIterator<Item = &'a Key>, decisions: &mut [Decision]) {
    for (key, d) in checks.into_iter().zip(decisions) {
        // The kind, a plain field: no parameter read per check on every call.
        if key.limit().kind() == crate::AlgorithmKind::Ban {
            *d = d.as_ban();
        }
    }
}

/// The head of a chain-script call for `chains` chains whose windows' keys were named at
/// the server time `t` (estimated): the call's first three numbers, in a vector with room
/// for `then` more (the chains').
pub(super) fn head(slack_ms: u64, chains: usize, t: u64, then: usize) -> Vec<u64> {
    let mut args = Vec::with_capacity(3 + then);
    args.extend([slack_ms, chains as u64, t]);
    args
}

/// Appends one chain: its mode, its number of checks, then `checks` (four numbers each,
/// from [`push_params`]).
pub(super) fn push_chain(args: &mut Vec<u64>, mode: ScriptMode, checks: &[u64]) {
    args.extend([mode.arg(), (checks.len() / 4) as u64]);
    args.extend_from_slice(checks);
}

/// Units a lease was granted: (index of the check in its chain, units).
pub(super) type Grants = Vec<(usize, u64)>;

/// One chain's answer: its decisions and its leases' grants, or why it charged nothing.
pub(super) type ChainAnswer = Result<(Vec<Decision>, Grants), Unanswered>;

/// Why the script did not evaluate a chain (it charged nothing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Unanswered {
    /// Its arguments were refused.
    Refused,
    /// The server's window was none its keys named (the instance's estimate of the
    /// server's clock was off): send it again.
    Moved,
}

/// Decodes `now, chains`, then per chain `0, n` and n × `(outcome, limit, remaining,
/// reset, retry, window)`, or `1, 0` (refused) or `2, 0` (moved), for a call of `chains` chains: one string of 8-byte
/// little-endian doubles (one bulk string is one parse for the client; an array was one
/// per element). A number that is not a whole one from 0 to 2^53, or a length not a
/// multiple of 8, is a bad answer.
pub(super) fn decode(v: &Value, chains: usize) -> Result<(u64, Vec<ChainAnswer>), StoreError> {
    let Value::BulkString(bytes) = v else {
        return Err(bad_answer());
    };
    if bytes.len() % 8 != 0 {
        return Err(bad_answer());
    }
    let mut nums = bytes.chunks_exact(8).map(|b| {
        let n = f64::from_le_bytes(b.try_into().unwrap_or([0xff; 8]));
        // A whole number from 0 to 2^53 (NaN, infinities, negatives and fractions fail).
        ((0.0..=EXACT).contains(&n) && n.fract() == 0.0).then_some(n as u64)
    });
    let mut next = || nums.next().flatten().ok_or_else(bad_answer);
    let now = next()?;
    if next()? != chains as u64 {
        return Err(bad_answer());
    }
    let mut out = Vec::with_capacity(chains);
    for _ in 0..chains {
        let (status, n) = (next()?, next()?);
        if status != 0 {
            out.push(Err(if status == 2 {
                Unanswered::Moved
            } else {
                Unanswered::Refused
            }));
            continue;
        }
        let mut decisions = Vec::with_capacity(usize::try_from(n).unwrap_or(0).min(64));
        let mut grants = Grants::new();
        for i in 0..n {
            let code = next()?;
            let outcome = match code & 3 {
                0 => Outcome::Allowed,
                1 => Outcome::Denied,
                _ => Outcome::NeverFits,
            };
            if code >> 2 > 0 {
                grants.push((usize::try_from(i).unwrap_or(usize::MAX), code >> 2));
            }
            let (limit, remaining, reset, retry, window) =
                (next()?, next()?, next()?, next()?, next()?);
            decisions.push(Decision::from_parts(
                outcome, limit, remaining, reset, retry, window,
            ));
        }
        out.push(Ok((decisions, grants)));
    }
    if nums.next().is_some() {
        return Err(bad_answer());
    }
    Ok((now, out))
}

/// An integer of a script's answer (0 when absent or not an integer).
pub(super) fn int(v: Option<&Value>) -> u64 {
    match v {
        Some(Value::Int(n)) => u64::try_from(*n).unwrap_or(0),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packed(nums: &[i64]) -> Value {
        Value::BulkString(
            nums.iter()
                .flat_map(|&n| (n as f64).to_le_bytes())
                .collect(),
        )
    }

    #[test]
    fn a_packed_answer_decodes_and_a_malformed_one_is_a_bad_answer_never_a_panic() {
        // now, 2 chains: (0, 1, one allowed decision), (1, 0).
        let ok = packed(&[1_799_971_200_000_000, 2, 0, 1, 0, 10, 9, 6, 0, 60, 1, 0]);
        let (now, chains) = decode(&ok, 2).unwrap();
        assert_eq!(now, 1_799_971_200_000_000);
        let (ds, grants) = chains[0].as_ref().unwrap();
        assert_eq!((ds[0].limit(), ds[0].remaining()), (10, 9));
        assert!(ds[0].is_allowed() && grants.is_empty());
        assert!(
            matches!(chains[1], Err(Unanswered::Refused)),
            "the second chain failed alone"
        );
        let Value::BulkString(bytes) = &ok else {
            unreachable!()
        };
        for bad in [
            Value::BulkString(bytes[..bytes.len() - 3].to_vec()),
            Value::BulkString(bytes[..bytes.len() - 8].to_vec()),
            packed(&[1, 2, 0, 1, -1, 10, 9, 6, 0, 60, 1, 0]),
            packed(&[1, 3]),
            Value::Array(vec![Value::Int(1), Value::Int(0)]),
            Value::Nil,
        ] {
            assert_eq!(
                decode(&bad, 2).unwrap_err().kind(),
                crate::protocol::StoreErrorKind::Indeterminate,
                "{bad:?}"
            );
        }
        assert!(decode(&packed(&[5, 0]), 0).unwrap().1.is_empty());
    }
}
