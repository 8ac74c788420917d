//! The cell codec: how a B+tree entry is encoded as bytes, shared by every page layout.
//!
//! Cells (all integers little-endian; both kinds start with the key length so the key is
//! always at offset 6):
//!
//! ```text
//! leaf:     klen u16 | vlen u32 | key | value                                   (inline)
//!           klen u16 | vlen u32 | key | first_ovfl u32                          (overflow)
//! interior: klen u16 | child u32 | key
//! long key: 0xFFFF u16 | vlen u32 or child u32 | klen u32 | prefix | key_ovfl u32 | …
//! ```
//!
//! A *long* key (longer than [`max_key_len`]) keeps its first [`key_prefix_len`] bytes in
//! the cell and the rest (its *tail*) in an overflow chain of its own (`key_ovfl`); a leaf
//! cell then continues with its value exactly as after an inline key (inline, or the
//! first page of the value's own chain). Interior cells with long keys own their own tail
//! chain too (a separator copied from a leaf key gets a fresh copy), so every chain has
//! exactly one owning cell.
//!
//! Invariants:
//! - A key is long iff `klen > max_key_len(usable)`, and then its cell says so with the
//!   marker [`KLEN_LONG`] in the u16 field (no inline key is that long: `max_key_len` is
//!   below 16 370 for every page size). Files written before long keys existed hold only
//!   inline keys, so they decode unchanged.
//! - A leaf value is inline iff `6 + key_local + vlen <= max_cell(usable)`, where
//!   `key_local` is what the key occupies in the cell (`klen`, or `8 + prefix` for a
//!   long key); otherwise the whole value (no local prefix) lives in an overflow chain.
//!   Both rules depend only on the lengths and the page's usable size, so no flag is
//!   stored and a reader can never disagree with the writer about which form a cell has
//!   (`cell_size` decodes the size from the header alone).
//! - Every cell is at most [`max_cell`] bytes, chosen so that four cells and their
//!   pointers fit in a node after a header of up to [`NODE_HEADER_MAX`] bytes. That is
//!   what lets the tree split any overflowing node into two fitting halves, in every
//!   layout that reserves no more than that for its own header. A long-key cell with an
//!   overflowing value is `18 + prefix <= max_cell` bytes (`key_prefix_len` is an eighth
//!   of `max_key_len`), so the bound holds for them too.
//! - Accessors on a cell ([`cell_key`], [`cell_child`], [`cell_payload`]) assume a
//!   well-formed cell, one from the encoders here or one that
//!   [`CellArray`](crate::page::cells::CellArray) bounds-checked; bytes from disk reach
//!   them only through that check.

use crate::error::Pgno;
use crate::le::{get_u16, get_u32};

/// Bytes of one cell pointer (a u16 offset in the node's cell-offset array).
pub const PTR_SIZE: usize = 2;
/// Bytes before the key in either kind of cell.
pub const CELL_HEADER: usize = 6;
/// Bytes of the overflow pointer stored in an overflowing leaf cell.
pub const OVFL_PTR: usize = 4;
/// Largest node header [`max_cell`] leaves room for: the stock slotted page's 12 bytes.
pub const NODE_HEADER_MAX: usize = 12;
/// The u16 key-length field of a cell whose key is long (its length follows as a u32).
pub const KLEN_LONG: u16 = 0xFFFF;
/// Bytes a long key takes in its cell besides its prefix: the u32 length and the u32
/// first page of its tail chain.
pub const LONG_KEY_FIXED: usize = 8;

/// Largest cell (excluding its pointer): four of them with their pointers fill a node of
/// `usable` bytes after a header of [`NODE_HEADER_MAX`] bytes.
#[inline]
pub fn max_cell(usable: usize) -> usize {
    (usable.saturating_sub(NODE_HEADER_MAX) / 4).saturating_sub(PTR_SIZE)
}

/// Longest key stored whole in its cell: a leaf cell with this key and an overflow
/// pointer is `max_cell` bytes (an interior cell with the same key is 4 bytes smaller).
/// Longer keys are long keys (prefix in the cell, tail in a chain).
pub fn max_key_len(usable: usize) -> usize {
    max_cell(usable).saturating_sub(CELL_HEADER + OVFL_PTR)
}

/// Bytes of a long key kept in its cell.
pub fn key_prefix_len(usable: usize) -> usize {
    max_key_len(usable) / 8
}

