//! Writing a new version of an IPS page: a whole node ([`build`]) or a one-cell change
//! ([`edit`]).
//!
//! Invariants (module notes of [`super`], torn writes): a version built over a protected
//! version `P` copies P's descriptor, TB[P], slots `[0, P.nslots)` and bytes
//! `[P.rec_lo, usable)` verbatim, writes only its own descriptor, TB, slots appended at
//! `P.nslots..` and records below `P.rec_lo`, and leaves every other byte zero; a page
//! without a protected version is written compactly in slot 0. A cell is appended with
//! `pred` = the slot of the cell before it in the new node, which is what makes the
//! pred-link replay yield key order. Every version is sealed through `seal_for`, which
//! records it for the commit (`sealed_put`) with the key order and used capacity the
//! builder knows from the cells it laid out, so neither is recomputed from the image;
//! an edit of a remembered image takes the old order and capacity from the memo and
//! changes them by the one cell it removes or adds.

use std::collections::hash_map::{Entry, HashMap};

use super::*;
use crate::le::{put_u16, put_u64};
use crate::page::layout::{Edited, LeafEdit};
use crate::page::versioned::CellHashing;
use crate::page::PageRef;

/// A version being written into `out`: its descriptor slot and fields. The image is
/// built in the `Arc` the transaction will hold (`PageWrite::write` takes it as is), so
/// an edit copies the page once; nothing else holds it until [`Draft::seal`].
struct Draft {
    out: PageRef,
    usable: usize,
    slot: usize,
    h: Head,
}

impl Draft {
    /// An empty version in slot 0 of a zeroed page (a fresh, compact page).
    fn fresh(page_size: usize, usable: usize, tid: u64, leaf: bool, right: Pgno) -> Draft {
        Draft {
            out: crate::page::zeroed_image(page_size),
            usable,
            slot: 0,
            h: Draft::empty_head(usable, tid, leaf, right),
        }
    }

    /// The descriptor of an empty version (no slots, no records).
    fn empty_head(usable: usize, tid: u64, leaf: bool, right: Pgno) -> Head {
        Head {
            tid,
            txn_size: 0,
            nslots: 0,
            base: 0,
            rec_lo: usable,
            rec_hi: usable,
            typ: if leaf {
                page_type::LEAF
            } else {
                page_type::INTERIOR
            },
            flags: 0,
            nlive: 0,
            right: if leaf { 0 } else { right },
            crc: 0,
        }
    }

    /// A version of transaction `tid` built on `p`, seeing exactly p's cells so far:
    /// p's bytes kept, everything else zero, in the other descriptor slot.
    fn on(p: &View<'_>, page_size: usize, tid: u64, leaf: bool, right: Pgno) -> Draft {
        let (usable, buf) = (p.usable, p.buf);
        let pd = p.slot * DESC_SIZE;
        let (ptb, vtb, tbl) = (
            tb_off(usable, p.slot),
            tb_off(usable, 1 - p.slot),
            tb_len(usable),
        );
        let ss = slots_start(usable);
        let se = p.slots_end();
        let mut img = if buf.len() == page_size {
            PageRef::from(buf)
        } else {
            crate::page::zeroed_image(page_size)
        };
        let out = Arc::get_mut(&mut img).expect("a new image has one owner");
        if buf.len() == page_size {
            // The image itself with what p does not own zeroed (the other descriptor,
            // slots past p's and the free gap, the trailer; the other TB is overwritten
            // below): one copy of the page instead of zeroing it and copying p's parts.
            let vd = (1 - p.slot) * DESC_SIZE;
            out[vd..vd + DESC_SIZE].fill(0);
            out[se..p.rec_lo()].fill(0);
            out[usable..].fill(0);
        } else {
            out[pd..pd + DESC_SIZE].copy_from_slice(&buf[pd..pd + DESC_SIZE]);
            out[ptb..ptb + tbl].copy_from_slice(&buf[ptb..ptb + tbl]);
            out[ss..se].copy_from_slice(&buf[ss..se]);
            out[p.rec_lo()..usable].copy_from_slice(&buf[p.rec_lo()..usable]);
        }
        out.copy_within(ptb..ptb + tbl, vtb);
        let mut h = Draft::empty_head(usable, tid, leaf, right);
        h.nslots = p.nslots();
        h.base = p.nslots();
        h.rec_lo = p.rec_lo();
        h.rec_hi = p.rec_lo();
        h.nlive = p.nlive();
        Draft {
            out: img,
            usable,
            slot: 1 - p.slot,
            h,
        }
    }

