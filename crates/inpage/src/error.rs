//! Typed errors for every layer.
//!
//! Invariant: no engine function panics on bad input (a foreign, truncated or corrupt file,
//! a bad argument); it returns one of these variants, which always says *where* (path,
//! page number, operation) so the message alone is enough to act on.

use std::io;
use std::path::PathBuf;

/// Page number. Page 0 is the file header page.
pub type Pgno = u32;

/// Every error the engine reports. More variants may be added (`non_exhaustive`): match
/// the ones you handle and keep a fallback arm.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An operating-system (or simulated) I/O call failed.
    #[error("I/O error in {op} on {}: {source}", path.display())]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The file is not an inpage database (wrong magic, empty, unsupported version...).
    #[error("{}: not an inpage database: {reason}", path.display())]
    NotADatabase { path: PathBuf, reason: String },
    /// The file is shorter than its header says.
    #[error("{}: file is truncated: header says {expected} bytes, file has {actual}", path.display())]
    Truncated {
        path: PathBuf,
        expected: u64,
        actual: u64,
    },
    /// A page failed its checksum or structural checks.
    #[error("corrupt page {pgno}: {reason}")]
    Corrupt { pgno: Pgno, reason: String },
    /// A log or journal file failed its checks in a way recovery cannot explain.
    #[error("{}: corrupt journal: {reason}", path.display())]
    CorruptJournal { path: PathBuf, reason: String },
    /// The `nvlog` region at `region` belongs to another database (or to an earlier file
    /// at this path): its records must not be replayed into this one. Remove the region
    /// file if that database is gone, or name another region (`Config::nvlog_region`).
    #[error("{}: the nvlog region belongs to another database: {reason}", region.display())]
    ForeignRegion { region: PathBuf, reason: String },
    /// The file was created with another journal mode than the one asked for.
    #[error("{}: database uses journal mode `{file}` but `{requested}` was requested (open with journal_mode None to use the file's mode)", path.display())]
    ModeMismatch {
        path: PathBuf,
        file: String,
        requested: String,
    },
    /// The file uses another page size than the one asked for.
    #[error("{}: database has page size {file} but {requested} was requested", path.display())]
    PageSizeMismatch {
        path: PathBuf,
        file: u32,
        requested: u32,
    },
    /// A configuration value is out of range.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// An argument is out of range (meta index, savepoint id, ...).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A key is longer than the tree can store in one cell.
    #[error("key of {len} bytes is too large (at most {max} bytes with this page size)")]
    KeyTooLarge { len: usize, max: usize },
    /// A value is longer than the engine supports.
    #[error("value of {len} bytes is too large (at most {max} bytes)")]
    ValueTooLarge { len: usize, max: usize },
    /// No tree of that name exists.
    #[error("no tree named {0:?}")]
    TreeNotFound(String),
    /// A tree of that name already exists.
    #[error("a tree named {0:?} already exists")]
    TreeExists(String),
    /// The key kind does not match the tree's (an integer key on a byte tree or the reverse).
    #[error("tree {tree:?} has {expected} keys, got a {got} key")]
    KeyKindMismatch {
        tree: String,
        expected: &'static str,
        got: &'static str,
    },
    /// The database grew past the largest page number.
    #[error("database is full: no page number left")]
    Full,
    /// An earlier I/O error left the in-memory state unknown; reopen to run recovery.
    #[error("database is unusable after an earlier I/O error ({0}); reopen it to run recovery")]
    Poisoned(String),
    /// Another write transaction is active (`try_begin_write`), or another process kept
    /// its turn on the file past `Config::busy_timeout` (`procs`).
    #[error("database is busy: another write transaction, of this handle or of another process, holds it")]
    Busy,
    /// Concurrent writers (`Concurrency::Occ`, `TwoVto`): another transaction changed a
    /// page this one relies on — `Occ`: a commit after this transaction's snapshot (`by`
    /// is its tid); `TwoVto`: a live transaction holds the page (`by` is its timestamp;
    /// page 0: the oldest transaction took a lock of this one's). Nothing of this
    /// transaction was written; run it again (`Database::write` does).
    #[error("write conflict on page {page} with transaction {by} (this transaction's snapshot: {snapshot}); run the transaction again")]
    Conflict { page: Pgno, by: u64, snapshot: u64 },
    /// Opening: another handle (in this or another process) held the write turn for
    /// longer than `Config::busy_timeout` (a write transaction, or a mode that keeps the
    /// file for the handle's life, `procs`). Retry later.
    #[error("{}: database is in use by another handle or process (its turn did not come within the busy timeout); open it read-only to inspect it", path.display())]
    Locked { path: PathBuf },
    /// The handle was opened by another process: this one is a child of `fork()` that
    /// inherited it. Using it would write the parent's files from a stale picture of them,
    /// so it refuses all work (and closes without I/O); open a new handle in this process.
    #[error("{}: this handle was opened before fork() in the parent process; open the database again in this process", path.display())]
    Forked { path: PathBuf },
    /// A transaction across several databases (`inpage::commit_all`, SQL `ATTACH`) cannot
    /// be committed atomically because this database cannot take part; nothing of the
    /// transaction was written. Commit the databases separately, or change the mode.
    #[error("{}: cannot take part in a transaction across databases: {reason}", path.display())]
    AcrossDatabases { path: PathBuf, reason: String },
    /// The file system is full (`ENOSPC`, or a quota) and a commit or checkpoint could
    /// not get the room it needed. Nothing of it took effect: the database holds what it
    /// held before and the handle stays usable; retry once there is room (SQLite's
    /// `SQLITE_FULL`).
    #[error("{}: the file system is full ({op}: {source}); nothing was changed, retry once there is room", path.display())]
    NoSpace {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The database was opened read-only (`Config::read_only`); nothing may change it.
    #[error("{}: database is open read-only; {op} refused", path.display())]
    ReadOnly { path: PathBuf, op: &'static str },
}

/// Result alias used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Helper to build an `Io` error mapper: `file.read_at(..).map_err(Error::io("read", path))`.
    pub fn io<'p>(
        op: &'static str,
        path: &'p std::path::Path,
    ) -> impl FnOnce(io::Error) -> Error + 'p {
        move |source| Error::Io {
            op,
            path: path.to_path_buf(),
            source,
        }
    }

    /// Build a `Corrupt` error.
    pub fn corrupt(pgno: Pgno, reason: impl Into<String>) -> Error {
        Error::Corrupt {
            pgno,
            reason: reason.into(),
        }
    }

    /// Whether this is the file system running out of room (`ENOSPC`, or a quota):
    /// SQLite's "database or disk is full", as opposed to a failing device.
    pub fn is_no_space(&self) -> bool {
        match self {
            Error::Full | Error::NoSpace { .. } => true,
            Error::Io { source, .. } => io_is_no_space(source),
            _ => false,
        }
    }
}

/// A failure that left nothing changed, as [`Error::NoSpace`] when it is the file system
/// running out of room, else unchanged. For the steps of a commit or checkpoint before
/// anything becomes visible (a log write that no commit record ends, a preallocation):
/// the caller promises that by calling it.
pub fn clean_failure(e: Error) -> Error {
    match e {
        Error::Io { op, path, source } if io_is_no_space(&source) => {
            Error::NoSpace { op, path, source }
        }
        e => e,
    }
}

/// Whether an I/O error is the file system running out of room (`ENOSPC`, `EDQUOT`).
pub fn io_is_no_space(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded
    )
}
