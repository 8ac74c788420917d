//! Several processes on one database file: whose turn it is, and whether the file changed
//! since this process last looked.
//!
//! A `Database` handle (all its clones and transactions: one "process" here, whether or
//! not another handle of the same file lives in the same OS process) holds a *turn* on
//! the file while it has a transaction running, and nothing while it is idle, as a stock
//! SQLite connection holds its locks. A mode whose commits only append a record to a log
//! every process reads (`Capabilities::appends_beside_readers`: `redo`) writes under an
//! *append* turn, beside other handles' readers, as SQLite's WAL mode does; the others
//! write under the *whole file*, which keeps every other handle out, as SQLite's
//! rollback modes do:
//!
//! ```text
//!   from     to      when                                          locks
//!   None     Read    a transaction reads                           SHARED shared
//!   None     Append  a write transaction, appending mode           RESERVED, SHARED shared
//!   Read     Append    (this handle's readers go on)                 + RESERVED
//!   None,    Write   a write transaction in another mode; a flush,  RESERVED, PENDING and
//!   Read,            a checkpoint, a commit that writes more than   SHARED exclusively,
//!   Append           its record; a stale picture to open again      once others' readers
//!                                                                   are out
//!   Write    Append  the whole file given back, the appender on     SHARED shared,
//!                                                                   PENDING let go
//!   Write,   Read    the writers end, this handle's readers go on   SHARED shared, the
//!   Append                                                          rest let go
//!   any      None    nothing of this handle runs                    all let go
//! ```
//!
//! The turn is a set of byte-range locks (`File::lock_range`, open-file-description locks)
//! on the database file, at offsets no page reaches: `SHARED` is held shared by every
//! handle with a read turn and exclusively by the one with the whole file; `RESERVED`
//! names the one handle that is appending, or getting or holding the whole file;
//! `PENDING`, held exclusively while a writer waits for readers to leave, keeps new
//! readers out so it cannot starve (the writer also sets a word in the side file, and
//! only while it is set does a reader on its way in try `PENDING`: an uncontended read
//! turn is one lock call and one unlock, the words read from the mapped side file).
//!
//! Invariants, and why they hold:
//! - *No handle reads what another writes.* Every transaction holds a turn (`Turn`). The
//!   whole file excludes every other turn through `SHARED`, and everything that writes
//!   the files but an appended record — recovery at open and at a reload, a flush, a
//!   checkpoint, a clean close, a commit that writes more than its record (a full ring,
//!   a record too big for it, a new ring: `Gate::whole`) — runs under it, and so does a
//!   journal's background work (the `redo` flusher asks `ShareGate` for it before each
//!   batch, and a gate whose state was replaced by a reload never gives it again). An
//!   append turn writes only past the log's last record, which no other handle's
//!   picture holds or reads until it is told (`END`), and excludes other writers through
//!   `RESERVED`. A journal whose acknowledged commits other processes cannot find
//!   (`can_share`: `nvlog`, `waldio-gs`) keeps the whole file for its handle's life
//!   (`Shared::pin`), so a second handle waits for it, then fails with `Error::Locked`.
//! - *A handle never works from a stale picture of the file.* The change counter, eight
//!   bytes in `<db>-shm`, is bumped each time the whole file is taken, before anything
//!   is written (`announce_write`), so a holder that dies in the middle of its writes
//!   still tells the others. Taking a turn from idle reads it; a value other than the
//!   one this handle last saw or wrote means another handle may have changed the files,
//!   and the handle reloads (the layer above opens the file again, with the recovery an
//!   open runs: a read-only copy under a read turn, the real thing under the whole file)
//!   before its transaction sees anything. Nobody can take the whole file while a handle
//!   holds a turn, so its picture stays current but for appends. A handle alone with the
//!   file skips the bump: one that joins later reads the counter as it joins, and opens
//!   the file anew anyway.
//! - *A handle follows the others' appends before it reads or writes.* An appender
//!   publishes each commit it made durable in the side file (`END`, `appended`) before
//!   its commit returns; a handle taking a read turn, or an append turn (under
//!   `RESERVED`, so nobody appends meanwhile), reads the records between its picture's
//!   commit and `END` into it (`Reload::catch_up`, `journal::Appends`). Readers of the
//!   handle keep their snapshots: the records are taken in as the handle's own commits
//!   are. So an append turn always writes after the last acknowledged record, and never
//!   over one.
//! - *Every picture of the file agrees on its last commit.* A commit killed after its
//!   record but before `END` was never acknowledged. A picture opened again while
//!   another handle has the file open replays the log only up to `END`
//!   (`trusted_end`: that handle's side file is live, and `END` is published by every
//!   appender, alone or not, and set by every open), so no picture takes such a record
//!   in while another writes over it. With nobody else there, a crash may have left the
//!   side file, and the open replays the whole log (an unacknowledged commit may
//!   survive: nobody saw a later one).
//! - *Upgrades do not deadlock.* A handle holding a read turn that finds `RESERVED` taken
//!   fails at once with `Error::Busy` (the holder may wait for this handle's readers),
//!   as SQLite refuses such an upgrade without calling the busy handler. A holder of
//!   `RESERVED` waits only for readers, which never wait while they hold `SHARED`.
//! - *The side file exists only while the database is open* (`<db>-shm`). Each handle
//!   holds `PRESENT` shared from before it opens the side file until it has closed it; a
//!   closing handle that gets `PRESENT` exclusively is the last one and deletes the file
//!   while it holds it, so no handle ever holds the side file of a deleted path. A crash
//!   leaves it behind; any counter value in it is as good as another, and an `END` left
//!   there is corrected by the next holder of the whole file (`write_turn_taken`).
//! - *Waiting sleeps, and waiters get their turn.* Taking a turn retries after sleeps
//!   that start at `FIRST_SLEEP` and double up to `LONGEST_SLEEP` (turns are short: a
//!   read, a commit; a waiter gets in soon after the holder leaves, and one that waits
//!   long polls a few thousand times a second, no busy loop) until the caller's timeout
//!   (a timeout of 0 fails at the first refusal), holding `WAITING` shared meanwhile and
//!   letting go of the state lock between tries (the handle's other threads go on). A
//!   handle giving back the whole file while `WAITING` is held stays out for `YIELD`
//!   (many of a waiter's longest sleeps), so a busy writer cannot starve the others;
//!   giving back an append turn, only once a waiter has waited `APPEND_STARVES`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::journal::{Gate, GateAnswer, JournalMode, Mutant};
use crate::vfs::{File, LockKind, OpenOptions, Vfs};

