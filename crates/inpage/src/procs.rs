//! Several processes on one database file: whose turn it is, and whether the file changed
//! since this process last looked.
//!
//! A `Database` handle (all its clones and transactions: one "process" here, whether or
//! not another handle of the same file lives in the same OS process) holds a *turn* on
//! the file while it has a transaction running, and nothing while it is idle, as a stock
//! SQLite connection in a rollback-journal mode holds its locks:
//!
//! ```text
//!                 first read                      first write (others' readers drained)
//!   Idle(None) ─────────────────▶ Read ───────────────────────────────────────▶ Write
//!       ▲                          │  ▲                                            │
//!       └──── last read ends ──────┘  └──── writer ends, readers of ours left ─────┤
//!       ▲                                                                          │
//!       └──────────────────── writer ends, nothing else running ────────────────────┘
//! ```
//!
//! The turn is a set of byte-range locks (`File::lock_range`, open-file-description locks)
//! on the database file, at offsets no page reaches: `SHARED` is held shared by every
//! handle with a read turn and exclusively by the one with the write turn; `RESERVED`
//! names the one handle that is getting or holding the write turn; `PENDING`, held
//! exclusively while a writer waits for readers to leave, keeps new readers out so it
//! cannot starve (the writer also sets a word in the side file, and only while it is set
//! does a reader on its way in try `PENDING`: an uncontended read turn is one lock call
//! and one unlock, the counter read from the mapped side file).
//!
//! Invariants, and why they hold:
//! - *No handle reads the file while another writes it.* Every transaction holds a turn
//!   (`Turn`), and a write turn excludes every other turn through `SHARED`. Everything that
//!   writes the file — commits, recovery at open and at a reload, a checkpoint, a clean
//!   close — runs under the write turn, and so does a journal's background work (the
//!   `redo` flusher asks `ShareGate` for the turn before each batch, and a gate whose
//!   state was replaced by a reload never gives it again). A journal whose acknowledged
//!   commits other processes cannot find (`can_share`: `nvlog`, `waldio-gs`) keeps the
//!   write turn for its handle's whole life (`Shared::pin`), so a second handle waits for
//!   it, then fails with `Error::Locked`.
//! - *A handle never works from a stale picture of the file.* The change counter, eight
//!   bytes in `<db>-shm`, is bumped each time a write turn is taken, before anything is
//!   written (`announce_write`), so a holder that dies in the middle of its writes still
//!   tells the others. Taking a turn from idle reads it; a value other than the one this
//!   handle last saw or wrote means another handle may have changed the files, and the
//!   handle reloads (the layer above opens the file again, with the recovery an open
//!   runs: a read-only copy under a read turn, the real thing under the write turn)
//!   before its transaction sees anything. A handle that holds a turn keeps it current:
//!   nobody else can write meanwhile. A handle alone with the file skips the bump: one
//!   that joins later reads the counter as it joins, and opens the file anew anyway.
//! - *Upgrades do not deadlock.* A handle holding a read turn that finds `RESERVED` taken
//!   fails at once with `Error::Busy` (the holder waits for this handle's readers), as
//!   SQLite refuses such an upgrade without calling the busy handler.
//! - *The side file exists only while the database is open* (`<db>-shm`). Each handle
//!   holds `PRESENT` shared from before it opens the side file until it has closed it; a
//!   closing handle that gets `PRESENT` exclusively is the last one and deletes the file
//!   while it holds it, so no handle ever holds the side file of a deleted path. A crash
//!   leaves it behind; any counter value in it is as good as another.
//! - *Waiting sleeps, and waiters get their turn.* Taking a turn retries after sleeps
//!   that start at `FIRST_SLEEP` and double up to `LONGEST_SLEEP` (turns are short: a
//!   read, a commit; a waiter gets in soon after the holder leaves, and one that waits
//!   long polls a few thousand times a second, no busy loop) until the caller's timeout
//!   (a timeout of 0 fails at the first refusal), holding `WAITING` shared meanwhile and
//!   letting go of the state lock between tries (the handle's other threads go on). A
//!   handle giving back the write turn while `WAITING` is held stays out for `YIELD`
//!   (many of a waiter's longest sleeps), so a busy writer cannot starve the others.

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
    Write,
}

