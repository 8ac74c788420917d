//! Writing a new version of an MVBT page.
//!
//! Invariants (module notes of [`super`], torn writes): a version built over a protected
//! version `P` keeps P's descriptor, P's array and every record P's array names, except
//! `end` fields of those records, into which it writes only its own tid (a delete)
//! or OPEN (a cell it keeps, resetting what a rolled-back writer may have left), both
//! greater than `P.tid`. Its own array and new records go into bytes P does not
//! reference (`Space`), lowest first. Other unreferenced bytes keep what they held. A page without a
//! protected version is written compactly in slot 0. A cell the new node shares byte for byte with
//! a live cell of P reuses P's record (the record P inserted stays the cell's record, so
//! its `start` is the transaction that inserted it); every other new cell gets a record
//! with `start` = the writer's tid.

use std::collections::HashMap;

use super::*;
use crate::le::{put_u16, put_u64};
use crate::seam::{planted, Plant};

/// Where a new version's bytes may go: the page's unreferenced runs, lowest first.
///
/// Why lowest first: the descriptors are in sector 0 and a commit writes one span from
/// the first to the last sector it changes, so bytes placed low keep that span (and the
/// device bytes of a direct write) short; the runs higher up (records and arrays the
/// protected version no longer names) are taken once the low ones are used up, which is
/// what lets a page take versions in place instead of being copied.
struct Space {
    /// Unreferenced runs `[s, e)`, in address order.
    holes: Vec<(usize, usize)>,
}

impl Space {
    /// `len` bytes at an offset that is a multiple of `align`, at the bottom of the lowest
    /// run that holds them; None if no run does.
    fn take(&mut self, len: usize, align: usize) -> Option<usize> {
        for i in 0..self.holes.len() {
            let (s, e) = self.holes[i];
            let at = s.next_multiple_of(align);
            if at + len > e {
                continue;
            }
            // What is left beside the placement stays usable (alignment slack is small).
            if at + len < e {
                self.holes[i] = (at + len, e);
            } else {
                self.holes.remove(i);
            }
            if at > s {
                self.holes.insert(i, (s, at));
            }
            return Some(at);
        }
        None
    }
}

fn put_record(out: &mut [u8], at: usize, start: u64, cell: &[u8]) {
    put_u64(out, at, OPEN);
    put_u64(out, at + 8, start);
    out[at + SPAN..at + SPAN + cell.len()].copy_from_slice(cell);
}

/// Image of page `pgno` holding version `v`, built over `base` (the page's current image,
/// None for a page allocated in this transaction) keeping its newest valid version with a
/// tid `<= protect_max`. Returns None if the version does not fit beside it (the tree then
/// relocates the node to a fresh page). Errors: `InvalidArgument` for a bad geometry, tid
/// 0, an interior node without a right child or a cell over `max_cell`; `Corrupt` if
/// `base` has no valid version to protect.
///
/// `lazy_gc` (lazy garbage collection): the new array names only live records. Off, it
/// also keeps every entry of P's array that is dead, as plain MVBT keeps dead entries in
/// a node until a version split copies it.
pub fn build(
    pgno: Pgno,
    page_size: usize,
    usable: usize,
    base: Option<&[u8]>,
    protect_max: u64,
    v: &Version<'_>,
    lazy_gc: bool,
) -> Result<Option<Vec<u8>>> {
    if !Mvbt::geometry_ok(usable, page_size) || v.tid == 0 || (!v.leaf && v.right == 0) {
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
        Some(b) => Some(Mvbt::visible(pgno, b, usable, protect_max)?),
        None => None,
    };
    let mut out = match &p {
        None => vec![0u8; page_size],
        Some(p) => {
            let mut out = p.buf[..page_size.min(p.buf.len())].to_vec();
            out.resize(page_size, 0);
            out
        }
    };
    let slot = p.as_ref().map_or(0, |p| 1 - p.slot);
    out[slot * DESC_SIZE..(slot + 1) * DESC_SIZE].fill(0);
    // Every byte P does not reference is free for this version: the records P no longer
    // names (dead at P, with lazy GC — the paper's garbage collection of a node that is
    // written anyway), the arrays of older versions, and the gap. A torn write of this
    // version therefore only ever touches bytes P's validity does not depend on.
    let mut space = Space {
        holes: match &p {
            None => vec![(floor, usable)],
            Some(p) if planted(Plant::MvbtWrongHoles) => {
                match Mvbt::open_slot(pgno, p.buf, usable, 1 - p.slot) {
                    Ok(o) => o.occupancy().holes(floor, usable),
                    Err(_) => p.occupancy().holes(floor, usable),
                }
            }
            Some(p) => p.occupancy().holes(floor, usable),
        },
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
    // Each cell's record: P's (Some) or a new one (None, placed below).
    let mut entries: Vec<Option<usize>> = v
        .cells
        .iter()
        .map(|c| {
            let off = reusable.remove(&c[..]);
            if let Some(off) = off {
                put_u64(&mut out, off, OPEN);
            }
            off
        })
        .collect();
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
    if let (Some(p), false, true, false) = (&p, lazy_gc, same_type, v.cells.is_empty()) {
        for k in 0..p.ncells() {
            let off = p.record(k);
            if !p.live(k) || get_u64(&out, off) == v.tid {
                entries.push(Some(off));
            }
        }
    }
    if entries.len() > max_cells(usable) {
        return Ok(None);
    }
    // The array first (it is the one large run), then the new records.
    let Some(lo) = space.take(2 * entries.len(), 2) else {
        return Ok(None);
    };
    for (e, c) in entries.iter_mut().zip(v.cells) {
        if e.is_none() {
            let Some(at) = space.take(record_len(c.len()), ALIGN) else {
                return Ok(None);
            };
            put_record(&mut out, at, v.tid, c);
            *e = Some(at);
        }
    }
    let entries: Vec<usize> = entries.into_iter().flatten().collect();
    for (k, &off) in entries.iter().enumerate() {
        put_u16(&mut out, lo + 2 * k, off);
    }
    let h = Head {
        tid: v.tid,
        txn_size: v.txn_size,
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
    let crc = version_crc(pgno, &out, slot, &h, &sizes);
    put_u32(&mut out, slot * DESC_SIZE + D_CRC, crc);
    debug_assert!(
        Mvbt::check_slot(pgno, &out, usable, slot).is_ok(),
        "built version fails validation: {:?}",
        Mvbt::check_slot(pgno, &out, usable, slot).err()
    );
    Ok(Some(out))
}
