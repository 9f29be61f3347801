//! The check at start ([`RedisStore::verify`]): which server this is, whether every command
//! the store sends runs under the user it connects as, and whether Redis may evict its keys.

use std::collections::BTreeSet;
use std::error::Error as _;
use std::fmt;
use std::time::Duration;

use super::RedisStore;
use crate::chain::Chain;
use crate::limit::{InFlight, Limit};
use crate::principal::Principal;
use crate::protocol::{CountedIn, Dedupe, Reservation, Slots, Store, StoreError, StoreErrorKind};

/// The oldest server the scripts run on (tested: Redis 6.2.5).
const OLDEST: (u32, u32) = (6, 2);

/// What [`RedisStore::verify`] found.
///
/// You read it after `RedisStore::verify` at start, to log which server the store talks to
/// and which of a fleet's permissions its user lacks.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Verified {
    /// The server's name and version (`redis 7.0.15`, `valkey 8.0.1`); `None` when the
    /// user may not run `INFO` (the store does not need it).
    pub server: Option<ServerVersion>,
    /// Every master's `maxmemory-policy`; `None` when `CONFIG GET` was refused or renamed
    /// (managed services): not checked, and said once in the log (`rate_limit.redis_eviction`).
    pub eviction_policies: Option<Vec<String>>,
    /// What a [`Fleet`](crate::fleet::Fleet) over this store needs that the user may not
    /// do (`hgetall`, `publish`, `channels`…): empty when it may do it all. Only a fleet needs
    /// these, so they fail no check; a fleet without them refuses changes (or, without
    /// notices, applies them at each periodic read).
    pub fleet_missing: Vec<String>,
}

/// A server's name and version, from `INFO server`.
///
/// You read it from `Verified`, or from `VerifyError::TooOld`, to log which server and
/// version the store talks to.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerVersion {
    /// `redis` or `valkey`.
    pub name: String,
    /// Its version, as it reports it (`7.0.15`).
    pub version: String,
}

impl fmt::Display for ServerVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.name, self.version)
    }
}

/// Why the store cannot work with this server. Each has a stable [`code`](Self::code).
///
/// You get it at start from `RedisStore::verify`: log it and stop, rather than serve on a
/// server the store cannot work with.
#[derive(Debug)]
#[non_exhaustive]
pub enum VerifyError {
    /// The server is older than Redis 6.2.
    TooOld(ServerVersion),
    /// The user the store connects as may not run these commands, or may not touch the
    /// store's keys (`keys`): give it the ACL the README shows.
    Permission {
        /// Lowercase command names, and `keys` for a key pattern that leaves the store's
        /// keys out.
        missing: Vec<String>,
    },
    /// The server did not answer, or failed otherwise.
    Store(StoreError),
}

impl VerifyError {
    /// `redis.too_old`, `redis.permission`, `redis.auth` (a wrong or missing password:
    /// a [`Store`](Self::Store) error of kind [`StoreErrorKind::Unauthenticated`]) or
    /// `redis.unavailable`.
    pub fn code(&self) -> &'static str {
        match self {
            Self::TooOld(_) => "redis.too_old",
            Self::Permission { .. } => "redis.permission",
            Self::Store(e) if e.kind() == StoreErrorKind::Unauthenticated => "redis.auth",
            Self::Store(_) => "redis.unavailable",
        }
    }
}

impl fmt::Display for VerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TooOld(v) => write!(f, "{v} is older than Redis 6.2, which the store needs"),
            Self::Permission { missing } => write!(
                f,
                "the Redis user may not run what the store needs: {}",
                missing.join(", ")
            ),
            Self::Store(e) => write!(f, "the store could not be verified: {e}"),
        }
    }
}

impl std::error::Error for VerifyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Store(e) => Some(e),
            _ => None,
        }
    }
}

