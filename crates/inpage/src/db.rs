//! `Database`: the handle users open, and the auto-commit conveniences.
//!
//! Invariants: under `Concurrency::Serial` (the default) the writer flag admits one
//! `WriteTxn` at a time (`begin_write` blocks, `try_begin_write` fails with `Busy`); under
//! `Concurrency::Occ` write transactions run at once and a commit may fail with
//! `Conflict`, which `write` (and the auto-commit conveniences) answer by running the
//! transaction again. Closing runs the journal's clean shutdown once (explicitly via
//! `close`, else when the last handle or transaction is dropped).
//!
//! Several handles on one file — in other processes, or in this one — take turns
//! (`procs`): a transaction holds a read or the write turn on the file, and a handle whose
//! picture of the file another handle's commit made stale opens it again before its next
//! transaction starts (`Reload`: a read-only copy under a read turn, the real state under
//! the write turn). The state transactions start from is therefore replaced only while no
//! transaction of this handle runs, and a transaction keeps the `Shared` it started on.
//! Clone the `Database` to share it between threads (one handle, one picture). A read-only
//! open (`Config::read_only`) takes no turn and never writes: its files are opened
//! read-only and recovery runs in an in-memory overlay (`vfs::OverlayVfs`), so it can
//! look at a database in use.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use crate::config::Config;
use crate::error::{Error, Result};
use crate::format::header::Header;
use crate::journal::{Gate, JournalMode, RecoveryReport};
use crate::pager::{CacheStats, Pager};
use crate::procs::{can_share, Held, NoReload, Procs, Reload, ShareGate, Turn};
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
    h: Arc<Handle>,
}

/// What every clone of a `Database` shares: the current state of the file, and how to
/// open it again when another process changed it.
struct Handle {
    /// The file as this handle knows it; replaced (never while a transaction of this
    /// handle runs: the turn says so) when another process changed the file.
    current: RwLock<Arc<Shared>>,
    /// A file other processes may open too (None: in memory, or read-only).
    procs: Option<Arc<Procs>>,
    path: PathBuf,
    /// The settings this handle was opened with.
    config: Config,
    /// What recovery did when the handle opened the file.
    recovery: RecoveryReport,
    /// The pager's configuration, to open it again (`reload`), with the limits changed
    /// while open.
    pager_cfg: Mutex<Config>,
    /// How many times another process's work made this handle open the file again, and
    /// how many commits of theirs it read in instead (`Database::followed`).
    reloads: AtomicU64,
    absorbed: AtomicU64,
    /// States a reload replaced, dropped once the turn it ran under is taken
    /// (`Database::turn_handing_over`): dropping one stops its journal's flusher thread,
    /// which may be waiting for the lock the reload runs under.
    retired: Mutex<Vec<Arc<Shared>>>,
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Database")
            .field("path", &self.h.path)
            .field("journal_mode", &self.journal_mode())
            .finish()
    }
}

/// The gate as the journal sees it.
fn gate_of(gate: &Option<Arc<ShareGate>>) -> Option<Arc<dyn Gate>> {
    gate.clone().map(|g| g as Arc<dyn Gate>)
}

impl Reload for Database {
    fn is_copy(&self) -> bool {
        self.current().overlay.is_some()
    }

