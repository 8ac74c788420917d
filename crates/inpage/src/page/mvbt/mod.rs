//! Multi-version B-tree (MVBT) page: the node layout of the `mvbt` / `ls-mvbt` modes
//! (design: `docs/LS-MVBT-DESIGN.md`). Every record carries a life span `[start, end)`
//! of transaction ids; the page keeps two descriptors (the committed version and the one
//! being written), each with its own key-ordered entry array, as DHL and IPS keep two.
//!
//! Layout (little-endian; `usable` = page size − pager trailer, at most 65 535):
//!
//! ```text
//! 0..32        descriptor 0   (heads as DHL's: tid u64 at 0, txn_size u32 at 8;
//! 32..64       descriptor 1    the journal relies on heads in [0, 64))
//! 64..usable   the versions' entry arrays and records, in any order: at a version's
//!              rec_lo its array (ncells u16 record offsets, key order); records
//!              8-byte aligned: end u64 | start u64 | stock cell. A version is written
//!              into bytes the one it was built on does not reference, lowest first
//!              (`build`).
//!
//! descriptor:
//! 0..8    tid        0 = INV (never written, or rolled back)
//! 8..12   txn_size   pages transaction `tid` wrote (counting commit; 0 until commit)
//! 12..14  ncells     entries in this version's array (live and, without lazy GC, dead)
//! 14..16  rec_lo     where this version's array starts: its lowest byte
//! 16      type       page_type::LEAF / INTERIOR (OVERFLOW: the shared overflow format)
//! 17      flags      0
//! 18..20  nlive      entries live at `tid` = cells of the node
//! 20..24  right      interior: rightmost child; leaf: 0
//! 24..28  zero
//! 28..32  crc        xxh3 folded to 32 bits over bytes 0..28, the array, and per entry
//!                    its record with `end` normalized (see below)
//! ```
//!
//! # Life spans and the normalized `end`
//!
//! A record is live in the version with tid `d` iff `start <= d` and `end > d`, where
//! [`OPEN`] (`u64::MAX`) means not deleted. A version's checksum hashes `end` as OPEN
//! whenever `end > d`: later transactions write into that field (a delete sets `end` to
//! its tid, a writer over a rolled-back delete resets it to OPEN), and since every value
//! they write is greater than `d`, the version reads, validates and hashes the same
//! before and after. That is what lets a delete mark a committed record in place.
//!
//! # Validity and the visible version
//!
//! A descriptor is valid iff its tid is not 0, its type is a tree type, flags and the
//! zero field are 0, a leaf has no right child and an interior node has one,
//! `ncells <= max_cells`, its array `[rec_lo, rec_lo + 2·ncells)` lies in
//! `[64, usable)`, every entry is 8-byte aligned in `[64, usable)` with its record (16
//! bytes of life span, then a cell decoding by the stock rules to at most `max_cell`
//! bytes) inside the page, no two records overlap each other or the array,
//! `0 < start <= tid` and a closed `end` lies in `(start, tid]`, `nlive` matches, every
//! live interior cell has a non-zero child and the crc matches. Anything else is
//! ignored, never a panic: pages come from disk. A reader at snapshot `s` sees the valid
//! descriptor with the largest `tid <= s`, and of its entries the ones live at that tid.
//!
//! # Why any write order and torn sectors leave the committed version intact
//!
//! Transaction `V` writing over the protected version `P` (the newest valid one with a
//! tid below `V`'s) changes only: its own descriptor (sector 0 holds both, so a mix shows
//! it whole or not at all), its own entry array (the region of the descriptor it
//! replaces, never P's), new records in bytes P does not reference (the gap, records P's
//! array does not name, older arrays) and the `end` fields of records P carries, into
//! which it writes only `V.tid` or OPEN, both greater than `P.tid`. Every `end` is
//! 8-byte aligned, so it never straddles a 512-byte sector:
//! in any mix of old and new sectors each `end` is wholly old or wholly new, and both are
//! either `<= P.tid` and unchanged, or `> P.tid`. P's normalized bytes are therefore the
//! same in every mix: P stays valid with its cells, and V is whole or fails its crc.
//! Rolling V back is [`invalidate`] (zero V's tid, sector 0): the `end = V.tid` marks it
//! left behind read as OPEN to P, and the next writer resets them, so "reopen the deletes
//! of the unfinished transaction" needs no record rewrite, and its inserts vanish with
//! the array that named them. The only other descriptor a mix can show is the one `V`
//! replaced (this transaction's own earlier build, or a committed version older than P
//! that no reader after recovery asks for); as in DHL, a page reaches the disk at most
//! once per transaction.
//!
//! # Space
//!
//! A cell costs its bytes rounded up to 8, the 16-byte life span and its 2-byte array
//! entry ([`cell_cost`]); a version's array is written with it, so a page spends on
//! arrays only what its nodes use. [`capacity`] leaves a headroom
//! beside a full node (the paper's reserved buffer space when asked for), so a compact
//! page takes several versions in place. Each version reuses the bytes its protected
//! version does not reference: older arrays always, and with lazy GC the records of
//! cells dead at the protected version (the paper's lazy garbage collection: a node
//! written anyway drops its dead entries, and their space is taken by the next writes).
//! Without lazy GC dead entries stay named, so their records stay. When a version does
//! not fit, the builder refuses and the tree copies the live cells to a fresh page (the
//! MVBT version split), freeing the old one.

