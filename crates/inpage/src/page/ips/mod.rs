//! In-page shadowing (IPS) page: the B+tree node layout whose committed records never
//! move. The previous and the next version of a node share one physical page, and a new
//! version only *adds* to the page: records and slots are appended, a removal sets a
//! tombstone bit, a replacement appends and tombstones, rollback drops one descriptor.
//!
//! Layout (all integers little-endian; `usable` = page size − pager trailer, at most
//! 65 535 so that every offset fits a u16; `T` = [`tb_len`], `S` = [`slots_start`]):
//!
//! ```text
//! 0..32        descriptor slot 0      (heads as DHL's: tid u64 at 0, txn_size u32 at 8;
//! 32..64       descriptor slot 1       the journal relies on heads in [0, 64))
//! 64..64+T     tombstone bitmap TB[0]  (bit i set: slot i is dead in the version of
//! 64+T..S      tombstone bitmap TB[1]   descriptor 0, resp. 1)
//! S..          slot array: entry i = off u16 | pred u16, appended in insertion order
//! ...          free gap (zero)
//! rec_lo..usable  records (cells, stock encodings), appended growing down
//!
//! descriptor:
//! 0..8    tid          0 = INV (never written, or rolled back)
//! 8..12   txn_size     pages transaction `tid` wrote (counting commit; 0 until commit)
//! 12..14  nslots       this version sees slots [0, nslots)
//! 14..16  base_nslots  slots of the version it was built on; [base, nslots) are its own
//! 16..18  rec_lo       lowest record byte of this version
//! 18..20  rec_hi       its base's rec_lo: [rec_lo, rec_hi) holds the records it appended
//! 20      type         page_type::LEAF / INTERIOR (OVERFLOW: see `overflow.rs`)
//! 21      flags        0
//! 22..24  nlive        slots whose TB bit is clear = cells of the node
//! 24..28  right        interior: rightmost child; leaf: 0
//! 28..32  crc          xxh3 folded to 32 bits over bytes 0..28, TB[slot], the slot
//!                      entries [base, nslots) and the record bytes [rec_lo, rec_hi)
//! ```
//!
//! # Key order without a comparator
//!
//! The paper sorts a page's slots by key when it loads the page. inpage's page layer does
//! not know the tree's order (an SQL index orders keys by a callback), so IPS records the
//! order when it appends instead: each slot names `pred`, the slot it was inserted right
//! after (0xFFFF: at the head). Replaying slots `0..nslots` in index order into a linked
//! list (each right after its pred) and keeping the live ones gives the node's cells in
//! key order, in O(n) and with no key comparison ([`View::order`]). Dead slots stay in the
//! list as anchors, since a later slot may name one as its pred. Replay is correct because
//! a writer appends cell `c` after the slot of the cell before it in the new node, and no
//! later slot of the same version names that slot again (one cell follows it), so every
//! live cell lands between its key-order neighbours.
//!
//! # Validity and the visible version
//!
//! A descriptor is valid iff its tid is not 0, its type is a tree type, flags 0, a leaf
//! has no right child and an interior node has one, `base <= nslots <= max_slots`,
//! `S + 4·nslots <= rec_lo <= rec_hi <= usable`, no TB bit at or past `nslots` is set,
//! every pred is 0xFFFF or below its own index, every live slot's record decodes with the
//! stock size rules to at most `max_cell` bytes inside `[S + 4·nslots, usable)` — inside
//! `[rec_lo, rec_hi)` for its own slots, at or past `rec_hi` for inherited ones — no two
//! live records overlap, `nlive` matches, every child pointer of an interior node is
//! non-zero and the crc matches. Anything else is ignored, never a panic: pages come from
//! disk. A reader sees the valid descriptor with the largest `tid <= max_tid`, as in DHL.
//!
//! # Why the crc covers only what a version appended, and torn writes are harmless
//!
//! Writing transaction `V` over a page keeps the protected version `P` (the newest valid
//! one with a tid below `V`'s) bit for bit: its descriptor, TB[P], slots `[0, P.nslots)`
//! and bytes `[P.rec_lo, usable)`. `V` goes into the other descriptor slot, starts its
//! TB as a copy of P's, appends slots from `P.nslots` and records below `P.rec_lo`; every
//! other byte is zero. Committed records and slots are never moved or changed (garbage is
//! reclaimed only by copying the live cells to a fresh page, which the tree does when a
//! version does not fit), so everything `V` inherits from `P` is identical in the old and
//! the new image: a torn write (each 512-byte sector wholly old or wholly new) cannot
//! damage it, and the crc need not cover it. What it can damage is what `V` wrote, its
//! descriptor, TB[V], its slots and its records, which is exactly what `V`'s crc covers,
//! with both descriptors in sector 0 (so a mix shows `V`'s descriptor whole or not at
//! all). Hence every mix shows `P` valid with its cells, and `V` either whole or invalid.
//! The only other descriptor a mix can show is the one `V` replaced: this transaction's
//! own earlier build (as in DHL, a page must therefore reach the disk at most once per
//! transaction), or a committed version older than `P`, which no reader after recovery
//! asks for (the FCC is at least `P`'s tid). Its bytes are usually ones `P` inherited and
//! unchanged; the exception is an empty `P` (see `build`'s `empty_on`), which inherits
//! nothing, so `V` may overwrite the older version's records and that version may then
//! show stale bytes — harmless for the same reason.
//!
//! # Deviation from the paper: per-version tids instead of one flip bit
//!
//! The paper keeps one page tid and a flip bit F naming the newest of two slot counts.
//! Here each descriptor carries its own `(tid, txn_size)`: the counting commit counts a
//! page's versions per transaction, and a torn write must be detectable per version.
//! Flipping F is [`invalidate`]: zero the tid of the rolled-back version (sector 0 only).
//!
//! # Space and garbage
//!
//! A cell costs its bytes plus one slot entry ([`cell_cost`]); [`capacity`] is the page
//! after the header region minus a headroom of a sixteenth of the page (at most a maximal
//! cell) and one slot, so a compact page at capacity still takes a one-row change. Dead
//! records and slots stay until the tree copies the live cells to a fresh page (`build`
//! returns None when a version does not fit, and the tree relocates the node): IPS's lazy
//! garbage collection, done by copy-on-write. The root never moves: a root that fills up
//! becomes the tree's root pointer (see `tree::btree`), an empty node, which IPS writes
//! as a version inheriting no slots or records, so the next version of the root (once
//! the pointer is committed) starts from a compact page and the child can be lifted back.
//!
//! # Files
//!
//! This file: format, validation, the key-ordered view and its per-image memo, the table of
//! versions the builders sealed (so the commit neither validates nor replays a page this
//! thread just built: `sealed_take`), recovery's views and the commit-time edits; `build.rs` writes versions; `overflow.rs` is the
//! overflow page; `layout.rs` the `PageLayout` glue; `tests.rs` the tests.

