//! Connections: a lazily connected multiplexed connection, the store's own Cluster client,
//! or the primary that Sentinels name.

use std::time::Duration;

use redis::aio::ConnectionManager;
use redis::{Cmd, FromRedisValue, IntoConnectionInfo, RedisResult, ServerErrorKind, Value};

use crate::error::ConfigError;

#[cfg(feature = "cluster")]
use super::cluster::Sent;
use super::connect::{Deployment, manager_config};
use super::error::url_error;
use super::script::{Eval, Invocation};
use super::tls::Tls;

pub(super) enum Conn {
    Single(ConnectionManager, Box<redis::Client>),
    #[cfg(feature = "cluster")]
    Cluster(std::sync::Arc<super::cluster::Cluster>),
    #[cfg(feature = "sentinel")]
    Sentinel(Box<sentinel::Follower>),
}

impl Conn {
    pub(super) fn new(
        nodes: &[String],
        deployment: Deployment,
        connect_timeout: Duration,
        response_timeout: Duration,
        tls: &Tls,
    ) -> Result<Self, ConfigError> {
        if deployment == Deployment::Cluster {
            #[cfg(feature = "cluster")]
            return super::cluster::Cluster::new(nodes, connect_timeout, response_timeout, tls)
                .map(Self::Cluster);
        }
        let url = nodes.first().map(String::as_str).unwrap_or_default();
        let client = url
            .into_connection_info()
            .and_then(|info| tls.client(info))
            .map_err(|e| url_error(&e))?;
        let config = manager_config(connect_timeout, response_timeout);
        let manager = ConnectionManager::new_lazy_with_config(client.clone(), config)
            .map_err(|e| url_error(&e))?;
        Ok(Self::Single(manager, Box::new(client)))
    }

    /// Sentinels in front of a primary named `master`.
    #[cfg(feature = "sentinel")]
    pub(super) fn sentinel(
        sentinels: &[String],
        master: &str,
        connect_timeout: Duration,
        response_timeout: Duration,
        tls: &Tls,
    ) -> Result<Self, ConfigError> {
        sentinel::Follower::new(sentinels, master, connect_timeout, response_timeout, tls)
            .map(|f| Self::Sentinel(Box::new(f)))
    }

    /// A client for a connection of its own (a subscriber's) to the server that holds
    /// `name`: the server, the master owning its slot, or the primary the Sentinels name.
    pub(super) async fn client_for(&self, name: &str) -> RedisResult<redis::Client> {
        #[cfg(not(feature = "cluster"))]
        let _ = name;
        match self {
            Self::Single(_, c) => Ok((**c).clone()),
            #[cfg(feature = "cluster")]
            Self::Cluster(c) => c.client_owning(name).await,
            #[cfg(feature = "sentinel")]
            Self::Sentinel(s) => Box::pin(s.client()).await,
        }
    }

    pub(super) fn is_cluster(&self) -> bool {
        self.cluster().is_some()
    }

    /// The Cluster client, when this is one.
    #[cfg(feature = "cluster")]
    pub(super) fn cluster(&self) -> Option<&std::sync::Arc<super::cluster::Cluster>> {
        match self {
            Self::Cluster(c) => Some(c),
            _ => None,
        }
    }

    #[cfg(not(feature = "cluster"))]
    pub(super) fn cluster(&self) -> Option<&std::convert::Infallible> {
        None
    }

    /// `EVALSHA`, and `EVAL` once on `NOSCRIPT` (see [`Invocation`]).
    pub(super) async fn invoke<T: FromRedisValue>(&self, inv: &Invocation<'_>) -> RedisResult<T> {
        match self {
            Self::Single(m, _) => eval(&mut m.clone(), inv).await,
            #[cfg(feature = "cluster")]
            Self::Cluster(c) => {
                use super::cluster::{Target, slot_of};
                c.send(Target::Slot(slot_of(inv.keys)), Sent::Script, |eval| {
                    inv.cmd(eval)
                })
                .await
            }
            // Boxed: the Sentinel client's connect future is deep enough to overflow the
            // compiler's query depth in crates that nest this store's futures further.
            #[cfg(feature = "sentinel")]
            Self::Sentinel(s) => {
                Box::pin(async {
                    let mut con = s.get().await?;
                    let r = eval(&mut con, inv).await;
                    s.after(&r).await;
                    r
                })
                .await
            }
        }
    }

    /// A command on the key `name` (on a Cluster, sent to the owner of its slot).
    pub(super) async fn query<T: FromRedisValue>(&self, cmd: &Cmd, name: &str) -> RedisResult<T> {
        #[cfg(not(feature = "cluster"))]
        let _ = name;
        match self {
            Self::Single(m, _) => cmd.query_async(&mut m.clone()).await,
            #[cfg(feature = "cluster")]
            Self::Cluster(c) => {
                use super::cluster::Target;
                let slot = super::keys::hash_slot(name);
                c.send(Target::Slot(Some(slot)), Sent::Command, |_| cmd.clone())
                    .await
            }
            #[cfg(feature = "sentinel")]
            Self::Sentinel(s) => {
                Box::pin(async {
                    let mut con = s.get().await?;
                    let r = cmd.query_async(&mut con).await;
                    s.after(&r).await;
                    r
                })
                .await
            }
        }
    }

