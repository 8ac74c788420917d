//! Doubleheader-logging commit protocols: `dhl-tc`, `dhl-cc` and `dhl-cc-header`.
//!
//! There is no side file. Every tree and overflow page is a DHL page (`page::dhl`): a
//! write of transaction `T` adds a version tagged `T` next to the committed version and
//! never disturbs it, so the database file itself is the undo log. Page 0 keeps two
//! header slots for the same reason (`pager::header::visible_slot`).
//!
//! Invariants, and why they hold:
//! - *A transaction's versions count only once it is complete.* With counting commit
//!   (`dhl-cc`, `dhl-cc-header`) every page of the batch carries `(tid, txn_size)`,
//!   `txn_size` being the number of pages in the batch, and one fdatasync makes them
//!   durable. Recovery finds the largest tid `M` among valid versions: if exactly
//!   `txn_size` valid versions carry `M`, every page of `M` reached the disk; otherwise
//!   some did not and `M` is rolled back. `M - 1` is complete either way, because `M`
//!   began writing only after `M - 1`'s fdatasync returned. With the traditional commit
//!   (`dhl-tc`) the header page's new slot is the commit mark, written only after the
//!   other pages are synced, so the FCC is the largest valid header-slot fcc.
//! - *Rolling back is invalidation.* A version of an aborted transaction is made invalid
//!   by zeroing its tid (or its header slot), a write inside sector 0; the committed
//!   version beside it is untouched and becomes the visible one again. Recovery syncs the
//!   invalidations before the database is used, and redoing them is harmless, so a crash
//!   during recovery is recovered the same way.
//! - *Torn writes need no atomic pages.* A version's checksum covers its descriptor, its
//!   offset array and every byte it references; a page write torn at any sector boundary
//!   can only leave the new version invalid, which recovery then counts as missing.
//! - *Tids are not reused while an invalid-but-present version could be confused with a
//!   new one:* recovery zeroes the tid of every valid version newer than the FCC it
//!   settles on, so the next transaction (tid FCC + 1) finds no valid version with its tid.

use std::sync::Mutex;

use super::off::check_batch;
use super::{CommitBatch, Journal, JournalCtx, JournalMode, RecoveryReport};
use crate::error::{Error, Pgno, Result};
use crate::page::{dhl, PAGE_TRAILER};
use crate::pager::header::{decode_slot, visible_slot, DHL_SLOTS, HEADER_LEN};

/// A valid version found by the recovery scan.
struct Found {
    pgno: Pgno,
    slot: usize,
    tid: u64,
    txn_size: u32,
    /// Invalid versions (torn by a crash) do not count, but newer-than-FCC ones are
    /// still invalidated so their tid can never be mistaken for a later transaction's.
    /// `None`: not validated, because the vote never needed it.
    valid: Option<bool>,
}

/// Bytes recovery's scan reads per call.
const SCAN_CHUNK: usize = 64 * 1024;

/// The DHL commit protocols.
#[derive(Debug)]
pub(crate) struct DhlJournal {
    ctx: JournalCtx,
    mode: JournalMode,
    fcc: u64,
    writer: Mutex<()>,
}

impl DhlJournal {
    /// Open a DHL mode, running recovery (scan every page, settle the FCC, invalidate
    /// versions of an incomplete transaction).
    pub(crate) fn open(ctx: JournalCtx, mode: JournalMode) -> Result<(DhlJournal, RecoveryReport)> {
        if !matches!(
            mode,
            JournalMode::DhlTc | JournalMode::DhlCc | JournalMode::DhlCcHeader
        ) {
            return Err(Error::Config(format!("DhlJournal opened for mode {mode}")));
        }
        let (fcc, report) = recover(&ctx, mode)?;
        Ok((
            DhlJournal {
                ctx,
                mode,
                fcc,
                writer: Mutex::new(()),
            },
            report,
        ))
    }
}

