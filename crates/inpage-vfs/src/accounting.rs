//! Accounting wrapper: counts calls, bytes and time per kind of I/O, for the latency
//! breakdown (compute / write / sync).
//!
//! Invariants:
//! - Every call of a counted kind adds exactly one to `calls`, whether it succeeds or
//!   not, and its wall time inside the inner call to `nanos`: a failing sync still cost
//!   the time it took. `bytes` counts only what succeeded: bytes actually read, the
//!   buffer length of a write, the length of an allocate. Other kinds count no bytes.
//! - `len` and `exists` are not counted: they are metadata look-ups with no I/O kind.
//! - Counters are independent relaxed atomics, so a snapshot taken while I/O runs may mix
//!   slightly different instants across counters; each counter is still exact and
//!   monotonic (except across `reset`). That is fine for statistics and keeps the hot
//!   path lock-free.
//! - Files opened through the wrapper are wrapped too and share the same `IoStats`, so
//!   nothing done through the wrapper escapes the counts.

use super::*;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Kind of I/O call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum IoKind {
    /// `read_at`
    Read,
    /// `write_at`
    Write,
    /// `sync_data` (fdatasync)
    Sync,
    /// `sync_all` (fsync)
    SyncAll,
    /// `Vfs::sync_dir`
    SyncDir,
    /// `allocate`
    Allocate,
    /// `set_len`
    SetLen,
    /// `Vfs::open`
    Open,
    /// `Vfs::delete`
    Delete,
    /// `Vfs::rename`
    Rename,
}

impl IoKind {
    /// Number of kinds.
    pub const COUNT: usize = 10;

    /// Every kind, in declaration order (the order of [`IoKind::index`]).
    pub const ALL: [IoKind; IoKind::COUNT] = [
        IoKind::Read,
        IoKind::Write,
        IoKind::Sync,
        IoKind::SyncAll,
        IoKind::SyncDir,
        IoKind::Allocate,
        IoKind::SetLen,
        IoKind::Open,
        IoKind::Delete,
        IoKind::Rename,
    ];

    /// Dense index in `0..COUNT`.
    pub fn index(self) -> usize {
        self as usize
    }

    /// Short lower-case name, for reports.
    pub fn name(self) -> &'static str {
        match self {
            IoKind::Read => "read",
            IoKind::Write => "write",
            IoKind::Sync => "sync",
            IoKind::SyncAll => "sync_all",
            IoKind::SyncDir => "sync_dir",
            IoKind::Allocate => "allocate",
            IoKind::SetLen => "set_len",
            IoKind::Open => "open",
            IoKind::Delete => "delete",
            IoKind::Rename => "rename",
        }
    }
}

/// Counters of one kind at one instant.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KindStats {
    /// Calls made (successful or not).
    pub calls: u64,
    /// Bytes moved by successful calls.
    pub bytes: u64,
    /// Nanoseconds spent inside the inner calls.
    pub nanos: u64,
}

impl KindStats {
    fn saturating_sub(self, o: KindStats) -> KindStats {
        KindStats {
            calls: self.calls.saturating_sub(o.calls),
            bytes: self.bytes.saturating_sub(o.bytes),
            nanos: self.nanos.saturating_sub(o.nanos),
        }
    }
}

#[derive(Debug, Default)]
struct KindCounters {
    calls: AtomicU64,
    bytes: AtomicU64,
    nanos: AtomicU64,
}

/// Live per-kind counters, shared by a wrapper and its files.
#[derive(Debug, Default)]
pub struct IoStats {
    kinds: [KindCounters; IoKind::COUNT],
    /// `write_at` calls whose offset or length is not a multiple of 4096 bytes.
    unaligned_writes: AtomicU64,
}

impl IoStats {
    /// Fresh zeroed counters.
    pub fn new() -> IoStats {
        IoStats::default()
    }