    /// The names of the string keys matching `pattern`, on every master (`SCAN`, a page
    /// of 1 000 at a time: an admin read, O(keys in the database)).
    pub(super) async fn scan(&self, pattern: &str) -> RedisResult<Vec<String>> {
        let page = |cursor: u64| {
            let mut cmd = redis::cmd("SCAN");
            cmd.arg(cursor)
                .arg("MATCH")
                .arg(pattern)
                .arg("COUNT")
                .arg(1_000)
                .arg("TYPE")
                .arg("string");
            cmd
        };
        let mut out = Vec::new();
        match self {
            #[cfg(feature = "cluster")]
            Self::Cluster(c) => {
                use super::cluster::Target;
                for m in c.masters().await? {
                    let mut cursor = 0;
                    loop {
                        let (next, names): (u64, Vec<String>) = c
                            .send(Target::Node(m.clone()), Sent::Command, |_| page(cursor))
                            .await?;
                        out.extend(names);
                        cursor = next;
                        if cursor == 0 {
                            break;
                        }
                    }
                }
            }
            _ => {
                let mut cursor = 0;
                loop {
                    let (next, names): (u64, Vec<String>) = self.query(&page(cursor), "").await?;
                    out.extend(names);
                    cursor = next;
                    if cursor == 0 {
                        break;
                    }
                }
            }
        }
        Ok(out)
    }

    /// `INFO server` of one master (on a Cluster, the first): the text it answers.
    pub(super) async fn info_server(&self) -> RedisResult<String> {
        let mut cmd = redis::cmd("INFO");
        cmd.arg("server");
        let v: Value = match self {
            Self::Single(m, _) => cmd.query_async(&mut m.clone()).await?,
            #[cfg(feature = "cluster")]
            Self::Cluster(c) => {
                use super::cluster::Target;
                let masters = c.masters().await?;
                let Some(m) = masters.into_iter().next() else {
                    return Ok(String::new());
                };
                c.send(Target::Node(m), Sent::Command, |_| cmd.clone())
                    .await?
            }
            #[cfg(feature = "sentinel")]
            Self::Sentinel(s) => {
                Box::pin(async { cmd.query_async(&mut s.get().await?).await }).await?
            }
        };
        Ok(match v {
            Value::BulkString(b) => String::from_utf8_lossy(&b).into_owned(),
            Value::VerbatimString { text, .. } | Value::SimpleString(text) => text,
            _ => String::new(),
        })
    }

    /// `CONFIG GET param` on every master: the values seen.
    pub(super) async fn config_get(&self, param: &str) -> RedisResult<Vec<String>> {
        let mut cmd = redis::cmd("CONFIG");
        cmd.arg("GET").arg(param);
        let v: Value = match self {
            Self::Single(m, _) => cmd.query_async(&mut m.clone()).await?,
            #[cfg(feature = "cluster")]
            Self::Cluster(c) => {
                use super::cluster::Target;
                let mut all = Vec::new();
                for m in c.masters().await? {
                    all.push(
                        c.send(Target::Node(m), Sent::Command, |_| cmd.clone())
                            .await?,
                    );
                }
                Value::Array(all)
            }
            #[cfg(feature = "sentinel")]
            Self::Sentinel(s) => {
                Box::pin(async { cmd.query_async(&mut s.get().await?).await }).await?
            }
        };
        let mut out = Vec::new();
        collect_values(&v, param, &mut out);
        Ok(out)
    }
}

