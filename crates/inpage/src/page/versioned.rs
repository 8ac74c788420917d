//! What the layouts that keep two versions side by side in a page (DHL, IPS, MVBT) share:
//! the version a writer asks for ([`Version`]), the position of the two descriptor heads,
//! reading and zeroing them, the reading rules written once over each format's
//! validation of a slot ([`SlotCheck`]: which version a reader sees, a slot by number,
//! recovery's view of both slots), the 32-bit fold of their xxh3 checksums, and the
//! per-thread memo of page images whose versions were validated.
//!
//! Invariants, and why they hold:
//! - Both descriptor heads lie in `[0, VERSION_HEADS)`: slot `s` at `32·s`, tid (u64) at
//!   +0, txn_size (u32) at +8. Recovery reads them raw (`PageVersions::heads`), the DHL
//!   journal's free-list snapshot pages rely on zeros there meaning "no version", and
//!   `invalidate` touches only these bytes, inside sector 0, so it is atomic and
//!   idempotent.
//! - A memo entry names one exact image: it holds a `Weak` of it, so the allocation can be
//!   neither freed and reused for other bytes nor changed in place (`Arc::get_mut` fails
//!   while a weak reference exists) as long as the entry is there. An image at the
//!   remembered address is therefore the remembered bytes, and what was validated stays
//!   validated.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::{Arc, Weak};

use crate::error::{Error, Pgno, Result};
use crate::le::{get_u16, get_u32, get_u64, put_u16, put_u32, put_u64};
use crate::page::layout::{DescInfo, VERSION_HEADS};
use crate::page::{page_type, PageRef, PageWrite};

/// A node version to write, as the tree asks every format of the family for one: its
/// metadata and cells in key order (stock encodings).
#[derive(Clone, Copy, Debug)]
pub struct Version<'c> {
    /// Transaction writing it (not 0).
    pub tid: u64,
    /// The transaction's page count: 0 as the tree builds it, stamped at commit. DHL
    /// writes a stamped version directly too (its tests compare the two); IPS refuses
    /// anything but 0.
    pub txn_size: u32,
    pub leaf: bool,
    /// Interior: rightmost child (not 0). Ignored (stored as 0) for leaves.
    pub right: Pgno,
    pub cells: &'c [Vec<u8>],
}

/// A validation's outcome: the value, or why it is not valid.
pub(crate) type Checked<V> = std::result::Result<V, String>;

/// What a format of the family is to the shared reading rules: its validation of one
/// descriptor slot. The rules themselves (which version a reader sees, a slot by number,
/// recovery's view of both slots) are written once here, as provided methods.
pub(crate) trait SlotCheck {
    /// A validated version of the format.
    type View<'b>;
    /// The format's name in messages (`DHL`).
    const LABEL: &'static str;
    /// Its overflow pages: the shared format with this format's field positions.
    const OVERFLOW: &'static OverflowFormat;
    /// The smallest usable page size the format lays out (the largest is what its u16
    /// offsets address, [`MAX_USABLE`]).
    const MIN_USABLE: usize;

    /// Descriptor `slot` of page `pgno` in a buffer of a geometry [`SlotCheck::geometry_ok`]
    /// accepts, fully validated (bounds, cells, checksum); the error says why it is not
    /// valid.
    fn validate(pgno: Pgno, buf: &[u8], usable: usize, slot: usize) -> Checked<Self::View<'_>>;

    /// The version's tid.
    fn tid_of(v: &Self::View<'_>) -> u64;

    /// Whether a buffer of `len` bytes can hold a page of `usable` bytes of the format.
    #[inline]
    fn geometry_ok(usable: usize, len: usize) -> bool {
        (Self::MIN_USABLE..=MAX_USABLE).contains(&usable) && len >= usable
    }

    /// [`SlotCheck::validate`] of any buffer: one whose geometry cannot be such a page is
    /// refused with the reason.
    fn check_slot(pgno: Pgno, buf: &[u8], usable: usize, slot: usize) -> Checked<Self::View<'_>> {
        if !Self::geometry_ok(usable, buf.len()) {
            return Err(format!(
                "page buffer of {} bytes cannot hold a {} page of usable size {usable}",
                buf.len(),
                Self::LABEL
            ));
        }
        Self::validate(pgno, buf, usable, slot)
    }

