//! Writing a new version of an MVBT page.
//!
//! Invariants (module notes of [`super`], torn writes): a version built over a protected
//! version `P` keeps P's descriptor, P's array and bytes `[P.rec_lo, usable)` except
//! `end` fields of records P carries, into which it writes only its own tid (a delete)
//! or OPEN (a cell it keeps, resetting what a rolled-back writer may have left), both
//! greater than `P.tid`. Its new records and then its own array go below `P.rec_lo`;
//! every other byte is zero. A page without a protected
//! version is written compactly in slot 0. A cell the new node shares byte for byte with
//! a live cell of P reuses P's record (the record P inserted stays the cell's record, so
//! its `start` is the transaction that inserted it); every other new cell gets a record
//! with `start` = the writer's tid.

use std::collections::HashMap;

use super::*;
use crate::le::{put_u16, put_u64};

/// A node to write: its metadata and cells in key order (stock encodings).
#[derive(Clone, Copy, Debug)]
pub struct Version<'c> {
    /// Transaction writing it (not 0).
    pub tid: u64,
    pub leaf: bool,
    /// Interior: rightmost child (not 0). Ignored (stored as 0) for leaves.
    pub right: Pgno,
    pub cells: &'c [Vec<u8>],
    /// Lazy garbage collection: the new array names only live records. Off: it also
    /// keeps every entry of P's array that is dead, as plain MVBT keeps dead entries in
    /// a node until a version split copies it.
    pub lazy_gc: bool,
}

/// Append a record for `cell` (life span `[start, OPEN)`) below `*lo`, at least at
/// `floor`; its offset, or None if it does not fit.
fn append(out: &mut [u8], lo: &mut usize, floor: usize, start: u64, cell: &[u8]) -> Option<usize> {
    let at = lo.checked_sub(record_len(cell.len()))? / ALIGN * ALIGN;
    if at < floor {
        return None;
    }
    put_u64(out, at, OPEN);
    put_u64(out, at + 8, start);
    out[at + SPAN..at + SPAN + cell.len()].copy_from_slice(cell);
    *lo = at;
    Some(at)
}

/// Image of page `pgno` holding version `v`, built over `base` (the page's current image,
/// None for a page allocated in this transaction) keeping its newest valid version with a
/// tid `<= protect_max`. Returns None if the version does not fit beside it (the tree then
/// relocates the node to a fresh page). Errors: `InvalidArgument` for a bad geometry, tid
/// 0, an interior node without a right child or a cell over `max_cell`; `Corrupt` if
/// `base` has no valid version to protect.
pub fn build(
    pgno: Pgno,
    page_size: usize,
    usable: usize,
    base: Option<&[u8]>,
    protect_max: u64,
    v: &Version<'_>,
) -> Result<Option<Vec<u8>>> {
    if !geometry_ok(usable, page_size) || v.tid == 0 || (!v.leaf && v.right == 0) {
        return Err(Error::InvalidArgument(format!(
            "MVBT node: page size {page_size}, usable {usable}, tid {}, leaf {}, right {}",
            v.tid, v.leaf, v.right
        )));
    }
    let max = max_cell(usable);
    if let Some(c) = v
        .cells
        .iter()
        .find(|c| c.len() > max || c.len() < CELL_HEADER)
    {
        return Err(Error::InvalidArgument(format!(
            "MVBT node: cell of {} bytes (at most {max})",
            c.len()
        )));
    }
    let floor = AREA_START;
    let p = match base {
        Some(b) => Some(visible(pgno, b, usable, protect_max)?),
        None => None,
    };
    let (mut out, slot, mut lo) = match &p {
        None => (vec![0u8; page_size], 0, usable),
        Some(p) => {
            let mut out = p.buf[..page_size.min(p.buf.len())].to_vec();
            out.resize(page_size, 0);
            let slot = 1 - p.slot;
            out[slot * DESC_SIZE..(slot + 1) * DESC_SIZE].fill(0);
            out[floor..p.rec_lo()].fill(0);
            (out, slot, p.rec_lo())
        }
    };
    // P's live cells by their bytes, to reuse their records.
    // Only within one node type: the same bytes decode to another size as the other
    // type's cell, and a dead entry carried over would then overlap its neighbours (a
    // root that absorbs its child changes type).
    let same_type = p.as_ref().is_some_and(|p| p.is_leaf() == v.leaf);
    let mut reusable: HashMap<&[u8], usize> = HashMap::new();
    if let (Some(p), true) = (&p, same_type) {
        for k in 0..p.ncells() {
            if p.live(k) {
                reusable.insert(p.cell(k), p.record(k));
            }
        }
    }
    let mut entries: Vec<usize> = Vec::with_capacity(v.cells.len());
    for c in v.cells {
        let off = match reusable.remove(&c[..]) {
            Some(off) => {
                put_u64(&mut out, off, OPEN);
                off
            }
            None => match append(&mut out, &mut lo, floor, v.tid, c) {
                Some(off) => off,
                None => return Ok(None),
            },
        };
        entries.push(off);
    }
    let nlive = entries.len();
    // What is left of P's live cells is deleted by this version (all of them when the
    // node changes type).
    let deleted: Vec<usize> = match &p {
        Some(p) if !same_type => (0..p.ncells())
            .filter(|&k| p.live(k))
            .map(|k| p.record(k))
            .collect(),
        _ => reusable.values().copied().collect(),
    };
    for off in deleted {
        put_u64(&mut out, off, v.tid);
    }
    // An empty version keeps none: it must always fit (the tree's root pointer).
    if let (Some(p), false, true, false) = (&p, v.lazy_gc, same_type, v.cells.is_empty()) {
        for k in 0..p.ncells() {
            let off = p.record(k);
            if !p.live(k) || get_u64(&out, off) == v.tid {
                entries.push(off);
            }
        }
    }
    if entries.len() > max_cells(usable) {
        return Ok(None);
    }
    let a = match lo.checked_sub(2 * entries.len()) {
        Some(a) if a >= floor => a,
        _ => return Ok(None),
    };
    lo = a;
    for (k, &off) in entries.iter().enumerate() {
        put_u16(&mut out, a + 2 * k, off);
    }
    let h = Head {
        tid: v.tid,
        txn_size: 0,
        ncells: entries.len(),
        rec_lo: lo,
        typ: if v.leaf {
            page_type::LEAF
        } else {
            page_type::INTERIOR
        },
        flags: 0,
        nlive,
        right: if v.leaf { 0 } else { v.right },
        zero: 0,
        crc: 0,
    };
    h.write(&mut out, slot);
    let sizes: Vec<usize> = entries
        .iter()
        .map(|&off| cell::cell_size(v.leaf, usable, &out[off + SPAN..usable]).unwrap_or(0))
        .collect();
    let crc = version_crc(&out, slot, &h, &sizes);
    put_u32(&mut out, slot * DESC_SIZE + D_CRC, crc);
    debug_assert!(
        check_slot(pgno, &out, usable, slot).is_ok(),
        "built version fails validation: {:?}",
        check_slot(pgno, &out, usable, slot).err()
    );
    Ok(Some(out))
}
