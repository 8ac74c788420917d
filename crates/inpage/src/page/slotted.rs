//! Stock slotted page: the B+tree node layout of every journal mode that is not DHL
//! (`off`, `off-opt`, the rollback modes `delete`, `truncate`, `persist`, and `wal`).
//!
//! Layout (all integers little-endian; `usable` = page size − pager trailer):
//!
//! ```text
//! 0      type      u8   page_type::LEAF or page_type::INTERIOR
//! 1      reserved  u8   0
//! 2..4   ncells    u16
//! 4..6   content   u16  offset of the lowest cell byte (== usable when there are no cells)
//! 6..8   frag      u16  bytes of holes inside [content, usable) left by removed cells
//! 8..12  right     u32  interior: rightmost child; leaf: 0
//! 12..   cell-pointer array, ncells × u16 cell offsets, in key order
//! ...    free gap
//! content..usable   cells, packed from the end of the usable area downwards
//! ```
//!
//! Cells are encoded by [`cell`](crate::page::cell) (the codec both layouts share): its
//! inline rule and `max_cell` bound decide each cell's size from its header alone.
//!
//! Invariants (checked by [`Page::validate`], relied on by the tree):
//! - `12 + 2·ncells <= content <= usable`, so the pointer array and the cell area never
//!   overlap; every pointer lies in `[content, usable)` and its cell ends by `usable`.
//! - Cells do not overlap and `Σ cell sizes + frag == usable − content` exactly: removal
//!   either moves `content` up (cell at the bottom) or adds the cell to `frag`, and
//!   defragmentation repacks all cells and zeroes `frag`, so the accounting is exact.
//! - Every cell is at most `max_cell(usable)` bytes, which leaves room for four cells plus
//!   their pointers after this page's 12-byte header (`cell::NODE_HEADER_MAX`, checked at
//!   compile time). That is what guarantees a split of an overflowing page into two
//!   fitting halves (see `tree`).
//!
//! Pages come from disk, so every accessor bounds-checks the offsets it reads and returns
//! `Error::Corrupt` rather than panicking.

use crate::error::{Error, Pgno, Result};
use crate::le::{get_u16, get_u32, put_u16, put_u32};
use crate::page::cell::NODE_HEADER_MAX;
use crate::page::cells::CellArray;
use crate::page::page_type;

use crate::page::cell::{max_cell, PTR_SIZE};

/// Bytes of the page header (same for leaves and interiors).
pub const HEADER_SIZE: usize = 12;
// `max_cell` promises four maximal cells fit after a header of at most this size.
const _: () = assert!(HEADER_SIZE <= NODE_HEADER_MAX);
/// Overflow page header: type u8, 3 reserved bytes, next pgno u32 (0 ends the chain).
pub const OVFL_HEADER: usize = 8;

const OFF_NCELLS: usize = 2;
const OFF_CONTENT: usize = 4;
const OFF_FRAG: usize = 6;
const OFF_RIGHT: usize = 8;

/// Bytes available for pointers and cells in a page.
pub fn capacity(usable: usize) -> usize {
    usable.saturating_sub(HEADER_SIZE)
}

/// Value bytes carried by each overflow page.
pub fn overflow_data(usable: usize) -> usize {
    usable.saturating_sub(OVFL_HEADER)
}

/// Read-only, bounds-checked view of a leaf or interior page. The cell accessors are
/// those of [`CellArray`] (through `Deref`), shared with the DHL layout.
#[derive(Clone, Copy)]
pub struct Page<'a> {
    cells: CellArray<'a>,
    content: usize,
    frag: usize,
}

impl<'a> std::ops::Deref for Page<'a> {
    type Target = CellArray<'a>;
    fn deref(&self) -> &CellArray<'a> {
        &self.cells
    }
}