use std::cell::RefCell;
use std::sync::Arc;

use crate::error::{Error, Pgno, Result};
use crate::le::{get_u16, get_u32, get_u64, put_u32};
use crate::page::cell::{self, cell_child, max_cell, CELL_HEADER};
use crate::page::cells::Detached;
use crate::page::layout::VERSION_HEADS;
use crate::page::occupancy::Occupancy;
use crate::page::page_type;
use crate::page::versioned::{
    descriptor_kind, fold, right_child_fits, Checked, ImageMemo, OverflowFormat, SlotCheck, D_TID,
    D_TXN_SIZE,
};
use crate::seam::{planted, Plant};

mod build;
mod layout;
#[cfg(test)]
mod tests;

#[cfg(test)]
pub use crate::page::versioned::{descriptor_heads, invalidate};
pub use crate::page::versioned::{Version, DESC_SIZE};
pub use build::build;
use layout::Mvbt;
pub(crate) use layout::{LS_MVBT, LS_MVBT_NO_GC, LS_MVBT_NO_RESERVE, LS_MVBT_NO_SPLIT, MVBT};

/// `end` of a record nobody deleted.
pub const OPEN: u64 = u64::MAX;
/// Bytes of a record's life span (`end`, `start`) before its cell.
pub const SPAN: usize = 16;
/// Records are aligned to this, so no `end` field straddles a sector.
pub const ALIGN: usize = 8;

const D_NCELLS: usize = 12;
const D_REC_LO: usize = 14;
const D_TYPE: usize = 16;
const D_FLAGS: usize = 17;
const D_NLIVE: usize = 18;
const D_RIGHT: usize = 20;
const D_ZERO: usize = 24;
/// The crc covers the descriptor up to here and is stored right after.
const D_CRC: usize = 28;

/// Smallest record: the life span and the smallest cell, aligned.
const MIN_RECORD: usize = SPAN + CELL_HEADER.next_multiple_of(ALIGN);

/// Most entries an array can hold: a page of the smallest records with their entries.
#[inline]
pub fn max_cells(usable: usize) -> usize {
    usable.saturating_sub(VERSION_HEADS) / (MIN_RECORD + 2)
}

/// Start of the area arrays and records share (after both descriptors).
pub const AREA_START: usize = VERSION_HEADS;

