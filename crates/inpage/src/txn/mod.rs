//! Transactions: one writer at a time, any number of snapshot readers.
//!
//! Invariants, and why they hold:
//! - **Isolation.** A `WriteTxn` keeps every page it changes in its private dirty map
//!   (copy-on-write `Arc` images); other threads see them only after `commit` hands them
//!   to the pager. A `ReadTxn` reads through the pager at the FCC it started on, so it
//!   sees exactly the transactions committed before it began (see `pager` for how the
//!   pager keeps replaced images for it). A dirty image nothing else shares (no
//!   savepoint, cursor or reader holds its `Arc`) is edited where it lies (`tree::btree`
//!   `edit_path_leaf`); a shared one is copied first.
//! - **One writer.** `begin_write` waits on the database's writer flag; the flag is
//!   cleared when the `WriteTxn` is committed, rolled back or dropped.
//! - **Rollback is free** (unless the transaction spilled). Nothing reaches the pager
//!   before commit, so rolling back is dropping the dirty map. A savepoint is a copy of
//!   the (dirty map, spilled set, header) triple — cheap because page images are shared
//!   `Arc`s — and rolling back to it restores the copy; `rollback_all` restores the state
//!   the transaction began with.
//! - **Steal** (`Config::cache_spill`, modes whose capabilities say `steals`): once the
//!   dirty map holds more than the spill limit, its pages are written to the file as
//!   versions of this transaction's tid with `txn_size` 0 (`Pager::spill`) and dropped
//!   from memory; they are read back through the pager. Readers open every page at their
//!   snapshot, below this tid, so those versions are invisible to them, and recovery rolls
//!   them back until the commit restamps them (`CommitBatch::restamp`). `on_disk` records
//!   every page holding such a version, whatever savepoints restore; a rollback (to a
//!   savepoint, or of everything) invalidates those the restored state does not own, so
//!   the file never shows this transaction's tid on a page it does not claim. A page a
//!   live savepoint records as spilled is never spilled again: its file image is what that
//!   savepoint restores.
//! - **Tree generations.** Every write to a tree bumps its generation and every rollback
//!   bumps all of them (never restores them), so an owned cursor (`cursor`) can tell that
//!   the tree may have changed since it was positioned.
//! - **Page accounting.** Every page below `page_count` is in exactly one place: a tree
//!   (catalog, user tree, overflow chain) or the free list; `allocate` and `free` are the
//!   only ways pages move between them, and `vacuum_free` (`vacuum`) the only way a page
//!   changes its number (its holder repointed in the same step).

pub(crate) mod catalog;
mod cursor;
pub(crate) mod free;
pub(crate) mod group;
pub mod key;
pub(crate) mod multi;
mod occ;
mod shared;
mod vacuum;
mod vto;

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::hash::BuildHasherDefault;
use std::ops::Bound;
use std::sync::{Arc, Mutex};

use crate::error::{Error, Pgno, Result};
use crate::format::header::{AutoVacuum, Header, META_SLOTS};
use crate::page::{stamp_crc, Layout, PageRead, PageRef, PageWrite};
use crate::pager::{AllocDelta, PgnoHasher, PgnoMap, Spilled};
use crate::procs::Turn;
use crate::seam::{planted, Plant};
use crate::tree::{self, CmpFn, TreeOptions};

use catalog::TreeInfo;
pub use cursor::{Cursor, CursorOps, Restored, SeekResult};
use key::{decode_int, encode_int, memcmp, Comparator, Key, KeyKind, OwnedKey};
pub(crate) use shared::Shared;

/// A probe: `probe(stored_key)` orders a stored key against a target only the caller
/// knows (Less: the stored key comes before the target). Probe-ordered trees are searched
/// only this way, so their order may depend on state the engine never sees.
pub type Probe<'a> = &'a mut dyn FnMut(&[u8]) -> std::cmp::Ordering;

/// Source of transaction serials: a cursor remembers the serial of the transaction that
/// positioned it, so another transaction treats its page stack as stale.
static NEXT_TXN_SERIAL: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

fn next_txn_serial() -> u64 {
    NEXT_TXN_SERIAL.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// A named tree, as used with a transaction. Cheap to clone; it names the tree (and
/// carries its comparator), so it stays usable across transactions, and it remembers the
/// tree's catalog record so an operation does not descend the catalog every time.
#[derive(Clone)]
pub struct Tree {
    name: Arc<str>,
    cmp: Option<Comparator>,
    /// The catalog record as last looked up, with the (database, catalog generation) it
    /// was read at: valid for any transaction that sees the same generation of the same
    /// open database, because only creating or dropping a tree changes the catalog (a
    /// tree's root never moves), and every such commit bumps the generation.
    cached: Arc<Mutex<Option<Remembered>>>,
}

/// A catalog record with the catalog view it was read at.
type Remembered = (CatalogView, Arc<TreeInfo>);

/// Which catalog a transaction sees: (open database, catalog generation).
type CatalogView = (u64, u64);

impl Tree {
    fn new(name: &str, cmp: Option<Comparator>) -> Tree {
        Tree {
            name: name.into(),
            cmp,
            cached: Arc::default(),
        }
    }

    fn cached_info(&self, view: CatalogView) -> Option<Arc<TreeInfo>> {
        let c = self.cached.lock().unwrap_or_else(|e| e.into_inner());
        c.as_ref()
            .filter(|(v, _)| *v == view)
            .map(|(_, i)| i.clone())
    }

    fn remember(&self, view: CatalogView, info: &Arc<TreeInfo>) {
        *self.cached.lock().unwrap_or_else(|e| e.into_inner()) = Some((view, info.clone()));
    }
}

impl std::fmt::Debug for Tree {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tree")
            .field("name", &self.name)
            .field("custom_comparator", &self.cmp.is_some())
            .finish()
    }
}

impl Tree {
    /// The tree's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A handle on the same tree that orders keys by `order` (for a probe-ordered tree:
    /// `open_probe_tree` without looking the tree up again). It shares this handle's
    /// remembered catalog record; opening a cursor with it checks, as for any handle,
    /// that the catalog gives the tree an order of its own.
    pub fn with_order(&self, order: Comparator) -> Tree {
        Tree {
            name: self.name.clone(),
            cmp: Some(order),
            cached: self.cached.clone(),
        }
    }
}

fn check_tree_name(name: &str, usable: usize) -> Result<()> {
    let max = tree::max_key_len(usable);
    if name.is_empty() || name.len() > max {
        return Err(Error::InvalidArgument(format!(
            "tree name must be 1..={max} bytes, got {}",
            name.len()
        )));
    }
    Ok(())
}

fn check_meta_index(i: usize) -> Result<()> {
    if i >= META_SLOTS {
        return Err(Error::InvalidArgument(format!(
            "meta index {i} out of range 0..{META_SLOTS}"
        )));
    }
    Ok(())
}

/// Resolve a tree's comparator: the handle's, or memcmp; refuse a mismatch, and refuse
/// probe-ordered trees (their order is not fixed, so a `Key` cannot be placed in them).
fn comparator<'t>(tree: &'t Tree, info: &TreeInfo) -> Result<&'t CmpFn> {
    if info.external_order {
        return Err(Error::InvalidArgument(format!(
            "tree {:?} is probe-ordered: key-based calls need a fixed order; use the probe \
             calls (cursor_seek_by, cursor_insert_by, insert_by, remove_by)",
            info.name
        )));
    }
    match (&tree.cmp, info.custom_comparator) {
        (Some(c), true) => Ok(c.as_ref()),
        (None, false) => Ok(&memcmp),
        (None, true) => Err(Error::InvalidArgument(format!(
            "tree {:?} uses a custom comparator: open it with open_tree_with",
            info.name
        ))),
        (Some(_), false) => Err(Error::InvalidArgument(format!(
            "tree {:?} uses the default order: open it with open_tree",
            info.name
        ))),
    }
}

