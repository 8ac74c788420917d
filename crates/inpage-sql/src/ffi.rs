//! The C-ABI side of the glue: the `ipg_*` functions `csrc/glue.c` calls for every
//! storage operation, over inpage's current public API. All of this crate's `unsafe`
//! lives here and in `record_order.rs` (raw pointers handed over by C).
//!
//! Invariants, and why they hold:
//! - A `Cur` is one owned engine `Cursor` (opened on first use): steps use the engine's
//!   `cursor_next`/`cursor_prev`, which step within the kept pages while the tree is
//!   unchanged and otherwise go to the first key after / before the cursor's key, which
//!   is what SQLite expects after a SAVEPOSITION delete or after another cursor changed
//!   the tree. Index trees are probe trees ordered by SQLite's record comparison
//!   (`record_order`).
//! - The buffer `ipg_payload` hands out stays valid and unchanged for as long as
//!   `ipg_has_moved` answers 0: OP_Column caches the pointer across opcodes (trap 6,
//!   SQLPLAN §2a). It is the engine cursor's page image (valid until the cursor moves)
//!   or, for a value in an overflow chain, `Cur::big` (dropped only when the cursor
//!   moves); the engine's has-moved answers 0 only while the row's bytes are unchanged.
//! - Rollback of the whole transaction without ending it (SQLite's `Savepoint(ROLLBACK,
//!   -1)`) is the engine's `rollback_all`: cursors re-find their key after it.
//! - One engine handle per file per process (`OPEN_FILES`): connections to the same
//!   path share a clone of it, each with its own transactions, so the engine's
//!   one-writer / snapshot-readers rule is SQLite's WAL-mode rule between them. The
//!   handle is dropped with the last connection (`Drop for Conn`), after its
//!   transaction, so the file's lock goes when the last connection closes.
//! - File databases open with the process's base configuration (`set_file_config`,
//!   `set_vfs`; default: `Config::default()`, the OS), read once per open: a handle
//!   already in `OPEN_FILES` keeps the VFS it was opened on, so a caller switching VFS
//!   (a crash test moving to the crashed disk) closes every connection first.
//! - `PRAGMA integrity_check` runs the engine's structural check (`inpage::check`) on the
//!   connection's snapshot (`ipg_check`); a corrupt page is a message, never a panic.
//! - Every entry point runs under `catch_unwind`: a panic becomes SQLITE_INTERNAL (or a
//!   neutral value), never an unwind into C.
//! - SQLite serialises all calls on one connection (its db mutex), and C closes every
//!   cursor before its b-tree, so the `&mut` made from a `Conn*`/`Cur*` is unique for
//!   the call and the `Conn` outlives its cursors.

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::hash::BuildHasherDefault;
use std::os::unix::ffi::OsStrExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use inpage::internals::PgnoHasher;
use inpage::{
    Config, Cursor, CursorOps, Database, Error, JournalMode, Key, ReadTxn, ReadableTxn, Restored,
    Savepoint, SeekResult, Tree, WriteTxn,
};

use crate::rc::*;
use crate::record_order::{self, Probe};

/// The environment variable that forces one journal mode for every database opened
/// (new files are created in it; an existing file in another mode is refused).
pub const JOURNAL_MODE_ENV: &str = "INPAGE_JOURNAL_MODE";

/// SQLite's result code for an engine error.
pub fn rc_of(e: &Error) -> c_int {
    // A full file system is SQLITE_FULL ("database or disk is full") whichever layer
    // met it, as stock SQLite reports ENOSPC, not an I/O error.
    if e.is_no_space() {
        return FULL;
    }
    match e {
        Error::Busy | Error::Locked { .. } => BUSY,
        Error::KeyTooLarge { .. } | Error::ValueTooLarge { .. } => TOOBIG,
        Error::Corrupt { .. } | Error::CorruptJournal { .. } | Error::Truncated { .. } => CORRUPT,
        // A handle an earlier failed commit left unusable (one that other connections
        // share, so it could not be recovered yet): the I/O error it stands for.
        Error::Io { .. } | Error::Poisoned(_) => IOERR,
        Error::Full => FULL,
        Error::ReadOnly { .. } => READONLY,
        Error::NotADatabase { .. } => NOTADB,
        Error::InvalidArgument(_) | Error::Forked { .. } => MISUSE,
        _ => ERROR,
    }
}

/// SQLite's journal-mode code (build.rs's pragma.c patch names 6-9) for an inpage mode.
pub fn mode_code(m: JournalMode) -> c_int {
    let code = pragma_mode_names()
        .iter()
        .position(|n| n.to_bytes() == m.name().as_bytes());
    debug_assert!(
        code.is_some(),
        "journal mode {} has no SQLite code",
        m.name()
    );
    code.map_or(2, |c| c as c_int)
}

/// SQLite's own journal modes, index = its code (`PAGER_JOURNALMODE_*`).
const SQLITE_MODE_NAMES: [&str; 6] = ["delete", "persist", "off", "truncate", "memory", "wal"];

/// Codes the patched VDBE has room for (build.rs: `aMJNeeded[64]`).
pub const MAX_MODE_CODES: usize = 64;

/// `PRAGMA journal_mode`'s names, index = SQLite code: SQLite's six, then `dhl-cc` (so
/// that the prefix `dhl` picks the counting-commit DHL: pragma.c takes the first name the
/// argument is a prefix of), then the engine's default mode, then every other registry
/// mode in registry order.
fn pragma_mode_names() -> &'static [CString] {
    static NAMES: std::sync::OnceLock<Vec<CString>> = std::sync::OnceLock::new();
    NAMES.get_or_init(|| {
        let mut v: Vec<&str> = SQLITE_MODE_NAMES.to_vec();
        let rest = [JournalMode::DHL_CC, inpage::DEFAULT_JOURNAL_MODE]
            .into_iter()
            .chain(JournalMode::all());
        for m in rest {
            if !v.contains(&m.name()) {
                v.push(m.name());
            }
        }
        assert!(
            v.len() <= MAX_MODE_CODES,
            "more journal modes than SQLite codes"
        );
        v.into_iter()
            .map(|n| CString::new(n).expect("mode names have no NUL"))
            .collect()
    })
}

/// The name of SQLite journal-mode code `code` (pragma.c's `sqlite3JournalModename`,
/// patched by build.rs), NULL past the last.
#[no_mangle]
pub extern "C" fn ipg_journal_mode_name(code: c_int) -> *const c_char {
    guard(std::ptr::null(), || {
        usize::try_from(code)
            .ok()
            .and_then(|c| pragma_mode_names().get(c))
            .map_or(std::ptr::null(), |n| n.as_ptr())
    })
}

/// The engine mode a user names: the registry's names, `_` for `-`, any case, and `dhl`
/// for the default DHL mode (`dhl-cc`).
pub fn mode_from_name(v: &str) -> Option<JournalMode> {
    let n = v.trim().to_ascii_lowercase().replace('_', "-");
    if n == "dhl" {
        return Some(JournalMode::DHL_CC);
    }
    JournalMode::from_name(&n)
}

fn mode_names() -> Vec<&'static str> {
    JournalMode::all().map(|m| m.name()).collect()
}

/// The engine mode of a SQLite journal-mode code (build.rs's pragma.c names); None for
/// `memory` (4), which inpage has no file mode for.
fn mode_of_code(code: c_int) -> Option<JournalMode> {
    JournalMode::all().find(|m| mode_code(*m) == code)
}

/// The mode `INPAGE_JOURNAL_MODE` asks for: Ok(None) if unset.
pub fn mode_from_env() -> Result<Option<JournalMode>, String> {
    match std::env::var(JOURNAL_MODE_ENV) {
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(e) => Err(format!("{JOURNAL_MODE_ENV}: {e}")),
        Ok(v) => mode_from_name(&v).map(Some).ok_or_else(|| {
            format!(
                "{JOURNAL_MODE_ENV}={v:?}: unknown mode (one of {:?})",
                mode_names()
            )
        }),
    }
}

/// The configuration file databases open with (None: `Config::default()`).
static FILE_CONFIG: Mutex<Option<Config>> = Mutex::new(None);

/// Set the configuration every file database opened from now on starts from
/// (process-global; for tests and embedders). `None` restores the default
/// (`Config::default()`: the OS file system, the file's or the default journal mode).
/// `INPAGE_JOURNAL_MODE` still overrides the journal mode. In-memory databases are not
/// affected. A file already open in the process keeps the handle it was opened with
/// until its last connection closes.
pub fn set_file_config(cfg: Option<Config>) {
    *FILE_CONFIG.lock().unwrap_or_else(|p| p.into_inner()) = cfg;
}

/// Open file databases on `vfs` from now on (process-global; for tests and embedders,
/// e.g. a simulated disk with power cuts); `None`: the OS file system. Keeps the other
/// settings of [`set_file_config`].
pub fn set_vfs(vfs: Option<Arc<dyn inpage::vfs::Vfs>>) {
    let mut g = FILE_CONFIG.lock().unwrap_or_else(|p| p.into_inner());
    let base = g.take().unwrap_or_default();
    *g = Some(match vfs {
        Some(v) => base.vfs(v),
        None => base.vfs(Config::default().vfs),
    });
}

fn file_config() -> Config {
    FILE_CONFIG
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone()
        .unwrap_or_default()
        // The engine never waits for another process's turn: SQLite's busy handler
        // (`busy_timeout`) decides whether to try again, as with stock SQLite's locks.
        .busy_timeout(Duration::ZERO)
}

