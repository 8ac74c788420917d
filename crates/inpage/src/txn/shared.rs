//! The state one open database shares between its handle, its transactions and their
//! threads: the pager, the settings and the writer flag.
//!
//! Invariants: under `Concurrency::Serial` the writer flag admits one `WriteTxn` at a
//! time — it is set before a write transaction starts and cleared exactly once when it
//! commits, rolls back or is dropped (`release_writer`); under `Concurrency::Occ` the
//! flag is never taken and `occ` coordinates the writers (`txn/occ.rs`). Closing runs
//! the journal's clean shutdown once (`closed`), and never for a read-only handle, whose
//! shutdown could only change its private overlay, for a state another process's commit
//! made stale (`supersede`: the handle opened the file again), or while another process
//! still has the database open (`procs`: the last one out shuts it down).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use crate::config::{Concurrency, Config};
use crate::error::{Error, Result};
use crate::pager::Pager;
use crate::procs::{can_share, Held, NoReload, Procs, ShareGate, Turn};
use crate::vfs::undo::UndoVfs;
use crate::vfs::OverlayVfs;

use super::group::GroupCommit;
use super::occ::OccShared;
use super::vto::Vto;
use super::{free, WriteTxn};

pub(crate) struct Shared {
    /// Unique per open database in this process (`Tree` handles cache per database).
    pub(crate) id: u64,
    pub(crate) pager: Pager,
    pub(crate) config: Config,
    writer: Mutex<WriterFlag>,
    writer_cv: Condvar,
    closed: AtomicBool,
    /// `FreeSpace::TreeWalk`: whether the pager's free set has been computed.
    pub(super) free_known: AtomicBool,
    /// Read-only handles: the in-memory layer recovery wrote into.
    pub(crate) overlay: Option<Arc<OverlayVfs>>,
    /// `Concurrency::Occ` and `TwoVto`: what the concurrent writers share (allocation,
    /// the commit turn).
    pub(crate) occ: Option<OccShared>,
    /// `Concurrency::TwoVto`: timestamps and page locks.
    pub(crate) vto: Option<Vto>,
    /// `Concurrency::Occ` and `TwoVto`: the queue of validated commits (group commit).
    pub(crate) group: Option<GroupCommit>,
    /// Read-write handles: the VFS wrapper that records a commit's undo when it is part
    /// of a transaction across databases (`txn::multi`).
    pub(crate) undo: Option<Arc<UndoVfs>>,
    /// An in-memory database (`Database::open_memory`): nothing to make durable.
    pub(crate) ephemeral: bool,
    /// A file other processes may open too: the turns and the change counter.
    pub(crate) procs: Option<Arc<Procs>>,
    /// The write turn of the journal's background work, retired with this state.
    gate: Option<Arc<ShareGate>>,
    /// A journal that cannot share the file (`procs::can_share`) keeps the write turn
    /// until this state is gone: given back after the clean shutdown (fields drop after
    /// `Drop::drop`).
    pinned: std::sync::OnceLock<Turn>,
}

/// The writer flag and how many `begin_write` calls wait for it.
#[derive(Default)]
struct WriterFlag {
    busy: bool,
    waiting: usize,
}

impl Shared {
    pub(crate) fn new(
        pager: Pager,
        config: Config,
        overlay: Option<Arc<OverlayVfs>>,
        undo: Option<Arc<UndoVfs>>,
        ephemeral: bool,
        procs: Option<Arc<Procs>>,
        gate: Option<Arc<ShareGate>>,
    ) -> Shared {
        static NEXT_ID: AtomicU64 = AtomicU64::new(1);
        Shared {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            pager,
            writer: Mutex::new(WriterFlag::default()),
            writer_cv: Condvar::new(),
            closed: AtomicBool::new(false),
            free_known: AtomicBool::new(false),
            overlay,
            occ: (config.concurrency != Concurrency::Serial).then(OccShared::default),
            vto: match config.concurrency {
                Concurrency::TwoVto { forced_sleep } => Some(Vto::new(forced_sleep)),
                _ => None,
            },
            group: (config.concurrency != Concurrency::Serial).then(|| {
                GroupCommit::new(
                    config.group_commit.unwrap_or(true),
                    config.group_commit_delay,
                )
            }),
            config,
            undo,
            ephemeral,
            procs,
            gate,
            pinned: std::sync::OnceLock::new(),
        }
    }

    /// Keep `turn` (the write turn) as long as this state lives.
    pub(crate) fn pin(&self, turn: Turn) {
        let _ = self.pinned.set(turn);
    }

    /// This state is no longer the file's: the handle opened it again after another
    /// process changed it. Nothing is shut down when it goes.
    pub(crate) fn supersede(&self) {
        self.closed.store(true, Ordering::SeqCst);
        if let Some(g) = &self.gate {
            g.retire();
        }
    }

