//! The fleet's heavy hitters on Redis (`top_put.lua`): per limit, a sorted set of the
//! instances reporting, `<prefix>:{x.top}:<limit>`, and one report per instance,
//! `<prefix>:{x.top}:<limit>:<instance>`, each with a TTL (one slot on a Cluster, apart
//! from the runtime state's). A reader takes the set (`ZRANGE`) and the reports (`MGET`);
//! a report that lapsed reads as nothing.

use std::time::Duration;

use redis::Value;

use super::RedisStore;
use super::error::{bad_answer, store_error};
use super::script::TOP_PUT_LUA;
use crate::protocol::StoreError;

impl RedisStore {
    fn top_key(&self, limit: &str) -> String {
        format!("{}:{{x.top}}:{limit}", self.inner.prefix)
    }

    /// Publishes `instance`'s report of `limit`, kept for `ttl`.
    pub(super) async fn top_put(
        &self,
        limit: &str,
        instance: &str,
        report: &str,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        let set = self.top_key(limit);
        let mut cmd = redis::cmd("EVAL");
        cmd.arg(TOP_PUT_LUA)
            .arg(2)
            .arg(&set)
            .arg(format!("{set}:{instance}"))
            .arg(instance)
            .arg(report)
            .arg(ttl.as_millis().max(1).to_string());
        self.inner
            .conn
            .query::<Value>(&cmd, &set)
            .await
            .map(|_| ())
            .map_err(store_error)
    }

    /// Every live report of `limit`: instance and report.
    pub(super) async fn top_read(&self, limit: &str) -> Result<Vec<(String, String)>, StoreError> {
        let set = self.top_key(limit);
        let mut range = redis::cmd("ZRANGE");
        range.arg(&set).arg(0).arg(-1);
        let names: Vec<String> = self
            .inner
            .conn
            .query(&range, &set)
            .await
            .map_err(store_error)?;
        if names.is_empty() {
            return Ok(Vec::new());
        }
        let mut mget = redis::cmd("MGET");
        for n in &names {
            mget.arg(format!("{set}:{n}"));
        }
        let reports: Vec<Option<String>> = self
            .inner
            .conn
            .query(&mget, &set)
            .await
            .map_err(store_error)?;
        if reports.len() != names.len() {
            return Err(bad_answer());
        }
        Ok(names
            .into_iter()
            .zip(reports)
            .filter_map(|(n, r)| Some((n, r?)))
            .collect())
    }
}