    /// Open the file again (no transaction of this handle runs: the caller's turn was
    /// taken from idle): another process changed it, or a writer needs the real state
    /// where a read-only copy stands.
    fn reload(&self, under: Held) -> Result<bool> {
        let old = self.current();
        // An inherited handle must not even read the file on its own behalf.
        old.pager.not_forked()?;
        let mut base = self.lock_limits().clone();
        // Others have the file open: their last commit is the log's end for this picture.
        if let Some(p) = &self.h.procs {
            base.journal.replay_until = p.trusted_end()?;
        }
        let (pager, config, overlay, gate, wrote) = if under == Held::Append {
            // Beside other processes' readers and their appends: the file as it is, its
            // logs replayed into memory (`JournalConfig::attach`), or `Busy` where
            // recovery must write (the caller then takes the whole file).
            let gate = self.h.procs.clone().map(ShareGate::new);
            let mut c = base.clone();
            c.journal.attach = true;
            let pager = Pager::open(&self.h.path, &c, crate::tree::create, gate_of(&gate))?;
            (pager, self.h.config.clone(), None, gate, false)
        } else if under == Held::Write {
            let gate = self.h.procs.clone().map(ShareGate::new);
            let pager = Pager::open(&self.h.path, &base, crate::tree::create, gate_of(&gate))?;
            // Anything recovery did may change what other processes know, and is made
            // durable before another process may write (`Journal::settle_recovery`).
            pager.settle_recovery()?;
            let wrote = !pager.recovery().is_clean();
            (pager, self.h.config.clone(), None, gate, wrote)
        } else {
            // Under a read turn nothing may be written: recovery, if the file needs any
            // (a process died in a commit), runs in memory until a writer does it.
            let overlay = Arc::new(OverlayVfs::new(self.h.config.vfs.clone()));
            let mut c = base.vfs(overlay.clone()).create(false).read_only(true);
            c.journal.direct_writes = crate::journal::DirectWrites::Off;
            // A copy never commits, so it never flushes: no flusher thread (the commits
            // it follows, `Reload::catch_up`, are flushed by the process that has them
            // for real).
            if old
                .pager
                .journal_mode()
                .options()
                .contains(&crate::journal::JournalOption::NvlogFlush)
            {
                c.journal.nvlog_flush = crate::journal::NvlogFlush::Inline;
            }
            let pager = Pager::open(&self.h.path, &c, crate::tree::create, None)?;
            (pager, c, Some(overlay), None, false)
        };
        let new = Arc::new(Shared::new(
            pager,
            config,
            overlay,
            old.undo.clone(),
            false,
            self.h.procs.clone(),
            gate,
        ));
        old.supersede();
        *self.h.current.write().unwrap_or_else(|e| e.into_inner()) = new;
        self.h.reloads.fetch_add(1, Ordering::Relaxed);
        self.h
            .retired
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(old);
        Ok(wrote)
    }

    fn position(&self) -> Option<u64> {
        let cur = self.current();
        let appends = cur
            .pager
            .journal_mode()
            .capabilities()
            .appends_beside_readers;
        appends.then(|| cur.pager.header().fcc)
    }

    /// The commits another process appended, read into the state transactions start
    /// from (it stays the same state: transactions running on it keep their snapshots).
    fn catch_up(&self, end: u64) -> Result<u64> {
        let pager = &self.current().pager;
        let from = pager.header().fcc;
        let at = pager.absorb(end)?;
        self.h.absorbed.fetch_add(at - from, Ordering::Relaxed);
        Ok(at)
    }
}