/// Whether a key of `klen` bytes is stored whole in its cell.
#[inline]
pub fn key_is_inline(usable: usize, klen: usize) -> bool {
    klen <= max_key_len(usable)
}

/// Bytes a key of `klen` bytes takes in its cell after the 6-byte header.
#[inline]
pub fn key_local(usable: usize, klen: usize) -> usize {
    if key_is_inline(usable, klen) {
        klen
    } else {
        LONG_KEY_FIXED + key_prefix_len(usable)
    }
}

/// Whether a leaf value of `vlen` bytes with a key of `klen` bytes is stored inline.
#[inline]
pub fn value_is_inline(usable: usize, klen: usize, vlen: usize) -> bool {
    CELL_HEADER
        .saturating_add(key_local(usable, klen))
        .saturating_add(vlen)
        <= max_cell(usable)
}

/// How a cell's key is stored: whole, or as a prefix plus a tail chain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CellKey<'a> {
    Inline(&'a [u8]),
    /// A key of `len` bytes: `prefix` here, the remaining `len - prefix.len()` bytes in
    /// the overflow chain starting at `first`.
    Long {
        len: u32,
        prefix: &'a [u8],
        first: Pgno,
    },
}

impl<'a> CellKey<'a> {
    /// Total key length.
    pub fn len(&self) -> usize {
        match self {
            CellKey::Inline(k) => k.len(),
            CellKey::Long { len, .. } => *len as usize,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The tail chain of a long key: (bytes in the chain, first page).
    pub fn tail(&self) -> Option<(u32, Pgno)> {
        match *self {
            CellKey::Inline(_) => None,
            CellKey::Long { len, prefix, first } => Some((len - prefix.len() as u32, first)),
        }
    }
}

/// Append the key part (`klen` field onwards) of a cell for `key` to `c`: the key
/// itself, or (long key) its prefix and the first page of the chain holding the rest,
/// written beforehand by the caller.
fn put_key(c: &mut Vec<u8>, usable: usize, key: &[u8], tail_first: Pgno) {
    if key_is_inline(usable, key.len()) {
        c.extend_from_slice(key);
    } else {
        let p = key_prefix_len(usable);
        c.extend_from_slice(&(key.len() as u32).to_le_bytes());
        c.extend_from_slice(&key[..p]);
        c.extend_from_slice(&tail_first.to_le_bytes());
    }
}

fn klen_field(usable: usize, klen: usize) -> [u8; 2] {
    if key_is_inline(usable, klen) {
        (klen as u16).to_le_bytes()
    } else {
        KLEN_LONG.to_le_bytes()
    }
}

/// [`leaf_cell_into`] a new buffer.
#[cfg(test)]
pub fn leaf_cell(usable: usize, key: &[u8], tail_first: Pgno, value: Payload<'_>) -> Vec<u8> {
    let mut c = Vec::new();
    leaf_cell_into(&mut c, usable, key, tail_first, value);
    c
}

/// Encode into `c` (cleared first; a caller may reuse its buffers) a leaf cell for `key`
/// with its value part `value` (inline bytes, or the length and first page of the value's
/// chain, written beforehand). `tail_first`: the first page of a long key's tail chain,
/// also written beforehand (ignored for inline keys). The caller chose `value`'s form by
/// [`value_is_inline`].
pub fn leaf_cell_into(
    c: &mut Vec<u8>,
    usable: usize,
    key: &[u8],
    tail_first: Pgno,
    value: Payload<'_>,
) {
    let local = key_local(usable, key.len());
    let (vlen, vbytes) = match value {
        Payload::Inline(v) => (v.len() as u32, v.len()),
        Payload::Overflow { len, .. } => (len, OVFL_PTR),
    };
    c.clear();
    c.reserve(CELL_HEADER + local + vbytes);
    c.extend_from_slice(&klen_field(usable, key.len()));
    c.extend_from_slice(&vlen.to_le_bytes());
    put_key(c, usable, key, tail_first);
    match value {
        Payload::Inline(v) => c.extend_from_slice(v),
        Payload::Overflow { first, .. } => c.extend_from_slice(&first.to_le_bytes()),
    }
}

#[cfg(test)]
/// Encode a leaf cell with an inline key and an inline value.
pub fn leaf_cell_inline(key: &[u8], value: &[u8]) -> Vec<u8> {
    debug_assert!(key.len() < KLEN_LONG as usize);
    let mut c = Vec::with_capacity(CELL_HEADER + key.len() + value.len());
    c.extend_from_slice(&(key.len() as u16).to_le_bytes());
    c.extend_from_slice(&(value.len() as u32).to_le_bytes());
    c.extend_from_slice(key);
    c.extend_from_slice(value);
    c
}

#[cfg(test)]
/// Encode a leaf cell with an inline key whose value of `vlen` bytes starts at overflow
/// page `first`.
pub fn leaf_cell_overflow(key: &[u8], vlen: u32, first: Pgno) -> Vec<u8> {
    debug_assert!(key.len() < KLEN_LONG as usize);
    let mut c = Vec::with_capacity(CELL_HEADER + key.len() + OVFL_PTR);
    c.extend_from_slice(&(key.len() as u16).to_le_bytes());
    c.extend_from_slice(&vlen.to_le_bytes());
    c.extend_from_slice(key);
    c.extend_from_slice(&first.to_le_bytes());
    c
}

#[cfg(test)]
/// Encode an interior cell with an inline key.
pub fn interior_cell(child: Pgno, key: &[u8]) -> Vec<u8> {
    debug_assert!(key.len() < KLEN_LONG as usize);
    let mut c = Vec::with_capacity(CELL_HEADER + key.len());
    c.extend_from_slice(&(key.len() as u16).to_le_bytes());
    c.extend_from_slice(&child.to_le_bytes());
    c.extend_from_slice(key);
    c
}

/// Point a well-formed cell with a long key at a new tail chain.
pub fn set_key_tail(usable: usize, cell: &mut [u8], first: Pgno) {
    debug_assert_eq!(get_u16(cell, 0), KLEN_LONG as usize);
    let at = CELL_HEADER + 4 + key_prefix_len(usable);
    cell[at..at + 4].copy_from_slice(&first.to_le_bytes());
}

/// Point a well-formed leaf cell whose value lives in an overflow chain at a new first
/// page of that chain (the chain moved: `auto_vacuum`'s relocation).
pub fn set_value_first(usable: usize, cell: &mut [u8], first: Pgno) {
    debug_assert!(matches!(
        cell_payload(usable, cell),
        Payload::Overflow { .. }
    ));
    let at = CELL_HEADER + stored_key_local(usable, cell);
    cell[at..at + 4].copy_from_slice(&first.to_le_bytes());
}

/// An interior cell holding exactly the key part of `cell` (a cell of either kind, whose
/// key part is copied as is: for a long key the caller must give the result a chain of
/// its own, see `tree::btree`), pointing at `child`.
pub fn interior_from_key_part(usable: usize, cell: &[u8], child: Pgno) -> Vec<u8> {
    let end = CELL_HEADER + stored_key_local(usable, cell);
    let mut c = Vec::with_capacity(end);
    c.extend_from_slice(&cell[..2]);
    c.extend_from_slice(&child.to_le_bytes());
    c.extend_from_slice(&cell[CELL_HEADER..end]);
    c
}

/// Bytes the key of a well-formed cell takes after the header.
fn stored_key_local(usable: usize, cell: &[u8]) -> usize {
    let k16 = get_u16(cell, 0);
    if k16 == KLEN_LONG as usize {
        LONG_KEY_FIXED + key_prefix_len(usable)
    } else {
        k16
    }
}

/// Key of a well-formed cell of either kind (one produced by the encoders or returned
/// by [`CellArray::cell`](crate::page::cells::CellArray::cell), which checked its size).
#[inline]
pub fn cell_key(usable: usize, cell: &[u8]) -> CellKey<'_> {
    let k16 = get_u16(cell, 0);
    if k16 != KLEN_LONG as usize {
        return CellKey::Inline(&cell[CELL_HEADER..CELL_HEADER + k16]);
    }
    let p = key_prefix_len(usable);
    let at = CELL_HEADER + 4;
    CellKey::Long {
        len: get_u32(cell, CELL_HEADER),
        prefix: &cell[at..at + p],
        first: get_u32(cell, at + p),
    }
}

/// Child pointer of a well-formed interior cell.
pub fn cell_child(cell: &[u8]) -> Pgno {
    get_u32(cell, 2)
}

/// Where a leaf value lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Payload<'a> {
    Inline(&'a [u8]),
    Overflow { len: u32, first: Pgno },
}

/// Key and value of a well-formed leaf cell that holds both inline (the common cell),
/// read from its header at once; None for any other cell (a long key, an overflowing
/// value), which `cell_key` and `cell_payload` read. `cell` is exactly the cell's bytes
/// (`CellArray::cell_range`): an inline cell is its header, key and value, nothing else.
/// The same answer as `cell_key` and `cell_payload` (tested there).
#[inline]
pub fn inline_parts(usable: usize, cell: &[u8]) -> Option<(&[u8], &[u8])> {
    let k16 = get_u16(cell, 0);
    if k16 == KLEN_LONG as usize {
        return None;
    }
    let vlen = get_u32(cell, 2) as usize;
    (CELL_HEADER + k16 + vlen == cell.len() && value_is_inline(usable, k16, vlen)).then(|| {
        (
            &cell[CELL_HEADER..CELL_HEADER + k16],
            &cell[CELL_HEADER + k16..],
        )
    })
}

/// Value part of a well-formed leaf cell.
#[inline]
pub fn cell_payload(usable: usize, cell: &[u8]) -> Payload<'_> {
    let k16 = get_u16(cell, 0);
    let vlen = get_u32(cell, 2);
    // An inline key (the hot path) takes `klen` bytes; a long key a fixed part.
    let (klen, at) = if k16 == KLEN_LONG as usize {
        let klen = get_u32(cell, CELL_HEADER) as usize;
        (klen, CELL_HEADER + LONG_KEY_FIXED + key_prefix_len(usable))
    } else {
        (k16, CELL_HEADER + k16)
    };
    if value_is_inline(usable, klen, vlen as usize) {
        Payload::Inline(&cell[at..at + vlen as usize])
    } else {
        Payload::Overflow {
            len: vlen,
            first: get_u32(cell, at),
        }
    }
}

