//! Owned cursors: positions that live across writes of the same transaction.
//!
//! A [`Cursor`] is plain data (no borrow of a transaction); every operation is a method
//! on the transaction taking `&mut Cursor`, so a caller may keep several cursors on one
//! tree and write through any of them, or through the plain API, in between.
//!
//! Invariants, and why they hold:
//! - **A cursor's identity is its key.** A positioned cursor keeps the root-to-leaf page
//!   images it was positioned through (`RawCursor`); the images are immutable `Arc`s, so
//!   its current key and inline value stay readable, unchanged, whatever is written later.
//! - **Fresh or stale.** The cursor records `(transaction serial, tree generation)` from
//!   `ReadableTxn::tree_clock` when it is positioned (a cursor just opened: its
//!   transaction's serial and `u64::MAX`, a generation no tree reaches, so it is never
//!   taken for positioned, yet keeps the stack made for that transaction). A write transaction bumps a tree's
//!   generation on every write to it (insert, remove, clear, drop, create) and every
//!   tree's on `rollback_to`/`rollback_all`; a snapshot never changes. While the pair is
//!   unchanged no page of the tree changed, so the kept stack is exactly the tree and
//!   steps within it are valid (the fast path: an unchanged tree steps within the leaf).
//!   After a write elsewhere in the tree the stack is still valid when every page of its
//!   path is still the very image it kept (`RawCursor::still_current`: immutable images,
//!   fixed root), so a scan keeps the fast path, without a key comparison, while other
//!   leaves change.
//! - **Stale cursors move by key.** When the pair differs, `next` goes to the first key
//!   greater than the cursor's key and `prev` to the last key less than it, found from the
//!   root with the tree's order (its comparator, memcmp, or a probe tree's `order`). So a
//!   delete of the cursor's own row needs no skip flags: the neighbours are found by key.
//! - **`has_moved` is conservative.** It answers "not moved" only when the cursor is on
//!   a row whose key is still present with byte-identical inline cell (key and value);
//!   so while it says "not moved", the bytes `key`/`value_local` returned stay valid and
//!   equal to the row's current content. A row whose value lives in an overflow chain
//!   reports "moved" as soon as its tree changed (its old chain may have been rewritten),
//!   and so does a row with a long key (its tail chain likewise).
//! - **Deleted rows.** A delete through the cursor with `save_position` leaves it on the
//!   deleted key ("gone"): `next`/`prev` move to the neighbours, key/value read None.
//!   Without `save_position` the cursor becomes invalid.

use std::cmp::Ordering;

use crate::error::{Error, Pgno, Result};
use crate::page::cell::Payload;
use crate::tree::{
    self,
    cursor::{RawCursor, SeekEnd},
};

use super::key::{decode_int, Comparator, Key, KeyKind, OwnedKey};
use super::{cursor_order, encode_key_for, KeyBuf, Probe, ReadableTxn, Tree, WriteTxn};

/// Where a seek left the cursor, like SQLite's `pRes` of `sqlite3BtreeTableMoveto`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SeekResult {
    /// The tree is empty; the cursor is invalid.
    Empty,
    /// On an entry equal to the target.
    Exact,
    /// On the largest entry, which is less than the target (pRes < 0).
    Before,
    /// On the first entry greater than the target (pRes > 0).
    After,
}

/// What `cursor_restore` found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Restored {
    /// The cursor's key is still in the tree; the cursor is on it (its value may have
    /// changed).
    Same,
    /// The key is gone (or the cursor was not on a row): `next`/`prev` move to the
    /// neighbours of the key; key and value read None.
    Gone,
}

#[derive(Clone)]
enum State {
    /// Not on a row.
    Invalid,
    /// On the row `raw` points at (its key is the cursor's identity).
    At,
    /// Between rows: the row with this key was deleted or is no longer found.
    Gone(Vec<u8>),
    /// As `Gone`, with `raw` on the row that followed the deleted key in its leaf, as of
    /// the cursor's clock: a delete with `save_position` whose leaf lost the row in
    /// place. While the kept pages are current, a step forward takes that row and a step
    /// back the one before it, without a descent.
    Before(Vec<u8>),
}

