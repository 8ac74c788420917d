//! B+tree operations: search, insert, remove and the rebalancing they trigger.
//!
//! A write descends from the root, remembering the path (page image and child index at
//! each level). In the stock layout the common case edits the leaf in place with the
//! slotted-page helpers and writes it back. Otherwise (and always in the DHL layout, whose
//! pages are only ever rebuilt) the leaf becomes an in-memory [`Node`] (a list of cells
//! that may temporarily exceed a page) and [`balance`] walks up the path one level at a
//! time: an oversize node splits and inserts one separator into its parent; an underfull
//! node merges with (or borrows from) a sibling, which removes or replaces one separator in
//! the parent; a node whose page cannot take its new version is relocated, which changes
//! one child pointer in the parent. Either way only the parent changed, so the loop
//! continues with the parent and stops at the first level that needs nothing. The parent
//! is re-read from the image captured during the descent, which is still current because a
//! level is only written when the loop leaves it.
//!
//! Where pages are edited in place (`PageLayout::edits_in_place`, the stock layout), two
//! shortcuts keep a write from rebuilding whole pages, and neither changes the tree's
//! shape. A leaf the transaction already wrote is edited where it lies when nothing else
//! holds its `Arc` (`edit_path_leaf`: not a savepoint, cursor or reader, which keep the
//! image they hold), so a run of rows into one leaf copies it once. And a parent whose one
//! separator and one child pointer change is patched on a copy of its page
//! (`patch_parent`) when the result fits and is not underfull (or is the root, with keys):
//! exactly the case in which the node path would write it back and stop. Anything else
//! goes the node path, from the unchanged parent image.
//!
//! Why splits always succeed: a node entering `balance` holds at most one capacity of
//! cells plus one extra cell (an insert, or a separator that grew; relocation changes no
//! sizes), and a maximal cell costs well under half the capacity in both layouts, so a
//! cut at the byte midpoint leaves both halves within capacity (see `split_point`).
//! Redistribution is a merge followed by such a split of two pages, one of them under a
//! third full, so the same bound applies.
//!
//! Long keys (see `page::cell`) change no size bound: their cells are at most `max_cell`
//! like any other. What they add is chain ownership, kept here: a leaf split's separator
//! copies the right half's first key including a fresh copy of its tail chain
//! (`separator_from_leaf`); an interior split moves its middle cell up with its chain; an
//! interior merge pulls the separator down with its chain; a leaf merge drops the
//! separator and frees its chain, as redistribution of leaves does before making a new
//! one; removing or replacing a leaf cell frees its chains (`take_value`). So every chain
//! is reachable from exactly one cell, which `check` verifies.
//!
//! An insert whose key holds exactly the new bytes already returns before anything is
//! written: an identical replacement must not dirty a page (it would cost a page write,
//! a DHL version and a sync for no change), as SQLite skips a cell that does not change.
//!
//! # DHL: relocation and the root pointer
//!
//! A DHL write keeps the page's committed version and must fit the new one next to it
//! (`Format::image`). When it does not (several changes to one page in one transaction, or
//! fragmentation), [`write_node`] relocates a non-root node: it writes it compactly to a
//! freshly allocated page, where a node within capacity always fits, frees the old page
//! (the store keeps it untouched until commit) and reports the new page number, which the
//! caller stores in the parent. So every write site in `balance` may change the parent.
//!
//! The root never moves. A root version that does not fit goes to a fresh page C and the
//! root becomes a *root pointer*: an interior node with zero keys and right child C. An
//! empty version always fits, so this cannot fail. It is the only zero-key interior node a
//! tree may contain (`check` allows it at the root only; the stock layout never makes one
//! because its writes always fit). It is removed again when the root is next rebalanced
//! and its only child fits into the root: a root pointer's child cannot merge with a
//! sibling, so when it is underfull, or the root pointer changes, it is lifted into the
//! root if that fits, else left below the pointer (an underfull non-empty child is valid).

use std::collections::HashSet;

use crate::error::{Error, Pgno, Result};
use crate::page::cell::{self, Payload};
use crate::page::cells::{CellArray, Detached};
use crate::page::layout::{Edited, LeafEdit};
use crate::page::{PageRead, PageRef, PageWrite};
use crate::seam::{planted, Plant};

use super::format::Format;
use super::overflow::whole;
use super::{overflow, CmpFn, ProbeFn, TreeOptions, MAX_KEY_LEN, MAX_VALUE_LEN};

/// No valid tree is this deep (interior pages have at least two children, except a root
/// pointer, and page numbers are u32), so deeper paths mean a cycle in corrupt child
/// pointers.
pub(crate) const MAX_DEPTH: usize = 64;

/// Reshaping events, counted in test builds to show that the DHL paths are exercised.
#[derive(Clone, Copy, Debug)]
enum Event {
    Relocation,
    RootPointer,
    RootCollapse,
    /// An underfull node under a merge-deferring layout merged because it had to be
    /// copied anyway.
    DeferredMerge,
}

/// Per-thread event counts (tests only): relocations, root pointers written, root
/// collapses (a child moved into the root).
#[cfg(test)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Events {
    pub relocations: u64,
    pub root_pointers: u64,
    pub root_collapses: u64,
    pub deferred_merges: u64,
}

#[cfg(test)]
thread_local! {
    pub(crate) static EVENTS: std::cell::Cell<Events> = const {
        std::cell::Cell::new(Events {
            relocations: 0,
            root_pointers: 0,
            root_collapses: 0,
            deferred_merges: 0,
        })
    };
}

fn note(ev: Event) {
    #[cfg(test)]
    EVENTS.with(|e| {
        let mut v = e.get();
        match ev {
            Event::Relocation => v.relocations += 1,
            Event::RootPointer => v.root_pointers += 1,
            Event::RootCollapse => v.root_collapses += 1,
            Event::DeferredMerge => v.deferred_merges += 1,
        }
        e.set(v);
    });
    #[cfg(not(test))]
    let _ = ev;
}

/// One level of a root-to-leaf path: the page image read during the descent and, for
/// interior pages, the index of the child the path continues into. A cursor's stack is
/// made of the same frames, so an insert or delete at its position takes the stack as
/// its path and gives it back, neither copied.
#[derive(Clone)]
pub(crate) struct Step {
    pub pgno: Pgno,
    pub page: PageRef,
    pub idx: usize,
    /// `page` as opened during the descent. Opening a DHL page validates a whole version,
    /// and an operation looks at the same path several times.
    pub(super) opened: Detached,
}

impl Step {
    /// The node in `page`, as `Format::open` returned it during the descent.
    pub fn view(&self) -> CellArray<'_> {
        self.opened.attach(&self.page)
    }
}

/// A root-to-leaf path, as a descent or a positioned cursor has it.
pub(crate) type Path = Vec<Step>;

/// What an insert returns: the value it replaced, and the path to the new entry when the
/// leaf took it in place.
pub(crate) type Inserted = (Option<Vec<u8>>, Option<Path>);

/// Where in its leaf an entry is (`Ok`) or would go (`Err`).
pub(crate) type LeafPos = std::result::Result<usize, usize>;

/// A page's cells held in memory while they are being reshaped; may exceed a page.
pub(crate) struct Node {
    pub pgno: Pgno,
    pub leaf: bool,
    pub cells: Vec<Vec<u8>>,
    /// Rightmost child (interior nodes only).
    pub right: Pgno,
}

/// Spare cell buffers of this thread's finished nodes. Loading a node copies every cell
/// into its own `Vec` (what `Format::image` takes), and a one-row write loads and drops a
/// whole leaf; reusing the buffers spares an allocation and a free per cell.
mod spare {
    use std::cell::RefCell;

    /// Bytes of buffer capacity kept at most per thread.
    const MAX_BYTES: usize = 256 << 10;

    struct Pool {
        bufs: Vec<Vec<u8>>,
        bytes: usize,
    }

    thread_local! {
        static POOL: RefCell<Pool> = const {
            RefCell::new(Pool { bufs: Vec::new(), bytes: 0 })
        };
    }

