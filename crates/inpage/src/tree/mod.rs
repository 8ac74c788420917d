//! B+tree over `PageRead`/`PageWrite`, in either node layout of the store
//! ([`Layout`](crate::page::Layout)): stock slotted pages ([`crate::page::slotted`]),
//! written in place, or DHL pages ([`crate::page::double_header`]), where every write keeps the
//! page's committed version next to the new one. The layout only changes how a node is
//! read, how much it may hold and how it is written (module `format`); the tree logic is
//! shared. Large values and the tails of long keys spill into overflow chains (module
//! `overflow`); every comparison sees a long key whole (its tail is read first). A tree is named by
//! its root page, which never changes: a root split moves the root's content into two new
//! children and turns the root into an interior page, and a root collapse copies the only
//! child back into the root.
//!
//! Invariants (all verified by [`check`]):
//! - **Separators.** An interior page with cells `(child_0, key_0) … (child_{n-1},
//!   key_{n-1})` and right child `child_n` satisfies `key_{i-1} <= k < key_i` for every
//!   key `k` in the subtree of `child_i` (missing bounds are unbounded). Hence a search
//!   descends into child `#{keys <= k}`. A separator need not be a key still present in
//!   the tree: removals never touch separators, and a split uses the first key of the new
//!   right half, which satisfies the bounds by construction.
//! - **Balance.** Every leaf is at the same depth: only the root split and the root
//!   pointer add a level and only the root collapse removes one, for all leaves at once.
//! - **Occupancy.** Every non-root page has at least one cell (an interior page with no
//!   key is always merged or, failing that, redistributed, even with `redistribute`
//!   off; a child of a root pointer is moved into the root instead, which always fits
//!   when it is empty). A root interior page has at least one cell, except a *root
//!   pointer* (DHL only): zero keys and one child, written when the root's new content
//!   does not fit next to its committed version (see `btree`). Pages below a third full
//!   are merged with a sibling when the result fits, else rebalanced if
//!   `TreeOptions::redistribute`, else left underfull.
//! - **Fit.** Every cell is at most `max_cell(usable)` bytes, a node holds at most its
//!   layout's capacity, and a maximal cell costs well under half of it, so an
//!   overflowing node (at most one capacity plus one cell) always splits into two
//!   fitting, non-empty halves; inserting a maximum-size key and value always succeeds.
//!   A node within capacity always fits a fresh page, which is what relocation relies on.
//! - **Ownership.** Each page is owned by exactly one tree position: pages are only freed
//!   after their last reference is dropped from the (rewritten) parent, and every
//!   allocated page is written before the operation returns. Overflow chains (values,
//!   long keys' tails) belong to exactly one cell each: a separator copied from a leaf
//!   key gets its own copy of the tail (see `btree`).
//! - **Order comes from the caller.** Every search (descent, leaf search, cursor seek)
//!   goes through a probe ([`ProbeFn`]: a stored key against the caller's target; a
//!   comparator call is one probe), and splits, merges, redistribution and relocation
//!   never compare keys. A probe always sees a key whole: a long key's tail is read
//!   from its chain first (a comparator cannot compare prefixes). So a tree whose order
//!   only the caller knows (probe-ordered, see
//!   `txn`) is kept valid by the same code, and `check` can verify it without its order.
//! - **DHL: committed versions are never disturbed.** A page that existed before the
//!   transaction is only rewritten by `double_header::build` keeping its committed version;
//!   overflow pages and relocated nodes go to pages allocated by the transaction; freed
//!   pages are left alone (the store's contract). So a crash or abort at any point leaves
//!   the committed tree readable at the last committed tid.

use std::cmp::Ordering;

use crate::error::{Pgno, Result};
use crate::page::{cell, PageRead};

mod btree;
mod check;
pub(crate) mod cursor;
#[cfg(test)]
mod double_header_tests;
mod format;
mod overflow;
#[cfg(test)]
mod tests;

pub(crate) use btree::Loader;
pub use cursor::Cursor;

/// Key comparator: a total order on byte strings.
pub type CmpFn = dyn Fn(&[u8], &[u8]) -> Ordering + Send + Sync;

/// A probe: orders a stored key against a target only the caller knows
/// (`probe(stored)`), so a tree can be searched in an order the engine never sees.
pub type ProbeFn<'p> = dyn FnMut(&[u8]) -> Ordering + 'p;

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

/// Longest value a tree can store (the cell's length field is a u32).
pub const MAX_VALUE_LEN: usize = u32::MAX as usize;

/// Longest key a tree can store (its length is a u32 in a long key's cell).
pub const MAX_KEY_LEN: usize = u32::MAX as usize;

/// Longest key stored whole in its cell with pages of `usable` bytes:
/// `(usable - 12) / 4 - 2 - 10` (112 bytes for 512-byte pages, 1008 for 4096). Longer
/// keys (up to [`MAX_KEY_LEN`]) keep a prefix in the cell and the rest in an overflow
/// chain, so reaching them costs page reads.
pub fn max_key_len(usable: usize) -> usize {
    cell::max_key_len(usable)
}

pub(crate) use btree::{
    clear, count, create, destroy, for_each_page, get, holders, insert, insert_by, insert_on_path,
    insert_placed, remove, remove_by, remove_on_path, LeafPos, Path,
};
pub(crate) use overflow::{
    extend_chain, overwrite as overwrite_value, read_range as read_value_range,
};

/// Full structural check; calls `visit` once for every page the tree owns (interior,
/// leaf, overflow) so the caller can detect pages owned twice or leaked.
pub fn check(
    store: &dyn PageRead,
    root: Pgno,
    cmp: &CmpFn,
    visit: &mut dyn FnMut(Pgno) -> Result<()>,
) -> Result<TreeStats> {
    check::check(store, root, Some(cmp), visit)
}

/// [`check`] without the key-order checks, for probe-ordered trees (structure, page
/// ownership, sizes and overflow chains only).
pub fn check_unordered(
    store: &dyn PageRead,
    root: Pgno,
    visit: &mut dyn FnMut(Pgno) -> Result<()>,
) -> Result<TreeStats> {
    check::check(store, root, None, visit)
}
