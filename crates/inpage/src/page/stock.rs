//! The stock layout: slotted tree pages ([`slotted`]) written in place, overflow pages
//! with an 8-byte header, a free list chained through free pages, one header slot.
//!
//! Invariants: a node within `capacity` always fits a page (the slotted page's capacity
//! is exactly the bytes left after its header), so `node_image` never returns None; pages
//! carry no transaction id, so the committed image is whatever the journal (rollback
//! journal, WAL) keeps, and every page is verified by the pager's trailer crc. With a
//! reserved tail the tail stays zero: every image is built from a zeroed page or edited
//! within the first `g.usable` bytes, and `g.usable` excludes the tail.

use crate::error::{Error, Pgno, Result};
use crate::format::header::{self, Header};
use crate::le::{get_u32, put_u32};
use crate::page::cell::PTR_SIZE;
use crate::page::cells::Detached;
use crate::page::layout::{Edited, FreeSpace, Geometry, LeafEdit, PageLayout, Stamp};
use crate::page::slotted;
use crate::page::{crc_ok, page_type, stamp_crc, PageRef, PageWrite};

/// The stock layout; `tail` is its reserved tail (a format option, SQLite's reserved
/// bytes), zero except for the modes that embed a log frame header in it.
#[derive(Debug)]
pub(crate) struct Stock {
    tail: usize,
}

/// The stock layout without a reserved tail, which most stock modes name.
pub(crate) static STOCK: Stock = Stock { tail: 0 };

/// Bytes of the reserved tail of [`STOCK_RESERVED`].
pub(crate) const RESERVED_TAIL: usize = 32;

/// Stock pages with a 32-byte reserved tail before the trailer (the `waldio` modes put
/// each log frame's header there, so a frame is exactly one page).
pub(crate) static STOCK_RESERVED: Stock = Stock {
    tail: RESERVED_TAIL,
};

/// Where an overflow page keeps its next pointer.
const OVFL_NEXT: usize = 4;