    /// An empty version next to `p` that inherits nothing from it: slots `[0, 0)`, records
    /// `[usable, usable)`, a zero TB. It references none of p's bytes, so the version built
    /// on it once it is committed (and p is no longer protected) starts from a compact
    /// page: how a root that became a root pointer sheds its garbage.
    fn empty_on(p: &View<'_>, page_size: usize, tid: u64, leaf: bool, right: Pgno) -> Draft {
        let mut d = Draft::on(p, page_size, tid, leaf, right);
        let vtb = tb_off(d.usable, d.slot);
        let tbl = tb_len(d.usable);
        d.buf()[vtb..vtb + tbl].fill(0);
        d.h.nslots = 0;
        d.h.base = 0;
        d.h.rec_lo = d.usable;
        d.h.rec_hi = d.usable;
        d.h.nlive = 0;
        d
    }

    /// An own version `w` (tid of this transaction) extended in place.
    fn extend(w: &View<'_>) -> Draft {
        Draft {
            out: PageRef::from(w.buf),
            usable: w.usable,
            slot: w.slot,
            h: w.head,
        }
    }

    /// The image being written; only this draft holds it before `seal`.
    fn buf(&mut self) -> &mut [u8] {
        Arc::get_mut(&mut self.out).expect("a draft's image is not shared before seal")
    }

    fn tombstone(&mut self, i: usize) {
        let at = tb_off(self.usable, self.slot) + i / 8;
        let out = self.buf();
        debug_assert!(out[at] >> (i % 8) & 1 == 0, "slot {i} tombstoned twice");
        out[at] |= 1 << (i % 8);
        self.h.nlive -= 1;
    }

    /// Append `cell` as a new slot after slot `pred`; its index, or None if the slot or
    /// the record does not fit.
    fn append(&mut self, cell: &[u8], pred: usize) -> Option<usize> {
        let i = self.h.nslots;
        let slots_end = slots_start(self.usable) + SLOT_SIZE * (i + 1);
        if i + 1 > max_slots(self.usable) || slots_end + cell.len() > self.h.rec_lo {
            return None;
        }
        self.h.rec_lo -= cell.len();
        let lo = self.h.rec_lo;
        let out = self.buf();
        out[lo..lo + cell.len()].copy_from_slice(cell);
        let at = slots_end - SLOT_SIZE;
        put_u16(out, at, lo);
        put_u16(out, at + 2, pred);
        self.h.nslots += 1;
        self.h.nlive += 1;
        Some(i)
    }

    /// Write the descriptor and its crc (bound to page `pgno`); the finished image and
    /// its descriptor.
    fn seal(mut self, pgno: Pgno) -> (PageRef, Head) {
        let d = self.slot * DESC_SIZE;
        let h = &self.h;
        let out = Arc::get_mut(&mut self.out).expect("a draft's image is not shared before seal");
        out[d..d + DESC_SIZE].fill(0);
        put_u64(out, d + D_TID, h.tid);
        put_u32(out, d + D_TXN_SIZE, h.txn_size);
        put_u16(out, d + D_NSLOTS, h.nslots);
        put_u16(out, d + D_BASE, h.base);
        put_u16(out, d + D_REC_LO, h.rec_lo);
        put_u16(out, d + D_REC_HI, h.rec_hi);
        out[d + D_TYPE] = h.typ;
        out[d + D_FLAGS] = h.flags;
        put_u16(out, d + D_NLIVE, h.nlive);
        put_u32(out, d + D_RIGHT, h.right);
        let crc = version_crc(pgno, out, self.usable, self.slot, h);
        put_u32(out, d + D_CRC, crc);
        self.h.crc = crc;
        (self.out, self.h)
    }

