//! Cursors: ordered iteration and positioned lookups.
//!
//! A cursor keeps the root-to-leaf path as a stack of `(pgno, page image, index)`, each
//! image with what opening it found (so moving along a DHL leaf does not validate its
//! version again for every cell). For an interior frame the index is the child the path
//! goes through (`0..=ncells`); for the leaf frame it is the current cell. Moving past either end of a leaf pops up to the
//! nearest ancestor with a child further in that direction and descends along that
//! child's near edge — no sibling pointers are needed.
//!
//! Invariants:
//! - `cur` is `Some` exactly when the leaf frame's index names a cell; it then holds the
//!   bounds-checked byte range of that cell's key (or, for a long key, the whole key read
//!   from its chain when the cursor arrived), so `key()` cannot fail.
//! - Holding `PageRef`s keeps the images the cursor walks alive. For [`Cursor`], the `&'s`
//!   borrow of the store means no writer can modify the tree while the cursor exists, so
//!   the stack never goes stale. [`RawCursor`] is the same machine without the borrow (the
//!   store is passed to every call): it is only correct while the tree is unchanged since
//!   it was positioned, which its owner (`txn::cursor`) tracks with a per-tree generation
//!   and re-seeks by key when it is not.
//! - Empty leaves (only the root can be one in a valid tree) are skipped in both
//!   directions, so positioning works on empty trees and tolerates odd shapes.
//! - An edit at the cursor's position takes the stack as its path (`take_path`) and hands
//!   it back (`place`). While it is taken the cursor has no position and holds no page,
//!   so the path alone holds the leaf's image and the edit may change it where it lies
//!   (`Arc::get_mut` decides).

use std::cmp::Ordering;
use std::ops::Range;

use crate::error::{Error, Pgno, Result};
use crate::page::cell::{self, CellKey, Payload};
use crate::page::cells::CellArray;
use crate::page::PageRead;

use super::btree::{read_payload, LeafPos, Path, Step, MAX_DEPTH};
use super::format::Format;
use super::overflow::{full_key, whole};
use super::{CmpFn, ProbeFn};

/// One level of the cursor's stack: a page, its opened form, and the index of the entry
/// (leaf) or child (interior) the cursor is at. The tree's path step itself, so the
/// stack moves in and out of an edit (`take_path`, `place`) without a copy.
type Frame = Step;

/// Where [`RawCursor::seek_bytes_or_last`] left the cursor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SeekEnd {
    /// On the first entry at or after the target.
    At,
    /// No entry is at or after the target: on the tree's last entry.
    Last,
    /// The tree is empty: nowhere.
    Empty,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Edge {
    First,
    Last,
}

/// What a seek looks for.
enum Target<'a, 'p> {
    /// The keys a probe puts before its target.
    Probe(&'a mut ProbeFn<'p>),
    /// The keys memcmp puts before these stored bytes.
    Bytes(&'a [u8]),
}

impl Target<'_, '_> {
    /// How many of `node`'s keys come before the target (with `upper`, Equal ones too).
    fn bound<'k>(
        &mut self,
        node: &CellArray<'k>,
        whole: &dyn Fn(CellKey<'k>) -> Result<Vec<u8>>,
        upper: bool,
    ) -> Result<usize> {
        match self {
            Target::Probe(probe) => node.bound_by(*probe, whole, upper),
            Target::Bytes(key) => node.bound_bytes(key, whole, upper),
        }
    }
}

impl Target<'_, '_> {
    /// How key `i` of `node` orders against the target (Less: the key comes first).
    fn order_at<'k>(
        &mut self,
        node: &CellArray<'k>,
        i: usize,
        whole: &dyn Fn(CellKey<'k>) -> Result<Vec<u8>>,
    ) -> Result<Ordering> {
        match self {
            Target::Probe(probe) => node.probe_at(i, *probe, whole),
            Target::Bytes(key) => node.probe_at(i, &mut |k: &[u8]| k.cmp(key), whole),
        }
    }
}

/// Whether a seek may reuse the pages of the cursor's kept stack.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Reuse {
    /// Read every page of the descent (the tree may have changed since the stack was
    /// built).
    Fresh,
    /// The tree is unchanged since the stack was built: reuse what matches.
    Kept,
}

