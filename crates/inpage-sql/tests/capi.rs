//! The SQLite C API end to end on inpage files, through the symbols this crate exports:
//! schema, transactions, savepoints, reopen, journal modes, and the traps of SQLPLAN §2a
//! the glue handles (each test below fails without its fix).

mod common;

use common::Db;

fn rows(db: &Db, sql: &str) -> Vec<Vec<String>> {
    db.query(sql)
        .unwrap_or_else(|e| panic!("{sql}: {e:?}"))
        .into_iter()
        .map(|r| {
            r.into_iter()
                .map(|v| v.unwrap_or_else(|| "NULL".into()))
                .collect()
        })
        .collect()
}

/// The mode a new file gets.
const DEFAULT: &str = inpage::DEFAULT_JOURNAL_MODE.name();

fn v(items: &[&[&str]]) -> Vec<Vec<String>> {
    items
        .iter()
        .map(|r| r.iter().map(|s| s.to_string()).collect())
        .collect()
}

#[test]
fn end_to_end_on_a_file_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("e2e.db");
    {
        let db = Db::open_path(&path);
        assert_eq!(db.one("PRAGMA journal_mode").as_deref(), Some(DEFAULT));
        db.exec("CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, n INT); CREATE INDEX t_name ON t(name);")
            .unwrap();
        db.exec("BEGIN").unwrap();
        for i in 1..=50 {
            db.exec(&format!("INSERT INTO t(name, n) VALUES('name{i:03}', {i})"))
                .unwrap();
        }
        db.exec("COMMIT").unwrap();
        assert_eq!(db.one("SELECT count(*) FROM t").as_deref(), Some("50"));
        assert_eq!(
            rows(
                &db,
                "SELECT id, n FROM t WHERE name BETWEEN 'name010' AND 'name012' ORDER BY name"
            ),
            v(&[&["10", "10"], &["11", "11"], &["12", "12"]])
        );
        db.exec("UPDATE t SET n = n * 100 WHERE id % 10 = 0")
            .unwrap();
        assert_eq!(db.changes(), 5);
        db.exec("DELETE FROM t WHERE id > 45").unwrap();
        assert_eq!(db.changes(), 5);
        // ROLLBACK undoes a whole transaction.
        db.exec("BEGIN; DELETE FROM t; INSERT INTO t(name, n) VALUES('gone', 0);")
            .unwrap();
        assert_eq!(db.one("SELECT count(*) FROM t").as_deref(), Some("1"));
        db.exec("ROLLBACK").unwrap();
        assert_eq!(db.one("SELECT count(*) FROM t").as_deref(), Some("45"));
        // SAVEPOINT / ROLLBACK TO / RELEASE, nested.
        db.exec("BEGIN; INSERT INTO t(name, n) VALUES('keep1', 1); SAVEPOINT a;")
            .unwrap();
        db.exec("INSERT INTO t(name, n) VALUES('undo1', 1); SAVEPOINT b; INSERT INTO t(name, n) VALUES('undo2', 2);")
            .unwrap();
        db.exec("ROLLBACK TO a").unwrap();
        db.exec("INSERT INTO t(name, n) VALUES('keep2', 2); SAVEPOINT c; INSERT INTO t(name, n) VALUES('keep3', 3); RELEASE c; RELEASE a; COMMIT;")
            .unwrap();
        assert_eq!(
            rows(
                &db,
                "SELECT name FROM t WHERE name NOT LIKE 'name%' ORDER BY name"
            ),
            v(&[&["keep1"], &["keep2"], &["keep3"]])
        );
        assert_eq!(db.one("PRAGMA integrity_check").as_deref(), Some("ok"));
    }
    let db = Db::open_path(&path);
    assert_eq!(db.one("SELECT count(*) FROM t").as_deref(), Some("48"));
    assert_eq!(
        db.one("SELECT sum(n) FROM t WHERE name LIKE 'name%'")
            .as_deref(),
        Some("10935")
    );
    assert_eq!(
        db.one("SELECT n FROM t WHERE name = 'name040'").as_deref(),
        Some("4000")
    );
    assert_eq!(db.one("PRAGMA journal_mode").as_deref(), Some(DEFAULT));
}

#[test]
fn journal_mode_change_is_refused_with_the_mode_in_use() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_path(&dir.path().join("jm.db"));
    db.exec("CREATE TABLE t(a)").unwrap();
    // inpage's mode is the file's: asking for another one answers the mode in use.
    assert_eq!(
        db.one("PRAGMA journal_mode='wal'").as_deref(),
        Some(DEFAULT)
    );
    assert_eq!(
        db.one("PRAGMA journal_mode=delete").as_deref(),
        Some(DEFAULT)
    );
    assert_eq!(db.one("PRAGMA journal_mode").as_deref(), Some(DEFAULT));
    // In-memory databases report SQLite's "memory".
    let mem = Db::open(":memory:").unwrap();
    assert_eq!(mem.one("PRAGMA journal_mode").as_deref(), Some("memory"));
    assert_eq!(
        mem.one("PRAGMA journal_mode=wal").as_deref(),
        Some("memory")
    );
}

