//! Real processes on one database (`procs`), writers SIGKILLed at random moments.
//!
//! Two writer processes and two reader processes share a database in each atomic mode
//! that takes turns (every atomic registry mode but `nvlog` and `waldio-gs`, see
//! `tests/procs.rs`).
//! A writer commits rows `w·10⁶ + i` and, in the same transaction, its high-water mark
//! `i`, and prints `ack <i>` once `commit` returned. A reader checks in every snapshot
//! that each writer's mark never goes back and that the row at the mark is there (reads
//! are committed states and monotonic per process); it exits non-zero on a violation.
//! One writer is SIGKILLed at a random moment and started again, `INPAGE_PROCS_KILLS`
//! times per mode (default 3; the evidence: 100; `INPAGE_PROCS_MODES=redo,wal`
//! runs only those modes). Afterwards every acknowledged
//! row of every writer is there, the database passes `check`, no process reported an
//! error, and the side file is gone.
//!
//! Children are this test binary run again (`child`, which does nothing unless
//! `INPAGE_PROCS_CHILD` is set).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use inpage::{Config, Database, JournalMode, KeyKind, ReadableTxn};

const CHILD_ENV: &str = "INPAGE_PROCS_CHILD";
const MARK: i64 = 1_000_000_000;

fn config(mode: JournalMode) -> Config {
    Config::default()
        .journal_mode(mode)
        .busy_timeout(Duration::from_secs(30))
}

/// The atomic modes that take turns: a kill in a commit of a mode that is not atomic
/// (`off`) may leave half of it, as a crash would.
fn sharing_modes() -> impl Iterator<Item = JournalMode> {
    JournalMode::all().filter(|m| {
        let c = m.capabilities();
        c.atomic && c.survives_process_crash && !c.region_backed
    })
}

/// The child: `INPAGE_PROCS_CHILD=<role>|<db>|<mode>|<writer>|<start>|<count>`.
/// - `write`: commit rows `writer·10⁶ + i` for i in start..start+count with the mark,
///   printing `ack <i>` after each, until the stop file exists.
/// - `read`: take snapshots, checking marks (module notes), at least `count` and until the
///   stop file exists; print `reads <n>`.
#[test]
fn child() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let p: Vec<&str> = spec.split('|').collect();
    let (role, db) = (p[0], PathBuf::from(p[1]));
    let mode = JournalMode::from_name(p[2]).unwrap();
    let w: i64 = p[3].parse().unwrap();
    let start: i64 = p[4].parse().unwrap();
    let count: i64 = p[5].parse().unwrap();
    let d = Database::open(&db, config(mode)).unwrap_or_else(|e| panic!("open: {e}"));
    // The parent creates it once the kills are done: the steady writer and the readers
    // run until then.
    let stop = stop_path(&db);
    match role {
        "write" => {
            for i in start..start + count {
                if stop.exists() {
                    break;
                }
                let mut t = d.begin_write().unwrap_or_else(|e| panic!("begin: {e}"));
                let tree = t.open_or_create_tree("t", KeyKind::Int).unwrap();
                t.insert(&tree, w * 1_000_000 + i, &[b'r'; 200]).unwrap();
                t.insert(&tree, MARK + w, &i.to_le_bytes()).unwrap();
                t.commit().unwrap_or_else(|e| panic!("commit {i}: {e}"));
                println!("ack {i}");
            }
        }
        "read" => {
            let mut last = [-1i64; 2];
            let mut reads = 0;
            while reads < count || !stop.exists() {
                reads += 1;
                let r = d.begin_read().unwrap_or_else(|e| panic!("read: {e}"));
                let Ok(t) = r.open_tree("t") else { continue };
                for (w, last) in last.iter_mut().enumerate() {
                    let mark = r
                        .get(&t, MARK + w as i64)
                        .unwrap()
                        .map_or(-1, |v| i64::from_le_bytes(v.try_into().unwrap()));
                    assert!(
                        mark >= *last,
                        "writer {w}'s mark went back: {last} → {mark}"
                    );
                    *last = mark;
                    if mark >= 0 {
                        assert!(
                            r.get(&t, w as i64 * 1_000_000 + mark).unwrap().is_some(),
                            "writer {w}'s row {mark} missing under its mark"
                        );
                    }
                }
                drop(r);
                std::thread::sleep(Duration::from_millis(2));
            }
            println!("reads {reads}");
        }
        _ => unreachable!("{role}"),
    }
}