/// An owned cursor over one tree (see the module notes for the rules it follows).
#[derive(Clone)]
pub struct Cursor {
    name: std::sync::Arc<str>,
    root: Pgno,
    kind: KeyKind,
    probe_only: bool,
    order: Comparator,
    /// The tree orders keys by memcmp (no comparator of its own).
    bytewise: bool,
    raw: RawCursor,
    state: State,
    /// `tree_clock` when `raw` was positioned (from opening: the transaction's serial and
    /// a generation no tree reaches).
    clock: (u64, u64),
    /// The overflow chain of the row last read or written by range (stock SQLite's
    /// overflow page cache); shared by clones made after its first use, valid while the
    /// tree's clock is the one it was made at.
    chain: std::sync::OnceLock<ChainShared>,
    /// The buffer of the last key `state` held, for the next to reuse.
    spare_key: Vec<u8>,
}

/// A cursor's chain cache, made at its first use: most cursors never read by range, and
/// a statement opens a cursor per table. Clones made before that use cache apart (each
/// entry names the clock it was made at, so either is right).
type ChainShared = std::sync::Arc<std::sync::Mutex<Option<ChainCache>>>;

/// The pages of one row's overflow chain, as of a tree clock.
#[derive(Debug)]
struct ChainCache {
    clock: (u64, u64),
    len: u32,
    first: Pgno,
    /// The chain's first pages, as far as a range has needed.
    pages: Vec<Pgno>,
}

impl std::fmt::Debug for Cursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cursor")
            .field("tree", &self.name)
            .field("key", &self.key())
            .finish()
    }
}

impl Cursor {
    /// Whether the cursor is on a row (it may be stale; see `cursor_has_moved`).
    pub fn valid(&self) -> bool {
        // A positioning call that failed half-way (an I/O error, a corrupt page) leaves
        // `raw` without a current entry: then the cursor is simply not on a row.
        matches!(self.state, State::At) && self.raw.valid()
    }

    /// The current key's stored bytes (integer keys in their 8-byte encoding), None when
    /// not on a row. Valid until the cursor is next moved, whatever is written meanwhile.
    pub fn key(&self) -> Option<&[u8]> {
        self.valid().then(|| self.raw.key())
    }

    /// The current key, decoded.
    pub fn owned_key(&self) -> Result<Option<OwnedKey>> {
        let Some(k) = self.key() else {
            return Ok(None);
        };
        match self.kind {
            KeyKind::Int => decode_int(k)
                .map(|i| Some(OwnedKey::Int(i)))
                .ok_or_else(|| {
                    Error::corrupt(self.root, "integer tree holds a key that is not 8 bytes")
                }),
            KeyKind::Bytes => Ok(Some(OwnedKey::Bytes(k.to_vec()))),
        }
    }

    /// The current integer key (integer trees).
    pub fn int_key(&self) -> Option<i64> {
        self.key().and_then(decode_int)
    }

    /// The value bytes stored in the leaf (all of it unless it lives in an overflow
    /// chain, then empty), as of the positioning. Valid until the cursor is next moved.
    pub fn value_local(&self) -> Result<Option<&[u8]>> {
        if !self.valid() {
            return Ok(None);
        }
        Ok(Some(match self.raw.payload()? {
            Payload::Inline(v) => v,
            Payload::Overflow { .. } => &[],
        }))
    }

