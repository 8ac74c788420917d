//! The emulated slow device, for real: an ext4 lab whose loop devices sit on the FUSE
//! emulator. Needs root, loop devices and FUSE; each test prints why and returns early
//! without them. As in tests/lab.rs, tests run one at a time (LOCK), each under its own
//! temporary directory, and check only loop devices and mounts under that directory.
//! They use the `emmc` profile from the device table with few operations, so each takes
//! about a second.

use std::io::Write as _;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use inpage_bench::device::{profile, DeviceCounters};
use inpage_bench::emulate::{fuse_available, EmuOptions};
use inpage_bench::lab::{ext4_available, Ext4Lab, Ext4Options, SetupStep};

mod common;
use common::{losetup_under, mounts_under};

static LOCK: Mutex<()> = Mutex::new(());

fn skip_reason() -> Option<String> {
    ext4_available().err().or_else(|| fuse_available().err())
}

fn assert_nothing_left(base: &Path, when: &str) {
    assert!(
        losetup_under(base).is_empty(),
        "loop devices left {when}: {:?}",
        losetup_under(base)
    );
    assert!(
        mounts_under(base).is_empty(),
        "mounts left {when}: {:?}",
        mounts_under(base)
    );
    assert_eq!(
        std::fs::read_dir(base).unwrap().count(),
        0,
        "lab dir left {when}"
    );
    // The backing files live on tmpfs, outside `base`; only this crate names them so.
    let shm: Vec<_> = std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with("inpage-emu-"))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default();
    assert!(shm.is_empty(), "backing files left {when}: {shm:?}");
}

fn opts(base: &Path, fail_after: Option<SetupStep>, stall_limit: Duration) -> Ext4Options {
    let mut e = EmuOptions::new(profile("emmc").unwrap());
    e.stall_limit = stall_limit;
    e.calibration_probes = 16;
    Ext4Options {
        data_mib: 32,
        journal_mib: 8,
        base: base.to_path_buf(),
        emulate: Some(e),
        fail_after,
    }
}

#[test]
fn emulated_lab_charges_the_profile_and_leaves_nothing() {
    if let Some(why) = skip_reason() {
        println!("SKIPPED: emulated lab unavailable: {why}");
        return;
    }
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let base = tempfile::tempdir_in("/var/tmp").unwrap();
    let p = profile("emmc").unwrap();
    {
        let lab = Ext4Lab::create(&opts(base.path(), None, Duration::from_secs(10))).unwrap();
        let emu = lab.emulator().expect("emulated lab has an emulator");
        assert!(inpage_bench::lab::is_mounted(emu.mount_point()));
        assert!(inpage_bench::lab::is_mounted(lab.mount_point()));
        assert_eq!(losetup_under(base.path()).len(), 2);
        let cal = lab.calibration().expect("calibrated");
        println!("{cal:?}");
        // The credit gives back at most half a charge: the device is never free.
        assert!(cal.write_credit_us >= 0.0 && cal.write_credit_us <= 0.5 * cal.write_charge_us);
        assert!(cal.flush_credit_us >= 0.0 && cal.flush_credit_us <= 0.5 * cal.flush_charge_us);
        // How close a credited probe comes to the profile is printed, not asserted: it
        // depends on the machine's load (the floor command is the calibration).

        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .open(lab.mount_point().join("x"))
            .unwrap();
        f.write_all_at(&[1u8; 4096], 0).unwrap();
        f.sync_all().unwrap();
        let n = 20u32;
        let (d0, j0) = lab.stats().unwrap();
        let c0 = emu.counters();
        let mut each = Vec::new();
        let t = Instant::now();
        for i in 0..n {
            let t1 = Instant::now();
            f.write_all_at(&[i as u8; 4096], 0).unwrap();
            f.sync_data().unwrap();
            each.push(t1.elapsed());
        }
        let wall = t.elapsed();
        let (d1, j1) = lab.stats().unwrap();
        let c1 = emu.counters();
        let (d, j) = (d1.delta(&d0), j1.delta(&j0));
        let flushes = d.flushes.unwrap_or(0) + j.flushes.unwrap_or(0);
        println!(
            "{n} overwrites+fdatasync: {:.0} µs each; loop devices: {} writes, {:.0} KiB, {flushes} \
             flushes; emulator: {} writes, {} B, {} flushes",
            wall.as_secs_f64() * 1e6 / f64::from(n),
            d.writes + j.writes,
            d.kib() + j.kib(),
            c1.writes - c0.writes,
            c1.write_bytes - c0.write_bytes,
            c1.flushes - c0.flushes,
        );
        // Every write + fdatasync pays at least the profile's flush, by construction of
        // the device clock: the flush arrives only once the data write was answered, and
        // a credit never reaches back past the previous request's end, so only the write
        // (the first request of the burst) can get its credit back.
        let floor = Duration::from_secs_f64(
            (cal.write_charge_us - cal.write_credit_us + cal.flush_charge_us) / 1e6,
        );
        let flush = Duration::from_secs_f64(p.flush_us / 1e6);
        assert!(floor >= flush);
        for (i, e) in each.iter().enumerate() {
            assert!(
                *e >= floor,
                "txn {i} took {e:?} < write less its credit + flush {floor:?}"
            );
        }
        // The emulator saw every flush the block layer completed, and the bytes.
        assert_eq!(
            c1.flushes - c0.flushes,
            flushes,
            "flushes reach the daemon 1:1"
        );
        assert_eq!(
            c1.write_bytes - c0.write_bytes,
            (d.sectors_written + j.sectors_written) * 512,
            "every written byte reaches the daemon"
        );
        // End to end, the run took at least the profile's time for what the daemon
        // served, less at most one credit per request (requests that queued got none).
        // The upper side is the machine's load and is printed, not asserted.
        let served = DeviceCounters {
            write_reqs: (c1.writes - c0.writes) as f64,
            write_kib: (c1.write_bytes - c0.write_bytes) as f64 / 1024.0,
            flushes: (c1.flushes - c0.flushes) as f64,
            ..Default::default()
        };
        let model = p.device_us(&served);
        let credits =
            served.write_reqs * cal.write_credit_us + served.flushes * cal.flush_credit_us;
        let got = wall.as_secs_f64() * 1e6;
        println!(
            "emulated {got:.0} µs vs profile {model:.0} µs for the same requests ({:+.1} %)",
            (got / model - 1.0) * 100.0
        );
        assert!(
            got >= model - credits,
            "emulated {got:.0} µs < profile {model:.0} µs less credits {credits:.0} µs"
        );

        // Appends: each fdatasync also commits the size change through jbd2 on the
        // journal device. Same lower bound, on what the emulator served.
        let g = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(lab.mount_point().join("log"))
            .unwrap();
        let c0 = emu.counters();
        let (d0, j0) = lab.stats().unwrap();
        let t = Instant::now();
        for i in 0..n {
            (&g).write_all(&[i as u8; 4096]).unwrap();
            g.sync_data().unwrap();
        }
        let got = t.elapsed().as_secs_f64() * 1e6;
        let c1 = emu.counters();
        let (d1, j1) = lab.stats().unwrap();
        let (d, j) = (d1.delta(&d0), j1.delta(&j0));
        let (w, fl) = (c1.writes - c0.writes, c1.flushes - c0.flushes);
        let charged = (c1.charged_ns - c0.charged_ns) as f64 / 1e3;
        println!(
            "{n} appends+fdatasync: {:.0} µs each, charged {:.0}; loop data: {} writes, {:.0} \
             KiB, {:?} flushes; loop journal: {} writes, {:.0} KiB, {:?} flushes; emulator: \
             {w} writes, {} B, {fl} flushes",
            got / f64::from(n),
            charged / f64::from(n),
            d.writes,
            d.kib(),
            d.flushes,
            j.writes,
            j.kib(),
            j.flushes,
            c1.write_bytes - c0.write_bytes,
        );
        let credits = w as f64 * cal.write_credit_us + fl as f64 * cal.flush_credit_us;
        assert!(
            fl >= u64::from(n),
            "every append's fdatasync reaches the device"
        );
        assert!(
            got >= charged - credits,
            "appends took {got:.0} µs < charged {charged:.0} µs less credits {credits:.0} µs"
        );
        drop(f);
    }
    assert_nothing_left(base.path(), "after a normal end");
}

