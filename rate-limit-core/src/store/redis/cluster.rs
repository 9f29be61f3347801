//! The store's own Redis Cluster client: a connection per master, the slot map read in
//! the background, and redirections followed here.
//!
//! Why not redis-rs's cluster client: it re-reads the slot map *on the request path* —
//! holding a lock every request waits on, asking nodes one by one (a frozen one for its
//! whole timeout) — after any `MOVED`; and its retries, which redirections need, also
//! replay commands that timed out and may have run (R13 of docs/ARCHITECTURE.md). Here:
//!
//! - every master has its own connection (a [`ConnectionManager`]), so one node's trouble
//!   is that node's alone;
//! - the slot map is read with `CLUSTER SLOTS` in the background: at the first call, every
//!   few seconds, and at once (at most every 500 ms) after a failure or a `MOVED`;
//! - `MOVED`, `ASK` and `TRYAGAIN` mean the command did not run: it is re-sent at once (to
//!   the new owner; with `ASKING` to the importing node; after a few ms for `TRYAGAIN`), at
//!   most [`MAX_REDIRECTS`] times, outside the limiter's retry budget. A command that may
//!   have run (a timeout, a dropped connection) is never re-sent.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{
    Cmd, ConnectionAddr, ConnectionInfo, ErrorKind, FromRedisValue, IntoConnectionInfo, RedisError,
    RedisResult, ServerErrorKind, Value,
};

use super::Refresh;
use super::connect::manager_config;
use super::error::url_error;
use super::keys;
use super::script::Eval;
use super::tls::Tls;
use super::topology::{Map, Topology};
use crate::error::ConfigError;

/// How many redirections one command follows. Each means the command did not run, so
/// following them is safe; a key half migrated on a busy Cluster can answer `ASK`, then
/// `TRYAGAIN`, then `ASK` again (three were too few under load: a request failed), and
/// the limiter's time budget bounds the whole.
pub(super) const MAX_REDIRECTS: u32 = 6;
/// The pause before re-sending after `TRYAGAIN` (keys of a slot half migrated), doubled
/// each time.
const TRYAGAIN_PAUSE: Duration = Duration::from_millis(5);

/// Where a command goes.
#[derive(Debug, Clone)]
pub(super) enum Target {
    /// The owner of a slot; `None`: any master.
    Slot(Option<u16>),
    /// One node, by `host:port`.
    Node(Arc<str>),
}

/// What a Cluster call sends: a script, re-sent with its text after `NOSCRIPT`, or a plain
/// command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Sent {
    /// A script ([`Invocation::cmd`](super::script::Invocation::cmd)).
    Script,
    /// A plain command.
    Command,
}

pub(in crate::store::redis) struct Cluster {
    /// The first seed's settings (scheme, TLS, user, password, protocol): every node's.
    template: ConnectionInfo,
    seeds: Vec<Arc<str>>,
    config: ConnectionManagerConfig,
    pool: RwLock<HashMap<Arc<str>, ConnectionManager>>,
    pub(super) topology: Topology,
    /// One first read of the slot map at a time.
    first: tokio::sync::Mutex<()>,
    /// Where the next read of the slot map starts, so a frozen node is not always asked first.
    turn: AtomicUsize,
}

