//! In-place edits: one cell removed and/or inserted in a leaf, without decoding and
//! rebuilding the node.
//!
//! A bulk load or an index build touches the same leaves over and over within one
//! transaction, and a small transaction changes one cell in each leaf it touches. The
//! first touch of a page writes the transaction's version next to the protected one: the
//! protected version's cells with the one change, laid out as [`build`] would
//! (`build::build_edited`, which skips decoding the node and hashing its cells to find
//! which to share: all but the changed one are). Every later touch only changes that
//! version, which nothing else reads: no reader sees a tid that has not committed, and
//! the page has not reached the disk yet (module notes of [`super`]: under DHL a page
//! reaches the disk at most once per transaction, at commit). So the edit may move the
//! version's own bytes freely.
//!
//! Invariants, and why they hold:
//! - Later touches: every byte the other descriptor references (its array and cells,
//!   bounds-checked as the descriptor claims them; a claimed byte is never written, valid
//!   or not) and the other descriptor itself are copied unchanged: they are marked before
//!   anything is placed, and only unmarked bytes are written or zeroed. So the protected version
//!   survives any tearing of the later page write exactly as after [`build`].
//! - The bytes the edit frees (the old array, a removed cell no other version shares)
//!   are zeroed, so the image carries no stale data (invariant 3 of [`super`]).
//! - The result is the version with exactly the edited cells, in the same slot, and its
//!   checksum is recomputed over them; debug builds validate it and check that the
//!   protected bytes did not change.
//! - The first change of a leaf by a transaction (the visible version is a committed
//!   one, older than the transaction) is [`build`] of that version with the one cell
//!   changed, computed without decoding the node or hashing its cells
//!   (`build::build_edited`): the same image `build` gives, so its invariants hold.
//! - A later touch of the image the previous touch produced (kept per thread, a few
//!   pages: [`LastEdit`]) starts from that touch's own cells and the other descriptor's
//!   claimed bytes instead of walking both again. It is used only for an image equal
//!   byte for byte to the one it was computed from, in the same slot, and everything it
//!   holds is a function of those bytes, so the edit is the one a fresh walk gives
//!   (property test `an_edit_from_the_last_edit_is_the_edit_afresh`).
//! - None (the tree rebuilds the node through [`build`], which gives the same cells)
//!   whenever the edit is not one of these simple cases: the visible version is not a
//!   leaf or does not validate, the other descriptor is neither INV nor an older
//!   version, the cell or the array finds no room, or the capacity is exceeded.
//!
//! [`build`]: super::build

use super::*;
use crate::page::layout::{Edited, LeafEdit};
use crate::page::versioned::{recall, remember};

/// Edit `e` of the leaf version of `page` that transaction `e.tid` sees: its own version,
/// or on its first touch the committed one (a new version beside it). The new image
/// (remembered as validated) and the capacity its cells use, or None (module notes).
///
/// Errors: `InvalidArgument` for an index out of range or a malformed cell.
pub fn edit(pgno: Pgno, page: &[u8], usable: usize, e: LeafEdit) -> Result<Edited> {
    let (tid, i, remove, insert) = (e.tid, e.at, e.remove, e.insert);
    if !Dhl::geometry_ok(usable, page.len()) {
        return Ok(None);
    }
    let Some(slot) = newest_candidate(page, |t| t <= tid) else {
        return Ok(None);
    };
    // Not the transaction's own version: the committed one it is the first to change.
    let first_touch = get_u64(page, slot * DESC_SIZE + D_TID) != tid;
    let own = match recall(&MEMO, page, pgno, usable, slot) {
        Some(()) => view_validated(pgno, page, usable, slot),
        None => match Dhl::check_slot(pgno, page, usable, slot) {
            Ok(v) => v,
            Err(_) => return Ok(None),
        },
    };
    if !own.is_leaf() {
        return Ok(None);
    }
    let n = own.ncells;
    if (remove && i >= n) || i > n {
        return Err(Error::InvalidArgument(format!(
            "page {pgno}: edit of cell {i} in a leaf of {n} cells"
        )));
    }
    if let Some(c) = insert {
        if cell_size(true, usable, c) != Some(c.len()) {
            return Err(Error::InvalidArgument(format!(
                "page {pgno}: cell of {} bytes is not a well-formed leaf cell",
                c.len()
            )));
        }
    }
    if first_touch {
        let Some((image, used)) =
            build::build_edited(pgno, page.len(), usable, page, &own, tid, i, remove, insert)?
        else {
            return Ok(None);
        };
        remember_written(pgno, &image, usable, 1 - own.slot);
        return Ok(Some((image, used)));
    }
    with_scratch(|s| edit_in(s, pgno, page, usable, &own, i, remove, insert))
}

