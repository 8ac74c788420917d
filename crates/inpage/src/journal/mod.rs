//! Commit protocols ("journal modes") plugged into the pager.
//!
//! Invariants every mode keeps:
//! - `commit` either makes the whole batch durable (as far as the mode's capabilities
//!   promise: `nvlog` makes it durable in its memory region) and returns Ok, or returns Err; after
//!   Err nothing about the batch is promised, and the pager poisons the database until it
//!   is reopened and recovered (a failed fsync may have dropped any unsynced write).
//! - `read_page` returns the latest *committed* image of a page (the database file, or a
//!   newer frame in a log), never a half-applied one, for pages no commit is writing
//!   (those stay pinned in the pager's cache). The pager calls it without its lock, so a
//!   commit may start writing the page during the call: the result (a torn image or an
//!   error) is then discarded by the pager, and `read_page` must only stay memory-safe and
//!   side-effect free.
//! - Recovery runs inside `open_*` before the pager reads the header, so the pager only
//!   ever sees a consistent file.
//! - A mode only touches its own side files (`-journal`, `-wal`); adding a mode never
//!   edits another. (`nvlog` flushes into a `wal` journal it owns, so it shares that
//!   mode's `-wal` format; `wal` gained `sync_log` for it, one sync for many commits.)

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, AtomicU32, Ordering};
use std::sync::Arc;

use crate::error::{Pgno, Result};
use crate::format::header::{Header, ModeId};
use crate::page::{Layout, PageRef};
use crate::vfs::Vfs;

mod counting;
mod dash;
mod dbfile;
mod frame_log;
mod ips;
mod mvbt;
mod nvlog;
mod off;
mod options;
mod redo;
mod ring_file;
mod rollback;
#[cfg(test)]
pub(crate) mod testutil;
#[cfg(any(test, feature = "toy-mode"))]
mod toy;
mod util;
mod wal;
mod waldio;

pub use crate::group::GroupStats;
pub use dbfile::{grown_len, DbFile};
pub(crate) use options::check as check_options;
pub use options::JournalOption;
// Where the journal code has always found it; declared with the other planted bugs.
pub use crate::seam::Mutant;
pub(crate) use rollback::recover_hot_journal;
#[cfg(test)]
pub(crate) use {off::OffJournal, rollback::RollbackJournal, wal::Wal};

/// A journal mode: a handle on one entry of the mode registry ([`JournalMode::ALL`]).
///
/// A mode is a commit protocol, the page layout its trees use, and the capabilities the
/// pager and the tools may rely on; the entry lives in the mode's own module, so adding a
/// mode is that module plus one registry line (see `docs/ADDING-A-MODE.md`). Equality and
/// hashing go by the code stored in the file header, which the registry keeps unique.
#[derive(Clone, Copy)]
pub struct JournalMode(&'static ModeSpec);

/// What a journal mode declares about itself in the registry.
pub(crate) struct ModeSpec {
    /// The name used on the command line, in reports and in `PRAGMA`-like settings.
    pub name: &'static str,
    /// Byte stored in the header of a file this mode creates (`docs/FORMAT.md`): the
    /// mode the file opens in when none is asked for. Unique; never reused.
    pub code: u8,
    /// The code of the first mode of this mode's format. Modes of one format (a commit
    /// protocol over a page layout) differ only in policies — when the header page is
    /// written, how a log is synced, how a version is built — and open each other's
    /// files; the header's code is then a default, not a gate (`docs/FORMAT.md`).
    pub format: u8,
    /// One line for `--help` and `inspect`.
    pub summary: &'static str,
    /// The page layout of the mode's tree and overflow pages.
    pub layout: Layout,
    pub caps: Capabilities,
    /// The options of `Config` the mode's code reads beyond the general ones; any other
    /// that a configuration asks for is refused at open (`options`).
    pub options: &'static [JournalOption],
    /// Check the values of `options` (before anything is opened).
    pub check_options: fn(&JournalConfig) -> Result<()>,
    /// Open the mode's journal on a database file, running its recovery.
    pub open: fn(JournalCtx, JournalMode) -> Result<Opened>,
}

/// What a journal mode can do, declared once in the registry so the pager, the tools and
/// the test matrices ask the mode instead of matching on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Capabilities {
    /// A crash can never leave a half-applied transaction.
    pub atomic: bool,
    /// Metadata embedding: the header page may be left out of a commit that changes
    /// nothing but the commit counter (the mode does not need the counter on disk, or
    /// recovers it from the pages).
    pub embeds_fcc: bool,
    /// Recovery establishes the commit counter from the pages themselves; the header on
    /// disk may name a transaction recovery rolls back.
    pub recovers_fcc: bool,
    /// Page writes (`redo`: its ring's records) may bypass the page cache (`O_DIRECT`,
    /// `Config::direct_writes`).
    pub direct_writes: bool,
    /// Committed pages may live in a log (a side file) that recovery replays into the
    /// database, so until then the file may be shorter than its header says.
    pub replays_log: bool,
    /// Opens are bounded by a clean-shutdown mark and a write-intent map (DHL:
    /// `Config::intent_region_pages` applies).
    pub intent_map: bool,
    /// Side files next to the database (`<db>-<suffix>`), for tools and tests.
    pub side_files: &'static [&'static str],
    /// Steal: a transaction may write its uncommitted pages to the database file before
    /// it commits ([`Steal::spill`]), so one bigger than the page cache runs in bounded
    /// memory. Needs pages that keep the committed version beside the new one, which
    /// readers pick by tid, and a recovery that drops versions of an unfinished
    /// transaction.
    pub steals: bool,
    /// An acknowledged commit survives a power cut even on a device with a volatile
    /// write cache. False for a mode that skips the flush at commit (`waldio-ns`): its
    /// commits are durable only where a completed write is (no volatile cache, e.g.
    /// eMMC reliable write), or at the next checkpoint; a cut keeps a prefix of them.
    pub durable_at_ack: bool,
    /// An acknowledged commit survives the process being killed: its bytes were handed
    /// to the OS before the commit returned. False for a mode that acknowledges commits
    /// from a buffer in process memory (`waldio-gs`): a kill loses those too, a suffix of
    /// the acknowledged ones, never half of one.
    pub survives_process_crash: bool,
    /// Acknowledged commits live in a memory-mapped region (`Config::nvlog_region`)
    /// until a flush moves them into the file: they survive a process crash always, and
    /// a power cut exactly when the region does (a file on persistent memory; the
    /// default under `/dev/shm` does not). `durable_at_ack` is false for such a mode
    /// because the engine cannot tell what the region's medium is.
    pub region_backed: bool,
    /// A commit only appends a record to a log in a file every process reads (`redo`'s
    /// ring), so readers in other processes go on beside a writer (`procs`' append
    /// turns) and catch up on its records instead of opening the file again
    /// (`Journal::absorb`). Anything else the mode writes (a flush, a checkpoint) takes
    /// the whole file.
    pub appends_beside_readers: bool,
}