impl Database {
    /// Open or create the database at `path`. Runs recovery if the last session crashed.
    /// Other processes (and other handles in this one) may have the file open too: they
    /// take turns, each transaction waiting up to `Config::busy_timeout` for another
    /// process's (`Error::Busy` after that). A mode whose acknowledged commits other
    /// processes could not find (`nvlog`: a region named after the path as this process
    /// spells it; `waldio-gs`: commits acknowledged from process memory) keeps the file for
    /// the handle's life; opening it elsewhere then fails with `Error::Locked` once the
    /// busy timeout has passed. Clone a `Database` to share it between threads.
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
        let procs = if config.read_only || ephemeral || !config.vfs.handles_take_turns() {
            None
        } else {
            Some(Self::join(path, &config)?)
        };
        // Opening (recovery, laying out a new file) writes: under the write turn.
        let turn = match &procs {
            Some(p) => Some(
                p.enter(
                    Held::Write,
                    config.busy_timeout,
                    &NoReload { refuse: false },
                )
                .map_err(|e| match e {
                    Error::Busy => Error::Locked {
                        path: path.to_path_buf(),
                    },
                    e => e,
                })?,
            ),
            None => None,
        };
        let gate = procs.clone().map(ShareGate::new);
        let mut open_cfg = pager_cfg.clone();
        if let Some(p) = &procs {
            // Others have the file open: their last commit is the log's end for this
            // picture (`Procs::trusted_end`).
            open_cfg.journal.replay_until = p.trusted_end()?;
        }
        let pager = Pager::open(path, &open_cfg, crate::tree::create, gate_of(&gate))?;
        if let Some(p) = &procs {
            // Another process may write as soon as the turn goes: what recovery did is
            // made durable first (`Journal::settle_recovery`).
            pager.settle_recovery()?;
            let appends = pager.journal_mode().capabilities().appends_beside_readers;
            p.loaded(appends.then(|| pager.header().fcc))?;
        }
        let mode = pager.journal_mode();
        let recovery = pager.recovery().clone();
        let shared = Arc::new(Shared::new(
            pager,
            config.clone(),
            overlay,
            undo,
            ephemeral,
            procs.clone(),
            gate,
        ));
        // A journal that cannot share keeps the turn it opened under, as long as its
        // state lives (a transaction may outlive the handle).
        if let Some(t) = turn.filter(|_| !can_share(mode)) {
            shared.pin(t);
        }
        Ok(Database {
            h: Arc::new(Handle {
                current: RwLock::new(shared),
                procs,
                path: path.to_path_buf(),
                config,
                recovery,
                pager_cfg: Mutex::new(pager_cfg),
                reloads: AtomicU64::new(0),
                absorbed: AtomicU64::new(0),
                retired: Mutex::new(Vec::new()),
            }),
        })
    }

    /// Join the processes that have the file open (`procs`): the file is opened (created
    /// if asked) for its locks only.
    fn join(path: &Path, config: &Config) -> Result<Arc<Procs>> {
        // Refused settings touch nothing, not even the file (`Pager::open` checks again).
        config.validate()?;
        let locks = Pager::open_file(path, config)?;
        Procs::open(
            &config.vfs,
            path,
            locks,
            config.busy_timeout,
            config.flush_wait,
            config.journal.mutant(),
        )
    }

    /// The state transactions start from now.
    fn current(&self) -> Arc<Shared> {
        self.h
            .current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// A turn of kind `want` on the file (None where no other process can open it) and
    /// the state to run under it: opened again first if another process changed the file.
    fn turn(&self, want: Held, wait: Duration) -> Result<(Option<Turn>, Arc<Shared>)> {
        self.turn_handing_over(want, wait, 0)
    }

    /// [`Database::turn`] for a caller ending `handing_over` read transactions of this
    /// handle once it has it (`Procs::enter_handing_over`).
    fn turn_handing_over(
        &self,
        want: Held,
        wait: Duration,
        handing_over: usize,
    ) -> Result<(Option<Turn>, Arc<Shared>)> {
        let Some(p) = &self.h.procs else {
            return Ok((None, self.current()));
        };
        let t = p.enter_handing_over(want, wait, self, handing_over);
        // Outside the turn's lock (`Handle::retired`).
        let retired =
            std::mem::take(&mut *self.h.retired.lock().unwrap_or_else(|e| e.into_inner()));
        drop(retired);
        Ok((Some(t?), self.current()))
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

    /// How this handle followed other processes' commits so far: the times it opened the
    /// file again (`procs`: a stale picture), and the commits it read in from their log
    /// instead (`Capabilities::appends_beside_readers`). For tests and benchmarks.
    #[doc(hidden)]
    pub fn followed(&self) -> (u64, u64) {
        (
            self.h.reloads.load(Ordering::Relaxed),
            self.h.absorbed.load(Ordering::Relaxed),
        )
    }

    /// Whether this handle was opened read-only.
    pub fn is_read_only(&self) -> bool {
        self.h.config.read_only
    }

    /// Read-only handles: the files recovery changed in its private overlay, i.e. the
    /// ones a read-write open would have written. Empty for read-write handles.
    pub fn changed_by_recovery(&self) -> Vec<std::path::PathBuf> {
        self.current()
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
        self.begin_write_waiting(true)
    }

    /// The write turn (waiting for it if `wait`), then the write transaction.
    fn begin_write_waiting(&self, wait: bool) -> Result<WriteTxn> {
        self.start_write(self.turn_wait(wait), wait, 0)
    }

    /// The write turn, waiting up to `turn_wait` for other processes', then the write
    /// transaction, waiting for this handle's writer if `flag_wait`; `handing_over` read
    /// transactions of this handle end once it has started.
    fn start_write(
        &self,
        turn_wait: Duration,
        flag_wait: bool,
        handing_over: usize,
    ) -> Result<WriteTxn> {
        // A mode whose commits append to a log other processes read takes the append
        // turn: their readers go on beside it.
        let kind = match self.journal_mode().capabilities().appends_beside_readers {
            true => Held::Append,
            false => Held::Write,
        };
        let (turn, shared) = self.turn_handing_over(kind, turn_wait, handing_over)?;
        let mut w = shared.begin_write(flag_wait)?;
        w.set_turn(turn);
        Ok(w)
    }

    /// How long to wait for another process's turn: the busy timeout, or not at all.
    fn turn_wait(&self, wait: bool) -> Duration {
        if wait {
            self.h.config.busy_timeout
        } else {
            Duration::ZERO
        }
    }

    /// Start the write transaction without waiting for another write transaction of this
    /// handle (`Error::Busy` if one is active), waiting up to `wait` for another process's
    /// turn: what a SQL connection upgrading its read transaction does, with SQLite's busy
    /// timeout.
    pub fn begin_write_within(&self, wait: Duration) -> Result<WriteTxn> {
        self.refuse_read_only("write transaction")?;
        self.start_write(wait, false, 0)
    }

    /// [`Database::begin_write_within`] for a caller that holds one read transaction of
    /// this handle and ends it as soon as this returns (SQL's upgrade of a read
    /// transaction): that transaction does not keep the write transaction from starting
    /// where the handle's picture of the file is a read-only copy (`procs`), which it
    /// otherwise would (`Error::Busy`).
    pub fn begin_write_upgrading(&self, wait: Duration) -> Result<WriteTxn> {
        self.refuse_read_only("write transaction")?;
        self.start_write(wait, false, 1)
    }

    /// Start the write transaction, or fail with `Error::Busy` if one is active
    /// (`Concurrency::Serial`; under `Occ` the same as `begin_write`).
    pub fn try_begin_write(&self) -> Result<WriteTxn> {
        self.refuse_read_only("write transaction")?;
        self.begin_write_waiting(false)
    }

    /// Start a read transaction on the latest committed state. Never blocks on a writer
    /// of this handle; waits up to `Config::busy_timeout` while another process writes
    /// (`Error::Busy` after that).
    pub fn begin_read(&self) -> Result<ReadTxn> {
        self.begin_read_waiting(true)
    }

    /// [`Database::begin_read`], or `Error::Busy` at once while another process writes
    /// (SQLite's drop-in: its busy handler decides whether to wait).
    pub fn try_begin_read(&self) -> Result<ReadTxn> {
        self.begin_read_waiting(false)
    }

    fn begin_read_waiting(&self, wait: bool) -> Result<ReadTxn> {
        self.begin_read_within(self.turn_wait(wait))
    }

    /// [`Database::begin_read`], waiting up to `wait` (instead of `Config::busy_timeout`)
    /// while another process writes.
    pub fn begin_read_within(&self, wait: Duration) -> Result<ReadTxn> {
        let (turn, shared) = self.turn(Held::Read, wait)?;
        ReadTxn::new(shared, turn)
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
                    let (turn, shared) = self.turn(Held::Write, self.turn_wait(true))?;
                    let vto = shared.vto.as_ref().expect("queued under TwoVto");
                    if let Err(e) = vto.wait_oldest_drained(ts) {
                        vto.forget(ts);
                        return Err(e);
                    }
                    let mut w = shared.begin_concurrent(Some(ts))?;
                    w.set_turn(turn);
                    w
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
                    if let Some(g) = self.current().group.as_ref() {
                        // A commit it met may still be queued for a flush, invisible
                        // to a new snapshot: running again before it is durable would
                        // meet it again.
                        g.wait_flushed();
                    }
                    match &self.current().vto {
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
        self.current().occ.as_ref().map_or(0, |o| o.conflicts())
    }

    #[cfg(test)]
    pub(crate) fn shared(&self) -> Arc<Shared> {
        self.current()
    }

    /// Group commit since this database was opened: flushes, the write transactions
    /// they committed, and the largest group. Concurrent writers: their group commit
    /// (`Config::group_commit`). Serial: the journal's, for a mode that shares flushes
    /// between writers (`waldio-gc`: the syncs waiting commits made, not a checkpoint's);
    /// all 0 otherwise.
    pub fn group_stats(&self) -> crate::GroupStats {
        let shared = self.current();
        match &shared.group {
            Some(g) => g.stats(),
            None => shared.pager.journal_group_stats(),
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
        let r = w.shared().pager.checkpoint();
        w.rollback()?;
        r
    }

    /// Change `Config::journal_size_limit` while open: the size a log (or a persisted
    /// rollback journal) is cut back to when it is next reset (None: never cut). For
    /// every handle of the file in this process, as `PRAGMA journal_size_limit` does
    /// for its connection.
    pub fn set_journal_size_limit(&self, bytes: Option<u64>) {
        self.lock_limits().journal.journal_size_limit = bytes;
        self.current().pager.limits().set_size_limit(bytes);
    }

    /// Change `Config::wal_autocheckpoint` while open: after how many log frames a
    /// commit checkpoints (0: only on request), as `PRAGMA wal_autocheckpoint` does.
    pub fn set_wal_autocheckpoint(&self, frames: u32) {
        self.lock_limits().journal.wal_autocheckpoint = frames;
        self.current().pager.limits().set_autocheckpoint(frames);
    }

    /// The pager configuration a reload opens with, where the limits changed while open
    /// are kept.
    fn lock_limits(&self) -> std::sync::MutexGuard<'_, Config> {
        self.h.pager_cfg.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// [`Database::checkpoint`], or `Error::Busy` at once if a write transaction is
    /// active (instead of waiting for it).
    pub fn try_checkpoint(&self) -> Result<()> {
        self.refuse_read_only("checkpoint")?;
        let w = self.try_begin_write()?;
        let r = w.shared().pager.checkpoint();
        w.rollback()?;
        r
    }

    /// [`Database::try_checkpoint`], then the log's file cut to zero bytes, as
    /// `PRAGMA wal_checkpoint(TRUNCATE)` does (`wal` and the other modes whose log is a
    /// file of its own; the others only checkpoint).
    pub fn try_checkpoint_truncating(&self) -> Result<()> {
        self.refuse_read_only("checkpoint")?;
        let w = self.try_begin_write()?;
        let r = w.shared().pager.checkpoint_truncating();
        w.rollback()?;
        r
    }

    /// Close cleanly, reporting errors (WAL: final checkpoint). Fails if transactions or
    /// clones of this handle are still alive.
    pub fn close(self) -> Result<()> {
        let shared = self.current();
        // This handle, the clone just taken, and the handle's own reference.
        let n = (Arc::strong_count(&self.h) - 1) + (Arc::strong_count(&shared) - 2);
        if n > 0 {
            return Err(Error::InvalidArgument(format!(
                "cannot close: {n} other handles or transactions are still open"
            )));
        }
        shared.close()
    }

    pub fn path(&self) -> &Path {
        &self.h.path
    }
    pub fn journal_mode(&self) -> JournalMode {
        self.current().pager.journal_mode()
    }
    /// Whether this handle's page writes bypass the page cache (`O_DIRECT`): DHL modes with
    /// `DirectWrites::Auto` (the default) on a file system that accepts it, or `On`.
    pub fn direct_writes(&self) -> bool {
        self.current().pager.direct_writes()
    }
    pub fn page_size(&self) -> usize {
        self.current().pager.page_size()
    }
    /// The committed file header.
    pub fn header(&self) -> Header {
        self.current().pager.header()
    }
    /// The id of the last committed write transaction.
    pub fn fcc(&self) -> u64 {
        self.current().pager.header().fcc
    }
    /// What recovery did when this database was opened.
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.h.recovery
    }
    /// Frames currently in the write-ahead log (0 outside WAL mode).
    pub fn log_frames(&self) -> u64 {
        self.current().pager.log_frames()
    }
    /// The id of the last commit that survives even the loss of the `nvlog` region (the
    /// flusher has synced it into the file); commits after it survive a process crash,
    /// and a power cut only if the region is on persistent memory. None for modes
    /// without a region (`Capabilities::region_backed`).
    pub fn durable_tid(&self) -> Option<u64> {
        self.current().pager.durable_tid()
    }
    pub fn cache_stats(&self) -> CacheStats {
        self.current().pager.cache_stats()
    }
    /// The settings this database was opened with.
    pub fn config(&self) -> &Config {
        &self.h.config
    }
}
