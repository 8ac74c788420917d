//! Settings chosen when a database is opened.
//!
//! Format settings are stored in the file. `page_size: None` and `journal_mode: None` mean
//! "the file's" (or `DEFAULT_PAGE_SIZE` / `DEFAULT_JOURNAL_MODE` for a new file); `Some`
//! on a file that has another page size, or a mode of another format
//! (`JournalMode::same_format`: modes of one format differ only in policies and open each
//! other's files), is refused (`Error::PageSizeMismatch`, `Error::ModeMismatch`) rather
//! than ignored or converted behind the user's back. An
//! option the file's journal mode does not read (`direct_writes(On)` without direct writes,
//! `wal_prealloc` outside `wal` and `nvlog`) is refused with `Error::Config` for the same
//! reason; each mode lists the options it reads and checks their values
//! (`JournalMode::options`, `journal/options.rs`).

use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::format::header::{valid_page_size, MAX_PAGE_SIZE, MIN_PAGE_SIZE};
use crate::journal::{JournalConfig, JournalMode, WalSync};
use crate::vfs::{OsVfs, Vfs};

/// The mode a new database gets when none is asked for: the sector-granular redo log, one
/// write and one fdatasync per transaction however many pages it changed, durable when
/// `commit` returns (`journal::redo`; chosen by issue 37's measurements, BENCHMARKS.md
/// "A redo log").
pub const DEFAULT_JOURNAL_MODE: JournalMode = JournalMode::REDO;

/// The page size a new database gets when none is asked for.
pub const DEFAULT_PAGE_SIZE: u32 = 4096;

/// How write transactions of one database run beside each other
/// (`docs/CONCURRENCY-DESIGN.md`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Concurrency {
    /// One write transaction at a time: `begin_write` waits for the writer before it
    /// (`try_begin_write` fails with `Busy`). Readers never wait. The default.
    #[default]
    Serial,
    /// Optimistic, as SQLite's `BEGIN CONCURRENT`: any number of write transactions run
    /// at once on private page copies over the snapshot they began at; `commit` checks,
    /// one transaction at a time, that no commit since that snapshot changed (wrote or
    /// freed) a page this one read or wrote, and fails with `Error::Conflict` if one did
    /// (roll back and run the transaction again: `Database::write` does). Committed
    /// histories are serializable in commit order, at page granularity. Needs a journal
    /// mode whose pages can take a version's tag at commit (the DHL and IPS modes); such
    /// transactions never spill (`cache_spill` does not apply to them).
    Occ,
    /// Two-version timestamp ordering with the AFUW rule (the IPS + 2VTO paper): write
    /// transactions run at once; the first to change a page locks it until it ends, and
    /// another that needs the page fails with `Error::Conflict` at that write — unless it
    /// is the oldest live transaction, which takes the lock and makes the holder fail.
    /// A transaction also fails if a commit since its snapshot changed a page it is about
    /// to change. Commits happen in start order (a commit waits for older transactions).
    /// Reads see the snapshot at the start: snapshot isolation, not serializable (write
    /// skew is possible). `Database::write` replays a failed transaction; with
    /// `forced_sleep` it first waits until it is the oldest, so it cannot fail twice.
    /// Same mode requirements as `Occ`.
    TwoVto { forced_sleep: bool },
}