/// Bytes a record holding a cell of `len` bytes takes.
#[inline]
pub fn record_len(len: usize) -> usize {
    SPAN + len.next_multiple_of(ALIGN)
}

/// Capacity cost of a cell of `len` bytes: its record and its array entry.
pub fn cell_cost(len: usize) -> usize {
    record_len(len) + 2
}

/// Headroom beside a full node: with `reserve` (the paper's reserved buffer space) a
/// sixteenth of the page, so a node just split or copied takes its next version in
/// place: one key-value item (the paper settles on one, §4.3: larger buffers cost node
/// utilization and saved no dirty nodes) plus the entry array every version writes of
/// its own (at 4 KiB, a 100-byte item and an array of 60 entries). Without, a
/// sixty-fourth: a full node is copied by its next write. Plus the bytes the first
/// record's alignment may cost on a fresh page.
pub fn headroom(usable: usize, reserve: bool) -> usize {
    ALIGN + if reserve { usable / 16 } else { usable / 64 }
}

/// Most `Σ cell_cost` a written node may have.
pub fn capacity(usable: usize, reserve: bool) -> usize {
    usable
        .saturating_sub(AREA_START)
        .saturating_sub(headroom(usable, reserve))
}

/// The shared side-by-side overflow format with MVBT's descriptor field positions.
pub(crate) static OVERFLOW: OverflowFormat = OverflowFormat {
    layout: "MVBT",
    type_at: D_TYPE,
    next_at: D_RIGHT,
    geometry_ok: <Mvbt as SlotCheck>::geometry_ok,
};

/// Whether a record with this life span is live in the version with tid `d`.
#[inline]
pub fn live_at(start: u64, end: u64, d: u64) -> bool {
    start <= d && end > d
}

/// `end` as the version with tid `d` hashes and reads it.
#[inline]
fn normalized(end: u64, d: u64) -> u64 {
    if end > d {
        OPEN
    } else {
        end
    }
}

/// The decoded fields of a descriptor (not validated).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Head {
    pub(crate) tid: u64,
    pub(crate) txn_size: u32,
    pub(crate) ncells: usize,
    pub(crate) rec_lo: usize,
    pub(crate) typ: u8,
    pub(crate) flags: u8,
    pub(crate) nlive: usize,
    pub(crate) right: Pgno,
    pub(crate) zero: u32,
    pub(crate) crc: u32,
}

impl Head {
    fn read(buf: &[u8], slot: usize) -> Head {
        let d = slot * DESC_SIZE;
        Head {
            tid: get_u64(buf, d + D_TID),
            txn_size: get_u32(buf, d + D_TXN_SIZE),
            ncells: get_u16(buf, d + D_NCELLS),
            rec_lo: get_u16(buf, d + D_REC_LO),
            typ: buf[d + D_TYPE],
            flags: buf[d + D_FLAGS],
            nlive: get_u16(buf, d + D_NLIVE),
            right: get_u32(buf, d + D_RIGHT),
            zero: get_u32(buf, d + D_ZERO),
            crc: get_u32(buf, d + D_CRC),
        }
    }

    /// Write every field but the crc into descriptor `slot`.
    fn write(&self, buf: &mut [u8], slot: usize) {
        use crate::le::{put_u16, put_u64};
        let d = slot * DESC_SIZE;
        buf[d..d + DESC_SIZE].fill(0);
        put_u64(buf, d + D_TID, self.tid);
        put_u32(buf, d + D_TXN_SIZE, self.txn_size);
        put_u16(buf, d + D_NCELLS, self.ncells);
        put_u16(buf, d + D_REC_LO, self.rec_lo);
        buf[d + D_TYPE] = self.typ;
        buf[d + D_FLAGS] = self.flags;
        put_u16(buf, d + D_NLIVE, self.nlive);
        put_u32(buf, d + D_RIGHT, self.right);
    }
}

