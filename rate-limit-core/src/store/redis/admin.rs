//! Admin calls of the Redis store: a health check that runs the script path, the
//! eviction-policy check, the bans in force, and deleting a key.

use redis::Value;

use super::RedisStore;
#[cfg(feature = "cluster")]
use super::cluster::Sent;
use super::error::{classify, store_error};
use super::script::ScriptMode;
#[cfg(feature = "cluster")]
use super::script::{CHAIN_LUA, Invocation, decode, head};
use crate::protocol::{Store, StoreError};

impl RedisStore {
    /// Checks that the script path works (loading the script if Redis lost it): a health
    /// check that means what it says, unlike `PING`.
    ///
    /// On a Cluster, every master must answer.
    pub async fn health(&self) -> Result<(), StoreError> {
        #[cfg(feature = "cluster")]
        if let Some(c) = self.inner.conn.cluster() {
            let args = head(self.inner.slack_ms, 0, 0, 0);
            let inv = Invocation {
                script: &self.inner.chain,
                code: CHAIN_LUA,
                keys: &[],
                args: &args,
                doubles: true,
            };
            for m in c.masters().await.map_err(store_error)? {
                let v: Value = c
                    .send(super::cluster::Target::Node(m), Sent::Script, |eval| {
                        inv.cmd(eval)
                    })
                    .await
                    .map_err(store_error)?;
                decode(&v, 0)?;
            }
            return Ok(());
        }
        self.run(Vec::new(), ScriptMode::InOrder, Vec::new(), Vec::new())
            .await
            .map(|_| ())
    }

    /// Warns (`rate_limit.redis_eviction`) when Redis may evict limiter keys: any
    /// `maxmemory-policy` but `noeviction` (the keys carry TTLs, so `volatile-*` policies
    /// evict them too), on every master. Returns the policies seen, or the error if
    /// `CONFIG GET` was refused (managed Redis), which it also logs.
    pub async fn check_eviction_policy(&self) -> Result<Vec<String>, StoreError> {
        match self.inner.conn.config_get("maxmemory-policy").await {
            Ok(policies) => {
                for p in &policies {
                    if p != "noeviction" {
                        tracing::warn!(
                            name: "rate_limit.redis_eviction",
                            target: "rate_limit.redis_eviction",
                            policy = %p,
                            "Redis may evict rate-limit keys under memory pressure; limits then over-admit. Use maxmemory-policy noeviction"
                        );
                    }
                }
                Ok(policies)
            }
            Err(e) => {
                tracing::warn!(
                    name: "rate_limit.redis_eviction",
                    target: "rate_limit.redis_eviction",
                    error = classify(&e).as_str(),
                    "could not read Redis's maxmemory-policy; make sure it is noeviction"
                );
                Err(store_error(e))
            }
        }
    }

    /// The principals `ban` bans now, with the time left (an admin call; see
    /// [`Banned`](crate::protocol::Banned)). Reads every master with `SCAN` for the ban's keys, then
    /// each key: O(keys in the database), not for a request's path.
    pub async fn bans(
        &self,
        ban: &crate::Limit,
    ) -> Result<Vec<crate::protocol::Banned>, StoreError> {
        let glob = |s: &str| {
            let mut out = String::with_capacity(s.len());
            for c in s.chars() {
                if matches!(c, '*' | '?' | '[' | ']' | '\\') {
                    out.push('\\');
                }
                out.push(c);
            }
            out
        };
        let pattern = format!("{}:{{*}}:{}", glob(&self.inner.prefix), glob(ban.name()));
        let names = self.inner.conn.scan(&pattern).await.map_err(store_error)?;
        let mut out = Vec::new();
        for name in names {
            let Some(principal) = name
                .split_once('{')
                .and_then(|(_, rest)| rest.split_once('}'))
                .and_then(|(p, _)| crate::Principal::from_rendered(p))
            else {
                continue;
            };
            let key = ban.key(principal);
            if self.key_name(&key) != name {
                continue;
            }
            let d = self.peek(&key).await?;
            if let Some(remaining) = d.retry_after() {
                out.push(crate::protocol::Banned { key, remaining });
            }
        }
        out.sort_by(|a, b| a.principal().as_str().cmp(b.principal().as_str()));
        Ok(out)
    }

    /// Deletes `names` (one slot: one principal's keys).
    pub(super) async fn del(&self, names: &[String]) -> Result<(), StoreError> {
        let Some(first) = names.first() else {
            return Ok(());
        };
        let mut cmd = redis::cmd("DEL");
        cmd.arg(names);
        self.inner
            .conn
            .query::<Value>(&cmd, first)
            .await
            .map_err(store_error)?;
        Ok(())
    }
}