/// PRAGMA journal_mode sets the mode of a database that is still empty (apps ask for
/// WAL right after opening a new file), in SQLite's names and inpage's (`dhl` is the
/// counting-commit DHL, `dhl-cc`), and the file keeps it across reopens.
#[test]
fn journal_mode_is_set_on_an_empty_database() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("new.db");
    {
        let db = Db::open_path(&path);
        assert_eq!(db.one("PRAGMA journal_mode").as_deref(), Some(DEFAULT));
        assert_eq!(db.one("PRAGMA journal_mode=WAL").as_deref(), Some("wal"));
        assert_eq!(
            db.one("PRAGMA journal_mode=delete").as_deref(),
            Some("delete")
        );
        assert_eq!(db.one("PRAGMA journal_mode=dhl").as_deref(), Some("dhl-cc"));
        assert_eq!(
            db.one("PRAGMA journal_mode='dhl-tc'").as_deref(),
            Some("dhl-tc")
        );
        assert_eq!(
            db.one("PRAGMA journal_mode=memory").as_deref(),
            Some("dhl-tc")
        );
        assert_eq!(db.one("PRAGMA journal_mode=wal").as_deref(), Some("wal"));
        // A second connection in the process: no more switching.
        let other = Db::open_path(&path);
        assert_eq!(
            other.one("PRAGMA journal_mode=delete").as_deref(),
            Some("wal")
        );
        drop(other);
        db.exec("CREATE TABLE t(a); INSERT INTO t VALUES(1)")
            .unwrap();
        // Not empty any more: the mode stays.
        assert_eq!(
            db.one("PRAGMA journal_mode='dhl-cc'").as_deref(),
            Some("wal")
        );
        assert_eq!(db.one("SELECT a FROM t").as_deref(), Some("1"));
    }
    let db = Db::open_path(&path);
    assert_eq!(db.one("PRAGMA journal_mode").as_deref(), Some("wal"));
    assert_eq!(db.one("SELECT a FROM t").as_deref(), Some("1"));
    assert_eq!(db.one("PRAGMA integrity_check").as_deref(), Some("ok"));
    // Inside a transaction the mode does not change either: into WAL it is SQLite's own
    // error, into another mode the answer is the mode in use.
    let fresh = Db::open_path(&dir.path().join("fresh.db"));
    fresh.exec("BEGIN").unwrap();
    let e = fresh.query("PRAGMA journal_mode=wal").unwrap_err();
    assert!(
        e.msg
            .contains("cannot change into wal mode from within a transaction"),
        "{e:?}"
    );
    assert_eq!(
        fresh.one("PRAGMA journal_mode='dhl-tc'").as_deref(),
        Some(DEFAULT)
    );
    fresh.exec("COMMIT").unwrap();
    assert_eq!(fresh.one("PRAGMA journal_mode=wal").as_deref(), Some("wal"));
}

/// `PRAGMA page_size = n` as in stock SQLite: it takes effect on a database nothing has
/// been written to (in every journal mode, registry order), survives a journal-mode
/// switch and a reopen, and is ignored once there are tables, or for a size that is not
/// a power of two from 512 to 65536.
#[test]
fn page_size_is_set_on_an_empty_database() {
    let dir = tempfile::tempdir().unwrap();
    for mode in inpage::JournalMode::all() {
        let path = dir.path().join(format!("{}.db", mode.name()));
        {
            let db = Db::open_path(&path);
            db.exec(&format!("PRAGMA journal_mode='{}'", mode.name()))
                .unwrap();
            assert_eq!(
                db.one("PRAGMA page_size").as_deref(),
                Some("4096"),
                "{mode}"
            );
            db.exec("PRAGMA page_size=8192").unwrap();
            assert_eq!(
                db.one("PRAGMA page_size").as_deref(),
                Some("8192"),
                "{mode}"
            );
            db.exec("PRAGMA page_size=3000").unwrap();
            assert_eq!(
                db.one("PRAGMA page_size").as_deref(),
                Some("8192"),
                "{mode}"
            );
            assert_eq!(
                db.one("PRAGMA journal_mode").as_deref(),
                Some(mode.name()),
                "{mode}: the size changed the mode"
            );
            db.exec("CREATE TABLE t(a); INSERT INTO t VALUES(zeroblob(20000))")
                .unwrap();
            db.exec("PRAGMA page_size=1024").unwrap();
            assert_eq!(
                db.one("PRAGMA page_size").as_deref(),
                Some("8192"),
                "{mode}"
            );
        }
        let db = Db::open_path(&path);
        assert_eq!(
            db.one("PRAGMA page_size").as_deref(),
            Some("8192"),
            "{mode}"
        );
        assert_eq!(
            db.one("SELECT length(a) FROM t").as_deref(),
            Some("20000"),
            "{mode}"
        );
        assert_eq!(
            db.one("PRAGMA integrity_check").as_deref(),
            Some("ok"),
            "{mode}"
        );
        drop(db);
        let _ = std::fs::remove_file(inpage::Config::default().journal.nvlog_region_for(&path));
    }
}

