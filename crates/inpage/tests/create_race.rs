//! Processes racing to create one database, and kills while an `nvlog` database creates
//! or reopens its region (issue 35), on real files.
//!
//! - `creation_races_lose_no_commit`: two processes open the same new path at once, each
//!   commits one row and says so; every acknowledged row must be there afterwards, and
//!   the loser of the race must have been refused with `Error::Locked` (then open what the
//!   winner made), never an I/O error. Every registry mode takes turns.
//!   `INPAGE_CREATE_RACES` races (default 96; the evidence: 10,000).
//! - `creation_races_with_injected_delays`: the same under `strace`, which stretches the
//!   creators' `openat`, `flock` and `pwrite64` calls by random delays so that the windows
//!   between opening, locking and laying out the file are wide.
//!   `INPAGE_CREATE_DELAY_RACES` races (default 24; the evidence: 100). Skipped,
//!   with the reason printed, where `strace` cannot run.
//! - `nvlog_kill_at_every_step_of_creation`: a child creating an `nvlog` database (default
//!   region under `/dev/shm`) is SIGKILLed by `strace` just before its k-th file system
//!   call, for every k of a full run; the database must open afterwards, hold the row if
//!   the child acknowledged it, and pass the check.
//! - `nvlog_killed_reopens_never_brick_the_database`: a child reopening an `nvlog`
//!   database and committing in a loop is SIGKILLed at random moments
//!   (`INPAGE_NVLOG_KILLS`, default 40; the evidence: 200); after each kill the
//!   database opens and holds every acknowledged row.
//! - Regions left by a build that created them non-atomically (empty, short) and a region
//!   left by an earlier database at the default path do not block an open.
//!
//! Children are this test binary run again (`child`, which does nothing unless
//! `INPAGE_CREATE_CHILD` is set).

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use inpage::{Config, Database, Error, JournalMode, KeyKind, ReadableTxn};

const CHILD_ENV: &str = "INPAGE_CREATE_CHILD";

/// Turns a child command into the one to run (e.g. under strace): (command, race, db).
type Wrap = dyn Fn(&Command, u64, &Path) -> Command;

/// The tests of this file run one at a time. They fork children while they hold
/// databases open, and a child forked while another test's handle is open shares that
/// handle's `flock` until it execs: the other test, reopening its database right then,
/// would be refused (`Locked`) by its own earlier handle's lock, a race of the harness,
/// not of the engine.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .map(|v| v.parse().unwrap_or_else(|_| panic!("{name}={v:?}")))
        .unwrap_or(default)
}

/// A region under the test's directory for `nvlog` (so a race leaves nothing in
/// `/dev/shm`); `default_region`: the default one, for the tests of it.
fn config(mode: JournalMode, dir: &Path, default_region: bool) -> Config {
    let c = Config::default().journal_mode(mode);
    if mode.capabilities().region_backed && !default_region {
        c.nvlog_region(dir.join("region"))
    } else {
        c
    }
}