/// A journal as opened: the protocol, what its recovery did, and what it established.
pub(crate) struct Opened {
    pub journal: Box<dyn Journal>,
    pub recovery: RecoveryReport,
    /// Modes that recover the commit counter from the pages: the FCC recovery settled on
    /// (the pager uses it instead of the header's).
    pub fcc: Option<u64>,
    /// Whether page writes bypass the page cache for this open.
    pub direct_writes: bool,
}

impl Opened {
    /// A journal whose recovery establishes nothing beyond its report.
    pub(crate) fn plain(journal: impl Journal + 'static, recovery: RecoveryReport) -> Opened {
        Opened {
            journal: Box::new(journal),
            recovery,
            fcc: None,
            direct_writes: false,
        }
    }
}

// The registry. One `mod` line per journal module above, one entry per mode here; the
// order is the stable order of `ALL` (help texts, test matrices, reports).
impl JournalMode {
    /// Every mode, in a stable order: the registry.
    pub const ALL: &'static [JournalMode] = &[
        JournalMode::OFF,
        JournalMode::OFF_OPT,
        JournalMode::DELETE,
        JournalMode::TRUNCATE,
        JournalMode::PERSIST,
        JournalMode::WAL,
        JournalMode::DHL_TC,
        JournalMode::DHL_CC,
        JournalMode::DHL_CC_HEADER,
        JournalMode::IPS,
        JournalMode::IPS_HEADER,
        JournalMode::MVBT,
        JournalMode::LS_MVBT,
        JournalMode::LS_MVBT_NO_SPLIT,
        JournalMode::LS_MVBT_NO_RESERVE,
        JournalMode::LS_MVBT_NO_GC,
        JournalMode::LS_MVBT_HEADER,
        JournalMode::DASH,
        JournalMode::WALDIO,
        JournalMode::WALDIO_NS,
        JournalMode::WALDIO_GC,
        JournalMode::WALDIO_GS,
        JournalMode::NVLOG,
        JournalMode::REDO,
        #[cfg(any(test, feature = "toy-mode"))]
        JournalMode::TOY,
    ];
    /// Write pages in place, one fdatasync, no atomicity promised.
    pub const OFF: JournalMode = JournalMode(&off::OFF);
    /// `off` with metadata embedding (the DHL paper's OFF_OPT baseline).
    pub const OFF_OPT: JournalMode = JournalMode(&off::OFF_OPT);
    /// Rollback journal, deleted at commit (SQLite DELETE).
    pub const DELETE: JournalMode = JournalMode(&rollback::DELETE);
    /// Rollback journal, truncated at commit (SQLite TRUNCATE).
    pub const TRUNCATE: JournalMode = JournalMode(&rollback::TRUNCATE);
    /// Rollback journal, header zeroed at commit (SQLite PERSIST).
    pub const PERSIST: JournalMode = JournalMode(&rollback::PERSIST);
    /// Write-ahead log (SQLite WAL).
    pub const WAL: JournalMode = JournalMode(&wal::WAL);
    /// Doubleheader logging, traditional commit.
    pub const DHL_TC: JournalMode = JournalMode(&counting::DHL_TC);
    /// Doubleheader logging, counting commit with metadata embedding (the default).
    pub const DHL_CC: JournalMode = JournalMode(&counting::DHL_CC);
    /// Counting commit without metadata embedding.
    pub const DHL_CC_HEADER: JournalMode = JournalMode(&counting::DHL_CC_HEADER);
    /// In-page shadowing pages under the DHL counting commit.
    pub const IPS: JournalMode = JournalMode(&ips::IPS);
    /// In-page shadowing, the FCC in the header page with every commit.
    pub const IPS_HEADER: JournalMode = JournalMode(&ips::IPS_HEADER);
    /// Multi-version B-tree pages (life spans) under the DHL counting commit.
    pub const MVBT: JournalMode = JournalMode(&mvbt::MVBT);
    /// Lazy-split multi-version B-tree, every optimization on.
    pub const LS_MVBT: JournalMode = JournalMode(&mvbt::LS_MVBT);
    /// `ls-mvbt` with version splits (ablation).
    pub const LS_MVBT_NO_SPLIT: JournalMode = JournalMode(&mvbt::LS_MVBT_NO_SPLIT);
    /// `ls-mvbt` without reserved buffer space (ablation).
    pub const LS_MVBT_NO_RESERVE: JournalMode = JournalMode(&mvbt::LS_MVBT_NO_RESERVE);
    /// `ls-mvbt` without lazy garbage collection (ablation).
    pub const LS_MVBT_NO_GC: JournalMode = JournalMode(&mvbt::LS_MVBT_NO_GC);
    /// `ls-mvbt` with the FCC in the header page (ablation of metadata embedding).
    pub const LS_MVBT_HEADER: JournalMode = JournalMode(&mvbt::LS_MVBT_HEADER);
    /// Database shadowing: two files alternate, one fdatasync per commit.
    pub const DASH: JournalMode = JournalMode(&dash::DASH);
    /// Write-ahead log for direct I/O: page-sized frames, one aligned write and one
    /// fdatasync per commit.
    pub const WALDIO: JournalMode = JournalMode(&waldio::WALDIO);
    /// `waldio` without the fdatasync at commit (WALDIO's "no sync"): atomic, durable at
    /// acknowledgement only on a device without a volatile write cache.
    pub const WALDIO_NS: JournalMode = JournalMode(&waldio::WALDIO_NS);
    /// `waldio` with group commit: a commit writes its frames and lets the next writer
    /// in, then returns once an fdatasync that several commits may share covers it.
    pub const WALDIO_GC: JournalMode = JournalMode(&waldio::WALDIO_GC);
    /// `waldio` with group synchronization (WALDIO's "group sync"): commits are
    /// acknowledged from a 16 KiB frame buffer, written and synced when it fills —
    /// atomic, not durable at acknowledgement.
    pub const WALDIO_GS: JournalMode = JournalMode(&waldio::WALDIO_GS);
    /// xLog: a commit appends its redo record to a ring in a memory-mapped region and
    /// returns without a sync; a flusher moves batches into the database with one
    /// fdatasync each. Survives process crashes; power loss only on a persistent region.
    pub const NVLOG: JournalMode = JournalMode(&nvlog::NVLOG);
    /// Sector-granular redo log: a commit appends the changed byte runs of its pages to
    /// a ring file beside the database with one write and one fdatasync; a background
    /// flusher moves batches into the database. Durable at acknowledgement.
    pub const REDO: JournalMode = JournalMode(&redo::REDO);
    /// The `docs/ADDING-A-MODE.md` walk-through (test builds and `toy-mode` only).
    #[cfg(any(test, feature = "toy-mode"))]
    pub const TOY: JournalMode = JournalMode(&toy::TOY);
}

impl JournalMode {
    /// Every mode, in registry order.
    pub fn all() -> impl Iterator<Item = JournalMode> {
        JournalMode::ALL.iter().copied()
    }

