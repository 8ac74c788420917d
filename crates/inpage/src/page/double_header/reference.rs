//! The reference oracle for the DHL page, test-only.
//!
//! Invariant: it shares with the code it checks only the format's definitions (constants,
//! the byte readers, the cell decoder, the streaming checksums `version_crc` and
//! `overflow_crc`) and the `View`/`CellArray` accessors for reading a version it has
//! validated itself. Validation, reading and stamping are the plain pre-optimisation
//! algorithms (the fast ones must match them bit for bit); placement is not re-implemented
//! at all: [`check_build`] accepts any image a correct `build` may produce (protected
//! bytes unchanged, the new version reads back exactly, nothing else written) and requires
//! a fit where one is certain, so a planner bug cannot hide in a shared copy.

use std::collections::HashMap;

use super::*;

pub fn check_slot(
    pgno: Pgno,
    buf: &[u8],
    usable: usize,
    slot: usize,
) -> std::result::Result<View<'_>, String> {
    if !Dhl::geometry_ok(usable, buf.len()) {
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
        pgno,
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
            arr: buf,
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

pub fn restamp(pgno: Pgno, buf: &mut [u8], usable: usize, tid: u64, txn_size: u32) -> bool {
    enum Covered {
        Tree((usize, usize), Vec<(usize, usize)>),
        Overflow(usize),
    }
    if tid == 0 || !Dhl::geometry_ok(usable, buf.len()) {
        return false;
    }
    let mut stamped = false;
    for slot in 0..2 {
        let d = slot * DESC_SIZE;
        if get_u64(buf, d + D_TID) != tid {
            continue;
        }
        let tree = check_slot(pgno, buf, usable, slot).ok().and_then(|v| {
            let array = (v.array_off, v.array_off + PTR_SIZE * v.ncells);
            let cells: Option<Vec<(usize, usize)>> =
                (0..v.ncells).map(|i| v.cell_range(i).ok()).collect();
            Some(Covered::Tree(array, cells?))
        });
        let covered = tree.or_else(|| {
            (slot == 0)
                .then(|| OVERFLOW.open(pgno, buf, usable).ok())
                .flatten()
                .map(|o| Covered::Overflow(o.data.len()))
        });
        let Some(covered) = covered else {
            continue;
        };
        buf[d + D_TXN_SIZE..d + D_TXN_SIZE + 4].copy_from_slice(&txn_size.to_le_bytes());
        let crc = match covered {
            Covered::Tree(array, cells) => version_crc(pgno, buf, slot, array, cells.into_iter()),
            Covered::Overflow(len) => overflow_crc(pgno, buf, len),
        };
        buf[d + D_CRC..d + D_CRC + 4].copy_from_slice(&crc.to_le_bytes());
        stamped = true;
    }
    stamped
}

/// Descriptor of `v` in `slot`, array at `array_off`, cells at `offs`, crc stamped.
fn write_descriptor(
    pgno: Pgno,
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
        pgno,
        out,
        slot,
        array,
        offs.iter().zip(v.cells).map(|(&off, c)| (off, c.len())),
    );
    out[d + D_CRC..d + D_CRC + 4].copy_from_slice(&crc.to_le_bytes());
}

/// A fresh page as the format defines it: slot 0 only, array at the bottom of the record
/// area, cells packed down from the top in key order. None if they do not fit.
fn build_fresh(pgno: Pgno, page_size: usize, usable: usize, v: &Version<'_>) -> Option<Vec<u8>> {
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
    write_descriptor(pgno, &mut out, 0, v, RECORD_START, &offs);
    Some(out)
}

/// The arguments `build` must reject, decided from the format rules alone.
fn bad_arguments(usable: usize, page_size: usize, base: Option<&[u8]>, v: &Version<'_>) -> bool {
    let geometry = (RECORD_START..=MAX_USABLE).contains(&usable) && page_size >= usable;
    !geometry
        || v.tid == 0
        || v.cells.len() > u16::MAX as usize
        || v.cells
            .iter()
            .any(|c| cell_size(v.leaf, usable, c) != Some(c.len()))
        || base.is_some_and(|b| b.len() < usable)
}

