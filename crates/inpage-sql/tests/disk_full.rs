//! A full file system through SQL (issue 35): in every journal mode, a connection that
//! inserts until the file system refuses gets `SQLITE_FULL` ("database or disk is full"),
//! never `SQLITE_IOERR`, no acknowledged transaction is lost, and the connection goes on
//! as a stock one does: every committed row reads back through it, and once there is
//! room again it commits more. In the modes that keep committed pages in a log (the WAL
//! family) the failed commit changes nothing, and a read-only connection reads a log
//! nobody could checkpoint; in the others the engine handle wants recovery after the
//! failure (`Error::Poisoned`), which the connection's next transaction runs.
//!
//! The file system is a small tmpfs mounted for the test (root only; skipped with the
//! reason otherwise) and unmounted when the test ends, also when it fails.

mod common;

use std::path::Path;
use std::process::Command;

use common::Db;
use inpage::JournalMode;

/// `SQLITE_FULL`.
const FULL: i32 = 13;

struct SmallFs(tempfile::TempDir);

impl SmallFs {
    fn mount(size: &str) -> Result<SmallFs, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "inpage-full"])
            .arg(dir.path())
            .output()
            .map_err(|e| format!("mount: {e}"))?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
        }
        Ok(SmallFs(dir))
    }

    fn remount(&self, size: &str) {
        let st = Command::new("mount")
            .args(["-o", &format!("remount,size={size}")])
            .arg(self.0.path())
            .status()
            .expect("mount -o remount");
        assert!(st.success(), "remount,size={size}: {st}");
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let p = self.0.path();
        if !Command::new("umount")
            .arg(p)
            .status()
            .is_ok_and(|s| s.success())
        {
            let _ = Command::new("umount").arg("-l").arg(p).status();
        }
    }
}

fn count(db: &Db) -> Result<i64, String> {
    db.query("SELECT count(*), sum(length(v)) FROM t")
        .map_err(|e| format!("{e:?}"))
        .map(|r| r[0][0].as_deref().unwrap_or("0").parse().unwrap())
}

/// Fill, check the failure and the connection after it, give room back, commit again.
fn fill(mode: JournalMode, dir: &Path, fs: &SmallFs) -> Result<String, String> {
    let path = dir.join(format!("{}.db", mode.name()));
    // A region-backed mode's region is in memory (`/dev/shm`, named by the database's
    // path): the database's file system is the one that fills.
    let uri = path.display().to_string();
    let db = Db::open(&uri).map_err(|e| format!("{mode}: open: {e:?}"))?;
    db.exec(&format!("PRAGMA journal_mode='{}'", mode.name()))
        .and_then(|()| db.exec("CREATE TABLE t(k INTEGER PRIMARY KEY, v BLOB)"))
        .map_err(|e| format!("{mode}: create: {e:?}"))?;
    let mut committed = 0i64;
    let err = loop {
        let k = committed + 1;
        let sql = format!(
            "BEGIN; INSERT INTO t VALUES({k}, zeroblob(1500)); INSERT INTO t VALUES(-{k}, randomblob(700)); COMMIT;"
        );
        match db.exec(&sql) {
            Ok(()) => committed += 1,
            Err(e) => break e,
        }
        if committed > 100_000 {
            return Err(format!("{mode}: the file system never filled"));
        }
    };
    if err.code & 0xff != FULL {
        return Err(format!("{mode}: a full file system reported as {err:?}"));
    }
    // Stock SQLite rolls the transaction back after SQLITE_FULL in COMMIT only if the
    // error hit a statement; a failed COMMIT leaves it open. Either way, ROLLBACK ends it.
    let _ = db.exec("ROLLBACK");
    // The log modes fail such a commit cleanly (`Error::NoSpace`); the others leave the
    // engine handle needing recovery, which the connection's next transaction runs (the
    // connection is the handle's only one). Either way it goes on, nothing lost.
    let n = count(&db).map_err(|e| format!("{mode}: read after the full commit: {e}"))?;
    if n != 2 * committed {
        return Err(format!(
            "{mode}: {n} rows after the failure, {committed} transactions acknowledged"
        ));
    }
    if mode.capabilities().replays_log {
        let ro = Db::open(&format!("file:{}?mode=ro", path.display()))
            .map_err(|e| format!("{mode}: read-only open of the full database: {e:?}"))?;
        let n = count(&ro).map_err(|e| format!("{mode}: read-only read: {e}"))?;
        if n != 2 * committed {
            return Err(format!("{mode}: read-only connection sees {n} rows"));
        }
    }
    fs.remount("64m");
    db.exec("INSERT INTO t VALUES(1000000, 'after'); PRAGMA wal_checkpoint;")
        .map_err(|e| format!("{mode}: commit once there is room: {e:?}"))?;
    let n = count(&db).map_err(|e| format!("{mode}: read after the room came back: {e}"))?;
    if n != 2 * committed + 1 {
        return Err(format!("{mode}: {n} rows at the end"));
    }
    db.exec("PRAGMA journal_mode=delete")
        .map_err(|e| format!("{mode}: leaving the mode (removes its side files): {e:?}"))?;
    drop(db);
    Ok(format!(
        "{mode}: {committed} transactions, then SQLITE_FULL: {}",
        err.msg
    ))
}

#[test]
fn a_full_file_system_is_sqlite_full_and_loses_nothing() {
    let mut failures = Vec::new();
    for mode in JournalMode::all() {
        // `redo` preallocates its 4 MiB ring file beside the database at creation: the
        // file system must hold it (and then fills with the log and database).
        let ring_file = !mode.capabilities().region_backed
            && mode
                .options()
                .contains(&inpage::JournalOption::NvlogRingBytes);
        let fs = match SmallFs::mount(if ring_file { "8m" } else { "2m" }) {
            Ok(fs) => fs,
            Err(why) => {
                eprintln!("skipped: cannot mount a small file system here ({why})");
                return;
            }
        };
        match fill(mode, fs.0.path(), &fs) {
            Ok(line) => eprintln!("{line}"),
            Err(e) => failures.push(e),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
