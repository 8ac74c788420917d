//! The emulated slow device: a FUSE file system whose files back the ext4 lab's loop
//! devices and which charges a device profile's latencies on every request.
//!
//! Each block request the loop device sends (it is attached with direct I/O, and every
//! file is opened `FOPEN_DIRECT_IO`, so nothing is cached in between) arrives here as one
//! FUSE `write`, `read` or `fsync`, and is answered only once the profile's time for it has
//! passed: `write_req_us + bytes / write_mib_s` for a write, `flush_us` for a flush,
//! likewise for reads. The data itself goes to an ordinary backing file.
//!
//! Invariants:
//! - One daemon thread serves both files, so requests are served one at a time in arrival
//!   order, as by the single flash device of a phone (data and journal share it there).
//! - Time is kept on a device clock: a request starts at `max(arrival - credit, previous
//!   request's end)` and ends `charge` later. The credit is the round trip this machine
//!   adds to a request on its own (loop worker, FUSE, scheduler wake-ups), measured at
//!   start-up by `calibrate` through the real loop device and then by `calibrate_path`
//!   through the mounted ext4 (4 KiB overwrite + fdatasync), so an isolated request takes
//!   the profile's time end to end, not profile + overhead; the credit never reaches
//!   back past the previous request's end, so a request that queued behind another (or
//!   was issued right after its answer) gets no more than the idle gap back, and
//!   back-to-back requests run at the
//!   profile's rate. Sleeping overshoot is not carried forward (the clock advances by
//!   the planned end, not the observed one). The credit is the median round trip of
//!   the probes (what a typical request pays, load included; the lower quartile was
//!   tried and under-credits a loaded machine by ~400 µs per request) and at most half a
//!   charge, so a machine too busy to measure makes the device slower, never free.
//! - The emulator can never wedge the machine: a watchdog thread aborts the FUSE
//!   connection through fusectl when a request has been in service longer than
//!   `stall_limit` or when the daemon thread has died while mounted; every request
//!   then fails with an error instead of waiting forever, so ext4 and the loop devices
//!   above can still be unmounted and detached. The daemon thread lives in this process,
//!   so it cannot outlive the run: when the process dies the kernel closes /dev/fuse and
//!   aborts the connection the same way.
//! - `stop` releases only this emulator's mount (registered with the lab's emergency
//!   cleanup before it exists) and is idempotent.

use std::ffi::OsStr;
use std::fs::{self, File};
use std::num::NonZeroU64;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo,
    KernelConfig, LockOwner, OpenFlags, ReplyAttr, ReplyData, ReplyDirectory, ReplyEmpty,
    ReplyEntry, ReplyOpen, ReplyWrite, Request, WriteFlags,
};
use serde::{Deserialize, Serialize};

use crate::device::Profile;

/// How long attributes may be cached by the kernel (they never change: fixed sizes).
const TTL: Duration = Duration::from_secs(3600);

/// Largest single FUSE write we accept (and ask the kernel for): 1 MiB, the kernel's
/// default `max_pages` limit; the loop device's requests are capped to the same size so
/// one block request stays one FUSE request.
pub const MAX_REQUEST: u32 = 1 << 20;

/// How to run the emulator.
#[derive(Clone, Debug)]
pub struct EmuOptions {
    pub profile: Profile,
    /// A request in service longer than this, or a dead daemon, aborts the connection.
    pub stall_limit: Duration,
    /// Probes per request kind in `calibrate`.
    pub calibration_probes: u32,
}

impl EmuOptions {
    pub fn new(profile: Profile) -> EmuOptions {
        EmuOptions {
            profile,
            stall_limit: Duration::from_secs(10),
            calibration_probes: 100,
        }
    }
}

/// What the daemon has served so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EmuCounters {
    pub writes: u64,
    pub write_bytes: u64,
    pub flushes: u64,
    pub reads: u64,
    pub read_bytes: u64,
    /// Profile time charged in total, ns (before credits).
    pub charged_ns: u64,
}

