//! A key-ordered array of cells inside a page image: the part of a B+tree node that reads
//! the same in every page layout.
//!
//! A layout decides where the offset array lives and which bytes cells may occupy (the
//! stock page: array after its header, cells in `[content, usable)`; a DHL page: each
//! version's array anywhere in the record area). Given that, cell lookup, key access,
//! child pointers, payloads and binary search are identical, so they live here once.
//!
//! Invariant: every accessor bounds-checks what it reads from the page (the offset must
//! lie in `[area_start, usable)`, the cell must decode inside the usable area and be at
//! most `max_cell` bytes) and reports `Error::Corrupt` instead of panicking, because page
//! bytes come from disk.

use std::cmp::Ordering;
use std::sync::Arc;

use crate::error::{Error, Pgno, Result};
use crate::le::get_u16;
use crate::page::cell::{
    cell_child, cell_key, cell_payload, cell_size, max_cell, CellKey, Payload, CELL_HEADER,
    KLEN_LONG, PTR_SIZE,
};

/// Bounds-checked view of one node's cells.
#[derive(Clone, Copy, Debug)]
pub struct CellArray<'a> {
    pub(crate) pgno: Pgno,
    pub(crate) buf: &'a [u8],
    pub(crate) usable: usize,
    pub(crate) leaf: bool,
    pub(crate) ncells: usize,
    /// The bytes holding the `ncells × u16` offset array: the page itself, or a view the
    /// layout built when it opened the page (see [`Detached::with_view`]).
    pub(crate) arr: &'a [u8],
    /// Where the offset array starts in `arr`.
    pub(crate) array_off: usize,
    /// Lowest offset a cell may start at.
    pub(crate) area_start: usize,
    /// Rightmost child (interior nodes; 0 in leaves).
    pub(crate) right: Pgno,
}

impl<'a> CellArray<'a> {
    pub fn pgno(&self) -> Pgno {
        self.pgno
    }
    pub fn is_leaf(&self) -> bool {
        self.leaf
    }
    pub fn ncells(&self) -> usize {
        self.ncells
    }
    pub fn usable(&self) -> usize {
        self.usable
    }
    /// Rightmost child (interior pages; 0 in leaves).
    pub fn right_child(&self) -> Pgno {
        self.right
    }

    /// Offset and size of cell `i`.
    ///
    /// The hot path of every search and scan: the checks that pass are inlined, and what
    /// a failing one reports is built out of line (`cell_range_error`).
    #[inline]
    pub fn cell_range(&self, i: usize) -> Result<(usize, usize)> {
        if i < self.ncells {
            let off = get_u16(self.arr, self.array_off + PTR_SIZE * i);
            if off >= self.area_start && off < self.usable {
                if let Some(size) = cell_size(self.leaf, self.usable, &self.buf[off..self.usable]) {
                    if size <= max_cell(self.usable) {
                        return Ok((off, size));
                    }
                }
            }
        }
        Err(self.cell_range_error(i))
    }

    /// The error [`CellArray::cell_range`] reports for cell `i`, which failed one of its
    /// checks.
    #[cold]
    #[inline(never)]
    fn cell_range_error(&self, i: usize) -> Error {
        match self.cell_range_checked(i) {
            Err(e) => e,
            Ok((off, size)) => Error::corrupt(
                self.pgno,
                format!("cell {i} at offset {off} ({size} bytes) failed a check and then passed"),
            ),
        }
    }

    /// [`CellArray::cell_range`] with a message for each failed check.
    fn cell_range_checked(&self, i: usize) -> Result<(usize, usize)> {
        if i >= self.ncells {
            return Err(Error::corrupt(
                self.pgno,
                format!("cell index {i} out of range ({} cells)", self.ncells),
            ));
        }
        let off = get_u16(self.arr, self.array_off + PTR_SIZE * i);
        if off < self.area_start || off >= self.usable {
            return Err(Error::corrupt(
                self.pgno,
                format!(
                    "cell {i} offset {off} outside the cell area [{}, {})",
                    self.area_start, self.usable
                ),
            ));
        }
        match cell_size(self.leaf, self.usable, &self.buf[off..self.usable]) {
            Some(size) if size <= max_cell(self.usable) => Ok((off, size)),
            Some(size) => Err(Error::corrupt(
                self.pgno,
                format!(
                    "cell {i} is {size} bytes, more than the maximum {}",
                    max_cell(self.usable)
                ),
            )),
            None => Err(Error::corrupt(
                self.pgno,
                format!("cell {i} at offset {off} runs past the usable area"),
            )),
        }
    }

