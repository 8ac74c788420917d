//! Crash staging for the recovery benchmark: a child process starts an insert
//! transaction, stops at a chosen point, tells the parent on stdout, and is SIGKILLed.
//!
//! Where each contender stops (a real process crash; the page cache survives, which is
//! what a crash of an app, not of the phone, leaves behind):
//! - Engine: inside the commit's page writes. The child's files go through `StopVfs`,
//!   which, once armed just before `commit`, counts `write_at`/`allocate` calls and at
//!   call number N (1-based) signals and blocks, so exactly N-1 commit writes reached the
//!   OS. N defaults to the write during which half the commit's bytes have been passed
//!   to the OS, measured by a calibration commit of the same transaction on a copy of
//!   the same files (for page-sized writes: half the writes). A stop write carrying
//!   several pages (the engine WAL appends a commit's frames in one call) first passes
//!   its leading whole pages up to that half-way byte to the OS, so the child dies in
//!   the middle of the call rather than before it: otherwise a WAL commit of any size
//!   would stop before its first frame and leave recovery nothing to discard.
//! - SQLite: inside the same transaction's writes, the way the engine stops. The child's
//!   connection runs through `sqlite_stop`, a VFS that is the default one except that it
//!   counts `xWrite` calls once armed (just before the transaction) and at call N signals
//!   and blocks; N defaults to half the transaction's writes, counted the same way on a
//!   copy. In WAL mode the WAL then holds part of the transaction's frames and no commit
//!   frame; in rollback modes the journal is hot or the database half written. (Until
//!   issue 12's follow-up the child stopped in the commit hook, which SQLite calls before
//!   it writes anything of the transaction, so its recovery had nothing to undo.)
//! - redb, LMDB: after the inserts, before commit (neither writes pages of an
//!   uncommitted transaction on its own at these sizes).
//!
//! Before the interrupted insert the child may commit `pre_updates` one-row updates
//! (`--updates-before-crash`), spread over the table, so the crash leaves what an app in
//! steady use leaves: a WAL holding committed, not yet checkpointed frames that recovery
//! must read (with none, SQLite's WAL is empty at its stop point).
//!
//! Invariants: the stop line is the only thing the child prints on stdout; the parent
//! never trusts a child that exits on its own (that means the stop point was never
//! reached) and always kills and reaps it, also on error paths (`ChildGuard`).

use std::fmt;
use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use inpage::vfs::{File, OpenOptions, OsVfs, Vfs};

use crate::contender::{self, EngineStore, Kind, SqliteStore, Store};
use crate::lab::check_interrupted;
use crate::sqlite_stop;
use crate::workload::{mobibench_value, update_value, Op};

/// What the child prints when it has stopped.
pub const STOP_LINE: &str = "INPAGE-BENCH-STOPPED";

/// Called at the stop write with its number; returns the error the write fails with
/// (tests) or never returns (the child).
pub type OnStop = Box<dyn Fn(u64) -> io::Error + Send + Sync>;

/// When to stop, shared by a `StopVfs` and its files.
pub struct StopPlan {
    armed: AtomicBool,
    writes: AtomicU64,
    stop_at: Option<u64>,
    /// Bytes of the stop write that reach the file before the stop (see `torn_prefix`).
    keep: AtomicU64,
    /// Bytes each armed write carried (allocations carry none of the transaction's).
    sizes: std::sync::Mutex<Vec<u64>>,
    on_stop: OnStop,
}

/// The unit a torn stop write keeps whole: the bench's page size.
const TEAR_UNIT: u64 = 4096;

/// Of a stop write of `len` bytes, the leading bytes that reach the file: at most `keep`,
/// rounded down to whole pages (none for a write of one page or less).
pub fn torn_prefix(len: u64, keep: u64) -> u64 {
    if len <= TEAR_UNIT {
        return 0;
    }
    keep.min(len - 1) / TEAR_UNIT * TEAR_UNIT
}