    /// The version in descriptor `slot` of page `pgno`. Errors: `InvalidArgument` for a
    /// slot other than 0 or 1, `Corrupt` saying why the version is not valid.
    fn open_slot(pgno: Pgno, buf: &[u8], usable: usize, slot: usize) -> Result<Self::View<'_>> {
        if slot > 1 {
            return Err(Error::InvalidArgument(format!(
                "descriptor slot {slot} (a {} page has slots 0 and 1)",
                Self::LABEL
            )));
        }
        Self::check_slot(pgno, buf, usable, slot).map_err(|r| Error::corrupt(pgno, r))
    }

    /// The version a reader at snapshot `max_tid` sees among a page's two descriptor slots:
    /// the valid one ([`SlotCheck::check_slot`]) with the largest tid at most `max_tid`.
    /// Errors: `Corrupt` if there is none, or if a damaged version is newer than the one
    /// it would read.
    ///
    /// `first` is the newest candidate by raw tid ([`newest_candidate`], or None when the
    /// geometry forbids reading it): whenever that one is valid it is the answer — the other
    /// slot could only win or raise "damaged" with a larger tid — so it is validated first and
    /// the other slot is not (a second full validation); every other case takes the complete
    /// path. A damaged version newer than the one a reader would read is corruption, not a torn
    /// write (the newest committed version is protected by every later build, and recovery
    /// zeroes the tid of every version newer than the FCC): falling back to the older version
    /// would silently serve stale data, so that is an error naming it.
    fn visible(pgno: Pgno, buf: &[u8], usable: usize, max_tid: u64) -> Result<Self::View<'_>> {
        let check = |slot| Self::check_slot(pgno, buf, usable, slot);
        let tid_of = Self::tid_of;
        let first = Self::geometry_ok(usable, buf.len())
            .then(|| newest_candidate(buf, |tid| tid <= max_tid))
            .flatten();
        if let Some(v) = first.and_then(|slot| check(slot).ok()) {
            return Ok(v);
        }
        let mut best: Option<Self::View<'_>> = None;
        let mut why = Vec::new();
        // The newest damaged version a reader at `max_tid` could otherwise see.
        let mut damaged: Option<(u64, usize, String)> = None;
        for slot in 0..2 {
            match check(slot) {
                Ok(v) if tid_of(&v) <= max_tid => {
                    if best.as_ref().is_none_or(|b| tid_of(&v) > tid_of(b)) {
                        best = Some(v);
                    }
                }
                Ok(v) => why.push(format!(
                    "descriptor {slot} has tid {} > {max_tid}",
                    tid_of(&v)
                )),
                Err(r) => {
                    let tid = if buf.len() >= VERSION_HEADS {
                        get_u64(buf, slot * DESC_SIZE + D_TID)
                    } else {
                        0
                    };
                    if tid != 0 && tid <= max_tid && damaged.as_ref().is_none_or(|d| tid > d.0) {
                        damaged = Some((tid, slot, r.clone()));
                    }
                    why.push(r)
                }
            }
        }
        if let Some((tid, slot, r)) = damaged {
            if best.as_ref().is_none_or(|b| tid > tid_of(b)) {
                return Err(Error::corrupt(
                    pgno,
                    format!("version {tid} (descriptor {slot}) is damaged: {r}"),
                ));
            }
        }
        best.ok_or_else(|| {
            Error::corrupt(
                pgno,
                format!("no valid version with tid <= {max_tid}: {}", why.join("; ")),
            )
        })
    }

    /// Both slots of any page of the format with their validity, for recovery's scan: a
    /// slot is valid when its tree version is, or (slot 0 only) when it is a valid
    /// overflow-page descriptor, exactly what [`SlotCheck::OVERFLOW`] accepts. None for a
    /// tid-0 slot or a buffer that cannot be such a page of `usable` bytes.
    fn page_versions(pgno: Pgno, buf: &[u8], usable: usize) -> [Option<DescInfo>; 2] {
        descriptor_infos(buf, Self::geometry_ok(usable, buf.len()), |slot| {
            Self::check_slot(pgno, buf, usable, slot).is_ok()
                || (slot == 0 && Self::OVERFLOW.open(pgno, buf, usable).is_ok())
        })
    }
}

