//! The store named by the environment ([`AnyStore::from_env`]): one of
//!
//! | variable | store |
//! |---|---|
//! | `REDIS_URL=redis://host:port/` | standalone Redis |
//! | `REDIS_CLUSTER=host:port,host:port,…` | Redis Cluster, from these seed nodes |
//! | `REDIS_SENTINEL=host:port,…` with `REDIS_SENTINEL_MASTER=name` | the primary those Sentinels name |
//! | none of them | process memory |
//!
//! More than one set is a configuration error that names them (`store.invalid`, its
//! field the variables). Nothing connects when the store is built: a server starts while
//! Redis is down (call [`RedisStore::verify`](crate::RedisStore::verify) to check it at start).
//! A variable that names a Redis store in a build without the feature it needs
//! (`redis`, `cluster`, `sentinel`, `tls` for `REDIS_CA_CERT`) is an error naming both.
//!
//! **TLS**: write the nodes as `rediss://host:port/` URLs (all three accept URLs); servers
//! are verified against the system's roots, or against the PEM certificate authority in the
//! file `REDIS_CA_CERT` names (a private CA). A file that cannot be read is a configuration
//! error naming `REDIS_CA_CERT`.

use crate::error::{ConfigError, ConfigErrorKind};
use crate::store::{AnyStore, MemoryStore};

/// A store named by the environment (see the module docs).
///
/// You need it to read the store's settings from the environment and build the store later,
/// or from a lookup of your own (`StoreEnv::from_lookup`); `AnyStore::from_env` does both
/// at once.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreEnv {
    /// Process memory.
    #[default]
    Memory,
    /// `REDIS_URL`.
    Redis(String),
    /// `REDIS_CLUSTER`, as URLs.
    Cluster(Vec<String>),
    /// `REDIS_SENTINEL` (as URLs) and `REDIS_SENTINEL_MASTER`.
    Sentinel {
        /// The Sentinels.
        sentinels: Vec<String>,
        /// The primary's name.
        master: String,
    },
}

const VARS: [&str; 3] = ["REDIS_URL", "REDIS_CLUSTER", "REDIS_SENTINEL"];

/// `host:port` or a URL → a URL.
fn url(node: &str) -> String {
    if node.contains("://") {
        node.to_owned()
    } else {
        format!("redis://{node}/")
    }
}

fn list(v: &str) -> Vec<String> {
    v.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(url)
        .collect()
}

impl StoreEnv {
    /// From the process environment.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// From any lookup (tests pass a map).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let set: Vec<(&str, String)> = VARS
            .iter()
            .filter_map(|k| get(k).filter(|v| !v.trim().is_empty()).map(|v| (*k, v)))
            .collect();
        if set.len() > 1 {
            let names: Vec<&str> = set.iter().map(|(k, _)| *k).collect();
            return Err(ConfigError::new(
                ConfigErrorKind::StoreInvalid,
                names.join(", "),
                format!(
                    "set one of REDIS_URL, REDIS_CLUSTER, REDIS_SENTINEL, not {}",
                    names.join(" and ")
                ),
            ));
        }
        Ok(match set.into_iter().next() {
            None => Self::Memory,
            Some(("REDIS_URL", v)) => Self::Redis(v.trim().to_owned()),
            Some(("REDIS_CLUSTER", v)) => Self::Cluster(list(&v)),
            Some((_, v)) => Self::Sentinel {
                sentinels: list(&v),
                master: get("REDIS_SENTINEL_MASTER")
                    .filter(|m| !m.trim().is_empty())
                    .ok_or_else(|| {
                        ConfigError::new(
                            ConfigErrorKind::StoreInvalid,
                            "REDIS_SENTINEL_MASTER",
                            "REDIS_SENTINEL needs REDIS_SENTINEL_MASTER, the primary's name",
                        )
                    })?,
            },
        })
    }

    /// The store (not connected yet), with `REDIS_CA_CERT` from the process environment.
    ///
    /// A Redis store (every variant but [`Memory`](Self::Memory)) must be built inside a
    /// Tokio runtime, the one that will serve requests (in `#[tokio::main]`, say): outside
    /// one the answer is `store.no_runtime`. The memory store needs none.
    pub fn build(&self) -> Result<AnyStore, ConfigError> {
        self.build_from(|k| std::env::var(k).ok())
    }

    /// The same, with `REDIS_CA_CERT` from any lookup (and the same need of a Tokio runtime
    /// for a Redis store).
    pub fn build_from(
        &self,
        get: impl Fn(&str) -> Option<String>,
    ) -> Result<AnyStore, ConfigError> {
        match self {
            Self::Memory => Ok(AnyStore::Memory(MemoryStore::new())),
            #[cfg(feature = "redis")]
            redis => {
                let ca = get("REDIS_CA_CERT").filter(|p| !p.trim().is_empty());
                redis::build(redis, ca.as_deref())
            }
            #[cfg(not(feature = "redis"))]
            _ => {
                let _ = get;
                Err(needs("REDIS_URL, REDIS_CLUSTER, REDIS_SENTINEL", "redis"))
            }
        }
    }
}

/// A variable set in a build without the feature it needs.
#[allow(dead_code, reason = "unused when every feature is on")]
fn needs(var: &str, feature: &str) -> ConfigError {
    ConfigError::new(
        ConfigErrorKind::StoreInvalid,
        var.to_owned(),
        format!(
            "{var} names a store this build cannot reach: turn on ratekeeper-core's feature `{feature}`"
        ),
    )
}

#[cfg(feature = "redis")]
mod redis {
    use super::StoreEnv;
    use crate::error::{ConfigError, ConfigErrorKind};
    use crate::store::{AnyStore, RedisStore, RedisStoreBuilder};

