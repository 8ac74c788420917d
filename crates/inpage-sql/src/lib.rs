//! inpage-sql: SQLite's SQL front end (the pinned 3.53.2 amalgamation, vendored in
//! `sqlite/`) running on the inpage engine, as a drop-in `libsqlite3`.
//!
//! build.rs cuts SQLite's storage layer (b-tree, pager, WAL, backup) out of the
//! amalgamation and splices in `csrc/glue.c`, which implements the b-tree and pager
//! interface the VDBE calls by calling the `ipg_*` functions of [`ffi`] (Rust, inpage's
//! public API). The library exports the unprefixed `sqlite3_*` C API: as a cdylib it can
//! stand in for `libsqlite3.so.0`; as an rlib, Rust code reaches the same API through
//! `extern "C"` declarations (see tests/capi.rs).
//!
//! Invariants: `unsafe` lives only in the FFI layer ([`ffi`], `record_order`), each
//! block with a `SAFETY:` note; every entry point from C catches panics; journal modes
//! are the file's (`INPAGE_JOURNAL_MODE` forces one for every database opened).
//!
//! Do not link this crate into a binary that also links stock SQLite (rusqlite,
//! libsqlite3-sys): both define the same `sqlite3_*` symbols.

pub mod api;
pub mod ffi;
mod rc;
mod record_order;

pub use ffi::{mode_code, set_file_config, set_vfs, JOURNAL_MODE_ENV};
