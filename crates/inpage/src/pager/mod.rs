//! The pager: the committed state of the database, shared by the writer and readers.
//!
//! Invariants, and why they hold:
//! - **Readers see only committed images.** A write transaction's pages live in its own
//!   dirty map until `commit`; the pager learns about them only inside `commit`.
//! - **Snapshots are stable.** Before a commit touches the file, the pager records, under
//!   its lock and in one step with pinning the new images in the cache, the pre-image of
//!   every page the commit replaces (`versions[tid]`). A reader with snapshot `s` looks for
//!   page `p` in the pre-images of the oldest commit newer than `s` that replaced `p`;
//!   only if no newer commit replaced it does it read the current image. Because both
//!   steps happen under the same lock, no interleaving lets a reader see a newer image.
//!   Pre-images are dropped once no registered reader is older than the commit.
//! - **No torn reads.** Pages of a commit in flight are pinned in the cache, so nobody
//!   reads them from the file while it is being written (see `cache.rs`). A cache miss
//!   reads the file without the lock; the image (or the error a torn image gave) counts
//!   only if no commit started or ended during the read (`write_epoch`), else the lookup
//!   is repeated (`read_page_unlocked`).
//! - **Spilled pages are committed images too** (steal). `spill` writes versions of the
//!   writer's tid (above every snapshot) beside the committed ones and caches the result:
//!   a reader opening that image at its snapshot sees the committed version. While a
//!   commit restamps spilled pages or a rollback invalidates them, with no image pinned,
//!   the pages are `in_flight` and a reader that misses the cache on one waits for the
//!   write to end rather than read a half-written page.
//! - **Fail-stop on I/O errors.** If a commit fails, the on-disk state is unknown (a
//!   failed fsync may have dropped any write since the last good one), so the pager
//!   restores the old images in memory, pins them, and refuses new transactions until the
//!   database is reopened and recovered. Existing readers keep their snapshots. The
//!   handle's phase (`Phase`: ready, writing, poisoned) is one enum with its transition
//!   diagram, checked on every transition in debug builds.
//! - **Opening never trusts a byte before checking it**: a hot rollback journal is rolled
//!   back first (the header page itself may be half-written), then the header is decoded
//!   with its checksum, then the journal mode's own recovery runs, then the header is read
//!   again through the journal (a log may hold a newer one).

pub(crate) mod cache;
mod create;
mod free;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use crate::config::Config;
use crate::error::{Error, Pgno, Result};
use crate::format::header::{self, Header, HEADER_LEN};
use crate::journal::{
    recover_hot_journal, side_path, CommitBatch, DbFile, Gate, Journal, JournalCtx, JournalMode,
    RecoveryReport,
};
use crate::page::{crc_ok, FreeSpace, Geometry, Layout, PageRead, PageRef, PageWrite, Stamp};
use crate::vfs::{fork, File, OpenOptions};
use cache::Cache;
pub use free::AllocDelta;
use free::FreeSet;

struct State {
    header: Header,
    cache: Cache,
    /// Commit tid -> committed images that commit replaced.
    versions: BTreeMap<u64, PgnoMap<PageRef>>,
    /// Snapshot tid -> number of readers on it.
    readers: BTreeMap<u64, usize>,
    /// Whether the file is being written, and whether this handle may still work.
    phase: Phase,
    /// `FreeSpace::TreeWalk` layouts: pages no committed tree owns, and what each
    /// commit since the oldest reader freed (`pager/free.rs`).
    free: FreeSet,
    /// Bumped when a commit starts writing and again when it ends (`State::begin_io`,
    /// `State::end_io`): a page read from the file without the lock is only cached (and
    /// returned) if no commit started or ended meanwhile (see `read_page_unlocked`).
    write_epoch: u64,
    /// Number of commits that changed the catalog (created or dropped a tree), as of the
    /// committed header: what `Tree` handles key their cached catalog record on.
    catalog_gen: u64,
    /// Steal: pages the writer is rewriting in the file with no image pinned in the cache
    /// (a commit stamping spilled versions, or a rollback invalidating them). A reader
    /// that misses the cache on one waits (`Pager::settled`) instead of reading a page
    /// that may be half-written.
    in_flight: HashSet<Pgno, BuildHasherDefault<PgnoHasher>>,
    /// The planted bug in force (`Mutant::None` outside test builds): the reader
    /// mutants break `pre_image` and `prune`, which see only the state.
    mutant: crate::journal::Mutant,
    /// A commit that shrinks the page count is being written: new readers wait
    /// (`begin_snapshot`), so every reader of the longer state registered before it and
    /// got the images of the pages past the new end that it kept (`commit`).
    shrink_in_flight: bool,
}

/// The pager's phase: whether the journal is writing the file on the writer's behalf, and
/// whether the handle may still be trusted.
///
/// ```text
///            begin_io: commit, spill, discard
///   Ready ─────────────────────────────────────▶ Writing
///     ▲                                            │
///     └──── end_io(Ok), or a clean NoSpace ─────────┤
///                                                  │ end_io(Err): the file may hold
///     │ poison: a panic under the lock, a failed   ▼ anything for the pages written
///     │ wait_durable or checkpoint, a failed ───▶ Poisoned(why)
///     │ transaction across databases               (until the database is reopened)
/// ```
///
/// `Writing` may also become `Poisoned` (a panic elsewhere while the journal writes);
/// the write's end then leaves it poisoned. Checked on every transition in debug builds
/// (`State::check_phase`): `write_epoch` is odd exactly while `Writing`.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Phase {
    /// Usable, and no write of the writer's is under way.
    Ready,
    /// A commit, spill or discard is writing pages the cache does not pin (or pins).
    Writing,
    /// Every later transaction fails with `Error::Poisoned(why)`.
    Poisoned(String),
}

impl State {
    /// Ready → Writing: the journal is about to write the file (the caller holds the
    /// lock and has checked the handle is usable).
    fn begin_io(&mut self) {
        debug_assert_eq!(self.phase, Phase::Ready, "an I/O began while not ready");
        self.phase = Phase::Writing;
        self.write_epoch += 1;
        self.check_phase();
    }

    /// Writing → Ready (`failure` None), or → Poisoned(failure): the write ended.
    fn end_io(&mut self, failure: Option<String>) {
        debug_assert!(
            matches!(self.phase, Phase::Writing | Phase::Poisoned(_)),
            "an I/O ended that had not begun: {:?}",
            self.phase
        );
        self.write_epoch += 1;
        match failure {
            Some(why) => self.phase = Phase::Poisoned(why),
            None if self.phase == Phase::Writing => self.phase = Phase::Ready,
            None => {}
        }
        self.check_phase();
    }

