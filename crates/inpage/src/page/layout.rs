//! The page-layout trait: everything the tree, the pager and the transaction layer need
//! to know about how a journal mode lays out its pages, behind one interface.
//!
//! A layout is stateless (one `static` per layout, shared by every database that uses
//! it); geometry (`page_size`, `usable`) and the reader's snapshot are passed in, so a
//! layout can be asked about any page of any file. The mode registry
//! (`journal::JournalMode`) names each mode's layout; nothing outside a layout's own
//! module matches on which layout it is.
//!
//! Invariants every layout keeps, and what relies on them:
//! - **Nodes read the same everywhere.** `open` returns the node visible at the reader's
//!   snapshot (attached to its page, a [`CellArray`](crate::page::cells::CellArray)), with every offset bounds-checked, so the tree's
//!   search, cursor and check logic is layout-blind.
//! - **Capacity bounds splits.** A node whose cells cost at most `capacity` always fits a
//!   page allocated in this transaction (`node_image` returns Some there), and the
//!   largest cell costs well under half of it: the split argument in `tree::btree` needs
//!   exactly that.
//! - **A committed version is never disturbed before commit**, if the layout promises it
//!   (`node_image` may return None instead, and the tree relocates the node).
//! - **What commit must finalize** (`finalize`) happens before any byte reaches the file,
//!   and a layout that verifies its own checksums says so (`trailer_checked` false), so
//!   the pager neither rejects its pages nor skips the trailer of a layout that needs it.

use std::fmt::Debug;

use crate::error::{Error, Pgno, Result};
use crate::format::header::Header;
use crate::page::cells::Detached;
use crate::page::{PageRef, PageWrite};

/// A page layout, as the registry hands it out.
pub type Layout = &'static dyn PageLayout;

/// Where free pages are kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FreeSpace {
    /// A chain of free-list pages from the header (`freelist_head`, `freelist_count`),
    /// rewritten in place by the transaction that frees or takes a page.
    PageList,
    /// No free list on disk (writing one would overwrite pages the committed trees still
    /// use): the free pages are those no tree owns, found by walking every tree once per
    /// open, before the first write transaction.
    TreeWalk,
}

/// Page size and the bytes a layout may use of each page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    pub page_size: usize,
    /// `page_size - PAGE_TRAILER`.
    pub usable: usize,
}

/// What one descriptor slot of a versioned page holds, for recovery's scan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DescInfo {
    pub slot: usize,
    pub tid: u64,
    pub txn_size: u32,
    /// Whether the whole version passes validation (bounds, cells, checksum).
    pub valid: bool,
}

/// How the tree balances a layout's nodes where its page format makes another choice pay
/// ([`PageLayout::tree_policy`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TreePolicy {
    /// An underfull node that still fits its page stays there instead of being merged
    /// with a sibling now. A layout whose pages are reclaimed by copying (IPS:
    /// append-only pages, garbage collected when a page overflows into a fresh one)
    /// defers rebalancing to that copy, where it costs no extra page write; an empty node
    /// is always removed.
    pub defers_merges: bool,
    /// A node that splits keeps one half on its own page (a new version there, if it
    /// fits). False asks the tree to write both halves to fresh pages and free the old
    /// one: the multi-version B-tree's version split, the ablation of LS-MVBT's lazy split.
    pub splits_in_place: bool,
}

impl Default for TreePolicy {
    /// Eager merges, in-place splits: what a B-tree does.
    fn default() -> Self {
        TreePolicy {
            defers_merges: false,
            splits_in_place: true,
        }
    }
}

/// A one-cell change of a leaf by write transaction `tid`: remove cell `at` if `remove`,
/// then insert `insert` as cell `at` (a replacement is both).
#[derive(Clone, Copy, Debug)]
pub struct LeafEdit<'a> {
    pub tid: u64,
    pub at: usize,
    pub remove: bool,
    pub insert: Option<&'a [u8]>,
}

