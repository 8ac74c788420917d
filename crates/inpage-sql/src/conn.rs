//! A small safe Rust API over this crate's SQLite (the renamed C API in [`sys`]): what
//! the `inpage sql` shell and the bench's `sql-<mode>` contenders use. Rust applications
//! that want the full rusqlite API link the shared library instead (README).
//!
//! Invariants: a [`Connection`] owns one open `sqlite3*` and closes it once, on drop
//! (`sqlite3_close_v2`, so statements still alive keep it usable until they finish); a
//! [`Statement`] borrows its connection, so it cannot outlive it, and finalizes once.
//! Text and blob columns are copied out before the next step, the only point at which
//! SQLite may invalidate them.

use crate::sys::*;
use std::ffi::{c_char, c_int, CStr, CString};
use std::fmt;
use std::path::Path;
use std::ptr::{self, NonNull};

/// An SQLite error: the (extended) result code and SQLite's message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SqlError {
    /// SQLite's extended result code (`SQLITE_BUSY` = 5, ...).
    pub code: i32,
    /// The message (`sqlite3_errmsg`), with what was being done.
    pub message: String,
}

impl fmt::Display for SqlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (SQLite code {})", self.message, self.code)
    }
}

impl std::error::Error for SqlError {}

/// Result of this module's calls.
pub type Result<T> = std::result::Result<T, SqlError>;

/// One SQL value, as SQLite types it.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Null,
    Integer(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
}

/// An open database connection.
pub struct Connection {
    db: NonNull<sqlite3>,
}

// SAFETY: the library is built with SQLITE_THREADSAFE=1 and connections are opened
// NOMUTEX (multi-thread mode): a connection may move to another thread as long as it is
// used by one thread at a time, which `Send` without `Sync` guarantees.
unsafe impl Send for Connection {}

fn cstring(s: &str, what: &str) -> Result<CString> {
    CString::new(s).map_err(|_| SqlError {
        code: SQLITE_ERROR,
        message: format!("{what} contains a NUL byte"),
    })
}

impl Connection {
    /// Open (creating it if missing) the database file at `path`. Its journal mode is
    /// the file's own, the engine's default (`inpage::DEFAULT_JOURNAL_MODE`) for a new
    /// file (or what `INPAGE_JOURNAL_MODE` forces).
    pub fn open(path: impl AsRef<Path>) -> Result<Connection> {
        let p = path.as_ref();
        let name = p.to_str().ok_or_else(|| SqlError {
            code: SQLITE_ERROR,
            message: format!("{p:?}: the path is not UTF-8"),
        })?;
        Connection::open_with_flags(name, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE)
    }

    /// Open (creating it if missing) the database file at `path`; a new file gets the
    /// journal mode `mode` (an inpage or SQLite mode name), an existing one keeps its own
    /// (`PRAGMA journal_mode` says which). The same as the URI
    /// `file:PATH?journal_mode=MODE` through the C API.
    pub fn open_with_mode(path: impl AsRef<Path>, mode: &str) -> Result<Connection> {
        let p = path.as_ref();
        let name = p.to_str().ok_or_else(|| SqlError {
            code: SQLITE_ERROR,
            message: format!("{p:?}: the path is not UTF-8"),
        })?;
        let uri = format!(
            "file:{}?journal_mode={}",
            uri_escape(name),
            uri_escape(mode)
        );
        Connection::open_with_flags(
            &uri,
            SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI,
        )
    }

    /// A private in-memory database.
    pub fn open_memory() -> Result<Connection> {
        Connection::open_with_flags(":memory:", SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE)
    }