    /// The name used on the command line and in reports.
    pub const fn name(self) -> &'static str {
        self.0.name
    }

    /// One line saying what the mode does.
    pub fn summary(self) -> &'static str {
        self.0.summary
    }

    /// Parse a name (case-insensitive).
    pub fn from_name(s: &str) -> Option<JournalMode> {
        JournalMode::all().find(|m| m.name().eq_ignore_ascii_case(s.trim()))
    }

    /// Code stored in the header byte.
    pub fn code(self) -> u8 {
        self.0.code
    }

    /// Inverse of `code`.
    pub fn from_code(c: u8) -> Option<JournalMode> {
        JournalMode::all().find(|m| m.code() == c)
    }

    /// The id a file header stores for this mode (the mode that created the file: what it
    /// opens in when no mode is asked for).
    pub fn id(self) -> ModeId {
        ModeId(self.0.code)
    }

    /// The first mode of this mode's format. Modes of one format (a commit protocol over a
    /// page layout) differ only in policies — when the header page is written, how the
    /// log is synced, how a version is built — so each opens the others' files.
    pub fn format(self) -> JournalMode {
        JournalMode::from_code(self.0.format).expect("a mode's format is a registered mode")
    }

    /// Whether files of `self` and `other` are in one format (each opens the other's).
    pub fn same_format(self, other: JournalMode) -> bool {
        self.0.format == other.0.format
    }

    /// The mode a file header names, if this build has it.
    pub fn from_id(id: ModeId) -> Option<JournalMode> {
        JournalMode::from_code(id.0)
    }

    /// [`JournalMode::from_id`], or the error a file naming an unknown mode gets.
    pub fn of_header(h: &Header) -> std::result::Result<JournalMode, String> {
        JournalMode::from_id(h.mode).ok_or_else(|| format!("unknown {}", h.mode))
    }

    /// What the mode can do.
    pub fn capabilities(self) -> Capabilities {
        self.0.caps
    }

    /// Whether handles in several processes can have the file open at once, taking turns
    /// (module `procs`): every acknowledged commit is in files every process finds (not
    /// in process memory alone, nor in a memory region named after the path as one
    /// process spelled it). A handle of another mode keeps the file to itself for its
    /// life, and a second one waits, then gets `Error::Locked`.
    pub fn shares_between_processes(self) -> bool {
        self.0.caps.survives_process_crash && !self.0.caps.region_backed
    }

    /// The options of `Config` this mode reads beyond the general ones; a configuration
    /// asking for another is refused at open.
    pub fn options(self) -> &'static [JournalOption] {
        self.0.options
    }

    /// Whether a crash can never leave a half-applied transaction.
    pub fn promises_atomicity(self) -> bool {
        self.0.caps.atomic
    }

    /// Name of the page layout the mode's trees use (`stock`, `dhl`, `ips`).
    pub fn layout_name(self) -> &'static str {
        self.0.layout.name()
    }

    /// Whether the mode's files keep their free pages in an on-disk free list (the
    /// header's `freelist_head`); otherwise the free pages are those no tree owns.
    pub fn keeps_free_list(self) -> bool {
        self.0.layout.free_space() == crate::page::FreeSpace::PageList
    }

    /// Bytes at the end of each page (before the trailer) the mode's layout reserves
    /// for its journal: 0, or the `waldio` modes' embedded frame header.
    pub fn reserved_tail(self) -> usize {
        self.0.layout.reserved_tail()
    }

    /// The page layout the mode's trees use.
    pub(crate) fn layout(self) -> Layout {
        self.0.layout
    }

    /// Open this mode's journal (recovery included).
    pub(crate) fn open_journal(self, ctx: JournalCtx) -> Result<Opened> {
        (self.0.open)(ctx, self)
    }
}

impl PartialEq for JournalMode {
    fn eq(&self, other: &Self) -> bool {
        self.0.code == other.0.code
    }
}

impl Eq for JournalMode {}

impl std::hash::Hash for JournalMode {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.0.code.hash(h)
    }
}

impl std::fmt::Debug for JournalMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::fmt::Display for JournalMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// WAL synchronous setting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WalSync {
    /// fdatasync the WAL at every commit: durable and atomic.
    Full,
    /// No sync at commit (only at checkpoint): atomic, but the newest commits may be lost.
    Normal,
}

/// What a database of `mode` at `db_path` keeps beside its file: the side files
/// (`Capabilities::side_files`) and, for a region-backed mode using the default region
/// (whose name comes from `db_path`), that region. A new database must start without them:
/// left by an earlier database at this path, they would be replayed into the new one or
/// make it refuse to open. A configured region is not listed: it may be shared by
/// mistake, and is judged by the identity it carries instead.
pub(crate) fn stale_state(
    mode: JournalMode,
    db_path: &Path,
    config: &JournalConfig,
) -> (Vec<PathBuf>, Option<PathBuf>) {
    let caps = mode.capabilities();
    let files = caps
        .side_files
        .iter()
        .map(|s| side_path(db_path, s))
        .collect();
    let region = (caps.region_backed && config.nvlog_region.is_none())
        .then(|| config.nvlog_region_for(db_path));
    (files, region)
}

impl JournalConfig {
    /// nvlog: the region a database at `db_path` uses with these settings (`nvlog_region`,
    /// or the default under `/dev/shm`).
    pub fn nvlog_region_for(&self, db_path: &Path) -> PathBuf {
        self.nvlog_region
            .clone()
            .unwrap_or_else(|| nvlog::default_region_path(db_path))
    }

    /// The mutant in force: always `Mutant::None` unless the crate is built with the
    /// `mutants` feature, so a normal build compiles the broken variants away.
    pub(crate) fn mutant(&self) -> Mutant {
        if cfg!(feature = "mutants") {
            self.mutant
        } else {
            Mutant::None
        }
    }
}

/// Settings a journal needs.
#[derive(Clone, Debug)]
pub struct JournalConfig {
    /// WAL: sync setting.
    pub wal_sync: WalSync,
    /// WAL: checkpoint after a commit once the WAL holds at least this many frames
    /// (0 = only on close / explicit checkpoint).
    pub wal_autocheckpoint: u32,
    /// After a checkpoint or journal reset, truncate the side file to at most this many
    /// bytes (None = leave it). SQLite's `journal_size_limit`.
    pub journal_size_limit: Option<u64>,
    /// WAL: pre-size and zero-fill the WAL to the checkpoint interval (the papers'
    /// WAL_OPT), so appends are non-allocating overwrites.
    pub wal_prealloc: bool,
    /// Counting modes and `waldio`: how page writes reach the file (see
    /// [`DirectWrites`]).
    pub direct_writes: DirectWrites,
    /// Counting modes: the smallest region of the write-intent map, in pages (a power of two; None:
    /// 4). Smaller regions bound crash recovery's scan more tightly and cost a marking
    /// flush more often.
    pub intent_region_pages: Option<u32>,
    /// Counting modes: the most a crash recovery scans, in MiB (None: 16; at least 1).
    /// Marks accumulate, regions coarsening, while they span at most this much, so a
    /// working set inside it commits without a marking flush; a larger one pays one when
    /// it leaves the marked regions.
    pub intent_scan_mib: Option<u32>,
    /// Counting commit: a transaction writing at least this many pages, page 0 among
    /// them, commits in order (None: 64; see `Config::ordered_commit_pages`).
    pub ordered_commit_pages: Option<u32>,
    /// nvlog: the region file (None: `/dev/shm/inpage-<hash of the database path>-nvlog`,
    /// which survives the process but not the machine). Name a file on a DAX mount for
    /// commits that survive power loss.
    pub nvlog_region: Option<PathBuf>,
    /// nvlog: bytes of the region's record ring (None: 4 MiB).
    pub nvlog_ring_bytes: Option<u32>,
    /// nvlog: who flushes (see [`NvlogFlush`]).
    pub nvlog_flush: NvlogFlush,
    /// nvlog: a flush writes the pages past the database's committed end in place,
    /// once, instead of logging them (true; see `Config::nvlog_direct_pages`).
    pub nvlog_direct_pages: bool,
    /// **Breaks crash safety on purpose** unless `Mutant::None` (the default). Exists only
    /// so the torture harness can show it catches each broken commit/recovery variant;
    /// settable only with the `mutants` cargo feature (`Config::mutant`).
    pub(crate) mutant: Mutant,
    /// Open beside other processes that have the file open and go on reading and
    /// appending (`procs`' append turns: a stale picture opened again under `RESERVED`,
    /// not the whole file): write nothing their pictures depend on — replay a log into
    /// memory, not into the file; checkpoint nothing — and fail with `Error::Busy` where
    /// recovery must write (the caller then takes the whole file). Set by `Database`.
    pub(crate) attach: bool,
    /// Replay a log no further than this commit (`procs::Procs::trusted_end`: records
    /// past it were never acknowledged, and another process writes over them). Set by
    /// `Database` where another process has the file open.
    pub(crate) replay_until: Option<u64>,
}

