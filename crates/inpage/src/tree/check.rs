//! Full structural check of one tree.
//!
//! Walks the tree depth-first carrying the key bounds each page inherits from its
//! ancestors (`lo <= k < hi`, see the separator invariant in `tree`), and verifies every
//! invariant the write path relies on: page structure in the store's layout (stock: cells
//! in bounds, no overlap, exact space accounting; DHL: the visible version is valid),
//! cell size limit, cells within the layout's capacity, long keys' tail chains (owned
//! pages like value chains, read whole for the order checks), strictly
//! increasing keys under the caller's comparator, keys inside the inherited bounds (both
//! skipped for probe-ordered trees, whose order only their user knows), equal
//! leaf depth, non-empty non-root pages, interior pages with keys except a root pointer
//! (a keyless root with one child), and overflow chains of exactly the length their value
//! needs.
//!
//! Each owned page is reported to `visit` once. The checker also keeps its own set of
//! pages seen, so a page referenced twice (a shared subtree or a cycle) is reported as
//! corruption instead of being walked again, which also keeps the walk finite.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::collections::HashSet;

use crate::error::{Error, Pgno, Result};
use crate::page::cell::{CellKey, Payload};
use crate::page::PageRead;

use super::btree::MAX_DEPTH;
use super::format::Format;
use super::{overflow, CmpFn, TreeStats};

struct Checker<'a> {
    store: &'a dyn PageRead,
    /// None: a probe-ordered tree, whose key order the engine cannot know.
    cmp: Option<&'a CmpFn>,
    visit: &'a mut dyn FnMut(Pgno) -> Result<()>,
    seen: HashSet<Pgno>,
    stats: TreeStats,
    leaf_depth: Option<u32>,
}

pub(crate) fn check(
    store: &dyn PageRead,
    root: Pgno,
    cmp: Option<&CmpFn>,
    visit: &mut dyn FnMut(Pgno) -> Result<()>,
) -> Result<TreeStats> {
    let mut c = Checker {
        store,
        cmp,
        visit,
        seen: HashSet::new(),
        stats: TreeStats::default(),
        leaf_depth: None,
    };
    c.tree_page(root, root, None, None, 1)?;
    c.stats.depth = c.leaf_depth.unwrap_or(1);
    Ok(c.stats)
}

impl Checker<'_> {
    /// Claim `pgno` for this tree (reached from page `from`).
    fn own(&mut self, pgno: Pgno, from: Pgno) -> Result<()> {
        if !self.seen.insert(pgno) {
            return Err(Error::corrupt(
                pgno,
                format!("page is referenced twice (again from page {from})"),
            ));
        }
        (self.visit)(pgno)
    }

    fn tree_page(
        &mut self,
        pgno: Pgno,
        parent: Pgno,
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
        depth: u32,
    ) -> Result<()> {
        if depth as usize > MAX_DEPTH {
            return Err(Error::corrupt(
                parent,
                format!("tree deeper than {MAX_DEPTH} levels"),
            ));
        }
        self.own(pgno, parent)?;
        let data = self.store.read(pgno)?;
        let f = Format::of(self.store);
        let opened = f.open_checked(pgno, &data)?;
        let p = opened.attach(&data);
        let used = f.used(&p)?;
        if used > f.capacity() {
            return Err(Error::corrupt(
                pgno,
                format!(
                    "cells use {used} bytes, more than the capacity {}",
                    f.capacity()
                ),
            ));
        }
        let n = p.ncells();
        let cmp = self.cmp;
        let store = self.store;
        // Full keys (a long key's tail read from its chain, whose pages this page owns;
        // the cell decoder already refused a long key of an inline length).
        let mut keys: Vec<Cow<[u8]>> = Vec::with_capacity(n);
        for i in 0..n {
            let k = match p.key(i)? {
                CellKey::Inline(k) => Cow::Borrowed(k),
                CellKey::Long { len, prefix, first } => {
                    let mut full = prefix.to_vec();
                    let tail = len - prefix.len() as u32;
                    overflow::walk(store, pgno, tail, first, &mut |ovfl, data| {
                        self.stats.overflow_pages += 1;
                        full.extend_from_slice(data);
                        self.own(ovfl, pgno)
                    })?;
                    Cow::Owned(full)
                }
            };
            keys.push(k);
        }
        for (i, k) in keys.iter().enumerate() {
            let k = &k[..];
            let Some(cmp) = cmp else {
                continue;
            };
            if i > 0 && cmp(&keys[i - 1], k) != Ordering::Less {
                return Err(Error::corrupt(
                    pgno,
                    format!(
                        "key {i} is not greater than key {} (cells out of order)",
                        i - 1
                    ),
                ));
            }
            if lo.is_some_and(|lo| cmp(k, lo) == Ordering::Less) {
                return Err(Error::corrupt(
                    pgno,
                    format!("key {i} is below the lower bound set by ancestor separators (parent page {parent})"),
                ));
            }
            if hi.is_some_and(|hi| cmp(k, hi) != Ordering::Less) {
                return Err(Error::corrupt(
                    pgno,
                    format!("key {i} is not below the upper bound set by ancestor separators (parent page {parent})"),
                ));
            }
        }
        if p.is_leaf() {
            match self.leaf_depth {
                None => self.leaf_depth = Some(depth),
                Some(d) if d != depth => {
                    return Err(Error::corrupt(
                        pgno,
                        format!("leaf at depth {depth} but other leaves are at depth {d}"),
                    ))
                }
                Some(_) => {}
            }
            if n == 0 && depth > 1 {
                return Err(Error::corrupt(pgno, "non-root leaf has no cells"));
            }
            self.stats.leaf_pages += 1;
            self.stats.entries += n as u64;
            for i in 0..n {
                if let Payload::Overflow { len, first } = p.payload(i)? {
                    overflow::walk(store, pgno, len, first, &mut |ovfl, _| {
                        self.stats.overflow_pages += 1;
                        self.own(ovfl, pgno)
                    })?;
                }
            }
        } else {
            // A root pointer (DHL: the root's content moved to its only child) is the one
            // interior node allowed no keys.
            if n == 0 && depth > 1 {
                return Err(Error::corrupt(pgno, "interior page has no keys"));
            }
            self.stats.interior_pages += 1;
            for i in 0..=n {
                let child = p.child(i)?;
                let clo = if i == 0 { lo } else { Some(&keys[i - 1][..]) };
                let chi = if i == n { hi } else { Some(&keys[i][..]) };
                self.tree_page(child, pgno, clo, chi, depth + 1)?;
            }
        }
        Ok(())
    }
}
