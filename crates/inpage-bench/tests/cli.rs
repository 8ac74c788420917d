//! The bench's command surface through the dev binary (the same `bench ...` argv the
//! `inpage` CLI routes to `inpage_bench::run`): argument errors, a plain-directory run
//! of the peers, and the recovery benchmark with its crashing child process.

use std::process::Command;
use std::sync::{Mutex, MutexGuard};

use inpage_bench::pages::KeyOrder;
use inpage_bench::report::Report;

/// Tests here run one at a time: the determinism test compares CPU time between two runs,
/// which other bench processes running beside it would disturb.
static LOCK: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn bench(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_inpage-bench-dev"))
        .arg("bench")
        .args(args)
        .output()
        .expect("run inpage-bench-dev")
}

fn err_line(o: &std::process::Output) -> String {
    assert!(!o.status.success());
    String::from_utf8_lossy(&o.stderr).to_string()
}

#[test]
fn bad_arguments_are_one_line_errors() {
    let _serial = serial();
    let e = err_line(&bench(&[
        "mobibench",
        "--contenders",
        "sqlite-wal,nope",
        "--lab",
        "none",
    ]));
    assert!(
        e.contains("unknown contender 'nope'") && e.contains("sqlite-delete"),
        "{e}"
    );
    let e = err_line(&bench(&[
        "mobibench",
        "--contenders",
        "lmdb",
        "--lab",
        "none",
    ]));
    assert!(e.contains("baseline 'sqlite-wal' is not among"), "{e}");
    let e = err_line(&bench(&["mobibench", "--op", "upsert", "--lab", "none"]));
    assert!(e.contains("unknown op 'upsert'"), "{e}");
    let e = err_line(&bench(&[
        "mobibench",
        "--ops-per-txn",
        "0",
        "--lab",
        "none",
    ]));
    assert!(e.contains("out of range"), "{e}");
    let e = err_line(&bench(&["recovery", "--rounds", "0", "--lab", "none"]));
    assert!(e.contains("--rounds"), "{e}");
    let o = bench(&["list"]);
    let names = String::from_utf8_lossy(&o.stdout);
    for n in [
        "off",
        "wal",
        "wal-opt",
        "floor",
        "sqlite-wal-r",
        "redb",
        "lmdb",
    ] {
        assert!(names.lines().any(|l| l == n), "{n} listed");
    }
}