/// Who moves `nvlog` records into the database file. Both flush at the same points (the
/// ring a quarter full or 1,024 commits waiting, a checkpoint, a clean close, and a
/// commit that finds the ring full); they differ only in who runs the flush and in the
/// timer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NvlogFlush {
    /// A background thread, woken by those thresholds and by the oldest waiting commit
    /// reaching 20 ms of age, asleep while no commit waits (the default).
    #[default]
    Background,
    /// The committing thread itself, at the fill threshold (no timer): deterministic I/O,
    /// for the crash torture and for applications that want no extra thread.
    Inline,
}

/// DHL modes write only the 512-byte sectors of a page that changed (one contiguous span
/// per page). Through the page cache the device still receives whole file-system blocks;
/// with `O_DIRECT` it receives just the span.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DirectWrites {
    /// `O_DIRECT` where the file system accepts it, else through the page cache
    /// (`Database::direct_writes` tells which). Same file format and crash guarantees
    /// either way.
    #[default]
    Auto,
    /// `O_DIRECT` or an error at open.
    On,
    /// Through the page cache.
    Off,
}

impl Default for JournalConfig {
    fn default() -> Self {
        JournalConfig {
            wal_sync: WalSync::Full,
            wal_autocheckpoint: 1000,
            journal_size_limit: None,
            wal_prealloc: false,
            direct_writes: DirectWrites::Auto,
            intent_region_pages: None,
            intent_scan_mib: None,
            ordered_commit_pages: None,
            nvlog_region: None,
            nvlog_ring_bytes: None,
            nvlog_flush: NvlogFlush::default(),
            nvlog_direct_pages: true,
            mutant: Mutant::None,
            attach: false,
            replay_until: None,
        }
    }
}

/// What a journal gets when it is opened.
#[derive(Clone, Debug)]
pub struct JournalCtx {
    pub vfs: Arc<dyn Vfs>,
    pub db_path: PathBuf,
    pub db: Arc<DbFile>,
    pub config: JournalConfig,
    /// The log settings that change while the database is open (read at each use; their
    /// values at open come from `config`).
    pub limits: Arc<LogLimits>,
    /// On a file other processes may open: what background work asks before it writes
    /// (None: nobody else can open the file, e.g. in memory).
    pub gate: Option<Arc<dyn Gate>>,
}

/// The write turn for a journal's background work (the `nvlog` protocol's flusher), which
/// writes the files outside any transaction: on a file other processes share (`procs`),
/// nothing may be written without it.
pub trait Gate: Send + Sync + std::fmt::Debug {
    /// Take the write turn without waiting (a short wait where the handle appends beside
    /// other processes' readers: it keeps new ones out meanwhile, so they cannot starve
    /// it).
    fn try_write(&self) -> GateAnswer;
    /// For a thread that holds an append turn (`Capabilities::appends_beside_readers`)
    /// and must write more than its record (a full ring's flush, a commit straight into
    /// the log, a shrink): the whole file, waiting up to the busy timeout for other
    /// processes' readers to leave (`Error::Busy` after that). The append turn comes back
    /// when the value is dropped.
    fn whole(&self) -> Result<Box<dyn Send>>;
    /// Commit `tid` is in the log, durable: tell the other processes, whose next
    /// transaction reads it from there (`Appends::absorb`). A failure leaves them
    /// unaware of it, so the commit must fail: another process would append over it.
    fn appended(&self, tid: u64) -> Result<()>;
    /// Whether no other process had the file open when this handle's append turn was
    /// taken (none can have joined since: a joiner opens under the whole file).
    fn alone(&self) -> bool;
}

/// What a `Gate` says.
pub enum GateAnswer {
    /// Write now; the turn is given back when the value is dropped.
    Go(Box<dyn Send>),
    /// Another process has a turn: try again later.
    Later,
    /// This journal's picture of the file is no longer current (its handle opened the
    /// file again): it must never write again.
    Never,
}

/// The two log settings SQLite lets a connection change while the database is open
/// (`PRAGMA journal_size_limit`, `PRAGMA wal_autocheckpoint`), shared by the handle and
/// its journal. Neither is a property of the file: a value read at any moment is a
/// valid policy, so relaxed atomics suffice.
#[derive(Debug)]
pub struct LogLimits {
    /// Bytes a log or journal file is cut back to after it is reset; -1: never cut.
    size_limit: AtomicI64,
    /// Frames after which a commit checkpoints the log; 0: only on request.
    autocheckpoint: AtomicU32,
}

impl LogLimits {
    /// The limits `config` opens with.
    pub fn new(config: &JournalConfig) -> Arc<LogLimits> {
        let size = config
            .journal_size_limit
            .map_or(-1, |b| i64::try_from(b).unwrap_or(i64::MAX));
        Arc::new(LogLimits {
            size_limit: AtomicI64::new(size),
            autocheckpoint: AtomicU32::new(config.wal_autocheckpoint),
        })
    }
    pub fn size_limit(&self) -> Option<u64> {
        u64::try_from(self.size_limit.load(Ordering::Relaxed)).ok()
    }
    pub fn set_size_limit(&self, bytes: Option<u64>) {
        let v = bytes.map_or(-1, |b| i64::try_from(b).unwrap_or(i64::MAX));
        self.size_limit.store(v, Ordering::Relaxed);
    }
    pub fn autocheckpoint(&self) -> u32 {
        self.autocheckpoint.load(Ordering::Relaxed)
    }
    pub fn set_autocheckpoint(&self, frames: u32) {
        self.autocheckpoint.store(frames, Ordering::Relaxed);
    }
}