/// How many pages' last edits a thread keeps ([`LastEdit`]): a statement edits a table's
/// leaf and a leaf of each of its indexes, and the next statement the same leaves again.
pub(super) const LAST_EDITS: usize = 8;

/// The last image [`edit_in`] produced for a page, byte for byte, with what it found walking it:
/// the own version's cells in key order and the bytes the other version claims. The next
/// edit of the same leaf in a transaction is an edit of exactly these bytes (a hot leaf
/// takes several rows per transaction), and starts from them instead of walking both
/// versions again. Everything kept is a function of the bytes (and the slot), so an
/// image equal to `image` has the same cells and claims: the bytes are compared, never
/// trusted by address.
#[derive(Default)]
pub(super) struct LastEdit {
    valid: bool,
    pgno: Pgno,
    usable: usize,
    slot: usize,
    image: Vec<u8>,
    cells: Vec<(usize, usize)>,
    other: Occupancy,
}

impl LastEdit {
    fn matches(&self, pgno: Pgno, page: &[u8], usable: usize, slot: usize) -> bool {
        self.valid
            && self.pgno == pgno
            && self.usable == usable
            && self.slot == slot
            && self.image[..] == *page
    }
}

/// Tests: forget this thread's [`LastEdit`]s, so the next edit walks its page afresh.
#[cfg(test)]
pub(super) fn forget_last_edits() {
    with_scratch(|s| s.last_edit = Default::default());
}

/// [`edit`] once the own version `own` is known, using `s` for the occupancy.
#[allow(clippy::too_many_arguments)]
fn edit_in(
    s: &mut Scratch,
    pgno: Pgno,
    page: &[u8],
    usable: usize,
    own: &View<'_>,
    i: usize,
    remove: bool,
    insert: Option<&[u8]>,
) -> Result<Option<(PageRef, usize)>> {
    s.used.clear(usable);
    // The other descriptor's bytes, as it claims them: never written.
    let other = 1 - own.slot;
    let od = other * DESC_SIZE;
    let other_tid = get_u64(page, od + D_TID);
    if other_tid != 0 && other_tid >= own.tid {
        return Ok(None);
    }
    let entry = pgno as usize % LAST_EDITS;
    let mut last = std::mem::take(&mut s.last_edit[entry]);
    let known = last.matches(pgno, page, usable, own.slot);
    // The own cells in key order (the removed one too, for now).
    let mut cells: Vec<(usize, usize)> = std::mem::take(&mut last.cells);
    if known {
        debug_assert_eq!(cells.len(), own.ncells);
        s.used.clone_from(&last.other);
    } else {
        if other_tid != 0 && !mark_claimed(s, page, usable, other) {
            return Ok(None);
        }
        cells.clear();
        for j in 0..own.ncells {
            cells.push(own.cell_range(j)?);
        }
    }
    // Kept for the next edit (reusing last time's buffer): it equals `last.other` already
    // when the image was known.
    let mut other_claims = std::mem::take(&mut last.other);
    if !known {
        other_claims.clone_from(&s.used);
    }
    // The own cells that stay, and their cost.
    let freed = if remove {
        let (off, size) = cells.remove(i);
        Some((off, off + size))
    } else {
        None
    };
    let mut used: usize = cells.iter().map(|&(_, size)| cell_cost(size)).sum();
    // A removed cell stays only where the protected version shares it (a shared cell is
    // one of its cells, so its first byte tells).
    let freed = freed.filter(|&(a, _)| !s.used.marked(a));
    for &(off, size) in &cells {
        s.used.mark(off, off + size);
    }
    if let Some(c) = insert {
        used += cell_cost(c.len());
    }
    if used > capacity(usable) {
        return Ok(None);
    }
    let ncells = cells.len() + usize::from(insert.is_some());
    let old_array = (own.array_off, own.array_off + PTR_SIZE * own.ncells);
    let array_len = PTR_SIZE * ncells;
    // The array stays where it is if its hole allows, growing up or down; else it moves
    // to the smallest hole that takes it.
    let mut holes = s.used.holes(RECORD_START, usable);
    let around = holes
        .iter()
        .find(|&&(a, e)| a <= old_array.0 && old_array.0 < e)
        .copied();
    let array_off = match around {
        Some((_, e)) if old_array.0 + array_len <= e => old_array.0,
        Some((a, _)) if old_array.1 >= a + array_len => old_array.1 - array_len,
        _ => match best_fit_hole(&holes, array_len) {
            Some(off) => off,
            None => return Ok(None),
        },
    };
    carve(&mut holes, array_off, array_len);
    let placed = match insert {
        Some(c) => match best_fit_hole(&holes, c.len()) {
            Some(off) => Some((off, c)),
            None => return Ok(None),
        },
        None => None,
    };

    // Copied once, into the image the edit returns.
    let mut image = PageRef::from(page);
    let out = std::sync::Arc::get_mut(&mut image).expect("a new image has no other owner");
    out[old_array.0..old_array.1].fill(0);
    if let Some((a, e)) = freed {
        out[a..e].fill(0);
    }
    if let Some((off, c)) = placed {
        out[off..off + c.len()].copy_from_slice(c);
        cells.insert(i, (off, c.len()));
    }
    let d = own.slot * DESC_SIZE;
    put_u16(out, d + D_NCELLS, ncells);
    put_u16(out, d + D_ARRAY, array_off);
    for (j, &(off, _)) in cells.iter().enumerate() {
        put_u16(out, array_off + PTR_SIZE * j, off);
    }
    s.covered.clear();
    s.covered.extend_from_slice(&out[d..d + D_CRC]);
    s.covered
        .extend_from_slice(&out[array_off..array_off + array_len]);
    for &(off, size) in &cells {
        s.covered.extend_from_slice(&out[off..off + size]);
    }
    let crc = covered_crc(pgno, &s.covered);
    put_u32(out, d + D_CRC, crc);
    #[cfg(debug_assertions)]
    if other_tid != 0 {
        let mut claimed = Scratch::default();
        claimed.used.clear(usable);
        assert!(mark_claimed(&mut claimed, page, usable, other));
        let kept = (RECORD_START..usable).filter(|&b| claimed.used.marked(b));
        debug_assert!(kept.into_iter().all(|b| out[b] == page[b]));
    }
    debug_assert!(out[od..od + DESC_SIZE] == page[od..od + DESC_SIZE]);
    last.image.clear();
    last.image.extend_from_slice(out);
    debug_assert!(Dhl::check_slot(pgno, &image, usable, own.slot).is_ok());
    remember(&MEMO, &image, (pgno, usable, own.slot), ());
    s.last_edit[entry] = LastEdit {
        valid: true,
        pgno,
        usable,
        slot: own.slot,
        cells,
        other: other_claims,
        ..last
    };
    Ok(Some((image, used)))
}

