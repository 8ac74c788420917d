//! The cdylib as a drop-in libsqlite3: Python's sqlite3 module loads it through
//! LD_LIBRARY_PATH (a `libsqlite3.so.0` symlink to the library cargo built) and runs on
//! inpage. Skipped, with the reason printed, only if python3 or its sqlite3 module is
//! missing.

mod pylib;

use std::process::Command;

const SCRIPT: &str = r#"
import sqlite3, sys
path = sys.argv[1]
print("version", sqlite3.sqlite_version)
c = sqlite3.connect(path)
print("mode", c.execute("PRAGMA journal_mode").fetchone()[0])
c.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT)")
c.execute("CREATE INDEX t_name ON t(name)")
with c:
    c.executemany("INSERT INTO t(name) VALUES(?)", [("n%04d" % i,) for i in range(500)])
try:
    with c:
        c.execute("DELETE FROM t")
        raise RuntimeError("roll back")
except RuntimeError:
    pass
c.close()
c = sqlite3.connect(path)
print("count", c.execute("SELECT count(*) FROM t").fetchone()[0])
print("range", c.execute("SELECT min(id), max(id) FROM t WHERE name >= 'n0490'").fetchone())
print("mode", c.execute("PRAGMA journal_mode='wal'").fetchone()[0])
# The variadic API (exported through naked tail jumps): ints, a string and a double.
import ctypes
lib = ctypes.CDLL("libsqlite3.so.0")
lib.sqlite3_mprintf.restype = ctypes.c_void_p
p = lib.sqlite3_mprintf(b"%d-%s-%.2f", 42, b"x", ctypes.c_double(1.5))
print("mprintf", ctypes.string_at(p).decode())
lib.sqlite3_free(ctypes.c_void_p(p))
# The backup API (one tree copy), into a file that had other content and into memory.
dst = sqlite3.connect(path + ".bak")
dst.execute("CREATE TABLE junk(x)")
dst.commit()
src = sqlite3.connect(path)  # a second connection: shares the file handle
src.backup(dst)
print("backup", dst.execute("SELECT count(*), max(name) FROM t INDEXED BY t_name").fetchone(),
      dst.execute("SELECT count(*) FROM sqlite_schema WHERE name = 'junk'").fetchone()[0],
      dst.execute("PRAGMA integrity_check").fetchone()[0])
mem = sqlite3.connect(":memory:")
src.backup(mem)
print("backup-mem", mem.execute("SELECT count(*) FROM t WHERE name >= 'n0250'").fetchone()[0])
"#;