/// Trap 1: SAVEPOINT only bumps db->nSavepoint; the b-tree must open the savepoints on
/// the next write BeginTrans, or ROLLBACK TO undoes nothing. Also covers trap 3
/// (Savepoint/TripAllCursors called with the temp slot's NULL Btree).
#[test]
fn trap1_lazy_savepoints_are_opened_before_the_first_write() {
    let db = Db::open(":memory:").unwrap();
    db.exec("CREATE TABLE t(a)").unwrap();
    db.exec("SAVEPOINT sp1; INSERT INTO t VALUES(1); SAVEPOINT sp2; INSERT INTO t VALUES(2); SAVEPOINT sp3; INSERT INTO t VALUES(3);")
        .unwrap();
    db.exec("ROLLBACK TO sp2").unwrap();
    assert_eq!(rows(&db, "SELECT a FROM t"), v(&[&["1"]]));
    db.exec("RELEASE sp1").unwrap();
    assert_eq!(rows(&db, "SELECT a FROM t"), v(&[&["1"]]));
}

/// Trap 6: OP_Column keeps the pointer PayloadFetch returned while CursorHasMoved says
/// no; a DELETE from a table with two indexes read freed memory and built a wrong index
/// probe (SQLITE_CORRUPT_INDEX) when the buffer was replaced behind its back.
#[test]
fn trap6_delete_from_a_table_with_two_indexes() {
    let db = Db::open(":memory:").unwrap();
    db.exec("CREATE TABLE t(a INTEGER PRIMARY KEY, b TEXT, c INT); CREATE INDEX tb ON t(b); CREATE INDEX tc ON t(c);")
        .unwrap();
    db.exec("BEGIN").unwrap();
    for i in 0..300 {
        db.exec(&format!(
            "INSERT INTO t VALUES({i}, 'b{:04}', {})",
            (i * 7) % 300,
            i % 17
        ))
        .unwrap();
    }
    db.exec("COMMIT").unwrap();
    db.exec("DELETE FROM t WHERE c BETWEEN 3 AND 9").unwrap();
    db.exec("UPDATE t SET c = c + 100 WHERE b > 'b0150'")
        .unwrap();
    let n = db.one("SELECT count(*) FROM t").unwrap();
    assert_eq!(
        db.one("SELECT count(*) FROM t INDEXED BY tb WHERE b >= ''")
            .unwrap(),
        n
    );
    assert_eq!(
        db.one("SELECT count(*) FROM t INDEXED BY tc WHERE c >= 0")
            .unwrap(),
        n
    );
    assert_eq!(db.one("PRAGMA integrity_check").as_deref(), Some("ok"));
}

/// Trap 7: an index insert replaces the entry equal under the first nMem fields (the
/// primary key of a WITHOUT ROWID table), not the byte-equal one.
#[test]
fn trap7_without_rowid_replace_and_upsert_keep_one_row() {
    let db = Db::open(":memory:").unwrap();
    db.exec("CREATE TABLE w(k INTEGER PRIMARY KEY, v TEXT) WITHOUT ROWID")
        .unwrap();
    db.exec("INSERT OR REPLACE INTO w VALUES(1, 'a'); INSERT OR REPLACE INTO w VALUES(1, 'b');")
        .unwrap();
    db.exec("INSERT INTO w VALUES(2, 'x') ON CONFLICT(k) DO UPDATE SET v = 'y'; INSERT INTO w VALUES(2, 'z') ON CONFLICT(k) DO UPDATE SET v = 'y';")
        .unwrap();
    assert_eq!(
        rows(&db, "SELECT k, v FROM w ORDER BY k"),
        v(&[&["1", "b"], &["2", "y"]])
    );
}

