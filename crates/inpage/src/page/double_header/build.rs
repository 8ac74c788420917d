//! Placement: writing a new version of a DHL page next to its protected one.
//!
//! Invariants (module notes of [`super`], "Invariants kept by build"): the protected
//! version's slot and every byte it references are copied verbatim, the new version only
//! takes bytes the protected one does not reference, and all other bytes are zero. They
//! are what make a torn page write harmless, so placement may choose *where* new bytes go
//! (a performance policy: reuse garbage, keep one large hole) but never touch a protected
//! byte; `reference.rs` checks every image against these rules, not against this policy.

use std::collections::hash_map::{Entry, HashMap};

use super::*;
use crate::page::versioned::CellHashing;
use crate::seam::{planted, Plant};

/// Where the new array and the unshared cells go.
struct Plan {
    /// (index in the version, offset)
    cells: Vec<(usize, usize)>,
    array_off: usize,
}

/// Best-fit hole for `len` bytes among `holes`, skipping `except`: the smallest hole
/// that fits, lowest address on ties.
fn best_fit(holes: &[(usize, usize)], len: usize, except: Option<usize>) -> Option<usize> {
    holes
        .iter()
        .enumerate()
        .filter(|&(j, &(s, e))| Some(j) != except && e - s >= len)
        .min_by_key(|&(j, &(s, e))| (e - s, j))
        .map(|(j, _)| j)
}

/// Main strategy: unshared cells best-fit into the small holes (reusing garbage), what does
/// not fit there and the array at the far end of the largest hole, the array innermost.
/// "Far" means away from the protected array `anchor`: after commit the protected array
/// is garbage adjacent to what is left of the hole, so they merge back into one hole and
/// the new array borders it, ready for the next write to do the same from the other side.
fn plan_far_end(
    holes: &[(usize, usize)],
    anchor: (usize, usize),
    new: &[(usize, usize)],
    array_len: usize,
) -> Option<Plan> {
    if new.is_empty() && array_len == 0 {
        // Nothing to place (an emptied page), even when P leaves no hole at all.
        return Some(Plan {
            cells: Vec::new(),
            array_off: RECORD_START,
        });
    }
    let mut holes = holes.to_vec();
    let h = (0..holes.len()).max_by_key(|&j| (holes[j].1 - holes[j].0, std::cmp::Reverse(j)))?;
    let from_high = !(anchor.1 > anchor.0 && anchor.0 == holes[h].1);
    let take_far = |hole: &mut (usize, usize), len: usize| {
        if from_high {
            hole.1 -= len;
            hole.1
        } else {
            hole.0 += len;
            hole.0 - len
        }
    };
    let mut cells = Vec::with_capacity(new.len());
    for &(idx, len) in new {
        let off = match best_fit(&holes, len, Some(h)) {
            Some(j) => {
                holes[j].0 += len;
                holes[j].0 - len
            }
            None if holes[h].1 - holes[h].0 >= len => take_far(&mut holes[h], len),
            None => return None,
        };
        cells.push((idx, off));
    }
    let array_off = if holes[h].1 - holes[h].0 >= array_len {
        take_far(&mut holes[h], array_len)
    } else {
        let j = best_fit(&holes, array_len, None)?;
        holes[j].0 += array_len;
        holes[j].0 - array_len
    };
    Some(Plan { cells, array_off })
}

/// Fallback: plain best-fit decreasing over the array and the cells together, for the
/// rare case where the array fits only in a hole the main strategy filled with cells.
fn plan_best_fit(
    holes: &[(usize, usize)],
    new: &[(usize, usize)],
    array_len: usize,
) -> Option<Plan> {
    let mut holes = holes.to_vec();
    // usize::MAX marks the array; it goes first among equal sizes.
    let mut items: Vec<(usize, usize)> = new.to_vec();
    items.push((usize::MAX, array_len));
    items.sort_by_key(|&(idx, len)| (std::cmp::Reverse(len), idx != usize::MAX));
    let mut plan = Plan {
        cells: Vec::with_capacity(new.len()),
        array_off: RECORD_START,
    };
    for (idx, len) in items {
        let j = best_fit(&holes, len, None)?;
        let off = holes[j].0;
        holes[j].0 += len;
        if idx == usize::MAX {
            plan.array_off = off;
        } else {
            plan.cells.push((idx, off));
        }
    }
    Some(plan)
}

