//! Configuration from a TOML file (feature `config`): the store, the limits and their
//! failure policies, the timeouts. Code binds rules to routes by limit name; everything is
//! validated up front, and every error has a stable code and names its field.
//!
//! ```toml
//! [store]                      # absent: the in-memory store
//! kind = "redis"               # memory | redis | cluster
//! url = "redis://127.0.0.1:6379/"
//! # nodes = ["redis://10.0.0.1:7000/", "redis://10.0.0.2:7000/"]   # cluster
//! prefix = "rl"
//! timeout = "500ms"            # the limiter's budget per store call
//! cooldown = "1s"
//!
//! [limits.poll]
//! algorithm = "sliding_window" # fixed_window | sliding_window | sliding_log | token_bucket | ban
//! quota = 20
//! window = "60s"               # ms, s, m, h, d
//! on_store_error = "open"      # closed (default) | memory | open
//!
//! [limits.everyone]
//! algorithm = "fixed_window"
//! quota = 100000
//! window = "1s"
//! lease = { max_slice = 100, lifetime = "50ms" }   # Limit::leased: a hot key on Redis
//!
//! [limits.host]
//! algorithm = "token_bucket"
//! capacity = 10
//! refill = 2
//! period = "1s"
//!
//! [limits.sign-in-account]     # Limit::delayed: 5 at once, then held 1 s, 2 s, 4 s, 8 s, ...
//! algorithm = "sliding_log"
//! quota = 1000
//! window = "15m"
//! delay = { after = 5, first = "1s", max = "8s", growth = "doubling", max_held = 5 }
//!
//! [limits.sign-in-ban]         # Limit::ban: 5 refusals within 10 minutes ban for an hour
//! algorithm = "ban"
//! after = 5
//! within = "10m"
//! duration = "1h"
//!
//! [in_flight.exports]          # InFlight: at most 2 at once per principal
//! max = 2
//! ttl = "30s"
//!
//! [access]                     # allow and deny lists (rate_limit_tower::access)
//! allow = ["10.0.0.0/8", "2001:db8::/32"]
//! deny = ["203.0.113.0/24"]
//! ```
//!
//! | code | when |
//! |---|---|
//! | `config.invalid` | the file does not parse, or has an unknown field |
//! | `rate_limits.store_invalid` | an unknown store kind, or a missing URL |
//! | `redis.url_invalid` | a URL that does not parse |
//! | `limit.name_invalid` | a limit name unusable as a key or structured-field string |
//! | `limit.algorithm_invalid` | an unknown algorithm |
//! | `limit.quota_zero`, `limit.window_invalid`, `limit.rate_too_high`, `limit.overflow`, `limit.lease_invalid`, `limit.delay_invalid`, `limit.in_flight_invalid` | as for limits built in code (an unknown `growth` is `limit.delay_invalid`) |
//! | `access.entry_invalid` | an allow or deny entry that is neither a CIDR nor an address |
//! | `policy.invalid` | an unknown failure policy |
//! | `rule.unknown_limit` | code asks for a limit the file does not define |

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use crate::error::{ConfigError, ConfigErrorKind};
use crate::limit::Limit;
use crate::limiter::{FailurePolicy, Limiter};
use crate::store::{AnyStore, MemoryStore};

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    store: Option<RawStore>,
    #[serde(default)]
    limits: BTreeMap<String, RawLimit>,
    #[serde(default)]
    access: RawAccess,
    #[serde(default)]
    in_flight: BTreeMap<String, RawInFlight>,
}

/// `[in_flight.NAME]`: an in-flight limit.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawInFlight {
    max: u32,
    ttl: String,
}

/// `delay = { .. }` of a limit.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDelay {
    after: u64,
    first: String,
    max: String,
    growth: Option<String>,
    max_held: Option<u32>,
}

/// `[access]`: allow and deny lists of CIDRs and IP addresses.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAccess {
    #[serde(default)]
    allow: Vec<String>,
    #[serde(default)]
    deny: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStore {
    kind: Option<String>,
    url: Option<String>,
    nodes: Option<Vec<String>>,
    prefix: Option<String>,
    timeout: Option<String>,
    cooldown: Option<String>,
    max_keys: Option<usize>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLimit {
    algorithm: String,
    quota: Option<u64>,
    window: Option<String>,
    capacity: Option<u64>,
    refill: Option<u64>,
    period: Option<String>,
    after: Option<u64>,
    within: Option<String>,
    duration: Option<String>,
    on_store_error: Option<String>,
    lease: Option<RawLease>,
    delay: Option<RawDelay>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLease {
    max_slice: u64,
    lifetime: String,
}

/// Which store the configuration asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreKind {
    /// The in-memory store (also when `[store]` is absent).
    Memory {
        /// The key cap.
        max_keys: Option<usize>,
    },
    /// One Redis server.
    Redis {
        /// Its URL.
        url: String,
    },
    /// A Redis Cluster.
    Cluster {
        /// Some of its nodes' URLs.
        nodes: Vec<String>,
    },
}

/// A validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    store: StoreKind,
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    prefix: Option<String>,
    timeout: Option<Duration>,
    cooldown: Option<Duration>,
    limits: BTreeMap<String, (Limit, FailurePolicy)>,
    allow: Vec<String>,
    deny: Vec<String>,
    in_flight: BTreeMap<String, crate::InFlight>,
}

