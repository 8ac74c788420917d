//! Journal mode `toy`: the walk-through of `docs/ADDING-A-MODE.md`, registered only in test
//! builds of this crate and with the `toy-mode` feature, so the test matrices can be seen
//! to pick a new mode up from its own file and one registry line.
//!
//! The protocol: the batch's pages are written in place, highest page number first (so the
//! header page, page 0, goes last), then one fdatasync. What it promises: after `commit`
//! returns Ok every page of the batch is durable. What it does not: atomicity (a cut may
//! leave any mix of old and new pages), so `atomic` is false and the crash matrices hold
//! it to what they hold `off` to. Nothing to recover at open.

use std::sync::Mutex;

use super::off::{commit_in_place, in_place_caps};
use super::{CommitBatch, Journal, JournalCtx, JournalMode, ModeSpec, Opened};
use crate::error::{Pgno, Result};
use crate::page::stock::STOCK;

/// Registry entry of `toy`. Code 200: reserved for it (`docs/FORMAT.md`), never a file a
/// release build writes.
pub(crate) static TOY: ModeSpec = ModeSpec {
    name: "toy",
    code: 200,
    format: 200,
    summary:
        "test builds only: the ADDING-A-MODE walk-through (in place, header last, no atomicity)",
    layout: &STOCK,
    caps: in_place_caps(false),
    options: &[],
    check_options: super::options::any_value,
    open: open_toy,
};

fn open_toy(ctx: JournalCtx, _mode: JournalMode) -> Result<Opened> {
    let j = ToyJournal {
        ctx,
        writer: Mutex::new(()),
    };
    Ok(Opened::plain(j, Default::default()))
}

/// The `toy` commit protocol.
#[derive(Debug)]
struct ToyJournal {
    ctx: JournalCtx,
    /// Serializes commits: a second caller must not interleave its writes and sync.
    writer: Mutex<()>,
}

impl Journal for ToyJournal {
    fn read_page(&self, pgno: Pgno, buf: &mut [u8]) -> Result<()> {
        self.ctx.db.read_page(pgno, buf)
    }

    fn commit(&self, batch: &CommitBatch<'_>) -> Result<()> {
        let mut pages = batch.pages.to_vec();
        pages.sort_by_key(|(pgno, _)| std::cmp::Reverse(*pgno));
        commit_in_place(&self.ctx, &self.writer, batch, &pages)
    }
}

#[cfg(test)]
mod tests {
    use crate::{Config, Database, JournalMode, KeyKind, ReadableTxn};

    /// The registry line is all it took: the mode opens by name, writes, and reopens.
    #[test]
    fn the_toy_mode_is_a_mode() {
        let mode = JournalMode::from_name("toy").expect("registered in test builds");
        assert!(JournalMode::all().any(|m| m == mode));
        let vfs = std::sync::Arc::new(crate::vfs::SimVfs::new());
        let cfg = Config::default().vfs(vfs.clone()).journal_mode(mode);
        {
            let db = Database::open("/t.db", cfg.clone()).unwrap();
            let mut w = db.begin_write().unwrap();
            let t = w.open_or_create_tree("t", KeyKind::Int).unwrap();
            for k in 0..500 {
                w.insert(&t, k, b"toy").unwrap();
            }
            w.commit().unwrap();
        }
        let db = Database::open("/t.db", Config::default().vfs(vfs)).unwrap();
        assert_eq!(db.journal_mode(), mode);
        let r = db.begin_read().unwrap();
        let t = r.open_tree("t").unwrap();
        assert_eq!(r.count(&t).unwrap(), 500);
    }
}