impl JournalCtx {
    /// The context of a journal on `db`, with limits from `config`.
    pub fn new(
        vfs: Arc<dyn Vfs>,
        db_path: PathBuf,
        db: Arc<DbFile>,
        config: JournalConfig,
    ) -> Self {
        let limits = LogLimits::new(&config);
        JournalCtx {
            vfs,
            db_path,
            db,
            config,
            limits,
            gate: None,
        }
    }

    /// Path of a side file: `<db>-<suffix>`.
    pub fn side_path(&self, suffix: &str) -> PathBuf {
        side_path(&self.db_path, suffix)
    }
    /// Directory holding the database (for `sync_dir`).
    pub fn dir(&self) -> PathBuf {
        dir_of(&self.db_path)
    }
}

/// Checksum of a page image in a journal record or log frame, keyed by `seed` (a nonce or
/// the previous frame's checksum) and bound to `tag` (page number and frame fields).
///
/// Deliberately not crc32c. Page images embed crc32c values right after the bytes they
/// cover (the pager's trailer, the file header's own crc), and CRC is affine: a crc32c
/// over a stream containing `M ‖ crc32c(M)` does not depend on `M` at all. A crc32c over a
/// record would then accept a stale or torn image of the same page — the crash torture
/// found exactly that. xxh3 is not linear, so every byte of the image counts.
///
/// Up to `JOIN_MAX` bytes, the xxh3 of `tag ‖ image` in one call over a per-thread
/// copy: the same value as feeding the two parts to a streaming hasher (xxh3's streaming
/// form is defined as the one-shot hash of the concatenation), at a third of the cost
/// for the record sizes of a commit and a page's frame (a streaming hasher buffers what
/// it is given). A bulk commit's record streams: copying it would cost more than the
/// buffering saves.
pub(crate) fn image_checksum(seed: u64, tag: &[u8], image: &[u8]) -> u32 {
    const JOIN_MAX: usize = 64 << 10;
    thread_local! {
        static JOINED: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    let d = if tag.len() + image.len() <= JOIN_MAX {
        JOINED.with(|b| {
            let mut b = b.borrow_mut();
            b.clear();
            b.reserve(tag.len() + image.len());
            b.extend_from_slice(tag);
            b.extend_from_slice(image);
            xxhash_rust::xxh3::xxh3_64_with_seed(&b, seed)
        })
    } else {
        let mut h = xxhash_rust::xxh3::Xxh3::with_seed(seed);
        h.update(tag);
        h.update(image);
        h.digest()
    };
    (d ^ (d >> 32)) as u32
}

/// [`image_checksum`] of `buf[..tag]` and `buf[tag + gap..]`, where `buf` holds the tag,
/// `gap` bytes (the checksum's own field), then the image: the record as it is written,
/// hashed without copying the image. The tag is moved up against the image for the hash
/// and the first `tag + gap` bytes put back, so `buf` is unchanged on return. The same value as `image_checksum` of
/// the two parts (xxh3 of their concatenation, whatever the size).
pub(crate) fn image_checksum_gapped(seed: u64, buf: &mut [u8], tag: usize, gap: usize) -> u32 {
    const HEAD_MAX: usize = 64;
    let head = tag + gap;
    assert!(
        head <= HEAD_MAX && head <= buf.len(),
        "tag {tag} gap {gap} of {}",
        buf.len()
    );
    let mut saved = [0u8; HEAD_MAX];
    saved[..head].copy_from_slice(&buf[..head]);
    buf.copy_within(..tag, gap);
    let d = xxhash_rust::xxh3::xxh3_64_with_seed(&buf[gap..], seed);
    buf[..head].copy_from_slice(&saved[..head]);
    (d ^ (d >> 32)) as u32
}

/// `<db>-<suffix>`.
pub fn side_path(db_path: &Path, suffix: &str) -> PathBuf {
    let mut s = db_path.as_os_str().to_owned();
    s.push("-");
    s.push(suffix);
    PathBuf::from(s)
}

/// The directory of a path ("." when it has none).
pub fn dir_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// One transaction's pages, handed to `Journal::commit`.
#[derive(Debug)]
pub struct CommitBatch<'a> {
    /// The committing transaction's id (the new FCC).
    pub tid: u64,
    /// Every page the transaction changed, sorted by page number, trailers stamped.
    /// Includes the header page 0 unless the journal embeds the commit counter
    /// (`Capabilities::embeds_fcc`) and nothing else in the header changed.
    pub pages: &'a [(Pgno, PageRef)],
    /// The committed images, before this transaction, of the pages in `pages` that
    /// existed before it (`pgno < old_page_count`), sorted by page number.
    pub originals: &'a [(Pgno, PageRef)],
    /// Database size in pages before the transaction.
    pub old_page_count: u32,
    /// Database size in pages after it.
    pub new_page_count: u32,
    /// Steal: pages whose version of this transaction is already in the file, written by
    /// [`Steal::spill`] with `txn_size` 0 and unchanged since; the commit stamps them
    /// with the transaction's size (`pages.len() + restamp.len()`), which counts them.
    /// Sorted; disjoint from `pages`. Empty unless the mode `steals`.
    pub restamp: &'a [Pgno],
    /// Steal: pages holding a spilled version of this transaction that is not part of it
    /// any more (the page was freed, or a savepoint rolled back past the spill); the
    /// commit invalidates those versions before its sync. Sorted; disjoint from `pages`
    /// and `restamp`; may lie past `new_page_count`.
    pub discard: &'a [Pgno],
}

impl CommitBatch<'_> {
    /// The transaction's size in pages: what its counting-commit stamps carry.
    pub fn txn_size(&self) -> usize {
        self.pages.len() + self.restamp.len()
    }
}

/// What recovery did when a journal was opened: the actions each step of it took, in
/// order, and a summary of them in counters.
///
/// Only [`RecoveryReport::push`] records an action, and it keeps the counters: the pager
/// checks that they agree with the actions before it trusts the report (so the counters a
/// test or tool reads and the words `inpage` prints say the same thing).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Pages written back into the database file (rolled back or replayed).
    pub pages_restored: u64,
    /// WAL frames found valid (committed) and kept.
    pub frames_kept: u64,
    /// WAL frames or journal records ignored as uncommitted or torn.
    pub frames_discarded: u64,
    /// Whether a transaction was rolled back (a hot rollback journal, or DHL versions of
    /// an incomplete transaction invalidated).
    pub rolled_back: bool,
    /// The id of the transaction rolled back, when recovery knows it.
    pub rolled_back_tid: Option<u64>,
    /// DHL: (versions of the rolled-back transaction found on disk, the `txn_size` they
    /// claim), i.e. how much of it had reached the disk.
    pub rolled_back_pages: Option<(u32, u32)>,
    /// WAL: committed frames ignored because they are older than what the database
    /// already holds (a log left from before the last checkpoint).
    pub stale_frames: u64,
    /// Steal: versions of the rolled-back transaction that it spilled before its commit
    /// (`txn_size` 0), among `rolled_back_pages`' count.
    pub spilled_rolled_back: u64,
    /// nvlog: commits replayed from the region's records (past what the file held).
    pub region_records: u64,
    /// nvlog: the region found could not hold a record of this database (empty or too
    /// small, as a creation cut before it was sized leaves it; or left at the default
    /// path by an earlier database there, before this one committed) and was replaced.
    pub region_replaced: bool,
    /// WAL modes: the committed frames stay in the log, read from there, because the file
    /// system had no room to copy them into the database (`ENOSPC` in the open's
    /// checkpoint); a later checkpoint copies them once there is.
    pub checkpoint_deferred: bool,
    /// DHL: the rolled-back transaction committed in order and was rolled back from page 0
    /// alone; its versions are invalidated at the start of the next write (commit, spill
    /// or clean close), so `rolled_back_pages` is unknown.
    pub deferred: bool,
    /// A transaction across several databases had not committed when the last session
    /// ended: this database's part of it was undone from its undo log (`<db>-undo`).
    pub cross_database_undone: bool,
    /// The actions, in the order recovery took them.
    actions: Vec<RecoveryAction>,
}