/// Files open in this process: one engine handle per file (the engine refuses a second
/// read-write handle), shared by every connection to it, with the number of
/// connections and the `fork()` generation it was opened in. The entry goes when the
/// last connection closes, which closes the file.
static OPEN_FILES: Mutex<Vec<OpenFile>> = Mutex::new(Vec::new());

struct OpenFile {
    path: PathBuf,
    db: Database,
    conns: usize,
    fork_gen: u64,
}

/// The registry, without the entries a parent process made before `fork()`: a new
/// connection in the child must get its own handle, never the parent's copy (which
/// refuses all work, `Error::Forked`, and closes without I/O when the child's inherited
/// connections let go of it).
fn open_files() -> std::sync::MutexGuard<'static, Vec<OpenFile>> {
    let mut files = OPEN_FILES.lock().unwrap_or_else(|p| p.into_inner());
    let now = inpage::vfs::fork_generation();
    files.retain(|e| e.fork_gen == now);
    files
}

fn open_shared(path: &Path, cfg: Config, forced: Option<JournalMode>) -> Result<Database, Error> {
    let mut files = open_files();
    if let Some(entry) = files.iter_mut().find(|e| e.path == path) {
        if let Some(m) = forced {
            if entry.db.journal_mode() != m {
                return Err(Error::ModeMismatch {
                    path: path.into(),
                    file: entry.db.journal_mode().name().into(),
                    requested: m.name().into(),
                });
            }
        }
        entry.conns += 1;
        return Ok(entry.db.clone());
    }
    let fork_gen = inpage::vfs::fork_generation();
    let db = Database::open(path, cfg)?;
    files.push(OpenFile {
        path: path.to_path_buf(),
        db: db.clone(),
        conns: 1,
        fork_gen,
    });
    Ok(db)
}

/// Replace the handle of `path`, poisoned by a failed commit or checkpoint
/// (`Error::Poisoned`), by a new open of the file, which runs recovery: what SQLite's
/// pager does when it leaves its error state once no page is in use (rolling back a hot
/// journal). Only while `conn` is the handle's one connection in this process: others
/// may still hold its transactions, and get the error until every one of them let go.
/// Ok(false) when it could not.
fn recover_shared(path: &Path, conn: &mut Option<Database>) -> Result<bool, Error> {
    let mut files = open_files();
    let Some(i) = files.iter().position(|e| e.path == path) else {
        return Ok(false);
    };
    if files[i].conns != 1 {
        return Ok(false);
    }
    let cfg = files[i].db.config().clone();
    // The last references: dropping them closes the handle and lets go of its lock.
    *conn = None;
    let old = files.swap_remove(i);
    drop(old);
    let db = Database::open(path, cfg)?;
    files.push(OpenFile {
        path: path.to_path_buf(),
        db: db.clone(),
        conns: 1,
        fork_gen: inpage::vfs::fork_generation(),
    });
    *conn = Some(db);
    Ok(true)
}