use std::cell::RefCell;
use std::sync::Arc;

use crate::error::{Error, Pgno, Result};
use crate::le::{get_u16, get_u32, get_u64, put_u32, put_u64};
use crate::page::cell::{self, cell_child, max_cell, CELL_HEADER};
use crate::page::cells::Detached;
use crate::page::layout::{Stamp, VERSION_HEADS};
use crate::page::occupancy::Occupancy;
use crate::page::page_type;
use crate::page::versioned::{
    descriptor_kind, fold, newest_candidate, open_remembered, recall, right_child_fits, with_local,
    Checked, ImageMemo, OverflowFormat, SlotCheck, D_TID, D_TXN_SIZE,
};
use crate::seam::{planted, Plant};

mod build;
mod layout;
mod overflow;
#[cfg(test)]
mod tests;

pub use build::{build, edit};
use layout::Ips;
pub(crate) use layout::IPS;
#[cfg(test)]
pub use overflow::overflow_data;
pub(crate) use overflow::OVERFLOW;

#[cfg(test)]
pub use crate::page::versioned::{descriptor_heads, invalidate};
pub use crate::page::versioned::{Version, DESC_SIZE, MAX_USABLE};
/// Bytes of one slot entry (off u16, pred u16).
pub const SLOT_SIZE: usize = 4;
/// `pred` of a slot inserted at the head of the list.
pub const NO_PRED: usize = 0xFFFF;