impl PageLayout for Stock {
    fn name(&self) -> &'static str {
        "stock"
    }

    fn open(&self, pgno: Pgno, buf: &[u8], g: Geometry, _: u64) -> Result<Detached> {
        Ok(slotted::Page::open(pgno, buf, g.usable)?.detach())
    }

    fn open_checked(&self, pgno: Pgno, buf: &[u8], g: Geometry, _: u64) -> Result<Detached> {
        let p = slotted::Page::open(pgno, buf, g.usable)?;
        p.validate()?;
        Ok(p.detach())
    }

    fn capacity(&self, g: Geometry) -> usize {
        slotted::capacity(g.usable)
    }

    fn cell_cost(&self, len: usize) -> usize {
        len + PTR_SIZE
    }

    fn node_image(
        &self,
        store: &dyn PageWrite,
        _pgno: Pgno,
        leaf: bool,
        cells: &[Vec<u8>],
        right: Pgno,
    ) -> Result<Option<PageRef>> {
        Ok(Some(
            slotted::build(store.page_size(), store.usable_size(), leaf, cells, right).into(),
        ))
    }

    fn edit_leaf(&self, pgno: Pgno, page: &[u8], g: Geometry, e: LeafEdit) -> Result<Edited> {
        // Built in the `Arc` the transaction keeps: one copy of the page per edit.
        let mut img = PageRef::from(page);
        let buf = std::sync::Arc::get_mut(&mut img).expect("a new image has one owner");
        Ok(edit_slotted(pgno, buf, g, e)?.map(|used| (img, used)))
    }

    fn edits_in_place(&self) -> bool {
        true
    }

    fn edit_leaf_mut(
        &self,
        pgno: Pgno,
        buf: &mut [u8],
        g: Geometry,
        e: LeafEdit,
    ) -> Result<Option<usize>> {
        edit_slotted(pgno, buf, g, e)
    }

    fn edit_interior_mut(
        &self,
        pgno: Pgno,
        buf: &mut [u8],
        g: Geometry,
        e: LeafEdit,
        (i, child): (usize, Pgno),
    ) -> Result<Option<usize>> {
        let Some(used) = edit_slotted(pgno, buf, g, e)? else {
            return Ok(None);
        };
        slotted::set_child(pgno, buf, g.usable, i, child)?;
        Ok(Some(used))
    }

    fn overflow_data(&self, g: Geometry) -> usize {
        slotted::overflow_data(g.usable)
    }

    fn overflow_image(
        &self,
        _pgno: Pgno,
        g: Geometry,
        _tid: u64,
        next: Pgno,
        chunk: &[u8],
    ) -> Result<Vec<u8>> {
        // Bound to its page number by the trailer, which the pager stamps.
        debug_assert!(chunk.len() <= self.overflow_data(g));
        let mut buf = vec![0u8; g.page_size];
        buf[0] = page_type::OVERFLOW;
        put_u32(&mut buf, OVFL_NEXT, next);
        buf[slotted::OVFL_HEADER..slotted::OVFL_HEADER + chunk.len()].copy_from_slice(chunk);
        Ok(buf)
    }

    fn overflow_read<'p>(
        &self,
        owner: Pgno,
        pgno: Pgno,
        page: &'p [u8],
        g: Geometry,
        _: u64,
        take: usize,
    ) -> Result<(&'p [u8], Pgno)> {
        if page.len() < g.usable || page[0] != page_type::OVERFLOW {
            let t = page.first().copied().unwrap_or(0);
            return Err(Error::corrupt(
                pgno,
                format!(
                    "expected an overflow page (chain from page {owner}), found type {t} ({})",
                    page_type::name(t)
                ),
            ));
        }
        if take > self.overflow_data(g) {
            return Err(Error::corrupt(
                pgno,
                format!("overflow page asked for {take} bytes, more than a page holds"),
            ));
        }
        let next = get_u32(page, OVFL_NEXT);
        Ok((
            &page[slotted::OVFL_HEADER..slotted::OVFL_HEADER + take],
            next,
        ))
    }

    fn repoint(
        &self,
        pgno: Pgno,
        buf: &mut [u8],
        g: Geometry,
        moved: &dyn Fn(Pgno) -> Option<Pgno>,
    ) -> Result<bool> {
        match buf.first().copied() {
            Some(page_type::OVERFLOW) if buf.len() >= g.usable => {
                let next = get_u32(buf, OVFL_NEXT);
                match moved(next) {
                    Some(_) if crate::seam::planted(crate::seam::Plant::VacuumSkipsChainLink) => {
                        Ok(true)
                    }
                    Some(to) if next != 0 => {
                        put_u32(buf, OVFL_NEXT, to);
                        Ok(true)
                    }
                    _ => Ok(false),
                }
            }
            _ => slotted::repoint(pgno, buf, g.usable, moved),
        }
    }

    fn free_space(&self) -> FreeSpace {
        FreeSpace::PageList
    }

    fn header_slots(&self) -> usize {
        1
    }

    fn create_tid(&self) -> u64 {
        0
    }

    fn trailer_checked(&self) -> bool {
        true
    }

    fn reserved_tail(&self) -> usize {
        self.tail
    }

    fn read_header(&self, page0: &[u8], _fcc: u64) -> std::result::Result<Header, String> {
        if !crc_ok(page0, 0) {
            return Err("header page checksum mismatch".into());
        }
        Header::decode(page0)
    }

    fn header_image(&self, _committed: &[u8], _committed_fcc: u64, h: &Header) -> PageRef {
        let mut p = vec![0u8; h.page_size as usize];
        h.encode(&mut p);
        stamp_crc(&mut p, 0);
        PageRef::from(p)
    }

    fn finalize(&self, pgno: Pgno, image: PageRef, _: Geometry, s: Stamp) -> Result<PageRef> {
        crate::page::layout::refuse_retag(pgno, s)?;
        Ok(image)
    }

    fn classify(&self, _: Pgno, page: &[u8], _: Geometry, _: u64) -> &'static str {
        page_type::name(page.first().copied().unwrap_or(0))
    }

    fn describe(&self, pgno: Pgno, page: &[u8], g: Geometry, _fcc: u64) -> Vec<String> {
        if pgno == 0 {
            return match header::decode_slot(page, 0) {
                Ok(s) => vec![format!(
                    "header: fcc {} txn_size {} pages {} catalog root {} free {} (head {})",
                    s.fcc,
                    s.last_txn_size,
                    s.page_count,
                    s.catalog_root,
                    s.freelist_count,
                    s.freelist_head
                )],
                Err(e) => vec![format!("header: invalid ({e})")],
            };
        }
        let t = page[0];
        let mut v = vec![format!(
            "type {t} ({}), trailer crc {}",
            page_type::name(t),
            if crc_ok(page, pgno) { "ok" } else { "MISMATCH" }
        )];
        if let Ok(p) = slotted::Page::open(pgno, page, g.usable) {
            v.push(format!(
                "{} with {} cells, {} bytes free",
                if p.is_leaf() { "leaf" } else { "interior" },
                p.ncells(),
                p.free_space()
            ));
        }
        v
    }
}

/// Apply a one-cell leaf edit to the slotted page in `buf`: the capacity its cells use
/// afterwards, or None, with `buf` unchanged, when the cell does not fit.
fn edit_slotted(pgno: Pgno, buf: &mut [u8], g: Geometry, e: LeafEdit) -> Result<Option<usize>> {
    match (e.remove, e.insert) {
        (true, Some(cell)) => {
            if !slotted::replace_cell(pgno, buf, g.usable, e.at, cell)? {
                return Ok(None);
            }
        }
        (true, None) => slotted::remove_cell(pgno, buf, g.usable, e.at)?,
        (false, Some(cell)) => {
            if !slotted::insert_cell(pgno, buf, g.usable, e.at, cell)? {
                return Ok(None);
            }
        }
        (false, None) => {}
    }
    Ok(Some(slotted::Page::open(pgno, buf, g.usable)?.used()))
}