/// What commit stamps on the versions a transaction wrote: they were tagged `written` (a
/// concurrent writer's working tid, rewritten here; `tid` itself for a serial writer) and
/// commit as `tid`, a transaction of `txn_size` pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamp {
    pub written: u64,
    pub tid: u64,
    pub txn_size: u32,
}

impl Stamp {
    /// The stamp of a serial writer, which writes under the tid it commits as.
    pub fn serial(tid: u64, txn_size: u32) -> Stamp {
        Stamp {
            written: tid,
            tid,
            txn_size,
        }
    }
}

/// An in-place edit's outcome: the new image and the capacity its cells use, or None
/// where the layout does not edit in place or the result does not fit.
pub type Edited = Option<(PageRef, usize)>;

/// Bytes at the start of a versioned page that hold both descriptor heads: a page whose
/// first `VERSION_HEADS` bytes are zero carries no version (the DHL journal's free-list
/// snapshot pages rely on it).
pub const VERSION_HEADS: usize = 64;

/// Recovery's view of a layout whose pages keep a new version beside the committed one,
/// each in its own descriptor slot tagged `(tid, txn_size)` and covered by its own
/// checksum (DHL, IPS): what the counting commit (`journal::counting`) needs to find the
/// newest complete transaction and to roll back the rest. Tree and overflow pages alike.
pub trait PageVersions: Send + Sync {
    /// The raw `(tid, txn_size)` of both descriptor slots, not validated (the cheap part
    /// of the scan); None for a buffer too small to be such a page. Both lie in the first
    /// [`VERSION_HEADS`] bytes, tid 0 meaning no version.
    fn heads(&self, buf: &[u8]) -> Option<[(u64, u32); 2]>;

    /// Both slots with their validity: None for a slot with tid 0 (or a buffer that
    /// cannot be such a page of `usable` bytes). A torn version shows up as `valid: false`.
    /// Checksums are bound to the page number (`versioned::page_seed`), so `pgno` must be
    /// where `buf` was read from.
    fn versions(&self, pgno: Pgno, buf: &[u8], usable: usize) -> [Option<DescInfo>; 2];

    /// Make every version with this `tid` absent (tid 0); whether anything changed. Only
    /// sector 0 changes, so the write doing it is atomic on a torn-write device, and
    /// repeating it is harmless.
    fn invalidate(&self, buf: &mut [u8], tid: u64) -> bool;
}

/// How a journal mode lays out its tree, overflow and header pages.
pub trait PageLayout: Send + Sync + Debug {
    /// Short name (`stock`, `dhl`), shown by `inspect` and the bench.
    fn name(&self) -> &'static str;

    // ---- Reading nodes --------------------------------------------------------------

    /// The node a reader at snapshot `visible_tid` sees in page `pgno`. Cheap checks
    /// only; every cell accessor bounds-checks what it reads. The result is owned (a
    /// layout may build the key-ordered offset array here, see [`Detached::with_view`]);
    /// `attach` it to `buf` to read the cells.
    fn open(&self, pgno: Pgno, buf: &[u8], g: Geometry, visible_tid: u64) -> Result<Detached>;

    /// [`PageLayout::open`] of a shared page image. A layout whose `open` validates
    /// the page in full (or builds a view) may remember, per image, that it did (an
    /// `Arc` image never changes while anyone holds a reference to it, weak or strong).
    fn open_page(
        &self,
        pgno: Pgno,
        page: &PageRef,
        g: Geometry,
        visible_tid: u64,
    ) -> Result<Detached> {
        self.open(pgno, page, g, visible_tid)
    }

    /// [`PageLayout::open`] plus a full structural check of the page (for `check`).
    fn open_checked(
        &self,
        pgno: Pgno,
        buf: &[u8],
        g: Geometry,
        visible_tid: u64,
    ) -> Result<Detached>;

    // ---- Accounting -----------------------------------------------------------------

    /// The most `Σ cell_cost` a written node may have.
    fn capacity(&self, g: Geometry) -> usize;

    /// What a cell of `len` bytes costs against [`PageLayout::capacity`].
    fn cell_cost(&self, len: usize) -> usize;