/// Where the turn's bytes are: far past any page (the largest file is 2^32 pages of
/// 64 KiB), so a lock never covers data and no other tool's byte is taken.
const BASE: u64 = 1 << 62;
const RESERVED: u64 = BASE;
const PENDING: u64 = BASE + 1;
const SHARED: u64 = BASE + 2;
const PRESENT: u64 = BASE + 3;
/// Held shared by every handle waiting for a turn, so the one giving back the write turn
/// knows to let it in (`YIELD`). (The bytes are not the side file's words: those are at
/// `COUNTER` and `WRITER_WAITS` in `<db>-shm`.)
const WAITING: u64 = BASE + 4;
/// Where the change counter lives in the side file.
const COUNTER: u64 = 8;
/// Where the side file says a writer waits for readers to leave (non-zero: `PENDING` is
/// probably held exclusively; a reader checks the lock only then).
const WRITER_WAITS: u64 = 16;
/// Where the side file says since when someone may be waiting for a turn (the wall
/// clock in µs; 0: nobody): set by a waiter that finds it 0 before each sleep, cleared by
/// that waiter once it stops waiting and by a handle giving back a turn that finds
/// nobody holding `WAITING`, so an uncontended give-back costs no lock call. Advisory,
/// for fairness only: a waiter that died leaves it set, which costs one look.
const WAITERS: u64 = 32;
/// Where the side file says which commit a process last appended (`Held::Append`): a
/// picture at an older one reads the records up to it (`Reload::catch_up`), and a picture
/// opened while others have the file open replays no further (`trusted_end`). Written by
/// the append turn's holder after each commit it appended, and by a holder of the whole
/// file once its picture is current (alone or not: one that joins trusts it).
const END: u64 = 24;
/// The side file's size when it is mapped.
const SHM_LEN: usize = 4096;

/// The side file: mapped into memory where the file system allows it (reading the counter
/// costs no system call), else read and written as a file. Every process picks the same
/// way for one file: mapped, it is created whole at once (`Vfs::open_region`), so a file
/// shorter than its words is one that a process reads as a file.
enum Shm {
    Mapped(Arc<dyn crate::vfs::Region>),
    File(Arc<dyn File>),
}

impl Shm {
    fn open(vfs: &Arc<dyn Vfs>, path: &Path) -> Result<Shm> {
        match vfs.open_region(path, Some(SHM_LEN)) {
            Ok(r) if r.len() >= SHM_LEN => return Ok(Shm::Mapped(r)),
            _ => {}
        }
        vfs.open(
            path,
            OpenOptions {
                create: true,
                ..Default::default()
            },
        )
        .map(Shm::File)
        .map_err(Error::io("open", path))
    }

    /// The word at `at` (0 where the file is shorter: a new side file).
    fn get(&self, at: u64, path: &Path) -> Result<u64> {
        let mut b = [0u8; 8];
        match self {
            Shm::Mapped(r) => r
                .read(at as usize, &mut b)
                .map_err(Error::io("read", path))?,
            Shm::File(f) => {
                let n = f.read_at(&mut b, at).map_err(Error::io("read", path))?;
                if n < 8 {
                    return Ok(0);
                }
            }
        }
        Ok(u64::from_le_bytes(b))
    }

    fn set(&self, at: u64, v: u64, path: &Path) -> Result<()> {
        match self {
            Shm::Mapped(r) => r.write(at as usize, &v.to_le_bytes()),
            Shm::File(f) => f.write_at(&v.to_le_bytes(), at),
        }
        .map_err(Error::io("write", path))
    }
}

/// Why one try for a turn did not get it.
enum Attempt {
    /// Another handle has a conflicting turn: sleep and try again until the deadline.
    Later,
    /// Give up now.
    Fail(Error),
}

impl From<Error> for Attempt {
    fn from(e: Error) -> Attempt {
        Attempt::Fail(e)
    }
}

/// The kind of turn a handle holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Held {
    None,
    Read,
    /// `RESERVED` and `SHARED` shared: this handle's transactions commit by appending to
    /// a log other processes read (`Capabilities::appends_beside_readers`), beside their
    /// readers.
    Append,
    /// The whole file: `RESERVED`, `PENDING` and `SHARED` exclusively.
    Write,
}

/// What the handle holds, and what it knows.
#[derive(Debug)]
struct TurnState {
    held: Held,
    /// Turns handed out and not yet given back, by kind.
    readers: usize,
    appenders: usize,
    writers: usize,
    /// The commit this handle's picture is at, where its mode appends beside readers
    /// (compared with the side file's `END`).
    at: u64,
    /// The change counter as of this handle's last look or bump.
    seen: u64,
    /// Whether this handle holds `WAITING` (it sleeps between tries for a turn).
    waiting: bool,
    /// An upgrade to the write turn is under way: `RESERVED` is this handle's, and it waits
    /// (between tries) for `PENDING` and `SHARED`.
    pending_write: bool,
    /// This handle set the side file's writer-waiting word.
    says_waiting: bool,
    /// No other handle had the file open when this one last took the write turn (then
    /// nobody can be waiting when it gives it back but one that joined meanwhile, which
    /// the next turn's look finds).
    alone: bool,
    /// Others waited when this handle last gave back the write turn: no new turn before.
    yield_until: Option<Instant>,
    /// `alone` was looked at since the counter last moved (`attempt_append`).
    alone_known: bool,
    /// What this handle wrote into the side file's `WAITERS` word while it waits.
    wait_mark: Option<u64>,
}