const D_NSLOTS: usize = 12;
const D_BASE: usize = 14;
const D_REC_LO: usize = 16;
const D_REC_HI: usize = 18;
const D_TYPE: usize = 20;
const D_FLAGS: usize = 21;
const D_NLIVE: usize = 22;
const D_RIGHT: usize = 24;
/// The crc covers the descriptor up to here and is stored right after.
const D_CRC: usize = 28;

/// Most slots a page can need: a full page of the smallest cells (an empty key, and an
/// empty value or none) with their slot entries.
#[inline]
pub fn max_slots(usable: usize) -> usize {
    usable.saturating_sub(VERSION_HEADS) / (SLOT_SIZE + CELL_HEADER)
}

/// Bytes of one tombstone bitmap: a bit per possible slot, rounded up to 8 bytes.
#[inline]
pub fn tb_len(usable: usize) -> usize {
    max_slots(usable).div_ceil(8).next_multiple_of(8)
}

/// Offset of tombstone bitmap `slot`.
#[inline]
fn tb_off(usable: usize, slot: usize) -> usize {
    VERSION_HEADS + slot * tb_len(usable)
}

/// Start of the slot array.
#[inline]
pub fn slots_start(usable: usize) -> usize {
    VERSION_HEADS + 2 * tb_len(usable)
}

/// Headroom [`capacity`] leaves next to a full node so that a freshly compacted page
/// takes a few one-row changes before it must be copied again: a sixteenth of the page
/// (at most a maximal cell), plus one slot entry.
pub fn headroom(usable: usize) -> usize {
    (usable / 16).min(max_cell(usable)) + SLOT_SIZE
}

/// Most `Σ cell_cost` a written node may have.
pub fn capacity(usable: usize) -> usize {
    usable
        .saturating_sub(slots_start(usable))
        .saturating_sub(headroom(usable))
}

/// Capacity cost of a cell of `len` bytes: the record and one slot entry.
pub fn cell_cost(len: usize) -> usize {
    len + SLOT_SIZE
}

/// Size of the cell at the start of `area` under the stock rules, if it fits and is at
/// most `max_cell`.
fn cell_size(leaf: bool, usable: usize, area: &[u8]) -> Option<usize> {
    cell::cell_size(leaf, usable, area).filter(|&size| size <= max_cell(usable))
}

/// Checksum of descriptor `slot` given its fields (all ranges bounds-checked).
///
/// xxh3, not crc32c, for the reason DHL gives (`double_header::version_crc`): a record may end with
/// the crc32c of its own bytes, to which a crc32c over it would be blind.
fn version_crc(pgno: Pgno, buf: &[u8], usable: usize, slot: usize, h: &Head) -> u32 {
    let d = slot * DESC_SIZE;
    let s = slots_start(usable);
    let tb = tb_off(usable, slot);
    let mut x = xxhash_rust::xxh3::Xxh3::with_seed(crate::page::versioned::page_seed(pgno));
    x.update(&buf[d..d + D_CRC]);
    if !planted(Plant::IpsCrcSkipsTombstones) {
        x.update(&buf[tb..tb + tb_len(usable)]);
    }
    if !planted(Plant::IpsCrcSkipsSlots) {
        x.update(&buf[s + SLOT_SIZE * h.base..s + SLOT_SIZE * h.nslots]);
    }
    x.update(&buf[h.rec_lo..h.rec_hi]);
    fold(x.digest())
}

/// The decoded fields of a descriptor (not validated).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Head {
    tid: u64,
    txn_size: u32,
    nslots: usize,
    base: usize,
    rec_lo: usize,
    rec_hi: usize,
    typ: u8,
    flags: u8,
    nlive: usize,
    right: Pgno,
    crc: u32,
}