/// A bulk load in progress ([`WriteTxn::load_tree`]).
pub struct TreeLoad<'t> {
    txn: &'t mut WriteTxn,
    loader: Option<tree::Loader>,
    info: TreeInfo,
    order: Option<&'t CmpFn>,
    last: Option<Vec<u8>>,
    count: u64,
}

impl TreeLoad<'_> {
    /// Append an entry after every one pushed before it.
    pub fn push<'k>(&mut self, key: impl Into<Key<'k>>, value: &[u8]) -> Result<()> {
        let k = encode_key(&self.info, key.into())?;
        let k = k.as_slice();
        if let (Some(order), Some(last)) = (self.order, &self.last) {
            if order(last, k) != std::cmp::Ordering::Less {
                return Err(Error::InvalidArgument(format!(
                    "bulk load of tree {:?}: keys out of order",
                    self.info.name
                )));
            }
        }
        let loader = self.loader.as_mut().expect("not finished");
        loader.push(self.txn, k, value)?;
        if self.order.is_some() {
            let last = self.last.get_or_insert_with(Vec::new);
            last.clear();
            last.extend_from_slice(k);
        }
        self.count += 1;
        Ok(())
    }
}

/// The order of a probe-ordered tree's handle; refuses other trees.
fn probe_order<'t>(tree: &'t Tree, info: &TreeInfo) -> Result<&'t CmpFn> {
    match (&tree.cmp, info.external_order) {
        (Some(c), true) => Ok(c.as_ref()),
        (None, true) => Err(Error::InvalidArgument(format!(
            "tree {:?} is probe-ordered: open it with open_probe_tree",
            info.name
        ))),
        (_, false) => Err(Error::InvalidArgument(format!(
            "tree {:?} is not probe-ordered: open it with open_tree or open_tree_with",
            info.name
        ))),
    }
}

/// The order a cursor re-seeks by: the tree's comparator, or a probe tree's order.
fn cursor_order(tree: &Tree, info: &TreeInfo) -> Result<Comparator> {
    if info.external_order {
        probe_order(tree, info)?;
    } else {
        comparator(tree, info)?;
    }
    // One shared bytewise order: a cursor per statement allocates none.
    static MEMCMP: std::sync::LazyLock<Comparator> = std::sync::LazyLock::new(|| Arc::new(memcmp));
    Ok(match &tree.cmp {
        Some(c) => c.clone(),
        None => MEMCMP.clone(),
    })
}

/// Encode a key for a tree, checking its kind and size.
fn encode_key<'k>(info: &TreeInfo, key: Key<'k>) -> Result<KeyBuf<'k>> {
    encode_key_for(&info.name, info.kind, key)
}

/// [`encode_key`] for the tree `name` of keys of `kind`.
fn encode_key_for<'k>(name: &str, kind: KeyKind, key: Key<'k>) -> Result<KeyBuf<'k>> {
    if key.kind() != kind {
        return Err(Error::KeyKindMismatch {
            tree: name.to_string(),
            expected: kind.name(),
            got: key.kind().name(),
        });
    }
    match key {
        Key::Int(i) => Ok(KeyBuf::Int(encode_int(i))),
        Key::Bytes(b) => {
            if b.len() > tree::MAX_KEY_LEN {
                return Err(Error::KeyTooLarge {
                    len: b.len(),
                    max: tree::MAX_KEY_LEN,
                });
            }
            Ok(KeyBuf::Bytes(b))
        }
    }
}

enum KeyBuf<'k> {
    Int([u8; 8]),
    Bytes(&'k [u8]),
}

impl KeyBuf<'_> {
    fn as_slice(&self) -> &[u8] {
        match self {
            KeyBuf::Int(a) => a,
            KeyBuf::Bytes(b) => b,
        }
    }
}

fn decode_key(info_kind: KeyKind, raw: &[u8], root: Pgno) -> Result<OwnedKey> {
    match info_kind {
        KeyKind::Int => decode_int(raw)
            .map(OwnedKey::Int)
            .ok_or_else(|| Error::corrupt(root, "integer tree holds a key that is not 8 bytes")),
        KeyKind::Bytes => Ok(OwnedKey::Bytes(raw.to_vec())),
    }
}

fn lookup_tree(store: &dyn PageRead, catalog_root: Pgno, name: &str) -> Result<TreeInfo> {
    match tree::get(store, catalog_root, &memcmp, name.as_bytes())? {
        Some(v) => TreeInfo::decode(catalog_root, name.as_bytes(), &v),
        None => Err(Error::TreeNotFound(name.to_string())),
    }
}

/// Operations shared by read and write transactions.
pub trait ReadableTxn: PageRead + Sized {
    #[doc(hidden)]
    fn snapshot_header(&self) -> &Header;

    /// The id (FCC) of the last transaction this one sees.
    fn snapshot_fcc(&self) -> u64 {
        self.snapshot_header().fcc
    }

    /// Which catalog this transaction sees, or None when it cannot be named (a write
    /// transaction that created or dropped a tree): `Tree` handles cache by it.
    #[doc(hidden)]
    fn catalog_view(&self) -> Option<(u64, u64)> {
        None
    }

    /// The free pages a clean close kept for the first write of this session, if the
    /// file is still as that close left it (DHL; for the integrity check to prove them).
    #[doc(hidden)]
    fn kept_free_pages(&self) -> Result<Option<std::collections::BTreeSet<Pgno>>> {
        Ok(None)
    }

    /// A handle on an existing tree with the default key order.
    fn open_tree(&self, name: &str) -> Result<Tree> {
        let t = Tree::new(name, None);
        let info = self.tree_info(&t)?;
        comparator(&t, &info)?;
        Ok(t)
    }

    /// A handle on an existing tree that orders keys with `cmp`.
    fn open_tree_with(&self, name: &str, cmp: Comparator) -> Result<Tree> {
        let t = Tree::new(name, Some(cmp));
        let info = self.tree_info(&t)?;
        comparator(&t, &info)?;
        Ok(t)
    }

    /// A handle on an existing probe-ordered tree (see `WriteTxn::create_probe_tree`).
    /// `order` must order stored keys as the caller's probes do; the engine uses it only
    /// to find a cursor's key again after the tree changed under it.
    fn open_probe_tree(&self, name: &str, order: Comparator) -> Result<Tree> {
        let t = Tree::new(name, Some(order));
        let info = self.tree_info(&t)?;
        probe_order(&t, &info)?;
        Ok(t)
    }

    /// (transaction serial, generation of the tree at `root`): a cursor positioned at
    /// this pair may step within its kept pages; any other pair means the tree changed.
    #[doc(hidden)]
    fn tree_clock(&self, root: Pgno) -> (u64, u64);

    /// Catalog record of a tree (remembered in the handle while the catalog this
    /// transaction sees is the one it was read from).
    fn tree_info(&self, tree: &Tree) -> Result<TreeInfo> {
        self.shared_tree_info(tree).map(|i| (*i).clone())
    }

    /// [`ReadableTxn::tree_info`] as the handle keeps it: opening a cursor per statement
    /// copies no name.
    #[doc(hidden)]
    fn shared_tree_info(&self, tree: &Tree) -> Result<Arc<TreeInfo>> {
        let view = self.catalog_view();
        if let Some(info) = view.and_then(|v| tree.cached_info(v)) {
            debug_assert_eq!(info.name, tree.name());
            return Ok(info);
        }
        let info = Arc::new(lookup_tree(
            self,
            self.snapshot_header().catalog_root,
            tree.name(),
        )?);
        if let Some(v) = view {
            tree.remember(v, &info);
        }
        Ok(info)
    }

    /// Every tree, in name order.
    fn list_trees(&self) -> Result<Vec<TreeInfo>> {
        let root = self.snapshot_header().catalog_root;
        let mut out = Vec::new();
        let mut c = tree::Cursor::new(self, root, &memcmp);
        let mut ok = c.first()?;
        while ok {
            out.push(TreeInfo::decode(root, c.key(), &c.value()?)?);
            ok = c.next()?;
        }
        Ok(out)
    }