    /// Copy every cell `cell(i)`, `i < n`, into `out`, in buffers from the pool.
    pub(super) fn fill<'a, E>(
        out: &mut Vec<Vec<u8>>,
        n: usize,
        mut cell: impl FnMut(usize) -> Result<&'a [u8], E>,
    ) -> Result<(), E> {
        POOL.with(|pool| {
            let mut pool = pool.borrow_mut();
            for i in 0..n {
                let c = cell(i)?;
                let buf = match pool.bufs.pop() {
                    Some(mut buf) => {
                        pool.bytes -= buf.capacity();
                        buf.clear();
                        buf.extend_from_slice(c);
                        buf
                    }
                    None => c.to_vec(),
                };
                out.push(buf);
            }
            Ok(())
        })
    }

    /// A buffer from the pool (empty), or a new one.
    pub(super) fn take() -> Vec<u8> {
        POOL.with(|pool| {
            let mut pool = pool.borrow_mut();
            let buf = pool.bufs.pop().unwrap_or_default();
            pool.bytes -= buf.capacity();
            buf
        })
    }

    /// Give the buffers of a node that is done with back to the pool.
    pub(super) fn put(cells: Vec<Vec<u8>>) {
        POOL.with(|pool| {
            let mut pool = pool.borrow_mut();
            for buf in cells {
                if !pool.keep(buf) {
                    break;
                }
            }
        })
    }

    /// Give one buffer back to the pool.
    pub(super) fn give(buf: Vec<u8>) {
        POOL.with(|pool| pool.borrow_mut().keep(buf));
    }

    impl Pool {
        /// Keep `buf` unless the pool is full (then it is freed): whether it was kept.
        fn keep(&mut self, buf: Vec<u8>) -> bool {
            if self.bytes + buf.capacity() > MAX_BYTES {
                return false;
            }
            self.bytes += buf.capacity();
            self.bufs.push(buf);
            true
        }
    }
}

/// A node's cell buffers go back to this thread's pool when it is done with, whichever
/// way it ends (written, split, merged or abandoned by an error): the next node loaded
/// copies its cells into them instead of allocating one buffer per cell.
impl Drop for Node {
    fn drop(&mut self) {
        spare::put(std::mem::take(&mut self.cells));
    }
}

impl Node {
    fn from_view(f: &Format, p: &CellArray) -> Result<Node> {
        let right = if p.is_leaf() { 0 } else { p.child(p.ncells())? };
        // Room for the cell most callers add next.
        let mut cells = Vec::with_capacity(p.ncells() + 1);
        spare::fill(&mut cells, p.ncells(), |i| p.cell(i))?;
        let node = Node {
            pgno: p.pgno(),
            leaf: p.is_leaf(),
            cells,
            right,
        };
        // Overlapping cells in a corrupt page could add up to more than a page; every
        // size bound in `balance` assumes a loaded node fits.
        if node.used(f) > f.capacity() {
            return Err(Error::corrupt(
                p.pgno(),
                "cells add up to more than the page holds (overlapping cells)",
            ));
        }
        Ok(node)
    }

    fn load(store: &dyn PageWrite, f: &Format, pgno: Pgno) -> Result<Node> {
        let data = store.read(pgno)?;
        Node::from_view(f, &f.open(pgno, &data)?.attach(&data))
    }

    /// Capacity the cells use (what must fit in `Format::capacity`).
    fn used(&self, f: &Format) -> usize {
        self.cells.iter().map(|c| f.cost(c.len())).sum()
    }

    /// Point child `i` (`i == cells.len()`: the right child) at `pgno`.
    fn set_child(&mut self, i: usize, pgno: Pgno) {
        match self.cells.get_mut(i) {
            Some(cell) => cell[2..6].copy_from_slice(&pgno.to_le_bytes()),
            None => self.right = pgno,
        }
    }

    /// Image of this node on page `pgno` (None: see `Format::image`).
    fn image(&self, store: &dyn PageWrite, f: &Format, pgno: Pgno) -> Result<Option<PageRef>> {
        debug_assert!(self.used(f) <= f.capacity());
        f.image(store, pgno, self.leaf, &self.cells, self.right)
    }
}

/// Write a non-root node (within capacity); returns the page it landed on: its own, or a
/// new one if its page cannot take the new version (DHL). The caller must then point the
/// parent at the new page; the old one is freed here.
fn write_node(store: &mut dyn PageWrite, f: &Format, node: &Node) -> Result<Pgno> {
    if let Some(img) = node.image(store, f, node.pgno)? {
        store.write(node.pgno, img)?;
        return Ok(node.pgno);
    }
    let to = store.allocate()?;
    let img = node.image(store, f, to)?.ok_or_else(|| {
        Error::corrupt(
            node.pgno,
            "a node within capacity does not fit a fresh page",
        )
    })?;
    store.write(to, img)?;
    store.free(node.pgno)?;
    note(Event::Relocation);
    Ok(to)
}

/// Write the root's new content. The root never moves: if the content does not fit, it
/// goes to a fresh page and the root becomes a pointer to it.
fn write_root(store: &mut dyn PageWrite, f: &Format, mut node: Node) -> Result<()> {
    if let Some(img) = node.image(store, f, node.pgno)? {
        return store.write(node.pgno, img);
    }
    let root = node.pgno;
    let moved = Node {
        pgno: store.allocate()?,
        leaf: node.leaf,
        cells: std::mem::take(&mut node.cells),
        right: node.right,
    };
    let at = write_node(store, f, &moved)?;
    write_root_pointer(store, f, root, at)
}

/// Make `root` an interior node with no keys and the single child `child`.
fn write_root_pointer(
    store: &mut dyn PageWrite,
    f: &Format,
    root: Pgno,
    child: Pgno,
) -> Result<()> {
    let pointer = Node {
        pgno: root,
        leaf: false,
        cells: Vec::new(),
        right: child,
    };
    // A version without cells needs no record-area bytes, so it fits next to anything.
    let img = pointer
        .image(store, f, root)?
        .ok_or_else(|| Error::corrupt(root, "an empty root version does not fit"))?;
    note(Event::RootPointer);
    store.write(root, img)
}

/// Move `child`, the root's only child, into the root page if it fits there, freeing its
/// page; otherwise leave the root a pointer to it (writing `child` first if `changed`).
fn lift_into_root(
    store: &mut dyn PageWrite,
    f: &Format,
    root: Pgno,
    child: Node,
    changed: bool,
) -> Result<()> {
    if let Some(img) = child.image(store, f, root)? {
        store.free(child.pgno)?;
        note(Event::RootCollapse);
        return store.write(root, img);
    }
    let at = if changed {
        write_node(store, f, &child)?
    } else {
        child.pgno
    };
    write_root_pointer(store, f, root, at)
}

/// Create an empty tree; returns its root page, which never changes for the tree's life.
pub(crate) fn create(store: &mut dyn PageWrite) -> Result<Pgno> {
    let f = Format::of(&*store);
    let root = store.allocate()?;
    let empty = Node {
        pgno: root,
        leaf: true,
        cells: Vec::new(),
        right: 0,
    };
    write_root(store, &f, empty)?;
    Ok(root)
}

/// Bulk load: an empty tree filled from entries in ascending order, bottom-up, each node
/// packed to the layout's capacity (what VACUUM and the backup API copy with, and why a
/// copied file is compact). Leaves are written as they fill, then each interior level
/// over the one below; the root page keeps its number and takes the top node.
///
/// The caller gives the entries in the tree's order (the loader never compares keys, as
/// the rest of the tree code does not: its order comes from the caller). The result
/// satisfies every invariant of `tree`: separators are the first key of each right
/// sibling (with its own copy of a long key's tail), all leaves are at one depth, every
/// node holds at least one cell and at most the capacity.
pub(crate) struct Loader {
    root: Pgno,
    /// Cells of the leaf being filled, and the capacity they use.
    cells: Vec<Vec<u8>>,
    used: usize,
    /// The separator before the leaf being filled (None for the first leaf).
    sep: Option<Vec<u8>>,
    /// The leaves written so far, each with the separator before it (None: the first).
    children: Vec<(Pgno, Option<Vec<u8>>)>,
}