/// Trap 8: LastPage bounds every schema rootpage; table numbers come from a counter,
/// so after more tables than pages a reopen must still accept the schema.
#[test]
fn trap8_many_tables_survive_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("many.db");
    {
        let db = Db::open_path(&path);
        db.exec("BEGIN").unwrap();
        for i in 0..120 {
            db.exec(&format!(
                "CREATE TABLE t{i}(a); CREATE INDEX i{i} ON t{i}(a); INSERT INTO t{i} VALUES({i});"
            ))
            .unwrap();
        }
        db.exec("COMMIT").unwrap();
    }
    let db = Db::open_path(&path);
    assert_eq!(
        db.one("SELECT a FROM t119 WHERE a = 119").as_deref(),
        Some("119")
    );
    assert_eq!(
        db.one("SELECT count(*) FROM sqlite_schema").as_deref(),
        Some("240")
    );
}

/// Index keys of any size, stored whole (no hashing, no truncation): rows whose TEXT
/// values are 5,000 and 100,000 bytes, sharing all but their last bytes, in a unique and
/// a non-unique index; ORDER BY through the index, lookups by the long value, the unique
/// constraint, deletes, and `PRAGMA integrity_check`, on a file and in memory.
#[test]
fn long_index_keys_are_stored_whole() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("long.db");
    for name in [":memory:", path.to_str().unwrap()] {
        let db = Db::open(name).unwrap();
        db.exec(
            "CREATE TABLE t(id INTEGER PRIMARY KEY, a TEXT, b TEXT);
             CREATE UNIQUE INDEX ta ON t(a); CREATE INDEX tb ON t(b);",
        )
        .unwrap();
        // a: unique, only its last 3 bytes differ; b: 4 distinct values, each repeated.
        // Both lengths sit far past the engine's inline key limit (1,008 bytes).
        let a = |i: usize| {
            let len = [5_000, 100_000][i % 2];
            format!("{}{:03}", "x".repeat(len), (i * 37) % 100)
        };
        let b = |i: usize| format!("{}{}", "y".repeat([5_000, 100_000][i % 2]), i % 4);
        let n = 24;
        db.exec("BEGIN").unwrap();
        for i in 0..n {
            db.exec(&format!(
                "INSERT INTO t VALUES({i}, '{}', '{}')",
                a(i),
                b(i)
            ))
            .unwrap();
        }
        db.exec("COMMIT").unwrap();
        assert_eq!(db.one("PRAGMA integrity_check").as_deref(), Some("ok"));
        // ORDER BY a is answered by the index, in the order of the full values.
        let plan = rows(&db, "EXPLAIN QUERY PLAN SELECT id FROM t ORDER BY a");
        assert!(
            plan.iter()
                .any(|r| r.iter().any(|c| c.contains("INDEX ta"))),
            "{plan:?}"
        );
        let mut want: Vec<(String, usize)> = (0..n).map(|i| (a(i), i)).collect();
        want.sort();
        let got: Vec<String> = rows(&db, "SELECT id FROM t ORDER BY a")
            .into_iter()
            .map(|r| r[0].clone())
            .collect();
        let want_ids: Vec<String> = want.iter().map(|(_, i)| i.to_string()).collect();
        assert_eq!(got, want_ids);
        // Lookups by the long value, through each index.
        for i in [0, 1, 7, 22] {
            assert_eq!(
                db.one(&format!(
                    "SELECT id FROM t INDEXED BY ta WHERE a = '{}'",
                    a(i)
                )),
                Some(i.to_string())
            );
            assert_eq!(
                db.one(&format!(
                    "SELECT count(*) FROM t INDEXED BY tb WHERE b = '{}'",
                    b(i)
                )),
                Some((n / 4).to_string())
            );
        }
        // A value one byte off is another key.
        let near = format!("{}!", &a(3)[..a(3).len() - 1]);
        assert_eq!(
            db.one(&format!("SELECT count(*) FROM t WHERE a = '{near}'")),
            Some("0".into())
        );
        // The unique index refuses the same long value again, whole.
        let e = db
            .exec(&format!("INSERT INTO t VALUES(100, '{}', 'z')", a(5)))
            .unwrap_err();
        assert_eq!(e.code & 0xff, 19, "{e:?}"); // SQLITE_CONSTRAINT
        db.exec(&format!("INSERT INTO t VALUES(100, '{near}', 'z')"))
            .unwrap();
        // Deletes by the long value, then the rest of a range through the index.
        for i in (0..n).step_by(3) {
            db.exec(&format!("DELETE FROM t WHERE a = '{}'", a(i)))
                .unwrap();
        }
        db.exec(&format!("DELETE FROM t WHERE b = '{}'", b(1)))
            .unwrap();
        let left: Vec<usize> = (0..n).filter(|i| i % 3 != 0 && i % 4 != 1).collect();
        assert_eq!(
            db.one("SELECT count(*) FROM t WHERE id < 100"),
            Some(left.len().to_string())
        );
        let got: Vec<String> = rows(&db, "SELECT id FROM t WHERE id < 100 ORDER BY a")
            .into_iter()
            .map(|r| r[0].clone())
            .collect();
        let want_ids: Vec<String> = want
            .iter()
            .filter(|(_, i)| left.contains(i))
            .map(|(_, i)| i.to_string())
            .collect();
        assert_eq!(got, want_ids);
        assert_eq!(db.one("PRAGMA integrity_check").as_deref(), Some("ok"));
        db.exec("DELETE FROM t").unwrap();
        assert_eq!(db.one("PRAGMA integrity_check").as_deref(), Some("ok"));
    }
}

