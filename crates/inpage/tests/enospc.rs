//! A full file system (issue 35): every mode that keeps committed pages in a log
//! (`Capabilities::replays_log`: the WAL family) is filled to the last byte by a process
//! that commits until the file system refuses (ENOSPC), fills what is left and exits
//! without closing, so the log holds committed frames that no checkpoint copied. Then:
//! - a read-only open succeeds and reads every acknowledged row (the log is read in
//!   place, as SQLite reads its WAL);
//! - a read-write open succeeds too (the checkpoint that would copy the log into the
//!   database is deferred, `RecoveryReport::checkpoint_deferred`), reads every row, and a
//!   commit that needs room fails with an error that says so (`Error::is_no_space`);
//! - once space returns, commits continue, a checkpoint runs, and a reopen holds
//!   everything.
//!
//! The file system is a small tmpfs mounted for the test (root only; skipped with the
//! reason otherwise) and unmounted when the test ends, also when it fails. The writer is
//! this test binary run again (`child_fill`).

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use inpage::{Config, Database, JournalMode, JournalOption, KeyKind, ReadableTxn};

const CHILD_ENV: &str = "INPAGE_ENOSPC_CHILD";

/// A tmpfs of `size` mounted at a fresh directory, unmounted on drop.
struct SmallFs {
    dir: tempfile::TempDir,
}