    /// `sqlite3_open_v2` with these flags (`SQLITE_OPEN_*`), plus `SQLITE_OPEN_NOMUTEX`
    /// as rusqlite opens: a [`Connection`] is `Send` but not `Sync`, so Rust already
    /// keeps its calls one at a time and SQLite's per-call connection mutex would only
    /// cost time.
    pub fn open_with_flags(name: &str, flags: c_int) -> Result<Connection> {
        let flags = flags | SQLITE_OPEN_NOMUTEX;
        let c = cstring(name, "the file name")?;
        let mut db = ptr::null_mut();
        // SAFETY: valid C string and out pointer; no VFS name (the default).
        let rc = unsafe { sqlite3_open_v2(c.as_ptr(), &mut db, flags, ptr::null()) };
        let Some(db) = NonNull::new(db) else {
            return Err(SqlError {
                code: rc,
                message: format!("{name}: out of memory opening the database"),
            });
        };
        let conn = Connection { db };
        if rc != SQLITE_OK {
            let e = conn.error(&format!("open {name}"));
            return Err(e); // drop closes the handle, as sqlite3_open_v2 requires
        }
        // SAFETY: live handle.
        unsafe { sqlite3_extended_result_codes(conn.db.as_ptr(), 1) };
        Ok(conn)
    }

    /// The raw handle, for callers of [`crate::sys`]; valid while `self` lives.
    pub fn handle(&self) -> *mut sqlite3 {
        self.db.as_ptr()
    }

    fn error(&self, what: &str) -> SqlError {
        // SAFETY: live handle.
        unsafe { db_error(self.db.as_ptr(), what) }
    }

    /// Run every statement of `sql`, discarding rows.
    pub fn execute_batch(&self, sql: &str) -> Result<()> {
        self.for_each_statement(sql, |st| {
            while st.step()? {}
            Ok(())
        })
    }

    /// Run every statement of `sql`; `each` gets each prepared statement in turn, to step.
    pub fn for_each_statement(
        &self,
        sql: &str,
        mut each: impl FnMut(&mut Statement<'_>) -> Result<()>,
    ) -> Result<()> {
        let c = cstring(sql, "the SQL text")?;
        let mut tail: *const c_char = c.as_ptr();
        loop {
            let mut st = ptr::null_mut();
            let mut next = ptr::null();
            // SAFETY: `tail` points into `c`, alive and NUL-terminated; valid out pointers.
            let rc = unsafe { sqlite3_prepare_v2(self.db.as_ptr(), tail, -1, &mut st, &mut next) };
            if rc != SQLITE_OK {
                return Err(self.error(""));
            }
            let Some(st) = NonNull::new(st) else {
                return Ok(()); // only whitespace or comments left
            };
            let mut stmt = Statement { conn: self, st };
            each(&mut stmt)?;
            drop(stmt);
            tail = next;
        }
    }

    /// Prepare one statement.
    pub fn prepare(&self, sql: &str) -> Result<Statement<'_>> {
        let c = cstring(sql, "the SQL text")?;
        let mut st = ptr::null_mut();
        // SAFETY: valid string and out pointer.
        let rc = unsafe {
            sqlite3_prepare_v2(self.db.as_ptr(), c.as_ptr(), -1, &mut st, ptr::null_mut())
        };
        if rc != SQLITE_OK {
            return Err(self.error(""));
        }
        match NonNull::new(st) {
            Some(st) => Ok(Statement { conn: self, st }),
            None => Err(SqlError {
                code: SQLITE_ERROR,
                message: format!("no statement in {sql:?}"),
            }),
        }
    }

    /// Prepare one statement to keep across calls (see [`CachedStatement`]).
    pub fn prepare_cached(&self, sql: &str) -> Result<CachedStatement> {
        let st = self.prepare(sql)?;
        let raw = st.st;
        std::mem::forget(st); // ownership moves to the CachedStatement
        Ok(CachedStatement { st: raw })
    }

    /// Run one statement with `params` and collect its rows.
    pub fn query(&self, sql: &str, params: &[Value]) -> Result<Vec<Vec<Value>>> {
        let mut st = self.prepare(sql)?;
        st.bind_all(params)?;
        let mut rows = Vec::new();
        while st.step()? {
            rows.push(st.row());
        }
        Ok(rows)
    }