/// A position in a tree. Invalid (no current entry) until a positioning call succeeds.
pub struct Cursor<'s> {
    store: &'s dyn PageRead,
    cmp: &'s CmpFn,
    raw: RawCursor,
}

impl<'s> Cursor<'s> {
    pub fn new(store: &'s dyn PageRead, root: Pgno, cmp: &'s CmpFn) -> Cursor<'s> {
        Cursor {
            store,
            cmp,
            raw: RawCursor::new(store, root),
        }
    }

    /// The comparator this cursor orders keys by.
    pub fn comparator(&self) -> &'s CmpFn {
        self.cmp
    }

    /// Whether the cursor is on an entry.
    pub fn valid(&self) -> bool {
        self.raw.valid()
    }

    /// Move to the smallest key; Ok(false) if the tree is empty.
    pub fn first(&mut self) -> Result<bool> {
        self.raw.first(self.store)
    }

    /// Move to the largest key; Ok(false) if the tree is empty.
    pub fn last(&mut self) -> Result<bool> {
        self.raw.last(self.store)
    }

    /// Move to the first key >= `key`; Ok(false) if there is none.
    pub fn seek(&mut self, key: &[u8]) -> Result<bool> {
        let cmp = self.cmp;
        // The store is borrowed for the cursor's life: the tree cannot change under it.
        self.raw
            .seek_by_kept(self.store, &mut |k: &[u8]| cmp(k, key))
    }

    /// Move to the last key <= `key`; Ok(false) if there is none.
    pub fn seek_le(&mut self, key: &[u8]) -> Result<bool> {
        let cmp = self.cmp;
        self.raw.seek_le_by(self.store, &mut |k: &[u8]| cmp(k, key))
    }

    /// Step forward; Ok(false) (and invalid) past the end.
    // Not `Iterator::next`: it is fallible and does not yield the entry.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<bool> {
        self.raw.next(self.store)
    }

    /// Step back; Ok(false) (and invalid) before the start.
    pub fn prev(&mut self) -> Result<bool> {
        self.raw.prev(self.store)
    }

    /// Current key. Panics if invalid (a caller bug, not bad input).
    pub fn key(&self) -> &[u8] {
        self.raw.key()
    }

    /// Current value, reading overflow pages if needed.
    pub fn value(&self) -> Result<Vec<u8>> {
        self.raw.value(self.store)
    }
}

/// Where the current key is: in the leaf image, or (long key) read whole.
#[derive(Clone)]
enum CurKey {
    InPage(Range<usize>),
    Long(Vec<u8>),
}

/// A cursor's position without a borrow of the store: every call takes the store, which
/// must show the tree as it was when the cursor was positioned (see the module notes).
#[derive(Clone)]
pub(crate) struct RawCursor {
    format: Format,
    root: Pgno,
    stack: Vec<Frame>,
    /// The current entry's key (in the leaf frame's page, or read whole), or None when
    /// the cursor is invalid.
    cur: Option<CurKey>,
    /// The current entry's whole cell in that page (bounds-checked when positioned, so
    /// the accessors called per row do not decode the cell array again).
    cell_at: Range<usize>,
    /// The last seek from the kept stack ended in the leaf it started from: the next
    /// one first tries that leaf alone (`target_inside_leaf`). Seeks in random order
    /// move to another leaf every time, and skip the try after the first miss.
    same_leaf: bool,
}

impl RawCursor {
    pub fn new(store: &dyn PageRead, root: Pgno) -> RawCursor {
        RawCursor {
            format: Format::of(store),
            root,
            // Deep enough for every tree a cursor meets in practice, so a descent does
            // not grow the stack step by step (a statement opens a cursor per table).
            stack: Vec::with_capacity(6),
            cur: None,
            cell_at: 0..0,
            same_leaf: false,
        }
    }

    /// Whether the cursor is on an entry.
    pub fn valid(&self) -> bool {
        self.cur.is_some()
    }

