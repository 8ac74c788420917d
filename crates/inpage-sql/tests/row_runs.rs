//! Row runs (ffi.rs `Run`): a read-only scan steps through the rest of a leaf in C.
//! These tests hold it to what the slow path gives: every row and value, across leaves,
//! overflow values and index trees; the reader's snapshot while another connection
//! writes; and the rows the same connection writes once its transaction upgrades (the
//! run must end then — `ipg_sync` — which the planted bug skips, and the test catches).

use inpage_sql::ffi::mutants;
use inpage_sql::{Connection, Value};

const ROWS: i64 = 3_000;

/// The planted bug is process-wide: the tests of this file run one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn value_of(id: i64) -> String {
    // Every 97th value goes to an overflow chain, which ends a run mid-leaf.
    if id % 97 == 0 {
        format!("big{id}-{}", "x".repeat(6_000))
    } else {
        format!("v{id:05}")
    }
}

fn filled(dir: &tempfile::TempDir) -> (Connection, std::path::PathBuf) {
    let path = dir.path().join("runs.db");
    let c = Connection::open(&path).unwrap();
    c.execute_batch(
        "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT); CREATE INDEX t_v ON t(v); BEGIN",
    )
    .unwrap();
    for id in 1..=ROWS {
        c.execute(
            "INSERT INTO t VALUES(?, ?)",
            &[Value::Integer(id), Value::Text(value_of(id))],
        )
        .unwrap();
    }
    c.execute_batch("COMMIT").unwrap();
    (c, path)
}

#[test]
fn a_scan_reads_every_row_across_leaves_overflow_values_and_indexes() {
    let _one = serial();
    let dir = tempfile::tempdir().unwrap();
    let (c, _) = filled(&dir);
    let rows = c.query("SELECT id, v FROM t", &[]).unwrap();
    let want: Vec<Vec<Value>> = (1..=ROWS)
        .map(|id| vec![Value::Integer(id), Value::Text(value_of(id))])
        .collect();
    assert_eq!(rows.len(), want.len());
    assert!(
        rows == want,
        "the rowid scan differs from the rows inserted"
    );
    // Backwards (no runs) and a range from the middle of a leaf.
    let back = c.query("SELECT id FROM t ORDER BY id DESC", &[]).unwrap();
    assert_eq!(back.len() as i64, ROWS);
    assert_eq!(back[0], vec![Value::Integer(ROWS)]);
    let mid = c
        .query("SELECT id, v FROM t WHERE id BETWEEN 1234 AND 2345", &[])
        .unwrap();
    assert!(mid == want[1233..2345], "the range scan differs");
    // The covering index, in its own order.
    let by_v = c.query("SELECT v, id FROM t ORDER BY v", &[]).unwrap();
    let mut sorted: Vec<(String, i64)> = (1..=ROWS).map(|id| (value_of(id), id)).collect();
    sorted.sort();
    let sorted: Vec<Vec<Value>> = sorted
        .into_iter()
        .map(|(v, id)| vec![Value::Text(v), Value::Integer(id)])
        .collect();
    assert!(by_v == sorted, "the index scan differs");
    assert_eq!(
        c.query("SELECT count(*), sum(length(v)) FROM t", &[])
            .unwrap(),
        vec![vec![
            Value::Integer(ROWS),
            Value::Integer((1..=ROWS).map(|id| value_of(id).len() as i64).sum())
        ]]
    );
}

#[test]
fn a_scan_keeps_its_snapshot_while_another_connection_writes() {
    let _one = serial();
    let dir = tempfile::tempdir().unwrap();
    let (writer, path) = filled(&dir);
    let reader = Connection::open(&path).unwrap();
    let mut scan = reader.prepare("SELECT id, v FROM t").unwrap();
    let mut seen = Vec::new();
    for _ in 0..500 {
        assert!(scan.step().unwrap());
        seen.push((scan.int64(0), scan.text(1).unwrap()));
    }
    writer
        .execute_batch("UPDATE t SET v = 'changed' WHERE id > 400; DELETE FROM t WHERE id % 3 = 0")
        .unwrap();
    while scan.step().unwrap() {
        seen.push((scan.int64(0), scan.text(1).unwrap()));
    }
    let want: Vec<(i64, String)> = (1..=ROWS).map(|id| (id, value_of(id))).collect();
    assert!(seen == want, "the reader left its snapshot");
}

fn e<T, E: std::fmt::Display>(r: Result<T, E>) -> Result<T, String> {
    r.map_err(|e| e.to_string())
}

/// A deferred transaction reads, then writes rows ahead of its own open scan: the scan
/// must show the new values (its transaction is now a write transaction), so the run it
/// was stepping through must end when the transaction upgrades.
fn upgrade_mid_scan() -> Result<(), String> {
    let dir = tempfile::tempdir().unwrap();
    let (c, _) = filled(&dir);
    e(c.execute_batch("BEGIN"))?;
    let seen = scan_around(&c, &["UPDATE t SET v = 'new' || id WHERE id > 10"])?;
    e(c.execute_batch("COMMIT"))?;
    let want: Vec<(i64, String)> = (1..=ROWS).map(|id| (id, rewritten(id))).collect();
    same_rows(&seen, &want)
}