    /// Run one statement with `params`; the number of rows it changed.
    pub fn execute(&self, sql: &str, params: &[Value]) -> Result<i64> {
        let mut st = self.prepare(sql)?;
        st.bind_all(params)?;
        while st.step()? {}
        Ok(self.changes())
    }

    /// Rows changed by the last INSERT, UPDATE or DELETE.
    pub fn changes(&self) -> i64 {
        // SAFETY: live handle.
        unsafe { sqlite3_changes64(self.db.as_ptr()) }
    }

    /// The rowid of the last successful INSERT.
    pub fn last_insert_rowid(&self) -> i64 {
        // SAFETY: live handle.
        unsafe { sqlite3_last_insert_rowid(self.db.as_ptr()) }
    }

    /// Whether no transaction is open (autocommit mode).
    pub fn is_autocommit(&self) -> bool {
        // SAFETY: live handle.
        unsafe { sqlite3_get_autocommit(self.db.as_ptr()) != 0 }
    }

    /// `sqlite3_busy_timeout`: how long a statement waits for a lock before SQLITE_BUSY.
    pub fn busy_timeout(&self, ms: i32) -> Result<()> {
        // SAFETY: live handle.
        match unsafe { sqlite3_busy_timeout(self.db.as_ptr(), ms) } {
            SQLITE_OK => Ok(()),
            _ => Err(self.error("busy_timeout")),
        }
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        // SAFETY: the handle is live and closed once; close_v2 defers the close until
        // the last statement is finalized (none can be alive: they borrow `self`).
        unsafe { sqlite3_close_v2(self.db.as_ptr()) };
    }
}

/// The error of connection `db`.
///
/// # Safety
/// `db` is a live connection handle.
unsafe fn db_error(db: *mut sqlite3, what: &str) -> SqlError {
    // SAFETY: caller's contract; errmsg is a NUL-terminated string owned by SQLite,
    // copied before any other call.
    unsafe {
        let msg = CStr::from_ptr(sqlite3_errmsg(db)).to_string_lossy();
        SqlError {
            code: sqlite3_extended_errcode(db),
            message: if what.is_empty() {
                msg.into_owned()
            } else {
                format!("{what}: {msg}")
            },
        }
    }
}

/// A prepared statement kept across calls without borrowing its connection (for a
/// struct that owns both, as a statement cache does). Finalized on drop; dropping it
/// after its connection is fine, because the connection closes with `sqlite3_close_v2`,
/// which keeps it alive until its last statement is finalized.
pub struct CachedStatement {
    st: NonNull<sqlite3_stmt>,
}

// SAFETY: multi-thread mode (see `Connection`): a statement may move between threads;
// `&mut self` on every call keeps its uses one at a time. Its owner must not use it on
// another thread than its connection at the same time (the bench's stores own both).
unsafe impl Send for CachedStatement {}

impl CachedStatement {
    /// Bind `params`, step to the end reading every column of every row (text and blob
    /// bytes included, as an application reading its rows does), reset. Returns the
    /// number of rows.
    pub fn run(&mut self, params: &[Value]) -> Result<u64> {
        let st = self.st.as_ptr();
        // SAFETY: live statement; columns are read only while a row is current, and the
        // text pointer's bytes are counted, not kept.
        unsafe {
            for (i, v) in params.iter().enumerate() {
                let rc = bind_raw(st, i as c_int + 1, v);
                if rc != SQLITE_OK {
                    sqlite3_reset(st);
                    return Err(db_error(sqlite3_db_handle(st), "bind"));
                }
            }
            let mut rows = 0u64;
            loop {
                match sqlite3_step(st) {
                    SQLITE_ROW => {
                        rows += 1;
                        let mut bytes = 0usize;
                        for c in 0..sqlite3_column_count(st) {
                            match sqlite3_column_type(st, c) {
                                SQLITE_INTEGER => {
                                    std::hint::black_box(sqlite3_column_int64(st, c));
                                }
                                SQLITE_FLOAT => {
                                    std::hint::black_box(sqlite3_column_double(st, c));
                                }
                                SQLITE_NULL => {}
                                _ => {
                                    std::hint::black_box(sqlite3_column_text(st, c));
                                    bytes += sqlite3_column_bytes(st, c) as usize;
                                }
                            }
                        }
                        std::hint::black_box(bytes);
                    }
                    SQLITE_DONE => {
                        sqlite3_reset(st);
                        return Ok(rows);
                    }
                    _ => {
                        sqlite3_reset(st);
                        return Err(db_error(sqlite3_db_handle(st), ""));
                    }
                }
            }
        }
    }
}

