//! Webhook de-duplication on Redis: `SET NX PX` and `DEL`.

use std::time::Duration;

use redis::Value;

use super::RedisStore;
use super::error::store_error;
use crate::protocol::{Dedupe, StoreError};

impl RedisStore {
    fn dedupe_key(&self, id: &str) -> String {
        let p = crate::principal::Principal::new(
            crate::PrincipalKind::custom("dedupe").unwrap_or(crate::PrincipalKind::Global),
            id,
        );
        format!("{}:{{{}}}", self.inner.prefix, p.as_str())
    }
}

impl Dedupe for RedisStore {
    /// `SET NX PX`.
    async fn first_seen(&self, id: &str, ttl: Duration) -> Result<bool, StoreError> {
        let name = self.dedupe_key(id);
        let ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1);
        let mut cmd = redis::cmd("SET");
        cmd.arg(&name).arg(1).arg("NX").arg("PX").arg(ms);
        let v: Value = self
            .inner
            .conn
            .query(&cmd, &name)
            .await
            .map_err(store_error)?;
        Ok(!matches!(v, Value::Nil))
    }

    /// `DEL`.
    async fn release(&self, id: &str) -> Result<(), StoreError> {
        let name = self.dedupe_key(id);
        self.del(std::slice::from_ref(&name)).await
    }
}