impl RedisStore {
    /// Checks, once at start, that this store can work with its server: the server's
    /// version (Redis 6.2 or later, Valkey), then every command the store sends, each run
    /// the way a request runs it, on keys of its own under the store's prefix (a check of
    /// each algorithm in one chain, a give-back, an in-flight slot taken, renewed and
    /// released, a de-duplication id, a key reset, the bans listed), then the eviction
    /// policy, which it warns about and may be unable to read (`CONFIG` refused or
    /// renamed: it says so once and goes on).
    ///
    /// A user missing permissions gets [`VerifyError::Permission`] naming every command
    /// refused (and `keys` when its key pattern leaves the store's keys out): each
    /// refusal names its command on every server version, where `ACL DRYRUN` (Redis 7.0+)
    /// would itself need a permission the store's user should not have. The probe's keys
    /// expire within two seconds.
    ///
    /// What only a [`Fleet`](crate::fleet::Fleet) needs (hash commands, `PUBLISH`, the
    /// channel pattern) is probed the same way but fails nothing: it is
    /// [`Verified::fleet_missing`]. `SUBSCRIBE` is not probed (it would take over the
    /// connection); a fleet without it says so once.
    ///
    /// A store used without it works the same: its first failure is logged, and each check
    /// follows its rule's failure policy.
    pub async fn verify(&self) -> Result<Verified, VerifyError> {
        let server = self.server_version().await?;
        if let Some(v) = &server
            && older_than_oldest(&v.version)
        {
            return Err(VerifyError::TooOld(v.clone()));
        }
        // Each command alone first: a refusal names its command, where a refusal inside
        // a script does not (`can't run this command or subcommand`). Then each script.
        refusals(self.commands().await)?;
        refusals(self.probes().await)?;
        let fleet_missing = match refusals(self.fleet_commands().await) {
            Ok(()) => Vec::new(),
            Err(VerifyError::Permission { missing }) => missing,
            Err(e) => return Err(e),
        };
        let eviction_policies = self.check_eviction_policy().await.ok();
        Ok(Verified {
            server,
            eviction_policies,
            fleet_missing,
        })
    }

    /// `INFO server`'s name and version; `None` when `INFO` is refused.
    async fn server_version(&self) -> Result<Option<ServerVersion>, VerifyError> {
        let info = match self.inner.conn.info_server().await {
            Ok(info) => info,
            Err(e) => {
                let e = super::error::store_error(e);
                return match refused_command(&e) {
                    Some(_) => Ok(None),
                    None => Err(VerifyError::Store(e)),
                };
            }
        };
        let field = |name: &str| {
            info.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
                .map(|v| v.trim().to_owned())
        };
        let version = match field("valkey_version") {
            Some(v) => Some(("valkey", v)),
            None => field("redis_version").map(|v| ("redis", v)),
        };
        Ok(version.map(|(name, version)| ServerVersion {
            name: name.to_owned(),
            version,
        }))
    }

    /// Every command the store and its scripts send, each alone, on keys of the probe's
    /// own (they expire within two seconds and are deleted).
    async fn commands(&self) -> Vec<Result<(), StoreError>> {
        // One hash tag for both keys: on a Cluster they live on one node.
        let name = format!("{}:{{verify-{}}}", self.inner.prefix, std::process::id());
        let set = format!("{name}:z");
        let hash = format!("{name}:h");
        let ttl = "2000";
        let commands: [(&str, &[&str]); 21] = [
            ("TIME", &[]),
            ("SET", &[&name, "1", "PX", ttl]),
            ("GET", &[&name]),
            ("MGET", &[&name]),
            ("INCRBY", &[&name, "1"]),
            ("HINCRBY", &[&hash, "c", "1"]),
            ("HSET", &[&hash, "p", "0"]),
            ("HGET", &[&hash, "c"]),
            ("PEXPIRE", &[&hash, ttl]),
            ("DEL", &[&hash]),
            ("PEXPIRE", &[&name, ttl]),
            ("ZADD", &[&set, "0", "probe"]),
            ("ZSCORE", &[&set, "probe"]),
            ("ZRANGE", &[&set, "0", "0", "WITHSCORES"]),
            ("ZCARD", &[&set]),
            ("PEXPIRE", &[&set, ttl]),
            ("ZREMRANGEBYSCORE", &[&set, "-inf", "-1"]),
            ("ZREM", &[&set, "probe"]),
            ("DEL", &[&set]),
            ("DEL", &[&name]),
            ("SCAN", &["0", "MATCH", &name, "COUNT", "10"]),
        ];
        self.each(&name, &commands).await
    }

    /// Every command a fleet sends (its state, its notices, on a channel under the prefix,
    /// and its reports), each alone, on a key of the probe's own.
    async fn fleet_commands(&self) -> Vec<Result<(), StoreError>> {
        let name = format!("{}:{{verify-{}}}:h", self.inner.prefix, std::process::id());
        let commands: [(&str, &[&str]); 8] = [
            ("HINCRBY", &[&name, "#v", "1"]),
            ("PEXPIRE", &[&name, "2000"]),
            ("HSET", &[&name, "f", "1"]),
            ("HGET", &[&name, "f"]),
            ("HGETALL", &[&name]),
            ("HDEL", &[&name, "f"]),
            ("DEL", &[&name]),
            ("PUBLISH", &[&name, "0"]),
        ];
        self.each(&name, &commands).await
    }

