//! The committed free set of a layout whose free pages are those no tree owns
//! (`FreeSpace::TreeWalk`), with the history concurrent writers check against.
//!
//! Where free space lives, one role each:
//! - the policy (which pages a transaction takes and gives back, the stock layouts' free
//!   list, the tree walk that finds the free set before the first write) is `txn::free`;
//! - the committed set, shared by every transaction of a handle, is this [`FreeSet`],
//!   changed only by the walk's result (`replace`, `add`) and by a durable commit
//!   (`commit`);
//! - keeping the set across a clean close is the journal's `KeepsFree` part (the
//!   counting modes store it beside the clean-shutdown mark, `FORMAT.md`);
//! - `check` recomputes it from the trees and compares.
//!
//! Invariants, and why they hold:
//! - A page in the set is below the committed page count and in no committed tree.
//!   Pages join when a commit that freed them is durable (`commit`; until then the
//!   committed trees own them) or when a walk found them unowned (`replace`, `add`, which
//!   keeps only pages the file has); they leave when a commit that took them is durable.
//!   A page a commit frees is never in the set already (checked in debug builds): it was
//!   in a tree, or taken by the same commit.
//! - A writer on snapshot `s` never picks a page a commit after `s` freed (`pick_at`):
//!   the trees it sees still hold it. `freed_by` keeps each commit's freed pages exactly
//!   as long as the pager keeps the commit's replaced images (`prune` takes the same
//!   bound), which is as long as a reader on an older snapshot is registered.

use std::collections::{BTreeMap, BTreeSet};

use crate::error::Pgno;

/// Pages a transaction moved between the free set and its trees. Pages it freed are
/// released only when it commits: until then the committed trees still own them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AllocDelta {
    /// Pages the transaction took from the free set.
    pub taken: Vec<Pgno>,
    /// Pages the transaction's trees gave up.
    pub freed: Vec<Pgno>,
}

/// The committed free set (module docs). Empty under `FreeSpace::PageList`, whose free
/// list lives in the pages.
#[derive(Debug, Default)]
pub(crate) struct FreeSet {
    free: BTreeSet<Pgno>,
    /// Commit tid -> pages that commit freed.
    freed_by: BTreeMap<u64, Vec<Pgno>>,
}

impl FreeSet {
    /// The set a walk of the committed trees found.
    pub(crate) fn replace(&mut self, free: BTreeSet<Pgno>) {
        self.free = free;
    }

    /// Pages no tree owns that join the set now (a concurrent writer that grew the file
    /// by them rolled back, and a commit since made them part of the file); those at or
    /// past `page_count` are not the file's.
    pub(crate) fn add(&mut self, pages: &[Pgno], page_count: u32) {
        self.free
            .extend(pages.iter().copied().filter(|&p| p < page_count));
    }

    /// Commit `tid` is durable: what it took leaves the set, what it freed joins it.
    pub(crate) fn commit(&mut self, tid: u64, alloc: &AllocDelta) {
        for p in &alloc.taken {
            self.free.remove(p);
        }
        debug_assert!(
            alloc.freed.iter().all(|p| !self.free.contains(p)),
            "commit {tid} freed a page the free set holds already"
        );
        self.free.extend(alloc.freed.iter().copied());
        if !alloc.freed.is_empty() {
            self.freed_by.insert(tid, alloc.freed.clone());
        }
    }

    /// Forget what commits up to `oldest` freed: no registered reader is older.
    pub(crate) fn prune(&mut self, oldest: u64) {
        self.freed_by = self.freed_by.split_off(&(oldest + 1));
    }

    /// The pages commit `tid` freed, while it is remembered.
    pub(crate) fn freed_in(&self, tid: u64) -> Option<&[Pgno]> {
        self.freed_by.get(&tid).map(Vec::as_slice)
    }

    /// The lowest free page not in `exclude` (pages the transaction took already).
    pub(crate) fn pick(&self, exclude: &BTreeSet<Pgno>) -> Option<Pgno> {
        self.free.iter().find(|p| !exclude.contains(p)).copied()
    }

    /// The lowest free page `take` accepts that was free at `snapshot` too.
    pub(crate) fn pick_at(&self, snapshot: u64, take: &dyn Fn(Pgno) -> bool) -> Option<Pgno> {
        let freed_since = |p: Pgno| {
            self.freed_by
                .range(snapshot + 1..)
                .any(|(_, f)| f.contains(&p))
        };
        self.free
            .iter()
            .copied()
            .find(|&p| take(p) && !freed_since(p))
    }

    /// Every page in the set.
    pub(crate) fn pages(&self) -> &BTreeSet<Pgno> {
        &self.free
    }
}