    /// The rows of the cursor's leaf from the current one on, `f(int_key, key, value)`
    /// each (`int_key` decoded for integer trees, else None), until `f` answers false or
    /// a row with a chained key or value; returns how many `f` saw.
    /// The slices borrow the leaf image the cursor kept: readable until the cursor is
    /// moved, and the tree's current rows only while the cursor is fresh (always, in a
    /// read transaction). For a scan that steps in bulk with `cursor_skip_in_leaf`.
    pub fn leaf_rest<'a>(
        &'a self,
        f: &mut dyn FnMut(Option<i64>, &'a [u8], &'a [u8]) -> bool,
    ) -> usize {
        if !self.valid() {
            return 0;
        }
        match self.kind {
            // A key that is not 8 bytes ends the run; stepping onto it reports it.
            KeyKind::Int => self.raw.leaf_rest(&mut |k, v| match decode_int(k) {
                Some(i) => f(Some(i), k, v),
                None => false,
            }),
            KeyKind::Bytes => self.raw.leaf_rest(&mut |k, v| f(None, k, v)),
        }
    }

    fn saved_key(&self) -> Option<&[u8]> {
        match &self.state {
            State::At => self.valid().then(|| self.raw.key()),
            State::Invalid => None,
            State::Gone(k) | State::Before(k) => Some(k),
        }
    }

    /// `key` as this cursor's tree stores it (trees with a fixed order only).
    fn encoded_key<'k>(&self, key: Key<'k>) -> Result<KeyBuf<'k>> {
        self.refuse_probe_tree()?;
        encode_key_for(&self.name, self.kind, key)
    }

    fn refuse_probe_tree(&self) -> Result<()> {
        if self.probe_only {
            return Err(Error::InvalidArgument(format!(
                "tree {:?} is probe-ordered: seek it with cursor_seek_by",
                self.name
            )));
        }
        Ok(())
    }

    /// Take the result of a positioning call on `raw`.
    fn settle(&mut self, found: bool, clock: (u64, u64)) -> bool {
        let state = if found { State::At } else { State::Invalid };
        if let State::Gone(k) | State::Before(k) = std::mem::replace(&mut self.state, state) {
            self.spare_key = k;
        }
        self.clock = clock;
        found
    }

    /// Not on a row, keeping the buffer of a saved key for the next `gone`.
    fn between(&mut self) {
        if let State::Gone(k) | State::Before(k) =
            std::mem::replace(&mut self.state, State::Invalid)
        {
            self.spare_key = k;
        }
    }

    /// `key` saved as the cursor's identity while it is between rows, in the buffer the
    /// last saved key left (an insert saves its key each time).
    fn gone(&mut self, key: &[u8]) {
        let mut k = std::mem::take(&mut self.spare_key);
        k.clear();
        k.extend_from_slice(key);
        self.state = State::Gone(k);
    }
}

/// Cursor operations of every transaction. The cursor must have been opened on a tree of
/// the same database.
pub trait CursorOps: ReadableTxn {
    /// A cursor on `tree`, not yet positioned.
    fn open_cursor(&self, tree: &Tree) -> Result<Cursor> {
        let info = self.shared_tree_info(tree)?;
        let order = cursor_order(tree, &info)?;
        Ok(Cursor {
            name: tree.name.clone(),
            root: info.root,
            kind: info.kind,
            probe_only: info.external_order,
            order,
            bytewise: tree.cmp.is_none(),
            raw: RawCursor::new(self, info.root),
            state: State::Invalid,
            // This transaction's serial, so the first positioning keeps `raw` (made for
            // this transaction) rather than making it again; no tree is ever at
            // generation `u64::MAX`, so nothing takes the empty stack for a position.
            clock: (self.tree_clock(info.root).0, u64::MAX),
            chain: Default::default(),
            spare_key: Vec::new(),
        })
    }

    /// Move to the smallest key; false if the tree is empty.
    fn cursor_first(&self, c: &mut Cursor) -> Result<bool> {
        let clock = self.fresh_raw(c);
        let found = c.raw.first(self)?;
        Ok(c.settle(found, clock))
    }

    /// Move to the largest key; false if the tree is empty.
    fn cursor_last(&self, c: &mut Cursor) -> Result<bool> {
        let clock = self.fresh_raw(c);
        let found = c.raw.last(self)?;
        Ok(c.settle(found, clock))
    }

