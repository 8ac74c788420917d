//! Property test: random transactions against a `BTreeMap` model, for every journal mode,
//! with 4 KiB and 512-byte pages and values up to several pages (overflow chains).
//! Covers commit, rollback, savepoints, reopen, checkpoint, point reads and range scans;
//! after each transaction the integrity check must pass.

mod common;

use std::collections::BTreeMap;
use std::ops::Bound;

use common::*;
use inpage::{Database, JournalMode, Key, KeyKind, ReadableTxn, WriteTxn};
use inpage_sim::SimVfs;
use proptest::prelude::*;
use proptest::test_runner::TestRunner;

#[derive(Clone, Debug)]
enum Op {
    Put(i64, usize, u32),
    Bulk(i64, i64, usize),
    Del(i64),
    Get(i64),
    Range(i64, i64, bool),
    PutBytes(Vec<u8>, usize),
    Savepoint,
    RollbackToSavepoint,
    Commit,
    Rollback,
    Reopen,
    Checkpoint,
}

fn op(max_val: usize) -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0i64..120, 0..max_val, any::<u32>()).prop_map(|(k, l, v)| Op::Put(k, l, v)),
        2 => (0i64..120, 0..24usize, any::<u32>()).prop_map(|(k, _, v)| Op::Put(k, (v % 64) as usize, v)),
        1 => (0i64..2000, 1i64..150, 0..300usize).prop_map(|(k, n, l)| Op::Bulk(k, n, l)),
        4 => (0i64..120).prop_map(Op::Del),
        2 => (0i64..120).prop_map(Op::Get),
        1 => (0i64..120, 0i64..120, any::<bool>()).prop_map(|(a, b, r)| Op::Range(a.min(b), a.max(b), r)),
        2 => (proptest::collection::vec(any::<u8>(), 0..40), 0..200usize).prop_map(|(k, l)| Op::PutBytes(k, l)),
        // Keys up to ~3x the inline limit of 4 KiB pages (1008 bytes; 112 at 512), from a
        // small set sharing a filler prefix, so long keys that differ only in their tails
        // (past their in-cell prefix) are stored, replaced and ordered.
        2 => (0..3100usize, 0..12u8, 0..200usize).prop_map(|(n, i, l)| {
            let mut k = vec![b'f'; n];
            k.push(i);
            Op::PutBytes(k, l)
        }),
        1 => Just(Op::Savepoint),
        1 => Just(Op::RollbackToSavepoint),
        4 => Just(Op::Commit),
        1 => Just(Op::Rollback),
        1 => Just(Op::Reopen),
        1 => Just(Op::Checkpoint),
    ]
}

type Model = (BTreeMap<i64, Vec<u8>>, BTreeMap<Vec<u8>, Vec<u8>>);

struct Run {
    vfs: SimVfs,
    mode: JournalMode,
    page_size: u32,
    redistribute: bool,
    db: Option<Database>,
    committed: Model,
}

impl Run {
    fn open(&mut self) {
        self.db = None;
        self.db = Some(
            Database::open(
                DB,
                sim_config(&self.vfs, self.mode, self.page_size).redistribute(self.redistribute),
            )
            .unwrap(),
        );
    }
    fn db(&self) -> &Database {
        self.db.as_ref().unwrap()
    }
}

fn verify_committed(run: &Run) {
    let db = run.db();
    let r = db.begin_read().unwrap();
    let t = r.open_tree("ints").unwrap();
    let got: BTreeMap<i64, Vec<u8>> = r
        .iter(&t)
        .unwrap()
        .map(|kv| {
            let (k, v) = kv.unwrap();
            (k.as_int().unwrap(), v)
        })
        .collect();
    assert_eq!(got.len(), run.committed.0.len());
    assert!(got == run.committed.0, "int tree differs from model");
    let b = r.open_tree("bytes").unwrap();
    let got: BTreeMap<Vec<u8>, Vec<u8>> = r
        .iter(&b)
        .unwrap()
        .map(|kv| {
            let (k, v) = kv.unwrap();
            (k.as_bytes().unwrap().to_vec(), v)
        })
        .collect();
    assert!(got == run.committed.1, "byte tree differs from model");
    assert_eq!(r.count(&t).unwrap(), run.committed.0.len() as u64);
    assert_checks(db);
}

