//! [`RedisStoreBuilder`]: the settings, checked when the store is built.

use std::sync::Arc;
use std::time::Duration;

use redis::Script;

use super::batch::Batcher;
use super::conn::Conn;
use super::connect::Deployment;
use super::deny::DenyCache;
use super::script::{CHAIN_LUA, PACER_LUA, REFUND_LUA, SLOTS_LUA, WINDOW_LUA};
use super::tls::Tls;
use super::{KEY_VERSION, RedisInner, RedisStore};
use crate::error::{ConfigError, ConfigErrorKind};
use crate::name::is_name_byte;

const DEFAULT_PREFIX: &str = "rl";
const MAX_PREFIX_LEN: usize = 32;
const DEFAULT_DENY_CACHE: usize = 10_000;
const DEFAULT_COALESCE: usize = 32;

/// Builds a [`RedisStore`]; nothing connects until the first call.
///
/// Every Redis store starts here: its nodes (one server, a Cluster's seeds or Sentinels),
/// then the key prefix, time-outs and the rest, before `build`.
#[derive(Debug)]
#[must_use]
pub struct RedisStoreBuilder {
    nodes: Vec<String>,
    deployment: Deployment,
    /// The primary's name, when `nodes` are Sentinels.
    sentinel_master: Option<String>,
    prefix: String,
    connect_timeout: Duration,
    response_timeout: Duration,
    slack: Duration,
    deny_cache: usize,
    coalesce: usize,
    tls: Tls,
}

impl RedisStoreBuilder {
    /// The key prefix (default `rl`): 1 to 32 bytes of `A-Z a-z 0-9 . _ -`.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// How long connecting may take (default 500 ms).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How long one command may take (default 500 ms, the limiter's budget).
    pub fn response_timeout(mut self, timeout: Duration) -> Self {
        self.response_timeout = timeout;
        self
    }

    /// Extra life on every key's TTL (default 1 s).
    pub fn ttl_slack(mut self, slack: Duration) -> Self {
        self.slack = slack;
        self
    }

    /// How many refused keys the deny cache (see [`RedisStore`](crate::RedisStore), "The deny cache") holds
    /// (default 10 000);
    /// 0 turns it off, and every check goes to Redis.
    pub fn deny_cache(mut self, capacity: usize) -> Self {
        self.deny_cache = capacity;
        self
    }

    /// The most chains one call carries when checks are coalesced (default 32); 0 or 1
    /// turns coalescing off, and every check is its own call.
    ///
    /// With coalescing, a check is sent at once while fewer than two calls are in flight
    /// on the connection (on a Cluster: for its hash slot); checks that arrive while two
    /// are in flight ride the next call together (no timer). Each chain is still atomic and
    /// all-or-nothing on its own; the call
    /// shares one round trip, one read of each key and one write of each key. See the
    /// [`RedisStore`] docs ("Coalescing") for what it saves and costs.
    pub fn coalesce(mut self, max_chains: usize) -> Self {
        self.coalesce = max_chains;
        self
    }

    /// Trusts this certificate authority (PEM) for `rediss://` servers instead of the
    /// system's roots (feature `tls`): a private CA, or a managed Redis's own.
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    pub fn tls_root_certificate(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.tls.root = Some(pem.into());
        self
    }

    /// Presents this client certificate and key (PEM) to `rediss://` servers that ask for
    /// one (`tls-auth-clients yes`; feature `tls`).
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    pub fn tls_client_certificate(
        mut self,
        cert_pem: impl Into<Vec<u8>>,
        key_pem: impl Into<Vec<u8>>,
    ) -> Self {
        self.tls.client = Some((cert_pem.into(), key_pem.into()));
        self
    }

