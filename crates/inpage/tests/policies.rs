//! Modes of one format differ only in policies, so each opens the others' files: for
//! every ordered pair of distinct modes that share a format (`JournalMode::same_format`),
//! a database written by the first — small and overflowing values, deletes, several
//! commits, then a clean close or a process crash — opens under the second, reads exactly
//! what was committed, takes more commits, passes the full check, and opens again under
//! the first with everything there. Modes of different formats still refuse each other's
//! files (`ModeMismatch`), and a file opened with no mode asked for opens in the mode that
//! created it.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::*;
use inpage::{Config, Database, Error, JournalMode, KeyKind};
use inpage_sim::SimVfs;

/// Three transactions of inserts, overflowing values and deletes in tree `t`.
fn write_some(db: &Database, model: &mut BTreeMap<i64, Vec<u8>>, round: u32) {
    for txn in 0..3u32 {
        let mut w = db.begin_write().unwrap();
        let t = w.open_or_create_tree("t", KeyKind::Int).unwrap();
        for k in 0..60i64 {
            let key = k * 7 + i64::from(round);
            let len = if k % 13 == 0 {
                9000
            } else {
                40 + (k as usize % 50)
            };
            let v = value_for(key, round * 10 + txn, len);
            w.insert(&t, key, &v).unwrap();
            model.insert(key, v);
        }
        for k in (0..60i64).step_by(5) {
            let key = k * 7 + i64::from(round.saturating_sub(1));
            if w.remove(&t, key).unwrap().is_some() {
                model.remove(&key);
            }
        }
        w.commit().unwrap();
    }
}

fn open(vfs: &SimVfs, mode: Option<JournalMode>) -> inpage::Result<Database> {
    let mut cfg = Config::default()
        .vfs(Arc::new(vfs.clone()))
        .page_size(4096)
        .cache_pages(32)
        .chunk_pages(8)
        .wal_autocheckpoint(40);
    if let Some(m) = mode {
        cfg = cfg.journal_mode(m);
    }
    Database::open(DB, cfg)
}

fn pairs() -> Vec<(JournalMode, JournalMode)> {
    let mut out = Vec::new();
    for a in JournalMode::all() {
        for b in JournalMode::all() {
            if a != b && a.same_format(b) {
                out.push((a, b));
            }
        }
    }
    out
}

#[test]
fn modes_of_one_format_open_each_others_files() {
    let pairs = pairs();
    assert!(pairs.len() >= 20, "only {} pairs", pairs.len());
    for (a, b) in pairs {
        for crash in [false, true] {
            let vfs = SimVfs::new();
            let mut model = BTreeMap::new();
            let db = open(&vfs, Some(a)).unwrap();
            write_some(&db, &mut model, 1);
            let vfs = if crash {
                let v = vfs.process_crash();
                drop(db);
                v
            } else {
                db.close().unwrap();
                vfs
            };
            let db = open(&vfs, Some(b)).unwrap_or_else(|e| panic!("{a} -> {b}: {e}"));
            assert_eq!(db.journal_mode(), b);
            assert_eq!(dump(&db), model, "{a} -> {b} (crash {crash}): read");
            write_some(&db, &mut model, 2);
            assert_eq!(dump(&db), model, "{a} -> {b} (crash {crash}): written");
            assert_checks(&db);
            db.close().unwrap();
            let db = open(&vfs, Some(a)).unwrap();
            assert_eq!(dump(&db), model, "{a} -> {b} -> {a} (crash {crash})");
            assert_checks(&db);
            db.close().unwrap();
            let db = open(&vfs, None).unwrap();
            assert_eq!(db.journal_mode(), a, "{a}: opened with no mode");
            db.close().unwrap();
        }
    }
}

#[test]
fn modes_of_different_formats_refuse_each_others_files() {
    for a in JournalMode::all() {
        let vfs = SimVfs::new();
        open(&vfs, Some(a)).unwrap().close().unwrap();
        for b in JournalMode::all().filter(|b| !b.same_format(a)) {
            match open(&vfs, Some(b)) {
                Err(Error::ModeMismatch { .. }) => {}
                Err(e) => panic!("{a} opened as {b}: {e}"),
                Ok(_) => panic!("{a}'s file opened as {b}"),
            }
        }
    }
}