/// Database settings. Build with `Config::default()` and the chained setters.
#[derive(Clone, Debug)]
pub struct Config {
    /// File system to use (real files by default; `SimVfs` in tests).
    pub vfs: Arc<dyn Vfs>,
    /// Journal mode (see module docs).
    pub journal_mode: Option<JournalMode>,
    /// Page size (see module docs): a power of two in 512..=65536; None (the default)
    /// means the file's, or `DEFAULT_PAGE_SIZE` for a new file.
    pub page_size: Option<u32>,
    /// Create the file if it does not exist. Default true.
    pub create: bool,
    /// Pages kept in the shared cache. Default 2000 (8 MiB at 4 KiB pages).
    pub cache_pages: usize,
    /// Steal, in journal modes that can (`Capabilities::steals`: the DHL and IPS modes): a
    /// write transaction holding more changed pages than the spill limit writes them to
    /// the file as uncommitted versions and drops them from memory, so a transaction
    /// bigger than the cache runs in bounded memory (SQLite's `cache_spill`). Readers
    /// never see those versions, and a crash or a rollback drops them. Default true.
    /// Other modes keep every changed page in memory until commit.
    pub cache_spill: bool,
    /// The spill limit in pages (at least 1); None (the default) means `cache_pages`.
    pub spill_pages: Option<usize>,
    /// Grow the file by this many zero-filled, synced pages at a time (0 = one page at a
    /// time, as SQLite does). None (the default): 64, except 0 for a mode whose commits go
    /// to a memory region (`nvlog`; see [`Config::chunk_pages_for`]).
    pub chunk_pages: Option<u32>,
    /// Journal settings (WAL sync, checkpoint interval, size limit, preallocation).
    pub journal: JournalConfig,
    /// B+tree: borrow from a sibling on underflow when a merge does not fit. Default true.
    pub redistribute: bool,
    /// How write transactions run beside each other (see [`Concurrency`]). Default
    /// `Serial`.
    pub concurrency: Concurrency,
    /// Group commit for concurrent writers (`Concurrency::Occ` and `TwoVto`): commits
    /// that validate while another commit's flush is under way wait for it and are then
    /// written and synced together, as one transaction on disk (one fdatasync for the
    /// group; a crash keeps or drops the group whole, so commit order is kept). A
    /// commit still returns only once it is durable. None (the default) means on for
    /// concurrent writers; `Some(false)` flushes every commit alone (the ablation).
    /// `Some(true)` with `Concurrency::Serial` is refused: one writer at a time leaves
    /// nothing to group.
    pub group_commit: Option<bool>,
    /// How long a commit that would flush alone first waits for others to join its
    /// group (PostgreSQL's `commit_delay`). Default 0: flush at once; groups still form
    /// from the commits that arrive during a flush. Needs group commit.
    pub group_commit_delay: Duration,
    /// Open without ever writing: files are opened read-only, take no lock, and recovery
    /// runs on a private in-memory copy of whatever it would change (`vfs::OverlayVfs`),
    /// so the database is seen as recovery would leave it while every file stays
    /// byte-identical. Write transactions are refused with `Error::ReadOnly`; a missing
    /// file is an error (never created). Default false.
    pub read_only: bool,
    /// How long opening the file or starting a transaction waits while another process
    /// has its turn on the database (`procs`) before it fails: `Error::Locked` at open,
    /// `Error::Busy` at a transaction. Default 5 s. SQLite's `busy_timeout` (the drop-in
    /// sets 0 and lets SQLite's busy handler do the waiting, as stock SQLite's does).
    pub busy_timeout: Duration,
    /// How long a commit that must write more than its record waits for other processes'
    /// readers to leave, in a mode whose commits append beside them
    /// (`Capabilities::appends_beside_readers`: a full log to flush, a record too big for
    /// it): a read transaction in another process held open that long makes the commit
    /// fail with `Error::Busy`, nothing of it written. Default 5 s, whatever
    /// `busy_timeout` says (the drop-in's 0 is for taking a turn, which SQLite's busy
    /// handler retries; a commit cannot be retried that way).
    pub flush_wait: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            vfs: Arc::new(OsVfs::new()),
            journal_mode: None,
            page_size: None,
            create: true,
            cache_pages: 2000,
            cache_spill: true,
            spill_pages: None,
            chunk_pages: None,
            journal: JournalConfig::default(),
            redistribute: true,
            concurrency: Concurrency::Serial,
            group_commit: None,
            group_commit_delay: Duration::ZERO,
            read_only: false,
            busy_timeout: Duration::from_secs(5),
            flush_wait: Duration::from_secs(5),
        }
    }
}

