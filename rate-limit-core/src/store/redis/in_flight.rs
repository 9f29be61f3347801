//! In-flight slots on Redis (`slots.lua`): one sorted set per principal and limit.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use redis::Value;

use super::RedisStore;
use super::error::{bad_answer, store_error};
use super::keys;
use super::script::{Invocation, SLOTS_LUA, int};
use crate::limit::SlotKey;
use crate::protocol::{Slots, StoreError, Taken};

impl RedisStore {
    /// `<prefix>:{<principal>}:in-flight:<limit>`: the principal's in-flight slots, and a name no
    /// limit can have (limit names hold no `:`).
    fn slot_key(&self, key: &SlotKey) -> String {
        format!(
            "{}:{{{}}}:in-flight:{}",
            self.inner.prefix,
            key.principal().as_str(),
            key.in_flight().name()
        )
    }

    /// Boxed, as `check` is: a shallow future for callers that must prove `Send`.
    fn slots<'a>(
        &'a self,
        key: &'a SlotKey,
        op: u64,
        id: u64,
    ) -> Pin<Box<dyn Future<Output = Result<Value, StoreError>> + Send + 'a>> {
        Box::pin(self.slot_call(key, op, id))
    }

    async fn slot_call(&self, key: &SlotKey, op: u64, id: u64) -> Result<Value, StoreError> {
        let keys = [self.slot_key(key)];
        let ttl = u64::try_from(key.in_flight().ttl().as_millis()).unwrap_or(u64::MAX);
        let args = [op, id, key.in_flight().max(), ttl];
        let inv = Invocation {
            script: &self.inner.slots,
            code: SLOTS_LUA,
            keys: &keys,
            args: &args,
            doubles: false,
        };
        let hash_slot = self
            .inner
            .conn
            .is_cluster()
            .then(|| keys::hash_slot(&keys[0]));
        let domain = |e: StoreError| self.in_domain_of(e, hash_slot);
        self.inner
            .conn
            .invoke::<Value>(&inv)
            .await
            .map_err(|e| domain(store_error(e)))
    }
}

impl Slots for RedisStore {
    async fn take_slot(&self, key: &SlotKey, id: u64) -> Result<Taken, StoreError> {
        let Value::Array(v) = self.slots(key, 1, id).await? else {
            return Err(bad_answer());
        };
        Ok(Taken {
            taken: int(v.first()) == 1,
            in_use: u32::try_from(int(v.get(1))).unwrap_or(u32::MAX),
            retry_after: Duration::from_millis(int(v.get(2))),
        })
    }

    async fn renew_slot(&self, key: &SlotKey, id: u64) -> Result<bool, StoreError> {
        Ok(int(Some(&self.slots(key, 2, id).await?)) == 1)
    }

    async fn release_slot(&self, key: &SlotKey, id: u64) -> Result<(), StoreError> {
        self.slots(key, 3, id).await.map(|_| ())
    }
}