    /// Sends each command alone (routed by `name` on a Cluster).
    async fn each(&self, name: &str, commands: &[(&str, &[&str])]) -> Vec<Result<(), StoreError>> {
        let mut out = Vec::new();
        for (command, args) in commands {
            let mut cmd = redis::cmd(command);
            for a in *args {
                cmd.arg(*a);
            }
            let sent: redis::RedisResult<redis::Value> = self.inner.conn.query(&cmd, name).await;
            out.push(sent.map(|_| ()).map_err(super::error::store_error));
        }
        out
    }

    /// Every command path of the store, once, on keys of the probe's own.
    async fn probes(&self) -> Vec<Result<(), StoreError>> {
        let second = Duration::from_secs(1);
        let limits = [
            Limit::fixed_window("rate-limit-verify-fw", 1_000, second),
            Limit::sliding_window("rate-limit-verify-sw", 1_000, second),
            Limit::sliding_log("rate-limit-verify-sl", 1_000, second),
            Limit::token_bucket("rate-limit-verify-tb", 1_000, 1_000, second),
            Limit::ban("rate-limit-verify-ban", 1_000, second, second),
        ];
        let who = Principal::job("rate-limit-verify");
        let mut chain = Chain::new();
        for limit in limits.iter().flatten() {
            chain = chain.check(limit, who.clone());
        }
        let mut out = Vec::new();
        match self.check(&chain).await {
            Ok(d) => {
                let given = match Reservation::of(&chain, &d, CountedIn::Store) {
                    Some(r) => self.give_back(&r).await,
                    None => Ok(()),
                };
                out.push(given);
            }
            Err(e) => out.push(Err(e)),
        }
        if let Ok(slots) = InFlight::new("rate-limit-verify-slots", 1, Duration::from_secs(2)) {
            let key = slots.slots(who.clone());
            let id = u64::from(std::process::id());
            out.push(self.take_slot(&key, id).await.map(|_| ()));
            out.push(self.renew_slot(&key, id).await.map(|_| ()));
            out.push(self.release_slot(&key, id).await);
        }
        let id = format!("rate-limit-verify-{}", std::process::id());
        out.push(self.first_seen(&id, second).await.map(|_| ()));
        out.push(Dedupe::release(self, &id).await);
        if let Some(Ok(limit)) = limits.first() {
            out.push(self.reset(&limit.key(who)).await);
        }
        if let Some(Ok(ban)) = limits.last() {
            out.push(self.bans(ban).await.map(|_| ()));
        }
        out
    }
}

/// `Err` naming every command refused in `results`; the first other error as it is.
fn refusals(results: Vec<Result<(), StoreError>>) -> Result<(), VerifyError> {
    let mut missing = BTreeSet::new();
    for result in results {
        if let Err(e) = result {
            match refused_command(&e) {
                Some(what) => {
                    missing.insert(what);
                }
                None => return Err(VerifyError::Store(e)),
            }
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    Err(VerifyError::Permission {
        missing: missing.into_iter().collect(),
    })
}

/// Whether `version` (`6.0.16`) is older than [`OLDEST`].
fn older_than_oldest(version: &str) -> bool {
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let major = parts.next().unwrap_or(0);
    let minor = parts.next().unwrap_or(0);
    (major, minor) < OLDEST
}

/// What a permission refusal names: the command (`evalsha`), `keys` for a key outside
/// the user's patterns, `channels` for a channel outside them; `None` for any other error.
fn refused_command(e: &StoreError) -> Option<String> {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    let lower = text.to_ascii_lowercase();
    // Inside a script the refusal names no command (`the user executing the script can't
    // run this command`), and no key.
    let in_script = lower.contains("user executing the script can't");
    if !lower.contains("noperm") && !lower.contains("no permissions") && !in_script {
        return None;
    }
    if lower.contains("access one of the keys")
        || lower.contains("access a key")
        || lower.contains("access at least one of the keys")
    {
        return Some("keys".to_owned());
    }
    if lower.contains("access a channel") || lower.contains("access one of the channels") {
        return Some("channels".to_owned());
    }
    match lower.split("run the '").nth(1) {
        Some(after) => after.split('\'').next().map(str::to_owned),
        None => Some("a command inside a script".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_older_than_6_2_are_too_old() {
        assert!(older_than_oldest("6.0.16"));
        assert!(older_than_oldest("5.0.7"));
        assert!(!older_than_oldest("6.2.5"));
        assert!(!older_than_oldest("7.0.15"));
        assert!(!older_than_oldest("8.0.1"));
        assert!(!older_than_oldest("10.0.0"));
    }
}