impl TurnState {
    /// A turn is held exactly while some are handed out (or the handle holds one for its
    /// life, which counts as a writer) or an upgrade is under way (a thread sleeping
    /// between tries for the write turn), and a write turn only while a writer is out.
    fn check(&self) {
        debug_assert!(
            !self.pending_write || self.held == Held::Read,
            "an upgrade under way without the read turn: {self:?}"
        );
        debug_assert_eq!(
            self.held == Held::None,
            self.readers + self.appenders + self.writers == 0 && !self.pending_write,
            "turn {:?} with {} readers, {} appenders and {} writers out",
            self.held,
            self.readers,
            self.appenders,
            self.writers
        );
        debug_assert!(
            self.writers == 0 || self.held == Held::Write,
            "writers out without the write turn: {self:?}"
        );
        debug_assert!(
            self.appenders == 0 || matches!(self.held, Held::Append | Held::Write),
            "appenders out without `RESERVED`: {self:?}"
        );
    }
}

/// The handle's side of sharing a database file with other processes.
pub(crate) struct Procs {
    path: PathBuf,
    vfs: Arc<dyn Vfs>,
    /// The database file, opened once more for its locks only.
    locks: Arc<dyn File>,
    /// `<db>-shm`: the change counter and the writer-waiting word.
    shm: Shm,
    shm_path: PathBuf,
    st: Mutex<TurnState>,
    /// The `vfs::fork` generation it was opened in: an inherited copy gives nothing back.
    fork_gen: u64,
    /// The planted bug in force (`Mutant::None` outside test builds).
    mutant: Mutant,
    /// `Config::flush_wait`: how long `Gate::whole` waits for other processes' readers.
    flush_wait: Duration,
}

impl std::fmt::Debug for Procs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Procs")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// A turn handed out: given back when dropped (a transaction holds one).
pub(crate) struct Turn {
    procs: Arc<Procs>,
    kind: Held,
}

impl std::fmt::Debug for Turn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Turn({:?})", self.kind)
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        self.procs.give_back(self.kind);
    }
}

/// What the handle above does when its picture of the file is stale (`Procs::enter`).
pub(crate) trait Reload {
    /// Whether the state transactions start from is a read-only copy (loaded under a read
    /// turn), which a writer must replace with the real one.
    fn is_copy(&self) -> bool;
    /// Open the file again. `under` Read: as a read-only copy (recovery, if any, runs in
    /// memory; nothing is written). `under` Append: for real, beside other handles'
    /// readers and appends, writing nothing their pictures depend on; `Error::Busy` if
    /// the file needs recovery that writes. `under` Write: for real; returns whether
    /// recovery wrote anything.
    fn reload(&self, under: Held) -> Result<bool>;
    /// Whether `reload` can only refuse (`NoReload { refuse: true }`): then a stale
    /// picture fails the turn before anything is announced.
    fn refuses(&self) -> bool {
        false
    }
    /// The commit the picture is at, where the mode appends beside readers (else None).
    fn position(&self) -> Option<u64>;
    /// Read the commits other processes appended up to `end` into the picture
    /// (`Pager::absorb`); returns the commit it is at afterwards.
    fn catch_up(&self, end: u64) -> Result<u64>;
}

/// A `Reload` for a handle that has no picture to bring up to date (it is opening the
/// file), or may not load one (it is closing).
pub(crate) struct NoReload {
    /// Refuse (Busy) instead of carrying on with a stale picture.
    pub refuse: bool,
}

impl Reload for NoReload {
    fn is_copy(&self) -> bool {
        false
    }
    fn reload(&self, _under: Held) -> Result<bool> {
        if self.refuse {
            Err(Error::Busy)
        } else {
            Ok(false)
        }
    }
    fn refuses(&self) -> bool {
        self.refuse
    }
    fn position(&self) -> Option<u64> {
        None
    }
    /// An opening handle reads everything there is; a closing one or the journal's
    /// background work refuses (Busy) instead of working behind the file.
    fn catch_up(&self, end: u64) -> Result<u64> {
        if self.refuse {
            Err(Error::Busy)
        } else {
            Ok(end)
        }
    }
}

/// The write turn for one state's background work (`journal::Gate`): live until the
/// handle opens the file again (`ShareGate::retire`), never again after.
#[derive(Debug)]
pub(crate) struct ShareGate {
    procs: Arc<Procs>,
    live: AtomicBool,
}

impl ShareGate {
    pub(crate) fn new(procs: Arc<Procs>) -> Arc<ShareGate> {
        Arc::new(ShareGate {
            procs,
            live: AtomicBool::new(true),
        })
    }

    /// The state this gate belongs to is no longer the file's.
    pub(crate) fn retire(&self) {
        self.live.store(false, Ordering::SeqCst);
    }
}