    /// Builds the store: `redis.url_invalid` for a URL that does not parse,
    /// `store.invalid` for a bad prefix. Does not connect.
    ///
    /// Call it inside a Tokio runtime (the connections it prepares belong to one):
    /// `store.no_runtime` otherwise, where redis-rs itself would panic. With coalescing on
    /// (the default), the task that sends the calls runs on this runtime: build the store
    /// in the runtime that serves requests, not in a short-lived one (once that runtime
    /// has shut down, checks fail as not sent, `redis: the store's connection task has
    /// stopped`, and each rule's failure policy answers).
    pub fn build(self) -> Result<RedisStore, ConfigError> {
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(ConfigError::new(
                ConfigErrorKind::NoRuntime,
                "runtime",
                "build the Redis store inside a Tokio runtime (e.g. in #[tokio::main])",
            ));
        }
        if self.prefix.is_empty()
            || self.prefix.len() > MAX_PREFIX_LEN
            || !self.prefix.bytes().all(is_name_byte)
        {
            return Err(ConfigError::new(
                ConfigErrorKind::StoreInvalid,
                "prefix",
                "a key prefix is 1 to 32 bytes of A-Z a-z 0-9 . _ -",
            ));
        }
        #[cfg(feature = "tls")]
        Tls::install_provider();
        let conn = match &self.sentinel_master {
            #[cfg(feature = "sentinel")]
            Some(master) => Conn::sentinel(
                &self.nodes,
                master,
                self.connect_timeout,
                self.response_timeout,
                &self.tls,
            )?,
            _ => Conn::new(
                &self.nodes,
                self.deployment,
                self.connect_timeout,
                self.response_timeout,
                &self.tls,
            )?,
        };
        let endpoint = match &self.sentinel_master {
            Some(master) => format!("{} ({master})", endpoint(&self.nodes, "redis-sentinel")),
            None if self.deployment == Deployment::Cluster => {
                endpoint(&self.nodes, "redis-cluster")
            }
            None => endpoint(&self.nodes, "redis"),
        };
        let conn = Arc::new(conn);
        let slack_ms = u64::try_from(self.slack.as_millis()).unwrap_or(u64::MAX);
        let clock = Arc::new(super::windows::ServerClock::default());
        let batch = (self.coalesce > 1)
            .then(|| Batcher::new(conn.clone(), clock.clone(), slack_ms, self.coalesce));
        Ok(RedisStore {
            inner: Arc::new(RedisInner {
                conn,
                batch,
                endpoint,
                prefix: format!("{}:{KEY_VERSION}", self.prefix),
                slack_ms,
                clock,
                chain: Script::new(CHAIN_LUA),
                window: Script::new(WINDOW_LUA),
                refund: Script::new(REFUND_LUA),
                slots: Script::new(SLOTS_LUA),
                pacer: Script::new(PACER_LUA),
                deny: (self.deny_cache > 0).then(|| DenyCache::new(self.deny_cache)),
                leases: super::lease::Leases::new(),
            }),
        })
    }
}

/// `redis host:port`, `redis-cluster host:port,host:port`, `redis-sentinel host:port,…
/// (primary)`: where the store counts, for logs and start-up lines, without a user name,
/// password, database or query.
fn endpoint(nodes: &[String], kind: &str) -> String {
    let hosts: Vec<&str> = nodes
        .iter()
        .map(|url| {
            let rest = url.split_once("://").map_or(url.as_str(), |(_, r)| r);
            let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
            authority
                .rsplit_once('@')
                .map_or(authority, |(_, host)| host)
        })
        .collect();
    format!("{kind} {}", hosts.join(","))
}

impl RedisStore {
    /// A store for one Redis server, e.g. `redis://127.0.0.1:6379/`.
    pub fn builder(url: impl Into<String>) -> RedisStoreBuilder {
        Self::builder_for(vec![url.into()], Deployment::Standalone)
    }

    /// A store for a Redis Cluster, from some of its nodes' URLs (feature `cluster`).
    #[cfg(feature = "cluster")]
    #[cfg_attr(docsrs, doc(cfg(feature = "cluster")))]
    pub fn cluster_builder<I, S>(nodes: I) -> RedisStoreBuilder
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self::builder_for(
            nodes.into_iter().map(Into::into).collect(),
            Deployment::Cluster,
        )
    }

    /// A store for the primary that Redis Sentinels name `master`, from some of the
    /// Sentinels' URLs (feature `sentinel`), e.g. `redis://10.0.0.5:26379/`. The store asks
    /// the Sentinels for the primary when it first connects and again whenever the
    /// connection breaks, times out or meets `READONLY` (an old primary that came back as a
    /// replica), so it follows a failover without a restart and never stays on the old
    /// primary. Requests in between follow their rules' failure policies.
    #[cfg(feature = "sentinel")]
    #[cfg_attr(docsrs, doc(cfg(feature = "sentinel")))]
    pub fn sentinel_builder<I, S>(sentinels: I, master: impl Into<String>) -> RedisStoreBuilder
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut b = Self::builder_for(
            sentinels.into_iter().map(Into::into).collect(),
            Deployment::Standalone,
        );
        b.sentinel_master = Some(master.into());
        b
    }

    fn builder_for(nodes: Vec<String>, deployment: Deployment) -> RedisStoreBuilder {
        RedisStoreBuilder {
            nodes,
            deployment,
            sentinel_master: None,
            prefix: DEFAULT_PREFIX.to_owned(),
            connect_timeout: Duration::from_millis(500),
            response_timeout: Duration::from_millis(500),
            slack: Duration::from_secs(1),
            deny_cache: DEFAULT_DENY_CACHE,
            coalesce: DEFAULT_COALESCE,
            tls: Tls::default(),
        }
    }
}
