//! The C-ABI side of the glue: the `ipg_*` functions `csrc/glue.c` calls for every
//! storage operation, over inpage's current public API. All of this crate's `unsafe`
//! lives here and in `index_order.rs` (raw pointers handed over by C).
//!
//! Invariants, and why they hold:
//! - A `Cur` names its entry by key (`key`), never by slot: every move re-seeks from the
//!   root through a fresh engine cursor (the engine's cursors borrow the transaction, so
//!   none can live across a write; owned cursors are issue 13 M0). `next`/`prev` go to
//!   the first key after / before that key, which is what SQLite expects after a
//!   SAVEPOSITION delete or after another cursor changed the tree. Sound, but each step
//!   costs a descent.
//! - The buffer `ipg_payload` hands out stays valid and unchanged for as long as
//!   `ipg_has_moved` answers 0: OP_Column caches the pointer across opcodes (trap 6,
//!   SQLPLAN §2a). A write bumps `Conn::gen`; a cursor then re-reads its entry and keeps
//!   its old buffer if the bytes are the same, else reports "moved".
//! - Rollback of the whole transaction without ending it (SQLite's `Savepoint(ROLLBACK,
//!   -1)`) rolls back to a base savepoint taken at begin (sound: the engine restores the
//!   dirty map of that point).
//! - One engine handle per file per process (`OPEN_FILES`): connections to the same
//!   path share a clone of it, each with its own transactions, so the engine's
//!   one-writer / snapshot-readers rule is SQLite's WAL-mode rule between them. The
//!   handle is dropped with the last connection (`Drop for Conn`), after its
//!   transaction, so the file's lock goes when the last connection closes.
//! - Every entry point runs under `catch_unwind`: a panic becomes SQLITE_INTERNAL (or a
//!   neutral value), never an unwind into C.
//! - SQLite serialises all calls on one connection (its db mutex), and C closes every
//!   cursor before its b-tree, so the `&mut` made from a `Conn*`/`Cur*` is unique for
//!   the call and the `Conn` outlives its cursors.

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex};

use inpage::vfs::SimVfs;
use inpage::{
    Comparator, Config, Database, Error, JournalMode, Key, OwnedKey, ReadTxn, ReadableTxn,
    Savepoint, Tree, WriteTxn,
};

use crate::index_order::{self, MARKER};
use crate::rc::*;

/// The environment variable that forces one journal mode for every database opened
/// (new files are created in it; an existing file in another mode is refused).
pub const JOURNAL_MODE_ENV: &str = "INPAGE_JOURNAL_MODE";

/// SQLite's result code for an engine error.
pub fn rc_of(e: &Error) -> c_int {
    match e {
        Error::Busy | Error::Locked { .. } => BUSY,
        Error::KeyTooLarge { .. } | Error::ValueTooLarge { .. } => TOOBIG,
        Error::Corrupt { .. } | Error::CorruptJournal { .. } | Error::Truncated { .. } => CORRUPT,
        Error::Io { .. } => IOERR,
        Error::Full => FULL,
        Error::ReadOnly { .. } => READONLY,
        Error::NotADatabase { .. } => NOTADB,
        Error::InvalidArgument(_) => MISUSE,
        _ => ERROR,
    }
}

/// SQLite's journal-mode code (build.rs's pragma.c patch names 6-9) for an inpage mode.
pub fn mode_code(m: JournalMode) -> c_int {
    match m.name() {
        "delete" => 0,
        "persist" => 1,
        "off" => 2,
        "truncate" => 3,
        "wal" => 5,
        "dhl-cc" => 6,
        "dhl-cc-header" => 7,
        "dhl-tc" => 8,
        "off-opt" => 9,
        other => {
            debug_assert!(false, "journal mode {other} has no SQLite code");
            2
        }
    }
}

/// The mode `INPAGE_JOURNAL_MODE` asks for: Ok(None) if unset; `_` may stand for `-`.
pub fn mode_from_env() -> Result<Option<JournalMode>, String> {
    match std::env::var(JOURNAL_MODE_ENV) {
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(e) => Err(format!("{JOURNAL_MODE_ENV}: {e}")),
        Ok(v) => JournalMode::from_name(&v.replace('_', "-"))
            .map(Some)
            .ok_or_else(|| {
                let names: Vec<_> = JournalMode::all().map(|m| m.name()).collect();
                format!("{JOURNAL_MODE_ENV}={v:?}: unknown mode (one of {names:?})")
            }),
    }
}

/// Files open in this process: one engine handle per file (the engine refuses a second
/// read-write handle), shared by every connection to it, with the number of
/// connections. The entry goes when the last connection closes, which closes the file.
static OPEN_FILES: Mutex<Vec<(String, Database, usize)>> = Mutex::new(Vec::new());

fn open_shared(path: &str, cfg: Config, forced: Option<JournalMode>) -> Result<Database, Error> {
    let mut files = OPEN_FILES.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(entry) = files.iter_mut().find(|e| e.0 == path) {
        if let Some(m) = forced {
            if entry.1.journal_mode() != m {
                return Err(Error::ModeMismatch {
                    path: path.into(),
                    file: entry.1.journal_mode().name().into(),
                    requested: m.name().into(),
                });
            }
        }
        entry.2 += 1;
        return Ok(entry.1.clone());
    }
    let db = Database::open(path, cfg)?;
    files.push((path.to_string(), db.clone(), 1));
    Ok(db)
}

fn close_shared(path: &str) {
    let mut files = OPEN_FILES.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(i) = files.iter().position(|e| e.0 == path) {
        files[i].2 -= 1;
        if files[i].2 == 0 {
            files.swap_remove(i);
        }
    }
}