impl Gate for ShareGate {
    fn try_write(&self) -> GateAnswer {
        if !self.live.load(Ordering::SeqCst) {
            return GateAnswer::Never;
        }
        // Where this handle's writer appends, the turn is an upgrade that keeps new
        // readers out while it waits (`PENDING`): a short wait then gets it between two
        // of their transactions, where none would find a moment with no reader in.
        let wait = if self.procs.state().held == Held::Append {
            GATE_WAIT
        } else {
            Duration::ZERO
        };
        // A stale picture is refused (Busy): the handle reloads at its next transaction,
        // which retires this gate.
        match self
            .procs
            .enter(Held::Write, wait, &NoReload { refuse: true })
        {
            // Looked at again with the turn held: a reload runs only from idle, so it
            // cannot retire the gate while this turn is out.
            Ok(t) if self.live.load(Ordering::SeqCst) => GateAnswer::Go(Box::new(t)),
            Ok(_) => GateAnswer::Never,
            Err(_) => GateAnswer::Later,
        }
    }

    fn whole(&self) -> Result<Box<dyn Send>> {
        if !self.live.load(Ordering::SeqCst) {
            return Err(Error::Busy);
        }
        // A read transaction held open longer in another process keeps a full ring from
        // being flushed: the commit fails, nothing written (`Config::flush_wait`).
        let t = self.procs.enter(
            Held::Write,
            self.procs.flush_wait,
            &NoReload { refuse: true },
        )?;
        Ok(Box::new(t))
    }

    fn alone(&self) -> bool {
        self.procs.state().alone
    }

    fn appended(&self, tid: u64) -> Result<()> {
        if !self.live.load(Ordering::SeqCst) {
            return Err(Error::Busy);
        }
        self.procs.appended(tid)
    }
}

/// Whether a mode's journal can take turns on a file with other processes
/// (`JournalMode::shares_between_processes`); its background work asks for the write
/// turn (`journal::Gate`). A handle of another mode keeps the write turn for its life.
pub(crate) fn can_share(mode: JournalMode) -> bool {
    mode.shares_between_processes()
}

/// The side file's path.
pub fn shm_path(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push("-shm");
    PathBuf::from(s)
}

/// How long a handle that gave back the write turn while others waited stays out before
/// it takes a turn again: many of a waiter's longest sleeps, so a waiter gets in
/// (fairness: a busy writer would otherwise take the turn again before any sleeping
/// waiter wakes), and long enough that a reader which had to open the file again
/// (`Reload`, milliseconds) reads for a while before the writer is back. Measured with a
/// writer process beside a reader process (`inpage bench multiprocess --lab ext4
/// --layouts 1w1r --contenders sql-redo`): staying out only until the waiters got in
/// made the writer 1.6× faster and the reader 23× slower; staying out 1 ms, the writer
/// 1.3× faster and the reader 13× slower.
const YIELD: Duration = Duration::from_millis(3);
/// A waiter's first sleep between tries for a turn; each next one is twice as long, up
/// to `LONGEST_SLEEP`.
const FIRST_SLEEP: Duration = Duration::from_micros(20);
const LONGEST_SLEEP: Duration = Duration::from_micros(250);
const _: () = assert!(YIELD.as_micros() >= 4 * LONGEST_SLEEP.as_micros());
/// How long a writer may have waited for an append turn before the holder steps aside
/// for it (`YIELD`) when it gives the turn back: many of the writers' turns, so two
/// writer processes mostly run back to back, and a waiter is not starved.
const APPEND_STARVES: Duration = Duration::from_millis(2);
/// How long the journal's background work waits for the whole file while its handle
/// appends (`ShareGate::try_write`): other processes' read transactions are short, and
/// the wait keeps new ones out.
const GATE_WAIT: Duration = Duration::from_millis(2);

/// The wall clock in µs (the `WAITERS` word: a time every process reads alike).
fn wall_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_micros() as u64)
        .max(1)
}

impl Procs {
    /// Join the processes that have `path` open: `locks` is the database file, opened by
    /// the caller (it exists). Waits up to `wait` for a closing handle to finish deleting
    /// the side file.
    pub(crate) fn open(
        vfs: &Arc<dyn Vfs>,
        path: &Path,
        locks: Arc<dyn File>,
        wait: Duration,
        flush_wait: Duration,
        mutant: Mutant,
    ) -> Result<Arc<Procs>> {
        let deadline = Instant::now() + wait;
        // Held exclusively only for an instant (a closing handle deleting the side file,
        // a writer looking whether it is alone).
        while !locks
            .lock_range(PRESENT, 1, Some(LockKind::Shared))
            .map_err(Error::io("lock", path))?
        {
            let now = Instant::now();
            if now >= deadline {
                return Err(Error::Locked {
                    path: path.to_path_buf(),
                });
            }
            std::thread::sleep(Duration::from_millis(1).min(deadline - now));
        }
        let shm_path = shm_path(path);
        let shm = Shm::open(vfs, &shm_path)?;
        let p = Procs {
            path: path.to_path_buf(),
            vfs: vfs.clone(),
            locks,
            shm,
            shm_path,
            st: Mutex::new(TurnState {
                held: Held::None,
                readers: 0,
                appenders: 0,
                writers: 0,
                at: 0,
                seen: 0,
                waiting: false,
                pending_write: false,
                says_waiting: false,
                alone: false,
                yield_until: None,
                alone_known: false,
                wait_mark: None,
            }),
            fork_gen: crate::vfs::fork::generation(),
            mutant,
            flush_wait,
        };
        let seen = p.counter()?;
        p.state().seen = seen;
        Ok(Arc::new(p))
    }

    fn state(&self) -> MutexGuard<'_, TurnState> {
        // Every change to the state is made after the lock calls it records succeeded: a
        // panic cannot leave it describing locks not held.
        self.st.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn lock(&self, at: u64, kind: Option<LockKind>) -> Result<bool> {
        self.locks
            .lock_range(at, 1, kind)
            .map_err(Error::io("lock", &self.path))
    }

    fn counter(&self) -> Result<u64> {
        self.shm.get(COUNTER, &self.shm_path)
    }