/// Remove the default region of `db`, if any (the tests that use it clean up after
/// themselves: `/dev/shm` is memory).
fn remove_default_region(db: &Path) {
    let r = Config::default().journal.nvlog_region_for(db);
    // And the temporary file of a creation killed before it was linked into place.
    let name = r.file_name().unwrap().to_string_lossy().into_owned();
    if let Ok(entries) = std::fs::read_dir(r.parent().unwrap()) {
        for e in entries.flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            if n.starts_with(&format!("{name}.")) && n.ends_with(".creating") {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
    let _ = std::fs::remove_file(r);
}

/// The child: `INPAGE_CREATE_CHILD=<op>|<db>|<mode>|<id>|<default region: 0/1>`.
/// - `race`: open (retrying while `Locked`), commit row `id`, print `committed <id>`.
/// - `loop`: open, commit rows `id`, `id + 1`, … printing `committed <n>` after each,
///   closing and reopening every few commits, until killed.
#[test]
fn child() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let p: Vec<&str> = spec.split('|').collect();
    let (op, db) = (p[0], PathBuf::from(p[1]));
    let mode = JournalMode::from_name(p[2]).unwrap();
    let id: i64 = p[3].parse().unwrap();
    let cfg = config(mode, db.parent().unwrap(), p[4] == "1");
    let open = || {
        let start = Instant::now();
        let mut refused = 0u64;
        loop {
            match Database::open(&db, cfg.clone()) {
                Ok(d) => return (d, refused),
                Err(Error::Locked { .. }) if start.elapsed() < Duration::from_secs(30) => {
                    refused += 1;
                    std::thread::sleep(Duration::from_micros(200));
                }
                Err(e) => {
                    println!("open failed: {e}");
                    std::process::exit(2);
                }
            }
        }
    };
    let commit = |d: &Database, k: i64| {
        let mut w = d.begin_write().unwrap();
        let t = w.open_or_create_tree("t", KeyKind::Int).unwrap();
        w.insert(&t, k, format!("row {k}").as_bytes()).unwrap();
        w.commit().unwrap();
        println!("committed {k}");
    };
    match op {
        "race" => {
            let (d, refused) = open();
            commit(&d, id);
            println!("refused {refused}");
        }
        "loop" => {
            let mut k = id;
            loop {
                let (d, _) = open();
                for _ in 0..3 {
                    commit(&d, k);
                    k += 1;
                }
                drop(d);
            }
        }
        other => panic!("unknown child op {other}"),
    }
}

fn child_command(op: &str, db: &Path, mode: JournalMode, id: i64, default_region: bool) -> Command {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args(["--exact", "child", "--nocapture", "--test-threads=1"])
        .env(
            CHILD_ENV,
            format!(
                "{op}|{}|{}|{id}|{}",
                db.display(),
                mode.name(),
                u8::from(default_region)
            ),
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    c
}

/// The same command run under `strace` with `args` (which must include `-e inject=…`).
fn under_strace(cmd: &Command, args: &[String]) -> Command {
    let mut s = Command::new("strace");
    s.args(["-f", "-qq", "-o", "/dev/null"]).args(args);
    s.arg(cmd.get_program()).args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        if let Some(v) = v {
            s.env(k, v);
        }
    }
    s.stdout(Stdio::piped()).stderr(Stdio::null());
    s
}

/// Why strace cannot be used here, if it cannot.
fn strace_unusable() -> Option<String> {
    match Command::new("strace")
        .args([
            "-qq",
            "-o",
            "/dev/null",
            "-e",
            "inject=getpid:delay_exit=1",
            "true",
        ])
        .status()
    {
        Ok(s) if s.success() => None,
        Ok(s) => Some(format!("strace -e inject fails here ({s})")),
        Err(e) => Some(format!("no strace ({e})")),
    }
}

/// The acknowledged rows a child printed, and how often it was refused.
fn acked(out: &[u8]) -> (Vec<i64>, u64, Option<String>) {
    let mut rows = Vec::new();
    let mut refused = 0;
    let mut failed = None;
    for l in out.lines().map_while(Result::ok) {
        // The first line follows the harness's "test child ... " on the same line.
        let l = l.strip_prefix("test child ... ").unwrap_or(&l).to_string();
        if let Some(n) = l.strip_prefix("committed ") {
            rows.push(n.parse().unwrap());
        } else if let Some(n) = l.strip_prefix("refused ") {
            refused = n.parse().unwrap();
        } else if l.starts_with("open failed") {
            failed = Some(l);
        }
    }
    (rows, refused, failed)
}

/// The rows of tree "t", after the check.
fn rows(db: &Path, cfg: Config) -> Result<Vec<i64>, String> {
    let d = Database::open(db, cfg).map_err(|e| format!("reopen: {e}"))?;
    let r = d.begin_read().map_err(|e| e.to_string())?;
    inpage::check::check(&r, &Default::default()).map_err(|e| format!("check: {e}"))?;
    let t = match r.open_tree("t") {
        Ok(t) => t,
        Err(Error::TreeNotFound(_)) => return Ok(Vec::new()),
        Err(e) => return Err(e.to_string()),
    };
    let mut v = Vec::new();
    for kv in r.iter(&t).map_err(|e| e.to_string())? {
        let (k, _) = kv.map_err(|e| e.to_string())?;
        v.push(k.as_int().ok_or("not an int key")?);
    }
    Ok(v)
}

/// One race: two children (each under `wrap`, if given) create `db` at once. Returns how
/// many of them were refused at least once.
fn race(mode: JournalMode, wrap: Option<&Wrap>, seed: u64) -> Result<u64, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let db = dir.path().join("new.db");
    let kids: Vec<_> = (1..=2)
        .map(|id| {
            let mut c = child_command("race", &db, mode, id, false);
            match wrap {
                Some(w) => w(&c, seed.wrapping_mul(31).wrapping_add(id as u64), &db).spawn(),
                None => c.spawn(),
            }
            .map_err(|e| e.to_string())
        })
        .collect::<Result<_, _>>()?;
    let mut want = Vec::new();
    let mut losers = 0;
    for (i, k) in kids.into_iter().enumerate() {
        let out = k.wait_with_output().map_err(|e| e.to_string())?;
        let (rows, refused, failed) = acked(&out.stdout);
        if let Some(f) = failed {
            return Err(format!("{mode} seed {seed}: child {}: {f}", i + 1));
        }
        if !out.status.success() || rows.len() != 1 {
            return Err(format!(
                "{mode} seed {seed}: child {} ended {} having acknowledged {rows:?}",
                i + 1,
                out.status
            ));
        }
        losers += u64::from(refused > 0);
        want.extend(rows);
    }
    want.sort_unstable();
    let got = rows(&db, config(mode, dir.path(), false))
        .map_err(|e| format!("{mode} seed {seed}: {e}"))?;
    if got != want {
        return Err(format!(
            "{mode} seed {seed}: acknowledged {want:?}, the database holds {got:?}"
        ));
    }
    Ok(losers)
}

