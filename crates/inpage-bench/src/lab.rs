//! The lab: where the benchmark's files live and how their I/O is observed.
//!
//! `ext4`: a fresh ext4 on a file-backed loop device whose jbd2 journal is on a second loop
//! device, mounted `data=ordered`. Because the two devices are separate, their
//! `/sys/block/loopN/stat` deltas split file-system data (plus in-place metadata) from
//! journal traffic exactly: this is what measures the journaling-of-journal effect
//! instead of assuming it. `ext4-emulated`: the same, with both image files inside the
//! FUSE file system of `emulate` (backing files on tmpfs), which charges a device
//! profile's latencies on every request, so end-to-end times follow the profile; it is
//! calibrated on the data device before mkfs and on the mounted file system after. `none`: a plain directory; only
//! syscall-level counts exist.
//!
//! Invariants:
//! - We only ever detach loop devices we attached (`losetup -f --show` tells us the name)
//!   and only unmount the mount point we created. Every resource is registered in
//!   `ACTIVE` the moment it exists and removed only once released, so cleanup runs on
//!   every exit path: normal end, error (`?` unwinds to `Ext4Lab::drop`), panic (drop
//!   during unwinding) and Ctrl-C (the handler sets a flag the runner polls between
//!   transactions; a second Ctrl-C releases everything in `ACTIVE` from the handler and
//!   exits).
//! - Release order is unmount, then the data device, then the journal device (ext4 holds
//!   both while mounted), then (emulated) the FUSE mount, which the loop devices hold.
//!   The FUSE mount is registered in `ACTIVE` before it exists, like the ext4 mount; its
//!   daemon is a thread of this process, so it dies with it and the kernel then aborts the
//!   connection: no path leaves a request waiting on a daemon that is gone. A busy unmount is retried, then done lazily (`umount -l`) so a
//!   leaked file handle cannot strand a loop device.
//! - mkfs runs with lazy init off and without discard, so no background ext4lazyinit
//!   writes or discards land in a measurement window.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, Once};
use std::time::Duration;

use crate::emulate::{Calibration, EmuOptions, Emulator};

/// Set by the first Ctrl-C; polled by the runner.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Everything attached or mounted and not yet released, for the emergency path.
static ACTIVE: Mutex<Vec<Resource>> = Mutex::new(Vec::new());

#[derive(Clone, Debug, PartialEq, Eq)]
enum Resource {
    Mount(PathBuf),
    Loop(String),
    /// A directory outside the lab dir to remove (the emulator's tmpfs backing files,
    /// which would otherwise hold memory until reboot).
    Dir(PathBuf),
}

fn active() -> std::sync::MutexGuard<'static, Vec<Resource>> {
    // A panic while holding the lock must not stop cleanup.
    ACTIVE.lock().unwrap_or_else(|e| e.into_inner())
}

fn register(r: Resource) {
    active().push(r);
}

fn unregister(r: &Resource) {
    active().retain(|x| x != r);
}

/// Install the SIGINT/SIGTERM/SIGHUP handler once per process. The first signal asks the
/// run to stop at the next transaction boundary (normal cleanup follows); a second one
/// releases every registered mount and loop device right away and exits with 130.
/// SIGTERM must be caught too: left to its default it kills the emulated device's FUSE
/// daemon thread while another thread of the process waits in an fdatasync that the
/// daemon would have answered, and that thread can then never exit (nor the process
/// close /dev/fuse), so the mounts stayed until the connection was aborted by hand.
pub fn install_interrupt_handler() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let r = ctrlc::set_handler(|| {
            if INTERRUPTED.swap(true, Ordering::SeqCst) {
                emergency_cleanup();
                std::process::exit(130);
            }
            eprintln!("\ninterrupted: stopping and cleaning up (Ctrl-C again to force)");
        });
        if let Err(e) = r {
            // Another handler (e.g. the embedding program's) stays in charge; Drop guards
            // still clean up on every ordinary exit path.
            eprintln!("note: no Ctrl-C handler installed: {e}");
        }
    });
}

/// `Err` once Ctrl-C was pressed.
pub fn check_interrupted() -> Result<(), String> {
    if INTERRUPTED.load(Ordering::Relaxed) {
        Err("interrupted".into())
    } else {
        Ok(())
    }
}