impl Loader {
    /// A loader for the tree at `root`, which must be empty.
    pub(crate) fn new(store: &dyn PageWrite, root: Pgno) -> Result<Loader> {
        let f = Format::of(store);
        let page = store.read(root)?;
        let opened = f.open(root, &page)?;
        let p = opened.attach(&page);
        if !p.is_leaf() || p.ncells() != 0 {
            return Err(Error::InvalidArgument(format!(
                "bulk load into the tree at page {root}, which is not empty"
            )));
        }
        Ok(Loader {
            root,
            cells: Vec::new(),
            used: 0,
            sep: None,
            children: Vec::new(),
        })
    }

    /// Append `key`/`value`, after every key appended before it in the tree's order.
    pub(crate) fn push(
        &mut self,
        store: &mut dyn PageWrite,
        key: &[u8],
        value: &[u8],
    ) -> Result<()> {
        check_entry(key, value)?;
        let f = Format::of(&*store);
        let cell = make_leaf_cell(store, key, value)?;
        let cost = f.cost(cell.len());
        if !self.cells.is_empty() && self.used + cost > f.capacity() {
            let leaf = Node {
                pgno: store.allocate()?,
                leaf: true,
                cells: std::mem::take(&mut self.cells),
                right: 0,
            };
            let pgno = write_node(store, &f, &leaf)?;
            self.children.push((pgno, self.sep.take()));
            self.sep = Some(separator_from_leaf(store, self.root, &cell)?);
            self.used = 0;
        }
        self.used += cost;
        self.cells.push(cell);
        Ok(())
    }

    /// Write the last leaf and the interior levels; the top node goes to the root page.
    pub(crate) fn finish(mut self, store: &mut dyn PageWrite) -> Result<()> {
        let f = Format::of(&*store);
        let last = Node {
            pgno: self.root,
            leaf: true,
            cells: std::mem::take(&mut self.cells),
            right: 0,
        };
        if self.children.is_empty() {
            return write_root(store, &f, last);
        }
        let mut last = last;
        let last = Node {
            pgno: store.allocate()?,
            leaf: last.leaf,
            cells: std::mem::take(&mut last.cells),
            right: last.right,
        };
        let pgno = write_node(store, &f, &last)?;
        self.children.push((pgno, self.sep.take()));
        let mut level = self.children;
        loop {
            let mut nodes = pack_level(&f, level);
            if nodes.len() == 1 {
                let (mut top, _) = nodes.pop().expect("one node");
                top.pgno = self.root;
                return write_root(store, &f, top);
            }
            level = Vec::with_capacity(nodes.len());
            for (mut node, sep) in nodes {
                node.pgno = store.allocate()?;
                level.push((write_node(store, &f, &node)?, sep));
            }
        }
    }
}

/// Interior nodes over `children` (in order, each with the separator before it; at least
/// two), packed to capacity, each with the separator that goes before it one level up.
/// Page numbers are left 0 for the caller to assign.
fn pack_level(f: &Format, children: Vec<(Pgno, Option<Vec<u8>>)>) -> Vec<(Node, Option<Vec<u8>>)> {
    debug_assert!(children.len() >= 2);
    let mut nodes: Vec<(Node, Option<Vec<u8>>)> = Vec::new();
    let mut used = 0;
    for (child, sep) in children {
        match (nodes.last_mut(), sep) {
            (Some((node, _)), Some(sep)) => {
                let cell = with_child(sep, node.right);
                let cost = f.cost(cell.len());
                if used + cost > f.capacity() {
                    let sep = interior_key(cell);
                    nodes.push((interior(child), Some(sep)));
                    used = 0;
                } else {
                    node.cells.push(cell);
                    node.right = child;
                    used += cost;
                }
            }
            (_, sep) => nodes.push((interior(child), sep)),
        }
    }
    // Every node needs a cell: a last node that got only its first child takes the last
    // child of the one before it (which closed with at least two cells, since a cell
    // costs under half the capacity).
    let n = nodes.len();
    if n >= 2 && nodes[n - 1].0.cells.is_empty() {
        let (prev, last) = nodes.split_at_mut(n - 1);
        let (p, (l, l_sep)) = (&mut prev[n - 2].0, &mut last[0]);
        let moved = p.cells.pop().expect("a closed node has cells");
        let up = l_sep.take().expect("a later node has a separator");
        l.cells.push(with_child(up, p.right));
        p.right = cell::cell_child(&moved);
        *l_sep = Some(interior_key(moved));
        debug_assert!(!p.cells.is_empty());
    }
    nodes
}

/// An interior node (page number to be assigned) whose only child so far is `child`.
fn interior(child: Pgno) -> Node {
    Node {
        pgno: 0,
        leaf: false,
        cells: Vec::new(),
        right: child,
    }
}

/// An interior cell as a separator to pass up (its child pointer is set there).
fn interior_key(cell: Vec<u8>) -> Vec<u8> {
    with_child(cell, 0)
}

/// Path from `root` to the leaf whose key range contains `key`.
pub(crate) fn descend<S: PageRead + ?Sized>(
    store: &S,
    root: Pgno,
    cmp: &CmpFn,
    key: &[u8],
) -> Result<Vec<Step>> {
    descend_by(store, root, &mut |k: &[u8]| cmp(k, key), true)
}

/// Path from `root` to a leaf, choosing at each interior page the child after the
/// separators the probe puts before its target (`upper`: Less or Equal, the leaf where an
/// Equal key lives or would be inserted; else Less only, the leaf where the first key not
/// less than the target lives, or the one before it). Never compares two stored keys.
pub(crate) fn descend_by<S: PageRead + ?Sized>(
    store: &S,
    root: Pgno,
    probe: &mut ProbeFn<'_>,
    upper: bool,
) -> Result<Vec<Step>> {
    let f = Format::of(store);
    let mut path = Vec::new();
    let mut pgno = root;
    loop {
        if path.len() >= MAX_DEPTH {
            return Err(Error::corrupt(
                pgno,
                format!("tree deeper than {MAX_DEPTH} levels (child pointer cycle?)"),
            ));
        }
        let page = store.read(pgno)?;
        let opened = f.open_page(pgno, &page)?;
        let p = opened.attach(&page);
        if p.is_leaf() {
            path.push(Step {
                pgno,
                page,
                idx: 0,
                opened,
            });
            return Ok(path);
        }
        // A root pointer has no keys: index 0 is its right child.
        let idx = p.bound_by(probe, &whole(store, pgno), upper)?;
        let child = p.child(idx)?;
        path.push(Step {
            pgno,
            page,
            idx,
            opened,
        });
        pgno = child;
    }
}

/// The value of a leaf cell, following its overflow chain if it has one.
pub(crate) fn read_payload<S: PageRead + ?Sized>(
    store: &S,
    owner: Pgno,
    payload: Payload,
) -> Result<Vec<u8>> {
    match payload {
        Payload::Inline(v) => Ok(v.to_vec()),
        Payload::Overflow { len, first } => overflow::read(store, owner, len, first),
    }
}

/// Look up `key`.
pub(crate) fn get(
    store: &dyn PageRead,
    root: Pgno,
    cmp: &CmpFn,
    key: &[u8],
) -> Result<Option<Vec<u8>>> {
    if key.len() > MAX_KEY_LEN {
        return Ok(None); // could never have been inserted
    }
    let path = descend(store, root, cmp, key)?;
    let leaf = path.last().expect("descend returns at least the root");
    let p = leaf.view();
    let probe = &mut |k: &[u8]| cmp(k, key);
    match p.search_by(probe, &whole(store, leaf.pgno))? {
        Ok(i) => Ok(Some(read_payload(store, leaf.pgno, p.payload(i)?)?)),
        Err(_) => Ok(None),
    }
}