    /// Any phase → Poisoned: a failure after which memory may not match the file. The
    /// first reason is kept when `first_only` (a later failure follows from it), else
    /// the newest reason replaces it.
    fn poison(&mut self, why: String, first_only: bool) {
        if !(first_only && matches!(self.phase, Phase::Poisoned(_))) {
            self.phase = Phase::Poisoned(why);
        }
        self.check_phase();
    }

    /// The phase invariant: an odd epoch means a write is under way, and only `Writing`
    /// (or a handle poisoned during the write) has one.
    fn check_phase(&self) {
        debug_assert!(
            match self.phase {
                Phase::Ready => self.write_epoch % 2 == 0,
                Phase::Writing => self.write_epoch % 2 == 1,
                Phase::Poisoned(_) => true,
            },
            "phase {:?} with write epoch {}",
            self.phase,
            self.write_epoch
        );
    }
}

/// Hash map keyed by page number, hashed with [`PgnoHasher`].
pub(crate) type PgnoMap<V> = HashMap<Pgno, V, BuildHasherDefault<PgnoHasher>>;

/// Hasher for page numbers: one multiplication (Fibonacci hashing). SipHash's protection
/// against chosen collisions buys nothing here: page numbers are bounded by the file size
/// and are not picked by users, and the maps are looked up several times per operation.
#[derive(Default)]
pub struct PgnoHasher(u64);

impl Hasher for PgnoHasher {
    fn write(&mut self, bytes: &[u8]) {
        // Only reached for keys other than a `Pgno`; still a valid (slow) hash.
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }
    fn write_u64(&mut self, n: u64) {
        // The odd multiplier keeps the low bits (the bucket index) a bijection of the
        // page number's low bits and spreads it into the high bits (hashbrown's tags).
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// Cache statistics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    pub hits: u64,
    pub misses: u64,
    pub pages: usize,
}

/// The committed database.
pub(crate) struct Pager {
    path: PathBuf,
    mode: JournalMode,
    layout: Layout,
    journal: Box<dyn Journal>,
    page_size: usize,
    state: Mutex<State>,
    recovery: RecoveryReport,
    /// Whether this open's page writes bypass the page cache.
    direct_writes: bool,
    /// Signalled when pages leave `State::in_flight`.
    settled: Condvar,
    /// The `vfs::fork` generation this handle was opened in; None for files in process
    /// memory, which a child of `fork()` gets a copy of.
    fork_gen: Option<u64>,
    /// The journal's log limits, changeable while open.
    limits: Arc<crate::journal::LogLimits>,
}

/// Steal: what a committing transaction left in the file before its commit (see
/// `CommitBatch::restamp` and `CommitBatch::discard`).
#[derive(Clone, Debug, Default)]
pub(crate) struct Spilled {
    /// Spilled pages still part of the transaction, unchanged since their spill.
    pub restamp: Vec<Pgno>,
    /// Spilled pages that are not part of it any more.
    pub discard: Vec<Pgno>,
}

impl std::fmt::Debug for Pager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pager")
            .field("path", &self.path)
            .field("page_size", &self.page_size)
            .field("journal", &self.journal)
            .finish_non_exhaustive()
    }
}

/// A `PageWrite` over a map, used to lay out a brand-new file.
struct InitStore {
    page_size: usize,
    layout: Layout,
    pages: BTreeMap<Pgno, Vec<u8>>,
    next: Pgno,
}

impl PageRead for InitStore {
    fn page_size(&self) -> usize {
        self.page_size
    }
    fn read(&self, pgno: Pgno) -> Result<PageRef> {
        self.pages
            .get(&pgno)
            .map(|p| PageRef::from(p.as_slice()))
            .ok_or_else(|| Error::corrupt(pgno, "page not written during initialisation"))
    }
    fn layout(&self) -> Layout {
        self.layout
    }
    fn visible_tid(&self) -> u64 {
        self.layout.create_tid()
    }
}

impl PageWrite for InitStore {
    fn write(&mut self, pgno: Pgno, data: PageRef) -> Result<()> {
        self.pages.insert(pgno, data.to_vec());
        Ok(())
    }
    fn allocate(&mut self) -> Result<Pgno> {
        self.next += 1;
        Ok(self.next - 1)
    }
    fn free(&mut self, pgno: Pgno) -> Result<()> {
        Err(Error::InvalidArgument(format!(
            "page {pgno} freed while creating a database"
        )))
    }
    fn tid(&self) -> u64 {
        self.layout.create_tid()
    }
    fn is_fresh(&self, _pgno: Pgno) -> bool {
        true
    }
}

/// A spill or discard reached a journal without the steal part: the transaction layer
/// spills only where `Capabilities::steals` says the mode can, so this is a bug, reported
/// as an error rather than a write the journal cannot take.
fn not_stealing() -> Error {
    Error::InvalidArgument("this journal mode does not steal (spill uncommitted pages)".into())
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    // A panic while holding the lock (a bug) may have left the cache, the pre-images or
    // the header half-updated: the handle is poisoned, so every later transaction fails
    // with `Error::Poisoned` instead of trusting that state or panicking in turn. The
    // guard is still returned so readers already running and `close` can finish.
    match m.lock() {
        Ok(g) => g,
        Err(e) => {
            let mut g = e.into_inner();
            g.poison(
                "a thread panicked while holding the pager's lock; its in-memory state \
                 may be half-updated"
                    .into(),
                true,
            );
            g
        }
    }
}

/// What a new database holds besides its header, laid out by the layer above the pager
/// (`db` passes `tree::create`: the empty catalog): it writes the pages through the store
/// it is given and returns the catalog root.
pub(crate) type FirstPages = fn(&mut dyn PageWrite) -> Result<Pgno>;