impl Head {
    fn read(buf: &[u8], slot: usize) -> Head {
        let d = slot * DESC_SIZE;
        Head {
            tid: get_u64(buf, d + D_TID),
            txn_size: get_u32(buf, d + D_TXN_SIZE),
            nslots: get_u16(buf, d + D_NSLOTS),
            base: get_u16(buf, d + D_BASE),
            rec_lo: get_u16(buf, d + D_REC_LO),
            rec_hi: get_u16(buf, d + D_REC_HI),
            typ: buf[d + D_TYPE],
            flags: buf[d + D_FLAGS],
            nlive: get_u16(buf, d + D_NLIVE),
            right: get_u32(buf, d + D_RIGHT),
            crc: get_u32(buf, d + D_CRC),
        }
    }
}

/// Per-thread buffers reused by validation, so the per-operation work allocates little.
#[derive(Default)]
struct Scratch {
    /// One bit per page byte, set for bytes a live record occupies.
    used: Occupancy,
    /// Linked list of the replay (index `nslots` is the head sentinel).
    next: Vec<u16>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// Run `f` with this thread's [`Scratch`] (see [`with_local`]).
fn with_scratch<R>(f: impl FnOnce(&mut Scratch) -> R) -> R {
    with_local(&SCRATCH, f)
}

/// One valid version of an IPS page.
#[derive(Clone, Copy, Debug)]
pub struct View<'a> {
    pub(crate) pgno: Pgno,
    pub(crate) buf: &'a [u8],
    pub(crate) usable: usize,
    pub(crate) slot: usize,
    /// [`slots_start`] of `usable`, computed once.
    ss: usize,
    head: Head,
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
    pub fn nslots(&self) -> usize {
        self.head.nslots
    }
    pub fn base_nslots(&self) -> usize {
        self.head.base
    }
    pub fn nlive(&self) -> usize {
        self.head.nlive
    }
    pub fn rec_lo(&self) -> usize {
        self.head.rec_lo
    }
    pub fn rec_hi(&self) -> usize {
        self.head.rec_hi
    }
    /// First byte past the slot array this version sees.
    pub fn slots_end(&self) -> usize {
        self.ss + SLOT_SIZE * self.head.nslots
    }
    /// Whether slot `i` is dead in this version.
    pub fn dead(&self, i: usize) -> bool {
        tb_get(self.buf, tb_off(self.usable, self.slot), i)
    }
    /// (record offset, pred) of slot entry `i`.
    pub fn entry(&self, i: usize) -> (usize, usize) {
        slot_entry(self.buf, self.ss, i)
    }
    /// Live slot indices in key order (the pred-link replay; see the module notes).
    #[cfg(test)]
    pub fn order(&self) -> Vec<usize> {
        with_scratch(|s| {
            let mut out = Vec::with_capacity(self.head.nlive);
            replay(s, self, |i| out.push(i));
            out
        })
    }
    /// Record offset and size of live slot `i` (validated, so decodable).
    pub fn record(&self, i: usize) -> (usize, usize) {
        let off = self.entry(i).0;
        let size =
            cell_size(self.is_leaf(), self.usable, &self.buf[off..self.usable]).unwrap_or_default();
        (off, size)
    }
    /// The node's cells in key order.
    #[cfg(test)]
    pub fn cells(&self) -> Vec<Vec<u8>> {
        self.order()
            .into_iter()
            .map(|i| {
                let (off, size) = self.record(i);
                self.buf[off..off + size].to_vec()
            })
            .collect()
    }
    /// Capacity its cells use: Σ [`cell_cost`].
    pub fn used(&self) -> usize {
        (0..self.head.nslots)
            .filter(|&i| !self.dead(i))
            .map(|i| cell_cost(self.record(i).1))
            .sum()
    }
    /// The key-ordered node, with its offsets as a view of its own.
    pub fn detach(&self) -> Detached {
        self.opened().node
    }
    /// The node with what an edit of it needs: its live slots in key order and the
    /// capacity its cells use. One replay.
    pub(crate) fn opened(&self) -> Opened {
        with_scratch(|s| {
            let n = self.head.nlive;
            let mut view = Vec::with_capacity(2 * n);
            let mut order = Vec::with_capacity(n);
            let mut used = 0;
            replay(s, self, |i| {
                let (off, size) = self.record(i);
                view.extend_from_slice(&(off as u16).to_le_bytes());
                order.push(i as u16);
                used += cell_cost(size);
            });
            self.opened_from(view.into(), order.into(), used)
        })
    }
    /// [`View::opened`] from parts the caller knows (a builder: the cells it just laid
    /// out), with `view` the `u16` offsets of `order`'s slots.
    fn opened_from(&self, view: Arc<[u8]>, order: Arc<[u16]>, used: usize) -> Opened {
        Opened {
            node: Detached::with_view(
                self.pgno,
                self.usable,
                self.is_leaf(),
                self.slots_end(),
                self.head.right,
                view,
            ),
            order,
            used,
        }
    }
}

