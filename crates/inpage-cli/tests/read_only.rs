//! `inpage check` and `inpage inspect` never write. Over damaged files of every journal
//! mode (`JournalMode::ALL`): states a power cut left (from `SimVfs`, copied to real
//! files), truncated files and flipped bytes, both commands must leave every file of the
//! database (`db`, `-journal`, `-wal`) byte-identical and create none; and where `check`
//! passes, the FCC it reports must be the one a read-write open (real recovery) then
//! settles on, so the in-memory recovery is the real one.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use inpage::vfs::Vfs;
use inpage::{Config, Database, JournalMode, KeyKind};
use inpage_sim::{CrashModel, SimVfs};

fn inpage(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_inpage"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Every file in `dir`, by name.
fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}

/// Commits of a few dozen rows each, some with large values, so commits span pages.
fn workload(db: &Database, commits: u64) -> inpage::Result<()> {
    for i in 0..commits {
        let mut w = db.begin_write()?;
        let t = w.open_or_create_tree("t", KeyKind::Int)?;
        for k in 0..12u64 {
            let key = ((i * 7 + k * 13) % 300) as i64;
            let len = 50 + ((i * 31 + k * 97) % 1500) as usize;
            w.insert(&t, key, &vec![(i + k) as u8; len])?;
        }
        if i % 3 == 2 {
            w.remove(&t, ((i * 5) % 300) as i64)?;
        }
        w.commit()?;
    }
    Ok(())
}

const SIM_DB: &str = "/sim/t.db";
const COMMITS: u64 = 12;

fn sim_config(sim: &SimVfs, mode: JournalMode) -> Config {
    let vfs: Arc<dyn Vfs> = Arc::new(sim.clone());
    let c = Config::default()
        .vfs(vfs)
        .journal_mode(mode)
        .wal_autocheckpoint(8);
    if mode.capabilities().region_backed {
        // The region is not copied to the real files (it would live under /dev/shm):
        // flush often, on the committing thread, so the files hold a log to recover.
        c.nvlog_flush(inpage::NvlogFlush::Inline)
            .nvlog_ring_bytes(16 << 10)
    } else {
        c
    }
}

/// Run the workload on a simulated disk, cut after `cut` operations (None: no cut, and
/// no clean close either), and return what the medium holds afterwards.
fn sim_run(mode: JournalMode, cut: Option<u64>, seed: u64) -> (SimVfs, u64) {
    let sim = SimVfs::new();
    if let Some(c) = cut {
        sim.set_power_cut_after(c);
    }
    if let Ok(db) = Database::open(SIM_DB, sim_config(&sim, mode)) {
        let _ = workload(&db, COMMITS);
        // A crash, not a close: no clean shutdown.
        std::mem::forget(db);
    }
    let ops = sim.op_count();
    (sim.crash(seed, CrashModel::full()), ops)
}

/// Copy the simulated database's files into `dir`; returns the db path there.
fn materialize(sim: &SimVfs, dir: &Path) -> PathBuf {
    for p in sim.file_names() {
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if let Some(bytes) = sim.read_file(&p) {
            std::fs::write(dir.join(name), bytes).unwrap();
        }
    }
    dir.join("t.db")
}

struct Case {
    mode: JournalMode,
    what: String,
    dir: tempfile::TempDir,
}

fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    for mode in JournalMode::all() {
        let (_, total) = sim_run(mode, None, 0);
        let mut add = |what: String, sim: &SimVfs, damage: &dyn Fn(&Path)| {
            let dir = tempfile::tempdir().unwrap();
            let db = materialize(sim, dir.path());
            if db.exists() {
                damage(&db);
            }
            out.push(Case { mode, what, dir });
        };
        // Power cuts spread over the workload, each with a different reordering/tearing.
        for k in 1..=8u64 {
            let cut = total * k / 9;
            let (crashed, _) = sim_run(mode, Some(cut), k);
            add(
                format!("power cut after {cut} of {total} ops"),
                &crashed,
                &|_| {},
            );
        }
        let (clean, _) = sim_run(mode, None, 0);
        add("no damage (not closed)".into(), &clean, &|_| {});
        add("truncated to half".into(), &clean, &|db| {
            let len = std::fs::metadata(db).unwrap().len();
            let f = std::fs::OpenOptions::new().write(true).open(db).unwrap();
            f.set_len(len / 2).unwrap();
        });
        for (at, name) in [
            (40u64, "header"),
            (4096 + 100, "page 1"),
            (3 * 4096 + 7, "page 3"),
        ] {
            add(format!("flipped byte in {name}"), &clean, &|db| {
                let mut b = std::fs::read(db).unwrap();
                if let Some(x) = b.get_mut(at as usize) {
                    *x ^= 0x5a;
                }
                std::fs::write(db, b).unwrap();
            });
        }
        // Side files damaged too: a log or journal cut in the middle of a record.
        let (crashed, _) = sim_run(mode, Some(total * 2 / 3), 99);
        add("side file cut short".into(), &crashed, &|db| {
            for suffix in ["-wal", "-journal"] {
                let mut p = db.as_os_str().to_owned();
                p.push(suffix);
                let p = PathBuf::from(p);
                if let Ok(m) = std::fs::metadata(&p) {
                    let f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
                    f.set_len(m.len() * 2 / 3).unwrap();
                }
            }
        });
    }
    out
}