    /// Take a turn of kind `want` (Read or Write), waiting up to `wait`; `Error::Busy` if
    /// it cannot be had in time. A handle whose picture of the file is stale is brought
    /// up to date first (`Reload`): under a read turn with a read-only copy, under the
    /// write turn (a writer, or a handle whose picture is such a copy) for real.
    ///
    /// Each try takes no lock that waits; between tries the state lock is let go, so the
    /// handle's other threads start and end their transactions meanwhile (a thread
    /// waiting for another process never holds up this handle's readers).
    pub(crate) fn enter(
        self: &Arc<Self>,
        want: Held,
        wait: Duration,
        r: &dyn Reload,
    ) -> Result<Turn> {
        self.enter_handing_over(want, wait, r, 0)
    }

    /// [`Procs::enter`] for a caller that holds `handing_over` of this handle's read turns
    /// and ends those transactions as soon as this returns (a SQL connection upgrading its
    /// read transaction): they do not keep a writer from replacing a read-only copy,
    /// since they read nothing more.
    pub(crate) fn enter_handing_over(
        self: &Arc<Self>,
        want: Held,
        wait: Duration,
        r: &dyn Reload,
        handing_over: usize,
    ) -> Result<Turn> {
        debug_assert!(want != Held::None);
        let deadline = Instant::now() + wait;
        let mut first = true;
        let mut sleep = FIRST_SLEEP;
        loop {
            let mut st = self.state();
            if std::mem::take(&mut first) && st.held == Held::None {
                // This handle gave the write turn back while others waited: let them in.
                if let Some(until) = st.yield_until.take() {
                    let now = Instant::now();
                    if until > now {
                        drop(st);
                        std::thread::sleep(until - now);
                        st = self.state();
                    }
                }
            }
            let failed = match self.attempt(&mut st, want, r, handing_over) {
                Ok(()) => {
                    self.stop_waiting(&mut st);
                    match want {
                        Held::Write => st.writers += 1,
                        Held::Append => st.appenders += 1,
                        _ => st.readers += 1,
                    }
                    st.check();
                    return Ok(Turn {
                        procs: self.clone(),
                        kind: want,
                    });
                }
                Err(Attempt::Later) => {
                    let now = Instant::now();
                    if now < deadline {
                        // Advisory: failing to say so costs fairness, nothing else.
                        if self.shm.get(WAITERS, &self.shm_path).unwrap_or(1) == 0 {
                            let since = wall_us();
                            if self.shm.set(WAITERS, since, &self.shm_path).is_ok() {
                                st.wait_mark = Some(since);
                            }
                        }
                        if !st.waiting {
                            st.waiting =
                                self.lock(WAITING, Some(LockKind::Shared)).unwrap_or(false);
                        }
                        drop(st);
                        std::thread::sleep(sleep.min(deadline - now));
                        sleep = (sleep * 2).min(LONGEST_SLEEP);
                        continue;
                    }
                    Error::Busy
                }
                Err(Attempt::Fail(e)) => e,
            };
            self.settle_after_failure(&mut st);
            self.stop_waiting(&mut st);
            st.check();
            return Err(failed);
        }
    }

    /// One try for `want`, taking no lock that waits. Idle → a read turn (`SHARED`
    /// shared, passing through `PENDING`) and a look at the counter, reloading a read-only
    /// copy if it moved, and at `END`, reading the commits other processes appended since
    /// (`follow`); a writer then upgrades: `RESERVED` (one writer among the handles),
    /// `PENDING` (keeps new readers of other handles out while it waits), `SHARED`
    /// exclusively (once their readers are gone); under the write turn the counter is
    /// looked at again, bumped (`announce_write`) and the picture reloaded if it was
    /// stale or a copy. An append turn stops after `RESERVED` (`attempt_append`).
    fn attempt(
        &self,
        st: &mut TurnState,
        want: Held,
        r: &dyn Reload,
        handing_over: usize,
    ) -> Result<(), Attempt> {
        if want == Held::Append {
            return self.attempt_append(st, r, handing_over);
        }
        if st.held == Held::None {
            // Uncontended, the whole write turn in one call (`RESERVED`, `PENDING` and
            // `SHARED` are adjacent): a refused range lock takes none of its bytes.
            if want == Held::Write && self.lock_span(RESERVED, SHARED, LockKind::Exclusive)? {
                st.held = Held::Write;
                return self.write_turn_taken(st, r, false);
            }
            self.take_shared(st)?;
            if want == Held::Read {
                return self.look(st, r).map_err(Attempt::Fail);
            }
        }
        if want == Held::Read {
            // This handle's readers are in: nobody can have taken the whole file since,
            // but another process may have appended.
            if st.held == Held::Read {
                self.follow(st, r)?;
            }
            return Ok(());
        }
        if st.held == Held::Write {
            return Ok(());
        }
        // Held Read or Append, want Write.
        // Transactions of this handle that go on reading once the write turn is had.
        let mine = st.readers.saturating_sub(handing_over) + st.appenders + st.writers > 0;
        if !st.pending_write {
            if st.held == Held::Read {
                self.take_reserved(st, r, mine)?;
            }
            // (Held Append: `RESERVED` is this handle's already.)
            st.pending_write = true;
        }
        self.take_whole(st)?;
        st.held = Held::Write;
        self.write_turn_taken(st, r, mine)
    }

    /// Idle → `SHARED` shared, unless a writer waiting for readers to leave keeps new
    /// ones out with `PENDING` (looked at only when the side file says one waits: a word
    /// a dead writer left set finds the lock free).
    fn take_shared(&self, st: &mut TurnState) -> Result<(), Attempt> {
        if self.shm.get(WRITER_WAITS, &self.shm_path)? != 0 {
            if !self.lock(PENDING, Some(LockKind::Shared))? {
                return Err(Attempt::Later);
            }
            self.lock(PENDING, None)?;
        }
        if !self.lock(SHARED, Some(LockKind::Shared))? {
            return Err(Attempt::Later);
        }
        st.held = Held::Read;
        Ok(())
    }