    /// Value stored under `key`.
    fn get<'k>(&self, tree: &Tree, key: impl Into<Key<'k>>) -> Result<Option<Vec<u8>>> {
        let info = self.tree_info(tree)?;
        let cmp = comparator(tree, &info)?;
        let k = encode_key(&info, key.into())?;
        tree::get(self, info.root, cmp, k.as_slice())
    }

    /// Whether `key` is present.
    fn contains<'k>(&self, tree: &Tree, key: impl Into<Key<'k>>) -> Result<bool> {
        Ok(self.get(tree, key)?.is_some())
    }

    /// Number of entries.
    fn count(&self, tree: &Tree) -> Result<u64> {
        let info = self.tree_info(tree)?;
        tree::count(self, info.root)
    }

    /// A cursor over the tree, not yet positioned.
    fn cursor<'t>(&'t self, tree: &'t Tree) -> Result<TreeCursor<'t>> {
        let info = self.tree_info(tree)?;
        let cmp = comparator(tree, &info)?;
        Ok(TreeCursor {
            inner: tree::Cursor::new(self, info.root, cmp),
            info,
        })
    }

    /// Entries with keys in `(start, end)` bounds, in key order.
    fn range<'t>(
        &'t self,
        tree: &'t Tree,
        start: Bound<Key<'_>>,
        end: Bound<Key<'_>>,
    ) -> Result<Range<'t>> {
        let mut cursor = self.cursor(tree)?;
        let enc = |k: Key<'_>| -> Result<Vec<u8>> {
            Ok(encode_key(&cursor.info, k)?.as_slice().to_vec())
        };
        let end = match end {
            Bound::Included(k) => Bound::Included(enc(k)?),
            Bound::Excluded(k) => Bound::Excluded(enc(k)?),
            Bound::Unbounded => Bound::Unbounded,
        };
        let positioned = match start {
            Bound::Unbounded => cursor.inner.first()?,
            Bound::Included(k) => {
                let k = enc(k)?;
                cursor.inner.seek(&k)?
            }
            Bound::Excluded(k) => {
                let k = enc(k)?;
                let mut ok = cursor.inner.seek(&k)?;
                if ok && cursor.inner.comparator()(cursor.inner.key(), &k).is_eq() {
                    ok = cursor.inner.next()?;
                }
                ok
            }
        };
        Ok(Range {
            cursor,
            end,
            done: !positioned,
        })
    }

    /// Every entry in key order.
    fn iter<'t>(&'t self, tree: &'t Tree) -> Result<Range<'t>> {
        self.range(tree, Bound::Unbounded, Bound::Unbounded)
    }

    /// When this snapshot's database gives free pages back to the file system.
    fn auto_vacuum(&self) -> AutoVacuum {
        self.snapshot_header().auto_vacuum
    }

    /// One of the `META_SLOTS` user meta values.
    fn meta(&self, index: usize) -> Result<u32> {
        check_meta_index(index)?;
        Ok(self.snapshot_header().meta[index])
    }
}

/// A positionable cursor over one tree.
pub struct TreeCursor<'t> {
    inner: tree::Cursor<'t>,
    info: TreeInfo,
}

impl TreeCursor<'_> {
    pub fn first(&mut self) -> Result<bool> {
        self.inner.first()
    }
    pub fn last(&mut self) -> Result<bool> {
        self.inner.last()
    }
    /// Move to the first key >= `key`.
    pub fn seek<'k>(&mut self, key: impl Into<Key<'k>>) -> Result<bool> {
        let k = encode_key(&self.info, key.into())?;
        self.inner.seek(k.as_slice())
    }
    /// Move to the last key <= `key`.
    pub fn seek_le<'k>(&mut self, key: impl Into<Key<'k>>) -> Result<bool> {
        let k = encode_key(&self.info, key.into())?;
        self.inner.seek_le(k.as_slice())
    }
    #[allow(clippy::should_implement_trait)] // fallible and positional, not an Iterator
    pub fn next(&mut self) -> Result<bool> {
        self.inner.next()
    }
    pub fn prev(&mut self) -> Result<bool> {
        self.inner.prev()
    }
    pub fn valid(&self) -> bool {
        self.inner.valid()
    }
    /// Current key (None when not positioned).
    pub fn key(&self) -> Result<Option<OwnedKey>> {
        if !self.inner.valid() {
            return Ok(None);
        }
        decode_key(self.info.kind, self.inner.key(), self.info.root).map(Some)
    }
    /// Current value (None when not positioned).
    pub fn value(&self) -> Result<Option<Vec<u8>>> {
        if !self.inner.valid() {
            return Ok(None);
        }
        self.inner.value().map(Some)
    }
}

/// Iterator over a key range.
pub struct Range<'t> {
    cursor: TreeCursor<'t>,
    end: Bound<Vec<u8>>,
    done: bool,
}

impl Iterator for Range<'_> {
    type Item = Result<(OwnedKey, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let c = &mut self.cursor.inner;
        let in_range = match &self.end {
            Bound::Unbounded => true,
            Bound::Included(e) => c.comparator()(c.key(), e).is_le(),
            Bound::Excluded(e) => c.comparator()(c.key(), e).is_lt(),
        };
        if !in_range {
            self.done = true;
            return None;
        }
        let item = decode_key(self.cursor.info.kind, c.key(), self.cursor.info.root)
            .and_then(|k| Ok((k, c.value()?)));
        match c.next() {
            Ok(more) => self.done = !more,
            Err(e) => {
                self.done = true;
                return Some(item.and(Err(e)));
            }
        }
        if item.is_err() {
            self.done = true;
        }
        Some(item)
    }
}

/// A read-only snapshot. `Send`: it may move to another thread.
pub struct ReadTxn {
    shared: Arc<Shared>,
    header: Header,
    catalog_gen: u64,
    serial: u64,
    /// Its turn on a file other processes share (`procs`), given back after the
    /// snapshot ends (fields drop after `Drop::drop`).
    _turn: Option<Turn>,
}

impl ReadTxn {
    pub(crate) fn new(shared: Arc<Shared>, turn: Option<Turn>) -> Result<ReadTxn> {
        let (header, catalog_gen) = shared.pager.begin_snapshot()?;
        Ok(ReadTxn {
            shared,
            header,
            catalog_gen,
            serial: next_txn_serial(),
            _turn: turn,
        })
    }
}

impl Drop for ReadTxn {
    fn drop(&mut self) {
        // Inherited through fork(): the registry of readers is the parent's (its lock may
        // have been held at the fork); nothing to release here.
        if self.shared.pager.forked() {
            return;
        }
        self.shared.pager.end_snapshot(self.header.fcc);
    }
}

impl PageRead for ReadTxn {
    fn page_size(&self) -> usize {
        self.header.page_size as usize
    }
    fn read(&self, pgno: Pgno) -> Result<PageRef> {
        if pgno == 0 || pgno >= self.header.page_count {
            return Err(Error::corrupt(
                pgno,
                format!(
                    "reference to page outside 1..{} of this snapshot",
                    self.header.page_count
                ),
            ));
        }
        self.shared.pager.read_at(self.header.fcc, pgno)
    }
    fn layout(&self) -> Layout {
        self.shared.pager.layout()
    }
    fn visible_tid(&self) -> u64 {
        self.header.fcc
    }
}

impl ReadableTxn for ReadTxn {
    fn snapshot_header(&self) -> &Header {
        &self.header
    }
    fn catalog_view(&self) -> Option<(u64, u64)> {
        Some((self.shared.id, self.catalog_gen))
    }
    fn tree_clock(&self, _root: Pgno) -> (u64, u64) {
        // A snapshot never changes.
        (self.serial, 0)
    }
    fn kept_free_pages(&self) -> Result<Option<std::collections::BTreeSet<Pgno>>> {
        self.shared.pager.kept_free_pages()
    }
}