/// Scan t: ten rows (deep enough into the first leaf to be inside a run), then
/// `writes`, then the rest; the rows seen.
fn scan_around(c: &Connection, writes: &[&str]) -> Result<Vec<(i64, String)>, String> {
    let mut scan = e(c.prepare("SELECT id, v FROM t"))?;
    let mut seen = Vec::new();
    for _ in 0..10 {
        assert!(e(scan.step())?);
        seen.push((scan.int64(0), scan.text(1).unwrap_or_default()));
    }
    for w in writes {
        e(c.execute(w, &[]))?;
    }
    while e(scan.step())? {
        seen.push((scan.int64(0), scan.text(1).unwrap_or_default()));
    }
    Ok(seen)
}

/// Row `id`'s value after `UPDATE t SET v = 'new' || id WHERE id > 10`.
fn rewritten(id: i64) -> String {
    if id > 10 {
        format!("new{id}")
    } else {
        value_of(id)
    }
}

#[test]
fn a_scan_sees_its_own_transaction_write_after_upgrading() {
    let _one = serial();
    upgrade_mid_scan().unwrap();
}

/// The planted bug: runs outlive the upgrade. The same scenario must fail.
#[test]
fn the_upgrade_test_catches_runs_that_outlive_their_transaction() {
    let _one = serial();
    caught_with_stale_runs(upgrade_mid_scan);
}

/// `scenario` fails (an error or a panic) with the planted bug: runs never end.
fn caught_with_stale_runs(scenario: fn() -> Result<(), String>) {
    mutants::plant_stale_runs(true);
    let r = std::panic::catch_unwind(scenario);
    mutants::plant_stale_runs(false);
    match r {
        Ok(Ok(())) => panic!("stale row runs went unnoticed"),
        Ok(Err(e)) => eprintln!("caught, as it should be: {e}"),
        Err(_) => eprintln!("caught, as it should be (a panic)"),
    }
}

/// Ok when the scan saw exactly `want`, else the first difference.
fn same_rows(seen: &[(i64, String)], want: &[(i64, String)]) -> Result<(), String> {
    if seen.len() != want.len() {
        return Err(format!("{} rows, want {}", seen.len(), want.len()));
    }
    match seen.iter().zip(want).find(|(a, b)| a != b) {
        Some((a, b)) => Err(format!("row {a:?}, want {b:?}")),
        None => Ok(()),
    }
}

/// In a write transaction a scan runs in C too; other statements of the same
/// transaction then change rows ahead of it, and the scan must show them (each
/// statement's start ends every run: glue.c `glueEndRuns`). Also a statement that scans
/// the table it writes row by row, and an index built from a scan.
fn write_mid_scan() -> Result<(), String> {
    let dir = tempfile::tempdir().unwrap();
    let (c, _) = filled(&dir);
    e(c.execute_batch("BEGIN IMMEDIATE"))?;
    let seen = scan_around(
        &c,
        &[
            "UPDATE t SET v = 'new' || id WHERE id > 10",
            "DELETE FROM t WHERE id > 10 AND id % 5 = 0",
        ],
    )?;
    // One statement scanning and writing its own table, every other row.
    e(c.execute("UPDATE t SET v = v || '+' WHERE id % 2 = 0", &[]))?;
    e(c.execute("CREATE INDEX t_v2 ON t(v, id)", &[]))?;
    e(c.execute_batch("COMMIT"))?;
    let want: Vec<(i64, String)> = (1..=ROWS)
        .filter(|id| *id <= 10 || id % 5 != 0)
        .map(|id| (id, rewritten(id)))
        .collect();
    same_rows(&seen, &want)?;
    let after = e(c.query("SELECT id, v FROM t INDEXED BY t_v2 ORDER BY id", &[]))?;
    let want_after: Vec<Vec<Value>> = want
        .iter()
        .map(|(id, v)| {
            let v = if id % 2 == 0 {
                format!("{v}+")
            } else {
                v.clone()
            };
            vec![Value::Integer(*id), Value::Text(v)]
        })
        .collect();
    if after != want_after {
        return Err("the table or the index built from it differs after the writes".into());
    }
    let check = e(c.query("PRAGMA integrity_check", &[]))?;
    if check != vec![vec![Value::Text("ok".into())]] {
        return Err(format!("integrity_check: {check:?}"));
    }
    Ok(())
}

#[test]
fn a_scan_in_a_write_transaction_sees_the_rows_written_ahead_of_it() {
    let _one = serial();
    write_mid_scan().unwrap();
}

/// The planted bug (runs are never ended) breaks the scan inside the write transaction.
#[test]
fn the_write_test_catches_runs_that_outlive_a_write_to_their_table() {
    let _one = serial();
    caught_with_stale_runs(write_mid_scan);
}