/// Check the arguments of [`build`]: page geometry and that every cell is one the stock
/// decoder reads back with exactly its length.
fn check_version(usable: usize, page_size: usize, v: &Version<'_>) -> Result<()> {
    if !Dhl::geometry_ok(usable, page_size) {
        return Err(Error::InvalidArgument(format!(
            "DHL page of size {page_size} with usable size {usable} (need {RECORD_START} <= usable <= min(page size, {MAX_USABLE}))"
        )));
    }
    if v.tid == 0 {
        return Err(Error::InvalidArgument(
            "DHL version with tid 0 (INV)".into(),
        ));
    }
    if v.cells.len() > u16::MAX as usize {
        return Err(Error::InvalidArgument(format!(
            "{} cells in one page",
            v.cells.len()
        )));
    }
    for (i, c) in v.cells.iter().enumerate() {
        if cell_size(v.leaf, usable, c) != Some(c.len()) {
            return Err(Error::InvalidArgument(format!(
                "cell {i} ({} bytes) is not a well-formed {} cell of at most {} bytes",
                c.len(),
                if v.leaf { "leaf" } else { "interior" },
                max_cell(usable)
            )));
        }
    }
    Ok(())
}

/// The cell bytes of `v` for its checksum, for [`write_descriptor`]: the cells placed at
/// the offsets are `v.cells`, so they are gathered from there.
fn cells_of<'v>(v: &'v Version<'_>) -> impl FnOnce(&[u8], &mut Vec<u8>) + 'v {
    move |_, covered| {
        for c in v.cells {
            covered.extend_from_slice(c);
        }
    }
}

/// Write the descriptor for `v` into `slot` of `out` (whose array and cells are already in
/// place at `array_off` / `offs`) and stamp its crc over the descriptor, the array and
/// the cell bytes `cells` appends in array order (given the image with the array in
/// place). `v.cells` is not read.
fn write_descriptor(
    pgno: Pgno,
    out: &mut [u8],
    slot: usize,
    v: &Version<'_>,
    array_off: usize,
    offs: &[usize],
    cells: impl FnOnce(&[u8], &mut Vec<u8>),
) {
    let d = slot * DESC_SIZE;
    out[d..d + DESC_SIZE].fill(0);
    put_u64(out, d + D_TID, v.tid);
    put_u32(out, d + D_TXN_SIZE, v.txn_size);
    put_u16(out, d + D_NCELLS, offs.len());
    out[d + D_TYPE] = if v.leaf {
        page_type::LEAF
    } else {
        page_type::INTERIOR
    };
    out[d + D_FLAGS] = 0;
    let right = if v.leaf { 0 } else { v.right };
    put_u32(out, d + D_RIGHT, right);
    put_u16(out, d + D_ARRAY, array_off);
    for (i, &off) in offs.iter().enumerate() {
        let at = array_off + PTR_SIZE * i;
        put_u16(out, at, off);
    }
    let array_end = array_off + PTR_SIZE * offs.len();
    let crc = with_scratch(|s| {
        s.covered.clear();
        s.covered.extend_from_slice(&out[d..d + D_CRC]);
        s.covered.extend_from_slice(&out[array_off..array_end]);
        cells(out, &mut s.covered);
        covered_crc(pgno, &s.covered)
    });
    put_u32(out, d + D_CRC, crc);
}