    /// Held Read → `RESERVED` too (`pending_write` not yet set).
    fn take_reserved(&self, st: &mut TurnState, r: &dyn Reload, mine: bool) -> Result<(), Attempt> {
        if mine && r.is_copy() {
            // This handle's readers read a copy; the writer needs the real state,
            // which cannot be loaded under them.
            return Err(Attempt::Fail(Error::Busy));
        }
        if !self.lock(RESERVED, Some(LockKind::Exclusive))? {
            if mine {
                // The holder may wait for this handle's readers: waiting here could only
                // deadlock (SQLite refuses such an upgrade the same way, without calling
                // the busy handler).
                return Err(Attempt::Fail(Error::Busy));
            }
            // Taken from idle for this try: let go, so the holder can finish.
            self.release_all(st);
            return Err(Attempt::Later);
        }
        Ok(())
    }

    /// `RESERVED` held (`pending_write`) → `PENDING` and `SHARED` exclusively, once other
    /// handles' readers are gone (meanwhile the side file says a writer waits, so new
    /// ones look at `PENDING` and stay out).
    fn take_whole(&self, st: &mut TurnState) -> Result<(), Attempt> {
        debug_assert!(st.pending_write);
        if !self.lock(PENDING, Some(LockKind::Exclusive))? {
            return Err(Attempt::Later);
        }
        if !self.lock(SHARED, Some(LockKind::Exclusive))? {
            if !st.says_waiting {
                self.shm.set(WRITER_WAITS, 1, &self.shm_path)?;
                st.says_waiting = true;
            }
            return Err(Attempt::Later);
        }
        self.stop_saying_waiting(st);
        st.pending_write = false;
        Ok(())
    }

    /// One try for an append turn: `RESERVED` and `SHARED` shared, so other processes'
    /// readers go on. A picture the counter says is stale (or a read-only copy) is opened
    /// again for real under the whole file first, which is then given back down to the
    /// append turn; a current one reads what others appended since (`follow`: under
    /// `RESERVED`, nobody appends meanwhile).
    fn attempt_append(
        &self,
        st: &mut TurnState,
        r: &dyn Reload,
        handing_over: usize,
    ) -> Result<(), Attempt> {
        if matches!(st.held, Held::Append | Held::Write) {
            return Ok(());
        }
        let mine = st.readers.saturating_sub(handing_over) > 0;
        if !st.pending_write {
            if st.held == Held::None {
                if !self.lock(RESERVED, Some(LockKind::Exclusive))? {
                    return Err(Attempt::Later);
                }
                // Nobody takes the whole file without `RESERVED`: this cannot be refused.
                if !self.lock(SHARED, Some(LockKind::Shared))? {
                    self.lock(RESERVED, None)?;
                    return Err(Attempt::Later);
                }
                st.held = Held::Read;
            } else {
                self.take_reserved(st, r, mine)?;
            }
            st.pending_write = true;
            let now = self.counter()?;
            let stale = now != st.seen || r.is_copy();
            if stale && !mine {
                // Opened again beside the others (no bump: nothing they read changes), or
                // under the whole file where that is refused.
                match r.reload(Held::Append) {
                    Ok(_) => {
                        st.seen = now;
                        st.at = r.position().unwrap_or(0);
                        st.alone_known = false;
                    }
                    Err(Error::Busy) => {}
                    Err(e) => return Err(Attempt::Fail(e)),
                }
            }
            if self.counter()? == st.seen && !r.is_copy() {
                st.pending_write = false;
                st.held = Held::Append;
                // Whether others have the file open changes to "yes" only by a join,
                // and a joiner opens under the whole file and bumps the counter, which
                // this look would have found: the last look (a whole-file turn's) holds.
                if !st.alone_known {
                    st.alone = self.alone();
                    st.alone_known = true;
                }
                return self.follow(st, r);
            }
        }
        // Stale: open it again for real, under the whole file.
        self.take_whole(st)?;
        st.held = Held::Write;
        self.write_turn_taken(st, r, mine)?;
        self.to_append(st);
        Ok(())
    }

    /// A read turn from idle: a picture the counter says is stale is replaced by a
    /// read-only copy; a current one follows the appends since (`follow`).
    fn look(&self, st: &mut TurnState, r: &dyn Reload) -> Result<()> {
        let now = self.counter()?;
        if now != st.seen {
            // A copy writes nothing: the counter stays.
            r.reload(Held::Read)?;
            st.seen = now;
            st.at = r.position().unwrap_or(0);
            // Someone may have joined (a join moves the counter).
            st.alone_known = false;
        }
        self.follow(st, r).map_err(|a| match a {
            Attempt::Fail(e) => e,
            Attempt::Later => Error::Busy,
        })
    }

    /// Read the commits other processes appended since this picture's (`END` past
    /// `at`). One word of the mapped side file when there are none.
    fn follow(&self, st: &mut TurnState, r: &dyn Reload) -> Result<(), Attempt> {
        let end = self.shm.get(END, &self.shm_path)?;
        if end > st.at && self.mutant != Mutant::SkipCatchUp {
            st.at = r.catch_up(end)?;
        }
        Ok(())
    }

    /// Whole file → append turn: `SHARED` back to shared, `PENDING` let go.
    fn to_append(&self, st: &mut TurnState) {
        // A downgrade or an unlock cannot conflict (see `downgrade`).
        let _ = self.lock(SHARED, Some(LockKind::Shared));
        let _ = self.lock(PENDING, None);
        st.held = Held::Append;
    }