/// Entry `k` of the array of a version whose array starts at `rec_lo`: a record offset.
#[inline]
fn entry(buf: &[u8], rec_lo: usize, k: usize) -> usize {
    get_u16(buf, rec_lo + 2 * k)
}

/// Checksum of descriptor `slot` (fields `h`), over bytes the caller bounds-checked:
/// the descriptor, the array, and per entry its start, normalized end and cell.
/// xxh3 rather than crc32c for DHL's reason: a record may end with the crc32c of its own
/// bytes, to which a crc32c over it would be blind.
fn version_crc(pgno: Pgno, buf: &[u8], slot: usize, h: &Head, sizes: &[usize]) -> u32 {
    let d = slot * DESC_SIZE;
    let a = h.rec_lo;
    let mut x = xxhash_rust::xxh3::Xxh3::with_seed(crate::page::versioned::page_seed(pgno));
    x.update(&buf[d..d + D_CRC]);
    x.update(&buf[a..a + 2 * h.ncells]);
    for (k, &size) in sizes.iter().enumerate() {
        let off = entry(buf, h.rec_lo, k);
        let end = normalized(get_u64(buf, off), h.tid);
        let end = if planted(Plant::MvbtRawEnd) {
            get_u64(buf, off)
        } else {
            end
        };
        x.update(&end.to_le_bytes());
        x.update(&buf[off + 8..off + SPAN + size]);
    }
    fold(x.digest())
}

/// One valid version of an MVBT page.
#[derive(Clone, Debug)]
pub struct View<'a> {
    pub(crate) pgno: Pgno,
    pub(crate) buf: &'a [u8],
    pub(crate) usable: usize,
    pub(crate) slot: usize,
    head: Head,
    /// Cell size of each entry, in array order.
    sizes: Vec<usize>,
}

impl<'a> View<'a> {
    pub fn slot(&self) -> usize {
        self.slot
    }
    pub fn tid(&self) -> u64 {
        self.head.tid
    }
    pub fn txn_size(&self) -> u32 {
        self.head.txn_size
    }
    pub fn is_leaf(&self) -> bool {
        self.head.typ == page_type::LEAF
    }
    pub fn right_child(&self) -> Pgno {
        self.head.right
    }
    /// Entries in the array (live and dead).
    pub fn ncells(&self) -> usize {
        self.head.ncells
    }
    pub fn nlive(&self) -> usize {
        self.head.nlive
    }
    pub fn rec_lo(&self) -> usize {
        self.head.rec_lo
    }
    /// Record offset of entry `k`.
    pub fn record(&self, k: usize) -> usize {
        entry(self.buf, self.head.rec_lo, k)
    }
    /// `(start, end)` of entry `k` as stored (not normalized).
    pub fn span(&self, k: usize) -> (u64, u64) {
        let off = self.record(k);
        (get_u64(self.buf, off + 8), get_u64(self.buf, off))
    }
    /// Whether entry `k` is live in this version.
    pub fn live(&self, k: usize) -> bool {
        let (start, end) = self.span(k);
        live_at(start, end, self.head.tid)
    }
    /// Cell bytes of entry `k`.
    pub fn cell(&self, k: usize) -> &'a [u8] {
        let off = self.record(k) + SPAN;
        &self.buf[off..off + self.sizes[k]]
    }
    /// The node's cells in key order.
    #[cfg(test)]
    pub fn cells(&self) -> Vec<Vec<u8>> {
        (0..self.head.ncells)
            .filter(|&k| self.live(k))
            .map(|k| self.cell(k).to_vec())
            .collect()
    }
    /// The bytes this version references (its array and every record it names), which a
    /// version written over it must leave alone.
    pub(crate) fn occupancy(&self) -> Occupancy {
        let mut used = Occupancy::default();
        used.clear(self.usable);
        if self.head.ncells > 0 {
            used.mark(self.head.rec_lo, self.head.rec_lo + 2 * self.head.ncells);
        }
        for (k, &size) in self.sizes.iter().enumerate() {
            let off = self.record(k);
            // Validation checked the records do not overlap the array or each other.
            let fresh = used.mark(off, off + SPAN + size);
            debug_assert!(fresh, "a valid version's records overlap");
        }
        used
    }
    /// Bytes of the page this version does not reference: where the next one may go.
    pub fn free_bytes(&self) -> usize {
        self.occupancy()
            .holes(AREA_START, self.usable)
            .iter()
            .map(|(s, e)| e - s)
            .sum()
    }
    /// Capacity its live cells use.
    pub fn used(&self) -> usize {
        (0..self.head.ncells)
            .filter(|&k| self.live(k))
            .map(|k| cell_cost(self.sizes[k]))
            .sum()
    }
    /// The key-ordered node (live cells only), detached.
    pub fn detach(&self) -> Detached {
        let mut view = Vec::with_capacity(2 * self.head.nlive);
        for k in 0..self.head.ncells {
            if self.live(k) {
                view.extend_from_slice(&((self.record(k) + SPAN) as u16).to_le_bytes());
            }
        }
        Detached::with_view(
            self.pgno,
            self.usable,
            self.is_leaf(),
            AREA_START,
            self.head.right,
            view.into(),
        )
    }
}