    // ---- Writing nodes --------------------------------------------------------------

    /// The image of page `pgno` holding a node with `cells` (in key order), or None if the
    /// layout cannot write it there without disturbing what it must keep (the tree then
    /// relocates the node to a page allocated in this transaction, where it always fits).
    fn node_image(
        &self,
        store: &dyn PageWrite,
        pgno: Pgno,
        leaf: bool,
        cells: &[Vec<u8>],
        right: Pgno,
    ) -> Result<Option<PageRef>>;

    /// In-place edit `e` of leaf `page` by the write transaction `e.tid`
    /// (`PageWrite::tid`): the new image, or None when the layout does not edit in place
    /// or the result does not fit (the tree then rebuilds the node through `node_image`,
    /// which gives the same cells).
    fn edit_leaf(&self, _pgno: Pgno, _page: &[u8], _g: Geometry, _e: LeafEdit) -> Result<Edited> {
        Ok(None)
    }

    /// Whether [`PageLayout::edit_leaf_mut`] edits a page where it lies: the layout's
    /// `edit_leaf` changes only the cells it edits, so an image of the transaction's own
    /// that nothing else shares may be edited in place instead of copied.
    fn edits_in_place(&self) -> bool {
        false
    }

    /// [`PageLayout::edit_leaf`] in `buf` itself (only called where `edits_in_place`):
    /// what the cells cost afterwards, or None, with `buf` unchanged, when the layout
    /// does not edit in place or the result does not fit.
    fn edit_leaf_mut(
        &self,
        _pgno: Pgno,
        _buf: &mut [u8],
        _g: Geometry,
        _e: LeafEdit,
    ) -> Result<Option<usize>> {
        Ok(None)
    }

    /// A balance step's change to an interior page, in `buf` itself (only called where
    /// `edits_in_place`): the cell edit `e` (as for a leaf), then child `child.0` points
    /// at `child.1`. What the cells cost afterwards, or None, with `buf` unchanged, when
    /// the cell does not fit.
    fn edit_interior_mut(
        &self,
        _pgno: Pgno,
        _buf: &mut [u8],
        _g: Geometry,
        _e: LeafEdit,
        _child: (usize, Pgno),
    ) -> Result<Option<usize>> {
        Ok(None)
    }

    /// How the tree balances this layout's nodes.
    fn tree_policy(&self) -> TreePolicy {
        TreePolicy::default()
    }

    // ---- Overflow pages -------------------------------------------------------------

    /// Value bytes per overflow page.
    fn overflow_data(&self, g: Geometry) -> usize;

    /// Overflow page `pgno` of transaction `tid` holding `chunk` and linking to `next`
    /// (its checksum binds it to `pgno`: the image verifies nowhere else).
    fn overflow_image(
        &self,
        pgno: Pgno,
        g: Geometry,
        tid: u64,
        next: Pgno,
        chunk: &[u8],
    ) -> Result<Vec<u8>>;

