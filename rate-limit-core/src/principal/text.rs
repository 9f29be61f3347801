//! A principal's rendering, inline: building a principal allocates nothing.

use super::{MAX_LITERAL_LEN, MAX_PRINCIPAL_LEN, PrincipalKind};
use crate::name::all_name_bytes;

/// The rendering, inline: building a principal allocates nothing.
#[derive(Clone, PartialEq, Eq, Hash)]
pub(super) struct Text {
    pub(super) len: u8,
    buf: [u8; MAX_PRINCIPAL_LEN],
}

impl Text {
    /// Renderings are ASCII by construction; `as_str` cannot fail.
    pub(super) fn new(s: &str) -> Self {
        let mut buf = [0; MAX_PRINCIPAL_LEN];
        let n = s.len().min(MAX_PRINCIPAL_LEN);
        buf[..n].copy_from_slice(&s.as_bytes()[..n]);
        Self {
            len: u8::try_from(n).unwrap_or(u8::MAX),
            buf,
        }
    }

    /// `prefix:value` (the prefix as [`PrincipalKind::write_prefix`] writes it) when
    /// `value` may stay literal and the whole fits.
    pub(super) fn literal(kind: &PrincipalKind, value: &[u8]) -> Option<Self> {
        let x: &[u8] = if matches!(kind, PrincipalKind::Custom(_)) {
            b"x."
        } else {
            b""
        };
        let tag = kind.tag().as_bytes();
        let n = x.len() + tag.len() + 1 + value.len();
        let ok = !value.is_empty()
            && value.len() <= MAX_LITERAL_LEN
            && n <= MAX_PRINCIPAL_LEN
            && all_name_bytes(value);
        if !ok {
            return None;
        }
        let mut buf = [0; MAX_PRINCIPAL_LEN];
        let mut at = 0;
        for part in [x, tag, b":", value] {
            buf[at..at + part.len()].copy_from_slice(part);
            at += part.len();
        }
        Some(Self {
            len: u8::try_from(n).ok()?,
            buf,
        })
    }

    pub(super) fn as_str(&self) -> &str {
        std::str::from_utf8(self.as_bytes()).unwrap_or("")
    }

    pub(super) fn as_bytes(&self) -> &[u8] {
        &self.buf[..usize::from(self.len)]
    }

    /// The bytes and the zeros after them up to a multiple of 8 (every constructor fills
    /// the buffer with zeros first): what a hash of whole words reads.
    #[inline]
    pub(super) fn padded(&self) -> &[u8] {
        &self.buf[..usize::from(self.len)
            .next_multiple_of(8)
            .min(MAX_PRINCIPAL_LEN)]
    }
}
