//! Raw declarations of the part of SQLite's C API that Rust callers of this crate use
//! (the CLI's shell, the bench, the tests), bound to the renamed C definitions
//! (`inpage_c_*`, see build.rs). Renamed on purpose: this crate's objects can then share
//! a binary with stock SQLite (rusqlite) without a clash, which the bench needs to run
//! both in one process. The unprefixed names are exported only by inpage-libsqlite3.
//!
//! Invariant: each declaration has the exact C signature from sqlite3.h; a destructor
//! argument is declared as `isize` because callers only ever pass SQLITE_TRANSIENT (-1),
//! which the C ABI passes in the same integer register as a pointer.
#![allow(non_camel_case_types, missing_docs)]

use std::ffi::{c_char, c_int, c_void};

pub const SQLITE_OK: c_int = 0;
pub const SQLITE_ERROR: c_int = 1;
pub const SQLITE_BUSY: c_int = 5;
pub const SQLITE_TOOBIG: c_int = 18;
pub const SQLITE_ROW: c_int = 100;
pub const SQLITE_DONE: c_int = 101;
pub const SQLITE_INTEGER: c_int = 1;
pub const SQLITE_FLOAT: c_int = 2;
pub const SQLITE_TEXT: c_int = 3;
pub const SQLITE_BLOB: c_int = 4;
pub const SQLITE_NULL: c_int = 5;
pub const SQLITE_OPEN_READONLY: c_int = 0x1;
pub const SQLITE_OPEN_READWRITE: c_int = 0x2;
pub const SQLITE_OPEN_CREATE: c_int = 0x4;
pub const SQLITE_OPEN_URI: c_int = 0x40;
pub const SQLITE_OPEN_NOMUTEX: c_int = 0x8000;
/// The destructor value that makes SQLite copy a bound string or blob.
pub const SQLITE_TRANSIENT: isize = -1;

#[repr(C)]
pub struct sqlite3 {
    _p: [u8; 0],
}
#[repr(C)]
pub struct sqlite3_stmt {
    _p: [u8; 0],
}