    /// Raw bytes of cell `i` (a well-formed cell: its key and payload are in bounds).
    pub fn cell(&self, i: usize) -> Result<&'a [u8]> {
        let (off, size) = self.cell_range(i)?;
        Ok(&self.buf[off..off + size])
    }

    /// Key of cell `i` as stored (a long key's tail is in its chain).
    ///
    /// Searches read only keys, so an inline key is sliced out with the checks that keep
    /// it inside the cell area and no longer than a cell may be; the rest of the cell
    /// (its value) is checked by whatever reads it (`cell_range`, as a long key here).
    #[inline]
    pub fn key(&self, i: usize) -> Result<CellKey<'a>> {
        if let Some(k) = self.inline_key_at(i) {
            return Ok(CellKey::Inline(k));
        }
        Ok(cell_key(self.usable, self.cell(i)?))
    }

    /// The key of cell `i` when it is stored whole and lies inside the cell area, with
    /// the checks `key` makes for that case; None sends the caller to `key` (a long key,
    /// or a cell whose problem `key` reports). Searches call it once per probe.
    #[inline(always)]
    fn inline_key_at(&self, i: usize) -> Option<&'a [u8]> {
        let off = self.header_offset(i)?;
        let k16 = usize::from(u16::from_le_bytes(
            self.buf.get(off..off + 2)?.try_into().ok()?,
        ));
        let end = off + CELL_HEADER + k16;
        // No inline key is `KLEN_LONG` long (a long key's marker): `max_cell` is far below.
        debug_assert!(max_cell(self.usable) < usize::from(KLEN_LONG));
        if end > self.usable || CELL_HEADER + k16 > max_cell(self.usable) {
            return None;
        }
        self.buf.get(off + CELL_HEADER..end)
    }

    /// The fixed header of cell `i` when it lies inside the cell area; None sends the
    /// caller to `cell`, whose checks report what is wrong.
    #[inline]
    fn header_at(&self, i: usize) -> Option<&'a [u8]> {
        let off = self.header_offset(i)?;
        self.buf.get(off..off + CELL_HEADER)
    }

    /// Where cell `i` starts, when its fixed header lies inside the cell area.
    #[inline(always)]
    fn header_offset(&self, i: usize) -> Option<usize> {
        if i >= self.ncells {
            return None;
        }
        let at = self.array_off + PTR_SIZE * i;
        let off = usize::from(u16::from_le_bytes(
            self.arr.get(at..at + 2)?.try_into().ok()?,
        ));
        (off >= self.area_start && off + CELL_HEADER <= self.usable).then_some(off)
    }

    /// Key of cell `i` when it is stored whole; a long key (whose tail needs the store)
    /// is an `InvalidArgument` error. For callers that hold only short keys (tests, the
    /// page-level search below).
    pub fn inline_key(&self, i: usize) -> Result<&'a [u8]> {
        match self.key(i)? {
            CellKey::Inline(k) => Ok(k),
            CellKey::Long { .. } => Err(Error::InvalidArgument(format!(
                "page {}: cell {i} has a long key, which needs its overflow chain",
                self.pgno
            ))),
        }
    }

    /// Child `i` of an interior node; `i == ncells` is the right child.
    pub fn child(&self, i: usize) -> Result<Pgno> {
        if self.leaf {
            return Err(Error::corrupt(self.pgno, "child pointer asked of a leaf"));
        }
        let c = if i == self.ncells {
            self.right
        } else {
            // Only the cell's fixed header is read, so only it needs to be in the cell
            // area (the child it names is checked when it is read).
            match self.header_at(i) {
                Some(h) => cell_child(h),
                None => cell_child(self.cell(i)?),
            }
        };
        if c == 0 {
            return Err(Error::corrupt(self.pgno, format!("child pointer {i} is 0")));
        }
        Ok(c)
    }

    /// Value part of leaf cell `i`.
    pub fn payload(&self, i: usize) -> Result<Payload<'a>> {
        if !self.leaf {
            return Err(Error::corrupt(
                self.pgno,
                "payload asked of an interior page",
            ));
        }
        Ok(cell_payload(self.usable, self.cell(i)?))
    }

    /// Binary search like `slice::binary_search_by`: Ok(i) if key `i` equals `key`,
    /// Err(i) with the insertion point otherwise. Pages with short keys only (see
    /// [`CellArray::inline_key`]); the tree searches through [`CellArray::search_by`].
    pub fn search(
        &self,
        key: &[u8],
        cmp: &dyn Fn(&[u8], &[u8]) -> Ordering,
    ) -> Result<std::result::Result<usize, usize>> {
        let (mut lo, mut hi) = (0, self.ncells);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match cmp(self.inline_key(mid)?, key) {
                Ordering::Less => lo = mid + 1,
                Ordering::Greater => hi = mid,
                Ordering::Equal => return Ok(Ok(mid)),
            }
        }
        Ok(Err(lo))
    }

    /// Index of the child whose subtree may hold `key` (separator invariant: keys of
    /// child i are < key i <= keys of child i+1).
    pub fn child_index(&self, key: &[u8], cmp: &dyn Fn(&[u8], &[u8]) -> Ordering) -> Result<usize> {
        Ok(match self.search(key, cmp)? {
            Ok(i) => i + 1,
            Err(i) => i,
        })
    }

    /// Probe key `i`: the stored bytes of an inline key, or a long key made whole by
    /// `whole` (which reads its tail chain; only long keys pay for it).
    #[inline(always)]
    pub(crate) fn probe_at(
        &self,
        i: usize,
        probe: &mut dyn FnMut(&[u8]) -> Ordering,
        whole: &dyn Fn(CellKey<'a>) -> Result<Vec<u8>>,
    ) -> Result<Ordering> {
        // The common case inline: a search probes a dozen keys or more.
        if let Some(k) = self.inline_key_at(i) {
            return Ok(probe(k));
        }
        Ok(match self.key(i)? {
            CellKey::Inline(k) => probe(k),
            long => probe(&whole(long)?),
        })
    }

    /// Binary search by a probe (`probe(stored)` orders the stored key against the
    /// caller's target; `whole` reads a long key whole): Ok(i) if key `i` compares
    /// Equal, Err(i) with the insertion point otherwise. With several Equal keys any one
    /// of them may be returned.
    pub fn search_by(
        &self,
        probe: &mut dyn FnMut(&[u8]) -> Ordering,
        whole: &dyn Fn(CellKey<'a>) -> Result<Vec<u8>>,
    ) -> Result<std::result::Result<usize, usize>> {
        let (mut lo, mut hi) = (0, self.ncells);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.probe_at(mid, probe, whole)? {
                Ordering::Less => lo = mid + 1,
                Ordering::Greater => hi = mid,
                Ordering::Equal => return Ok(Ok(mid)),
            }
        }
        Ok(Err(lo))
    }

    /// Number of keys the probe puts before the target (`probe(k) == Less`), i.e. the
    /// index of the first key not less than it. With `upper`, Equal keys count as before
    /// too (the index of the first Greater key). `whole` as for [`CellArray::search_by`].
    pub fn bound_by(
        &self,
        probe: &mut dyn FnMut(&[u8]) -> Ordering,
        whole: &dyn Fn(CellKey<'a>) -> Result<Vec<u8>>,
        upper: bool,
    ) -> Result<usize> {
        let (mut lo, mut hi) = (0, self.ncells);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let before = match self.probe_at(mid, probe, whole)? {
                Ordering::Less => true,
                Ordering::Equal => upper,
                Ordering::Greater => false,
            };
            if before {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        Ok(lo)
    }

    /// [`CellArray::bound_by`] for a tree ordered by memcmp, against the stored form of
    /// the target itself: no probe call per key, and two 8-byte keys (an integer
    /// tree's) are compared as big-endian words, which orders them as memcmp does. The
    /// same answer as `bound_by` with `|k| k.cmp(target)`.
    pub fn bound_bytes(
        &self,
        target: &[u8],
        whole: &dyn Fn(CellKey<'a>) -> Result<Vec<u8>>,
        upper: bool,
    ) -> Result<usize> {
        let word = <[u8; 8]>::try_from(target).ok().map(u64::from_be_bytes);
        if let Some(i) = word.and_then(|w| self.bound_word(w, upper)) {
            return Ok(i);
        }
        let (mut lo, mut hi) = (0, self.ncells);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let ord = match self.inline_key_at(mid) {
                Some(k) => match (word, <[u8; 8]>::try_from(k)) {
                    (Some(w), Ok(k)) => u64::from_be_bytes(k).cmp(&w),
                    _ => k.cmp(target),
                },
                None => match self.key(mid)? {
                    CellKey::Inline(k) => k.cmp(target),
                    long => whole(long)?.as_slice().cmp(target),
                },
            };
            let before = match ord {
                Ordering::Less => true,
                Ordering::Equal => upper,
                Ordering::Greater => false,
            };
            if before {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        Ok(lo)
    }

    /// [`CellArray::bound_bytes`] for an 8-byte target `w` (big-endian, as an integer
    /// tree stores its keys) where every key the search meets is an inline 8-byte key:
    /// one bounds check per probe and a word compare. None as soon as a probe meets any
    /// other cell (a key of another length, an offset out of the cell area): the general
    /// search then answers, with its own checks and errors.
    #[inline]
    fn bound_word(&self, w: u64, upper: bool) -> Option<usize> {
        const KEY: usize = 8;
        let arr = self
            .arr
            .get(self.array_off..self.array_off + PTR_SIZE * self.ncells)?;
        // Highest offset a whole 8-byte-key header fits below `usable` from.
        let last = self.usable.checked_sub(CELL_HEADER + KEY)?;
        let buf = self.buf.get(..self.usable)?;
        let (mut lo, mut hi) = (0, self.ncells);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let off = usize::from(u16::from_le_bytes([
                arr[PTR_SIZE * mid],
                arr[PTR_SIZE * mid + 1],
            ]));
            if off < self.area_start || off > last {
                return None;
            }
            let cell: &[u8; CELL_HEADER + KEY] =
                buf[off..off + CELL_HEADER + KEY].try_into().ok()?;
            if u16::from_le_bytes([cell[0], cell[1]]) != KEY as u16 {
                return None;
            }
            let k = u64::from_be_bytes(cell[CELL_HEADER..].try_into().ok()?);
            if k < w || (upper && k == w) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        Some(lo)
    }

    /// This view without its borrow of the page image (see [`Detached`]). Only for a
    /// view whose offset array is in the page (one opened from a [`Detached`] with its
    /// own view is that `Detached` again: clone it instead).
    pub(crate) fn detach(&self) -> Detached {
        debug_assert!(
            std::ptr::eq(self.arr, self.buf),
            "detach of a view-backed node"
        );
        Detached {
            pgno: self.pgno,
            usable: self.usable,
            leaf: self.leaf,
            ncells: self.ncells,
            array_off: self.array_off,
            area_start: self.area_start,
            right: self.right,
            view: None,
        }
    }

    /// Owned copies of all cells, in key order.
    pub fn cells(&self) -> Result<Vec<Vec<u8>>> {
        (0..self.ncells)
            .map(|i| self.cell(i).map(<[u8]>::to_vec))
            .collect()
    }
}

/// What opening a page found out about it, kept next to the (immutable) page image so the
/// view can be had again without repeating the layout's validation, which for a DHL page
/// checks a whole version. Only meaningful with the very image it was opened from.
///
/// A layout whose pages do not keep their cells in key order (IPS appends them in
/// insertion order) builds the key-ordered offset array when it opens the page and keeps
/// it here (`view`); a clone shares it, so a cursor or a tree path holding the node does
/// not rebuild it per operation.
#[derive(Clone, Debug)]
pub struct Detached {
    pgno: Pgno,
    usable: usize,
    leaf: bool,
    ncells: usize,
    array_off: usize,
    area_start: usize,
    right: Pgno,
    /// The key-ordered `ncells × u16` offset array, when it is not in the page.
    view: Option<Arc<[u8]>>,
}

impl Detached {
    /// A node whose cells are at the offsets `view` lists (`ncells` little-endian u16s,
    /// in key order), each in `[area_start, usable)` of its page; bounds are checked per
    /// access, as for every node.
    pub fn with_view(
        pgno: Pgno,
        usable: usize,
        leaf: bool,
        area_start: usize,
        right: Pgno,
        view: Arc<[u8]>,
    ) -> Detached {
        Detached {
            pgno,
            usable,
            leaf,
            ncells: view.len() / PTR_SIZE,
            array_off: 0,
            area_start,
            right,
            view: Some(view),
        }
    }

    /// The view again, over `buf`: the image this was opened from.
    pub fn attach<'a>(&'a self, buf: &'a [u8]) -> CellArray<'a> {
        CellArray {
            pgno: self.pgno,
            buf,
            usable: self.usable,
            leaf: self.leaf,
            ncells: self.ncells,
            arr: self.view.as_deref().unwrap_or(buf),
            array_off: self.array_off,
            area_start: self.area_start,
            right: self.right,
        }
    }

    pub fn is_leaf(&self) -> bool {
        self.leaf
    }
    pub fn ncells(&self) -> usize {
        self.ncells
    }
}