impl Drop for CachedStatement {
    fn drop(&mut self) {
        // SAFETY: finalized once.
        unsafe { sqlite3_finalize(self.st.as_ptr()) };
    }
}

/// Column `i` of `st`'s current row through SQLite's text conversion.
///
/// # Safety
/// `st` is a live statement with a current row and `i` < its column count.
unsafe fn column_text(st: *mut sqlite3_stmt, i: c_int) -> String {
    // SAFETY: caller's contract; the byte count is asked after the pointer, as SQLite
    // documents, and the bytes are copied at once.
    unsafe {
        let p = sqlite3_column_text(st, i);
        let n = sqlite3_column_bytes(st, i) as usize;
        if p.is_null() {
            String::new()
        } else {
            String::from_utf8_lossy(std::slice::from_raw_parts(p, n)).into_owned()
        }
    }
}

/// Bind `v` to parameter `i` of `st`.
///
/// # Safety
/// `st` is a live statement.
unsafe fn bind_raw(st: *mut sqlite3_stmt, i: c_int, v: &Value) -> c_int {
    // SAFETY: caller's contract; text and blob are copied by SQLite (SQLITE_TRANSIENT)
    // before the call returns. Encoding 1 is SQLITE_UTF8, which a Rust `String` is.
    unsafe {
        match v {
            Value::Null => sqlite3_bind_null(st, i),
            Value::Integer(x) => sqlite3_bind_int64(st, i, *x),
            Value::Real(x) => sqlite3_bind_double(st, i, *x),
            Value::Text(s) => sqlite3_bind_text64(
                st,
                i,
                s.as_ptr().cast(),
                s.len() as u64,
                SQLITE_TRANSIENT,
                1,
            ),
            Value::Blob(b) => {
                sqlite3_bind_blob64(st, i, b.as_ptr().cast(), b.len() as u64, SQLITE_TRANSIENT)
            }
        }
    }
}

/// Percent-encode what a URI path or value cannot hold literally.
fn uri_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"/-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The SQLite library version this crate compiled (`3.53.2`).
pub fn sqlite_version() -> String {
    // SAFETY: a static NUL-terminated string.
    unsafe { CStr::from_ptr(sqlite3_libversion()) }
        .to_string_lossy()
        .into_owned()
}

/// Whether `sql` ends with a complete statement (`sqlite3_complete`), for shells that
/// read statements line by line.
pub fn is_complete(sql: &str) -> bool {
    match CString::new(sql) {
        // SAFETY: valid NUL-terminated string.
        Ok(c) => unsafe { sqlite3_complete(c.as_ptr()) != 0 },
        Err(_) => false,
    }
}

/// A prepared statement, finalized on drop.
pub struct Statement<'c> {
    conn: &'c Connection,
    st: NonNull<sqlite3_stmt>,
}