/// [`build`] of the leaf version that is `p`, the protected version of `base`, with one
/// change: cell `i` removed (`remove`) and/or `insert` put at `i`; None where `build`
/// gives None (no room) or where the version would exceed [`capacity`]. `p` must be the
/// protected version `build` finds in `base` for `tid` (the newest valid one below it),
/// validated, and a leaf.
///
/// The image is `build`'s for that version, byte for byte, without what `build` spends
/// to find it out: decoding the node, hashing `p`'s cells to find which it can share.
/// Every cell of `p` but the removed one is in the version unchanged, so each is shared
/// where it lies (as `build` maps a cell to its copy in `p`, cells being distinct in a
/// tree); a replacement identical to the cell it replaces is shared too. Only the
/// inserted cell and the array are placed, by `build`'s own planner. So the invariants
/// of `build` (`p` kept bit for bit, new bytes only where `p` references none, all else
/// zero) hold for the same reasons.
///
/// Errors: those of reading `p`'s cells (none for a validated version).
#[allow(clippy::too_many_arguments)]
pub(super) fn build_edited(
    pgno: Pgno,
    page_size: usize,
    usable: usize,
    base: &[u8],
    p: &View<'_>,
    tid: u64,
    i: usize,
    remove: bool,
    insert: Option<&[u8]>,
) -> Result<Option<(PageRef, usize)>> {
    debug_assert!(p.is_leaf() && p.tid < tid && base.len() >= usable);
    let ranges = p.ranges()?;
    let p_cells = &ranges[usize::from(p.ncells > 0)..];
    // The version's cells as (offset, length); an inserted cell not yet placed has
    // offset 0 until the plan gives it one.
    let mut cells: Vec<(usize, usize)> = Vec::with_capacity(p_cells.len() + 1);
    for (j, &(s, e)) in p_cells.iter().enumerate() {
        if !(remove && j == i) {
            cells.push((s, e - s));
        }
    }
    let mut new = Vec::new();
    if let Some(c) = insert {
        match p_cells.get(i) {
            Some(&(s, e)) if remove && base[s..e] == *c => cells.insert(i, (s, e - s)),
            _ => {
                cells.insert(i, (0, c.len()));
                new.push((i, c.len()));
            }
        }
    }
    let used: usize = cells.iter().map(|&(_, len)| cell_cost(len)).sum();
    if used > capacity(usable) {
        return Ok(None);
    }
    let protected: &[(usize, usize)] = if planted(Plant::DhlFirstEditWrongHoles) {
        &[]
    } else {
        &ranges
    };
    let holes = with_scratch(|s| holes_around(s, usable, protected));
    let array_len = PTR_SIZE * cells.len();
    let anchor = (p.array_off, p.array_off + PTR_SIZE * p.ncells);
    let Some(plan) = plan_far_end(&holes, anchor, &new, array_len)
        .or_else(|| plan_best_fit(&holes, &new, array_len))
    else {
        return Ok(None);
    };
    // Built where it will live: one allocation, no copy into a shared image after.
    let mut image: PageRef = std::iter::repeat_n(0u8, page_size).collect();
    let out = std::sync::Arc::get_mut(&mut image).expect("a new image has no other owner");
    let pd = p.slot * DESC_SIZE;
    out[pd..pd + DESC_SIZE].copy_from_slice(&base[pd..pd + DESC_SIZE]);
    for &(s, e) in &ranges {
        out[s..e].copy_from_slice(&base[s..e]);
    }
    if let (Some(c), Some(&(_, off))) = (insert, plan.cells.first()) {
        out[off..off + c.len()].copy_from_slice(c);
        cells[i].0 = off;
    }
    let offs: Vec<usize> = cells.iter().map(|&(off, _)| off).collect();
    let version = Version {
        tid,
        txn_size: 0,
        leaf: true,
        right: 0,
        cells: &[],
    };
    write_descriptor(
        pgno,
        out,
        1 - p.slot,
        &version,
        plan.array_off,
        &offs,
        |out, covered| {
            for &(off, len) in &cells {
                covered.extend_from_slice(&out[off..off + len]);
            }
        },
    );
    // Release check, as a wrong placement would lose committed data on a torn write: the
    // protected version's descriptor and bytes are exactly the base's. If not, decline:
    // the tree rebuilds the node through `build`.
    let kept = out[pd..pd + DESC_SIZE] == base[pd..pd + DESC_SIZE]
        && ranges.iter().all(|&(s, e)| out[s..e] == base[s..e]);
    if !kept {
        debug_assert!(
            planted(Plant::DhlFirstEditWrongHoles),
            "page {pgno}: the first edit wrote into the protected version"
        );
        return Ok(None);
    }
    Ok(Some((image, used)))
}