#[test]
fn emulated_setup_failure_at_every_step_leaves_nothing() {
    if let Some(why) = skip_reason() {
        println!("SKIPPED: emulated lab unavailable: {why}");
        return;
    }
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let base = tempfile::tempdir_in("/var/tmp").unwrap();
    for step in [
        SetupStep::Fuse,
        SetupStep::Images,
        SetupStep::AttachData,
        SetupStep::Calibrate,
        SetupStep::AttachJournal,
        SetupStep::MkfsJournal,
        SetupStep::MkfsData,
        SetupStep::Mount,
        SetupStep::CalibratePath,
    ] {
        let e =
            Ext4Lab::create(&opts(base.path(), Some(step), Duration::from_secs(10))).unwrap_err();
        assert!(e.contains("injected"), "{step:?}: {e}");
        assert_nothing_left(base.path(), &format!("after failing at {step:?}"));
    }
}

#[test]
fn stalled_daemon_is_aborted_and_teardown_completes() {
    if let Some(why) = skip_reason() {
        println!("SKIPPED: emulated lab unavailable: {why}");
        return;
    }
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let base = tempfile::tempdir_in("/var/tmp").unwrap();
    {
        let lab = Ext4Lab::create(&opts(base.path(), None, Duration::from_secs(1))).unwrap();
        let emu = lab.emulator().unwrap();
        let path = lab.mount_point().join("y");
        let mut f = std::fs::File::create(&path).unwrap();
        f.write_all(&[7u8; 4096]).unwrap();
        f.sync_all().unwrap();
        emu.inject_stall();
        let t = Instant::now();
        // The device never answers: without the watchdog this fsync would wait forever.
        f.write_all(&[8u8; 4096]).unwrap();
        let r = f.sync_all();
        let waited = t.elapsed();
        println!("fsync on a stalled device returned {r:?} after {waited:?}");
        // What matters is that the call returns and the watchdog aborted the connection.
        // Whether ext4 passes the aborted request's error up to this fsync depends on
        // which request was in flight (a failed cache flush of a loop device is not always
        // reported), so the result itself is only printed.
        let _ = r;
        assert!(emu.aborted(), "the watchdog aborted the connection");
        assert!(waited >= Duration::from_secs(1), "{waited:?}");
        assert!(waited < Duration::from_secs(30), "{waited:?}");
        drop(f);
    }
    assert_nothing_left(base.path(), "after a stalled daemon");
}

#[test]
fn panic_with_emulated_lab_leaves_nothing() {
    if let Some(why) = skip_reason() {
        println!("SKIPPED: emulated lab unavailable: {why}");
        return;
    }
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let base = tempfile::tempdir_in("/var/tmp").unwrap();
    let r = std::panic::catch_unwind(|| {
        let lab = Ext4Lab::create(&opts(base.path(), None, Duration::from_secs(10))).unwrap();
        let _f = std::fs::File::create(lab.mount_point().join("z")).unwrap();
        panic!("body failed");
    });
    assert!(r.is_err());
    assert_nothing_left(base.path(), "after a panic");
}