    /// [`Draft::seal`], recording the version for the commit ([`sealed_put`]): its live
    /// slots in key order are `order`, its cells use `used`.
    fn seal_for(self, pgno: Pgno, order: Vec<u16>, used: usize) -> PageRef {
        let (usable, slot) = (self.usable, self.slot);
        let (out, head) = self.seal(pgno);
        sealed_put(pgno, &out, usable, slot, head, order, used);
        out
    }
}

fn check_cell(usable: usize, leaf: bool, i: usize, c: &[u8]) -> Result<()> {
    if cell_size(leaf, usable, c) != Some(c.len()) || (!leaf && cell_child(c) == 0) {
        return Err(Error::InvalidArgument(format!(
            "cell {i} ({} bytes) is not a well-formed {} cell of at most {} bytes",
            c.len(),
            if leaf { "leaf" } else { "interior" },
            max_cell(usable)
        )));
    }
    Ok(())
}

fn check_version(usable: usize, page_size: usize, v: &Version<'_>) -> Result<()> {
    if !Ips::geometry_ok(usable, page_size) {
        return Err(Error::InvalidArgument(format!(
            "IPS page of size {page_size} with usable size {usable} (need 256 <= usable <= min(page size, {MAX_USABLE}))"
        )));
    }
    if v.tid == 0 {
        return Err(Error::InvalidArgument(
            "IPS version with tid 0 (INV)".into(),
        ));
    }
    if !v.leaf && v.right == 0 {
        return Err(Error::InvalidArgument(
            "IPS interior node without a right child".into(),
        ));
    }
    if v.txn_size != 0 {
        return Err(Error::InvalidArgument(
            "IPS version with a txn_size: versions are built unstamped, commit stamps them".into(),
        ));
    }
    for (i, c) in v.cells.iter().enumerate() {
        check_cell(usable, v.leaf, i, c)?;
    }
    Ok(())
}

/// The protected version of `base`: the valid one with the largest `tid <= keep_max_tid`
/// other than one with tid `replaced` (this transaction's own earlier build), with its
/// node if the memo knows it.
fn protected_version(
    pgno: Pgno,
    base: &[u8],
    usable: usize,
    keep_max_tid: u64,
    replaced: u64,
) -> Option<(View<'_>, Option<Opened>)> {
    let ok = |tid: u64| tid <= keep_max_tid && tid != replaced;
    let first = newest_candidate(base, ok)?;
    if let Some((v, o)) = memo_view(pgno, base, usable, first) {
        return Some((v, Some(o)));
    }
    Ips::check_slot(pgno, base, usable, first)
        .ok()
        .or_else(|| {
            let other = 1 - first;
            let tid = get_u64(base, other * DESC_SIZE + D_TID);
            (tid != 0 && ok(tid))
                .then(|| Ips::check_slot(pgno, base, usable, other).ok())
                .flatten()
        })
        .map(|v| (v, None))
}

/// Image of a compact page holding only `v`, or None if it does not fit.
fn build_fresh(pgno: Pgno, page_size: usize, usable: usize, v: &Version<'_>) -> Option<PageRef> {
    let mut d = Draft::fresh(page_size, usable, v.tid, v.leaf, v.right);
    let mut pred = NO_PRED;
    let mut used = 0;
    for c in v.cells {
        pred = d.append(c, pred)?;
        used += cell_cost(c.len());
    }
    let order = (0..v.cells.len() as u16).collect();
    Some(d.seal_for(pgno, order, used))
}