/// Run `f` with this thread's value of `key`, a format's scratch buffers for validation
/// (so the per-operation work allocates little); a fresh default if the value is already
/// in use, so a nested call can never panic.
pub(crate) fn with_local<S: Default + 'static, R>(
    key: &'static std::thread::LocalKey<std::cell::RefCell<S>>,
    f: impl FnOnce(&mut S) -> R,
) -> R {
    key.with(|s| match s.try_borrow_mut() {
        Ok(mut s) => f(&mut s),
        Err(_) => f(&mut S::default()),
    })
}

/// Largest usable size the family's u16 offsets can address.
pub const MAX_USABLE: usize = u16::MAX as usize;

/// Bytes of one descriptor slot.
pub const DESC_SIZE: usize = 32;
const _: () = assert!(2 * DESC_SIZE == VERSION_HEADS);
/// Offset of the tid in a descriptor.
pub(crate) const D_TID: usize = 0;
/// Offset of txn_size in a descriptor.
pub(crate) const D_TXN_SIZE: usize = 8;

/// The `(tid, txn_size)` heads of both descriptor slots, read raw and *not* validated (the
/// cheap part of recovery's scan). None for a buffer too small to hold them.
pub fn descriptor_heads(buf: &[u8]) -> Option<[(u64, u32); 2]> {
    if buf.len() < VERSION_HEADS {
        return None;
    }
    let head = |slot: usize| {
        let d = slot * DESC_SIZE;
        (get_u64(buf, d + D_TID), get_u32(buf, d + D_TXN_SIZE))
    };
    Some([head(0), head(1)])
}

/// Make every descriptor with this `tid` INV (tid = 0); returns whether anything changed.
/// Only sector 0 changes, so the write doing it is atomic even on a torn-write device, and
/// repeating it is harmless.
pub fn invalidate(buf: &mut [u8], tid: u64) -> bool {
    if tid == 0 || buf.len() < VERSION_HEADS {
        return false;
    }
    let mut changed = false;
    for slot in 0..2 {
        let d = slot * DESC_SIZE;
        if get_u64(buf, d + D_TID) == tid {
            buf[d + D_TID..d + D_TID + 8].fill(0);
            changed = true;
        }
    }
    changed
}

/// Of the slots whose (unvalidated) tid is not 0 and passes `ok`, the one with the
/// largest tid, slot 0 on a tie. `buf` must hold both descriptors.
/// Whether descriptor `slot`, of transaction `tid` and page type `typ`, holds a leaf
/// (`true`) or an interior node; the error says why it holds neither (never written or
/// invalidated, or not a tree page). The first check of every two-version format.
pub(crate) fn descriptor_kind(slot: usize, tid: u64, typ: u8) -> std::result::Result<bool, String> {
    if tid == 0 {
        return Err(format!("descriptor {slot} is INV (tid 0)"));
    }
    match typ {
        page_type::LEAF => Ok(true),
        page_type::INTERIOR => Ok(false),
        t => Err(format!(
            "descriptor {slot} has type {t} ({}), not a tree page",
            page_type::name(t)
        )),
    }
}

/// A leaf has no right child and an interior node has one.
pub(crate) fn right_child_fits(
    slot: usize,
    leaf: bool,
    right: Pgno,
) -> std::result::Result<(), String> {
    if leaf != (right == 0) {
        return Err(format!(
            "descriptor {slot}: {} with right child {right}",
            if leaf { "leaf" } else { "interior node" },
        ));
    }
    Ok(())
}