/// Leaf cell for `key`/`value`, writing the overflow chains first if the key is long or
/// the value large.
fn make_leaf_cell(store: &mut dyn PageWrite, key: &[u8], value: &[u8]) -> Result<Vec<u8>> {
    let usable = store.usable_size();
    let tail = overflow::write_key_tail(store, key)?;
    let payload = if cell::value_is_inline(usable, key.len(), value.len()) {
        Payload::Inline(value)
    } else {
        Payload::Overflow {
            len: value.len() as u32,
            first: overflow::write(store, value)?,
        }
    };
    // In a buffer of the node pool: a cell the leaf takes in place gives it back
    // (`insert_on_path`), one that goes into a node returns with the node's.
    let mut c = spare::take();
    cell::leaf_cell_into(&mut c, usable, key, tail, payload);
    Ok(c)
}

/// Read the value of cell `i` of `p` and free its chains (the cell is about to go away
/// or be replaced).
fn take_value(store: &mut dyn PageWrite, p: &CellArray, i: usize) -> Result<Vec<u8>> {
    let value = read_payload(store, p.pgno(), p.payload(i)?)?;
    free_chains(store, p, i)?;
    Ok(value)
}

/// Free the overflow chains of cell `i` of `p` (its value's, its long key's tail).
fn free_chains(store: &mut dyn PageWrite, p: &CellArray, i: usize) -> Result<()> {
    if let Payload::Overflow { len, first } = p.payload(i)? {
        overflow::free(store, p.pgno(), len, first)?;
    }
    if let Some((len, first)) = p.key(i)?.tail() {
        overflow::free(store, p.pgno(), len, first)?;
    }
    Ok(())
}

/// The separator for a split before leaf cell `c`: an interior cell (child still to be
/// set) with `c`'s key, which gets a copy of a long key's tail chain of its own.
fn separator_from_leaf(store: &mut dyn PageWrite, owner: Pgno, c: &[u8]) -> Result<Vec<u8>> {
    let usable = store.usable_size();
    let mut sep = cell::interior_from_key_part(usable, c, 0);
    if let Some((len, first)) = cell::cell_key(usable, c).tail() {
        let tail = overflow::read(store, owner, len, first)?;
        let copy = overflow::write(store, &tail)?;
        cell::set_key_tail(usable, &mut sep, copy);
    }
    Ok(sep)
}

/// `sep` pointing at `child`.
fn with_child(mut sep: Vec<u8>, child: Pgno) -> Vec<u8> {
    sep[2..6].copy_from_slice(&child.to_le_bytes());
    sep
}

/// Whether leaf cell `i` of `p` holds exactly `key` and `value` (read only; an overflow
/// value is compared only when its length matches).
fn unchanged_cell(
    store: &dyn PageWrite,
    p: &CellArray,
    i: usize,
    key: &[u8],
    value: &[u8],
) -> Result<bool> {
    let stored = p.key(i)?;
    if stored.len() != key.len() || overflow::full_key(store, p.pgno(), stored)? != key {
        return Ok(false);
    }
    Ok(match p.payload(i)? {
        Payload::Inline(v) => v == value,
        Payload::Overflow { len, first } => {
            len as usize == value.len()
                && read_payload(store, p.pgno(), Payload::Overflow { len, first })? == value
        }
    })
}

/// Insert or replace; returns the previous value.
/// Errors: `KeyTooLarge` above `MAX_KEY_LEN`, `ValueTooLarge` above `MAX_VALUE_LEN`.
pub(crate) fn insert(
    store: &mut dyn PageWrite,
    root: Pgno,
    cmp: &CmpFn,
    opts: TreeOptions,
    key: &[u8],
    value: &[u8],
) -> Result<Option<Vec<u8>>> {
    insert_by(store, root, &mut |k: &[u8]| cmp(k, key), opts, key, value)
}

/// Insert `key`/`value` where `probe` places it, replacing the entry the probe finds
/// Equal (whatever its key bytes). The caller's probe must order `key` itself the way
/// it orders the target, or the tree's order breaks; `key` is stored as given.
pub(crate) fn insert_by(
    store: &mut dyn PageWrite,
    root: Pgno,
    probe: &mut ProbeFn<'_>,
    opts: TreeOptions,
    key: &[u8],
    value: &[u8],
) -> Result<Option<Vec<u8>>> {
    insert_placed(store, root, probe, opts, key, value).map(|(old, _)| old)
}

/// [`insert_by`], also returning the root-to-leaf path to the new entry (the leaf frame's
/// index on it) when the leaf took it in place, so a cursor can stand on it without a
/// second descent; None when the tree was reshaped (the caller seeks instead).
pub(crate) fn insert_placed(
    store: &mut dyn PageWrite,
    root: Pgno,
    probe: &mut ProbeFn<'_>,
    opts: TreeOptions,
    key: &[u8],
    value: &[u8],
) -> Result<Inserted> {
    // `insert_on_path` checks the entry's sizes.
    let path = descend_by(store, root, probe, true)?;
    let leaf = path.last().expect("descend returns at least the root");
    let found = leaf.view().search_by(probe, &whole(store, leaf.pgno))?;
    insert_on_path(store, opts, path, found, key, value)
}

/// Errors for a key or value no tree can hold.
fn check_entry(key: &[u8], value: &[u8]) -> Result<()> {
    if key.len() > MAX_KEY_LEN {
        return Err(Error::KeyTooLarge {
            len: key.len(),
            max: MAX_KEY_LEN,
        });
    }
    if value.len() > MAX_VALUE_LEN {
        return Err(Error::ValueTooLarge {
            len: value.len(),
            max: MAX_VALUE_LEN,
        });
    }
    Ok(())
}

/// [`insert_placed`] on a known root-to-leaf `path` (the current images, each interior
/// frame's index on the child the path takes) and the leaf's search result `found`
/// (`Ok(i)`: the entry to replace; `Err(i)`: where the new one goes), as a descent
/// would find them: a cursor standing next to the place passes its own path.
pub(crate) fn insert_on_path(
    store: &mut dyn PageWrite,
    opts: TreeOptions,
    path: Path,
    found: LeafPos,
    key: &[u8],
    value: &[u8],
) -> Result<Inserted> {
    check_entry(key, value)?;
    let f = Format::of(&*store);
    let leaf = path.last().expect("a path is never empty");
    let p = leaf.view();
    if let Ok(i) = found {
        if unchanged_cell(store, &p, i, key, value)? {
            // Replacing an entry by the same bytes changes nothing, so nothing is
            // written: no page is dirtied (hence no page write, no DHL slot header, no
            // txn_size count and no sync on its account), as SQLite skips a cell whose
            // bytes do not change.
            return Ok((Some(value.to_vec()), None));
        }
    }
    let old = match found {
        Ok(i) => Some(take_value(store, &p, i)?),
        Err(_) => None,
    };
    let cell = make_leaf_cell(store, key, value)?;
    let (i, replace) = match found {
        Ok(i) => (i, true),
        Err(i) => (i, false),
    };
    // A layout that edits pages in place (stock) does the common case without building
    // a node; the others (DHL pages are only ever rebuilt) and a page the cell does not
    // fit go through `balance`, which writes (and if need be splits or relocates) it.
    let edit = LeafEdit {
        tid: store.tid(),
        at: i,
        remove: replace,
        insert: Some(&cell),
    };
    let mut path = path;
    if let Some((buf, used)) = edit_path_leaf(store, &f, &mut path, edit)? {
        spare::give(cell);
        let in_place = finish_leaf(store, opts, &path, buf, used, replace)?;
        if !in_place {
            return Ok((old, None));
        }
        return Ok((old, Some(edited_path(store, &f, path, i)?)));
    }
    // Ascending-key inserts overflow the rightmost leaf at its end: it splits without
    // its cells being loaded (what `balance` would do with them).
    let cell = match replace {
        true => cell,
        false => match append_past_full_leaf(store, &f, opts, &path, i, cell)? {
            Ok(()) => return Ok((old, None)),
            Err(cell) => cell,
        },
    };
    let leaf = path.last().expect("a path is never empty");
    let mut node = Node::from_view(&f, &leaf.view())?;
    if replace {
        node.cells[i] = cell;
    } else {
        node.cells.insert(i, cell);
    }
    balance(store, opts, &path, node, replace)?;
    Ok((old, None))
}