/// Run an entry point; a panic becomes `fallback`.
fn guard<R>(fallback: R, f: impl FnOnce() -> R) -> R {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(fallback)
}

// One per connection, so the size difference between variants does not matter.
#[allow(clippy::large_enum_variant)]
enum Txn {
    None,
    Read(ReadTxn),
    Write(WriteTxn),
}

/// One SQLite `Btree`: an inpage database and its open transaction.
pub struct Conn {
    db: Database,
    mem: bool,
    /// The registry key of a file database (None in memory).
    shared_path: Option<String>,
    txn: Txn,
    /// Taken at begin: `Savepoint(ROLLBACK, -1)` undoes everything and stays open.
    base: Option<Savepoint>,
    /// SQLite's savepoint level i = `sps[i]`.
    sps: Vec<Savepoint>,
    trees: HashMap<u32, (Tree, bool)>,
    cmp: Comparator,
    /// Bumped by every write: a cursor's cached payload is stale when it differs.
    gen: u64,
    /// Commits (in fcc steps) made by this connection, and the fcc its write
    /// transaction started from: `PRAGMA data_version` = snapshot fcc minus own commits,
    /// so it changes exactly when another connection commits.
    own_fcc: u64,
    write_start_fcc: u64,
    /// The last error worth a message (read by C for sqlite3_log).
    errmsg: CString,
}

/// One SQLite `BtCursor`.
pub struct Cur {
    conn: *mut Conn,
    itable: u32,
    keyinfo: *mut c_void,
    /// 0 invalid, 1 on `key`, 2 `key` was deleted (moves go to its neighbours).
    state: u8,
    key: OwnedKey,
    val: Vec<u8>,
    gen: u64,
}

fn name(itable: u32) -> String {
    format!("sqlite/{itable}")
}

macro_rules! with_txn {
    ($conn:expr, $t:ident => $body:expr) => {
        match &$conn.txn {
            Txn::Read($t) => $body,
            Txn::Write($t) => $body,
            Txn::None => Err(Error::InvalidArgument("no transaction".into())),
        }
    };
}

impl Drop for Conn {
    fn drop(&mut self) {
        // End the transaction before the registry may drop the last handle.
        self.txn = Txn::None;
        if let Some(p) = &self.shared_path {
            close_shared(p);
        }
    }
}

impl Conn {
    /// The tree of table `itable` and whether it is an intkey (rowid) table; None if it
    /// does not exist (a fresh file's table 1 reads as empty).
    fn tree(&mut self, itable: u32) -> Result<Option<(Tree, bool)>, Error> {
        if let Some(t) = self.trees.get(&itable) {
            return Ok(Some(t.clone()));
        }
        let n = name(itable);
        let cmp = self.cmp.clone();
        let r = with_txn!(self, t => match t.open_tree(&n) {
            Ok(tree) => Ok(Some((tree, true))),
            Err(Error::InvalidArgument(_)) => t.open_tree_with(&n, cmp).map(|tr| Some((tr, false))),
            Err(Error::TreeNotFound(_)) => Ok(None),
            Err(e) => Err(e),
        })?;
        if let Some(t) = &r {
            self.trees.insert(itable, t.clone());
        }
        Ok(r)
    }
    fn write(&mut self) -> Result<&mut WriteTxn, c_int> {
        match &mut self.txn {
            Txn::Write(w) => Ok(w),
            _ => Err(READONLY),
        }
    }
    /// The fcc of the state this connection sees (its snapshot, or the latest).
    fn view_fcc(&self) -> u64 {
        match &self.txn {
            Txn::Read(r) => r.snapshot_fcc(),
            _ => self.db.fcc(),
        }
    }
    fn fail(&mut self, e: &Error) -> c_int {
        self.errmsg = CString::new(e.to_string().replace('\0', " ")).unwrap_or_default();
        rc_of(e)
    }
}

/// # Safety
/// `p` is null or a `Conn*` from `ipg_open` not yet closed, used by one caller at a time.
unsafe fn conn<'a>(p: *mut Conn) -> Option<&'a mut Conn> {
    // SAFETY: see the function's contract (SQLite's db mutex serialises the calls).
    unsafe { p.as_mut() }
}

/// # Safety
/// `p` is null or a `Cur*` from `ipg_cursor_open` not yet closed.
unsafe fn cur<'a>(p: *mut Cur) -> Option<&'a mut Cur> {
    // SAFETY: see the function's contract.
    unsafe { p.as_mut() }
}

/// Open the database `path` (`memory` != 0: a private in-memory one).
///
/// # Safety
/// `path` is null or NUL-terminated; `out` and `errmsg` are valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ipg_open(
    path: *const c_char,
    memory: c_int,
    out: *mut *mut Conn,
) -> c_int {
    guard(INTERNAL, || {
        let path = if path.is_null() {
            String::new()
        } else {
            // SAFETY: SQLite passes a NUL-terminated file name.
            unsafe { CStr::from_ptr(path) }
                .to_string_lossy()
                .into_owned()
        };
        let mem = memory != 0 || path.is_empty();
        let mut forced = None;
        let (path, cfg) = if mem {
            let c = Config::default()
                .vfs(Arc::new(SimVfs::new()))
                .journal_mode(JournalMode::OFF);
            ("mem.db".to_string(), c)
        } else {
            let mut c = Config::default();
            match mode_from_env() {
                Ok(Some(m)) => {
                    c = c.journal_mode(m);
                    forced = Some(m);
                }
                Ok(None) => {}
                Err(msg) => {
                    set_open_error(&msg);
                    return CANTOPEN;
                }
            }
            (path, c)
        };
        let opened = if mem {
            Database::open(&path, cfg)
        } else {
            open_shared(&path, cfg, forced)
        };
        match opened {
            Ok(db) => {
                let cmp: Comparator = Arc::new(index_order::record_cmp);
                let conn = Box::new(Conn {
                    db,
                    mem,
                    shared_path: (!mem).then(|| path.clone()),
                    txn: Txn::None,
                    base: None,
                    sps: Vec::new(),
                    trees: HashMap::new(),
                    cmp,
                    gen: 0,
                    own_fcc: 0,
                    write_start_fcc: 0,
                    errmsg: CString::default(),
                });
                // SAFETY: `out` is valid for a write (contract).
                unsafe { *out = Box::into_raw(conn) };
                OK
            }
            Err(e) => {
                set_open_error(&e.to_string());
                match rc_of(&e) {
                    ERROR | MISUSE => CANTOPEN,
                    rc => rc,
                }
            }
        }
    })
}

