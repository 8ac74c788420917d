//! CONTRACT STUB — the tree helper replaces the bodies (keep these signatures).
//!
//! Stock slotted-page B+tree over `PageRead`/`PageWrite`.

use std::cmp::Ordering;

use crate::error::{Pgno, Result};
use crate::page::{PageRead, PageWrite};

/// Key comparator: a total order on byte strings.
pub type CmpFn = dyn Fn(&[u8], &[u8]) -> Ordering + Send + Sync;

/// Options that change how the tree reshapes itself (not the file format).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TreeOptions {
    /// On underflow, borrow cells from a sibling when a merge does not fit.
    /// The LS-MVBT paper turns this off.
    pub redistribute: bool,
}

impl Default for TreeOptions {
    fn default() -> Self {
        TreeOptions { redistribute: true }
    }
}

/// Counts gathered by `check`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TreeStats {
    pub entries: u64,
    pub depth: u32,
    pub leaf_pages: u64,
    pub interior_pages: u64,
    pub overflow_pages: u64,
}

/// Longest key a tree can store with pages of `usable` bytes.
pub fn max_key_len(usable: usize) -> usize {
    todo!("{usable}")
}

/// Create an empty tree; returns its root page, which never changes for the tree's life.
pub fn create(store: &mut dyn PageWrite) -> Result<Pgno> {
    todo!("{}", store.page_size())
}

/// Look up `key`.
pub fn get(store: &dyn PageRead, root: Pgno, cmp: &CmpFn, key: &[u8]) -> Result<Option<Vec<u8>>> {
    todo!("{}{root}{}{}", store.page_size(), cmp(key, key) as i8, key.len())
}

/// Insert or replace; returns the previous value.
pub fn insert(
    store: &mut dyn PageWrite,
    root: Pgno,
    cmp: &CmpFn,
    opts: TreeOptions,
    key: &[u8],
    value: &[u8],
) -> Result<Option<Vec<u8>>> {
    todo!("{}{root}{}{opts:?}{}{}", store.page_size(), cmp(key, key) as i8, key.len(), value.len())
}

/// Remove `key`; returns the removed value.
pub fn remove(
    store: &mut dyn PageWrite,
    root: Pgno,
    cmp: &CmpFn,
    opts: TreeOptions,
    key: &[u8],
) -> Result<Option<Vec<u8>>> {
    todo!("{}{root}{}{opts:?}{}", store.page_size(), cmp(key, key) as i8, key.len())
}

/// Number of entries.
pub fn count(store: &dyn PageRead, root: Pgno) -> Result<u64> {
    todo!("{}{root}", store.page_size())
}

/// Remove every entry, freeing all pages but the root.
pub fn clear(store: &mut dyn PageWrite, root: Pgno) -> Result<()> {
    todo!("{}{root}", store.page_size())
}

/// Free every page of the tree including the root.
pub fn destroy(store: &mut dyn PageWrite, root: Pgno) -> Result<()> {
    todo!("{}{root}", store.page_size())
}

/// Full structural check; calls `visit` once for every page the tree owns (interior,
/// leaf, overflow) so the caller can detect pages owned twice or leaked.
pub fn check(
    store: &dyn PageRead,
    root: Pgno,
    cmp: &CmpFn,
    visit: &mut dyn FnMut(Pgno) -> Result<()>,
) -> Result<TreeStats> {
    let _ = visit(root);
    todo!("{}{root}{}", store.page_size(), cmp(&[], &[]) as i8)
}

/// A position in a tree. Invalid (no current entry) until a positioning call succeeds.
pub struct Cursor<'s> {
    pub(crate) store: &'s dyn PageRead,
    pub(crate) root: Pgno,
    pub(crate) cmp: &'s CmpFn,
}

impl<'s> Cursor<'s> {
    pub fn new(store: &'s dyn PageRead, root: Pgno, cmp: &'s CmpFn) -> Cursor<'s> {
        Cursor { store, root, cmp }
    }
    /// Whether the cursor is on an entry.
    pub fn valid(&self) -> bool {
        todo!()
    }
    /// Move to the smallest key; Ok(false) if the tree is empty.
    pub fn first(&mut self) -> Result<bool> {
        todo!()
    }
    /// Move to the largest key; Ok(false) if the tree is empty.
    pub fn last(&mut self) -> Result<bool> {
        todo!()
    }
    /// Move to the first key >= `key`; Ok(false) if there is none.
    pub fn seek(&mut self, key: &[u8]) -> Result<bool> {
        todo!("{}", key.len())
    }
    /// Move to the last key <= `key`; Ok(false) if there is none.
    pub fn seek_le(&mut self, key: &[u8]) -> Result<bool> {
        todo!("{}", key.len())
    }
    /// Step forward; Ok(false) (and invalid) past the end.
    pub fn next(&mut self) -> Result<bool> {
        todo!()
    }
    /// Step back; Ok(false) (and invalid) before the start.
    pub fn prev(&mut self) -> Result<bool> {
        todo!()
    }
    /// Current key. Panics if invalid (a caller bug, not bad input).
    pub fn key(&self) -> &[u8] {
        todo!()
    }
    /// Current value, reading overflow pages if needed.
    pub fn value(&self) -> Result<Vec<u8>> {
        todo!()
    }
}