/// A validated version as the tree uses it: the key-ordered node, plus the live slot
/// indices in key order and the capacity its cells use (Σ [`cell_cost`]), which an edit
/// of it needs (the slot before the edited position is the new slot's pred) and would
/// otherwise replay and sum again. Clones share the arrays.
#[derive(Clone, Debug)]
pub(crate) struct Opened {
    pub(crate) node: Detached,
    pub(crate) order: Arc<[u16]>,
    pub(crate) used: usize,
}

#[inline]
fn tb_get(buf: &[u8], tb: usize, i: usize) -> bool {
    buf[tb + i / 8] >> (i % 8) & 1 == 1
}

/// Slot entry `i` of a page whose slot array starts at `ss` ([`slots_start`]).
#[inline]
fn slot_entry(buf: &[u8], ss: usize, i: usize) -> (usize, usize) {
    let at = ss + SLOT_SIZE * i;
    (get_u16(buf, at), get_u16(buf, at + 2))
}

/// Replay the slots of `v` into a list and call `f` with each live slot in list order.
/// Preds are validated (`< own index` or [`NO_PRED`]), so this cannot loop or panic.
fn replay(s: &mut Scratch, v: &View<'_>, mut f: impl FnMut(usize)) {
    let n = v.head.nslots;
    let head = n;
    s.next.clear();
    s.next.resize(n + 1, u16::MAX);
    for i in 0..n {
        let p = v.entry(i).1;
        let p = if p == NO_PRED { head } else { p };
        s.next[i] = s.next[p];
        s.next[p] = i as u16;
    }
    let tb = tb_off(v.usable, v.slot);
    let mut at = s.next[head];
    while at != u16::MAX {
        let i = at as usize;
        if !tb_get(v.buf, tb, i) {
            f(i);
        }
        at = s.next[i];
    }
}

