//! Redis key names and Cluster hash slots.

use crate::key::Key;

/// `<prefix>:{<principal>}:<limit>`: the hash tag is the key's own principal, so the
/// limits of one principal share a slot and different principals spread over the cluster.
/// A principal's rendering never holds `{` or `}`, so user input cannot move the tag.
pub(super) fn render(prefix: &str, key: &Key) -> String {
    let p = key.principal().as_str();
    let l = key.limit().name();
    let mut s = String::with_capacity(prefix.len() + p.len() + l.len() + 4);
    s.push_str(prefix);
    s.push_str(":{");
    s.push_str(p);
    s.push_str("}:");
    s.push_str(l);
    s
}

/// CRC16/XMODEM, as Redis Cluster computes slots.
pub(super) fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in data {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// The Cluster hash slot of every key of `principal` (the principal is the hash tag).
pub(super) fn principal_hash_slot(principal: &str) -> u16 {
    crc16(principal.as_bytes()) % 16_384
}

/// The Cluster hash slot of a key name (honouring its `{tag}`).
pub(super) fn hash_slot(name: &str) -> u16 {
    let bytes = name.as_bytes();
    let tagged = bytes.iter().position(|&b| b == b'{').and_then(|open| {
        let rest = &bytes[open + 1..];
        rest.iter()
            .position(|&b| b == b'}')
            .filter(|&close| close > 0)
            .map(|close| &rest[..close])
    });
    crc16(tagged.unwrap_or(bytes)) % 16_384
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_match_redis() {
        // Values from the Redis Cluster specification and `CLUSTER KEYSLOT`.
        assert_eq!(crc16(b"123456789"), 0x31c3);
        assert_eq!(hash_slot("foo"), 12_182);
        assert_eq!(
            hash_slot("{user1000}.following"),
            hash_slot("{user1000}.followers")
        );
        assert_eq!(hash_slot("foo{}{bar}"), hash_slot("foo{}{bar}"));
        assert_eq!(hash_slot("foo{{bar}}zap"), hash_slot("{bar"));
        assert_eq!(
            hash_slot("rl:v3:{u:alice}:poll:29433133"),
            principal_hash_slot("u:alice")
        );
    }
}