#[test]
fn check_and_inspect_leave_damaged_files_of_every_mode_byte_identical() {
    let mut would = BTreeMap::new();
    let mut agreed = BTreeMap::new();
    for case in cases() {
        let db = case.dir.path().join("t.db");
        let before = snapshot(case.dir.path());
        let p = db.to_str().unwrap();
        let (code, out, err) = inpage(&["check", p]);
        let (icode, iout, ierr) = inpage(&["inspect", p]);
        assert_eq!(
            snapshot(case.dir.path()),
            before,
            "{} ({}): check/inspect changed or created a file\ncheck: {out}{err}\ninspect: {iout}{ierr}",
            case.mode,
            case.what
        );
        assert!(
            code == 0 || code == 1,
            "{}: check exit {code}: {err}",
            case.mode
        );
        assert!(
            icode == 0 || icode == 1,
            "{}: inspect exit {icode}: {ierr}",
            case.mode
        );
        if out.contains("recovery would roll back") {
            assert!(
                out.contains("roll back tid "),
                "{}: no tid named\n{out}",
                case.mode
            );
        }
        if out.contains("recovery would") {
            *would.entry(case.mode.name()).or_insert(0) += 1;
        }
        // Where check passed, real recovery must settle on the FCC it reported.
        if code == 0 {
            let fcc: u64 = out
                .lines()
                .next()
                .and_then(|l| l.rsplit("fcc ").next())
                .and_then(|n| n.trim().parse().ok())
                .unwrap_or_else(|| panic!("no fcc in {out:?}"));
            let opened = Database::open(&db, Config::default().create(false)).unwrap_or_else(|e| {
                panic!(
                    "{} ({}): check passed but open failed: {e}",
                    case.mode, case.what
                )
            });
            assert_eq!(
                opened.fcc(),
                fcc,
                "{} ({}): read-only recovery and real recovery disagree\n{out}",
                case.mode,
                case.what
            );
            *agreed.entry(case.mode.name()).or_insert(0) += 1;
        }
    }
    // The cases must reach recovery, or the test would prove nothing about it.
    for mode in JournalMode::all() {
        // Without atomicity a power cut may leave any mix, which check rightly rejects.
        let need = if mode.promises_atomicity() { 4 } else { 1 };
        assert!(
            agreed.get(mode.name()).copied().unwrap_or(0) >= need,
            "{mode}: too few cases passed check ({agreed:?})"
        );
        if mode.promises_atomicity() {
            assert!(
                would.get(mode.name()).copied().unwrap_or(0) >= 1,
                "{mode}: no case needed recovery ({would:?})"
            );
        }
    }
}

#[test]
fn check_reports_what_recovery_would_do_without_doing_it() {
    // A DHL commit cut after some but not all of its pages reached the medium.
    let mode = JournalMode::DHL_CC;
    let (_, total) = sim_run(mode, None, 0);
    for cut in (total / 2..total).step_by(3) {
        let (crashed, _) = sim_run(mode, Some(cut), cut);
        let dir = tempfile::tempdir().unwrap();
        let db = materialize(&crashed, dir.path());
        let before = snapshot(dir.path());
        let (code, out, err) = inpage(&["check", db.to_str().unwrap()]);
        assert_eq!(code, 0, "{err}");
        assert_eq!(snapshot(dir.path()), before);
        if let Some(line) = out
            .lines()
            .find(|l| l.contains("recovery would roll back tid"))
        {
            assert!(line.contains("pages reached the disk"), "{out}");
            assert!(out.contains("not done: this command is read-only"), "{out}");
            // Running it again says the same: nothing was rolled back.
            let (_, again, _) = inpage(&["check", db.to_str().unwrap()]);
            assert_eq!(again, out);
            return;
        }
    }
    panic!("no cut left a DHL transaction to roll back");
}

#[test]
fn inspect_into_a_closed_pipe_exits_quietly() {
    use std::io::Read;
    use std::process::Stdio;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pipe.db");
    {
        let db = Database::open(&path, Config::default()).unwrap();
        let mut w = db.begin_write().unwrap();
        // Many trees, so inspect prints far more than a pipe buffer holds.
        for i in 0..3000 {
            w.create_tree(&format!("tree-{i:05}-{}", "x".repeat(40)), KeyKind::Int)
                .unwrap();
        }
        w.commit().unwrap();
        db.close().unwrap();
    }
    let mut child = Command::new(env!("CARGO_BIN_EXE_inpage"))
        .args(["inspect", path.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read one line, as `head -1` would, then close the pipe.
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 64];
    let n = stdout.read(&mut first).unwrap();
    assert!(String::from_utf8_lossy(&first[..n]).starts_with("file"));
    drop(stdout);
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let status = child.wait().unwrap();
    assert!(!err.contains("panicked"), "{err}");
    assert!(err.is_empty(), "{err}");
    assert_eq!(status.code(), Some(0));
}
