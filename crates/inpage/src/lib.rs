//! inpage — an embedded transactional database engine for flash storage.
//!
//! ```no_run
//! use inpage::{Config, Database, JournalMode, KeyKind, ReadableTxn};
//!
//! # fn main() -> inpage::Result<()> {
//! let db = Database::open("app.db", Config::default().journal_mode(JournalMode::Wal))?;
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

#![forbid(unsafe_code)]

pub mod check;
pub mod config;
pub mod db;
pub mod error;
pub mod journal;
mod le;
pub mod page;
pub mod pager;
pub mod tree;
pub mod txn;
pub mod vfs;

pub use config::{Config, DEFAULT_JOURNAL_MODE};
pub use db::Database;
pub use error::{Error, Pgno, Result};
pub use journal::{DirectWrites, JournalConfig, JournalMode, Mutant, RecoveryReport, WalSync};
pub use pager::header::Header;
pub use txn::catalog::TreeInfo;
pub use txn::key::{Comparator, Key, KeyKind, OwnedKey};
pub use txn::{Range, ReadTxn, ReadableTxn, Savepoint, Tree, TreeCursor, WriteTxn};