fn close_shared(path: &Path) {
    let mut files = open_files();
    if let Some(i) = files.iter().position(|e| e.path == path) {
        files[i].conns -= 1;
        if files[i].conns == 0 {
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
    /// The engine handle; None while another process held the file when the connection
    /// opened: the connection attaches at its first transaction that finds the file free
    /// (`Conn::db`), and until then every transaction is SQLITE_BUSY, as a stock
    /// connection's is while another process holds a conflicting lock.
    db: Option<Database>,
    /// How to attach a detached connection: the configuration and the forced mode.
    pending: Option<(Config, Option<JournalMode>)>,
    mem: bool,
    /// The registry key of a file database (None in memory).
    shared_path: Option<PathBuf>,
    txn: Txn,
    /// SQLite's savepoint level i = `sps[i]`.
    sps: Vec<Savepoint>,
    trees: HashMap<u32, (Tree, bool), BuildHasherDefault<PgnoHasher>>,
    /// The catalog `trees` was filled under (`ReadableTxn::catalog_view`): the handles
    /// stay valid for every later transaction that sees the same catalog, whatever was
    /// committed in between (a commit that creates or drops a tree names a new catalog),
    /// so a statement does not look its tree up in the catalog again after each commit.
    /// None when no catalog can be named (a write transaction that created or dropped a
    /// tree): the handles are forgotten when it ends.
    trees_view: Option<(u64, u64)>,
    /// Commits (in fcc steps) made by this connection, and the fcc its write
    /// transaction started from: `PRAGMA data_version` = snapshot fcc minus own commits,
    /// so it changes exactly when another connection commits.
    own_fcc: u64,
    write_start_fcc: u64,
    /// The last error worth a message (read by C for sqlite3_log).
    errmsg: CString,
    /// What the last `ipg_check` found (read by C right after the call).
    check_msg: CString,
    /// The `fork()` generation the connection was opened in (`open_files`).
    fork_gen: u64,
    /// Opened read-only (`SQLITE_OPEN_READONLY`, `mode=ro`, a deserialized read-only
    /// image): write transactions are refused with SQLITE_READONLY.
    read_only: bool,
    /// The last `sqlite3_serialize` image (read by C right after the call).
    image: Vec<u8>,
    /// `PRAGMA auto_vacuum` asked before the database had a table: written with the
    /// first table (`ffi/vacuum.rs`).
    next_av: Option<inpage::AutoVacuum>,
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
        // A connection inherited through fork() holds none of this process's registry
        // entries (`open_files`): it must not close a connection the child opened itself.
        // A detached one never took an entry.
        if let Some(p) = &self.shared_path {
            if self.db.is_some() && self.fork_gen == inpage::vfs::fork_generation() {
                close_shared(p);
            }
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
        let r = with_txn!(self, t => match t.open_tree(&n) {
            Ok(tree) => Ok(Some((tree, true))),
            // An index: a probe tree (this handle never compares, see `no_order`).
            Err(Error::InvalidArgument(_)) => t
                .open_probe_tree(&n, record_order::no_order())
                .map(|tr| Some((tr, false))),
            Err(Error::TreeNotFound(_)) => Ok(None),
            Err(e) => Err(e),
        })?;
        if let Some(t) = &r {
            self.trees.insert(itable, t.clone());
        }
        Ok(r)
    }
    /// The engine handle, attaching it first if another process held the file when
    /// this connection opened (`Error::Locked` while it still does).
    fn db(&mut self) -> Result<&Database, Error> {
        if self.db.is_none() {
            let (cfg, forced) = self
                .pending
                .clone()
                .expect("a detached connection knows how to attach");
            let path = self
                .shared_path
                .clone()
                .expect("only file databases are detached");
            self.db = Some(open_shared(&path, cfg, forced)?);
            self.pending = None;
        }
        Ok(self.db.as_ref().expect("attached above"))
    }
    /// Keep the tree handles for a transaction that sees catalog `view` if they were
    /// filled under it, else forget them.
    fn trees_under(&mut self, view: Option<(u64, u64)>) {
        if view.is_none() || view != self.trees_view {
            self.trees.clear();
        }
        self.trees_view = view;
    }
    /// Before a write transaction ends: forget the handles if it created or dropped a
    /// tree (its catalog, committed or rolled back, is not the one they were made under).
    fn trees_after_write(&mut self) {
        if let Txn::Write(w) = &self.txn {
            if w.catalog_view().is_none() || w.catalog_view() != self.trees_view {
                self.trees.clear();
                self.trees_view = None;
            }
        }
    }
    /// Start a transaction with `begin`; if the handle was poisoned by an earlier failed
    /// commit, recover it first (`recover_shared`) and try once more, so that the
    /// connection goes on after the error, as a stock connection does.
    fn begin_with<T>(&mut self, begin: impl Fn(&Database) -> Result<T, Error>) -> Result<T, Error> {
        match self.db().and_then(&begin) {
            Err(Error::Poisoned(why)) if !self.txn_open() => {
                let Some(path) = self.shared_path.clone() else {
                    return Err(Error::Poisoned(why));
                };
                if recover_shared(&path, &mut self.db)? {
                    self.trees.clear();
                    self.trees_view = None;
                    self.db().and_then(&begin)
                } else {
                    Err(Error::Poisoned(why))
                }
            }
            r => r,
        }
    }
    /// `begin_with`, trying again until `wait` has passed while the answer is busy: the
    /// engine waits for another process's turn in short slices (so it says it waits, and
    /// gets its turn, `procs`), and between them this connection looks again for this
    /// process's writer and for a file another process kept (attaching, `Conn::db`).
    fn begin_waiting<T>(
        &mut self,
        wait: Duration,
        begin: impl Fn(&Database, Duration) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let deadline = Instant::now() + wait;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let slice = left.min(Duration::from_millis(20));
            match self.begin_with(|d| begin(d, slice)) {
                Err(Error::Busy | Error::Locked { .. }) if !left.is_zero() => {
                    std::thread::sleep(Duration::from_millis(1).min(left));
                }
                r => return r,
            }
        }
    }
    /// The engine handle of a connection known to be attached (it has or had a
    /// transaction).
    fn held(&self) -> &Database {
        self.db
            .as_ref()
            .expect("a connection with a transaction is attached")
    }
    /// A read-only look at a detached connection's file (what it would attach to): its
    /// journal mode and page size while another process holds it.
    fn peek(&self) -> Option<(JournalMode, usize)> {
        if let Some(d) = &self.db {
            return Some((d.journal_mode(), d.page_size()));
        }
        let (mut cfg, _) = self.pending.clone()?;
        cfg.journal_mode = None;
        let d = Database::open_read_only(self.shared_path.as_ref()?, cfg).ok()?;
        Some((d.journal_mode(), d.page_size()))
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
            _ => self.db.as_ref().map_or(0, |d| d.fcc()),
        }
    }
    fn txn_open(&self) -> bool {
        !matches!(self.txn, Txn::None)
    }
    /// `Error::Forked` for a connection a child of `fork()` inherited.
    fn not_forked(&self) -> Result<(), Error> {
        // In-memory databases are the child's own copy.
        if !self.mem && self.fork_gen != inpage::vfs::fork_generation() {
            return Err(Error::Forked {
                path: self.shared_path.clone().unwrap_or_default(),
            });
        }
        Ok(())
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
    let c = unsafe { p.as_mut() }?;
    // C may have stepped within the row run: bring the engine cursor to that row before
    // Rust looks at it.
    c.sync_run();
    Some(c)
}

/// `ipg_open` flags: the connection may not write (`SQLITE_OPEN_READONLY`, `mode=ro`).
pub const OPEN_READ_ONLY: c_int = 1;
/// `ipg_open` flags: a missing file is created (`SQLITE_OPEN_CREATE`).
pub const OPEN_CREATE: c_int = 2;

/// Open the database `path` (`memory` != 0: a private in-memory one) with `OPEN_*`
/// `flags`. The path is bytes, as the OS takes it (it need not be UTF-8).
///
/// A read-only connection shares the file's handle like any other and is refused write
/// transactions (SQLITE_READONLY); only if the file cannot be opened for writing at all
/// (permissions, a read-only file system) is it opened read-only underneath.
///
/// # Safety
/// `path` is null or NUL-terminated; `out` and `errmsg` are valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ipg_open(
    path: *const c_char,
    memory: c_int,
    uri_mode: *const c_char,
    flags: c_int,
    out: *mut *mut Conn,
) -> c_int {
    guard(INTERNAL, || {
        let path: PathBuf = if path.is_null() {
            PathBuf::new()
        } else {
            // SAFETY: SQLite passes a NUL-terminated file name.
            std::ffi::OsStr::from_bytes(unsafe { CStr::from_ptr(path) }.to_bytes()).into()
        };
        let mem = memory != 0 || path.as_os_str().is_empty();
        let read_only = flags & OPEN_READ_ONLY != 0;
        let mut forced = None;
        let cfg = if mem {
            Config::default()
        } else {
            let mut c = file_config().create(flags & OPEN_CREATE != 0 && !read_only);
            match mode_from_env() {
                Ok(Some(m)) => {
                    c = c.journal_mode(m);
                    forced = Some(m);
                }
                Ok(None) if !uri_mode.is_null() => {
                    // SAFETY: sqlite3_uri_parameter returns a NUL-terminated value that
                    // lives as long as the file name.
                    let v = unsafe { CStr::from_ptr(uri_mode) }.to_string_lossy();
                    match mode_from_name(&v) {
                        Some(m) => {
                            // A file that exists keeps its mode: only a new file takes
                            // the URI's (asking for another mode is not an error, as
                            // PRAGMA journal_mode answers with the mode in use).
                            if !c.vfs.exists(&path).unwrap_or(true) {
                                c = c.journal_mode(m);
                            } else {
                                c.journal_mode = None;
                            }
                        }
                        None => {
                            set_open_error(&format!(
                                "journal_mode={v:?} in the URI: unknown mode (one of {:?})",
                                mode_names()
                            ));
                            return CANTOPEN;
                        }
                    }
                }
                Ok(None) => forced = c.journal_mode,
                Err(msg) => {
                    set_open_error(&msg);
                    return CANTOPEN;
                }
            }
            c
        };
        let mut shared = !mem;
        let mut pending = None;
        let mut read_only = read_only;
        // A read-only connection never writes: an empty (0-byte) file is an empty
        // database to it without being laid out on disk, as in stock SQLite.
        let empty_file = !mem
            && read_only
            && cfg
                .vfs
                .open_read_only(&path)
                .and_then(|f| f.len())
                .is_ok_and(|n| n == 0);
        let opened = if mem {
            Database::open_memory(cfg).map(Some)
        } else if empty_file {
            shared = false;
            Database::open_read_only(&path, cfg).map(Some)
        } else {
            match open_shared(&path, cfg.clone(), forced).map(Some) {
                // Another process holds the file: the connection opens detached and
                // attaches at its first transaction that finds the file free (`Conn::db`);
                // until then its transactions are SQLITE_BUSY, as stock SQLite's are while
                // another process holds a conflicting lock (busy_timeout applies).
                Err(Error::Locked { .. }) => {
                    pending = Some((cfg.clone(), forced));
                    Ok(None)
                }
                // A file this process may not write (permissions, a read-only mount): the
                // connection reads it through the engine's read-only open (no lock,
                // nothing written) and refuses writes with SQLITE_READONLY, as stock
                // SQLite falls back to a read-only open.
                Err(Error::Io { source, .. })
                    if matches!(
                        source.kind(),
                        std::io::ErrorKind::PermissionDenied
                            | std::io::ErrorKind::ReadOnlyFilesystem
                    ) && cfg.vfs.exists(&path).unwrap_or(false) =>
                {
                    shared = false;
                    read_only = true;
                    Database::open_read_only(&path, cfg).map(Some)
                }
                r => r,
            }
        };
        match opened {
            Ok(db) => {
                let conn = Box::new(Conn {
                    db,
                    pending,
                    mem,
                    shared_path: shared.then(|| path.clone()),
                    txn: Txn::None,
                    sps: Vec::new(),
                    trees: HashMap::default(),
                    trees_view: None,
                    own_fcc: 0,
                    write_start_fcc: 0,
                    errmsg: CString::default(),
                    check_msg: CString::default(),
                    fork_gen: inpage::vfs::fork_generation(),
                    read_only,
                    image: Vec::new(),
                    next_av: None,
                });
                // SAFETY: `out` is valid for a write (contract).
                unsafe { *out = Box::into_raw(conn) };
                OK
            }
            Err(e) => {
                set_open_error(&e.to_string());
                match (&e, rc_of(&e)) {
                    // What stock SQLite calls "unable to open database file": a missing
                    // file without SQLITE_OPEN_CREATE, a directory, no permission.
                    (Error::Io { op, .. }, _)
                        if ["open", "stat", "create", "lock"].contains(op) =>
                    {
                        CANTOPEN
                    }
                    (_, ERROR | MISUSE) => CANTOPEN,
                    (_, rc) => rc,
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
            Some(c) => match c.db() {
                Ok(d) => mode_code(d.journal_mode()),
                Err(_) => c.peek().map_or(2, |(m, _)| mode_code(m)),
            },
            None => 2,
        }
    })
}

/// PRAGMA journal_mode=`code`: switch the database to that mode if it is still empty,
/// and answer the mode in use afterwards (SQLite's convention: a request that cannot be
/// met answers the unchanged mode).
///
/// A mode is the file's format (the page layout and where commits go), so it changes
/// only while the database holds nothing: no table, no schema, this connection the only
/// one to the file in the process, no transaction open, and no `INPAGE_JOURNAL_MODE`
/// (the deployment switch always wins). The switch closes the file, removes it and the
/// side files a mode keeps next to it (`-wal`, `-journal`), and creates it again in the
/// new mode; nothing can be lost because there is nothing in it.
///
/// # Safety
/// `conn` as in [`conn`].
#[no_mangle]
pub unsafe extern "C" fn ipg_set_mode(conn: *mut Conn, code: c_int) -> c_int {
    guard(2, || {
        // SAFETY: contract.
        let Some(c) = (unsafe { self::conn(conn) }) else {
            return 2;
        };
        if c.mem {
            return 4;
        }
        let current = match c.db() {
            Ok(d) => d.journal_mode(),
            // Another process holds the file: nothing can change; answer its mode.
            Err(_) => return c.peek().map_or(2, |(m, _)| mode_code(m)),
        };
        let Some(target) = mode_of_code(code) else {
            return mode_code(current);
        };
        if target == current || !matches!(c.txn, Txn::None) || !matches!(mode_from_env(), Ok(None))
        {
            return mode_code(current);
        }
        match switch_empty(c, |cfg| cfg.journal_mode(target)) {
            Ok(true) => mode_code(target),
            Ok(false) => mode_code(current),
            Err(e) => {
                c.fail(&e);
                c.peek().map_or(2, |(m, _)| mode_code(m))
            }
        }
    })
}

/// `PRAGMA page_size = n`: as in stock SQLite, it takes effect on a database nothing has
/// been written to yet (recreated with pages of `n` bytes), and is otherwise ignored.
/// Returns the page size in force afterwards.
///
/// # Safety
/// `conn` as in [`conn`].
#[no_mangle]
pub unsafe extern "C" fn ipg_set_page_size(conn: *mut Conn, n: c_int) -> c_int {
    guard(4096, || {
        // SAFETY: contract.
        let Some(c) = (unsafe { self::conn(conn) }) else {
            return 4096;
        };
        let current = c.peek().map_or(4096, |(_, ps)| ps as c_int);
        // SQLite's own rule: a power of two from 512 to 65536, else ignored.
        let valid = (512..=65536).contains(&n) && (n & (n - 1)) == 0;
        if c.mem || !valid || n == current || c.txn_open() || c.db().is_err() {
            return current;
        }
        match switch_empty(c, |cfg| cfg.page_size(n as u32)) {
            Ok(true) => n,
            Ok(false) => current,
            // A size the mode cannot use: the file stays as it was, as stock SQLite
            // ignores a size it cannot take.
            Err(_) => c.peek().map_or(4096, |(_, ps)| ps as c_int),
        }
    })
}

/// `PRAGMA journal_size_limit` and `PRAGMA wal_autocheckpoint`: the engine's log limits
/// for the connection's database (`Database::set_journal_size_limit`,
/// `set_wal_autocheckpoint`; one handle serves every connection of a file in this
/// process, so the last connection to set one sets it for all). `size`: bytes, -1 no
/// limit, below -1 unchanged; `frames`: below 0 unchanged.
///
/// # Safety
/// `conn` as in [`conn`].
#[no_mangle]
pub unsafe extern "C" fn ipg_set_log_limits(conn: *mut Conn, size: i64, frames: c_int) -> c_int {
    guard(INTERNAL, || {
        // SAFETY: contract.
        let Some(c) = (unsafe { self::conn(conn) }) else {
            return MISUSE;
        };
        // A database that cannot be opened now keeps its limits: the pragma itself never
        // fails, as in stock SQLite (the next statement reports the open's error).
        let Ok(d) = c.db() else {
            return OK;
        };
        if size >= -1 {
            d.set_journal_size_limit(u64::try_from(size).ok());
        }
        if let Ok(n) = u32::try_from(frames) {
            d.set_wal_autocheckpoint(n);
        }
        OK
    })
}

/// Recreate the empty database of `c` with its configuration changed by `change` (a
/// journal mode for [`ipg_set_mode`], a page size for [`ipg_set_page_size`]); Ok(false)
/// when the database is not empty or shared.
fn switch_empty(c: &mut Conn, change: impl Fn(Config) -> Config) -> Result<bool, Error> {
    let Some(path) = c.shared_path.clone() else {
        return Ok(false);
    };
    {
        let r = c.db()?.begin_read()?;
        let trees = r.list_trees()?;
        let schema_only = trees.iter().all(|t| t.name == name(1));
        let schema_empty = match trees.first() {
            Some(t) => {
                let mut cur = r.open_cursor(&r.open_tree(&t.name)?)?;
                !r.cursor_first(&mut cur)?
            }
            None => true,
        };
        let metas_zero = (0..8).all(|i| r.meta(i).unwrap_or(1) == 0);
        if !(schema_only && schema_empty && metas_zero) {
            return Ok(false);
        }
    }
    let mut files = open_files();
    let Some(i) = files.iter().position(|e| e.path == path) else {
        return Ok(false);
    };
    if files[i].conns != 1 {
        return Ok(false); // another connection of this process has it open
    }
    let cfg = c.db()?.config().clone();
    // If anything below fails, the connection attaches again at its next transaction.
    c.pending = Some((cfg.clone(), None));
    // Every handle goes (the registry's and this connection's), which closes the file
    // and releases its lock.
    files.swap_remove(i);
    c.trees.clear();
    c.trees_view = None;
    let old = c.db.take().expect("attached above");
    let old_mode = old.journal_mode();
    old.close()?;
    let p = path.as_path();
    // Through the database's own VFS (the OS, or a simulated disk under test).
    let vfs = cfg.vfs.clone();
    let remove = |f: &std::path::Path| match vfs.delete(f) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::Io {
            op: "remove",
            path: f.to_path_buf(),
            source: e,
        }),
        _ => Ok(()),
    };
    for suffix in old_mode.capabilities().side_files {
        let mut side = path.as_os_str().to_owned();
        side.push("-");
        side.push(suffix);
        remove(Path::new(&side))?;
    }
    remove(p)?;
    // The mode stays the file's unless `change` sets another.
    let opened = Database::open(p, change(cfg.clone().create(true).journal_mode(old_mode)));
    let (db, switched) = match opened {
        Ok(db) => (db, true),
        // The empty file is recreated in its old mode; the error is reported.
        Err(e) => {
            let back = Database::open(p, cfg.create(true).journal_mode(old_mode))?;
            files.push(OpenFile {
                path,
                db: back.clone(),
                conns: 1,
                fork_gen: inpage::vfs::fork_generation(),
            });
            c.db = Some(back);
            return Err(e);
        }
    };
    files.push(OpenFile {
        path,
        db: db.clone(),
        conns: 1,
        fork_gen: inpage::vfs::fork_generation(),
    });
    c.db = Some(db);
    Ok(switched)
}