/// Remove `key`; returns the removed value.
pub(crate) fn remove(
    store: &mut dyn PageWrite,
    root: Pgno,
    cmp: &CmpFn,
    opts: TreeOptions,
    key: &[u8],
) -> Result<Option<Vec<u8>>> {
    if key.len() > MAX_KEY_LEN {
        return Ok(None);
    }
    remove_by(store, root, &mut |k: &[u8]| cmp(k, key), opts)
}

/// Remove the entry `probe` finds Equal; returns its value.
pub(crate) fn remove_by(
    store: &mut dyn PageWrite,
    root: Pgno,
    probe: &mut ProbeFn<'_>,
    opts: TreeOptions,
) -> Result<Option<Vec<u8>>> {
    let path = descend_by(store, root, probe, true)?;
    let leaf = path.last().expect("descend returns at least the root");
    let Ok(i) = leaf.view().search_by(probe, &whole(store, leaf.pgno))? else {
        return Ok(None);
    };
    remove_on_path(store, opts, path, i, true).map(|(old, _)| old)
}

/// Remove entry `i` of the leaf a root-to-leaf `path` ends at (the current images, each
/// interior frame's index on the child the path takes), as a descent would find it: a
/// cursor standing on the entry passes its own path. Returns the removed value (only if
/// `want_value`: a caller that discards it does not pay for reading it), and the path to
/// the leaf as it is now when the entry went from its leaf in place (the leaf frame's
/// index then names the entry that followed it; None when the tree was rebalanced).
pub(crate) fn remove_on_path(
    store: &mut dyn PageWrite,
    opts: TreeOptions,
    path: Path,
    i: usize,
    want_value: bool,
) -> Result<(Option<Vec<u8>>, Option<Path>)> {
    let f = Format::of(&*store);
    let leaf = path.last().expect("a path is never empty");
    let old = match want_value {
        true => Some(take_value(store, &leaf.view(), i)?),
        false => {
            free_chains(store, &leaf.view(), i)?;
            None
        }
    };
    let edit = LeafEdit {
        tid: store.tid(),
        at: i,
        remove: true,
        insert: None,
    };
    let mut path = path;
    if let Some((buf, used)) = edit_path_leaf(store, &f, &mut path, edit)? {
        if !finish_leaf(store, opts, &path, buf, used, true)? {
            return Ok((old, None));
        }
        return Ok((old, Some(edited_path(store, &f, path, i)?)));
    }
    let leaf = path.last().expect("a path is never empty");
    let mut node = Node::from_view(&f, &leaf.view())?;
    node.cells.remove(i);
    balance(store, opts, &path, node, true)?;
    Ok((old, None))
}

/// `path` after `finish_leaf` wrote its leaf as edited, standing on entry `i`: the leaf
/// frame holds what the store holds now (a layout with a trailer stamps a copy), opened.
/// A leaf edited where it lies is that image already, opened by `edit_path_leaf`.
fn edited_path(store: &dyn PageWrite, f: &Format, mut path: Path, i: usize) -> Result<Path> {
    let leaf = path.last_mut().expect("path is never empty");
    let now = store.read(leaf.pgno)?;
    if !std::sync::Arc::ptr_eq(&now, &leaf.page) {
        leaf.opened = f.open_page(leaf.pgno, &now)?;
        leaf.page = now;
    }
    leaf.idx = i;
    Ok(path)
}

/// Apply `edit` to the leaf `path` ends at, through the layout: the leaf's image after
/// it and what its cells cost, or None (nothing changed) when the layout does not edit
/// in place or the cell does not fit. A layout that edits in place
/// (`PageLayout::edits_in_place`) edits the store's own dirty image of the leaf where it
/// lies if nothing else shares it (the path sets its share aside for that), so a run of
/// rows into one leaf copies the page once, not once per row; the path then carries the
/// edited image, opened afresh. Else the edit builds a new image.
fn edit_path_leaf(
    store: &mut dyn PageWrite,
    f: &Format,
    path: &mut Path,
    edit: LeafEdit,
) -> Result<Edited> {
    let leaf = path.last_mut().expect("a path is never empty");
    let pgno = leaf.pgno;
    if f.layout.edits_in_place() {
        if let Some(img) = store
            .dirty_image(pgno)
            .filter(|img| std::sync::Arc::ptr_eq(img, &leaf.page))
        {
            drop(std::mem::take(&mut leaf.page));
            if let Some(buf) = std::sync::Arc::get_mut(img) {
                let edited = f.layout.edit_leaf_mut(pgno, buf, f.geometry, edit);
                leaf.page = img.clone();
                let Some(used) = edited? else {
                    return Ok(None);
                };
                leaf.opened = f.open_page(pgno, &leaf.page)?;
                return Ok(Some((leaf.page.clone(), used)));
            }
            leaf.page = img.clone();
        }
    }
    f.layout.edit_leaf(pgno, &leaf.page, f.geometry, edit)
}

/// Write a leaf edited in place (it fits; its cells cost `used`), rebalancing first if
/// it became underfull (`shrank`: it lost a cell or a cell got replaced; see `balance`).
/// Returns whether the leaf was written as edited (false: the tree was rebalanced).
fn finish_leaf(
    store: &mut dyn PageWrite,
    opts: TreeOptions,
    path: &[Step],
    buf: PageRef,
    used: usize,
    shrank: bool,
) -> Result<bool> {
    let f = Format::of(&*store);
    let leaf = path.last().expect("path is never empty");
    // A layout that defers merges keeps a non-empty leaf the edit fitted in place.
    if path.len() == 1 || !shrank || !f.underfull(used) || (f.policy().defers_merges && used > 0) {
        store.write(leaf.pgno, buf)?;
        return Ok(true);
    }
    let node = Node::from_view(&f, &f.open(leaf.pgno, &buf)?.attach(&buf))?;
    balance(store, opts, path, node, shrank)?;
    Ok(false)
}

/// Index where `sizes` (cell costs) should be cut so both halves fit in `cap` and the
/// larger one is as small as possible. Leaves: left = `..m`, right = `m..`. Interiors:
/// cell `m` moves up as the separator, left = `..m`, right = `m+1..`; both halves keep at
/// least one cell.
fn split_point(sizes: &[usize], interior: bool, cap: usize) -> Option<usize> {
    let total: usize = sizes.iter().sum();
    let mut best: Option<(usize, usize)> = None;
    let mut left = 0;
    for m in 1..sizes.len() {
        if interior && m + 1 >= sizes.len() {
            break;
        }
        left += sizes[m - 1];
        let right = total - left - if interior { sizes[m] } else { 0 };
        let worst = left.max(right);
        let better = match best {
            None => true,
            Some((w, _)) => worst < w,
        };
        if worst <= cap && better {
            best = Some((worst, m));
        }
    }
    best.map(|(_, m)| m)
}

