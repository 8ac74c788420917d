//! The MVBT layout as the rest of the engine sees it: life-span pages (`page::mvbt`)
//! whose committed version is never disturbed, written-once overflow pages, no on-disk
//! free list, and two header slots in page 0 (header handling as DHL's and IPS's).
//!
//! One format, several layouts: the `static`s differ only in how a version is written
//! (lazy garbage collection), in the headroom beside a full node (reserved buffer space)
//! and in whether underfull nodes wait for their next copy to merge; the registry entry
//! of each mode names one of them (see `docs/LS-MVBT-DESIGN.md`).
//!
//! Invariants, and why they hold:
//! - `node_image` keeps the committed version (tid `<= tid - 1`) as the module notes of
//!   [`super`] describe and returns None when the new version does not fit beside it; a
//!   page allocated in this transaction has no committed version and a node within
//!   capacity always fits there (a cell's cost is its whole aligned record plus its
//!   array entry, and `capacity` leaves out the descriptors and a headroom that covers
//!   the first record's alignment), which the tree's relocation relies on. An empty
//!   version (the tree's root pointer) always fits: it carries no entry, not even a
//!   dead one.
//! - A maximal cell costs at most a quarter of the page plus 26 bytes, under half the
//!   capacity for every usable size from 256 up (checked by a test), as the tree's split
//!   bound needs.
//! - Pages are verified per version by their own checksums (`trailer_checked` false).
//! - `finalize` stamps `txn_size` into the transaction's version and refuses a page
//!   carrying no version of the transaction.

use crate::error::{Pgno, Result};
use crate::page::cells::Detached;
use crate::page::layout::{Geometry, Stamp, TreePolicy};
use crate::page::mvbt::{self, Version};
use crate::page::two_version::{Built, NodeFormat, TwoVersion};
use crate::page::versioned::SlotCheck;
use crate::page::PageRef;

/// An MVBT layout: the format of `page::mvbt` with the switches of one mode. Every one
/// is named `mvbt` (the page format); the modes' names tell them apart.
#[derive(Debug)]
pub(crate) struct Mvbt {
    /// Lazy garbage collection: dead entries leave the array with the next version.
    pub(crate) lazy_gc: bool,
    /// Reserved buffer space: the larger headroom beside a full node.
    pub(crate) reserve: bool,
    /// Underfull nodes stay until they must be copied (no merge or redistribution write
    /// on the delete that made them underfull).
    pub(crate) defer_merges: bool,
    /// Lazy split: a splitting node keeps its right half in place (a new version of its
    /// page), one new sibling takes the left; off, both halves go to fresh pages.
    pub(crate) lazy_split: bool,
}

/// Plain MVBT: version splits, dead entries kept until a node is copied, no reserved
/// space, eager merges.
pub(crate) static MVBT: TwoVersion<Mvbt> = TwoVersion(Mvbt {
    lazy_gc: false,
    reserve: false,
    defer_merges: false,
    lazy_split: false,
});

/// LS-MVBT: every optimization on.
pub(crate) static LS_MVBT: TwoVersion<Mvbt> = TwoVersion(LS_MVBT_FIELDS);

/// LS-MVBT without lazy split (ablation).
pub(crate) static LS_MVBT_NO_SPLIT: TwoVersion<Mvbt> = TwoVersion(Mvbt {
    lazy_split: false,
    ..LS_MVBT_FIELDS
});

/// LS-MVBT without reserved buffer space (ablation).
pub(crate) static LS_MVBT_NO_RESERVE: TwoVersion<Mvbt> = TwoVersion(Mvbt {
    reserve: false,
    ..LS_MVBT_FIELDS
});

/// LS-MVBT without lazy garbage collection (ablation).
pub(crate) static LS_MVBT_NO_GC: TwoVersion<Mvbt> = TwoVersion(Mvbt {
    lazy_gc: false,
    ..LS_MVBT_FIELDS
});

/// The switches of LS-MVBT, for the statics to start from.
const LS_MVBT_FIELDS: Mvbt = Mvbt {
    lazy_gc: true,
    reserve: true,
    defer_merges: true,
    lazy_split: true,
};

impl NodeFormat for Mvbt {
    const NAME: &'static str = "mvbt";

    fn open(&self, pgno: Pgno, buf: &[u8], usable: usize, visible_tid: u64) -> Result<Detached> {
        Ok(Mvbt::visible(pgno, buf, usable, visible_tid)?.detach())
    }

    fn open_page(
        &self,
        pgno: Pgno,
        page: &PageRef,
        usable: usize,
        visible_tid: u64,
    ) -> Result<Detached> {
        mvbt::visible_node(pgno, page, usable, visible_tid)
    }

    fn capacity(&self, usable: usize) -> usize {
        mvbt::capacity(usable, self.reserve)
    }

    fn cell_cost(&self, len: usize) -> usize {
        mvbt::cell_cost(len)
    }

    fn build(&self, pgno: Pgno, g: Geometry, base: Option<&[u8]>, v: &Version) -> Result<Built> {
        mvbt::build(
            pgno,
            g.page_size,
            g.usable,
            base,
            v.tid - 1,
            v,
            self.lazy_gc,
        )
        .map(|img| img.map(PageRef::from))
    }

    fn tree_policy(&self) -> TreePolicy {
        TreePolicy {
            defers_merges: self.defer_merges,
            splits_in_place: self.lazy_split,
        }
    }

    fn restamp(&self, pgno: Pgno, page: &mut PageRef, usable: usize, s: Stamp) -> Result<bool> {
        // Tids live in the cells too: a version cannot be re-tagged (`retags` is false).
        crate::page::layout::refuse_retag(pgno, s)?;
        let buf = std::sync::Arc::make_mut(page);
        Ok(mvbt::restamp(pgno, buf, usable, s.tid, s.txn_size))
    }

    fn retags(&self) -> bool {
        false
    }

    fn describe_slot(&self, pgno: Pgno, page: &[u8], usable: usize, slot: usize) -> String {
        Mvbt::open_slot(pgno, page, usable, slot)
            .map(|w| {
                format!(
                    ", {} entries of at most {}, {} live, {} dead, array at {}",
                    w.ncells(),
                    mvbt::max_cells(usable),
                    w.nlive(),
                    w.ncells() - w.nlive(),
                    w.rec_lo()
                )
            })
            .unwrap_or_default()
    }

    fn describe_visible(&self, pgno: Pgno, page: &[u8], usable: usize, fcc: u64) -> Result<String> {
        let view = Mvbt::visible(pgno, page, usable, fcc)?;
        Ok(format!(
                "visible: descriptor {} tid {} txn_size {} {} with {} cells, right {} ({} of {} bytes used, {} bytes free for the next version)",
                view.slot(),
                view.tid(),
                view.txn_size(),
                if view.is_leaf() { "leaf" } else { "interior" },
                view.nlive(),
                view.right_child(),
                view.used(),
                mvbt::capacity(usable, self.reserve),
                view.free_bytes()
            ))
    }
}