/// Image of a page holding only `v`, laid out compactly (array at the bottom of the
/// record area, cells packed down from the top in key order, one hole between), in slot
/// 0 with slot 1 INV. None if it does not fit.
fn build_fresh(pgno: Pgno, page_size: usize, usable: usize, v: &Version<'_>) -> Option<Vec<u8>> {
    let array_len = PTR_SIZE * v.cells.len();
    let bytes: usize = v.cells.iter().map(Vec::len).sum();
    if array_len + bytes > usable - RECORD_START {
        return None;
    }
    let mut out = vec![0u8; page_size];
    let mut top = usable;
    let mut offs = Vec::with_capacity(v.cells.len());
    for c in v.cells {
        top -= c.len();
        out[top..top + c.len()].copy_from_slice(c);
        offs.push(top);
    }
    write_descriptor(pgno, &mut out, 0, v, RECORD_START, &offs, cells_of(v));
    Some(out)
}

/// The protected version in `base` (module notes): the valid one with the largest
/// `tid <= keep_max_tid` other than `replaced`, slot 0 on a tie, with the holes of the
/// record area it does not reference. The newest candidate is validated first; the other
/// slot is only looked at if that one is not valid.
fn protected_version<'b>(
    s: &mut Scratch,
    pgno: Pgno,
    base: &'b [u8],
    usable: usize,
    keep_max_tid: u64,
    replaced: u64,
) -> Option<(View<'b>, Vec<(usize, usize)>)> {
    let ok = |tid: u64| tid <= keep_max_tid && tid != replaced;
    let first = newest_candidate(base, ok)?;
    let mut p = check_slot_in(s, pgno, base, usable, first).ok();
    if p.is_none() {
        let other = 1 - first;
        let tid = get_u64(base, other * DESC_SIZE + D_TID);
        if tid != 0 && ok(tid) {
            p = check_slot_in(s, pgno, base, usable, other).ok();
        }
    }
    // The successful check left exactly the bytes `p` references marked.
    p.map(|p| (p, s.used.holes(RECORD_START, usable)))
}

