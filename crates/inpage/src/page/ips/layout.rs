//! The IPS layout as the rest of the engine sees it: in-page-shadowing pages (`page::ips`)
//! whose committed version is never disturbed, written-once overflow pages, no on-disk
//! free list, and two header slots in page 0 (header handling as DHL's: it is not
//! layout-specific).
//!
//! Invariants, and why they hold:
//! - `node_image` and `edit_leaf` keep the committed version (tid `<= tid - 1`) bit for
//!   bit and return None when the new version does not fit beside it; a page allocated in
//!   this transaction has no committed version and a node within capacity always fits
//!   there (`capacity` leaves out the slot array's and the headroom's bytes), which is
//!   what the tree's relocation (IPS's garbage collection) relies on.
//! - Pages are verified per version by their own checksums, not by the trailer
//!   (`trailer_checked` is false): recovery's invalidations rewrite sector 0 only.
//! - `finalize` stamps `txn_size` into the transaction's version (or overflow descriptor)
//!   and refuses a page carrying no version of the transaction. It leaves the trailer
//!   crc alone: nothing checks it on IPS pages, and the journal never writes the trailer
//!   of a page that existed.

use crate::error::{Pgno, Result};
use crate::page::cells::Detached;
use crate::page::ips::{self, Version};
use crate::page::layout::{Edited, Geometry, LeafEdit, Stamp, TreePolicy};
use crate::page::two_version::{Built, NodeFormat, TwoVersion};
use crate::page::versioned::SlotCheck;
use crate::page::PageRef;

/// The IPS node format.
#[derive(Debug)]
pub(crate) struct Ips;

/// The one instance the registry names.
pub(crate) static IPS: TwoVersion<Ips> = TwoVersion(Ips);

impl NodeFormat for Ips {
    const NAME: &'static str = "ips";

    fn open(&self, pgno: Pgno, buf: &[u8], usable: usize, visible_tid: u64) -> Result<Detached> {
        Ok(Ips::visible(pgno, buf, usable, visible_tid)?.detach())
    }

    fn open_page(
        &self,
        pgno: Pgno,
        page: &PageRef,
        usable: usize,
        visible_tid: u64,
    ) -> Result<Detached> {
        ips::visible_node(pgno, page, usable, visible_tid)
    }

    fn capacity(&self, usable: usize) -> usize {
        ips::capacity(usable)
    }

    fn cell_cost(&self, len: usize) -> usize {
        ips::cell_cost(len)
    }

    fn build(&self, pgno: Pgno, g: Geometry, base: Option<&[u8]>, v: &Version) -> Result<Built> {
        ips::build(pgno, g.page_size, g.usable, base, v.tid - 1, v)
    }

    fn edit_leaf(&self, pgno: Pgno, page: &[u8], usable: usize, e: LeafEdit) -> Result<Edited> {
        ips::edit(pgno, page, usable, e)
    }

    fn tree_policy(&self) -> TreePolicy {
        // Garbage goes only when a page is copied (its new version does not fit): an
        // underfull node waits for that copy to merge, instead of costing a merge's
        // page writes on the delete that made it underfull.
        TreePolicy {
            defers_merges: true,
            ..TreePolicy::default()
        }
    }

    fn restamp(&self, pgno: Pgno, page: &mut PageRef, usable: usize, s: Stamp) -> Result<bool> {
        let buf = std::sync::Arc::make_mut(page);
        let (stamped, node) = ips::restamp_node(pgno, buf, usable, s);
        // The pager caches exactly this image: its next open (the next transaction's
        // descent) finds the node here instead of validating and replaying again.
        if let Some((slot, node)) = node {
            ips::remember(page, pgno, usable, slot, &node);
        }
        Ok(stamped)
    }

    fn retags(&self) -> bool {
        true
    }

    fn describe_slot(&self, pgno: Pgno, page: &[u8], usable: usize, slot: usize) -> String {
        Ips::open_slot(pgno, page, usable, slot)
            .map(|w| {
                format!(
                    ", slots {}..{} of {}, {} live, {} tombstoned, records [{}, {})",
                    w.base_nslots(),
                    w.nslots(),
                    ips::max_slots(usable),
                    w.nlive(),
                    w.nslots() - w.nlive(),
                    w.rec_lo(),
                    w.rec_hi()
                )
            })
            .unwrap_or_default()
    }

    fn describe_visible(&self, pgno: Pgno, page: &[u8], usable: usize, fcc: u64) -> Result<String> {
        let view = Ips::visible(pgno, page, usable, fcc)?;
        Ok(format!(
                "visible: descriptor {} tid {} txn_size {} {} with {} cells, right {} ({} of {} bytes used, free gap {} bytes)",
                view.slot(),
                view.tid(),
                view.txn_size(),
                if view.is_leaf() { "leaf" } else { "interior" },
                view.nlive(),
                view.right_child(),
                view.used(),
                ips::capacity(usable),
                view.rec_lo() - view.slots_end()
            ))
    }
}