fn run_ops(mode: JournalMode, page_size: u32, redistribute: bool, ops: Vec<Op>) {
    let mut run = Run {
        vfs: SimVfs::new(),
        mode,
        page_size,
        redistribute,
        db: None,
        committed: Default::default(),
    };
    run.open();
    {
        let mut w = run.db().begin_write().unwrap();
        w.create_tree("ints", KeyKind::Int).unwrap();
        w.create_tree("bytes", KeyKind::Bytes).unwrap();
        w.commit().unwrap();
    }
    let mut w: Option<WriteTxn> = None;
    let mut work = run.committed.clone();
    let mut saves: Vec<(inpage::Savepoint, _)> = Vec::new();
    for op in ops {
        if w.is_none() && !matches!(op, Op::Reopen | Op::Checkpoint) {
            w = Some(run.db().begin_write().unwrap());
            work = run.committed.clone();
            saves.clear();
        }
        match op {
            Op::Put(k, len, ver) => {
                let wt = w.as_mut().unwrap();
                let t = wt.open_tree("ints").unwrap();
                let v = value_for(k, ver, len);
                let old = wt.insert(&t, k, &v).unwrap();
                assert_eq!(old, work.0.insert(k, v));
            }
            Op::Bulk(start, n, len) => {
                let wt = w.as_mut().unwrap();
                let t = wt.open_tree("ints").unwrap();
                for k in start..start + n {
                    let v = value_for(k, len as u32, len);
                    assert_eq!(wt.insert(&t, k, &v).unwrap(), work.0.insert(k, v));
                }
            }
            Op::PutBytes(k, len) => {
                let wt = w.as_mut().unwrap();
                let t = wt.open_tree("bytes").unwrap();
                let v = value_for(k.len() as i64, len as u32, len);
                let old = wt.insert(&t, &k, &v).unwrap();
                assert_eq!(old, work.1.insert(k, v));
            }
            Op::Del(k) => {
                let wt = w.as_mut().unwrap();
                let t = wt.open_tree("ints").unwrap();
                assert_eq!(wt.remove(&t, k).unwrap(), work.0.remove(&k));
            }
            Op::Get(k) => {
                let wt = w.as_ref().unwrap();
                let t = wt.open_tree("ints").unwrap();
                assert_eq!(wt.get(&t, k).unwrap(), work.0.get(&k).cloned());
            }
            Op::Range(lo, hi, rev_check) => {
                let wt = w.as_ref().unwrap();
                let t = wt.open_tree("ints").unwrap();
                let got: Vec<i64> = wt
                    .range(
                        &t,
                        Bound::Included(Key::Int(lo)),
                        Bound::Excluded(Key::Int(hi)),
                    )
                    .unwrap()
                    .map(|kv| kv.unwrap().0.as_int().unwrap())
                    .collect();
                let want: Vec<i64> = work.0.range(lo..hi).map(|(k, _)| *k).collect();
                assert_eq!(got, want);
                if rev_check {
                    // Walk backwards from the upper end with a cursor.
                    let mut c = wt.cursor(&t).unwrap();
                    let mut ok = c.seek_le(hi).unwrap();
                    let mut back = Vec::new();
                    while ok {
                        back.push(c.key().unwrap().unwrap().as_int().unwrap());
                        ok = c.prev().unwrap();
                    }
                    let want: Vec<i64> = work.0.range(..=hi).rev().map(|(k, _)| *k).collect();
                    assert_eq!(back, want);
                }
            }
            Op::Savepoint => {
                let sp = w.as_mut().unwrap().savepoint();
                saves.push((sp, work.clone()));
            }
            Op::RollbackToSavepoint => {
                if let Some((sp, snap)) = saves.last() {
                    w.as_mut().unwrap().rollback_to(sp).unwrap();
                    work = snap.clone();
                }
            }
            Op::Commit => {
                w.take().unwrap().commit().unwrap();
                run.committed = work.clone();
                verify_committed(&run);
            }
            Op::Rollback => {
                w.take().unwrap().rollback().unwrap();
                verify_committed(&run);
            }
            Op::Reopen => {
                drop(w.take());
                run.open();
                verify_committed(&run);
            }
            Op::Checkpoint => {
                drop(w.take());
                run.db().checkpoint().unwrap();
                verify_committed(&run);
            }
        }
    }
    if let Some(wt) = w.take() {
        wt.commit().unwrap();
        run.committed = work;
    }
    verify_committed(&run);
    run.open();
    verify_committed(&run);
    if std::env::var("INPAGE_MODEL_DEBUG").is_ok() {
        eprintln!(
            "{mode} {page_size}: {} int keys, {} byte keys, fcc {}, pages {}",
            run.committed.0.len(),
            run.committed.1.len(),
            run.db().fcc(),
            run.db().header().page_count
        );
    }
}

fn cases() -> u32 {
    std::env::var("INPAGE_PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(24)
}

/// The matrix: every registered mode at both page sizes (so a mode added to the registry
/// is model-checked without touching this file), plus runs without sibling
/// redistribution (the LS-MVBT paper's setting) for a rollback, a log and a DHL mode.
fn matrix() -> Vec<(JournalMode, u32, bool)> {
    let mut v: Vec<(JournalMode, u32, bool)> = JournalMode::all()
        .flat_map(|m| [(m, 4096, true), (m, 512, true)])
        .collect();
    v.extend([
        (JournalMode::DELETE, 512, false),
        (JournalMode::WAL, 4096, false),
        (JournalMode::DHL_CC_HEADER, 512, false),
    ]);
    v
}

fn run_matrix(page_size: u32) {
    let mut ran = 0;
    for (mode, ps, redist) in matrix().into_iter().filter(|c| c.1 == page_size) {
        let mut runner = TestRunner::new(ProptestConfig {
            cases: cases(),
            failure_persistence: None,
            ..ProptestConfig::default()
        });
        let ops = proptest::collection::vec(op(3 * ps as usize), 1..300);
        if let Err(e) = runner.run(&ops, |ops| {
            run_ops(mode, ps, redist, ops);
            Ok(())
        }) {
            panic!("{mode}, {ps}-byte pages, redistribute {redist}: {e}");
        }
        ran += 1;
    }
    assert!(ran >= JournalMode::ALL.len());
}

#[test]
fn every_mode_matches_the_model_4k() {
    run_matrix(4096);
}

#[test]
fn every_mode_matches_the_model_512() {
    run_matrix(512);
}

/// A mode in the registry but not in the matrix would land without model checking.
#[test]
fn the_matrix_covers_the_registry() {
    for mode in JournalMode::all() {
        for ps in [4096, 512] {
            assert!(
                matrix().iter().any(|&(m, p, _)| m == mode && p == ps),
                "{mode} at {ps}-byte pages is not model-checked"
            );
        }
    }
}