/// A limit's `delay = { .. }`, applied. Fields are named from the limit (the caller adds
/// its path).
fn delayed(l: Limit, raw: &RawDelay) -> Result<Limit, ConfigError> {
    let first = duration(&raw.first, "delay.first".to_owned())?;
    let max = duration(&raw.max, "delay.max".to_owned())?;
    let delay = match raw.growth.as_deref() {
        None | Some("doubling") => crate::Delay::doubling(raw.after, first, max),
        Some("linear") => crate::Delay::linear(raw.after, first, max),
        Some(other) => Err(invalid(
            ConfigErrorKind::DelayInvalid,
            "delay.growth".to_owned(),
            format!("{other:?}: use doubling or linear"),
        )),
    }?;
    let delay = match raw.max_held {
        Some(n) => delay.max_held(n)?,
        None => delay,
    };
    l.delayed(delay)
}

/// Checks an allow or deny list entry: a CIDR (`10.0.0.0/8`, `2001:db8::/32`) or an IP
/// address. `access.entry_invalid` naming the entry (`access.allow[2]`) otherwise.
fn access_entry(entry: &str, field: String) -> Result<(), ConfigError> {
    let (addr, len) = match entry.trim().split_once('/') {
        Some((a, l)) => (a, Some(l)),
        None => (entry.trim(), None),
    };
    let bits = match addr.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(_)) => 32,
        Ok(std::net::IpAddr::V6(_)) => 128,
        Err(_) => 0,
    };
    let ok = bits > 0
        && len.is_none_or(|l| l.parse::<u8>().is_ok_and(|l| l <= bits) && !l.starts_with('+'));
    if ok {
        Ok(())
    } else {
        Err(invalid(
            ConfigErrorKind::AccessEntryInvalid,
            field,
            "not a CIDR (10.0.0.0/8, 2001:db8::/32) or an IP address",
        ))
    }
}

fn invalid(kind: ConfigErrorKind, field: String, detail: impl Into<String>) -> ConfigError {
    ConfigError::new(kind, field, detail)
}

/// `500ms`, `60s`, `15m`, `1h`, `1d`.
fn duration(text: &str, field: String) -> Result<Duration, ConfigError> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num.parse().map_err(|_| {
        invalid(
            ConfigErrorKind::WindowInvalid,
            field.clone(),
            format!("{text:?} is not a duration like 60s"),
        )
    })?;
    let secs = |m: u64| Duration::from_secs(n.saturating_mul(m));
    Ok(match unit.trim() {
        "ms" => Duration::from_millis(n),
        "s" => secs(1),
        "m" => secs(60),
        "h" => secs(3_600),
        "d" => secs(86_400),
        _ => {
            return Err(invalid(
                ConfigErrorKind::WindowInvalid,
                field,
                format!("{text:?}: use ms, s, m, h or d"),
            ));
        }
    })
}

fn policy(text: Option<&str>, field: String) -> Result<FailurePolicy, ConfigError> {
    match text {
        None | Some("closed") => Ok(FailurePolicy::Closed),
        Some("memory") => Ok(FailurePolicy::Memory),
        Some("open") => Ok(FailurePolicy::Open),
        Some(other) => Err(invalid(
            ConfigErrorKind::PolicyInvalid,
            field,
            format!("{other:?}: use closed, memory or open"),
        )),
    }
}

fn need<T>(v: Option<T>, path: &str, name: &str) -> Result<T, ConfigError> {
    v.ok_or_else(|| {
        invalid(
            ConfigErrorKind::ConfigInvalid,
            format!("{path}.{name}"),
            "this field is required",
        )
    })
}

