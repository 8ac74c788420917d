//! `inpage sql`: the shell over inpage's SQL front end. The migration test runs the stock
//! `sqlite3` shell (scripts/setup.sh installs it) the way the README shows: a stock
//! database dumped into `inpage sql`, dumped back into stock SQLite, the same rows (exact
//! values: every REAL compared by its bits, blobs by their bytes) at each step.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

/// Run `cmd` with `stdin` on its standard input; (exit code, stdout,
/// stderr), or None if the program cannot be started.
fn run(mut cmd: Command, stdin: Option<&[u8]>) -> Option<(i32, String, String)> {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .ok()?;
    {
        let mut i = child.stdin.take().unwrap();
        if let Some(s) = stdin {
            i.write_all(s).unwrap();
        }
    }
    let out = child.wait_with_output().unwrap();
    Some((
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

fn inpage_sql(db: &Path, args: &[&str], stdin: Option<&[u8]>) -> (i32, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_inpage"));
    cmd.arg("sql").arg(db).args(args);
    run(cmd, stdin).expect("run inpage")
}

/// The stock `sqlite3` shell; None if it is not installed.
fn sqlite3(db: &Path, args: &[&str], stdin: Option<&[u8]>) -> Option<(i32, String, String)> {
    let mut cmd = Command::new("sqlite3");
    cmd.arg(db).args(args);
    run(cmd, stdin)
}

/// Every row of the test tables. REALs are printed with `fmt`: SQLite versions render
/// digits past the 16th differently, so a comparison across versions (stock shell vs
/// inpage's 3.53.2) uses 16 significant digits, and the exact check (20 digits) compares
/// two stock databases, the original and the one rebuilt from inpage's dump.
fn content(fmt: &str) -> String {
    format!(
        "SELECT id, quote(a), printf('{fmt}', b), hex(c), typeof(b) FROM t ORDER BY id; \
         SELECT x, y FROM \"order\" ORDER BY x; SELECT name, seq FROM sqlite_sequence; \
         SELECT a FROM v ORDER BY a;"
    )
}
const DIGITS16: &str = "%.15e";
const EXACT: &str = "%!.20e";

const SETUP: &str = "CREATE TABLE t(id INTEGER PRIMARY KEY, a TEXT, b REAL, c BLOB); \
     CREATE INDEX ta ON t(a); \
     CREATE TABLE \"order\"(x INTEGER PRIMARY KEY AUTOINCREMENT, y); \
     CREATE VIEW v AS SELECT a FROM t WHERE a IS NOT NULL; \
     CREATE TRIGGER tr AFTER INSERT ON t BEGIN INSERT INTO \"order\"(y) VALUES(new.id); END; \
     INSERT INTO t VALUES(1, 'it''s', 1.5, x'00ff'), (2, NULL, 1e300, NULL), \
       (3, 'multi\nline', -0.1, x''), (4, 'Grüße, 世界', 0.1 + 0.2, randomblob(3000)), \
       (5, '', 4.9e-324, zeroblob(5));";

#[test]
fn sqlite3_dump_migrates_into_inpage_and_back() {
    let dir = tempfile::tempdir().unwrap();
    let stock = dir.path().join("stock.db");
    let Some((rc, _, err)) = sqlite3(&stock, &[SETUP], None) else {
        // The shell is installed by scripts/setup.sh; without it this test cannot say
        // anything, and says so.
        eprintln!("SKIPPED: no sqlite3 shell on PATH (scripts/setup.sh installs it)");
        return;
    };
    assert_eq!(rc, 0, "{err}");
    let (_, want, _) = sqlite3(&stock, &[&content(DIGITS16)], None).unwrap();
    let (_, want_exact, _) = sqlite3(&stock, &[&content(EXACT)], None).unwrap();
    assert!(want.contains("multi\nline"), "{want}");

    // stock -> inpage
    let (_, dump, _) = sqlite3(&stock, &[".dump"], None).unwrap();
    let new = dir.path().join("new.db");
    let (rc, out, err) = inpage_sql(&new, &[], Some(dump.as_bytes()));
    assert_eq!((rc, out.as_str(), err.as_str()), (0, "", ""));
    let (rc, got, err) = inpage_sql(&new, &[&content(DIGITS16)], None);
    assert_eq!(rc, 0, "{err}");
    assert_eq!(got, want, "content after the migration into inpage");
    let (_, mode, _) = inpage_sql(
        &new,
        &["PRAGMA journal_mode", "PRAGMA integrity_check"],
        None,
    );
    assert_eq!(
        mode,
        format!("{}\nok\n", inpage::DEFAULT_JOURNAL_MODE.name())
    );
    // The trigger came along: it fires on inpage.
    let (rc, got, err) = inpage_sql(
        &new,
        &[
            "INSERT INTO t(id) VALUES(6)",
            "SELECT max(y) FROM \"order\"",
        ],
        None,
    );
    assert_eq!((rc, got.as_str()), (0, "6\n"), "{err}");
    let (rc, _, err) = inpage_sql(&new, &["DELETE FROM t WHERE id = 6"], None);
    assert_eq!(rc, 0, "{err}");
    let (rc, _, err) = inpage_sql(
        &new,
        &[
            "DELETE FROM \"order\" WHERE y = 6",
            "UPDATE sqlite_sequence SET seq = 5",
        ],
        None,
    );
    assert_eq!(rc, 0, "{err}");

    // inpage -> stock
    let (rc, dump2, err) = inpage_sql(&new, &[".dump"], None);
    assert_eq!(rc, 0, "{err}");
    let back = dir.path().join("back.db");
    let (rc, _, err) = sqlite3(&back, &[], Some(dump2.as_bytes())).unwrap();
    assert_eq!(rc, 0, "{err}");
    let (_, got, _) = sqlite3(&back, &[&content(EXACT)], None).unwrap();
    assert_eq!(
        got, want_exact,
        "content (exact) after the migration back to stock SQLite"
    );
    let (_, schema_stock, _) = sqlite3(&stock, &[".schema"], None).unwrap();
    let (_, schema_back, _) = sqlite3(&back, &[".schema"], None).unwrap();
    // The same statements; the order differs (a dump creates indexes after the rows).
    let sorted = |s: &str| {
        let mut v: Vec<String> = s
            .replace("CREATE TABLE IF NOT EXISTS", "CREATE TABLE")
            .split(";\n")
            .map(str::to_string)
            .collect();
        v.sort();
        v
    };
    assert_eq!(sorted(&schema_back), sorted(&schema_stock));
}

#[test]
fn statements_dot_commands_and_errors() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("a.db");
    // From stdin: a statement split over lines, a ';' inside a string, a dot command.
    let script =
        b"CREATE TABLE t(a, b);\nINSERT INTO t VALUES(1,\n 'x;y');\n.tables\nSELECT * FROM t;\n";
    let (rc, out, err) = inpage_sql(&db, &[], Some(script));
    assert_eq!((rc, out.as_str(), err.as_str()), (0, "t\n1|x;y\n", ""));
    // A failing statement: reported, the rest still runs, exit code 1.
    let (rc, out, err) = inpage_sql(&db, &["SELECT nope FROM t", "SELECT count(*) FROM t"], None);
    assert_eq!(rc, 1);
    assert_eq!(out, "1\n");
    assert!(err.contains("no such column: nope"), "{err}");
    let (rc, out, _) = inpage_sql(&db, &[".schema t"], None);
    assert_eq!((rc, out.as_str()), (0, "CREATE TABLE t(a, b);\n"));
    let (rc, _, err) = inpage_sql(&db, &[".frobnicate"], None);
    assert_eq!(rc, 1);
    assert!(err.contains("unknown command"), "{err}");
    // --journal-mode applies to a new file only.
    let w = dir.path().join("w.db");
    let (rc, out, err) = inpage_sql(&w, &["--journal-mode", "wal", "PRAGMA journal_mode"], None);
    assert_eq!((rc, out.as_str()), (0, "wal\n"), "{err}");
    let (rc, out, _) = inpage_sql(
        &w,
        &["--journal-mode", "dhl-cc", "PRAGMA journal_mode"],
        None,
    );
    assert_eq!((rc, out.as_str()), (0, "wal\n"));
    let (rc, _, err) = inpage_sql(
        &dir.path().join("x.db"),
        &["--journal-mode", "nonsense", "SELECT 1"],
        None,
    );
    assert_eq!(rc, 1);
    assert!(err.contains("x.db"), "{err}");
}

#[test]
fn a_stock_file_is_refused_and_left_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let stock = dir.path().join("stock.db");
    if sqlite3(
        &stock,
        &["CREATE TABLE t(a); INSERT INTO t VALUES(1)"],
        None,
    )
    .is_none()
    {
        eprintln!("SKIPPED: no sqlite3 shell on PATH (scripts/setup.sh installs it)");
        return;
    }
    let before = std::fs::read(&stock).unwrap();
    let (rc, out, err) = inpage_sql(&stock, &["SELECT * FROM t"], None);
    assert_eq!(rc, 1, "{out}");
    assert!(err.contains("stock.db"), "{err}");
    assert_eq!(
        std::fs::read(&stock).unwrap(),
        before,
        "the stock file changed"
    );
    // And the other way: stock SQLite refuses an inpage file and does not change it.
    let ours = dir.path().join("ours.db");
    let (rc, _, err) = inpage_sql(
        &ours,
        &["CREATE TABLE t(a)", "INSERT INTO t VALUES(1)"],
        None,
    );
    assert_eq!(rc, 0, "{err}");
    let before = std::fs::read(&ours).unwrap();
    let (rc, _, err) = sqlite3(&ours, &["SELECT * FROM t"], None).unwrap();
    assert_ne!(rc, 0);
    assert!(err.contains("not a database"), "{err}");
    assert_eq!(
        std::fs::read(&ours).unwrap(),
        before,
        "stock SQLite changed our file"
    );
}

#[test]
fn a_second_process_takes_turns_with_a_shell_that_has_the_file_open() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("shared.db");
    let (rc, _, err) = inpage_sql(&db, &["CREATE TABLE t(a)", "INSERT INTO t VALUES(1)"], None);
    assert_eq!(rc, 0, "{err}");
    // The first process: a shell reading stdin, so it keeps the database open.
    let mut first = Command::new(env!("CARGO_BIN_EXE_inpage"))
        .arg("sql")
        .arg(&db)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = first.stdin.take().unwrap();
    input
        .write_all(b"INSERT INTO t VALUES(2);\nSELECT 'ready';\n")
        .unwrap();
    input.flush().unwrap();
    // Its answer says it has the file open (and committed the row).
    let mut lines = std::io::BufReader::new(first.stdout.take().unwrap());
    let mut ready = String::new();
    std::io::BufRead::read_line(&mut lines, &mut ready).unwrap();
    assert_eq!(ready, "ready\n");
    // A second process reads and writes while the first has the file open (idle).
    let (rc, out, err) = inpage_sql(&db, &["SELECT count(*) FROM t"], None);
    assert_eq!((rc, out.as_str()), (0, "2\n"), "{err}");
    let (rc, _, err) = inpage_sql(&db, &["INSERT INTO t VALUES(3)"], None);
    assert_eq!(rc, 0, "{err}");
    // The first sees the second's row at its next statement.
    input
        .write_all(b"SELECT group_concat(a) FROM t;\n")
        .unwrap();
    input.flush().unwrap();
    let mut seen = String::new();
    std::io::BufRead::read_line(&mut lines, &mut seen).unwrap();
    assert_eq!(seen, "1,2,3\n");
    // While the first holds a write transaction, the second waits (5 s), then gives up
    // with "database is locked" and changes nothing.
    input
        .write_all(b"BEGIN IMMEDIATE;\nSELECT 'holding';\n")
        .unwrap();
    input.flush().unwrap();
    let mut holding = String::new();
    std::io::BufRead::read_line(&mut lines, &mut holding).unwrap();
    assert_eq!(holding, "holding\n");
    let before = std::fs::read(&db).unwrap();
    let (rc, _, err) = inpage_sql(&db, &["INSERT INTO t VALUES(99)"], None);
    assert_eq!(rc, 1);
    assert!(err.contains("locked"), "{err}");
    assert_eq!(
        std::fs::read(&db).unwrap(),
        before,
        "a refused writer changed the file"
    );
    input.write_all(b"COMMIT;\n").unwrap();
    drop(input); // EOF: the first shell finishes and closes the file
    let o = first.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (rc, out, err) = inpage_sql(&db, &["SELECT group_concat(a) FROM t"], None);
    assert_eq!((rc, out.as_str()), (0, "1,2,3\n"), "{err}");
}
