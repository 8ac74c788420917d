//! The double-header page: a B+tree node layout with two version descriptors ("headers")
//! side by side, each naming its own cell array over one shared record area, so a write
//! adds a version beside the committed one. Doubleheader logging (DHL, the `dhl-*` modes)
//! introduced it; the counting commit (`journal::counting`) runs over it.
//!
//! Layout (all integers little-endian; `usable` = page size − pager trailer, at most
//! 65 535 so that every offset fits a u16):
//!
//! ```text
//! 0..32        descriptor slot 0
//! 32..64       descriptor slot 1
//! 64..usable   record area: cells and offset arrays, anywhere
//!
//! descriptor:
//! 0..8    tid        u64  0 = INV (never written, or invalidated by recovery)
//! 8..12   txn_size   u32  pages written by transaction `tid` (counting commit; built as 0,
//!                         set at commit by `restamp`)
//! 12..14  ncells     u16
//! 14      type       u8   page_type::LEAF or page_type::INTERIOR
//! 15      flags      u8   0
//! 16..20  right      u32  interior: rightmost child; leaf: 0
//! 20..22  array_off  u16  start of this version's ncells × u16 cell-offset array
//! 22..28  reserved        0
//! 28..32  checksum   u32  xxh3 over bytes 0..28, then the offset array, then every cell
//!                         the array references, in array (key) order
//! ```
//!
//! Cells use the encodings of [`cell`] unchanged, as the stock page does (leaf
//! `klen u16 | vlen u32 | key | value-or-first_ovfl`, interior `klen u16 | child u32 | key`,
//! same inline rule, same `max_cell`), so the tree builds and decodes cells the same way
//! in both layouts; only where they sit and who points at them differs.
//!
//! A descriptor is *valid* iff its tid is not 0, its type is a tree type, its array and
//! every cell it references lie inside the record area, every cell decodes with the stock
//! size rules to at most `max_cell` bytes, no two of its cells overlap each other or its
//! array, and the crc matches. Anything else is ignored, never trusted and never a panic:
//! pages come from disk.
//!
//! The reader sees the valid descriptor with the largest `tid <= max_tid` ([`SlotCheck::visible`]);
//! a writer of transaction `T` asks for `max_tid = T`, which yields its own earlier version of the
//! page if it has one and the newest committed one otherwise.
//!
//! # Counting commit: `txn_size`, [`restamp`] and [`SlotCheck::page_versions`]
//!
//! The tree builds versions (and [`overflow_page`]s) with `txn_size` 0, because the number of
//! pages transaction `T` writes is only known at commit. The commit path then calls [`restamp`]
//! on every dirty page image before writing it: it sets `txn_size` in each valid descriptor
//! with tid `T` (tree version or overflow page) and recomputes that descriptor's checksum. It
//! changes only those two fields of those descriptors, never a byte a protected version
//! references, so the invariants below hold for the stamped image exactly as for the built one.
//! Recovery scans pages with [`SlotCheck::page_versions`], which counts overflow pages'
//! descriptors as well as tree versions (`descriptors`, a test helper, sees tree versions
//! only), and compares the number of valid descriptors with the largest tid against their
//! `txn_size` (docs/DHL-DESIGN.md, "Recovery").
//!
//! # Invariants kept by [`build`] and why they make torn writes harmless
//!
//! Writing transaction `T` over a base image keeps the *protected* version `P` (the newest
//! valid descriptor with tid ≤ `keep_max_tid`, i.e. the newest committed one):
//!
//! 1. `P`'s descriptor slot is copied verbatim and the new descriptor goes into the other
//!    slot, so the two slots never alias.
//! 2. Every byte `P` references (array and cells) stays at the same offset with the same
//!    content; the new version's array and unshared cells go only into bytes `P` does not
//!    reference. Cells of the new version byte-identical to one of `P`'s reuse `P`'s copy.
//! 3. Everything else in the record area is zeroed, so images are a function of
//!    (protected version, new version) alone and carry no stale data.
//!
//! A page write that tears leaves each 512-byte sector wholly old or wholly new. By (1) and
//! (2) every byte that `P`'s validity depends on is identical in the old and the new
//! image, so *every* mix of sectors still holds `P`, valid, with the same cells. Both
//! descriptors sit in sector 0: if that sector is old, the new descriptor is simply absent;
//! if it is new, the new descriptor is present and its crc covers every byte it
//! references, so any of them left old makes it invalid (up to checksum collisions). The only
//! other descriptor a mix can show is the one the new version replaced, and only if all its
//! bytes happened to survive, i.e. with exactly its old content. So no mix ever shows a
//! valid descriptor whose content was not written as such, and no atomic page write is
//! needed. [`invalidate`] only touches sector 0, so recovery's own writes are atomic.
//!
//! One consequence for the journal: if the replaced descriptor is this transaction's own
//! earlier build of the page *and that image already reached the disk*, a torn rewrite
//! can leave it valid with tid `T`, and counting commit would count it. So under DHL a
//! page must reach the disk at most once per transaction (writes happen at commit).
//!
//! The replaced slot holds either an older committed version (its bytes become free:
//! in-page garbage collection) or this transaction's own earlier build of the page (tid ==
//! `T`: replaced, never protected). A page without a protected version (new in `T`) is
//! laid out compactly with the other slot zeroed.
//!
//! # Space
//!
//! Every cell costs its bytes plus two u16 offsets (one per version), and [`capacity`]
//! leaves room for one cell of up to [`reserve_cell`] bytes (a sixteenth of the page) and
//! its two offsets next to a full version: enough for the one-row change of typical rows
//! (Mobibench's and the DHL paper's are about 110–140 bytes as cells) without giving up a
//! quarter of every page for a maximal cell, which earlier versions reserved. Placement
//! (see [`build`]) puts each new cell best-fit into the smaller holes (garbage of older
//! versions), and what does not fit there plus the new array at the far end of the largest
//! hole, away from the protected array, so that after commit the old array merges back into
//! the hole (the arrays "ping-pong" across the free region). What is guaranteed:
//!
//! - (a) a version whose `Σ(len + 4) <= capacity` always fits on a fresh page;
//! - (b) a version differing by one inserted, replaced or removed cell of at most
//!   [`reserve_cell`] bytes from a protected version `P` always fits if the free space
//!   next to `P` contains one hole of at least `2·(ncells(P) + 1) + reserve_cell` bytes
//!   ([`has_reserve`]). That holds whenever `P` is within capacity and was written
//!   compactly (fresh or relocated page) or reached from such a page by inserts only.
//!   Removals and replacements leave the old copy as a hole that only later cells of a
//!   fitting size reuse, so a long adversarial history can fragment the free space until
//!   (b) fails, and a larger cell next to a nearly full version may not fit either;
//!   `build` then returns `None` and the tree relocates the node (written compactly to a
//!   new page, which (a) guarantees), at the price of one more page write (the parent).
//!
//! # Files
//!
//! This file holds the format, validation ([`SlotCheck::visible`], [`SlotCheck::open_slot`]),
//! recovery's views ([`SlotCheck::page_versions`], [`descriptor_heads`]) and the
//! commit-time edits ([`restamp`], [`invalidate`]); `build.rs` places a new version next to the
//! protected one; `edit.rs` changes one cell of a version the transaction already wrote, in place;
//! `overflow.rs` is the overflow-page format; `reference.rs` (tests only) is the independent oracle
//! the proptests in `tests.rs` hold the rest to.

