//! The bench's command surface through the dev binary (the same `bench ...` argv the
//! `inpage` CLI routes to `inpage_bench::run`): argument errors, a plain-directory run
//! of the peers, and the recovery benchmark with its crashing child process.

use std::process::Command;

use inpage_bench::report::Report;

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
    let floor = r.results.iter().find(|x| x.contender == "floor").unwrap();
    assert_eq!(floor.sync_calls_per_txn, Some(1.0));
    assert_eq!(floor.write_calls_per_txn, Some(1.0));
    assert!(plots.join("throughput_update.svg").exists());
    assert!(plots.join("latency_delete_k4.svg").exists());
}

#[test]
fn recovery_kills_a_child_mid_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let o = bench(&[
        "recovery",
        "--lab",
        "none",
        "--contenders",
        "delete,wal,sqlite-delete,sqlite-wal,redb,lmdb,floor",
        "--ops-per-txn",
        "1,16",
        "--warm",
        "300",
        "--rounds",
        "1",
        "--json",
        json.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(!err.contains("warning:"), "{err}");
    let r: Report = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    // The floor has no transaction to interrupt.
    assert_eq!(r.results.len(), 2 * 6);
    for x in &r.results {
        assert_eq!(x.workload, "recovery");
        assert!(x.recovery_ms_median.unwrap() > 0.0);
        assert!(x.latency_us.is_none());
    }
}
