//! SQLite result codes the glue returns (values from sqlite3.h; fixed by SQLite's ABI).
#![allow(dead_code)]

use std::ffi::c_int;

pub const OK: c_int = 0;
pub const ERROR: c_int = 1;
pub const INTERNAL: c_int = 2;
pub const BUSY: c_int = 5;
pub const LOCKED: c_int = 6;
pub const NOMEM: c_int = 7;
pub const READONLY: c_int = 8;
pub const IOERR: c_int = 10;
pub const CORRUPT: c_int = 11;
pub const FULL: c_int = 13;
pub const CANTOPEN: c_int = 14;
pub const TOOBIG: c_int = 18;
pub const MISUSE: c_int = 21;
pub const NOTADB: c_int = 26;
pub const DONE: c_int = 101;
pub const BUSY_SNAPSHOT: c_int = BUSY | (2 << 8);
