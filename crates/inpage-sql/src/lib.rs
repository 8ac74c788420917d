//! inpage-sql: SQLite's SQL front end (the pinned 3.53.2 amalgamation, vendored in
//! `sqlite/`) running on the inpage engine.
//!
//! build.rs cuts SQLite's storage layer (b-tree, pager, WAL, backup) out of the
//! amalgamation and splices in `csrc/glue.c`, which implements the b-tree and pager
//! interface the VDBE calls by calling the `ipg_*` functions of [`ffi`] (Rust, inpage's
//! public API). The C API's definitions are renamed `inpage_c_sqlite3_*`, so this rlib can
//! share a binary with stock SQLite; Rust callers use [`Connection`] (or the raw
//! declarations in [`sys`]), and the crate `inpage-libsqlite3` exports the unprefixed
//! names as a drop-in `libsqlite3.so`.
//!
//! Invariants: `unsafe` lives only in the FFI layer ([`ffi`], [`sys`], [`conn`],
//! `record_order`), each block with a `SAFETY:` note; every entry point from C catches
//! panics; journal modes are the file's (`INPAGE_JOURNAL_MODE` forces one for every
//! database opened).

pub mod conn;
pub mod ffi;
mod rc;
mod record_order;
pub mod sys;

pub use conn::{Connection, SqlError, Statement, Value};
pub use ffi::{mode_code, set_file_config, set_vfs, JOURNAL_MODE_ENV};