thread_local! {
    /// Why the last `ipg_open` on this thread failed (SQLite drops the message of a
    /// failed open, so glue.c hands it to sqlite3_log).
    static OPEN_ERROR: std::cell::RefCell<CString> = std::cell::RefCell::new(CString::default());
}

fn set_open_error(msg: &str) {
    let m = CString::new(msg.replace('\0', " ")).unwrap_or_default();
    OPEN_ERROR.with(|e| *e.borrow_mut() = m);
}

/// The message of the last failed `ipg_open` on this thread; valid until the next open.
#[no_mangle]
pub extern "C" fn ipg_open_errmsg() -> *const c_char {
    OPEN_ERROR.with(|e| e.borrow().as_ptr())
}

/// # Safety
/// `conn` is null or from `ipg_open`; it is not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn ipg_close(conn: *mut Conn) {
    guard((), || {
        if !conn.is_null() {
            // SAFETY: from `Box::into_raw` in `ipg_open`, closed once (C contract).
            drop(unsafe { Box::from_raw(conn) });
        }
    })
}

/// # Safety
/// `conn` as in [`conn`].
#[no_mangle]
pub unsafe extern "C" fn ipg_errmsg(conn: *mut Conn) -> *const c_char {
    // SAFETY: contract.
    match unsafe { self::conn(conn) } {
        Some(c) => c.errmsg.as_ptr(),
        None => c"".as_ptr(),
    }
}

/// SQLite's journal-mode code of the mode in use (`memory` for in-memory databases).
///
/// # Safety
/// `conn` as in [`conn`].
#[no_mangle]
pub unsafe extern "C" fn ipg_mode_code(conn: *mut Conn) -> c_int {
    guard(2, || {
        // SAFETY: contract.
        match unsafe { self::conn(conn) } {
            Some(c) if c.mem => 4,
            Some(c) => mode_code(c.db.journal_mode()),
            None => 2,
        }
    })
}

/// # Safety
/// `conn` as in [`conn`].
#[no_mangle]
pub unsafe extern "C" fn ipg_txn_state(conn: *mut Conn) -> c_int {
    // SAFETY: contract.
    match unsafe { self::conn(conn) }.map(|c| &c.txn) {
        Some(Txn::Read(_)) => 1,
        Some(Txn::Write(_)) => 2,
        _ => 0,
    }
}

/// Begin a read (`write` = 0) or write transaction; a read transaction whose snapshot
/// is stale cannot be upgraded (SQLITE_BUSY_SNAPSHOT, WAL-mode semantics).
///
/// # Safety
/// `conn` as in [`conn`].
#[no_mangle]
pub unsafe extern "C" fn ipg_begin(conn: *mut Conn, write: c_int) -> c_int {
    guard(INTERNAL, || {
        // SAFETY: contract.
        let Some(c) = (unsafe { self::conn(conn) }) else {
            return MISUSE;
        };
        match (&c.txn, write != 0) {
            (Txn::Write(_), _) | (Txn::Read(_), false) => return OK,
            (Txn::None, false) => {
                return match c.db.begin_read() {
                    Ok(r) => {
                        c.txn = Txn::Read(r);
                        OK
                    }
                    Err(e) => c.fail(&e),
                }
            }
            (Txn::Read(r), true) if r.snapshot_fcc() != c.db.fcc() => return BUSY_SNAPSHOT,
            _ => {}
        }
        let mut w = match c.db.try_begin_write() {
            Ok(w) => w,
            Err(e) => return c.fail(&e),
        };
        c.base = Some(w.savepoint());
        c.sps.clear();
        c.write_start_fcc = c.db.fcc();
        c.txn = Txn::Write(w);
        // A fresh file: table 1 (sqlite_schema) exists from the first write on.
        match c.tree(1) {
            Ok(Some(_)) => OK,
            Ok(None) => match c.write() {
                Ok(w) => match w.create_tree(&name(1), inpage::KeyKind::Int) {
                    Ok(_) => OK,
                    Err(e) => c.fail(&e),
                },
                Err(rc) => rc,
            },
            Err(e) => c.fail(&e),
        }
    })
}

