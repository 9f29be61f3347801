//! Names: of limits, of custom principal kinds, of key prefixes. One alphabet, safe inside
//! a store key and as an IETF structured-field string.

use crate::error::{ConfigError, ConfigErrorKind};

/// The longest limit name, in bytes.
pub(crate) const MAX_NAME_LEN: usize = 64;

/// Checks a limit name: 1 to 64 bytes of `A-Z a-z 0-9 . _ -`.
///
/// Such a name is safe inside a store key and as an IETF structured-field string.
pub(crate) fn validate_name(name: &str) -> Result<(), ConfigError> {
    if name.is_empty() || name.len() > MAX_NAME_LEN {
        return Err(ConfigError::new(
            ConfigErrorKind::NameInvalid,
            "name",
            format!("a limit name must be 1 to {MAX_NAME_LEN} bytes long"),
        ));
    }
    if !name.bytes().all(is_name_byte) {
        return Err(ConfigError::new(
            ConfigErrorKind::NameInvalid,
            "name",
            "a limit name may hold only A-Z a-z 0-9 . _ -",
        ));
    }
    Ok(())
}

/// Whether `b` is one of `A-Z a-z 0-9 . _ -` (a table lookup).
pub(crate) fn is_name_byte(b: u8) -> bool {
    NAME_BYTES[usize::from(b)]
}

/// Whether every byte of `bytes` is a name byte: every principal's bytes are checked on
/// every request, so without a branch a byte (the table's answers and-ed together), where
/// `all(is_name_byte)` stops at each byte to test it.
pub(crate) fn all_name_bytes(bytes: &[u8]) -> bool {
    bytes
        .iter()
        .fold(true, |ok, &b| ok & NAME_BYTES[usize::from(b)])
}

static NAME_BYTES: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        #[allow(clippy::cast_possible_truncation, reason = "b < 256")]
        let c = b as u8;
        table[b] = c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-');
        b += 1;
    }
    table
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fold_and_the_table_agree_on_every_byte() {
        for b in 0..=255u8 {
            assert_eq!(all_name_bytes(&[b]), is_name_byte(b), "byte {b}");
            assert_eq!(
                all_name_bytes(&[b'a', b, b'z']),
                is_name_byte(b),
                "byte {b}"
            );
        }
        assert!(all_name_bytes(b""));
    }
}
