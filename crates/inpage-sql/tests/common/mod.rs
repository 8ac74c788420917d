//! A minimal safe wrapper over the SQLite C API this crate exports, for the tests. The
//! raw declarations are inpage_sql::sys (the renamed C API of the rlib).
#![allow(dead_code)]

use std::ffi::{c_char, c_int, CStr, CString};
use std::path::Path;

extern crate inpage_sql;

use inpage_sql::sys::{sqlite3 as Sqlite3, sqlite3_stmt as Stmt, *};
#[allow(unused_imports)]
pub use inpage_sql::sys::{SQLITE_DONE, SQLITE_OK, SQLITE_ROW, SQLITE_TOOBIG};
const OPEN_RW_CREATE: c_int = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;

static LOG: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

extern "C" fn log_cb(_arg: *mut std::ffi::c_void, code: c_int, msg: *const c_char) {
    // SAFETY: SQLite passes a NUL-terminated message valid for the call.
    let m = unsafe { CStr::from_ptr(msg) }
        .to_string_lossy()
        .into_owned();
    if let Ok(mut l) = LOG.lock() {
        l.push(format!("({code}) {m}"));
    }
}

/// Collect sqlite3_log messages. Must run before the first open in the process (only
/// for single-test child processes: SQLite refuses config after initialisation).
pub fn install_log() {
    type Cb = extern "C" fn(*mut std::ffi::c_void, c_int, *const c_char);
    // SAFETY: SQLITE_CONFIG_LOG (16) takes a callback and its argument.
    let rc = unsafe { sqlite3_config(16, log_cb as Cb, std::ptr::null_mut::<std::ffi::c_void>()) };
    assert_eq!(
        rc, SQLITE_OK,
        "sqlite3_config(LOG) must precede the first open"
    );
}

/// The messages logged so far.
pub fn logged() -> Vec<String> {
    LOG.lock().map(|l| l.clone()).unwrap_or_default()
}

/// How a result column is read: SQLite's own conversions, as the canonical runner does.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Col {
    /// `sqlite3_column_int64`, printed `%lld`.
    Int,
    /// `sqlite3_column_double`, printed `sqlite3_snprintf("%.3f")`.
    Real,
    /// `sqlite3_column_text`.
    Text,
}

#[derive(Debug)]
pub struct SqlError {
    pub code: c_int,
    pub msg: String,
}

pub struct Db {
    db: *mut Sqlite3,
}

impl Db {
    pub fn open(path: &str) -> Result<Db, SqlError> {
        let p = CString::new(path).unwrap();
        let mut db = std::ptr::null_mut();
        // SAFETY: valid C string and out pointer; the handle is closed in Drop.
        let rc = unsafe { sqlite3_open_v2(p.as_ptr(), &mut db, OPEN_RW_CREATE, std::ptr::null()) };
        if rc != SQLITE_OK {
            let e = SqlError {
                code: rc,
                msg: format!("open {path}"),
            };
            // SAFETY: sqlite3_open_v2 returns a handle to close even on failure.
            unsafe { sqlite3_close_v2(db) };
            return Err(e);
        }
        Ok(Db { db })
    }
    pub fn open_path(path: &Path) -> Db {
        Db::open(path.to_str().unwrap()).expect("open")
    }

    fn err(&self) -> SqlError {
        // SAFETY: live handle; errmsg is a NUL-terminated string owned by SQLite.
        unsafe {
            SqlError {
                code: sqlite3_extended_errcode(self.db),
                msg: CStr::from_ptr(sqlite3_errmsg(self.db))
                    .to_string_lossy()
                    .into_owned(),
            }
        }
    }

    /// Run every statement of `sql`, discarding rows.
    pub fn exec(&self, sql: &str) -> Result<(), SqlError> {
        let c = CString::new(sql).unwrap();
        let mut tail = c.as_ptr();
        loop {
            // SAFETY: `tail` points into `c`, which is alive and NUL-terminated.
            if unsafe { *tail } == 0 {
                return Ok(());
            }
            let mut st = std::ptr::null_mut();
            let mut next = std::ptr::null();
            // SAFETY: as above; `st`/`next` are valid out pointers.
            let rc = unsafe { sqlite3_prepare_v2(self.db, tail, -1, &mut st, &mut next) };
            if rc != SQLITE_OK {
                return Err(self.err());
            }
            if st.is_null() {
                return Ok(()); // only whitespace or comments left
            }
            let r = loop {
                // SAFETY: `st` is a prepared statement, finalized below.
                match unsafe { sqlite3_step(st) } {
                    SQLITE_ROW => continue,
                    SQLITE_DONE => break Ok(()),
                    _ => break Err(self.err()),
                }
            };
            // SAFETY: finalize once.
            unsafe { sqlite3_finalize(st) };
            r?;
            tail = next;
        }
    }