#[test]
fn python_sqlite3_runs_on_the_cdylib() {
    if let Some(why) = pylib::no_python_sqlite3() {
        println!("SKIPPED: {why}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let lib = pylib::lib_dir(dir.path());
    let db = dir.path().join("py.db");
    let out = Command::new("python3")
        .args(["-c", SCRIPT])
        .arg(&db)
        .env("LD_LIBRARY_PATH", &lib)
        .env_remove(inpage_sql::JOURNAL_MODE_ENV)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "python failed:\n{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // 3.53.2 is the vendored amalgamation (the system library is another version).
    let mode = inpage::DEFAULT_JOURNAL_MODE.name();
    let want = format!("version 3.53.2\nmode {mode}\ncount 500\nrange (491, 500)\nmode {mode}\nmprintf 42-x-1.50\nbackup (500, 'n0499') 0 ok\nbackup-mem 250\n");
    assert_eq!(text, want);
}

/// An app that asks for WAL on a new database, as Android apps do: it gets the engine's
/// `wal` mode, unless the platform set the deployment switch, which wins (the app's
/// request answers the mode really in use).
const APP_ASKS_WAL: &str = r#"
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
print(c.execute("PRAGMA journal_mode=WAL").fetchone()[0])
c.execute("CREATE TABLE t(a)")
c.execute("INSERT INTO t VALUES(1)")
c.commit()
print(c.execute("PRAGMA journal_mode=DELETE").fetchone()[0])
c.close()
print(sqlite3.connect(sys.argv[1]).execute("PRAGMA journal_mode").fetchone()[0])
"#;

#[test]
fn an_app_asking_for_wal_and_the_deployment_switch() {
    if let Some(why) = pylib::no_python_sqlite3() {
        println!("SKIPPED: {why}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let lib = pylib::lib_dir(dir.path());
    let run = |db: &str, forced: Option<&str>| {
        let mut cmd = Command::new("python3");
        cmd.args(["-c", APP_ASKS_WAL])
            .arg(dir.path().join(db))
            .env("LD_LIBRARY_PATH", &lib);
        match forced {
            Some(m) => cmd.env(inpage_sql::JOURNAL_MODE_ENV, m),
            None => cmd.env_remove(inpage_sql::JOURNAL_MODE_ENV),
        };
        let o = cmd.output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).unwrap()
    };
    // The app's request is met on a new file; once the file has content it stays.
    assert_eq!(run("app.db", None), "wal\nwal\nwal\n");
    // The platform's switch: every database uses dhl-cc whatever the app asks.
    assert_eq!(
        run("platform.db", Some("dhl-cc")),
        "dhl-cc\ndhl-cc\ndhl-cc\n"
    );
}

/// Cases aimed at cursor restore after writes, savepoints and statement rollback,
/// ephemeral tables, WITHOUT ROWID, the transfer optimisation, FK actions, triggers,
/// ATTACH/TEMP and ALTER TABLE; every result (or error) printed, one per line.
const DIFF_SCRIPT: &str = r#"
import random, sqlite3, sys
rng = random.Random(11)
c = sqlite3.connect(sys.argv[1], isolation_level=None)
def show(sql, *args):
    try:
        print(c.execute(sql, *args).fetchall())
    except sqlite3.Error as e:
        print("error:", type(e).__name__, e)
c.execute("create table t(a integer primary key, b int, c text)")
c.execute("create index t_b on t(b)")
c.execute("create index t_cb on t(c, b)")
for i in range(400):
    c.execute("insert into t values(?,?,?)", (i, rng.randrange(60), "k" * rng.randrange(0, 600) + str(i)))
show("insert into t(b, c) select b + 1, c || '+' from t where b < 25")
show("update t set b = b + 200 where b between 5 and 35")
show("delete from t where b % 5 = 0")
show("select count(*), sum(b), max(length(c)) from t")
show("select a from t indexed by t_cb where c > 'kkkkkkkk' order by c, b limit 7")
show("select a, b from t where b > 220 order by b desc, a limit 5")
c.execute("begin")
for k in range(6):
    c.execute("savepoint p%d" % k)
    c.execute("insert into t(b, c) values(?, ?)", (5000 + k, "save%d" % k))
    c.execute("update t set b = -b where b = ?", (5000 + k - 1,))
c.execute("rollback to p3")
c.execute("release p2")
show("insert into t(a, b) values(1, 1)")
show("select b, c from t where c like 'save%' order by b")
c.execute("rollback to p0")
c.execute("commit")
show("select count(*) from t where c like 'save%'")
show("select b, count(*) from t group by b having count(*) > 7 order by 2 desc, 1")
show("select count(*) from (select distinct b from t)")
show("select a from t where b in (select b from t where a < 50) order by a desc limit 4")
c.execute("create table w(k text primary key, v int, big text) without rowid")
for i in range(250):
    c.execute("insert into w values(?,?,?)", ("w%03d" % (i * 37 % 250), i, "z" * (i * 11 % 700)))
show("update w set v = v * 3 where k between 'w040' and 'w130'")
show("insert or replace into w values('w010', -1, 'r')")
show("insert into w values('w011', 5, 'u') on conflict(k) do update set v = excluded.v + 1000")
show("select count(*), sum(v), sum(length(big)) from w")
show("delete from w where v % 4 = 1")
show("select k, v from w order by k desc limit 3")
c.execute("create table t2(a integer primary key, b int, c text)")
show("insert into t2 select * from t")
show("select count(*), sum(b) from t2")
c.execute("pragma foreign_keys=on")
c.execute("create table par(id integer primary key)")
c.execute("create table kid(pid references par(id) on delete cascade, x)")
c.executemany("insert into par values(?)", [(i,) for i in range(30)])
c.executemany("insert into kid values(?,?)", [(i % 30, i) for i in range(150)])
show("delete from par where id % 3 = 0 returning id")
show("select count(*) from kid")
c.execute("create trigger tr after insert on par begin insert into kid values(new.id, -new.id); end")
show("insert into par values(100)")
show("select * from kid where x < 0")
c.execute("attach ':memory:' as aux")
c.execute("create table aux.z as select * from t where b < 40")
c.execute("create temp table tt as select a from t where b > 200")
show("select (select count(*) from aux.z), (select count(*) from tt), (select count(*) from t where a in tt)")
c.execute("begin")
c.execute("insert into aux.z select * from t limit 5")
c.execute("insert into t2(b) values(1)")
c.execute("rollback")
show("select (select count(*) from aux.z), (select count(*) from t2)")
c.execute("alter table t2 rename column c to cc")
c.execute("alter table t2 drop column cc")
show("select * from t2 order by a limit 3")
# Ephemeral tables and sorters: window functions, recursive CTEs, IN lists, DISTINCT.
show("select b, sum(b) over (order by b rows between 2 preceding and current row) from t order by b limit 6")
show("select b, rank() over (partition by b % 3 order by length(c) desc, a) from t order by a limit 8")
show("with recursive n(x) as (select 1 union all select x + 1 from n where x < 300) select count(*), sum(x) from n where x in (select b from t)")
show("select distinct b % 7 from t where b in (3, 5, 7, 11, 13, 17) order by 1")
# Incremental blob I/O (sqlite3_blob_open/read/write) through Python's blobopen.
c.execute("create table bl(id integer primary key, data blob)")
c.execute("insert into bl values(1, zeroblob(10000)), (2, zeroblob(100))")
c.commit()
with c.blobopen("bl", "data", 1) as b:
    b.seek(5000)
    b.write(b"inpage!")
    b.seek(9990)
    b.write(b"0123456789")
c.commit()
with c.blobopen("bl", "data", 1, readonly=True) as b:
    b.seek(4998)
    show_value = b.read(12)
print("blob", show_value, len(c.execute("select data from bl where id = 1").fetchone()[0]))
show("select hex(substr(data, 9991, 10)), length(data) from bl order by id")
# A value past the size the drop-in reads whole at a row's first access (64 KiB): the
# blob handle, column reads after it and substr read it by range.
c.execute("create table bb(id integer primary key, data blob, tail text)")
c.execute("insert into bb values(1, zeroblob(300000), 'after'), (2, zeroblob(65537), 'x')")
c.commit()
with c.blobopen("bb", "data", 1) as b:
    for at in (299990, 150000, 4090, 0):
        b.seek(at)
        b.write(bytes([at % 251]) * 10)
c.commit()
with c.blobopen("bb", "data", 1, readonly=True) as b:
    print("big blob", [(b.seek(at), b.read(10)) for at in (0, 4090, 150000, 299990)])
show("select id, tail, length(data), hex(substr(data, 150001, 10)), hex(substr(data, 299991, 10)) from bb order by id")
show("pragma integrity_check")
"#;

/// Differential: the same script on stock SQLite (the system library Python links by
/// default) and on this cdylib must print the same thing. Skipped, with the reason
/// printed, if python3/sqlite3 is missing or the system SQLite predates RETURNING and
/// DROP COLUMN (3.35).
#[test]
fn python_differential_against_stock_sqlite() {
    if let Some(why) = pylib::python_missing(
        "import sqlite3; print(sqlite3.sqlite_version_info >= (3, 35, 0))",
        "is missing or older than 3.35",
    ) {
        println!("SKIPPED: {why}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let lib = pylib::lib_dir(dir.path());
    let run = |db: &str, ours: bool| {
        let mut cmd = Command::new("python3");
        cmd.args(["-c", DIFF_SCRIPT]).arg(dir.path().join(db));
        cmd.env_remove(inpage_sql::JOURNAL_MODE_ENV);
        if ours {
            cmd.env("LD_LIBRARY_PATH", &lib);
        } else {
            cmd.env_remove("LD_LIBRARY_PATH");
        }
        let o = cmd.output().unwrap();
        assert!(
            o.status.success(),
            "python failed (ours={ours}): {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8(o.stdout).unwrap()
    };
    let stock = run("stock.db", false);
    let ours = run("ours.db", true);
    assert!(stock.lines().count() >= 25, "{stock}");
    assert!(stock.contains("[('ok',)]"), "{stock}");
    for (i, (s, o)) in stock.lines().zip(ours.lines()).enumerate() {
        assert_eq!(o, s, "line {} differs", i + 1);
    }
    assert_eq!(ours.lines().count(), stock.lines().count());
}

/// The short form of the SQL operations bench (`scripts/sql_ops.sh`, BENCHMARKS.md "SQL
/// operations"): its program runs every operation on the drop-in, in the default mode and
/// in `wal`, and on the system's stock SQLite, checking each result as it goes (row counts,
/// blob bytes read back), so the bench cannot break unnoticed.
#[test]
fn the_sql_operations_bench_runs_on_the_drop_in_and_on_stock() {
    if let Some(why) = pylib::python_missing(
        "import sqlite3; print(hasattr(sqlite3.Connection, 'blobopen'))",
        "has no blobopen (Python 3.11+)",
    ) {
        println!("SKIPPED: {why}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let lib = pylib::lib_dir(dir.path());
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/sql_ops.py");
    for (drop_in, mode) in [(true, ""), (true, "wal"), (false, "wal")] {
        let mut cmd = Command::new("python3");
        cmd.arg(script).arg(dir.path().join("run")).args([
            "--rows",
            "2000",
            "--journal-mode",
            mode,
        ]);
        if drop_in {
            cmd.env("LD_LIBRARY_PATH", &lib);
        }
        let out = cmd.output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "drop-in {drop_in} mode {mode:?}: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        for op in [
            "insert_indexed",
            "backup",
            "vacuum",
            "blob_read_64k",
            "vacuumed_bytes",
            "incremental_vacuum",
            "full_deleted_bytes",
        ] {
            assert!(
                stdout.contains(&format!("\"{op}\"")),
                "{op} missing: {stdout}"
            );
        }
        if drop_in {
            assert!(
                stdout.contains("\"sqlite_version\": \"3.53.2\""),
                "{stdout}"
            );
        }
    }
}

/// The apps' WAL settings reach the engine (`PRAGMA wal_autocheckpoint`,
/// `PRAGMA journal_size_limit`): with checkpoints off the log keeps every commit's
/// frames; with them every 10 frames it never holds many more; with a size limit a large
/// transaction's log is cut back once checkpointed, as stock SQLite's is.
#[test]
fn the_apps_wal_settings_bound_the_log() {
    let script = r#"
for i in range(30):
    c.execute("INSERT INTO t VALUES(?)", (i,))
off = c.execute("PRAGMA wal_checkpoint").fetchone()[1]
c.execute("PRAGMA wal_autocheckpoint=10")
for i in range(30):
    c.execute("INSERT INTO t VALUES(?)", (i,))
on = c.execute("PRAGMA wal_checkpoint").fetchone()[1]
assert c.execute("PRAGMA journal_size_limit=65536").fetchone()[0] == 65536
c.execute("BEGIN")
c.executemany("INSERT INTO t VALUES(?)", [(b"x" * 1000,) for _ in range(3000)])
c.execute("COMMIT")
c.execute("PRAGMA wal_checkpoint")
print(off, on, os.path.getsize(p + "-wal"))
"#;
    let Some(v) = numbers_printed_by_wal_script(script) else {
        return;
    };
    assert!(
        v[0] >= 30,
        "checkpoints off: {} frames after 30 commits",
        v[0]
    );
    assert!(v[1] <= 12, "checkpoints every 10 frames: {} frames", v[1]);
    assert!(
        v[2] <= 65536,
        "a log of {} bytes above journal_size_limit",
        v[2]
    );
}

/// `PRAGMA wal_checkpoint(TRUNCATE)` leaves an empty log file and reports no frames, as
/// stock does; the data is all in the database and later commits log again.
#[test]
fn a_truncating_checkpoint_empties_the_log() {
    let script = r#"
for i in range(40):
    c.execute("INSERT INTO t VALUES(?)", (i,))
before = os.path.getsize(p + "-wal")
passive = c.execute("PRAGMA wal_checkpoint").fetchone()
for i in range(40):
    c.execute("INSERT INTO t VALUES(?)", (i,))
truncated = c.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
after = os.path.getsize(p + "-wal")
c.execute("INSERT INTO t VALUES(-1)")
again = os.path.getsize(p + "-wal")
d = sqlite3.connect(p)
n = d.execute("SELECT count(*) FROM t").fetchone()[0]
print(before, passive[1], truncated[0], truncated[1], truncated[2], after, again, n)
"#;
    let Some(v) = numbers_printed_by_wal_script(script) else {
        return;
    };
    let [before, passive_log, busy, log, done, after, again, rows] = v[..] else {
        panic!("unexpected output {v:?}");
    };
    assert!(before > 0, "40 commits logged nothing");
    assert!(
        passive_log >= 40,
        "a plain checkpoint reports the log's frames"
    );
    assert_eq!(
        (busy, log, done),
        (0, 0, 0),
        "TRUNCATE reports an empty log"
    );
    assert_eq!(after, 0, "the log's file after TRUNCATE");
    assert!(again > 0, "the next commit logs again");
    assert_eq!(rows, 81, "every row survives");
}

/// Run a Python script on the drop-in: `body` runs after a prologue that opens the
/// database `p` as connection `c` in WAL mode with automatic checkpoints off and creates
/// table `t(x)`. The integers it printed (it must succeed); None when this machine's
/// Python has no `sqlite3` (the caller skips).
fn numbers_printed_by_wal_script(body: &str) -> Option<Vec<i64>> {
    if let Some(why) = pylib::no_python_sqlite3() {
        println!("SKIPPED: {why}");
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let lib = pylib::lib_dir(dir.path());
    let script = format!(
        r#"
import os, sqlite3, sys
p = sys.argv[1]
c = sqlite3.connect(p, isolation_level=None)
assert c.execute("PRAGMA journal_mode=wal").fetchone()[0] == "wal"
c.execute("PRAGMA wal_autocheckpoint=0")
c.execute("CREATE TABLE t(x)")
{body}"#
    );
    let out = Command::new("python3")
        .args(["-c", &script])
        .arg(dir.path().join("w.db"))
        .env("LD_LIBRARY_PATH", lib)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(
        stdout
            .split_whitespace()
            .map(|x| x.parse().unwrap())
            .collect(),
    )
}