fn recover(ctx: &JournalCtx, mode: JournalMode) -> Result<(u64, RecoveryReport)> {
    let db = &ctx.db;
    let ps = db.page_size;
    let usable = ps - PAGE_TRAILER;
    let pages = db.file_len()? / ps as u64;
    let mut found = Vec::new();
    let mut buf = vec![0u8; ps];
    if pages > 0 {
        db.read_page(0, &mut buf)?;
        for slot in 0..DHL_SLOTS {
            if let Ok(h) = decode_slot(&buf, slot) {
                found.push(Found {
                    pgno: 0,
                    slot,
                    tid: h.fcc,
                    txn_size: h.last_txn_size,
                    valid: Some(true),
                });
            } else if buf[slot * HEADER_LEN..(slot + 1) * HEADER_LEN]
                .iter()
                .any(|&b| b != 0)
            {
                // Both slots live in sector 0, which a crash writes whole: a damaged slot
                // is corruption, not a torn commit.
                return Err(Error::corrupt(0, format!("header slot {slot} is damaged")));
            }
        }
    }
    // The scan reads the file in chunks and keeps only the descriptor heads; a version is
    // validated (checksums over its cells) only where the vote may need it: while its page
    // is in memory if its tid is at least the largest seen so far (which covers every
    // version of the largest tid), and later, by a re-read, only if the largest tids turn
    // out to have no valid version (torn writes). That gives exactly the FCC a full
    // validation would, reading the file once in the common case.
    let count_votes = mode != JournalMode::DhlTc;
    let mut running_max = found.iter().map(|f| f.tid).max().unwrap_or(0);
    let chunk_pages = (SCAN_CHUNK / ps).max(1) as u64;
    let mut chunk = vec![0u8; chunk_pages as usize * ps];
    let mut pgno = 1u64;
    while pgno < pages {
        let n = chunk_pages.min(pages - pgno);
        let bytes = &mut chunk[..n as usize * ps];
        db.read_pages(pgno as Pgno, bytes)?;
        for (i, page) in bytes.chunks_exact(ps).enumerate() {
            let Some(heads) = dhl::descriptor_heads(page) else {
                continue;
            };
            let candidate = count_votes && heads.iter().any(|&(t, _)| t != 0 && t >= running_max);
            let versions = candidate.then(|| dhl::page_versions(page, usable));
            for (slot, (tid, txn_size)) in heads.into_iter().enumerate() {
                if tid != 0 {
                    let valid = versions
                        .filter(|_| tid >= running_max)
                        .map(|v| v[slot].is_some_and(|d| d.valid));
                    found.push(Found {
                        pgno: (pgno + i as u64) as Pgno,
                        slot,
                        tid,
                        txn_size,
                        valid,
                    });
                }
            }
            running_max = running_max.max(heads[0].0).max(heads[1].0);
        }
        pgno += n;
    }
    let fcc = match mode {
        JournalMode::DhlTc => found
            .iter()
            .filter(|f| f.pgno == 0 && f.valid == Some(true))
            .map(|f| f.tid)
            .max()
            .unwrap_or(0),
        _ => {
            // Only valid versions vote: a torn version's tid is readable (sector 0) but
            // its content is not there. Validate the largest tids first, down to the first
            // that has a valid version.
            found.sort_unstable_by_key(|f| std::cmp::Reverse(f.tid));
            let mut m = 0;
            let mut at = 0;
            while at < found.len() {
                let t = found[at].tid;
                let end = at + found[at..].partition_point(|f| f.tid == t);
                for f in &mut found[at..end] {
                    if f.valid.is_none() {
                        db.read_page(f.pgno, &mut buf)?;
                        let v = dhl::page_versions(&buf, usable)[f.slot];
                        f.valid = Some(v.is_some_and(|d| d.valid));
                    }
                }
                if found[at..end].iter().any(|f| f.valid == Some(true)) {
                    m = t;
                    break;
                }
                at = end;
            }
            let of_m: Vec<&Found> = found
                .iter()
                .filter(|f| f.valid == Some(true) && f.tid == m)
                .collect();
            let complete = of_m.first().is_some_and(|f| {
                of_m.len() == f.txn_size as usize && of_m.iter().all(|g| g.txn_size == f.txn_size)
            });
            if complete || m == 0 {
                m
            } else {
                m - 1
            }
        }
    };
    // Reject a truncated file before writing anything (bad input changes nothing).
    if pages > 0 {
        db.read_page(0, &mut buf)?;
        if let Some((_, h)) = visible_slot(&buf, fcc) {
            let need = h.page_count as u64 * ps as u64;
            let len = db.file_len()?;
            if len < need {
                return Err(Error::Truncated {
                    path: db.path.clone(),
                    expected: need,
                    actual: len,
                });
            }
        }
    }
    // Versions newer than the FCC are the rolled-back transaction's: valid ones, and
    // invalid ones carrying its tid (torn by the crash). Any other version claiming a tid
    // above the FCC was never written as such: that is damage, which must be reported,
    // not "rolled back" (that would silently drop committed data).
    if let Some(f) = found.iter().find(|f| f.tid > fcc + 1) {
        return Err(Error::corrupt(
            f.pgno,
            format!(
                "version claims transaction {} but the last committed one is {fcc}",
                f.tid
            ),
        ));
    }
    let stale: Vec<&Found> = found.iter().filter(|f| f.tid > fcc).collect();
    for f in &stale {
        db.read_page(f.pgno, &mut buf)?;
        if f.pgno == 0 {
            let at = f.slot * HEADER_LEN;
            buf[at..at + HEADER_LEN].fill(0);
        } else {
            dhl::invalidate(&mut buf, f.tid);
        }
        db.write_page(f.pgno, &buf)?;
    }
    if !stale.is_empty() {
        db.sync()?;
    }
    Ok((
        fcc,
        RecoveryReport {
            pages_restored: stale.len() as u64,
            frames_kept: 0,
            frames_discarded: stale.len() as u64,
            rolled_back: !stale.is_empty(),
        },
    ))
}

