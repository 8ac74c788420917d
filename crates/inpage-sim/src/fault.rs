//! Fault injection wrapper: fail chosen operations with EIO, or growth with ENOSPC, for
//! error-path tests.
//!
//! Invariants:
//! - Counted operations are `open`, `delete`, `rename`, `sync_dir`, `read_at`,
//!   `write_at`, `sync_data`, `sync_all`, `set_len` and `allocate` (one count per call,
//!   including calls that then fail). `len` and `exists` are not counted: they are
//!   look-ups that the engine calls at varying rates, and counting them would shift op
//!   indices whenever such a call is added, breaking recorded fault schedules.
//! - The fault decision and the op count happen under one lock before the inner call,
//!   and a failed op never reaches the inner VFS, so an injected failure changes nothing
//!   on disk. (A real EIO may leave a partial write; tests wanting that combine this
//!   wrapper with `SimVfs` crashes.)
//! - Rule indices are 0-based and relative to when the rule was added, so "fail the 3rd
//!   op from now" is `fail_op(2, false)`; on a fresh plan that is the 3rd op overall.
//! - ENOSPC accounting reserves growth under the lock before the inner call and returns
//!   the reservation if the inner call fails, so concurrent writers cannot both squeeze
//!   past the limit and a failed write does not use up space.

use inpage_vfs::*;
use std::io;
use std::path::Path;
use std::sync::Arc;
use std::sync::{Mutex, MutexGuard};

/// EIO as an `io::Error`, as the kernel would report it.
pub fn eio() -> io::Error {
    io::Error::from(rustix::io::Errno::IO)
}

/// ENOSPC as an `io::Error`.
pub fn enospc() -> io::Error {
    io::Error::from(rustix::io::Errno::NOSPC)
}

#[derive(Clone, Copy, Debug)]
enum Target {
    /// Any counted op; the index is in `PlanState::ops`.
    Any,
    /// Only ops of this kind; the index is in `PlanState::kind_ops`.
    Kind(IoKind),
}

#[derive(Clone, Copy, Debug)]
struct Rule {
    target: Target,
    /// Absolute counter value (of the target's counter) at which the rule fires.
    at: u64,
    persistent: bool,
}

#[derive(Debug, Default)]
struct PlanState {
    ops: u64,
    kind_ops: [u64; IoKind::COUNT],
    rules: Vec<Rule>,
    /// (limit, growth reserved so far) when ENOSPC is armed.
    space: Option<(u64, u64)>,
    injected: u64,
}

/// What to break, shared between the test and the wrapper.
#[derive(Debug, Default)]
pub struct FaultPlan {
    state: Mutex<PlanState>,
}

impl FaultPlan {
    /// A plan that injects nothing until told to.
    pub fn new() -> FaultPlan {
        FaultPlan::default()
    }

    fn lock(&self) -> MutexGuard<'_, PlanState> {
        // No code panics under this lock; recover rather than cascade a test's panic.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Fail the `n`-th counted op from now (0-based) with EIO; if `persistent`, every
    /// later op fails too.
    pub fn fail_op(&self, n: u64, persistent: bool) {
        let mut s = self.lock();
        let at = s.ops.saturating_add(n);
        s.rules.push(Rule {
            target: Target::Any,
            at,
            persistent,
        });
    }

    /// Fail the `nth` op of `kind` from now (0-based) with EIO; if `persistent`, every
    /// later op of that kind fails too. `fail_kind(IoKind::Sync, 1, false)` fails the
    /// second `sync_data` only.
    pub fn fail_kind(&self, kind: IoKind, nth: u64, persistent: bool) {
        let mut s = self.lock();
        let at = s.kind_ops[kind.index()].saturating_add(nth);
        s.rules.push(Rule {
            target: Target::Kind(kind),
            at,
            persistent,
        });
    }

    /// From now on, a `write_at`, `allocate` or `set_len` that would grow a file fails
    /// with ENOSPC (changing nothing) once total growth since this call would exceed
    /// `limit` bytes. Shrinking does not give space back: the limit is a budget, which
    /// keeps the point of failure independent of truncation patterns.
    pub fn enospc_after_bytes(&self, limit: u64) {
        self.lock().space = Some((limit, 0));
    }

    /// Remove every rule and the space limit. Counters keep running.
    pub fn disarm(&self) {
        let mut s = self.lock();
        s.rules.clear();
        s.space = None;
    }

    /// Counted ops seen since the plan was created.
    pub fn ops_seen(&self) -> u64 {
        self.lock().ops
    }