/// Split an oversize node into (left, separator, right). The right half keeps the
/// node's page number; the left half gets page number 0 for the caller to assign. The
/// separator is an interior cell whose child the caller sets: a leaf split copies the
/// right half's first key (with its own copy of a long key's tail chain), an interior
/// split moves the middle cell up (with its chain).
fn split(store: &mut dyn PageWrite, f: &Format, mut node: Node) -> Result<(Node, Vec<u8>, Node)> {
    let sizes: Vec<usize> = node.cells.iter().map(|c| f.cost(c.len())).collect();
    let m = split_point(&sizes, !node.leaf, f.capacity()).ok_or_else(|| {
        Error::corrupt(
            node.pgno,
            format!("cannot split {} cells into two fitting pages", sizes.len()),
        )
    })?;
    let mut left_cells = std::mem::take(&mut node.cells);
    let mut right_cells = left_cells.split_off(m);
    let (sep, left_right) = if node.leaf {
        (separator_from_leaf(store, node.pgno, &right_cells[0])?, 0)
    } else {
        let mid = right_cells.remove(0);
        let child = cell::cell_child(&mid);
        (mid, child)
    };
    let left = Node {
        pgno: 0,
        leaf: node.leaf,
        cells: left_cells,
        right: left_right,
    };
    let right = Node {
        pgno: node.pgno,
        leaf: node.leaf,
        cells: right_cells,
        right: node.right,
    };
    debug_assert!(!left.cells.is_empty() && !right.cells.is_empty());
    Ok((left, sep, right))
}

