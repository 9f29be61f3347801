//! The shared pacer on Redis (`pacer.lua`).

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use redis::Value;

use super::RedisStore;
use super::error::{bad_answer, store_error};
use super::script::{Invocation, PACER_LUA, int};
use crate::protocol::StoreError;
use crate::protocol::pace::{PaceCall, PaceOp, PaceReply};

impl RedisStore {
    /// One call of a shared pacer (`pacer.lua`): keys `<prefix>:{<scope>}:pacer:<name>` and
    /// `…:pacer-workers:<name>`, one slot.
    pub(super) async fn pace(&self, call: &PaceCall<'_>) -> Result<PaceReply, StoreError> {
        // Boxed, as `check` is: a shallow future for callers that must prove `Send`.
        let fut: Pin<Box<dyn Future<Output = _> + Send + '_>> = Box::pin(self.pace_call(call));
        fut.await
    }

    async fn pace_call(&self, call: &PaceCall<'_>) -> Result<PaceReply, StoreError> {
        let base = format!("{}:{{{}}}", self.inner.prefix, call.scope.as_str());
        let keys = [
            format!("{base}:pacer:{}", call.name),
            format!("{base}:pacer-workers:{}", call.name),
        ];
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1);
        let e6 = |x: f64| (x * 1e6).round() as u64;
        let (op, retry, ceiling) = match call.op {
            PaceOp::Acquire { within } => (1, within, 0.0),
            PaceOp::Rejected(us) => (2, us, 0.0),
            PaceOp::Told { pause, ceiling } => (3, pause, ceiling),
        };
        let c = call.config;
        let args = [
            op,
            call.successes,
            retry,
            call.worker,
            ms(call.registration),
            ms(call.remember),
            e6(c.initial),
            e6(c.min),
            e6(c.max),
            e6(c.increase),
            e6(c.decrease),
            u64::try_from(c.period.as_micros()).unwrap_or(u64::MAX),
            e6(ceiling),
        ];
        let inv = Invocation {
            script: &self.inner.pacer,
            code: PACER_LUA,
            keys: &keys,
            args: &args,
            doubles: false,
        };
        let v: Value = self.inner.conn.invoke(&inv).await.map_err(store_error)?;
        let Value::Array(v) = v else {
            return Err(bad_answer());
        };
        let rate = match v.get(2) {
            Some(Value::BulkString(b)) => std::str::from_utf8(b)
                .ok()
                .and_then(|s| s.parse::<f64>().ok()),
            Some(Value::SimpleString(s)) => s.parse::<f64>().ok(),
            _ => None,
        }
        .ok_or_else(bad_answer)?;
        Ok(PaceReply {
            go: int(v.first()) == 1,
            wait_us: int(v.get(1)),
            rate,
            workers: u32::try_from(int(v.get(3))).unwrap_or(u32::MAX),
        })
    }
}