use std::cell::RefCell;

use crate::error::{Error, Pgno, Result};
use crate::le::{get_u16, get_u32, get_u64, put_u16, put_u32, put_u64};
use crate::page::cell::{self, max_cell, PTR_SIZE};
use crate::page::cells::CellArray;
use crate::page::layout::Stamp;
use crate::page::occupancy::Occupancy;
use crate::page::versioned::{
    descriptor_kind, fold, newest_candidate, with_local, Checked, ImageMemo, OverflowFormat,
    SlotCheck, D_TID, D_TXN_SIZE,
};
use crate::page::{page_type, PageRef};

mod build;
mod edit;
mod layout;
mod overflow;
#[cfg(test)]
mod reference;
#[cfg(test)]
mod tests;

use crate::page::versioned::{overflow_crc, page_seed};
pub use build::build;
pub use edit::edit;
pub(crate) use layout::Dhl;
pub(crate) use layout::DHL;
pub(crate) use overflow::OVERFLOW;

#[cfg(test)]
pub use crate::page::versioned::invalidate;
pub use crate::page::versioned::{Version, DESC_SIZE, MAX_USABLE};
/// Start of the record area (both descriptor slots precede it, inside sector 0).
pub const RECORD_START: usize = 2 * DESC_SIZE;
const _: () = assert!(RECORD_START == crate::page::layout::VERSION_HEADS);
/// Bytes a cell costs in [`capacity`] accounting beyond its own: one offset per version.
pub const CELL_OVERHEAD: usize = 2 * PTR_SIZE;

