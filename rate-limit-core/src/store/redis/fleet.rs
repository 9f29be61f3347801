//! The fleet's runtime state on Redis (`fleet.lua`): one hash, `<prefix>:{x.fleet}:runtime`
//! (one slot on a Cluster), its version in the field `#v`. A change is one `EVAL`;
//! readers ask the version (`HGET`) and read the whole state (`HGETALL`) when it moved.
//! The hash has no TTL: it is the operators' settings, kept until they change them.

use redis::Value;

use super::RedisStore;
use super::error::{bad_answer, store_error};
use super::script::{FLEET_LUA, int};
use crate::protocol::StoreError;
use crate::protocol::fleet::FleetState;

/// The field holding the state's version.
const VERSION: &str = "#v";

impl RedisStore {
    fn fleet_key(&self) -> String {
        format!("{}:{{x.fleet}}:runtime", self.inner.prefix)
    }

    /// One command on the state's hash (routed by its key on a Cluster).
    async fn fleet_query(&self, cmd: &redis::Cmd, key: &str) -> Result<Value, StoreError> {
        self.inner.conn.query(cmd, key).await.map_err(store_error)
    }

    /// Sets (`Some`) or removes (`None`) one entry; the new version.
    pub(crate) async fn fleet_change(
        &self,
        field: &str,
        value: Option<&str>,
    ) -> Result<u64, StoreError> {
        // Changes are an operator's, rare: the script is sent whole (`EVAL`), so it needs no
        // script cache and takes arguments as text.
        let key = self.fleet_key();
        let mut cmd = redis::cmd("EVAL");
        cmd.arg(FLEET_LUA)
            .arg(1)
            .arg(&key)
            .arg(if value.is_some() { "set" } else { "del" })
            .arg(field)
            .arg(value.unwrap_or(""));
        let v = self.fleet_query(&cmd, &key).await?;
        match v {
            Value::Int(n) => u64::try_from(n).map_err(|_| bad_answer()),
            _ => Err(bad_answer()),
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