/// What a savepoint restores.
#[derive(Clone)]
struct WriteState {
    header: Header,
    dirty: PgnoMap<PageRef>,
    /// Pages allocated by this transaction (no committed version to keep).
    fresh: HashSet<Pgno, BuildHasherDefault<PgnoHasher>>,
    /// DHL: pages taken from the pager's free set.
    taken: BTreeSet<Pgno>,
    /// DHL: pages given up; they join the free set only when this transaction commits.
    freed: Vec<Pgno>,
    /// DHL: pages this transaction grew the file by and then freed without writing.
    /// Those at the end are given back at once; the rest lie below a page the transaction
    /// writes, so they exist on disk, and join the free set at commit.
    grown_freed: BTreeSet<Pgno>,
    /// Steal: pages whose newest image is the version this transaction spilled to the
    /// file (`Pager::spill`), not in `dirty`. Read back through the pager.
    spilled: BTreeSet<Pgno>,
    /// A page-for-page copy in progress ([`WriteTxn::begin_page_copy`]): the header
    /// already names the source's pages, so the transaction must not commit before all
    /// of them are here.
    copy: Option<PageCopy>,
}

/// Which pages of which source state a page copy still has to bring.
#[derive(Clone, Debug)]
struct PageCopy {
    from_fcc: u64,
    next: Pgno,
    end: Pgno,
}

impl WriteState {
    fn new(header: Header) -> WriteState {
        WriteState {
            header,
            dirty: PgnoMap::default(),
            fresh: HashSet::default(),
            taken: BTreeSet::new(),
            freed: Vec::new(),
            grown_freed: BTreeSet::new(),
            spilled: BTreeSet::new(),
            copy: None,
        }
    }
}

/// A savepoint inside a write transaction.
#[derive(Debug, PartialEq, Eq)]
pub struct Savepoint {
    index: usize,
    serial: u64,
}

/// The single write transaction. Dropping it without `commit` rolls it back.
pub struct WriteTxn {
    shared: Arc<Shared>,
    base: Header,
    st: WriteState,
    savepoints: Vec<(u64, WriteState)>,
    next_serial: u64,
    opts: TreeOptions,
    layout: Layout,
    finished: bool,
    /// The catalog generation this transaction started from.
    catalog_gen: u64,
    /// Whether it created or dropped a tree (then `Tree` handles do not use their cache:
    /// the catalog it sees has no generation yet).
    catalog_changed: bool,
    /// This transaction's serial (see `NEXT_TXN_SERIAL`).
    serial: u64,
    /// Generation of each tree this transaction wrote (by root page), from `gen_clock`;
    /// a tree's generation is at least `gen_floor`, which every rollback raises (a
    /// rollback may change any tree). Not part of `WriteState`: rolling back must move
    /// generations forward, never restore them.
    gens: PgnoMap<u64>,
    gen_clock: u64,
    gen_floor: u64,
    /// Steal: spill once `dirty` holds more than this many pages (None: never).
    spill_limit: Option<usize>,
    /// Steal: the dirty count at which the next spill happens (pages a savepoint holds
    /// cannot spill, so after a spill that left many behind this waits for more).
    spill_due: usize,
    /// Steal: every page holding a version this transaction spilled (a superset of
    /// `st.spilled`: after a savepoint rollback, until `discard` cleans the file). Not part
    /// of `WriteState`, because rolling back does not undo what the file holds.
    on_disk: BTreeSet<Pgno>,
    /// `Concurrency::Occ`: the read set and the pages held (`txn/occ.rs`); the
    /// transaction is then also a registered reader at `base.fcc`.
    occ: Option<occ::TxnOcc>,
    /// `Concurrency::TwoVto`: its timestamp and page locks (`txn/vto.rs`).
    vto: Option<vto::TxnVto>,
    /// Its write turn on a file other processes share (`procs`), given back after the
    /// commit or rollback (fields drop after `Drop::drop`).
    turn: Option<Turn>,
    /// Page writes so far (wrapping): what tells `vacuum_memo` it is still true.
    writes: u64,
    /// What the last `vacuum_free` learned (`txn/vacuum.rs`).
    vacuum_memo: Option<Box<vacuum::VacuumMemo>>,
}

impl WriteTxn {
    /// `ts`: a `TwoVto` transaction's drawn timestamp.
    pub(crate) fn new(shared: Arc<Shared>, ts: Option<u64>) -> Result<WriteTxn> {
        let (header, catalog_gen, occ) = if shared.occ.is_some() {
            // A concurrent writer reads at its snapshot, registered like a reader's.
            shared.pager.check_usable()?;
            let (header, gen) = shared.pager.begin_snapshot()?;
            (header, gen, Some(occ::TxnOcc::default()))
        } else {
            // Caller holds the writer flag; release it if we fail here.
            match shared.pager.check_usable() {
                Ok(()) => (shared.pager.header(), shared.pager.catalog_gen(), None),
                Err(e) => {
                    shared.release_writer();
                    return Err(e);
                }
            }
        };
        let opts = TreeOptions {
            redistribute: shared.config.redistribute,
        };
        let layout = shared.pager.layout();
        let spill_limit = shared.config.spill_limit(shared.pager.journal_mode());
        let vto = match (ts, &shared.vto) {
            (Some(ts), Some(v)) => Some(v.txn(ts)),
            _ => None,
        };
        Ok(WriteTxn {
            shared,
            base: header.clone(),
            st: WriteState::new(header),
            savepoints: Vec::new(),
            next_serial: 0,
            opts,
            layout,
            finished: false,
            catalog_gen,
            catalog_changed: false,
            serial: next_txn_serial(),
            gens: Default::default(),
            gen_clock: 0,
            gen_floor: 0,
            spill_limit,
            spill_due: spill_limit.unwrap_or(usize::MAX),
            on_disk: BTreeSet::new(),
            vto,
            occ,
            turn: None,
            writes: 0,
            vacuum_memo: None,
        })
    }

    /// Hand it the write turn it runs under (`Database::begin_write`).
    pub(crate) fn set_turn(&mut self, turn: Option<Turn>) {
        self.turn = turn;
    }

    /// Steal: write every dirty page no savepoint holds to the file as an uncommitted
    /// version and drop it from memory (module notes of `pager`, `Pager::spill`).
    ///
    /// A page a live savepoint records as spilled keeps the file image that savepoint
    /// restores, so it is not spilled again while the savepoint lives (it stays dirty).
    fn spill(&mut self) -> Result<()> {
        self.stamp_dirty();
        let held = self.held_by_savepoints();
        let mut pages: Vec<(Pgno, PageRef)> = self
            .st
            .dirty
            .iter()
            .filter(|(p, _)| !held.contains(p))
            .map(|(p, img)| (*p, img.clone()))
            .collect();
        pages.sort_unstable_by_key(|(p, _)| *p);
        if !pages.is_empty() {
            self.shared.pager.spill(self.tid(), &pages)?;
        }
        for (p, _) in &pages {
            self.st.dirty.remove(p);
            self.st.spilled.insert(*p);
            self.on_disk.insert(*p);
        }
        let limit = self.spill_limit.unwrap_or(usize::MAX);
        self.spill_due = self.st.dirty.len().saturating_add(limit);
        Ok(())
    }

    /// Stamp the trailer crc of every dirty page, for a layout that checks it (DHL and
    /// IPS pages are checked per version, and their commits never write the trailer's
    /// sector span for it). Done where pages leave the transaction for the pager (commit,
    /// spill): the file's copy of a page must verify, the transaction's own reads of its
    /// dirty pages never check it.
    fn stamp_dirty(&mut self) {
        if !self.layout.trailer_checked() {
            return;
        }
        for (pgno, data) in self.st.dirty.iter_mut() {
            stamp_crc(Arc::make_mut(data), *pgno);
        }
    }

    /// Every dirty page taken out of the transaction for its commit: stamped, unless
    /// the journal stamps the images it writes itself (`Journal::stamps_trailers`).
    fn take_dirty(&mut self) -> BTreeMap<Pgno, PageRef> {
        if !self.shared.pager.journal_stamps_trailers() {
            self.stamp_dirty();
        }
        self.st.dirty.drain().collect()
    }

