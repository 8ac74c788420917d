//! Commit protocols ("journal modes") plugged into the pager.
//!
//! Invariants every mode keeps:
//! - `commit` either makes the whole batch durable and returns Ok, or returns Err; after
//!   Err nothing about the batch is promised, and the pager poisons the database until it
//!   is reopened and recovered (a failed fsync may have dropped any unsynced write).
//! - `read_page` returns the latest *committed* image of a page (the database file, or a
//!   newer frame in a log), never a half-applied one: the pager calls it only for pages no
//!   commit is currently writing (those stay pinned in its cache).
//! - Recovery runs inside `open_*` before the pager reads the header, so the pager only
//!   ever sees a consistent file.
//! - A mode only touches its own side files (`-journal`, `-wal`); adding a mode never
//!   edits another.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Pgno, Result};
use crate::page::{Layout, PageRef};
use crate::vfs::Vfs;

mod dbfile;
mod dhl;
mod off;
mod rollback;
#[cfg(test)]
pub(crate) mod testutil;
mod util;
mod wal;

pub use dbfile::DbFile;
pub(crate) use dhl::DhlJournal;
pub(crate) use off::OffJournal;
pub(crate) use rollback::{recover_hot_journal, RollbackJournal};
pub(crate) use wal::Wal;

/// The journal modes this engine implements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum JournalMode {
    /// Write pages in place, one fdatasync, no atomicity promised.
    Off,
    /// `off` with metadata embedding: the header page is rewritten only when a field
    /// other than the commit counter changes (the DHL paper's fair OFF_OPT baseline).
    OffOpt,
    /// Rollback journal, deleted at commit (SQLite DELETE).
    Delete,
    /// Rollback journal, truncated at commit (SQLite TRUNCATE).
    Truncate,
    /// Rollback journal, header zeroed at commit (SQLite PERSIST).
    Persist,
    /// Write-ahead log (SQLite WAL).
    Wal,
    /// Doubleheader logging, traditional commit: DHL pages, fdatasync, then the header
    /// page with the new FCC as the commit mark, fdatasync.
    DhlTc,
    /// Doubleheader logging, counting commit with metadata embedding: every dirty page
    /// carries `(tid, txn_size)`, one fdatasync, the header page only when it changed.
    DhlCc,
    /// Counting commit without metadata embedding: as `DhlCc`, but the header page is
    /// part of every transaction.
    DhlCcHeader,
}

impl JournalMode {
    /// Every mode, in a stable order.
    pub const ALL: [JournalMode; 9] = [
        JournalMode::Off,
        JournalMode::OffOpt,
        JournalMode::Delete,
        JournalMode::Truncate,
        JournalMode::Persist,
        JournalMode::Wal,
        JournalMode::DhlTc,
        JournalMode::DhlCc,
        JournalMode::DhlCcHeader,
    ];

    /// The name used on the command line and in the file header.
    pub fn name(self) -> &'static str {
        match self {
            JournalMode::Off => "off",
            JournalMode::OffOpt => "off-opt",
            JournalMode::Delete => "delete",
            JournalMode::Truncate => "truncate",
            JournalMode::Persist => "persist",
            JournalMode::Wal => "wal",
            JournalMode::DhlTc => "dhl-tc",
            JournalMode::DhlCc => "dhl-cc",
            JournalMode::DhlCcHeader => "dhl-cc-header",
        }
    }

    /// Parse a name (case-insensitive).
    pub fn from_name(s: &str) -> Option<JournalMode> {
        JournalMode::ALL
            .into_iter()
            .find(|m| m.name().eq_ignore_ascii_case(s))
    }

    /// Code stored in the header byte.
    pub fn code(self) -> u8 {
        match self {
            JournalMode::Off => 1,
            JournalMode::Delete => 2,
            JournalMode::Truncate => 3,
            JournalMode::Persist => 4,
            JournalMode::Wal => 5,
            JournalMode::OffOpt => 6,
            JournalMode::DhlTc => 7,
            JournalMode::DhlCc => 8,
            JournalMode::DhlCcHeader => 9,
        }
    }

    /// Inverse of `code`.
    pub fn from_code(c: u8) -> Option<JournalMode> {
        JournalMode::ALL.into_iter().find(|m| m.code() == c)
    }

    /// The page layout the mode's trees use.
    pub fn layout(self) -> Layout {
        match self {
            JournalMode::DhlTc | JournalMode::DhlCc | JournalMode::DhlCcHeader => Layout::Dhl,
            _ => Layout::Stock,
        }
    }

    /// Whether a crash can leave a half-applied transaction.
    pub fn promises_atomicity(self) -> bool {
        !matches!(self, JournalMode::Off | JournalMode::OffOpt)
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
    /// DHL: how page writes reach the file (see [`DirectWrites`]).
    pub dhl_direct: DirectWrites,
    /// **Breaks crash safety on purpose** unless `Mutant::None` (the default). Exists only
    /// so the torture harness can show it catches each broken commit/recovery variant;
    /// never set it otherwise.
    #[doc(hidden)]
    pub mutant: Mutant,
}

/// A deliberately broken commit or recovery variant (a mutant), for the torture harness's
/// mutation test: each must be caught, or the harness proves nothing. Every switch is a
/// one-line `if` at the place it breaks, so the correct path is the code read everywhere
/// else. `None` is the engine.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Mutant {
    /// The engine as written.
    #[default]
    None,
    /// No sync before the commit mark: rollback modes overwrite the database while the
    /// journal is volatile; `dhl-tc` writes the header slot before its pages are durable.
    NoSyncBeforeMark,
    /// No sync at commit: `dhl-cc`/`dhl-cc-header`/`dhl-tc` and `wal` (FULL) acknowledge
    /// with the commit's writes still volatile.
    NoSyncAtCommit,
    /// Checksums not verified: DHL recovery takes a torn version as valid; the WAL scan
    /// takes a frame whose chain checksum fails.
    SkipChecksum,
    /// DHL recovery's invalidation writes are not synced.
    UnsyncedRecovery,
    /// The counting vote accepts a transaction with one page missing.
    VoteOffByOne,
    /// WAL recovery replays the frames after the last commit frame.
    WalPastCommit,
}