const D_NCELLS: usize = 12;
const D_TYPE: usize = 14;
const D_FLAGS: usize = 15;
const D_RIGHT: usize = 16;
const D_ARRAY: usize = 20;
/// The crc covers the descriptor up to here and is stored right after.
const D_CRC: usize = 28;

/// Largest cell a one-cell change is guaranteed to place next to a version at capacity
/// (module notes on space, (b)): a sixteenth of the usable size, 255 bytes at 4 KiB.
pub fn reserve_cell(usable: usize) -> usize {
    (usable / 16).min(max_cell(usable))
}

/// Bytes of cells plus their [`CELL_OVERHEAD`] a version may hold so that a one-cell
/// change of up to [`reserve_cell`] bytes still fits next to it: the record area minus
/// that cell and its two offsets.
pub fn capacity(usable: usize) -> usize {
    usable
        .saturating_sub(RECORD_START)
        .saturating_sub(reserve_cell(usable) + CELL_OVERHEAD)
}

/// Capacity cost of a cell of `len` bytes.
pub fn cell_cost(len: usize) -> usize {
    len + CELL_OVERHEAD
}

/// Size of the cell at the start of `area` under the stock rules, if it fits in `area` and
/// is at most `max_cell` (the same bounds [`CellArray::cell_range`] enforces).
fn cell_size(leaf: bool, usable: usize, area: &[u8]) -> Option<usize> {
    cell::cell_size(leaf, usable, area).filter(|&size| size <= max_cell(usable))
}

/// Checksum of a version: descriptor head, array, then cells in array order. `cells` are
/// (offset, size) pairs already bounds-checked by the caller.
///
/// xxh3 folded to 32 bits, not crc32c: a cell may hold a value that ends with the crc32c
/// of its own preceding bytes (a common pattern), and CRC's linearity would then make a
/// crc32c over the version blind to those bytes — a torn write could damage them
/// unseen. The same flaw was found in the journals (see `journal::image_checksum`).
///
/// This streaming form is the definition. The hot paths gather the same bytes into
/// [`Scratch::covered`] and hash them in one shot with [`covered_crc`] (xxh3 gives the same
/// value for any split of the input, and one shot is several times cheaper than many small
/// updates); it stays for versions whose cells overlap, where the covered bytes are not
/// bounded by the page size.
fn version_crc(
    pgno: Pgno,
    buf: &[u8],
    slot: usize,
    array: (usize, usize),
    cells: impl Iterator<Item = (usize, usize)>,
) -> u32 {
    let d = slot * DESC_SIZE;
    let mut h = xxhash_rust::xxh3::Xxh3::with_seed(page_seed(pgno));
    h.update(&buf[d..d + D_CRC]);
    h.update(&buf[array.0..array.1]);
    for (off, size) in cells {
        h.update(&buf[off..off + size]);
    }
    fold(h.digest())
}

/// [`version_crc`] of a version of page `pgno` whose covered bytes (descriptor head,
/// array, cells in array order) are `covered`, concatenated.
fn covered_crc(pgno: Pgno, covered: &[u8]) -> u32 {
    fold(xxhash_rust::xxh3::xxh3_64_with_seed(
        covered,
        page_seed(pgno),
    ))
}

/// Per-thread buffers reused by validation and checksumming, so that the per-operation
/// work allocates nothing.
#[derive(Default)]
struct Scratch {
    /// Bytes a version's checksum covers, concatenated (see [`covered_crc`]).
    covered: Vec<u8>,
    /// One bit per page byte, set for bytes a version references.
    used: Occupancy,
    /// What recent subsequent edits (`edit::edit_in`) knew of the images they produced,
    /// one entry per page number modulo their count.
    last_edit: [edit::LastEdit; edit::LAST_EDITS],
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// Run `f` with this thread's [`Scratch`] (see [`with_local`]).
fn with_scratch<R>(f: impl FnOnce(&mut Scratch) -> R) -> R {
    with_local(&SCRATCH, f)
}

/// Read-only view of one valid version of a DHL page. Mirrors [`slotted::Page`]'s
/// accessors so the tree can read either layout the same way.
///
/// [`slotted::Page`]: crate::page::slotted::Page
#[derive(Clone, Copy, Debug)]
pub struct View<'a> {
    cells: CellArray<'a>,
    slot: usize,
    tid: u64,
    txn_size: u32,
}

