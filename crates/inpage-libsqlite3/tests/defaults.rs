//! The drop-in's defaults are stock SQLite's: everything an application can observe on a
//! new connection (pragma values, built-in functions, virtual table modules, SQL syntax)
//! is what upstream SQLite's own defaults give, and agrees with the system's stock
//! library (Debian's build, which Python links by default) except where that build
//! deliberately departs from upstream or the two versions differ. The deliberate
//! differences of the drop-in itself are listed in `crates/inpage-sql/README.md`
//! ("Compile options") and pinned here, so one cannot appear or disappear unnoticed.

mod pylib;

use std::collections::BTreeMap;
use std::process::Command;

/// One probe per line: `<sql> => <result>`.
const PROBE: &str = r#"
import os, sqlite3, sys, tempfile
d = tempfile.mkdtemp()
c = sqlite3.connect(os.path.join(d, "p.db"), isolation_level=None)
c.execute("create table t(a)")
c.execute("insert into t values (1), (2)")
for p in sys.argv[1:]:
    try:
        r = c.execute(p).fetchall()
    except sqlite3.Error as e:
        r = "error: %s" % e
    print("%s => %s" % (p, r))
"#;

/// Probes, each with the value upstream SQLite's defaults give (what the drop-in must
/// answer).
const EXPECTED: &[(&str, &str)] = &[
    ("PRAGMA foreign_keys", "[(0,)]"),
    ("PRAGMA recursive_triggers", "[(0,)]"),
    ("PRAGMA secure_delete", "[(0,)]"),
    ("PRAGMA auto_vacuum", "[(0,)]"),
    ("PRAGMA cache_size", "[(-2000,)]"),
    ("PRAGMA page_size", "[(4096,)]"),
    ("PRAGMA synchronous", "[(2,)]"),
    ("PRAGMA temp_store", "[(0,)]"),
    ("PRAGMA encoding", "[('UTF-8',)]"),
    ("PRAGMA automatic_index", "[(1,)]"),
    ("PRAGMA cell_size_check", "[(0,)]"),
    ("PRAGMA defer_foreign_keys", "[(0,)]"),
    ("PRAGMA ignore_check_constraints", "[(0,)]"),
    ("PRAGMA legacy_alter_table", "[(0,)]"),
    ("PRAGMA query_only", "[(0,)]"),
    ("PRAGMA reverse_unordered_selects", "[(0,)]"),
    ("PRAGMA trusted_schema", "[(1,)]"),
    // Python's sqlite3.connect sets 5 s (its `timeout` argument).
    ("PRAGMA busy_timeout", "[(5000,)]"),
    ("PRAGMA journal_size_limit", "[(-1,)]"),
    ("PRAGMA locking_mode", "[('normal',)]"),
    ("PRAGMA max_page_count", "[(4294967294,)]"),
    ("PRAGMA mmap_size", "[(0,)]"),
    ("PRAGMA wal_autocheckpoint", "[(1000,)]"),
    ("PRAGMA user_version", "[(0,)]"),
    ("PRAGMA application_id", "[(0,)]"),
    ("PRAGMA full_column_names", "[(0,)]"),
    ("PRAGMA short_column_names", "[(1,)]"),
    ("PRAGMA count_changes", "[(0,)]"),
    ("PRAGMA integrity_check", "[('ok',)]"),
    ("SELECT sqrt(16), pi() > 3, ln(1)", "[(4.0, 1, 0.0)]"),
    (
        "SELECT json_valid('[1]'), json_extract('{\"a\": 2}', '$.a')",
        "[(1, 2)]",
    ),
    ("SELECT soundex('Robert')", "[('R163',)]"),
    ("CREATE VIRTUAL TABLE f3 USING fts3(x)", "[]"),
    ("CREATE VIRTUAL TABLE f4 USING fts4(x)", "[]"),
    ("CREATE VIRTUAL TABLE f5 USING fts5(x)", "[]"),
    ("CREATE VIRTUAL TABLE r USING rtree(id, a, b)", "[]"),
    ("SELECT count(*) > 0 FROM sqlite_stmt", "[(1,)]"),
    ("SELECT 'x' LIKE x'78'", "[(1,)]"),
    // Deliberate differences of the drop-in (README, "Compile options").
    ("PRAGMA journal_mode", "[('redo',)]"),
    // The default mode has a log, checkpointed as SQLite's WAL is (stock's default,
    // `delete`, has none: `(0, -1, -1)`).
    ("PRAGMA wal_checkpoint", "[(0, 0, 0)]"),
    (
        "DELETE FROM t LIMIT 1",
        "error: near \"LIMIT\": syntax error",
    ),
    (
        "SELECT count(*) > 0 FROM dbstat",
        "error: no such table: dbstat",
    ),
];