    /// Faults injected so far (EIO and ENOSPC).
    pub fn injected(&self) -> u64 {
        self.lock().injected
    }

    /// Count one op of `kind` and decide whether it fails with EIO.
    fn on_op(&self, kind: IoKind) -> io::Result<()> {
        let mut s = self.lock();
        let (idx, kidx) = (s.ops, s.kind_ops[kind.index()]);
        s.ops += 1;
        s.kind_ops[kind.index()] += 1;
        let fires = s.rules.iter().any(|r| {
            let i = match r.target {
                Target::Any => idx,
                Target::Kind(k) if k == kind => kidx,
                Target::Kind(_) => return false,
            };
            i == r.at || (r.persistent && i > r.at)
        });
        if fires {
            s.injected += 1;
            return Err(eio());
        }
        Ok(())
    }

    /// Reserve `growth` bytes of the space budget, or fail with ENOSPC. A returned
    /// non-zero reservation must be given back with `release` if the inner call fails.
    fn reserve(&self, growth: u64) -> io::Result<u64> {
        let mut s = self.lock();
        match s.space {
            Some((limit, used)) if growth > 0 => {
                let total = used.saturating_add(growth);
                if total > limit {
                    s.injected += 1;
                    return Err(enospc());
                }
                s.space = Some((limit, total));
                Ok(growth)
            }
            _ => Ok(0),
        }
    }

    fn release(&self, reserved: u64) {
        if reserved == 0 {
            return;
        }
        let mut s = self.lock();
        if let Some((limit, used)) = s.space {
            s.space = Some((limit, used.saturating_sub(reserved)));
        }
    }
}

/// A `Vfs` wrapper that injects faults according to a [`FaultPlan`].
#[derive(Debug)]
pub struct FaultVfs {
    inner: Arc<dyn Vfs>,
    plan: Arc<FaultPlan>,
}

impl FaultVfs {
    /// Wrap `inner`; `plan` may be shared with the test to arm faults later.
    pub fn new(inner: Arc<dyn Vfs>, plan: Arc<FaultPlan>) -> FaultVfs {
        FaultVfs { inner, plan }
    }

    /// The plan driving this wrapper.
    pub fn plan(&self) -> &Arc<FaultPlan> {
        &self.plan
    }
}

impl Vfs for FaultVfs {
    fn open(&self, path: &Path, opts: OpenOptions) -> io::Result<Arc<dyn File>> {
        self.plan.on_op(IoKind::Open)?;
        let inner = self.inner.open(path, opts)?;
        Ok(Arc::new(FaultFile {
            inner,
            plan: self.plan.clone(),
        }))
    }

    fn delete(&self, path: &Path) -> io::Result<()> {
        self.plan.on_op(IoKind::Delete)?;
        self.inner.delete(path)
    }

