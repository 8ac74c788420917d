//! Keys as the user sees them, and their byte encoding in trees.
//!
//! Invariant: the encoding of integer keys (8 big-endian bytes with the sign bit flipped)
//! orders exactly like the integers under plain byte comparison, so integer trees need no
//! comparator of their own and `check` can verify them with memcmp.

use std::cmp::Ordering;
use std::sync::Arc;

use crate::tree::CmpFn;

/// A user-supplied key order for a byte-keyed tree. It must be a total order and must
/// never change for the life of the tree.
pub type Comparator = Arc<CmpFn>;

/// The kind of keys a tree holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KeyKind {
    /// `i64` keys in numeric order.
    Int,
    /// Byte-string keys, ordered by memcmp or a caller-supplied comparator.
    Bytes,
}

impl KeyKind {
    pub(crate) fn code(self) -> u8 {
        match self {
            KeyKind::Int => 1,
            KeyKind::Bytes => 2,
        }
    }
    pub(crate) fn from_code(c: u8) -> Option<KeyKind> {
        match c {
            1 => Some(KeyKind::Int),
            2 => Some(KeyKind::Bytes),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            KeyKind::Int => "integer",
            KeyKind::Bytes => "byte",
        }
    }
}

/// A borrowed key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Key<'a> {
    Int(i64),
    Bytes(&'a [u8]),
}

impl<'a> Key<'a> {
    pub fn kind(&self) -> KeyKind {
        match self {
            Key::Int(_) => KeyKind::Int,
            Key::Bytes(_) => KeyKind::Bytes,
        }
    }
}

impl From<i64> for Key<'_> {
    fn from(k: i64) -> Self {
        Key::Int(k)
    }
}
impl<'a> From<&'a [u8]> for Key<'a> {
    fn from(k: &'a [u8]) -> Self {
        Key::Bytes(k)
    }
}
impl<'a, const N: usize> From<&'a [u8; N]> for Key<'a> {
    fn from(k: &'a [u8; N]) -> Self {
        Key::Bytes(k)
    }
}
impl<'a> From<&'a Vec<u8>> for Key<'a> {
    fn from(k: &'a Vec<u8>) -> Self {
        Key::Bytes(k)
    }
}
impl<'a> From<&'a str> for Key<'a> {
    fn from(k: &'a str) -> Self {
        Key::Bytes(k.as_bytes())
    }
}

/// An owned key, as returned by cursors and ranges.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum OwnedKey {
    Int(i64),
    Bytes(Vec<u8>),
}

impl OwnedKey {
    /// The integer, if this is an integer key.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            OwnedKey::Int(i) => Some(*i),
            OwnedKey::Bytes(_) => None,
        }
    }
    /// The bytes, if this is a byte key.
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            OwnedKey::Int(_) => None,
            OwnedKey::Bytes(b) => Some(b),
        }
    }
    pub fn as_key(&self) -> Key<'_> {
        match self {
            OwnedKey::Int(i) => Key::Int(*i),
            OwnedKey::Bytes(b) => Key::Bytes(b),
        }
    }
}

/// Encode an integer key.
pub(crate) fn encode_int(k: i64) -> [u8; 8] {
    ((k as u64) ^ (1 << 63)).to_be_bytes()
}

/// Decode an integer key; `None` if the stored key is not 8 bytes.
pub(crate) fn decode_int(b: &[u8]) -> Option<i64> {
    let a: [u8; 8] = b.try_into().ok()?;
    Some((u64::from_be_bytes(a) ^ (1 << 63)) as i64)
}

/// The default byte order.
pub(crate) fn memcmp(a: &[u8], b: &[u8]) -> Ordering {
    a.cmp(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int_encoding_orders_like_integers() {
        let ks = [i64::MIN, -1_000_000, -2, -1, 0, 1, 2, 255, 256, i64::MAX];
        for w in ks.windows(2) {
            assert!(encode_int(w[0]) < encode_int(w[1]), "{} vs {}", w[0], w[1]);
        }
        for k in ks {
            assert_eq!(decode_int(&encode_int(k)), Some(k));
        }
        assert_eq!(decode_int(b"short"), None);
    }
}
