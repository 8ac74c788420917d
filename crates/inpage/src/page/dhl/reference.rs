//! The reference oracle for the DHL page, test-only.
//!
//! Invariant: it shares no code with what it checks beyond the format's definitions
//! (constants, the byte readers, the streaming checksum [`version_crc`]); validation and
//! reading are the plain pre-optimisation algorithms, and placement is not re-implemented
//! at all: [`check_build`] accepts any image a correct `build` may produce (protected
//! bytes unchanged, the new version reads back exactly, nothing else written) and requires
//! a fit where the format guarantees one, so a planner bug cannot hide in a shared copy.

use std::collections::HashMap;

use super::build::{check_version, plan_best_fit, plan_far_end};
use super::*;

pub fn check_slot(
    pgno: Pgno,
    buf: &[u8],
    usable: usize,
    slot: usize,
) -> std::result::Result<View<'_>, String> {
    if !geometry_ok(usable, buf.len()) {
        return Err(format!(
            "page buffer of {} bytes cannot hold a DHL page of usable size {usable}",
            buf.len()
        ));
    }
    let d = slot * DESC_SIZE;
    let tid = get_u64(buf, d + D_TID);
    if tid == 0 {
        return Err(format!("descriptor {slot} is INV (tid 0)"));
    }
    let leaf = match buf[d + D_TYPE] {
        page_type::LEAF => true,
        page_type::INTERIOR => false,
        t => {
            return Err(format!(
                "descriptor {slot} has type {t} ({}), not a tree page",
                page_type::name(t)
            ))
        }
    };
    let ncells = get_u16(buf, d + D_NCELLS);
    let right = get_u32(buf, d + D_RIGHT);
    if leaf && right != 0 {
        return Err(format!("descriptor {slot} is a leaf with a right child"));
    }
    let array_off = get_u16(buf, d + D_ARRAY);
    let array_end = array_off + PTR_SIZE * ncells;
    if array_off < RECORD_START || array_end > usable {
        return Err(format!(
            "descriptor {slot}: array [{array_off}, {array_end}) outside the record area [{RECORD_START}, {usable})"
        ));
    }
    let mut ranges = Vec::with_capacity(ncells + 1);
    if ncells > 0 {
        ranges.push((array_off, array_end));
    }
    for i in 0..ncells {
        let off = get_u16(buf, array_off + PTR_SIZE * i);
        if !(RECORD_START..usable).contains(&off) {
            return Err(format!(
                "descriptor {slot}: cell {i} offset {off} outside the record area"
            ));
        }
        let size = cell_size(leaf, usable, &buf[off..usable]).ok_or_else(|| {
            format!("descriptor {slot}: cell {i} at {off} is malformed or runs past the page")
        })?;
        ranges.push((off, off + size));
    }
    let crc = version_crc(
        buf,
        slot,
        (array_off, array_end),
        ranges[usize::from(ncells > 0)..]
            .iter()
            .map(|&(s, e)| (s, e - s)),
    );
    if crc != get_u32(buf, d + D_CRC) {
        return Err(format!("descriptor {slot} (tid {tid}) fails its crc"));
    }
    ranges.sort_unstable();
    if let Some(w) = ranges.windows(2).find(|w| w[0].1 > w[1].0) {
        return Err(format!(
            "descriptor {slot}: bytes [{}, {}) overlap [{}, {})",
            w[0].0, w[0].1, w[1].0, w[1].1
        ));
    }
    Ok(View {
        cells: CellArray {
            pgno,
            buf,
            usable,
            leaf,
            ncells,
            array_off,
            area_start: RECORD_START,
            right,
        },
        slot,
        tid,
        txn_size: get_u32(buf, d + D_TXN_SIZE),
    })
}