fn stop_path(db: &Path) -> PathBuf {
    db.with_extension("stop")
}

/// A child process and the acknowledgements it printed (collected by a thread).
struct Proc {
    child: Child,
    acks: Arc<Mutex<Vec<i64>>>,
    reader: std::thread::JoinHandle<()>,
}

fn spawn(role: &str, db: &Path, mode: JournalMode, w: i64, start: i64, count: i64) -> Proc {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child", "--nocapture", "--test-threads=1"])
        .env(
            CHILD_ENV,
            format!("{role}|{}|{mode}|{w}|{start}|{count}", db.display()),
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    let acks = Arc::new(Mutex::new(Vec::new()));
    let a = acks.clone();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            // The harness may print its `test child ... ` on the same line.
            if let Some(at) = line.find("ack ") {
                a.lock()
                    .unwrap()
                    .push(line[at + 4..].trim().parse().unwrap());
            }
        }
    });
    Proc {
        child,
        acks,
        reader,
    }
}

/// Wait for a child that must succeed; its acknowledgements.
fn finish(mut p: Proc, what: &str) -> Vec<i64> {
    let status = p.child.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(p.child.stderr.as_mut().unwrap(), &mut err).unwrap();
    p.reader.join().unwrap();
    assert!(status.success(), "{what} failed: {status}\n{err}");
    Arc::try_unwrap(p.acks).unwrap().into_inner().unwrap()
}

/// Tiny deterministic generator (no dependency): the kill moments.
fn next(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

#[test]
fn writers_killed_at_random_lose_no_acknowledged_commit() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let kills: u64 = std::env::var("INPAGE_PROCS_KILLS")
        .ok()
        .map_or(3, |v| v.parse().unwrap());
    // `INPAGE_PROCS_MODES=redo,wal`: only those.
    let only: Option<Vec<String>> = std::env::var("INPAGE_PROCS_MODES")
        .ok()
        .map(|v| v.split(',').map(str::to_string).collect());
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    for mode in sharing_modes().filter(|m| {
        only.as_ref()
            .is_none_or(|o| o.iter().any(|n| n == m.name()))
    }) {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("t.db");
        drop(Database::open(&db, config(mode)).unwrap());
        let t0 = Instant::now();
        // Writer 1 runs throughout; writer 0 is killed and started again; two readers.
        let steady = spawn("write", &db, mode, 1, 0, i64::MAX / 2);
        let readers: Vec<Proc> = (0..2).map(|_| spawn("read", &db, mode, 0, 0, 50)).collect();
        let mut acked0: Vec<i64> = Vec::new();
        let mut next_i = 0i64;
        for _ in 0..kills {
            let mut p = spawn("write", &db, mode, 0, next_i, 1_000_000);
            std::thread::sleep(Duration::from_millis(20 + next(&mut seed) % 150));
            p.child.kill().unwrap();
            p.child.wait().unwrap();
            p.reader.join().unwrap();
            let acks = p.acks.lock().unwrap().clone();
            // A commit in flight at the kill may be there or not; its number is not
            // reused, so rows never collide.
            next_i = acks.last().map_or(next_i, |&i| i + 1) + 1;
            acked0.extend(acks);
        }
        let last = finish(spawn("write", &db, mode, 0, next_i, 20), "writer 0");
        acked0.extend(last);
        std::fs::write(stop_path(&db), b"").unwrap();
        let acked1 = finish(steady, "writer 1");
        for r in readers {
            finish(r, "reader");
        }
        let d = Database::open(&db, config(mode)).unwrap();
        let r = d.begin_read().unwrap();
        let t = r.open_tree("t").unwrap();
        for (w, acked) in [(0i64, &acked0), (1, &acked1)] {
            for &i in acked {
                assert!(
                    r.get(&t, w * 1_000_000 + i).unwrap().is_some(),
                    "{mode}: writer {w}'s acknowledged commit {i} lost"
                );
            }
        }
        inpage::check::check(&r, &Default::default()).unwrap_or_else(|e| panic!("{mode}: {e}"));
        drop(r);
        drop(d);
        assert!(
            !inpage::internals::shm_path(&db).exists(),
            "{mode}: side file left"
        );
        eprintln!(
            "{mode}: {kills} kills, {} + {} acknowledged commits kept, {:.1} s",
            acked0.len(),
            acked1.len(),
            t0.elapsed().as_secs_f64()
        );
    }
}
