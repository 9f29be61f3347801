//! The fleet's runtime state on Redis (`fleet.lua`): one hash, `<prefix>:{x.fleet}:runtime`
//! (one slot on a Cluster), its version in the field `#v`. A change is one `EVAL`, which
//! also publishes the new version on `<prefix>:{x.fleet}:changes`; readers ask the version
//! (`HGET`) and read the whole state (`HGETALL`) when it moved, on a period and whenever a
//! notice arrives. The hash has no TTL: it is the operators' settings, kept until they
//! change them.

use std::pin::Pin;
use std::time::Duration;

use futures_core::Stream;
use redis::Value;

use super::RedisStore;
use super::error::{bad_answer, store_error};
use super::script::{FLEET_LUA, FLEET_RESTORE_LUA, int};
use crate::protocol::StoreError;
use crate::protocol::fleet::{FleetChange, FleetNotice, FleetState};

/// The field holding the state's version.
const VERSION: &str = "#v";

impl RedisStore {
    fn fleet_key(&self) -> String {
        format!("{}:{{x.fleet}}:runtime", self.inner.prefix)
    }

    fn fleet_channel(&self) -> String {
        format!("{}:{{x.fleet}}:changes", self.inner.prefix)
    }

    /// One command on the state's hash (routed by its key on a Cluster).
    async fn fleet_query(&self, cmd: &redis::Cmd, key: &str) -> Result<Value, StoreError> {
        self.inner.conn.query(cmd, key).await.map_err(store_error)
    }

    /// Makes one change; the new version, or `None` when the hash is older than `floor`
    /// (the version the instance applied: the store lost changes, to restore first).
    pub(crate) async fn fleet_change(
        &self,
        change: FleetChange<'_>,
        floor: u64,
    ) -> Result<Option<u64>, StoreError> {
        // Changes are an operator's, rare: the script is sent whole (`EVAL`), so it needs no
        // script cache and takes arguments as text.
        let key = self.fleet_key();
        let (op, field, value, event) = match change {
            FleetChange::Set(f, v) => ("set", f, v, ""),
            FleetChange::Remove(f) => ("del", f, "", ""),
            FleetChange::Event(e) => ("event", "", "", e),
        };
        let mut cmd = redis::cmd("EVAL");
        cmd.arg(FLEET_LUA)
            .arg(1)
            .arg(&key)
            .arg(op)
            .arg(field)
            .arg(value)
            .arg(self.fleet_channel())
            .arg(event)
            .arg(floor);
        match self.fleet_query(&cmd, &key).await? {
            Value::Int(-1) => Ok(None),
            Value::Int(n) => u64::try_from(n).map(Some).map_err(|_| bad_answer()),
            _ => Err(bad_answer()),
        }
    }

    /// Puts `state` back when the hash is older (see `fleet_restore.lua`); the hash's
    /// version after.
    pub(crate) async fn fleet_restore(&self, state: &FleetState) -> Result<u64, StoreError> {
        let key = self.fleet_key();
        let mut cmd = redis::cmd("EVAL");
        cmd.arg(FLEET_RESTORE_LUA)
            .arg(1)
            .arg(&key)
            .arg(state.version)
            .arg(self.fleet_channel());
        for (field, value) in &state.entries {
            cmd.arg(field).arg(value);
        }
        match self.fleet_query(&cmd, &key).await? {
            Value::Int(n) => u64::try_from(n).map_err(|_| bad_answer()),
            _ => Err(bad_answer()),
        }
    }

    /// A subscriber to the state's notices, on a connection of its own to the server that
    /// holds the state (on a Cluster, the master owning its slot; behind Sentinels, the
    /// primary). Ends when that connection does.
    pub(crate) async fn fleet_listen(&self, timeout: Duration) -> Result<FleetFeed, StoreError> {
        let subscribe = async {
            let client = self.inner.conn.client_for(&self.fleet_key()).await?;
            let mut pubsub = client.get_async_pubsub().await?;
            pubsub.subscribe(self.fleet_channel()).await?;
            Ok::<_, redis::RedisError>(pubsub.into_on_message())
        };
        match tokio::time::timeout(timeout, subscribe).await {
            Ok(Ok(stream)) => Ok(FleetFeed { stream }),
            Ok(Err(e)) => Err(store_error(e)),
            Err(_) => Err(store_error(redis::RedisError::from((
                redis::ErrorKind::Io,
                "subscribing timed out",
            )))),
        }
    }

    /// The state's version (0 before the first change).
    pub(crate) async fn fleet_version(&self) -> Result<u64, StoreError> {
        let key = self.fleet_key();
        let mut cmd = redis::cmd("HGET");
        cmd.arg(&key).arg(VERSION);
        let v = self.fleet_query(&cmd, &key).await?;
        match v {
            Value::Nil => Ok(0),
            Value::Int(_) => Ok(int(Some(&v))),
            Value::BulkString(b) => std::str::from_utf8(&b)
                .ok()
                .and_then(|s| s.parse().ok())
                .ok_or_else(bad_answer),
            _ => Err(bad_answer()),
        }
    }

    /// The whole state.
    pub(crate) async fn fleet_read(&self) -> Result<FleetState, StoreError> {
        let key = self.fleet_key();
        let mut cmd = redis::cmd("HGETALL");
        cmd.arg(&key);
        let v = self.fleet_query(&cmd, &key).await?;
        let text = |v: &Value| match v {
            Value::BulkString(b) => String::from_utf8(b.clone()).ok(),
            Value::SimpleString(s) => Some(s.clone()),
            _ => None,
        };
        let pairs: Vec<(String, String)> = match v {
            Value::Map(m) => m
                .iter()
                .filter_map(|(k, v)| Some((text(k)?, text(v)?)))
                .collect(),
            Value::Array(a) => a
                .chunks(2)
                .filter_map(|kv| Some((text(kv.first()?)?, text(kv.get(1)?)?)))
                .collect(),
            Value::Nil => Vec::new(),
            _ => return Err(bad_answer()),
        };
        let mut state = FleetState::default();
        for (k, v) in pairs {
            if k == VERSION {
                state.version = v.parse().map_err(|_| bad_answer())?;
            } else {
                state.entries.push((k, v));
            }
        }
        Ok(state)
    }
}

/// The notices a subscriber receives.
pub(crate) struct FleetFeed {
    stream: redis::aio::PubSubStream,
}

impl std::fmt::Debug for FleetFeed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FleetFeed").finish_non_exhaustive()
    }
}

impl FleetFeed {
    /// The next notice; `None` when the connection ended. A message that is not a notice
    /// (someone else publishing on the channel) is `Some(None)`: it still prompts a read.
    pub(crate) async fn next(&mut self) -> Option<Option<FleetNotice>> {
        let msg = std::future::poll_fn(|cx| Pin::new(&mut self.stream).poll_next(cx)).await?;
        let text: Option<String> = msg.get_payload().ok();
        Some(text.as_deref().and_then(FleetNotice::parse))
    }
}
