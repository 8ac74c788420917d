//! Read-only opens, the one-handle lock, and WAL logs that do not belong to the database.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::*;
use inpage::vfs::{OpenOptions, Vfs};
use inpage::{Config, Database, Error, JournalMode, KeyKind, ReadableTxn};
use inpage_sim::{CrashModel, SimVfs};

/// Every file of the simulated disk with its bytes.
fn files(sim: &SimVfs) -> BTreeMap<PathBuf, Vec<u8>> {
    sim.file_names()
        .into_iter()
        .map(|p| {
            let b = sim.read_file(&p).unwrap_or_default();
            (p, b)
        })
        .collect()
}

fn commit_rows(db: &Database, from: i64, n: i64) {
    for k in from..from + n {
        let mut w = db.begin_write().unwrap();
        let t = w.open_or_create_tree("t", KeyKind::Int).unwrap();
        w.insert(&t, k, &value_for(k, 1, 300 + (k as usize * 53) % 3000))
            .unwrap();
        w.commit().unwrap();
    }
}

fn rows(db: &Database) -> Vec<i64> {
    let r = db.begin_read().unwrap();
    let t = r.open_tree("t").unwrap();
    r.iter(&t)
        .unwrap()
        .map(|e| e.unwrap().0.as_int().unwrap())
        .collect()
}

/// A crash in the middle of a multi-page commit, in every mode that has recovery: the
/// read-only open sees the recovered state, refuses writes with a typed error, and leaves
/// every file as it was; a read-write open afterwards recovers to the same state.
#[test]
fn read_only_open_recovers_in_memory_and_refuses_writes() {
    for mode in JournalMode::all().filter(|m| m.promises_atomicity()) {
        let mut saw_recovery = false;
        for cut_frac in 1u64..16 {
            let sim = SimVfs::new();
            // A region-backed mode recovers by replaying its region: keep it through the
            // cut (persistent memory), so the read-only open has a replay to show.
            sim.set_regions_persistent(mode.capabilities().region_backed);
            let full = {
                let probe = SimVfs::new();
                let db = Database::open(DB, sim_config(&probe, mode, 4096)).unwrap();
                commit_rows(&db, 0, 10);
                probe.op_count()
            };
            sim.set_power_cut_after(full * cut_frac / 16);
            if let Ok(db) = Database::open(DB, sim_config(&sim, mode, 4096)) {
                for k in 0..10 {
                    let Ok(mut w) = db.begin_write() else { break };
                    let ok = w
                        .open_or_create_tree("t", KeyKind::Int)
                        .and_then(|t| {
                            w.insert(&t, k, &value_for(k, 1, 300 + (k as usize * 53) % 3000))
                        })
                        .is_ok();
                    if !ok || w.commit().is_err() {
                        break;
                    }
                }
                std::mem::forget(db);
            }
            let crashed = sim.crash(cut_frac, CrashModel::full());
            let before = files(&crashed);
            let cfg = sim_config(&crashed, mode, 4096);
            let Ok(ro) = Database::open_read_only(DB, cfg.clone()) else {
                // Cut before the database existed: nothing to inspect.
                assert!(!before.contains_key(Path::new(DB)), "{mode}");
                continue;
            };
            assert!(ro.is_read_only());
            let report = ro.recovery_report().clone();
            saw_recovery |= !report.is_clean();
            match ro.begin_write() {
                Err(Error::ReadOnly { op, .. }) => assert_eq!(op, "write transaction"),
                other => panic!("{mode}: expected ReadOnly, got {:?}", other.map(|_| ())),
            }
            assert!(matches!(ro.checkpoint(), Err(Error::ReadOnly { .. })));
            let ro_fcc = ro.fcc();
            let ro_rows = ro
                .begin_read()
                .unwrap()
                .open_tree("t")
                .map(|_| rows(&ro))
                .ok();
            drop(ro);
            assert_eq!(
                files(&crashed),
                before,
                "{mode}: read-only open changed a file"
            );

            let rw = Database::open(DB, cfg).unwrap();
            assert_eq!(rw.fcc(), ro_fcc, "{mode}");
            assert_eq!(rw.recovery_report(), &report, "{mode}");
            let rw_rows = rw
                .begin_read()
                .unwrap()
                .open_tree("t")
                .map(|_| rows(&rw))
                .ok();
            assert_eq!(rw_rows, ro_rows, "{mode}");
        }
        assert!(saw_recovery, "{mode}: no cut needed recovery");
    }
}

/// A second read-write handle (inside one process as from another) takes turns with the
/// first; while the first writes, an open that cannot wait for its turn is refused with
/// `Locked` and writes nothing. Read-only handles need no turn.
#[test]
fn a_second_read_write_handle_takes_turns() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("one.db");
    let db = Database::open(&path, Config::default()).unwrap();
    commit_rows(&db, 0, 3);
    let other = Database::open(&path, Config::default()).unwrap();
    assert_eq!(rows(&other), vec![0, 1, 2]);
    drop(other);
    let w = db.begin_write().unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let brief = Config::default().busy_timeout(std::time::Duration::from_millis(20));
    match Database::open(&path, brief) {
        Err(Error::Locked { path: p }) => assert_eq!(p, path),
        other => panic!("expected Locked, got {other:?}"),
    }
    assert_eq!(
        std::fs::read(&path).unwrap(),
        bytes,
        "the refused open wrote"
    );
    let ro = Database::open_read_only(&path, Config::default()).unwrap();
    assert_eq!(rows(&ro), vec![0, 1, 2]);
    drop(ro);
    drop(w);
    db.close().unwrap();
    let again = Database::open(&path, Config::default()).unwrap();
    assert_eq!(rows(&again), vec![0, 1, 2]);
}

