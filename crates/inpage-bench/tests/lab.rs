//! The ext4 lab, for real: the journaling-of-journal effect measured on loop devices, and
//! cleanup of every loop device and mount on failure. Needs root and loop devices; each
//! test prints why and returns early without them. Tests here share the machine's loop
//! devices, so they run one at a time (LOCK). Each test puts its lab under its own
//! temporary directory and checks only loop devices and mounts backed by or under that
//! directory, so another lab running on the machine (a benchmark, another checkout's
//! tests) cannot make it fail.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Mutex;

use clap::Parser;
use inpage_bench::lab::{ext4_available, Ext4Lab, Ext4Options, SetupStep};
use inpage_bench::report::Report;

mod common;
use common::{losetup_under, mounts_under};

static LOCK: Mutex<()> = Mutex::new(());

#[derive(Parser)]
struct Top {
    #[command(subcommand)]
    cmd: inpage_bench::BenchCmd,
}

fn skip_reason() -> Option<String> {
    ext4_available().err()
}

fn opts(base: &std::path::Path, fail_after: Option<SetupStep>) -> Ext4Options {
    Ext4Options {
        data_mib: 64,
        journal_mib: 16,
        base: base.to_path_buf(),
        emulate: None,
        fail_after,
    }
}

#[test]
fn journaling_of_journal_is_measured() {
    if let Some(why) = skip_reason() {
        println!("SKIPPED: ext4 lab unavailable: {why}");
        return;
    }
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let base = tempfile::tempdir_in("/var/tmp").unwrap();
    let out = tempfile::tempdir().unwrap();
    let json = out.path().join("r.json");
    let t = Top::try_parse_from([
        "x",
        "mobibench",
        "--lab",
        "ext4",
        "--dir",
        base.path().to_str().unwrap(),
        "--lab-mib",
        "128",
        "--contenders",
        "floor,sqlite-delete,sqlite-wal",
        "--op",
        "insert",
        "--txns",
        "100",
        "--rounds",
        "3",
        // The cold start, where SQLite's growing WAL pays the file system's journal.
        "--warmup",
        "0",
        "--json",
        json.to_str().unwrap(),
    ])
    .unwrap();
    inpage_bench::run(t.cmd).unwrap();
    let r: Report = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(r.lab, "ext4");
    let row = |c: &str| {
        r.results
            .iter()
            .find(|x| x.contender == c && x.workload == "mobibench-cold")
            .unwrap_or_else(|| panic!("no row for {c}"))
    };
    let (del, wal, floor) = (row("sqlite-delete"), row("sqlite-wal"), row("floor"));
    let j = |x: &inpage_bench::report::ResultRow| x.journal_kib_per_txn.unwrap();
    let fl = |x: &inpage_bench::report::ResultRow| x.flushes_per_txn.unwrap();
    println!(
        "journal KiB/txn: delete {:.1} wal {:.1} floor {:.2}; flushes/txn: delete {:.2} wal {:.2} floor {:.2}",
        j(del), j(wal), j(floor), fl(del), fl(wal), fl(floor)
    );
    assert!(
        j(del) > j(wal),
        "sqlite-delete journals more than sqlite-wal"
    );
    assert!(
        fl(del) > fl(wal),
        "sqlite-delete flushes more than sqlite-wal"
    );
    assert!(
        (fl(floor) - 1.0).abs() < 0.01,
        "floor: one flush per commit"
    );
    assert!(j(floor) < 0.01, "floor: no jbd2 traffic");
    assert!(floor.data_kib_per_txn.unwrap() >= 4.0);
    assert_eq!(wal.ratio_to_baseline, Some(1.0));
    assert!(
        losetup_under(base.path()).is_empty(),
        "loop devices left behind"
    );
    assert!(mounts_under(base.path()).is_empty(), "mounts left behind");
}