#[test]
fn creation_races_lose_no_commit() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let _serial = serial();
    let n = env_u64("INPAGE_CREATE_RACES", 96);
    let modes: Vec<JournalMode> = JournalMode::all().collect();
    let mut losers = 0;
    for i in 0..n {
        let mode = modes[i as usize % modes.len()];
        losers += race(mode, None, i).unwrap_or_else(|e| panic!("{e}"));
    }
    eprintln!("{n} creation races: every acknowledged commit kept; a creator was refused (Locked) in {losers}");
}

#[test]
fn creation_races_with_injected_delays() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let _serial = serial();
    if let Some(why) = strace_unusable() {
        eprintln!("skipped: {why}");
        return;
    }
    let n = env_u64("INPAGE_CREATE_DELAY_RACES", 24);
    let modes: Vec<JournalMode> = JournalMode::all().collect();
    let mut losers = 0;
    for i in 0..n {
        let mode = modes[i as usize % modes.len()];
        let wrap = |c: &Command, seed: u64, db: &Path| {
            let mix = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(23);
            // Only the calls on the database file (`-P`), so neither process starts
            // late: microseconds, up to 10 ms before its open, 30 ms holding the lock
            // once it has it, 3 ms per write.
            let args = vec![
                "-P".to_string(),
                db.display().to_string(),
                "-e".to_string(),
                format!("inject=openat:delay_enter={}", mix % 10_000),
                "-e".to_string(),
                format!("inject=flock:delay_exit={}", (mix >> 16) % 30_000),
                "-e".to_string(),
                format!("inject=pwrite64:delay_exit={}", (mix >> 32) % 3_000),
            ];
            under_strace(c, &args)
        };
        losers += race(mode, Some(&wrap), 1000 + i).unwrap_or_else(|e| panic!("{e}"));
    }
    eprintln!("{n} creation races with injected delays: every acknowledged commit kept; a creator was refused (Locked) in {losers}");
}