    /// The data (`take` bytes) and next pointer of overflow page `pgno`, part of a chain
    /// referenced from page `owner`, as a reader at `visible_tid` must see it.
    fn overflow_read<'p>(
        &self,
        owner: Pgno,
        pgno: Pgno,
        page: &'p [u8],
        g: Geometry,
        visible_tid: u64,
        take: usize,
    ) -> Result<(&'p [u8], Pgno)>;

    // ---- Free space -----------------------------------------------------------------

    /// Where free pages are kept.
    fn free_space(&self) -> FreeSpace;

    // ---- The header page and commit -------------------------------------------------

    /// Number of header slots in page 0 (each `HEADER_LEN` bytes with its own crc). With
    /// two, a commit writes the slot not holding the committed header.
    fn header_slots(&self) -> usize;

    /// The id of the transaction that creates a file: 0 where versions carry no tid, 1
    /// where the creating transaction's versions must already be visible.
    fn create_tid(&self) -> u64;

    /// Bytes just before the pager's trailer that no page of this layout uses and that
    /// are zero in every committed image (SQLite's "reserved bytes"): a journal may put
    /// its own per-page data there while the image sits in its log (`waldio` keeps its
    /// frame header there), as long as it zeroes them again before anyone reads the page.
    /// Subtracted from the usable size wherever that is computed.
    fn reserved_tail(&self) -> usize {
        0
    }

    /// Geometry of pages of `page_size` bytes under this layout.
    fn geometry_for(&self, page_size: usize) -> Geometry {
        Geometry {
            page_size,
            usable: page_size - super::PAGE_TRAILER - self.reserved_tail(),
        }
    }

    /// Whether the pager verifies the page trailer crc on read. A layout whose versions
    /// carry their own checksums (and whose recovery rewrites pages without restamping
    /// the trailer) says no.
    fn trailer_checked(&self) -> bool;

    /// The committed header in page 0, as a reader at `fcc` sees it.
    fn read_header(&self, page0: &[u8], fcc: u64) -> std::result::Result<Header, String>;

    /// Page 0 for a commit writing header `h`, given the committed page 0 and its FCC.
    fn header_image(&self, committed: &[u8], committed_fcc: u64, h: &Header) -> PageRef;

    /// What commit must do to a dirty page once the transaction's size is known: stamp
    /// `(s.tid, s.txn_size)` on the versions the transaction wrote tagged `s.written`, and
    /// the trailer crc. Errors if the page is not one this transaction wrote, or
    /// (`InvalidArgument`) where `written != tid` and the layout cannot re-tag
    /// ([`PageLayout::retags`] is false). The image is handed over: an image nobody else
    /// holds is stamped where it lies instead of copied.
    fn finalize(&self, pgno: Pgno, image: PageRef, g: Geometry, s: Stamp) -> Result<PageRef>;

    /// Whether [`PageLayout::finalize`] can re-tag a version (what concurrent writers
    /// need: see `docs/CONCURRENCY-DESIGN.md`). A layout whose tids live in its cells, or
    /// that has no per-page tag, says no.
    fn retags(&self) -> bool {
        false
    }

    /// The layout's versions, if its pages keep a new version beside the committed one
    /// (what a counting commit needs; None for layouts that overwrite in place).
    fn versions(&self) -> Option<&dyn PageVersions> {
        None
    }

    /// Give every page number the page in `buf` holds (a node's children and its cells'
    /// overflow chains, an overflow page's next page) that `moved` maps a new number, in
    /// place; whether anything changed. What moving pages to other numbers needs
    /// (`auto_vacuum`: `WriteTxn::vacuum_free`). A layout whose pages keep a committed
    /// version beside the new one cannot move a page before its commit, and refuses.
    fn repoint(
        &self,
        pgno: Pgno,
        _buf: &mut [u8],
        _g: Geometry,
        _moved: &dyn Fn(Pgno) -> Option<Pgno>,
    ) -> Result<bool> {
        Err(crate::error::Error::InvalidArgument(format!(
            "the {} layout cannot move page {pgno} to another page number",
            self.name()
        )))
    }

    // ---- Tools ----------------------------------------------------------------------

    /// What kind of page this is (`leaf`, `interior`, `overflow`, `free`, `unknown`), for
    /// the census.
    fn classify(&self, pgno: Pgno, page: &[u8], g: Geometry, visible_tid: u64) -> &'static str;

    /// Human-readable lines about page `pgno` as stored in the file (`inspect --page`).
    fn describe(&self, pgno: Pgno, page: &[u8], g: Geometry, fcc: u64) -> Vec<String>;
}

/// [`PageLayout::finalize`] of a layout that cannot re-tag: `written` must be `tid`.
pub(crate) fn refuse_retag(pgno: Pgno, s: Stamp) -> Result<()> {
    if s.written != s.tid {
        return Err(Error::InvalidArgument(format!(
            "page {pgno}: this page layout cannot re-tag transaction {} as {}",
            s.written, s.tid
        )));
    }
    Ok(())
}