impl Journal for DhlJournal {
    fn mode(&self) -> JournalMode {
        self.mode
    }

    fn read_page(&self, pgno: Pgno, buf: &mut [u8]) -> Result<()> {
        self.ctx.db.read_page(pgno, buf)
    }

    fn commit(&self, batch: &CommitBatch<'_>) -> Result<()> {
        let _w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let db = &self.ctx.db;
        check_batch(batch, db.page_size)?;
        db.ensure_capacity(batch.new_page_count)?;
        if db.chunk_pages == 0 {
            // Growth a page at a time: a page allocated and freed within the transaction
            // is never written, so size the file explicitly; the commit's fdatasync makes
            // the size durable with the pages.
            let need = batch.new_page_count as u64 * db.page_size as u64;
            if !db.len_at_least(need)? {
                db.set_len(need)?;
            }
        }
        if self.mode == JournalMode::DhlTc {
            let Some((_, header)) = batch.pages.iter().find(|(p, _)| *p == 0) else {
                return Err(Error::InvalidArgument(
                    "dhl-tc commit without the header page (its commit mark)".into(),
                ));
            };
            db.write_pages(batch.pages.iter().filter(|(p, _)| *p != 0))?;
            db.sync()?;
            db.write_page(0, header)?;
            db.sync()
        } else {
            db.write_pages(batch.pages)?;
            db.sync()
        }
    }

    fn checkpoint(&self) -> Result<()> {
        Ok(())
    }

    fn close(&self) -> Result<()> {
        Ok(())
    }

    fn embeds_fcc(&self) -> bool {
        self.mode == JournalMode::DhlCc
    }

    fn recovered_fcc(&self) -> Option<u64> {
        Some(self.fcc)
    }
}