impl Mutant {
    /// Every mutant (not `None`), in a stable order.
    pub const ALL: [Mutant; 6] = [
        Mutant::NoSyncBeforeMark,
        Mutant::NoSyncAtCommit,
        Mutant::SkipChecksum,
        Mutant::UnsyncedRecovery,
        Mutant::VoteOffByOne,
        Mutant::WalPastCommit,
    ];

    /// The name used in replay specs and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Mutant::None => "none",
            Mutant::NoSyncBeforeMark => "no-sync-before-mark",
            Mutant::NoSyncAtCommit => "no-sync-at-commit",
            Mutant::SkipChecksum => "skip-checksum",
            Mutant::UnsyncedRecovery => "unsynced-recovery",
            Mutant::VoteOffByOne => "vote-off-by-one",
            Mutant::WalPastCommit => "wal-past-commit",
        }
    }

    /// Parse a name (`none` included).
    pub fn from_name(s: &str) -> Option<Mutant> {
        std::iter::once(Mutant::None)
            .chain(Mutant::ALL)
            .find(|m| m.name().eq_ignore_ascii_case(s.trim()))
    }
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
            dhl_direct: DirectWrites::Auto,
            mutant: Mutant::None,
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
}

impl JournalCtx {
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
pub(crate) fn image_checksum(seed: u64, tag: &[u8], image: &[u8]) -> u32 {
    let mut h = xxhash_rust::xxh3::Xxh3::with_seed(seed);
    h.update(tag);
    h.update(image);
    let d = h.digest();
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
    /// (`Journal::embeds_fcc`) and nothing else in the header changed.
    pub pages: &'a [(Pgno, PageRef)],
    /// The committed images, before this transaction, of the pages in `pages` that
    /// existed before it (`pgno < old_page_count`), sorted by page number.
    pub originals: &'a [(Pgno, PageRef)],
    /// Database size in pages before the transaction.
    pub old_page_count: u32,
    /// Database size in pages after it.
    pub new_page_count: u32,
}

/// What recovery did when a journal was opened.
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
}

impl RecoveryReport {
    /// Whether recovery found nothing to do.
    pub fn is_clean(&self) -> bool {
        *self == RecoveryReport::default()
    }

    /// What recovery does, in words (one clause per action), e.g. "roll back tid 41 (2 of
    /// 3 pages)" or "replay 12 WAL frames (5 pages)"; empty when it does nothing. The CLI
    /// prefixes "recovery would" (read-only) or "recovery did".
    pub fn actions(&self) -> Vec<String> {
        let mut v = Vec::new();
        if self.rolled_back {
            let what = match self.rolled_back_tid {
                Some(t) => format!("roll back tid {t}"),
                None => "roll back the last transaction".to_string(),
            };
            let how = match self.rolled_back_pages {
                Some((found, claimed)) => format!(
                    " ({found} of its {claimed} pages reached the disk; their versions are invalidated)"
                ),
                None => format!(
                    " (hot journal: {} pages restored, {} torn records ignored)",
                    self.pages_restored, self.frames_discarded
                ),
            };
            v.push(what + &how);
        }
        if self.frames_kept > 0 {
            v.push(format!(
                "replay {} WAL frames ({} pages) into the database",
                self.frames_kept, self.pages_restored
            ));
        }
        if !self.rolled_back && self.frames_discarded > 0 {
            v.push(format!(
                "discard {} uncommitted or torn WAL frames",
                self.frames_discarded
            ));
        }
        if self.stale_frames > 0 {
            v.push(format!(
                "ignore {} WAL frames older than the last checkpoint",
                self.stale_frames
            ));
        }
        v
    }
}

/// A commit protocol.
pub trait Journal: Send + Sync + std::fmt::Debug {
    /// The mode this journal implements.
    fn mode(&self) -> JournalMode;
    /// Read the latest committed image of `pgno` into `buf` (`buf.len() == page_size`).
    /// The trailer crc is *not* verified here; the pager does that.
    fn read_page(&self, pgno: Pgno, buf: &mut [u8]) -> Result<()>;
    /// Make `batch` durable (and atomic, if the mode promises it).
    fn commit(&self, batch: &CommitBatch<'_>) -> Result<()>;
    /// Move logged pages into the database file (WAL); a no-op for other modes.
    fn checkpoint(&self) -> Result<()>;
    /// Called once when the database is closed cleanly (WAL checkpoints and removes its
    /// file as SQLite does).
    fn close(&self) -> Result<()>;
    /// Number of frames currently in the log (0 for non-log modes); for inspect/tests.
    fn log_frames(&self) -> u64 {
        0
    }
    /// Metadata embedding: whether the header page may be left out of a batch when only
    /// the commit counter (`fcc`, `last_txn_size`) changed. A mode says yes only if it
    /// does not need the on-disk counter (`off-opt`: no recovery at all) or can recover
    /// it from the pages themselves.
    fn embeds_fcc(&self) -> bool {
        false
    }
    /// Modes that recover the commit counter from the pages themselves (DHL) report the
    /// FCC recovery established; the pager uses it instead of the header's.
    fn recovered_fcc(&self) -> Option<u64> {
        None
    }
    /// Whether page writes bypass the page cache (`O_DIRECT`).
    fn direct_writes(&self) -> bool {
        false
    }
}