    /// Record one call.
    pub fn record(&self, kind: IoKind, bytes: u64, nanos: u64) {
        let k = &self.kinds[kind.index()];
        k.calls.fetch_add(1, Ordering::Relaxed);
        k.bytes.fetch_add(bytes, Ordering::Relaxed);
        k.nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    /// Current values.
    pub fn snapshot(&self) -> IoStatsSnapshot {
        let mut s = IoStatsSnapshot::default();
        for (out, k) in s.kinds.iter_mut().zip(&self.kinds) {
            *out = KindStats {
                calls: k.calls.load(Ordering::Relaxed),
                bytes: k.bytes.load(Ordering::Relaxed),
                nanos: k.nanos.load(Ordering::Relaxed),
            };
        }
        s.unaligned_writes = self.unaligned_writes.load(Ordering::Relaxed);
        s
    }

    /// Zero every counter.
    pub fn reset(&self) {
        self.unaligned_writes.store(0, Ordering::Relaxed);
        for k in &self.kinds {
            k.calls.store(0, Ordering::Relaxed);
            k.bytes.store(0, Ordering::Relaxed);
            k.nanos.store(0, Ordering::Relaxed);
        }
    }
}

/// Plain copy of the counters at one instant.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IoStatsSnapshot {
    kinds: [KindStats; IoKind::COUNT],
    unaligned_writes: u64,
}

impl IoStatsSnapshot {
    /// Counters of one kind.
    pub fn get(&self, kind: IoKind) -> KindStats {
        self.kinds[kind.index()]
    }

    /// What happened between `earlier` and `self` (saturating, so a `reset` in between
    /// gives zeros rather than wrapping).
    pub fn delta(&self, earlier: &IoStatsSnapshot) -> IoStatsSnapshot {
        let mut d = IoStatsSnapshot::default();
        for i in 0..IoKind::COUNT {
            d.kinds[i] = self.kinds[i].saturating_sub(earlier.kinds[i]);
        }
        d.unaligned_writes = self
            .unaligned_writes
            .saturating_sub(earlier.unaligned_writes);
        d
    }

    /// `write_at` calls whose offset or length was not a multiple of 4096 bytes (the
    /// rest of `get(IoKind::Write).calls` were whole, aligned 4 KiB blocks).
    pub fn unaligned_writes(&self) -> u64 {
        self.unaligned_writes
    }

    /// Sum over all kinds.
    pub fn total(&self) -> KindStats {
        self.kinds
            .iter()
            .fold(KindStats::default(), |a, k| KindStats {
                calls: a.calls.saturating_add(k.calls),
                bytes: a.bytes.saturating_add(k.bytes),
                nanos: a.nanos.saturating_add(k.nanos),
            })
    }

    /// `(kind, stats)` for every kind, in [`IoKind::ALL`] order.
    pub fn iter(&self) -> impl Iterator<Item = (IoKind, KindStats)> + '_ {
        IoKind::ALL.iter().map(move |&k| (k, self.get(k)))
    }
}

/// Time `f`, record it under `kind` with the bytes `bytes_of` reports for a success.
fn timed<T>(
    stats: &IoStats,
    kind: IoKind,
    bytes_of: impl FnOnce(&T) -> u64,
    f: impl FnOnce() -> io::Result<T>,
) -> io::Result<T> {
    let t = Instant::now();
    let r = f();
    let nanos = u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX);
    let bytes = r.as_ref().map_or(0, bytes_of);
    stats.record(kind, bytes, nanos);
    r
}

/// A `Vfs` wrapper that counts I/O into an [`IoStats`].
#[derive(Debug)]
pub struct AccountingVfs {
    inner: Arc<dyn Vfs>,
    stats: Arc<IoStats>,
}

impl AccountingVfs {
    /// Wrap `inner` with fresh counters.
    pub fn new(inner: Arc<dyn Vfs>) -> AccountingVfs {
        AccountingVfs::with_stats(inner, Arc::new(IoStats::new()))
    }