impl RecoveryReport {
    /// Whether recovery found nothing to do.
    pub fn is_clean(&self) -> bool {
        self.actions.is_empty()
    }

    /// What recovery does, as typed actions in the order it takes them; empty when it
    /// does nothing. Each displays as one clause, e.g. "roll back tid 41 (2 of its 3
    /// pages reached the disk; ...)" or "replay 12 WAL frames (5 pages) into the
    /// database"; the CLI prefixes "recovery would" (read-only) or "recovery did".
    pub fn actions(&self) -> &[RecoveryAction] {
        &self.actions
    }

    /// Record that recovery takes action `a`, and count it in the summary. An action
    /// without a count (deferring the checkpoint, replacing the region, the
    /// cross-database undo) is one action however many steps find it.
    pub(crate) fn push(&mut self, a: RecoveryAction) {
        let flag = matches!(
            a,
            RecoveryAction::DeferCheckpoint
                | RecoveryAction::ReplaceRegion
                | RecoveryAction::UndoCrossDatabase
        );
        if flag && self.actions.contains(&a) {
            return;
        }
        match a {
            RecoveryAction::UndoCrossDatabase => self.cross_database_undone = true,
            RecoveryAction::RollBack { tid, how } => {
                self.rolled_back = true;
                self.rolled_back_tid = self.rolled_back_tid.or(tid);
                match how {
                    RollBackHow::Versions {
                        found,
                        claimed,
                        spilled,
                    } => {
                        self.rolled_back_pages = Some((found, claimed));
                        self.spilled_rolled_back = spilled;
                        self.pages_restored += u64::from(found);
                        self.frames_discarded += u64::from(found);
                    }
                    RollBackHow::FromPageZero => self.deferred = true,
                    RollBackHow::HotJournal { restored, torn } => {
                        self.pages_restored += restored;
                        self.frames_discarded += torn;
                    }
                    RollBackHow::VoidRecord => {}
                }
            }
            RecoveryAction::ReplayFrames { frames, pages } => {
                self.frames_kept += frames;
                self.pages_restored += pages;
            }
            RecoveryAction::DiscardFrames { frames } => self.frames_discarded += frames,
            RecoveryAction::ReplayRegion { commits } => self.region_records += commits,
            RecoveryAction::DeferCheckpoint => self.checkpoint_deferred = true,
            RecoveryAction::ReplaceRegion => self.region_replaced = true,
            RecoveryAction::IgnoreStaleFrames { frames } => self.stale_frames += frames,
        }
        self.actions.push(a);
    }

    /// The report of `actions`, taken in this order.
    pub(crate) fn of(actions: impl IntoIterator<Item = RecoveryAction>) -> RecoveryReport {
        let mut r = RecoveryReport::default();
        actions.into_iter().for_each(|a| r.push(a));
        r
    }

    /// Whether the counters are exactly those the actions add up to (nothing set them
    /// behind `push`'s back).
    pub(crate) fn is_consistent(&self) -> bool {
        *self == RecoveryReport::of(self.actions.iter().copied())
    }
}

/// One thing recovery does (`RecoveryReport::actions`); `Display` words it as a clause.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RecoveryAction {
    /// This database's part of a transaction across databases that did not commit is
    /// undone from its undo log (`<db>-undo`).
    UndoCrossDatabase,
    /// The last transaction (`tid`, when recovery knows it) is rolled back.
    RollBack { tid: Option<u64>, how: RollBackHow },
    /// Committed log frames are copied into the database.
    ReplayFrames { frames: u64, pages: u64 },
    /// Uncommitted or torn log frames are ignored.
    DiscardFrames { frames: u64 },
    /// Acknowledged commits are replayed from the nvlog region.
    ReplayRegion { commits: u64 },
    /// The log's committed frames stay in the log, read from there: the file system had
    /// no room to copy them into the database (a later checkpoint will).
    DeferCheckpoint,
    /// An nvlog region that holds no record of this database is replaced.
    ReplaceRegion,
    /// Committed log frames older than the last checkpoint are ignored.
    IgnoreStaleFrames { frames: u64 },
}

/// How a rollback undoes its transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RollBackHow {
    /// Two-version pages: `found` of the `claimed` pages reached the disk, `spilled` of
    /// them written before the commit (steal); their versions are invalidated.
    Versions {
        found: u32,
        claimed: u32,
        spilled: u64,
    },
    /// A large transaction committed in order, rolled back from page 0 alone; its
    /// versions are invalidated before the next write.
    FromPageZero,
    /// A hot rollback journal: `restored` pages copied back, `torn` records ignored.
    HotJournal { restored: u64, torn: u64 },
    /// A side file's record of it was torn and is voided, so no later open reads it.
    VoidRecord,
}

impl RecoveryAction {
    /// Whether this action may change what another process with the database open
    /// knows of it (then that process must open it again, `procs`). Copying committed
    /// frames into the database leaves the log as it was and puts into the database only
    /// what every process already reads (from the log, which takes precedence), and
    /// ignoring frames, or leaving them where they are, changes nothing; everything else
    /// (rolling back, discarding a torn tail, replaying or replacing a region) may.
    pub fn changes_others_view(&self) -> bool {
        !matches!(
            self,
            RecoveryAction::ReplayFrames { .. }
                | RecoveryAction::IgnoreStaleFrames { .. }
                | RecoveryAction::DeferCheckpoint
        )
    }
}