impl Pager {
    /// Open (or create) the database at `path`; a new file's first pages besides its
    /// header are what `first` lays out (the layer above decides what a new file holds).
    /// `gate`: on a file other processes may open, what the journal's background work asks
    /// before it writes (`journal::Gate`).
    pub fn open(
        path: &Path,
        cfg: &Config,
        first: FirstPages,
        gate: Option<Arc<dyn Gate>>,
    ) -> Result<Pager> {
        cfg.validate()?;
        // Read before anything is opened: a fork during the open leaves the child a
        // handle of the older generation, which it then refuses to use.
        let vfs = &cfg.vfs;
        let fork_gen = (!vfs.in_process_memory()).then(fork::generation);
        let file = Self::open_file(path, cfg)?;
        // No lock here: the handle above opens under the write turn (`procs`), so no other
        // process reads or writes the files while recovery runs. A read-only open (an
        // overlay whose files lock nothing) may look at a file in use.
        // A transaction across databases that did not commit: undo this database's part
        // before anything reads the files (`vfs::undo`, `txn::multi`).
        // Attached beside other processes (`JournalConfig::attach`), nothing may be undone
        // under them: the whole file first (`Busy`).
        if cfg.journal.attach
            && vfs
                .exists(&crate::vfs::undo::log_path(&crate::vfs::undo::absolute(
                    path,
                )))
                .map_err(Error::io("stat", path))?
        {
            return Err(Error::Busy);
        }
        let undone = crate::vfs::undo::recover(vfs, path).map_err(Error::io("undo", path))?;
        // An empty file is an empty database: lay it out (or finish a layout an earlier
        // open was cut in) before anything reads it.
        create::settle(path, &file, cfg, first)?;

        // A hot rollback journal goes first: until it is rolled back, even page 0 may be
        // a half-written image.
        let hot = recover_hot_journal(vfs, path, &file)?;

        let raw = Self::read_raw_header(path, &file)?;
        // Layouts with two header slots: either valid slot names mode and page size.
        let disk_header = match Header::decode(&raw) {
            Ok(h) => h,
            Err(reason) => match header::decode_slot(&raw, 1) {
                Ok(h)
                    if JournalMode::from_id(h.mode)
                        .is_some_and(|m| m.layout().header_slots() > 1) =>
                {
                    h
                }
                _ => {
                    return Err(Error::NotADatabase {
                        path: path.to_path_buf(),
                        reason,
                    })
                }
            },
        };
        let file_mode =
            JournalMode::of_header(&disk_header).map_err(|reason| Error::NotADatabase {
                path: path.to_path_buf(),
                reason,
            })?;
        // Any mode of the file's format opens it (the modes of a format differ only in
        // policies); none asked for means the mode that created it.
        let mode = match cfg.journal_mode {
            Some(want) if want.same_format(file_mode) => want,
            Some(want) => {
                return Err(Error::ModeMismatch {
                    path: path.to_path_buf(),
                    file: file_mode.name().into(),
                    requested: want.name().into(),
                })
            }
            None => file_mode,
        };
        if let Some(want) = cfg.page_size {
            if want != disk_header.page_size {
                return Err(Error::PageSizeMismatch {
                    path: path.to_path_buf(),
                    file: disk_header.page_size,
                    requested: want,
                });
            }
        }
        cfg.check_against(mode)?;
        let page_size = disk_header.page_size as usize;
        // Checked before the journal opens (which may create side files), so a truncated
        // file is rejected without changing anything — except when the mode's log exists:
        // a checkpoint cut short may have written page 0 but not yet the pages that extend
        // the file, and replaying the log is what repairs that. The length is checked
        // again once the journal has recovered.
        let caps = mode.capabilities();
        let mut log_exists = false;
        for suffix in caps.side_files.iter().filter(|_| caps.replays_log) {
            log_exists |= vfs
                .exists(&side_path(path, suffix))
                .map_err(Error::io("stat", path))?;
        }
        // A mode that recovers the FCC from the pages may find the raw header slot belongs
        // to a transaction recovery will roll back; its journal checks the length against
        // the header it settles on, before it writes anything.
        if !log_exists && !caps.recovers_fcc {
            Self::check_length(path, &file, &disk_header)?;
        }
        let db = Arc::new(DbFile::new(
            file,
            path.to_path_buf(),
            page_size,
            cfg.chunk_pages_for(mode),
        ));
        let mut ctx = JournalCtx::new(
            vfs.clone(),
            path.to_path_buf(),
            db.clone(),
            cfg.journal.clone(),
        );
        ctx.gate = gate;
        let limits = ctx.limits.clone();
        let opened = mode.open_journal(ctx)?;
        let journal = opened.journal;
        // Release-mode check: a mode that declares it recovers the FCC must report one,
        // or the pager would trust a header slot recovery may have rolled back.
        assert_eq!(
            opened.fcc.is_some(),
            mode.capabilities().recovers_fcc,
            "journal mode {mode} broke its declared FCC recovery"
        );
        // What recovery did, in the order it did it: the cross-database undo, a hot
        // rollback journal, then the mode's own recovery.
        let undo = (undone == crate::vfs::undo::Undone::RolledBack)
            .then_some(crate::journal::RecoveryAction::UndoCrossDatabase);
        let hot = hot.iter().flat_map(|h| h.actions().iter().copied());
        let recovery = RecoveryReport::of(
            undo.into_iter()
                .chain(hot)
                .chain(opened.recovery.actions().iter().copied()),
        );
        // Release-mode check: the report the tools and tests read is what recovery did
        // (counters set behind `RecoveryReport::push` would tell another story).
        assert!(
            opened.recovery.is_consistent(),
            "journal mode {mode} reported recovery counters its actions do not add up to: {:?}",
            opened.recovery
        );

        // The journal may hold a newer page 0 than the file.
        let mut p0 = vec![0u8; page_size];
        journal.read_page(0, &mut p0)?;
        let layout = mode.layout();
        let fcc = opened.fcc.unwrap_or(u64::MAX);
        let mut header = layout
            .read_header(&p0, fcc)
            .map_err(|reason| Error::NotADatabase {
                path: path.to_path_buf(),
                reason,
            })?;
        if let Some(fcc) = opened.fcc {
            // With metadata embedding the true FCC is the one recovery found in the
            // pages, not the slot's.
            header.fcc = fcc;
        }
        if header.page_size as usize != page_size
            || !JournalMode::from_id(header.mode).is_some_and(|m| m.same_format(mode))
        {
            return Err(Error::NotADatabase {
                path: path.to_path_buf(),
                reason: "header in the journal disagrees with the file".into(),
            });
        }
        // A log whose checkpoint was deferred for lack of room holds the pages the file
        // does not have yet (a page past the end that it does not hold fails its read).
        // (Attached, a log's pages are read from it, not checkpointed into the file.)
        if !recovery.checkpoint_deferred && !cfg.journal.attach {
            Self::check_length(path, &db.file, &header)?;
        }
        let mut cache = Cache::new(cfg.cache_pages);
        cache.insert(0, PageRef::from(p0), false);
        Ok(Pager {
            limits,
            path: path.to_path_buf(),
            mode,
            layout,
            direct_writes: opened.direct_writes,
            journal,
            page_size,
            state: Mutex::new(State {
                header,
                cache,
                versions: BTreeMap::new(),
                readers: BTreeMap::new(),
                mutant: cfg.journal.mutant(),
                phase: Phase::Ready,
                free: FreeSet::default(),
                write_epoch: 0,
                catalog_gen: 0,
                in_flight: HashSet::default(),
                shrink_in_flight: false,
            }),
            recovery,
            settled: Condvar::new(),
            fork_gen,
        })
    }