/// End the transaction (commit or roll back); keep a read snapshot if asked.
///
/// # Safety
/// `conn` as in [`conn`].
#[no_mangle]
pub unsafe extern "C" fn ipg_end(conn: *mut Conn, commit: c_int, keep_read: c_int) -> c_int {
    guard(INTERNAL, || {
        // SAFETY: contract.
        let Some(c) = (unsafe { self::conn(conn) }) else {
            return OK;
        };
        c.sps.clear();
        c.base = None;
        c.trees.clear();
        c.gen += 1;
        let mut rc = OK;
        match std::mem::replace(&mut c.txn, Txn::None) {
            Txn::Write(w) => {
                if commit != 0 {
                    match w.commit() {
                        Ok(_) => c.own_fcc += c.db.fcc().saturating_sub(c.write_start_fcc),
                        Err(e) => rc = c.fail(&e),
                    }
                } else {
                    w.rollback();
                }
            }
            Txn::Read(_) | Txn::None => {}
        }
        if keep_read != 0 && rc == OK {
            if let Ok(r) = c.db.begin_read() {
                c.txn = Txn::Read(r);
            }
        }
        rc
    })
}

/// Open savepoints until there are `n` (SQLite opens them lazily).
///
/// # Safety
/// `conn` as in [`conn`].
#[no_mangle]
pub unsafe extern "C" fn ipg_sp_open(conn: *mut Conn, n: c_int) -> c_int {
    guard(INTERNAL, || {
        // SAFETY: contract.
        let Some(c) = (unsafe { self::conn(conn) }) else {
            return OK;
        };
        let Txn::Write(w) = &mut c.txn else {
            return OK;
        };
        while (c.sps.len() as c_int) < n {
            c.sps.push(w.savepoint());
        }
        OK
    })
}

/// op 1 = RELEASE levels >= i; op 2 = ROLLBACK to level i (kept), i = -1: the whole txn,
/// which stays open.
///
/// # Safety
/// `conn` as in [`conn`].
#[no_mangle]
pub unsafe extern "C" fn ipg_sp(conn: *mut Conn, op: c_int, i: c_int) -> c_int {
    guard(INTERNAL, || {
        // SAFETY: contract.
        let Some(c) = (unsafe { self::conn(conn) }) else {
            return OK;
        };
        let Txn::Write(w) = &mut c.txn else {
            return OK;
        };
        if i >= c.sps.len() as c_int {
            return OK;
        }
        let r = if op == 2 {
            c.gen += 1;
            c.trees.clear();
            if i < 0 {
                c.sps.clear();
                match &c.base {
                    Some(b) => w.rollback_to(b),
                    None => Err(Error::InvalidArgument("no base savepoint".into())),
                }
            } else {
                c.sps.truncate(i as usize + 1);
                w.rollback_to(&c.sps[i as usize])
            }
        } else {
            let i = i.max(0) as usize;
            c.sps.truncate(i + 1);
            match c.sps.pop() {
                Some(sp) => w.release(sp),
                None => Ok(()),
            }
        };
        match r {
            Ok(()) => OK,
            Err(e) => c.fail(&e),
        }
    })
}

/// SQLite's header value `idx` (1..=8 = the engine's meta slots 0..=7).
///
/// # Safety
/// `conn` as in [`conn`].
#[no_mangle]
pub unsafe extern "C" fn ipg_meta_get(conn: *mut Conn, idx: c_int) -> u32 {
    guard(0, || {
        // SAFETY: contract.
        let Some(c) = (unsafe { self::conn(conn) }) else {
            return 0;
        };
        if idx == 15 {
            // BTREE_DATA_VERSION (PRAGMA data_version), see `Conn::own_fcc`.
            return c.view_fcc().wrapping_sub(c.own_fcc) as u32;
        }
        if !(1..=8).contains(&idx) {
            return 0;
        }
        with_txn!(c, t => t.meta(idx as usize - 1)).unwrap_or(0)
    })
}

/// SQLITE_FCNTL_DATA_VERSION: changes with every commit, this connection's included.
///
/// # Safety
/// `conn` as in [`conn`].
#[no_mangle]
pub unsafe extern "C" fn ipg_data_version(conn: *mut Conn) -> u32 {
    guard(0, || {
        // SAFETY: contract.
        unsafe { self::conn(conn) }.map_or(0, |c| c.view_fcc() as u32)
    })
}

/// # Safety
/// `conn` as in [`conn`].
#[no_mangle]
pub unsafe extern "C" fn ipg_meta_set(conn: *mut Conn, idx: c_int, v: u32) -> c_int {
    guard(INTERNAL, || {
        // SAFETY: contract.
        let Some(c) = (unsafe { self::conn(conn) }) else {
            return MISUSE;
        };
        if !(1..=8).contains(&idx) {
            return OK;
        }
        let r = match c.write() {
            Ok(w) => w.set_meta(idx as usize - 1, v),
            Err(rc) => return rc,
        };
        match r {
            Ok(()) => OK,
            Err(e) => c.fail(&e),
        }
    })
}

/// Create a table (`intkey` != 0) or index tree; its number goes to `*out`.
///
/// # Safety
/// `conn` as in [`conn`]; `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ipg_create(conn: *mut Conn, intkey: c_int, out: *mut u32) -> c_int {
    guard(INTERNAL, || {
        // SAFETY: contract.
        let Some(c) = (unsafe { self::conn(conn) }) else {
            return MISUSE;
        };
        let cmp = c.cmp.clone();
        let w = match c.write() {
            Ok(w) => w,
            Err(rc) => return rc,
        };
        // Table numbers come from meta slot 3 (SQLite's LARGEST_ROOT_PAGE, unused
        // without autovacuum); table 1 is the schema table.
        let r = w.meta(3).and_then(|m| {
            let n = m.max(1) + 1;
            let t = if intkey != 0 {
                w.create_tree(&name(n), inpage::KeyKind::Int)
                    .map(|t| (t, true))
            } else {
                w.create_tree_with(&name(n), cmp).map(|t| (t, false))
            }?;
            w.set_meta(3, n)?;
            Ok((n, t))
        });
        match r {
            Ok((n, t)) => {
                c.trees.insert(n, t);
                // SAFETY: `out` is valid for a write (contract).
                unsafe { *out = n };
                OK
            }
            Err(e) => c.fail(&e),
        }
    })
}