/// Probes whose answer from the system's stock library may differ from upstream's
/// defaults, and why: deliberate choices of that build (Debian's compile options) or a
/// newer default than its version has.
const SYSTEM_MAY_DIFFER: &[(&str, &str)] = &[
    (
        "PRAGMA secure_delete",
        "Debian builds with SQLITE_SECURE_DELETE",
    ),
    (
        "PRAGMA recursive_triggers",
        "Debian builds with SQLITE_DEFAULT_RECURSIVE_TRIGGERS",
    ),
    (
        "PRAGMA max_page_count",
        "Debian sets MAX_PAGE_COUNT; upstream's is 0xfffffffe",
    ),
    (
        "SELECT 'x' LIKE x'78'",
        "Debian builds with SQLITE_LIKE_DOESNT_MATCH_BLOBS",
    ),
    ("PRAGMA journal_mode", "the drop-in's default mode is redo"),
    (
        "PRAGMA wal_checkpoint",
        "the drop-in's default mode has a log; stock's (delete) has none",
    ),
    (
        "DELETE FROM t LIMIT 1",
        "Debian regenerates the parser with UPDATE_DELETE_LIMIT",
    ),
    (
        "SELECT count(*) > 0 FROM dbstat",
        "Debian builds with ENABLE_DBSTAT_VTAB",
    ),
];

fn probe(lib: Option<&std::path::Path>) -> BTreeMap<String, String> {
    let mut cmd = Command::new("python3");
    cmd.args(["-c", PROBE])
        .args(EXPECTED.iter().map(|(p, _)| *p));
    cmd.env_remove(inpage_sql::JOURNAL_MODE_ENV);
    match lib {
        Some(l) => cmd.env("LD_LIBRARY_PATH", l),
        None => cmd.env_remove("LD_LIBRARY_PATH"),
    };
    let o = cmd.output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| l.split_once(" => "))
        .map(|(p, r)| (p.to_string(), r.to_string()))
        .collect()
}

#[test]
fn new_connections_have_stock_defaults() {
    if let Some(why) = pylib::no_python_sqlite3() {
        println!("SKIPPED: {why}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let lib = pylib::lib_dir(dir.path());
    let ours = probe(Some(&lib));
    for (p, want) in EXPECTED {
        assert_eq!(
            ours.get(*p).map(String::as_str),
            Some(*want),
            "drop-in: {p}"
        );
    }
    let stock = probe(None);
    for (p, _) in EXPECTED {
        if SYSTEM_MAY_DIFFER.iter().any(|(q, _)| q == p) {
            continue;
        }
        assert_eq!(
            ours.get(*p),
            stock.get(*p),
            "drop-in vs the system's stock SQLite: {p}"
        );
    }
}

/// `PRAGMA compile_options` names no `DEFAULT_*` override of upstream's defaults beyond
/// the ones every build reports, and the features the README promises.
#[test]
fn compile_options_are_the_documented_ones() {
    if let Some(why) = pylib::no_python_sqlite3() {
        println!("SKIPPED: {why}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let lib = pylib::lib_dir(dir.path());
    let o = Command::new("python3")
        .args([
            "-c",
            "import sqlite3\nfor r in sqlite3.connect(':memory:').execute('pragma compile_options'): print(r[0])",
        ])
        .env("LD_LIBRARY_PATH", &lib)
        .output()
        .unwrap();
    let opts: Vec<String> = String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    for want in [
        "ENABLE_FTS3",
        "ENABLE_FTS4",
        "ENABLE_FTS5",
        "ENABLE_RTREE",
        "ENABLE_MATH_FUNCTIONS",
        "ENABLE_COLUMN_METADATA",
        "ENABLE_PREUPDATE_HOOK",
        "ENABLE_SESSION",
        "ENABLE_STMTVTAB",
        "ENABLE_LOAD_EXTENSION",
        "USE_URI",
        "THREADSAFE=1",
    ] {
        assert!(
            opts.iter().any(|o| o == want),
            "{want} missing from {opts:?}"
        );
    }
    // Behaviour-changing overrides a build can make; none is set (their default values,
    // which SQLite always lists, are allowed).
    for o in &opts {
        assert!(
            !o.starts_with("DEFAULT_FOREIGN_KEYS")
                && !o.starts_with("ENABLE_STAT")
                && o != "SECURE_DELETE"
                && o != "LIKE_DOESNT_MATCH_BLOBS"
                && !o.starts_with("OMIT_WAL")
                && !o.starts_with("OMIT_AUTOVACUUM")
                && !o.starts_with("OMIT_DESERIALIZE"),
            "{o} changes what applications see"
        );
    }
}