pub(crate) fn newest_candidate(buf: &[u8], ok: impl Fn(u64) -> bool) -> Option<usize> {
    let tid = |slot: usize| get_u64(buf, slot * DESC_SIZE + D_TID);
    let ok = |slot: usize| tid(slot) != 0 && ok(tid(slot));
    match (ok(0), ok(1)) {
        (true, true) => Some(if tid(1) > tid(0) { 1 } else { 0 }),
        (true, false) => Some(0),
        (false, true) => Some(1),
        (false, false) => None,
    }
}

/// Both descriptor slots of a page as recovery and tools see them: None for an INV (tid
/// 0) slot or a buffer whose geometry cannot be the layout's (`geometry_ok` false),
/// otherwise its tid, txn_size and whether the layout's `valid` accepts it.
pub(crate) fn descriptor_infos(
    buf: &[u8],
    geometry_ok: bool,
    valid: impl Fn(usize) -> bool,
) -> [Option<DescInfo>; 2] {
    let info = |slot: usize| {
        if !geometry_ok {
            return None;
        }
        let d = slot * DESC_SIZE;
        let tid = get_u64(buf, d + D_TID);
        (tid != 0).then(|| DescInfo {
            slot,
            tid,
            txn_size: get_u32(buf, d + D_TXN_SIZE),
            valid: valid(slot),
        })
    };
    [info(0), info(1)]
}

/// Page 0 for a commit writing header `h`, in the layouts with two header slots (DHL,
/// IPS, MVBT): the committed slot kept, `h` in the other.
pub(crate) fn two_slot_header_image(
    committed: &[u8],
    committed_fcc: u64,
    h: &crate::format::header::Header,
) -> PageRef {
    let mut p = crate::format::header::two_slot_image(committed, committed_fcc, h);
    crate::page::stamp_crc(&mut p, 0);
    PageRef::from(p)
}

/// What `PageLayout::describe` says of page 0 in the layouts with two header slots.
pub(crate) fn describe_header_slots(page: &[u8]) -> Vec<String> {
    use crate::format::header::{decode_slot, HEADER_SLOTS};
    (0..HEADER_SLOTS)
        .map(|slot| match decode_slot(page, slot) {
            Ok(s) => format!(
                "header slot {slot}: fcc {} txn_size {} pages {} catalog root {}",
                s.fcc, s.last_txn_size, s.page_count, s.catalog_root
            ),
            Err(e) => format!("header slot {slot}: invalid ({e})"),
        })
        .collect()
}

/// What a new version of page `pgno` is built over: the writer's tid and the page's
/// current image, which holds the committed version (tid below the writer's, kept) and
/// possibly the transaction's own earlier version (replaced); None for a page this
/// transaction allocated. A tid of 0 (no transaction) is refused.
pub(crate) fn write_base(
    store: &dyn PageWrite,
    pgno: Pgno,
    layout: &str,
) -> Result<(u64, Option<PageRef>)> {
    let tid = store.tid();
    if tid == 0 {
        return Err(Error::InvalidArgument(format!(
            "{layout} tree write outside a transaction (tid 0)"
        )));
    }
    let base = if store.is_fresh(pgno) {
        None
    } else {
        Some(store.read(pgno)?)
    };
    Ok((tid, base))
}

/// The checks a reader makes of an overflow page (written once, by transaction
/// `page_tid`) before taking its `data` and `next`: not newer than its snapshot, and
/// holding exactly the `take` bytes the chain from `owner` expects there.
#[allow(clippy::too_many_arguments)]
pub(crate) fn chain_page(
    owner: Pgno,
    pgno: Pgno,
    page_tid: u64,
    data: &[u8],
    next: Pgno,
    visible_tid: u64,
    take: usize,
) -> Result<(&[u8], Pgno)> {
    if page_tid > visible_tid {
        return Err(Error::corrupt(
            pgno,
            format!(
                "overflow page written by transaction {page_tid} after this snapshot ({visible_tid}), chain from page {owner}"
            ),
        ));
    }
    if data.len() != take {
        return Err(Error::corrupt(
            pgno,
            format!(
                "overflow page holds {} bytes where the value needs {take}",
                data.len()
            ),
        ));
    }
    Ok((data, next))
}