    /// Whether `store` still holds exactly the page images of this cursor's path: every
    /// frame's page, read now, is the very image (`Arc`) the cursor kept. Images are
    /// immutable and the root never moves, so then the path from the root is unchanged
    /// and the position is valid in the tree as it is now (pages off the path are read
    /// afresh when the cursor steps onto them). A page the store cannot give (e.g. past
    /// the end after a rollback) just means "no".
    pub fn still_current(&self, store: &dyn PageRead) -> bool {
        self.stack.first().is_some_and(|f| f.pgno == self.root)
            && self.stack.iter().all(|f| {
                store
                    .read(f.pgno)
                    .is_ok_and(|p| std::sync::Arc::ptr_eq(&p, &f.page))
            })
    }

    /// Forget the position.
    pub fn invalidate(&mut self) {
        self.reset();
    }

    /// Move to the smallest key; Ok(false) if the tree is empty.
    pub fn first(&mut self, store: &dyn PageRead) -> Result<bool> {
        self.reset();
        self.push(store, self.root, Edge::First)?;
        self.descend(store, Edge::First)?;
        self.settle_forward(store)
    }

    /// Move to the largest key; Ok(false) if the tree is empty.
    pub fn last(&mut self, store: &dyn PageRead) -> Result<bool> {
        self.reset();
        self.push(store, self.root, Edge::Last)?;
        self.descend(store, Edge::Last)?;
        self.settle_backward(store)
    }

    /// Move to the first key the probe does not put before its target (`probe(k) !=
    /// Less`); Ok(false) if there is none.
    pub fn seek_by(&mut self, store: &dyn PageRead, probe: &mut ProbeFn<'_>) -> Result<bool> {
        self.seek_bound(store, &mut Target::Probe(probe), false, Reuse::Fresh)
    }

    /// [`RawCursor::seek_by`] for an owner that knows the tree is unchanged since this
    /// cursor was last positioned: the kept path's pages are reused as far as the probe
    /// leads through them (the root of most seeks, the interior pages of nearby ones),
    /// instead of being read and opened again.
    pub fn seek_by_kept(&mut self, store: &dyn PageRead, probe: &mut ProbeFn<'_>) -> Result<bool> {
        self.seek_bound(store, &mut Target::Probe(probe), false, Reuse::Kept)
    }

    /// [`RawCursor::seek_by`] with the probe `|k| k.cmp(key)` in a tree ordered by
    /// memcmp, comparing without a call per key (`CellArray::bound_bytes`); `kept` as
    /// for [`RawCursor::seek_by_kept`]. (The engine seeks with `seek_bytes_or_last`;
    /// tests compare the two.)
    #[cfg(test)]
    pub fn seek_bytes(&mut self, store: &dyn PageRead, key: &[u8], kept: bool) -> Result<bool> {
        let reuse = if kept { Reuse::Kept } else { Reuse::Fresh };
        self.seek_bound(store, &mut Target::Bytes(key), false, reuse)
    }

    /// A bytewise seek (`seek_bytes`), and where no entry is at or after `key`, onto
    /// the last entry of the tree instead of nowhere: an append's seek (its key is past
    /// every key) is answered from the rightmost leaf the descent reached, where a seek
    /// and then [`Self::last`] would descend the tree again.
    pub fn seek_bytes_or_last(
        &mut self,
        store: &dyn PageRead,
        key: &[u8],
        kept: bool,
    ) -> Result<SeekEnd> {
        let reuse = if kept { Reuse::Kept } else { Reuse::Fresh };
        self.seek_or_last(store, &mut Target::Bytes(key), reuse)
    }

    /// [`Self::seek_bytes_or_last`] by a probe; `kept` as for [`Self::seek_by_kept`].
    pub fn seek_by_or_last(
        &mut self,
        store: &dyn PageRead,
        probe: &mut ProbeFn<'_>,
        kept: bool,
    ) -> Result<SeekEnd> {
        let reuse = if kept { Reuse::Kept } else { Reuse::Fresh };
        self.seek_or_last(store, &mut Target::Probe(probe), reuse)
    }