/// Trap 4: ROLLBACK TO does not fault read cursors; they keep their position (by key)
/// and continue over the rolled-back state, as in SQLite.
#[test]
fn trap4_a_pending_read_survives_rollback_to() {
    let db = Db::open(":memory:").unwrap();
    db.exec("CREATE TABLE t(a INTEGER PRIMARY KEY, b)").unwrap();
    db.exec("BEGIN").unwrap();
    for i in 1..=10 {
        db.exec(&format!("INSERT INTO t VALUES({i}, {i})")).unwrap();
    }
    db.exec("SAVEPOINT s; INSERT INTO t VALUES(11, 11); UPDATE t SET b = -b WHERE a > 5;")
        .unwrap();
    let mut q = db.prepare("SELECT b FROM t ORDER BY a").unwrap();
    let mut got = Vec::new();
    for _ in 0..3 {
        got.push(q.next_first().unwrap().unwrap());
    }
    db.exec("ROLLBACK TO s").unwrap();
    while let Some(b) = q.next_first().unwrap() {
        got.push(b);
    }
    drop(q);
    db.exec("COMMIT").unwrap();
    let want: Vec<String> = (1..=10).map(|i| i.to_string()).collect();
    assert_eq!(got, want);
}

/// VACUUM after deleting most rows shrinks the file as SQLite's does (the copy rebuilds
/// the page space from page 1 and the journal cuts the file once it holds the rebuilt
/// state), in the default mode and in `wal`; a reader on another connection keeps its
/// snapshot whole across the VACUUM, the cut and the file growing again.
#[test]
fn vacuum_shrinks_the_file_and_readers_keep_their_snapshot() {
    for mode in [DEFAULT, "wal"] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("shrink.db");
        let db = Db::open_path(&path);
        db.exec(&format!("PRAGMA journal_mode={mode}")).unwrap();
        db.exec("CREATE TABLE t(a INTEGER PRIMARY KEY, b TEXT); CREATE INDEX tb ON t(b);")
            .unwrap();
        db.exec("BEGIN").unwrap();
        for i in 0..3000 {
            db.exec(&format!(
                "INSERT INTO t VALUES({i}, printf('%08d', {i}) || zeroblob(150))"
            ))
            .unwrap();
        }
        db.exec("COMMIT").unwrap();
        db.exec("DELETE FROM t WHERE a % 10 != 0").unwrap();
        let reader = Db::open_path(&path);
        reader.exec("BEGIN").unwrap();
        let snapshot = "SELECT count(*), sum(length(b)), max(b) FROM t";
        let before = rows(&reader, snapshot);
        assert_eq!(before[0][0], "300", "{mode}");
        let pages_before: u64 = db.one("PRAGMA page_count").unwrap().parse().unwrap();
        db.exec("VACUUM").unwrap();
        db.exec("PRAGMA wal_checkpoint(TRUNCATE)").unwrap();
        let pages: u64 = db.one("PRAGMA page_count").unwrap().parse().unwrap();
        assert!(
            pages * 5 < pages_before,
            "{mode}: {pages_before} pages before VACUUM, {pages} after"
        );
        // Growth over the pages the VACUUM dropped, checkpointed into the file.
        db.exec("BEGIN").unwrap();
        for i in 0..3000 {
            db.exec(&format!(
                "INSERT OR REPLACE INTO t VALUES({i}, 'new' || zeroblob(150))"
            ))
            .unwrap();
        }
        db.exec("COMMIT").unwrap();
        db.exec("PRAGMA wal_checkpoint(TRUNCATE)").unwrap();
        assert_eq!(
            rows(&reader, snapshot),
            before,
            "{mode}: the reader's snapshot"
        );
        assert_eq!(
            reader.one("PRAGMA integrity_check").as_deref(),
            Some("ok"),
            "{mode}"
        );
        reader.exec("COMMIT").unwrap();
        drop(reader);
        db.exec("DELETE FROM t WHERE a >= 300").unwrap();
        db.exec("VACUUM").unwrap();
        db.exec("PRAGMA wal_checkpoint(TRUNCATE)").unwrap();
        let pages: u64 = db.one("PRAGMA page_count").unwrap().parse().unwrap();
        let page_size: u64 = db.one("PRAGMA page_size").unwrap().parse().unwrap();
        assert_eq!(
            std::fs::metadata(&path).unwrap().len(),
            pages * page_size,
            "{mode}: the file is cut back to its page count"
        );
        assert_eq!(db.one("SELECT count(*) FROM t").as_deref(), Some("300"));
        assert_eq!(db.one("PRAGMA integrity_check").as_deref(), Some("ok"));
        drop(db);
        let db = Db::open_path(&path);
        assert_eq!(db.one("SELECT count(*) FROM t").as_deref(), Some("300"));
        assert_eq!(db.one("PRAGMA integrity_check").as_deref(), Some("ok"));
    }
}

