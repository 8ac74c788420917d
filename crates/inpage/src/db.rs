//! `Database`: the handle users open, and the auto-commit conveniences.
//!
//! Invariants: under `Concurrency::Serial` (the default) the writer flag admits one
//! `WriteTxn` at a time (`begin_write` blocks, `try_begin_write` fails with `Busy`); under
//! `Concurrency::Occ` write transactions run at once and a commit may fail with
//! `Conflict`, which `write` (and the auto-commit conveniences) answer by running the
//! transaction again. Closing runs the journal's clean shutdown once (explicitly via
//! `close`, else when the last handle or transaction is dropped).
//!
//! One handle per database file: a read-write open takes an exclusive advisory lock on
//! the file (`Error::Locked` if another handle, in this process or another, holds it;
//! the kernel releases it when the handle closes or its process dies). Clone the
//! `Database` to share it between threads. A read-only open (`Config::read_only`) takes
//! no lock and never writes: its files are opened read-only and recovery runs in an
//! in-memory overlay (`vfs::OverlayVfs`), so it can look at a database in use.

use std::path::Path;
use std::sync::Arc;

use crate::config::Config;
use crate::error::{Error, Result};
use crate::format::header::Header;
use crate::journal::{JournalMode, RecoveryReport};
use crate::pager::{CacheStats, Pager};
use crate::txn::key::Key;
use crate::txn::{ReadTxn, ReadableTxn, Shared, WriteTxn};
use crate::vfs::undo::UndoVfs;
use crate::vfs::OverlayVfs;

/// How many times [`Database::write`] runs a transaction again after a conflict before
/// it gives up and returns the conflict.
pub const MAX_REPLAYS: u32 = 1000;

/// An open database. Cheap to clone (`Arc` inside); share it between threads.
#[derive(Clone)]
pub struct Database {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Database")
            .field("path", &self.shared.pager.path())
            .field("journal_mode", &self.journal_mode())
            .finish()
    }
}

impl Database {
    /// Open or create the database at `path`. Runs recovery if the last session crashed.
    /// Fails with `Error::Locked` while another read-write handle (in this process or
    /// another) has the file open; clone a `Database` to share it instead.
    pub fn open(path: impl AsRef<Path>, config: Config) -> Result<Database> {
        Database::open_as(path.as_ref(), config, false)
    }

    fn open_as(path: &Path, config: Config, ephemeral: bool) -> Result<Database> {
        let (config, overlay, undo, pager_cfg) = if config.read_only {
            let overlay = Arc::new(OverlayVfs::new(config.vfs.clone()));
            // The overlay lives in memory: O_DIRECT has nothing to bypass there.
            let mut c = config.vfs(overlay.clone()).create(false);
            c.journal.direct_writes = crate::journal::DirectWrites::Off;
            (c.clone(), Some(overlay), None, c)
        } else {
            // The pager's files go through the recorder a transaction across databases
            // needs (`txn::multi`); the handle keeps the configuration it was given.
            let undo = Arc::new(UndoVfs::new(config.vfs.clone()));
            let pager_cfg = config.clone().vfs(undo.clone());
            (config, None, Some(undo), pager_cfg)
        };
        let pager = Pager::open(path, &pager_cfg, crate::tree::create)?;
        Ok(Database {
            shared: Arc::new(Shared::new(pager, config, overlay, undo, ephemeral)),
        })
    }

    /// A new, empty database in memory (SQLite's temp databases, `:memory:` and
    /// ephemeral tables): on its own `vfs::MemVfs` (no crash model, syncs cost nothing),
    /// journal mode `off` unless `config` names one, no lock, nothing to recover; it
    /// leaves no file and its content is gone when the last handle is dropped. The
    /// config's `vfs`, `create` and `read_only` are ignored.
    pub fn open_memory(config: Config) -> Result<Database> {
        let mode = config.journal_mode.unwrap_or(JournalMode::OFF);
        let mut c = config
            .vfs(Arc::new(crate::vfs::MemVfs::new()))
            .journal_mode(mode)
            .create(true)
            .read_only(false);
        // Memory has nothing for O_DIRECT to bypass.
        c.journal.direct_writes = crate::journal::DirectWrites::Off;
        Database::open_as(Path::new("/memory.db"), c, true)
    }

    /// Open an existing database without writing anything (`Config::read_only`): what
    /// `inpage check` and `inpage inspect` use. `recovery_report` then says what recovery
    /// *would* do; `changed_by_recovery` which files it would change.
    pub fn open_read_only(path: impl AsRef<Path>, config: Config) -> Result<Database> {
        Database::open(path, config.read_only(true))
    }

    /// Whether this handle was opened read-only.
    pub fn is_read_only(&self) -> bool {
        self.shared.config.read_only
    }

    /// Read-only handles: the files recovery changed in its private overlay, i.e. the
    /// ones a read-write open would have written. Empty for read-write handles.
    pub fn changed_by_recovery(&self) -> Vec<std::path::PathBuf> {
        self.shared
            .overlay
            .as_ref()
            .map_or_else(Vec::new, |o| o.changed_paths())
    }