    /// Seek `key` (trees with a fixed order): on the key if present, else on the first
    /// greater entry, else on the last entry (see [`SeekResult`]).
    fn cursor_seek<'k>(&self, c: &mut Cursor, key: impl Into<Key<'k>>) -> Result<SeekResult> {
        let k = c.encoded_key(key.into())?;
        let k = k.as_slice();
        if !c.bytewise {
            let order = c.order.clone();
            return self.cursor_seek_by(c, &mut |s: &[u8]| order(s, k));
        }
        // The tree orders by memcmp: the search compares the stored bytes directly.
        let clock = self.fresh_raw(c);
        let end = c.raw.seek_bytes_or_last(self, k, c.clock == clock)?;
        self.settle_seek_end(c, end, clock, &mut |s: &[u8]| s.cmp(k))
    }

    /// The result of a seek that ended as `end` (`RawCursor::seek_bytes_or_last`): on
    /// an entry, exact or after the target as the probe says.
    #[doc(hidden)]
    fn settle_seek_end(
        &self,
        c: &mut Cursor,
        end: SeekEnd,
        clock: (u64, u64),
        probe: Probe<'_>,
    ) -> Result<SeekResult> {
        match end {
            SeekEnd::At => {
                let exact = probe(c.raw.key()) == Ordering::Equal;
                c.settle(true, clock);
                Ok(if exact {
                    SeekResult::Exact
                } else {
                    SeekResult::After
                })
            }
            SeekEnd::Last => {
                c.settle(true, clock);
                Ok(SeekResult::Before)
            }
            SeekEnd::Empty => {
                c.settle(false, clock);
                Ok(SeekResult::Empty)
            }
        }
    }

    /// Seek by a probe (`probe(stored)` orders a stored key against the target): on the
    /// first entry the probe does not put before the target, with the same results as
    /// `cursor_seek`. Works on every tree; the only seek of probe-ordered trees.
    fn cursor_seek_by(&self, c: &mut Cursor, probe: Probe<'_>) -> Result<SeekResult> {
        let clock = self.fresh_raw(c);
        // The kept stack is the tree's as it is now exactly when the clock has not moved
        // since it was positioned (the same rule `revalidate` steps by).
        let end = c.raw.seek_by_or_last(self, probe, c.clock == clock)?;
        self.settle_seek_end(c, end, clock, probe)
    }

    /// Step forward; false (and invalid) past the end. On a stale cursor: the first key
    /// greater than the cursor's key.
    fn cursor_next(&self, c: &mut Cursor) -> Result<bool> {
        self.cursor_step(c, true)
    }

    /// Move `k` rows forward within the cursor's leaf, onto a row `Cursor::leaf_rest`
    /// showed (k = 0 stays). Only on a fresh cursor: a stale one's leaf may no longer be
    /// the tree's, so that is refused rather than stepping through old rows.
    fn cursor_skip_in_leaf(&self, c: &mut Cursor, k: usize) -> Result<bool> {
        let clock = self.tree_clock(c.root);
        if !self.revalidate(c, clock) {
            return Err(Error::InvalidArgument(format!(
                "cursor on {:?}: skip within a leaf needs a fresh cursor",
                c.name
            )));
        }
        let found = c.raw.skip_in_leaf(self, k)?;
        Ok(c.settle(found, clock))
    }

    /// Step back; false (and invalid) before the start. On a stale cursor: the last key
    /// less than the cursor's key.
    fn cursor_prev(&self, c: &mut Cursor) -> Result<bool> {
        self.cursor_step(c, false)
    }

    /// The current row's value as the tree holds it now (overflow included); None when
    /// the cursor is not on a row or its row was deleted since it was positioned.
    fn cursor_value(&self, c: &Cursor) -> Result<Option<Vec<u8>>> {
        if !c.valid() {
            return Ok(None);
        }
        if self.current(c) {
            return c.raw.value(self).map(Some);
        }
        let mut probe = c.clone();
        match self.find_exact(&mut probe)? {
            true => probe.raw.value(self).map(Some),
            false => Ok(None),
        }
    }

    /// Copy the current row's value from byte `offset` into `buf`; returns how many
    /// bytes were copied (short at the end of the value), None as for `cursor_value`.
    /// An inline value of an unchanged tree is copied from the kept page, without a read.
    fn cursor_read_value(&self, c: &Cursor, offset: u64, buf: &mut [u8]) -> Result<Option<usize>> {
        let copy = |v: &[u8], buf: &mut [u8]| {
            let start = usize::try_from(offset).unwrap_or(usize::MAX).min(v.len());
            let n = buf.len().min(v.len() - start);
            buf[..n].copy_from_slice(&v[start..start + n]);
            n
        };
        let ranged = |raw: &RawCursor, buf: &mut [u8]| -> Result<usize> {
            match raw.payload()? {
                Payload::Inline(v) => Ok(copy(v, buf)),
                // Only the pages holding the range: a blob read costs what it reads.
                Payload::Overflow { len, first } => {
                    let owner = raw.leaf_pgno().expect("a valid cursor has a leaf");
                    let at = usize::try_from(offset).unwrap_or(usize::MAX);
                    let upto = at.saturating_add(buf.len());
                    let pages = self.chain_of(c, owner, (len, first), upto)?;
                    tree::read_value_range(self, owner, (len, &pages), at, buf)
                }
            }
        };
        if !c.valid() {
            return Ok(None);
        }
        if self.current(c) {
            return ranged(&c.raw, buf).map(Some);
        }
        let mut probe = c.clone();
        match self.find_exact(&mut probe)? {
            true => ranged(&probe.raw, buf).map(Some),
            false => Ok(None),
        }
    }

    /// The pages of the chain `(len, first)` of `c`'s row up to the one holding byte
    /// `upto - 1`, from its cache while the tree is unchanged (extended as needed), else
    /// walked afresh (and kept).
    #[doc(hidden)]
    fn chain_of(
        &self,
        c: &Cursor,
        owner: Pgno,
        (len, first): (u32, Pgno),
        upto: usize,
    ) -> Result<Vec<Pgno>> {
        let clock = self.tree_clock(c.root);
        let mut cache = c
            .chain
            .get_or_init(ChainShared::default)
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let fresh = cache
            .as_ref()
            .is_some_and(|k| (k.clock, k.len, k.first) == (clock, len, first));
        if !fresh {
            *cache = Some(ChainCache {
                clock,
                len,
                first,
                pages: Vec::new(),
            });
        }
        let k = cache.as_mut().expect("set above");
        tree::extend_chain(self, owner, (len, first), &mut k.pages, upto)?;
        Ok(k.pages.clone())
    }

    /// Length of the current row's value (None as for `cursor_value`).
    fn cursor_value_len(&self, c: &Cursor) -> Result<Option<u64>> {
        if !c.valid() {
            return Ok(None);
        }
        let len = |raw: &RawCursor| -> Result<u64> {
            Ok(match raw.payload()? {
                Payload::Inline(v) => v.len() as u64,
                Payload::Overflow { len, .. } => u64::from(len),
            })
        };
        if self.current(c) {
            return len(&c.raw).map(Some);
        }
        let mut probe = c.clone();
        match self.find_exact(&mut probe)? {
            true => len(&probe.raw).map(Some),
            false => Ok(None),
        }
    }

    /// Whether the cursor's row may differ from what it read: true when it is not on a
    /// row, or its row is gone, or the row's bytes changed (conservatively: also any
    /// overflow row of a changed tree). While false, `key`/`value_local` are current.
    fn cursor_has_moved(&self, c: &Cursor) -> Result<bool> {
        if !c.valid() {
            return Ok(true);
        }
        if self.current(c) {
            return Ok(false);
        }
        // A chain (an overflow value, a long key's tail) may have been freed and its
        // pages reused, so equal cell bytes would not prove equal content.
        if matches!(c.raw.payload()?, Payload::Overflow { .. }) || c.raw.key_is_long() {
            return Ok(true);
        }
        let mut now = c.clone();
        if !self.find_exact(&mut now)? {
            return Ok(true);
        }
        Ok(now.raw.cell()? != c.raw.cell()?)
    }

    /// Bring a stale cursor back onto its key (`Same`), or leave it between the
    /// neighbours of its key when the key is gone (`Gone`). A fresh cursor on a row is
    /// `Same` at once; an invalid one `Gone`.
    fn cursor_restore(&self, c: &mut Cursor) -> Result<Restored> {
        let clock = self.tree_clock(c.root);
        if self.revalidate(c, clock) {
            return Ok(Restored::Same);
        }
        let Some(key) = c.saved_key().map(<[u8]>::to_vec) else {
            return Ok(Restored::Gone);
        };
        if self.find_exact(c)? {
            Ok(Restored::Same)
        } else {
            c.state = State::Gone(key);
            Ok(Restored::Gone)
        }
    }

    /// Whether `c` is on a row and its kept path is valid now: its clock is current, or
    /// the tree changed elsewhere (a write to other leaves) and every page of its path is
    /// still the same image, in which case the clock is brought up to date. Needs no
    /// key comparison, so an index scan does not call the order while other leaves change.
    #[doc(hidden)]
    fn revalidate(&self, c: &mut Cursor, clock: (u64, u64)) -> bool {
        if !c.valid() {
            return false;
        }
        if c.clock == clock {
            return true;
        }
        if c.clock.0 == clock.0 && c.raw.still_current(self) {
            c.clock = clock;
            return true;
        }
        false
    }

    /// Whether `c`'s kept path is valid now (`revalidate` without updating the clock).
    #[doc(hidden)]
    fn current(&self, c: &Cursor) -> bool {
        let clock = self.tree_clock(c.root);
        c.valid() && (c.clock == clock || (c.clock.0 == clock.0 && c.raw.still_current(self)))
    }

    /// Reposition `c` exactly on its saved key; false (cursor state unchanged but its
    /// stack spent) when the key is not in the tree.
    #[doc(hidden)]
    fn find_exact(&self, c: &mut Cursor) -> Result<bool> {
        let Some(key) = c.saved_key().map(<[u8]>::to_vec) else {
            return Ok(false);
        };
        let state = c.state.clone();
        let clock = self.fresh_raw(c);
        let order = c.order.clone();
        let found = c.raw.seek_by(self, &mut |s: &[u8]| order(s, &key))?;
        if found && order(c.raw.key(), &key) == Ordering::Equal {
            c.settle(true, clock);
            return Ok(true);
        }
        // The seek spent the stack: a cursor between rows is left `Gone`.
        c.state = match state {
            State::At | State::Before(_) => State::Gone(key),
            other => other,
        };
        Ok(false)
    }

    /// The cursor's current clock; rebuilds its page stack for this transaction when it
    /// was positioned by another one (the snapshot a stack reads may differ).
    #[doc(hidden)]
    fn fresh_raw(&self, c: &mut Cursor) -> (u64, u64) {
        let clock = self.tree_clock(c.root);
        if c.clock.0 != clock.0 {
            let key = c.saved_key().map(<[u8]>::to_vec);
            c.raw = RawCursor::new(self, c.root);
            if let Some(k) = key {
                c.state = State::Gone(k);
            }
        }
        clock
    }

    /// [`CursorOps::cursor_next`] (`forward`) or [`CursorOps::cursor_prev`].
    #[doc(hidden)]
    fn cursor_step(&self, c: &mut Cursor, forward: bool) -> Result<bool> {
        let clock = self.tree_clock(c.root);
        if matches!(c.state, State::Before(_))
            && c.raw.valid()
            && (c.clock == clock || (c.clock.0 == clock.0 && c.raw.still_current(self)))
        {
            // `raw` already stands on the deleted row's successor.
            let found = if forward { true } else { c.raw.prev(self)? };
            return Ok(c.settle(found, clock));
        }
        if self.revalidate(c, clock) {
            let found = if forward {
                c.raw.next(self)?
            } else {
                c.raw.prev(self)?
            };
            return Ok(c.settle(found, clock));
        }
        let Some(key) = c.saved_key().map(<[u8]>::to_vec) else {
            return Ok(false);
        };
        let clock = self.fresh_raw(c);
        let order = c.order.clone();
        // A probe that calls no key Equal: the bound lands strictly past the saved key.
        let found = if forward {
            c.raw.seek_by(self, &mut |s: &[u8]| match order(s, &key) {
                Ordering::Greater => Ordering::Greater,
                _ => Ordering::Less,
            })?
        } else {
            c.raw
                .seek_le_by(self, &mut |s: &[u8]| match order(s, &key) {
                    Ordering::Less => Ordering::Less,
                    _ => Ordering::Greater,
                })?
        };
        Ok(c.settle(found, clock))
    }
}

