//! The fleet's runtime state on Redis: one hash, `<prefix>:{x.fleet}:runtime`, its version
//! in the field `#v`, its epoch in `#e` and its tip in `#t`, and the log of its latest changes,
//! `<prefix>:{x.fleet}:log` (a hash from version to the change's stamp and text; one slot on a
//! Cluster). A change is one `EVAL` (`fleet.lua`), which also publishes the new version on
//! `<prefix>:{x.fleet}:changes`; readers ask the mark on their period and whenever a notice
//! arrives, and read what changed since theirs when it moved (`fleet_read.lua`). The
//! entries and the log's changes are in the codec's text
//! ([`codec`](crate::protocol::fleet::codec)). The hash has no TTL: it is the operators'
//! settings, kept until they change them.

use std::future::Future as _;
use std::pin::Pin;
use std::time::Duration;

use futures_core::Stream;
use redis::Value;

use super::RedisStore;
use super::error::{bad_answer, store_error};
use super::script::{FLEET_LUA, FLEET_READ_LUA, FLEET_RESTORE_LUA};
use crate::protocol::StoreError;
use crate::protocol::fleet::codec::{self, Write};
use crate::protocol::fleet::{
    FleetChange, FleetMark, FleetNotices, FleetNotifier, FleetRead, FleetState,
};

/// The fields holding the state's version, its epoch and its tip.
const VERSION: &str = "#v";
const EPOCH: &str = "#e";
const TIP: &str = "#t";
/// How many changes the log keeps: a reader further behind reads the whole state.
const LOG_KEPT: u64 = 1_024;

impl RedisStore {
    fn fleet_keys(&self) -> [String; 2] {
        let p = &self.inner.prefix;
        [
            format!("{p}:{{x.fleet}}:runtime"),
            format!("{p}:{{x.fleet}}:log"),
        ]
    }

    fn fleet_channel(&self) -> String {
        format!("{}:{{x.fleet}}:changes", self.inner.prefix)
    }

    /// One script on the state's keys (routed by them on a Cluster).
    async fn fleet_eval(
        &self,
        code: &str,
        args: impl FnOnce(&mut redis::Cmd),
    ) -> Result<Value, StoreError> {
        // The fleet's scripts are an operator's or a period's, rare: sent whole (`EVAL`),
        // they need no script cache and take arguments as text.
        let keys = self.fleet_keys();
        let mut cmd = redis::cmd("EVAL");
        cmd.arg(code).arg(2).arg(&keys[0]).arg(&keys[1]);
        args(&mut cmd);
        self.inner
            .conn
            .query(&cmd, &keys[0])
            .await
            .map_err(store_error)
    }

    pub(super) async fn fleet_mark(&self) -> Result<FleetMark, StoreError> {
        let v = self
            .fleet_eval(FLEET_READ_LUA, |c| {
                c.arg("").arg(-1).arg("");
            })
            .await?;
        Ok(answer(&v)?.0)
    }

    pub(super) async fn fleet_read(&self, after: FleetMark) -> Result<FleetRead, StoreError> {
        let v = self
            .fleet_eval(FLEET_READ_LUA, |c| {
                c.arg(after.epoch.to_string())
                    .arg(after.version)
                    .arg(after.tip.to_string());
            })
            .await?;
        let (mark, how, rest) = answer(&v)?;
        match how.as_str() {
            "mark" => Ok(FleetRead::Since {
                mark,
                changes: Vec::new(),
            }),
            "since" => Ok(FleetRead::Since {
                mark,
                changes: rest
                    .iter()
                    .map(|line| {
                        // "<tip>\n<change>"
                        let (_, change) = line.split_once('\n').ok_or_else(codec::corrupt)?;
                        codec::decode_change(change)
                    })
                    .collect::<Result<_, _>>()?,
            }),
            "whole" => {
                let mut entries = Vec::new();
                for kv in rest.chunks(2) {
                    let [field, value] = kv else {
                        return Err(bad_answer());
                    };
                    if ![VERSION, EPOCH, TIP].contains(&field.as_str()) {
                        entries.push(codec::decode_entry(field, value)?);
                    }
                }
                Ok(FleetRead::Whole(FleetState { mark, entries }))
            }
            _ => Err(bad_answer()),
        }
    }