    fn refuse_read_only(&self, op: &'static str) -> Result<()> {
        if self.is_read_only() {
            return Err(Error::ReadOnly {
                path: self.path().to_path_buf(),
                op,
            });
        }
        Ok(())
    }

    /// Start a write transaction: under `Concurrency::Serial` waiting for the current
    /// one to finish, under `Concurrency::Occ` at once (its commit may then fail with
    /// `Error::Conflict`; see [`Database::write`]).
    pub fn begin_write(&self) -> Result<WriteTxn> {
        self.refuse_read_only("write transaction")?;
        self.shared.begin_write(true)
    }

    /// Start the write transaction, or fail with `Error::Busy` if one is active
    /// (`Concurrency::Serial`; under `Occ` the same as `begin_write`).
    pub fn try_begin_write(&self) -> Result<WriteTxn> {
        self.refuse_read_only("write transaction")?;
        self.shared.begin_write(false)
    }

    /// Start a read transaction on the latest committed state. Never blocks on the writer.
    pub fn begin_read(&self) -> Result<ReadTxn> {
        ReadTxn::new(self.shared.clone())
    }

    /// Run `f` in a write transaction and commit it; if `f` or the commit fails with
    /// `Error::Conflict` (only with concurrent writers: `Concurrency::Occ`, `TwoVto`),
    /// run `f` again in a new transaction, up to [`MAX_REPLAYS`] times (then the conflict is returned). `f` must
    /// therefore be safe to run more than once: everything it decides should come from
    /// what it reads in the transaction. Any other error from `f` rolls back and is
    /// returned as is.
    ///
    /// Under `Concurrency::TwoVto { forced_sleep: true }` (AFUW) a replay first waits
    /// until every transaction older than it has ended, so it runs as the oldest and
    /// cannot fail again: at most one replay per call. Without the forced sleep a replay
    /// backs off briefly (10 µs, doubling up to 1.28 ms) and runs again.
    pub fn write<T>(&self, f: impl FnMut(&mut WriteTxn) -> Result<T>) -> Result<T> {
        self.write_counted(f).map(|(v, _)| v)
    }

    /// [`Database::write`], also saying how many times `f` ran again after a conflict.
    pub fn write_counted<T>(
        &self,
        mut f: impl FnMut(&mut WriteTxn) -> Result<T>,
    ) -> Result<(T, u32)> {
        self.refuse_read_only("write transaction")?;
        let mut replays = 0;
        // TwoVto with the forced sleep: the timestamp a replay queued with.
        let mut queued: Option<u64> = None;
        loop {
            let mut w = match queued.take() {
                Some(ts) => {
                    let vto = self.shared.vto.as_ref().expect("queued under TwoVto");
                    if let Err(e) = vto.wait_oldest_drained(ts) {
                        vto.forget(ts);
                        return Err(e);
                    }
                    self.shared.begin_concurrent(Some(ts))?
                }
                None => self.begin_write()?,
            };
            let r = match f(&mut w) {
                Ok(v) => w.commit().map(|()| v),
                Err(e) => {
                    drop(w);
                    Err(e)
                }
            };
            match r {
                Err(Error::Conflict { .. }) if replays < MAX_REPLAYS => {
                    replays += 1;
                    if let Some(g) = self.shared.group.as_ref() {
                        // A commit it met may still be queued for a flush, invisible
                        // to a new snapshot: running again before it is durable would
                        // meet it again.
                        g.wait_flushed();
                    }
                    match &self.shared.vto {
                        Some(vto) if vto.forced_sleep => queued = Some(vto.draw()),
                        Some(_) => {
                            // The no-sleep ablation (plain first-updater-wins): a loser
                            // that ran again at once would meet the same lock holder,
                            // which waits for older transactions to commit; back off
                            // (10 µs doubling to 1.28 ms) so it can.
                            let us = 10u64 << replays.min(8);
                            std::thread::sleep(std::time::Duration::from_micros(us));
                        }
                        None => {}
                    }
                }
                r => return r.map(|v| (v, replays)),
            }
        }
    }

    /// `Error::Conflict`s write transactions met since this database was opened (always
    /// 0 under `Concurrency::Serial`).
    pub fn conflicts(&self) -> u64 {
        self.shared.occ.as_ref().map_or(0, |o| o.conflicts())
    }

    #[cfg(test)]
    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// Group commit since this database was opened: flushes, the write transactions
    /// they committed, and the largest group. Concurrent writers: their group commit
    /// (`Config::group_commit`). Serial: the journal's, for a mode that shares flushes
    /// between writers (`waldio-gc`: the syncs waiting commits made, not a checkpoint's);
    /// all 0 otherwise.
    pub fn group_stats(&self) -> crate::GroupStats {
        match &self.shared.group {
            Some(g) => g.stats(),
            None => self.shared.pager.journal_group_stats(),
        }
    }

