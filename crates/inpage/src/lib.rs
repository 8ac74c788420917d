//! inpage — an embedded transactional database engine for flash storage.
//!
//! ```no_run
//! use inpage::{Config, Database, JournalMode, KeyKind, ReadableTxn};
//!
//! # fn main() -> inpage::Result<()> {
//! let db = Database::open("app.db", Config::default().journal_mode(JournalMode::WAL))?;
//! let mut w = db.begin_write()?;
//! let users = w.open_or_create_tree("users", KeyKind::Int)?;
//! w.insert(&users, 42, b"Ada")?;
//! w.commit()?;
//!
//! let r = db.begin_read()?;
//! assert_eq!(r.get(&users, 42)?.as_deref(), Some(&b"Ada"[..]));
//! # Ok(()) }
//! ```
//!
//! Layers, each in its own module and talking only to the one below: `txn` (transactions,
//! catalog) → `tree` (B+tree over pages) → `pager` (committed state, cache, snapshots) →
//! `journal` (commit protocols) → `vfs` (files, simulated disk, accounting, faults).

// Denied everywhere but one module, `vfs::mapped`: the `nvlog` journal's region is a file
// mapped into memory, which needs `mmap`/`msync`/`munmap` (see its SAFETY notes).
#![deny(unsafe_code)]

pub mod check;
mod config;
mod db;
mod error;
mod format;
mod group;
pub mod inspect;
#[doc(hidden)]
pub mod internals;
mod journal;
mod le;
mod page;
mod pager;
mod procs;
mod seam;
mod tree;
mod txn;
pub mod vfs;

pub use config::{Concurrency, Config, DEFAULT_JOURNAL_MODE, DEFAULT_PAGE_SIZE};
pub use db::{Database, MAX_REPLAYS};
pub use error::{Error, Pgno, Result};
pub use format::header::{AutoVacuum, Header, ModeId};
pub use journal::{
    Capabilities, DirectWrites, GroupStats, JournalConfig, JournalMode, JournalOption, Mutant,
    NvlogFlush, RecoveryAction, RecoveryReport, RollBackHow, WalSync,
};
pub use pager::CacheStats;
pub use tree::TreeStats;
pub use txn::catalog::TreeInfo;
pub use txn::key::{Comparator, Key, KeyKind, OwnedKey};
pub use txn::multi::commit_all;
pub use txn::{
    Cursor, CursorOps, Probe, Range, ReadTxn, ReadableTxn, Restored, Savepoint, SeekResult, Tree,
    TreeCursor, TreeLoad, WriteTxn,
};