/// Per traced system call, how many times a full run of the creating child makes it (in
/// the thread that makes it most: strace counts injections per call and per thread).
fn traced_calls(db: &Path, trace: &str) -> Vec<(String, usize)> {
    let log = db.with_extension("strace");
    let c = child_command("race", db, JournalMode::NVLOG, 1, true);
    let mut s = Command::new("strace");
    s.args(["-f", "-qq", "-o"])
        .arg(&log)
        .args(["-e", &format!("trace={trace}")])
        .arg(c.get_program())
        .args(c.get_args())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    for (k, v) in c.get_envs() {
        if let Some(v) = v {
            s.env(k, v);
        }
    }
    assert!(s.status().unwrap().success());
    let text = std::fs::read_to_string(&log).unwrap();
    let _ = std::fs::remove_file(&log);
    remove_default_region(db);
    let mut per: std::collections::BTreeMap<(String, String), usize> = Default::default();
    for l in text.lines() {
        // "<pid> <name>(<args>" or "<pid> <name>(<args> <unfinished ...>"; resumptions
        // ("<... name resumed>") and signals are not calls.
        // strace pads the pid to five columns: "123   name(".
        let Some((pid, rest)) = l.split_once(' ') else {
            continue;
        };
        let rest = rest.trim_start();
        let Some((name, _)) = rest.split_once('(') else {
            continue;
        };
        if name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') && !name.is_empty() {
            *per.entry((name.to_string(), pid.to_string())).or_default() += 1;
        }
    }
    let mut most: std::collections::BTreeMap<String, usize> = Default::default();
    for ((name, _), n) in per {
        let m = most.entry(name).or_default();
        *m = (*m).max(n);
    }
    most.into_iter().collect()
}

#[test]
fn nvlog_kill_at_every_step_of_creation() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let _serial = serial();
    if let Some(why) = strace_unusable() {
        eprintln!("skipped: {why}");
        return;
    }
    const TRACE: &str = "openat,ftruncate,fallocate,renameat2,link,unlink,unlinkat,pwrite64,write,fdatasync,fsync,flock,mmap";
    let dir = tempfile::tempdir().unwrap();
    let calls = traced_calls(&dir.path().join("count.db"), TRACE);
    let steps: usize = calls.iter().map(|(_, n)| n).sum();
    assert!(
        calls.iter().any(|(c, _)| c == "ftruncate") && calls.iter().any(|(c, _)| c == "renameat2"),
        "the region is not created as expected: {calls:?}"
    );
    let mut killed = 0;
    for (call, n) in &calls {
        for k in 1..=*n {
            let db = dir.path().join(format!("{call}-{k}.db"));
            let c = child_command("race", &db, JournalMode::NVLOG, 1, true);
            let args = vec![
                "-e".to_string(),
                format!("trace={TRACE}"),
                "-e".to_string(),
                format!("inject={call}:signal=SIGKILL:when={k}"),
            ];
            let out = under_strace(&c, &args).output().unwrap();
            let (acked, _, failed) = acked(&out.stdout);
            assert!(failed.is_none(), "{call} #{k}: {failed:?}");
            killed += u64::from(!out.status.success());
            let got = rows(&db, config(JournalMode::NVLOG, dir.path(), true));
            remove_default_region(&db);
            let got = got.unwrap_or_else(|e| panic!("killed at {call} #{k}: {e}"));
            assert!(
                acked.iter().all(|r| got.contains(r)),
                "{call} #{k}: acknowledged {acked:?}, holds {got:?}"
            );
        }
    }
    assert!(killed > 0, "strace killed no child");
    eprintln!(
        "nvlog creation: a kill at each of {steps} traced calls ({killed} children killed); every database opened: {calls:?}"
    );
}