fn limit(name: &str, raw: &RawLimit) -> Result<Limit, ConfigError> {
    let path = format!("limits.{name}");
    let window = |field: &str, v: &Option<String>| -> Result<Duration, ConfigError> {
        duration(&need(v.clone(), &path, field)?, format!("{path}.{field}"))
    };
    let built = match raw.algorithm.as_str() {
        "fixed_window" => Limit::fixed_window(
            name,
            need(raw.quota, &path, "quota")?,
            window("window", &raw.window)?,
        ),
        "sliding_window" => Limit::sliding_window(
            name,
            need(raw.quota, &path, "quota")?,
            window("window", &raw.window)?,
        ),
        "sliding_log" => Limit::sliding_log(
            name,
            need(raw.quota, &path, "quota")?,
            window("window", &raw.window)?,
        ),
        "token_bucket" => Limit::token_bucket(
            name,
            need(raw.capacity, &path, "capacity")?,
            need(raw.refill, &path, "refill")?,
            window("period", &raw.period)?,
        ),
        "ban" => Limit::ban(
            name,
            need(raw.after, &path, "after")?,
            window("within", &raw.within)?,
            window("duration", &raw.duration)?,
        ),
        other => {
            return Err(invalid(
                ConfigErrorKind::AlgorithmInvalid,
                format!("{path}.algorithm"),
                format!(
                    "{other:?}: use fixed_window, sliding_window, sliding_log, token_bucket or ban"
                ),
            ));
        }
    };
    let built = match (built, &raw.lease) {
        (Ok(l), Some(lease)) => {
            let lifetime = duration(&lease.lifetime, format!("{path}.lease.lifetime"))?;
            l.leased(lease.max_slice, lifetime)
        }
        (built, _) => built,
    };
    let built = match (built, &raw.delay) {
        (Ok(l), Some(d)) => delayed(l, d),
        (built, _) => built,
    };
    built.map_err(|e| {
        if e.kind() == ConfigErrorKind::NameInvalid {
            ConfigError::new(e.kind(), path.clone(), e.to_string())
        } else {
            e.at(&path)
        }
    })
}

impl Config {
    /// Parses and validates a configuration.
    pub fn from_toml(text: &str) -> Result<Self, ConfigError> {
        let raw: RawFile = toml::from_str(text).map_err(|e| {
            invalid(
                ConfigErrorKind::ConfigInvalid,
                "file".to_owned(),
                e.message().to_owned(),
            )
        })?;
        let s = raw.store.unwrap_or_default();
        let store = match s.kind.as_deref() {
            None | Some("memory") => StoreKind::Memory {
                max_keys: s.max_keys,
            },
            Some("redis") => {
                let url = s.url.clone().ok_or_else(|| {
                    invalid(
                        ConfigErrorKind::StoreKindInvalid,
                        "store.url".to_owned(),
                        "a redis store needs a url",
                    )
                })?;
                check_url(&url, "store.url")?;
                StoreKind::Redis { url }
            }
            Some("cluster") => {
                let nodes = s.nodes.clone().filter(|n| !n.is_empty()).ok_or_else(|| {
                    invalid(
                        ConfigErrorKind::StoreKindInvalid,
                        "store.nodes".to_owned(),
                        "a cluster needs nodes",
                    )
                })?;
                for (i, n) in nodes.iter().enumerate() {
                    check_url(n, &format!("store.nodes[{i}]"))?;
                }
                StoreKind::Cluster { nodes }
            }
            Some(other) => {
                return Err(invalid(
                    ConfigErrorKind::StoreKindInvalid,
                    "store.kind".to_owned(),
                    format!("{other:?}: use memory, redis or cluster"),
                ));
            }
        };
        let timeout = s
            .timeout
            .as_deref()
            .map(|t| duration(t, "store.timeout".to_owned()))
            .transpose()?;
        let cooldown = s
            .cooldown
            .as_deref()
            .map(|t| duration(t, "store.cooldown".to_owned()))
            .transpose()?;
        let mut limits = BTreeMap::new();
        for (name, raw) in &raw.limits {
            let l = limit(name, raw)?;
            let p = policy(
                raw.on_store_error.as_deref(),
                format!("limits.{name}.on_store_error"),
            )?;
            limits.insert(name.clone(), (l, p));
        }
        for (list, entries) in [("allow", &raw.access.allow), ("deny", &raw.access.deny)] {
            for (i, e) in entries.iter().enumerate() {
                access_entry(e, format!("access.{list}[{i}]"))?;
            }
        }
        let mut in_flight = BTreeMap::new();
        for (name, raw) in &raw.in_flight {
            let path = format!("in_flight.{name}");
            let ttl = duration(&raw.ttl, format!("{path}.ttl"))?;
            let l = crate::InFlight::new(name, raw.max, ttl).map_err(|e| e.at(&path))?;
            in_flight.insert(name.clone(), l);
        }
        Ok(Self {
            store,
            prefix: s.prefix,
            timeout,
            cooldown,
            limits,
            allow: raw.access.allow,
            deny: raw.access.deny,
            in_flight,
        })
    }

    /// The in-flight limit `[in_flight.NAME]` (`rule.unknown_limit` otherwise).
    pub fn in_flight(&self, name: &str) -> Result<crate::InFlight, ConfigError> {
        self.in_flight.get(name).cloned().ok_or_else(|| {
            invalid(
                ConfigErrorKind::UnknownLimit,
                format!("in_flight.{name}"),
                "no such in-flight limit in the configuration",
            )
        })
    }