/// VACUUM (sqlite3BtreeCopyFile as a tree copy) keeps every row, index and meta value,
/// also across a reopen; VACUUM INTO writes a new inpage file.
#[test]
fn vacuum_keeps_content_and_indexes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("vac.db");
    let into = dir.path().join("into.db");
    {
        let db = Db::open_path(&path);
        db.exec("CREATE TABLE t(a INTEGER PRIMARY KEY, b TEXT); CREATE INDEX tb ON t(b); CREATE TABLE w(k TEXT PRIMARY KEY, v) WITHOUT ROWID; PRAGMA user_version = 7;")
            .unwrap();
        db.exec("BEGIN").unwrap();
        for i in 0..600 {
            db.exec(&format!(
                "INSERT INTO t(b) VALUES('v{:04}'); INSERT INTO w VALUES('k{i}', {i});",
                (i * 7919) % 600
            ))
            .unwrap();
        }
        db.exec("COMMIT; DELETE FROM t WHERE a % 3 = 0; PRAGMA application_id = 9;")
            .unwrap();
        // A second connection, which must reread the schema after the VACUUM (the
        // cookie moves one up, as stock's does) and see the same rows.
        let other = Db::open_path(&path);
        assert_eq!(other.one("SELECT count(*) FROM t").as_deref(), Some("400"));
        let cookie: i64 = db.one("PRAGMA schema_version").unwrap().parse().unwrap();
        db.exec("VACUUM").unwrap();
        assert_eq!(db.one("SELECT count(*) FROM t").as_deref(), Some("400"));
        assert_eq!(
            db.one("PRAGMA schema_version").as_deref(),
            Some((cookie + 1).to_string().as_str())
        );
        assert_eq!(db.one("PRAGMA application_id").as_deref(), Some("9"));
        assert_eq!(
            other.one("SELECT count(*), max(a) FROM t INDEXED BY tb WHERE b >= ''"),
            Some("400".into())
        );
        drop(other);
        db.exec(&format!("VACUUM INTO '{}'", into.display()))
            .unwrap();
    }
    for p in [&path, &into] {
        let db = Db::open_path(p);
        assert_eq!(
            db.one("SELECT count(*) FROM t INDEXED BY tb WHERE b >= ''")
                .as_deref(),
            Some("400")
        );
        assert_eq!(
            rows(
                &db,
                "SELECT b FROM t WHERE b BETWEEN 'v0100' AND 'v0103' ORDER BY b"
            ),
            v(&[&["v0101"], &["v0102"]])
        );
        assert_eq!(
            db.one("SELECT v FROM w WHERE k = 'k599'").as_deref(),
            Some("599")
        );
        assert_eq!(db.one("PRAGMA user_version").as_deref(), Some("7"));
        assert_eq!(db.one("PRAGMA integrity_check").as_deref(), Some("ok"));
        assert_eq!(db.one("PRAGMA journal_mode").as_deref(), Some(DEFAULT));
        db.exec("INSERT INTO t(b) VALUES('after')").unwrap();
        assert_eq!(
            db.one("SELECT count(*) FROM t WHERE b = 'after'")
                .as_deref(),
            Some("1")
        );
    }
}