/// Stores the WAL file of the simulated database as `bytes`.
fn put_wal(sim: &SimVfs, bytes: &[u8]) {
    let p = format!("{DB}-wal");
    let f = sim.open(Path::new(&p), OpenOptions::CREATE).unwrap();
    f.set_len(0).unwrap();
    f.write_at(bytes, 0).unwrap();
    f.sync_data().unwrap();
}

fn wal_config(sim: &SimVfs) -> Config {
    let vfs: Arc<dyn Vfs> = Arc::new(sim.clone());
    Config::default()
        .vfs(vfs)
        .journal_mode(JournalMode::WAL)
        .wal_autocheckpoint(0)
}

/// A log from before the last checkpoint, cut to a prefix of its commits (by hand, or as
/// `journal_size_limit` does after a reset), must not put its old images over the newer
/// pages: it is skipped, and the database reads as its last commit.
#[test]
fn a_wal_older_than_the_last_checkpoint_is_not_replayed() {
    let sim = SimVfs::new();
    let wal = PathBuf::from(format!("{DB}-wal"));
    let db = Database::open(DB, wal_config(&sim)).unwrap();
    commit_rows(&db, 0, 6); // tids 1..=6 in the first generation
    let old = sim.read_file(&wal).unwrap();
    db.checkpoint().unwrap();
    commit_rows(&db, 6, 4);
    db.checkpoint().unwrap(); // the database is at tid 10
    let want = rows(&db);
    assert_eq!(want, (0..10).collect::<Vec<_>>());
    std::mem::forget(db); // a crash
    let crashed = sim.crash(1, CrashModel::none());
    // The old generation, cut after about half of its frames.
    let frame = 24 + 4096;
    let nframes = (old.len() - 32) / frame;
    put_wal(&crashed, &old[..32 + nframes / 2 * frame]);

    let db = Database::open(DB, wal_config(&crashed)).unwrap();
    let rep = db.recovery_report().clone();
    let r = db.begin_read().unwrap();
    inpage::check::check(&r, &Default::default()).unwrap();
    assert_eq!(rows(&db), want);
    assert_eq!(db.fcc(), 10);
    assert!(rep.stale_frames > 0, "{rep:?}");
    assert_eq!(rep.frames_kept, 0, "{rep:?}");
}

/// A log newer than the database file (the file restored from an older copy) cannot be
/// replayed onto it nor ignored: the open fails with a corrupt-journal error and writes
/// nothing.
#[test]
fn a_wal_newer_than_the_database_is_refused() {
    let sim = SimVfs::new();
    let db = Database::open(DB, wal_config(&sim)).unwrap();
    commit_rows(&db, 0, 5);
    db.checkpoint().unwrap();
    let old_db = sim.read_file(Path::new(DB)).unwrap();
    commit_rows(&db, 5, 5);
    db.checkpoint().unwrap();
    commit_rows(&db, 10, 3); // in the log: tids 11..=13
    std::mem::forget(db);
    let crashed = sim.crash(2, CrashModel::none());
    let f = crashed.open(Path::new(DB), OpenOptions::default()).unwrap();
    f.set_len(0).unwrap();
    f.write_at(&old_db, 0).unwrap();
    f.sync_data().unwrap();
    drop(f);
    let before = files(&crashed);
    match Database::open(DB, wal_config(&crashed)) {
        Err(Error::CorruptJournal { reason, .. }) => {
            assert!(reason.contains("later state"), "{reason}")
        }
        other => panic!("expected CorruptJournal, got {:?}", other.map(|_| ())),
    }
    assert_eq!(files(&crashed), before);
}

/// The crash-reachable form of the same hole: with `journal_size_limit`, the reset after a
/// checkpoint cuts the log to the limit without rewriting its header, so a process that
/// dies before its next commit leaves a prefix of the checkpointed generation. Reopening
/// must not replay it.
#[test]
fn a_log_cut_by_journal_size_limit_is_not_replayed_after_a_crash() {
    let sim = SimVfs::new();
    let cfg = wal_config(&sim).journal_size_limit(Some(32 + 3 * (24 + 4096)));
    let db = Database::open(DB, cfg.clone()).unwrap();
    commit_rows(&db, 0, 6);
    db.checkpoint().unwrap();
    let want = rows(&db);
    std::mem::forget(db); // the process dies before its next commit
    let crashed = sim.crash(3, CrashModel::none());
    let vfs: Arc<dyn Vfs> = Arc::new(crashed.clone());
    let db = Database::open(DB, cfg.vfs(vfs)).unwrap();
    assert_eq!(rows(&db), want);
    assert_eq!(db.fcc(), 6);
    assert_eq!(db.recovery_report().frames_kept, 0);
}
