//! The text message a refused WebSocket message is answered with: the refusal's typed
//! fields, and the limit fields its HTTP answer would carry, written by the same
//! `Answering` (see the module docs for the shape). No response is built.

use http::HeaderMap;
use ratekeeper_tower::{Answering, Refusal};
use serde::Serialize;
use serde::ser::SerializeMap;

#[derive(Serialize)]
struct Notice<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    code: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    limit: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    retry_after: Option<u64>,
    headers: Fields<'a>,
}

/// The fields by their lower-case names, in the order they were written.
struct Fields<'a>(&'a HeaderMap);

impl Serialize for Fields<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        for (name, value) in self.0 {
            // Written from numbers and limit names: visible ASCII always.
            if let Ok(value) = value.to_str() {
                map.serialize_entry(name.as_str(), value)?;
            }
        }
        map.end()
    }
}

/// The refusal as the documented JSON text.
pub(super) fn render(answering: &Answering, refusal: &Refusal) -> String {
    let fields = answering.limit_fields(refusal);
    let notice = Notice {
        kind: "rate_limited",
        code: refusal.code(),
        limit: refusal.limit().map(|l| l.name()),
        retry_after: refusal.retry_after_secs(),
        headers: Fields(&fields),
    };
    // Strings and integers only: it cannot fail.
    serde_json::to_string(&notice).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    /// The notice's `headers` are the 429's limit fields, name for name and byte for byte.
    #[test]
    fn the_notice_carries_the_429s_limit_fields_exactly() {
        let answering = Answering::new();
        let refusal =
            Refusal::in_flight(Arc::from("ws-connections"), 3, Duration::from_millis(1_500));
        let text = render(&answering, &refusal);
        let notice: serde_json::Value = serde_json::from_str(&text).unwrap();
        let http = answering.respond(refusal, &HeaderMap::new());
        let mut from_http = serde_json::Map::new();
        for (name, value) in http.headers() {
            let name = name.as_str();
            if name == "retry-after" || name.starts_with("ratelimit") {
                from_http.insert(name.into(), value.to_str().unwrap().into());
            }
        }
        assert!(from_http.len() >= 3, "{from_http:?}");
        assert_eq!(
            notice["headers"],
            serde_json::Value::Object(from_http),
            "{text}"
        );
        assert_eq!(notice["type"], "rate_limited");
        assert_eq!(notice["code"], "in_flight.full");
        assert_eq!(notice["limit"], "ws-connections");
        assert_eq!(notice["retry_after"], 2);
        assert!(text.starts_with(r#"{"type":"rate_limited","code":"in_flight.full","limit""#));
    }
}
