//! Processes taking turns on one database (`procs`): while a child process holds a write
//! transaction open, opening the database here waits for its turn and, past a short busy
//! timeout, fails with `Error::Locked` (changing nothing); a read-only open still reads
//! it; once the child is killed with SIGKILL the kernel drops its locks and this process
//! opens, recovers and writes. And the `sqlite3`-style workflow: a process writing
//! without pause and `inpage sql FILE "select count(*) …"` run every 100 ms both make
//! progress.
//!
//! The child is this test binary run again with `HOLDER_ENV` set (`hold_database_open`:
//! `hold` commits row 1, says so, then holds a write transaction until killed; `write`
//! commits a row every 2 ms until killed).

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};

use inpage::{Config, Database, Error, KeyKind};

const HOLDER_ENV: &str = "INPAGE_LOCK_TEST_HOLD";

/// The child's side (a no-op in a normal test run): `INPAGE_LOCK_TEST_HOLD=<op>|<path>`.
#[test]
fn hold_database_open() {
    let Some(spec) = std::env::var_os(HOLDER_ENV) else {
        return;
    };
    let spec = spec.to_string_lossy().into_owned();
    let (op, path) = spec.split_once('|').unwrap();
    let db = Database::open(PathBuf::from(path), Config::default()).unwrap();
    let mut w = db.begin_write().unwrap();
    let t = w.open_or_create_tree("t", KeyKind::Int).unwrap();
    w.insert(&t, 1, b"held").unwrap();
    w.commit().unwrap();
    let mut out = std::io::stdout().lock();
    writeln!(out, "commit 1").unwrap();
    out.flush().unwrap();
    if op == "hold" {
        let mut w = db.begin_write().unwrap();
        w.insert(&t, 2, b"never committed").unwrap();
        writeln!(out, "holding").unwrap();
        out.flush().unwrap();
        loop {
            std::thread::sleep(std::time::Duration::from_secs(60));
        }
    }
    for k in 2.. {
        let mut w = db.begin_write().unwrap();
        w.insert(&t, k, b"row").unwrap();
        w.commit().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

/// Kills the child if the test fails before it does (SIGKILL; an exited child is fine).
struct Reap(std::process::Child);

impl Drop for Reap {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The child, running `op` on `file`, once it said `ready`.
fn spawn_child(op: &str, file: &std::path::Path, ready: &str) -> Reap {
    let child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "hold_database_open",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(HOLDER_ENV, format!("{op}|{}", file.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut child = Reap(child);
    let mut lines = BufReader::new(child.0.stdout.take().unwrap()).lines();
    // The harness prints its own lines first; wait for the child's.
    let seen = lines
        .by_ref()
        .map_while(Result::ok)
        .any(|l| l.contains(ready));
    assert!(seen, "the child did not get to {ready:?}");
    child
}

#[test]
fn a_writing_process_keeps_others_out_until_it_is_killed() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("locked.db");
    let mut child = spawn_child("hold", &file, "holding");
    let brief = || {
        Config::default()
            .create(false)
            .busy_timeout(std::time::Duration::from_millis(50))
    };
    let bytes = std::fs::read(&file).unwrap();
    let err = Database::open(&file, brief()).unwrap_err();
    match &err {
        Error::Locked { path } => assert_eq!(path, &file),
        other => panic!("expected Error::Locked, got {other:?}"),
    }
    assert!(err.to_string().contains("in use"), "{err}");
    assert_eq!(
        std::fs::read(&file).unwrap(),
        bytes,
        "the refused open wrote"
    );
    // Read-only inspection of a database in use takes no turn.
    let ro = Database::open_read_only(&file, Config::default()).unwrap();
    assert_eq!(ro.get("t", 1).unwrap().as_deref(), Some(&b"held"[..]));
    drop(ro);
    // So does `inpage check`, and it writes nothing.
    let out = Command::new(env!("CARGO_BIN_EXE_inpage"))
        .arg("check")
        .arg(&file)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.starts_with("ok:"),
        "{stdout}"
    );
    assert_eq!(std::fs::read(&file).unwrap(), bytes);

    child.0.kill().unwrap(); // SIGKILL
    child.0.wait().unwrap();
    let db = Database::open(&file, brief()).unwrap();
    assert_eq!(db.get("t", 1).unwrap().as_deref(), Some(&b"held"[..]));
    assert_eq!(db.get("t", 2).unwrap(), None, "an uncommitted row survived");
    // A second handle, in this process as in another, takes turns with it.
    let other = Database::open(&file, brief()).unwrap();
    db.insert("t", 3, b"after").unwrap();
    assert_eq!(other.get("t", 3).unwrap().as_deref(), Some(&b"after"[..]));
    drop(other);
    db.close().unwrap();
    assert!(!inpage::internals::shm_path(&file).exists());
}

/// The `sqlite3`-style workflow: a process commits without pause while
/// `inpage sql FILE "select count(*) from t"` runs every 100 ms; every query answers (it
/// waits for its turn), the counts never go back, and the writer keeps going.
#[test]
fn a_shell_reads_beside_a_writing_process() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("busy.db");
    // A table the SQL layer can count: made through SQL first.
    let out = Command::new(env!("CARGO_BIN_EXE_inpage"))
        .arg("sql")
        .arg(&file)
        .arg("create table t(x)")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The writer commits through SQL too, as an app would: the shell from stdin.
    let mut writer = Command::new(env!("CARGO_BIN_EXE_inpage"))
        .arg("sql")
        .arg(&file)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = writer.stdin.take().unwrap();
    let feeding = std::thread::spawn(move || {
        for i in 0..100_000 {
            if writeln!(stdin, "insert into t values ({i});").is_err() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    });
    let writer = Reap(writer);
    let mut counts = Vec::new();
    for _ in 0..20 {
        std::thread::sleep(std::time::Duration::from_millis(100));
        let out = Command::new(env!("CARGO_BIN_EXE_inpage"))
            .arg("sql")
            .arg(&file)
            .arg("select count(*) from t")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "a query failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        counts.push(
            String::from_utf8_lossy(&out.stdout)
                .trim()
                .parse::<u64>()
                .unwrap(),
        );
    }
    drop(writer);
    let _ = feeding.join();
    assert!(counts.windows(2).all(|w| w[0] <= w[1]), "{counts:?}");
    assert!(
        counts[19] > counts[0],
        "the writer made no progress: {counts:?}"
    );
    eprintln!("counts every 100 ms: {counts:?}");
}