/// Whether an oversize leaf is exactly its page's current content plus one cell after all
/// of it, on its parent's rightmost child: the pattern of ascending-key inserts (SQLite's
/// `balance_quick` case). Compared cell by cell against the page image from the descent,
/// so a replaced or removed cell, or any other edit, takes the ordinary split.
fn appends_to(node: &Node, step: &Step, rightmost: bool) -> Result<bool> {
    if !node.leaf || !rightmost || node.cells.len() < 2 {
        return Ok(false);
    }
    let p = step.view();
    let n = node.cells.len() - 1;
    if p.ncells() != n {
        return Ok(false);
    }
    for (j, cell) in node.cells[..n].iter().enumerate() {
        if p.cell(j)? != &cell[..] {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Concatenate two siblings separated by `sep` (their parent's interior cell) into one
/// node on the right sibling's page. Interior merges pull the separator down (with its
/// chain) as the cell pointing at the left node's rightmost child; leaf merges drop it,
/// so the caller must have freed a leaf separator's chains.
fn concat(mut left: Node, sep: Vec<u8>, mut right: Node) -> Node {
    let mut cells = std::mem::take(&mut left.cells);
    if !left.leaf {
        cells.push(with_child(sep, left.right));
    }
    cells.append(&mut right.cells);
    Node {
        pgno: right.pgno,
        leaf: right.leaf,
        cells,
        right: right.right,
    }
}

/// Restore the page invariants from the leaf (`node`, the edited last level of `path`)
/// up to the root, writing every page that changed.
///
/// `shrank` says whether the leaf may have lost bytes (a removal or a replaced value). A
/// leaf that only gained a cell is not rebalanced for being underfull: it was underfull
/// before, and merging it now would undo the append split that just left it with one
/// cell (SQLite likewise rebalances after an insert only on overflow).
fn balance(
    store: &mut dyn PageWrite,
    opts: TreeOptions,
    path: &[Step],
    mut node: Node,
    shrank: bool,
) -> Result<()> {
    let f = Format::of(&*store);
    let cap = f.capacity();
    for d in (1..path.len()).rev() {
        debug_assert_eq!(node.pgno, path[d].pgno);
        let step = &path[d - 1];
        let i = step.idx;
        let over = node.used(&f) > cap;
        let may_merge = shrank || d + 1 < path.len();
        let under = !over && may_merge && f.underfull(node.used(&f));
        if under && f.policy().defers_merges && !node.cells.is_empty() {
            // Deferred: stay in the page while the node fits there; merge only when it
            // must be copied anyway (its new version does not fit beside the old).
            if let Some(img) = f.image(&*store, node.pgno, node.leaf, &node.cells, node.right)? {
                store.write(node.pgno, img)?;
                return Ok(());
            }
            note(Event::DeferredMerge);
        }
        // Loaded lazily: a node that fits where it is ends the walk untouched.
        let parent = || Node::from_view(&f, &step.view());
        if !over && !under {
            let at = write_node(store, &f, &node)?;
            let pgno = node.pgno;
            if at == pgno {
                return Ok(());
            }
            let mut p = parent()?;
            p.set_child(i, at);
            node = p;
            continue;
        }
        debug_assert_eq!(step.view().child(i).ok(), Some(node.pgno));
        if over {
            // The parent gains or changes one separator: `change` is (replace, at, cell,
            // child pointer to set afterwards).
            let change = if appends_to(&node, &path[d], i == step.view().ncells())? {
                // Append split: the node is its page plus one cell after all of them. The
                // page stays as it is (not even rewritten) and the new cell starts a fresh
                // right sibling, so ascending-key inserts leave full pages behind instead
                // of half-full ones and a split costs one new page and the parent.
                let last = node
                    .cells
                    .last()
                    .expect("an oversize node has cells")
                    .clone();
                append_split(store, &f, node.pgno, i, last)?
            } else {
                // A sibling with room takes part of the node (no new page), else it splits.
                let shared = if opts.redistribute && f.overwrites_in_place() {
                    share_with_sibling(store, &f, &step.view(), i, node)?
                } else {
                    Err(node)
                };
                match shared {
                    Ok((a, sep, right_at)) => (true, a, sep, (a + 1, right_at)),
                    Err(node) => {
                        let (mut left, sep, mut right) = split(store, &f, node)?;
                        left.pgno = store.allocate()?;
                        // The left half is on a fresh page, so it lands where it was put.
                        let left_at = write_node(store, &f, &left)?;
                        if !f.policy().splits_in_place {
                            // A version split: the right half moves to a fresh page too, and
                            // the old node dies (freed; the store keeps it untouched until
                            // commit).
                            let old = right.pgno;
                            right.pgno = store.allocate()?;
                            store.free(old)?;
                        }
                        let right_at = write_node(store, &f, &right)?;
                        (false, i, with_child(sep, left_at), (i + 1, right_at))
                    }
                }
            };
            let (replace, at, cell, child) = change;
            let edit = (replace, at, Some(cell));
            node = match patch_parent(store, &f, &path[..d], edit, child)? {
                Some(parent) => parent,
                None => return Ok(()),
            };
            continue;
        }
        let view = step.view();
        if view.ncells() == 0 {
            // Only a root pointer has no keys. Its child has no sibling to merge with,
            // so it moves up into the root instead, if it fits there.
            if d != 1 {
                return Err(Error::corrupt(step.pgno, "interior page has no keys"));
            }
            return lift_into_root(store, &f, step.pgno, node, true);
        }
        // Pair with the left sibling when there is one, else the right one.
        let a = i.saturating_sub(1);
        let node_empty = node.cells.is_empty();
        let (left, right) = if a == i {
            let sibling = Node::load(store, &f, view.child(a + 1)?)?;
            (node, sibling)
        } else {
            (Node::load(store, &f, view.child(a)?)?, node)
        };
        same_depth(step.pgno, &left, &right)?;
        let sep = view.cell(a)?.to_vec();
        let merged_used =
            left.used(&f) + right.used(&f) + if left.leaf { 0 } else { f.cost(sep.len()) };
        let left_pgno = left.pgno;
        let fixes = merged_used <= cap || opts.redistribute || (node_empty && !left.leaf);
        if fixes && left.leaf {
            // A merge drops a leaf separator and redistribution replaces it.
            overflow::free_cell_chains(store, step.pgno, false, &sep)?;
        }
        let (edit, child) = if merged_used <= cap {
            let at = write_node(store, &f, &concat(left, sep, right))?;
            store.free(left_pgno)?;
            // The right sibling's pointer (cell a+1 or the right child) takes over.
            ((true, a, None), (a, at))
        } else if opts.redistribute || (node_empty && !left.leaf) {
            // An interior node without keys is always fixed: it would be a useless
            // level of indirection with a single child.
            let (mut l, sep, r) = split(store, &f, concat(left, sep, right))?;
            l.pgno = left_pgno;
            let left_at = write_node(store, &f, &l)?;
            let right_at = write_node(store, &f, &r)?;
            ((true, a, Some(with_child(sep, left_at))), (a + 1, right_at))
        } else {
            // Leave it underfull; the tree is still valid.
            let kept = if a == i { left } else { right };
            let at = write_node(store, &f, &kept)?;
            if at == kept.pgno {
                return Ok(());
            }
            ((false, i, None), (i, at))
        };
        node = match patch_parent(store, &f, &path[..d], edit, child)? {
            Some(parent) => parent,
            None => return Ok(()),
        };
    }
    balance_root(store, &f, node)
}

/// A balance step's change to the parent: (replace, at, cell, child pointer to set
/// afterwards), as `patch_parent` takes it.
type ParentChange = (bool, usize, Vec<u8>, (usize, Pgno));

/// The append split of leaf `pgno`, child `i` (the rightmost) of its parent, by `last`,
/// a cell that goes after all of the leaf's: the leaf stays as it is and `last` starts a
/// fresh right sibling. Returns the parent's change as `balance` makes it.
fn append_split(
    store: &mut dyn PageWrite,
    f: &Format,
    pgno: Pgno,
    i: usize,
    last: Vec<u8>,
) -> Result<ParentChange> {
    let sep = separator_from_leaf(store, pgno, &last)?;
    let right = Node {
        pgno: store.allocate()?,
        leaf: true,
        cells: vec![last],
        right: 0,
    };
    // A fresh page: it lands where it was put.
    let right_at = write_node(store, f, &right)?;
    Ok((false, i, with_child(sep, pgno), (i + 1, right_at)))
}

/// An insert of `cell` past the last entry of a full leaf, the rightmost child of its
/// parent (`path` ends at the leaf; the leaf's page unchanged): what `balance` does for
/// the leaf plus that cell (an append split, as `appends_to` finds it), without loading
/// the leaf's cells to find out. `Err(cell)` gives the cell back when the insert is not
/// that case.
fn append_past_full_leaf(
    store: &mut dyn PageWrite,
    f: &Format,
    opts: TreeOptions,
    path: &[Step],
    at: usize,
    cell: Vec<u8>,
) -> Result<std::result::Result<(), Vec<u8>>> {
    // Only where a failed in-place edit means the cell does not fit (`PageLayout::
    // edit_leaf`): a layout that never edits in place rebuilds every leaf it writes.
    // A leaf that is the root has no parent to take a sibling.
    let d = path.len() - 1;
    if !f.layout.edits_in_place() || d == 0 {
        return Ok(Err(cell));
    }
    let (leaf, parent) = (&path[d], &path[d - 1]);
    let (lv, pv) = (leaf.view(), parent.view());
    let i = parent.idx;
    if !lv.is_leaf() || at != lv.ncells() || lv.ncells() == 0 || i != pv.ncells() {
        return Ok(Err(cell));
    }
    // The node `balance` would be given: the page's cells plus `cell`, over a page (the
    // edit did not fit).
    debug_assert!(f.used(&lv)? + f.cost(cell.len()) > f.capacity());
    debug_assert_eq!(pv.child(i).ok(), Some(leaf.pgno));
    let (replace, at, sep, child) = append_split(store, f, leaf.pgno, i, cell)?;
    if let Some(node) = patch_parent(store, f, &path[..d], (replace, at, Some(sep)), child)? {
        // `balance` goes on from the parent, which may merge (it is not the edited leaf).
        balance(store, opts, &path[..d], node, true)?;
    }
    Ok(Ok(()))
}

/// Two children of interior page `parent` that are about to be combined must both be
/// leaves or both interior; anything else is a damaged tree.
fn same_depth(parent: Pgno, a: &Node, b: &Node) -> Result<()> {
    if a.leaf != b.leaf {
        return Err(Error::corrupt(
            parent,
            format!("children {} and {} are at different depths", a.pgno, b.pgno),
        ));
    }
    Ok(())
}

/// An oversize node `node` (child `i` of `parent`) shares its cells with a sibling that
/// has room, instead of splitting into a new page: the two are concatenated (an interior
/// pair pulls their separator down) and cut again into the same two pages, with a new
/// separator in the parent. SQLite balances across siblings the same way
/// (`balance_nonroot`), which is what keeps its pages fuller than a split alone does
/// after random inserts. Tried with the left sibling, then the right; taken only when
/// the pair then leaves a quarter of a page free between them, so the next inserts do
/// not overflow again at once (an eighth packed a 100,000-row random-key load 3 %
/// tighter for 5 % more instructions; BENCHMARKS.md, "Fuller pages"). `Err(node)`
/// gives the node back when no sibling has the room (the caller splits). Only for layouts that rewrite pages in place (a DHL page
/// keeps versions, and its overflow relocates instead).
fn share_with_sibling(
    store: &mut dyn PageWrite,
    f: &Format,
    parent: &CellArray,
    i: usize,
    node: Node,
) -> Result<std::result::Result<Shared, Node>> {
    let cap = f.capacity();
    let room = 2 * cap - cap / 4;
    let mut node = Some(node);
    for a in [i.checked_sub(1), (i < parent.ncells()).then_some(i)]
        .into_iter()
        .flatten()
    {
        let n = node.as_ref().expect("given back only at the end");
        let sib = parent.child(if a == i { i + 1 } else { a })?;
        let sep = parent.cell(a)?;
        // Measured on the page first: most siblings of a full node are full too.
        let sep_cost = if n.leaf { 0 } else { f.cost(sep.len()) };
        let data = store.read(sib)?;
        let opened = f.open(sib, &data)?;
        let view = opened.attach(&data);
        if n.used(f) + f.used(&view)? + sep_cost > room {
            continue;
        }
        let sibling = Node::from_view(f, &view)?;
        same_depth(parent.pgno(), &sibling, n)?;
        let sep = sep.to_vec();
        let n = node.take().expect("checked above");
        let (left, right) = if a == i { (n, sibling) } else { (sibling, n) };
        if left.leaf {
            // The new separator replaces this one (with its own copy of a long key).
            overflow::free_cell_chains(store, parent.pgno(), false, &sep)?;
        }
        let left_pgno = left.pgno;
        let (mut l, sep, r) = split(store, f, concat(left, sep, right))?;
        l.pgno = left_pgno;
        let left_at = write_node(store, f, &l)?;
        let right_at = write_node(store, f, &r)?;
        return Ok(Ok((a, with_child(sep, left_at), right_at)));
    }
    Ok(Err(node.expect("no sibling took it")))
}

/// What a sibling that took part of a node leaves the parent: the index of the separator
/// it replaces, the new separator (pointing at the left page), and the right page.
type Shared = (usize, Vec<u8>, Pgno);

/// A balance step's change to the parent of the node it balanced, `path` being the path
/// to that parent: `edit` = (replace, at, cell) removes cell `at` if `replace` and puts
/// `cell` (if any) there, then child `child.0` points at `child.1`. A layout that edits
/// in place gets it on a copy of the parent's page, without loading the parent as a
/// node, when the result fits and needs no further balancing (the root, or a page not
/// underfull): None, done. Otherwise the parent as a node with the change made, for the
/// caller to balance in turn (nothing written yet).
fn patch_parent(
    store: &mut dyn PageWrite,
    f: &Format,
    path: &[Step],
    (replace, at, cell): (bool, usize, Option<Vec<u8>>),
    child: (usize, Pgno),
) -> Result<Option<Node>> {
    let step = path.last().expect("a balanced node has a parent");
    if f.layout.edits_in_place() {
        let child = match planted(Plant::ParentPatchChildBeforeCell) && !replace {
            true => (child.0.saturating_sub(1), child.1),
            false => child,
        };
        let mut img = PageRef::from(&step.page[..]);
        let buf = std::sync::Arc::get_mut(&mut img).expect("a new image has one owner");
        let edit = LeafEdit {
            tid: store.tid(),
            at,
            remove: replace,
            insert: cell.as_deref(),
        };
        if let Some(used) = f
            .layout
            .edit_interior_mut(step.pgno, buf, f.geometry, edit, child)?
        {
            // A root left without keys is lifted (`balance_root`), so it goes the node way.
            if used > 0 && (path.len() == 1 || !f.underfull(used)) {
                store.write(step.pgno, img)?;
                return Ok(None);
            }
        }
    }
    let mut parent = Node::from_view(f, &step.view())?;
    match (replace, cell) {
        (true, Some(cell)) => parent.cells[at] = cell,
        (true, None) => {
            parent.cells.remove(at);
        }
        (false, Some(cell)) => parent.cells.insert(at, cell),
        (false, None) => {}
    }
    parent.set_child(child.0, child.1);
    Ok(Some(parent))
}

/// The root keeps its page number: a split moves both halves into new pages, and a
/// root left with a single child absorbs that child (if it fits: DHL).
fn balance_root(store: &mut dyn PageWrite, f: &Format, node: Node) -> Result<()> {
    if node.used(f) > f.capacity() {
        let root = node.pgno;
        let (mut left, sep, mut right) = split(store, f, node)?;
        left.pgno = store.allocate()?;
        right.pgno = store.allocate()?;
        // Both on fresh pages: they land where they were put.
        write_node(store, f, &left)?;
        write_node(store, f, &right)?;
        let cells = vec![with_child(sep, left.pgno)];
        write_root(
            store,
            f,
            Node {
                pgno: root,
                leaf: false,
                cells,
                right: right.pgno,
            },
        )
    } else if !node.leaf && node.cells.is_empty() {
        let child = Node::load(store, f, node.right)?;
        lift_into_root(store, f, node.pgno, child, false)
    } else {
        write_root(store, f, node)
    }
}

/// Visit every tree page (parents before children). A page reached twice or a path
/// deeper than `MAX_DEPTH` is corruption; reporting it keeps walks finite.
fn walk<S: PageRead + ?Sized>(
    store: &S,
    root: Pgno,
    f: &mut dyn FnMut(&CellArray) -> Result<()>,
) -> Result<()> {
    let fmt = Format::of(store);
    let mut seen = HashSet::new();
    let mut stack = vec![(root, 1usize)];
    while let Some((pgno, depth)) = stack.pop() {
        if depth > MAX_DEPTH {
            return Err(Error::corrupt(
                pgno,
                format!("tree deeper than {MAX_DEPTH} levels"),
            ));
        }
        if !seen.insert(pgno) {
            return Err(Error::corrupt(pgno, "page is referenced twice in the tree"));
        }
        let data = store.read(pgno)?;
        let opened = fmt.open_page(pgno, &data)?;
        let p = opened.attach(&data);
        f(&p)?;
        if !p.is_leaf() {
            for i in (0..=p.ncells()).rev() {
                stack.push((p.child(i)?, depth + 1));
            }
        }
    }
    Ok(())
}

/// Call `visit` for every page the tree owns: its nodes (root first) and every overflow
/// page. Needs no comparator, so it can account for pages of any tree.
pub(crate) fn for_each_page(
    store: &dyn PageRead,
    root: Pgno,
    visit: &mut dyn FnMut(Pgno),
) -> Result<()> {
    walk(store, root, &mut |p| {
        visit(p.pgno());
        for_each_chain(p, &mut |len, first| {
            for o in overflow::pages(store, p.pgno(), len, first)? {
                visit(o);
            }
            Ok(())
        })
    })
}

/// Call `out(page, holder)` for every page the tree at `root` owns other than the root:
/// the page holding the one pointer that reaches it (its parent node, the node whose cell owns
/// the chain it starts, or the chain page before it): what moving a page to another
/// number must rewrite (`auto_vacuum`'s relocation). With `leaves` false the leaves are
/// not read, so the chains of leaf values are left out: every leaf is at the depth of
/// the leftmost one (the balance invariant), so the nodes just above it are known
/// without reading their children.
pub(crate) fn holders<S: PageRead + ?Sized>(
    store: &S,
    root: Pgno,
    leaves: bool,
    out: &mut dyn FnMut(Pgno, Pgno) -> Result<()>,
) -> Result<()> {
    let fmt = Format::of(store);
    let usable = fmt.geometry.usable;
    // The depth of the leaves, from the leftmost path.
    let mut leaf_depth = 1usize;
    let mut p = root;
    loop {
        if leaf_depth > MAX_DEPTH {
            return Err(Error::corrupt(
                p,
                format!("tree deeper than {MAX_DEPTH} levels"),
            ));
        }
        let data = store.read(p)?;
        let node = fmt.open_page(p, &data)?;
        let node = node.attach(&data);
        if node.is_leaf() {
            break;
        }
        p = node.child(0)?;
        leaf_depth += 1;
    }
    let mut stack = vec![(root, 1usize)];
    while let Some((pgno, depth)) = stack.pop() {
        let data = store.read(pgno)?;
        let node = fmt.open_page(pgno, &data)?;
        let node = node.attach(&data);
        if node.is_leaf() != (depth == leaf_depth) {
            return Err(Error::corrupt(
                pgno,
                format!("node at depth {depth} where the leaves are at depth {leaf_depth}"),
            ));
        }
        chain_holders(store, usable, &node, out)?;
        if node.is_leaf() {
            continue;
        }
        for i in 0..=node.ncells() {
            let child = node.child(i)?;
            out(child, pgno)?;
            if leaves || depth + 1 < leaf_depth {
                stack.push((child, depth + 1));
            }
        }
    }
    Ok(())
}

/// [`holders`] of the pages of every chain the cells of `node` own.
fn chain_holders<S: PageRead + ?Sized>(
    store: &S,
    usable: usize,
    node: &CellArray,
    out: &mut dyn FnMut(Pgno, Pgno) -> Result<()>,
) -> Result<()> {
    for i in 0..node.ncells() {
        let c = node.cell(i)?;
        for (len, first) in overflow::cell_chains(node.is_leaf(), usable, c)
            .into_iter()
            .flatten()
        {
            let mut holder = node.pgno();
            for o in overflow::pages(store, node.pgno(), len, first)? {
                out(o, holder)?;
                holder = o;
            }
        }
    }
    Ok(())
}

/// Call `f(len, first)` for every overflow chain the cells of `p` own (long keys' tails
/// in leaves and interior pages, leaf values).
fn for_each_chain(p: &CellArray, f: &mut dyn FnMut(u32, Pgno) -> Result<()>) -> Result<()> {
    for i in 0..p.ncells() {
        for (len, first) in overflow::cell_chains(p.is_leaf(), p.usable(), p.cell(i)?)
            .into_iter()
            .flatten()
        {
            f(len, first)?;
        }
    }
    Ok(())
}

/// Number of entries.
pub(crate) fn count(store: &dyn PageRead, root: Pgno) -> Result<u64> {
    let mut n = 0u64;
    walk(store, root, &mut |p| {
        if p.is_leaf() {
            n += p.ncells() as u64;
        }
        Ok(())
    })?;
    Ok(n)
}

/// Every page of the tree except the root, overflow pages included. All pages are read
/// before any is freed.
fn owned_pages(store: &dyn PageWrite, root: Pgno) -> Result<Vec<Pgno>> {
    let mut pages = Vec::new();
    walk(store, root, &mut |p| {
        if p.pgno() != root {
            pages.push(p.pgno());
        }
        for_each_chain(p, &mut |len, first| {
            pages.extend(overflow::pages(store, p.pgno(), len, first)?);
            Ok(())
        })
    })?;
    Ok(pages)
}

/// Remove every entry, freeing all pages but the root.
pub(crate) fn clear(store: &mut dyn PageWrite, root: Pgno) -> Result<()> {
    let f = Format::of(&*store);
    for pgno in owned_pages(store, root)? {
        store.free(pgno)?;
    }
    let empty = Node {
        pgno: root,
        leaf: true,
        cells: Vec::new(),
        right: 0,
    };
    // An empty version always fits, so the root stays a leaf.
    write_root(store, &f, empty)
}

/// Free every page of the tree including the root.
pub(crate) fn destroy(store: &mut dyn PageWrite, root: Pgno) -> Result<()> {
    for pgno in owned_pages(store, root)? {
        store.free(pgno)?;
    }
    store.free(root)
}