impl SmallFs {
    fn mount(size: &str) -> Result<SmallFs, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let out = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size}"),
                "inpage-enospc",
            ])
            .arg(dir.path())
            .output()
            .map_err(|e| format!("mount: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "mount -t tmpfs failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(SmallFs { dir })
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Give the file system room again (as an app's user deleting files would).
    fn grow(&self, size: &str) -> Result<(), String> {
        let st = Command::new("mount")
            .args(["-o", &format!("remount,size={size}")])
            .arg(self.dir.path())
            .status()
            .map_err(|e| format!("mount -o remount: {e}"))?;
        if st.success() {
            Ok(())
        } else {
            Err(format!("mount -o remount,size={size} failed ({st})"))
        }
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let p = self.dir.path();
        if Command::new("umount")
            .arg(p)
            .status()
            .map(|s| !s.success())
            .unwrap_or(true)
        {
            let _ = Command::new("umount").arg("-l").arg(p).status();
        }
    }
}

fn config(mode: JournalMode, dir: &Path) -> Config {
    let c = Config::default()
        .journal_mode(mode)
        // Frames accumulate in the log: only an open (or close) would copy them.
        .wal_autocheckpoint(0);
    if mode.capabilities().region_backed {
        // The region lives elsewhere (memory): the database's file system is the full one.
        c.nvlog_region(region_of(dir))
    } else if mode.options().contains(&JournalOption::NvlogRingBytes) {
        // A ring file on the small file system itself: sized to leave the log room.
        c.nvlog_ring_bytes(256 << 10)
    } else {
        c
    }
}

fn region_of(dir: &Path) -> PathBuf {
    let h = dir
        .to_string_lossy()
        .bytes()
        .fold(0u64, |a, b| a.wrapping_mul(131).wrapping_add(b as u64));
    PathBuf::from(format!("/dev/shm/inpage-enospc-test-{h:x}"))
}

fn value(k: i64) -> Vec<u8> {
    vec![(k % 251) as u8; 300 + (k as usize * 53) % 1500]
}

/// The child: `INPAGE_ENOSPC_CHILD=<dir>|<mode>`. Commits rows 1, 2, … (printing
/// `committed <k>`) until a commit fails for lack of room, fills the rest of the file
/// system, prints `full`, and exits without closing the database.
#[test]
fn child_fill() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let (dir, mode) = spec.split_once('|').unwrap();
    let dir = Path::new(dir);
    let mode = JournalMode::from_name(mode).unwrap();
    let db = Database::open(dir.join("full.db"), config(mode, dir)).unwrap();
    let out = std::io::stdout();
    let mut k = 1i64;
    let why = loop {
        let r = (|| {
            let mut w = db.begin_write()?;
            let t = w.open_or_create_tree("t", KeyKind::Int)?;
            w.insert(&t, k, &value(k))?;
            w.commit()
        })();
        match r {
            Ok(()) => {
                let mut o = out.lock();
                writeln!(o, "committed {k}").unwrap();
                o.flush().unwrap();
                k += 1;
            }
            Err(e) => break e,
        }
        if k > 100_000 {
            panic!("the file system never filled");
        }
    };
    assert!(why.is_no_space(), "commit {k} failed otherwise: {why}");
    // The last bytes: a filler file grown until nothing more fits.
    let mut f = std::fs::File::create(dir.join("filler")).unwrap();
    for chunk in [65536usize, 4096, 512, 1] {
        while f.write_all(&vec![7u8; chunk]).is_ok() && f.flush().is_ok() {}
    }
    let mut o = out.lock();
    writeln!(o, "full").unwrap();
    o.flush().unwrap();
    // No close: the log keeps its frames, as after a crash.
    std::process::exit(0);
}

/// Rows of tree "t", each checked against `value`.
fn read_rows(db: &Database) -> Result<Vec<i64>, String> {
    let r = db.begin_read().map_err(|e| e.to_string())?;
    let t = r.open_tree("t").map_err(|e| e.to_string())?;
    let mut v = Vec::new();
    for kv in r.iter(&t).map_err(|e| e.to_string())? {
        let (k, val) = kv.map_err(|e| e.to_string())?;
        let k = k.as_int().ok_or("not an int key")?;
        if val != value(k) {
            return Err(format!("row {k} holds the wrong value"));
        }
        v.push(k);
    }
    inpage::check::check(&r, &Default::default()).map_err(|e| format!("check: {e}"))?;
    Ok(v)
}

fn commit(db: &Database, k: i64) -> inpage::Result<()> {
    let mut w = db.begin_write()?;
    let t = w.open_or_create_tree("t", KeyKind::Int)?;
    w.insert(&t, k, &value(k))?;
    w.commit()
}

/// Removes a region-backed mode's region (in `/dev/shm`) when the case ends, also when
/// it fails.
struct RemoveRegion(PathBuf);

impl Drop for RemoveRegion {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn fill_and_reopen(mode: JournalMode) -> Result<String, String> {
    let fs = SmallFs::mount("3m")?;
    let dir = fs.path();
    let _region = RemoveRegion(region_of(dir));
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_fill", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, format!("{}|{}", dir.display(), mode.name()))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| e.to_string())?;
    let mut acked = 0i64;
    let mut full = false;
    for l in out.stdout.lines().map_while(Result::ok) {
        let l = l
            .strip_prefix("test child_fill ... ")
            .unwrap_or(&l)
            .to_string();
        if let Some(n) = l.strip_prefix("committed ") {
            acked = n.parse().unwrap();
        }
        full |= l == "full";
    }
    if !full {
        return Err(format!(
            "{mode}: the writer did not fill the file system ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let want: Vec<i64> = (1..=acked).collect();
    let db_path = dir.join("full.db");
    let cfg = config(mode, dir);
    // Read-only: the log is read where it is.
    {
        let db = Database::open(&db_path, cfg.clone().read_only(true))
            .map_err(|e| format!("{mode}: read-only open of the full file system: {e}"))?;
        let got = read_rows(&db).map_err(|e| format!("{mode}: read-only: {e}"))?;
        if got != want {
            return Err(format!("{mode}: read-only: {} rows of {acked}", got.len()));
        }
    }
    // Read-write: the checkpoint waits for room.
    let db = Database::open(&db_path, cfg.clone())
        .map_err(|e| format!("{mode}: read-write open of the full file system: {e}"))?;
    let deferred = db.recovery_report().checkpoint_deferred;
    let got = read_rows(&db).map_err(|e| format!("{mode}: read-write: {e}"))?;
    if got != want {
        return Err(format!("{mode}: read-write: {} rows of {acked}", got.len()));
    }
    let mut refused = 0;
    let mut k = acked + 1;
    while refused == 0 && k < acked + 200 {
        match commit(&db, k) {
            Ok(()) => k += 1,
            Err(e) if e.is_no_space() => refused += 1,
            Err(e) => return Err(format!("{mode}: a commit on the full file system: {e}")),
        }
    }
    // Room again: commits continue and the log is copied into the database.
    std::fs::remove_file(dir.join("filler")).map_err(|e| e.to_string())?;
    fs.grow("16m")?;
    for j in 0..20 {
        commit(&db, k + j).map_err(|e| format!("{mode}: commit once there is room: {e}"))?;
    }
    db.checkpoint()
        .map_err(|e| format!("{mode}: checkpoint: {e}"))?;
    db.close().map_err(|e| format!("{mode}: close: {e}"))?;
    let db = Database::open(&db_path, cfg).map_err(|e| format!("{mode}: reopen: {e}"))?;
    let got = read_rows(&db).map_err(|e| format!("{mode}: reopen: {e}"))?;
    let want: Vec<i64> = (1..k + 20).collect();
    if got != want {
        return Err(format!(
            "{mode}: after the room returned: {} rows, want {}",
            got.len(),
            want.len()
        ));
    }
    drop(db);
    Ok(format!(
        "{mode}: {acked} commits filled it; opened read-only and read-write (checkpoint deferred: {deferred}); a full commit refused: {}",
        refused > 0
    ))
}

#[test]
fn a_full_file_system_does_not_stop_an_open() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    if let Err(why) = SmallFs::mount("1m") {
        eprintln!("skipped: cannot mount a small file system here ({why})");
        return;
    }
    let mut failures = Vec::new();
    for mode in JournalMode::all().filter(|m| m.capabilities().replays_log) {
        match fill_and_reopen(mode) {
            Ok(line) => eprintln!("{line}"),
            Err(e) => failures.push(e),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
