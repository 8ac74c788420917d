//! `PRAGMA auto_vacuum`, `incremental_vacuum` and `freelist_count` through SQL, as stock
//! SQLite answers them: the setting is taken before the first table and kept in the file;
//! `FULL` gives free pages back at each commit and `INCREMENTAL` when asked, the file
//! shrinking with them; `VACUUM` applies a change asked for later; every mode of the
//! registry either honours the setting or keeps reading 0 (its pages cannot move).

use inpage::JournalMode;
use inpage_sql::{Connection, Value};

fn int(c: &Connection, sql: &str) -> i64 {
    match c.query(sql, &[]).unwrap().first().and_then(|r| r.first()) {
        Some(Value::Integer(n)) => *n,
        other => panic!("{sql}: {other:?}"),
    }
}

/// 3,000 rows with an index, some values in overflow chains; then 90 % deleted.
fn load_and_delete(c: &Connection) {
    c.execute_batch(
        "CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, v BLOB);
         CREATE INDEX t_name ON t(name);
         BEGIN;
         WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000)
         INSERT INTO t SELECT i, 'name' || (i * 7919 % 3001),
             zeroblob(CASE WHEN i % 40 = 0 THEN 6000 ELSE 150 END) FROM n;
         COMMIT;",
    )
    .unwrap();
    c.execute_batch("DELETE FROM t WHERE id % 10 != 0").unwrap();
}

fn expect_rows(c: &Connection, mode: &str) {
    assert_eq!(int(c, "SELECT count(*) FROM t"), 300, "{mode}");
    assert_eq!(
        int(c, "SELECT sum(length(v)) FROM t"),
        (1..=3000)
            .filter(|i| i % 10 == 0)
            .map(|i| if i % 40 == 0 { 6000 } else { 150 })
            .sum::<i64>(),
        "{mode}"
    );
    let ok = c.query("PRAGMA integrity_check", &[]).unwrap();
    assert_eq!(ok, vec![vec![Value::Text("ok".into())]], "{mode}");
}

#[test]
fn full_and_incremental_give_pages_back_in_every_mode_that_can_move_them() {
    for mode in JournalMode::all() {
        let movable = mode.keeps_free_list();
        for (setting, code) in [("FULL", 1), ("INCREMENTAL", 2)] {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("av.db");
            let c = Connection::open_with_mode(&path, mode.name()).unwrap();
            c.execute_batch(&format!("PRAGMA auto_vacuum={setting}"))
                .unwrap();
            let want = if movable { code } else { 0 };
            assert_eq!(int(&c, "PRAGMA auto_vacuum"), want, "{mode} {setting}");
            load_and_delete(&c);
            assert_eq!(int(&c, "PRAGMA auto_vacuum"), want, "{mode} {setting}");
            let pages = int(&c, "PRAGMA page_count");
            let free = int(&c, "PRAGMA freelist_count");
            if !movable {
                expect_rows(&c, mode.name());
                continue;
            }
            match code {
                1 => assert_eq!(free, 0, "{mode}: FULL leaves no free page after a commit"),
                _ => {
                    assert!(free > 20, "{mode}: {free} free pages of {pages}");
                    c.execute_batch("PRAGMA incremental_vacuum(5)").unwrap();
                    assert_eq!(int(&c, "PRAGMA freelist_count"), free - 5, "{mode}");
                    assert_eq!(int(&c, "PRAGMA page_count"), pages - 5, "{mode}");
                    c.execute_batch("PRAGMA incremental_vacuum").unwrap();
                    assert_eq!(int(&c, "PRAGMA freelist_count"), 0, "{mode}");
                    assert_eq!(int(&c, "PRAGMA page_count"), pages - free, "{mode}");
                }
            }
            expect_rows(&c, mode.name());
            drop(c);
            // Reopened: the setting is the file's, the rows are all there.
            let c = Connection::open_with_mode(&path, mode.name()).unwrap();
            assert_eq!(int(&c, "PRAGMA auto_vacuum"), code, "{mode} {setting}");
            expect_rows(&c, mode.name());
        }
    }
}

#[test]
fn the_setting_changes_only_before_the_first_table_or_through_vacuum() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("set.db");
    let c = Connection::open_with_mode(&path, "wal").unwrap();
    c.execute_batch("CREATE TABLE a(x)").unwrap();
    // A database with a table keeps NONE (stock answers SQLITE_READONLY, which the pragma
    // ignores)...
    c.execute_batch("PRAGMA auto_vacuum=FULL").unwrap();
    assert_eq!(int(&c, "PRAGMA auto_vacuum"), 0);
    // ...until VACUUM takes the requested setting.
    c.execute_batch("VACUUM").unwrap();
    assert_eq!(int(&c, "PRAGMA auto_vacuum"), 1);
    // FULL and INCREMENTAL switch at any time.
    c.execute_batch("PRAGMA auto_vacuum=INCREMENTAL").unwrap();
    assert_eq!(int(&c, "PRAGMA auto_vacuum"), 2);
    c.execute_batch("PRAGMA auto_vacuum=FULL").unwrap();
    assert_eq!(int(&c, "PRAGMA auto_vacuum"), 1);
    // Back to NONE only through VACUUM.
    c.execute_batch("PRAGMA auto_vacuum=NONE").unwrap();
    assert_eq!(int(&c, "PRAGMA auto_vacuum"), 1);
    c.execute_batch("VACUUM").unwrap();
    assert_eq!(int(&c, "PRAGMA auto_vacuum"), 0);
    // incremental_vacuum on a database without the setting does nothing.
    c.execute_batch(
        "INSERT INTO a SELECT zeroblob(3000) FROM (SELECT 1 UNION SELECT 2 UNION SELECT 3);
         DELETE FROM a;",
    )
    .unwrap();
    let free = int(&c, "PRAGMA freelist_count");
    assert!(free > 0);
    c.execute_batch("PRAGMA incremental_vacuum").unwrap();
    assert_eq!(int(&c, "PRAGMA freelist_count"), free);
}

#[test]
fn a_reader_on_another_connection_keeps_its_snapshot_across_the_moves() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("two.db");
    let a = Connection::open(&path).unwrap();
    a.execute_batch("PRAGMA auto_vacuum=FULL").unwrap();
    load_and_delete(&a);
    a.execute_batch(
        "INSERT INTO t SELECT id + 3000, name, v FROM t; INSERT INTO t SELECT id + 6000, name, v FROM t;",
    )
    .unwrap();
    let b = Connection::open(&path).unwrap();
    b.execute_batch("BEGIN").unwrap();
    let before = int(&b, "SELECT count(*) FROM t");
    let sum = int(&b, "SELECT sum(length(v)) FROM t");
    let pages = int(&a, "PRAGMA page_count");
    // Deleting most rows frees pages; FULL moves the last ones down in the commit.
    a.execute_batch("DELETE FROM t WHERE id % 4 != 0").unwrap();
    assert!(int(&a, "PRAGMA page_count") < pages, "the file shrank");
    assert_eq!(int(&a, "PRAGMA freelist_count"), 0);
    // The reader's snapshot is the state before the delete, whole.
    assert_eq!(int(&b, "SELECT count(*) FROM t"), before);
    assert_eq!(int(&b, "SELECT sum(length(v)) FROM t"), sum);
    b.execute_batch("COMMIT").unwrap();
    assert_eq!(
        int(&b, "SELECT count(*) FROM t"),
        int(&a, "SELECT count(*) FROM t")
    );
    let ok = b.query("PRAGMA integrity_check", &[]).unwrap();
    assert_eq!(ok, vec![vec![Value::Text("ok".into())]]);
}