    /// Take the writer flag (waiting for it if `wait`, else `Error::Busy`) and start the
    /// write transaction; the flag is released again if starting fails.
    pub(crate) fn begin_write(self: &Arc<Self>, wait: bool) -> Result<WriteTxn> {
        // Before the writer flag: in a child of fork() it may be held by a transaction
        // of the parent's that will never end here.
        self.pager.not_forked()?;
        if self.occ.is_some() {
            let ts = self.vto.as_ref().map(|v| v.draw());
            return self.begin_concurrent(ts);
        }
        {
            let mut flag = self.writer.lock().unwrap_or_else(|e| e.into_inner());
            while flag.busy {
                if !wait {
                    return Err(Error::Busy);
                }
                flag.waiting += 1;
                flag = self.writer_cv.wait(flag).unwrap_or_else(|e| e.into_inner());
                flag.waiting -= 1;
            }
            flag.busy = true;
        }
        if let Err(e) = free::ensure_known(self) {
            self.release_writer();
            return Err(e);
        }
        WriteTxn::new(self.clone(), None)
    }

    /// A concurrent write transaction (`Occ`, or `TwoVto` with its drawn `ts`, which it
    /// owns from here on: it is given up if starting fails).
    pub(crate) fn begin_concurrent(self: &Arc<Self>, ts: Option<u64>) -> Result<WriteTxn> {
        let occ = self.occ.as_ref().expect("a concurrency setting");
        let known = {
            // No writer flag: the free set is found once, with no commit under way.
            let _turn = occ.commit_turn();
            free::ensure_known(self)
        };
        let r = known.and_then(|()| WriteTxn::new(self.clone(), ts));
        if let (Err(_), Some(ts), Some(v)) = (&r, ts, &self.vto) {
            v.forget(ts);
        }
        r
    }

    /// Release the writer flag; how many `begin_write` calls were waiting for it.
    pub(crate) fn release_writer(&self) -> usize {
        let mut flag = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        flag.busy = false;
        // A notify is a futex syscall even with nobody waiting: one per transaction of a
        // single writer, so only when a writer is waiting (counted under the lock).
        if flag.waiting > 0 {
            self.writer_cv.notify_one();
        }
        flag.waiting
    }

    pub(crate) fn close(&self) -> Result<()> {
        // Inherited through fork(): no clean shutdown of the parent's files from here.
        self.pager.not_forked()?;
        if self.closed.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        let free_known = self.free_known.load(Ordering::Acquire);
        let Some(procs) = &self.procs else {
            // Read-only: a clean shutdown (WAL checkpoint) would only change the overlay.
            return match self.config.read_only {
                true => Ok(()),
                false => self.pager.close(free_known),
            };
        };
        // Shut down only as the last process, under the write turn, and only from a
        // current picture of the file (a stale one refuses to reload here): otherwise the
        // next open recovers, as after a crash, which loses nothing.
        let _turn = match procs.enter(
            Held::Write,
            self.config.busy_timeout,
            &NoReload { refuse: true },
        ) {
            Ok(t) => t,
            // Another handle holds a turn, or wrote since this one looked: it is there to
            // shut down, or the next open recovers.
            Err(Error::Busy) => return Ok(()),
            // The side file could not be read or written (a failed disk): the shutdown
            // did not run, and a caller that asked for a clean close hears so.
            Err(e) => return Err(e),
        };
        // A journal that cannot share holds the file alone (it kept the write turn), and
        // may hold acknowledged commits nowhere but in this process: it always shuts down.
        let mode = self.pager.journal_mode();
        if can_share(mode) && !procs.is_last()? {
            // Others stay. A mode whose commits become durable only at a checkpoint
            // (`waldio-ns`, `wal` with `WalSync::Normal`) checkpoints before leaving,
            // as the last handle's shutdown would: the handle that closes last may be
            // working from a stale picture, which shuts nothing down, so the commits
            // made here would otherwise wait for a checkpoint nobody is sure to run.
            let durable_at_ack = mode.capabilities().durable_at_ack
                && self.config.journal.wal_sync != crate::journal::WalSync::Normal;
            if !durable_at_ack && !self.config.read_only {
                self.pager.checkpoint()?;
            }
            return Ok(());
        }
        // A read-only copy (`Database::reload`) has nothing to shut down. The side file
        // goes with the last handle (`Procs`'s drop).
        match self.config.read_only {
            true => Ok(()),
            false => self.pager.close(free_known),
        }
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        // Errors here can't be reported; the next open's recovery covers them.
        let _ = self.close();
    }
}