pub fn visible(pgno: Pgno, buf: &[u8], usable: usize, max_tid: u64) -> Result<View<'_>> {
    let mut best: Option<View<'_>> = None;
    let mut why = Vec::new();
    let mut damaged: Option<(u64, usize, String)> = None;
    for slot in 0..2 {
        match check_slot(pgno, buf, usable, slot) {
            Ok(v) if v.tid <= max_tid => {
                if best.is_none_or(|b| v.tid > b.tid) {
                    best = Some(v);
                }
            }
            Ok(v) => why.push(format!("descriptor {slot} has tid {} > {max_tid}", v.tid)),
            Err(r) => {
                let tid = if buf.len() >= RECORD_START {
                    get_u64(buf, slot * DESC_SIZE + D_TID)
                } else {
                    0
                };
                if tid != 0 && tid <= max_tid && damaged.as_ref().is_none_or(|d| tid > d.0) {
                    damaged = Some((tid, slot, r.clone()));
                }
                why.push(r)
            }
        }
    }
    if let Some((tid, slot, r)) = damaged {
        if best.is_none_or(|b| tid > b.tid) {
            return Err(Error::corrupt(
                pgno,
                format!("version {tid} (descriptor {slot}) is damaged: {r}"),
            ));
        }
    }
    best.ok_or_else(|| {
        Error::corrupt(
            pgno,
            format!("no valid version with tid <= {max_tid}: {}", why.join("; ")),
        )
    })
}

pub fn free_holes(v: &View<'_>) -> Result<Vec<(usize, usize)>> {
    let mut used = v.ranges()?;
    used.sort_unstable();
    let mut holes = Vec::new();
    let mut at = RECORD_START;
    for (s, e) in used {
        if s > at {
            holes.push((at, s));
        }
        at = at.max(e);
    }
    if at < v.usable {
        holes.push((at, v.usable));
    }
    Ok(holes)
}

pub fn restamp(buf: &mut [u8], usable: usize, tid: u64, txn_size: u32) -> bool {
    enum Covered {
        Tree((usize, usize), Vec<(usize, usize)>),
        Overflow(usize),
    }
    if tid == 0 || !geometry_ok(usable, buf.len()) {
        return false;
    }
    let mut stamped = false;
    for slot in 0..2 {
        let d = slot * DESC_SIZE;
        if get_u64(buf, d + D_TID) != tid {
            continue;
        }
        let tree = check_slot(0, buf, usable, slot).ok().and_then(|v| {
            let array = (v.array_off, v.array_off + PTR_SIZE * v.ncells);
            let cells: Option<Vec<(usize, usize)>> =
                (0..v.ncells).map(|i| v.cell_range(i).ok()).collect();
            Some(Covered::Tree(array, cells?))
        });
        let covered = tree.or_else(|| {
            (slot == 0)
                .then(|| open_overflow(0, buf, usable).ok())
                .flatten()
                .map(|o| Covered::Overflow(o.data.len()))
        });
        let Some(covered) = covered else {
            continue;
        };
        buf[d + D_TXN_SIZE..d + D_TXN_SIZE + 4].copy_from_slice(&txn_size.to_le_bytes());
        let crc = match covered {
            Covered::Tree(array, cells) => version_crc(buf, slot, array, cells.into_iter()),
            Covered::Overflow(len) => overflow_crc(buf, len),
        };
        buf[d + D_CRC..d + D_CRC + 4].copy_from_slice(&crc.to_le_bytes());
        stamped = true;
    }
    stamped
}

fn write_descriptor(
    out: &mut [u8],
    slot: usize,
    v: &Version<'_>,
    array_off: usize,
    offs: &[usize],
) {
    let d = slot * DESC_SIZE;
    out[d..d + DESC_SIZE].fill(0);
    out[d + D_TID..d + D_TID + 8].copy_from_slice(&v.tid.to_le_bytes());
    out[d + D_TXN_SIZE..d + D_TXN_SIZE + 4].copy_from_slice(&v.txn_size.to_le_bytes());
    out[d + D_NCELLS..d + D_NCELLS + 2].copy_from_slice(&(offs.len() as u16).to_le_bytes());
    out[d + D_TYPE] = if v.leaf {
        page_type::LEAF
    } else {
        page_type::INTERIOR
    };
    out[d + D_FLAGS] = 0;
    let right = if v.leaf { 0 } else { v.right };
    out[d + D_RIGHT..d + D_RIGHT + 4].copy_from_slice(&right.to_le_bytes());
    out[d + D_ARRAY..d + D_ARRAY + 2].copy_from_slice(&(array_off as u16).to_le_bytes());
    for (i, &off) in offs.iter().enumerate() {
        let at = array_off + PTR_SIZE * i;
        out[at..at + PTR_SIZE].copy_from_slice(&(off as u16).to_le_bytes());
    }
    let array = (array_off, array_off + PTR_SIZE * offs.len());
    let crc = version_crc(
        out,
        slot,
        array,
        offs.iter().zip(v.cells).map(|(&off, c)| (off, c.len())),
    );
    out[d + D_CRC..d + D_CRC + 4].copy_from_slice(&crc.to_le_bytes());
}