impl<'a> Page<'a> {
    /// Parse and sanity-check the header. Cells are checked lazily by the accessors
    /// (and all at once by `validate`).
    pub fn open(pgno: Pgno, buf: &'a [u8], usable: usize) -> Result<Page<'a>> {
        if buf.len() < usable || usable < HEADER_SIZE {
            return Err(Error::corrupt(
                pgno,
                "page buffer shorter than the usable size",
            ));
        }
        let leaf = match buf[0] {
            page_type::LEAF => true,
            page_type::INTERIOR => false,
            t => {
                return Err(Error::corrupt(
                    pgno,
                    format!(
                        "expected a tree page, found type {t} ({})",
                        page_type::name(t)
                    ),
                ))
            }
        };
        let ncells = get_u16(buf, OFF_NCELLS);
        let content = get_u16(buf, OFF_CONTENT);
        let frag = get_u16(buf, OFF_FRAG);
        let ptr_end = HEADER_SIZE + PTR_SIZE * ncells;
        if ptr_end > content || content > usable {
            return Err(Error::corrupt(
                pgno,
                format!(
                    "header out of bounds: {ncells} cells need {ptr_end} bytes, content starts at {content}, usable {usable}"
                ),
            ));
        }
        if frag > usable - content {
            return Err(Error::corrupt(
                pgno,
                format!(
                    "fragmented bytes {frag} exceed the cell area {}",
                    usable - content
                ),
            ));
        }
        let page = Page {
            cells: CellArray {
                pgno,
                buf,
                arr: buf,
                usable,
                leaf,
                ncells,
                array_off: HEADER_SIZE,
                area_start: content,
                right: get_u32(buf, OFF_RIGHT),
            },
            content,
            frag,
        };
        if leaf && page.right_child() != 0 {
            return Err(Error::corrupt(pgno, "leaf page has a right-child pointer"));
        }
        Ok(page)
    }

    /// Bytes a new cell plus pointer may use, after defragmentation if needed.
    pub fn free_space(&self) -> usize {
        self.content - (HEADER_SIZE + PTR_SIZE * self.ncells) + self.frag
    }
    /// Bytes used by cells and their pointers.
    pub fn used(&self) -> usize {
        capacity(self.usable) - self.free_space()
    }

    /// Full structural check: every cell in bounds, no two cells overlap, and the
    /// free-space accounting is exact.
    pub fn validate(&self) -> Result<()> {
        let mut ranges = (0..self.ncells)
            .map(|i| self.cell_range(i).map(|(off, size)| (off, size, i)))
            .collect::<Result<Vec<_>>>()?;
        ranges.sort_unstable();
        for w in ranges.windows(2) {
            let ((a, asz, ai), (b, _, bi)) = (w[0], w[1]);
            if a + asz > b {
                return Err(Error::corrupt(
                    self.pgno,
                    format!(
                        "cell {ai} at [{a}, {}) overlaps cell {bi} at offset {b}",
                        a + asz
                    ),
                ));
            }
        }
        let cells: usize = ranges.iter().map(|r| r.1).sum();
        if cells + self.frag != self.usable - self.content {
            return Err(Error::corrupt(
                self.pgno,
                format!(
                    "space accounting mismatch: cells {cells} + fragmented {} != cell area {}",
                    self.frag,
                    self.usable - self.content
                ),
            ));
        }
        Ok(())
    }
}

/// Build a page image from cells (already in key order). The caller guarantees they fit.
pub fn build(
    page_size: usize,
    usable: usize,
    leaf: bool,
    cells: &[Vec<u8>],
    right: Pgno,
) -> Vec<u8> {
    let mut buf = vec![0u8; page_size];
    buf[0] = if leaf {
        page_type::LEAF
    } else {
        page_type::INTERIOR
    };
    put_u32(&mut buf, OFF_RIGHT, if leaf { 0 } else { right });
    let mut content = usable;
    for (i, c) in cells.iter().enumerate() {
        debug_assert!(c.len() <= max_cell(usable));
        content -= c.len();
        buf[content..content + c.len()].copy_from_slice(c);
        put_u16(&mut buf, HEADER_SIZE + PTR_SIZE * i, content);
    }
    debug_assert!(
        HEADER_SIZE + PTR_SIZE * cells.len() <= content,
        "cells overflow the page"
    );
    put_u16(&mut buf, OFF_NCELLS, cells.len());
    put_u16(&mut buf, OFF_CONTENT, content);
    buf
}

/// An empty leaf page image.
#[cfg(test)]
pub fn empty_leaf(page_size: usize, usable: usize) -> Vec<u8> {
    build(page_size, usable, true, &[], 0)
}

/// Insert `cell` as cell `i` of the page in `buf`, defragmenting if the free space is
/// there but not contiguous. Ok(false) (page unchanged) if it does not fit.
pub fn insert_cell(
    pgno: Pgno,
    buf: &mut [u8],
    usable: usize,
    i: usize,
    cell: &[u8],
) -> Result<bool> {
    let page = Page::open(pgno, buf, usable)?;
    let n = page.ncells();
    debug_assert!(i <= n && cell.len() <= max_cell(usable));
    let need = cell.len() + PTR_SIZE;
    if need > page.free_space() {
        return Ok(false);
    }
    let ptr_end = HEADER_SIZE + PTR_SIZE * n;
    if page.content - ptr_end < need {
        defragment(pgno, buf, usable)?;
    }
    // Only a page whose `frag` over-claims holes can still lack the gap here.
    let content = get_u16(buf, OFF_CONTENT);
    if content < ptr_end + need {
        return Err(Error::corrupt(
            pgno,
            "fragmented-bytes count exceeds the actual holes",
        ));
    }
    let content = content - cell.len();
    buf[content..content + cell.len()].copy_from_slice(cell);
    let at = HEADER_SIZE + PTR_SIZE * i;
    buf.copy_within(at..ptr_end, at + PTR_SIZE);
    put_u16(buf, at, content);
    put_u16(buf, OFF_NCELLS, n + 1);
    put_u16(buf, OFF_CONTENT, content);
    Ok(true)
}

/// Remove cell `i` from the page in `buf`. The hole joins `frag` unless the cell was the
/// lowest one, in which case the content area simply shrinks.
pub fn remove_cell(pgno: Pgno, buf: &mut [u8], usable: usize, i: usize) -> Result<()> {
    let page = Page::open(pgno, buf, usable)?;
    let n = page.ncells();
    let (off, size) = page.cell_range(i)?;
    let (content, frag) = (page.content, page.frag);
    buf[off..off + size].fill(0);
    let at = HEADER_SIZE + PTR_SIZE * i;
    let ptr_end = HEADER_SIZE + PTR_SIZE * n;
    buf.copy_within(at + PTR_SIZE..ptr_end, at);
    buf[ptr_end - PTR_SIZE..ptr_end].fill(0);
    put_u16(buf, OFF_NCELLS, n - 1);
    if off == content {
        put_u16(buf, OFF_CONTENT, content + size);
    } else {
        // A corrupt page could claim more holes than the area has; validate reports it.
        put_u16(buf, OFF_FRAG, (frag + size).min(usable - content));
    }
    Ok(())
}

/// Replace cell `i` of the page in `buf` by `cell`. A cell no longer than the old one is
/// written where the old one was (the rest of its room joins `frag`): an update of a row
/// rewrites its own bytes, not the whole page, which a remove and then an insert into a
/// full content area would (`defragment`), and a redo record holds only those bytes.
/// A longer one: remove and insert. Ok(false), with `buf` unchanged, if it does not fit
/// (a caller may edit the transaction's own image in place: `edit_leaf_mut`).
pub fn replace_cell(
    pgno: Pgno,
    buf: &mut [u8],
    usable: usize,
    i: usize,
    cell: &[u8],
) -> Result<bool> {
    let page = Page::open(pgno, buf, usable)?;
    let (off, size) = page.cell_range(i)?;
    if cell.len() > size {
        // Removing frees the old cell and its pointer; the new one needs a pointer too.
        if cell.len() > page.free_space() + size {
            return Ok(false);
        }
        remove_cell(pgno, buf, usable, i)?;
        return insert_cell(pgno, buf, usable, i, cell);
    }
    let (content, frag) = (page.content, page.frag);
    buf[off..off + cell.len()].copy_from_slice(cell);
    let rest = size - cell.len();
    if rest > 0 {
        buf[off + cell.len()..off + size].fill(0);
        // A corrupt page could claim more holes than the area has; validate reports it.
        put_u16(buf, OFF_FRAG, (frag + rest).min(usable - content));
    }
    Ok(true)
}

/// Point child `i` of the interior page in `buf` at `child`: the child field of cell `i`,
/// or the right child for `i == ncells`.
pub fn set_child(pgno: Pgno, buf: &mut [u8], usable: usize, i: usize, child: Pgno) -> Result<()> {
    let page = Page::open(pgno, buf, usable)?;
    if page.is_leaf() {
        return Err(Error::corrupt(pgno, "child pointer asked of a leaf"));
    }
    let n = page.ncells();
    if i == n {
        put_u32(buf, OFF_RIGHT, child);
        return Ok(());
    }
    let (off, size) = page.cell_range(i)?;
    if size < 6 {
        return Err(Error::corrupt(pgno, format!("interior cell {i} too short")));
    }
    buf[off + 2..off + 6].copy_from_slice(&child.to_le_bytes());
    Ok(())
}

/// Give every page number the node in `buf` holds that `moved` maps a new number:
/// children (the right child included), the first pages of its cells' overflow chains
/// (long keys' tails, leaf values). Whether anything changed. Cell sizes and offsets stay
/// as they are, so the page stays valid.
pub fn repoint(
    pgno: Pgno,
    buf: &mut [u8],
    usable: usize,
    moved: &dyn Fn(Pgno) -> Option<Pgno>,
) -> Result<bool> {
    let page = Page::open(pgno, buf, usable)?;
    let leaf = page.is_leaf();
    let n = page.ncells();
    let ranges = (0..n)
        .map(|i| page.cell_range(i))
        .collect::<Result<Vec<_>>>()?;
    let mut changed = false;
    if !leaf {
        if let Some(to) = moved(get_u32(buf, OFF_RIGHT)) {
            put_u32(buf, OFF_RIGHT, to);
            changed = true;
        }
    }
    for (off, size) in ranges {
        let cell = &mut buf[off..off + size];
        if !leaf {
            if let Some(to) = moved(crate::page::cell::cell_child(cell)) {
                cell[2..6].copy_from_slice(&to.to_le_bytes());
                changed = true;
            }
        }
        if let Some((_, first)) = crate::page::cell::cell_key(usable, cell).tail() {
            if let Some(to) = moved(first) {
                crate::page::cell::set_key_tail(usable, cell, to);
                changed = true;
            }
        }
        if leaf {
            if let crate::page::cell::Payload::Overflow { first, .. } =
                crate::page::cell::cell_payload(usable, cell)
            {
                if let Some(to) = moved(first) {
                    crate::page::cell::set_value_first(usable, cell, to);
                    changed = true;
                }
            }
        }
    }
    Ok(changed)
}

/// Repack all cells at the end of the usable area so the free space is one gap: the
/// image `build` makes of the same cells (cell 0 highest), made in `buf` from one copy of
/// the page, not one buffer per cell.
pub fn defragment(pgno: Pgno, buf: &mut [u8], usable: usize) -> Result<()> {
    // A page near full defragments on most inserts that follow a growing update, so the
    // ranges and the old cell area live in a per-thread scratch, not fresh allocations.
    /// The cells' (offset, size) and a copy of the old cell area.
    type Scratch = (Vec<(usize, usize)>, Vec<u8>);
    thread_local! {
        static SCRATCH: std::cell::RefCell<Scratch> =
            const { std::cell::RefCell::new((Vec::new(), Vec::new())) };
    }
    SCRATCH.with(|s| {
        let mut s = s.borrow_mut();
        let (ranges, old) = &mut *s;
        ranges.clear();
        let page = Page::open(pgno, buf, usable)?;
        let n = page.ncells();
        let from = page.content;
        let mut total = 0;
        for i in 0..n {
            let r = page.cell_range(i)?;
            total += r.1 + PTR_SIZE;
            ranges.push(r);
        }
        if total > capacity(usable) {
            return Err(Error::corrupt(
                pgno,
                format!("cells total {total} bytes, more than the page holds (overlapping cells)"),
            ));
        }
        // Every cell lies in [content, usable) (`cell_range` checks it): only that area
        // is kept.
        old.clear();
        old.extend_from_slice(&buf[from..usable]);
        let mut content = usable;
        for (i, &(off, size)) in ranges.iter().enumerate() {
            content -= size;
            buf[content..content + size].copy_from_slice(&old[off - from..off - from + size]);
            put_u16(buf, HEADER_SIZE + PTR_SIZE * i, content);
        }
        buf[HEADER_SIZE + PTR_SIZE * n..content].fill(0);
        put_u16(buf, OFF_CONTENT, content);
        put_u16(buf, OFF_FRAG, 0);
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::page::cell::*;
    use std::cmp::Ordering;

    const PS: usize = 512;
    const US: usize = 508;

    fn cmp(a: &[u8], b: &[u8]) -> Ordering {
        a.cmp(b)
    }

    #[test]
    fn limits_for_small_pages() {
        assert_eq!(max_cell(US), 122);
        assert_eq!(max_key_len(US), 112);
        assert_eq!(max_key_len(4092), 1008);
        assert!(4 * (max_cell(US) + PTR_SIZE) <= capacity(US));
        assert!(4 * (max_cell(65532) + PTR_SIZE) <= capacity(65532));
        assert!(value_is_inline(US, 0, 116));
        assert!(!value_is_inline(US, 0, 117));
    }

    #[test]
    fn replace_in_place_keeps_the_other_cells_where_they_are() {
        let mut buf = empty_leaf(PS, US);
        let cells: Vec<Vec<u8>> = (0..6u8)
            .map(|i| leaf_cell_inline(&[i; 8], &[i; 40]))
            .collect();
        for (i, c) in cells.iter().enumerate() {
            assert!(insert_cell(1, &mut buf, US, i, c).unwrap());
        }
        let free = Page::open(1, &buf, US).unwrap().free_space();
        let before = buf.clone();
        // Shorter: written in place, the rest of its room counted as fragments.
        let short = leaf_cell_inline(&[2; 8], &[9; 30]);
        assert!(replace_cell(1, &mut buf, US, 2, &short).unwrap());
        let p = Page::open(1, &buf, US).unwrap();
        p.validate().unwrap();
        assert_eq!(p.free_space(), free + cells[2].len() - short.len());
        assert_eq!(p.cell(2).unwrap(), &short[..]);
        for i in [0, 1, 3, 4, 5] {
            assert_eq!(p.cell(i).unwrap(), &cells[i][..]);
            assert_eq!(
                p.cell_range(i).unwrap(),
                Page::open(1, &before, US).unwrap().cell_range(i).unwrap()
            );
        }
        // The same size again: in place, nothing else moves.
        let same = leaf_cell_inline(&[2; 8], &[7; 30]);
        let before = buf.clone();
        assert!(replace_cell(1, &mut buf, US, 2, &same).unwrap());
        let changed: Vec<usize> = (0..PS).filter(|&j| buf[j] != before[j]).collect();
        let (off, size) = Page::open(1, &buf, US).unwrap().cell_range(2).unwrap();
        assert!(
            changed.iter().all(|&j| j >= off && j < off + size),
            "{changed:?}"
        );
        // Longer: remove and insert, still a valid page with every cell.
        let long = leaf_cell_inline(&[2; 8], &[5; 60]);
        assert!(replace_cell(1, &mut buf, US, 2, &long).unwrap());
        let p = Page::open(1, &buf, US).unwrap();
        p.validate().unwrap();
        assert_eq!(p.cell(2).unwrap(), &long[..]);
        assert_eq!(p.ncells(), 6);
    }

    #[test]
    fn insert_remove_defragment() {
        let mut buf = empty_leaf(PS, US);
        let cells: Vec<Vec<u8>> = (0..4u8)
            .map(|i| leaf_cell_inline(&[i; 10], &[i; 100]))
            .collect();
        for (i, c) in cells.iter().enumerate() {
            assert!(insert_cell(1, &mut buf, US, i, c).unwrap());
        }
        let page = Page::open(1, &buf, US).unwrap();
        page.validate().unwrap();
        assert_eq!(page.free_space(), capacity(US) - 4 * (116 + 2));
        // A fifth large cell does not fit.
        assert!(!insert_cell(1, &mut buf, US, 4, &cells[0]).unwrap());
        // Remove a middle cell: its bytes become a hole, not contiguous free space.
        remove_cell(1, &mut buf, US, 1).unwrap();
        let page = Page::open(1, &buf, US).unwrap();
        page.validate().unwrap();
        assert_eq!(page.frag, 116);
        assert!(page.content - (HEADER_SIZE + 3 * PTR_SIZE) < 118);
        // Re-inserting needs the hole, so it defragments.
        assert!(insert_cell(1, &mut buf, US, 1, &cells[1]).unwrap());
        let page = Page::open(1, &buf, US).unwrap();
        page.validate().unwrap();
        assert_eq!(page.frag, 0);
        for (i, cell) in cells.iter().enumerate() {
            assert_eq!(page.cell(i).unwrap(), &cell[..]);
            assert_eq!(page.search(&[i as u8; 10], &cmp).unwrap(), Ok(i));
        }
        assert_eq!(page.search(&[9], &cmp).unwrap(), Err(4));
        // Removing the lowest cell shrinks the content area instead of fragmenting.
        let low = (0..4)
            .min_by_key(|&i| page.cell_range(i).unwrap().0)
            .unwrap();
        remove_cell(1, &mut buf, US, low).unwrap();
        let page = Page::open(1, &buf, US).unwrap();
        assert_eq!(page.frag, 0);
        page.validate().unwrap();
        // Defragmenting in place gives the image `build` makes of the same cells.
        remove_cell(1, &mut buf, US, 1).unwrap();
        let kept = Page::open(1, &buf, US).unwrap().cells().unwrap();
        assert!(Page::open(1, &buf, US).unwrap().frag > 0);
        defragment(1, &mut buf, US).unwrap();
        assert_eq!(buf[..US], build(PS, US, true, &kept, 0)[..US]);
    }

    #[test]
    fn overflow_cells_and_interior_cells() {
        let c = leaf_cell_overflow(b"k", 5000, 77);
        assert_eq!(
            cell_payload(US, &c),
            Payload::Overflow {
                len: 5000,
                first: 77
            }
        );
        assert_eq!(cell_key(US, &c), CellKey::Inline(b"k"));
        let c = interior_cell(9, b"sep");
        assert_eq!(
            (cell_child(&c), cell_key(US, &c)),
            (9, CellKey::Inline(&b"sep"[..]))
        );
        let buf = build(PS, US, false, &[c], 10);
        let page = Page::open(3, &buf, US).unwrap();
        assert_eq!((page.child(0).unwrap(), page.child(1).unwrap()), (9, 10));
        assert_eq!(page.child_index(b"sep", &cmp).unwrap(), 1);
        assert_eq!(page.child_index(b"a", &cmp).unwrap(), 0);
    }

    #[test]
    fn corrupt_headers_and_cells_are_errors() {
        let mut buf = build(
            PS,
            US,
            true,
            &[leaf_cell_inline(b"a", b"1"), leaf_cell_inline(b"b", b"2")],
            0,
        );
        let good = buf.clone();
        buf[0] = 9;
        assert!(Page::open(1, &buf, US).is_err());
        buf = good.clone();
        put_u16(&mut buf, OFF_NCELLS, 300);
        assert!(Page::open(1, &buf, US).is_err());
        buf = good.clone();
        put_u16(&mut buf, HEADER_SIZE, 507); // cell pointer to the last usable byte
        let page = Page::open(1, &buf, US).unwrap();
        assert!(page.cell(0).is_err());
        assert!(page.validate().is_err());
        buf = good.clone();
        let second = get_u16(&buf, HEADER_SIZE + 2);
        put_u16(&mut buf, HEADER_SIZE, second + 1); // overlaps cell 1
        let page = Page::open(1, &buf, US).unwrap();
        assert!(matches!(
            page.validate(),
            Err(Error::Corrupt { pgno: 1, .. })
        ));
        buf = good;
        put_u16(&mut buf, OFF_FRAG, 3);
        assert!(Page::open(1, &buf, US).unwrap().validate().is_err());
    }
}