/// Image of page `pgno` after writing `version`, or `Ok(None)` if it does not fit next
/// to the protected version (the tree then relocates the node: IPS's garbage collection).
///
/// `base` is the page's current image (None for a page allocated by this transaction).
/// The protected version is its valid descriptor with the largest `tid <= keep_max_tid`
/// other than one with `version.tid` (replaced). Cells of the new node byte-identical to
/// a live cell of the protected version, in the same relative order, keep their slots;
/// its other live slots are tombstoned and the other new cells appended.
///
/// Errors: `InvalidArgument` for a bad geometry, tid 0, a malformed cell, an interior
/// node without a right child, a short `base`, or a tid older than the protected one's.
pub fn build(
    pgno: Pgno,
    page_size: usize,
    usable: usize,
    base: Option<&[u8]>,
    keep_max_tid: u64,
    version: &Version<'_>,
) -> Result<Option<PageRef>> {
    check_version(usable, page_size, version)?;
    let p = match base {
        None => None,
        Some(b) if b.len() < usable => {
            return Err(Error::InvalidArgument(format!(
                "base image of page {pgno} has {} bytes, less than the usable size {usable}",
                b.len()
            )))
        }
        Some(b) => protected_version(pgno, b, usable, keep_max_tid, version.tid),
    };
    let Some((p, known)) = p else {
        return Ok(build_fresh(pgno, page_size, usable, version));
    };
    if version.tid < p.tid() {
        return Err(Error::InvalidArgument(format!(
            "page {pgno}: version tid {} is older than the protected version's {}",
            version.tid,
            p.tid()
        )));
    }
    if version.cells.is_empty() {
        return Ok(Some(
            Draft::empty_on(&p, page_size, version.tid, version.leaf, version.right).seal_for(
                pgno,
                Vec::new(),
                0,
            ),
        ));
    }
    let order = match known {
        Some(o) => o.order,
        None => p.opened().order,
    };
    // Cells of P the new node keeps stay where they are. Most builds change a few cells
    // in one place (a parent gains a separator, a split drops a tail), so the common
    // prefix and suffix of P's cells and the new ones are matched by position; only the
    // cells between go through a hash map, where each distinct cell of P maps to its
    // first unused live slot in key order, the other copies chained through `next`.
    // Every match lies after the previous one in P's order, so the kept slots' pred
    // links still replay into the new key order.
    let cell_of = |j: usize| {
        let (off, size) = p.record(usize::from(order[j]));
        &p.buf[off..off + size]
    };
    let (n, m) = (order.len(), version.cells.len());
    let (mut prefix, mut suffix) = (0, 0);
    if p.is_leaf() == version.leaf {
        while prefix < n.min(m) && cell_of(prefix) == &version.cells[prefix][..] {
            prefix += 1;
        }
        while suffix < (n - prefix).min(m - prefix)
            && cell_of(n - 1 - suffix) == &version.cells[m - 1 - suffix][..]
        {
            suffix += 1;
        }
    }
    const END: u32 = u32::MAX;
    let middle = prefix..n - suffix;
    let mut next = vec![END; n];
    let mut reuse: HashMap<&[u8], u32, CellHashing> =
        HashMap::with_capacity_and_hasher(middle.len(), CellHashing::new());
    if p.is_leaf() == version.leaf {
        for j in middle.rev() {
            match reuse.entry(cell_of(j)) {
                Entry::Occupied(mut head) => {
                    next[j] = *head.get();
                    head.insert(j as u32);
                }
                Entry::Vacant(head) => {
                    head.insert(j as u32);
                }
            }
        }
    }
    let mut d = Draft::on(&p, page_size, version.tid, version.leaf, version.right);
    let mut kept = vec![false; n];
    // Position (in `order`) of the last kept cell: later matches must lie after it.
    let mut last: Option<usize> = None;
    let mut pred = NO_PRED;
    let mut new_order = Vec::with_capacity(m);
    let mut used = 0;
    for (k, c) in version.cells.iter().enumerate() {
        let hit = if k < prefix {
            Some(k)
        } else if k >= m - suffix {
            Some(n - (m - k))
        } else {
            reuse.get_mut(&c[..]).and_then(|head| {
                while *head != END && last.is_some_and(|l| (*head as usize) <= l) {
                    *head = next[*head as usize];
                }
                (*head != END).then(|| {
                    let j = *head as usize;
                    *head = next[j];
                    j
                })
            })
        };
        pred = match hit {
            Some(j) => {
                debug_assert!(last.is_none_or(|l| j > l));
                kept[j] = true;
                last = Some(j);
                usize::from(order[j])
            }
            None => match d.append(c, pred) {
                Some(s) => s,
                None => return Ok(None),
            },
        };
        new_order.push(pred as u16);
        used += cell_cost(c.len());
    }
    for (j, &s) in order.iter().enumerate() {
        if !kept[j] {
            d.tombstone(usize::from(s));
        }
    }
    Ok(Some(d.seal_for(pgno, new_order, used)))
}