    fn seek_or_last(
        &mut self,
        store: &dyn PageRead,
        target: &mut Target<'_, '_>,
        path: Reuse,
    ) -> Result<SeekEnd> {
        self.seek_leaf(store, target, false, path)?;
        let leaf = self.stack.last().expect("seek_leaf leaves the leaf frame");
        let (pgno, p) = (leaf.pgno, leaf.opened.attach(&leaf.page));
        let i = target.bound(&p, &whole(store, pgno), false)?;
        let n = p.ncells();
        // Past the last cell of the rightmost leaf (every interior frame on its last
        // child): no entry is at or after the target, and the leaf's last cell is the
        // tree's last entry. An empty leaf falls back to the general path.
        let rightmost = self.stack[..self.stack.len() - 1]
            .iter()
            .all(|f| f.opened.attach(&f.page).ncells() == f.idx);
        if i == n && n > 0 && rightmost {
            self.top_mut().idx = n - 1;
            self.load_current(store)?;
            return Ok(SeekEnd::Last);
        }
        self.top_mut().idx = i;
        if self.settle_forward(store)? {
            return Ok(SeekEnd::At);
        }
        Ok(if self.last(store)? {
            SeekEnd::Last
        } else {
            SeekEnd::Empty
        })
    }

    /// [`Self::seek_by`] (`le` false) or [`Self::seek_le_by`] (`le` true).
    fn seek_bound(
        &mut self,
        store: &dyn PageRead,
        target: &mut Target<'_, '_>,
        le: bool,
        path: Reuse,
    ) -> Result<bool> {
        self.seek_leaf(store, target, le, path)?;
        let leaf = self.stack.last().expect("seek_leaf leaves the leaf frame");
        // With `le`, the leaf's "one past the wanted cell" index, as `settle_backward`
        // expects.
        let (pgno, p) = (leaf.pgno, leaf.opened.attach(&leaf.page));
        let i = target.bound(&p, &whole(store, pgno), le)?;
        self.top_mut().idx = i;
        if le {
            self.settle_backward(store)
        } else {
            self.settle_forward(store)
        }
    }

    /// Where an insert of the probe's target goes, found from this cursor's position
    /// without a descent (the caller knows the stack is current): on its entry
    /// (`Ok(i)`, a replace), between it and the next entry of its leaf, or after the last
    /// entry of the rightmost leaf (`Err(i)`). The path is the cursor's own stack, taken
    /// (`take_path`: the cursor is left without a position). None
    /// when the target is elsewhere (the caller descends). The leaf chosen is the one a
    /// descent finds: a key strictly between two entries of a leaf, or past every key of
    /// the rightmost leaf, can only belong there.
    pub(crate) fn insert_path(
        &mut self,
        store: &dyn PageRead,
        probe: &mut ProbeFn<'_>,
    ) -> Result<Option<(Path, LeafPos)>> {
        let Some(top) = self.stack.last() else {
            return Ok(None);
        };
        if self.cur.is_none() {
            return Ok(None);
        }
        let i = top.idx;
        let found = match probe(self.key()) {
            Ordering::Equal => Ok(i),
            Ordering::Greater => return Ok(None),
            Ordering::Less => {
                let p = top.opened.attach(&top.page);
                if i + 1 < p.ncells() {
                    let next = full_key(store, top.pgno, p.key(i + 1)?)?;
                    if probe(&next) != Ordering::Greater {
                        return Ok(None);
                    }
                } else {
                    let rightmost = self.stack[..self.stack.len() - 1]
                        .iter()
                        .all(|f| f.idx == f.opened.ncells());
                    if !rightmost {
                        return Ok(None);
                    }
                }
                Err(i + 1)
            }
        };
        Ok(Some((self.take_path(), found)))
    }

    /// The cursor's stack as a root-to-leaf path (the leaf frame's index on its entry),
    /// for an operation at its position; only correct while the tree is unchanged since
    /// the cursor was positioned (the caller checks). Taken, not copied: the cursor is
    /// left without a position, holding no page, so the path alone holds the leaf and
    /// the edit can change it where it lies.
    pub(crate) fn take_path(&mut self) -> Path {
        self.cur = None;
        std::mem::take(&mut self.stack)
    }

    /// Stand on the entry a root-to-leaf `path` ends at (the leaf frame's index), as an
    /// insert that edited the leaf in place returns it: no descent.
    pub(crate) fn place(&mut self, store: &dyn PageRead, path: Path) -> Result<bool> {
        self.cur = None;
        self.stack = path;
        self.load_current(store)
    }