/// A 64-bit xxh3 digest folded to the 32 bits a descriptor stores.
pub(crate) fn fold(x: u64) -> u32 {
    (x ^ (x >> 32)) as u32
}

/// The xxh3 seed of every checksum over a version or overflow page stored at page `pgno`:
/// the page number, so that a page image verifies only where it was written. Two pages
/// swapped or copied over each other (a misdirected write, a bug) then fail their checks
/// instead of handing out each other's rows, in every layout that keeps versions (the
/// stock layout binds its trailer the same way, `page::page_crc`).
pub(crate) fn page_seed(pgno: Pgno) -> u64 {
    u64::from(pgno)
}

/// Entries of an [`ImageMemo`] (direct-mapped by page number): enough that the pages of a
/// database of 16 MiB (4 KiB pages) never evict each other. Fewer made random index seeks
/// over a 13 MiB database validate most pages again on every visit (a third of a join's
/// time; `scripts/sql_ops.sh`, row `join_indexed`).
const MEMO_WAYS: usize = 4096;

/// Entries an [`ImageMemo::put`] looks at past its own and forgets if their image is gone
/// (see [`ImageMemo`]).
const MEMO_SWEEP: usize = 4;

/// One page image and what was remembered for each of its descriptor slots.
struct MemoEntry<T> {
    image: Weak<[u8]>,
    pgno: Pgno,
    usable: usize,
    slots: [Option<T>; 2],
}

impl<T> MemoEntry<T> {
    /// Whether this entry is about exactly the image at `ptr` of page `pgno`.
    fn is(&self, ptr: *const [u8], pgno: Pgno, usable: usize) -> bool {
        self.pgno == pgno && self.usable == usable && std::ptr::eq(self.image.as_ptr(), ptr)
    }
}

/// Per descriptor slot of a page image, a `T` remembered after the slot's version was
/// validated (DHL: nothing more; IPS: the node with its key-ordered view). Each layout
/// keeps one per thread, so readers never contend.
///
/// An entry's `Weak` keeps the image's allocation (not a use of it) alive after the cache
/// lets the image go, which is what makes the address an identity: it cannot be reused
/// for other bytes while the entry names it. So that these dead allocations stay few,
/// every `put` also forgets the dead entries among the next [`MEMO_SWEEP`] ways: an image
/// dies only when the cache loads another in its place, which is followed by a `put` for
/// the new one, so the sweep keeps pace with the deaths and the dead stay a small part of
/// the ways instead of accumulating (at most `MEMO_WAYS` at worst, as before the sweep).
pub(crate) struct ImageMemo<T> {
    ways: Vec<Option<MemoEntry<T>>>,
}

impl<T: Clone> ImageMemo<T> {
    pub(crate) const fn new() -> ImageMemo<T> {
        ImageMemo { ways: Vec::new() }
    }

    fn entry(&self, ptr: *const [u8], pgno: Pgno, usable: usize) -> Option<&MemoEntry<T>> {
        self.ways
            .get(pgno as usize % MEMO_WAYS)?
            .as_ref()
            .filter(|e| e.is(ptr, pgno, usable))
    }

    /// What was remembered for descriptor `slot` of exactly these bytes of page `pgno`:
    /// the whole image a remembered `Arc` holds (same address and length).
    pub(crate) fn get(&self, page: &[u8], pgno: Pgno, usable: usize, slot: usize) -> Option<T> {
        self.entry(page as *const [u8], pgno, usable)?.slots[slot].clone()
    }

