//! B+tree operations: search, insert, remove and the rebalancing they trigger.
//!
//! A write descends from the root, remembering the path (page image and child index at
//! each level). The common case edits the leaf in place with the slotted-page helpers and
//! writes it back. Otherwise the leaf becomes an in-memory [`Node`] (a list of cells that
//! may temporarily exceed a page) and [`balance`] walks up the path one level at a time:
//! an oversize node splits and inserts one separator into its parent; an underfull node
//! merges with (or borrows from) a sibling, which removes or replaces one separator in the
//! parent. Either way only the parent changed, so the loop continues with the parent and
//! stops at the first level that needs nothing. The parent is re-read from the image
//! captured during the descent, which is still current because a level is only written
//! when the loop leaves it.
//!
//! Why splits always succeed: a node entering `balance` holds at most one page of cells
//! plus one extra cell (an insert, or a separator that grew), every cell with its pointer
//! is at most a quarter of a page, so a cut at the byte midpoint leaves both halves
//! within a page (see `split_point`). Redistribution is a merge followed by such a split
//! of two pages, one of them under a third full, so the same bound applies.

use std::collections::HashSet;

use crate::error::{Error, Pgno, Result};
use crate::page::slotted::{self, Page, Payload, PTR_SIZE};
use crate::page::{PageRead, PageRef, PageWrite};

use super::{overflow, CmpFn, TreeOptions, MAX_VALUE_LEN};

/// No valid tree is this deep (interior pages have at least two children and page
/// numbers are u32), so deeper paths mean a cycle in corrupt child pointers.
pub(crate) const MAX_DEPTH: usize = 64;

/// One level of a root-to-leaf path: the page image read during the descent and, for
/// interior pages, the index of the child the path continues into.
pub(crate) struct Step {
    pub pgno: Pgno,
    pub page: PageRef,
    pub idx: usize,
}

/// A page's cells held in memory while they are being reshaped; may exceed a page.
pub(crate) struct Node {
    pub pgno: Pgno,
    pub leaf: bool,
    pub cells: Vec<Vec<u8>>,
    /// Rightmost child (interior nodes only).
    pub right: Pgno,
}

impl Node {
    fn from_page(p: &Page) -> Result<Node> {
        let right = if p.is_leaf() { 0 } else { p.child(p.ncells())? };
        let node = Node {
            pgno: p.pgno(),
            leaf: p.is_leaf(),
            cells: p.cells()?,
            right,
        };
        // Overlapping cells in a corrupt page could add up to more than a page; every
        // size bound in `balance` assumes a loaded node fits.
        if node.used() > slotted::capacity(p.usable()) {
            return Err(Error::corrupt(
                p.pgno(),
                "cells add up to more than the page holds (overlapping cells)",
            ));
        }
        Ok(node)
    }

    fn load(store: &dyn PageWrite, pgno: Pgno) -> Result<Node> {
        let data = store.read(pgno)?;
        Node::from_page(&Page::open(pgno, &data, store.usable_size())?)
    }

    /// Bytes of cells and pointers (what must fit in `slotted::capacity`).
    fn used(&self) -> usize {
        self.cells.iter().map(|c| c.len() + PTR_SIZE).sum()
    }

    fn child(&self, i: usize) -> Result<Pgno> {
        let c = match self.cells.get(i) {
            Some(cell) => slotted::cell_child(cell),
            None => self.right,
        };
        if c == 0 {
            return Err(Error::corrupt(self.pgno, format!("child pointer {i} is 0")));
        }
        Ok(c)
    }

    fn write(&self, store: &mut dyn PageWrite) -> Result<()> {
        debug_assert!(self.used() <= slotted::capacity(store.usable_size()));
        let buf = slotted::build(
            store.page_size(),
            store.usable_size(),
            self.leaf,
            &self.cells,
            self.right,
        );
        store.write(self.pgno, buf)
    }
}

fn underfull(used: usize, usable: usize) -> bool {
    used * 3 < slotted::capacity(usable)
}

pub(crate) fn create(store: &mut dyn PageWrite) -> Result<Pgno> {
    let root = store.allocate()?;
    store.write(
        root,
        slotted::empty_leaf(store.page_size(), store.usable_size()),
    )?;
    Ok(root)
}