fn check_slot_in<'b>(
    s: &mut Scratch,
    pgno: Pgno,
    buf: &'b [u8],
    usable: usize,
    slot: usize,
) -> std::result::Result<View<'b>, String> {
    let h = Head::read(buf, slot);
    let leaf = descriptor_kind(slot, h.tid, h.typ)?;
    if h.flags != 0 {
        return Err(format!("descriptor {slot} has flags {:#x}", h.flags));
    }
    right_child_fits(slot, leaf, h.right)?;
    let ss = slots_start(usable);
    let slots_end = ss + SLOT_SIZE * h.nslots;
    if h.base > h.nslots
        || h.nslots > max_slots(usable)
        || slots_end > h.rec_lo
        || h.rec_lo > h.rec_hi
        || h.rec_hi > usable
    {
        return Err(format!(
            "descriptor {slot}: slots [{}, {}) of at most {}, records [{}, {}) do not fit the page",
            h.base,
            h.nslots,
            max_slots(usable),
            h.rec_lo,
            h.rec_hi
        ));
    }
    let tb = tb_off(usable, slot);
    let tbl = tb_len(usable);
    // No tombstone past nslots: the bitmap is canonical.
    for (k, &byte) in buf[tb..tb + tbl].iter().enumerate() {
        let first = k * 8;
        let stray = if first >= h.nslots {
            byte
        } else if h.nslots - first < 8 {
            byte & !((1u8 << (h.nslots - first)) - 1)
        } else {
            0
        };
        if stray != 0 {
            return Err(format!(
                "descriptor {slot}: tombstones past slot {}",
                h.nslots
            ));
        }
    }
    s.used.clear(usable);
    let max = max_cell(usable);
    let mut nlive = 0;
    for i in 0..h.nslots {
        let (off, pred) = slot_entry(buf, ss, i);
        if pred != NO_PRED && pred >= i {
            return Err(format!("descriptor {slot}: slot {i} has pred {pred}"));
        }
        if tb_get(buf, tb, i) {
            continue;
        }
        nlive += 1;
        let (lo, hi) = if i >= h.base {
            (h.rec_lo, h.rec_hi)
        } else {
            (h.rec_hi, usable)
        };
        if !(lo..hi).contains(&off) {
            return Err(format!(
                "descriptor {slot}: slot {i} record at {off} outside [{lo}, {hi})"
            ));
        }
        let size = cell::cell_size(leaf, usable, &buf[off..hi])
            .filter(|&size| size <= max)
            .ok_or_else(|| {
                format!("descriptor {slot}: slot {i} record at {off} is malformed or runs past its area")
            })?;
        if !s.used.mark(off, off + size) {
            return Err(format!(
                "descriptor {slot}: slot {i} record at {off} overlaps another"
            ));
        }
        if !leaf && cell_child(&buf[off..off + size]) == 0 {
            return Err(format!("descriptor {slot}: slot {i} has child pointer 0"));
        }
    }
    if nlive != h.nlive {
        return Err(format!(
            "descriptor {slot}: {nlive} live slots, descriptor says {}",
            h.nlive
        ));
    }
    if version_crc(pgno, buf, usable, slot, &h) != h.crc {
        return Err(format!("descriptor {slot} (tid {}) fails its crc", h.tid));
    }
    Ok(View {
        pgno,
        buf,
        usable,
        slot,
        ss,
        head: h,
    })
}

// ---- The per-image memo of opened nodes ----------------------------------------------

thread_local! {
    /// The nodes opened from page images (per slot), per thread; see [`ImageMemo`] for
    /// why an image at a remembered address is the remembered bytes.
    static MEMO: RefCell<ImageMemo<Opened>> = const { RefCell::new(ImageMemo::new()) };
}

/// Descriptor `slot` of `page` and its node, if the memo says these very bytes passed
/// validation (`page` is the whole image held by a remembered `Arc`: same address and
/// length; the tree opened the page just before a writer builds on it).
fn memo_view(pgno: Pgno, page: &[u8], usable: usize, slot: usize) -> Option<(View<'_>, Opened)> {
    if !Ips::geometry_ok(usable, page.len()) {
        return None;
    }
    let o = recall(&MEMO, page, pgno, usable, slot)?;
    let v = View {
        pgno,
        buf: page,
        usable,
        slot,
        ss: slots_start(usable),
        head: Head::read(page, slot),
    };
    debug_assert!(Ips::check_slot(pgno, page, usable, slot).is_ok());
    Some((v, o))
}

/// [`SlotCheck::visible`] for a writer's edit: the same answer, without validating again a version
/// the memo knows (see [`memo_view`]), and with the node the memo kept for it.
fn visible_for_edit(
    pgno: Pgno,
    page: &[u8],
    usable: usize,
    max_tid: u64,
) -> Result<(View<'_>, Option<Opened>)> {
    if Ips::geometry_ok(usable, page.len()) {
        if let Some(slot) = newest_candidate(page, |tid| tid <= max_tid) {
            if let Some((v, o)) = memo_view(pgno, page, usable, slot) {
                return Ok((v, Some(o)));
            }
        }
    }
    Ok((Ips::visible(pgno, page, usable, max_tid)?, None))
}

