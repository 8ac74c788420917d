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

use crate::error::{Error, Pgno, Result};
use crate::format::header::{self, Header, DHL_SLOTS};
use crate::page::cells::Detached;
use crate::page::layout::{DescInfo, FreeSpace, Geometry, PageLayout, PageVersions};
use crate::page::mvbt::{self, Version};
use crate::page::versioned;
use crate::page::{page_type, PageRef, PageWrite};

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
pub(crate) static MVBT: Mvbt = Mvbt {
    lazy_gc: false,
    reserve: false,
    defer_merges: false,
    lazy_split: false,
};

/// LS-MVBT: every optimization on.
pub(crate) static LS_MVBT: Mvbt = LS_MVBT_FIELDS;

/// LS-MVBT without lazy split (ablation).
pub(crate) static LS_MVBT_NO_SPLIT: Mvbt = Mvbt {
    lazy_split: false,
    ..LS_MVBT_FIELDS
};

/// LS-MVBT without reserved buffer space (ablation).
pub(crate) static LS_MVBT_NO_RESERVE: Mvbt = Mvbt {
    reserve: false,
    ..LS_MVBT_FIELDS
};

/// LS-MVBT without lazy garbage collection (ablation).
pub(crate) static LS_MVBT_NO_GC: Mvbt = Mvbt {
    lazy_gc: false,
    ..LS_MVBT_FIELDS
};

/// The switches of LS-MVBT, for the statics to start from.
const LS_MVBT_FIELDS: Mvbt = Mvbt {
    lazy_gc: true,
    reserve: true,
    defer_merges: true,
    lazy_split: true,
};

impl PageLayout for Mvbt {
    fn name(&self) -> &'static str {
        "mvbt"
    }

    fn open(&self, pgno: Pgno, buf: &[u8], g: Geometry, visible_tid: u64) -> Result<Detached> {
        Ok(mvbt::visible(pgno, buf, g.usable, visible_tid)?.detach())
    }

    fn open_page(
        &self,
        pgno: Pgno,
        page: &PageRef,
        g: Geometry,
        visible_tid: u64,
    ) -> Result<Detached> {
        mvbt::visible_node(pgno, page, g.usable, visible_tid)
    }

    fn open_checked(
        &self,
        pgno: Pgno,
        buf: &[u8],
        g: Geometry,
        visible_tid: u64,
    ) -> Result<Detached> {
        // `visible` validates the whole version (bounds, overlaps, life spans, checksum).
        self.open(pgno, buf, g, visible_tid)
    }

    fn capacity(&self, g: Geometry) -> usize {
        mvbt::capacity(g.usable, self.reserve)
    }

    fn cell_cost(&self, len: usize) -> usize {
        mvbt::cell_cost(len)
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
        let (tid, base) = versioned::write_base(store, pgno, "MVBT")?;
        let version = Version {
            tid,
            leaf,
            right,
            cells,
            lazy_gc: self.lazy_gc,
        };
        mvbt::build(
            pgno,
            store.page_size(),
            store.usable_size(),
            base.as_deref(),
            tid - 1,
            &version,
        )
        .map(|img| img.map(PageRef::from))
    }

    fn defers_merges(&self) -> bool {
        self.defer_merges
    }

    fn splits_in_place(&self) -> bool {
        self.lazy_split
    }

    fn overflow_data(&self, g: Geometry) -> usize {
        mvbt::overflow_data(g.usable)
    }

    fn overflow_image(
        &self,
        pgno: Pgno,
        g: Geometry,
        tid: u64,
        next: Pgno,
        chunk: &[u8],
    ) -> Result<Vec<u8>> {
        mvbt::overflow_page(pgno, g.page_size, g.usable, tid, next, chunk)
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
        let o = mvbt::open_overflow(pgno, page, g.usable)?;
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
        // Tids live in the cells too: a version cannot be re-tagged (`retags` is false).
        crate::page::layout::refuse_retag(pgno, written, tid)?;
        let mut page = image;
        let buf = std::sync::Arc::make_mut(&mut page);
        if !mvbt::restamp(pgno, buf, g.usable, tid, txn_size) {
            return Err(Error::corrupt(
                pgno,
                format!("dirty page has no version of transaction {tid}"),
            ));
        }
        // No trailer crc: versions carry their own (`trailer_checked` is false).
        Ok(page)
    }

    fn versions(&self) -> Option<&dyn PageVersions> {
        Some(self)
    }

    fn classify(&self, pgno: Pgno, page: &[u8], g: Geometry, visible_tid: u64) -> &'static str {
        if let Ok(v) = mvbt::visible(pgno, page, g.usable, visible_tid) {
            return if v.is_leaf() { "leaf" } else { "interior" };
        }
        match mvbt::open_overflow(pgno, page, g.usable) {
            Ok(o) if o.tid <= visible_tid => page_type::name(page_type::OVERFLOW),
            _ => "unused",
        }
    }

    fn describe(&self, pgno: Pgno, page: &[u8], g: Geometry, fcc: u64) -> Vec<String> {
        if pgno == 0 {
            return versioned::describe_header_slots(page);
        }
        let mut v = Vec::new();
        for (slot, d) in mvbt::page_versions(pgno, page, g.usable).iter().enumerate() {
            v.push(match d {
                None => format!("descriptor {slot}: empty (tid 0)"),
                Some(d) => {
                    let shape = mvbt::open_slot(pgno, page, g.usable, slot)
                        .map(|w| {
                            format!(
                                ", {} entries of at most {}, {} live, {} dead, array at {}",
                                w.ncells(),
                                mvbt::max_cells(g.usable),
                                w.nlive(),
                                w.ncells() - w.nlive(),
                                w.rec_lo()
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
        v.push(match mvbt::visible(pgno, page, g.usable, fcc) {
            Ok(view) => format!(
                "visible: descriptor {} tid {} txn_size {} {} with {} cells, right {} ({} of {} bytes used, {} bytes free for the next version)",
                view.slot(),
                view.tid(),
                view.txn_size(),
                if view.is_leaf() { "leaf" } else { "interior" },
                view.nlive(),
                view.right_child(),
                view.used(),
                mvbt::capacity(g.usable, self.reserve),
                view.free_bytes()
            ),
            Err(e) => match mvbt::open_overflow(pgno, page, g.usable) {
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

impl PageVersions for Mvbt {
    fn heads(&self, buf: &[u8]) -> Option<[(u64, u32); 2]> {
        mvbt::descriptor_heads(buf)
    }

    fn versions(&self, pgno: Pgno, buf: &[u8], usable: usize) -> [Option<DescInfo>; 2] {
        mvbt::page_versions(pgno, buf, usable)
    }

    fn invalidate(&self, buf: &mut [u8], tid: u64) -> bool {
        mvbt::invalidate(buf, tid)
    }
}
