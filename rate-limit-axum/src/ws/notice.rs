//! The text message a refused WebSocket message is answered with: the HTTP answer's fields,
//! rendered by the same `Answering` (see the module docs for the shape).

use ratekeeper_tower::{Answering, Refusal};

/// The refusal as the documented JSON text.
pub(super) fn render(answering: &Answering, refusal: Refusal) -> String {
    let code = refusal.code();
    let limit = refusal.limit().map(|l| l.name().to_owned());
    let retry_after = refusal.retry_after_secs();
    // The HTTP answer for an API client, for its headers: one renderer for both.
    let resp = answering.respond(refusal, &http::HeaderMap::new());
    let mut out = String::with_capacity(192);
    out.push_str(r#"{"type":"rate_limited","code":"#);
    push_str(&mut out, code);
    if let Some(limit) = &limit {
        out.push_str(r#","limit":"#);
        push_str(&mut out, limit);
    }
    if let Some(secs) = retry_after {
        out.push_str(r#","retry_after":"#);
        out.push_str(&secs.to_string());
    }
    out.push_str(r#","headers":{"#);
    let mut first = true;
    for (name, value) in resp.headers() {
        let name = name.as_str();
        if name != "retry-after" && !name.starts_with("ratelimit") {
            continue;
        }
        let Ok(value) = value.to_str() else { continue };
        if !first {
            out.push(',');
        }
        first = false;
        push_str(&mut out, name);
        out.push(':');
        push_str(&mut out, value);
    }
    out.push_str("}}");
    out
}

/// `s` as a JSON string.
fn push_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if u32::from(c) < 0x20 => {
                out.push_str(&format!("\\u{:04x}", u32::from(c)));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::push_str;

    #[test]
    fn strings_are_escaped() {
        let mut out = String::new();
        push_str(&mut out, "\"a\";q=1\\\n");
        assert_eq!(out, r#""\"a\";q=1\\\u000a""#);
    }
}
