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
//! [limits.plan]                # Limit::calendar (feature `calendar`): a month from the 15th
//! algorithm = "calendar"
//! quota = 10000
//! period = "month"             # day | week | week:<first day, e.g. sunday> | month
//! zone = "Europe/Berlin"       # UTC (default) | an offset, +05:30 | an IANA name
//! anchor = "15 09:00"          # the day of the month, the time, or both (default: the 1st, 00:00)
//!
//! [in_flight.exports]          # InFlight: at most 2 at once per principal
//! max = 2
//! ttl = "30s"
//!
//! [access]                     # allow and deny lists (ratekeeper_tower::access)
//! allow = ["10.0.0.0/8", "2001:db8::/32"]
//! deny = ["203.0.113.0/24"]
//! ```
//!
//! | code | when |
//! |---|---|
//! | `config.invalid` | the file does not parse, or has an unknown field (a `zone` or an `anchor` on a limit that is not a calendar quota) |
//! | `rate_limits.store_invalid` | an unknown store kind, or a missing URL |
//! | `redis.url_invalid` | a URL that does not parse |
//! | `limit.name_invalid` | a limit name unusable as a key or structured-field string |
//! | `limit.algorithm_invalid` | an unknown algorithm (`calendar` without the `calendar` feature) |
//! | `calendar.period_invalid`, `calendar.zone_unknown`, `calendar.anchor_invalid` | a calendar quota's `period`, `zone` or `anchor` |
//! | `limit.quota_zero`, `limit.window_invalid`, `limit.rate_too_high`, `limit.overflow`, `limit.lease_invalid`, `limit.delay_invalid`, `limit.in_flight_invalid` | as for limits built in code (an unknown `growth` is `limit.delay_invalid`) |
//! | `access.entry_invalid` | an allow or deny entry that is neither a CIDR nor an address |
//! | `policy.invalid` | an unknown failure policy |
//! | `rule.unknown_limit` | code asks for a limit the file does not define |

use std::collections::BTreeMap;
use std::time::Duration;

use crate::error::{ConfigError, ConfigErrorKind};
use crate::limit::Limit;
use crate::limiter::{FailurePolicy, Limiter};
use crate::store::{AnyStore, MemoryStore};

mod parse;
mod raw;

use parse::{access_entry, duration, invalid, limit, policy};
use raw::{RawFile, RawInFlight, RawLimit, RawStore};

/// Which store the configuration asks for.
///
/// You read it (`Config::store_kind`) to log which store a configuration file asks for;
/// `Config::store` builds that store.
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
///
/// You need it when limits come from a TOML file rather than code (feature `config`): load
/// it at start, then take the store, the limiter and each named limit from it.
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
        let store = store_kind(&s)?;
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
        let limits = limits(&raw.limits)?;
        for (list, entries) in [("allow", &raw.access.allow), ("deny", &raw.access.deny)] {
            for (i, e) in entries.iter().enumerate() {
                access_entry(e, format!("access.{list}[{i}]"))?;
            }
        }
        let in_flight = in_flight(&raw.in_flight)?;
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
    /// IP address): for `ratekeeper_tower::access::List::parse`.
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

/// The `[store]` table's kind and where it lives.
fn store_kind(s: &RawStore) -> Result<StoreKind, ConfigError> {
    Ok(match s.kind.as_deref() {
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
    })
}

/// The `[limits.NAME]` tables, each with its failure policy.
fn limits(
    raw: &BTreeMap<String, RawLimit>,
) -> Result<BTreeMap<String, (Limit, FailurePolicy)>, ConfigError> {
    let mut limits = BTreeMap::new();
    for (name, raw) in raw {
        let l = limit(name, raw)?;
        let p = policy(
            raw.on_store_error.as_deref(),
            format!("limits.{name}.on_store_error"),
        )?;
        limits.insert(name.clone(), (l, p));
    }
    Ok(limits)
}

/// The `[in_flight.NAME]` tables.
fn in_flight(
    raw: &BTreeMap<String, RawInFlight>,
) -> Result<BTreeMap<String, crate::InFlight>, ConfigError> {
    let mut in_flight = BTreeMap::new();
    for (name, raw) in raw {
        let path = format!("in_flight.{name}");
        let ttl = duration(&raw.ttl, format!("{path}.ttl"))?;
        let l = crate::InFlight::new(name, raw.max, ttl).map_err(|e| e.at(&path))?;
        in_flight.insert(name.clone(), l);
    }
    Ok(in_flight)
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