    /// Remember `value` for descriptor `slot` of this image (its version validated).
    pub(crate) fn put(
        &mut self,
        page: &Arc<[u8]>,
        pgno: Pgno,
        usable: usize,
        slot: usize,
        value: T,
    ) {
        if self.ways.is_empty() {
            self.ways.resize_with(MEMO_WAYS, || None);
        }
        let way = pgno as usize % MEMO_WAYS;
        for k in 1..=MEMO_SWEEP {
            let other = &mut self.ways[(way + k) % MEMO_WAYS];
            if other.as_ref().is_some_and(|x| x.image.strong_count() == 0) {
                *other = None;
            }
        }
        let e = &mut self.ways[way];
        match e {
            Some(x) if x.is(Arc::as_ptr(page), pgno, usable) => x.slots[slot] = Some(value),
            _ => {
                let mut slots = [None, None];
                slots[slot] = Some(value);
                *e = Some(MemoEntry {
                    image: Arc::downgrade(page),
                    pgno,
                    usable,
                    slots,
                })
            }
        }
    }
}

/// A format's per-thread memo (a `thread_local!`).
pub(crate) type MemoKey<T> = std::thread::LocalKey<std::cell::RefCell<ImageMemo<T>>>;

/// What the thread's `memo` keeps for descriptor `slot` of exactly these bytes; None
/// also while the memo is borrowed (a re-entrant open validates again instead).
pub(crate) fn recall<T: Clone>(
    memo: &'static MemoKey<T>,
    page: &[u8],
    pgno: Pgno,
    usable: usize,
    slot: usize,
) -> Option<T> {
    memo.with(|m| m.try_borrow().ok()?.get(page, pgno, usable, slot))
}

/// Keep `value` in the thread's `memo` for descriptor `slot` of `page`, whose version
/// passed validation.
pub(crate) fn remember<T: Clone>(
    memo: &'static MemoKey<T>,
    page: &Arc<[u8]>,
    at: (Pgno, usize, usize),
    value: T,
) {
    let (pgno, usable, slot) = at;
    memo.with(|m| {
        if let Ok(mut m) = m.try_borrow_mut() {
            m.put(page, pgno, usable, slot, value);
        }
    })
}

/// The version of a shared image that a reader at `max_tid` sees, validated once per
/// image instead of once per open (a cursor opens the same cached pages over and over).
/// When the memo holds the newest candidate (these very bytes passed validation), `hit`
/// makes the answer from what it kept; otherwise `check` validates the candidate and
/// what it keeps is remembered. Every other case (no candidate, or one that does not
/// validate) goes to `slow`, the format's full `visible`. So the answer is always
/// `visible`'s: the memo only ever holds a reader's newest candidate after it validated.
#[allow(clippy::too_many_arguments)]
pub(crate) fn open_remembered<T: Clone, R>(
    memo: &'static MemoKey<T>,
    page: &Arc<[u8]>,
    pgno: Pgno,
    usable: usize,
    max_tid: u64,
    geometry_ok: bool,
    hit: impl FnOnce(T, usize) -> R,
    check: impl FnOnce(usize) -> Option<(T, R)>,
    slow: impl FnOnce() -> Result<R>,
) -> Result<R> {
    if geometry_ok {
        if let Some(slot) = newest_candidate(page, |tid| tid <= max_tid) {
            if let Some(kept) = recall(memo, page, pgno, usable, slot) {
                return Ok(hit(kept, slot));
            }
            if let Some((kept, r)) = check(slot) {
                remember(memo, page, (pgno, usable, slot), kept);
                return Ok(r);
            }
        }
    }
    slow()
}

// ---- Overflow pages ------------------------------------------------------------------

/// Where an overflow page's data length (u16) sits in its slot-0 descriptor (a tree
/// descriptor's cell-count field in both layouts).
const O_LEN: usize = 12;
/// The checksum covers descriptor bytes `0..O_CRC` and the data, and is stored there.
const O_CRC: usize = 28;