/// Whether the connection may not write (read-only open, read-only image).
///
/// # Safety
/// `conn` as in [`conn`].
#[no_mangle]
pub unsafe extern "C" fn ipg_read_only(conn: *mut Conn) -> c_int {
    guard(0, || {
        // SAFETY: contract.
        unsafe { self::conn(conn) }.map_or(0, |c| {
            (c.read_only || c.db.as_ref().is_some_and(|d| d.is_read_only())) as c_int
        })
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
/// is stale cannot be upgraded (SQLITE_BUSY_SNAPSHOT, WAL-mode semantics). Waits up to
/// `wait_ms` (the connection's `busy_timeout`; glue.c calls SQLite's busy handler only
/// when there is none) for another process's turn, this process's writer, or a file
/// another process keeps (a detached connection).
///
/// # Safety
/// `conn` as in [`conn`].
#[no_mangle]
pub unsafe extern "C" fn ipg_begin(conn: *mut Conn, write: c_int, wait_ms: c_int) -> c_int {
    guard(INTERNAL, || {
        // SAFETY: contract.
        let Some(c) = (unsafe { self::conn(conn) }) else {
            return MISUSE;
        };
        // A connection inherited through fork(): every statement fails at its start,
        // even one inside a transaction the parent had open.
        if let Err(e) = c.not_forked() {
            return c.fail(&e);
        }
        match (&c.txn, write != 0) {
            (Txn::Write(_), _) | (Txn::Read(_), false) => return OK,
            (Txn::None, false) => {
                let wait = Duration::from_millis(wait_ms.max(0) as u64);
                return match c.begin_waiting(wait, |d, w| d.begin_read_within(w)) {
                    Ok(r) => {
                        c.trees_under(r.catalog_view());
                        c.txn = Txn::Read(r);
                        OK
                    }
                    Err(e) => c.fail(&e),
                };
            }
            (Txn::Read(r), true) if r.snapshot_fcc() != c.held().fcc() => return BUSY_SNAPSHOT,
            _ => {}
        }
        if c.read_only || c.db.as_ref().is_some_and(|d| d.is_read_only()) {
            return READONLY;
        }
        // An upgrade: the read transaction ends as the write one starts (below).
        let upgrade = matches!(c.txn, Txn::Read(_));
        let wait = Duration::from_millis(wait_ms.max(0) as u64);
        let w = match upgrade {
            true => c.begin_with(|d| d.begin_write_upgrading(wait)),
            false => c.begin_waiting(wait, |d, w| d.begin_write_within(w)),
        };
        let w = match w {
            Ok(w) => w,
            Err(e) => return c.fail(&e),
        };
        if let Txn::Read(r) = &c.txn {
            // Another process's commit read in as the write turn was taken (its appends
            // beside this reader, `procs`): the snapshot read so far is stale.
            if w.snapshot_fcc() != r.snapshot_fcc() {
                drop(w);
                return BUSY_SNAPSHOT;
            }
        }
        c.sps.clear();
        c.write_start_fcc = c.held().fcc();
        c.trees_under(w.catalog_view());
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
        c.trees_after_write();
        let mut rc = OK;
        match std::mem::replace(&mut c.txn, Txn::None) {
            Txn::Write(w) => {
                if commit != 0 {
                    match w.commit() {
                        Ok(_) => c.own_fcc += c.held().fcc().saturating_sub(c.write_start_fcc),
                        Err(e) => rc = c.fail(&e),
                    }
                } else if let Err(e) = w.rollback() {
                    rc = c.fail(&e);
                }
            }
            Txn::Read(_) | Txn::None => {}
        }
        if keep_read != 0 && rc == OK {
            if let Ok(r) = c.db().and_then(|d| d.begin_read()) {
                c.txn = Txn::Read(r);
            }
        }
        rc
    })
}

/// Commit the write transactions of `n` connections (distinct databases) together,
/// atomically (`inpage::commit_all`): a transaction that wrote several attached
/// databases. Each connection ends up as after `ipg_end(commit)`; on an error the
/// message goes to the first connection's `errmsg`.
///
/// # Safety
/// `conns` points to `n` live, distinct connections as in [`conn`].
#[no_mangle]
pub unsafe extern "C" fn ipg_commit_group(
    conns: *const *mut Conn,
    n: c_int,
    keep_read: c_int,
) -> c_int {
    guard(INTERNAL, || {
        if conns.is_null() || n < 1 {
            return MISUSE;
        }
        // SAFETY: contract.
        let ptrs = unsafe { std::slice::from_raw_parts(conns, n as usize) };
        let mut cs: Vec<&mut Conn> = Vec::with_capacity(ptrs.len());
        for &p in ptrs {
            // SAFETY: contract (distinct live connections).
            match unsafe { self::conn(p) } {
                Some(c) => cs.push(c),
                None => return MISUSE,
            }
        }
        let mut txns = Vec::with_capacity(cs.len());
        for c in cs.iter_mut() {
            c.sps.clear();
            c.trees_after_write();
            match std::mem::replace(&mut c.txn, Txn::None) {
                Txn::Write(w) => txns.push(w),
                other => c.txn = other,
            }
        }
        let r = inpage::commit_all(txns);
        let mut rc = OK;
        match r {
            Ok(()) => {
                for c in cs.iter_mut() {
                    c.own_fcc += c.held().fcc().saturating_sub(c.write_start_fcc);
                }
            }
            Err(e) => rc = cs[0].fail(&e),
        }
        if keep_read != 0 && rc == OK {
            for c in cs.iter_mut() {
                if let Ok(r) = c.held().begin_read() {
                    c.txn = Txn::Read(r);
                }
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
            c.trees.clear();
            if i < 0 {
                c.sps.clear();
                w.rollback_all()
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
        match idx {
            // BTREE_FREE_PAGE_COUNT (PRAGMA freelist_count).
            0 => return vacuum::free_count(c),
            // BTREE_INCR_VACUUM: names the auto_vacuum setting (ffi/vacuum.rs).
            7 => return vacuum::incr_flag(c),
            1..=8 => {}
            _ => return 0,
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
            Ok(w) if idx == 7 => vacuum::set_incr_flag(w, v),
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
                // Cursors open it again with their KeyInfo's order (`Cur::engine`).
                w.create_probe_tree(&name(n), record_order::no_order())
                    .map(|t| (t, false))
            }?;
            w.set_meta(3, n)?;
            Ok((n, t))
        });
        // The setting `PRAGMA auto_vacuum` asked for before the first table.
        let r = r.and_then(|nt| vacuum::apply_pending(c, nt.0).map(|()| nt));
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

/// One SQLite `BtCursor`: an owned engine cursor, opened on first use (table 1 of a fresh
/// file does not exist until the first write).
pub struct Cur {
    conn: *mut Conn,
    itable: u32,
    /// The `KeyInfo*` of an index cursor (null for a rowid table).
    keyinfo: *mut c_void,
    /// The leading fields inserts place this index's entries by (0 = all; glue.c
    /// `ipgOrderFields`), which its symmetric order must compare.
    order_fields: c_int,
    cur: Option<Cursor>,
    intkey: bool,
    /// The current row's bytes when its value lives in an overflow chain (the engine
    /// keeps only inline bytes in the cursor): the whole value up to [`WHOLE_MAX`]
    /// bytes, else its first [`PREFIX`] bytes (SQLite reads the rest by range, through
    /// `ipg_payload_range`). Read once per position, so the pointer `ipg_payload` hands
    /// out stays valid until the cursor moves (trap 6).
    big: Option<Vec<u8>>,
    /// The row run C steps through without calling Rust (see [`Run`]); `rows` backs it.
    /// Its `pay` is the record `ipg_payload` handed out for the current position.
    run: Run,
    rows: Vec<Row>,
    /// Forward steps since the cursor was last positioned otherwise: a run is offered
    /// from the second on, so a lookup that steps once (a non-unique index probe) does
    /// not read the rest of its leaf for nothing.
    streak: u32,
    /// Why the engine cursor could not be brought to the run's row (`sync_run`): the
    /// next call that can fail reports it, so a statement fails instead of ending early.
    lost: Option<Error>,
    /// The most rows the next run may hold (see `sync_run`).
    run_cap: u32,
    /// Something was written through this cursor (`Cur::wrote`): it gets no runs.
    has_written: bool,
}

/// The rows of a cursor's first run, and of each run after one cut short.
const RUN_CAP_MIN: u32 = 8;

/// One row of a [`Run`]: the integer key (rowid tables) and the record's bytes.
#[repr(C)]
pub struct Row {
    key: i64,
    pay: *const u8,
    n: u32,
}

/// A forward scan's fast path (glue.c `IpgRun`): the rest of the engine cursor's
/// leaf, so that stepping forward, `IntegerKey`, `PayloadFetch` and `CursorHasMoved`
/// within it are answered in C (they were eight calls into Rust per scanned row).
///
/// Invariants, and why they hold:
/// - While `n > 0` the rows are the tree's and `has_moved` is 0 for each, as
///   `ipg_has_moved` answers there: in a read transaction the snapshot never changes;
///   in a write transaction only this connection changes the tree, and C ends the run
///   (`ipg_sync`, glue.c `glueEndTableRuns`) before any call that changes the run's
///   tree (insert, delete, blob write, clear, drop; every tree for a savepoint
///   rollback). C also ends runs before the connection begins or ends a transaction.
///   A forward scan in a write transaction (`CREATE INDEX`, `INSERT … SELECT`, an
///   `UPDATE` or `DELETE` with a scan) runs in C as a read-only one does.
/// - The engine cursor sits on `rows[0]`; the logical position is `rows[i]`, `i < n`.
///   Every Rust entry point on the cursor first moves the engine cursor `i` rows on
///   within its leaf and ends the run (`Cur::sync_run`), so Rust code never sees the
///   difference.
/// - `pay` points into the leaf image the engine cursor holds (an immutable `Arc`),
///   which lives until the engine cursor leaves the leaf, and that only happens after
///   `sync_run`. Rows whose key or value is in a chain end the run (the usual path
///   reads those).
///
/// Outside a run (`n == 0`), `pay`/`npay` (when `pay` is not null) are the record
/// `ipg_payload` handed out for the engine cursor's current position (into its page image
/// or `Cur::big`), which C answers from until the cursor moves: a row's column reads then
/// cost no call into Rust. Everything that moves the cursor clears it first
/// (`Cur::moved`), and what it points at lives until then, as for the run's rows.
#[repr(C)]
pub struct Run {
    rows: *const Row,
    n: u32,
    i: u32,
    pay: *const u8,
    npay: u32,
    /// The record's whole size; more than `npay` when only a prefix was handed out.
    ntotal: u32,
    /// Changes whenever the engine cursor may stand on another row, or its row's bytes
    /// may have changed through this cursor (`Cur::moved`); with `i` it is the row's
    /// identity that glue.c's `sqlite3BtreeOffset` answers, which SQLite keys its cache
    /// of large column values by (`vdbeColumnFromOverflow`).
    pos: u64,
}

impl Run {
    const EMPTY: Run = Run {
        rows: std::ptr::null(),
        n: 0,
        i: 0,
        pay: std::ptr::null(),
        npay: 0,
        ntotal: 0,
        pos: 0,
    };
}

/// A value in an overflow chain up to this size is read whole at its first access (one
/// walk of a short chain serves every column of the row).
const WHOLE_MAX: u64 = 64 * 1024;
/// Of a longer value, only this prefix is read at first (it holds the record header and
/// the leading columns, as a stock leaf cell's local part does); SQLite reads the rest by
/// range (`sqlite3BtreePayload`), so opening a blob or reading a column of a large row
/// costs the pages it touches, not the value's size.
const PREFIX: u64 = 4096;

/// Open a cursor; `*run` gets its row run, for C to step through (see [`Run`]), valid
/// for the cursor's life.
///
/// # Safety
/// `conn` as in [`conn`]; `keyinfo` null (rowid table) or a `KeyInfo*` that outlives the
/// cursor; `run` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ipg_cursor_open(
    conn: *mut Conn,
    itable: u32,
    keyinfo: *mut c_void,
    order_fields: c_int,
    run: *mut *mut Run,
) -> *mut Cur {
    guard(std::ptr::null_mut(), || {
        let c = Box::into_raw(Box::new(Cur {
            conn,
            itable,
            keyinfo,
            order_fields,
            cur: None,
            intkey: keyinfo.is_null(),
            big: None,
            run: Run::EMPTY,
            rows: Vec::new(),
            streak: 0,
            lost: None,
            run_cap: RUN_CAP_MIN,
            has_written: false,
        }));
        // SAFETY: `c` is the live box just made (its `run` moves with nothing: the box
        // stays put until `ipg_cursor_close`); `run` is valid for a write (contract).
        unsafe { *run = &mut (*c).run };
        c
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

impl Cur {
    fn conn<'a>(&self) -> &'a mut Conn {
        // SAFETY: SQLite serialises all calls on one connection (db mutex) and closes
        // cursors before their b-tree, so the Conn is alive and not otherwise borrowed.
        unsafe { &mut *self.conn }
    }
    /// The engine cursor, opened if needed; None when the tree does not exist.
    fn engine(&mut self) -> Result<Option<&mut Cursor>, Error> {
        if self.cur.is_none() {
            let conn = self.conn();
            let Some((tree, intkey)) = conn.tree(self.itable)? else {
                return Ok(None);
            };
            self.intkey = intkey;
            let tree = if intkey || self.keyinfo.is_null() {
                tree
            } else {
                // SAFETY: SQLite keeps the cursor's KeyInfo alive while it is open, and
                // the order takes its own reference for as long as it lives.
                let order = unsafe { record_order::keyinfo_order(self.keyinfo, self.order_fields) };
                tree.with_order(order)
            };
            self.cur = Some(with_txn!(conn, t => t.open_cursor(&tree))?);
        }
        Ok(self.cur.as_mut())
    }
    /// End the row run, moving the engine cursor onto the row C stepped to.
    fn sync_run(&mut self) {
        if self.run.n == 0 {
            return;
        }
        let k = self.run.i as usize;
        // A run C stepped to its end grows the next one; a run cut short (a write to its
        // table, a seek, the end of the statement) starts small again, so a scan whose
        // rows are written as it goes collects few rows it never reads.
        self.run_cap = if k + 1 >= self.run.n as usize {
            self.run_cap.saturating_mul(2)
        } else {
            RUN_CAP_MIN
        };
        self.run = Run {
            pos: self.run.pos,
            ..Run::EMPTY
        };
        if k == 0 {
            return;
        }
        self.moved();
        let conn = self.conn();
        if let Some(e) = self.cur.as_mut() {
            // Cannot fail: the rows were read from this leaf of this snapshot, and C
            // ends runs before the transaction changes. Should it anyway, the cursor is
            // dropped rather than left on a wrong row, and the statement fails.
            let r = with_txn!(conn, t => t.cursor_skip_in_leaf(e, k));
            debug_assert!(matches!(r, Ok(true)), "row run sync: {r:?}");
            if !matches!(r, Ok(true)) {
                self.cur = None;
                self.lost = Some(match r {
                    Err(e) => e,
                    Ok(_) => Error::InvalidArgument("row run past its leaf".into()),
                });
            }
        }
    }
    /// After a forward step: offer C the rest of the leaf, up to `run_cap` rows.
    fn fill_run(&mut self) {
        debug_assert_eq!(self.run.n, 0);
        if self.has_written || matches!(self.conn().txn, Txn::None) {
            return;
        }
        let Some(e) = self.cur.as_ref() else {
            return;
        };
        let intkey = self.intkey;
        let cap = self.run_cap as usize;
        let rows = &mut self.rows;
        rows.clear();
        e.leaf_rest(&mut |ik, key, value| {
            let rec = if intkey { value } else { key };
            rows.push(Row {
                key: ik.unwrap_or(0),
                pay: rec.as_ptr(),
                n: rec.len() as u32,
            });
            rows.len() < cap
        });
        // A run of one row saves nothing: C would call Rust for the next step anyway.
        if rows.len() > 1 {
            self.run = Run {
                rows: rows.as_ptr(),
                n: rows.len() as u32,
                pos: self.run.pos,
                ..Run::EMPTY
            };
        }
    }
    /// The engine cursor is about to move: what was handed out for the old position goes.
    fn moved(&mut self) {
        self.big = None;
        self.run.pay = std::ptr::null();
        self.run.npay = 0;
        self.run.ntotal = 0;
        self.run.pos = self.run.pos.wrapping_add(1);
    }
    /// A write through the cursor: as `moved`, and no more runs for it: a statement
    /// that writes through the cursor it scans with (an `UPDATE` or `DELETE` in one pass)
    /// would cut each run short at its next write, having paid to collect rows it never
    /// steps through.
    fn wrote(&mut self) {
        self.moved();
        self.has_written = true;
    }
    /// Run a positioning call on the engine cursor. An absent tree reads as empty.
    fn go<R>(
        &mut self,
        absent: R,
        f: impl FnOnce(&Conn, &mut Cursor) -> Result<R, Error>,
    ) -> Result<R, Error> {
        self.moved();
        self.streak = 0;
        let conn = self.conn();
        match self.engine()? {
            Some(c) => f(conn, c),
            None => Ok(absent),
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
        if let Some(e) = c.lost.take() {
            return c.conn().fail(&e);
        }
        if let Err(e) = c.conn().not_forked() {
            return c.conn().fail(&e);
        }
        match f(c) {
            Ok(rc) => rc,
            Err(e) => c.conn().fail(&e),
        }
    })
}

/// SQLite's pRes for a seek result (an empty tree: -1, cursor invalid).
fn res_of(r: SeekResult) -> c_int {
    match r {
        SeekResult::Exact => 0,
        SeekResult::After => 1,
        SeekResult::Before | SeekResult::Empty => -1,
    }
}

/// First (`last` = 0) or last entry; `*empty` = 1 if none.
///
/// # Safety
/// `cur` live; `empty` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ipg_first(cur: *mut Cur, last: c_int, empty: *mut c_int) -> c_int {
    with_cur(cur, |c| {
        let found = c.go(false, |conn, e| {
            with_txn!(conn, t => if last != 0 { t.cursor_last(e) } else { t.cursor_first(e) })
        })?;
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
        let r = c.go(
            SeekResult::Empty,
            |conn, e| with_txn!(conn, t => t.cursor_seek(e, Key::Int(k))),
        )?;
        // SAFETY: `res` is valid (contract).
        unsafe { *res = res_of(r) };
        Ok(OK)
    })
}

/// Seek an index by SQLite's probe (`UnpackedRecord*`, its errCode zeroed by the
/// caller, who checks it after); `*res` as for `ipg_seek_int`.
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
        let r = c.go(SeekResult::Empty, |conn, e| {
            // SAFETY: `probe` is live for this call (contract).
            // SAFETY: `probe` is live and unchanged for this call (contract).
            let p = unsafe { Probe::new(probe) };
            with_txn!(conn, t => t.cursor_seek_by(e, &mut |s: &[u8]| p.cmp(s)))
        })?;
        // SAFETY: `res` is valid (contract).
        unsafe { *res = res_of(r) };
        Ok(OK)
    })
}

/// `dir` > 0: next, < 0: previous. SQLITE_DONE past the end. The engine steps within
/// its kept pages while the tree is unchanged, else moves by key.
///
/// # Safety
/// `cur` live.
#[no_mangle]
pub unsafe extern "C" fn ipg_step(cur: *mut Cur, dir: c_int) -> c_int {
    with_cur(cur, |c| {
        if c.cur.is_none() {
            return Ok(DONE);
        }
        let streak = if dir > 0 {
            c.streak.saturating_add(1)
        } else {
            0
        };
        let found = c.go(false, |conn, e| {
            with_txn!(conn, t => if dir > 0 { t.cursor_next(e) } else { t.cursor_prev(e) })
        })?;
        c.streak = streak;
        if found && streak >= 2 {
            c.fill_run();
        }
        Ok(if found { OK } else { DONE })
    })
}

/// End the cursor's row run (C calls it before the transaction begins or ends, and before
/// a write to the run's table).
///
/// # Safety
/// `cur` live.
#[no_mangle]
pub unsafe extern "C" fn ipg_sync(cur: *mut Cur) {
    #[cfg(feature = "mutants")]
    if mutants::STALE_RUNS.load(std::sync::atomic::Ordering::Relaxed) {
        return;
    }
    guard((), || {
        // SAFETY: contract; `cur` itself ends the run. Its scan starts over: the run
        // ended for a write to its table (or the end of a transaction), and another
        // write may follow the next step.
        if let Some(c) = unsafe { self::cur(cur) } {
            c.streak = 0;
        }
    })
}

/// Planted bugs of the glue, for the tests that show they are caught (feature
/// `mutants`; never in a normal build).
#[cfg(feature = "mutants")]
pub mod mutants {
    use std::sync::atomic::{AtomicBool, Ordering};

    pub(crate) static STALE_RUNS: AtomicBool = AtomicBool::new(false);

    /// Row runs survive a change of transaction (`ipg_sync` does nothing): a scan that
    /// upgrades to a write transaction keeps serving its read snapshot's rows.
    pub fn plant_stale_runs(on: bool) {
        STALE_RUNS.store(on, Ordering::Relaxed);
    }
}

/// # Safety
/// `cur` live.
#[no_mangle]
pub unsafe extern "C" fn ipg_valid(cur: *mut Cur) -> c_int {
    // SAFETY: contract.
    unsafe { self::cur(cur) }.map_or(0, |c| {
        c_int::from(c.cur.as_ref().is_some_and(Cursor::valid))
    })
}

/// # Safety
/// `cur` live.
#[no_mangle]
pub unsafe extern "C" fn ipg_invalidate(cur: *mut Cur) {
    guard((), || {
        // SAFETY: contract.
        if let Some(c) = unsafe { self::cur(cur) } {
            c.moved();
            c.cur = None;
        }
    })
}

/// Whether the cursor's row is gone or changed (SQLite's CursorHasMoved). While it
/// answers 0, the bytes `ipg_payload` handed out are the row's current ones.
///
/// # Safety
/// `cur` live.
#[no_mangle]
pub unsafe extern "C" fn ipg_has_moved(cur: *mut Cur) -> c_int {
    guard(1, || {
        // SAFETY: contract.
        let Some(c) = (unsafe { self::cur(cur) }) else {
            return 1;
        };
        let conn = c.conn();
        match (&c.cur, &conn.txn) {
            // A read transaction's snapshot never changes: a valid cursor stays put.
            (Some(e), Txn::Read(_)) => c_int::from(!e.valid()),
            (Some(e), _) => match with_txn!(conn, t => t.cursor_has_moved(e)) {
                Ok(false) => 0,
                _ => 1,
            },
            (None, _) => 1,
        }
    })
}

/// Put the cursor back on its key (SQLite's CursorRestore): `*different` = 1 when the
/// key is gone (next/prev then reach its neighbours).
///
/// # Safety
/// `cur` live; `different` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ipg_restore(cur: *mut Cur, different: *mut c_int) -> c_int {
    with_cur(cur, |c| {
        let r = c.go(
            Restored::Gone,
            |conn, e| with_txn!(conn, t => t.cursor_restore(e)),
        )?;
        // SAFETY: `different` is valid (contract).
        unsafe { *different = c_int::from(r != Restored::Same) };
        Ok(OK)
    })
}

/// The current entry's record: value of a rowid table, key of an index. The bytes stay
/// valid until the cursor moves (trap 6): they are the engine cursor's page image, or
/// for an overflow value the copy in `Cur::big`.
///
/// # Safety
/// `cur` live; `p`, `n` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ipg_payload(
    cur: *mut Cur,
    p: *mut *const u8,
    n: *mut u32,
    total: *mut u32,
) -> c_int {
    with_cur(cur, |c| {
        if !c.run.pay.is_null() {
            // SAFETY: `p`, `n`, `total` are valid (contract).
            unsafe {
                *p = c.run.pay;
                *n = c.run.npay;
                *total = c.run.ntotal;
            }
            return Ok(OK);
        }
        let conn = c.conn();
        let mut out: &[u8] = &[];
        let mut size = 0u64;
        let mut found = false;
        if let Some(e) = c.cur.as_ref().filter(|e| e.valid()) {
            found = true;
            if !c.intkey {
                out = e.key().unwrap_or_default();
                size = out.len() as u64;
            } else {
                let local = e.value_local()?.unwrap_or_default();
                size = local.len() as u64;
                if local.is_empty() {
                    // Empty inline bytes: an empty value, or one in an overflow chain.
                    size = with_txn!(conn, t => t.cursor_value_len(e))?.unwrap_or(0);
                    if size > u64::from(u32::MAX) {
                        return Ok(TOOBIG);
                    }
                    if size > 0 && c.big.is_none() {
                        c.big = if size <= WHOLE_MAX {
                            with_txn!(conn, t => t.cursor_value(e))?
                        } else {
                            let mut head = vec![0; PREFIX as usize];
                            match with_txn!(conn, t => t.cursor_read_value(e, 0, &mut head))? {
                                Some(got) if got == head.len() => Some(head),
                                Some(_) => return Ok(CORRUPT),
                                None => None,
                            }
                        };
                    }
                }
                out = match &c.big {
                    Some(b) if local.is_empty() => b.as_slice(),
                    _ => local,
                };
            }
        }
        let ptr = if found {
            // The bytes stay where they are until the cursor moves (`Run::pay`).
            c.run.pay = out.as_ptr();
            c.run.npay = out.len() as u32;
            c.run.ntotal = size as u32;
            out.as_ptr()
        } else {
            size = 0;
            std::ptr::null()
        };
        // SAFETY: `p`, `n`, `total` are valid (contract).
        unsafe {
            *p = ptr;
            *n = out.len() as u32;
            *total = size as u32;
        }
        Ok(OK)
    })
}

/// Copy `amt` bytes of the current row's record from `offset` into `buf`, reading only
/// the chain pages that hold them: the part of a large value past what `ipg_payload`
/// handed out. `CORRUPT` when the row has fewer bytes (SQLite checked the range against
/// the size `ipg_payload` gave, so a short read means the row changed under it).
///
/// # Safety
/// `cur` live; `buf` valid for `amt` bytes.
#[no_mangle]
pub unsafe extern "C" fn ipg_payload_range(
    cur: *mut Cur,
    offset: u32,
    amt: u32,
    buf: *mut u8,
) -> c_int {
    with_cur(cur, |c| {
        if buf.is_null() {
            return Ok(MISUSE);
        }
        // SAFETY: `buf` is valid for `amt` bytes (contract).
        let out = unsafe { std::slice::from_raw_parts_mut(buf, amt as usize) };
        let conn = c.conn();
        // An index key is always handed out whole (`ipg_payload`), so only a rowid row's
        // value is ever read by range.
        let Some(e) = c.cur.as_ref().filter(|e| e.valid() && c.intkey) else {
            return Ok(CORRUPT);
        };
        match with_txn!(conn, t => t.cursor_read_value(e, u64::from(offset), out))? {
            Some(got) if got == out.len() => Ok(OK),
            _ => Ok(CORRUPT),
        }
    })
}

/// # Safety
/// `cur` live.
#[no_mangle]
pub unsafe extern "C" fn ipg_intkey(cur: *mut Cur) -> i64 {
    // SAFETY: contract.
    unsafe { self::cur(cur) }.map_or(0, |c| c.cur.as_ref().and_then(Cursor::int_key).unwrap_or(0))
}

/// Insert (replace) a rowid row: `n` bytes of data + `nzero` zeros.
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
) -> c_int {
    with_cur(cur, |c| {
        let bytes: &[u8] = if n > 0 && !data.is_null() {
            // SAFETY: `data` is valid for `n` bytes (contract).
            unsafe { std::slice::from_raw_parts(data, n as usize) }
        } else {
            &[]
        };
        let mut v = Vec::with_capacity(bytes.len() + nzero.max(0) as usize);
        v.extend_from_slice(bytes);
        v.resize(bytes.len() + nzero.max(0) as usize, 0);
        c.wrote();
        let conn = c.conn();
        let Some(e) = c.engine()? else {
            return Ok(CORRUPT);
        };
        match conn.write() {
            Ok(w) => w.cursor_insert(e, Key::Int(intkey), &v).map(|_| OK),
            Err(rc) => Ok(rc),
        }
    })
}

/// Incremental blob write (`sqlite3BtreePutData`): `n` bytes at `offset` of the row's
/// record, which keeps its length (`WriteTxn::cursor_overwrite_value`: in place where
/// the layout overwrites pages in place, so the cost follows the bytes written).
///
/// # Safety
/// `cur` live; `data` valid for `n` bytes.
#[no_mangle]
pub unsafe extern "C" fn ipg_put_data(
    cur: *mut Cur,
    offset: u32,
    data: *const u8,
    n: c_int,
) -> c_int {
    with_cur(cur, |c| {
        if !c.intkey || data.is_null() || n < 0 {
            return Ok(MISUSE);
        }
        // SAFETY: `data` is valid for `n` bytes (contract).
        let bytes = unsafe { std::slice::from_raw_parts(data, n as usize) };
        c.wrote();
        let conn = c.conn();
        let Some(e) = c.engine()? else {
            return Ok(CORRUPT);
        };
        match conn.write() {
            Ok(w) => match w.cursor_overwrite_value(e, u64::from(offset), bytes) {
                Ok(()) => Ok(OK),
                Err(Error::InvalidArgument(_)) => Ok(CORRUPT),
                Err(err) => Err(err),
            },
            Err(rc) => Ok(rc),
        }
    })
}

/// Insert an index record where `probe` (`UnpackedRecord*`: the first nMem fields, or
/// the whole record) puts it, replacing the entry it finds equal (trap 7).
///
/// # Safety
/// `cur` live; `key` valid for `n` bytes; `probe` a live `UnpackedRecord*`.
#[no_mangle]
pub unsafe extern "C" fn ipg_insert_index(
    cur: *mut Cur,
    key: *const u8,
    n: c_int,
    probe: *mut c_void,
) -> c_int {
    with_cur(cur, |c| {
        if c.intkey || key.is_null() || n <= 0 {
            return Ok(MISUSE);
        }
        // SAFETY: `key` is valid for `n` bytes (contract).
        let key = unsafe { std::slice::from_raw_parts(key, n as usize) };
        c.wrote();
        let conn = c.conn();
        let Some(e) = c.engine()? else {
            return Ok(CORRUPT);
        };
        match conn.write() {
            Ok(w) => {
                // SAFETY: `probe` is live and unchanged for this call (contract).
                let p = unsafe { Probe::new(probe) };
                w.cursor_insert_by(e, &mut |s: &[u8]| p.cmp(s), key, b"")
                    .map(|_| OK)
            }
            Err(rc) => Ok(rc),
        }
    })
}

/// Delete the current entry; with `save_position` (BTREE_SAVEPOSITION) the cursor stays
/// on the deleted key so Next/Previous reach its neighbours.
///
/// # Safety
/// `cur` live.
#[no_mangle]
pub unsafe extern "C" fn ipg_delete(cur: *mut Cur, save_position: c_int) -> c_int {
    with_cur(cur, |c| {
        c.wrote();
        let conn = c.conn();
        let Some(e) = c.cur.as_mut().filter(|e| e.valid()) else {
            return Ok(CORRUPT);
        };
        match conn.write() {
            Ok(w) => w.cursor_delete(e, save_position != 0).map(|_| OK),
            Err(rc) => Ok(rc),
        }
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

/// The engine's structural check of the whole database on this connection's snapshot
/// (`inpage::check`: page checksums, cell bounds, key order of rowid trees, index trees'
/// structure, overflow chains, every page owned once). `*nerr` = number of problems (0 or
/// 1: the check stops at the first) and `*msg` their text, valid until the next call on
/// this connection. A corrupt database is a finding (SQLITE_OK); an I/O error or a
/// missing transaction is the return code.
///
/// # Safety
/// `conn` as in [`conn`]; `msg`, `nerr` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ipg_check(
    conn: *mut Conn,
    msg: *mut *const c_char,
    nerr: *mut c_int,
) -> c_int {
    guard(INTERNAL, || {
        // SAFETY: contract.
        let Some(c) = (unsafe { self::conn(conn) }) else {
            return MISUSE;
        };
        // SAFETY: `msg`, `nerr` are valid for a write (contract).
        unsafe {
            *msg = std::ptr::null();
            *nerr = 0;
        }
        let found = match with_txn!(c, t => inpage::check::check(t, &HashMap::new())) {
            Ok(_) => return OK,
            Err(e @ (Error::Corrupt { .. } | Error::Truncated { .. })) => e.to_string(),
            // A tree this layer cannot order (files of the first landing, see the
            // README) is a finding about the file, not a failure of the check.
            Err(Error::InvalidArgument(m)) if c.txn_open() => m,
            Err(e) => return c.fail(&e),
        };
        c.check_msg =
            CString::new(format!("inpage: {}", found.replace('\0', " "))).unwrap_or_default();
        // SAFETY: as above; the string lives in `c` until the next call.
        unsafe {
            *msg = c.check_msg.as_ptr();
            *nerr = 1;
        }
        OK
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
    guard(4096, || {
        // SAFETY: contract.
        unsafe { self::conn(conn) }.map_or(4096, |c| c.peek().map_or(4096, |(_, ps)| ps as c_int))
    })
}

/// # Safety
/// `conn` as in [`conn`].
#[no_mangle]
pub unsafe extern "C" fn ipg_page_count(conn: *mut Conn) -> u32 {
    guard(0, || {
        // SAFETY: contract.
        unsafe { self::conn(conn) }
            .map_or(0, |c| c.db.as_ref().map_or(0, |d| d.header().page_count))
    })
}

// After `with_txn!`, which it uses (macros are in scope from their definition on).
mod copy;
pub use copy::Backup;
mod vacuum;

#[cfg(test)]
mod tests {
    use super::*;

    /// An in-memory connection in a write transaction with a new rowid table (number 2,
    /// the first after sqlite_schema: trap 5) and two cursors on it.
    ///
    /// # Safety
    /// The caller closes the cursors, then ends and closes the connection.
    unsafe fn two_cursors_on_a_new_table() -> (*mut Conn, *mut Cur, *mut Cur) {
        // SAFETY: out pointers are locals; the connection outlives its cursors (caller).
        unsafe {
            let mut conn: *mut Conn = std::ptr::null_mut();
            assert_eq!(
                ipg_open(
                    std::ptr::null(),
                    1,
                    std::ptr::null(),
                    OPEN_CREATE,
                    &mut conn
                ),
                OK
            );
            assert_eq!(ipg_begin(conn, 1, 0), OK);
            let mut t = 0u32;
            assert_eq!(ipg_create(conn, 1, &mut t), OK);
            assert_eq!(t, 2, "the first table after sqlite_schema (trap 5)");
            let mut run = std::ptr::null_mut();
            let a = ipg_cursor_open(conn, t, std::ptr::null_mut(), 0, &mut run);
            let b = ipg_cursor_open(conn, t, std::ptr::null_mut(), 0, &mut run);
            (conn, a, b)
        }
    }

    /// Trap 6: the pointer handed out by `ipg_payload` stays the same while
    /// `ipg_has_moved` answers 0, also after writes through another cursor; a changed
    /// row reports "moved".
    #[test]
    fn payload_pointer_is_stable_until_the_row_changes() {
        // SAFETY: every pointer passed is live and used as the C side would: one
        // connection, its cursors closed before it.
        unsafe {
            let (conn, a, b) = two_cursors_on_a_new_table();
            for (k, v) in [(1i64, b"row one"), (2, b"row two")] {
                assert_eq!(ipg_insert(a, k, v.as_ptr(), 7, 0), OK);
            }
            let mut res = 9;
            assert_eq!(ipg_seek_int(b, 1, &mut res), OK);
            assert_eq!(res, 0);
            let (mut p1, mut n1, mut t1) = (std::ptr::null(), 0u32, 0u32);
            assert_eq!(ipg_payload(b, &mut p1, &mut n1, &mut t1), OK);
            assert_eq!(std::slice::from_raw_parts(p1, n1 as usize), b"row one");
            assert_eq!(t1, n1, "an inline row is handed out whole");
            // A write elsewhere in the tree: b's row is unchanged, its buffer kept.
            assert_eq!(ipg_insert(a, 2, b"row TWO".as_ptr(), 7, 0), OK);
            assert_eq!(ipg_has_moved(b), 0);
            let (mut p2, mut n2, mut t2) = (std::ptr::null(), 0u32, 0u32);
            assert_eq!(ipg_payload(b, &mut p2, &mut n2, &mut t2), OK);
            assert_eq!(p2, p1, "the buffer OP_Column cached must stay valid");
            // A write to b's row: moved.
            assert_eq!(ipg_insert(a, 1, b"row ONE".as_ptr(), 7, 0), OK);
            assert_eq!(ipg_has_moved(b), 1);
            ipg_cursor_close(a);
            ipg_cursor_close(b);
            assert_eq!(ipg_end(conn, 0, 0), OK);
            ipg_close(conn);
        }
    }

    /// A value past WHOLE_MAX: `ipg_payload` hands out its first PREFIX bytes with the
    /// whole size, `ipg_payload_range` reads any slice of the rest, and a slice past the
    /// end is `CORRUPT` (SQLite checks ranges against the size first, so that means the
    /// row changed under it).
    #[test]
    fn a_large_value_is_handed_out_as_a_prefix_and_read_by_range() {
        // SAFETY: as in the test above; every buffer passed is as long as said.
        unsafe {
            let (conn, a, b) = two_cursors_on_a_new_table();
            let big: Vec<u8> = (0..200_000u32).map(|i| (i % 253) as u8).collect();
            assert_eq!(ipg_insert(a, 7, big.as_ptr(), big.len() as c_int, 0), OK);
            let mut res = 9;
            assert_eq!(ipg_seek_int(b, 7, &mut res), OK);
            assert_eq!(res, 0);
            let (mut p, mut n, mut total) = (std::ptr::null(), 0u32, 0u32);
            assert_eq!(ipg_payload(b, &mut p, &mut n, &mut total), OK);
            assert_eq!((n as u64, total as usize), (PREFIX, big.len()));
            assert_eq!(
                std::slice::from_raw_parts(p, n as usize),
                &big[..n as usize]
            );
            for (at, len) in [
                (0usize, 10usize),
                (4_090, 20),
                (100_000, 9_000),
                (199_990, 10),
            ] {
                let mut buf = vec![0u8; len];
                assert_eq!(
                    ipg_payload_range(b, at as u32, len as u32, buf.as_mut_ptr()),
                    OK
                );
                assert_eq!(buf, &big[at..at + len], "bytes [{at}, {})", at + len);
            }
            let mut buf = [0u8; 11];
            assert_eq!(ipg_payload_range(b, 199_990, 11, buf.as_mut_ptr()), CORRUPT);
            ipg_cursor_close(a);
            ipg_cursor_close(b);
            assert_eq!(ipg_end(conn, 0, 0), OK);
            ipg_close(conn);
        }
    }

    /// An overflow row's payload (copied out of its chain once) keeps its pointer while
    /// the row is unchanged; CursorRestore on a row deleted through another cursor says
    /// "different row" and Next reaches the neighbour; `Savepoint(ROLLBACK, -1)` undoes
    /// everything and keeps the write transaction.
    #[test]
    fn overflow_payload_restore_and_rollback_all() {
        // SAFETY: as in the test above.
        unsafe {
            let (conn, a, b) = two_cursors_on_a_new_table();
            let big: Vec<u8> = (0..20_000u32).map(|i| (i % 251) as u8).collect();
            for k in 1..=3i64 {
                assert_eq!(ipg_insert(a, k, big.as_ptr(), big.len() as c_int, 0), OK);
            }
            let mut res = 9;
            assert_eq!(ipg_seek_int(b, 2, &mut res), OK);
            assert_eq!(res, 0);
            let (mut p1, mut n1, mut t1) = (std::ptr::null(), 0u32, 0u32);
            assert_eq!(ipg_payload(b, &mut p1, &mut n1, &mut t1), OK);
            assert_eq!(std::slice::from_raw_parts(p1, n1 as usize), &big[..]);
            assert_eq!(t1, n1, "a value up to WHOLE_MAX is handed out whole");
            let (mut p2, mut n2, mut t2) = (std::ptr::null(), 0u32, 0u32);
            assert_eq!(ipg_payload(b, &mut p2, &mut n2, &mut t2), OK);
            assert_eq!((p2, n2, t2), (p1, n1, t1), "one copy per position");
            // b's row goes through a: moved, restore says so, Next reaches row 3.
            assert_eq!(ipg_seek_int(a, 2, &mut res), OK);
            assert_eq!(ipg_delete(a, 0), OK);
            assert_eq!(ipg_has_moved(b), 1);
            let mut different = 9;
            assert_eq!(ipg_restore(b, &mut different), OK);
            assert_eq!(different, 1);
            assert_eq!(ipg_step(b, 1), OK);
            assert_eq!(ipg_intkey(b), 3);
            let mut different = 9;
            assert_eq!(ipg_restore(b, &mut different), OK);
            assert_eq!(different, 0);
            // Whole-transaction rollback, transaction kept.
            assert_eq!(ipg_sp(conn, 2, -1), OK);
            assert_eq!(ipg_txn_state(conn), 2);
            let mut n = -1i64;
            assert_eq!(ipg_table_count(conn, 2, &mut n), OK);
            assert_eq!(
                n, 0,
                "the table's rows and the table itself are rolled back"
            );
            ipg_cursor_close(a);
            ipg_cursor_close(b);
            assert_eq!(ipg_end(conn, 0, 0), OK);
            ipg_close(conn);
        }
    }

    #[test]
    fn mode_codes_match_the_patched_pragma_names() {
        // SQLite's codes keep their meaning; every registry mode has one name and code.
        for (code, name) in SQLITE_MODE_NAMES.iter().enumerate() {
            let got = ipg_journal_mode_name(code as c_int);
            // SAFETY: a non-null answer is a NUL-terminated static string.
            assert_eq!(unsafe { CStr::from_ptr(got) }.to_str().unwrap(), *name);
        }
        for m in JournalMode::all() {
            let got = ipg_journal_mode_name(mode_code(m));
            assert!(!got.is_null(), "{}", m.name());
            // SAFETY: as above.
            assert_eq!(unsafe { CStr::from_ptr(got) }.to_str().unwrap(), m.name());
            assert!((mode_code(m) as usize) < MAX_MODE_CODES);
        }
        // Past the end: NULL, which ends pragma.c's name loop.
        let n = pragma_mode_names().len() as c_int;
        assert!(ipg_journal_mode_name(n).is_null());
        assert!(ipg_journal_mode_name(-1).is_null());
        // `dhl-cc` comes right after SQLite's six: `dhl` picks it as a prefix.
        assert_eq!(
            mode_code(JournalMode::DHL_CC),
            SQLITE_MODE_NAMES.len() as c_int
        );
    }
}