    /// Open (or create, if `cfg` says so) the database file itself: with O_CREAT, never
    /// exclusively and never renamed into place, so every process opening the path meets
    /// the same inode, and the first to take the write turn lays it out (`create.rs`). A
    /// configuration the new file's mode would refuse is refused before the file exists:
    /// a refused open leaves nothing behind. Also what `Database` opens for its turns.
    pub(crate) fn open_file(path: &Path, cfg: &Config) -> Result<Arc<dyn File>> {
        let vfs = &cfg.vfs;
        let create = cfg.create && !cfg.read_only;
        if create && !vfs.exists(path).map_err(Error::io("stat", path))? {
            cfg.check_against(
                cfg.journal_mode
                    .unwrap_or(crate::config::DEFAULT_JOURNAL_MODE),
            )?;
        }
        match vfs.open(
            path,
            OpenOptions {
                create,
                ..Default::default()
            },
        ) {
            Ok(f) => Ok(f),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !create => Err(Error::Io {
                op: "open",
                path: path.to_path_buf(),
                source: std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "database file does not exist (and create is off)",
                ),
            }),
            Err(e) => Err(Error::io("open", path)(e)),
        }
    }

    fn check_length(path: &Path, file: &Arc<dyn File>, header: &Header) -> Result<()> {
        let len = file.len().map_err(Error::io("stat", path))?;
        let need = header.page_count as u64 * header.page_size as u64;
        if len < need {
            return Err(Error::Truncated {
                path: path.to_path_buf(),
                expected: need,
                actual: len,
            });
        }
        Ok(())
    }

    fn read_raw_header(path: &Path, file: &Arc<dyn File>) -> Result<Vec<u8>> {
        let len = file.len().map_err(Error::io("stat", path))?;
        let mut raw = vec![0u8; (2 * HEADER_LEN).min(len as usize)];
        file.read_exact_at(&mut raw, 0)
            .map_err(Error::io("read", path))?;
        Ok(raw)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn page_size(&self) -> usize {
        self.page_size
    }

    pub fn journal_mode(&self) -> JournalMode {
        self.mode
    }

    /// Whether the journal stamps page trailers itself (`Journal::stamps_trailers`): a
    /// transaction then commits its pages unstamped.
    pub fn journal_stamps_trailers(&self) -> bool {
        self.journal.stamps_trailers()
    }

    /// Whether page writes bypass the page cache (`O_DIRECT`).
    pub fn direct_writes(&self) -> bool {
        self.direct_writes
    }

    pub fn recovery(&self) -> &RecoveryReport {
        &self.recovery
    }

    /// Make durable what recovery left for the first commit to sync (`Journal::
    /// settle_recovery`), before other processes may write.
    pub(crate) fn settle_recovery(&self) -> Result<()> {
        self.journal.settle_recovery()
    }

    pub fn log_frames(&self) -> u64 {
        self.journal.log().map_or(0, |l| l.log_frames())
    }

    /// See `DeferredFlush::pause_flushes`: whether this journal has a flusher to pause
    /// (and so needs `resume_flushes`).
    pub fn pause_flushes(&self) -> Result<bool> {
        match self.journal.deferred_flush() {
            Some(f) => f.pause_flushes().map(|()| true),
            None => Ok(false),
        }
    }

    /// See `Journal::prepare_recorded_commit`.
    pub fn prepare_recorded_commit(&self) -> Result<()> {
        self.journal.prepare_recorded_commit()
    }

    /// See `DeferredFlush::resume_flushes`.
    pub fn resume_flushes(&self) {
        if let Some(f) = self.journal.deferred_flush() {
            f.resume_flushes();
        }
    }

    /// See `RegionBacked::durable_tid`.
    pub fn durable_tid(&self) -> Option<u64> {
        self.journal.region().map(|r| r.durable_tid())
    }

    /// Node layout of this database's trees.
    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// DHL: the pages no committed tree owns, computed by the caller at open.
    pub fn set_free_pages(&self, free: BTreeSet<Pgno>) {
        lock(&self.state).free.replace(free);
    }

    /// DHL: the lowest free page not in `exclude` (pages this transaction already took).
    pub fn pick_free(&self, exclude: &BTreeSet<Pgno>) -> Option<Pgno> {
        lock(&self.state).free.pick(exclude)
    }

    /// The log limits the journal reads at each use (`Database::set_journal_size_limit`,
    /// `Database::set_wal_autocheckpoint`).
    pub fn limits(&self) -> &crate::journal::LogLimits {
        &self.limits
    }

    /// The committed header.
    pub fn header(&self) -> Header {
        lock(&self.state).header.clone()
    }

    pub fn cache_stats(&self) -> CacheStats {
        let st = lock(&self.state);
        CacheStats {
            hits: st.cache.hits,
            misses: st.cache.misses,
            pages: st.cache.len(),
        }
    }

    /// Refuse every later transaction until the database is reopened: what the file
    /// holds is not what memory says (a transaction across databases failed after this
    /// database committed its part, which recovery undoes).
    pub fn poison(&self, why: String) {
        lock(&self.state).poison(why, true);
    }

    /// Err(Poisoned) after a failed commit.
    pub fn check_usable(&self) -> Result<()> {
        // Before the lock: in a child of fork() it may be held by a thread of the parent
        // that does not exist here.
        self.not_forked()?;
        self.usable(&lock(&self.state))
    }

    /// Whether this handle was inherited through `fork()`: then it must not even take
    /// its locks (a thread of the parent may have held one at the fork), and its drop
    /// does nothing.
    pub fn forked(&self) -> bool {
        self.not_forked().is_err()
    }

    /// Whether this handle may work: not inherited through `fork()` (`vfs::fork`), not
    /// poisoned by an earlier failure.
    fn usable(&self, st: &State) -> Result<()> {
        self.not_forked()?;
        match &st.phase {
            Phase::Poisoned(why) => Err(Error::Poisoned(why.clone())),
            Phase::Ready | Phase::Writing => Ok(()),
        }
    }

    /// `Error::Forked` in a child of `fork()` that inherited this handle: the parent may
    /// have changed the file since, so nothing read or written from here would be sound.
    pub fn not_forked(&self) -> Result<()> {
        if self.fork_gen.is_some_and(|g| g != fork::generation()) {
            return Err(Error::Forked {
                path: self.path.clone(),
            });
        }
        Ok(())
    }

    fn past_end(st: &State, pgno: Pgno) -> Result<()> {
        if pgno >= st.header.page_count {
            return Err(Error::corrupt(
                pgno,
                format!(
                    "page number past the end of the database ({} pages)",
                    st.header.page_count
                ),
            ));
        }
        Ok(())
    }

    /// The committed image of a page from the journal, checked. Called with or without
    /// the lock; without it only through `read_page_unlocked`.
    fn read_from_journal(&self, pgno: Pgno) -> Result<PageRef> {
        self.not_forked()?;
        // Read straight into the shared image: `PageRef::from(Vec)` would copy the page
        // and free the buffer, a sixth of a long overflow walk's time.
        let mut page: PageRef = std::iter::repeat_n(0u8, self.page_size).collect();
        let buf = Arc::get_mut(&mut page).expect("a fresh image has one owner");
        self.journal.read_page(pgno, buf)?;
        // Some layouts verify their pages per version instead (`trailer_checked`).
        if self.layout.trailer_checked() && !crc_ok(buf, pgno) {
            return Err(Error::corrupt(pgno, "page checksum mismatch"));
        }
        Ok(page)
    }

    /// With the lock held (the writer's commit path): the current image, read from the
    /// file on a miss.
    fn current_locked(&self, st: &mut State, pgno: Pgno) -> Result<PageRef> {
        if let Some(p) = st.cache.get(pgno) {
            return Ok(p);
        }
        Self::past_end(st, pgno)?;
        let page = self.read_from_journal(pgno)?;
        st.cache.insert(pgno, page.clone(), false);
        Ok(page)
    }

    /// A page as of `snapshot` (None: the current committed image), reading the file
    /// without holding the lock, so one reader's cache miss does not stall every other
    /// reader and the writer for the length of an I/O.
    ///
    /// Why this is safe: the lock is taken to look up the pre-images and the cache and to
    /// note `write_epoch`; a miss there means no commit is writing this page (a commit's
    /// pages are pinned in the cache while it writes them). The file is then read
    /// unlocked; if a commit started or ended meanwhile (`write_epoch` moved), the image
    /// may be one that commit wrote, so it is dropped and the lookup repeated (now
    /// finding the commit's pinned image or its pre-image). A bounded number of retries
    /// then falls back to reading under the lock, so a stream of commits cannot starve a
    /// reader.
    fn read_page_unlocked(&self, snapshot: Option<u64>, pgno: Pgno) -> Result<PageRef> {
        const RETRIES: usize = 4;
        for _ in 0..RETRIES {
            let epoch = {
                let mut st = self.settled_lock(pgno);
                if let Some(p) = Self::pre_image(&st, snapshot, pgno) {
                    return Ok(p);
                }
                if let Some(p) = st.cache.get(pgno) {
                    return Ok(p);
                }
                Self::past_end(&st, pgno)?;
                st.write_epoch
            };
            // A read that overlapped a commit may have seen a torn image and failed its
            // checksum: its result, error or not, only counts if no commit intervened.
            let read = self.read_from_journal(pgno);
            let mut st = lock(&self.state);
            if st.write_epoch == epoch {
                let page = read?;
                st.cache.insert(pgno, page.clone(), false);
                return Ok(page);
            }
        }
        let mut st = self.settled_lock(pgno);
        if let Some(p) = Self::pre_image(&st, snapshot, pgno) {
            return Ok(p);
        }
        self.current_locked(&mut st, pgno)
    }

    /// The lock, once `pgno` is not being rewritten without a pinned image (steal).
    /// Holding the lock keeps it so: pages join `in_flight` only under it.
    fn settled_lock(&self, pgno: Pgno) -> MutexGuard<'_, State> {
        let mut st = lock(&self.state);
        while st.in_flight.contains(&pgno) {
            st = self.settled.wait(st).unwrap_or_else(|e| e.into_inner());
        }
        st
    }

    /// Steal: the image of a page the writer spilled, as the file holds it (the cache's,
    /// or read on a miss). Only the writer writes such a page, so no commit can be
    /// writing it meanwhile; it may lie past the committed page count (the transaction
    /// grew the file).
    pub fn read_spilled(&self, pgno: Pgno) -> Result<PageRef> {
        if let Some(p) = lock(&self.state).cache.get(pgno) {
            return Ok(p);
        }
        let page = self.read_from_journal(pgno)?;
        lock(&self.state).cache.insert(pgno, page.clone(), false);
        Ok(page)
    }

    /// What the file holds for `pgno` now, if the pager can know it without the file
    /// possibly lacking the page: the cached image, else a read of a committed page.
    fn file_image(&self, st: &mut State, pgno: Pgno) -> Result<Option<PageRef>> {
        if let Some(p) = st.cache.get(pgno) {
            return Ok(Some(p));
        }
        if pgno < st.header.page_count {
            return self.current_locked(st, pgno).map(Some);
        }
        Ok(None)
    }

    /// Steal: write the uncommitted pages `dirty` of transaction `tid` (the committed
    /// FCC + 1) into the file, as versions with txn_size 0 (`Steal::spill`), and cache
    /// what the file now holds. That is still a committed image for every reader: they
    /// open pages at their snapshot, below `tid`, so the new version is invisible to them
    /// and the committed one beside it is what they see. The pages are pinned while the
    /// journal writes them, as a commit's are.
    pub fn spill(&self, tid: u64, dirty: &[(Pgno, PageRef)]) -> Result<()> {
        let mut st = lock(&self.state);
        self.usable(&st)?;
        assert_eq!(
            tid,
            st.header.fcc + 1,
            "spill tid must be the committed FCC + 1"
        );
        let g = self.geometry();
        let mut pages = Vec::with_capacity(dirty.len());
        let mut originals = Vec::new();
        for (pgno, img) in dirty {
            debug_assert!(*pgno != 0);
            pages.push((
                *pgno,
                self.layout
                    .finalize(*pgno, img.clone(), g, Stamp::serial(tid, 0))?,
            ));
            if let Some(o) = self.file_image(&mut st, *pgno)? {
                // The spill overwrites the page's older version in the file; a reader
                // whose snapshot sees it finds it here (as it would a commit's pre-image).
                // The first spill's is the committed image; a rollback keeps it, right
                // for the transaction that reuses the tid, whose base is the same.
                st.versions
                    .entry(tid)
                    .or_default()
                    .entry(*pgno)
                    .or_insert_with(|| o.clone());
                originals.push((*pgno, o));
            }
        }
        for (pgno, img) in &pages {
            st.cache.insert(*pgno, img.clone(), true);
        }
        st.begin_io();
        drop(st);
        let result = match self.journal.steal() {
            Some(steal) => steal.spill(tid, &pages, &originals),
            None => Err(not_stealing()),
        };
        let mut st = lock(&self.state);
        st.end_io(result.as_ref().err().map(|e| e.to_string()));
        for (pgno, _) in &pages {
            match &result {
                Ok(()) => st.cache.unpin(*pgno),
                // The file may hold anything for these pages now.
                Err(_) => st.cache.remove(*pgno),
            }
        }
        result
    }

    /// Steal: invalidate the versions transaction `tid` spilled into `pages` (it rolled
    /// back, or rolled back past them), and drop their images from the cache, which
    /// would show the writer (and the next transaction, which reuses `tid`) those
    /// versions.
    pub fn discard(&self, tid: u64, pages: &[Pgno]) -> Result<()> {
        if pages.is_empty() {
            return Ok(());
        }
        let mut st = lock(&self.state);
        self.usable(&st)?;
        for &p in pages {
            st.cache.remove(p);
            st.in_flight.insert(p);
        }
        st.begin_io();
        drop(st);
        let result = match self.journal.steal() {
            Some(steal) => steal.discard(tid, pages),
            None => Err(not_stealing()),
        };
        let mut st = lock(&self.state);
        st.end_io(result.as_ref().err().map(|e| e.to_string()));
        for p in pages {
            st.in_flight.remove(p);
        }
        drop(st);
        self.settled.notify_all();
        result
    }

    fn geometry(&self) -> Geometry {
        self.layout.geometry_for(self.page_size)
    }

    /// The image of `pgno` a reader at `snapshot` must see instead of the current one:
    /// the pre-image kept by the oldest commit after the snapshot that replaced it.
    fn pre_image(st: &State, snapshot: Option<u64>, pgno: Pgno) -> Option<PageRef> {
        let s = snapshot?;
        if st.mutant == crate::journal::Mutant::StaleReaderGetsNewest {
            return None;
        }
        st.versions
            .range(s + 1..)
            .find_map(|(_, replaced)| replaced.get(&pgno).cloned())
    }

    /// The latest committed image of a page (for the writer).
    pub fn read_current(&self, pgno: Pgno) -> Result<PageRef> {
        self.read_page_unlocked(None, pgno)
    }

    /// Register a reader on the latest committed state; returns its header and the
    /// catalog generation of that state.
    pub fn begin_snapshot(&self) -> Result<(Header, u64)> {
        let mut st = lock(&self.state);
        while st.shrink_in_flight {
            st = self.settled.wait(st).unwrap_or_else(|e| e.into_inner());
        }
        self.usable(&st)?;
        let h = st.header.clone();
        *st.readers.entry(h.fcc).or_insert(0) += 1;
        Ok((h, st.catalog_gen))
    }

    /// The catalog generation of the committed state (for the writer, which holds the
    /// writer flag, so it cannot change under it).
    pub fn catalog_gen(&self) -> u64 {
        lock(&self.state).catalog_gen
    }

    /// Unregister a reader.
    pub fn end_snapshot(&self, snapshot: u64) {
        let mut st = lock(&self.state);
        if let Some(n) = st.readers.get_mut(&snapshot) {
            *n -= 1;
            if *n == 0 {
                st.readers.remove(&snapshot);
            }
        }
        Self::prune(&mut st);
    }

    /// Drop the pre-images no reader can need: those of commits every registered reader
    /// already sees. The pre-images of a commit still in flight (tid above the published
    /// FCC) are kept even with no reader registered, because a reader that registers
    /// before the commit publishes its header snapshots the old FCC and must find them;
    /// dropping them let such a reader see the in-flight commit's pinned pages under the
    /// old header (found by `fresh_readers_during_commits_see_whole_transactions`).
    fn prune(st: &mut State) {
        let published = st.header.fcc;
        let oldest = st
            .readers
            .keys()
            .next()
            .filter(|_| st.mutant != crate::journal::Mutant::PruneUnderReaders)
            .map_or(published, |&r| r.min(published));
        st.versions = st.versions.split_off(&(oldest + 1));
        st.free.prune(oldest);
    }

    /// `Concurrency::Occ` validation: the first commit newer than `snapshot` that
    /// replaced or freed one of `pages`, as `(tid, pgno)`. The caller holds a reader
    /// registration at `snapshot`, so every such commit is still recorded (`prune` keeps
    /// the commits newer than the oldest registered reader).
    pub fn touched_since(
        &self,
        snapshot: u64,
        pages: &mut dyn Iterator<Item = Pgno>,
    ) -> Option<(u64, Pgno)> {
        let st = lock(&self.state);
        let mut since = st.versions.range(snapshot + 1..).peekable();
        since.peek()?;
        // Every commit has a `versions` entry (empty if it replaced nothing), so walking
        // them in tid order finds the earliest commit that touched any of `pages`.
        let pages: Vec<Pgno> = pages.collect();
        since.find_map(|(&tid, replaced)| {
            let freed = st.free.freed_in(tid);
            pages
                .iter()
                .copied()
                .filter(|p| replaced.contains_key(p) || freed.is_some_and(|f| f.contains(p)))
                .min()
                .map(|p| (tid, p))
        })
    }

    /// `FreeSpace::TreeWalk`, `Concurrency::Occ`: the lowest free page `take` accepts
    /// that was free at `snapshot` too. A page a commit after the snapshot freed is still
    /// in the trees a transaction on that snapshot sees: it must not reuse it.
    pub fn pick_free_at(&self, snapshot: u64, take: &dyn Fn(Pgno) -> bool) -> Option<Pgno> {
        lock(&self.state).free.pick_at(snapshot, take)
    }

    /// `FreeSpace::TreeWalk`: pages no tree owns that join the free set now (a
    /// concurrent writer that grew the file by them rolled back, and a commit since made
    /// them part of the file).
    pub fn add_free(&self, pages: &[Pgno]) {
        let mut st = lock(&self.state);
        let count = st.header.page_count;
        st.free.add(pages, count);
    }

    /// Read a page as of snapshot `snapshot`.
    pub fn read_at(&self, snapshot: u64, pgno: Pgno) -> Result<PageRef> {
        self.read_page_unlocked(Some(snapshot), pgno)
    }

    /// Make a transaction durable. `header.fcc` is the new tid; `dirty` holds the
    /// transaction's pages (never page 0), trailers stamped unless the journal stamps
    /// them itself (`Journal::stamps_trailers`). `alloc` moves pages between
    /// the DHL free set and the trees (empty in stock modes).
    ///
    /// `spilled`: the pages a stealing transaction wrote before its commit
    /// (`Pager::spill`), unchanged since (`restamp`, counted in the transaction's size) or
    /// no longer its own (`discard`); disjoint from `dirty`.
    ///
    /// `written`: the tag each page's new version carries (the working tid of the
    /// transaction that built it); the commit re-tags them as `header.fcc` where the two
    /// differ (`Concurrency::Occ` and `TwoVto`, whose group commit puts several
    /// transactions, each with its own working tid, into one batch).
    pub fn commit(
        &self,
        header: &Header,
        written: &dyn Fn(Pgno) -> u64,
        dirty: BTreeMap<Pgno, PageRef>,
        alloc: &AllocDelta,
        catalog_changed: bool,
        spilled: &Spilled,
    ) -> Result<()> {
        debug_assert!(!dirty.contains_key(&0));
        let mut st = lock(&self.state);
        self.usable(&st)?;
        // Metadata embedding: a header that differs only in the commit counter is not
        // written (the journal has said it does not need the counter on disk).
        let counter_only = Header {
            fcc: st.header.fcc,
            last_txn_size: st.header.last_txn_size,
            ..header.clone()
        } == st.header;
        let pages_changed = !(dirty.is_empty() && spilled.restamp.is_empty());
        let write_header = !(self.mode.capabilities().embeds_fcc && counter_only && pages_changed);
        // The transaction's size in pages: counting commit's completeness test.
        let txn_size = (dirty.len() + spilled.restamp.len()) as u32 + write_header as u32;
        let header = Header {
            last_txn_size: txn_size,
            ..header.clone()
        };
        let mut pages: Vec<(Pgno, PageRef)> = Vec::with_capacity(dirty.len() + 1);
        if write_header {
            let committed = self.current_locked(&mut st, 0)?;
            let image = self.layout.header_image(&committed, st.header.fcc, &header);
            pages.push((0, image));
        }
        let g = self.geometry();
        // Spilled versions are restamped in the file under the working tag; only a
        // transaction that never spills may commit under another one.
        let spills = !(spilled.restamp.is_empty() && spilled.discard.is_empty());
        for (pgno, img) in dirty {
            let written = written(pgno);
            assert!(
                written == header.fcc || !spills,
                "a transaction that spilled commits under its working tid"
            );
            let img = self.layout.finalize(
                pgno,
                img,
                g,
                Stamp {
                    written,
                    tid: header.fcc,
                    txn_size,
                },
            )?;
            pages.push((pgno, img));
        }
        let header = &header;

        let old_page_count = st.header.page_count;
        // Release-mode check: a tid other than FCC + 1 would either reuse a committed tid
        // (DHL: its versions would mix with this one's and pass the vote) or leave a gap
        // that DHL recovery reads as damage.
        assert_eq!(
            header.fcc,
            st.header.fcc + 1,
            "commit tid must be the committed FCC + 1"
        );
        let mut originals = Vec::new();
        for (pgno, _) in &pages {
            if *pgno < old_page_count {
                originals.push((*pgno, self.current_locked(&mut st, *pgno)?));
            }
        }
        // A commit that shrinks the database (`WriteTxn::clear_all`): the pages past its
        // new end are no page of the new state, so no journal keeps them for readers,
        // the file may be cut back, and a later commit may grow over them. A reader of
        // the longer state keeps their images with the replaced pages' (read here, before
        // anything is recorded, so a failed read leaves no trace); new readers wait until
        // the commit is published (`shrink_in_flight`), so there are no others.
        let shrinks = header.page_count < old_page_count;
        let mut past_end = Vec::new();
        if shrinks && !st.readers.is_empty() && st.mutant != crate::journal::Mutant::ShrinkDropsTail
        {
            for pgno in header.page_count..old_page_count {
                past_end.push((pgno, self.current_locked(&mut st, pgno)?));
            }
        }
        // A page this transaction spilled keeps the pre-image its first spill recorded:
        // the file (and so `originals`) holds the spilled version by now.
        let kept = st.versions.entry(header.fcc).or_default();
        for (pgno, img) in &originals {
            kept.entry(*pgno).or_insert_with(|| img.clone());
        }
        for (pgno, img) in past_end {
            kept.entry(pgno).or_insert(img);
        }
        st.shrink_in_flight = shrinks;
        for (pgno, img) in &pages {
            st.cache.insert(*pgno, img.clone(), true);
        }
        // Spilled pages are rewritten from the file's image, one at a time, with none
        // pinned: readers that miss the cache on them wait until the commit ends.
        let unpinned = spilled.restamp.iter().chain(&spilled.discard);
        let any_unpinned = !(spilled.restamp.is_empty() && spilled.discard.is_empty());
        for &p in unpinned.clone() {
            debug_assert!(pages.binary_search_by_key(&p, |(q, _)| *q).is_err());
            st.cache.remove(p);
            st.in_flight.insert(p);
        }
        st.begin_io();
        drop(st);

        let batch = CommitBatch {
            tid: header.fcc,
            pages: &pages,
            originals: &originals,
            old_page_count,
            new_page_count: header.page_count,
            restamp: &spilled.restamp,
            discard: &spilled.discard,
        };
        let result = self.journal.commit(&batch);

        let mut st = lock(&self.state);
        // `NoSpace`: the journal promises that nothing of the commit was written where a
        // reader or recovery would find it, so the committed state is the one in memory
        // and the handle stays usable (SQLite's SQLITE_FULL). Spilled pages were
        // rewritten in the file: no such promise covers them.
        let failure = match &result {
            // `Busy`: the same promise, from a journal that needed the whole file and
            // found other processes' readers in it (`Gate::whole`).
            Err(Error::NoSpace { .. } | Error::Busy) if !any_unpinned => None,
            Err(e) => Some(e.to_string()),
            Ok(()) => None,
        };
        st.end_io(failure);
        if shrinks {
            st.shrink_in_flight = false;
            self.settled.notify_all();
        }
        if any_unpinned {
            for p in unpinned {
                st.in_flight.remove(p);
            }
            // Only a commit that had pages in flight can have readers waiting; a wake
            // costs a system call, which the common commit should not pay.
            self.settled.notify_all();
        }
        match result {
            Ok(()) => {
                st.header = header.clone();
                st.catalog_gen += u64::from(catalog_changed);
                st.free.commit(header.fcc, alloc);
                for (pgno, _) in &pages {
                    st.cache.unpin(*pgno);
                }
                Self::prune(&mut st);
                Ok(())
            }
            Err(e) => {
                // Old images stay pinned: the file may now hold anything for these pages.
                for (pgno, _) in &pages {
                    st.cache.remove(*pgno);
                }
                for (pgno, img) in &originals {
                    st.cache.insert(*pgno, img.clone(), true);
                }
                st.versions.remove(&header.fcc);
                Err(e)
            }
        }
    }

    /// Take in the commits other processes appended after this pager's last, up to tid
    /// `end` (`Capabilities::appends_beside_readers`, `journal::Appends`), as if they
    /// had been committed here: readers registered before keep their snapshots (each
    /// commit's replaced images are kept as `commit` keeps them), later ones see them.
    /// The caller holds a turn under which other processes only append, and this handle
    /// has no write transaction (`procs`). Returns the tid the pager is at afterwards,
    /// short of `end` if the log holds no more.
    pub fn absorb(&self, end: u64) -> Result<u64> {
        let Some(appends) = self.journal.appends() else {
            return Ok(lock(&self.state).header.fcc);
        };
        let mut st = lock(&self.state);
        self.usable(&st)?;
        let from = st.header.fcc;
        if end <= from {
            return Ok(from);
        }
        debug_assert_eq!(st.phase, Phase::Ready, "absorb beside a commit of ours");
        // A reader that read a page without the lock before this may have read the
        // journal's new image: it must not count (`read_page_unlocked`). Two, so the
        // epoch stays even (no write of ours is under way).
        st.write_epoch += 2;
        for c in appends.absorb(from, end)? {
            // Checked in release builds: a commit taken in at the wrong place would make
            // this handle's next commit reuse a tid, or build on the wrong pages.
            if c.tid != st.header.fcc + 1 || c.old_page_count != st.header.page_count {
                let why = format!(
                    "another process's commit {} from page count {} does not follow this                      picture's commit {} at page count {}",
                    c.tid, c.old_page_count, st.header.fcc, st.header.page_count
                );
                st.poison(why.clone(), true);
                return Err(Error::Poisoned(why));
            }
            let mut header =
                match c.pages.first() {
                    Some((0, p0)) => self.layout.read_header(p0, c.tid).map_err(|reason| {
                        Error::CorruptJournal {
                            path: self.path.clone(),
                            reason: format!("commit {}: page 0: {reason}", c.tid),
                        }
                    })?,
                    _ => st.header.clone(),
                };
            header.fcc = c.tid;
            header.page_count = c.new_page_count;
            let kept = st.versions.entry(c.tid).or_default();
            for (pgno, img) in c.before {
                kept.insert(pgno, img);
            }
            for (pgno, img) in c.pages {
                st.cache.insert(pgno, img, false);
            }
            for pgno in c.new_page_count..c.old_page_count {
                st.cache.remove(pgno);
            }
            st.header = header;
            // Whether it changed the catalog is not recorded: cached catalog records are
            // looked up again.
            st.catalog_gen += 1;
            st.free.commit(c.tid, &AllocDelta::default());
        }
        Self::prune(&mut st);
        Ok(st.header.fcc)
    }

    /// Return once commit `tid` is durable (a journal that shares flushes between
    /// commits syncs here, after the commit was published); a failure poisons the pager.
    /// `next_writers`: writers that were waiting when this one let go, and will commit
    /// shortly.
    pub fn wait_durable(&self, tid: u64, next_writers: usize) -> Result<()> {
        let r = match self.journal.shared_flush() {
            Some(flush) => flush.wait_durable(tid, next_writers),
            // Each commit synced its own: it is durable already.
            None => Ok(()),
        };
        if let Err(e) = &r {
            lock(&self.state).poison(e.to_string(), false);
        }
        r
    }

    /// Flushes the journal shared between commits (`SharedFlush::group_stats`).
    pub fn journal_group_stats(&self) -> crate::GroupStats {
        self.journal
            .shared_flush()
            .map_or_else(Default::default, |f| f.group_stats())
    }

    /// Move logged pages into the database file.
    pub fn checkpoint(&self) -> Result<()> {
        self.checkpoint_with(|j| j.checkpoint())
    }

    /// [`Pager::checkpoint`], then the log's file cut to zero bytes
    /// (`Journal::checkpoint_truncating`).
    pub fn checkpoint_truncating(&self) -> Result<()> {
        self.checkpoint_with(|j| j.checkpoint_truncating())
    }

    fn checkpoint_with(&self, f: impl FnOnce(&dyn Journal) -> Result<()>) -> Result<()> {
        self.check_usable()?;
        let r = f(&*self.journal);
        match &r {
            // The log keeps every page the checkpoint did not get to (`NoSpace`).
            Err(Error::NoSpace { .. }) | Ok(()) => {}
            Err(e) => lock(&self.state).poison(e.to_string(), false),
        }
        r
    }

    /// Clean shutdown (WAL: checkpoint and remove the log). Skipped when poisoned: the
    /// next open's recovery is the only safe way forward then.
    ///
    /// `free_known`: the free set this pager holds is exact (`set_free_pages` ran and
    /// every commit since kept it), so the journal may keep it for the next open.
    pub fn close(&self, free_known: bool) -> Result<()> {
        self.check_usable()?;
        if let Some(keeper) = self.journal.keeps_free() {
            if free_known && self.layout.free_space() == FreeSpace::TreeWalk {
                let free = lock(&self.state).free.pages().clone();
                return keeper.close_keeping_free(&free);
            }
        }
        self.journal.close()
    }

    /// The free pages the last clean close kept, if the file is still as it left them.
    pub fn kept_free_pages(&self) -> Result<Option<BTreeSet<Pgno>>> {
        match self.journal.keeps_free() {
            Some(keeper) => keeper.kept_free_pages(),
            None => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vfs::SimVfs;

    /// A panic while the pager's lock is held poisons the handle: later calls get
    /// `Error::Poisoned` (typed, no second panic), and a reopen works.
    #[test]
    fn a_panic_under_the_lock_poisons_the_handle() {
        let sim = SimVfs::new();
        let cfg = Config::default()
            .vfs(Arc::new(sim.clone()))
            .journal_mode(JournalMode::DHL_CC);
        let path = Path::new("/db/p.db");
        let pager = Arc::new(Pager::open(path, &cfg, crate::tree::create, None).unwrap());
        pager.check_usable().unwrap();
        let p = pager.clone();
        let r = std::thread::spawn(move || {
            let _g = p.state.lock().unwrap();
            panic!("bug while holding the pager lock");
        })
        .join();
        assert!(r.is_err());
        match pager.check_usable() {
            Err(Error::Poisoned(why)) => assert!(why.contains("panicked"), "{why}"),
            other => panic!("expected Poisoned, got {other:?}"),
        }
        assert!(matches!(pager.begin_snapshot(), Err(Error::Poisoned(_))));
        assert!(matches!(pager.close(false), Err(Error::Poisoned(_))));
        drop(pager);
        let again = Pager::open(path, &cfg, crate::tree::create, None).unwrap();
        again.check_usable().unwrap();
    }

    /// A mode's registry capabilities (known before any open) and the parts its opened
    /// journal has say the same thing, so config validation and the test matrices, which
    /// read the first, never disagree with what the pager finds.
    #[test]
    fn every_mode_has_exactly_the_parts_its_capabilities_name() {
        for mode in JournalMode::all() {
            let sim = SimVfs::new();
            let cfg = Config::default()
                .vfs(Arc::new(sim.clone()))
                .journal_mode(mode);
            let pager = Pager::open(Path::new("/db/p.db"), &cfg, crate::tree::create, None)
                .unwrap_or_else(|e| panic!("{mode}: {e}"));
            let (caps, j) = (mode.capabilities(), &pager.journal);
            assert_eq!(caps.steals, j.steal().is_some(), "{mode}: steal");
            assert_eq!(
                caps.intent_map,
                j.keeps_free().is_some(),
                "{mode}: keeps_free"
            );
            assert_eq!(caps.region_backed, j.region().is_some(), "{mode}: region");
            assert_eq!(caps.replays_log, j.log().is_some(), "{mode}: log");
            assert_eq!(
                caps.appends_beside_readers,
                j.appends().is_some(),
                "{mode}: appends"
            );
            // A shared flush makes a commit durable after `commit` returns, which only a
            // mode that still promises durability at acknowledgement may do.
            if j.shared_flush().is_some() {
                assert!(caps.durable_at_ack, "{mode}: shared flush");
            }
            pager.close(false).unwrap();
        }
    }
}