/// Clear (`drop` = 0) or drop a tree; adds the number of entries removed to `*n`.
///
/// # Safety
/// `conn` as in [`conn`]; `n` null or valid for a read and a write.
#[no_mangle]
pub unsafe extern "C" fn ipg_clear(
    conn: *mut Conn,
    itable: u32,
    n: *mut i64,
    drop: c_int,
) -> c_int {
    guard(INTERNAL, || {
        // SAFETY: contract.
        let Some(c) = (unsafe { self::conn(conn) }) else {
            return MISUSE;
        };
        let t = match c.tree(itable) {
            Ok(Some(t)) => t,
            Ok(None) => return OK,
            Err(e) => return c.fail(&e),
        };
        c.gen += 1;
        let w = match c.write() {
            Ok(w) => w,
            Err(rc) => return rc,
        };
        let r = (|| {
            if !n.is_null() {
                let k = w.count(&t.0)?;
                // SAFETY: `n` is valid (contract).
                unsafe { *n += k as i64 };
            }
            if drop != 0 {
                w.drop_tree(&name(itable))
            } else {
                w.clear_tree(&t.0)
            }
        })();
        if drop != 0 {
            c.trees.remove(&itable);
        }
        match r {
            Ok(()) => OK,
            Err(e) => c.fail(&e),
        }
    })
}

/// # Safety
/// `conn` as in [`conn`]; `keyinfo` null (rowid table) or a `KeyInfo*` that outlives the
/// cursor.
#[no_mangle]
pub unsafe extern "C" fn ipg_cursor_open(
    conn: *mut Conn,
    itable: u32,
    keyinfo: *mut c_void,
) -> *mut Cur {
    guard(std::ptr::null_mut(), || {
        Box::into_raw(Box::new(Cur {
            conn,
            itable,
            keyinfo,
            state: 0,
            key: OwnedKey::Int(0),
            val: Vec::new(),
            gen: 0,
        }))
    })
}

/// # Safety
/// `cur` null or from `ipg_cursor_open`; not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn ipg_cursor_close(cur: *mut Cur) {
    guard((), || {
        if !cur.is_null() {
            // SAFETY: from `Box::into_raw` in `ipg_cursor_open`, closed once.
            drop(unsafe { Box::from_raw(cur) });
        }
    })
}

enum Move {
    First,
    Last,
    Ge(OwnedKey),
    After(OwnedKey),
    Before(OwnedKey),
    Exact(OwnedKey),
}

/// Position by key through a fresh engine cursor; returns the entry landed on.
fn locate<T: ReadableTxn>(
    t: &T,
    tree: &Tree,
    intkey: bool,
    m: &Move,
) -> Result<Option<(OwnedKey, Vec<u8>)>, Error> {
    let mut c = t.cursor(tree)?;
    let ok = match m {
        Move::First => c.first()?,
        Move::Last => c.last()?,
        Move::Ge(k) | Move::Exact(k) => c.seek(k.as_key())?,
        Move::After(k) => {
            let mut ok = c.seek(k.as_key())?;
            if ok && c.key()?.as_ref() == Some(k) {
                ok = c.next()?;
            }
            ok
        }
        Move::Before(k) => {
            let mut ok = c.seek_le(k.as_key())?;
            if ok && c.key()?.as_ref() == Some(k) {
                ok = c.prev()?;
            }
            ok
        }
    };
    if !ok {
        return Ok(None);
    }
    let Some(k) = c.key()? else {
        return Ok(None);
    };
    if let Move::Exact(want) = m {
        if &k != want {
            return Ok(None);
        }
    }
    let v = if intkey {
        c.value()?.unwrap_or_default()
    } else {
        k.as_bytes().unwrap_or_default().to_vec()
    };
    Ok(Some((k, v)))
}

impl Cur {
    fn conn<'a>(&self) -> &'a mut Conn {
        // SAFETY: SQLite serialises all calls on one connection (db mutex) and closes
        // cursors before their b-tree, so the Conn is alive and not otherwise borrowed.
        unsafe { &mut *self.conn }
    }
    fn go(&mut self, m: Move, probe: *mut c_void) -> Result<bool, Error> {
        let ki = self.keyinfo;
        let c = self.conn();
        let Some((tree, intkey)) = c.tree(self.itable)? else {
            self.state = 0;
            return Ok(false);
        };
        let r = index_order::with_order(
            ki,
            probe,
            || with_txn!(c, t => locate(t, &tree, intkey, &m)),
        );
        let gen = c.gen;
        match r? {
            Some((k, v)) => {
                self.key = k;
                self.val = v;
                self.state = 1;
                self.gen = gen;
                Ok(true)
            }
            None => {
                self.state = 0;
                Ok(false)
            }
        }
    }
    /// After writes elsewhere: Ok(true) if the entry is still there with the same
    /// bytes (then the buffer handed out earlier is kept, trap 6).
    fn refresh(&mut self) -> Result<bool, Error> {
        if self.state != 1 {
            return Ok(false);
        }
        if self.gen == self.conn().gen {
            return Ok(true);
        }
        let (k, old) = (self.key.clone(), std::mem::take(&mut self.val));
        if self.go(Move::Exact(k.clone()), std::ptr::null_mut())? {
            if self.val == old {
                self.val = old;
                return Ok(true);
            }
            Ok(false)
        } else {
            self.key = k;
            self.state = 2;
            Ok(false)
        }
    }
}