/// The recovery size axis in the ext4 lab: a cold open reads the database from the data
/// device (at least its header page; the whole file for a store that scans it), a warm
/// one finds its pages cached, so it reads less from the device than the cold one; the
/// lab grown for the tables is released.
#[test]
fn recovery_cold_opens_read_the_device_warm_ones_less() {
    if let Some(why) = skip_reason() {
        println!("SKIPPED: ext4 lab unavailable: {why}");
        return;
    }
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let base = tempfile::tempdir_in("/var/tmp").unwrap();
    let out = tempfile::tempdir().unwrap();
    let json = out.path().join("r.json");
    // Through the dev binary: the crash child is spawned as `current_exe() bench
    // recovery-child`, which a test harness binary cannot serve.
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_inpage-bench-dev"))
        .args([
            "bench",
            "recovery",
            "--lab",
            "ext4",
            "--dir",
            base.path().to_str().unwrap(),
            "--lab-mib",
            "64",
            "--contenders",
            "dhl-cc,sqlite-wal",
            "--records",
            "200,2000",
            "--ops-per-txn",
            "4",
            "--cache",
            "cold,warm",
            "--rounds",
            "1",
            "--json",
            json.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(!err.contains("warning:"), "{err}");
    let r: Report = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(r.lab, "ext4");
    assert_eq!(r.results.len(), 2 * 2 * 2 * 2);
    for c in ["dhl-cc", "sqlite-wal"] {
        for kind in ["recovery", "reopen"] {
            let get = |w: &str| {
                r.results
                    .iter()
                    .find(|x| x.contender == c && x.workload == w && x.records == Some(2000))
                    .unwrap_or_else(|| panic!("no row {c} {w}"))
                    .read_kib_per_txn
                    .unwrap()
            };
            let (cold, warm) = (get(kind), get(&format!("{kind}-warm")));
            println!("{c} {kind}: device KiB read cold {cold:.0} warm {warm:.0}");
            assert!(cold >= 4.0, "{c} {kind}: a cold open reads the device");
            assert!(warm < cold, "{c} {kind}: warm reads less than cold");
        }
    }
    assert!(
        losetup_under(base.path()).is_empty(),
        "loop devices left behind"
    );
    assert!(mounts_under(base.path()).is_empty(), "mounts left behind");
}

#[test]
fn setup_failure_at_every_step_leaves_nothing() {
    if let Some(why) = skip_reason() {
        println!("SKIPPED: ext4 lab unavailable: {why}");
        return;
    }
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let base = tempfile::tempdir_in("/var/tmp").unwrap();
    for step in [
        SetupStep::Images,
        SetupStep::AttachData,
        SetupStep::AttachJournal,
        SetupStep::MkfsJournal,
        SetupStep::MkfsData,
        SetupStep::Mount,
    ] {
        let e = Ext4Lab::create(&opts(base.path(), Some(step))).unwrap_err();
        assert!(e.contains("injected"), "{step:?}: {e}");
        assert!(
            losetup_under(base.path()).is_empty(),
            "after failing at {step:?}"
        );
        assert!(
            mounts_under(base.path()).is_empty(),
            "mount left after {step:?}"
        );
        assert_eq!(
            std::fs::read_dir(base.path()).unwrap().count(),
            0,
            "lab dir left after {step:?}"
        );
    }
}

#[test]
fn panic_in_body_leaves_nothing() {
    if let Some(why) = skip_reason() {
        println!("SKIPPED: ext4 lab unavailable: {why}");
        return;
    }
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let base = tempfile::tempdir_in("/var/tmp").unwrap();
    let r = catch_unwind(AssertUnwindSafe(|| {
        let lab = Ext4Lab::create(&opts(base.path(), None)).unwrap();
        let (d, j) = lab.devices();
        assert!(d.is_some() && j.is_some());
        assert_eq!(
            losetup_under(base.path()).len(),
            2,
            "lab attached its two devices"
        );
        assert_eq!(
            mounts_under(base.path()).len(),
            1,
            "lab mounted its file system"
        );
        let mnt = lab.mount_point().to_path_buf();
        assert!(inpage_bench::lab::is_mounted(&mnt));
        // The stat counters move when the file system is written.
        let (d0, _) = lab.stats().unwrap();
        std::fs::write(mnt.join("x"), vec![1u8; 1 << 20]).unwrap();
        inpage_bench::lab::settle();
        let (d1, _) = lab.stats().unwrap();
        assert!(d1.delta(&d0).sectors_written >= 2048);
        // An open file on the mount at the time of the panic.
        let _f = std::fs::File::open(mnt.join("x")).unwrap();
        panic!("body failed");
    }));
    assert!(r.is_err());
    assert!(
        losetup_under(base.path()).is_empty(),
        "loop devices left behind"
    );
    assert!(mounts_under(base.path()).is_empty(), "mounts left behind");
}