/// In-place edit `e` of the leaf a writer of transaction `e.tid` sees in `page` (cell indexes in
/// key order). The new image and the capacity its cells use, or None if it does not fit (slots,
/// records or capacity): the tree then rebuilds the node, which gives the same cells.
///
/// If the visible version is this transaction's own, it is extended in place (same
/// descriptor slot); otherwise a new version is made next to it as [`build`] does. Only a
/// tombstone bit and/or one record and one slot entry are written.
///
/// Errors: `Corrupt` if no version is visible; `InvalidArgument` for an index out of
/// range or a malformed cell.
pub fn edit(pgno: Pgno, page: &[u8], usable: usize, e: LeafEdit) -> Result<Edited> {
    let (tid, i, remove, insert) = (e.tid, e.at, e.remove, e.insert);
    let (v, known) = visible_for_edit(pgno, page, usable, tid)?;
    if !v.is_leaf() {
        return Ok(None);
    }
    let known = known.unwrap_or_else(|| v.opened());
    let n = known.order.len();
    if (remove && i >= n) || i > n {
        return Err(Error::InvalidArgument(format!(
            "page {pgno}: edit of cell {i} in a leaf of {n} cells"
        )));
    }
    if let Some(c) = insert {
        check_cell(usable, true, i, c)?;
    }
    let mut d = if v.tid() == tid {
        // Extending in place appends after the version's own frontier, which lies past
        // the protected version's bytes only if it was built on them: an own version that
        // inherits nothing (a fresh page, or `empty_on`) starts at slot 0 and the page's
        // end, where a committed version beside it may still live. Such a page goes
        // through `build` instead.
        let other = get_u64(page, (1 - v.slot) * DESC_SIZE + D_TID);
        if v.base_nslots() == 0 && v.rec_hi() == usable && other != 0 && other < tid {
            return Ok(None);
        }
        Draft::extend(&v)
    } else {
        Draft::on(&v, page.len(), tid, true, 0)
    };
    // The new order and capacity follow from the old ones: one cell out, one in.
    let mut order = Vec::with_capacity(n + 1);
    order.extend_from_slice(&known.order);
    let mut used = known.used;
    if remove {
        let s = usize::from(order.remove(i));
        used -= cell_cost(v.record(s).1);
        d.tombstone(s);
    }
    if let Some(c) = insert {
        let pred = if i == 0 {
            NO_PRED
        } else {
            usize::from(order[i - 1])
        };
        match d.append(c, pred) {
            Some(s) => order.insert(i, s as u16),
            None => return Ok(None),
        }
        used += cell_cost(c.len());
    }
    if used > capacity(usable) {
        return Ok(None);
    }
    Ok(Some((d.seal_for(pgno, order, used), used)))
}
