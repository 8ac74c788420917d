//! INPAGE_JOURNAL_MODE, the deployment switch: it is process-wide, so it is set only in
//! a child process. In its own test binary because spawning a child while another test
//! closes and reopens a file can let the child hold that file's lock for a moment
//! (flock belongs to the open file description, which a child shares until its exec).

mod common;

use common::Db;

/// INPAGE_JOURNAL_MODE is process-wide, so it is set only in a child process: this
/// test binary re-runs itself with `env_child_reports_the_forced_mode`.
#[test]
fn env_forces_the_journal_mode_of_new_files() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("forced.db");
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new(exe)
        .args([
            "env_child_reports_the_forced_mode",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(inpage_sql::JOURNAL_MODE_ENV, "wal")
        .env("INPAGE_SQL_TEST_DB", &path)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "child failed:\n{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("child: journal_mode=wal"),
        "child did not run:\n{text}"
    );
    // Without the variable the file keeps its mode (wal), and a new file gets the default.
    let db = Db::open_path(&path);
    assert_eq!(db.one("PRAGMA journal_mode").as_deref(), Some("wal"));
    assert_eq!(db.one("SELECT count(*) FROM t").as_deref(), Some("1"));
    let fresh = Db::open_path(&dir.path().join("fresh.db"));
    assert_eq!(
        fresh.one("PRAGMA journal_mode").as_deref(),
        Some(inpage::DEFAULT_JOURNAL_MODE.name())
    );
}

#[test]
#[ignore = "child of env_forces_the_journal_mode_of_new_files (needs its environment)"]
fn env_child_reports_the_forced_mode() {
    // Only meaningful as the child of env_forces_the_journal_mode_of_new_files (which
    // asserts on its output); a plain `--include-ignored` run has nothing to check.
    let Ok(path) = std::env::var("INPAGE_SQL_TEST_DB") else {
        println!("not run as a child: nothing to do");
        return;
    };
    common::install_log();
    let db = Db::open(&path).unwrap();
    db.exec("CREATE TABLE t(a); INSERT INTO t VALUES(1);")
        .unwrap();
    let mode = db.one("PRAGMA journal_mode").unwrap();
    println!("child: journal_mode={mode}");
    assert_eq!(mode, "wal");
    drop(db);
    // A file in another mode is refused while the variable forces wal.
    let other = format!("{path}.dhl");
    std::env::remove_var(inpage_sql::JOURNAL_MODE_ENV);
    let made = Db::open(&other).map(|d| d.exec("CREATE TABLE u(a)"));
    println!("log: {:?}", common::logged());
    made.unwrap().unwrap();
    std::env::set_var(inpage_sql::JOURNAL_MODE_ENV, "wal");
    let e = Db::open(&other).map(|_| ()).unwrap_err();
    assert_eq!(e.code, 14, "{e:?}");
    let log = common::logged();
    assert!(
        log.iter()
            .any(|m| m.contains(inpage::DEFAULT_JOURNAL_MODE.name()) && m.contains("wal")),
        "{log:?}"
    );
    // An unknown mode name is refused too, with the list of names in the log.
    std::env::set_var(inpage_sql::JOURNAL_MODE_ENV, "bogus");
    let e = Db::open(&format!("{path}.new")).map(|_| ()).unwrap_err();
    assert_eq!(e.code, 14, "{e:?}");
    let log = common::logged();
    assert!(
        log.iter()
            .any(|m| m.contains("bogus") && m.contains("unknown mode")),
        "{log:?}"
    );
    std::env::set_var(inpage_sql::JOURNAL_MODE_ENV, "wal");
    // A key past the engine's inline limit is a long key, stored whole.
    let db = Db::open(":memory:").unwrap();
    db.exec("CREATE TABLE k(a PRIMARY KEY) WITHOUT ROWID")
        .unwrap();
    let long = "y".repeat(3000);
    db.exec(&format!("INSERT INTO k VALUES('{long}')")).unwrap();
    assert_eq!(
        db.one(&format!("SELECT length(a) FROM k WHERE a = '{long}'"))
            .as_deref(),
        Some("3000")
    );
}