/// [`SlotCheck::visible`] of a shared image, detached: the validation and the key-ordered view are
/// done once per image and version, then remembered (a cursor opens the same cached pages
/// over and over). Same answer as `visible`: the memo only ever holds the newest candidate
/// of a reader after it validated.
pub fn visible_node(pgno: Pgno, page: &Arc<[u8]>, usable: usize, max_tid: u64) -> Result<Detached> {
    open_remembered(
        &MEMO,
        page,
        pgno,
        usable,
        max_tid,
        Ips::geometry_ok(usable, page.len()),
        |o: Opened, _| o.node,
        |slot| {
            let o = Ips::check_slot(pgno, page, usable, slot).ok()?.opened();
            Some((o.clone(), o.node))
        },
        || Ok(Ips::visible(pgno, page, usable, max_tid)?.detach()),
    )
}

// ---- What the builders sealed, for the commit --------------------------------------

/// A version a builder of this thread sealed for page `pgno`: its descriptor (crc
/// included) and its node as the builder laid it out.
struct Sealed {
    pgno: Pgno,
    slot: usize,
    head: Head,
    node: Opened,
}

/// Entries of the sealed-version table (direct-mapped by page number).
const SEALED_WAYS: usize = 256;

thread_local! {
    /// The last version sealed per page (slot `pgno % SEALED_WAYS`), per thread: the
    /// commit's restamp takes it instead of validating and replaying the page it is
    /// about to write (see [`restamp_node`]).
    static SEALED: RefCell<Vec<Option<Sealed>>> = const { RefCell::new(Vec::new()) };
}

/// Record that `out` (descriptor `slot`, just sealed with `head`) is page `pgno`'s
/// version whose live slots in key order are `order`, using `used` capacity.
fn sealed_put(
    pgno: Pgno,
    out: &[u8],
    usable: usize,
    slot: usize,
    head: Head,
    order: Vec<u16>,
    used: usize,
) {
    let ss = slots_start(usable);
    let mut view = Vec::with_capacity(2 * order.len());
    for &i in &order {
        let off = slot_entry(out, ss, i as usize).0 as u16;
        view.extend_from_slice(&off.to_le_bytes());
    }
    let v = View {
        pgno,
        buf: out,
        usable,
        slot,
        ss,
        head,
    };
    let node = v.opened_from(view.into(), order.into(), used);
    SEALED.with(|t| {
        if let Ok(mut t) = t.try_borrow_mut() {
            if t.is_empty() {
                t.resize_with(SEALED_WAYS, || None);
            }
            t[pgno as usize % SEALED_WAYS] = Some(Sealed {
                pgno,
                slot,
                head,
                node,
            });
        }
    })
}

/// Test hooks: whether a sealed version of `pgno` is recorded; forget all of them.
#[cfg(test)]
pub(crate) fn sealed_holds(pgno: Pgno) -> bool {
    SEALED.with(|t| {
        t.borrow()
            .get(pgno as usize % SEALED_WAYS)
            .is_some_and(|e| e.as_ref().is_some_and(|s| s.pgno == pgno))
    })
}
#[cfg(test)]
pub(crate) fn sealed_forget() {
    SEALED.with(|t| t.borrow_mut().clear())
}

/// The node of descriptor `slot` of `buf` if a builder of this thread sealed exactly that
/// version of page `pgno` (taken out of the table). "Exactly": the descriptor, crc
/// included, is the sealed one, and the crc still matches the bytes it covers (the
/// version's own slots, records and tombstones), so those are the bytes the builder
/// wrote; the bytes it inherited are the protected version's, which every build of the
/// page in one transaction inherits unchanged (module notes: committed bytes never
/// change). A miss is never wrong, only slower: the caller validates instead.
fn sealed_take(pgno: Pgno, buf: &[u8], usable: usize, slot: usize) -> Option<Opened> {
    let s = SEALED.with(|t| {
        let mut t = t.try_borrow_mut().ok()?;
        let e = t.get_mut(pgno as usize % SEALED_WAYS)?;
        if e.as_ref().is_some_and(|s| s.pgno == pgno && s.slot == slot) {
            e.take()
        } else {
            None
        }
    })?;
    if !Ips::geometry_ok(usable, buf.len()) || Head::read(buf, slot) != s.head {
        return None;
    }
    (version_crc(pgno, buf, usable, slot, &s.head) == s.head.crc).then_some(s.node)
}