    /// Move to the last key the probe does not put after its target (`probe(k) !=
    /// Greater`); Ok(false) if there is none.
    pub fn seek_le_by(&mut self, store: &dyn PageRead, probe: &mut ProbeFn<'_>) -> Result<bool> {
        self.seek_bound(store, &mut Target::Probe(probe), true, Reuse::Fresh)
    }

    /// Step forward; Ok(false) (and invalid) past the end.
    pub fn next(&mut self, store: &dyn PageRead) -> Result<bool> {
        if !self.valid() {
            return Ok(false);
        }
        self.top_mut().idx += 1;
        self.settle_forward(store)
    }

    /// Step back; Ok(false) (and invalid) before the start.
    pub fn prev(&mut self, store: &dyn PageRead) -> Result<bool> {
        if !self.valid() {
            return Ok(false);
        }
        // The current index is "one past" the previous cell, as settle_backward wants.
        self.settle_backward(store)
    }

    /// The entries of the current leaf from the current one on, as the kept image holds
    /// them: `f(key, value)` for each, in order, until `f` answers false or an entry
    /// whose key or value lives in a chain (those are read through the usual accessors).
    /// The slices borrow the kept image, so they stay readable while the cursor is not
    /// moved off this leaf (the image is an immutable `Arc` held by the stack). Returns
    /// how many entries `f` saw. For a read-only scan: the bytes are the tree's only
    /// while it is unchanged since the positioning (see the module notes).
    pub fn leaf_rest<'a>(&'a self, f: &mut dyn FnMut(&'a [u8], &'a [u8]) -> bool) -> usize {
        let Some(leaf) = self.stack.last().filter(|_| self.cur.is_some()) else {
            return 0;
        };
        let p = leaf.opened.attach(&leaf.page);
        let usable = self.format.geometry.usable;
        let page: &'a [u8] = &leaf.page;
        let mut seen = 0;
        for i in leaf.idx..p.ncells() {
            // Bounds-checked as `load_current` checks them; a bad cell just ends the run
            // (stepping onto it reports the error).
            let Ok((off, size)) = p.cell_range(i) else {
                break;
            };
            let bytes = &page[off..off + size];
            let (key, value) = match cell::inline_parts(usable, bytes) {
                Some(kv) => kv,
                None => {
                    let (CellKey::Inline(key), Payload::Inline(value)) = (
                        cell::cell_key(usable, bytes),
                        cell::cell_payload(usable, bytes),
                    ) else {
                        break;
                    };
                    (key, value)
                }
            };
            if !f(key, value) {
                break;
            }
            seen += 1;
        }
        seen
    }

    /// Move `k` entries forward within the current leaf (entries `leaf_rest` showed);
    /// Ok(false) and invalid if the leaf has fewer.
    pub fn skip_in_leaf(&mut self, store: &dyn PageRead, k: usize) -> Result<bool> {
        if !self.valid() {
            return Ok(false);
        }
        let top = self.top_mut();
        top.idx += k;
        if top.idx >= top.opened.attach(&top.page).ncells() {
            self.reset();
            return Ok(false);
        }
        self.cur = None;
        self.load_current(store)
    }

    /// Current key. Panics if invalid (a caller bug, not bad input).
    pub fn key(&self) -> &[u8] {
        match self.cur.as_ref().expect("Cursor::key on an invalid cursor") {
            CurKey::InPage(range) => {
                &self
                    .stack
                    .last()
                    .expect("a valid cursor has a leaf frame")
                    .page[range.clone()]
            }
            CurKey::Long(k) => k,
        }
    }

    /// Whether the current key is long (read from its tail chain).
    pub fn key_is_long(&self) -> bool {
        matches!(self.cur, Some(CurKey::Long(_)))
    }

    /// The current cell's raw bytes (key and payload or overflow reference).
    pub fn cell(&self) -> Result<&[u8]> {
        let leaf = self.stack.last().expect("a valid cursor has a leaf frame");
        debug_assert!(self.valid());
        debug_assert_eq!(
            leaf.opened.attach(&leaf.page).cell(leaf.idx).ok(),
            Some(&leaf.page[self.cell_at.clone()])
        );
        Ok(&leaf.page[self.cell_at.clone()])
    }

    /// The current value as stored in the leaf.
    pub fn payload(&self) -> Result<Payload<'_>> {
        // `cell_at` was bounds-checked by `load_current` on a leaf (payloads are leaf
        // cells only), so the payload decodes from it directly.
        Ok(cell::cell_payload(
            self.format.geometry.usable,
            self.cell()?,
        ))
    }

    /// The leaf page the cursor stands in (what owns its overflow chains).
    pub fn leaf_pgno(&self) -> Option<Pgno> {
        self.stack.last().map(|f| f.pgno)
    }

    /// Current value, reading overflow pages if needed.
    pub fn value(&self, store: &dyn PageRead) -> Result<Vec<u8>> {
        assert!(self.valid(), "Cursor::value on an invalid cursor");
        let leaf = self.stack.last().expect("a valid cursor has a leaf frame");
        let p = self.page(leaf)?;
        read_payload(store, leaf.pgno, p.payload(leaf.idx)?)
    }

    fn reset(&mut self) {
        self.stack.clear();
        self.cur = None;
    }

    fn top_mut(&mut self) -> &mut Frame {
        self.stack.last_mut().expect("cursor stack is not empty")
    }

    fn page<'f>(&self, f: &'f Frame) -> Result<CellArray<'f>> {
        Ok(f.opened.attach(&f.page))
    }

    /// Push page `pgno` with its index at the given edge (for a leaf at `Last`, one past
    /// the last cell).
    fn push(&mut self, store: &dyn PageRead, pgno: Pgno, edge: Edge) -> Result<()> {
        if self.stack.len() >= MAX_DEPTH {
            return Err(Error::corrupt(
                pgno,
                format!("tree deeper than {MAX_DEPTH} levels (child pointer cycle?)"),
            ));
        }
        let page = store.read(pgno)?;
        let opened = self.format.open_page(pgno, &page)?;
        let idx = match edge {
            Edge::First => 0,
            Edge::Last => opened.ncells(),
        };
        self.stack.push(Frame {
            pgno,
            page,
            idx,
            opened,
        });
        Ok(())
    }

    /// From the top frame, follow its current child down to a leaf, taking the `edge`
    /// child at every level below.
    fn descend(&mut self, store: &dyn PageRead, edge: Edge) -> Result<()> {
        loop {
            let top = self.stack.last().expect("cursor stack is not empty");
            let p = self.page(top)?;
            if p.is_leaf() {
                return Ok(());
            }
            let child = p.child(top.idx)?;
            self.push(store, child, edge)?;
        }
    }

    /// Descend from the root to the leaf `tree::btree::descend_by` would choose. With
    /// `Reuse::Kept`, a frame already on the stack for the page the descent reaches is
    /// used as it is: the owner vouches that the tree is unchanged since the stack was
    /// built, so the page and what opening it found are what a fresh read would give.
    fn seek_leaf(
        &mut self,
        store: &dyn PageRead,
        target: &mut Target<'_, '_>,
        upper: bool,
        path: Reuse,
    ) -> Result<()> {
        self.cur = None;
        let keep_root =
            path == Reuse::Kept && self.stack.first().is_some_and(|f| f.pgno == self.root);
        if keep_root && self.same_leaf && self.target_inside_leaf(store, target)? {
            return Ok(());
        }
        let kept_leaf = self.stack.last().filter(|_| keep_root).map(|f| f.pgno);
        if !keep_root {
            self.reset();
            self.push(store, self.root, Edge::First)?;
        }
        let mut d = 0;
        loop {
            let f = &self.stack[d];
            debug_assert!(
                path == Reuse::Fresh || Self::kept_frame_is_current(store, f),
                "page {} of a kept path is not the tree's now",
                f.pgno
            );
            let p = self.page(f)?;
            if p.is_leaf() {
                self.same_leaf = kept_leaf == Some(f.pgno);
                self.stack.truncate(d + 1);
                return Ok(());
            }
            let idx = target.bound(&p, &whole(store, f.pgno), upper)?;
            let child = p.child(idx)?;
            self.stack[d].idx = idx;
            d += 1;
            if self.stack.get(d).is_some_and(|f| f.pgno == child) {
                continue;
            }
            self.stack.truncate(d);
            self.push(store, child, Edge::First)?;
        }
    }

    /// Whether the kept stack ends at a leaf with keys on both sides of the target
    /// (its first key before it, its last after it; ties excluded), which a descent
    /// would then reach too: every key that orders between two keys of a leaf can only
    /// be in that leaf, and with ties excluded so are all the keys equal to the target,
    /// for a lower and an upper bound alike. A seek that follows the previous one in
    /// order (an `IN` list, a join's inner loop over sorted keys) then searches one leaf
    /// instead of descending; one that misses pays these two comparisons (one when the
    /// target is past the leaf's last key), and is only tried after a seek that stayed
    /// in its leaf (`same_leaf`).
    fn target_inside_leaf(
        &self,
        store: &dyn PageRead,
        target: &mut Target<'_, '_>,
    ) -> Result<bool> {
        let Some(leaf) = self.stack.last() else {
            return Ok(false);
        };
        let p = self.page(leaf)?;
        let n = p.ncells();
        if !p.is_leaf() || n < 2 {
            return Ok(false);
        }
        let whole = whole(store, leaf.pgno);
        Ok(target.order_at(&p, n - 1, &whole)? == Ordering::Greater
            && target.order_at(&p, 0, &whole)? == Ordering::Less)
    }

    /// Debug builds: a kept frame holds the image the store gives for its page now.
    fn kept_frame_is_current(store: &dyn PageRead, f: &Frame) -> bool {
        store.read(f.pgno).is_ok_and(|p| p[..] == f.page[..])
    }

    /// The leaf index may be one past its last cell: move to the next cell in key order,
    /// crossing into following leaves as needed.
    fn settle_forward(&mut self, store: &dyn PageRead) -> Result<bool> {
        self.cur = None;
        loop {
            let top = self.stack.last().expect("cursor stack is not empty");
            if top.idx < self.page(top)?.ncells() {
                return self.load_current(store);
            }
            // Leaf exhausted: find the nearest ancestor with a child to the right.
            self.stack.pop();
            loop {
                let Some(f) = self.stack.last_mut() else {
                    return Ok(false);
                };
                let n = f.opened.attach(&f.page).ncells();
                if f.idx < n {
                    f.idx += 1;
                    break;
                }
                self.stack.pop();
            }
            self.descend(store, Edge::First)?;
        }
    }

    /// The leaf index is one past the wanted cell: move to the cell before it, crossing
    /// into preceding leaves as needed.
    fn settle_backward(&mut self, store: &dyn PageRead) -> Result<bool> {
        self.cur = None;
        loop {
            let top = self.top_mut();
            if top.idx > 0 {
                top.idx -= 1;
                return self.load_current(store);
            }
            self.stack.pop();
            loop {
                let Some(f) = self.stack.last_mut() else {
                    return Ok(false);
                };
                if f.idx > 0 {
                    f.idx -= 1;
                    break;
                }
                self.stack.pop();
            }
            self.descend(store, Edge::Last)?;
        }
    }

    /// Make the leaf frame's cell current, checking its bounds once so `key()` can't fail.
    fn load_current(&mut self, store: &dyn PageRead) -> Result<bool> {
        let top = self.stack.last().expect("cursor stack is not empty");
        let p = self.page(top)?;
        if !p.is_leaf() {
            return Err(Error::corrupt(top.pgno, "cursor expected a leaf page"));
        }
        let (off, size) = p.cell_range(top.idx)?;
        // The key from the cell just bounds-checked (not `p.key`, which would decode
        // the cell array again: this runs once per row of every scan).
        let usable = self.format.geometry.usable;
        self.cur = Some(match cell::cell_key(usable, &top.page[off..off + size]) {
            CellKey::Inline(key) => {
                let start = off + cell::CELL_HEADER;
                CurKey::InPage(start..start + key.len())
            }
            long => CurKey::Long(full_key(store, top.pgno, long)?.into_owned()),
        });
        self.cell_at = off..off + size;
        Ok(true)
    }
}