    fn exists(&self, path: &Path) -> io::Result<bool> {
        self.inner.exists(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.plan.on_op(IoKind::Rename)?;
        self.inner.rename(from, to)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.plan.on_op(IoKind::SyncDir)?;
        self.inner.sync_dir(dir)
    }

    fn open_read_only(&self, path: &Path) -> io::Result<Arc<dyn File>> {
        self.plan.on_op(IoKind::Open)?;
        let inner = self.inner.open_read_only(path)?;
        Ok(Arc::new(FaultFile {
            inner,
            plan: self.plan.clone(),
        }))
    }

    inpage_vfs::vfs_pass_through!(nonce, in_process_memory, regions);
}

/// A file opened through [`FaultVfs`].
#[derive(Debug)]
struct FaultFile {
    inner: Arc<dyn File>,
    plan: Arc<FaultPlan>,
}

impl FaultFile {
    /// Run a possibly growing op: `end` is the file length the op needs.
    fn grow(&self, kind: IoKind, end: u64, f: impl FnOnce() -> io::Result<()>) -> io::Result<()> {
        self.plan.on_op(kind)?;
        // Look up the length only when a space limit is armed, so the common path makes
        // no extra inner call.
        let armed = self.plan.lock().space.is_some();
        let reserved = if armed {
            self.plan.reserve(end.saturating_sub(self.inner.len()?))?
        } else {
            0
        };
        let r = f();
        if r.is_err() {
            self.plan.release(reserved);
        }
        r
    }
}

impl File for FaultFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.plan.on_op(IoKind::Read)?;
        self.inner.read_at(buf, offset)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let end = if buf.is_empty() {
            0
        } else {
            offset.saturating_add(buf.len() as u64)
        };
        self.grow(IoKind::Write, end, || self.inner.write_at(buf, offset))
    }

    fn sync_data(&self) -> io::Result<()> {
        self.plan.on_op(IoKind::Sync)?;
        self.inner.sync_data()
    }

    fn sync_all(&self) -> io::Result<()> {
        self.plan.on_op(IoKind::SyncAll)?;
        self.inner.sync_all()
    }

    fn len(&self) -> io::Result<u64> {
        self.inner.len()
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.grow(IoKind::SetLen, len, || self.inner.set_len(len))
    }

    fn allocate(&self, offset: u64, len: u64) -> io::Result<()> {
        let end = if len == 0 {
            0
        } else {
            offset.saturating_add(len)
        };
        self.grow(IoKind::Allocate, end, || self.inner.allocate(offset, len))
    }

    fn lock_range(&self, start: u64, len: u64, kind: Option<LockKind>) -> io::Result<bool> {
        self.inner.lock_range(start, len, kind)
    }

    fn prefetch(&self, offset: u64, len: u64) {
        self.inner.prefetch(offset, len)
    }

    fn direct_alignment(&self) -> Option<usize> {
        self.inner.direct_alignment()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SimVfs;

    fn setup() -> (SimVfs, Arc<FaultPlan>, FaultVfs) {
        let sim = SimVfs::new();
        let plan = Arc::new(FaultPlan::new());
        let vfs = FaultVfs::new(Arc::new(sim.clone()), plan.clone());
        (sim, plan, vfs)
    }

    fn is_eio(e: &io::Error) -> bool {
        e.raw_os_error() == Some(rustix::io::Errno::IO.raw_os_error())
    }

    fn is_enospc(e: &io::Error) -> bool {
        e.raw_os_error() == Some(rustix::io::Errno::NOSPC.raw_os_error())
    }

    #[test]
    fn fail_op_once() {
        let (sim, plan, vfs) = setup();
        let f = vfs.open(Path::new("f"), OpenOptions::CREATE).unwrap(); // op 0
        plan.fail_op(1, false); // fails op 2 overall
        f.write_at(b"a", 0).unwrap(); // op 1
        let e = f.write_at(b"b", 1).unwrap_err(); // op 2
        assert!(is_eio(&e));
        assert_eq!(
            sim.read_file(Path::new("f")).unwrap(),
            b"a",
            "failed op not passed on"
        );
        f.write_at(b"c", 1).unwrap();
        assert_eq!(plan.ops_seen(), 4);
        assert_eq!(plan.injected(), 1);
        // len and exists are not counted.
        f.len().unwrap();
        vfs.exists(Path::new("f")).unwrap();
        assert_eq!(plan.ops_seen(), 4);
    }

    #[test]
    fn fail_op_persistent() {
        let (sim, plan, vfs) = setup();
        plan.fail_op(2, true);
        let f = vfs.open(Path::new("f"), OpenOptions::CREATE).unwrap(); // 0
        f.write_at(b"a", 0).unwrap(); // 1
        assert!(is_eio(&f.sync_data().unwrap_err())); // 2
        assert!(is_eio(&f.read_at(&mut [0u8; 1], 0).unwrap_err()));
        assert!(is_eio(
            &vfs.rename(Path::new("f"), Path::new("g")).unwrap_err()
        ));
        assert!(is_eio(&vfs.sync_dir(Path::new(".")).unwrap_err()));
        assert!(is_eio(&vfs.delete(Path::new("f")).unwrap_err()));
        assert!(is_eio(&f.set_len(0).unwrap_err()));
        assert!(is_eio(&f.allocate(0, 10).unwrap_err()));
        assert!(is_eio(&f.sync_all().unwrap_err()));
        assert!(vfs.open(Path::new("h"), OpenOptions::CREATE).is_err());
        assert_eq!(plan.injected(), 9);
        assert_eq!(sim.pending_ops(Path::new("f")), 1);
        assert_eq!(sim.file_names(), vec![std::path::PathBuf::from("f")]);
        plan.disarm();
        f.sync_data().unwrap();
        assert_eq!(sim.pending_ops(Path::new("f")), 0);
        assert_eq!(plan.ops_seen(), 12);
    }

    #[test]
    fn fail_kind_targets_nth_sync() {
        let (sim, plan, vfs) = setup();
        let f = vfs.open(Path::new("f"), OpenOptions::CREATE).unwrap();
        plan.fail_kind(IoKind::Sync, 1, false);
        f.write_at(b"1", 0).unwrap();
        f.sync_data().unwrap(); // sync #0
        f.write_at(b"2", 0).unwrap();
        f.sync_all().unwrap(); // other kind: not targeted
        f.write_at(b"3", 0).unwrap();
        assert!(is_eio(&f.sync_data().unwrap_err())); // sync #1
        assert_eq!(sim.pending_ops(Path::new("f")), 1);
        f.sync_data().unwrap(); // sync #2: one-shot rule is spent
        assert_eq!(plan.injected(), 1);

        plan.fail_kind(IoKind::Write, 0, true);
        assert!(f.write_at(b"x", 0).is_err());
        assert!(f.write_at(b"y", 0).is_err());
        f.sync_data().unwrap();
        assert_eq!(sim.read_file(Path::new("f")).unwrap(), b"3");
        assert_eq!(plan.injected(), 3);
    }

    #[test]
    fn enospc_on_growth_only() {
        let (sim, plan, vfs) = setup();
        let f = vfs.open(Path::new("f"), OpenOptions::CREATE).unwrap();
        f.write_at(&[1u8; 1000], 0).unwrap();
        plan.enospc_after_bytes(100);
        // Overwrites inside the file never fail.
        f.write_at(&[2u8; 1000], 0).unwrap();
        f.write_at(&[3u8; 60], 980).unwrap(); // grows by 40 (total 40)
        f.allocate(1040, 50).unwrap(); // grows by 50 (total 90)
        let e = f.write_at(&[4u8; 11], 1090).unwrap_err(); // would be 101
        assert!(is_enospc(&e));
        assert_eq!(sim.read_file(Path::new("f")).unwrap().len(), 1090);
        assert!(is_enospc(&f.set_len(1200).unwrap_err()));
        assert!(is_enospc(&f.allocate(1000, 200).unwrap_err()));
        f.write_at(&[4u8; 10], 1090).unwrap(); // exactly 100
        f.set_len(500).unwrap(); // shrinking is fine but returns no budget
        assert!(is_enospc(&f.write_at(&[5u8; 1], 600).unwrap_err()));
        f.write_at(&[5u8; 1], 499).unwrap();
        f.write_at(&[], 10_000).unwrap(); // empty write grows nothing
        assert_eq!(plan.injected(), 4);
        plan.disarm();
        f.set_len(5000).unwrap();
        assert_eq!(sim.read_file(Path::new("f")).unwrap().len(), 5000);
    }

    #[test]
    fn failed_inner_call_releases_reservation() {
        // Stack two wrappers: the inner one fails the write after the outer one reserved
        // space for it.
        let sim = SimVfs::new();
        let inner_plan = Arc::new(FaultPlan::new());
        let inner: Arc<dyn Vfs> = Arc::new(FaultVfs::new(Arc::new(sim), inner_plan.clone()));
        let plan = Arc::new(FaultPlan::new());
        let vfs = FaultVfs::new(inner, plan.clone());
        let f = vfs.open(Path::new("f"), OpenOptions::CREATE).unwrap();
        plan.enospc_after_bytes(10);
        inner_plan.fail_kind(IoKind::Write, 0, false);
        assert!(is_eio(&f.write_at(&[1u8; 10], 0).unwrap_err()));
        f.write_at(&[1u8; 10], 0).unwrap(); // budget was returned
        assert_eq!(plan.injected(), 0);
        assert_eq!(inner_plan.injected(), 1);
        assert!(is_enospc(&f.write_at(&[1u8; 1], 10).unwrap_err()));
    }

    #[test]
    fn replay_fault_at_every_index() {
        // The typical use: count ops once, then fail each index in turn.
        let workload = |vfs: &FaultVfs| -> io::Result<()> {
            let f = vfs.open(Path::new("f"), OpenOptions::CREATE)?;
            f.write_at(b"hello", 0)?;
            f.sync_data()?;
            vfs.sync_dir(Path::new("."))?;
            let mut b = [0u8; 5];
            f.read_exact_at(&mut b, 0)?;
            vfs.rename(Path::new("f"), Path::new("g"))
        };
        let (_, plan, vfs) = setup();
        workload(&vfs).unwrap();
        let n = plan.ops_seen();
        assert_eq!(n, 6);
        for i in 0..n {
            let (_, plan, vfs) = setup();
            plan.fail_op(i, false);
            assert!(workload(&vfs).is_err());
            assert_eq!(plan.ops_seen(), i + 1);
            assert_eq!(plan.injected(), 1);
        }
    }
}