/// Image of the page after writing `version`, or `Ok(None)` if it does not fit next to
/// the protected version.
///
/// `base` is the page's current image (None for a page allocated by this transaction).
/// The protected version is the valid descriptor in `base` with the largest
/// `tid <= keep_max_tid`, other than one with `version.tid` (an earlier build by the same
/// transaction, which is replaced). The result keeps the protected version bit for bit
/// (slot, array, cells), shares its cells that the new version contains unchanged, and
/// places the rest in the bytes it does not reference; all other record-area bytes and the
/// trailer are zero. Without a protected version the page is laid out compactly.
///
/// Errors: `InvalidArgument` for a bad geometry, tid 0, a malformed cell, a `base` shorter
/// than `usable`, or a `version.tid` not newer than the protected version's; `Corrupt`
/// never (an unreadable base just has no protected version).
pub fn build(
    pgno: Pgno,
    page_size: usize,
    usable: usize,
    base: Option<&[u8]>,
    keep_max_tid: u64,
    version: &Version<'_>,
) -> Result<Option<Vec<u8>>> {
    check_version(usable, page_size, version)?;
    let protected = match base {
        None => None,
        Some(b) if b.len() < usable => {
            return Err(Error::InvalidArgument(format!(
                "base image of page {pgno} has {} bytes, less than the usable size {usable}",
                b.len()
            )))
        }
        Some(b) => {
            with_scratch(|s| protected_version(s, pgno, b, usable, keep_max_tid, version.tid))
        }
    };
    let Some((p, holes)) = protected else {
        return Ok(build_fresh(pgno, page_size, usable, version));
    };
    if version.tid < p.tid {
        return Err(Error::InvalidArgument(format!(
            "page {pgno}: version tid {} is older than the protected version's {}",
            version.tid, p.tid
        )));
    }

    let mut out = vec![0u8; page_size];
    let (pd, base) = (p.slot * DESC_SIZE, p.buf);
    out[pd..pd + DESC_SIZE].copy_from_slice(&base[pd..pd + DESC_SIZE]);
    let ranges = p.ranges()?;
    for &(s, e) in &ranges {
        out[s..e].copy_from_slice(&base[s..e]);
    }
    let p_cells = &ranges[usize::from(p.ncells > 0)..];
    // Each distinct cell of P maps to its first unused copy (index into `p_cells`), the
    // others chained through `next` in array order, so that reuse takes P's copies in
    // array order (deterministic images).
    const END: u32 = u32::MAX;
    let mut next = vec![END; p_cells.len()];
    let mut reuse: HashMap<&[u8], u32, CellHashing> =
        HashMap::with_capacity_and_hasher(p_cells.len(), CellHashing::new());
    for (j, &(s, e)) in p_cells.iter().enumerate().rev() {
        match reuse.entry(&base[s..e]) {
            Entry::Occupied(mut head) => {
                next[j] = *head.get();
                head.insert(j as u32);
            }
            Entry::Vacant(head) => {
                head.insert(j as u32);
            }
        }
    }

    let mut offs = vec![0usize; version.cells.len()];
    let mut new = Vec::new();
    for (i, c) in version.cells.iter().enumerate() {
        match reuse.get_mut(&c[..]) {
            Some(head) if *head != END => {
                let j = *head as usize;
                offs[i] = p_cells[j].0;
                *head = next[j];
            }
            _ => new.push((i, c.len())),
        }
    }
    // Largest first: big cells have the fewest holes that take them.
    new.sort_by_key(|&(i, len)| (std::cmp::Reverse(len), i));
    let array_len = PTR_SIZE * version.cells.len();
    let anchor = (p.array_off, p.array_off + PTR_SIZE * p.ncells);
    let Some(plan) = plan_far_end(&holes, anchor, &new, array_len)
        .or_else(|| plan_best_fit(&holes, &new, array_len))
    else {
        return Ok(None);
    };
    for (i, off) in plan.cells {
        let c = &version.cells[i];
        out[off..off + c.len()].copy_from_slice(c);
        offs[i] = off;
    }
    write_descriptor(
        pgno,
        &mut out,
        1 - p.slot,
        version,
        plan.array_off,
        &offs,
        cells_of(version),
    );
    Ok(Some(out))
}

/// An empty leaf written by transaction `tid` (txn_size 0), laid out as a fresh page 1. A
/// geometry `build` rejects, or tid 0, gives an all-zero page (no valid version), which
/// every reader reports as corrupt.
#[cfg(test)]
pub fn empty_leaf(page_size: usize, usable: usize, tid: u64) -> Vec<u8> {
    let v = Version {
        tid,
        txn_size: 0,
        leaf: true,
        right: 0,
        cells: &[],
    };
    build(1, page_size, usable, None, 0, &v)
        .ok()
        .flatten()
        .unwrap_or_else(|| vec![0u8; page_size])
}