/// Run a cursor entry point: a null cursor is SQLITE_MISUSE, an engine error its code.
fn with_cur(cur: *mut Cur, f: impl FnOnce(&mut Cur) -> Result<c_int, Error>) -> c_int {
    guard(INTERNAL, || {
        // SAFETY: the C side passes a live cursor (glue.c), or null for the fake one.
        let Some(c) = (unsafe { self::cur(cur) }) else {
            return MISUSE;
        };
        match f(c) {
            Ok(rc) => rc,
            Err(e) => c.conn().fail(&e),
        }
    })
}

/// First (`last` = 0) or last entry; `*empty` = 1 if none.
///
/// # Safety
/// `cur` live; `empty` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ipg_first(cur: *mut Cur, last: c_int, empty: *mut c_int) -> c_int {
    with_cur(cur, |c| {
        let found = c.go(
            if last != 0 { Move::Last } else { Move::First },
            std::ptr::null_mut(),
        )?;
        // SAFETY: `empty` is valid (contract).
        unsafe { *empty = c_int::from(!found) };
        Ok(OK)
    })
}

/// Seek a rowid; `*res` <0/0/>0: the cursor ended on a smaller/equal/larger entry.
///
/// # Safety
/// `cur` live; `res` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ipg_seek_int(cur: *mut Cur, k: i64, res: *mut c_int) -> c_int {
    with_cur(cur, |c| {
        let r = if c.go(Move::Ge(OwnedKey::Int(k)), std::ptr::null_mut())? {
            c_int::from(c.key != OwnedKey::Int(k))
        } else {
            c.go(Move::Last, std::ptr::null_mut())?;
            -1
        };
        // SAFETY: `res` is valid (contract).
        unsafe { *res = r };
        Ok(OK)
    })
}

/// Seek an index by SQLite's probe (`UnpackedRecord*`); `*res` as for `ipg_seek_int`.
///
/// # Safety
/// `cur` live; `probe` a live `UnpackedRecord*` for the cursor's KeyInfo; `res` valid.
#[no_mangle]
pub unsafe extern "C" fn ipg_seek_probe(
    cur: *mut Cur,
    probe: *mut c_void,
    res: *mut c_int,
) -> c_int {
    with_cur(cur, |c| {
        let r = if c.go(Move::Ge(OwnedKey::Bytes(MARKER.to_vec())), probe)? {
            index_order::cmp_probe(&c.val, probe) as c_int
        } else {
            c.go(Move::Last, std::ptr::null_mut())?;
            -1
        };
        // SAFETY: `res` is valid (contract).
        unsafe { *res = r };
        Ok(OK)
    })
}

/// `dir` > 0: next, < 0: previous. SQLITE_DONE past the end.
///
/// # Safety
/// `cur` live.
#[no_mangle]
pub unsafe extern "C" fn ipg_step(cur: *mut Cur, dir: c_int) -> c_int {
    with_cur(cur, |c| {
        if c.state == 0 {
            return Ok(DONE);
        }
        let k = c.key.clone();
        let m = if dir > 0 {
            Move::After(k)
        } else {
            Move::Before(k)
        };
        Ok(if c.go(m, std::ptr::null_mut())? {
            OK
        } else {
            DONE
        })
    })
}

/// # Safety
/// `cur` live.
#[no_mangle]
pub unsafe extern "C" fn ipg_valid(cur: *mut Cur) -> c_int {
    // SAFETY: contract.
    unsafe { self::cur(cur) }.map_or(0, |c| c_int::from(c.state == 1))
}

/// # Safety
/// `cur` live.
#[no_mangle]
pub unsafe extern "C" fn ipg_invalidate(cur: *mut Cur) {
    // SAFETY: contract.
    if let Some(c) = unsafe { self::cur(cur) } {
        c.state = 0;
    }
}

/// Whether the cursor's row is gone or changed (SQLite's CursorHasMoved).
///
/// # Safety
/// `cur` live.
#[no_mangle]
pub unsafe extern "C" fn ipg_has_moved(cur: *mut Cur) -> c_int {
    guard(1, || {
        // SAFETY: contract.
        match unsafe { self::cur(cur) }.map(|c| c.refresh()) {
            Some(Ok(true)) => 0,
            _ => 1,
        }
    })
}

/// The current entry's record: value of a rowid table, key of an index.
///
/// # Safety
/// `cur` live; `p`, `n` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ipg_payload(cur: *mut Cur, p: *mut *const u8, n: *mut u32) -> c_int {
    with_cur(cur, |c| {
        c.refresh()?;
        let (ptr, len) = if c.state == 1 {
            (c.val.as_ptr(), c.val.len() as u32)
        } else {
            (std::ptr::null(), 0)
        };
        // SAFETY: `p`, `n` are valid (contract).
        unsafe {
            *p = ptr;
            *n = len;
        }
        Ok(OK)
    })
}

/// # Safety
/// `cur` live.
#[no_mangle]
pub unsafe extern "C" fn ipg_intkey(cur: *mut Cur) -> i64 {
    // SAFETY: contract.
    unsafe { self::cur(cur) }.map_or(0, |c| c.key.as_int().unwrap_or(0))
}