impl<T: ReadableTxn> CursorOps for T {}

impl WriteTxn {
    /// Insert or replace `key` through the cursor (trees with a fixed order); the cursor
    /// is left on the new entry. Returns the replaced value.
    pub fn cursor_insert<'k>(
        &mut self,
        c: &mut Cursor,
        key: impl Into<Key<'k>>,
        value: &[u8],
    ) -> Result<Option<Vec<u8>>> {
        let k = c.encoded_key(key.into())?;
        let k = k.as_slice();
        let order = c.order.clone();
        self.insert_at(c, &mut |s: &[u8]| order(s, k), k, value)
    }

    /// Insert `key`/`value` where `probe` places it, replacing the entry the probe finds
    /// Equal (not the byte-equal one: SQLite's index insert with `nMem` fields); the
    /// cursor is left on the new entry. Returns the replaced value.
    pub fn cursor_insert_by(
        &mut self,
        c: &mut Cursor,
        probe: Probe<'_>,
        key: &[u8],
        value: &[u8],
    ) -> Result<Option<Vec<u8>>> {
        self.insert_at(c, probe, key, value)
    }

    fn insert_at(
        &mut self,
        c: &mut Cursor,
        probe: Probe<'_>,
        key: &[u8],
        value: &[u8],
    ) -> Result<Option<Vec<u8>>> {
        // A cursor standing next to the place (a sorted load, an append after a seek to
        // the end) gives the path; else the tree descends.
        let at = match self.current(c) {
            true => c.raw.insert_path(self, probe)?,
            false => None,
        };
        self.bump_gen(c.root);
        // The cursor lets go of its pages (it is placed again below), so a leaf this
        // transaction already wrote is edited where it lies, not copied. It is between
        // rows until placed; its key is saved (`gone`) only where it is read: after an
        // error, to restore by key, and for the search by key below. A statement's new
        // cursor has no buffer to reuse, so saving it on every insert costs an allocation.
        c.raw.invalidate();
        c.between();
        let r = self.insert_and_place(c, at, probe, key, value);
        if r.is_err() {
            c.gone(key);
        }
        r
    }

    /// `insert_at` from the descent on (see there): the insert, then the cursor placed
    /// on the new entry.
    fn insert_and_place(
        &mut self,
        c: &mut Cursor,
        at: Option<(tree::Path, tree::LeafPos)>,
        probe: Probe<'_>,
        key: &[u8],
        value: &[u8],
    ) -> Result<Option<Vec<u8>>> {
        let opts = self.opts;
        let (old, placed) = match at {
            Some((path, found)) => tree::insert_on_path(self, opts, path, found, key, value)?,
            None => tree::insert_placed(self, c.root, probe, opts, key, value)?,
        };
        if let Some(path) = placed {
            // The leaf took the entry in place: stand on it without a second descent. The
            // probe must find the stored key equal to its target, as the seek below
            // checks (a probe that orders `key` elsewhere breaks the tree's order).
            let clock = self.fresh_raw(c);
            let found = c.raw.place(self, path)?;
            debug_assert!(found && c.raw.key() == key);
            if found && probe(c.raw.key()) == Ordering::Equal {
                c.settle(found, clock);
                return Ok(old);
            }
        }
        // The leaf split or moved: find the entry by the probe the insert placed it by
        // (a tree ordered by a caller's comparator compares two stored keys, which for
        // an index costs a record decoding per comparison). Only the entry with the very
        // bytes inserted will do; else (several entries the probe finds Equal) by key.
        let clock = self.fresh_raw(c);
        if c.raw.seek_by(self, probe)? && c.raw.key() == key {
            c.settle(true, clock);
            return Ok(old);
        }
        c.gone(key);
        if !self.find_exact(c)? {
            return Err(Error::InvalidArgument(format!(
                "tree {:?}: the inserted key is not where the tree's order puts it (the \
                 probe and the tree's order disagree)",
                c.name
            )));
        }
        Ok(old)
    }

    /// Overwrite `bytes` at `offset` of the cursor's row's value (an incremental blob
    /// write; the value keeps its length). Under a layout that overwrites pages in place,
    /// a value in an overflow chain has only the pages the range touches rewritten; else
    /// the row is written again with the bytes changed (a layout that keeps versions never
    /// changes a committed chain). The cursor stays on the row.
    ///
    /// Errors: `InvalidArgument` when the cursor is not on a row or the range ends past
    /// the value.
    pub fn cursor_overwrite_value(
        &mut self,
        c: &mut Cursor,
        offset: u64,
        bytes: &[u8],
    ) -> Result<()> {
        if !c.valid() || self.cursor_restore(c)? != Restored::Same {
            return Err(Error::InvalidArgument(format!(
                "tree {:?}: cursor_overwrite_value on a cursor that is not on a row",
                c.name
            )));
        }
        let at = usize::try_from(offset).unwrap_or(usize::MAX);
        if let Payload::Overflow { len, first } = c.raw.payload()? {
            if self.layout.versions().is_none() {
                let owner = c.raw.leaf_pgno().expect("a valid cursor has a leaf");
                let upto = at.saturating_add(bytes.len());
                let pages = self.chain_of(c, owner, (len, first), upto)?;
                // Other cursors on the row must not trust what they read of it.
                self.bump_gen(c.root);
                tree::overwrite_value(self, owner, (len, &pages), at, bytes)?;
                // Same pages, same links: the cursor and its chain stay valid.
                let clock = self.tree_clock(c.root);
                c.settle(true, clock);
                let chain = c.chain.get_or_init(ChainShared::default);
                if let Some(k) = chain.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
                    k.clock = clock;
                }
                return Ok(());
            }
        }
        let mut value = c.raw.value(self)?;
        let end = at.saturating_add(bytes.len());
        if end > value.len() {
            return Err(Error::InvalidArgument(format!(
                "tree {:?}: write of bytes [{at}, {end}) into a value of {} bytes",
                c.name,
                value.len()
            )));
        }
        value[at..end].copy_from_slice(bytes);
        let key = c.raw.key().to_vec();
        let order = c.order.clone();
        self.insert_at(c, &mut |s: &[u8]| order(s, &key), &key, &value)?;
        Ok(())
    }

    /// Delete the cursor's row. With `save_position` (SQLite's BTREE_SAVEPOSITION) the
    /// cursor stays on the deleted key, so `next`/`prev` move to its neighbours; without,
    /// it becomes invalid. Errors with `InvalidArgument` when the cursor is not on a row.
    pub fn cursor_delete(&mut self, c: &mut Cursor, save_position: bool) -> Result<()> {
        if !c.valid() || self.cursor_restore(c)? != Restored::Same {
            return Err(Error::InvalidArgument(format!(
                "tree {:?}: cursor_delete on a cursor that is not on a row",
                c.name
            )));
        }
        let key = c.raw.key().to_vec();
        let order = c.order.clone();
        let opts = self.opts;
        // Restored and current: the cursor's own stack is the path to the row.
        // Taken, not copied: the path alone holds the leaf, so it is edited in place.
        let path = c.raw.take_path();
        let at = path.last().map(|leaf| leaf.idx);
        self.bump_gen(c.root);
        c.gone(&key);
        let (removed, placed) = match at {
            // The value goes unread: a delete returns nothing.
            Some(i) => (true, tree::remove_on_path(self, opts, path, i, false)?.1),
            None => (
                tree::remove_by(self, c.root, &mut |s: &[u8]| order(s, &key), opts)?.is_some(),
                None,
            ),
        };
        if !removed {
            // The cursor was just restored onto this key, so only a damaged tree (an
            // order the comparator disagrees with) can lose it: an error, not a panic.
            return Err(Error::corrupt(
                c.root,
                format!(
                    "tree {:?}: the row under the cursor is not found by its key",
                    c.name
                ),
            ));
        }
        if !save_position {
            c.state = State::Invalid;
            return Ok(());
        }
        // Only a successor in the same leaf: the cursor's kept leaf is then the page any
        // row put between the two would go to, so `still_current` sees such a change. (A
        // successor in the next leaf would leave the gap's first page off the stack.)
        if let Some(path) = placed.filter(|p| p.last().is_some_and(|l| l.idx < l.view().ncells())) {
            let clock = self.fresh_raw(c);
            if c.raw.place(self, path)? {
                c.clock = clock;
                c.state = State::Before(key);
                return Ok(());
            }
        }
        c.raw.invalidate();
        c.state = State::Gone(key);
        Ok(())
    }
}