    /// Steal: the pages a live savepoint records as spilled; their file images are what
    /// rolling back to it restores.
    fn held_by_savepoints(&self) -> BTreeSet<Pgno> {
        self.savepoints
            .iter()
            .flat_map(|(_, s)| s.spilled.iter().copied())
            .collect()
    }

    /// Steal: invalidate what this transaction spilled into `pages` and forget them.
    fn discard(&mut self, pages: Vec<Pgno>) -> Result<()> {
        for p in &pages {
            self.on_disk.remove(p);
        }
        self.shared.pager.discard(self.tid(), &pages)
    }

    /// Number of pages this transaction has spilled to the file and not changed since
    /// (steal; see `Config::cache_spill`).
    pub fn spilled_pages(&self) -> usize {
        self.st.spilled.len()
    }

    /// The tree at `root` changed: cursors positioned on it must re-seek by key.
    fn bump_gen(&mut self, root: Pgno) {
        self.gen_clock += 1;
        self.gens.insert(root, self.gen_clock);
    }

    /// Every tree may have changed (a rollback).
    fn bump_all_gens(&mut self) {
        self.gen_clock += 1;
        self.gen_floor = self.gen_clock;
        // What a page move learned may no longer hold either.
        self.vacuum_memo = None;
    }

    /// Number of pages this transaction has changed so far (excluding the header page).
    pub fn dirty_pages(&self) -> usize {
        self.st.dirty.len()
    }

    /// Create a tree. Errors with `TreeExists` if the name is taken.
    pub fn create_tree(&mut self, name: &str, kind: KeyKind) -> Result<Tree> {
        self.create(name, kind, None, false)
    }

    /// Create a byte-keyed tree ordered by `cmp`. The same comparator must be given to
    /// `open_tree_with` every time the tree is used.
    pub fn create_tree_with(&mut self, name: &str, cmp: Comparator) -> Result<Tree> {
        self.create(name, KeyKind::Bytes, Some(cmp), false)
    }

    /// Create a probe-ordered byte tree: its order is defined by the caller at each call
    /// (`cursor_seek_by`, `cursor_insert_by`, `insert_by`, `remove_by` take a probe that
    /// orders a stored key against the caller's target), so key-based calls (`get`,
    /// `insert`, `remove`, `cursor_seek`, ranges) refuse it with `InvalidArgument`, and
    /// `check` verifies its structure and page ownership but not its key order. `order`
    /// must order stored keys the way the probes do; the engine uses it only to find a
    /// cursor's key again after the tree changed under the cursor.
    pub fn create_probe_tree(&mut self, name: &str, order: Comparator) -> Result<Tree> {
        self.create(name, KeyKind::Bytes, Some(order), true)
    }

    /// Insert `key`/`value` at the place `probe` defines, replacing the entry the probe
    /// finds Equal (whatever its key bytes); returns the replaced value. Probe-ordered
    /// trees only.
    pub fn insert_by(
        &mut self,
        tree: &Tree,
        probe: Probe<'_>,
        key: &[u8],
        value: &[u8],
    ) -> Result<Option<Vec<u8>>> {
        let info = self.tree_info(tree)?;
        probe_order(tree, &info)?;
        let opts = self.opts;
        self.bump_gen(info.root);
        tree::insert_by(self, info.root, probe, opts, key, value)
    }