/// The default stop point of a commit whose armed writes carried `sizes` bytes: the
/// write (1-based) during which half of all bytes have been passed on, and how many of
/// its own bytes that takes. `None` for a commit that wrote nothing.
pub fn half_bytes(sizes: &[u64]) -> Option<(u64, u64)> {
    let total: u64 = sizes.iter().sum();
    if sizes.is_empty() {
        return None;
    }
    if total == 0 {
        return Some((sizes.len().div_ceil(2) as u64, 0));
    }
    let mut before = 0u64;
    for (i, &n) in sizes.iter().enumerate() {
        if (before + n) * 2 >= total {
            return Some((i as u64 + 1, total.div_ceil(2).saturating_sub(before)));
        }
        before += n;
    }
    None
}

impl fmt::Debug for StopPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StopPlan")
            .field("armed", &self.armed)
            .field("writes", &self.writes)
            .field("stop_at", &self.stop_at)
            .finish()
    }
}

impl StopPlan {
    /// Stop at write number `stop_at` (1-based) after arming; `None` only counts.
    pub fn new(stop_at: Option<u64>, on_stop: OnStop) -> Arc<StopPlan> {
        Arc::new(StopPlan {
            armed: AtomicBool::new(false),
            writes: AtomicU64::new(0),
            stop_at,
            keep: AtomicU64::new(0),
            sizes: std::sync::Mutex::new(Vec::new()),
            on_stop,
        })
    }
    /// Let the leading whole pages, up to `bytes`, of a multi-page stop write reach the
    /// file before the stop.
    pub fn keep_of_stop_write(&self, bytes: u64) {
        self.keep.store(bytes, Ordering::SeqCst);
    }
    /// The bytes each write since `arm` carried.
    pub fn sizes(&self) -> Vec<u64> {
        self.sizes.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
    /// Start counting (from zero).
    pub fn arm(&self) {
        self.writes.store(0, Ordering::SeqCst);
        self.sizes.lock().unwrap_or_else(|e| e.into_inner()).clear();
        self.armed.store(true, Ordering::SeqCst);
    }
    /// Writes counted since `arm`.
    pub fn writes(&self) -> u64 {
        self.writes.load(Ordering::SeqCst)
    }
    /// Count a write of `len` bytes; `Err(n)` if it is the stop write, number `n`.
    fn before_write(&self, len: u64) -> Result<(), u64> {
        if !self.armed.load(Ordering::SeqCst) {
            return Ok(());
        }
        let n = self.writes.fetch_add(1, Ordering::SeqCst) + 1;
        if self.stop_at == Some(n) {
            return Err(n);
        }
        if self.stop_at.is_none() {
            self.sizes
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(len);
        }
        Ok(())
    }
}

/// A `Vfs` that stops at a chosen write (see module docs).
#[derive(Debug)]
pub struct StopVfs {
    inner: Arc<dyn Vfs>,
    plan: Arc<StopPlan>,
}

impl StopVfs {
    pub fn new(inner: Arc<dyn Vfs>, plan: Arc<StopPlan>) -> StopVfs {
        StopVfs { inner, plan }
    }
}

impl Vfs for StopVfs {
    fn open(&self, path: &Path, opts: OpenOptions) -> io::Result<Arc<dyn File>> {
        Ok(Arc::new(StopFile {
            inner: self.inner.open(path, opts)?,
            plan: self.plan.clone(),
        }))
    }
    fn delete(&self, path: &Path) -> io::Result<()> {
        self.inner.delete(path)
    }
    fn exists(&self, path: &Path) -> io::Result<bool> {
        self.inner.exists(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.inner.rename(from, to)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.inner.sync_dir(dir)
    }
    fn open_read_only(&self, path: &Path) -> io::Result<Arc<dyn File>> {
        self.inner.open_read_only(path)
    }
    fn nonce(&self, salt: u64) -> u64 {
        self.inner.nonce(salt)
    }
    fn in_process_memory(&self) -> bool {
        self.inner.in_process_memory()
    }
    fn handles_take_turns(&self) -> bool {
        self.inner.handles_take_turns()
    }
    // A memory region is not file I/O: nothing to count or stop; the mode that keeps
    // commits there (`nvlog`) has no write to stop its commit at (`Contender::crash_na`).
    fn open_region(
        &self,
        path: &Path,
        create: Option<usize>,
    ) -> io::Result<Arc<dyn inpage::vfs::Region>> {
        self.inner.open_region(path, create)
    }
    fn delete_region(&self, path: &Path) -> io::Result<()> {
        self.inner.delete_region(path)
    }
}

#[derive(Debug)]
struct StopFile {
    inner: Arc<dyn File>,
    plan: Arc<StopPlan>,
}

impl File for StopFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        if let Err(n) = self.plan.before_write(buf.len() as u64) {
            let keep = torn_prefix(buf.len() as u64, self.plan.keep.load(Ordering::SeqCst));
            if keep > 0 {
                self.inner.write_at(&buf[..keep as usize], offset)?;
            }
            return Err((self.plan.on_stop)(n));
        }
        self.inner.write_at(buf, offset)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.inner.sync_data()
    }
    fn sync_all(&self) -> io::Result<()> {
        self.inner.sync_all()
    }
    fn len(&self) -> io::Result<u64> {
        self.inner.len()
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.inner.set_len(len)
    }
    fn allocate(&self, offset: u64, len: u64) -> io::Result<()> {
        // Zero-filled growth carries none of the transaction's bytes.
        if let Err(n) = self.plan.before_write(0) {
            return Err((self.plan.on_stop)(n));
        }
        self.inner.allocate(offset, len)
    }
    fn lock_range(
        &self,
        start: u64,
        len: u64,
        kind: Option<inpage::vfs::LockKind>,
    ) -> io::Result<bool> {
        self.inner.lock_range(start, len, kind)
    }
    fn prefetch(&self, offset: u64, len: u64) {
        self.inner.prefetch(offset, len)
    }
    fn direct_alignment(&self) -> Option<usize> {
        self.inner.direct_alignment()
    }
}