/// The per-request credits found by `calibrate`, and what they were derived from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    pub profile: String,
    /// Credit subtracted from an isolated write (and read) request, µs.
    pub write_credit_us: f64,
    /// Credit subtracted from an isolated flush, µs.
    pub flush_credit_us: f64,
    /// Median end-to-end time of one 4 KiB O_DIRECT write on the loop device with no
    /// credit, µs, next to the profile's charge for it.
    pub write_probe_us: f64,
    pub write_charge_us: f64,
    /// Same for one flush (`fdatasync` of the loop device).
    pub flush_probe_us: f64,
    pub flush_charge_us: f64,
    /// Same two once the credits apply (should equal the charges).
    pub write_check_us: f64,
    pub flush_check_us: f64,
    /// Probes per request kind and round, and the rounds it took (more than one when a
    /// burst of load made the first look implausible).
    pub probes: u32,
    pub rounds: u32,
    /// The measured overhead exceeded `MAX_CREDIT_SHARE` of a charge even in the best
    /// round, so the credit was capped: the machine was too busy to calibrate, and the
    /// emulated device runs slower than the profile.
    pub capped: bool,
    /// Second stage (`calibrate_path`), through the mounted file system: the machine's
    /// own time per request of a 4 KiB overwrite + `fdatasync` (ext4, page cache, loop
    /// and FUSE, beyond what the raw probes see), µs; 0 until that stage ran.
    pub path_overhead_us: f64,
    /// With the final credits: that transaction end to end, and the profile's charge for
    /// the requests it made, µs per transaction.
    pub path_txn_us: f64,
    pub path_charge_us: f64,
}

/// Probe rounds `calibrate` tries before it settles for a capped credit.
const CALIBRATION_ROUNDS: u32 = 5;

/// Largest share of a request's charge the credit may take back.
const MAX_CREDIT_SHARE: f64 = 0.5;

struct Shared {
    profile: Profile,
    epoch: Instant,
    write_credit_ns: AtomicU64,
    flush_credit_ns: AtomicU64,
    /// ns since `epoch` + 1 at which the request in service arrived; 0 when idle.
    busy_since: AtomicU64,
    /// End of the last request on the device clock.
    last_end: Mutex<Option<Instant>>,
    writes: AtomicU64,
    write_bytes: AtomicU64,
    flushes: AtomicU64,
    reads: AtomicU64,
    read_bytes: AtomicU64,
    charged_ns: AtomicU64,
    served: AtomicU64,
    /// Test hook (`inject_stall`): requests hang until the connection is aborted.
    stall: AtomicBool,
    stop: AtomicBool,
    /// Set by `stop` before it unmounts: the daemon ending after that is expected.
    unmounting: AtomicBool,
    aborted: AtomicBool,
}