impl<'a> std::ops::Deref for View<'a> {
    type Target = CellArray<'a>;
    fn deref(&self) -> &CellArray<'a> {
        &self.cells
    }
}

/// [`SlotCheck::check_slot`] using `s`; on success `s.covered` holds the bytes the checksum covers
/// and `s.used` marks the bytes the version references.
///
/// One pass over the array bounds-checks and sizes each cell, detects overlaps on the
/// occupancy bitmap and gathers the covered bytes. The reasons are reported in the order
/// of the checks they stand for: cell bounds, then the crc, then overlap.
fn check_slot_in<'b>(
    s: &mut Scratch,
    pgno: Pgno,
    buf: &'b [u8],
    usable: usize,
    slot: usize,
) -> std::result::Result<View<'b>, String> {
    let d = slot * DESC_SIZE;
    let tid = get_u64(buf, d + D_TID);
    let leaf = descriptor_kind(slot, tid, buf[d + D_TYPE])?;
    let ncells = get_u16(buf, d + D_NCELLS);
    let right = get_u32(buf, d + D_RIGHT);
    if leaf && right != 0 {
        return Err(format!("descriptor {slot} is a leaf with a right child"));
    }
    let array_off = get_u16(buf, d + D_ARRAY);
    let array_end = array_off + PTR_SIZE * ncells;
    if array_off < RECORD_START || array_end > usable {
        return Err(format!(
            "descriptor {slot}: array [{array_off}, {array_end}) outside the record area [{RECORD_START}, {usable})"
        ));
    }
    s.covered.clear();
    s.covered.extend_from_slice(&buf[d..d + D_CRC]);
    s.covered.extend_from_slice(&buf[array_off..array_end]);
    s.used.clear(usable);
    // Once something overlaps, stop gathering: the covered bytes are then no longer
    // bounded by the page size (see `overlap_reason` for the report).
    let mut overlap = ncells > 0 && !s.used.mark(array_off, array_end);
    let max = max_cell(usable);
    for i in 0..ncells {
        let off = get_u16(buf, array_off + PTR_SIZE * i);
        if !(RECORD_START..usable).contains(&off) {
            return Err(format!(
                "descriptor {slot}: cell {i} offset {off} outside the record area"
            ));
        }
        let size = cell::cell_size(leaf, usable, &buf[off..usable])
            .filter(|&size| size <= max)
            .ok_or_else(|| {
                format!("descriptor {slot}: cell {i} at {off} is malformed or runs past the page")
            })?;
        if !overlap {
            if s.used.mark(off, off + size) {
                s.covered.extend_from_slice(&buf[off..off + size]);
            } else {
                overlap = true;
            }
        }
    }
    if overlap {
        return Err(overlap_reason(pgno, buf, usable, slot, leaf, tid));
    }
    if covered_crc(pgno, &s.covered) != get_u32(buf, d + D_CRC) {
        return Err(format!("descriptor {slot} (tid {tid}) fails its crc"));
    }
    Ok(View {
        cells: CellArray {
            pgno,
            buf,
            arr: buf,
            usable,
            leaf,
            ncells,
            array_off,
            area_start: RECORD_START,
            right,
        },
        slot,
        tid,
        txn_size: get_u32(buf, d + D_TXN_SIZE),
    })
}

/// Why descriptor `slot`, whose array and cells are in bounds but overlap, is invalid:
/// its crc if that fails (checked first, as for any version), else the first overlapping
/// pair in address order. Rare (only damaged pages), so it is allowed to be slow.
fn overlap_reason(
    pgno: Pgno,
    buf: &[u8],
    usable: usize,
    slot: usize,
    leaf: bool,
    tid: u64,
) -> String {
    let d = slot * DESC_SIZE;
    let ncells = get_u16(buf, d + D_NCELLS);
    let array = get_u16(buf, d + D_ARRAY);
    let array = (array, array + PTR_SIZE * ncells);
    let cells: Vec<(usize, usize)> = (0..ncells)
        .map(|i| {
            let off = get_u16(buf, array.0 + PTR_SIZE * i);
            (off, cell_size(leaf, usable, &buf[off..usable]).unwrap_or(0))
        })
        .collect();
    if version_crc(pgno, buf, slot, array, cells.iter().copied()) != get_u32(buf, d + D_CRC) {
        return format!("descriptor {slot} (tid {tid}) fails its crc");
    }
    let mut ranges: Vec<(usize, usize)> = cells.iter().map(|&(o, n)| (o, o + n)).collect();
    ranges.push(array);
    ranges.sort_unstable();
    match ranges.windows(2).find(|w| w[0].1 > w[1].0) {
        Some(w) => format!(
            "descriptor {slot}: bytes [{}, {}) overlap [{}, {})",
            w[0].0, w[0].1, w[1].0, w[1].1
        ),
        None => format!("descriptor {slot}: overlapping bytes"),
    }
}

