//! The DHL format in the two-version family (`page::two_version`, which is its layout):
//! doubleheader pages (`page::double_header`) whose committed version is never disturbed.
//!
//! Invariants, and why they hold:
//! - `node_image` keeps the committed version (tid `<= tid - 1`) bit for bit and returns
//!   None when the new version does not fit beside it; a page allocated in this
//!   transaction has no committed version and a node within capacity always fits there,
//!   which is what the tree's relocation relies on.
//! - Pages are verified per version by their own checksums, not by the trailer
//!   (`trailer_checked` is false): recovery's invalidations rewrite sector 0 without
//!   restamping the trailer.
//! - `finalize` stamps `(tid, txn_size)` into the transaction's version (or overflow
//!   descriptor) and refuses a page that carries no version of the transaction, so a
//!   commit can never count a page it did not write.

use crate::error::{Pgno, Result};
use crate::page::cells::Detached;
use crate::page::double_header::{self, Version};
use crate::page::layout::{Edited, Geometry, LeafEdit, Stamp};
use crate::page::two_version::{Built, NodeFormat, TwoVersion};
use crate::page::versioned::SlotCheck;
use crate::page::PageRef;

/// The DHL node format.
#[derive(Debug)]
pub(crate) struct Dhl;

/// The one instance the registry names.
pub(crate) static DHL: TwoVersion<Dhl> = TwoVersion(Dhl);

impl NodeFormat for Dhl {
    const NAME: &'static str = "dhl";
    const SLOT_WORD: &'static str = "slot header";

    fn open(&self, pgno: Pgno, buf: &[u8], usable: usize, visible_tid: u64) -> Result<Detached> {
        Ok(Dhl::visible(pgno, buf, usable, visible_tid)?.detach())
    }

    fn open_page(
        &self,
        pgno: Pgno,
        page: &PageRef,
        usable: usize,
        visible_tid: u64,
    ) -> Result<Detached> {
        Ok(double_header::visible_page(pgno, page, usable, visible_tid)?.detach())
    }

    fn capacity(&self, usable: usize) -> usize {
        double_header::capacity(usable)
    }

    fn cell_cost(&self, len: usize) -> usize {
        double_header::cell_cost(len)
    }

    fn build(&self, pgno: Pgno, g: Geometry, base: Option<&[u8]>, v: &Version) -> Result<Built> {
        let built = double_header::build(pgno, g.page_size, g.usable, base, v.tid - 1, v)?
            .map(PageRef::from);
        if let Some(img) = &built {
            // The new version is the slot tagged with its tid (the protected one is older).
            let heads = crate::page::versioned::descriptor_heads(img);
            if let Some(slot) = heads.and_then(|h| h.iter().position(|&(t, _)| t == v.tid)) {
                double_header::remember_written(pgno, img, g.usable, slot);
            }
        }
        Ok(built)
    }

    fn edit_leaf(&self, pgno: Pgno, page: &[u8], usable: usize, e: LeafEdit) -> Result<Edited> {
        double_header::edit(pgno, page, usable, e)
    }

    fn restamp(&self, pgno: Pgno, page: &mut PageRef, usable: usize, s: Stamp) -> Result<bool> {
        // Asked before `make_mut`, which moves the bytes the memo knows by address.
        let known = [0, 1].map(|slot| double_header::remembered(pgno, page, usable, slot));
        let buf = std::sync::Arc::make_mut(page);
        let stamped = double_header::restamp_slots(pgno, buf, usable, s, known);
        for (slot, k) in stamped.iter().enumerate() {
            if *k == Some(double_header::Stamped::Tree) {
                double_header::remember_written(pgno, page, usable, slot);
            }
        }
        Ok(stamped.iter().any(|k| k.is_some()))
    }

    fn retags(&self) -> bool {
        true
    }

    fn describe_visible(&self, pgno: Pgno, page: &[u8], usable: usize, fcc: u64) -> Result<String> {
        let view = Dhl::visible(pgno, page, usable, fcc)?;
        Ok(format!(
                "visible: slot {} tid {} txn_size {} {} with {} cells (array at {}, {} of {} bytes used, largest hole {}, reserve {})",
                view.slot(),
                view.tid(),
                view.txn_size(),
                if view.is_leaf() { "leaf" } else { "interior" },
                view.ncells(),
                view.array_off(),
                view.used(),
                double_header::capacity(usable),
                view.free_holes()
                    .ok()
                    .and_then(|h| h.iter().map(|(s, e)| e - s).max())
                    .unwrap_or(0),
                if double_header::has_reserve(&view) { "kept" } else { "used up" }
            ))
    }
}