impl Statement<'_> {
    fn check(&self, rc: c_int, what: &str) -> Result<()> {
        if rc == SQLITE_OK {
            Ok(())
        } else {
            Err(self.conn.error(what))
        }
    }

    /// Bind `v` to parameter `i` (1-based).
    pub fn bind(&mut self, i: usize, v: &Value) -> Result<()> {
        // SAFETY: live statement.
        let rc = unsafe { bind_raw(self.st.as_ptr(), i as c_int, v) };
        self.check(rc, "bind")
    }

    /// Bind `params` to parameters 1..=n.
    pub fn bind_all(&mut self, params: &[Value]) -> Result<()> {
        for (i, v) in params.iter().enumerate() {
            self.bind(i + 1, v)?;
        }
        Ok(())
    }

    /// Step once: true if a row is ready, false when the statement is done.
    pub fn step(&mut self) -> Result<bool> {
        // SAFETY: live statement.
        match unsafe { sqlite3_step(self.st.as_ptr()) } {
            SQLITE_ROW => Ok(true),
            SQLITE_DONE => Ok(false),
            _ => {
                // sqlite3_reset returns the error code and keeps the message current.
                // SAFETY: live statement.
                unsafe { sqlite3_reset(self.st.as_ptr()) };
                Err(self.conn.error(""))
            }
        }
    }

    /// Reset to run again (bindings stay).
    pub fn reset(&mut self) -> Result<()> {
        // SAFETY: live statement.
        let rc = unsafe { sqlite3_reset(self.st.as_ptr()) };
        self.check(rc, "reset")
    }

    /// Number of result columns.
    pub fn column_count(&self) -> usize {
        // SAFETY: live statement.
        unsafe { sqlite3_column_count(self.st.as_ptr()) as usize }
    }

    /// Name of result column `i` (0-based).
    pub fn column_name(&self, i: usize) -> String {
        // SAFETY: live statement; the name is NUL-terminated (or null on OOM) and copied.
        unsafe {
            let p = sqlite3_column_name(self.st.as_ptr(), i as c_int);
            if p.is_null() {
                String::new()
            } else {
                CStr::from_ptr(p).to_string_lossy().into_owned()
            }
        }
    }

    /// Value of column `i` of the current row (after `step` returned true).
    pub fn value(&self, i: usize) -> Value {
        let st = self.st.as_ptr();
        let i = i as c_int;
        // SAFETY: live statement with a current row; text/blob pointers are read with
        // their byte count (asked after the pointer, as SQLite documents) and copied
        // before the next step.
        unsafe {
            match sqlite3_column_type(st, i) {
                SQLITE_INTEGER => Value::Integer(sqlite3_column_int64(st, i)),
                SQLITE_FLOAT => Value::Real(sqlite3_column_double(st, i)),
                SQLITE_TEXT => Value::Text(column_text(st, i)),
                SQLITE_BLOB => {
                    let p = sqlite3_column_blob(st, i);
                    let n = sqlite3_column_bytes(st, i) as usize;
                    Value::Blob(if p.is_null() {
                        Vec::new()
                    } else {
                        std::slice::from_raw_parts(p.cast::<u8>(), n).to_vec()
                    })
                }
                _ => Value::Null,
            }
        }
    }

    /// Column `i` as SQLite's text conversion renders it (`None` for NULL): what the
    /// `sqlite3` shell prints.
    pub fn text(&self, i: usize) -> Option<String> {
        let st = self.st.as_ptr();
        // SAFETY: live statement with a current row; the pointer's bytes are counted
        // after it is fetched, as SQLite documents, and copied at once.
        unsafe {
            if sqlite3_column_type(st, i as c_int) == SQLITE_NULL {
                return None;
            }
            Some(column_text(st, i as c_int))
        }
    }

    /// Column `i` as an integer (SQLite's conversion).
    pub fn int64(&self, i: usize) -> i64 {
        // SAFETY: live statement with a current row.
        unsafe { sqlite3_column_int64(self.st.as_ptr(), i as c_int) }
    }

    /// Every column of the current row.
    pub fn row(&self) -> Vec<Value> {
        (0..self.column_count()).map(|i| self.value(i)).collect()
    }

    /// The raw statement, for callers of [`crate::sys`]; valid while `self` lives.
    pub fn handle(&self) -> *mut sqlite3_stmt {
        self.st.as_ptr()
    }
}

impl Drop for Statement<'_> {
    fn drop(&mut self) {
        // SAFETY: finalized once.
        unsafe { sqlite3_finalize(self.st.as_ptr()) };
    }
}