thread_local! {
    /// The images whose versions passed [`SlotCheck::check_slot`] (per slot), per thread; see
    /// [`ImageMemo`] for why an image at a remembered address is the remembered bytes.
    static MEMO: RefCell<ImageMemo<()>> = const { RefCell::new(ImageMemo::new()) };
}

/// The View of descriptor `slot`, which passed `check_slot` on these very bytes before
/// (the memo says so): the fields are decoded again, the cells not re-validated.
fn view_validated(pgno: Pgno, buf: &[u8], usable: usize, slot: usize) -> View<'_> {
    let d = slot * DESC_SIZE;
    let v = View {
        cells: CellArray {
            pgno,
            buf,
            arr: buf,
            usable,
            leaf: buf[d + D_TYPE] == page_type::LEAF,
            ncells: get_u16(buf, d + D_NCELLS),
            array_off: get_u16(buf, d + D_ARRAY),
            area_start: RECORD_START,
            right: get_u32(buf, d + D_RIGHT),
        },
        slot,
        tid: get_u64(buf, d + D_TID),
        txn_size: get_u32(buf, d + D_TXN_SIZE),
    };
    debug_assert!(Dhl::check_slot(pgno, buf, usable, slot).is_ok());
    v
}

/// [`SlotCheck::visible`] for a shared page image: the version a reader at `max_tid` sees, with
/// the full validation of the newest candidate done once per image instead of once per
/// open (a cursor opens the same cached pages over and over). Same answer as `visible`:
/// its fast path returns that candidate exactly when it validates.
pub fn visible_page(pgno: Pgno, page: &PageRef, usable: usize, max_tid: u64) -> Result<View<'_>> {
    crate::page::versioned::open_remembered(
        &MEMO,
        page,
        pgno,
        usable,
        max_tid,
        Dhl::geometry_ok(usable, page.len()),
        |(), slot| view_validated(pgno, page, usable, slot),
        |slot| Some(((), Dhl::check_slot(pgno, page, usable, slot).ok()?)),
        || Dhl::visible(pgno, page, usable, max_tid),
    )
}

impl<'a> View<'a> {
    /// Descriptor slot (0 or 1) holding this version.
    pub fn slot(&self) -> usize {
        self.slot
    }
    pub fn tid(&self) -> u64 {
        self.tid
    }
    pub fn txn_size(&self) -> u32 {
        self.txn_size
    }
    /// Start of this version's offset array.
    pub fn array_off(&self) -> usize {
        self.array_off
    }
    /// Capacity used by this version: Σ (cell bytes + [`CELL_OVERHEAD`]).
    pub fn used(&self) -> usize {
        (0..self.ncells)
            .map(|i| self.cell_range(i).map_or(0, |(_, size)| cell_cost(size)))
            .sum()
    }

    /// Byte ranges this version references (array, then cells), unsorted.
    fn ranges(&self) -> Result<Vec<(usize, usize)>> {
        let mut r = Vec::with_capacity(self.ncells + 1);
        if self.ncells > 0 {
            r.push((self.array_off, self.array_off + PTR_SIZE * self.ncells));
        }
        for i in 0..self.ncells {
            let (off, size) = self.cell_range(i)?;
            r.push((off, off + size));
        }
        Ok(r)
    }

    /// Holes of the record area this version does not reference, in address order.
    pub fn free_holes(&self) -> Result<Vec<(usize, usize)>> {
        let ranges = self.ranges()?;
        Ok(with_scratch(|s| holes_around(s, self.usable, &ranges)))
    }
}