/// Parse and fully validate descriptor `slot`; the error says why it is not valid.
fn validate_slot(
    pgno: Pgno,
    buf: &[u8],
    usable: usize,
    slot: usize,
) -> std::result::Result<View<'_>, String> {
    let h = Head::read(buf, slot);
    let leaf = descriptor_kind(slot, h.tid, h.typ)?;
    if h.flags != 0 || h.zero != 0 {
        return Err(format!(
            "descriptor {slot} has flags {:#x}, reserved {:#x}",
            h.flags, h.zero
        ));
    }
    right_child_fits(slot, leaf, h.right)?;
    let arr_end = h.rec_lo + 2 * h.ncells;
    if h.ncells > max_cells(usable) || h.rec_lo < AREA_START || arr_end > usable {
        return Err(format!(
            "descriptor {slot}: {} entries of at most {}, array at {} (area [{AREA_START}, {usable}))",
            h.ncells,
            max_cells(usable),
            h.rec_lo
        ));
    }
    let mut used = Occupancy::default();
    used.clear(usable);
    if h.ncells > 0 {
        used.mark(h.rec_lo, arr_end);
    }
    let max = max_cell(usable);
    let mut sizes = Vec::with_capacity(h.ncells);
    let mut nlive = 0;
    for k in 0..h.ncells {
        let off = entry(buf, h.rec_lo, k);
        if off % ALIGN != 0 || off < AREA_START || off + SPAN + CELL_HEADER > usable {
            return Err(format!(
                "descriptor {slot}: entry {k} record at {off} misaligned or outside [{AREA_START}, {usable})"
            ));
        }
        let size = cell::cell_size(leaf, usable, &buf[off + SPAN..usable])
            .filter(|&size| size <= max)
            .ok_or_else(|| {
                format!("descriptor {slot}: entry {k} record at {off} is malformed or runs past the page")
            })?;
        if !used.mark(off, off + SPAN + size) {
            return Err(format!(
                "descriptor {slot}: entry {k} record at {off} overlaps another"
            ));
        }
        let (end, start) = (get_u64(buf, off), get_u64(buf, off + 8));
        if start == 0 || start > h.tid {
            return Err(format!(
                "descriptor {slot}: entry {k} starts at tid {start}, version is {}",
                h.tid
            ));
        }
        let end = normalized(end, h.tid);
        if end != OPEN && end <= start {
            return Err(format!(
                "descriptor {slot}: entry {k} life span [{start}, {end}) is empty"
            ));
        }
        if end == OPEN {
            nlive += 1;
            if !leaf && cell_child(&buf[off + SPAN..off + SPAN + size]) == 0 {
                return Err(format!("descriptor {slot}: entry {k} has child pointer 0"));
            }
        }
        sizes.push(size);
    }
    if nlive != h.nlive {
        return Err(format!(
            "descriptor {slot}: {nlive} live entries, descriptor says {}",
            h.nlive
        ));
    }
    if version_crc(pgno, buf, slot, &h, &sizes) != h.crc {
        return Err(format!("descriptor {slot} (tid {}) fails its crc", h.tid));
    }
    Ok(View {
        pgno,
        buf,
        usable,
        slot,
        head: h,
        sizes,
    })
}

