//! A SQLite VFS that stops inside a commit, so the recovery bench can kill SQLite at the
//! same point it kills the engine: part of the commit's writes reached the OS, the rest
//! never will. (The commit hook, the only safe stop point rusqlite offers, runs before
//! SQLite writes anything of the transaction, which leaves SQLite nothing to recover.)
//!
//! Invariants, and why they hold:
//! - *It changes no byte SQLite writes or reads.* The VFS is the default one (`unix`)
//!   with a different name, size and `xOpen`. Each file it opens is a real `unix` file
//!   opened into our memory by the real `xOpen`; only its method table is swapped for a
//!   copy whose `xWrite` counts, then calls the original `xWrite` with the same
//!   arguments. Every other method is the original function on the original struct.
//! - *Exactly `n - 1` armed writes reach the OS before a stop at write `n`.* The count
//!   is taken before the real write, and the stop action never returns (the child blocks
//!   until it is killed).
//! - *Write counts are per process.* One counter for all connections: the bench opens
//!   one connection per process through this VFS.
//!
//! All `unsafe` here is FFI with SQLite's C VFS interface; each block says why it holds.

use std::ffi::{c_int, c_void, CStr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use rusqlite::ffi;

/// The name connections pass to `open_with_flags_and_vfs`.
pub const VFS_NAME: &str = "inpage-stop";
const VFS_NAME_C: &CStr = c"inpage-stop";

static ARMED: AtomicBool = AtomicBool::new(false);
static WRITES: AtomicU64 = AtomicU64::new(0);
/// Stop at this armed write (1-based); 0 = only count.
static STOP_AT: AtomicU64 = AtomicU64::new(0);
static ON_STOP: OnceLock<fn() -> !> = OnceLock::new();

/// Bytes of the real `unix` file struct, rounded up so the trailing method-table pointer
/// is aligned.
static INNER_SIZE: OnceLock<usize> = OnceLock::new();

/// The swapped method tables, one per original table (the unix VFS has a few: posix,
/// nolock, ...). Boxed and never freed, so the pointers SQLite holds stay valid.
struct Tables(Vec<(usize, Box<ffi::sqlite3_io_methods>)>);
static TABLES: Mutex<Tables> = Mutex::new(Tables(Vec::new()));

/// Register the VFS (once per process); `on_stop` runs at the stop write and never
/// returns. Errors if SQLite has no default VFS or refuses the registration.
pub fn register(on_stop: fn() -> !) -> Result<(), String> {
    let _ = ON_STOP.set(on_stop);
    static DONE: OnceLock<Result<(), String>> = OnceLock::new();
    DONE.get_or_init(|| {
        // SAFETY: sqlite3_vfs_find(NULL) returns the default VFS, which SQLite keeps alive
        // for the life of the process (built-in VFSes are static), or NULL.
        let real = unsafe { ffi::sqlite3_vfs_find(std::ptr::null()) };
        if real.is_null() {
            return Err("SQLite has no default VFS".into());
        }
        // SAFETY: `real` is a valid, live sqlite3_vfs (checked non-null above).
        let mut ours: ffi::sqlite3_vfs = unsafe { *real };
        let inner = (ours.szOsFile as usize).next_multiple_of(std::mem::align_of::<usize>());
        let _ = INNER_SIZE.set(inner);
        ours.szOsFile = (inner + std::mem::size_of::<usize>()) as c_int;
        ours.zName = VFS_NAME_C.as_ptr();
        ours.pNext = std::ptr::null_mut();
        // `pAppData` stays the real VFS's: the copied functions other than xOpen are the
        // real ones and may read it. xOpen needs the real VFS itself, kept here.
        REAL.set(real as usize).ok();
        ours.xOpen = Some(stop_open);
        let ours = Box::leak(Box::new(ours));
        // SAFETY: `ours` is leaked, so it outlives every connection; every function in it
        // is the real VFS's (which ignore their VFS argument beyond `pAppData`/sizes,
        // both copied) or `stop_open`, which passes the real VFS on.
        let rc = unsafe { ffi::sqlite3_vfs_register(ours, 0) };
        match rc {
            ffi::SQLITE_OK => Ok(()),
            rc => Err(format!("sqlite3_vfs_register failed: {rc}")),
        }
    })
    .clone()
}

static REAL: OnceLock<usize> = OnceLock::new();

/// Start counting (and, with `stop_at > 0`, stopping at that write) from zero.
pub fn arm(stop_at: u64) {
    WRITES.store(0, Ordering::SeqCst);
    STOP_AT.store(stop_at, Ordering::SeqCst);
    ARMED.store(true, Ordering::SeqCst);
}

/// Stop counting; returns the writes counted since `arm`.
pub fn disarm() -> u64 {
    ARMED.store(false, Ordering::SeqCst);
    WRITES.load(Ordering::SeqCst)
}

/// The method-table pointer stored after the real file struct.
///
/// SAFETY (for callers): `f` must be a file this VFS allocated (`szOsFile` bytes).
unsafe fn trailer(f: *mut ffi::sqlite3_file) -> *mut *const ffi::sqlite3_io_methods {
    let inner = *INNER_SIZE.get().expect("registered before any open");
    // SAFETY: SQLite allocated `szOsFile = inner + size_of::<usize>()` bytes at `f`
    // (aligned for pointers, as it is for the real struct), so the trailer is in bounds
    // and aligned (`inner` is a multiple of the pointer alignment).
    unsafe { (f as *mut u8).add(inner) as *mut *const ffi::sqlite3_io_methods }
}

unsafe extern "C" fn stop_open(
    _vfs: *mut ffi::sqlite3_vfs,
    name: ffi::sqlite3_filename,
    f: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    let real = *REAL.get().expect("registered") as *mut ffi::sqlite3_vfs;
    // SAFETY: `real` is the live default VFS; `f` has room for its file struct (our
    // szOsFile is larger); the other arguments are SQLite's own, passed through.
    let rc = unsafe { ((*real).xOpen.expect("a VFS has xOpen"))(real, name, f, flags, out_flags) };
    // SAFETY: after xOpen, `f` holds a real file whose pMethods is NULL or a live static
    // table of the real VFS.
    let orig = unsafe { (*f).pMethods };
    if orig.is_null() {
        return rc;
    }
    // SAFETY: `f` was allocated by SQLite with our szOsFile.
    unsafe { *trailer(f) = orig };
    let mut tables = TABLES.lock().unwrap_or_else(|p| p.into_inner());
    let swapped: *const ffi::sqlite3_io_methods =
        match tables.0.iter().find(|t| t.0 == orig as usize) {
            Some((_, t)) => &**t,
            None => {
                // SAFETY: `orig` is a live static table (see above).
                let mut copy = unsafe { *orig };
                copy.xWrite = Some(stop_write);
                tables.0.push((orig as usize, Box::new(copy)));
                &*tables.0.last().expect("just pushed").1
            }
        };
    // SAFETY: the swapped table is boxed and never freed; it differs from the original
    // only in xWrite, which forwards to the original.
    unsafe { (*f).pMethods = swapped };
    rc
}

unsafe extern "C" fn stop_write(
    f: *mut ffi::sqlite3_file,
    buf: *const c_void,
    amt: c_int,
    off: ffi::sqlite3_int64,
) -> c_int {
    if ARMED.load(Ordering::SeqCst) {
        let n = WRITES.fetch_add(1, Ordering::SeqCst) + 1;
        if n == STOP_AT.load(Ordering::SeqCst) {
            (ON_STOP.get().expect("set at register"))();
        }
    }
    // SAFETY: `f` was opened by `stop_open`, which stored the original table in the
    // trailer; the original xWrite gets SQLite's own arguments unchanged.
    unsafe {
        let orig = *trailer(f);
        ((*orig).xWrite.expect("a file has xWrite"))(f, buf, amt, off)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn never() -> ! {
        panic!("the counting test must not stop")
    }

    #[test]
    fn counts_a_commits_writes_and_changes_nothing_else() {
        register(never).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let flags =
            rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE | rusqlite::OpenFlags::SQLITE_OPEN_CREATE;
        let c = rusqlite::Connection::open_with_flags_and_vfs(&path, flags, VFS_NAME).unwrap();
        let mode: String = c
            .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
        c.execute_batch("CREATE TABLE t(a INTEGER PRIMARY KEY, b TEXT)")
            .unwrap();
        arm(0);
        c.execute_batch(
            "BEGIN; INSERT INTO t VALUES(1, 'x'); INSERT INTO t VALUES(2, 'y'); COMMIT;",
        )
        .unwrap();
        let n = disarm();
        // One leaf page changed: a WAL frame is written as its header and its page.
        assert!(n >= 2, "a WAL commit writes its frames: counted {n}");
        drop(c);
        // The file reads back through the default VFS.
        let c = rusqlite::Connection::open(&path).unwrap();
        let k: i64 = c
            .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .unwrap();
        assert_eq!(k, 2);
    }
}