fn build_fresh(page_size: usize, usable: usize, v: &Version<'_>) -> Option<Vec<u8>> {
    let array_len = PTR_SIZE * v.cells.len();
    let bytes: usize = v.cells.iter().map(Vec::len).sum();
    if array_len + bytes > usable - RECORD_START {
        return None;
    }
    let mut out = vec![0u8; page_size];
    let mut top = usable;
    let mut offs = Vec::with_capacity(v.cells.len());
    for c in v.cells {
        top -= c.len();
        out[top..top + c.len()].copy_from_slice(c);
        offs.push(top);
    }
    write_descriptor(&mut out, 0, v, RECORD_START, &offs);
    Some(out)
}

pub fn build(
    pgno: Pgno,
    page_size: usize,
    usable: usize,
    base: Option<&[u8]>,
    keep_max_tid: u64,
    version: &Version<'_>,
) -> Result<Option<Vec<u8>>> {
    check_version(usable, page_size, version)?;
    let protected = match base {
        None => None,
        Some(b) if b.len() < usable => {
            return Err(Error::InvalidArgument(format!(
                "base image of page {pgno} has {} bytes, less than the usable size {usable}",
                b.len()
            )))
        }
        Some(b) => (0..2)
            .filter_map(|slot| check_slot(pgno, b, usable, slot).ok())
            .filter(|v| v.tid <= keep_max_tid && v.tid != version.tid)
            .max_by_key(|v| (v.tid, std::cmp::Reverse(v.slot))),
    };
    let Some(p) = protected else {
        return Ok(build_fresh(page_size, usable, version));
    };
    if version.tid < p.tid {
        return Err(Error::InvalidArgument(format!(
            "page {pgno}: version tid {} is older than the protected version's {}",
            version.tid, p.tid
        )));
    }
    let mut out = vec![0u8; page_size];
    let (pd, base) = (p.slot * DESC_SIZE, p.buf);
    out[pd..pd + DESC_SIZE].copy_from_slice(&base[pd..pd + DESC_SIZE]);
    let mut reuse: HashMap<&[u8], Vec<usize>> = HashMap::new();
    for (s, e) in p.ranges()? {
        out[s..e].copy_from_slice(&base[s..e]);
    }
    for i in (0..p.ncells).rev() {
        let (off, size) = p.cell_range(i)?;
        reuse.entry(&base[off..off + size]).or_default().push(off);
    }
    let mut offs = vec![0usize; version.cells.len()];
    let mut new = Vec::new();
    for (i, c) in version.cells.iter().enumerate() {
        match reuse.get_mut(&c[..]).and_then(Vec::pop) {
            Some(off) => offs[i] = off,
            None => new.push((i, c.len())),
        }
    }
    new.sort_by_key(|&(i, len)| (std::cmp::Reverse(len), i));
    let holes = free_holes(&p)?;
    let array_len = PTR_SIZE * version.cells.len();
    let anchor = (p.array_off, p.array_off + PTR_SIZE * p.ncells);
    let Some(plan) = plan_far_end(&holes, anchor, &new, array_len)
        .or_else(|| plan_best_fit(&holes, &new, array_len))
    else {
        return Ok(None);
    };
    for (i, off) in plan.cells {
        let c = &version.cells[i];
        out[off..off + c.len()].copy_from_slice(c);
        offs[i] = off;
    }
    write_descriptor(&mut out, 1 - p.slot, version, plan.array_off, &offs);
    Ok(Some(out))
}