    /// Fill the empty `tree` in bulk: `fill` pushes entries in the tree's order (strictly
    /// ascending keys; for a probe-ordered tree, the order its probes define, which the
    /// engine cannot check and takes on trust as `insert_by` does). Nodes are written
    /// once each, packed to capacity, so the tree is as compact as the layout allows
    /// (VACUUM and the backup API copy this way). Returns the number of entries.
    ///
    /// Errors: `InvalidArgument` if the tree is not empty or (trees with a known order) a
    /// key is not greater than the one before; the transaction should then be rolled
    /// back, as after any failed write.
    pub fn load_tree(
        &mut self,
        tree: &Tree,
        fill: impl FnOnce(&mut TreeLoad<'_>) -> Result<()>,
    ) -> Result<u64> {
        let info = self.tree_info(tree)?;
        let order = if info.external_order {
            probe_order(tree, &info)?;
            None
        } else {
            Some(comparator(tree, &info)?)
        };
        self.bump_gen(info.root);
        let loader = tree::Loader::new(self, info.root)?;
        let mut load = TreeLoad {
            txn: self,
            loader: Some(loader),
            info,
            order,
            last: None,
            count: 0,
        };
        fill(&mut load)?;
        let (count, loader) = (load.count, load.loader.take().expect("not finished"));
        loader.finish(self)?;
        Ok(count)
    }

    /// Remove the entry `probe` finds Equal; returns its value. Probe-ordered trees only.
    pub fn remove_by(&mut self, tree: &Tree, probe: Probe<'_>) -> Result<Option<Vec<u8>>> {
        let info = self.tree_info(tree)?;
        probe_order(tree, &info)?;
        let opts = self.opts;
        self.bump_gen(info.root);
        tree::remove_by(self, info.root, probe, opts)
    }

    /// Open a tree, creating it with `kind` if it does not exist.
    pub fn open_or_create_tree(&mut self, name: &str, kind: KeyKind) -> Result<Tree> {
        match self.open_tree(name) {
            Err(Error::TreeNotFound(_)) => self.create_tree(name, kind),
            other => other,
        }
    }

    fn create(
        &mut self,
        name: &str,
        kind: KeyKind,
        cmp: Option<Comparator>,
        external: bool,
    ) -> Result<Tree> {
        check_tree_name(name, self.usable_size())?;
        let catalog_root = self.st.header.catalog_root;
        if tree::get(self, catalog_root, &memcmp, name.as_bytes())?.is_some() {
            return Err(Error::TreeExists(name.to_string()));
        }
        let root = tree::create(self)?;
        let info = TreeInfo {
            name: name.to_string(),
            root,
            kind,
            custom_comparator: cmp.is_some() && !external,
            external_order: external,
        };
        self.put_catalog_record(&info)?;
        self.catalog_changed = true;
        self.bump_gen(root);
        Ok(Tree::new(name, cmp))
    }

    /// Write a tree's catalog record (a new one, or one replacing the record of the same
    /// name).
    fn put_catalog_record(&mut self, info: &TreeInfo) -> Result<()> {
        let catalog_root = self.st.header.catalog_root;
        let opts = self.opts;
        tree::insert(
            self,
            catalog_root,
            &memcmp,
            opts,
            info.name.as_bytes(),
            &info.encode(),
        )?;
        Ok(())
    }

    /// Test-only seam: swap the root pages of two trees' catalog records, the state a
    /// catalog written wrong (or two root pages swapped and resealed) leaves. The check
    /// must refuse it (`check.rs`).
    #[cfg(test)]
    pub(crate) fn swap_catalog_roots(&mut self, a: &str, b: &str) -> Result<()> {
        let catalog_root = self.st.header.catalog_root;
        let mut ia = lookup_tree(self, catalog_root, a)?;
        let mut ib = lookup_tree(self, catalog_root, b)?;
        std::mem::swap(&mut ia.root, &mut ib.root);
        for info in [&ia, &ib] {
            self.put_catalog_record(info)?;
        }
        self.catalog_changed = true;
        self.bump_gen(ia.root);
        self.bump_gen(ib.root);
        Ok(())
    }

    /// Whether [`WriteTxn::clear_all`] is open to this transaction: the layout's free
    /// space is a page list, and it is the only writer.
    pub fn can_clear_all(&self) -> bool {
        self.layout.free_space() == crate::page::FreeSpace::PageList
            && self.occ.is_none()
            && self.vto.is_none()
            && self.st.spilled.is_empty()
    }

    /// Empty the database in one step: every tree and every free page is forgotten and
    /// the page count drops to what an empty database needs (page 0 and an empty
    /// catalog at page 1), so what the transaction writes next fills the pages from 1
    /// up. Once that commits and is checkpointed, the journal cuts the file back to the
    /// new page count (`DbFile::cut_tail`): `VACUUM` and a backup into an existing
    /// database rebuild this way, and the file shrinks as SQLite's does. The header's
    /// meta values stay. Like a rollback, every cursor of the transaction re-seeks.
    ///
    /// Only where [`WriteTxn::can_clear_all`]: with a page-list layout a transaction may
    /// write any page (the journal keeps the committed images until commit), where a DHL
    /// layout must never overwrite a page its committed trees use. Elsewhere it is an
    /// `InvalidArgument` error and nothing changes.
    pub fn clear_all(&mut self) -> Result<()> {
        if !self.can_clear_all() {
            return Err(Error::InvalidArgument(format!(
                "clear_all needs a page-list layout and a single writer (mode {})",
                self.shared.pager.journal_mode()
            )));
        }
        // Every page this transaction changed belongs to what is being forgotten.
        self.st.dirty.clear();
        self.st.fresh.clear();
        let h = &mut self.st.header;
        h.page_count = 1;
        h.freelist_head = 0;
        h.freelist_count = 0;
        let catalog_root = tree::create(self)?;
        self.st.header.catalog_root = catalog_root;
        self.catalog_changed = true;
        self.bump_all_gens();
        Ok(())
    }

    /// Whether [`WriteTxn::begin_page_copy`] can take `src`'s pages as they are:
    /// [`WriteTxn::can_clear_all`] holds, and `src` has this layout and page geometry, a
    /// layout whose page images hold nothing of the transaction that wrote them (no
    /// versions), so an image means the same in either file at the same page number.
    pub fn can_copy_pages_of<S: ReadableTxn>(&self, src: &S) -> bool {
        self.can_clear_all()
            && self.layout.versions().is_none()
            && src.layout().name() == self.layout.name()
            && src.geometry() == self.geometry()
    }

    /// Begin making this database a page-for-page copy of `src`'s snapshot, as SQLite's
    /// online backup copies pages: everything this database holds is forgotten (as by
    /// [`WriteTxn::clear_all`]) and the header takes `src`'s page count, free list,
    /// catalog and meta values. The pages follow through [`WriteTxn::copy_pages`]; the
    /// transaction refuses to commit until all of them are copied. Returns the page count
    /// (page 0, the header, included). `InvalidArgument` where
    /// [`WriteTxn::can_copy_pages_of`] does not hold, and nothing changes.
    pub fn begin_page_copy<S: ReadableTxn>(&mut self, src: &S) -> Result<u32> {
        if !self.can_copy_pages_of(src) {
            return Err(Error::InvalidArgument(format!(
                "page copy needs the same page layout and size in a page-list mode with a \
                 single writer (mode {})",
                self.shared.pager.journal_mode()
            )));
        }
        let h = src.snapshot_header().clone();
        // Release check: a header whose catalog lies outside its pages would make the
        // copy a database that cannot be opened.
        if h.catalog_root == 0 || h.catalog_root >= h.page_count {
            return Err(Error::corrupt(
                0,
                format!(
                    "source catalog at page {} of {} pages",
                    h.catalog_root, h.page_count
                ),
            ));
        }
        self.st.dirty.clear();
        self.st.fresh.clear();
        let d = &mut self.st.header;
        d.page_count = h.page_count;
        d.freelist_head = h.freelist_head;
        d.freelist_count = h.freelist_count;
        d.catalog_root = h.catalog_root;
        d.meta = h.meta;
        d.auto_vacuum = h.auto_vacuum;
        self.st.copy = Some(PageCopy {
            from_fcc: h.fcc,
            next: 1,
            end: h.page_count,
        });
        self.catalog_changed = true;
        self.bump_all_gens();
        Ok(h.page_count)
    }

    /// Copy up to `n` more pages of the copy [`WriteTxn::begin_page_copy`] began, from
    /// the same snapshot of `src`; returns how many remain. `InvalidArgument` with no
    /// copy in progress or a source at another state (the caller starts over:
    /// [`WriteTxn::rollback_all`], then a new `begin_page_copy`).
    pub fn copy_pages<S: ReadableTxn>(&mut self, src: &S, n: u32) -> Result<u32> {
        let Some(c) = self.st.copy.clone() else {
            return Err(Error::InvalidArgument("no page copy in progress".into()));
        };
        if src.snapshot_fcc() != c.from_fcc {
            return Err(Error::InvalidArgument(format!(
                "page copy source moved from state {} to {}",
                c.from_fcc,
                src.snapshot_fcc()
            )));
        }
        let end = c.end.min(c.next.saturating_add(n));
        for pgno in c.next..end {
            let image = src.read(pgno)?;
            self.write(pgno, image)?;
        }
        self.st.copy = Some(PageCopy { next: end, ..c });
        Ok(c.end - end)
    }

    /// Delete a tree and free all its pages.
    pub fn drop_tree(&mut self, name: &str) -> Result<()> {
        self.catalog_changed = true;
        let catalog_root = self.st.header.catalog_root;
        let info = lookup_tree(self, catalog_root, name)?;
        self.bump_gen(info.root);
        tree::destroy(self, info.root)?;
        let opts = self.opts;
        tree::remove(self, catalog_root, &memcmp, opts, name.as_bytes())?;
        Ok(())
    }

    /// Remove every entry of a tree.
    pub fn clear_tree(&mut self, tree: &Tree) -> Result<()> {
        let info = self.tree_info(tree)?;
        self.bump_gen(info.root);
        tree::clear(self, info.root)
    }

    /// Insert or replace; returns the previous value.
    pub fn insert<'k>(
        &mut self,
        tree: &Tree,
        key: impl Into<Key<'k>>,
        value: &[u8],
    ) -> Result<Option<Vec<u8>>> {
        let info = self.tree_info(tree)?;
        let cmp = comparator(tree, &info)?;
        let k = encode_key(&info, key.into())?;
        let opts = self.opts;
        self.bump_gen(info.root);
        tree::insert(self, info.root, cmp, opts, k.as_slice(), value)
    }