/// Path from `root` to the leaf whose key range contains `key`.
pub(crate) fn descend<S: PageRead + ?Sized>(
    store: &S,
    root: Pgno,
    cmp: &CmpFn,
    key: &[u8],
) -> Result<Vec<Step>> {
    let usable = store.usable_size();
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
        let p = Page::open(pgno, &page, usable)?;
        if p.is_leaf() {
            path.push(Step { pgno, page, idx: 0 });
            return Ok(path);
        }
        let idx = p.child_index(key, cmp)?;
        let child = p.child(idx)?;
        path.push(Step { pgno, page, idx });
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

pub(crate) fn get(
    store: &dyn PageRead,
    root: Pgno,
    cmp: &CmpFn,
    key: &[u8],
) -> Result<Option<Vec<u8>>> {
    if key.len() > slotted::max_key_len(store.usable_size()) {
        return Ok(None); // could never have been inserted
    }
    let path = descend(store, root, cmp, key)?;
    let leaf = path.last().expect("descend returns at least the root");
    let p = Page::open(leaf.pgno, &leaf.page, store.usable_size())?;
    match p.search(key, cmp)? {
        Ok(i) => Ok(Some(read_payload(store, leaf.pgno, p.payload(i)?)?)),
        Err(_) => Ok(None),
    }
}

/// Leaf cell for `key`/`value`, writing the overflow chain first if the value is large.
fn make_leaf_cell(store: &mut dyn PageWrite, key: &[u8], value: &[u8]) -> Result<Vec<u8>> {
    if slotted::value_is_inline(store.usable_size(), key.len(), value.len()) {
        Ok(slotted::leaf_cell_inline(key, value))
    } else {
        let first = overflow::write(store, value)?;
        Ok(slotted::leaf_cell_overflow(key, value.len() as u32, first))
    }
}

/// Read the value of cell `i` of `p` and free its overflow chain (the cell is about to
/// go away or be replaced).
fn take_value(store: &mut dyn PageWrite, p: &Page, i: usize) -> Result<Vec<u8>> {
    let payload = p.payload(i)?;
    let value = read_payload(store, p.pgno(), payload)?;
    if let Payload::Overflow { len, first } = payload {
        overflow::free(store, p.pgno(), len, first)?;
    }
    Ok(value)
}

pub(crate) fn insert(
    store: &mut dyn PageWrite,
    root: Pgno,
    cmp: &CmpFn,
    opts: TreeOptions,
    key: &[u8],
    value: &[u8],
) -> Result<Option<Vec<u8>>> {
    let usable = store.usable_size();
    let max = slotted::max_key_len(usable);
    if key.len() > max {
        return Err(Error::KeyTooLarge {
            len: key.len(),
            max,
        });
    }
    if value.len() > MAX_VALUE_LEN {
        return Err(Error::ValueTooLarge {
            len: value.len(),
            max: MAX_VALUE_LEN,
        });
    }
    let path = descend(store, root, cmp, key)?;
    let leaf = path.last().expect("descend returns at least the root");
    let p = Page::open(leaf.pgno, &leaf.page, usable)?;
    let mut buf = leaf.page.to_vec();
    let (i, old) = match p.search(key, cmp)? {
        Ok(i) => {
            let old = take_value(store, &p, i)?;
            slotted::remove_cell(leaf.pgno, &mut buf, usable, i)?;
            (i, Some(old))
        }
        Err(i) => (i, None),
    };
    let cell = make_leaf_cell(store, key, value)?;
    if slotted::insert_cell(leaf.pgno, &mut buf, usable, i, &cell)? {
        finish_leaf(store, opts, &path, buf)?;
    } else {
        let mut node = Node::from_page(&Page::open(leaf.pgno, &buf, usable)?)?;
        node.cells.insert(i, cell);
        balance(store, opts, &path, node)?;
    }
    Ok(old)
}

pub(crate) fn remove(
    store: &mut dyn PageWrite,
    root: Pgno,
    cmp: &CmpFn,
    opts: TreeOptions,
    key: &[u8],
) -> Result<Option<Vec<u8>>> {
    let usable = store.usable_size();
    if key.len() > slotted::max_key_len(usable) {
        return Ok(None);
    }
    let path = descend(store, root, cmp, key)?;
    let leaf = path.last().expect("descend returns at least the root");
    let p = Page::open(leaf.pgno, &leaf.page, usable)?;
    let Ok(i) = p.search(key, cmp)? else {
        return Ok(None);
    };
    let old = take_value(store, &p, i)?;
    let mut buf = leaf.page.to_vec();
    slotted::remove_cell(leaf.pgno, &mut buf, usable, i)?;
    finish_leaf(store, opts, &path, buf)?;
    Ok(Some(old))
}

/// Write an edited leaf that fits, rebalancing first if it became underfull.
fn finish_leaf(
    store: &mut dyn PageWrite,
    opts: TreeOptions,
    path: &[Step],
    buf: Vec<u8>,
) -> Result<()> {
    let usable = store.usable_size();
    let leaf = path.last().expect("path is never empty");
    let p = Page::open(leaf.pgno, &buf, usable)?;
    if path.len() == 1 || !underfull(p.used(), usable) {
        return store.write(leaf.pgno, buf);
    }
    let node = Node::from_page(&p)?;
    balance(store, opts, path, node)
}

/// Index where `sizes` (cell + pointer bytes) should be cut so both halves fit in `cap`
/// and the larger one is as small as possible. Leaves: left = `..m`, right = `m..`.
/// Interiors: cell `m` moves up as the separator, left = `..m`, right = `m+1..`; both
/// halves keep at least one cell.
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
/// node's page number; the left half gets page number 0 for the caller to assign.
fn split(node: Node, cap: usize) -> Result<(Node, Vec<u8>, Node)> {
    let sizes: Vec<usize> = node.cells.iter().map(|c| c.len() + PTR_SIZE).collect();
    let m = split_point(&sizes, !node.leaf, cap).ok_or_else(|| {
        Error::corrupt(
            node.pgno,
            format!("cannot split {} cells into two fitting pages", sizes.len()),
        )
    })?;
    let mut left_cells = node.cells;
    let mut right_cells = left_cells.split_off(m);
    let (sep, left_right) = if node.leaf {
        (slotted::cell_key(&right_cells[0]).to_vec(), 0)
    } else {
        let mid = right_cells.remove(0);
        (slotted::cell_key(&mid).to_vec(), slotted::cell_child(&mid))
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

/// Concatenate two siblings separated by `sep` in their parent into one node on the
/// right sibling's page. Interior merges pull the separator down as the cell pointing
/// at the left node's rightmost child.
fn concat(left: Node, sep: &[u8], right: Node) -> Node {
    let mut cells = left.cells;
    if !left.leaf {
        cells.push(slotted::interior_cell(left.right, sep));
    }
    cells.extend(right.cells);
    Node {
        pgno: right.pgno,
        leaf: right.leaf,
        cells,
        right: right.right,
    }
}

/// Restore the page invariants from the leaf (`node`, the edited last level of `path`)
/// up to the root, writing every page that changed.
fn balance(
    store: &mut dyn PageWrite,
    opts: TreeOptions,
    path: &[Step],
    mut node: Node,
) -> Result<()> {
    let usable = store.usable_size();
    let cap = slotted::capacity(usable);
    for d in (1..path.len()).rev() {
        debug_assert_eq!(node.pgno, path[d].pgno);
        let over = node.used() > cap;
        if !over && !underfull(node.used(), usable) {
            return node.write(store);
        }
        let step = &path[d - 1];
        let mut parent = Node::from_page(&Page::open(step.pgno, &step.page, usable)?)?;
        let i = step.idx;
        debug_assert_eq!(parent.child(i).ok(), Some(node.pgno));
        if over {
            let (mut left, sep, right) = split(node, cap)?;
            left.pgno = store.allocate()?;
            left.write(store)?;
            right.write(store)?;
            parent
                .cells
                .insert(i, slotted::interior_cell(left.pgno, &sep));
        } else {
            if parent.cells.is_empty() {
                return Err(Error::corrupt(parent.pgno, "interior page has no keys"));
            }
            // Pair with the left sibling when there is one, else the right one.
            let a = i.saturating_sub(1);
            let node_empty = node.cells.is_empty();
            let (left, right) = if a == i {
                let sibling = Node::load(store, parent.child(a + 1)?)?;
                (node, sibling)
            } else {
                (Node::load(store, parent.child(a)?)?, node)
            };
            if left.leaf != right.leaf {
                return Err(Error::corrupt(
                    parent.pgno,
                    format!(
                        "children {} and {} are at different depths",
                        left.pgno, right.pgno
                    ),
                ));
            }
            let sep = slotted::cell_key(&parent.cells[a]).to_vec();
            let merged_used = left.used()
                + right.used()
                + if left.leaf {
                    0
                } else {
                    slotted::CELL_HEADER + sep.len() + PTR_SIZE
                };
            let left_pgno = left.pgno;
            if merged_used <= cap {
                concat(left, &sep, right).write(store)?;
                store.free(left_pgno)?;
                // The right sibling's pointer (cell a+1 or the right child) takes over.
                parent.cells.remove(a);
            } else if opts.redistribute || (node_empty && !left.leaf) {
                // An interior node without keys is always fixed: it would be a useless
                // level of indirection with a single child.
                let (mut l, sep, r) = split(concat(left, &sep, right), cap)?;
                l.pgno = left_pgno;
                l.write(store)?;
                r.write(store)?;
                parent.cells[a] = slotted::interior_cell(left_pgno, &sep);
            } else {
                // Leave it underfull; the tree is still valid.
                return if a == i {
                    left.write(store)
                } else {
                    right.write(store)
                };
            }
        }
        node = parent;
    }
    balance_root(store, node)
}

/// The root keeps its page number: a split moves both halves into new pages, and a
/// root left with a single child absorbs that child.
fn balance_root(store: &mut dyn PageWrite, node: Node) -> Result<()> {
    let cap = slotted::capacity(store.usable_size());
    if node.used() > cap {
        let root = node.pgno;
        let (mut left, sep, mut right) = split(node, cap)?;
        left.pgno = store.allocate()?;
        right.pgno = store.allocate()?;
        left.write(store)?;
        right.write(store)?;
        let cells = vec![slotted::interior_cell(left.pgno, &sep)];
        Node {
            pgno: root,
            leaf: false,
            cells,
            right: right.pgno,
        }
        .write(store)
    } else if !node.leaf && node.cells.is_empty() {
        let child = Node::load(store, node.right)?;
        store.free(child.pgno)?;
        Node {
            pgno: node.pgno,
            ..child
        }
        .write(store)
    } else {
        node.write(store)
    }
}

/// Visit every tree page (parents before children). A page reached twice or a path
/// deeper than `MAX_DEPTH` is corruption; reporting it keeps walks finite.
fn walk<S: PageRead + ?Sized>(
    store: &S,
    root: Pgno,
    f: &mut dyn FnMut(&Page) -> Result<()>,
) -> Result<()> {
    let usable = store.usable_size();
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
        let p = Page::open(pgno, &data, usable)?;
        f(&p)?;
        if !p.is_leaf() {
            for i in (0..=p.ncells()).rev() {
                stack.push((p.child(i)?, depth + 1));
            }
        }
    }
    Ok(())
}

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
        if p.is_leaf() {
            for i in 0..p.ncells() {
                if let Payload::Overflow { len, first } = p.payload(i)? {
                    pages.extend(overflow::pages(store, p.pgno(), len, first)?);
                }
            }
        }
        Ok(())
    })?;
    Ok(pages)
}

pub(crate) fn clear(store: &mut dyn PageWrite, root: Pgno) -> Result<()> {
    for pgno in owned_pages(store, root)? {
        store.free(pgno)?;
    }
    store.write(
        root,
        slotted::empty_leaf(store.page_size(), store.usable_size()),
    )
}

pub(crate) fn destroy(store: &mut dyn PageWrite, root: Pgno) -> Result<()> {
    for pgno in owned_pages(store, root)? {
        store.free(pgno)?;
    }
    store.free(root)
}
