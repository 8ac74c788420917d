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
use crate::pager::header::{decode_slot, DHL_SLOTS, HEADER_LEN};

/// A valid version found by the recovery scan.
struct Found {
    pgno: Pgno,
    slot: usize,
    tid: u64,
    txn_size: u32,
}

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
                });
            }
        }
    }
    for pgno in 1..pages {
        db.read_page(pgno as Pgno, &mut buf)?;
        for d in dhl::page_versions(&buf, usable).into_iter().flatten() {
            if d.valid {
                found.push(Found {
                    pgno: pgno as Pgno,
                    slot: d.slot,
                    tid: d.tid,
                    txn_size: d.txn_size,
                });
            }
        }
    }
    let fcc = match mode {
        JournalMode::DhlTc => found
            .iter()
            .filter(|f| f.pgno == 0)
            .map(|f| f.tid)
            .max()
            .unwrap_or(0),
        _ => {
            let m = found.iter().map(|f| f.tid).max().unwrap_or(0);
            let of_m: Vec<&Found> = found.iter().filter(|f| f.tid == m).collect();
            let complete = of_m
                .first()
                .is_some_and(|f| of_m.len() == f.txn_size as usize && of_m.iter().all(|g| g.txn_size == f.txn_size));
            if complete || m == 0 {
                m
            } else {
                m - 1
            }
        }
    };
    let stale: Vec<&Found> = found.iter().filter(|f| f.tid > fcc).collect();
    for f in &stale {
        db.read_page(f.pgno, &mut buf)?;
        if f.pgno == 0 {
            let at = f.slot * HEADER_LEN;
            buf[at..at + HEADER_LEN].fill(0);
        } else if !dhl::invalidate(&mut buf, f.tid) {
            return Err(Error::corrupt(f.pgno, "version to roll back vanished"));
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
        if self.mode == JournalMode::DhlTc {
            let Some((_, header)) = batch.pages.iter().find(|(p, _)| *p == 0) else {
                return Err(Error::InvalidArgument(
                    "dhl-tc commit without the header page (its commit mark)".into(),
                ));
            };
            for (pgno, page) in batch.pages.iter().filter(|(p, _)| *p != 0) {
                db.write_page(*pgno, page)?;
            }
            db.sync()?;
            db.write_page(0, header)?;
            db.sync()
        } else {
            for (pgno, page) in batch.pages {
                db.write_page(*pgno, page)?;
            }
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