/// One decoded overflow page.
#[derive(Clone, Copy, Debug)]
pub struct Overflow<'a> {
    pub tid: u64,
    pub txn_size: u32,
    /// Next page of the chain; 0 ends it.
    pub next: Pgno,
    pub data: &'a [u8],
}

/// Value bytes one overflow page carries: everything after both descriptor slots.
pub fn overflow_data(usable: usize) -> usize {
    usable.saturating_sub(VERSION_HEADS)
}

/// Checksum of overflow page `pgno` holding `len` data bytes: xxh3 seeded with the page
/// number ([`page_seed`]), folded, over descriptor bytes `0..28` and the data.
pub(crate) fn overflow_crc(pgno: Pgno, buf: &[u8], len: usize) -> u32 {
    let mut h = xxhash_rust::xxh3::Xxh3::with_seed(page_seed(pgno));
    h.update(&buf[..O_CRC]);
    h.update(&buf[VERSION_HEADS..VERSION_HEADS + len]);
    fold(h.digest())
}

/// The overflow page of a side-by-side layout. Recovery trusts whatever parses as a
/// descriptor head, so no page carries user bytes in its first [`VERSION_HEADS`] bytes:
/// an overflow page has a descriptor in slot 0 (tid, txn_size, data length, the
/// layout's type byte = OVERFLOW, next page, checksum), slot 1 zero, and its data after
/// both slots. Overflow pages are written once, by the transaction that allocated them,
/// and never changed (a changed value gets a new chain), so one version is all they need;
/// a torn write shows it whole or fails its checksum. The layouts differ only in where
/// their descriptor keeps the type byte and the next pointer.
pub(crate) struct OverflowFormat {
    /// "DHL", "IPS": for messages.
    pub layout: &'static str,
    /// Offset of the type byte in the descriptor.
    pub type_at: usize,
    /// Offset of the next page (u32) in the descriptor.
    pub next_at: usize,
    /// Whether a buffer of `len` bytes can be a page of `usable` bytes of this layout.
    pub geometry_ok: fn(usize, usize) -> bool,
}

impl OverflowFormat {
    /// Image of an overflow page written by transaction `tid` (txn_size 0, set at
    /// commit) holding `data`. Errors: `InvalidArgument` for a bad geometry, tid 0 or
    /// more data than a page carries.
    pub(crate) fn image(
        &self,
        pgno: Pgno,
        page_size: usize,
        usable: usize,
        tid: u64,
        next: Pgno,
        data: &[u8],
    ) -> Result<Vec<u8>> {
        if !(self.geometry_ok)(usable, page_size) || tid == 0 || data.len() > overflow_data(usable)
        {
            return Err(Error::InvalidArgument(format!(
                "{} overflow page: page size {page_size}, usable {usable}, tid {tid}, {} data bytes",
                self.layout,
                data.len()
            )));
        }
        let mut out = vec![0u8; page_size];
        put_u64(&mut out, D_TID, tid);
        put_u16(&mut out, O_LEN, data.len());
        out[self.type_at] = page_type::OVERFLOW;
        put_u32(&mut out, self.next_at, next);
        out[VERSION_HEADS..VERSION_HEADS + data.len()].copy_from_slice(data);
        let crc = overflow_crc(pgno, &out, data.len());
        put_u32(&mut out, O_CRC, crc);
        Ok(out)
    }