fn emergency_cleanup() {
    let list: Vec<Resource> = active().clone();
    for r in list.iter().rev() {
        match r {
            Resource::Mount(p) => {
                let _ = Command::new("umount").arg("-l").arg(p).status();
            }
            Resource::Loop(d) => {
                let _ = Command::new("losetup").arg("-d").arg(d).status();
            }
            Resource::Dir(p) => {
                let _ = fs::remove_dir_all(p);
            }
        }
    }
}

/// Run a command, turning a failure into a one-line error with its stderr.
fn run_cmd(prog: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(prog)
        .args(args)
        .output()
        .map_err(|e| format!("{prog}: {e}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(format!(
            "{prog} {}: {} ({})",
            args.join(" "),
            err.trim(),
            out.status
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Whether we run as root.
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// Whether an ext4 lab can be built here: root, loop devices and the tools.
pub fn ext4_available() -> Result<(), String> {
    if !is_root() {
        return Err("not root".into());
    }
    if !Path::new("/dev/loop-control").exists() {
        return Err("no /dev/loop-control (loop devices unavailable)".into());
    }
    for tool in ["losetup", "mke2fs", "mkfs.ext4", "mount", "umount"] {
        let found = std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
            .unwrap_or(false);
        if !found {
            return Err(format!("{tool} not found in PATH"));
        }
    }
    Ok(())
}

// ------------------------------------------------------------------- block device stats

pub use crate::device::DevStat;

/// Parse the one line of `/sys/block/<dev>/stat`.
pub fn parse_block_stat(s: &str) -> Result<DevStat, String> {
    let f: Vec<u64> = s
        .split_whitespace()
        .map(|x| {
            x.parse::<u64>()
                .map_err(|_| format!("bad block stat field '{x}'"))
        })
        .collect::<Result<_, _>>()?;
    if f.len() < 11 {
        return Err(format!(
            "block stat has {} fields, expected at least 11",
            f.len()
        ));
    }
    Ok(DevStat {
        reads: f[0],
        sectors_read: f[2],
        writes: f[4],
        sectors_written: f[6],
        flushes: f.get(15).copied(),
    })
}

/// Read the stats of `/dev/loopN`.
pub fn read_dev_stat(dev: &str) -> Result<DevStat, String> {
    let name = dev.trim_start_matches("/dev/");
    let p = format!("/sys/block/{name}/stat");
    let s = fs::read_to_string(&p).map_err(|e| format!("{p}: {e}"))?;
    parse_block_stat(&s)
}

/// Counters of `/proc/self/io` (whole process, all threads).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProcIo {
    /// Bytes passed to write-like syscalls.
    pub wchar: u64,
    /// Write-like syscalls.
    pub syscw: u64,
    /// Bytes returned by read-like syscalls (page cache hits included).
    pub rchar: u64,
}

impl ProcIo {
    pub fn delta(&self, e: &ProcIo) -> ProcIo {
        ProcIo {
            wchar: self.wchar.saturating_sub(e.wchar),
            syscw: self.syscw.saturating_sub(e.syscw),
            rchar: self.rchar.saturating_sub(e.rchar),
        }
    }
}

/// Parse `/proc/self/io`.
pub fn parse_proc_io(s: &str) -> Result<ProcIo, String> {
    let mut wchar = None;
    let mut syscw = None;
    let mut rchar = None;
    for line in s.lines() {
        let mut it = line.splitn(2, ':');
        let (k, v) = (it.next().unwrap_or(""), it.next().unwrap_or("").trim());
        let v = || {
            v.parse::<u64>()
                .map_err(|_| format!("bad /proc/self/io value '{v}'"))
        };
        match k {
            "wchar" => wchar = Some(v()?),
            "syscw" => syscw = Some(v()?),
            "rchar" => rchar = Some(v()?),
            _ => {}
        }
    }
    match (wchar, syscw, rchar) {
        (Some(wchar), Some(syscw), Some(rchar)) => Ok(ProcIo {
            wchar,
            syscw,
            rchar,
        }),
        _ => Err("/proc/self/io lacks wchar/syscw/rchar".into()),
    }
}

/// `/proc/self/io` now, or `None` where the kernel does not offer it.
pub fn read_proc_io() -> Option<ProcIo> {
    fs::read_to_string("/proc/self/io")
        .ok()
        .and_then(|s| parse_proc_io(&s).ok())
}

/// `sync`, then drop the page cache where allowed (root). Returns whether the cache was
/// dropped. Dropping needs the sync first: only clean pages are dropped.
pub fn settle() -> bool {
    rustix::fs::sync();
    fs::write("/proc/sys/vm/drop_caches", "3").is_ok()
}

/// `sync`, then read every regular file directly in `dir` to its end, so all their
/// pages are in the page cache (the warm-cache state of a recovery trial). Returns the
/// bytes read.
pub fn prefetch_dir(dir: &Path) -> Result<u64, String> {
    rustix::fs::sync();
    let err = |p: &Path, e: std::io::Error| format!("{}: {e}", p.display());
    let mut total = 0;
    for ent in fs::read_dir(dir).map_err(|e| err(dir, e))? {
        let ent = ent.map_err(|e| err(dir, e))?;
        if ent.file_type().map_err(|e| err(dir, e))?.is_file() {
            let p = ent.path();
            let mut f = fs::File::open(&p).map_err(|e| err(&p, e))?;
            total += std::io::copy(&mut f, &mut std::io::sink()).map_err(|e| err(&p, e))?;
        }
    }
    Ok(total)
}

// ---------------------------------------------------------------------------- ext4 lab

/// Steps of building an ext4 lab, in order (also the places a test can make it fail).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum SetupStep {
    /// Emulated lab: the FUSE file system is mounted.
    Fuse,
    Images,
    AttachData,
    /// Emulated lab: the per-request credit is measured on the data device.
    Calibrate,
    AttachJournal,
    MkfsJournal,
    MkfsData,
    Mount,
    /// Emulated lab: the credit is re-measured through the mounted file system.
    CalibratePath,
}

/// How to build an ext4 lab.
#[derive(Clone, Debug)]
pub struct Ext4Options {
    /// Data device size.
    pub data_mib: u64,
    /// Journal device size (jbd2 needs at least 1024 blocks of 4 KiB).
    pub journal_mib: u64,
    /// Where the image files and the mount point go (a fresh temp dir is made inside).
    pub base: PathBuf,
    /// Put the image files on the emulated slow device (`emulate`) with these options.
    pub emulate: Option<EmuOptions>,
    /// Test hook: fail right after this step, as a real failure there would.
    #[doc(hidden)]
    pub fail_after: Option<SetupStep>,
}

impl Default for Ext4Options {
    fn default() -> Self {
        Ext4Options {
            data_mib: 256,
            journal_mib: 32,
            base: PathBuf::from("/var/tmp"),
            emulate: None,
            fail_after: None,
        }
    }
}

/// A mounted ext4 lab; dropping it unmounts and detaches everything it created.
#[derive(Debug)]
pub struct Ext4Lab {
    tmp: Option<tempfile::TempDir>,
    mnt: PathBuf,
    data_dev: Option<String>,
    journal_dev: Option<String>,
    mounted: bool,
    /// Boxed: the emulated lab is the rare case, `Lab` stays small for the common one.
    emu: Option<Box<Emulator>>,
    calibration: Option<Box<Calibration>>,
    /// The emulator's backing files when on tmpfs (outside `tmp`).
    backing_tmp: Option<tempfile::TempDir>,
}

impl Ext4Lab {
    /// Build and mount a fresh lab. On any failure, whatever was created is released
    /// before the error returns (by `Drop`).
    pub fn create(o: &Ext4Options) -> Result<Ext4Lab, String> {
        ext4_available()?;
        if o.data_mib < 16 || o.journal_mib < 8 {
            return Err("lab sizes too small (data >= 16 MiB, journal >= 8 MiB)".into());
        }
        fs::create_dir_all(&o.base).map_err(|e| format!("{}: {e}", o.base.display()))?;
        let tmp = tempfile::Builder::new()
            .prefix("inpage-lab-")
            .tempdir_in(&o.base)
            .map_err(|e| format!("temp dir in {}: {e}", o.base.display()))?;
        let mut lab = Ext4Lab {
            mnt: tmp.path().join("mnt"),
            tmp: Some(tmp),
            data_dev: None,
            journal_dev: None,
            mounted: false,
            emu: None,
            calibration: None,
            backing_tmp: None,
        };
        let fail = |s: SetupStep| -> Result<(), String> {
            if o.fail_after == Some(s) {
                Err(format!("injected failure after {s:?}"))
            } else {
                Ok(())
            }
        };
        let root = lab
            .tmp
            .as_ref()
            .map(|t| t.path().to_path_buf())
            .unwrap_or_default();
        let (img_dir, direct) = match &o.emulate {
            None => (root.clone(), false),
            Some(eo) => {
                // Backing files on tmpfs when there is one: the daemon's writes then never
                // wait on this machine's own disk writeback, which would add its latency
                // to the profile's. Owned by the lab, removed after the emulator stops.
                let shm = Path::new("/dev/shm");
                lab.backing_tmp = if shm.is_dir() {
                    tempfile::Builder::new()
                        .prefix("inpage-emu-")
                        .tempdir_in(shm)
                        .ok()
                } else {
                    None
                };
                if let Some(t) = &lab.backing_tmp {
                    register(Resource::Dir(t.path().to_path_buf()));
                }
                let fmnt = root.join("fuse");
                fs::create_dir(&fmnt).map_err(|e| format!("{}: {e}", fmnt.display()))?;
                let backing = match &lab.backing_tmp {
                    Some(t) => t.path().to_path_buf(),
                    None => {
                        let b = root.join("backing");
                        fs::create_dir(&b).map_err(|e| format!("{}: {e}", b.display()))?;
                        b
                    }
                };
                let files = [
                    ("data.img", o.data_mib << 20),
                    ("journal.img", o.journal_mib << 20),
                ];
                let emu = Emulator::start(&fmnt, &backing, &files, eo, |m| {
                    register(Resource::Mount(m.to_path_buf()))
                });
                match emu {
                    Ok(e) => lab.emu = Some(Box::new(e)),
                    Err(e) => {
                        unregister(&Resource::Mount(fmnt.clone()));
                        return Err(e);
                    }
                }
                fail(SetupStep::Fuse)?;
                (fmnt, true)
            }
        };
        let data_img = img_dir.join("data.img");
        let jrnl_img = img_dir.join("journal.img");
        if !direct {
            for (p, mib) in [(&data_img, o.data_mib), (&jrnl_img, o.journal_mib)] {
                let f = fs::File::create(p).map_err(|e| format!("{}: {e}", p.display()))?;
                f.set_len(mib << 20)
                    .map_err(|e| format!("{}: {e}", p.display()))?;
            }
        }
        fs::create_dir(&lab.mnt).map_err(|e| format!("{}: {e}", lab.mnt.display()))?;
        fail(SetupStep::Images)?;

        lab.data_dev = Some(attach(&data_img, direct)?);
        fail(SetupStep::AttachData)?;
        if let (Some(emu), Some(d)) = (&lab.emu, &lab.data_dev) {
            lab.calibration = Some(Box::new(emu.calibrate(d)?));
        }
        fail(SetupStep::Calibrate)?;
        lab.journal_dev = Some(attach(&jrnl_img, direct)?);
        fail(SetupStep::AttachJournal)?;
        let (ddev, jdev) = (
            lab.data_dev.clone().unwrap_or_default(),
            lab.journal_dev.clone().unwrap_or_default(),
        );

        run_cmd(
            "mke2fs",
            &["-q", "-F", "-O", "journal_dev", "-b", "4096", &jdev],
        )?;
        fail(SetupStep::MkfsJournal)?;
        let jopt = format!("device={jdev}");
        run_cmd(
            "mkfs.ext4",
            &[
                "-q",
                "-F",
                "-b",
                "4096",
                "-J",
                &jopt,
                "-E",
                "lazy_itable_init=0,lazy_journal_init=0,nodiscard",
                &ddev,
            ],
        )?;
        fail(SetupStep::MkfsData)?;
        let mnt = lab.mnt.to_string_lossy().to_string();
        // Register before mounting: if mount succeeds and we die right after, the
        // emergency path still knows about it (umount of a non-mount is harmless).
        register(Resource::Mount(lab.mnt.clone()));
        lab.mounted = true;
        if let Err(e) = run_cmd("mount", &["-t", "ext4", "-o", "data=ordered", &ddev, &mnt]) {
            lab.mounted = is_mounted(&lab.mnt);
            if !lab.mounted {
                unregister(&Resource::Mount(lab.mnt.clone()));
            }
            return Err(e);
        }
        fail(SetupStep::Mount)?;
        if let (Some(emu), Some(c)) = (&lab.emu, &mut lab.calibration) {
            emu.calibrate_path(&lab.mnt, c)?;
            eprintln!(
                "note: emulated '{}' device: raw probes {:.0} µs per write (profile {:.0}), \
                 {:.0} µs per flush (profile {:.0}); through ext4 the machine adds {:.0} µs \
                 per request; credit {:.0} µs (write) + {:.0} µs (flush); a 4 KiB \
                 overwrite + fdatasync now takes {:.0} µs (profile {:.0})",
                c.profile,
                c.write_probe_us,
                c.write_charge_us,
                c.flush_probe_us,
                c.flush_charge_us,
                c.path_overhead_us,
                c.write_credit_us,
                c.flush_credit_us,
                c.path_txn_us,
                c.path_charge_us
            );
            if c.capped {
                eprintln!(
                    "warning: the machine was too busy to calibrate the emulated device; \
                     its times will run above the profile"
                );
            }
            fail(SetupStep::CalibratePath)?;
        }
        Ok(lab)
    }

    /// The mounted file system's root.
    pub fn mount_point(&self) -> &Path {
        &self.mnt
    }

    /// The emulator under the image files (`ext4-emulated` only).
    pub fn emulator(&self) -> Option<&Emulator> {
        self.emu.as_deref()
    }

    /// The emulator's calibration (`ext4-emulated` only).
    pub fn calibration(&self) -> Option<&Calibration> {
        self.calibration.as_deref()
    }

    /// Device names (data, journal), e.g. "/dev/loop3".
    pub fn devices(&self) -> (Option<&str>, Option<&str>) {
        (self.data_dev.as_deref(), self.journal_dev.as_deref())
    }

    /// (data, journal) device counters now.
    pub fn stats(&self) -> Result<(DevStat, DevStat), String> {
        let d = self.data_dev.as_deref().ok_or("lab has no data device")?;
        let j = self
            .journal_dev
            .as_deref()
            .ok_or("lab has no journal device")?;
        Ok((read_dev_stat(d)?, read_dev_stat(j)?))
    }

    /// Release everything; idempotent. Errors are collected, never stop later steps.
    pub fn cleanup(&mut self) -> Result<(), String> {
        let mut errs = Vec::new();
        if self.mounted {
            let p = self.mnt.to_string_lossy().to_string();
            let mut ok = false;
            for _ in 0..10 {
                if run_cmd("umount", &[&p]).is_ok() || !is_mounted(&self.mnt) {
                    ok = true;
                    break;
                }
                std::thread::sleep(Duration::from_millis(200));
            }
            if !ok {
                // Something still holds a file: detach lazily so the devices can go.
                if let Err(e) = run_cmd("umount", &["-l", &p]) {
                    errs.push(e);
                }
            }
            self.mounted = false;
            unregister(&Resource::Mount(self.mnt.clone()));
        }
        for dev in [self.data_dev.take(), self.journal_dev.take()]
            .into_iter()
            .flatten()
        {
            if let Err(e) = detach(&dev) {
                errs.push(e);
            }
        }
        if let Some(mut emu) = self.emu.take() {
            let r = emu.stop();
            unregister(&Resource::Mount(emu.mount_point().to_path_buf()));
            if let Err(e) = r {
                errs.push(e);
            }
        }
        if let Some(t) = self.backing_tmp.take() {
            unregister(&Resource::Dir(t.path().to_path_buf()));
            if let Err(e) = t.close() {
                errs.push(format!("removing emulator backing dir: {e}"));
            }
        }
        if let Some(t) = self.tmp.take() {
            if let Err(e) = t.close() {
                errs.push(format!("removing lab dir: {e}"));
            }
        }
        if errs.is_empty() {
            Ok(())
        } else {
            Err(errs.join("; "))
        }
    }
}

impl Drop for Ext4Lab {
    fn drop(&mut self) {
        if let Err(e) = self.cleanup() {
            eprintln!("lab cleanup: {e}");
        }
    }
}

/// Attach `img` to a free loop device. `direct`: with direct I/O (the emulated lab), so
/// each block request reaches the backing file as one request, capped to one FUSE
/// request's size.
fn attach(img: &Path, direct: bool) -> Result<String, String> {
    let p = img.to_string_lossy().to_string();
    let mut args = vec!["-f", "--show"];
    if direct {
        args.push("--direct-io=on");
    }
    args.push(&p);
    let dev = run_cmd("losetup", &args)?;
    if !dev.starts_with("/dev/loop") {
        return Err(format!("losetup returned '{dev}'"));
    }
    register(Resource::Loop(dev.clone()));
    if direct {
        if let Err(e) = Emulator::cap_requests(&dev) {
            // Not yet owned by the lab: release it here.
            let _ = detach(&dev);
            return Err(e);
        }
    }
    Ok(dev)
}

fn detach(dev: &str) -> Result<(), String> {
    let mut last = String::new();
    // The kernel may still hold the device for a moment after unmount.
    for _ in 0..10 {
        match run_cmd("losetup", &["-d", dev]) {
            Ok(_) => {
                unregister(&Resource::Loop(dev.to_string()));
                return Ok(());
            }
            Err(e) => last = e,
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Err(last)
}

pub use crate::device::is_mounted;

// ------------------------------------------------------------------------- lab choice

/// Where a run's files live.
pub enum Lab {
    Ext4(Ext4Lab),
    /// A plain directory (kept alive by the temp dir when we made it).
    Dir {
        path: PathBuf,
        _tmp: Option<tempfile::TempDir>,
    },
}

impl Lab {
    pub fn name(&self) -> &'static str {
        match self {
            Lab::Ext4(l) if l.emulator().is_some() => "ext4-emulated",
            Lab::Ext4(_) => "ext4",
            Lab::Dir { .. } => "none",
        }
    }

    /// A plain-directory lab in `dir`, or a temp dir under /var/tmp (not /tmp, which may
    /// be tmpfs, where fsync costs nothing).
    pub fn dir(dir: Option<&Path>) -> Result<Lab, String> {
        let (tmp, base) = match dir {
            Some(d) => (None, d.to_path_buf()),
            None => {
                let t = tempfile::Builder::new()
                    .prefix("inpage-bench-")
                    .tempdir_in("/var/tmp")
                    .or_else(|_| tempfile::tempdir())
                    .map_err(|e| format!("temp dir: {e}"))?;
                let p = t.path().to_path_buf();
                (Some(t), p)
            }
        };
        fs::create_dir_all(&base).map_err(|e| format!("{}: {e}", base.display()))?;
        Ok(Lab::Dir {
            path: base,
            _tmp: tmp,
        })
    }

    /// Directory under which trials create their own directories.
    pub fn root(&self) -> &Path {
        match self {
            Lab::Ext4(l) => l.mount_point(),
            Lab::Dir { path, .. } => path,
        }
    }

    /// Device counters (data, journal), ext4 lab only.
    pub fn dev_stats(&self) -> Result<Option<(DevStat, DevStat)>, String> {
        match self {
            Lab::Ext4(l) => l.stats().map(Some),
            Lab::Dir { .. } => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_stat_parsing() {
        let line = "       6        0      192        0       16        6    32880       25        0       28       50        2        0     8194        0        9       24\n";
        let s = parse_block_stat(line).unwrap();
        assert_eq!(s.writes, 16);
        assert_eq!(s.sectors_written, 32880);
        assert_eq!(s.flushes, Some(9));
        assert_eq!((s.reads, s.sectors_read), (6, 192));
        assert!((s.kib() - 16440.0).abs() < 1e-9);
        // Pre-5.5 kernels: 15 fields, no flush counter.
        let old = "1 2 3 4 5 6 7 8 9 10 11 12 13 14 15";
        assert_eq!(parse_block_stat(old).unwrap().flushes, None);
        assert!(parse_block_stat("1 2 3").is_err());
        assert!(parse_block_stat("1 2 x 4 5 6 7 8 9 10 11").is_err());
        let a = parse_block_stat("0 0 0 0 10 0 80 0 0 0 0 0 0 0 0 3 0").unwrap();
        let b = parse_block_stat("0 0 0 0 12 0 96 0 0 0 0 0 0 0 0 5 0").unwrap();
        let d = b.delta(&a);
        assert_eq!((d.writes, d.sectors_written, d.flushes), (2, 16, Some(2)));
        assert_eq!(d.kib(), 8.0);
    }

    #[test]
    fn proc_io_parsing() {
        let s = "rchar: 100\nwchar: 4096\nsyscr: 3\nsyscw: 2\nread_bytes: 0\nwrite_bytes: 8192\ncancelled_write_bytes: 0\n";
        assert_eq!(
            parse_proc_io(s).unwrap(),
            ProcIo {
                wchar: 4096,
                syscw: 2,
                rchar: 100
            }
        );
        assert!(parse_proc_io("rchar: 1\n").is_err());
        assert!(parse_proc_io("wchar: 1\nsyscw: 1\n").is_err());
        assert!(parse_proc_io("wchar: x\nsyscw: 1\n").is_err());
    }
}
