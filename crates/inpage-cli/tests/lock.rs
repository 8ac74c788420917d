//! One process at a time: while an `inpage workload` child has a database open, opening
//! it here fails with `Error::Locked` (and changes nothing), `inpage check` still reads
//! it; once the child is killed with SIGKILL the kernel drops its lock and the open
//! succeeds, recovering whatever the kill left.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use inpage::{Config, Database, Error};

#[test]
fn a_second_process_is_refused_until_the_first_is_killed() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("locked.db");
    let mut child = Command::new(env!("CARGO_BIN_EXE_inpage"))
        .args(["workload", "--mode", "dhl-cc", "--txns", "100000000"])
        .arg(&file)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    // After the first acknowledged commit the child has the database open.
    let first = lines.next().unwrap().unwrap();
    assert!(first.starts_with("commit "), "{first}");

    let err = Database::open(&file, Config::default().create(false)).unwrap_err();
    match &err {
        Error::Locked { path } => assert_eq!(path, &file),
        other => panic!("expected Error::Locked, got {other:?}"),
    }
    assert!(err.to_string().contains("in use"), "{err}");
    // Read-only inspection of a database in use takes no lock.
    let ro = Database::open_read_only(&file, Config::default()).unwrap();
    assert!(ro.fcc() >= 1);
    drop(ro);

    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let db = Database::open(&file, Config::default().create(false)).unwrap();
    assert!(db.fcc() >= 1);
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