#[test]
fn nvlog_killed_reopens_never_brick_the_database() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let _serial = serial();
    let kills = env_u64("INPAGE_NVLOG_KILLS", 40);
    // tmpfs, as the audit found it: the database beside its region in memory.
    let base = if Path::new("/dev/shm").is_dir() {
        tempfile::tempdir_in("/dev/shm").unwrap()
    } else {
        tempfile::tempdir().unwrap()
    };
    let db = base.path().join("kill.db");
    let cfg = config(JournalMode::NVLOG, base.path(), true);
    let mut next = 1i64;
    for i in 0..kills {
        let mut child = child_command("loop", &db, JournalMode::NVLOG, next, true)
            .spawn()
            .unwrap();
        let mix = (i + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(29);
        // Mostly early (the open and its region), sometimes after a few commits.
        std::thread::sleep(Duration::from_micros(
            mix % if i % 3 == 0 { 60_000 } else { 8_000 },
        ));
        let _ = child.kill();
        let out = child.wait_with_output().unwrap();
        let (acked, _, failed) = acked(&out.stdout);
        assert!(failed.is_none(), "kill {i}: {failed:?}");
        let got = rows(&db, cfg.clone()).unwrap_or_else(|e| {
            remove_default_region(&db);
            panic!("kill {i}: {e}")
        });
        for r in &acked {
            assert!(got.contains(r), "kill {i}: acknowledged {r}, holds {got:?}");
        }
        next = got.last().copied().unwrap_or(0) + 1;
    }
    remove_default_region(&db);
    eprintln!("nvlog: {kills} SIGKILLs during reopens and commits; the database opened after each");
}

/// Regions no build should leave but older ones did, and regions of an earlier database
/// at the same path: none of them stops a database from opening.
#[test]
fn leftover_regions_do_not_block_an_open() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let commit = |db: &Path, k: i64| {
        let d = Database::open(db, config(JournalMode::NVLOG, dir.path(), true)).unwrap();
        let mut w = d.begin_write().unwrap();
        let t = w.open_or_create_tree("t", KeyKind::Int).unwrap();
        w.insert(&t, k, b"v").unwrap();
        w.commit().unwrap();
        d.close().unwrap();
    };
    // An empty region (a kill between creating and sizing it), beside an existing
    // database and beside a new one; a short one of zeros at the default path.
    for (name, existing, bytes) in [
        ("empty-old", true, 0usize),
        ("empty-new", false, 0),
        ("short-old", true, 100),
        ("short-new", false, 1000),
    ] {
        let db = dir.path().join(format!("{name}.db"));
        if existing {
            commit(&db, 1);
        }
        let region = Config::default().journal.nvlog_region_for(&db);
        std::fs::write(&region, vec![0u8; bytes]).unwrap();
        commit(&db, 2);
        let got = rows(&db, config(JournalMode::NVLOG, dir.path(), true));
        remove_default_region(&db);
        let want = if existing { vec![1, 2] } else { vec![2] };
        assert_eq!(got.unwrap(), want, "{name}");
    }
    // A database deleted with its side files but not its region; a new one at the path.
    let db = dir.path().join("again.db");
    commit(&db, 1);
    std::fs::remove_file(&db).unwrap();
    for side in ["db-wal", "db-nvlog"] {
        let _ = std::fs::remove_file(db.with_extension(side));
    }
    commit(&db, 7);
    assert_eq!(
        rows(&db, config(JournalMode::NVLOG, dir.path(), true)).unwrap(),
        vec![7]
    );
    // Deleted alone: its side files (identity, log) and region stay; the new database
    // must not inherit them.
    std::fs::remove_file(&db).unwrap();
    commit(&db, 9);
    let got = rows(&db, config(JournalMode::NVLOG, dir.path(), true));
    remove_default_region(&db);
    assert_eq!(got.unwrap(), vec![9]);
    // A creation killed before it linked its region into place left a temporary file:
    // the next creation of that region removes it.
    let db = dir.path().join("abandoned.db");
    let region = Config::default().journal.nvlog_region_for(&db);
    let tmp = PathBuf::from(format!("{}.4242-abc.creating", region.display()));
    std::fs::write(&tmp, vec![0u8; 4096]).unwrap();
    commit(&db, 3);
    let gone = !tmp.exists();
    remove_default_region(&db);
    assert!(gone, "{} left behind", tmp.display());
    // A configured region is never overwritten: another file there is refused by name.
    let db = dir.path().join("configured.db");
    let region = dir.path().join("mine");
    std::fs::write(&region, vec![7u8; 100]).unwrap();
    let e = Database::open(
        &db,
        Config::default()
            .journal_mode(JournalMode::NVLOG)
            .nvlog_region(&region),
    )
    .unwrap_err();
    assert!(matches!(e, Error::ForeignRegion { .. }), "{e}");
    assert_eq!(std::fs::read(&region).unwrap(), vec![7u8; 100]);
}