/// Tell the parent we stopped, then wait to be killed.
fn signal_and_block() -> ! {
    let mut out = io::stdout().lock();
    let _ = writeln!(out, "{STOP_LINE}");
    let _ = out.flush();
    drop(out);
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

/// Arguments of the hidden child command.
#[derive(Clone, Debug)]
pub struct ChildSpec {
    pub contender: String,
    pub dir: PathBuf,
    pub first_key: i64,
    pub records: u32,
    pub value_size: usize,
    /// Engine only: the commit write to stop at (1-based).
    pub stop_at_write: u64,
    /// Engine only: bytes of a multi-page stop write that reach the file first.
    pub stop_keep: u64,
    /// Committed one-row updates before the interrupted insert (see module docs).
    pub pre_updates: u32,
    /// Rows 1..=table_records exist; the updates pick theirs from them.
    pub table_records: u64,
    /// Distinguishes this child's update values from every earlier child's, so no update
    /// rewrites a value the row already holds (stores skip those).
    pub update_seed: u64,
}

impl ChildSpec {
    /// argv after `bench recovery-child`.
    pub fn to_args(&self) -> Vec<String> {
        vec![
            "--contender".into(),
            self.contender.clone(),
            "--dir".into(),
            self.dir.to_string_lossy().into_owned(),
            "--first-key".into(),
            self.first_key.to_string(),
            "--records".into(),
            self.records.to_string(),
            "--value-size".into(),
            self.value_size.to_string(),
            "--stop-at-write".into(),
            self.stop_at_write.to_string(),
            "--stop-keep".into(),
            self.stop_keep.to_string(),
            "--pre-updates".into(),
            self.pre_updates.to_string(),
            "--table-records".into(),
            self.table_records.to_string(),
            "--update-seed".into(),
            self.update_seed.to_string(),
        ]
    }

    fn pre_update_txns(&self) -> Vec<(i64, Vec<u8>)> {
        pre_updates(
            self.pre_updates,
            self.table_records,
            self.update_seed,
            self.value_size,
        )
    }

    fn keys(&self) -> Vec<i64> {
        (self.first_key..self.first_key + i64::from(self.records)).collect()
    }
}

/// `count` one-row updates over rows 1..=`table_records`, spread by a stride coprime
/// with nothing in particular (a prime) so they touch many leaves, each with a value that
/// carries `seed` and its index.
pub fn pre_updates(
    count: u32,
    table_records: u64,
    seed: u64,
    value_size: usize,
) -> Vec<(i64, Vec<u8>)> {
    let n = table_records.max(1);
    (0..u64::from(count))
        .map(|i| {
            let key = 1 + (i * 7919) % n;
            let v = update_value(value_size, seed * u64::from(count) + i);
            (key as i64, v)
        })
        .collect()
}

fn apply_pre_updates(st: &mut dyn Store, ups: &[(i64, Vec<u8>)]) -> Result<(), String> {
    for (k, v) in ups {
        st.txn(Op::Update, &[*k], v)?;
    }
    Ok(())
}

/// The child's body. Returns only on failure (the success path blocks until killed).
pub fn child_main(spec: &ChildSpec) -> Result<(), String> {
    let c = contender::select(std::slice::from_ref(&spec.contender))?.remove(0);
    #[cfg(feature = "test-contenders")]
    if c.name == contender::BROKEN_CRASH {
        return Err(format!(
            "{}: planted failure: this test contender's crash child never reaches its stop \
             point",
            c.name
        ));
    }
    let keys = spec.keys();
    let v = mobibench_value(spec.value_size, false);
    let ups = spec.pre_update_txns();
    match c.kind {
        Kind::Engine { mode, tweak } => {
            let plan = StopPlan::new(Some(spec.stop_at_write), Box::new(|_| signal_and_block()));
            plan.keep_of_stop_write(spec.stop_keep);
            let vfs = Arc::new(StopVfs::new(Arc::new(OsVfs::new()), plan.clone()));
            let mut store = EngineStore::open(&spec.dir, mode, tweak, vfs)?;
            apply_pre_updates(&mut store, &ups)?;
            let w = store.begin_insert(&keys, &v)?;
            plan.arm();
            let r = w.commit();
            Err(format!(
                "{}: commit ended ({r:?}) after {} writes, before stop write #{}",
                c.name,
                plan.writes(),
                spec.stop_at_write
            ))
        }
        Kind::Sqlite(f) => {
            if spec.stop_at_write == 0 {
                return Err(format!("{}: no stop write given", c.name));
            }
            sqlite_stop::register(signal_and_block)?;
            let mut store = SqliteStore::open_with_vfs(&spec.dir, f, Some(sqlite_stop::VFS_NAME))?;
            apply_pre_updates(&mut store, &ups)?;
            sqlite_stop::arm(spec.stop_at_write);
            let r = store.txn(Op::Insert, &keys, &v);
            Err(format!(
                "{}: commit ended ({r:?}) after {} writes, before stop write #{}",
                c.name,
                sqlite_stop::disarm(),
                spec.stop_at_write
            ))
        }
        Kind::Redb | Kind::Lmdb => {
            let mut store = c.open(&spec.dir, &Arc::new(inpage::vfs::IoStats::new()))?;
            apply_pre_updates(store.as_mut(), &ups)?;
            store.stage_crash(&keys, &v, &|| signal_and_block())?;
            Err(format!("{}: stop point returned", c.name))
        }
        Kind::Floor => Err("the floor has no transaction to interrupt".into()),
        Kind::Sql(_) => Err(format!(
            "{}: the SQL contenders have no crash child (not recoverable)",
            c.name
        )),
    }
}

/// Kills and reaps the child on every path out of `crash_child`.
struct ChildGuard(Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Run `exe bench recovery-child <spec>` until it reports its stop point, then SIGKILL
/// it. Errors if it exits on its own, prints anything else, or takes longer than
/// `timeout`.
pub fn crash_child(exe: &Path, spec: &ChildSpec, timeout: Duration) -> Result<(), String> {
    let child = Command::new(exe)
        .arg("bench")
        .arg("recovery-child")
        .args(spec.to_args())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("spawning {}: {e}", exe.display()))?;
    let mut guard = ChildGuard(child);
    let stdout = guard.0.stdout.take().ok_or("child has no stdout")?;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let start = Instant::now();
    let mut other = Vec::new();
    loop {
        check_interrupted()?;
        match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(Ok(l)) if l.trim() == STOP_LINE => break,
            Ok(Ok(l)) => other.push(l),
            Ok(Err(e)) => return Err(format!("reading child output: {e}")),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if start.elapsed() > timeout {
                    return Err(format!(
                        "{}: child did not reach its stop point within {timeout:?}",
                        spec.contender
                    ));
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let st = guard.0.wait().map_err(|e| e.to_string())?;
                return Err(format!(
                    "{}: child exited ({st}) without reaching its stop point {}",
                    spec.contender,
                    other.join(" | ")
                ));
            }
        }
    }
    // SIGKILL: no atexit, no destructors, no final checkpoint.
    guard.0.kill().map_err(|e| format!("killing child: {e}"))?;
    guard.0.wait().map_err(|e| format!("reaping child: {e}"))?;
    Ok(())
}