/// Two connections to one file in one process share the engine handle: a reader sees
/// the last commit (snapshot isolation), a second writer gets SQLITE_BUSY, a stale
/// read transaction cannot be upgraded (SQLITE_BUSY_SNAPSHOT, as in SQLite's WAL mode),
/// and the file stays open until the last connection closes.
#[test]
fn two_connections_share_one_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("two.db");
    let a = Db::open_path(&path);
    let b = Db::open_path(&path);
    a.exec("CREATE TABLE t(x); INSERT INTO t VALUES(1);")
        .unwrap();
    assert_eq!(b.one("SELECT count(*) FROM t").as_deref(), Some("1"));
    a.exec("BEGIN; INSERT INTO t VALUES(2);").unwrap();
    assert_eq!(b.one("SELECT count(*) FROM t").as_deref(), Some("1"));
    let e = b.exec("INSERT INTO t VALUES(3)").unwrap_err();
    assert_eq!(e.code & 0xff, 5, "{e:?}"); // SQLITE_BUSY
    a.exec("COMMIT").unwrap();
    b.exec("INSERT INTO t VALUES(3)").unwrap();
    assert_eq!(a.one("SELECT count(*) FROM t").as_deref(), Some("3"));
    b.exec("BEGIN").unwrap();
    assert_eq!(b.one("SELECT count(*) FROM t").as_deref(), Some("3"));
    a.exec("INSERT INTO t VALUES(4)").unwrap();
    let e = b.exec("INSERT INTO t VALUES(5)").unwrap_err();
    assert_eq!(e.code, 5 | (2 << 8), "{e:?}"); // SQLITE_BUSY_SNAPSHOT
    b.exec("ROLLBACK").unwrap();
    drop(a);
    assert_eq!(b.one("SELECT count(*) FROM t").as_deref(), Some("4"));
    drop(b);
    // Closed: a new connection opens the file again (the registry let it go).
    let c = Db::open_path(&path);
    assert_eq!(c.one("SELECT sum(x) FROM t").as_deref(), Some("10"));
}

/// PRAGMA data_version changes when another connection commits, not for own commits.
#[test]
fn data_version_tracks_other_connections() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dv.db");
    let a = Db::open_path(&path);
    let b = Db::open_path(&path);
    a.exec("CREATE TABLE t(x)").unwrap();
    let v0 = a.one("PRAGMA data_version");
    let f0 = a.fcntl_data_version();
    a.exec("INSERT INTO t VALUES(1)").unwrap();
    assert_eq!(a.one("PRAGMA data_version"), v0, "own commit");
    // The file-control version counts every commit, own ones included.
    assert_ne!(a.fcntl_data_version(), f0);
    let w0 = b.one("PRAGMA data_version");
    b.exec("INSERT INTO t VALUES(2)").unwrap();
    assert_eq!(b.one("PRAGMA data_version"), w0, "own commit");
    let v1 = a.one("PRAGMA data_version");
    assert_ne!(v1, v0, "b's commit must show in a's data_version");
    assert_eq!(a.one("PRAGMA data_version"), v1, "nothing new");
}

/// Index trees are ordered by the index's KeyInfo (here a collation and DESC): scans
/// see that order, and statements that write the index they walk (the engine re-finds
/// a cursor's key with the KeyInfo order after each write) keep every row exactly once.
#[test]
fn index_order_is_the_keyinfo_order_also_across_writes() {
    let db = Db::open(":memory:").unwrap();
    db.exec("CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT); CREATE INDEX t_name ON t(name COLLATE NOCASE DESC);")
        .unwrap();
    db.exec("BEGIN").unwrap();
    let mut names = Vec::new();
    for i in 0..400 {
        // Mixed case: byte order and NOCASE order differ.
        let n = if i % 2 == 1 {
            format!("Name{:03}", (i * 37) % 400)
        } else {
            format!("name{:03}", (i * 37) % 400)
        };
        db.exec(&format!("INSERT INTO t(name) VALUES('{n}')"))
            .unwrap();
        names.push(n);
    }
    db.exec("COMMIT").unwrap();
    let scan = "SELECT name FROM t INDEXED BY t_name WHERE name > '' COLLATE NOCASE ORDER BY name COLLATE NOCASE DESC";
    let mut want = names.clone();
    want.sort_by_key(|n| std::cmp::Reverse(n.to_lowercase()));
    let got: Vec<String> = rows(&db, scan).into_iter().map(|r| r[0].clone()).collect();
    assert_eq!(got, want);

    // Writes to the walked index: a range delete and an update that moves keys.
    db.exec("DELETE FROM t WHERE name COLLATE NOCASE BETWEEN 'name100' AND 'NAME199'")
        .unwrap();
    assert_eq!(db.changes(), 100);
    db.exec("UPDATE t SET name = name || 'x' WHERE name COLLATE NOCASE > 'name300'")
        .unwrap();
    assert_eq!(db.changes(), 99);
    let mut want: Vec<String> = names
        .iter()
        .filter(|n| !(n[4..].starts_with('1')))
        .map(|n| {
            if n.to_lowercase().as_str() > "name300" {
                format!("{n}x")
            } else {
                n.clone()
            }
        })
        .collect();
    want.sort_by_key(|n| std::cmp::Reverse(n.to_lowercase()));
    let got: Vec<String> = rows(&db, scan).into_iter().map(|r| r[0].clone()).collect();
    assert_eq!(got, want);
    assert_eq!(db.one("PRAGMA integrity_check").as_deref(), Some("ok"));
}