    /// This handle appended commit `tid` (under its append turn or the whole file), and
    /// it is durable: tell the others, unless there are none (`alone`, looked at when the
    /// turn was taken: one that joins later opens the file under the whole file, after
    /// this turn, and reads the commit there).
    pub(crate) fn appended(&self, tid: u64) -> Result<()> {
        let mut st = self.state();
        debug_assert!(
            matches!(st.held, Held::Append | Held::Write),
            "an append without the turn: {st:?}"
        );
        st.at = tid;
        // Also when alone: one that joins trusts it (`trusted_end`).
        self.shm.set(END, tid, &self.shm_path)
    }

    /// The handle's picture was just opened under the whole file (`Database::open`):
    /// it is at commit `at`, which the others learn, as after `write_turn_taken`.
    pub(crate) fn loaded(&self, at: Option<u64>) -> Result<()> {
        let mut st = self.state();
        st.at = at.unwrap_or(0);
        if let Some(at) = at.filter(|_| st.held == Held::Write) {
            self.shm.set(END, at, &self.shm_path)?;
        }
        Ok(())
    }

    /// The last commit appended, where another handle has the file open now: its side
    /// file is live, and every appender publishes each commit there (`END`) before the
    /// commit returns. A picture opened now replays the log no further: a record past it
    /// was never acknowledged (its writer died first), other pictures never take it in,
    /// and the next appender writes over it. None when this handle has the file alone:
    /// then the side file may be one a crash left, and every record in the log counts.
    /// The caller holds a turn, so nobody joins meanwhile (a joiner opens under the
    /// whole file).
    pub(crate) fn trusted_end(&self) -> Result<Option<u64>> {
        if self.alone() {
            return Ok(None);
        }
        self.shm.get(END, &self.shm_path).map(Some)
    }

    /// The write turn was just taken (`mine`: transactions of this handle go on beside
    /// it). Under it nobody else can move the counter; with readers of this handle
    /// running it cannot have moved since their turn began. The counter is bumped before
    /// the reload (its recovery writes too: a checkpoint, a log reset), so a kill in the
    /// middle of it sends the others to look again as well. A picture behind the others'
    /// appends reads them (or, for a caller that may not, is refused).
    fn write_turn_taken(
        &self,
        st: &mut TurnState,
        r: &dyn Reload,
        mine: bool,
    ) -> Result<(), Attempt> {
        let now = self.counter()?;
        let stale = now != st.seen || r.is_copy();
        debug_assert!(
            !(stale && mine),
            "a stale picture under running transactions"
        );
        let end = self.shm.get(END, &self.shm_path)?;
        if (stale || end > st.at) && r.refuses() {
            // Given up before anything is written, so nothing is announced: a bump here
            // would send every other handle to open the file again for a write that
            // never happens (a stale handle's close made the others stale, and then the
            // last one out shut nothing down).
            return Err(Attempt::Fail(Error::Busy));
        }
        st.seen = now;
        self.announce_write(st)?;
        if stale {
            r.reload(Held::Write)?;
            st.at = r.position().unwrap_or(0);
        }
        if end > st.at {
            st.at = r.catch_up(end)?;
        }
        if r.position().is_some() && end != st.at {
            // Current now: what `END` says from here on is this picture's word (a value
            // left by a session that crashed, or a count a reload found short of the
            // records there, is corrected).
            self.shm.set(END, st.at, &self.shm_path)?;
        }
        Ok(())
    }

    /// Lock the bytes `first..=last` in one call, without waiting.
    fn lock_span(&self, first: u64, last: u64, kind: LockKind) -> Result<bool> {
        self.locks
            .lock_range(first, last - first + 1, Some(kind))
            .map_err(Error::io("lock", &self.path))
    }

    /// After a failed `enter`: an upgrade under way is given up, and a turn nobody holds
    /// goes back (to Read where this handle's readers run, else entirely).
    fn settle_after_failure(&self, st: &mut TurnState) {
        self.stop_saying_waiting(st);
        if st.pending_write {
            let _ = self.lock(PENDING, None);
            // An append turn of this handle keeps `RESERVED` (an upgrade from it failed).
            if st.appenders == 0 {
                let _ = self.lock(RESERVED, None);
            }
            st.pending_write = false;
        }
        if st.writers == 0 && st.held == Held::Write {
            if st.appenders > 0 {
                self.to_append(st);
            } else if st.readers > 0 {
                self.downgrade(st);
            } else {
                self.release_all(st);
            }
        }
        if st.readers + st.appenders + st.writers == 0 && st.held != Held::None {
            self.release_all(st);
        }
    }

    /// Clear the side file's writer-waiting word this handle set (`attempt`).
    fn stop_saying_waiting(&self, st: &mut TurnState) {
        if st.says_waiting {
            // Advisory: a word left set only makes readers look at `PENDING`.
            let _ = self.shm.set(WRITER_WAITS, 0, &self.shm_path);
            st.says_waiting = false;
        }
    }

    fn stop_waiting(&self, st: &mut TurnState) {
        if let Some(mark) = st.wait_mark.take() {
            if self.shm.get(WAITERS, &self.shm_path).ok() == Some(mark) {
                let _ = self.shm.set(WAITERS, 0, &self.shm_path);
            }
        }
        if st.waiting {
            let _ = self.lock(WAITING, None);
            st.waiting = false;
        }
    }

    /// The write turn was just taken: bump the counter before anything is written, so a
    /// handle that dies in the middle of its writes (a SIGKILL in a commit) or right after
    /// a commit reached the disk still tells every other handle to look again (they can
    /// only look once this turn is given back, by its holder or by the kernel). Skipped
    /// when no other handle has the file open (`alone`).
    fn announce_write(&self, st: &mut TurnState) -> Result<()> {
        st.alone = self.alone();
        st.alone_known = true;
        if st.alone || self.mutant == Mutant::SkipWriteAnnounce {
            return Ok(());
        }
        self.bump(st)
    }