    /// Remove a key; returns the removed value.
    pub fn remove<'k>(&mut self, tree: &Tree, key: impl Into<Key<'k>>) -> Result<Option<Vec<u8>>> {
        let info = self.tree_info(tree)?;
        let cmp = comparator(tree, &info)?;
        let k = encode_key(&info, key.into())?;
        let opts = self.opts;
        self.bump_gen(info.root);
        tree::remove(self, info.root, cmp, opts, k.as_slice())
    }

    /// Set one of the user meta values.
    pub fn set_meta(&mut self, index: usize, value: u32) -> Result<()> {
        check_meta_index(index)?;
        self.st.header.meta[index] = value;
        Ok(())
    }

    /// Mark a point to roll back to.
    pub fn savepoint(&mut self) -> Savepoint {
        let serial = self.next_serial;
        self.next_serial += 1;
        self.savepoints.push((serial, self.st.clone()));
        Savepoint {
            index: self.savepoints.len() - 1,
            serial,
        }
    }

    fn find_savepoint(&self, sp: &Savepoint) -> Result<()> {
        match self.savepoints.get(sp.index) {
            Some((serial, _)) if *serial == sp.serial => Ok(()),
            _ => Err(Error::InvalidArgument(
                "savepoint was released or rolled past".into(),
            )),
        }
    }

    /// Undo everything since `sp`; `sp` stays valid (as SQLite's ROLLBACK TO), and later
    /// savepoints are released.
    pub fn rollback_to(&mut self, sp: &Savepoint) -> Result<()> {
        self.find_savepoint(sp)?;
        self.st = self.savepoints[sp.index].1.clone();
        self.savepoints.truncate(sp.index + 1);
        self.bump_all_gens();
        // Versions spilled since the savepoint (of pages it has clean, or dirty in
        // memory) must go: the file would otherwise show them in place of the image the
        // savepoint restores. Pages it records as spilled were not spilled again since,
        // and neither were those an older savepoint records (their images are what
        // rolling back to that one restores; the restored state does not read them: it
        // has them dirty, or no longer references them).
        let held = self.held_by_savepoints();
        let gone: Vec<Pgno> = self
            .on_disk
            .iter()
            .filter(|p| !self.st.spilled.contains(p) && !held.contains(p))
            .copied()
            .collect();
        self.discard(gone)
    }

    /// Undo every change of this transaction and keep it open (SQLite's
    /// `Savepoint(ROLLBACK, -1)`); every savepoint is dropped. Tree handles and cursors
    /// stay usable: cursors re-seek by their key.
    ///
    /// Errs only if the transaction had spilled pages and invalidating them failed; the
    /// database is then poisoned (reopen to recover).
    pub fn rollback_all(&mut self) -> Result<()> {
        self.st = WriteState::new(self.base.clone());
        self.savepoints.clear();
        self.bump_all_gens();
        let gone: Vec<Pgno> = std::mem::take(&mut self.on_disk).into_iter().collect();
        self.discard(gone)
    }

    /// Forget `sp` (and every later savepoint), keeping the changes.
    pub fn release(&mut self, sp: Savepoint) -> Result<()> {
        self.find_savepoint(&sp)?;
        self.savepoints.truncate(sp.index);
        Ok(())
    }

    /// Make the transaction durable (per the journal mode) and visible to new readers.
    /// A transaction that changed nothing commits without any I/O.
    pub fn commit(mut self) -> Result<()> {
        // Release check: the header of an unfinished page copy names pages that hold
        // something else; committing it would lose the database.
        if let Some(c) = self.st.copy.as_ref().filter(|c| c.next < c.end) {
            return Err(Error::InvalidArgument(format!(
                "commit of a page copy with pages {}..{} not copied",
                c.next, c.end
            )));
        }
        self.finished = true;
        if self.occ.is_some() {
            let result = self.commit_occ();
            self.count_conflict(&result);
            self.end_occ();
            return result;
        }
        let result = self.write_commit();
        let next_writers = self.shared.release_writer();
        // A journal that shares flushes (`waldio-gc`) makes the commit durable only now,
        // with the next writer already in: its commit joins the same fdatasync.
        match result {
            Ok(Some(tid)) => self.shared.pager.wait_durable(tid, next_writers),
            Ok(None) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Commit, keeping the writer flag (`Concurrency::Serial` only) until the returned
    /// hold is dropped: no other write transaction of this database starts before the
    /// caller lets it (a transaction across databases decides its outcome after every
    /// database committed its part, `txn::multi`).
    pub(crate) fn commit_holding_writer(mut self) -> Result<WriterHold> {
        assert!(
            self.occ.is_none(),
            "a held commit needs the serial writer flag"
        );
        self.finished = true;
        let hold = WriterHold {
            shared: self.shared.clone(),
            _turn: self.turn.take(),
        };
        if let Some(tid) = self.write_commit()? {
            self.shared.pager.wait_durable(tid, 0)?;
        }
        Ok(hold)
    }

    /// Whether committing would write anything.
    pub(crate) fn has_changes(&self) -> bool {
        !(self.st.dirty.is_empty()
            && self.st.spilled.is_empty()
            && self.on_disk.is_empty()
            && self.st.header == self.base)
    }

    /// The database this transaction writes.
    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// The serial commit's write: Ok(Some(tid)) once written, Ok(None) if there was
    /// nothing to write. The writer flag is still held.
    fn write_commit(&mut self) -> Result<Option<u64>> {
        self.vacuum_before_commit()?;
        if self.st.dirty.is_empty() && self.st.spilled.is_empty() && self.st.header == self.base {
            // Nothing to commit; spilled versions a savepoint rollback left are dropped.
            let gone: Vec<Pgno> = std::mem::take(&mut self.on_disk).into_iter().collect();
            self.discard(gone).map(|()| None)
        } else {
            let mut header = self.st.header.clone();
            header.fcc = self.base.fcc + 1;
            header.last_txn_size = (self.st.dirty.len() + self.st.spilled.len()) as u32 + 1;
            let dirty: BTreeMap<Pgno, PageRef> = self.take_dirty();
            // Every spilled page is restamped (still the transaction's, unchanged since
            // the spill) or discarded; `write` and `free` keep `spilled` disjoint from
            // `dirty`.
            let spilled = Spilled {
                restamp: self.st.spilled.iter().copied().collect(),
                discard: self
                    .on_disk
                    .iter()
                    .filter(|p| !self.st.spilled.contains(p) && !dirty.contains_key(p))
                    .copied()
                    .collect(),
            };
            let mut freed = std::mem::take(&mut self.st.freed);
            freed.extend(self.st.grown_freed.iter().copied());
            let alloc = AllocDelta {
                taken: self.st.taken.iter().copied().collect(),
                freed,
            };
            let tid = header.fcc;
            self.shared
                .pager
                .commit(
                    &header,
                    &|_| tid,
                    dirty,
                    &alloc,
                    self.catalog_changed,
                    &spilled,
                )
                .map(|()| Some(tid))
        }
    }

    /// Discard every change. Errs only for a transaction that spilled pages (steal),
    /// whose versions in the file it invalidates (a write, no sync), if that write
    /// failed: the database is then poisoned, and reopening it recovers.
    pub fn rollback(mut self) -> Result<()> {
        self.finish_rolled_back()
    }

    /// Roll back and release the writer flag (`rollback`, or a drop without commit).
    fn finish_rolled_back(&mut self) -> Result<()> {
        self.finished = true;
        if self.occ.is_some() {
            self.end_occ();
            return Ok(());
        }
        let gone: Vec<Pgno> = std::mem::take(&mut self.on_disk).into_iter().collect();
        let r = self.discard(gone);
        self.shared.release_writer();
        r
    }

    /// `Concurrency::Occ` and `TwoVto` commit: validate against the commits since the
    /// snapshot and those queued for a flush, in one turn (`txn/occ.rs`), then queue for
    /// the next group flush and wait until it is durable (`txn/group.rs`). With group
    /// commit off the transaction flushes alone, inside its turn.
    fn commit_occ(&mut self) -> Result<()> {
        let shared = self.shared.clone();
        let occ = shared
            .occ
            .as_ref()
            .expect("an Occ transaction has Occ state");
        let group = shared
            .group
            .as_ref()
            .expect("an Occ database has a commit queue");
        debug_assert!(self.on_disk.is_empty() && self.st.spilled.is_empty());
        if self.st.dirty.is_empty() && self.st.header == self.base {
            // Read only: its snapshot was a committed state; nothing to check.
            return Ok(());
        }
        if let (Some(v), Some(t)) = (&shared.vto, &self.vto) {
            // Commits happen in timestamp order: wait for the older transactions.
            v.wait_oldest(t.ts)?;
        }
        let turn = occ.commit_turn();
        if let (Some(v), Some(t)) = (&shared.vto, &self.vto) {
            v.check_not_wounded(t)?;
        }
        let latest = group.latest_header(&shared.pager);
        let mut header = if latest.fcc == self.base.fcc {
            self.st.header.clone()
        } else {
            let t = self.occ.as_ref().expect("Occ state");
            let reads = t.read_set.borrow();
            let fresh = &self.st.fresh;
            let relied_on = reads
                .iter()
                .copied()
                .chain(self.st.dirty.keys().copied().filter(|p| !fresh.contains(p)))
                .chain(self.st.freed.iter().copied());
            let relied_on = relied_on
                .filter(|_| !planted(Plant::OccSkipsValidation) && !planted(Plant::VtoSkipsLocks));
            let relied_on: Vec<Pgno> = relied_on.collect();
            let touched = group.conflicts_with(&shared.pager, &relied_on).or_else(|| {
                shared
                    .pager
                    .touched_since(self.base.fcc, &mut relied_on.iter().copied())
            });
            if let Some((by, page)) = touched {
                return Err(Error::Conflict {
                    page,
                    by,
                    snapshot: self.base.fcc,
                });
            }
            occ::merge_header(&self.base, &self.st.header, &latest)?
        };
        header.fcc = latest.fcc + 1;
        header.last_txn_size = self.st.dirty.len() as u32 + 1;
        let dirty: BTreeMap<Pgno, PageRef> = self.take_dirty();
        let mut freed = std::mem::take(&mut self.st.freed);
        freed.extend(self.st.grown_freed.iter().copied());
        let alloc = AllocDelta {
            taken: self.st.taken.iter().copied().collect(),
            freed,
        };
        let kept: BTreeSet<Pgno> = dirty.keys().chain(&alloc.freed).copied().collect();
        let member = group::Member {
            written: self.base.fcc + 1,
            dirty,
            alloc,
            catalog_changed: self.catalog_changed,
        };
        let ticket = group.queue(header, member);
        if group.enabled {
            // Younger transactions may validate and queue behind this one now.
            if let (Some(v), Some(t)) = (&shared.vto, &self.vto) {
                v.queued(t);
            }
            drop(turn);
            group.wait(&shared.pager, ticket)?;
        } else {
            group.wait(&shared.pager, ticket)?;
            drop(turn);
        }
        // The pages it grew and wrote or freed are the file's now (in a tree or free).
        if let Some(t) = self.occ.as_mut() {
            t.ever_grown.retain(|p| !kept.contains(p));
        }
        Ok(())
    }

    /// `Concurrency::TwoVto`: lock a page this transaction is about to change (not one it
    /// allocated: those are its own), then make sure no commit since its snapshot changed
    /// it (`txn/vto.rs`).
    pub(super) fn lock_page(&mut self, pgno: Pgno) -> Result<()> {
        let (Some(v), Some(t)) = (&self.shared.vto, self.vto.as_mut()) else {
            return Ok(());
        };
        if planted(Plant::VtoSkipsLocks) {
            return Ok(());
        }
        if self.st.fresh.contains(&pgno) || self.st.dirty.contains_key(&pgno) {
            return Ok(());
        }
        let r = v.lock_page(t, pgno, self.base.fcc).and_then(|()| {
            match self
                .shared
                .pager
                .touched_since(self.base.fcc, &mut std::iter::once(pgno))
            {
                Some((by, page)) => Err(Error::Conflict {
                    page,
                    by,
                    snapshot: self.base.fcc,
                }),
                None => Ok(()),
            }
        });
        self.count_conflict(&r);
        r
    }

    /// Count a conflict for `Database::conflicts`.
    fn count_conflict<T>(&self, r: &Result<T>) {
        if let (Err(Error::Conflict { .. }), Some(occ)) = (r, &self.shared.occ) {
            occ.count_conflict();
        }
    }

    /// `Concurrency::TwoVto`: whether this transaction may commit without waiting (it is
    /// the oldest live one); always true otherwise. For schedulers that must not block.
    pub fn may_commit(&self) -> bool {
        match (&self.shared.vto, &self.vto) {
            (Some(v), Some(t)) => v.is_oldest(t.ts),
            _ => true,
        }
    }

    /// `Concurrency::Occ`: give back what this transaction held and end its snapshot.
    /// Every page it grew and did not commit (all of them, if it did not) is abandoned.
    fn end_occ(&mut self) {
        if let (Some(v), Some(t)) = (&self.shared.vto, self.vto.take()) {
            v.end(&t);
        }
        let Some(t) = self.occ.take() else { return };
        let occ = self.shared.occ.as_ref().expect("Occ state");
        let dropped: Vec<Pgno> = t.ever_grown.into_iter().collect();
        occ.release(&self.shared.pager, &t.ever_taken, &dropped);
        self.shared.pager.end_snapshot(self.base.fcc);
    }
}

/// The writer flag of a committed transaction, released when dropped
/// (`WriteTxn::commit_holding_writer`).
pub(crate) struct WriterHold {
    shared: Arc<Shared>,
    /// The write turn, given back after the writer flag.
    _turn: Option<Turn>,
}

impl Drop for WriterHold {
    fn drop(&mut self) {
        self.shared.release_writer();
    }
}

impl Drop for WriteTxn {
    fn drop(&mut self) {
        // Inherited through fork(): the writer flag and the pager are the parent's;
        // touching them could wait on a lock a thread of the parent held at the fork.
        if !self.finished && self.shared.pager.forked() {
            self.finished = true;
            return;
        }
        if !self.finished {
            // An error poisons the pager, which every later transaction then reports.
            let _ = self.finish_rolled_back();
        }
    }
}

impl PageRead for WriteTxn {
    fn page_size(&self) -> usize {
        self.st.header.page_size as usize
    }
    fn read(&self, pgno: Pgno) -> Result<PageRef> {
        if pgno == 0 || pgno >= self.st.header.page_count {
            return Err(Error::corrupt(
                pgno,
                format!("reference to page outside 1..{}", self.st.header.page_count),
            ));
        }
        match self.st.dirty.get(&pgno) {
            Some(p) => Ok(p.clone()),
            None if self.st.spilled.contains(&pgno) => self.shared.pager.read_spilled(pgno),
            None => match &self.occ {
                Some(t) => {
                    if self.vto.is_none() {
                        t.read_set.borrow_mut().insert(pgno);
                    }
                    self.shared.pager.read_at(self.base.fcc, pgno)
                }
                None => self.shared.pager.read_current(pgno),
            },
        }
    }
    fn layout(&self) -> Layout {
        self.layout
    }
    fn visible_tid(&self) -> u64 {
        self.base.fcc + 1
    }
}

impl PageWrite for WriteTxn {
    fn write(&mut self, pgno: Pgno, data: PageRef) -> Result<()> {
        self.writes = self.writes.wrapping_add(1);
        if pgno == 0 || pgno >= self.st.header.page_count {
            return Err(Error::InvalidArgument(format!(
                "write to unallocated page {pgno}"
            )));
        }
        debug_assert_eq!(data.len(), self.page_size());
        if self
            .st
            .dirty
            .get(&pgno)
            .is_some_and(|d| Arc::ptr_eq(d, &data))
        {
            // The dirty image itself, edited where it lies (`dirty_image`): it was locked,
            // counted and unspilled when first written, and holds the edit already.
            debug_assert!(!self.st.spilled.contains(&pgno));
            return Ok(());
        }
        self.lock_page(pgno)?;
        // The trailer is stamped when the page leaves the transaction (`take_dirty`,
        // `spill`), once, not at each of the many writes a page may get before.
        self.st.dirty.insert(pgno, data);
        self.st.spilled.remove(&pgno);
        if self.st.dirty.len() > self.spill_due {
            self.spill()?;
        }
        Ok(())
    }

    fn allocate(&mut self) -> Result<Pgno> {
        self.take_page()
    }

    fn free(&mut self, pgno: Pgno) -> Result<()> {
        self.give_page(pgno)
    }

    fn tid(&self) -> u64 {
        self.base.fcc + 1
    }

    fn is_fresh(&self, pgno: Pgno) -> bool {
        self.st.fresh.contains(&pgno)
    }

    fn dirty_image(&mut self, pgno: Pgno) -> Option<&mut PageRef> {
        self.writes = self.writes.wrapping_add(1);
        // A dirty page was `write`n once, so it is locked and counted already; a
        // savepoint that recorded it shares the `Arc`, which keeps the edit off it.
        self.st.dirty.get_mut(&pgno)
    }
}

impl ReadableTxn for WriteTxn {
    fn snapshot_header(&self) -> &Header {
        &self.st.header
    }
    fn catalog_view(&self) -> Option<(u64, u64)> {
        (!self.catalog_changed).then_some((self.shared.id, self.catalog_gen))
    }
    fn tree_clock(&self, root: Pgno) -> (u64, u64) {
        let g = self.gens.get(&root).copied().unwrap_or(0);
        (self.serial, g.max(self.gen_floor))
    }
}