impl Cluster {
    pub(super) fn new(
        nodes: &[String],
        connect_timeout: Duration,
        response_timeout: Duration,
        tls: &Tls,
    ) -> Result<Arc<Self>, ConfigError> {
        let mut infos = Vec::with_capacity(nodes.len());
        for url in nodes {
            // Through a client, so that certificates given to the builder are in the
            // settings every node's connection copies.
            let info = url
                .as_str()
                .into_connection_info()
                .and_then(|i| tls.client(i))
                .map_err(|e| url_error(&e))?
                .get_connection_info()
                .clone();
            infos.push(info);
        }
        let Some(template) = infos.first().cloned() else {
            return Err(url_error(&RedisError::from((
                ErrorKind::InvalidClientConfig,
                "a Redis Cluster needs at least one seed node",
            ))));
        };
        let seeds = infos
            .iter()
            .map(|i| match i.addr() {
                ConnectionAddr::Tcp(host, port) | ConnectionAddr::TcpTls { host, port, .. } => {
                    Ok(Arc::from(format!("{host}:{port}")))
                }
                _ => Err(url_error(&RedisError::from((
                    ErrorKind::InvalidClientConfig,
                    "Redis Cluster nodes are reached over TCP (redis:// or rediss://)",
                )))),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let config = manager_config(connect_timeout, response_timeout);
        Ok(Arc::new(Self {
            template,
            seeds,
            config,
            pool: RwLock::new(HashMap::new()),
            topology: Topology::new(),
            first: tokio::sync::Mutex::new(()),
            turn: AtomicUsize::new(0),
        }))
    }

    /// The connection to `addr` (`host:port`), made on first use.
    fn node(&self, addr: &Arc<str>) -> RedisResult<ConnectionManager> {
        if let Some(c) = self
            .pool
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(addr)
        {
            return Ok(c.clone());
        }
        let client = self.client_for(addr)?;
        let mut pool = self.pool.write().unwrap_or_else(PoisonError::into_inner);
        if let Some(c) = pool.get(addr) {
            return Ok(c.clone());
        }
        let con = ConnectionManager::new_lazy_with_config(client, self.config.clone())?;
        pool.insert(addr.clone(), con.clone());
        Ok(con)
    }

    /// A client for `addr` (`host:port`) with the seeds' settings.
    fn client_for(&self, addr: &Arc<str>) -> RedisResult<redis::Client> {
        let (host, port) = addr
            .rsplit_once(':')
            .and_then(|(h, p)| Some((h, p.parse::<u16>().ok()?)))
            .ok_or_else(|| RedisError::from((ErrorKind::Client, "bad node address")))?;
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        let at = match self.template.addr() {
            ConnectionAddr::TcpTls {
                insecure,
                tls_params,
                ..
            } => ConnectionAddr::TcpTls {
                host,
                port,
                insecure: *insecure,
                tls_params: tls_params.clone(),
            },
            _ => ConnectionAddr::Tcp(host, port),
        };
        redis::Client::open(self.template.clone().set_addr(at))
    }

    /// A client for the master that owns `name`'s slot now (for a connection of its own,
    /// such as a subscriber's).
    pub(super) async fn client_owning(&self, name: &str) -> RedisResult<redis::Client> {
        let at = self
            .resolve(&Target::Slot(Some(super::keys::hash_slot(name))))
            .await?;
        self.client_for(&at)
    }

    /// Where `target` is now. Reads the slot map first if there is none yet.
    async fn resolve(&self, target: &Target) -> RedisResult<Arc<str>> {
        let slot = match target {
            Target::Node(a) => return Ok(a.clone()),
            Target::Slot(s) => *s,
        };
        self.ensure_map().await;
        let known = self
            .topology
            .with(|m| match slot {
                Some(s) => m.owner(s).cloned(),
                None => m.masters().first().cloned(),
            })
            .flatten();
        match known {
            Some(a) => Ok(a),
            // No map (no node answered) or a slot no one owns: a seed answers with MOVED,
            // CLUSTERDOWN or its error.
            None => {
                let i = self.turn.fetch_add(1, Ordering::Relaxed) % self.seeds.len();
                Ok(self.seeds[i].clone())
            }
        }
    }

    /// Reads `CLUSTER SLOTS` from the masters known, then the seeds, until one answers.
    async fn load(&self) -> bool {
        let mut candidates = self.topology.with(Map::masters).unwrap_or_default();
        for s in &self.seeds {
            if !candidates.contains(s) {
                candidates.push(s.clone());
            }
        }
        let start = self.turn.fetch_add(1, Ordering::Relaxed);
        for i in 0..candidates.len() {
            let addr = &candidates[(start + i) % candidates.len()];
            let Ok(mut con) = self.node(addr) else {
                continue;
            };
            let v: RedisResult<Value> = redis::cmd("CLUSTER")
                .arg("SLOTS")
                .query_async(&mut con)
                .await;
            if let Some(map) = v.ok().as_ref().and_then(Map::parse) {
                let named: Vec<Arc<str>> = map.masters();
                self.topology.set(map);
                // Connections to nodes that left, other than seeds, are dropped.
                self.pool
                    .write()
                    .unwrap_or_else(PoisonError::into_inner)
                    .retain(|a, _| named.contains(a) || self.seeds.contains(a));
                return true;
            }
        }
        false
    }

    /// Reads the slot map again in the background when it is due (sooner after a failure
    /// or a redirection). Never on a request's path.
    pub(super) fn refresh(self: &Arc<Self>, refresh: Refresh) {
        if !self.topology.claim(refresh) {
            return;
        }
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            self.topology.done();
            return;
        };
        let me = self.clone();
        rt.spawn(async move {
            me.load().await;
            me.topology.done();
        });
    }

    /// Reads the slot map now if there is none yet (one caller at a time); whether there is
    /// one.
    async fn ensure_map(&self) -> bool {
        if self.topology.with(|_| ()).is_some() {
            return true;
        }
        let _one = self.first.lock().await;
        self.topology.with(|_| ()).is_some() || self.load().await
    }

    /// The masters, from the slot map (read now if there is none yet).
    pub(super) async fn masters(&self) -> RedisResult<Vec<Arc<str>>> {
        if !self.ensure_map().await {
            return Err(RedisError::from((
                ErrorKind::Io,
                "no Cluster node answered CLUSTER SLOTS",
            )));
        }
        Ok(self.topology.with(Map::masters).unwrap_or_default())
    }

    /// Sends the command `make(text)` builds to `target`, following redirections. With
    /// `script`, `NOSCRIPT` (nothing ran) sends `make(true)` (the `EVAL` form) once.
    pub(super) async fn send<T: FromRedisValue>(
        self: &Arc<Self>,
        target: Target,
        sent: Sent,
        make: impl Fn(Eval) -> Cmd,
    ) -> RedisResult<T> {
        let mut eval = Eval::BySha;
        let mut ask: Option<Arc<str>> = None;
        // After `MOVED`, the node it named: the re-send goes there, not where the map says
        // (a background read of the map that began before the move may have put the old
        // owner back since the patch).
        let mut moved: Option<Arc<str>> = None;
        let mut redirects = 0;
        let mut pause = TRYAGAIN_PAUSE;
        loop {
            let addr = match (&ask, &moved) {
                (Some(a), _) | (None, Some(a)) => a.clone(),
                (None, None) => self.resolve(&target).await?,
            };
            let mut con = self.node(&addr)?;
            let cmd = make(eval);
            let answer: RedisResult<Value> = if ask.is_some() {
                asking(&mut con, &cmd).await
            } else {
                cmd.query_async(&mut con).await
            };
            let e = match answer {
                Ok(v) => return T::from_redis_value(v).map_err(RedisError::from),
                Err(e) => e,
            };
            let kind = match e.kind() {
                // Redis 6 wraps READONLY met by a script's write in a generic error.
                _ if super::error::is_read_only(&e) => ServerErrorKind::ReadOnly,
                ErrorKind::Server(k) => k,
                _ => return Err(e),
            };
            match kind {
                ServerErrorKind::NoScript if sent == Sent::Script && eval == Eval::BySha => {
                    eval = Eval::WithText;
                }
                ServerErrorKind::Moved | ServerErrorKind::Ask | ServerErrorKind::TryAgain
                    if redirects < MAX_REDIRECTS =>
                {
                    redirects += 1;
                    match (kind, e.redirect_node()) {
                        (ServerErrorKind::Moved, Some((to, slot))) => {
                            self.topology.patch(slot, to);
                            self.refresh(Refresh::Urgent);
                            // A command for one node by name is not followed elsewhere.
                            if let Target::Node(_) = target {
                                return Err(e);
                            }
                            ask = None;
                            moved = Some(Arc::from(to));
                        }
                        (ServerErrorKind::Ask, Some((to, _))) => ask = Some(Arc::from(to)),
                        (ServerErrorKind::TryAgain, _) => {
                            tokio::time::sleep(pause).await;
                            pause = (pause * 2).min(Duration::from_millis(100));
                        }
                        _ => return Err(e),
                    }
                }
                ServerErrorKind::Moved
                | ServerErrorKind::ReadOnly
                | ServerErrorKind::ClusterDown => {
                    self.refresh(Refresh::Urgent);
                    return Err(e);
                }
                _ => return Err(e),
            }
        }
    }
}

/// `ASKING` and the command, written together so no other command on the shared
/// connection comes between them (`ASKING` holds for the next command only).
async fn asking(con: &mut ConnectionManager, cmd: &Cmd) -> RedisResult<Value> {
    let mut pipe = redis::pipe();
    pipe.ignore_errors().cmd("ASKING").add_command(cmd.clone());
    let mut answers: Vec<RedisResult<Value>> = pipe.query_async(con).await?;
    answers
        .pop()
        .unwrap_or_else(|| Err(RedisError::from((ErrorKind::Client, "no answer to ASKING"))))
}

/// The slot of a command's first key name.
pub(super) fn slot_of(keys: &[String]) -> Option<u16> {
    keys.first().map(|k| keys::hash_slot(k))
}
