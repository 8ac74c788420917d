//! The two-version page family as one layout: pages that keep a new version beside the
//! committed one, each in its own descriptor slot tagged `(tid, txn_size)` with its own
//! checksum, written-once overflow pages, no on-disk free list, and two header slots in
//! page 0. The DHL, IPS and MVBT formats differ only in how a node version is laid out
//! inside its slot; each says so through [`NodeFormat`], and [`TwoVersion`] is the
//! [`PageLayout`] (and [`PageVersions`]) of any of them.
//!
//! Invariants, and why they hold:
//! - `node_image` keeps the committed version (tid `<= tid - 1`) bit for bit and returns
//!   None when the new version does not fit beside it (`NodeFormat::build` promises it);
//!   a page allocated in this transaction has no committed version and a node within
//!   capacity always fits there, which is what the tree's relocation relies on.
//! - Pages are verified per version by their own checksums, not by the trailer
//!   (`trailer_checked` is false): recovery's invalidations rewrite sector 0 without
//!   restamping the trailer, and the journal writes only a page's changed span.
//! - `finalize` stamps `(tid, txn_size)` into the transaction's version (or overflow
//!   descriptor) and refuses a page that carries no version of the transaction, so a
//!   commit can never count a page it did not write.
//! - Overflow pages share one format (`versioned::OverflowFormat`): written once by the
//!   transaction that allocated them, read by the tid in their descriptor.

use std::fmt::Debug;

use crate::error::{Error, Pgno, Result};
use crate::format::header::{self, Header, HEADER_SLOTS};
use crate::page::cells::Detached;
use crate::page::layout::{
    DescInfo, Edited, FreeSpace, Geometry, LeafEdit, PageLayout, PageVersions, Stamp, TreePolicy,
};
use crate::page::versioned::{self, SlotCheck, Version};
use crate::page::{page_type, PageRef, PageWrite};

/// A built page: None where the version does not fit beside the one kept.
pub(crate) type Built = Option<PageRef>;

/// What one format of the family says about its node versions. Stateless but for the
/// switches of a mode (MVBT's ablations), so one `static` per mode.
pub(crate) trait NodeFormat: SlotCheck + Send + Sync + Debug + 'static {
    /// The format's name (`dhl`, `ips`, `mvbt`), shown by `inspect` and the bench.
    const NAME: &'static str;
    /// How `inspect` calls a descriptor slot.
    const SLOT_WORD: &'static str = "descriptor";

    /// The node a reader at `visible_tid` sees, fully validated (bounds, cells, checksum).
    fn open(&self, pgno: Pgno, buf: &[u8], usable: usize, visible_tid: u64) -> Result<Detached>;
    /// [`NodeFormat::open`] of a shared image, which a format may remember it opened.
    fn open_page(
        &self,
        pgno: Pgno,
        page: &PageRef,
        usable: usize,
        visible_tid: u64,
    ) -> Result<Detached> {
        self.open(pgno, page, usable, visible_tid)
    }

    /// The most `Σ cell_cost` a written node may have.
    fn capacity(&self, usable: usize) -> usize;
    /// What a cell of `len` bytes costs.
    fn cell_cost(&self, len: usize) -> usize;
    /// Page `pgno` with `v` written beside the versions of `base` older than `v.tid`
    /// (kept bit for bit), or None if it does not fit there.
    fn build(&self, pgno: Pgno, g: Geometry, base: Option<&[u8]>, v: &Version) -> Result<Built>;
    /// [`PageLayout::edit_leaf`]; None (rebuild through `build`) unless the format edits
    /// in place.
    fn edit_leaf(&self, _pgno: Pgno, _page: &[u8], _usable: usize, _e: LeafEdit) -> Result<Edited> {
        Ok(None)
    }
    /// [`PageLayout::tree_policy`].
    fn tree_policy(&self) -> TreePolicy {
        TreePolicy::default()
    }

    /// Stamp `s` on the version of `page` tagged `s.written` (false: the page carries
    /// none). Errors where `written != tid` and the format cannot re-tag.
    fn restamp(&self, pgno: Pgno, page: &mut PageRef, usable: usize, s: Stamp) -> Result<bool>;
    /// [`PageLayout::retags`].
    fn retags(&self) -> bool;

    /// What `inspect` adds about descriptor `slot` (its shape), or nothing.
    fn describe_slot(&self, _pgno: Pgno, _page: &[u8], _usable: usize, _slot: usize) -> String {
        String::new()
    }
    /// `inspect`'s line about the version a reader at `fcc` sees.
    fn describe_visible(&self, pgno: Pgno, page: &[u8], usable: usize, fcc: u64) -> Result<String>;
}

/// The layout of a two-version format.
#[derive(Debug)]
pub(crate) struct TwoVersion<F>(pub F);