// ---- The per-image memo of opened nodes ----------------------------------------------

thread_local! {
    /// The nodes opened from page images (per descriptor slot), per thread; see
    /// [`ImageMemo`] for why an image at a remembered address is the remembered bytes.
    static MEMO: RefCell<ImageMemo<Detached>> = const { RefCell::new(ImageMemo::new()) };
}

/// [`SlotCheck::visible`] of a shared image, detached: the validation (a checksum over every record
/// the version names) is done once per image and version, then remembered, since a
/// cursor opens the same cached pages over and over. Same answer as `visible`: the memo
/// only holds the newest candidate of a reader after it validated, and the node depends
/// on the descriptor only (liveness is judged at its tid, not the reader's).
pub fn visible_node(pgno: Pgno, page: &Arc<[u8]>, usable: usize, max_tid: u64) -> Result<Detached> {
    crate::page::versioned::open_remembered(
        &MEMO,
        page,
        pgno,
        usable,
        max_tid,
        Mvbt::geometry_ok(usable, page.len()),
        |node: Detached, _| node,
        |slot| {
            let node = Mvbt::check_slot(pgno, page, usable, slot).ok()?.detach();
            Some((node.clone(), node))
        },
        || Ok(Mvbt::visible(pgno, page, usable, max_tid)?.detach()),
    )
}

// ---- Recovery's views and commit-time edits ------------------------------------------

/// Set `txn_size` in every valid descriptor with this `tid` (tree version or overflow
/// page) and recompute its crc; only those fields change. Whether any was stamped.
pub fn restamp(pgno: Pgno, buf: &mut [u8], usable: usize, tid: u64, txn_size: u32) -> bool {
    if tid == 0 || !Mvbt::geometry_ok(usable, buf.len()) {
        return false;
    }
    let mut stamped = false;
    for slot in 0..2 {
        let d = slot * DESC_SIZE;
        if get_u64(buf, d + D_TID) != tid {
            continue;
        }
        let known = Mvbt::check_slot(pgno, buf, usable, slot)
            .ok()
            .map(|v| (v.head, v.sizes));
        if let Some((mut h, sizes)) = known {
            h.txn_size = txn_size;
            put_u32(buf, d + D_TXN_SIZE, txn_size);
            let crc = version_crc(pgno, buf, slot, &h, &sizes);
            put_u32(buf, d + D_CRC, crc);
            stamped = true;
        } else if slot == 0 {
            if let Ok(len) = OVERFLOW.open(pgno, buf, usable).map(|o| o.data.len()) {
                put_u32(buf, d + D_TXN_SIZE, txn_size);
                let crc = crate::page::versioned::overflow_crc(pgno, buf, len);
                put_u32(buf, d + D_CRC, crc);
                stamped = true;
            }
        }
    }
    stamped
}

impl SlotCheck for Mvbt {
    type View<'b> = View<'b>;
    const LABEL: &'static str = "MVBT";
    const OVERFLOW: &'static OverflowFormat = &OVERFLOW;
    const MIN_USABLE: usize = 256;

    fn validate(pgno: Pgno, buf: &[u8], usable: usize, slot: usize) -> Checked<View<'_>> {
        validate_slot(pgno, buf, usable, slot)
    }

    fn tid_of(v: &View<'_>) -> u64 {
        v.tid()
    }
}