    /// Run one query; every value as text under `cols` (missing entries: Text).
    pub fn query_as(&self, sql: &str, cols: &[Col]) -> Result<Vec<Vec<Option<String>>>, SqlError> {
        let stmt = self.prepare(sql)?;
        let st = stmt.st;
        let mut rows = Vec::new();
        loop {
            // SAFETY: `st` is live until `stmt` is dropped (finalized) after the loop.
            match unsafe { sqlite3_step(st) } {
                SQLITE_ROW => {
                    // SAFETY: as above.
                    let n = unsafe { sqlite3_column_count(st) };
                    let mut row = Vec::with_capacity(n as usize);
                    for i in 0..n {
                        let kind = cols.get(i as usize).copied().unwrap_or(Col::Text);
                        // SAFETY: column index < count; text pointers read before the
                        // next step, with their byte count.
                        row.push(unsafe { column(st, i, kind) });
                    }
                    rows.push(row);
                }
                SQLITE_DONE => return Ok(rows),
                _ => return Err(self.err()),
            }
        }
    }

    /// Run one query, every column as text.
    pub fn query(&self, sql: &str) -> Result<Vec<Vec<Option<String>>>, SqlError> {
        self.query_as(sql, &[])
    }

    /// The single value of a one-row, one-column query.
    pub fn one(&self, sql: &str) -> Option<String> {
        let rows = self.query(sql).unwrap_or_else(|e| panic!("{sql}: {e:?}"));
        assert_eq!(rows.len(), 1, "{sql}: {rows:?}");
        rows[0][0].clone()
    }

    /// Prepare one statement to step by hand.
    pub fn prepare(&self, sql: &str) -> Result<Statement<'_>, SqlError> {
        let c = CString::new(sql).unwrap();
        let mut st = std::ptr::null_mut();
        // SAFETY: valid string and out pointer.
        let rc =
            unsafe { sqlite3_prepare_v2(self.db, c.as_ptr(), -1, &mut st, std::ptr::null_mut()) };
        if rc != SQLITE_OK || st.is_null() {
            return Err(self.err());
        }
        Ok(Statement { db: self, st })
    }

    /// SQLITE_FCNTL_DATA_VERSION (35) of "main".
    pub fn fcntl_data_version(&self) -> u32 {
        let mut v: u32 = 0;
        // SAFETY: live handle; the opcode writes one unsigned int through the pointer.
        let rc = unsafe {
            sqlite3_file_control(self.db, c"main".as_ptr(), 35, (&mut v as *mut u32).cast())
        };
        assert_eq!(rc, SQLITE_OK);
        v
    }

    pub fn changes(&self) -> i32 {
        // SAFETY: live handle.
        unsafe { sqlite3_changes(self.db) }
    }
}

/// # Safety
/// `st` has a current row and `i` < its column count.
unsafe fn column(st: *mut Stmt, i: c_int, kind: Col) -> Option<String> {
    // SAFETY: caller's contract.
    unsafe {
        if sqlite3_column_type(st, i) == 5 {
            return None; // SQLITE_NULL
        }
        Some(match kind {
            Col::Int => sqlite3_column_int64(st, i).to_string(),
            Col::Real => {
                let mut buf = [0 as c_char; 64];
                sqlite3_snprintf(
                    64,
                    buf.as_mut_ptr(),
                    c"%.3f".as_ptr(),
                    sqlite3_column_double(st, i),
                );
                CStr::from_ptr(buf.as_ptr()).to_string_lossy().into_owned()
            }
            Col::Text => {
                let p = sqlite3_column_text(st, i);
                let n = sqlite3_column_bytes(st, i);
                if p.is_null() {
                    String::new()
                } else {
                    String::from_utf8_lossy(std::slice::from_raw_parts(p, n as usize)).into_owned()
                }
            }
        })
    }
}

/// A prepared statement of a [`Db`], finalized on drop.
pub struct Statement<'a> {
    db: &'a Db,
    st: *mut Stmt,
}

impl Statement<'_> {
    /// The next row's first column as text; Ok(None) when done.
    pub fn next_first(&mut self) -> Result<Option<String>, SqlError> {
        // SAFETY: `st` is live until drop.
        match unsafe { sqlite3_step(self.st) } {
            // SAFETY: a row is current and column 0 exists (callers select a column).
            SQLITE_ROW => Ok(Some(
                unsafe { column(self.st, 0, Col::Text) }.unwrap_or_default(),
            )),
            SQLITE_DONE => Ok(None),
            _ => Err(self.db.err()),
        }
    }

    /// The next row, every column as text; Ok(None) when done.
    pub fn next_row(&mut self) -> Result<Option<Vec<Option<String>>>, SqlError> {
        // SAFETY: `st` is live until drop.
        match unsafe { sqlite3_step(self.st) } {
            SQLITE_ROW => {
                // SAFETY: a row is current.
                let n = unsafe { sqlite3_column_count(self.st) };
                // SAFETY: every index is below the column count.
                Ok(Some(
                    (0..n)
                        .map(|i| unsafe { column(self.st, i, Col::Text) })
                        .collect(),
                ))
            }
            SQLITE_DONE => Ok(None),
            _ => Err(self.db.err()),
        }
    }
}

impl Drop for Statement<'_> {
    fn drop(&mut self) {
        // SAFETY: finalized once.
        unsafe { sqlite3_finalize(self.st) };
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        // SAFETY: the handle is live and closed once.
        unsafe { sqlite3_close_v2(self.db) };
    }
}