    pub(super) fn build(env: &StoreEnv, ca: Option<&str>) -> Result<AnyStore, ConfigError> {
        let pem = match ca {
            None => None,
            Some(path) => Some(std::fs::read(path.trim()).map_err(|e| {
                ConfigError::new(
                    ConfigErrorKind::StoreInvalid,
                    "REDIS_CA_CERT",
                    format!("cannot read the CA certificate file: {}", e.kind()),
                )
            })?),
        };
        let trusting = |b: RedisStoreBuilder| -> Result<RedisStoreBuilder, ConfigError> {
            match &pem {
                None => Ok(b),
                #[cfg(feature = "tls")]
                Some(pem) => Ok(b.tls_root_certificate(pem.clone())),
                #[cfg(not(feature = "tls"))]
                Some(_) => Err(super::needs("REDIS_CA_CERT", "tls")),
            }
        };
        let store = match env {
            StoreEnv::Redis(url) => trusting(RedisStore::builder(url.clone()))?.build()?,
            #[cfg(feature = "cluster")]
            StoreEnv::Cluster(nodes) => {
                trusting(RedisStore::cluster_builder(nodes.clone()))?.build()?
            }
            #[cfg(not(feature = "cluster"))]
            StoreEnv::Cluster(_) => return Err(super::needs("REDIS_CLUSTER", "cluster")),
            #[cfg(feature = "sentinel")]
            StoreEnv::Sentinel { sentinels, master } => trusting(RedisStore::sentinel_builder(
                sentinels.clone(),
                master.clone(),
            ))?
            .build()?,
            #[cfg(not(feature = "sentinel"))]
            StoreEnv::Sentinel { .. } => return Err(super::needs("REDIS_SENTINEL", "sentinel")),
            StoreEnv::Memory => return Ok(AnyStore::Memory(crate::store::MemoryStore::new())),
        };
        Ok(AnyStore::Redis(store))
    }
}

impl AnyStore {
    /// The store the environment names (see [`StoreEnv`]: `REDIS_URL`, `REDIS_CLUSTER`,
    /// `REDIS_SENTINEL` with `REDIS_SENTINEL_MASTER`, `REDIS_CA_CERT`; none of them: process
    /// memory). Errors name the variables. When a variable names Redis, call it inside the
    /// Tokio runtime that will serve requests (`store.no_runtime` outside one, see
    /// [`StoreEnv::build`]); the memory store needs none.
    ///
    /// ```
    /// // With none of the variables set, process memory.
    /// # // (the doctest's environment sets none of them)
    /// let store = ratekeeper_core::AnyStore::from_env()?;
    /// # let _ = store;
    /// # Ok::<(), ratekeeper_core::ConfigError>(())
    /// ```
    pub fn from_env() -> Result<Self, ConfigError> {
        StoreEnv::from_env()?.build()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Result<StoreEnv, ConfigError> {
        StoreEnv::from_lookup(|k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| (*v).to_owned())
        })
    }

    #[test]
    fn one_variable_names_one_store() {
        assert_eq!(env(&[]).unwrap(), StoreEnv::Memory);
        assert_eq!(
            env(&[("REDIS_URL", "redis://10.0.0.1:6379/")]).unwrap(),
            StoreEnv::Redis("redis://10.0.0.1:6379/".into())
        );
        assert_eq!(
            env(&[("REDIS_CLUSTER", "10.0.0.1:7000, 10.0.0.2:7000")]).unwrap(),
            StoreEnv::Cluster(vec![
                "redis://10.0.0.1:7000/".into(),
                "redis://10.0.0.2:7000/".into()
            ])
        );
        assert_eq!(
            env(&[
                ("REDIS_SENTINEL", "10.0.0.5:26379"),
                ("REDIS_SENTINEL_MASTER", "main")
            ])
            .unwrap(),
            StoreEnv::Sentinel {
                sentinels: vec!["redis://10.0.0.5:26379/".into()],
                master: "main".into()
            }
        );
        assert_eq!(env(&[("REDIS_URL", "  ")]).unwrap(), StoreEnv::Memory);
    }

    #[test]
    fn two_variables_or_a_nameless_sentinel_are_errors_that_name_them() {
        let e = env(&[("REDIS_URL", "redis://a/"), ("REDIS_CLUSTER", "b:1")]).unwrap_err();
        assert_eq!(e.code(), "store.invalid");
        assert_eq!(e.field(), "REDIS_URL, REDIS_CLUSTER");
        let e = env(&[("REDIS_SENTINEL", "s:26379")]).unwrap_err();
        assert_eq!(e.field(), "REDIS_SENTINEL_MASTER");
    }

    #[cfg(feature = "tls")]
    #[tokio::test]
    async fn an_unreadable_ca_file_is_an_error_that_names_it_and_rediss_urls_pass_through() {
        let store = env(&[("REDIS_URL", "rediss://10.0.0.1:6380/")]).unwrap();
        assert_eq!(store, StoreEnv::Redis("rediss://10.0.0.1:6380/".into()));
        let e = store
            .build_from(|k| (k == "REDIS_CA_CERT").then(|| "/nonexistent/ca.pem".to_owned()))
            .unwrap_err();
        assert_eq!((e.code(), e.field()), ("store.invalid", "REDIS_CA_CERT"));
        assert!(!e.to_string().contains("nonexistent"), "{e}");
        assert!(store.build_from(|_| None).is_ok());
        let cluster = env(&[("REDIS_CLUSTER", "rediss://10.0.0.1:7000/,10.0.0.2:7000")]).unwrap();
        assert_eq!(
            cluster,
            StoreEnv::Cluster(vec![
                "rediss://10.0.0.1:7000/".into(),
                "redis://10.0.0.2:7000/".into()
            ])
        );
    }
}