/// The writes the transaction inserting `keys` does on a copy of `dir`, after the same
/// committed updates the child will do (the calibration for the default stop point): the
/// bytes of each of the engine's commit writes (`StopVfs`), or SQLite's `xWrite` calls
/// of its statements and commit (`sqlite_stop`), each counted as 1.
pub fn calibrate_writes(
    c: &contender::Contender,
    dir: &Path,
    scratch: &Path,
    keys: &[i64],
    value: &[u8],
    ups: &[(i64, Vec<u8>)],
) -> Result<Vec<u64>, String> {
    fn unexpected_stop() -> ! {
        panic!("the calibration counts writes and never stops")
    }
    if !matches!(c.kind, Kind::Engine { .. } | Kind::Sqlite(_)) {
        return Err(format!(
            "{}: no write calibration for this contender",
            c.name
        ));
    }
    copy_dir(dir, scratch)?;
    // From a clean open, as every crash trial's child (`runner::open_trial`).
    c.open(scratch, &Arc::new(inpage::vfs::IoStats::new()))?
        .close()?;
    let n = match c.kind {
        Kind::Engine { mode, tweak } => {
            let plan = StopPlan::new(None, Box::new(|_| io::Error::other("unreachable")));
            let vfs = Arc::new(StopVfs::new(Arc::new(OsVfs::new()), plan.clone()));
            let mut store = EngineStore::open(scratch, mode, tweak, vfs)?;
            apply_pre_updates(&mut store, ups)?;
            let w = store.begin_insert(keys, value)?;
            plan.arm();
            w.commit().map_err(|e| e.to_string())?;
            plan.sizes()
        }
        Kind::Sqlite(flavor) => {
            sqlite_stop::register(unexpected_stop)?;
            let mut store =
                SqliteStore::open_with_vfs(scratch, flavor, Some(sqlite_stop::VFS_NAME))?;
            apply_pre_updates(&mut store, ups)?;
            sqlite_stop::arm(0);
            let r = store.txn(Op::Insert, keys, value);
            let n = sqlite_stop::disarm();
            r?;
            vec![1; n as usize]
        }
        _ => unreachable!("checked above"),
    };
    std::fs::remove_dir_all(scratch).map_err(|e| format!("{}: {e}", scratch.display()))?;
    Ok(n)
}