    /// Bump the change counter (the caller holds the write turn and is about to write).
    fn bump(&self, st: &mut TurnState) -> Result<()> {
        debug_assert_eq!(st.held, Held::Write);
        let next = self.counter()?.wrapping_add(1);
        self.shm.set(COUNTER, next, &self.shm_path)?;
        st.seen = next;
        Ok(())
    }

    /// Whether no other handle has the file open. Then nobody holds a picture of it to
    /// invalidate, and the bump is skipped: a handle that joins later reads the counter
    /// when it joins and opens the file anew under the write turn (it waits for
    /// `PRESENT`, held exclusively for this look, so it cannot join in between). A single
    /// process thus never writes the side file, whose page the file system would
    /// otherwise write back.
    fn alone(&self) -> bool {
        let alone = self
            .lock(PRESENT, Some(LockKind::Exclusive))
            .unwrap_or(false);
        if alone {
            // Back to shared: a downgrade cannot be refused.
            let _ = self.lock(PRESENT, Some(LockKind::Shared));
        }
        alone
    }

    /// Write → Read: `SHARED` back to shared (atomic), then `PENDING` and `RESERVED`.
    fn downgrade(&self, st: &mut TurnState) {
        // An unlock or a downgrade cannot conflict; an I/O error here leaves the kernel's
        // locks as they were, which only makes other handles wait longer.
        let _ = self.lock(SHARED, Some(LockKind::Shared));
        let _ = self.lock(PENDING, None);
        let _ = self.lock(RESERVED, None);
        st.held = Held::Read;
    }

    fn release_all(&self, st: &mut TurnState) {
        let _ = self.locks.lock_range(RESERVED, SHARED - RESERVED + 1, None);
        st.held = Held::None;
    }

    fn give_back(&self, kind: Held) {
        if crate::vfs::fork::generation() != self.fork_gen {
            // Inherited through fork(): the locks are the parent's.
            return;
        }
        let mut st = self.state();
        match kind {
            Held::Write => {
                st.writers -= 1;
                if st.writers == 0 {
                    if st.appenders > 0 {
                        // The whole file back down to the append turn it was taken on.
                        self.to_append(&mut st);
                    } else {
                        self.yield_if_waited(&mut st, Duration::ZERO);
                        if st.readers > 0 {
                            self.downgrade(&mut st);
                        } else {
                            self.release_all(&mut st);
                        }
                    }
                }
            }
            Held::Append => {
                st.appenders -= 1;
                if st.appenders == 0 && st.writers == 0 && st.pending_write {
                    // Another thread of this handle is upgrading to the whole file (the
                    // background flusher) and counts on `RESERVED`: it stays, under the
                    // read turn the upgrade stands on (`SHARED` is still held shared).
                    st.held = Held::Read;
                } else if st.appenders == 0 && st.writers == 0 {
                    // Only other writers wait for an append turn (readers go on beside
                    // it), and its transactions are short: stepping aside for each of
                    // them would halve two writers' throughput, so only one that has
                    // waited `APPEND_STARVES` gets the turn first.
                    self.yield_if_waited(&mut st, APPEND_STARVES);
                    if st.readers > 0 {
                        // An unlock cannot conflict (see `downgrade`).
                        let _ = self.lock(RESERVED, None);
                        st.held = Held::Read;
                    } else {
                        self.release_all(&mut st);
                    }
                }
            }
            _ => {
                st.readers -= 1;
                // A thread of this handle sleeping between tries for the write turn keeps
                // the read turn its upgrade stands on.
                if st.readers + st.appenders + st.writers == 0 && !st.pending_write {
                    self.release_all(&mut st);
                }
            }
        }
        st.check();
    }

    /// This handle gives back `RESERVED`: if someone has waited for a turn `after` or
    /// longer, let it in before this handle takes the next one. (Not while a thread of
    /// this handle waits: its own `WAITING` would answer, and the unlock below drop it;
    /// nor when it was alone.)
    fn yield_if_waited(&self, st: &mut TurnState, after: Duration) {
        let since = self.shm.get(WAITERS, &self.shm_path).unwrap_or(1);
        let waited = wall_us().saturating_sub(since);
        if st.waiting || st.alone || since == 0 || waited < after.as_micros() as u64 {
        } else if !self
            .lock(WAITING, Some(LockKind::Exclusive))
            .unwrap_or(true)
        {
            st.yield_until = Some(Instant::now() + YIELD);
        } else {
            // Nobody waits: the word goes back to zero until someone does. (A waiter
            // that sets it meanwhile takes `WAITING` after setting it, so a clear that
            // overtakes its store only costs it this handle's yield once.)
            let _ = self.shm.set(WAITERS, 0, &self.shm_path);
            let _ = self.lock(WAITING, None);
        }
    }

    /// Whether no other handle has the file open: then `PRESENT` stays exclusive until
    /// this handle goes, so the answer holds until then (nobody can join meanwhile).
    pub(crate) fn is_last(&self) -> Result<bool> {
        self.lock(PRESENT, Some(LockKind::Exclusive))
    }
}

impl Drop for Procs {
    fn drop(&mut self) {
        // The last handle out deletes the side file, while it holds `PRESENT` exclusively
        // (module notes). An inherited copy does nothing: the parent is still there.
        if crate::vfs::fork::generation() == self.fork_gen && self.is_last().unwrap_or(false) {
            let _ = match self.shm {
                Shm::Mapped(_) => self.vfs.delete_region(&self.shm_path),
                Shm::File(_) => self.vfs.delete(&self.shm_path),
            };
        }
    }
}