/// Insert (replace) an entry: a rowid row (`intkey`, `n` bytes of data + `nzero` zeros)
/// or, with `key_is_record`, an index record as the key.
///
/// # Safety
/// `cur` live; `data` valid for `n` bytes (or `n` <= 0).
#[no_mangle]
pub unsafe extern "C" fn ipg_insert(
    cur: *mut Cur,
    intkey: i64,
    data: *const u8,
    n: c_int,
    nzero: c_int,
    key_is_record: c_int,
) -> c_int {
    with_cur(cur, |c| {
        let bytes: &[u8] = if n > 0 && !data.is_null() {
            // SAFETY: `data` is valid for `n` bytes (contract).
            unsafe { std::slice::from_raw_parts(data, n as usize) }
        } else {
            &[]
        };
        if key_is_record != 0 && (bytes == MARKER || !index_order::is_record_header_sane(bytes)) {
            // Only valid records are stored, so never the seek marker (index_order.rs).
            return Ok(CORRUPT);
        }
        let ki = c.keyinfo;
        let conn = c.conn();
        let Some((tree, _)) = conn.tree(c.itable)? else {
            return Ok(CORRUPT);
        };
        conn.gen += 1;
        let gen = conn.gen;
        let w = match conn.write() {
            Ok(w) => w,
            Err(rc) => return Ok(rc),
        };
        let (k, v) = if key_is_record != 0 {
            index_order::with_order(ki, std::ptr::null_mut(), || {
                w.insert(&tree, Key::Bytes(bytes), b"")
            })?;
            (OwnedKey::Bytes(bytes.to_vec()), bytes.to_vec())
        } else {
            let mut v = Vec::with_capacity(bytes.len() + nzero.max(0) as usize);
            v.extend_from_slice(bytes);
            v.resize(bytes.len() + nzero.max(0) as usize, 0);
            w.insert(&tree, Key::Int(intkey), &v)?;
            (OwnedKey::Int(intkey), v)
        };
        c.key = k;
        c.val = v;
        c.state = 1;
        c.gen = gen;
        Ok(OK)
    })
}

/// Delete the current entry; the cursor keeps its key so Next/Previous reach the
/// neighbours (SAVEPOSITION semantics, harmless without it).
///
/// # Safety
/// `cur` live.
#[no_mangle]
pub unsafe extern "C" fn ipg_delete(cur: *mut Cur) -> c_int {
    with_cur(cur, |c| {
        if c.state != 1 {
            return Ok(CORRUPT);
        }
        let ki = c.keyinfo;
        let conn = c.conn();
        let Some((tree, _)) = conn.tree(c.itable)? else {
            return Ok(CORRUPT);
        };
        conn.gen += 1;
        let w = match conn.write() {
            Ok(w) => w,
            Err(rc) => return Ok(rc),
        };
        index_order::with_order(ki, std::ptr::null_mut(), || w.remove(&tree, c.key.as_key()))?;
        c.state = 2;
        Ok(OK)
    })
}

fn count_of(conn: &mut Conn, itable: u32) -> Result<i64, Error> {
    match conn.tree(itable)? {
        Some((tree, _)) => Ok(with_txn!(conn, t => t.count(&tree))? as i64),
        None => Ok(0),
    }
}

/// # Safety
/// `cur` live; `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ipg_count(cur: *mut Cur, out: *mut i64) -> c_int {
    with_cur(cur, |c| {
        let n = count_of(c.conn(), c.itable)?;
        // SAFETY: `out` is valid (contract).
        unsafe { *out = n };
        Ok(OK)
    })
}

/// # Safety
/// `conn` as in [`conn`]; `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ipg_table_count(conn: *mut Conn, itable: u32, out: *mut i64) -> c_int {
    guard(INTERNAL, || {
        // SAFETY: contract.
        let Some(c) = (unsafe { self::conn(conn) }) else {
            return MISUSE;
        };
        match count_of(c, itable) {
            Ok(n) => {
                // SAFETY: `out` is valid (contract).
                unsafe { *out = n };
                OK
            }
            Err(e) => c.fail(&e),
        }
    })
}

/// # Safety
/// `conn` as in [`conn`].
#[no_mangle]
pub unsafe extern "C" fn ipg_page_size(conn: *mut Conn) -> c_int {
    // SAFETY: contract.
    unsafe { self::conn(conn) }.map_or(4096, |c| c.db.page_size() as c_int)
}

/// # Safety
/// `conn` as in [`conn`].
#[no_mangle]
pub unsafe extern "C" fn ipg_page_count(conn: *mut Conn) -> u32 {
    guard(0, || {
        // SAFETY: contract.
        unsafe { self::conn(conn) }.map_or(0, |c| c.db.header().page_count)
    })
}

/// Replace everything in `to` (in a write transaction) by a copy of `from` (in any
/// transaction): every `sqlite/<n>` tree, same names and kinds, and the eight meta
/// values. SQLite's `sqlite3BtreeCopyFile` (VACUUM) and the backup API.
///
/// Index trees are filled in the source's order: while copying, the destination tree's
/// comparator ranks keys by their position in the source (a map key -> ordinal), which
/// is the record order itself, so no `KeyInfo` is needed; later opens use
/// `index_order::record_cmp` again and see the same order.
///
/// # Safety
/// `to`, `from` as in [`conn`], distinct.
#[no_mangle]
pub unsafe extern "C" fn ipg_copy(to: *mut Conn, from: *mut Conn) -> c_int {
    guard(INTERNAL, || {
        if std::ptr::eq(to, from) {
            return MISUSE;
        }
        // SAFETY: contract (distinct, live connections).
        let (Some(t), Some(f)) = (unsafe { self::conn(to) }, unsafe { self::conn(from) }) else {
            return MISUSE;
        };
        match copy_all(t, f) {
            Ok(()) => OK,
            Err(e) => t.fail(&e),
        }
    })
}

