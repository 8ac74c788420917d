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

use crate::error::{Error, Pgno, Result};
use crate::format::header::{self, Header, DHL_SLOTS};
use crate::page::cells::Detached;
use crate::page::ips::{self, Version};
use crate::page::layout::{DescInfo, FreeSpace, Geometry, PageLayout, PageVersions};
use crate::page::versioned;
use crate::page::{page_type, PageRef, PageWrite};

/// The IPS layout.
#[derive(Debug)]
pub(crate) struct Ips;

/// The one instance the registry names.
pub(crate) static IPS: Ips = Ips;

impl PageLayout for Ips {
    fn name(&self) -> &'static str {
        "ips"
    }

    fn open(&self, pgno: Pgno, buf: &[u8], g: Geometry, visible_tid: u64) -> Result<Detached> {
        Ok(ips::visible(pgno, buf, g.usable, visible_tid)?.detach())
    }

    fn open_page(
        &self,
        pgno: Pgno,
        page: &PageRef,
        g: Geometry,
        visible_tid: u64,
    ) -> Result<Detached> {
        ips::visible_node(pgno, page, g.usable, visible_tid)
    }

    fn open_checked(
        &self,
        pgno: Pgno,
        buf: &[u8],
        g: Geometry,
        visible_tid: u64,
    ) -> Result<Detached> {
        // `visible` validates the whole version (bounds, overlaps, links, checksum).
        self.open(pgno, buf, g, visible_tid)
    }

    fn capacity(&self, g: Geometry) -> usize {
        ips::capacity(g.usable)
    }

    fn cell_cost(&self, len: usize) -> usize {
        ips::cell_cost(len)
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
        let (tid, base) = versioned::write_base(store, pgno, "IPS")?;
        let version = Version {
            tid,
            leaf,
            right,
            cells,
        };
        ips::build(
            pgno,
            store.page_size(),
            store.usable_size(),
            base.as_deref(),
            tid - 1,
            &version,
        )
    }

    fn edit_leaf(
        &self,
        pgno: Pgno,
        page: &[u8],
        g: Geometry,
        tid: u64,
        i: usize,
        remove: bool,
        insert: Option<&[u8]>,
    ) -> Result<Option<(PageRef, usize)>> {
        if tid == 0 {
            return Ok(None);
        }
        ips::edit(pgno, page, g.usable, tid, i, remove, insert)
    }

    fn overflow_data(&self, g: Geometry) -> usize {
        ips::overflow_data(g.usable)
    }

    fn overflow_image(
        &self,
        pgno: Pgno,
        g: Geometry,
        tid: u64,
        next: Pgno,
        chunk: &[u8],
    ) -> Result<Vec<u8>> {
        ips::overflow_page(pgno, g.page_size, g.usable, tid, next, chunk)
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
        let o = ips::open_overflow(pgno, page, g.usable)?;
        versioned::chain_page(owner, pgno, o.tid, o.data, o.next, visible_tid, take)
    }

    fn defers_merges(&self) -> bool {
        // Garbage goes only when a page is copied (its new version does not fit): an
        // underfull node waits for that copy to merge, instead of costing a merge's
        // page writes on the delete that made it underfull.
        true
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
        let mut page = image;
        let buf = std::sync::Arc::make_mut(&mut page);
        let (stamped, node) = ips::restamp_node(pgno, buf, g.usable, written, tid, txn_size);
        if !stamped {
            return Err(Error::corrupt(
                pgno,
                format!("dirty page has no version of transaction {written}"),
            ));
        }
        // No trailer crc: IPS pages are verified per version (`trailer_checked` is
        // false), and the journal never writes the trailer of a page that existed, so a
        // crc there would be stale anyway; stamping 4 KiB of crc32c per page per commit
        // bought nothing.
        // The pager caches exactly this image: its next open (the next transaction's
        // descent) finds the node here instead of validating and replaying again.
        if let Some((slot, node)) = node {
            ips::remember(&page, pgno, g.usable, slot, &node);
        }
        Ok(page)
    }

    fn retags(&self) -> bool {
        true
    }

    fn versions(&self) -> Option<&dyn PageVersions> {
        Some(self)
    }

    fn classify(&self, pgno: Pgno, page: &[u8], g: Geometry, visible_tid: u64) -> &'static str {
        if let Ok(v) = ips::visible(pgno, page, g.usable, visible_tid) {
            return if v.is_leaf() { "leaf" } else { "interior" };
        }
        match ips::open_overflow(pgno, page, g.usable) {
            Ok(o) if o.tid <= visible_tid => page_type::name(page_type::OVERFLOW),
            _ => "unused",
        }
    }

    fn describe(&self, pgno: Pgno, page: &[u8], g: Geometry, fcc: u64) -> Vec<String> {
        if pgno == 0 {
            return versioned::describe_header_slots(page);
        }
        let mut v = Vec::new();
        for (slot, d) in ips::page_versions(pgno, page, g.usable).iter().enumerate() {
            v.push(match d {
                None => format!("descriptor {slot}: empty (tid 0)"),
                Some(d) => {
                    let shape = ips::open_slot(pgno, page, g.usable, slot)
                        .map(|w| {
                            format!(
                                ", slots {}..{} of {}, {} live, {} tombstoned, records [{}, {})",
                                w.base_nslots(),
                                w.nslots(),
                                ips::max_slots(g.usable),
                                w.nlive(),
                                w.nslots() - w.nlive(),
                                w.rec_lo(),
                                w.rec_hi()
                            )
                        })
                        .unwrap_or_default();
                    format!(
                        "descriptor {slot}: tid {} txn_size {} {}{}{shape}",
                        d.tid,
                        d.txn_size,
                        if d.valid { "valid" } else { "INVALID" },
                        if d.valid && d.tid <= fcc {
                            ", committed"
                        } else {
                            ""
                        }
                    )
                }
            });
        }
        v.push(match ips::visible(pgno, page, g.usable, fcc) {
            Ok(view) => format!(
                "visible: descriptor {} tid {} txn_size {} {} with {} cells, right {} ({} of {} bytes used, free gap {} bytes)",
                view.slot(),
                view.tid(),
                view.txn_size(),
                if view.is_leaf() { "leaf" } else { "interior" },
                view.nlive(),
                view.right_child(),
                view.used(),
                ips::capacity(g.usable),
                view.rec_lo() - view.slots_end()
            ),
            Err(e) => match ips::open_overflow(pgno, page, g.usable) {
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

impl PageVersions for Ips {
    fn heads(&self, buf: &[u8]) -> Option<[(u64, u32); 2]> {
        ips::descriptor_heads(buf)
    }

    fn versions(&self, pgno: Pgno, buf: &[u8], usable: usize) -> [Option<DescInfo>; 2] {
        ips::page_versions(pgno, buf, usable)
    }

    fn invalidate(&self, buf: &mut [u8], tid: u64) -> bool {
        ips::invalidate(buf, tid)
    }
}