/// Builder setters: each `name(arg: T) => field = value;` becomes
/// `pub fn name(mut self, arg: T) -> Self`, storing `value` in `self.field`.
macro_rules! setters {
    ($($(#[$meta:meta])* $name:ident($arg:ident: $ty:ty) => $($field:ident).+ = $value:expr;)*) => {
        $(
            $(#[$meta])*
            pub fn $name(mut self, $arg: $ty) -> Self {
                self.$($field).+ = $value;
                self
            }
        )*
    };
}

impl Config {
    setters! {
        /// The file system the database lives on (default the OS's).
        vfs(vfs: Arc<dyn Vfs>) => vfs = vfs;
        /// The journal mode a new file gets (an existing file keeps its own).
        journal_mode(mode: JournalMode) => journal_mode = Some(mode);
        /// The page size a new file gets.
        page_size(n: u32) => page_size = Some(n);
        /// Create the file if it does not exist (default true).
        create(yes: bool) => create = yes;
        /// Pages kept in the shared cache (default 2000).
        cache_pages(n: usize) => cache_pages = n;
        /// The growth chunk in pages (see [`Config::chunk_pages_for`]).
        chunk_pages(n: u32) => chunk_pages = Some(n);
        /// WAL: when a commit syncs.
        wal_sync(s: WalSync) => journal.wal_sync = s;
        /// Log modes: checkpoint once the log holds this many frames.
        wal_autocheckpoint(frames: u32) => journal.wal_autocheckpoint = frames;
        /// After a checkpoint or journal reset, truncate the side file to at most this many
        /// bytes (None: leave it). SQLite's `journal_size_limit`.
        journal_size_limit(bytes: Option<u64>) => journal.journal_size_limit = bytes;
        /// WAL: pre-size and zero-fill the log to the checkpoint interval.
        wal_prealloc(yes: bool) => journal.wal_prealloc = yes;
        /// Modes with direct page writes (the counting modes, `waldio`): whether page writes
        /// use `O_DIRECT` (default `Auto`).
        direct_writes(d: crate::journal::DirectWrites) => journal.direct_writes = d;
        /// Counting modes: the smallest write-intent region, in pages (a power of two up to
        /// 65536; default 4). See `docs/DHL-DESIGN.md`.
        intent_region_pages(n: u32) => journal.intent_region_pages = Some(n);
        /// Counting modes: the most crash recovery scans, in MiB (at least 1; default 16).
        /// Write-intent marks accumulate while they span at most this much, so a working
        /// set that fits commits with one flush; recovery after an unclean shutdown reads
        /// up to this much. See `docs/DHL-DESIGN.md`.
        intent_scan_mib(mib: u32) => journal.intent_scan_mib = Some(mib);
        /// Counting commit (`dhl-cc`, `ips`, the MVBT modes): a transaction that writes at
        /// least `n` pages, page 0 among them, commits in order: its other pages, a sync, then
        /// its header slot in page 0 and a second sync (default 64; 0 never). It pays one
        /// flush more, and in return a crash is recovered from page 0 alone: an unfinished
        /// such transaction is rolled back without reading its pages, whose versions are
        /// invalidated before the next write instead (`docs/DHL-DESIGN.md`).
        ordered_commit_pages(n: u32) => journal.ordered_commit_pages = Some(n);
        /// nvlog: the region file. Default `/dev/shm/inpage-<hash of the database path>-nvlog`,
        /// which survives a process crash but not a reboot or power cut; a file on a
        /// persistent-memory (DAX) mount makes acknowledged commits survive power loss too.
        nvlog_region(path: impl Into<std::path::PathBuf>) =>
            journal.nvlog_region = Some(path.into());
        /// nvlog: bytes of the region's record ring (default 4 MiB; at least 64 KiB).
        nvlog_ring_bytes(n: u32) => journal.nvlog_ring_bytes = Some(n);
        /// nvlog: who flushes records into the database (default a background thread).
        nvlog_flush(f: crate::journal::NvlogFlush) => journal.nvlog_flush = f;
        /// nvlog: whether a flush writes the pages past the database's committed end (the
        /// pages no committed state references yet: new leaves of appends, large values)
        /// in place, once, synced before the log transaction that links them in (default
        /// true). False logs them like every other page, so the checkpoint writes each a
        /// second time: the ablation `inpage bench nvlog` measures as `nvlog-logged`.
        nvlog_direct_pages(yes: bool) => journal.nvlog_direct_pages = yes;
        /// Torture harness only (`mutants` cargo feature): run a deliberately broken
        /// commit/recovery variant.
        #[cfg(feature = "mutants")]
        #[doc(hidden)]
        mutant(m: crate::journal::Mutant) => journal.mutant = m;
        /// Whether write transactions may spill (see the field's docs).
        cache_spill(yes: bool) => cache_spill = yes;
        /// Spill once a write transaction holds more than `n` changed pages.
        spill_pages(n: usize) => spill_pages = Some(n);
        /// Borrow from a sibling on underflow when a merge does not fit (default true).
        redistribute(yes: bool) => redistribute = yes;
        /// How write transactions run beside each other (see [`Concurrency`]).
        concurrency(c: Concurrency) => concurrency = c;
        /// Group commit for concurrent writers on or off (see the field's docs).
        group_commit(on: bool) => group_commit = Some(on);
        /// How long a lone commit waits for others to join its group (see the field's docs).
        group_commit_delay(delay: Duration) => group_commit_delay = delay;
        /// Open read-only (see the field's docs).
        read_only(yes: bool) => read_only = yes;
        /// How long to wait for another process's turn (see the field's docs).
        busy_timeout(wait: Duration) => busy_timeout = wait;
        /// How long a commit waits for other processes' readers (see the field's docs).
        flush_wait(wait: Duration) => flush_wait = wait;
    }

    /// The growth chunk a database of `mode` uses. Chunks exist so that a commit's
    /// fdatasync finds the file's size already durable and journals no file-system
    /// metadata; they cost a write of zeros ahead of every page. A region-backed mode
    /// (`nvlog`) syncs its database once per batch of many commits (its new pages, at a
    /// flush) and at checkpoints of its inner log, so there the journaled size change is
    /// paid rarely and the zeros would be a second write of every new page (the
    /// variant `nvlog-chunk64` of `inpage bench nvlog` measures chunks there).
    pub fn chunk_pages_for(&self, mode: crate::JournalMode) -> u32 {
        self.chunk_pages
            .unwrap_or(if mode.capabilities().region_backed {
                0
            } else {
                64
            })
    }
    /// The earlier name of [`Config::direct_writes`].
    #[deprecated(
        note = "renamed `direct_writes`: it applies to every mode with direct page writes"
    )]
    pub fn dhl_direct(self, d: crate::journal::DirectWrites) -> Self {
        self.direct_writes(d)
    }
    /// The earlier name of [`Config::intent_region_pages`].
    #[deprecated(note = "renamed `intent_region_pages`")]
    pub fn dhl_intent_region_pages(self, n: u32) -> Self {
        self.intent_region_pages(n)
    }
    /// The earlier name of [`Config::ordered_commit_pages`].
    #[deprecated(note = "renamed `ordered_commit_pages`")]
    pub fn dhl_ordered_commit_pages(self, n: u32) -> Self {
        self.ordered_commit_pages(n)
    }
    /// The number of changed pages a write transaction of `mode` keeps in memory before
    /// it spills them; None if it never does.
    pub(crate) fn spill_limit(&self, mode: JournalMode) -> Option<usize> {
        (self.cache_spill && mode.capabilities().steals && self.concurrency == Concurrency::Serial)
            .then(|| self.spill_pages.unwrap_or(self.cache_pages))
    }

    /// The page size a new file gets.
    pub(crate) fn new_file_page_size(&self) -> u32 {
        self.page_size.unwrap_or(DEFAULT_PAGE_SIZE)
    }

    /// Refuse options the file's journal mode would ignore (module docs).
    pub(crate) fn check_against(&self, mode: JournalMode) -> Result<()> {
        crate::journal::check_options(mode, &self.journal)?;
        let grouping = self.concurrency != Concurrency::Serial && self.group_commit != Some(false);
        if self.group_commit == Some(true) && self.concurrency == Concurrency::Serial {
            return Err(Error::Config(
                "group_commit needs concurrent writers (concurrency Occ or TwoVto); Serial commits one transaction at a time".into(),
            ));
        }
        if !self.group_commit_delay.is_zero() && !grouping {
            return Err(Error::Config(format!(
                "group_commit_delay is set, but commits are not grouped (concurrency {:?}, group_commit {:?})",
                self.concurrency, self.group_commit
            )));
        }
        if self.concurrency != Concurrency::Serial && !self.read_only {
            let layout = mode.layout();
            if !layout.retags() || layout.free_space() != crate::page::FreeSpace::TreeWalk {
                return Err(Error::Config(format!(
                    "concurrency {:?} needs pages whose versions take their commit's tag and free space found by walking the trees (the DHL and IPS modes); journal mode {mode} has not",
                    self.concurrency
                )));
            }
        }
        Ok(())
    }

    /// Check every value; called by `Database::open`.
    pub fn validate(&self) -> Result<()> {
        if let Some(ps) = self.page_size.filter(|&ps| !valid_page_size(ps)) {
            return Err(Error::Config(format!(
                "page_size {ps} must be a power of two in {MIN_PAGE_SIZE}..={MAX_PAGE_SIZE}"
            )));
        }
        if self.cache_pages < 16 {
            return Err(Error::Config(format!(
                "cache_pages {} is below the minimum of 16",
                self.cache_pages
            )));
        }
        if self.spill_pages == Some(0) {
            return Err(Error::Config(
                "spill_pages must be at least 1 (cache_spill(false) turns spilling off)".into(),
            ));
        }
        if let Some(n) = self.chunk_pages.filter(|&n| n > 1 << 20) {
            return Err(Error::Config(format!(
                "chunk_pages {} is above the maximum of {}",
                n,
                1 << 20
            )));
        }
        Ok(())
    }
}