    /// Auto-commit insert into an existing tree.
    pub fn insert<'k>(
        &self,
        tree: &str,
        key: impl Into<Key<'k>>,
        value: &[u8],
    ) -> Result<Option<Vec<u8>>> {
        let key = key.into();
        self.write(|w| {
            let t = w.open_tree(tree)?;
            w.insert(&t, key, value)
        })
    }

    /// Auto-commit remove from an existing tree.
    pub fn remove<'k>(&self, tree: &str, key: impl Into<Key<'k>>) -> Result<Option<Vec<u8>>> {
        let key = key.into();
        self.write(|w| {
            let t = w.open_tree(tree)?;
            w.remove(&t, key)
        })
    }

    /// Point read on the latest committed state.
    pub fn get<'k>(&self, tree: &str, key: impl Into<Key<'k>>) -> Result<Option<Vec<u8>>> {
        let r = self.begin_read()?;
        let t = r.open_tree(tree)?;
        r.get(&t, key)
    }

    /// Move logged pages into the database file (WAL); no-op in other modes.
    pub fn checkpoint(&self) -> Result<()> {
        self.refuse_read_only("checkpoint")?;
        let w = self.begin_write()?;
        let r = self.shared.pager.checkpoint();
        w.rollback()?;
        r
    }

    /// Change `Config::journal_size_limit` while open: the size a log (or a persisted
    /// rollback journal) is cut back to when it is next reset (None: never cut). For
    /// every handle of the file in this process, as `PRAGMA journal_size_limit` does
    /// for its connection.
    pub fn set_journal_size_limit(&self, bytes: Option<u64>) {
        self.shared.pager.limits().set_size_limit(bytes);
    }

    /// Change `Config::wal_autocheckpoint` while open: after how many log frames a
    /// commit checkpoints (0: only on request), as `PRAGMA wal_autocheckpoint` does.
    pub fn set_wal_autocheckpoint(&self, frames: u32) {
        self.shared.pager.limits().set_autocheckpoint(frames);
    }

    /// [`Database::checkpoint`], or `Error::Busy` at once if a write transaction is
    /// active (instead of waiting for it).
    pub fn try_checkpoint(&self) -> Result<()> {
        self.refuse_read_only("checkpoint")?;
        let w = self.try_begin_write()?;
        let r = self.shared.pager.checkpoint();
        w.rollback()?;
        r
    }

    /// [`Database::try_checkpoint`], then the log's file cut to zero bytes, as
    /// `PRAGMA wal_checkpoint(TRUNCATE)` does (`wal` and the other modes whose log is a
    /// file of its own; the others only checkpoint).
    pub fn try_checkpoint_truncating(&self) -> Result<()> {
        self.refuse_read_only("checkpoint")?;
        let w = self.try_begin_write()?;
        let r = self.shared.pager.checkpoint_truncating();
        w.rollback()?;
        r
    }

    /// Close cleanly, reporting errors (WAL: final checkpoint). Fails if transactions or
    /// clones of this handle are still alive.
    pub fn close(self) -> Result<()> {
        let n = Arc::strong_count(&self.shared);
        if n > 1 {
            return Err(Error::InvalidArgument(format!(
                "cannot close: {} other handles or transactions are still open",
                n - 1
            )));
        }
        self.shared.close()
    }

    pub fn path(&self) -> &Path {
        self.shared.pager.path()
    }
    pub fn journal_mode(&self) -> JournalMode {
        self.shared.pager.journal_mode()
    }
    /// Whether this handle's page writes bypass the page cache (`O_DIRECT`): DHL modes with
    /// `DirectWrites::Auto` (the default) on a file system that accepts it, or `On`.
    pub fn direct_writes(&self) -> bool {
        self.shared.pager.direct_writes()
    }
    pub fn page_size(&self) -> usize {
        self.shared.pager.page_size()
    }
    /// The committed file header.
    pub fn header(&self) -> Header {
        self.shared.pager.header()
    }
    /// The id of the last committed write transaction.
    pub fn fcc(&self) -> u64 {
        self.shared.pager.header().fcc
    }
    /// What recovery did when this database was opened.
    pub fn recovery_report(&self) -> &RecoveryReport {
        self.shared.pager.recovery()
    }
    /// Frames currently in the write-ahead log (0 outside WAL mode).
    pub fn log_frames(&self) -> u64 {
        self.shared.pager.log_frames()
    }
    /// The id of the last commit that survives even the loss of the `nvlog` region (the
    /// flusher has synced it into the file); commits after it survive a process crash,
    /// and a power cut only if the region is on persistent memory. None for modes
    /// without a region (`Capabilities::region_backed`).
    pub fn durable_tid(&self) -> Option<u64> {
        self.shared.pager.durable_tid()
    }
    pub fn cache_stats(&self) -> CacheStats {
        self.shared.pager.cache_stats()
    }
    /// The settings this database was opened with.
    pub fn config(&self) -> &Config {
        &self.shared.config
    }
}