/// What the handle holds, and what it knows.
#[derive(Debug)]
struct TurnState {
    held: Held,
    /// Turns handed out and not yet given back, by kind.
    readers: usize,
    writers: usize,
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
            self.readers + self.writers == 0 && !self.pending_write,
            "turn {:?} with {} readers and {} writers out",
            self.held,
            self.readers,
            self.writers
        );
        debug_assert!(
            self.writers == 0 || self.held == Held::Write,
            "writers out without the write turn: {self:?}"
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
    /// memory; nothing is written). `under` Write: for real; returns whether recovery
    /// wrote anything (then the counter is bumped, as after a commit).
    fn reload(&self, under: Held) -> Result<bool>;
    /// Whether `reload` can only refuse (`NoReload { refuse: true }`): then a stale
    /// picture fails the turn before anything is announced.
    fn refuses(&self) -> bool {
        false
    }
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
        // A stale picture is refused (Busy): the handle reloads at its next transaction,
        // which retires this gate.
        match self
            .procs
            .enter(Held::Write, Duration::ZERO, &NoReload { refuse: true })
        {
            // Looked at again with the turn held: a reload runs only from idle, so it
            // cannot retire the gate while this turn is out.
            Ok(t) if self.live.load(Ordering::SeqCst) => GateAnswer::Go(Box::new(t)),
            Ok(_) => GateAnswer::Never,
            Err(_) => GateAnswer::Later,
        }
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

impl Procs {
    /// Join the processes that have `path` open: `locks` is the database file, opened by
    /// the caller (it exists). Waits up to `wait` for a closing handle to finish deleting
    /// the side file.
    pub(crate) fn open(
        vfs: &Arc<dyn Vfs>,
        path: &Path,
        locks: Arc<dyn File>,
        wait: Duration,
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
                writers: 0,
                seen: 0,
                waiting: false,
                pending_write: false,
                says_waiting: false,
                alone: false,
                yield_until: None,
            }),
            fork_gen: crate::vfs::fork::generation(),
            mutant,
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
                        if !st.waiting {
                            // Advisory: failing to say so costs fairness, nothing else.
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
    /// copy if it moved; a writer then upgrades: `RESERVED` (one writer among the
    /// handles), `PENDING` (keeps new readers of other handles out while it waits),
    /// `SHARED` exclusively (once their readers are gone); under the write turn the
    /// counter is looked at again, bumped (`announce_write`) and the picture reloaded if it
    /// was stale or a copy.
    fn attempt(
        &self,
        st: &mut TurnState,
        want: Held,
        r: &dyn Reload,
        handing_over: usize,
    ) -> Result<(), Attempt> {
        if st.held == Held::None {
            // Uncontended, the whole write turn in one call (`RESERVED`, `PENDING` and
            // `SHARED` are adjacent): a refused range lock takes none of its bytes.
            if want == Held::Write && self.lock_span(RESERVED, SHARED, LockKind::Exclusive)? {
                st.held = Held::Write;
                return self.write_turn_taken(st, r, false);
            }
            // A writer waiting for readers to leave keeps new ones out with `PENDING`;
            // only when the side file says one waits is that lock looked at (a word a
            // dead writer left set finds the lock free).
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
            if want == Held::Read {
                let now = self.counter()?;
                if now != st.seen {
                    // A copy writes nothing: the counter stays.
                    r.reload(Held::Read)?;
                    st.seen = now;
                }
                return Ok(());
            }
        }
        if want == Held::Read || st.held == Held::Write {
            return Ok(());
        }
        // Held Read, want Write.
        // Transactions of this handle that go on reading once the write turn is had.
        let mine = st.readers.saturating_sub(handing_over) + st.writers > 0;
        if !st.pending_write {
            if mine && r.is_copy() {
                // This handle's readers read a copy; the writer needs the real state,
                // which cannot be loaded under them.
                return Err(Attempt::Fail(Error::Busy));
            }
            if !self.lock(RESERVED, Some(LockKind::Exclusive))? {
                if mine {
                    // The holder waits for this handle's readers: waiting here could
                    // only deadlock (SQLite refuses such an upgrade the same way).
                    return Err(Attempt::Fail(Error::Busy));
                }
                // Taken from idle for this try: let go, so the holder can finish.
                self.release_all(st);
                return Err(Attempt::Later);
            }
            st.pending_write = true;
        }
        if !self.lock(PENDING, Some(LockKind::Exclusive))? {
            return Err(Attempt::Later);
        }
        if !self.lock(SHARED, Some(LockKind::Exclusive))? {
            // Readers of other handles are in: say a writer waits, so new ones look at
            // `PENDING` and stay out.
            if !st.says_waiting {
                self.shm.set(WRITER_WAITS, 1, &self.shm_path)?;
                st.says_waiting = true;
            }
            return Err(Attempt::Later);
        }
        self.stop_saying_waiting(st);
        st.pending_write = false;
        st.held = Held::Write;
        self.write_turn_taken(st, r, mine)
    }

    /// The write turn was just taken (`mine`: transactions of this handle go on beside
    /// it). Under it nobody else can move the counter; with readers of this handle
    /// running it cannot have moved since their turn began. The counter is bumped before
    /// the reload (its recovery writes too: a checkpoint, a log reset), so a kill in the
    /// middle of it sends the others to look again as well.
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
        if stale && r.refuses() {
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
            let _ = self.lock(RESERVED, None);
            st.pending_write = false;
        }
        if st.writers == 0 && st.held == Held::Write {
            if st.readers > 0 {
                self.downgrade(st);
            } else {
                self.release_all(st);
            }
        }
        if st.readers + st.writers == 0 && st.held != Held::None {
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
                    // Someone sleeps waiting for a turn: let it in before this handle
                    // takes the next one.
                    // (Not while a thread of this handle waits: its own `WAITING` would
                    // answer, and the unlock below drop it; nor when it was alone.)
                    if st.waiting || st.alone {
                    } else if !self
                        .lock(WAITING, Some(LockKind::Exclusive))
                        .unwrap_or(true)
                    {
                        st.yield_until = Some(Instant::now() + YIELD);
                    } else {
                        let _ = self.lock(WAITING, None);
                    }
                    if st.readers > 0 {
                        self.downgrade(&mut st);
                    } else {
                        self.release_all(&mut st);
                    }
                }
            }
            _ => {
                st.readers -= 1;
                // A thread of this handle sleeping between tries for the write turn keeps
                // the read turn its upgrade stands on.
                if st.readers == 0 && st.writers == 0 && !st.pending_write {
                    self.release_all(&mut st);
                }
            }
        }
        st.check();
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