extern "C" {
    #[link_name = "inpage_c_sqlite3_open_v2"]
    pub fn sqlite3_open_v2(
        filename: *const c_char,
        db: *mut *mut sqlite3,
        flags: c_int,
        vfs: *const c_char,
    ) -> c_int;
    #[link_name = "inpage_c_sqlite3_close_v2"]
    pub fn sqlite3_close_v2(db: *mut sqlite3) -> c_int;
    #[link_name = "inpage_c_sqlite3_errmsg"]
    pub fn sqlite3_errmsg(db: *mut sqlite3) -> *const c_char;
    #[link_name = "inpage_c_sqlite3_extended_errcode"]
    pub fn sqlite3_extended_errcode(db: *mut sqlite3) -> c_int;
    #[link_name = "inpage_c_sqlite3_extended_result_codes"]
    pub fn sqlite3_extended_result_codes(db: *mut sqlite3, on: c_int) -> c_int;
    #[link_name = "inpage_c_sqlite3_prepare_v2"]
    pub fn sqlite3_prepare_v2(
        db: *mut sqlite3,
        sql: *const c_char,
        n: c_int,
        stmt: *mut *mut sqlite3_stmt,
        tail: *mut *const c_char,
    ) -> c_int;
    #[link_name = "inpage_c_sqlite3_step"]
    pub fn sqlite3_step(stmt: *mut sqlite3_stmt) -> c_int;
    #[link_name = "inpage_c_sqlite3_reset"]
    pub fn sqlite3_reset(stmt: *mut sqlite3_stmt) -> c_int;
    #[link_name = "inpage_c_sqlite3_finalize"]
    pub fn sqlite3_finalize(stmt: *mut sqlite3_stmt) -> c_int;
    #[link_name = "inpage_c_sqlite3_clear_bindings"]
    pub fn sqlite3_clear_bindings(stmt: *mut sqlite3_stmt) -> c_int;
    #[link_name = "inpage_c_sqlite3_bind_null"]
    pub fn sqlite3_bind_null(stmt: *mut sqlite3_stmt, i: c_int) -> c_int;
    #[link_name = "inpage_c_sqlite3_bind_int64"]
    pub fn sqlite3_bind_int64(stmt: *mut sqlite3_stmt, i: c_int, v: i64) -> c_int;
    #[link_name = "inpage_c_sqlite3_bind_double"]
    pub fn sqlite3_bind_double(stmt: *mut sqlite3_stmt, i: c_int, v: f64) -> c_int;
    #[link_name = "inpage_c_sqlite3_bind_text64"]
    pub fn sqlite3_bind_text64(
        stmt: *mut sqlite3_stmt,
        i: c_int,
        v: *const c_char,
        n: u64,
        destructor: isize,
        encoding: u8,
    ) -> c_int;
    #[link_name = "inpage_c_sqlite3_bind_blob64"]
    pub fn sqlite3_bind_blob64(
        stmt: *mut sqlite3_stmt,
        i: c_int,
        v: *const c_void,
        n: u64,
        destructor: isize,
    ) -> c_int;
    #[link_name = "inpage_c_sqlite3_column_count"]
    pub fn sqlite3_column_count(stmt: *mut sqlite3_stmt) -> c_int;
    #[link_name = "inpage_c_sqlite3_column_name"]
    pub fn sqlite3_column_name(stmt: *mut sqlite3_stmt, i: c_int) -> *const c_char;
    #[link_name = "inpage_c_sqlite3_column_type"]
    pub fn sqlite3_column_type(stmt: *mut sqlite3_stmt, i: c_int) -> c_int;
    #[link_name = "inpage_c_sqlite3_column_int64"]
    pub fn sqlite3_column_int64(stmt: *mut sqlite3_stmt, i: c_int) -> i64;
    #[link_name = "inpage_c_sqlite3_column_double"]
    pub fn sqlite3_column_double(stmt: *mut sqlite3_stmt, i: c_int) -> f64;
    #[link_name = "inpage_c_sqlite3_column_text"]
    pub fn sqlite3_column_text(stmt: *mut sqlite3_stmt, i: c_int) -> *const u8;
    #[link_name = "inpage_c_sqlite3_column_blob"]
    pub fn sqlite3_column_blob(stmt: *mut sqlite3_stmt, i: c_int) -> *const c_void;
    #[link_name = "inpage_c_sqlite3_column_bytes"]
    pub fn sqlite3_column_bytes(stmt: *mut sqlite3_stmt, i: c_int) -> c_int;
    #[link_name = "inpage_c_sqlite3_changes64"]
    pub fn sqlite3_changes64(db: *mut sqlite3) -> i64;
    #[link_name = "inpage_c_sqlite3_changes"]
    pub fn sqlite3_changes(db: *mut sqlite3) -> c_int;
    #[link_name = "inpage_c_sqlite3_last_insert_rowid"]
    pub fn sqlite3_last_insert_rowid(db: *mut sqlite3) -> i64;
    #[link_name = "inpage_c_sqlite3_busy_timeout"]
    pub fn sqlite3_busy_timeout(db: *mut sqlite3, ms: c_int) -> c_int;
    #[link_name = "inpage_c_sqlite3_get_autocommit"]
    pub fn sqlite3_get_autocommit(db: *mut sqlite3) -> c_int;
    #[link_name = "inpage_c_sqlite3_libversion"]
    pub fn sqlite3_libversion() -> *const c_char;
    #[link_name = "inpage_c_sqlite3_file_control"]
    pub fn sqlite3_file_control(
        db: *mut sqlite3,
        name: *const c_char,
        op: c_int,
        arg: *mut c_void,
    ) -> c_int;
    #[link_name = "inpage_c_sqlite3_snprintf"]
    pub fn sqlite3_snprintf(n: c_int, buf: *mut c_char, fmt: *const c_char, ...) -> *mut c_char;
    #[link_name = "inpage_c_sqlite3_config"]
    pub fn sqlite3_config(op: c_int, ...) -> c_int;
    #[link_name = "inpage_c_sqlite3_db_handle"]
    pub fn sqlite3_db_handle(stmt: *mut sqlite3_stmt) -> *mut sqlite3;
    #[link_name = "inpage_c_sqlite3_complete"]
    pub fn sqlite3_complete(sql: *const c_char) -> c_int;
}