/// Maximal runs of the record area `[RECORD_START, usable)` outside all of `ranges`
/// (non-empty, inside the page), in address order.
fn holes_around(s: &mut Scratch, usable: usize, ranges: &[(usize, usize)]) -> Vec<(usize, usize)> {
    s.used.clear(usable);
    for &(a, e) in ranges {
        s.used.mark(a, e);
    }
    s.used.holes(RECORD_START, usable)
}

/// Whether any one-cell change of version `v` (a cell of at most [`reserve_cell`] bytes)
/// is guaranteed to fit next to it: the bytes it does not reference contain one hole of at
/// least `2·(ncells + 1) + reserve_cell` bytes (room for the next array plus that cell;
/// see the module notes on space).
pub fn has_reserve(v: &View<'_>) -> bool {
    let need = PTR_SIZE * (v.ncells + 1) + reserve_cell(v.usable);
    v.free_holes()
        .is_ok_and(|h| h.iter().any(|&(s, e)| e - s >= need))
}

#[cfg(test)]
pub use crate::page::layout::DescInfo;

/// Both descriptor slots: `None` for an INV (tid 0) slot or a buffer too small to be a
/// DHL page, otherwise its tid and whether it is valid. A torn descriptor shows up as
/// `valid: false` and must be ignored like an INV one.
///
/// Only tree versions count as valid here: an overflow page's descriptor shows up as `valid:
/// false`. Recovery, which must count overflow pages too, uses [`SlotCheck::page_versions`].
#[cfg(test)]
pub fn descriptors(pgno: Pgno, buf: &[u8], usable: usize) -> [Option<DescInfo>; 2] {
    crate::page::versioned::descriptor_infos(buf, Dhl::geometry_ok(usable, buf.len()), |slot| {
        Dhl::check_slot(pgno, buf, usable, slot).is_ok()
    })
}

/// Both descriptor slots of any DHL page, for recovery's scan: like [`descriptors`], but a
/// slot is also `valid` when it is a valid overflow-page descriptor (slot 0 only, exactly
/// what [`OVERFLOW`] accepts). `None` for an INV (tid 0) slot or a buffer too small
/// to be a DHL page of size `usable`. For tree pages the result equals [`descriptors`].
#[cfg(test)]
pub fn page_versions(pgno: Pgno, buf: &[u8], usable: usize) -> [Option<DescInfo>; 2] {
    Dhl::page_versions(pgno, buf, usable)
}

/// Set `txn_size` in every valid descriptor with this `tid` (a tree version as
/// [`SlotCheck::visible`] accepts it, or an overflow page as [`OVERFLOW`] accepts it) and recompute
/// its checksum so that it stays valid. Only those descriptors' `txn_size` and checksum bytes
/// change; nothing else in `buf` does, and invalid, INV or other-tid slots are left alone. Returns
/// whether any descriptor was stamped (false for tid 0 or a buffer too small to be a DHL page of
/// size `usable`).
///
/// The commit path calls it (as `restamp_slots`) on each dirty page image before writing it, once the pager
/// knows how many pages the transaction writes (module notes, counting commit).
#[cfg(test)]
pub fn restamp(pgno: Pgno, buf: &mut [u8], usable: usize, tid: u64, txn_size: u32) -> bool {
    restamp_as(pgno, buf, usable, Stamp::serial(tid, txn_size))
}

/// [`restamp`] of the versions a transaction wrote as `s.written` (its working tid) that
/// commits as `s.tid`: the tag is rewritten too, inside the same checksum. A concurrent
/// writer builds its versions before it knows the commit counter it will commit at.
#[cfg(test)]
pub fn restamp_as(pgno: Pgno, buf: &mut [u8], usable: usize, s: Stamp) -> bool {
    restamp_slots(pgno, buf, usable, s, [false; 2])
        .iter()
        .any(|k| k.is_some())
}

/// Remember the tree version in slot `slot` of `image` as validated: one this process just
/// wrote (built, edited or stamped), valid by construction, so the pages a commit writes
/// are not validated again on their next open — with its hot leaves, most of a small
/// transaction's reads. Debug builds validate it here instead.
pub(crate) fn remember_written(pgno: Pgno, image: &PageRef, usable: usize, slot: usize) {
    debug_assert!(
        Dhl::check_slot(pgno, image, usable, slot).is_ok(),
        "page {pgno}: a written version does not validate"
    );
    crate::page::versioned::remember(&MEMO, image, (pgno, usable, slot), ());
}

