//! The free-space snapshot a clean close leaves, so that the first write transaction of
//! the next session need not walk every tree to learn which pages are free (DHL keeps no
//! free list on disk: maintaining one would overwrite pages committed trees still use).
//!
//! Format: a chain of *snapshot pages*, themselves free pages, each holding
//! `[0, RECORD_START)` zero (two INV descriptors, so recovery's scan sees no version
//! there), then `SNAP_MAGIC`, the next chain page (0 ends it), the number of entries in
//! this page, and the entries (u32 page numbers). The whole list is sorted ascending and
//! names every free page, the chain pages included. Header slot bytes `FREE_SNAPSHOT`
//! hold the reference (`FreeSnapshotRef`): head, chain length, count and a crc32c over
//! the FCC and every chain page's bytes past `RECORD_START`.
//!
//! Invariants, and why they hold:
//! - *A loaded snapshot is exactly the free set at the FCC the file is at.* It is
//!   written by a clean close at FCC `C` with the mark `C`, in the same sync; it is
//!   trusted only while this open trusted that mark (no write since: the journal voids
//!   the mark, and the reference with it, durably, before any later commit writes), and
//!   only if its crc — which covers `C` and every chain byte — matches. A torn or lost
//!   chain write fails the crc; a reference from another FCC fails the crc too.
//! - *Writing it destroys nothing.* Chain pages are free at `C`: no tree owns them and
//!   no reader remains (close runs last). A free page never holds a version of the last
//!   committed transaction (a transaction does not write the pages it frees), so a crash
//!   in the middle of the close leaves recovery's vote unchanged, and the chain pages'
//!   zero descriptors vote for nothing.
//! - *Anything odd means "walk".* Loading checks magic, bounds, order, the count and the
//!   crc; any failure makes the caller walk the trees as if there were no snapshot.

use std::collections::BTreeSet;

use crate::error::{Pgno, Result};
use crate::format::header::FreeSnapshotRef;
use crate::journal::dbfile::DbFile;
use crate::le::{get_u32, put_u32};
use crate::page::double_header::RECORD_START;
use crate::page::PAGE_TRAILER;

/// "FRSP": marks a snapshot page.
const SNAP_MAGIC: u32 = 0x5053_5246;
const MAGIC_AT: usize = RECORD_START;
const NEXT_AT: usize = RECORD_START + 4;
const COUNT_AT: usize = RECORD_START + 8;
const ENTRIES_AT: usize = RECORD_START + 12;

/// Page numbers one snapshot page holds.
pub(crate) fn capacity(page_size: usize) -> usize {
    (page_size - PAGE_TRAILER).saturating_sub(ENTRIES_AT) / 4
}

fn crc_start(fcc: u64, head: Pgno, chain: u32, count: u32) -> u32 {
    let mut b = [0u8; 20];
    b[..8].copy_from_slice(&fcc.to_le_bytes());
    b[8..12].copy_from_slice(&head.to_le_bytes());
    b[12..16].copy_from_slice(&chain.to_le_bytes());
    b[16..20].copy_from_slice(&count.to_le_bytes());
    crc32c::crc32c(&b)
}

/// Write the snapshot of `free` (every free page at `fcc`) into the lowest free pages,
/// unsynced (the close's sync covers it), and return the reference for page 0.
pub(crate) fn write(db: &DbFile, free: &BTreeSet<Pgno>, fcc: u64) -> Result<FreeSnapshotRef> {
    let ps = db.page_size;
    let cap = capacity(ps);
    let count = u32::try_from(free.len()).expect("page numbers are u32");
    let entries: Vec<Pgno> = free.iter().copied().collect();
    let chain: Vec<Pgno> = match cap {
        0 => Vec::new(),
        cap => entries
            .iter()
            .copied()
            .take(entries.len().div_ceil(cap))
            .collect(),
    };
    if cap == 0 && !entries.is_empty() {
        // A page too small for even one entry: keep no snapshot (the next open walks).
        return Ok(FreeSnapshotRef {
            head: 0,
            chain_pages: 0,
            count: 0,
            crc: 0,
        });
    }
    let head = chain.first().copied().unwrap_or(0);
    let mut crc = crc_start(fcc, head, chain.len() as u32, count);
    for (i, &pgno) in chain.iter().enumerate() {
        let part = &entries[i * cap..((i + 1) * cap).min(entries.len())];
        let mut page = vec![0u8; ps];
        put_u32(&mut page, MAGIC_AT, SNAP_MAGIC);
        put_u32(&mut page, NEXT_AT, chain.get(i + 1).copied().unwrap_or(0));
        put_u32(&mut page, COUNT_AT, part.len() as u32);
        for (j, &p) in part.iter().enumerate() {
            put_u32(&mut page, ENTRIES_AT + 4 * j, p);
        }
        crc = crc32c::crc32c_append(crc, &page[RECORD_START..]);
        db.write_page(pgno, &page)?;
    }
    Ok(FreeSnapshotRef {
        head,
        chain_pages: chain.len() as u32,
        count,
        crc,
    })
}

/// Read and check the snapshot `r` names for a file at `fcc` with `page_count` pages:
/// `Some(free pages)` if every check passes, `None` if any fails (the caller walks).
/// With `check_fcc` false (the `StaleFreeSnapshot` mutant) the FCC is not bound.
pub(crate) fn read(
    db: &DbFile,
    r: &FreeSnapshotRef,
    fcc: u64,
    page_count: u32,
    check_fcc: bool,
) -> Result<Option<BTreeSet<Pgno>>> {
    let ps = db.page_size;
    let cap = capacity(ps);
    if r.count >= page_count || r.chain_pages as usize > r.count as usize {
        return Ok(None);
    }
    let mut crc = crc_start(fcc, r.head, r.chain_pages, r.count);
    let mut entries: Vec<Pgno> = Vec::with_capacity(r.count as usize);
    let mut chain = Vec::with_capacity(r.chain_pages as usize);
    let mut next = r.head;
    let mut page = vec![0u8; ps];
    for _ in 0..r.chain_pages {
        if next == 0 || next >= page_count || chain.contains(&next) {
            return Ok(None);
        }
        db.read_page(next, &mut page)?;
        let n = get_u32(&page, COUNT_AT) as usize;
        if get_u32(&page, MAGIC_AT) != SNAP_MAGIC
            || n > cap
            || page[..RECORD_START].iter().any(|&b| b != 0)
        {
            return Ok(None);
        }
        crc = crc32c::crc32c_append(crc, &page[RECORD_START..]);
        entries.extend((0..n).map(|j| get_u32(&page, ENTRIES_AT + 4 * j)));
        chain.push(next);
        next = get_u32(&page, NEXT_AT);
    }
    if next != 0 || entries.len() != r.count as usize {
        return Ok(None);
    }
    if check_fcc && crc != r.crc {
        return Ok(None);
    }
    // Sorted strictly ascending (no duplicates), inside the file, chain pages included.
    if entries.windows(2).any(|w| w[0] >= w[1])
        || entries.iter().any(|&p| p == 0 || p >= page_count)
    {
        return Ok(None);
    }
    let set: BTreeSet<Pgno> = entries.into_iter().collect();
    if chain.iter().any(|p| !set.contains(p)) {
        return Ok(None);
    }
    Ok(Some(set))
}
