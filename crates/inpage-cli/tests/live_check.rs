//! `inpage check` beside a writer (issue 35): in every journal mode, a child process
//! commits without pause (thousands a second: inserts, updates and removals of small and
//! overflow values, trees created and dropped, checkpoints) while `inpage check` runs
//! every 50 ms on the same files. Every check must pass: the CLI reports damage only when
//! copies of one instant of the files show it (`look`), so a torn read can never raise
//! an alarm. The copies it set aside because they failed while the files changed are
//! counted (they show the torn reads happened); a check that found nothing conclusive is
//! not a false alarm, but it is counted and must not happen either, except in a mode
//! without atomicity (`off`), where every copy taken mid-commit is half-written.
//!
//! CI runs `INPAGE_LIVE_CHECKS` (default 6) checks per mode; the evidence run is
//! `INPAGE_LIVE_CHECKS=440 cargo test -p inpage-cli --test live_check -- --nocapture`
//! (23 modes: over 10,000 checks).
//!
//! The writer is this test binary run again with `WRITER_ENV` set (`writer`).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use inpage::{Config, Database, JournalMode, KeyKind, ReadableTxn};

const WRITER_ENV: &str = "INPAGE_LIVE_CHECK_WRITER";

/// The writer (a no-op in a normal test run): `<db path>|<mode>`. Says `ready` once the
/// database exists, then commits until killed.
#[test]
fn writer() {
    let Ok(spec) = std::env::var(WRITER_ENV) else {
        return;
    };
    let (path, mode) = spec.split_once('|').unwrap();
    let mode = JournalMode::from_name(mode).unwrap();
    let db = Database::open(
        PathBuf::from(path),
        Config::default().journal_mode(mode).wal_autocheckpoint(64),
    )
    .unwrap();
    let mut w = db.begin_write().unwrap();
    w.create_tree("ints", KeyKind::Int).unwrap();
    w.create_tree("bytes", KeyKind::Bytes).unwrap();
    w.commit().unwrap();
    let mut out = std::io::stdout().lock();
    writeln!(out, "ready").unwrap();
    out.flush().unwrap();
    drop(out);
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut n: u64 = 0;
    loop {
        n += 1;
        let mut w = db.begin_write().unwrap();
        let ints = w.open_tree("ints").unwrap();
        let bytes = w.open_tree("bytes").unwrap();
        for _ in 0..1 + n % 7 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let k = (x % 2000) as i64;
            // Mostly small rows, some spanning overflow pages.
            let len = if x % 9 == 0 {
                3000 + (x % 9000)
            } else {
                x % 200
            } as usize;
            match x % 5 {
                0 => {
                    w.remove(&ints, k).unwrap();
                }
                1 => {
                    w.insert(&bytes, format!("key {k}").as_bytes(), &vec![k as u8; len])
                        .unwrap();
                }
                _ => {
                    w.insert(&ints, k, &vec![(k % 251) as u8; len]).unwrap();
                }
            }
        }
        if n % 97 == 0 {
            // A tree created and dropped: catalog changes too.
            let name = format!("tmp{}", n % 3);
            match w.open_tree(&name) {
                Ok(_) => w.drop_tree(&name).unwrap(),
                Err(_) => {
                    let t = w.create_tree(&name, KeyKind::Int).unwrap();
                    w.insert(&t, 1, &[1; 600]).unwrap();
                }
            }
        }
        w.commit().unwrap();
        if n % 151 == 0 {
            db.checkpoint().unwrap();
        }
    }
}

/// Kills the writer when the test ends, also when it fails.
struct Reap(std::process::Child);

impl Drop for Reap {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn_writer(path: &Path, mode: JournalMode) -> Reap {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "writer", "--nocapture", "--test-threads=1"])
        .env(WRITER_ENV, format!("{}|{}", path.display(), mode.name()))
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    let reap = Reap(child);
    // The harness prints its own lines first ("running 1 test", then "test writer ... "
    // glued to the writer's first line).
    let ready = BufReader::new(out)
        .lines()
        .map_while(Result::ok)
        .any(|l| l.ends_with("ready"));
    assert!(ready, "{mode}: the writer did not start");
    reap
}

#[test]
fn check_beside_a_writer_never_raises_a_false_alarm() {
    if std::env::var(WRITER_ENV).is_ok() {
        return;
    }
    let per_mode: usize = std::env::var("INPAGE_LIVE_CHECKS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(6);
    // A long run may use copies of the binaries, so a rebuild meanwhile cannot swap them.
    let exe = std::env::var("INPAGE_LIVE_CHECK_BIN")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_inpage").to_string());
    let mut alarms = Vec::new();
    let mut unsteady = Vec::new();
    let mut total = 0;
    let mut discarded = 0u64;
    let mut unatomic = 0;
    for mode in JournalMode::all() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("live.db");
        let writer = spawn_writer(&path, mode);
        let mut fcc_seen = Vec::new();
        for _ in 0..per_mode {
            std::thread::sleep(Duration::from_millis(50));
            let out = Command::new(&exe).arg("check").arg(&path).output().unwrap();
            total += 1;
            let stdout = String::from_utf8_lossy(&out.stdout);
            let stderr = String::from_utf8_lossy(&out.stderr);
            if out.status.success() {
                if let Some(d) = stdout.split("writing: ").nth(1) {
                    discarded += d.split_whitespace().next().unwrap().parse::<u64>().unwrap();
                }
                if let Some(f) = stdout.split("fcc ").nth(1) {
                    fcc_seen.push(f.split_whitespace().next().unwrap_or("").to_string());
                }
            } else if stderr.contains("nothing conclusive") {
                // A mode without atomicity leaves a half-written commit in every copy
                // taken while it writes (as a crash would): no check can say more then.
                if mode.promises_atomicity() {
                    unsteady.push(format!("{mode}: {}", stderr.trim()));
                } else {
                    unatomic += 1;
                }
            } else {
                alarms.push(format!("{mode}: {}{}", stdout.trim(), stderr.trim()));
            }
        }
        drop(writer);
        // The checks saw the writer's progress, not one frozen state.
        fcc_seen.dedup();
        eprintln!(
            "{mode}: {per_mode} checks beside the writer, {} distinct commits seen",
            fcc_seen.len()
        );
        let _ = std::fs::remove_file(Config::default().journal.nvlog_region_for(&path));
    }
    eprintln!(
        "{total} checks: {} false alarms, {} inconclusive ({unatomic} more in modes without atomicity); {discarded} copies that failed while the files changed were set aside",
        alarms.len(),
        unsteady.len()
    );
    assert!(alarms.is_empty(), "false alarms:\n{}", alarms.join("\n"));
    assert!(
        unsteady.is_empty(),
        "inconclusive:\n{}",
        unsteady.join("\n")
    );
}