pub fn copy_dir(from: &Path, to: &Path) -> Result<(), String> {
    let err = |p: &Path, e: io::Error| format!("{}: {e}", p.display());
    std::fs::create_dir_all(to).map_err(|e| err(to, e))?;
    for ent in std::fs::read_dir(from).map_err(|e| err(from, e))? {
        let ent = ent.map_err(|e| err(from, e))?;
        if ent.file_type().map_err(|e| err(from, e))?.is_file() {
            std::fs::copy(ent.path(), to.join(ent.file_name())).map_err(|e| err(&ent.path(), e))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_vfs_stops_at_the_chosen_write() {
        let dir = tempfile::tempdir().unwrap();
        let hit = Arc::new(AtomicU64::new(0));
        let h = hit.clone();
        let plan = StopPlan::new(
            Some(3),
            Box::new(move |n| {
                h.store(n, Ordering::SeqCst);
                io::Error::other("stopped")
            }),
        );
        let vfs = StopVfs::new(Arc::new(OsVfs::new()), plan.clone());
        let f = vfs
            .open(&dir.path().join("f"), OpenOptions::CREATE)
            .unwrap();
        // Not armed: nothing counts.
        for i in 0..5u64 {
            f.write_at(&[1], i).unwrap();
        }
        assert_eq!(plan.writes(), 0);
        plan.arm();
        f.write_at(&[2], 0).unwrap();
        f.allocate(4096, 4096).unwrap();
        let e = f.write_at(&[2], 1).unwrap_err();
        assert_eq!(e.to_string(), "stopped");
        assert_eq!(hit.load(Ordering::SeqCst), 3);
        let mut b = [0u8; 2];
        f.read_exact_at(&mut b, 0).unwrap();
        assert_eq!(b, [2, 1], "the stop write never reached the file");
        // Past the stop point writes go through again (the child never gets there).
        f.write_at(&[3], 1).unwrap();
    }

    /// Real files whose handles take no lock: a store "killed" by `mem::forget` in a test
    /// must not keep its lock, as a killed process does not.
    #[derive(Debug)]
    struct NoLockVfs(OsVfs);
    #[derive(Debug)]
    struct NoLockFile(Arc<dyn File>);

    impl Vfs for NoLockVfs {
        fn open(&self, path: &Path, opts: OpenOptions) -> io::Result<Arc<dyn File>> {
            Ok(Arc::new(NoLockFile(self.0.open(path, opts)?)))
        }
        fn delete(&self, path: &Path) -> io::Result<()> {
            self.0.delete(path)
        }
        fn exists(&self, path: &Path) -> io::Result<bool> {
            self.0.exists(path)
        }
        fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
            self.0.rename(from, to)
        }
        fn sync_dir(&self, dir: &Path) -> io::Result<()> {
            self.0.sync_dir(dir)
        }
    }

    impl File for NoLockFile {
        fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
            self.0.read_at(buf, offset)
        }
        fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
            self.0.write_at(buf, offset)
        }
        fn sync_data(&self) -> io::Result<()> {
            self.0.sync_data()
        }
        fn sync_all(&self) -> io::Result<()> {
            self.0.sync_all()
        }
        fn len(&self) -> io::Result<u64> {
            self.0.len()
        }
        fn set_len(&self, len: u64) -> io::Result<()> {
            self.0.set_len(len)
        }
        fn allocate(&self, offset: u64, len: u64) -> io::Result<()> {
            self.0.allocate(offset, len)
        }
    }

    /// A multi-page stop write passes its leading whole pages up to the kept bytes.
    #[test]
    fn a_multi_page_stop_write_is_torn_at_a_page() {
        let dir = tempfile::tempdir().unwrap();
        let plan = StopPlan::new(Some(2), Box::new(|_| io::Error::other("stopped")));
        plan.keep_of_stop_write(3 * 4096 + 100);
        let vfs = StopVfs::new(Arc::new(OsVfs::new()), plan.clone());
        let f = vfs
            .open(&dir.path().join("f"), OpenOptions::CREATE)
            .unwrap();
        plan.arm();
        f.write_at(&[9; 32], 0).unwrap();
        assert!(f.write_at(&[7; 5 * 4096], 32).is_err());
        assert_eq!(f.len().unwrap(), 32 + 3 * 4096, "three whole pages of five");
        assert_eq!(torn_prefix(4096, 4096), 0, "a one-page write is never torn");
        assert_eq!(
            torn_prefix(2 * 4096, 10 * 4096),
            4096,
            "never the whole write"
        );
    }

    /// The engine WAL appends a commit's frames in one call. Stopped at the calibrated
    /// point, the log holds about half of them (before the tear it held none: the stop
    /// fell on the header or before the frames), and recovery drops them all.
    #[test]
    fn a_wal_commit_stopped_half_way_leaves_frames_recovery_discards() {
        let dir = tempfile::tempdir().unwrap();
        let scratch = tempfile::tempdir().unwrap();
        let c = contender::select(&["wal".into()]).unwrap().remove(0);
        let Kind::Engine { mode, tweak } = c.kind else {
            panic!("wal is an engine contender")
        };
        let v = mobibench_value(128, false);
        let table: Vec<i64> = (1..=300).collect();
        let mut st = EngineStore::open(dir.path(), mode, tweak, Arc::new(OsVfs::new())).unwrap();
        st.preload(&table, &v).unwrap();
        Box::new(st).close().unwrap();
        let keys: Vec<i64> = (301..=1300).collect();
        let sizes =
            calibrate_writes(&c, dir.path(), &scratch.path().join("c"), &keys, &v, &[]).unwrap();
        let (n, keep) = half_bytes(&sizes).unwrap();
        let frames_call = sizes[n as usize - 1];
        assert!(
            frames_call > 20 * 4096,
            "one call carries the frames: {sizes:?}"
        );
        let plan = StopPlan::new(Some(n), Box::new(|_| io::Error::other("stopped")));
        plan.keep_of_stop_write(keep);
        // The killed process's lock dies with it; this one's would outlive the forget
        // below, so the stopped store takes none.
        let vfs = Arc::new(StopVfs::new(
            Arc::new(NoLockVfs(OsVfs::new())),
            plan.clone(),
        ));
        let st = EngineStore::open(dir.path(), mode, tweak, vfs).unwrap();
        let w = st.begin_insert(&keys, &v).unwrap();
        plan.arm();
        assert!(w.commit().is_err(), "the commit stops");
        // A killed process runs no destructor (a close would checkpoint and delete the log).
        std::mem::forget(st);
        let wal = std::fs::metadata(dir.path().join("test.db-wal"))
            .unwrap()
            .len();
        let written = torn_prefix(frames_call, keep);
        assert!(
            written >= frames_call / 2 - 4096,
            "{written} of {frames_call}"
        );
        assert!(
            wal >= written,
            "the log holds the torn prefix: {wal} < {written}"
        );
        let mut st = EngineStore::open(dir.path(), mode, tweak, Arc::new(OsVfs::new())).unwrap();
        assert!(st.get(300).unwrap(), "committed rows survive");
        assert!(!st.get(301).unwrap(), "the interrupted insert is gone");
        Box::new(st).close().unwrap();
    }

    #[test]
    fn half_bytes_picks_the_write_at_the_middle_byte() {
        // Page-sized writes: half the writes, as counting calls did.
        assert_eq!(half_bytes(&[4096; 4]), Some((2, 4096)));
        assert_eq!(half_bytes(&[1; 3]), Some((2, 1)));
        // A WAL commit: a 32-byte header, then every frame in one call.
        let frames = 100 * 4120;
        let (n, keep) = half_bytes(&[32, frames]).unwrap();
        assert_eq!(n, 2);
        assert_eq!(keep, (32 + frames).div_ceil(2) - 32);
        assert_eq!(torn_prefix(frames, keep) / 4096, 50);
        // Allocations carry no bytes and are never chosen when data follows.
        assert_eq!(half_bytes(&[0, 4096, 0, 4096]), Some((2, 4096)));
        assert_eq!(half_bytes(&[]), None);
    }

    #[test]
    fn pre_updates_stay_in_the_table_and_never_repeat_a_value() {
        let a = pre_updates(500, 1200, 0, 128);
        let b = pre_updates(500, 1200, 1, 128);
        assert_eq!(a.len(), 500);
        assert!(a.iter().all(|(k, _)| (1..=1200).contains(k)));
        let keys: std::collections::HashSet<i64> = a.iter().map(|(k, _)| *k).collect();
        assert_eq!(keys.len(), 500, "spread over distinct rows");
        // The next child's values differ from this one's on the same rows.
        for ((ka, va), (kb, vb)) in a.iter().zip(&b) {
            assert_eq!(ka, kb);
            assert_ne!(va, vb);
            assert_eq!(va.len(), 128);
        }
        assert!(pre_updates(0, 1200, 0, 128).is_empty());
        assert!(pre_updates(3, 1, 0, 8).iter().all(|(k, _)| *k == 1));
    }

    #[test]
    fn child_args_round_trip_through_clap() {
        use clap::Parser;
        let spec = ChildSpec {
            contender: "wal".into(),
            dir: PathBuf::from("/x/y"),
            first_key: 1201,
            records: 16,
            value_size: 128,
            stop_at_write: 7,
            stop_keep: 5,
            pre_updates: 3,
            table_records: 1200,
            update_seed: 9,
        };
        #[derive(Parser)]
        struct Top {
            #[command(subcommand)]
            cmd: crate::BenchCmd,
        }
        let mut argv = vec!["x".to_string(), "recovery-child".to_string()];
        argv.extend(spec.to_args());
        let t = Top::try_parse_from(argv).unwrap();
        match t.cmd {
            crate::BenchCmd::RecoveryChild(a) => {
                let s = a.spec();
                assert_eq!(s.keys(), (1201..1217).collect::<Vec<_>>());
                assert_eq!(s.stop_at_write, 7);
                assert_eq!(s.dir, PathBuf::from("/x/y"));
                assert_eq!(
                    (s.pre_updates, s.table_records, s.update_seed),
                    (3, 1200, 9)
                );
            }
            _ => panic!("wrong command"),
        }
    }
}
