//! Connections: a lazily connected multiplexed connection, or the async cluster client.

use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{Cmd, FromRedisValue, RedisResult, ServerErrorKind, Value};

use crate::error::ConfigError;

use super::builder::url_error;
use super::script::Invocation;

pub(super) enum Conn {
    Single(ConnectionManager),
    #[cfg(feature = "cluster")]
    Cluster(Box<cluster::Lazy>),
    #[cfg(feature = "sentinel")]
    Sentinel(Box<sentinel::Follower>),
}

impl Conn {
    pub(super) fn new(
        nodes: &[String],
        cluster: bool,
        connect_timeout: Duration,
        response_timeout: Duration,
    ) -> Result<Self, ConfigError> {
        if cluster {
            #[cfg(feature = "cluster")]
            return cluster::Lazy::new(nodes, connect_timeout, response_timeout)
                .map(|c| Self::Cluster(Box::new(c)));
        }
        let url = nodes.first().map(String::as_str).unwrap_or_default();
        let client = redis::Client::open(url).map_err(|e| url_error(&e))?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(connect_timeout))
            .set_response_timeout(Some(response_timeout))
            // Reconnection attempts, not command replays: a failed command is never resent.
            .set_number_of_retries(1)
            .set_min_delay(Duration::from_millis(10))
            .set_max_delay(Duration::from_millis(100));
        let manager =
            ConnectionManager::new_lazy_with_config(client, config).map_err(|e| url_error(&e))?;
        Ok(Self::Single(manager))
    }

    /// Sentinels in front of a primary named `master`.
    #[cfg(feature = "sentinel")]
    pub(super) fn sentinel(
        sentinels: &[String],
        master: &str,
        connect_timeout: Duration,
        response_timeout: Duration,
    ) -> Result<Self, ConfigError> {
        sentinel::Follower::new(sentinels, master, connect_timeout, response_timeout)
            .map(|f| Self::Sentinel(Box::new(f)))
    }

    pub(super) fn is_cluster(&self) -> bool {
        #[cfg(feature = "cluster")]
        return matches!(self, Self::Cluster(_));
        #[cfg(not(feature = "cluster"))]
        false
    }

    /// `EVALSHA`, and `EVAL` once on `NOSCRIPT` (see [`Invocation`]).
    pub(super) async fn invoke<T: FromRedisValue>(&self, inv: &Invocation<'_>) -> RedisResult<T> {
        match self {
            Self::Single(m) => eval(&mut m.clone(), inv).await,
            #[cfg(feature = "cluster")]
            Self::Cluster(c) => {
                let mut con = c.get().await?;
                eval(&mut con, inv).await
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

    pub(super) async fn query<T: FromRedisValue>(&self, cmd: &Cmd) -> RedisResult<T> {
        match self {
            Self::Single(m) => cmd.query_async(&mut m.clone()).await,
            #[cfg(feature = "cluster")]
            Self::Cluster(c) => {
                let mut con = c.get().await?;
                cmd.query_async(&mut con).await
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

    /// `CONFIG GET param` on every master: the values seen.
    pub(super) async fn config_get(&self, param: &str) -> RedisResult<Vec<String>> {
        let mut cmd = redis::cmd("CONFIG");
        cmd.arg("GET").arg(param);
        let v: Value = match self {
            Self::Single(m) => cmd.query_async(&mut m.clone()).await?,
            #[cfg(feature = "cluster")]
            Self::Cluster(c) => {
                use redis::cluster_routing::{MultipleNodeRoutingInfo, RoutingInfo};
                let mut con = c.get().await?;
                con.route_command(
                    cmd,
                    RoutingInfo::MultiNode((MultipleNodeRoutingInfo::AllMasters, None)),
                )
                .await?
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
    match inv.cmd(false).query_async(con).await {
        Err(e) if e.kind() == redis::ErrorKind::Server(ServerErrorKind::NoScript) => {
            inv.cmd(true).query_async(con).await
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

#[cfg(feature = "cluster")]
mod cluster {
    use std::time::Duration;

    use redis::cluster::{ClusterClient, ClusterClientBuilder};
    use redis::cluster_async::ClusterConnection;
    use redis::{ErrorKind, RedisError, RedisResult};
    use tokio::sync::RwLock;

    use crate::error::ConfigError;

    use super::url_error;

    /// The cluster client, connected on first use. One node's broken connection is the
    /// client's to mend (it reconnects to that node alone): dropping the whole connection
    /// would make every key pay for one node's failure.
    pub(in crate::store::redis) struct Lazy {
        client: ClusterClient,
        con: RwLock<Option<ClusterConnection>>,
        connect_timeout: Duration,
    }

    impl Lazy {
        pub(super) fn new(
            nodes: &[String],
            connect_timeout: Duration,
            response_timeout: Duration,
        ) -> Result<Self, ConfigError> {
            let client = ClusterClientBuilder::new(nodes.iter().map(String::as_str))
                // The client's own retries would replay commands that may have run (R13).
                .retries(0)
                .connection_timeout(connect_timeout)
                .response_timeout(response_timeout)
                .build()
                .map_err(|e| url_error(&e))?;
            Ok(Self {
                client,
                con: RwLock::new(None),
                connect_timeout,
            })
        }

        pub(super) async fn get(&self) -> RedisResult<ClusterConnection> {
            if let Some(c) = self.con.read().await.as_ref() {
                return Ok(c.clone());
            }
            let mut slot = self.con.write().await;
            if let Some(c) = slot.as_ref() {
                return Ok(c.clone());
            }
            let con =
                tokio::time::timeout(self.connect_timeout, self.client.get_async_connection())
                    .await
                    .map_err(|_| {
                        RedisError::from((ErrorKind::Io, "cluster connect timed out"))
                    })??;
            *slot = Some(con.clone());
            Ok(con)
        }
    }
}

#[cfg(feature = "sentinel")]
mod sentinel {
    use std::time::Duration;

    use redis::aio::MultiplexedConnection;
    use redis::sentinel::{SentinelClient, SentinelServerType};
    use redis::{AsyncConnectionConfig, ErrorKind, RedisError, RedisResult, ServerErrorKind};
    use tokio::sync::{Mutex, RwLock};

    use crate::error::ConfigError;

    use super::url_error;

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
        ) -> Result<Self, ConfigError> {
            let client = SentinelClient::build(
                sentinels.to_vec(),
                master.to_owned(),
                None,
                SentinelServerType::Master,
            )
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

        pub(super) async fn after<T>(&self, r: &RedisResult<T>) {
            if let Err(e) = r
                && (e.is_io_error()
                    || e.is_connection_refusal()
                    || e.is_connection_dropped()
                    || e.is_timeout()
                    || e.kind() == ErrorKind::Server(ServerErrorKind::ReadOnly))
            {
                *self.con.write().await = None;
            }
        }
    }
}