// ---- Recovery's views and commit-time edits ------------------------------------------

/// Set `txn_size` in every valid descriptor with this `tid` (tree version or overflow
/// page) and recompute its crc; only those fields change. Whether any was stamped.
#[cfg(test)]
pub fn restamp(pgno: Pgno, buf: &mut [u8], usable: usize, tid: u64, txn_size: u32) -> bool {
    restamp_node(pgno, buf, usable, Stamp::serial(tid, txn_size)).0
}

/// [`restamp`] of the versions a transaction wrote as `s.written` (its working tid) and
/// commits as `s.tid` (the tag is rewritten too; equal for a serial writer), also answering
/// the stamped tree version's slot and node (its key-ordered view, as [`visible_node`]
/// would build it for page `pgno`). Only the tag, `txn_size` and the crc change, none of
/// which the node depends on, so the commit can remember the node for the image it
/// writes ([`remember`]) and the next open of that cached page neither validates it again
/// nor replays its slots.
pub(crate) fn restamp_node(
    pgno: Pgno,
    buf: &mut [u8],
    usable: usize,
    s: Stamp,
) -> (bool, Option<(usize, Opened)>) {
    let (written, tid, txn_size) = (s.written, s.tid, s.txn_size);
    if tid == 0 || written == 0 || !Ips::geometry_ok(usable, buf.len()) {
        return (false, None);
    }
    let mut stamped = false;
    let mut node = None;
    for slot in 0..2 {
        let d = slot * DESC_SIZE;
        if get_u64(buf, d + D_TID) != written {
            continue;
        }
        let known = sealed_take(pgno, buf, usable, slot).map(|o| {
            debug_assert!(Ips::check_slot(pgno, buf, usable, slot)
                .is_ok_and(|v| { v.opened().order == o.order && v.used() == o.used }));
            (Head::read(buf, slot), o)
        });
        let known = known.or_else(|| {
            let v = Ips::check_slot(pgno, buf, usable, slot).ok()?;
            Some((v.head, v.opened()))
        });
        if let Some((mut h, o)) = known {
            node = Some((slot, o));
            h.tid = tid;
            h.txn_size = txn_size;
            put_u64(buf, d + D_TID, tid);
            put_u32(buf, d + D_TXN_SIZE, txn_size);
            let crc = version_crc(pgno, buf, usable, slot, &h);
            put_u32(buf, d + D_CRC, crc);
            stamped = true;
        } else if slot == 0 {
            if let Ok(len) = OVERFLOW.open(pgno, buf, usable).map(|o| o.data.len()) {
                put_u64(buf, d + D_TID, tid);
                put_u32(buf, d + D_TXN_SIZE, txn_size);
                let crc = crate::page::versioned::overflow_crc(pgno, buf, len);
                put_u32(buf, d + D_CRC, crc);
                stamped = true;
            }
        }
    }
    (stamped, node)
}

/// Remember `node` (descriptor `slot`, validated) as what opening `page` gives, as
/// [`visible_node`] does after it validated.
pub(crate) fn remember(page: &Arc<[u8]>, pgno: Pgno, usable: usize, slot: usize, node: &Opened) {
    debug_assert!(Ips::check_slot(pgno, page, usable, slot).is_ok());
    crate::page::versioned::remember(&MEMO, page, (pgno, usable, slot), node.clone());
}

impl SlotCheck for Ips {
    type View<'b> = View<'b>;
    const LABEL: &'static str = "IPS";
    const OVERFLOW: &'static OverflowFormat = &OVERFLOW;
    const MIN_USABLE: usize = 256;

    fn validate(pgno: Pgno, buf: &[u8], usable: usize, slot: usize) -> Checked<View<'_>> {
        with_scratch(|s| check_slot_in(s, pgno, buf, usable, slot))
    }

    fn tid_of(v: &View<'_>) -> u64 {
        v.tid()
    }
}
