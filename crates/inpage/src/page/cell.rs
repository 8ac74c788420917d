//! The cell codec: how a B+tree entry is encoded as bytes, shared by every page layout.
//!
//! Cells (all integers little-endian; both kinds start with the key length so the key is
//! always at offset 6):
//!
//! ```text
//! leaf:     klen u16 | vlen u32 | key | value            (inline)
//!           klen u16 | vlen u32 | key | first_ovfl u32   (overflow)
//! interior: klen u16 | child u32 | key
//! ```
//!
//! Invariants:
//! - A leaf value is inline iff `6 + klen + vlen <= max_cell(usable)`; otherwise the whole
//!   value (no local prefix) lives in an overflow chain. The rule depends only on the
//!   lengths and the page's usable size, so no flag is stored and a reader can never
//!   disagree with the writer about which form a cell has (`cell_size` decodes the size
//!   from the header alone).
//! - Every cell is at most [`max_cell`] bytes, chosen so that four cells and their
//!   pointers fit in a node after a header of up to [`NODE_HEADER_MAX`] bytes. That is
//!   what lets the tree split any overflowing node into two fitting halves, in every
//!   layout that reserves no more than that for its own header.
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

/// Largest cell (excluding its pointer): four of them with their pointers fill a node of
/// `usable` bytes after a header of [`NODE_HEADER_MAX`] bytes.
pub fn max_cell(usable: usize) -> usize {
    (usable.saturating_sub(NODE_HEADER_MAX) / 4).saturating_sub(PTR_SIZE)
}

/// Longest key: a leaf cell with this key and an overflow pointer is `max_cell` bytes
/// (an interior cell with the same key is 4 bytes smaller).
pub fn max_key_len(usable: usize) -> usize {
    max_cell(usable).saturating_sub(CELL_HEADER + OVFL_PTR)
}

/// Whether a leaf value of `vlen` bytes with a key of `klen` bytes is stored inline.
pub fn value_is_inline(usable: usize, klen: usize, vlen: usize) -> bool {
    CELL_HEADER.saturating_add(klen).saturating_add(vlen) <= max_cell(usable)
}

/// Encode a leaf cell whose value is inline.
pub fn leaf_cell_inline(key: &[u8], value: &[u8]) -> Vec<u8> {
    let mut c = Vec::with_capacity(CELL_HEADER + key.len() + value.len());
    c.extend_from_slice(&(key.len() as u16).to_le_bytes());
    c.extend_from_slice(&(value.len() as u32).to_le_bytes());
    c.extend_from_slice(key);
    c.extend_from_slice(value);
    c
}

/// Encode a leaf cell whose value of `vlen` bytes starts at overflow page `first`.
pub fn leaf_cell_overflow(key: &[u8], vlen: u32, first: Pgno) -> Vec<u8> {
    let mut c = Vec::with_capacity(CELL_HEADER + key.len() + OVFL_PTR);
    c.extend_from_slice(&(key.len() as u16).to_le_bytes());
    c.extend_from_slice(&vlen.to_le_bytes());
    c.extend_from_slice(key);
    c.extend_from_slice(&first.to_le_bytes());
    c
}

/// Encode an interior cell.
pub fn interior_cell(child: Pgno, key: &[u8]) -> Vec<u8> {
    let mut c = Vec::with_capacity(CELL_HEADER + key.len());
    c.extend_from_slice(&(key.len() as u16).to_le_bytes());
    c.extend_from_slice(&child.to_le_bytes());
    c.extend_from_slice(key);
    c
}

/// Key of a well-formed cell of either kind (one produced by the encoders or returned
/// by [`CellArray::cell`](crate::page::cells::CellArray::cell), which checked its size).
pub fn cell_key(cell: &[u8]) -> &[u8] {
    let klen = get_u16(cell, 0);
    &cell[CELL_HEADER..CELL_HEADER + klen]
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

/// Value part of a well-formed leaf cell.
pub fn cell_payload(usable: usize, cell: &[u8]) -> Payload<'_> {
    let klen = get_u16(cell, 0);
    let vlen = get_u32(cell, 2);
    let at = CELL_HEADER + klen;
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
/// or it claims more bytes than `area` holds.
pub(crate) fn cell_size(leaf: bool, usable: usize, area: &[u8]) -> Option<usize> {
    if area.len() < CELL_HEADER {
        return None;
    }
    let klen = get_u16(area, 0);
    let size = if leaf {
        let vlen = get_u32(area, 2) as usize;
        if value_is_inline(usable, klen, vlen) {
            CELL_HEADER + klen + vlen
        } else {
            CELL_HEADER + klen + OVFL_PTR
        }
    } else {
        CELL_HEADER + klen
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
            (cell_child(&interior), cell_key(&interior)),
            (9, &b"sep"[..])
        );
        // A header claiming more bytes than the area holds, or a cut header, is no cell.
        assert_eq!(cell_size(true, US, &inline[..inline.len() - 1]), None);
        assert_eq!(cell_size(false, US, &interior[..CELL_HEADER - 1]), None);
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
        }
    }
}