/// The protected version of `base`: of the valid slots with `tid <= keep_max_tid` and a
/// tid other than `replaced`, the one with the largest tid, slot 0 on a tie.
fn protected(
    pgno: Pgno,
    base: &[u8],
    usable: usize,
    keep_max_tid: u64,
    replaced: u64,
) -> Option<View<'_>> {
    (0..2)
        .filter_map(|slot| check_slot(pgno, base, usable, slot).ok())
        .filter(|v| v.tid <= keep_max_tid && v.tid != replaced)
        .max_by_key(|v| (v.tid, std::cmp::Reverse(v.slot)))
}

/// Whether `items` (byte lengths) can be placed into `holes` (lengths) without overlap,
/// by trying every assignment. Exponential; only called with a handful of items.
pub fn placement_exists(holes: &mut [usize], items: &[usize]) -> bool {
    let Some((&len, rest)) = items.split_first() else {
        return true;
    };
    for j in 0..holes.len() {
        if holes[j] >= len {
            holes[j] -= len;
            let ok = placement_exists(holes, rest);
            holes[j] += len;
            if ok {
                return true;
            }
        }
    }
    false
}

/// Check `got`, what the production `build(pgno, page_size, usable, base, keep_max_tid,
/// version)` returned, against the rules every correct build follows, without deciding
/// placement itself:
///
/// - rejected arguments are `InvalidArgument`, and only those;
/// - without a protected version, the image is exactly the compact layout ([`build_fresh`]);
/// - otherwise, the protected version's slot and every byte it references are unchanged;
///   the other slot holds a valid version that reads back exactly `version` (tid,
///   txn_size, kind, right child, cells in order); a cell equal to one of the protected
///   version's reuses its copy (the k-th such cell the k-th copy, in array order), and
///   every other new byte (array, unshared cells) lies outside the protected bytes; every
///   byte outside the two versions and their descriptors is zero;
/// - `None` only if no placement exists where the format promises one: all new bytes
///   fitting in one hole (the reserve guarantee), or at most two pieces to place (one
///   cell and the array) that some assignment to the holes fits.
pub fn check_build(
    pgno: Pgno,
    page_size: usize,
    usable: usize,
    base: Option<&[u8]>,
    keep_max_tid: u64,
    version: &Version<'_>,
    got: Result<Option<Vec<u8>>>,
) -> std::result::Result<(), String> {
    let invalid = |got: Result<Option<Vec<u8>>>, why: &str| match got {
        Err(Error::InvalidArgument(_)) => Ok(()),
        other => Err(format!(
            "expected InvalidArgument ({why}), got {:?}",
            other.map(|o| o.map(|_| "an image"))
        )),
    };
    if bad_arguments(usable, page_size, base, version) {
        return invalid(got, "bad arguments");
    }
    let p = base.and_then(|b| protected(pgno, b, usable, keep_max_tid, version.tid));
    let Some(p) = p else {
        let want = build_fresh(pgno, page_size, usable, version);
        return match got {
            Ok(g) if g == want => Ok(()),
            Ok(_) => Err("fresh page: image differs from the compact layout".into()),
            Err(e) => Err(format!("fresh page: unexpected error {e}")),
        };
    };
    if version.tid < p.tid {
        return invalid(got, "version older than the protected one");
    }
    let base = p.buf;
    let p_ranges = p.ranges().map_err(|e| e.to_string())?;
    let p_cells: Vec<(usize, usize)> = (0..p.ncells)
        .map(|i| p.cell_range(i).map(|(o, n)| (o, o + n)))
        .collect::<Result<_>>()
        .map_err(|e| e.to_string())?;
    // Which of the new cells share a protected copy: per content, the first ones in key
    // order take the protected copies in array order.
    let mut copies: HashMap<&[u8], Vec<usize>> = HashMap::new();
    for &(s, e) in &p_cells {
        copies.entry(&base[s..e]).or_default().push(s);
    }
    let mut taken: HashMap<&[u8], usize> = HashMap::new();
    let shared: Vec<Option<usize>> = version
        .cells
        .iter()
        .map(|c| {
            let k = taken.entry(&c[..]).or_default();
            let copy = copies.get(&c[..]).and_then(|offs| offs.get(*k)).copied();
            *k += 1;
            copy
        })
        .collect();

    let img = match got {
        Err(e) => return Err(format!("unexpected error {e}")),
        Ok(Some(img)) => img,
        Ok(None) => {
            let mut holes: Vec<usize> = free_holes(&p)
                .map_err(|e| e.to_string())?
                .iter()
                .map(|&(s, e)| e - s)
                .collect();
            let mut items: Vec<usize> = version
                .cells
                .iter()
                .zip(&shared)
                .filter(|(_, s)| s.is_none())
                .map(|(c, _)| c.len())
                .collect();
            if !version.cells.is_empty() {
                items.push(PTR_SIZE * version.cells.len());
            }
            let total: usize = items.iter().sum();
            if total == 0 || holes.iter().any(|&h| h >= total) {
                return Err(format!(
                    "None although one hole takes all {total} new bytes (holes {holes:?})"
                ));
            }
            if items.len() <= 2 && placement_exists(&mut holes, &items) {
                return Err(format!(
                    "None although {items:?} can be placed into holes {holes:?}"
                ));
            }
            return Ok(());
        }
    };

    if img.len() != page_size {
        return Err(format!(
            "image of {} bytes, page size {page_size}",
            img.len()
        ));
    }
    // The protected version, bit for bit.
    let pd = p.slot * DESC_SIZE;
    let mut kept = vec![false; page_size];
    for (s, e) in p_ranges.iter().copied().chain([(pd, pd + DESC_SIZE)]) {
        if img[s..e] != base[s..e] {
            return Err(format!("protected bytes [{s}, {e}) changed"));
        }
        kept[s..e].fill(true);
    }
    // The new version reads back exactly.
    let slot = 1 - p.slot;
    let n = check_slot(pgno, &img, usable, slot)
        .map_err(|r| format!("new version in slot {slot} is not valid: {r}"))?;
    let want_right = if version.leaf { 0 } else { version.right };
    if (n.tid, n.txn_size, n.leaf, n.right)
        != (version.tid, version.txn_size, version.leaf, want_right)
    {
        return Err(format!(
            "new version's descriptor says (tid, txn_size, leaf, right) = {:?}",
            (n.tid, n.txn_size, n.leaf, n.right)
        ));
    }
    if n.cells().map_err(|e| e.to_string())? != version.cells {
        return Err("new version's cells differ from the ones written".into());
    }
    let nd = slot * DESC_SIZE;
    if img[nd + D_FLAGS] != 0 || img[nd + D_ARRAY + 2..nd + D_CRC].iter().any(|&b| b != 0) {
        return Err("new descriptor's flags or reserved bytes are not zero".into());
    }
    // Shared cells use the protected copies; everything else new avoids protected bytes.
    let mut written = vec![false; page_size];
    written[nd..nd + DESC_SIZE].fill(true);
    let mut new_ranges = vec![(n.array_off, n.array_off + PTR_SIZE * n.ncells)];
    for (i, copy) in shared.iter().enumerate() {
        let (off, size) = n.cell_range(i).map_err(|e| e.to_string())?;
        match *copy {
            Some(c) if c != off => {
                return Err(format!(
                    "cell {i} equals the protected copy at {c} but was placed at {off}"
                ))
            }
            Some(_) => written[off..off + size].fill(true),
            None => new_ranges.push((off, off + size)),
        }
    }
    for (s, e) in new_ranges {
        if kept[s..e].iter().any(|&k| k) {
            return Err(format!("new bytes [{s}, {e}) overwrite protected bytes"));
        }
        written[s..e].fill(true);
    }
    // Nothing else.
    if let Some(at) = (0..page_size).find(|&i| !kept[i] && !written[i] && img[i] != 0) {
        return Err(format!(
            "byte {at} belongs to no version but is {}",
            img[at]
        ));
    }
    Ok(())
}