    pub(super) async fn fleet_change(
        &self,
        change: &FleetChange,
        held: FleetMark,
        fresh: u64,
    ) -> Result<Option<FleetMark>, StoreError> {
        let (op, field, value) = match codec::write(change) {
            Write::Set(f, v) => ("set", f, v),
            Write::Remove(f) => ("del", f, String::new()),
            Write::Nothing => ("none", String::new(), String::new()),
        };
        let v = self
            .fleet_eval(FLEET_LUA, |c| {
                c.arg(op)
                    .arg(field)
                    .arg(value)
                    .arg(self.fleet_channel())
                    .arg(codec::encode_change(change))
                    .arg(held.version)
                    .arg(fresh.to_string())
                    .arg(LOG_KEPT);
            })
            .await?;
        match &v {
            Value::Array(a) if matches!(a.first(), Some(Value::Int(-1))) => Ok(None),
            _ => mark_of(&v).map(Some),
        }
    }

    pub(super) async fn fleet_restore(&self, state: &FleetState) -> Result<FleetMark, StoreError> {
        let v = self
            .fleet_eval(FLEET_RESTORE_LUA, |c| {
                c.arg(state.mark.version)
                    .arg(state.mark.epoch.to_string())
                    .arg(self.fleet_channel())
                    .arg(state.mark.tip.to_string());
                for (field, value) in state.entries.iter().filter_map(codec::encode_entry) {
                    c.arg(field).arg(value);
                }
            })
            .await?;
        mark_of(&v)
    }

    /// A subscriber to the state's notices, on a connection of its own to the server that
    /// holds the state (on a Cluster, the master owning its slot; behind Sentinels, the
    /// primary). Its notices end when that connection does.
    pub(super) async fn fleet_notices(
        &self,
        timeout: Duration,
    ) -> Result<FleetNotices, StoreError> {
        let subscribe = async {
            let client = self.inner.conn.client_for(&self.fleet_keys()[0]).await?;
            let mut pubsub = client.get_async_pubsub().await?;
            pubsub.subscribe(self.fleet_channel()).await?;
            Ok::<_, redis::RedisError>(pubsub.into_on_message())
        };
        let stream = match tokio::time::timeout(timeout, subscribe).await {
            Ok(Ok(stream)) => stream,
            Ok(Err(e)) => return Err(store_error(e)),
            Err(_) => {
                return Err(store_error(redis::RedisError::from((
                    redis::ErrorKind::Io,
                    "subscribing timed out",
                ))));
            }
        };
        let (tx, rx) = FleetNotices::channel();
        tokio::spawn(forward(stream, tx));
        Ok(rx)
    }
}

/// Passes the subscriber's messages on until its connection ends or the reader is gone. A
/// message that is not a version (someone else publishing) still prompts a read.
async fn forward(mut stream: redis::aio::PubSubStream, tx: FleetNotifier) {
    let mut closed = std::pin::pin!(tx.closed());
    loop {
        let next = std::future::poll_fn(|cx| {
            if closed.as_mut().poll(cx).is_ready() {
                return std::task::Poll::Ready(None);
            }
            Pin::new(&mut stream).poll_next(cx).map(Some)
        })
        .await;
        let Some(Some(msg)) = next else {
            return;
        };
        let text: Option<String> = msg.get_payload().ok();
        let version = text
            .as_deref()
            .and_then(|t| t.split(' ').next()?.parse().ok())
            .unwrap_or(0);
        if !tx.notify(version) {
            return;
        }
    }
}

/// `{version, epoch, tip}`.
fn mark_of(v: &Value) -> Result<FleetMark, StoreError> {
    let Value::Array(a) = v else {
        return Err(bad_answer());
    };
    let number = |v: &Value| {
        text(v)
            .and_then(|t| t.parse().ok())
            .ok_or_else(codec::corrupt)
    };
    match (a.first(), a.get(1), a.get(2)) {
        (Some(Value::Int(n)), Some(e), Some(t)) => Ok(FleetMark {
            version: u64::try_from(*n).map_err(|_| bad_answer())?,
            epoch: number(e)?,
            tip: number(t)?,
        }),
        _ => Err(bad_answer()),
    }
}

/// `{version, epoch, tip, how, {texts}}`.
fn answer(v: &Value) -> Result<(FleetMark, String, Vec<String>), StoreError> {
    let mark = mark_of(v)?;
    let Value::Array(a) = v else {
        return Err(bad_answer());
    };
    let how = a.get(3).and_then(text).ok_or_else(bad_answer)?;
    let rest = match a.get(4) {
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| text(i).ok_or_else(bad_answer))
            .collect::<Result<_, _>>()?,
        Some(Value::Map(m)) => m
            .iter()
            .flat_map(|(k, v)| [text(k), text(v)])
            .map(|t| t.ok_or_else(bad_answer))
            .collect::<Result<_, _>>()?,
        Some(Value::Nil) | None => Vec::new(),
        _ => return Err(bad_answer()),
    };
    Ok((mark, how, rest))
}

fn text(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => String::from_utf8(b.clone()).ok(),
        Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    }
}
