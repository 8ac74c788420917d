//! One process at a time: while a child process has a database open, opening it here
//! fails with `Error::Locked` (and changes nothing), a read-only open still reads it;
//! once the child is killed with SIGKILL the kernel drops its lock and the open succeeds.
//!
//! The child is this test binary run again with `HOLDER_ENV` set: `hold_database_open`
//! then opens the database, commits, says so on stdout and sleeps until it is killed.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};

use inpage::{Config, Database, Error, KeyKind};

const HOLDER_ENV: &str = "INPAGE_LOCK_TEST_HOLD";

/// The child's side (a no-op in a normal test run).
#[test]
fn hold_database_open() {
    let Some(path) = std::env::var_os(HOLDER_ENV) else {
        return;
    };
    let db = Database::open(PathBuf::from(path), Config::default()).unwrap();
    let mut w = db.begin_write().unwrap();
    let t = w.create_tree("t", KeyKind::Int).unwrap();
    w.insert(&t, 1, b"held").unwrap();
    w.commit().unwrap();
    let mut out = std::io::stdout().lock();
    writeln!(out, "commit 1").unwrap();
    out.flush().unwrap();
    loop {
        std::thread::sleep(std::time::Duration::from_secs(60));
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

#[test]
fn a_second_process_is_refused_until_the_first_is_killed() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("locked.db");
    let child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "hold_database_open",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(HOLDER_ENV, &file)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut child = Reap(child);
    let mut lines = BufReader::new(child.0.stdout.take().unwrap()).lines();
    // After the first acknowledged commit the child has the database open.
    // The harness prints its own lines first; wait for the child's.
    let ready = lines
        .by_ref()
        .map_while(Result::ok)
        .any(|l| l.contains("commit 1"));
    assert!(ready, "the child did not open the database");

    let err = Database::open(&file, Config::default().create(false)).unwrap_err();
    match &err {
        Error::Locked { path } => assert_eq!(path, &file),
        other => panic!("expected Error::Locked, got {other:?}"),
    }
    assert!(err.to_string().contains("in use"), "{err}");
    // Read-only inspection of a database in use takes no lock.
    let ro = Database::open_read_only(&file, Config::default()).unwrap();
    assert_eq!(ro.get("t", 1).unwrap().as_deref(), Some(&b"held"[..]));
    drop(ro);
    // So does `inpage check`, and it writes nothing.
    let bytes = std::fs::read(&file).unwrap();
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
    let db = Database::open(&file, Config::default().create(false)).unwrap();
    assert_eq!(db.get("t", 1).unwrap().as_deref(), Some(&b"held"[..]));
    // And this handle now holds the lock in turn, for this process too.
    match Database::open(&file, Config::default().create(false)) {
        Err(Error::Locked { .. }) => {}
        other => panic!("expected Error::Locked from a second handle, got {other:?}"),
    }
    db.close().unwrap();
    Database::open(&file, Config::default().create(false))
        .unwrap()
        .close()
        .unwrap();
}