/// Size of the cell at the start of `area`, or None if its header does not fit in `area`
/// or it claims more bytes than `area` holds, or it is a long-key cell whose key length
/// is one that would be stored inline (no writer makes that).
#[inline]
pub(crate) fn cell_size(leaf: bool, usable: usize, area: &[u8]) -> Option<usize> {
    if area.len() < CELL_HEADER {
        return None;
    }
    let k16 = get_u16(area, 0);
    if k16 == KLEN_LONG as usize {
        return long_cell_size(leaf, usable, area);
    }
    // An inline key (the hot path): the value rule with `key_local == klen`.
    let size = if leaf {
        let vlen = get_u32(area, 2) as usize;
        if CELL_HEADER + k16 + vlen <= max_cell(usable) {
            CELL_HEADER + k16 + vlen
        } else {
            CELL_HEADER + k16 + OVFL_PTR
        }
    } else {
        CELL_HEADER + k16
    };
    (size <= area.len()).then_some(size)
}

/// [`cell_size`] of a cell with the long-key marker.
#[cold]
fn long_cell_size(leaf: bool, usable: usize, area: &[u8]) -> Option<usize> {
    if area.len() < CELL_HEADER + 4 {
        return None;
    }
    let klen = get_u32(area, CELL_HEADER) as usize;
    if key_is_inline(usable, klen) {
        return None;
    }
    let local = LONG_KEY_FIXED + key_prefix_len(usable);
    let size = if leaf {
        let vlen = get_u32(area, 2) as usize;
        if value_is_inline(usable, klen, vlen) {
            CELL_HEADER + local + vlen
        } else {
            CELL_HEADER + local + OVFL_PTR
        }
    } else {
        CELL_HEADER + local
    };
    (size <= area.len()).then_some(size)
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: usize = 508;

    #[test]
    fn sizes_decode_from_the_header_alone() {
        let inline = leaf_cell_inline(b"key", &[7; 20]);
        assert_eq!(inline.len(), CELL_HEADER + 3 + 20);
        assert_eq!(cell_size(true, US, &inline), Some(inline.len()));
        assert_eq!(cell_payload(US, &inline), Payload::Inline(&[7; 20]));
        let ovfl = leaf_cell_overflow(b"key", 10_000, 42);
        assert_eq!(cell_size(true, US, &ovfl), Some(CELL_HEADER + 3 + OVFL_PTR));
        let interior = interior_cell(9, b"sep");
        assert_eq!(cell_size(false, US, &interior), Some(CELL_HEADER + 3));
        assert_eq!(
            (cell_child(&interior), cell_key(US, &interior)),
            (9, CellKey::Inline(&b"sep"[..]))
        );
        // A header claiming more bytes than the area holds, or a cut header, is no cell.
        assert_eq!(cell_size(true, US, &inline[..inline.len() - 1]), None);
        assert_eq!(cell_size(false, US, &interior[..CELL_HEADER - 1]), None);
        // The one-read fast path agrees with cell_key/cell_payload, and declines the rest.
        assert_eq!(
            inline_parts(US, &inline),
            Some((&b"key"[..], &[7u8; 20][..]))
        );
        assert_eq!(inline_parts(US, &ovfl), None);
        // A 4-byte value is inline by the rule, whatever the writer meant: both agree.
        let tiny = leaf_cell_overflow(b"key", 4, 42);
        assert_eq!(
            cell_payload(US, &tiny),
            Payload::Inline(&42u32.to_le_bytes())
        );
        assert_eq!(
            inline_parts(US, &tiny),
            Some((&b"key"[..], &42u32.to_le_bytes()[..]))
        );
        let long: Vec<u8> = (0..500u32).map(|i| i as u8).collect();
        let lk = leaf_cell(US, &long, 7, Payload::Inline(b"v"));
        assert_eq!(inline_parts(US, &lk), None);
    }

    #[test]
    fn four_maximal_cells_fit_after_the_largest_node_header() {
        for usable in [508, 4092, 16380, 65535] {
            let mc = max_cell(usable);
            assert!(
                NODE_HEADER_MAX + 4 * (mc + PTR_SIZE) <= usable,
                "usable {usable}"
            );
            // The inline rule switches exactly at max_cell.
            let klen = 10;
            assert!(value_is_inline(usable, klen, mc - CELL_HEADER - klen));
            assert!(!value_is_inline(usable, klen, mc - CELL_HEADER - klen + 1));
            // The longest key still leaves room for the overflow pointer.
            assert_eq!(max_key_len(usable) + CELL_HEADER + OVFL_PTR, mc);
            // A long key's cell with an overflowing value is within max_cell, and no
            // inline key length can be mistaken for the long-key marker.
            let long = max_key_len(usable) + 1;
            assert!(CELL_HEADER + key_local(usable, long) + OVFL_PTR <= mc);
            assert!(max_key_len(usable) < KLEN_LONG as usize);
        }
    }

    #[test]
    fn long_keys_keep_a_prefix_and_point_at_their_tail() {
        let key: Vec<u8> = (0..500u32).map(|i| i as u8).collect();
        let p = key_prefix_len(US);
        assert!(!key_is_inline(US, key.len()) && p > 0);
        for value in [
            Payload::Inline(&b"vv"[..]),
            Payload::Overflow {
                len: 9000,
                first: 77,
            },
        ] {
            let c = leaf_cell(US, &key, 5, value);
            assert_eq!(cell_size(true, US, &c), Some(c.len()));
            assert!(c.len() <= max_cell(US));
            assert_eq!(
                cell_key(US, &c),
                CellKey::Long {
                    len: 500,
                    prefix: &key[..p],
                    first: 5
                }
            );
            assert_eq!(cell_payload(US, &c), value);
            // The separator made from it keeps the key part; its chain is re-pointed.
            let mut sep = interior_from_key_part(US, &c, 3);
            set_key_tail(US, &mut sep, 8);
            assert_eq!(cell_size(false, US, &sep), Some(sep.len()));
            assert_eq!(cell_child(&sep), 3);
            assert_eq!(
                cell_key(US, &sep),
                CellKey::Long {
                    len: 500,
                    prefix: &key[..p],
                    first: 8
                }
            );
            assert_eq!(cell_key(US, &sep).tail(), Some((500 - p as u32, 8)));
        }
        // A long-key marker with a length that would be inline is not a cell.
        let mut bad = leaf_cell(US, &key, 5, Payload::Inline(b""));
        bad[CELL_HEADER..CELL_HEADER + 4].copy_from_slice(&10u32.to_le_bytes());
        assert_eq!(cell_size(true, US, &bad), None);
        // Keys up to the inline limit keep the old encoding byte for byte.
        let k = vec![1u8; max_key_len(US)];
        assert_eq!(
            leaf_cell(US, &k, 0, Payload::Inline(b"")),
            leaf_cell_inline(&k, b"")
        );
    }
}
