//! Journal modes `off` and `off-opt`: pages are written in place with one fdatasync and no
//! side file. `off-opt` differs only in metadata embedding (`embeds_fcc`): the pager leaves
//! the header page out of a commit that changes nothing but the commit counter, so a
//! one-page transaction writes one page. The counter on disk is then stale, which costs
//! nothing here: no recovery reads it, and it only has to grow within a session.
//!
//! What it promises: after `commit` returns Ok every page of the batch is durable (the one
//! fdatasync covers them, and `ensure_capacity` made any growth durable before). What it
//! does NOT promise: atomicity. A power cut or I/O error in the middle of a commit can
//! leave any mix of old and new pages, torn at sector boundaries; the page trailers' crc
//! lets the pager *detect* a torn page, but nothing can repair it. A process crash is
//! harmless once the writes are in the OS cache, which `write_at` returning means.
//!
//! There is nothing to recover on open (a hot rollback journal left by another mode is
//! handled by the pager through `recover_hot_journal` before this is opened).

use std::sync::Mutex;

use super::util::check_batch;
use super::{
    Capabilities, CommitBatch, Journal, JournalCtx, JournalMode, ModeSpec, Opened, RecoveryReport,
};
use crate::error::{Error, Pgno, Result};
use crate::page::stock::STOCK;

/// Registry entry of `off`.
pub(crate) static OFF: ModeSpec = ModeSpec {
    name: "off",
    code: 1,
    format: 1,
    summary: "pages written in place, one fdatasync, no atomicity promised",
    layout: &STOCK,
    caps: in_place_caps(false),
    options: &[],
    check_options: super::options::any_value,
    open: open_off,
};

/// Registry entry of `off-opt`.
pub(crate) static OFF_OPT: ModeSpec = ModeSpec {
    name: "off-opt",
    code: 6,
    format: 1,
    summary: "off with metadata embedding: the header page only when more than the counter changed",
    layout: &STOCK,
    caps: in_place_caps(true),
    options: &[],
    check_options: super::options::any_value,
    open: open_off,
};

/// What a mode that writes pages in place with no journal can do: no atomicity, every
/// acknowledged commit durable; `embeds_fcc` as the mode says.
pub(crate) const fn in_place_caps(embeds_fcc: bool) -> Capabilities {
    Capabilities {
        atomic: false,
        embeds_fcc,
        recovers_fcc: false,
        direct_writes: false,
        replays_log: false,
        intent_map: false,
        side_files: &[],
        steals: false,
        durable_at_ack: true,
        survives_process_crash: true,
        region_backed: false,
        appends_beside_readers: false,
    }
}

/// The commit of a mode without atomicity: `pages` (the batch's, in the order the mode
/// writes them) in place, after any growth was made durable, then one fdatasync. The
/// writer lock keeps a second caller's writes and sync from interleaving.
pub(crate) fn commit_in_place(
    ctx: &JournalCtx,
    writer: &Mutex<()>,
    batch: &CommitBatch<'_>,
    pages: &[(Pgno, crate::page::PageRef)],
) -> Result<()> {
    let _w = writer
        .lock()
        .map_err(|_| Error::Poisoned("a thread panicked while committing (writer lock)".into()))?;
    let db = &ctx.db;
    check_batch(batch, db.page_size, false)?;
    db.ensure_capacity(batch.new_page_count)?;
    db.write_pages(pages)?;
    db.sync()?;
    if batch.new_page_count < batch.old_page_count {
        // No state but this one is recoverable any more: the pages past its end are
        // no one's (`DbFile::cut_tail`).
        db.cut_tail(batch.new_page_count)?;
    }
    Ok(())
}

fn open_off(ctx: JournalCtx, mode: JournalMode) -> Result<Opened> {
    let (j, r) = OffJournal::open(ctx, mode)?;
    Ok(Opened::plain(j, r))
}

/// The `off` commit protocol.
#[derive(Debug)]
pub(crate) struct OffJournal {
    ctx: JournalCtx,
    /// Serializes commits: the pager has a single writer, but a second concurrent caller
    /// must not interleave its writes and sync with ours.
    writer: Mutex<()>,
}

impl OffJournal {
    /// Open the mode (`Off` or `OffOpt`); there is never anything to recover.
    pub(crate) fn open(ctx: JournalCtx, mode: JournalMode) -> Result<(OffJournal, RecoveryReport)> {
        if mode != JournalMode::OFF && mode != JournalMode::OFF_OPT {
            return Err(Error::Config(format!("OffJournal opened for mode {mode}")));
        }
        Ok((
            OffJournal {
                ctx,
                writer: Mutex::new(()),
            },
            RecoveryReport::default(),
        ))
    }
}

impl Journal for OffJournal {
    fn read_page(&self, pgno: Pgno, buf: &mut [u8]) -> Result<()> {
        self.ctx.db.read_page(pgno, buf)
    }

    fn commit(&self, batch: &CommitBatch<'_>) -> Result<()> {
        commit_in_place(&self.ctx, &self.writer, batch, batch.pages)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::testutil::*;
    use crate::journal::JournalConfig;
    use std::path::Path;

    #[test]
    fn commits_are_visible_and_survive_reopen() {
        let vfs = mem_vfs();
        let dir = Path::new("/d");
        let mut model = Model::default();
        {
            let (j, rep) = OffJournal::open(
                ctx(&vfs, dir, JournalConfig::default(), 4),
                JournalMode::OFF,
            )
            .unwrap();
            assert_eq!(rep, RecoveryReport::default());
            for (tid, pg, new) in [(1u64, vec![], 3u32), (2, vec![1], 3), (3, vec![2], 9)] {
                let t = Txn::build(&model, tid, &pg, new);
                j.commit(&t.batch()).unwrap();
                model = t.apply(&model);
                matches(&j, &model).unwrap();
            }
            j.close().unwrap();
        }
        let (j, _) = OffJournal::open(
            ctx(&vfs, dir, JournalConfig::default(), 4),
            JournalMode::OFF,
        )
        .unwrap();
        matches(&j, &model).unwrap();
    }

    #[test]
    fn eio_makes_commit_fail() {
        eio_test(Kind::Off, &JournalConfig::default());
    }

    #[test]
    fn one_sync_per_commit() {
        assert_eq!(syncs_per_commit(Kind::Off, &JournalConfig::default(), 2), 1);
    }

    #[test]
    fn wrong_page_size_is_an_error() {
        let vfs = mem_vfs();
        let (j, _) = OffJournal::open(
            ctx(&vfs, Path::new("/d"), JournalConfig::default(), 0),
            JournalMode::OFF,
        )
        .unwrap();
        let short: crate::page::PageRef = vec![0u8; 100].into();
        let pages = [(0u32, short)];
        let b = CommitBatch {
            tid: 1,
            pages: &pages,
            originals: &[],
            old_page_count: 0,
            new_page_count: 1,
            restamp: &[],
            discard: &[],
        };
        assert!(matches!(j.commit(&b), Err(Error::InvalidArgument(_))));
    }
}