/// Whether slot `slot` of exactly these bytes is remembered as validated.
pub(crate) fn remembered(pgno: Pgno, page: &[u8], usable: usize, slot: usize) -> bool {
    crate::page::versioned::recall(&MEMO, page, pgno, usable, slot).is_some()
}

/// The bytes the checksum of slot `slot`'s version covers (descriptor up to the crc,
/// array, cells in array order), into `s.covered`, for a version known to be valid: the
/// bounds and overlap checks and the checksum comparison of `check_slot_in` are skipped
/// (None only if a cell cannot be read, which a valid version never gives).
fn gather_covered(
    s: &mut Scratch,
    pgno: Pgno,
    buf: &[u8],
    usable: usize,
    slot: usize,
) -> Option<()> {
    let v = view_validated(pgno, buf, usable, slot);
    let d = slot * DESC_SIZE;
    s.covered.clear();
    s.covered.extend_from_slice(&buf[d..d + D_CRC]);
    s.covered
        .extend_from_slice(&buf[v.array_off..v.array_off + PTR_SIZE * v.ncells]);
    for i in 0..v.ncells {
        let (off, size) = v.cell_range(i).ok()?;
        s.covered.extend_from_slice(&buf[off..off + size]);
    }
    Some(())
}

/// What [`restamp_slots`] stamped in one descriptor slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stamped {
    /// A tree version, valid before the stamp and after it (its checksum recomputed).
    Tree,
    Overflow,
}

/// `restamp_as`, saying which slots it stamped and as what: the commit path's (through
/// `Dhl::restamp`), which remembers the stamped tree versions as validated. `known[slot]`:
/// the slot's version is remembered as validated in exactly these bytes (the caller
/// asked the memo before `Arc::make_mut` moved them), so its covered bytes are gathered
/// without validating them again; debug builds still validate.
pub(crate) fn restamp_slots(
    pgno: Pgno,
    buf: &mut [u8],
    usable: usize,
    s: Stamp,
    known: [bool; 2],
) -> [Option<Stamped>; 2] {
    let (written, tid, txn_size) = (s.written, s.tid, s.txn_size);
    /// How to get a valid descriptor's new checksum.
    enum Covered {
        /// Tree version: the checksum itself, of its covered bytes with the new txn_size
        /// (the only covered bytes that change).
        Tree(u32),
        /// Overflow page: data length (data starts at `RECORD_START`).
        Overflow(usize),
    }

    let mut stamped = [None, None];
    if tid == 0 || written == 0 || !Dhl::geometry_ok(usable, buf.len()) {
        return stamped;
    }
    for slot in 0..2 {
        let d = slot * DESC_SIZE;
        if get_u64(buf, d + D_TID) != written {
            continue;
        }
        // What the checksum covers, found before writing.
        let tree = with_scratch(|s| {
            if known[slot] {
                gather_covered(s, pgno, buf, usable, slot)?;
            } else {
                check_slot_in(s, pgno, buf, usable, slot).ok()?;
            }
            put_u64(&mut s.covered, D_TID, tid);
            put_u32(&mut s.covered, D_TXN_SIZE, txn_size);
            Some(Covered::Tree(covered_crc(pgno, &s.covered)))
        });
        let covered = tree.or_else(|| {
            (slot == 0)
                .then(|| OVERFLOW.open(pgno, buf, usable).ok())
                .flatten()
                .map(|o| Covered::Overflow(o.data.len()))
        });
        let Some(covered) = covered else {
            continue;
        };
        put_u64(buf, d + D_TID, tid);
        put_u32(buf, d + D_TXN_SIZE, txn_size);
        let (crc, kind) = match covered {
            Covered::Tree(crc) => (crc, Stamped::Tree),
            Covered::Overflow(len) => (overflow_crc(pgno, buf, len), Stamped::Overflow),
        };
        put_u32(buf, d + D_CRC, crc);
        stamped[slot] = Some(kind);
    }
    stamped
}

impl SlotCheck for Dhl {
    type View<'b> = View<'b>;
    const LABEL: &'static str = "DHL";
    const OVERFLOW: &'static OverflowFormat = &OVERFLOW;
    const MIN_USABLE: usize = RECORD_START;

    fn validate(pgno: Pgno, buf: &[u8], usable: usize, slot: usize) -> Checked<View<'_>> {
        with_scratch(|s| check_slot_in(s, pgno, buf, usable, slot))
    }

    fn tid_of(v: &View<'_>) -> u64 {
        v.tid
    }
}