impl Shared {
    fn counters(&self) -> EmuCounters {
        EmuCounters {
            writes: self.writes.load(Ordering::Relaxed),
            write_bytes: self.write_bytes.load(Ordering::Relaxed),
            flushes: self.flushes.load(Ordering::Relaxed),
            reads: self.reads.load(Ordering::Relaxed),
            read_bytes: self.read_bytes.load(Ordering::Relaxed),
            charged_ns: self.charged_ns.load(Ordering::Relaxed),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Write,
    Read,
    Flush,
}

/// Profile time of one request, ns.
fn charge_ns(p: &Profile, kind: Kind, bytes: u64) -> u64 {
    let per_byte = |mib_s: f64| bytes as f64 / (mib_s * 1_048_576.0) * 1e9;
    let ns = match kind {
        Kind::Write => p.write_req_us * 1e3 + per_byte(p.write_mib_s),
        Kind::Read => p.read_req_us * 1e3 + per_byte(p.read_mib_s),
        Kind::Flush => p.flush_us * 1e3,
    };
    if ns.is_finite() && ns > 0.0 {
        ns as u64
    } else {
        0
    }
}

/// Where a request starts on the device clock: an idle device gets the credit back (the
/// request already spent it getting here), a busy one starts when the previous ends.
fn start_on_clock(arrival: Instant, credit: Duration, last_end: Option<Instant>) -> Instant {
    let credited = arrival.checked_sub(credit).unwrap_or(arrival);
    match last_end {
        Some(e) if e > credited => e,
        _ => credited,
    }
}

struct EmuFile {
    name: String,
    size: u64,
    backing: File,
}

struct EmuFs {
    files: Vec<EmuFile>,
    shared: Arc<Shared>,
}

thread_local! {
    static THREAD_READY: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Once per daemon thread: exact sleeps (no 50 µs timer slack) and the I/O-flusher flag,
/// so the daemon's own allocations never wait on the writeback it is serving.
fn prepare_thread() {
    THREAD_READY.with(|r| {
        if !r.get() {
            r.set(true);
            let _ = rustix::thread::set_current_timer_slack(NonZeroU64::new(1));
            let _ = rustix::process::configure_io_flusher_behavior(true);
        }
    });
}

impl EmuFs {
    fn file(&self, ino: INodeNo) -> Option<&EmuFile> {
        let i = ino.0.checked_sub(2)?;
        self.files.get(usize::try_from(i).ok()?)
    }

    fn attr(&self, ino: INodeNo) -> Option<FileAttr> {
        let now = SystemTime::UNIX_EPOCH;
        let (kind, size, perm, nlink) = if ino == INodeNo::ROOT {
            (FileType::Directory, 0, 0o755, 2)
        } else {
            let f = self.file(ino)?;
            (FileType::RegularFile, f.size, 0o600, 1)
        };
        Some(FileAttr {
            ino,
            size,
            blocks: size.div_ceil(512),
            atime: now,
            mtime: now,
            ctime: now,
            crtime: now,
            kind,
            perm,
            nlink,
            uid: 0,
            gid: 0,
            rdev: 0,
            blksize: 4096,
            flags: 0,
        })
    }

    /// Serve one request: do `io`, then answer once the profile's time has passed.
    fn serve<T>(&self, kind: Kind, bytes: u64, io: impl FnOnce() -> T) -> T {
        prepare_thread();
        let s = &self.shared;
        let arrival = Instant::now();
        let since = arrival.duration_since(s.epoch).as_nanos() as u64;
        s.busy_since.store(since.max(1), Ordering::SeqCst);
        // Test hook: behave like a daemon stuck in a request until the connection is
        // aborted (the reply then goes nowhere).
        while s.stall.load(Ordering::SeqCst)
            && !s.aborted.load(Ordering::SeqCst)
            && !s.stop.load(Ordering::SeqCst)
        {
            std::thread::sleep(Duration::from_millis(20));
        }
        let charge = charge_ns(&s.profile, kind, bytes);
        let credit = Duration::from_nanos(match kind {
            Kind::Flush => s.flush_credit_ns.load(Ordering::Relaxed),
            Kind::Write | Kind::Read => s.write_credit_ns.load(Ordering::Relaxed),
        });
        let r = io();
        let mut last = s.last_end.lock().unwrap_or_else(|e| e.into_inner());
        let end = start_on_clock(arrival, credit, *last) + Duration::from_nanos(charge);
        *last = Some(end);
        drop(last);
        let now = Instant::now();
        if end > now {
            std::thread::sleep(end - now);
        }
        match kind {
            Kind::Write => {
                s.writes.fetch_add(1, Ordering::Relaxed);
                s.write_bytes.fetch_add(bytes, Ordering::Relaxed);
            }
            Kind::Read => {
                s.reads.fetch_add(1, Ordering::Relaxed);
                s.read_bytes.fetch_add(bytes, Ordering::Relaxed);
            }
            Kind::Flush => {
                s.flushes.fetch_add(1, Ordering::Relaxed);
            }
        }
        s.charged_ns.fetch_add(charge, Ordering::Relaxed);
        s.served.fetch_add(1, Ordering::Relaxed);
        s.busy_since.store(0, Ordering::SeqCst);
        r
    }
}

fn io_errno(e: &std::io::Error) -> Errno {
    e.raw_os_error().map(Errno::from_i32).unwrap_or(Errno::EIO)
}

impl Filesystem for EmuFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        // Ask for 1 MiB writes; the kernel may cap lower (then loop requests are capped
        // by `Emulator::cap_requests` to what fits, see `MAX_REQUEST`).
        let _ = config.set_max_write(MAX_REQUEST);
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        if parent != INodeNo::ROOT {
            return reply.error(Errno::ENOENT);
        }
        let found = self
            .files
            .iter()
            .position(|f| OsStr::new(&f.name) == name)
            .and_then(|i| self.attr(INodeNo(i as u64 + 2)));
        match found {
            Some(a) => reply.entry(&TTL, &a, Generation(0)),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.attr(ino) {
            Some(a) => reply.attr(&TTL, &a),
            None => reply.error(Errno::ENOENT),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        _mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<fuser::TimeOrNow>,
        _mtime: Option<fuser::TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        // Device images have a fixed size; times and modes are not kept.
        match self.attr(ino) {
            Some(a) if size.is_none_or(|s| s == a.size) => reply.attr(&TTL, &a),
            Some(_) => reply.error(Errno::EPERM),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        if self.file(ino).is_none() {
            return reply.error(Errno::EISDIR);
        }
        // Direct I/O: every request reaches the daemon as issued, none is absorbed by a
        // page cache between the loop device and the charge.
        reply.opened(FileHandle(ino.0), FopenFlags::FOPEN_DIRECT_IO);
    }

    #[allow(clippy::too_many_arguments)]
    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let Some(f) = self.file(ino) else {
            return reply.error(Errno::EISDIR);
        };
        let len = u64::from(size).min(f.size.saturating_sub(offset));
        let mut buf = vec![0u8; len as usize];
        let r = self.serve(Kind::Read, len, || {
            f.backing.read_exact_at(&mut buf, offset)
        });
        match r {
            Ok(()) => reply.data(&buf),
            Err(e) => reply.error(io_errno(&e)),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let Some(f) = self.file(ino) else {
            return reply.error(Errno::EISDIR);
        };
        let end = offset.checked_add(data.len() as u64);
        if end.is_none_or(|e| e > f.size) {
            return reply.error(Errno::ENOSPC);
        }
        let r = self.serve(Kind::Write, data.len() as u64, || {
            f.backing.write_all_at(data, offset)
        });
        match r {
            Ok(()) => reply.written(data.len() as u32),
            Err(e) => reply.error(io_errno(&e)),
        }
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        if self.file(ino).is_none() {
            return reply.error(Errno::EISDIR);
        }
        // The backing file is not synced: the emulated flush is a charge, and the data
        // only has to outlive the lab, not a power cut of this machine.
        self.serve(Kind::Flush, 0, || ());
        reply.ok();
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        if ino != INodeNo::ROOT {
            return reply.error(Errno::ENOTDIR);
        }
        let mut entries = vec![
            (INodeNo::ROOT, FileType::Directory, ".".to_string()),
            (INodeNo::ROOT, FileType::Directory, "..".to_string()),
        ];
        for (i, f) in self.files.iter().enumerate() {
            entries.push((INodeNo(i as u64 + 2), FileType::RegularFile, f.name.clone()));
        }
        for (i, (ino, kind, name)) in entries.into_iter().enumerate().skip(offset as usize) {
            if reply.add(ino, i as u64 + 1, kind, name) {
                break;
            }
        }
        reply.ok();
    }
}

/// A mounted emulator. Dropping it stops it.
pub struct Emulator {
    mnt: PathBuf,
    shared: Arc<Shared>,
    session: Arc<Mutex<Option<fuser::BackgroundSession>>>,
    watchdog: Option<JoinHandle<()>>,
    conn: u32,
    mounted: bool,
    stall_limit: Duration,
    probes: u32,
}

impl std::fmt::Debug for Emulator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Emulator")
            .field("mnt", &self.mnt)
            .field("profile", &self.shared.profile.name)
            .field("conn", &self.conn)
            .field("mounted", &self.mounted)
            .finish()
    }
}

/// Whether FUSE can be used here (root is checked by the lab).
pub fn fuse_available() -> Result<(), String> {
    if !Path::new("/dev/fuse").exists() {
        return Err("no /dev/fuse (FUSE unavailable)".into());
    }
    let fs = fs::read_to_string("/proc/filesystems").unwrap_or_default();
    if !fs
        .lines()
        .any(|l| l.split_whitespace().last() == Some("fuse"))
    {
        return Err("kernel has no fuse file system".into());
    }
    Ok(())
}

impl Emulator {
    /// Mount the emulator at `mnt` (an empty directory) with the given files (name, size),
    /// each backed by a sparse file of that size in `backing_dir`. `on_mount` is called
    /// with the mount point right before the mount exists (the lab registers it for its
    /// emergency cleanup there).
    pub fn start(
        mnt: &Path,
        backing_dir: &Path,
        files: &[(&str, u64)],
        o: &EmuOptions,
        on_mount: impl FnOnce(&Path),
    ) -> Result<Emulator, String> {
        fuse_available()?;
        let mut v = Vec::new();
        for (name, size) in files {
            let p = backing_dir.join(name);
            let f = fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .open(&p)
                .map_err(|e| format!("{}: {e}", p.display()))?;
            f.set_len(*size)
                .map_err(|e| format!("{}: {e}", p.display()))?;
            v.push(EmuFile {
                name: (*name).to_string(),
                size: *size,
                backing: f,
            });
        }
        let shared = Arc::new(Shared {
            profile: o.profile.clone(),
            epoch: Instant::now(),
            write_credit_ns: AtomicU64::new(0),
            flush_credit_ns: AtomicU64::new(0),
            busy_since: AtomicU64::new(0),
            last_end: Mutex::new(None),
            writes: AtomicU64::new(0),
            write_bytes: AtomicU64::new(0),
            flushes: AtomicU64::new(0),
            reads: AtomicU64::new(0),
            read_bytes: AtomicU64::new(0),
            charged_ns: AtomicU64::new(0),
            served: AtomicU64::new(0),
            stall: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            unmounting: AtomicBool::new(false),
            aborted: AtomicBool::new(false),
        });
        let fsys = EmuFs {
            files: v,
            shared: shared.clone(),
        };
        let mut cfg = fuser::Config::default();
        cfg.mount_options = vec![
            fuser::MountOption::FSName(format!("inpage-emu-{}", o.profile.name)),
            fuser::MountOption::Subtype("inpage-emu".into()),
        ];
        cfg.n_threads = Some(1);
        on_mount(mnt);
        let bs = fuser::spawn_mount(fsys, mnt, &cfg)
            .map_err(|e| format!("FUSE mount at {}: {e}", mnt.display()))?;
        let session = Arc::new(Mutex::new(Some(bs)));
        let mut emu = Emulator {
            mnt: mnt.to_path_buf(),
            shared,
            session,
            watchdog: None,
            conn: 0,
            mounted: true,
            stall_limit: o.stall_limit,
            probes: o.calibration_probes,
        };
        let st = rustix::fs::stat(mnt).map_err(|e| format!("{}: {e}", mnt.display()))?;
        emu.conn = rustix::fs::minor(st.st_dev);
        let (sh, sess, conn, limit) = (
            emu.shared.clone(),
            emu.session.clone(),
            emu.conn,
            emu.stall_limit,
        );
        emu.watchdog = Some(
            std::thread::Builder::new()
                .name("inpage-emu-watchdog".into())
                .spawn(move || watchdog(&sh, &sess, conn, limit))
                .map_err(|e| format!("watchdog thread: {e}"))?,
        );
        Ok(emu)
    }

    /// The FUSE mount point (the image files are directly inside).
    pub fn mount_point(&self) -> &Path {
        &self.mnt
    }

    pub fn profile(&self) -> &Profile {
        &self.shared.profile
    }

    pub fn counters(&self) -> EmuCounters {
        self.shared.counters()
    }

    /// Whether the watchdog had to abort the connection.
    pub fn aborted(&self) -> bool {
        self.shared.aborted.load(Ordering::SeqCst)
    }

    /// The FUSE connection's number (its directory under /sys/fs/fuse/connections).
    pub fn connection(&self) -> u32 {
        self.conn
    }

    /// Keep each block request of loop device `dev` within one FUSE request.
    pub fn cap_requests(dev: &str) -> Result<(), String> {
        let name = dev.trim_start_matches("/dev/");
        let p = format!("/sys/block/{name}/queue/max_sectors_kb");
        let cur: u64 = fs::read_to_string(&p)
            .map_err(|e| format!("{p}: {e}"))?
            .trim()
            .parse()
            .map_err(|_| format!("{p}: not a number"))?;
        let want = u64::from(MAX_REQUEST / 1024);
        if cur > want {
            fs::write(&p, want.to_string()).map_err(|e| format!("{p}: {e}"))?;
        }
        Ok(())
    }

    /// Measure this machine's own round trip per request through loop device `dev`
    /// (attached to one of this emulator's files; its first 64 KiB are overwritten) and
    /// install it as the credit. Writes and flushes are probed separately: a flush
    /// crosses the loop worker and FUSE like a write but carries no data.
    pub fn calibrate(&self, dev: &str) -> Result<Calibration, String> {
        use rustix::fs::{Mode, OFlags};
        let s = &self.shared;
        let n = self.probes.max(4) as usize;
        let fd = rustix::fs::open(dev, OFlags::WRONLY | OFlags::DIRECT, Mode::empty())
            .map_err(|e| format!("{dev}: open O_DIRECT: {e}"))?;
        // O_DIRECT wants an aligned buffer: take the 4 KiB-aligned window of a larger one.
        let raw = vec![0x5au8; 8192];
        let off = raw.as_ptr().align_offset(4096).min(4096);
        let buf = &raw[off..off + 4096];
        let write = |i: usize| -> Result<Duration, String> {
            let t = Instant::now();
            let w = rustix::io::pwrite(&fd, buf, (i % 16 * 4096) as u64)
                .map_err(|e| format!("{dev}: probe write: {e}"))?;
            if w != buf.len() {
                return Err(format!("{dev}: short probe write ({w})"));
            }
            Ok(t.elapsed())
        };
        let flush = || -> Result<Duration, String> {
            let t = Instant::now();
            rustix::fs::fdatasync(&fd).map_err(|e| format!("{dev}: probe flush: {e}"))?;
            Ok(t.elapsed())
        };
        let us = |d: Duration| d.as_secs_f64() * 1e6;
        let probe = |count: usize| -> Result<(f64, f64), String> {
            let (mut w, mut f) = (Vec::new(), Vec::new());
            for i in 0..count {
                w.push(us(write(i)?));
                f.push(us(flush()?));
            }
            Ok((
                crate::report::median(&w).unwrap_or(0.0),
                crate::report::median(&f).unwrap_or(0.0),
            ))
        };
        s.write_credit_ns.store(0, Ordering::SeqCst);
        s.flush_credit_ns.store(0, Ordering::SeqCst);
        let before = s.counters();
        probe(4)?; // warm-up: first touches of the loop worker and the daemon
        let wc = charge_ns(&s.profile, Kind::Write, 4096) as f64 / 1e3;
        let fc = charge_ns(&s.profile, Kind::Flush, 0) as f64 / 1e3;
        // A burst of load can still cover a whole probe round: probe again (a few
        // times, after a pause) while the overhead looks implausible, keep the lowest.
        let (mut wp, mut fp) = probe(n)?;
        let mut issued = 4 + n as u64;
        let mut rounds = 1;
        while rounds < CALIBRATION_ROUNDS
            && (wp - wc > wc * MAX_CREDIT_SHARE || fp - fc > fc * MAX_CREDIT_SHARE)
        {
            std::thread::sleep(Duration::from_millis(300));
            let (w2, f2) = probe(n)?;
            (wp, fp) = (wp.min(w2), fp.min(f2));
            issued += n as u64;
            rounds += 1;
        }
        let after = s.counters();
        if after.writes - before.writes != issued || after.flushes - before.flushes != issued {
            return Err(format!(
                "calibration: {issued} writes + {issued} flushes on {dev} reached the \
                 emulator as {} writes + {} flushes (loop device not one-to-one?)",
                after.writes - before.writes,
                after.flushes - before.flushes
            ));
        }
        // A credit never goes negative, and never exceeds a share of the charge it is
        // taken from: a machine too busy to measure must not make the device free.
        let wcred = (wp - wc).clamp(0.0, wc * MAX_CREDIT_SHARE);
        let fcred = (fp - fc).clamp(0.0, fc * MAX_CREDIT_SHARE);
        let capped = wcred < wp - wc || fcred < fp - fc;
        s.write_credit_ns
            .store((wcred * 1e3) as u64, Ordering::SeqCst);
        s.flush_credit_ns
            .store((fcred * 1e3) as u64, Ordering::SeqCst);
        let (wk, fk) = probe(n / 2)?;
        Ok(Calibration {
            profile: s.profile.name.to_string(),
            write_credit_us: wcred,
            flush_credit_us: fcred,
            write_probe_us: wp,
            write_charge_us: wc,
            flush_probe_us: fp,
            flush_charge_us: fc,
            write_check_us: wk,
            flush_check_us: fk,
            probes: n as u32,
            rounds,
            capped,
            path_overhead_us: 0.0,
            path_txn_us: 0.0,
            path_charge_us: 0.0,
        })
    }

    /// Second calibration stage, once the file system is mounted at `dir`: the raw
    /// probes of `calibrate` miss the machine's time inside ext4 and its writeback, which
    /// every transaction pays too. Time 4 KiB overwrite + `fdatasync` transactions on a
    /// scratch file with no credit, take the time beyond the charges per request (the
    /// lowest of a few rounds: load only adds), and install it as the credit: a write
    /// takes up to its cap, the rest of the pair's share goes to the flush (each such
    /// transaction is one write and one flush). The scratch file is removed and the file
    /// system synced, so nothing of this lands in a measurement.
    pub fn calibrate_path(&self, dir: &Path, cal: &mut Calibration) -> Result<(), String> {
        let s = &self.shared;
        let path = dir.join(".inpage-emu-calibration");
        let err = |e: std::io::Error| format!("{}: {e}", path.display());
        let f = fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .open(&path)
            .map_err(err)?;
        f.write_all_at(&[0u8; 4096], 0).map_err(err)?;
        f.sync_all().map_err(err)?;
        let n = (self.probes.max(4) / 2) as u64;
        // One round: (ns per transaction end to end, ns charged per transaction, requests).
        let round = |i: u8| -> Result<(f64, f64, u64), String> {
            let c0 = s.counters();
            let r0 = s.served.load(Ordering::SeqCst);
            let t = Instant::now();
            for _ in 0..n {
                f.write_all_at(&[i; 4096], 0).map_err(err)?;
                f.sync_data().map_err(err)?;
            }
            let e2e = t.elapsed().as_nanos() as f64;
            let charged = (s.counters().charged_ns - c0.charged_ns) as f64;
            let reqs = s.served.load(Ordering::SeqCst) - r0;
            Ok((e2e / n as f64, charged / n as f64, reqs))
        };
        let (wc, fc) = (cal.write_charge_us, cal.flush_charge_us);
        s.write_credit_ns.store(0, Ordering::SeqCst);
        s.flush_credit_ns.store(0, Ordering::SeqCst);
        let mut best = f64::INFINITY;
        for i in 0..CALIBRATION_ROUNDS.min(3) as u8 {
            let (e2e, charged, reqs) = round(i)?;
            if reqs == 0 {
                return Err("path calibration: no request reached the emulator".into());
            }
            let per_req = (e2e - charged) * n as f64 / reqs as f64 / 1e3;
            best = best.min(per_req.max(0.0));
        }
        let wcred = best.min(wc * MAX_CREDIT_SHARE);
        let fcred = (2.0 * best - wcred).min(fc * MAX_CREDIT_SHARE);
        cal.capped |= wcred + fcred < 2.0 * best;
        cal.write_credit_us = wcred;
        cal.flush_credit_us = fcred;
        cal.path_overhead_us = best;
        self.set_credit(wcred, fcred);
        let (e2e, charged, _) = round(9)?;
        cal.path_txn_us = e2e / 1e3;
        cal.path_charge_us = charged / 1e3;
        drop(f);
        fs::remove_file(&path).map_err(err)?;
        let d = fs::File::open(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        rustix::fs::syncfs(&d).map_err(|e| format!("{}: syncfs: {e}", dir.display()))?;
        Ok(())
    }

    /// Test hook: from now on every request hangs (a stalled daemon), until the watchdog
    /// or `stop` aborts the connection.
    #[doc(hidden)]
    pub fn inject_stall(&self) {
        self.shared.stall.store(true, Ordering::SeqCst);
    }

    /// Install credits measured earlier (e.g. to compare runs with the same credit).
    pub fn set_credit(&self, write_us: f64, flush_us: f64) {
        let ns = |us: f64| (us.max(0.0) * 1e3) as u64;
        self.shared
            .write_credit_ns
            .store(ns(write_us), Ordering::SeqCst);
        self.shared
            .flush_credit_ns
            .store(ns(flush_us), Ordering::SeqCst);
    }

    /// Unmount and stop the daemon; idempotent. The loop devices on our files must be
    /// detached first (else the unmount is lazy and the daemon serves until they go).
    pub fn stop(&mut self) -> Result<(), String> {
        let mut errs = Vec::new();
        self.shared.unmounting.store(true, Ordering::SeqCst);
        if self.mounted {
            let p = self.mnt.to_string_lossy().to_string();
            let mut ok = false;
            for _ in 0..10 {
                if run("umount", &[&p]).is_ok() || !crate::device::is_mounted(&self.mnt) {
                    ok = true;
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            if !ok {
                if let Err(e) = run("umount", &["-l", &p]) {
                    errs.push(e);
                }
            }
            self.mounted = false;
        }
        self.shared.stop.store(true, Ordering::SeqCst);
        if let Some(w) = self.watchdog.take() {
            let _ = w.join();
        }
        let bs = self
            .session
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(bs) = bs {
            // After the unmount the daemon sees the connection end and returns; if it is
            // stuck in a request, abort the connection rather than wait on it.
            let t = Instant::now();
            while !bs.guard.is_finished() && t.elapsed() < Duration::from_secs(2) {
                std::thread::sleep(Duration::from_millis(10));
            }
            if !bs.guard.is_finished() {
                if let Err(e) = abort_connection(self.conn) {
                    errs.push(e);
                }
                self.shared.aborted.store(true, Ordering::SeqCst);
                let t = Instant::now();
                while !bs.guard.is_finished() && t.elapsed() < Duration::from_secs(2) {
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
            if bs.guard.is_finished() {
                let _ = bs.join();
            } else {
                errs.push("FUSE daemon thread did not end; left detached".into());
            }
        }
        if errs.is_empty() {
            Ok(())
        } else {
            Err(errs.join("; "))
        }
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        if let Err(e) = self.stop() {
            eprintln!("emulator stop: {e}");
        }
    }
}

fn run(prog: &str, args: &[&str]) -> Result<(), String> {
    let out = std::process::Command::new(prog)
        .args(args)
        .output()
        .map_err(|e| format!("{prog}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{prog} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

const FUSECTL: &str = "/sys/fs/fuse/connections";

/// Abort FUSE connection `conn` through fusectl, mounting fusectl just for this when it
/// is not mounted (and unmounting it again: we leave only what we found).
pub fn abort_connection(conn: u32) -> Result<(), String> {
    let abort = PathBuf::from(FUSECTL).join(conn.to_string()).join("abort");
    let mut mounted_here = false;
    if !abort.exists() {
        run("mount", &["-t", "fusectl", "fusectl", FUSECTL])?;
        mounted_here = true;
    }
    let r = fs::write(&abort, "1").map_err(|e| format!("{}: {e}", abort.display()));
    if mounted_here {
        let _ = run("umount", &[FUSECTL]);
    }
    r
}

fn watchdog(
    s: &Shared,
    session: &Mutex<Option<fuser::BackgroundSession>>,
    conn: u32,
    limit: Duration,
) {
    let limit_ns = limit.as_nanos() as u64;
    while !s.stop.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(50));
        let since = s.busy_since.load(Ordering::SeqCst);
        let now = s.epoch.elapsed().as_nanos() as u64;
        let stalled = since != 0 && now.saturating_sub(since) > limit_ns;
        let dead = !s.unmounting.load(Ordering::SeqCst)
            && session
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .as_ref()
                .is_some_and(|b| b.guard.is_finished());
        if (stalled || dead) && !s.stop.load(Ordering::SeqCst) {
            let why = if stalled {
                "a request stalled"
            } else {
                "the daemon died"
            };
            // Flag first: the abort fails the waiting request at once, and whoever
            // waited on it may ask right away whether this happened.
            s.aborted.store(true, Ordering::SeqCst);
            match abort_connection(conn) {
                Ok(()) => eprintln!("emulator: {why}; FUSE connection {conn} aborted"),
                Err(e) => eprintln!("emulator: {why}; aborting FUSE connection {conn}: {e}"),
            }
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn emmc_like() -> Profile {
        Profile {
            name: "t",
            write_req_us: 400.0,
            write_mib_s: 40.0,
            flush_us: 2000.0,
            read_req_us: 200.0,
            read_mib_s: 100.0,
            source: "test",
        }
    }

    #[test]
    fn charges_follow_the_profile() {
        let p = emmc_like();
        // 4 KiB at 40 MiB/s = 97.65625 µs on top of the 400 µs request cost.
        assert_eq!(charge_ns(&p, Kind::Write, 4096), 497_656);
        assert_eq!(charge_ns(&p, Kind::Flush, 0), 2_000_000);
        assert_eq!(charge_ns(&p, Kind::Flush, 4096), 2_000_000);
        // 1 MiB read at 100 MiB/s = 10 ms + 200 µs.
        assert_eq!(charge_ns(&p, Kind::Read, 1 << 20), 10_200_000);
        // The emulator charges exactly what the model charges for the same request.
        let c = crate::device::DeviceCounters {
            write_reqs: 1.0,
            write_kib: 4.0,
            flushes: 1.0,
            ..Default::default()
        };
        let model_ns = p.device_us(&c) * 1e3;
        let emu_ns = (charge_ns(&p, Kind::Write, 4096) + charge_ns(&p, Kind::Flush, 0)) as f64;
        assert!((model_ns - emu_ns).abs() < 2.0, "{model_ns} vs {emu_ns}");
        let bad = Profile {
            write_mib_s: 0.0,
            ..emmc_like()
        };
        assert_eq!(charge_ns(&bad, Kind::Write, 4096), 0, "no infinite sleeps");
    }

    #[test]
    fn device_clock_credits_only_idle_arrivals() {
        let t0 = Instant::now() + Duration::from_secs(1);
        let credit = Duration::from_micros(100);
        // Idle device: the request already spent the credit on its way here.
        assert_eq!(start_on_clock(t0, credit, None), t0 - credit);
        let long_ago = t0 - Duration::from_millis(5);
        assert_eq!(start_on_clock(t0, credit, Some(long_ago)), t0 - credit);
        // Queued behind a request that ends later: starts when that one ends.
        let busy = t0 + Duration::from_micros(300);
        assert_eq!(start_on_clock(t0, credit, Some(busy)), busy);
        // Previous ended inside the credit window: no double credit.
        let recent = t0 - Duration::from_micros(40);
        assert_eq!(start_on_clock(t0, credit, Some(recent)), recent);
    }
}