    /// The `[access]` table's `allow` and `deny` lists, validated (each entry a CIDR or an
    /// IP address): for `rate_limit_tower::access::List::parse`.
    pub fn access_lists(&self) -> (&[String], &[String]) {
        (&self.allow, &self.deny)
    }

    /// Reads, parses and validates a file.
    pub fn from_file(path: impl AsRef<std::path::Path>) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path.as_ref()).map_err(|e| {
            invalid(
                ConfigErrorKind::ConfigInvalid,
                "file".to_owned(),
                format!("cannot read it: {e}"),
            )
        })?;
        Self::from_toml(&text)
    }

    /// The store kind.
    pub fn store_kind(&self) -> &StoreKind {
        &self.store
    }

    /// The limit named `name`, for binding to a route (`rule.unknown_limit` otherwise).
    /// Each call returns the same shared limit, so runtime changes reach every route.
    pub fn limit(&self, name: &str) -> Result<Limit, ConfigError> {
        self.entry(name).map(|(l, _)| l.clone())
    }

    /// The failure policy of the limit named `name`.
    pub fn policy(&self, name: &str) -> Result<FailurePolicy, ConfigError> {
        self.entry(name).map(|(_, p)| *p)
    }

    /// The configured limit if the file defines `default`'s name, else `default`: a
    /// default in code, overridden from configuration.
    pub fn limit_or(&self, default: Limit) -> Result<Limit, ConfigError> {
        match self.limits.get(default.name()) {
            Some((configured, _)) => {
                default.set_from(configured)?;
                Ok(default)
            }
            None => Ok(default),
        }
    }

    fn entry(&self, name: &str) -> Result<&(Limit, FailurePolicy), ConfigError> {
        self.limits.get(name).ok_or_else(|| {
            invalid(
                ConfigErrorKind::UnknownLimit,
                format!("limits.{name}"),
                format!("no limit named {name:?} in the configuration"),
            )
        })
    }

    /// Builds the store (no I/O: a Redis store connects on first use).
    pub fn store(&self) -> Result<AnyStore, ConfigError> {
        match &self.store {
            StoreKind::Memory { max_keys } => {
                let mut b = MemoryStore::builder();
                if let Some(m) = max_keys {
                    b = b.max_keys(*m);
                }
                Ok(AnyStore::Memory(b.build()?))
            }
            #[cfg(feature = "redis")]
            StoreKind::Redis { url } => {
                let mut b = crate::RedisStore::builder(url.clone());
                if let Some(p) = &self.prefix {
                    b = b.prefix(p.clone());
                }
                if let Some(t) = self.timeout {
                    b = b.response_timeout(t).connect_timeout(t);
                }
                Ok(AnyStore::Redis(b.build()?))
            }
            #[cfg(feature = "cluster")]
            StoreKind::Cluster { nodes } => {
                let mut b = crate::RedisStore::cluster_builder(nodes.clone());
                if let Some(p) = &self.prefix {
                    b = b.prefix(p.clone());
                }
                if let Some(t) = self.timeout {
                    b = b.response_timeout(t).connect_timeout(t);
                }
                Ok(AnyStore::Redis(b.build()?))
            }
            #[allow(unreachable_patterns)]
            _ => Err(invalid(
                ConfigErrorKind::StoreKindInvalid,
                "store.kind".to_owned(),
                "this build has no Redis support (features redis, cluster)",
            )),
        }
    }

    /// The limiter: the store with the configured timeout and cool-down.
    pub fn limiter(&self) -> Result<Limiter<AnyStore>, ConfigError> {
        let name = match self.store {
            StoreKind::Memory { .. } => "memory",
            StoreKind::Redis { .. } => "redis",
            StoreKind::Cluster { .. } => "redis-cluster",
        };
        let mut b = Limiter::builder(self.store()?).name(name);
        if let Some(t) = self.timeout {
            b = b.timeout(t);
        }
        if let Some(c) = self.cooldown {
            b = b.cooldown(c);
        }
        b.build()
    }
}

fn check_url(url: &str, field: &str) -> Result<(), ConfigError> {
    let ok =
        (url.starts_with("redis://") || url.starts_with("rediss://") || url.starts_with("unix://"))
            && url
                .split("://")
                .nth(1)
                .is_some_and(|rest| !rest.is_empty() && !rest.contains(' '));
    if ok {
        Ok(())
    } else {
        Err(invalid(
            ConfigErrorKind::UrlInvalid,
            field.to_owned(),
            format!("{url:?} is not a redis:// URL"),
        ))
    }
}

#[cfg(test)]
mod tests;