/// Mark in `s` the bytes descriptor `slot` claims (its array and each cell), bounds-checked
/// but not validated; false if they do not even lie in the record area.
fn mark_claimed(s: &mut Scratch, page: &[u8], usable: usize, slot: usize) -> bool {
    let d = slot * DESC_SIZE;
    let leaf = match page[d + D_TYPE] {
        page_type::LEAF => true,
        page_type::INTERIOR => false,
        _ => return false,
    };
    let ncells = get_u16(page, d + D_NCELLS);
    let array = get_u16(page, d + D_ARRAY);
    let array_end = array + PTR_SIZE * ncells;
    if array < RECORD_START || array_end > usable {
        return false;
    }
    if ncells > 0 {
        s.used.mark(array, array_end);
    }
    for j in 0..ncells {
        let off = get_u16(page, array + PTR_SIZE * j);
        if !(RECORD_START..usable).contains(&off) {
            return false;
        }
        let Some(size) = cell_size(leaf, usable, &page[off..usable]) else {
            return false;
        };
        s.used.mark(off, off + size);
    }
    true
}

/// Take `[start, start + len)` (inside one hole) out of `holes`.
fn carve(holes: &mut Vec<(usize, usize)>, start: usize, len: usize) {
    if len == 0 {
        return;
    }
    let Some(j) = holes
        .iter()
        .position(|&(a, e)| a <= start && start + len <= e)
    else {
        debug_assert!(false, "[{start}, +{len}) lies in no hole");
        return;
    };
    let (a, e) = holes[j];
    let mut parts = Vec::with_capacity(2);
    if a < start {
        parts.push((a, start));
    }
    if start + len < e {
        parts.push((start + len, e));
    }
    holes.splice(j..=j, parts);
}

/// Start of the smallest hole that takes `len` bytes (lowest address on ties).
fn best_fit_hole(holes: &[(usize, usize)], len: usize) -> Option<usize> {
    holes
        .iter()
        .filter(|&&(a, e)| e - a >= len)
        .min_by_key(|&&(a, e)| (e - a, a))
        .map(|&(a, _)| a)
}