    /// Wrap `inner`, counting into existing `stats` (e.g. shared by several wrappers).
    pub fn with_stats(inner: Arc<dyn Vfs>, stats: Arc<IoStats>) -> AccountingVfs {
        AccountingVfs { inner, stats }
    }

    /// The live counters.
    pub fn stats(&self) -> Arc<IoStats> {
        self.stats.clone()
    }

    /// The wrapped file system.
    pub fn inner(&self) -> &Arc<dyn Vfs> {
        &self.inner
    }
}

impl Vfs for AccountingVfs {
    fn open(&self, path: &Path, opts: OpenOptions) -> io::Result<Arc<dyn File>> {
        let inner = timed(
            &self.stats,
            IoKind::Open,
            |_| 0,
            || self.inner.open(path, opts),
        )?;
        Ok(Arc::new(AccountingFile {
            inner,
            stats: self.stats.clone(),
        }))
    }

    fn delete(&self, path: &Path) -> io::Result<()> {
        timed(
            &self.stats,
            IoKind::Delete,
            |_| 0,
            || self.inner.delete(path),
        )
    }

    fn exists(&self, path: &Path) -> io::Result<bool> {
        self.inner.exists(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        timed(
            &self.stats,
            IoKind::Rename,
            |_| 0,
            || self.inner.rename(from, to),
        )
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        timed(
            &self.stats,
            IoKind::SyncDir,
            |_| 0,
            || self.inner.sync_dir(dir),
        )
    }

    fn open_read_only(&self, path: &Path) -> io::Result<Arc<dyn File>> {
        let inner = timed(
            &self.stats,
            IoKind::Open,
            |_| 0,
            || self.inner.open_read_only(path),
        )?;
        Ok(Arc::new(AccountingFile {
            inner,
            stats: self.stats.clone(),
        }))
    }

    super::vfs_pass_through!(nonce, in_process_memory, regions);
}

/// A file opened through [`AccountingVfs`].
#[derive(Debug)]
struct AccountingFile {
    inner: Arc<dyn File>,
    stats: Arc<IoStats>,
}

impl File for AccountingFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        timed(
            &self.stats,
            IoKind::Read,
            |&n| n as u64,
            || self.inner.read_at(buf, offset),
        )
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let len = buf.len() as u64;
        if offset % 4096 != 0 || len % 4096 != 0 {
            self.stats.unaligned_writes.fetch_add(1, Ordering::Relaxed);
        }
        timed(
            &self.stats,
            IoKind::Write,
            |_| len,
            || self.inner.write_at(buf, offset),
        )
    }

    fn sync_data(&self) -> io::Result<()> {
        timed(&self.stats, IoKind::Sync, |_| 0, || self.inner.sync_data())
    }

    fn sync_all(&self) -> io::Result<()> {
        timed(
            &self.stats,
            IoKind::SyncAll,
            |_| 0,
            || self.inner.sync_all(),
        )
    }

    fn len(&self) -> io::Result<u64> {
        self.inner.len()
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        timed(
            &self.stats,
            IoKind::SetLen,
            |_| 0,
            || self.inner.set_len(len),
        )
    }

    fn allocate(&self, offset: u64, len: u64) -> io::Result<()> {
        timed(
            &self.stats,
            IoKind::Allocate,
            |_| len,
            || self.inner.allocate(offset, len),
        )
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
    use crate::MemVfs;

    #[test]
    fn writes_of_whole_4k_blocks_at_4k_offsets_are_the_aligned_ones() {
        let vfs = AccountingVfs::new(Arc::new(MemVfs::new()));
        let stats = vfs.stats();
        let f = vfs.open(Path::new("c"), OpenOptions::CREATE).unwrap();
        f.write_at(&[0u8; 8192], 4096).unwrap();
        let s = stats.snapshot();
        assert_eq!(s.unaligned_writes(), 0);
        f.write_at(&[0u8; 4096], 512).unwrap();
        f.write_at(&[0u8; 512], 8192).unwrap();
        f.write_at(&[0u8; 4096], 0).unwrap();
        assert_eq!(stats.snapshot().delta(&s).unaligned_writes(), 2);
        stats.reset();
        assert_eq!(stats.snapshot().unaligned_writes(), 0);
    }

    #[test]
    fn counts_known_sequence() {
        let vfs = AccountingVfs::new(Arc::new(MemVfs::new()));
        let stats = vfs.stats();
        let a = Path::new("a");
        let f = vfs.open(a, OpenOptions::CREATE).unwrap();
        f.write_at(&[1u8; 100], 0).unwrap();
        f.write_at(&[2u8; 28], 100).unwrap();
        let mut buf = [0u8; 200];
        assert_eq!(f.read_at(&mut buf, 0).unwrap(), 128); // short at EOF
        f.read_exact_at(&mut buf[..50], 10).unwrap();
        f.sync_data().unwrap();
        f.sync_all().unwrap();
        f.allocate(128, 4096).unwrap();
        f.set_len(10).unwrap();
        assert_eq!(f.len().unwrap(), 10); // not counted
        assert!(vfs.exists(a).unwrap()); // not counted
        vfs.sync_dir(Path::new(".")).unwrap();
        vfs.rename(a, Path::new("b")).unwrap();
        vfs.delete(Path::new("b")).unwrap();
        // Failures count calls but no bytes.
        assert!(vfs.delete(Path::new("b")).is_err());
        assert!(vfs.open(Path::new("zz"), OpenOptions::default()).is_err());

        let s = stats.snapshot();
        let want = |k: IoKind, calls: u64, bytes: u64| {
            let got = s.get(k);
            assert_eq!((got.calls, got.bytes), (calls, bytes), "{k:?}");
        };
        want(IoKind::Open, 2, 0);
        want(IoKind::Write, 2, 128);
        want(IoKind::Read, 2, 178);
        want(IoKind::Sync, 1, 0);
        want(IoKind::SyncAll, 1, 0);
        want(IoKind::Allocate, 1, 4096);
        want(IoKind::SetLen, 1, 0);
        want(IoKind::SyncDir, 1, 0);
        want(IoKind::Rename, 1, 0);
        want(IoKind::Delete, 2, 0);
        assert_eq!(s.unaligned_writes(), 2);
        assert_eq!(s.total().calls, 14);
        assert_eq!(s.total().bytes, 128 + 178 + 4096);

        // Delta between snapshots and reset.
        f.write_at(&[3u8; 7], 0).unwrap();
        let s2 = stats.snapshot();
        let d = s2.delta(&s);
        assert_eq!(d.get(IoKind::Write).calls, 1);
        assert_eq!(d.get(IoKind::Write).bytes, 7);
        assert_eq!(d.total().calls, 1);
        stats.reset();
        assert_eq!(stats.snapshot(), IoStatsSnapshot::default());
        assert_eq!(stats.snapshot().delta(&s2), IoStatsSnapshot::default());
        assert_eq!(s2.iter().count(), IoKind::COUNT);
        for (i, k) in IoKind::ALL.iter().enumerate() {
            assert_eq!(k.index(), i);
        }
    }

    #[test]
    fn time_is_measured() {
        let dir = tempfile::tempdir().unwrap();
        let vfs = AccountingVfs::new(Arc::new(crate::OsVfs::new()));
        let f = vfs
            .open(&dir.path().join("t"), OpenOptions::CREATE)
            .unwrap();
        f.write_at(&[0u8; 65536], 0).unwrap();
        f.sync_data().unwrap();
        let s = vfs.stats().snapshot();
        assert!(s.get(IoKind::Write).nanos > 0);
        assert!(s.get(IoKind::Sync).nanos > 0);
    }
}
