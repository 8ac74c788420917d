//! Power cuts in the middle of concurrent commits (`Concurrency::Occ` and `TwoVto`):
//! several write transactions interleave on the simulated disk until a power cut after a
//! random number of file operations; after the crash (unsynced writes lost, reordered or
//! torn at sectors) recovery must keep exactly a prefix of the commit order — every
//! acknowledged commit, plus at most the one whose commit was cut — and the integrity
//! check must pass.
//!
//! Invariant: the expected states come from a model replayed in commit order, never from
//! the engine.

mod common;

use std::collections::BTreeMap;

use common::concurrency::*;
use common::*;
use inpage::{Concurrency, Database, Error, JournalMode, KeyKind, ReadableTxn, WriteTxn};
use inpage_sim::{CrashModel, SimVfs};

const PROTOCOLS: [Concurrency; 2] = [Concurrency::Occ, Concurrency::TwoVto { forced_sleep: true }];

/// Every registry mode that accepts concurrent writers.
fn modes() -> Vec<JournalMode> {
    modes_accepting(Concurrency::Occ)
}

type Model = BTreeMap<i64, Vec<u8>>;

struct Live {
    txn: WriteTxn,
    id: usize,
    ops: usize,
    writes: Vec<(i64, Option<Vec<u8>>)>,
}

/// What a schedule left: the committed states in commit order (the first is the loaded
/// table) and the state the cut commit would have made, if a commit was cut.
struct Outcome {
    states: Vec<Model>,
    in_flight: Option<Model>,
}

fn apply_to(model: &Model, writes: &[(i64, Option<Vec<u8>>)]) -> Model {
    let mut m = model.clone();
    for (k, v) in writes {
        match v {
            Some(v) => m.insert(*k, v.clone()),
            None => m.remove(k),
        };
    }
    m
}

/// Run a seeded schedule of concurrent transactions on `db` until it ends or the disk's
/// power cut makes a call fail.
fn schedule(db: &Database, seed: u64, keys: i64) -> Outcome {
    let mut rng = XorShift(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut states = vec![dump(db)];
    let mut live: Vec<Live> = Vec::new();
    let mut started = 0;
    let txns = 24;
    let cut = |e: &Error| !matches!(e, Error::Conflict { .. });
    while started < txns || !live.is_empty() {
        if live.len() < 4 && started < txns && (live.is_empty() || rng.below(3) == 0) {
            match db.begin_write() {
                Ok(txn) => live.push(Live {
                    txn,
                    id: started,
                    ops: 1 + started % 5,
                    writes: Vec::new(),
                }),
                Err(e) if cut(&e) => break,
                Err(e) => panic!("begin: {e}"),
            }
            started += 1;
            continue;
        }
        let i = rng.below(live.len() as u64) as usize;
        let l = &mut live[i];
        if l.ops > 0 {
            l.ops -= 1;
            let k = rng.below(keys as u64) as i64;
            // Removing an absent key changes nothing: not a write (a transaction made
            // only of such reads commits at its snapshot, not in commit order).
            let r = l.txn.open_tree("t").and_then(|t| {
                if rng.below(4) == 0 {
                    l.txn.remove(&t, k).map(|old| old.map(|_| None))
                } else {
                    let v = value_for(k, l.id as u32, 20 + (k as usize % 50));
                    l.txn.insert(&t, k, &v).map(|_| Some(Some(v)))
                }
            });
            match r {
                Ok(Some(v)) => l.writes.push((k, v)),
                Ok(None) => {}
                Err(e) if cut(&e) => break,
                Err(_) => {
                    live.swap_remove(i);
                }
            }
            continue;
        }
        if !l.txn.may_commit() {
            continue;
        }
        let l = live.swap_remove(i);
        let after = apply_to(states.last().expect("loaded state"), &l.writes);
        match l.txn.commit() {
            Ok(()) => {
                if after != *states.last().expect("loaded state") {
                    states.push(after);
                }
            }
            Err(Error::Conflict { .. }) => {}
            Err(_) => {
                return Outcome {
                    states,
                    in_flight: Some(after),
                }
            }
        }
    }
    Outcome {
        states,
        in_flight: None,
    }
}

fn open(vfs: &SimVfs, mode: JournalMode, c: Concurrency) -> Database {
    open_with(vfs, mode, c)
}

/// One cut: load, count the schedule's file operations on a copy, then rerun it with a
/// power cut after a seeded share of them, crash, recover and check. Whether the cut
/// fell inside a commit.
fn one_cut(mode: JournalMode, c: Concurrency, seed: u64) -> bool {
    let keys = if seed % 2 == 0 { 30 } else { 300 };
    let vfs = SimVfs::new();
    {
        let db = open(&vfs, mode, c);
        let mut w = db.begin_write().unwrap();
        let t = w.create_tree("t", KeyKind::Int).unwrap();
        for k in 0..keys {
            w.insert(&t, k, &value_for(k, 0, 30)).unwrap();
        }
        w.commit().unwrap();
    }
    // The number of file operations the schedule makes, on an identical copy.
    let probe = vfs.crash(0, CrashModel::none());
    let span = {
        let db = open(&probe, mode, c);
        let start = probe.op_count();
        let out = schedule(&db, seed, keys);
        assert!(out.in_flight.is_none());
        probe.op_count() - start
    };
    let disk = vfs.crash(0, CrashModel::none());
    let db = open(&disk, mode, c);
    let mut rng = XorShift(seed | 1);
    disk.set_power_cut_after(1 + rng.below(span.max(1)));
    let out = schedule(&db, seed, keys);
    drop(db);
    let crashed = disk.crash(seed, CrashModel::full());
    let db = open(&crashed, mode, c);
    let got = dump(&db);
    let acked = out.states.last().expect("loaded state");
    let ok = got == *acked || out.in_flight.as_ref() == Some(&got);
    assert!(
        ok,
        "{mode} {c:?} seed {seed}: recovered {} rows, neither the {} acknowledged commits' state ({} rows) nor that plus the cut commit",
        got.len(),
        out.states.len() - 1,
        acked.len()
    );
    assert_checks(&db);
    out.in_flight.is_some()
}

#[test]
fn power_cuts_during_concurrent_commits_keep_a_prefix_of_the_commit_order() {
    let n = env_count("INPAGE_CONCURRENT_CUTS", 20);
    let (mut cuts, mut in_commit) = (0, 0);
    for mode in modes() {
        for c in PROTOCOLS {
            for seed in 0..n {
                cuts += 1;
                in_commit += usize::from(one_cut(mode, c, seed));
            }
        }
    }
    // The cuts must reach the case that matters: a commit cut while others are live.
    assert!(
        in_commit * 4 >= cuts,
        "only {in_commit} of {cuts} cuts fell in a commit"
    );
    eprintln!("{cuts} cuts, {in_commit} inside a commit");
}