impl<F: NodeFormat> PageLayout for TwoVersion<F> {
    fn name(&self) -> &'static str {
        F::NAME
    }

    fn open(&self, pgno: Pgno, buf: &[u8], g: Geometry, visible_tid: u64) -> Result<Detached> {
        self.0.open(pgno, buf, g.usable, visible_tid)
    }

    fn open_page(
        &self,
        pgno: Pgno,
        page: &PageRef,
        g: Geometry,
        visible_tid: u64,
    ) -> Result<Detached> {
        self.0.open_page(pgno, page, g.usable, visible_tid)
    }

    fn open_checked(
        &self,
        pgno: Pgno,
        buf: &[u8],
        g: Geometry,
        visible_tid: u64,
    ) -> Result<Detached> {
        // `open` validates the whole version (bounds, overlaps, checksum).
        self.open(pgno, buf, g, visible_tid)
    }

    fn capacity(&self, g: Geometry) -> usize {
        self.0.capacity(g.usable)
    }

    fn cell_cost(&self, len: usize) -> usize {
        self.0.cell_cost(len)
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
        let (tid, base) = versioned::write_base(store, pgno, F::LABEL)?;
        let version = Version {
            tid,
            txn_size: 0,
            leaf,
            right,
            cells,
        };
        let g = store.geometry();
        self.0.build(pgno, g, base.as_deref(), &version)
    }

    fn edit_leaf(&self, pgno: Pgno, page: &[u8], g: Geometry, e: LeafEdit) -> Result<Edited> {
        if e.tid == 0 {
            return Ok(None);
        }
        self.0.edit_leaf(pgno, page, g.usable, e)
    }

    fn tree_policy(&self) -> TreePolicy {
        self.0.tree_policy()
    }

    fn overflow_data(&self, g: Geometry) -> usize {
        versioned::overflow_data(g.usable)
    }

    fn overflow_image(
        &self,
        pgno: Pgno,
        g: Geometry,
        tid: u64,
        next: Pgno,
        chunk: &[u8],
    ) -> Result<Vec<u8>> {
        F::OVERFLOW.image(pgno, g.page_size, g.usable, tid, next, chunk)
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
        let o = F::OVERFLOW.open(pgno, page, g.usable)?;
        versioned::chain_page(owner, pgno, o.tid, o.data, o.next, visible_tid, take)
    }

    fn free_space(&self) -> FreeSpace {
        FreeSpace::TreeWalk
    }

    fn header_slots(&self) -> usize {
        HEADER_SLOTS
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

    fn finalize(&self, pgno: Pgno, image: PageRef, g: Geometry, s: Stamp) -> Result<PageRef> {
        // The tree builds versions with txn_size 0; only now is the count known. An image
        // still shared (a reader's, a spill's) is copied here, once.
        let mut page = image;
        if !self.0.restamp(pgno, &mut page, g.usable, s)? {
            return Err(Error::corrupt(
                pgno,
                format!("dirty page has no version of transaction {}", s.written),
            ));
        }
        // No trailer crc: pages are verified per version (`trailer_checked` is false), and
        // the journal writes only a page's changed span, which skips the trailer; a crc
        // there would cost 4 KiB of crc32c per page per commit for nothing.
        Ok(page)
    }

    fn retags(&self) -> bool {
        self.0.retags()
    }

    fn versions(&self) -> Option<&dyn PageVersions> {
        Some(self)
    }

    fn classify(&self, pgno: Pgno, page: &[u8], g: Geometry, visible_tid: u64) -> &'static str {
        if let Ok(v) = self.0.open(pgno, page, g.usable, visible_tid) {
            return if v.is_leaf() { "leaf" } else { "interior" };
        }
        match F::OVERFLOW.open(pgno, page, g.usable) {
            Ok(o) if o.tid <= visible_tid => page_type::name(page_type::OVERFLOW),
            _ => "unused",
        }
    }

    fn describe(&self, pgno: Pgno, page: &[u8], g: Geometry, fcc: u64) -> Vec<String> {
        if pgno == 0 {
            return versioned::describe_header_slots(page);
        }
        let word = F::SLOT_WORD;
        let mut v = Vec::new();
        for (slot, d) in F::page_versions(pgno, page, g.usable).iter().enumerate() {
            v.push(match d {
                None => format!("{word} {slot}: empty (tid 0)"),
                Some(d) => format!(
                    "{word} {slot}: tid {} txn_size {} {}{}{}",
                    d.tid,
                    d.txn_size,
                    if d.valid { "valid" } else { "INVALID" },
                    if d.valid && d.tid <= fcc {
                        ", committed"
                    } else {
                        ""
                    },
                    self.0.describe_slot(pgno, page, g.usable, slot)
                ),
            });
        }
        v.push(match self.0.describe_visible(pgno, page, g.usable, fcc) {
            Ok(line) => line,
            Err(e) => match F::OVERFLOW.open(pgno, page, g.usable) {
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

impl<F: NodeFormat> PageVersions for TwoVersion<F> {
    fn heads(&self, buf: &[u8]) -> Option<[(u64, u32); 2]> {
        // Every format of the family keeps `(tid, txn_size)` at the same place of both
        // descriptor slots (`versioned`).
        versioned::descriptor_heads(buf)
    }

    fn versions(&self, pgno: Pgno, buf: &[u8], usable: usize) -> [Option<DescInfo>; 2] {
        F::page_versions(pgno, buf, usable)
    }

    fn invalidate(&self, buf: &mut [u8], tid: u64) -> bool {
        versioned::invalidate(buf, tid)
    }
}