fn copy_all(t: &mut Conn, f: &mut Conn) -> Result<(), Error> {
    let ours = |i: &inpage::TreeInfo| i.name.starts_with("sqlite/");
    let src_trees: Vec<inpage::TreeInfo> = with_txn!(f, tx => tx.list_trees())?
        .into_iter()
        .filter(ours)
        .collect();
    let mut meta = [0u32; 8];
    for (i, m) in meta.iter_mut().enumerate() {
        *m = with_txn!(f, tx => tx.meta(i))?;
    }
    t.trees.clear();
    t.gen += 1;
    let Txn::Write(w) = &mut t.txn else {
        return Err(Error::InvalidArgument(
            "copy into a database without a write transaction".into(),
        ));
    };
    for old in w.list_trees()?.into_iter().filter(ours) {
        w.drop_tree(&old.name)?;
    }
    for info in &src_trees {
        let indexed = info.custom_comparator;
        let src = if indexed {
            with_txn!(f, tx => tx.open_tree_with(&info.name, f.cmp.clone()))?
        } else {
            with_txn!(f, tx => tx.open_tree(&info.name))?
        };
        // Source order never needs a comparison: cursors walk the leaves (so the
        // source's index comparator runs without a KeyInfo).
        let dst = if indexed {
            let mut rank: HashMap<Vec<u8>, usize> = HashMap::new();
            with_txn!(f, tx => {
                let mut c = tx.cursor(&src)?;
                let mut ok = c.first()?;
                while ok {
                    if let Some(k) = c.key()? {
                        let n = rank.len();
                        rank.insert(k.as_bytes().unwrap_or_default().to_vec(), n);
                    }
                    ok = c.next()?;
                }
                Ok::<(), Error>(())
            })?;
            let rank = Arc::new(rank);
            let by_rank: Comparator = Arc::new(move |a: &[u8], b: &[u8]| {
                match (rank.get(a), rank.get(b)) {
                    (Some(x), Some(y)) => x.cmp(y),
                    // Only keys of this copy are ever compared while it runs.
                    _ => panic!("copy comparator asked about a key outside the copy"),
                }
            });
            w.create_tree_with(&info.name, by_rank)?
        } else {
            w.create_tree(&info.name, info.kind)?
        };
        // Stream the entries: the two connections are distinct databases.
        with_txn!(f, tx => {
            let mut c = tx.cursor(&src)?;
            let mut ok = c.first()?;
            while ok {
                if let Some(k) = c.key()? {
                    w.insert(&dst, k.as_key(), &c.value()?.unwrap_or_default())?;
                }
                ok = c.next()?;
            }
            Ok::<(), Error>(())
        })?;
    }
    for (i, m) in meta.iter().enumerate() {
        w.set_meta(i, *m)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Trap 6: the pointer handed out by `ipg_payload` stays the same while
    /// `ipg_has_moved` answers 0, also after writes through another cursor; a changed
    /// row reports "moved".
    #[test]
    fn payload_pointer_is_stable_until_the_row_changes() {
        // SAFETY: every pointer passed is live and used as the C side would: one
        // connection, its cursors closed before it.
        unsafe {
            let mut conn: *mut Conn = std::ptr::null_mut();
            assert_eq!(ipg_open(std::ptr::null(), 1, &mut conn), OK);
            assert_eq!(ipg_begin(conn, 1), OK);
            let mut t = 0u32;
            assert_eq!(ipg_create(conn, 1, &mut t), OK);
            assert_eq!(t, 2, "the first table after sqlite_schema (trap 5)");
            let a = ipg_cursor_open(conn, t, std::ptr::null_mut());
            let b = ipg_cursor_open(conn, t, std::ptr::null_mut());
            for (k, v) in [(1i64, b"row one"), (2, b"row two")] {
                assert_eq!(ipg_insert(a, k, v.as_ptr(), 7, 0, 0), OK);
            }
            let mut res = 9;
            assert_eq!(ipg_seek_int(b, 1, &mut res), OK);
            assert_eq!(res, 0);
            let (mut p1, mut n1) = (std::ptr::null(), 0u32);
            assert_eq!(ipg_payload(b, &mut p1, &mut n1), OK);
            assert_eq!(std::slice::from_raw_parts(p1, n1 as usize), b"row one");
            // A write elsewhere in the tree: b's row is unchanged, its buffer kept.
            assert_eq!(ipg_insert(a, 2, b"row TWO".as_ptr(), 7, 0, 0), OK);
            assert_eq!(ipg_has_moved(b), 0);
            let (mut p2, mut n2) = (std::ptr::null(), 0u32);
            assert_eq!(ipg_payload(b, &mut p2, &mut n2), OK);
            assert_eq!(p2, p1, "the buffer OP_Column cached must stay valid");
            // A write to b's row: moved.
            assert_eq!(ipg_insert(a, 1, b"row ONE".as_ptr(), 7, 0, 0), OK);
            assert_eq!(ipg_has_moved(b), 1);
            ipg_cursor_close(a);
            ipg_cursor_close(b);
            assert_eq!(ipg_end(conn, 0, 0), OK);
            ipg_close(conn);
        }
    }

    #[test]
    fn mode_codes_match_the_patched_pragma_names() {
        // build.rs's pragma.c patch: index = code.
        let names = [
            "delete",
            "persist",
            "off",
            "truncate",
            "memory",
            "wal",
            "dhl-cc",
            "dhl-cc-header",
            "dhl-tc",
            "off-opt",
        ];
        for m in JournalMode::all() {
            assert_eq!(names[mode_code(m) as usize], m.name());
        }
    }
}
