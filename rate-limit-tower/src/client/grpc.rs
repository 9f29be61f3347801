//! `RetryInfo` read back from `grpc-status-details-bin`: base64 (padded or not) of a
//! `google.rpc.Status` whose details hold a `google.rpc.RetryInfo { retry_delay }`. A
//! small protobuf reader, bounded: anything out of shape is no wait.

use std::time::Duration;

const RETRY_INFO: &[u8] = b"type.googleapis.com/google.rpc.RetryInfo";

/// The wait a `RetryInfo` in `header` asks for, if it holds one.
pub(crate) fn retry_info(header: &[u8]) -> Option<Duration> {
    if header.len() > 8 * 1024 {
        return None;
    }
    let status = base64(header)?;
    // Status: field 3 (details) is a repeated Any.
    for (field, value) in fields(&status)? {
        let (3, Value::Bytes(any)) = (field, value) else {
            continue;
        };
        let any = fields(any)?;
        let named = any
            .iter()
            .any(|(f, v)| *f == 1 && matches!(v, Value::Bytes(b) if *b == RETRY_INFO));
        if !named {
            continue;
        }
        let info = any.iter().find_map(|(f, v)| match (f, v) {
            (2, Value::Bytes(b)) => Some(*b),
            _ => None,
        })?;
        // RetryInfo: field 1 (retry_delay) is a Duration { seconds = 1, nanos = 2 }.
        let delay = fields(info)?.into_iter().find_map(|(f, v)| match (f, v) {
            (1, Value::Bytes(b)) => Some(b),
            _ => None,
        })?;
        let (mut secs, mut nanos) = (0u64, 0u64);
        for (f, v) in fields(delay)? {
            match (f, v) {
                (1, Value::Int(s)) => secs = s,
                (2, Value::Int(n)) => nanos = n.min(999_999_999),
                _ => {}
            }
        }
        // A negative delay (a two's complement varint) is far beyond any bound: held to it.
        return Some(Duration::new(secs, u32::try_from(nanos).unwrap_or(0)));
    }
    None
}

enum Value<'a> {
    Int(u64),
    Bytes(&'a [u8]),
}

/// The fields of one message (at most 64), or `None` when it does not parse.
fn fields(mut b: &[u8]) -> Option<Vec<(u64, Value<'_>)>> {
    let mut out = Vec::new();
    while !b.is_empty() {
        if out.len() == 64 {
            return None;
        }
        let key = varint(&mut b)?;
        let value = match key & 7 {
            0 => Value::Int(varint(&mut b)?),
            2 => {
                let len = usize::try_from(varint(&mut b)?).ok()?;
                let (v, rest) = (b.get(..len)?, b.get(len..)?);
                b = rest;
                Value::Bytes(v)
            }
            1 => {
                b = b.get(8..)?;
                Value::Int(0)
            }
            5 => {
                b = b.get(4..)?;
                Value::Int(0)
            }
            _ => return None,
        };
        out.push((key >> 3, value));
    }
    Some(out)
}

fn varint(b: &mut &[u8]) -> Option<u64> {
    let mut v = 0u64;
    for i in 0..10 {
        let (&byte, rest) = b.split_first()?;
        *b = rest;
        v |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// Standard base64, padded or not.
fn base64(text: &[u8]) -> Option<Vec<u8>> {
    let text = text
        .strip_suffix(b"==")
        .or_else(|| text.strip_suffix(b"="))
        .unwrap_or(text);
    let sextet = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    };
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    for chunk in text.chunks(4) {
        let mut n = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            n |= u32::from(sextet(c)?) << (18 - 6 * i);
        }
        let bytes = n.to_be_bytes();
        match chunk.len() {
            4 => out.extend_from_slice(&bytes[1..4]),
            3 => out.extend_from_slice(&bytes[1..3]),
            2 => out.push(bytes[1]),
            _ => return None,
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_retry_info_our_grpc_answers_carry() {
        // What `grpc::refusal_headers` writes for a 7 s wait, read back.
        let header = crate::grpc::status_details_for_tests(Duration::from_secs(7));
        assert_eq!(retry_info(&header), Some(Duration::from_secs(7)));
        let padded = [&header[..], b"=="].concat();
        let _ = retry_info(&padded);
        for junk in [&b""[..], b"!!!!", b"AAAA", &[b'A'; 9_000][..]] {
            assert_eq!(retry_info(junk), None);
        }
    }
}