#[test]
fn plain_directory_run_reports_syscall_level_only() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let plots = dir.path().join("plots");
    let o = bench(&[
        "mobibench",
        "--lab",
        "none",
        "--contenders",
        "sqlite-wal,lmdb,floor,wal",
        "--op",
        "update,delete",
        "--ops-per-txn",
        "1,4",
        "--txns",
        "20",
        "--rounds",
        "2",
        "--warmup",
        "10",
        "--json",
        json.to_str().unwrap(),
        "--plots",
        plots.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(table.contains("lab: none"), "{table}");
    let r: Report = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!((r.lab.as_str(), r.rounds), ("none", 2));
    assert_eq!(r.results.len(), 2 * 2 * 4);
    for x in &r.results {
        assert_eq!(x.tx_per_s_rounds.len(), 2);
        assert!(x.tx_per_s_median > 0.0);
        assert!(x.journal_kib_per_txn.is_none() && x.flushes_per_txn.is_none());
        assert!(x.data_kib_per_txn.is_some(), "{}", x.contender);
        // The time split exists exactly for contenders doing I/O through AccountingVfs.
        let accounted = x.contender == "floor" || x.contender == "wal";
        assert_eq!(x.latency_us.is_some(), accounted, "{}", x.contender);
        assert_eq!(x.sync_calls_per_txn.is_some(), accounted, "{}", x.contender);
        assert!(x.ratio_to_baseline.is_some());
    }
    // Every row has its commit latency percentiles, in order.
    for x in &r.results {
        let l = x.commit_latency_us.expect("commit latency");
        assert!(
            0.0 < l.p50 && l.p50 <= l.p99 && l.p99 <= l.p999,
            "{}: {l:?}",
            x.contender
        );
    }
    let floor = r.results.iter().find(|x| x.contender == "floor").unwrap();
    assert_eq!(floor.sync_calls_per_txn, Some(1.0));
    assert_eq!(floor.write_calls_per_txn, Some(1.0));
    assert!(plots.join("throughput_update.svg").exists());
    assert!(plots.join("latency_delete_k4.svg").exists());
    // No device counters in lab none: nothing is modeled, the report says under which
    // profile it would be, and CPU time is still measured.
    assert_eq!(r.device_profile, "emmc");
    assert!(r.model_note.contains("MODELED") && r.model_note.contains("null"));
    assert!(
        r.sqlite.build_flags.contains("-DHAVE_FDATASYNC=1"),
        "{:?}",
        r.sqlite
    );
    assert!(
        table.contains("built with LIBSQLITE3_FLAGS='-DHAVE_FDATASYNC=1'"),
        "{table}"
    );
    for x in &r.results {
        assert!(x.model_tx_per_s.is_none() && x.model_us_per_txn.is_none());
        assert!(x.model_tx_per_s_rounds.is_empty());
        assert!(x.cpu_us_per_txn.is_some_and(|c| c > 0.0), "{}", x.contender);
    }
    assert!(!plots.join("model_update_k1.svg").exists());
    assert!(plots.join("tps_update_k1.svg").exists());
}

#[test]
fn device_profile_is_checked_and_reported() {
    let _serial = serial();
    let e = err_line(&bench(&["floor", "--lab", "none", "--device", "floppy"]));
    assert!(
        e.contains("unknown device profile 'floppy'") && e.contains("ufs"),
        "{e}"
    );
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let o = bench(&[
        "floor",
        "--lab",
        "none",
        "--device",
        "ufs",
        "--txns",
        "5",
        "--rounds",
        "1",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: Report = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(r.device_profile, "ufs");
    assert!(String::from_utf8_lossy(&o.stdout).contains("device profile 'ufs'"));
}

/// Determinism of the model: two runs of the same small Mobibench on the ext4 lab give
/// the engine's contenders exactly the same calls per transaction (writes and syncs, the
/// engine's own I/O, counted at the VFS), and every contender the same modeled *device*
/// time (the device profile applied to the lab's counters: requests, KiB, flushes)
/// within 2 % — the block layer merges adjacent requests depending on timing, which
/// moved SQLite's requests per transaction by 0.7 % between two runs here. The modeled
/// total adds measured CPU time, which varies from run to run like any timing; it
/// belongs to the benchmark, not to a test. Needs root and loop devices (skipped with
/// the reason otherwise).
#[test]
fn modeled_device_time_repeats_exactly() {
    let _serial = serial();
    if let Err(why) = inpage_bench::lab::ext4_available() {
        eprintln!("skipped: {why}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let run = |i: u32| -> Report {
        let json = dir.path().join(format!("r{i}.json"));
        let o = bench(&[
            "mobibench",
            "--lab",
            "ext4",
            "--dir",
            dir.path().to_str().unwrap(),
            "--lab-mib",
            "64",
            "--device",
            "emmc",
            "--contenders",
            "dhl-cc,wal,sqlite-wal-r,sqlite-off,floor",
            "--baseline",
            "floor",
            "--op",
            "update",
            "--txns",
            "100",
            "--rounds",
            "3",
            "--json",
            json.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap()
    };
    let (a, b) = (run(1), run(2));
    assert_eq!(a.results.len(), 5);
    // The device part of the model from the row's (median) counters: the same profile
    // function the bench applies, on the counters alone.
    let emmc = inpage_bench::device::profile("emmc").unwrap();
    let device_us = |x: &inpage_bench::report::ResultRow| {
        emmc.device_us(&inpage_bench::device::DeviceCounters {
            write_reqs: x.write_reqs_per_txn.unwrap(),
            write_kib: x.data_kib_per_txn.unwrap() + x.journal_kib_per_txn.unwrap_or(0.0),
            flushes: x.flushes_per_txn.unwrap(),
            read_reqs: x.read_reqs_per_txn.unwrap_or(0.0),
            read_kib: x.read_kib_per_txn.unwrap_or(0.0),
        })
    };
    for (x, y) in a.results.iter().zip(&b.results) {
        assert_eq!(x.contender, y.contender);
        let (dx, dy) = (device_us(x), device_us(y));
        eprintln!(
            "{}: device {dx:.1} vs {dy:.1} us; write reqs {:?} vs {:?}, flushes {:?} vs {:?}, \
             KiB {:?} vs {:?}; cpu {:?} vs {:?} us (not compared)",
            x.contender,
            x.write_reqs_per_txn,
            y.write_reqs_per_txn,
            x.flushes_per_txn,
            y.flushes_per_txn,
            x.data_kib_per_txn,
            y.data_kib_per_txn,
            x.cpu_us_per_txn.map(|c| c.round()),
            y.cpu_us_per_txn.map(|c| c.round()),
        );
        assert!(
            (dx / dy - 1.0).abs() <= 0.02,
            "{}: device time from the counters {dx} vs {dy} us",
            x.contender
        );
        if ["dhl-cc", "wal", "floor"].contains(&x.contender.as_str()) {
            assert_eq!(
                x.write_calls_per_txn, y.write_calls_per_txn,
                "{}",
                x.contender
            );
            assert_eq!(
                x.sync_calls_per_txn, y.sync_calls_per_txn,
                "{}",
                x.contender
            );
        }
        // Every update changes its row: exactly one flush each for the single-sync ones.
        if ["dhl-cc", "floor", "sqlite-off"].contains(&x.contender.as_str()) {
            let f = x.flushes_per_txn.unwrap();
            assert!((0.99..=1.1).contains(&f), "{}: {f} flushes", x.contender);
        }
    }
}

/// Run `bench recovery` in lab `none` with a 300-row table, one round, and the given
/// contenders, records and extra arguments; the run must succeed without warnings.
fn recovery_report(contenders: &str, records: &str, extra: &[&str]) -> Report {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let mut args = vec![
        "recovery",
        "--lab",
        "none",
        "--contenders",
        contenders,
        "--ops-per-txn",
        records,
        "--warm",
        "300",
        "--rounds",
        "1",
        "--json",
        json.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let o = bench(&args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(!err.contains("warning:"), "{err}");
    serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap()
}

#[test]
fn recovery_kills_a_child_mid_transaction() {
    let _serial = serial();
    let r = recovery_report(
        "delete,wal,sqlite-delete,sqlite-wal,redb,lmdb,floor",
        "1,16",
        &["--kind", "crash"],
    );
    // The floor has no transaction to interrupt.
    assert_eq!(r.results.len(), 2 * 6);
    for x in &r.results {
        assert_eq!(x.workload, "recovery");
        assert_eq!(x.records, Some(300));
        assert!(x.recovery_ms_median.unwrap() > 0.0);
        assert!(x.latency_us.is_none());
    }
}

/// The size axis: every contender's table at every `--records` size, cold and warm, after
/// a crash and after a clean close; sizes ascend whatever order they were given in;
/// build times are reported apart; the open reads at least a page through read calls; the
/// log-log picture and the pivot table are written.
#[test]
fn recovery_over_table_sizes_crash_and_reopen() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let plots = dir.path().join("plots");
    let o = bench(&[
        "recovery",
        "--lab",
        "none",
        "--contenders",
        "dhl-cc,wal,sqlite-wal",
        "--ops-per-txn",
        "4",
        "--records",
        "2000,200",
        "--cache",
        "cold,warm",
        "--rounds",
        "2",
        "--json",
        json.to_str().unwrap(),
        "--plots",
        plots.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(!err.contains("warning:"), "{err}");
    let r: Report = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    // 3 contenders x 2 sizes x 2 caches x (crash + reopen).
    assert_eq!(r.results.len(), 3 * 2 * 2 * 2);
    let sizes: Vec<u64> = r.results.iter().map(|x| x.records.unwrap()).collect();
    assert!(sizes.windows(2).all(|w| w[0] <= w[1]), "{sizes:?}");
    for c in ["dhl-cc", "wal", "sqlite-wal"] {
        for n in [200, 2000] {
            for w in ["recovery", "recovery-warm", "reopen", "reopen-warm"] {
                let x = r
                    .results
                    .iter()
                    .find(|x| x.contender == c && x.records == Some(n) && x.workload == w)
                    .unwrap_or_else(|| panic!("{c} {n} {w}"));
                assert_eq!(x.tx_per_s_rounds.len(), 2);
                assert!(x.recovery_ms_median.unwrap() > 0.0);
                assert!(x.build_ms.unwrap() > 0.0, "{c} {n}");
                assert!(x.read_call_kib_per_txn.unwrap() >= 1.0, "{c} {n} {w}");
                assert_eq!(x.ops_per_txn, if w.starts_with("reopen") { 0 } else { 4 });
            }
        }
    }
    let svg = std::fs::read_to_string(plots.join("recovery-size.svg")).unwrap();
    assert!(svg.contains("after a crash") && svg.contains("clean close"));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("open + first read, ms"), "{out}");
    assert!(out.contains("build (bulk load"), "{out}");
    let e = err_line(&bench(&["recovery", "--lab", "none", "--records", "0"]));
    assert!(e.contains("--records"), "{e}");
    let e = err_line(&bench(&["recovery", "--lab", "none", "--kind", "reboot"]));
    assert!(e.contains("reboot"), "{e}");
}

/// `--updates-before-crash`: the child commits one-row updates before the insert it is
/// killed in; they stay (the table's rows are all there, the insert is not), and SQLite's
/// recovery now reads the WAL frames they left.
#[test]
fn updates_before_a_crash_leave_a_wal_to_recover() {
    let _serial = serial();
    let read = |extra: &[&str]| -> Vec<(String, f64)> {
        let mut args = vec!["--kind", "crash"];
        args.extend_from_slice(extra);
        recovery_report("dhl-cc,wal,sqlite-wal,redb", "4", &args)
            .results
            .iter()
            .map(|x| (x.contender.clone(), x.read_call_kib_per_txn.unwrap()))
            .collect()
    };
    let plain = read(&[]);
    let updated = read(&["--updates-before-crash", "30"]);
    assert_eq!(plain.len(), 4);
    let get = |v: &[(String, f64)], c: &str| v.iter().find(|x| x.0 == c).unwrap().1;
    // 30 committed one-page updates = at least 30 WAL frames of 4 KiB to read back.
    assert!(
        get(&updated, "sqlite-wal") >= get(&plain, "sqlite-wal") + 100.0,
        "{plain:?} vs {updated:?}"
    );
}

/// `--cache warm` keeps the page cache between the crash and the timed reopen and says so
/// in the workload name; the DHL default mode recovers (nothing lost, nothing leaked).
#[test]
fn recovery_with_a_warm_cache_is_reported_apart() {
    let _serial = serial();
    let r = recovery_report(
        "dhl-cc,dhl-tc,sqlite-wal",
        "1,4",
        &["--cache", "warm", "--kind", "crash"],
    );
    assert_eq!(r.results.len(), 2 * 3);
    for x in &r.results {
        assert_eq!(x.workload, "recovery-warm");
        assert!(x.recovery_ms_median.unwrap() > 0.0);
    }
    let e = err_line(&bench(&[
        "recovery", "--lab", "none", "--cache", "lukewarm",
    ]));
    assert!(e.contains("lukewarm"), "{e}");
}

fn pages_json(extra: &[&str]) -> inpage_bench::pages::PagesReport {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("pages.json");
    let mut args = vec![
        "pages",
        "--records",
        "600",
        "--sizes",
        "8,128",
        "--json",
        json.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let o = bench(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(
        t.contains("8-byte integer key") && t.contains("rec/leaf") && t.contains("dhl-cc/off"),
        "{t}"
    );
    serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap()
}

/// The measurement on the real engine shows what the DHL layout costs and what key order
/// does, and the JSON matches what was asked.
#[test]
fn pages_measures_stock_vs_dhl() {
    let _serial = serial();
    let r = pages_json(&[]);
    assert_eq!((r.records, r.page_size, r.key_bytes), (600, 4096, 8));
    assert_eq!(r.modes, ["off", "dhl-cc"]);
    assert_eq!(r.rows.len(), 4, "2 sizes x 2 orders");
    let get = |size: usize, order: KeyOrder, mode: usize| {
        let row = r
            .rows
            .iter()
            .find(|x| x.record_bytes == size && x.order == order)
            .expect("row");
        assert_eq!(row.value_bytes, size - 8);
        row.results[mode].clone()
    };
    for row in &r.rows {
        for x in &row.results {
            assert_eq!(x.entries, 600);
            assert_eq!(x.overflow_pages, 0);
            assert!(x.total_pages as u64 > x.leaf_pages + x.interior_pages);
        }
        let want = row.results[1].records_per_leaf / row.results[0].records_per_leaf;
        assert!((row.ratios_to_first[0] - want).abs() < 1e-12);
    }
    let (seq, rnd) = (KeyOrder::Sequential, KeyOrder::Random);
    let (stock, dhl) = (0, 1);
    // Two slot headers per page leave less room for records.
    assert!(get(8, seq, stock).records_per_leaf > get(8, seq, dhl).records_per_leaf);
    assert!(get(8, seq, stock).leaf_pages < get(8, seq, dhl).leaf_pages);
    for mode in [stock, dhl] {
        for order in [seq, rnd] {
            assert!(get(8, order, mode).records_per_leaf > get(128, order, mode).records_per_leaf);
        }
    }
    // Ascending inserts take the append split and leave full pages behind.
    for size in [8, 128] {
        assert!(get(size, seq, stock).file_fill >= get(size, rnd, stock).file_fill);
        assert!(get(size, seq, stock).leaf_fill >= get(size, rnd, stock).leaf_fill);
    }
}

#[test]
fn pages_rejects_bad_arguments() {
    let _serial = serial();
    let e = err_line(&bench(&["pages", "--sizes", "8,0"]));
    assert!(e.contains("--sizes: 0 is out of range"), "{e}");
    let e = err_line(&bench(&["pages", "--sizes", "5000"]));
    assert!(
        e.contains("--sizes: 5000 is out of range") && e.contains("inline"),
        "{e}"
    );
    let e = err_line(&bench(&["pages", "--sizes", "128", "--page-size", "512"]));
    assert!(e.contains("out of range"), "{e}");
    let e = err_line(&bench(&["pages", "--modes", "off,dhl-xx"]));
    assert!(
        e.contains("unknown mode 'dhl-xx'") && e.contains("dhl-cc-header"),
        "{e}"
    );
    let e = err_line(&bench(&["pages", "--page-size", "1000"]));
    assert!(e.contains("--page-size"), "{e}");
    let e = err_line(&bench(&["pages", "--records", "0"]));
    assert!(e.contains("--records"), "{e}");
    let e = err_line(&bench(&["pages", "--orders", "backwards"]));
    assert!(e.contains("unknown key order 'backwards'"), "{e}");
}

/// `bench mvbt`: one row per contender, WAL contenders once per checkpoint interval
/// (named `<contender>/cp<N>`, with the interval and a checkpoint share in the JSON), and
/// each row's ratio against `wal` at the same interval.
#[test]
fn mvbt_fig6_rows_per_checkpoint_interval() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("f.json");
    let o = bench(&[
        "mvbt",
        "--lab",
        "none",
        "--contenders",
        "ls-mvbt,wal,sqlite-wal",
        "--checkpoints",
        "8,64",
        "--records",
        "200",
        "--txns",
        "60",
        "--rounds",
        "1",
        "--json",
        json.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("speed-up over wal at each interval"), "{out}");
    let r: Report = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let names: Vec<&str> = r.results.iter().map(|x| x.contender.as_str()).collect();
    assert_eq!(
        names,
        [
            "ls-mvbt",
            "wal/cp8",
            "wal/cp64",
            "sqlite-wal/cp8",
            "sqlite-wal/cp64"
        ]
    );
    for x in &r.results {
        assert_eq!(x.workload, "mvbt-fig6");
        assert_eq!((x.ops_per_txn, x.txns), (1, 60));
        assert!(x.ratio_to_baseline.is_some(), "{}", x.contender);
        let dirtied = x.pages_dirtied_per_txn.unwrap();
        assert!((1.0..4.0).contains(&dirtied), "{}: {dirtied}", x.contender);
        match x.contender.split_once("/cp") {
            Some((_, cp)) => {
                assert_eq!(x.checkpoint, Some(cp.parse().unwrap()));
                let share = x.checkpoint_share.unwrap();
                assert!(share > 0.0 && share < 1.0, "{}: {share}", x.contender);
            }
            None => assert_eq!((x.checkpoint, x.checkpoint_share), (None, None)),
        }
    }
    assert_eq!(
        r.results[1].ratio_to_baseline,
        Some(1.0),
        "wal/cp8 against itself"
    );
    // --pair: two operations per transaction.
    let o = bench(&[
        "mvbt",
        "--lab",
        "none",
        "--contenders",
        "ls-mvbt",
        "--records",
        "50",
        "--txns",
        "10",
        "--rounds",
        "1",
        "--pair",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: Report = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(r.results[0].ops_per_txn, 2);
    assert_eq!(r.results[0].op, "insert+delete");
    let e = err_line(&bench(&["mvbt", "--lab", "none", "--checkpoints", "0"]));
    assert!(e.contains("--checkpoints"), "{e}");
}

/// The open loop: transactions arrive at the asked rate whatever the engine does, so a
/// round never runs faster than that rate (the last of n is due (n - 1) / rate after the
/// first), the rows say so in their workload, and a bad rate is refused.
#[test]
fn open_loop_runs_at_the_asked_rate() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let o = bench(&[
        "mobibench",
        "--lab",
        "none",
        "--contenders",
        "sqlite-wal,wal",
        "--op",
        "insert",
        "--txns",
        "40",
        "--rounds",
        "1",
        "--warmup",
        "5",
        "--rate",
        "400",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: Report = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(r.results.len(), 2);
    for x in &r.results {
        assert_eq!(x.workload, "mobibench-open-400tps");
        assert!(
            x.tx_per_s_median <= 400.0 * 40.0 / 39.0,
            "{}: {}",
            x.contender,
            x.tx_per_s_median
        );
        assert!(x.commit_latency_us.is_some());
    }
    let e = err_line(&bench(&["mobibench", "--rate", "0", "--lab", "none"]));
    assert!(e.contains("--rate"), "{e}");
}

/// `bench trace`: a synthetic app trace and a hand-written one replay on the SQL
/// contenders and stock SQLite with every statement's outcome agreeing; an error stock
/// shares is allowed and counted, one without a stock contender to compare with fails the
/// run naming its line, and a contender that speaks no SQL is refused.
#[test]
fn trace_replays_and_checks_outcomes_against_stock() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("t.json");
    let o = bench(&[
        "trace",
        "--synthetic",
        "app-small",
        "--rows",
        "300",
        "--txns",
        "24",
        "--warmup",
        "4",
        "--rounds",
        "1",
        "--lab",
        "none",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: Report = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let names: Vec<_> = r.results.iter().map(|x| x.contender.as_str()).collect();
    let default = format!("sql-{}", inpage::DEFAULT_JOURNAL_MODE.name());
    assert_eq!(
        names,
        [default.as_str(), "sql-wal", "sqlite-wal-r", "sqlite-wal"]
    );
    for x in &r.results {
        assert_eq!((x.workload.as_str(), x.op.as_str()), ("trace", "app-small"));
        // Per measured write transaction: 24 written, 4 of them warm-up.
        assert_eq!(x.txns, 20, "{}", x.contender);
        let l = x.commit_latency_us.expect("write latency");
        assert!(0.0 < l.p50 && l.p50 <= l.p99, "{}: {l:?}", x.contender);
    }
    assert!(
        r.notes.iter().any(|n| n.contains("trace app-small:")
            && n.contains("0 statements fail on stock SQLite too")),
        "{:?}",
        r.notes
    );

    // Trace files: a loading set and a measured one with a duplicate key (an error on
    // every contender, stock included).
    std::fs::write(
        dir.path().join("loading.sql"),
        "CREATE TABLE kv(k INTEGER PRIMARY KEY, v TEXT);\nINSERT INTO kv VALUES(1, 'a');\n",
    )
    .unwrap();
    let measured = dir.path().join("app.sql");
    std::fs::write(
        &measured,
        "INSERT INTO kv VALUES(2, 'b')\nBEGIN\nINSERT INTO kv VALUES(3, 'c')\n\
         UPDATE kv SET v = 'z' WHERE k <= 2\nCOMMIT\nSELECT * FROM kv\n\
         INSERT INTO kv VALUES(1, 'dup')\nDELETE FROM kv WHERE k = 3\n",
    )
    .unwrap();
    let files = [dir.path().join("loading.sql"), measured.clone()];
    let f: Vec<&str> = files.iter().map(|p| p.to_str().unwrap()).collect();
    let o = bench(&[
        "trace",
        f[0],
        f[1],
        "--contenders",
        "sql-wal,sqlite-wal",
        "--baseline",
        "sqlite-wal",
        "--rounds",
        "1",
        "--lab",
        "none",
        "--warmup",
        "0",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("trace app: 8 statements, 5 transactions (4 writing)")
            && out.contains("1 statements fail on stock SQLite too"),
        "{out}"
    );
    let e = err_line(&bench(&[
        "trace",
        f[0],
        f[1],
        "--contenders",
        "sql-wal",
        "--baseline",
        "sql-wal",
        "--rounds",
        "1",
        "--lab",
        "none",
    ]));
    assert!(
        e.contains("sql-wal: app line 7 (INSERT INTO kv VALUES(1, 'dup'))")
            && e.contains("UNIQUE constraint failed"),
        "{e}"
    );
    let e = err_line(&bench(&[
        "trace",
        f[1],
        "--contenders",
        "dhl-cc,sqlite-wal",
        "--baseline",
        "sqlite-wal",
        "--lab",
        "none",
    ]));
    assert!(e.contains("dhl-cc: not an SQL contender"), "{e}");
    let e = err_line(&bench(&["trace", "--lab", "none"]));
    assert!(e.contains("no traces"), "{e}");
}

fn program_json(extra: &[&str], command: &[&str]) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("p.json");
    let mut args = vec!["program", "--json", json.to_str().unwrap()];
    args.extend_from_slice(extra);
    args.push("--");
    args.extend_from_slice(command);
    let o = bench(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap()
}

#[test]
fn program_runs_each_contender_in_its_own_directory_with_its_environment() {
    let _serial = serial();
    let r = program_json(
        &[
            "--lab",
            "none",
            "--rounds",
            "2",
            "--per",
            "4",
            "--contender",
            "one MARK=first",
            "--contender",
            "two MARK=second WHERE={dir}",
            "--baseline",
            "two",
            "--setup",
            "touch {dir}/setup-ran",
        ],
        &[
            "sh",
            "-c",
            "test -e setup-ran && test \"$(pwd)\" = \"$1\" && echo \"$MARK\" > mark && echo \"$MARK $(ls | wc -l)\"",
            "sh",
            "{dir}",
        ],
    );
    let runs = r["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 4);
    for (label, mark) in [("one", "first"), ("two", "second")] {
        let mine: Vec<_> = runs.iter().filter(|x| x["contender"] == label).collect();
        assert_eq!(mine.len(), 2, "{label}");
        for x in mine {
            // Its own mark, and only its setup's file and its own in the directory.
            assert_eq!(x["stdout_tail"], format!("{mark} 2"), "{x}");
            assert!(x["counters"].is_null(), "lab none has no device counters");
            assert!(x["wall_ms"].as_f64().unwrap() > 0.0);
        }
    }
    let s = r["summary"].as_array().unwrap();
    assert_eq!(s[1]["contender"], "two");
    assert_eq!(s[1]["speedup"].as_f64(), Some(1.0), "the baseline is 1.0");
    assert!(s[0]["modeled_us"].is_null());
    assert_eq!(r["per"], 4);

    // A program that fails names the contender and its stderr; no report.
    let o = bench(&[
        "program",
        "--lab",
        "none",
        "--contender",
        "broken",
        "--",
        "sh",
        "-c",
        "echo went-wrong >&2; exit 3",
    ]);
    let e = err_line(&o);
    assert!(e.contains("broken") && e.contains("went-wrong"), "{e}");
    let e = err_line(&bench(&[
        "program",
        "--lab",
        "none",
        "--contender",
        "a",
        "--contender",
        "a",
        "--",
        "true",
    ]));
    assert!(e.contains("given twice"), "{e}");
    let e = err_line(&bench(&[
        "program",
        "--lab",
        "none",
        "--contender",
        "X=1",
        "--",
        "true",
    ]));
    assert!(e.contains("the first word is the label"), "{e}");
}

#[test]
fn program_in_the_ext4_lab_is_charged_its_writes_and_flushes() {
    let _serial = serial();
    if let Err(why) = inpage_bench::lab::ext4_available() {
        eprintln!("skipped: {why}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // 1 MiB left in the page cache (the window's closing syncfs must charge it), and a
    // second file written with O_DSYNC-like durability through `sync` per file.
    let r = program_json(
        &[
            "--lab",
            "ext4",
            "--dir",
            dir.path().to_str().unwrap(),
            "--lab-mib",
            "64",
            "--rounds",
            "1",
            "--contender",
            "dd",
        ],
        &[
            "dd",
            "if=/dev/zero",
            "of={dir}/f",
            "bs=64k",
            "count=16",
            "status=none",
        ],
    );
    let run = &r["runs"][0];
    let kib = run["counters"]["write_kib"].as_f64().unwrap();
    assert!(kib >= 1024.0, "{run}");
    assert!(run["counters"]["flushes"].as_f64().unwrap() >= 1.0, "{run}");
    assert!(run["modeled_ms"].as_f64().unwrap() > 0.0, "{run}");
    assert_eq!(r["lab"], "ext4");
}

#[test]
fn program_counts_instructions_under_callgrind() {
    let _serial = serial();
    if Command::new("valgrind").arg("--version").output().is_err() {
        eprintln!("skipped: no valgrind");
        return;
    }
    // `sh` counting to 200 and to 2,000: ten times the loop, far more instructions,
    // exactly the same count on every run of the same program.
    let count = |n: u32| {
        let r = program_json(
            &[
                "--lab",
                "none",
                "--rounds",
                "1",
                "--instructions",
                "--contender",
                "a",
                "--contender",
                "b",
            ],
            &[
                "sh",
                "-c",
                &format!("i=0; while [ $i -lt {n} ]; do i=$((i+1)); done"),
            ],
        );
        let ins: Vec<u64> = r["instructions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x[1].as_u64().unwrap())
            .collect();
        assert_eq!(ins.len(), 2, "{r}");
        let q = r["summary"][1]["instructions_ratio"].as_f64().unwrap();
        assert!((q - ins[1] as f64 / ins[0] as f64).abs() < 1e-9);
        ins
    };
    let small = count(200);
    let big = count(2000);
    assert!(small[0] > 0 && big[0] > 2 * small[0], "{small:?} {big:?}");
    // Two contenders running the same program: counts within 1 % (sh's start-up
    // differs by its environment only).
    assert!(small[0].abs_diff(small[1]) * 100 < small[0], "{small:?}");
}

/// `bench multiprocess`: every layout's processes run and are counted per role, for the
/// engine's default mode through SQL and stock SQLite, with nothing lost or refused; a
/// contender several processes cannot open, or a bad layout, is a one-line error.
#[test]
fn multiprocess_runs_writer_and_reader_processes() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("mp.json");
    let o = bench(&[
        "multiprocess",
        "--lab",
        "none",
        "--dir",
        dir.path().to_str().unwrap(),
        "--rounds",
        "1",
        "--seconds",
        "0.3",
        "--records",
        "200",
        "--layouts",
        "1w,1w1r,2r",
        "--contenders",
        "sql-redo,sqlite-wal-r",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let rows = r["results"].as_array().unwrap();
    assert_eq!(rows.len(), 6, "{r}");
    for row in rows {
        let (w, rd) = (
            row["writers"].as_u64().unwrap(),
            row["readers"].as_u64().unwrap(),
        );
        assert_eq!(row["errors"].as_u64(), Some(0), "{row}");
        let wtps = row["write_tx_per_s_median"].as_f64().unwrap();
        let rtps = row["read_tx_per_s_median"].as_f64().unwrap();
        assert_eq!(wtps > 0.0, w > 0, "{row}");
        assert_eq!(rtps > 0.0, rd > 0, "{row}");
    }
    let e = err_line(&bench(&[
        "multiprocess",
        "--lab",
        "none",
        "--contenders",
        "nvlog,sqlite-wal-r",
    ]));
    assert!(
        e.contains("nvlog") && e.contains("several processes"),
        "{e}"
    );
    let e = err_line(&bench(&[
        "multiprocess",
        "--lab",
        "none",
        "--layouts",
        "1x",
        "--contenders",
        "sqlite-wal-r",
    ]));
    assert!(e.contains("--layouts"), "{e}");
}