    /// Decode and verify an overflow page. Errors: `Corrupt` if slot 0 is not a valid
    /// overflow descriptor (INV, another type, a length past the page, a bad checksum).
    pub(crate) fn open<'a>(
        &self,
        pgno: Pgno,
        buf: &'a [u8],
        usable: usize,
    ) -> Result<Overflow<'a>> {
        let bad = |why: String| Err(Error::corrupt(pgno, why));
        if !(self.geometry_ok)(usable, buf.len()) {
            return bad(format!(
                "page buffer of {} bytes cannot hold a {} page of usable size {usable}",
                buf.len(),
                self.layout
            ));
        }
        let tid = get_u64(buf, D_TID);
        let t = buf[self.type_at];
        if tid == 0 || t != page_type::OVERFLOW {
            return bad(format!(
                "expected a {} overflow page, found tid {tid}, type {t} ({})",
                self.layout,
                page_type::name(t)
            ));
        }
        let len = get_u16(buf, O_LEN);
        if len > overflow_data(usable) {
            return bad(format!(
                "overflow page claims {len} data bytes, more than the {} it holds",
                overflow_data(usable)
            ));
        }
        if overflow_crc(pgno, buf, len) != get_u32(buf, O_CRC) {
            return bad(format!("overflow page (tid {tid}) fails its checksum"));
        }
        Ok(Overflow {
            tid,
            txn_size: get_u32(buf, D_TXN_SIZE),
            next: get_u32(buf, self.next_at),
            data: &buf[VERSION_HEADS..VERSION_HEADS + len],
        })
    }
}

// ---- Hashing cells -------------------------------------------------------------------

/// Hashing for a builder's map from cell bytes to the copies (DHL) or slots (IPS) a new
/// version can keep: seeded xxh3 (a dependency already, and much cheaper than SipHash on
/// short cells). The seed is random per thread because the cells hold user keys; the map
/// only finds exact matches, so images do not depend on it.
#[derive(Clone, Copy)]
pub(crate) struct CellHashing(u64);

impl CellHashing {
    pub(crate) fn new() -> CellHashing {
        thread_local! {
            static SEED: u64 = RandomState::new().build_hasher().finish();
        }
        CellHashing(SEED.with(|s| *s))
    }
}

impl BuildHasher for CellHashing {
    type Hasher = CellHasher;
    fn build_hasher(&self) -> CellHasher {
        CellHasher(self.0)
    }
}

pub(crate) struct CellHasher(u64);

impl Hasher for CellHasher {
    fn write(&mut self, bytes: &[u8]) {
        self.0 = xxhash_rust::xxh3::xxh3_64_with_seed(bytes, self.0);
    }
    fn write_usize(&mut self, n: usize) {
        // A slice's length prefix: folded into the seed of the xxh3 of its bytes.
        self.0 ^= n as u64;
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(byte: u8) -> Arc<[u8]> {
        Arc::from(vec![byte; 64])
    }

    #[test]
    fn the_memo_recalls_exactly_the_remembered_image() {
        let mut m: ImageMemo<u32> = ImageMemo::new();
        let a = image(1);
        m.put(&a, 7, 64, 1, 42);
        assert_eq!(m.get(&a, 7, 64, 1), Some(42));
        assert_eq!(
            m.get(&a, 7, 64, 0),
            None,
            "the other slot was not validated"
        );
        assert_eq!(m.get(&a, 8, 64, 1), None, "another page");
        let same_bytes = image(1);
        assert_eq!(
            m.get(&same_bytes, 7, 64, 1),
            None,
            "equal bytes, other image"
        );
    }

    #[test]
    fn a_put_forgets_dead_images_nearby_and_keeps_live_ones() {
        let mut m: ImageMemo<()> = ImageMemo::new();
        let live = image(2);
        let dead = image(3);
        m.put(&live, 10, 64, 0, ());
        m.put(&dead, 11, 64, 0, ());
        drop(dead);
        // The memo's `Weak` still holds the dead image's allocation...
        assert!(m.ways[11].is_some());
        // ...until a put within the sweep's reach (way 9 sweeps 10..=13) forgets it.
        let other = image(4);
        m.put(&other, 9, 64, 0, ());
        assert!(m.ways[11].is_none(), "the dead entry is forgotten");
        assert_eq!(
            m.get(&live, 10, 64, 0),
            Some(()),
            "a live image stays remembered"
        );
        // Beyond the sweep's reach a dead entry waits for a later put.
        let far = image(5);
        m.put(&far, 20, 64, 0, ());
        drop(far);
        m.put(&other, 9, 64, 0, ());
        assert!(m.ways[20].is_some());
    }
}