/// `EVALSHA`; on `NOSCRIPT` (nothing ran) `EVAL` with the text, on the same connection and
/// so, on a Cluster, on the node that owns the keys.
async fn eval<C, T>(con: &mut C, inv: &Invocation<'_>) -> RedisResult<T>
where
    C: redis::aio::ConnectionLike + Send,
    T: FromRedisValue,
{
    match inv.cmd(Eval::BySha).query_async(con).await {
        Err(e) if e.kind() == redis::ErrorKind::Server(ServerErrorKind::NoScript) => {
            inv.cmd(Eval::WithText).query_async(con).await
        }
        other => other,
    }
}

/// The values in a `CONFIG GET` answer (or a map of them per node): every string that
/// is neither the parameter's name nor a node address.
fn collect_values(v: &Value, param: &str, out: &mut Vec<String>) {
    match v {
        Value::BulkString(b) => {
            let s = String::from_utf8_lossy(b).into_owned();
            if s != param && !s.contains(':') {
                out.push(s);
            }
        }
        Value::SimpleString(s) if s != param && !s.contains(':') => out.push(s.clone()),
        Value::Array(items) | Value::Set(items) => {
            items.iter().for_each(|i| collect_values(i, param, out));
        }
        Value::Map(pairs) => pairs.iter().for_each(|(k, v)| {
            collect_values(k, param, out);
            collect_values(v, param, out);
        }),
        _ => {}
    }
}

#[cfg(feature = "sentinel")]
mod sentinel {
    use std::time::Duration;

    use redis::aio::MultiplexedConnection;
    use redis::sentinel::{SentinelClient, SentinelServerType};
    use redis::{AsyncConnectionConfig, ErrorKind, RedisError, RedisResult};
    use tokio::sync::{Mutex, RwLock};

    use crate::error::ConfigError;

    use super::{Tls, url_error};

    /// The primary that the Sentinels name, connected on first use. A connection that
    /// breaks, times out or meets `READONLY` (an old primary that came back as a replica) is
    /// dropped, and the next call asks the Sentinels again: the store follows a failover
    /// and never stays on the old primary.
    pub(in crate::store::redis) struct Follower {
        sentinel: Mutex<SentinelClient>,
        con: RwLock<Option<MultiplexedConnection>>,
        config: AsyncConnectionConfig,
        connect_timeout: Duration,
    }

    impl Follower {
        pub(super) fn new(
            sentinels: &[String],
            master: &str,
            connect_timeout: Duration,
            response_timeout: Duration,
            tls: &Tls,
        ) -> Result<Self, ConfigError> {
            let secure = sentinels.iter().any(|u| u.starts_with("rediss://"));
            let client = if secure || tls.is_set() {
                tls_client(sentinels, master, tls)
            } else {
                SentinelClient::build(
                    sentinels.to_vec(),
                    String::from(master),
                    None,
                    SentinelServerType::Master,
                )
            }
            .map_err(|e| url_error(&e))?;
            Ok(Self {
                sentinel: Mutex::new(client),
                con: RwLock::new(None),
                config: AsyncConnectionConfig::new()
                    .set_connection_timeout(Some(connect_timeout))
                    .set_response_timeout(Some(response_timeout)),
                connect_timeout,
            })
        }

        pub(super) async fn get(&self) -> RedisResult<MultiplexedConnection> {
            if let Some(c) = self.con.read().await.as_ref() {
                return Ok(c.clone());
            }
            let mut slot = self.con.write().await;
            if let Some(c) = slot.as_ref() {
                return Ok(c.clone());
            }
            let connect = async {
                let client = self.sentinel.lock().await.async_get_client().await?;
                client
                    .get_multiplexed_async_connection_with_config(&self.config)
                    .await
            };
            let con = tokio::time::timeout(self.connect_timeout, connect)
                .await
                .map_err(|_| RedisError::from((ErrorKind::Io, "sentinel connect timed out")))??;
            *slot = Some(con.clone());
            Ok(con)
        }

        /// A client for the primary the Sentinels name now.
        pub(super) async fn client(&self) -> RedisResult<redis::Client> {
            self.sentinel.lock().await.async_get_client().await
        }

        pub(super) async fn after<T>(&self, r: &RedisResult<T>) {
            if let Err(e) = r
                && (e.is_io_error()
                    || e.is_connection_refusal()
                    || e.is_connection_dropped()
                    || e.is_timeout()
                    || crate::store::redis::error::is_read_only(e))
            {
                *self.con.write().await = None;
            }
        }
    }

    /// TLS to the Sentinels and to the primary they name (`rediss://` Sentinel URLs, or
    /// certificates given to the builder), with the first URL's user and password for the
    /// Sentinels.
    #[cfg(feature = "tls")]
    fn tls_client(sentinels: &[String], master: &str, tls: &Tls) -> RedisResult<SentinelClient> {
        use redis::sentinel::SentinelClientBuilder;
        use redis::{ConnectionAddr, IntoConnectionInfo, TlsMode};
        let mut infos = Vec::with_capacity(sentinels.len());
        for u in sentinels {
            infos.push(u.as_str().into_connection_info()?);
        }
        let addrs = infos.iter().map(|i| match i.addr() {
            ConnectionAddr::Tcp(host, port) => ConnectionAddr::TcpTls {
                host: host.clone(),
                port: *port,
                insecure: false,
                tls_params: None,
            },
            other => other.clone(),
        });
        let mut b = SentinelClientBuilder::new(addrs, master, SentinelServerType::Master)?
            .set_client_to_sentinel_tls_mode(TlsMode::Secure)
            .set_client_to_redis_tls_mode(TlsMode::Secure);
        if tls.is_set() {
            b = b
                .set_client_to_sentinel_certificates(tls.certificates())
                .set_client_to_redis_certificates(tls.certificates());
        }
        if let Some(first) = infos.first().map(redis::ConnectionInfo::redis_settings) {
            if let Some(user) = first.username() {
                b = b.set_client_to_sentinel_username(user);
            }
            if let Some(password) = first.password() {
                b = b.set_client_to_sentinel_password(password);
            }
        }
        b.build()
    }

    #[cfg(not(feature = "tls"))]
    fn tls_client(_: &[String], _: &str, _: &Tls) -> RedisResult<SentinelClient> {
        Err(RedisError::from((
            ErrorKind::InvalidClientConfig,
            "rediss:// needs the crate's `tls` feature",
        )))
    }
}
