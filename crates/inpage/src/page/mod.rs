//! Page access seen from the tree layer, and the page-type tags shared by all layouts.
//!
//! Invariants:
//! - Every page is `page_size` bytes; the last `PAGE_TRAILER` bytes belong to the pager
//!   (a crc32c of the rest, stamped on write, verified on read), so layouts only use the
//!   first `usable_size()` bytes; a layout with a reserved tail (`PageLayout::reserved_tail`)
//!   leaves that many more bytes before the trailer zero, for a journal's per-page data. A page read through `PageRead` has passed its checksum
//!   (in the DHL layout the pager may skip it: tree and overflow pages carry their own
//!   checksums in their descriptors, which the readers verify).
//! - Byte 0 of every non-header page is its page type, so `check` and `inspect` can
//!   classify any page without knowing which tree owns it. (Stock layout. A DHL page
//!   starts with descriptors, each carrying its type at byte 14; see [`dhl`].)
//! - Pages are immutable once handed out (`PageRef` is an `Arc<[u8]>`): a writer builds a
//!   new image and `write`s it, so snapshot readers and savepoints can keep old images by
//!   keeping the `Arc`.

pub mod cell;
pub mod cells;
pub mod double_header;
pub mod ips;
pub(crate) mod layout;
pub mod mvbt;
mod occupancy;
pub mod slotted;
pub(crate) mod stock;
#[cfg(test)]
pub(crate) mod strategies;
pub(crate) mod two_version;
pub(crate) mod versioned;

use std::sync::Arc;

use crate::error::{Pgno, Result};
pub use crate::format::trailer::{crc_ok, stamp_crc, PAGE_TRAILER};
pub use layout::{FreeSpace, Geometry, Layout, PageVersions, Stamp, TreePolicy};

/// An immutable page image.
pub type PageRef = Arc<[u8]>;

/// A zeroed page image of `len` bytes (at most the largest page size) that a builder can
/// fill through `Arc::get_mut` and hand to [`PageWrite::write`] without another copy.
pub(crate) fn zeroed_image(len: usize) -> PageRef {
    static ZEROS: [u8; crate::format::header::MAX_PAGE_SIZE as usize] =
        [0; crate::format::header::MAX_PAGE_SIZE as usize];
    Arc::from(&ZEROS[..len])
}

/// Page type tags (byte 0 of a page).
pub mod page_type {
    /// B+tree leaf page.
    pub const LEAF: u8 = 1;
    /// B+tree interior page.
    pub const INTERIOR: u8 = 2;
    /// Overflow page holding part of a large value.
    pub const OVERFLOW: u8 = 3;
    /// Free-list page.
    pub const FREE: u8 = 4;
    /// Human-readable name of a page type.
    pub fn name(t: u8) -> &'static str {
        match t {
            LEAF => "leaf",
            INTERIOR => "interior",
            OVERFLOW => "overflow",
            FREE => "free",
            _ => "unknown",
        }
    }
}

/// Read access to the pages of one snapshot (a read transaction, or a write
/// transaction's view including its own dirty pages).
pub trait PageRead {
    /// Page size in bytes.
    fn page_size(&self) -> usize;
    /// Bytes a layout may use at the start of each page (`page_size - PAGE_TRAILER`, less
    /// the layout's reserved tail).
    fn usable_size(&self) -> usize {
        self.page_size() - PAGE_TRAILER - self.layout().reserved_tail()
    }
    /// Read page `pgno` (never the header page 0). Errors: `Corrupt` for a checksum
    /// failure or a page number past the end of the database.
    fn read(&self, pgno: Pgno) -> Result<PageRef>;
    /// Node layout of this store's tree pages.
    fn layout(&self) -> Layout {
        &stock::STOCK
    }
    /// Page size and usable bytes.
    fn geometry(&self) -> Geometry {
        Geometry {
            page_size: self.page_size(),
            usable: self.usable_size(),
        }
    }
    /// DHL only: the snapshot this view reads, i.e. a reader sees on every page the
    /// version with the largest tid `<=` this. A write transaction returns its own tid (so
    /// it sees its own versions); a reader the newest committed tid it may see.
    fn visible_tid(&self) -> u64 {
        u64::MAX
    }
}

/// Write access for one write transaction. Changes are private to the transaction until
/// it commits.
pub trait PageWrite: PageRead {
    /// Replace page `pgno` with `data` (`data.len() == page_size`; the trailer bytes are
    /// ignored and stamped by the pager). `pgno` must be an allocated page. The image is
    /// handed over shared, so a builder that made it an `Arc` is not copied again.
    fn write(&mut self, pgno: Pgno, data: PageRef) -> Result<()>;
    /// Allocate a page (from the free list, else by growing the database). Its content
    /// is undefined until the caller `write`s it, which it must do in this transaction.
    fn allocate(&mut self) -> Result<Pgno>;
    /// Return a page to the free list. The caller must hold no reference to it.
    ///
    /// In DHL mode the store must not write the freed page and must not hand it out again
    /// before this transaction commits: the committed tree still references it, and the
    /// transaction may abort (or crash) and leave that tree in charge.
    fn free(&mut self, pgno: Pgno) -> Result<()>;
    /// DHL only: id of the writing transaction (at least 1; every version the tree writes
    /// carries it, and `tid - 1` bounds the committed versions a write must keep).
    fn tid(&self) -> u64 {
        0
    }
    /// DHL only: whether `pgno` was allocated by this transaction, i.e. has no committed
    /// version that a write must keep (it is laid out compactly instead).
    fn is_fresh(&self, _pgno: Pgno) -> bool {
        false
    }
    /// The image of `pgno` this store holds as written in the current transaction, to
    /// edit where it lies (`PageLayout::edit_leaf_mut`); None when the page is not
    /// written yet (or the store keeps no such image). The caller leaves the page's image
    /// as it would `write` it: a whole, well-formed page.
    fn dirty_image(&mut self, _pgno: Pgno) -> Option<&mut PageRef> {
        None
    }
}
