//! The DHL layout as the rest of the engine sees it: doubleheader pages (`page::dhl`) whose
//! committed version is never disturbed, written-once overflow pages, no on-disk free
//! list, and two header slots in page 0.
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

use crate::error::{Error, Pgno, Result};
use crate::format::header::{self, Header, DHL_SLOTS};
use crate::page::cells::Detached;
use crate::page::dhl::{self, Version};
use crate::page::layout::{DescInfo, FreeSpace, Geometry, PageLayout, PageVersions};
use crate::page::versioned;
use crate::page::{page_type, PageRef, PageWrite};

/// The DHL layout.
#[derive(Debug)]
pub(crate) struct Dhl;

/// The one instance the registry names.
pub(crate) static DHL: Dhl = Dhl;

impl PageLayout for Dhl {
    fn name(&self) -> &'static str {
        "dhl"
    }

    fn open(&self, pgno: Pgno, buf: &[u8], g: Geometry, visible_tid: u64) -> Result<Detached> {
        Ok(dhl::visible(pgno, buf, g.usable, visible_tid)?.detach())
    }

    fn open_page(
        &self,
        pgno: Pgno,
        page: &PageRef,
        g: Geometry,
        visible_tid: u64,
    ) -> Result<Detached> {
        Ok(dhl::visible_page(pgno, page, g.usable, visible_tid)?.detach())
    }

    fn open_checked(
        &self,
        pgno: Pgno,
        buf: &[u8],
        g: Geometry,
        visible_tid: u64,
    ) -> Result<Detached> {
        // `visible` validates the whole version (bounds, overlaps, checksum).
        self.open(pgno, buf, g, visible_tid)
    }

    fn capacity(&self, g: Geometry) -> usize {
        dhl::capacity(g.usable)
    }

    fn cell_cost(&self, len: usize) -> usize {
        dhl::cell_cost(len)
    }

    fn node_image(
        &self,
        store: &dyn PageWrite,
        pgno: Pgno,
        leaf: bool,
        cells: &[Vec<u8>],
        right: Pgno,
    ) -> Result<Option<PageRef>> {
        // The committed version in the current image is kept; an earlier version of
        // this transaction is replaced.
        let (tid, base) = versioned::write_base(store, pgno, "DHL")?;
        let version = Version {
            tid,
            txn_size: 0,
            leaf,
            right,
            cells,
        };
        dhl::build(
            pgno,
            store.page_size(),
            store.usable_size(),
            base.as_deref(),
            tid - 1,
            &version,
        )
        .map(|img| img.map(PageRef::from))
    }

    fn overflow_data(&self, g: Geometry) -> usize {
        dhl::overflow_data(g.usable)
    }

    fn overflow_image(
        &self,
        pgno: Pgno,
        g: Geometry,
        tid: u64,
        next: Pgno,
        chunk: &[u8],
    ) -> Result<Vec<u8>> {
        dhl::overflow_page(pgno, g.page_size, g.usable, tid, next, chunk)
    }

    fn overflow_read<'p>(
        &self,
        owner: Pgno,
        pgno: Pgno,
        page: &'p [u8],
        g: Geometry,
        visible_tid: u64,
        take: usize,
    ) -> Result<(&'p [u8], Pgno)> {
        let o = dhl::open_overflow(pgno, page, g.usable)?;
        versioned::chain_page(owner, pgno, o.tid, o.data, o.next, visible_tid, take)
    }

    fn free_space(&self) -> FreeSpace {
        FreeSpace::TreeWalk
    }

    fn header_slots(&self) -> usize {
        DHL_SLOTS
    }

    fn create_tid(&self) -> u64 {
        1
    }

    fn trailer_checked(&self) -> bool {
        false
    }

    fn read_header(&self, page0: &[u8], fcc: u64) -> std::result::Result<Header, String> {
        header::read_two_slot(page0, fcc)
    }

    fn header_image(&self, committed: &[u8], committed_fcc: u64, h: &Header) -> PageRef {
        versioned::two_slot_header_image(committed, committed_fcc, h)
    }

    fn finalize(
        &self,
        pgno: Pgno,
        image: PageRef,
        g: Geometry,
        written: u64,
        tid: u64,
        txn_size: u32,
    ) -> Result<PageRef> {
        // The tree builds versions with txn_size 0; only now is the count known. An image
        // still shared (a reader's, a spill's) is copied here, once.
        let mut page = image;
        let buf = std::sync::Arc::make_mut(&mut page);
        if !dhl::restamp_as(pgno, buf, g.usable, written, tid, txn_size) {
            return Err(Error::corrupt(
                pgno,
                format!("dirty page has no version of transaction {written}"),
            ));
        }
        // No trailer crc: DHL pages are verified per version (`trailer_checked` is
        // false), and the journal writes only a page's changed span, which skips the
        // trailer; a crc there would cost 4 KiB of crc32c per page per commit for nothing.
        Ok(page)
    }

    fn retags(&self) -> bool {
        true
    }

    fn versions(&self) -> Option<&dyn PageVersions> {
        Some(self)
    }

    fn classify(&self, pgno: Pgno, page: &[u8], g: Geometry, visible_tid: u64) -> &'static str {
        if let Ok(v) = dhl::visible(pgno, page, g.usable, visible_tid) {
            return if v.is_leaf() { "leaf" } else { "interior" };
        }
        match dhl::open_overflow(pgno, page, g.usable) {
            Ok(o) if o.tid <= visible_tid => page_type::name(page_type::OVERFLOW),
            _ => "unused",
        }
    }

    fn describe(&self, pgno: Pgno, page: &[u8], g: Geometry, fcc: u64) -> Vec<String> {
        if pgno == 0 {
            return versioned::describe_header_slots(page);
        }
        let mut v = Vec::new();
        for (slot, d) in dhl::page_versions(pgno, page, g.usable).iter().enumerate() {
            v.push(match d {
                None => format!("slot header {slot}: empty (tid 0)"),
                Some(d) => format!(
                    "slot header {slot}: tid {} txn_size {} {}{}",
                    d.tid,
                    d.txn_size,
                    if d.valid { "valid" } else { "INVALID" },
                    if d.valid && d.tid <= fcc {
                        ", committed"
                    } else {
                        ""
                    }
                ),
            });
        }
        v.push(match dhl::visible(pgno, page, g.usable, fcc) {
            Ok(view) => format!(
                "visible: slot {} tid {} txn_size {} {} with {} cells (array at {}, {} of {} bytes used, largest hole {}, reserve {})",
                view.slot(),
                view.tid(),
                view.txn_size(),
                if view.is_leaf() { "leaf" } else { "interior" },
                view.ncells(),
                view.array_off(),
                view.used(),
                dhl::capacity(g.usable),
                view.free_holes()
                    .ok()
                    .and_then(|h| h.iter().map(|(s, e)| e - s).max())
                    .unwrap_or(0),
                if dhl::has_reserve(&view) { "kept" } else { "used up" }
            ),
            Err(e) => match dhl::open_overflow(pgno, page, g.usable) {
                Ok(ov) => format!(
                    "overflow page: tid {} txn_size {} next {}, {} data bytes",
                    ov.tid,
                    ov.txn_size,
                    ov.next,
                    ov.data.len()
                ),
                Err(_) => format!("no visible version: {e}"),
            },
        });
        v
    }
}

impl PageVersions for Dhl {
    fn heads(&self, buf: &[u8]) -> Option<[(u64, u32); 2]> {
        dhl::descriptor_heads(buf)
    }

    fn versions(&self, pgno: Pgno, buf: &[u8], usable: usize) -> [Option<DescInfo>; 2] {
        dhl::page_versions(pgno, buf, usable)
    }

    fn invalidate(&self, buf: &mut [u8], tid: u64) -> bool {
        dhl::invalidate(buf, tid)
    }
}