impl std::fmt::Display for RecoveryAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            RecoveryAction::UndoCrossDatabase => write!(
                f,
                "undo this database's part of a transaction across databases that did not \
                 commit (from its undo log)"
            ),
            RecoveryAction::RollBack { tid, how } => {
                match tid {
                    Some(t) => write!(f, "roll back tid {t}")?,
                    None => write!(f, "roll back the last transaction")?,
                }
                match how {
                    RollBackHow::FromPageZero => write!(
                        f,
                        " (a large transaction, rolled back from page 0 alone; its versions \
                         are invalidated before the next write)"
                    ),
                    RollBackHow::Versions { found, spilled, .. } if spilled > 0 => write!(
                        f,
                        " ({found} versions on disk, {spilled} of them spilled before its \
                         commit; invalidated)"
                    ),
                    RollBackHow::Versions { found, claimed, .. } => write!(
                        f,
                        " ({found} of its {claimed} pages reached the disk; their versions \
                         are invalidated)"
                    ),
                    RollBackHow::VoidRecord => write!(f, " (its torn record is voided)"),
                    RollBackHow::HotJournal { restored, torn } => write!(
                        f,
                        " (hot journal: {restored} pages restored, {torn} torn records \
                         ignored)"
                    ),
                }
            }
            RecoveryAction::ReplayFrames { frames, pages } => write!(
                f,
                "replay {frames} WAL frames ({pages} pages) into the database"
            ),
            RecoveryAction::DiscardFrames { frames } => {
                write!(f, "discard {frames} uncommitted or torn WAL frames")
            }
            RecoveryAction::ReplayRegion { commits } => write!(
                f,
                "replay {commits} acknowledged commits from the nvlog region into the database"
            ),
            RecoveryAction::DeferCheckpoint => write!(
                f,
                "leave the log's committed frames where they are, read from there: no room \
                 on the file system to copy them into the database (a later checkpoint will)"
            ),
            RecoveryAction::ReplaceRegion => write!(
                f,
                "replace an nvlog region that holds no record of this database (empty, too \
                 small, or left by an earlier database at this path)"
            ),
            RecoveryAction::IgnoreStaleFrames { frames } => {
                write!(
                    f,
                    "ignore {frames} WAL frames older than the last checkpoint"
                )
            }
        }
    }
}

/// A commit protocol: the four operations every mode has, and its optional powers.
///
/// A power is a part of the journal that exists or does not (`steal()` and the like
/// return it or `None`), never a default method that quietly does nothing: the caller
/// asks for the part and decides what its absence means. Each part answers to one
/// capability of the registry (`Capabilities`), which says so before a journal is open
/// (config validation, the test matrices); the test
/// `pager::tests::every_mode_has_exactly_the_parts_its_capabilities_name` keeps the two
/// in agreement for every registered mode.
pub(crate) trait Journal: Send + Sync + std::fmt::Debug {
    /// Read the latest committed image of `pgno` into `buf` (`buf.len() == page_size`).
    /// The trailer crc is *not* verified here; the pager does that.
    fn read_page(&self, pgno: Pgno, buf: &mut [u8]) -> Result<()>;
    /// Make `batch` durable (and atomic, if the mode promises it) — or, for a journal
    /// whose commits share their flush (`shared_flush`), write it so that
    /// `SharedFlush::wait_durable` can make it durable: the pager publishes the commit in
    /// between, and the writer releases its flag before it waits.
    fn commit(&self, batch: &CommitBatch<'_>) -> Result<()>;
    /// Move logged pages into the database file (WAL); a no-op for modes without a log.
    fn checkpoint(&self) -> Result<()> {
        Ok(())
    }
    /// [`Journal::checkpoint`], then cut the log's file to zero bytes (SQLite's
    /// `SQLITE_CHECKPOINT_TRUNCATE`). A mode whose log is not a file of its own, or a
    /// region sized once for good (`waldio`'s preallocated log, `nvlog`'s region), only
    /// checkpoints.
    fn checkpoint_truncating(&self) -> Result<()> {
        self.checkpoint()
    }
    /// Make durable now whatever recovery left for the first commit to sync (DHL's and
    /// IPS's invalidations of a rolled-back transaction: `journal::counting`). A handle
    /// that other processes may follow calls it before it gives up the write turn its
    /// open (or reload) ran under: another process's commit reuses the rolled-back tid
    /// without knowing that the invalidations are not durable yet. A no-op where recovery
    /// leaves nothing pending.
    fn settle_recovery(&self) -> Result<()> {
        Ok(())
    }
    /// Called once when the database is closed cleanly (WAL checkpoints and removes its
    /// file as SQLite does); nothing to do for a mode that keeps no state beside the file.
    fn close(&self) -> Result<()> {
        Ok(())
    }

    /// Steal (`Capabilities::steals`).
    fn steal(&self) -> Option<&dyn Steal> {
        None
    }
    /// Commits that share their flush (`waldio-gc`); no capability flag: it changes when
    /// a commit is durable, not what survives.
    fn shared_flush(&self) -> Option<&dyn SharedFlush> {
        None
    }
    /// Free pages kept across a clean close (`Capabilities::intent_map`).
    fn keeps_free(&self) -> Option<&dyn KeepsFree> {
        None
    }
    /// Acknowledged commits in a memory region (`Capabilities::region_backed`).
    fn region(&self) -> Option<&dyn RegionBacked> {
        None
    }
    /// Committed pages in a log replayed into the database (`Capabilities::replays_log`).
    fn log(&self) -> Option<&dyn Log> {
        None
    }
    /// A flusher thread that writes the files on its own schedule (`nvlog`, `redo`).
    fn deferred_flush(&self) -> Option<&dyn DeferredFlush> {
        None
    }
    /// Commits that only append to a log other processes read
    /// (`Capabilities::appends_beside_readers`).
    fn appends(&self) -> Option<&dyn Appends> {
        None
    }
    /// Called before a transaction across databases starts recording this database's
    /// writes (`txn::multi`): a journal that creates its files lazily (`redo`'s ring)
    /// creates them now, since the recording refuses renames and would log a whole
    /// zero-fill as the transaction's writes.
    fn prepare_recorded_commit(&self) -> Result<()> {
        Ok(())
    }
    /// The journal stamps the page trailers itself, on the images it writes to the
    /// database file or its log and on those it hands to readers, so a transaction hands
    /// it pages unstamped (`nvlog`, `redo`: a page changed by many commits between two
    /// flushes gets one crc32c per flush, not one per commit). Only for layouts whose
    /// trailer is checked; a journal that says so must stamp every image that leaves it.
    fn stamps_trailers(&self) -> bool {
        false
    }
}

/// A journal whose background thread moves acknowledged commits into its files later
/// (`nvlog_flush` Background). A transaction across databases records each database's
/// writes only while its part commits (`txn::multi`); a flush between that and the
/// commit point would change the files unrecorded, and a crash there could not undo it.
/// So the transaction pauses the flusher for its whole length.
pub(crate) trait DeferredFlush {
    /// Wait for a flush in progress to end, and start no background flush until the
    /// matching `resume_flushes`. Flushes the committing thread runs itself (a full ring,
    /// a checkpoint) still run: they are inside whatever the caller records.
    fn pause_flushes(&self) -> Result<()>;
    /// Undo one `pause_flushes`, and let the flusher look at its threshold again.
    fn resume_flushes(&self);
}

/// A journal whose commits only append a record to a log in a file every process reads
/// (`redo`'s ring): a process whose picture of the file is otherwise current follows
/// another's commits by reading their records (`procs`' append turns), not by opening
/// the file again.
pub(crate) trait Appends {
    /// The commits after `from` (the journal's last) up to `end` that other processes
    /// appended, read from the log in order, rebuilt on this journal's committed images,
    /// and taken into its state as if committed here (read through it, flushed by it).
    /// Stops early at a record that is not there (a count another process published
    /// from a session that no longer exists): the caller compares the last tid it gets
    /// with `end`. The caller holds a turn that keeps everything but appends out.
    fn absorb(&self, from: u64, end: u64) -> Result<Vec<Absorbed>>;
}

/// A commit another process appended, as `Appends::absorb` rebuilt it.
#[derive(Debug)]
pub(crate) struct Absorbed {
    pub tid: u64,
    /// Its pages' new images, unstamped as the committer's were (`stamps_trailers`),
    /// sorted by page number.
    pub pages: Vec<(Pgno, PageRef)>,
    /// The committed images it replaced (its pages below the old page count, and the
    /// pages past a shrunken count): what readers of the state before it keep reading.
    pub before: Vec<(Pgno, PageRef)>,
    pub old_page_count: u32,
    pub new_page_count: u32,
}

/// Steal: a transaction may write its uncommitted pages into the database file before it
/// commits, so one bigger than the page cache runs in bounded memory.
pub(crate) trait Steal {
    /// Write `pages`, versions of the uncommitted transaction `tid` stamped with
    /// `txn_size` 0, into the file without syncing; `originals` are what the file holds
    /// for them (as in a commit batch). Until the commit restamps them, recovery rolls
    /// such versions back, and readers never see them (their tid is above every
    /// snapshot).
    fn spill(
        &self,
        tid: u64,
        pages: &[(Pgno, PageRef)],
        originals: &[(Pgno, PageRef)],
    ) -> Result<()>;
    /// Invalidate the versions of transaction `tid` that `spill` wrote into `pages` (the
    /// transaction rolled back, or a savepoint rolled back past them). They are made
    /// durable before anything could confuse them with a later transaction reusing the
    /// tid.
    fn discard(&self, tid: u64, pages: &[Pgno]) -> Result<()>;
}

/// Commits that share one flush: `commit` writes, `wait_durable` makes durable.
pub(crate) trait SharedFlush {
    /// Return once commit `tid` is durable. `next_writers`: writers were waiting when
    /// this one let go, so that many commits follow shortly (the flush may wait for
    /// them).
    fn wait_durable(&self, tid: u64, next_writers: usize) -> Result<()>;
    /// Flushes shared by commits so far.
    fn group_stats(&self) -> GroupStats;
}

/// A layout that finds its free pages by walking the trees (`FreeSpace::TreeWalk`) keeps
/// them across a clean close, so the next open need not walk.
pub(crate) trait KeepsFree {
    /// As `Journal::close`, keeping `free`: every page below the page count that no
    /// committed tree owns.
    fn close_keeping_free(&self, free: &BTreeSet<Pgno>) -> Result<()>;
    /// The free pages a clean close kept, if this open may trust them: the file is still
    /// exactly as that close left it. `None` means walk.
    fn kept_free_pages(&self) -> Result<Option<BTreeSet<Pgno>>>;
}

/// Acknowledged commits that may live only in a memory region until a flush.
pub(crate) trait RegionBacked {
    /// The last commit that is durable without the region (in the file and synced).
    fn durable_tid(&self) -> u64;
}

/// Committed pages that live in a log until a checkpoint.
pub(crate) trait Log {
    /// Committed frames in the log now (for inspect and the tests).
    fn log_frames(&self) -> u64;
}

#[cfg(test)]
mod report_tests {
    use super::*;