/// Rows whose value lives in an overflow chain: read back whole, also while other rows
/// of the table are rewritten under a running scan.
#[test]
fn overflow_rows_read_back_during_a_rewriting_scan() {
    let db = Db::open(":memory:").unwrap();
    db.exec("CREATE TABLE b(id INTEGER PRIMARY KEY, v TEXT, n INT)")
        .unwrap();
    db.exec("BEGIN").unwrap();
    // Row i: 10,000 + 500 i bytes of 'a', then i as two digits.
    for i in 0..20 {
        db.exec(&format!(
            "INSERT INTO b VALUES({i}, replace(hex(zeroblob({})), '0', 'a') || printf('%02d', {i}), 0)",
            5_000 + i * 250
        ))
        .unwrap();
    }
    db.exec("COMMIT").unwrap();
    db.exec("UPDATE b SET n = length(v), v = v || 'z' WHERE id % 2 = 0")
        .unwrap();
    let got = rows(&db, "SELECT id, length(v), substr(v, -4), n FROM b");
    assert_eq!(got.len(), 20);
    for (i, r) in got.iter().enumerate() {
        let len = 10_000 + i * 500 + 2;
        let (len, tail, n) = if i % 2 == 0 {
            (len + 1, format!("a{i:02}z"), len.to_string())
        } else {
            (len, format!("aa{i:02}"), "0".to_string())
        };
        assert_eq!(r, &vec![i.to_string(), len.to_string(), tail, n]);
    }
}

/// Values in overflow chains on both sides of the size the glue reads whole at a row's
/// first access (ffi.rs WHOLE_MAX, 64 KiB; past it only a prefix, and SQLite reads the
/// rest by range): every column after the value, every slice of it, and rows copied
/// whole (INSERT … SELECT's transfer, VACUUM) read back the bytes written.
#[test]
fn large_values_read_back_by_range() {
    let db = Db::open(":memory:").unwrap();
    db.exec("CREATE TABLE b(id INTEGER PRIMARY KEY, v TEXT, tail TEXT)")
        .unwrap();
    // v: the numbers 0, 1, … as eight digits each, so the slice at 8k + 1 reads k
    // (every size a multiple of 8).
    let sizes = [104usize, 4_088, 4_104, 65_528, 65_536, 65_544, 300_000];
    for (i, n) in sizes.iter().enumerate() {
        db.exec(&format!(
            "INSERT INTO b VALUES({i}, (WITH RECURSIVE c(k) AS (SELECT 0 UNION ALL \
             SELECT k + 1 FROM c WHERE k + 1 < {}) SELECT group_concat(printf('%08d', k), '') \
             FROM c), 'tail-{i}')",
            n / 8
        ))
        .unwrap();
    }
    let check = |table: &str| {
        for (i, n) in sizes.iter().enumerate() {
            let last = n / 8 - 1;
            let got = rows(
                &db,
                &format!(
                    "SELECT tail, length(v), substr(v, 1, 8), substr(v, {}, 8), \
                     substr(v, {}, 8) FROM {table} WHERE id = {i}",
                    8 * (last / 2) + 1,
                    8 * last + 1
                ),
            );
            let want = vec![
                format!("tail-{i}"),
                n.to_string(),
                "00000000".to_string(),
                format!("{:08}", last / 2),
                format!("{last:08}"),
            ];
            assert_eq!(got, vec![want], "{table}, row {i} ({n} bytes)");
        }
        // One scan over all rows, in one result row: SQLite caches a large column read
        // by range per row (keyed by sqlite3BtreeOffset; a result row also clears it),
        // which must not serve one row's value for the next.
        let got = db.one(&format!(
            "SELECT group_concat(id || ':' || length(v) || ':' || substr(v, -8, 8), ',') \
             FROM {table}"
        ));
        let want: Vec<String> = sizes
            .iter()
            .enumerate()
            .map(|(i, n)| format!("{i}:{n}:{:08}", n / 8 - 1))
            .collect();
        let want = Some(want.join(","));
        assert_eq!(got, want, "{table}, one scan");
    };
    check("b");
    db.exec("CREATE TABLE b2(id INTEGER PRIMARY KEY, v TEXT, tail TEXT)")
        .unwrap();
    db.exec("INSERT INTO b2 SELECT * FROM b").unwrap();
    check("b2");
    db.exec("VACUUM").unwrap();
    check("b");
    check("b2");
}