    /// The one-shot checksum is the value the streaming form gave (files written before
    /// keep verifying), for tags and images of every size around xxh3's size classes.
    #[test]
    fn image_checksum_is_the_streaming_xxh3_of_tag_and_image() {
        let bytes: Vec<u8> = (0..71_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        for tag in [0usize, 4, 12, 16] {
            for len in [
                0usize, 1, 3, 4, 8, 9, 16, 17, 128, 129, 240, 241, 1024, 4096, 4097, 8192, 65_520,
                65_536, 70_000,
            ] {
                let seed = (tag * 31 + len) as u64 ^ 0x9e37_79b9_7f4a_7c15;
                let mut h = xxhash_rust::xxh3::Xxh3::with_seed(seed);
                h.update(&bytes[..tag]);
                h.update(&bytes[tag..tag + len]);
                let d = h.digest();
                assert_eq!(
                    image_checksum(seed, &bytes[..tag], &bytes[tag..tag + len]),
                    (d ^ (d >> 32)) as u32,
                    "tag {tag} image {len}"
                );
                // The in-place form over a record laid out tag, 4-byte gap, image.
                let mut rec = bytes[..tag].to_vec();
                rec.extend_from_slice(&[0xAB; 4]);
                rec.extend_from_slice(&bytes[tag..tag + len]);
                let before = rec.clone();
                assert_eq!(
                    image_checksum_gapped(seed, &mut rec, tag, 4),
                    (d ^ (d >> 32)) as u32,
                    "gapped: tag {tag} image {len}"
                );
                assert_eq!(rec, before, "gapped: the record is left as it was");
            }
        }
    }

    /// The actions a report lists, the counters they add up to, and their words (which
    /// the CLI prints after "recovery would" / "recovery did").
    #[test]
    fn reports_list_typed_actions_in_words() {
        let rollback = RecoveryAction::RollBack {
            tid: Some(41),
            how: RollBackHow::Versions {
                found: 2,
                claimed: 3,
                spilled: 0,
            },
        };
        let counting = RecoveryReport::of([rollback]);
        assert_eq!(counting.actions(), [rollback]);
        assert!(counting.rolled_back && counting.rolled_back_tid == Some(41));
        assert_eq!(counting.rolled_back_pages, Some((2, 3)));
        assert_eq!((counting.pages_restored, counting.frames_discarded), (2, 2));
        assert_eq!(
            rollback.to_string(),
            "roll back tid 41 (2 of its 3 pages reached the disk; their versions are invalidated)"
        );
        let wal = RecoveryReport::of([
            RecoveryAction::ReplayFrames {
                frames: 12,
                pages: 5,
            },
            RecoveryAction::DiscardFrames { frames: 1 },
            RecoveryAction::DeferCheckpoint,
            RecoveryAction::IgnoreStaleFrames { frames: 3 },
            RecoveryAction::DeferCheckpoint,
        ]);
        assert_eq!(
            (wal.frames_kept, wal.pages_restored, wal.frames_discarded),
            (12, 5, 1)
        );
        assert!(wal.checkpoint_deferred && wal.stale_frames == 3);
        let words: Vec<String> = wal.actions().iter().map(|a| a.to_string()).collect();
        assert_eq!(
            words,
            [
                "replay 12 WAL frames (5 pages) into the database",
                "discard 1 uncommitted or torn WAL frames",
                "leave the log's committed frames where they are, read from there: no room \
                 on the file system to copy them into the database (a later checkpoint will)",
                "ignore 3 WAL frames older than the last checkpoint",
            ],
            "a flag action found twice is listed once"
        );
        assert!(wal.is_consistent());
        let mut forged = wal.clone();
        forged.frames_kept += 1;
        assert!(!forged.is_consistent(), "a counter set behind push's back");
        assert!(RecoveryReport::default().is_clean());
    }
}
