//! `Concurrency::Occ` (several write transactions at once, validated at commit): which
//! modes accept it, lost updates and stale reads refused, snapshot reads, seeded
//! interleavings of many transactions checked against a serial replay in commit order,
//! page accounting across growth, frees and rollbacks, and real threads.
//!
//! Invariant: expectations come from a model (a map replayed serially in commit order),
//! never from the engine.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Barrier};

use common::concurrency::*;
use common::*;
use inpage::{Concurrency, Database, Error, JournalMode, ReadableTxn, WriteTxn};
use inpage_sim::SimVfs;

/// The modes that accept `Occ` (every registry mode tried; the rest must refuse it).
fn occ_modes() -> Vec<JournalMode> {
    modes_accepting(Concurrency::Occ)
}

#[test]
fn occ_is_accepted_exactly_where_versions_can_be_retagged() {
    let names: BTreeSet<String> = occ_modes().iter().map(|m| m.to_string()).collect();
    for m in ["dhl-cc", "dhl-tc", "dhl-cc-header", "ips", "ips-header"] {
        assert!(names.contains(m), "{m} refuses Occ: {names:?}");
    }
    for m in ["off", "wal", "delete", "mvbt", "ls-mvbt"] {
        assert!(!names.contains(m), "{m} accepts Occ");
    }
}

fn open(vfs: &SimVfs, mode: JournalMode) -> Database {
    open_with(vfs, mode, Concurrency::Occ)
}

fn put(w: &mut WriteTxn, k: i64, v: &[u8]) {
    put_in(w, k, v).unwrap();
}

#[test]
fn writers_on_different_pages_both_commit() {
    for mode in occ_modes() {
        let vfs = SimVfs::new();
        let db = open(&vfs, mode);
        seed_numbered(&db, 2000);
        let f0 = db.fcc();
        let mut a = db.begin_write().unwrap();
        let mut b = db.begin_write().unwrap();
        put(&mut a, 3, b"a");
        put(&mut b, 1990, b"b");
        a.commit().unwrap();
        b.commit().unwrap();
        assert_eq!(db.fcc(), f0 + 2, "{mode}");
        assert_eq!(db.conflicts(), 0, "{mode}");
        assert_eq!(db.get("t", 3).unwrap().as_deref(), Some(&b"a"[..]));
        assert_eq!(db.get("t", 1990).unwrap().as_deref(), Some(&b"b"[..]));
        assert_checks(&db);
        // The second commit's versions were re-tagged: a reopen (recovery counts the
        // pages of the newest tid) keeps both.
        drop(db);
        let db = open(&vfs, mode);
        assert_eq!(
            db.get("t", 1990).unwrap().as_deref(),
            Some(&b"b"[..]),
            "{mode}"
        );
        assert_checks(&db);
    }
}

#[test]
fn a_lost_update_is_refused_and_the_replay_counts_both() {
    for mode in occ_modes() {
        let vfs = SimVfs::new();
        let db = open(&vfs, mode);
        seed_numbered(&db, 100);
        // Two read-modify-writes of key 7 from the same snapshot.
        let mut a = db.begin_write().unwrap();
        let mut b = db.begin_write().unwrap();
        let va = number(get_in(&a, 7));
        let vb = number(get_in(&b, 7));
        put(&mut a, 7, (va + 1).to_string().as_bytes());
        put(&mut b, 7, (vb + 1).to_string().as_bytes());
        a.commit().unwrap();
        let fcc = db.fcc();
        match b.commit() {
            Err(Error::Conflict { by, snapshot, .. }) => {
                assert_eq!((by, snapshot), (fcc, fcc - 1), "{mode}");
            }
            other => panic!("{mode}: lost update committed: {other:?}"),
        }
        assert_eq!(db.conflicts(), 1);
        assert_eq!(number(db.get("t", 7).unwrap()), 8);
        // The runner replays the closure on the new snapshot.
        let mut c = db.begin_write().unwrap();
        let vc = number(get_in(&c, 7));
        let runs = std::cell::Cell::new(0);
        db.write(|w| {
            runs.set(runs.get() + 1);
            let v = number(get_in(w, 7));
            put(w, 7, (v + 1).to_string().as_bytes());
            Ok(())
        })
        .unwrap();
        assert_eq!(runs.get(), 1);
        put(&mut c, 7, (vc + 1).to_string().as_bytes());
        assert!(matches!(c.commit(), Err(Error::Conflict { .. })));
        assert_eq!(number(db.get("t", 7).unwrap()), 9, "{mode}");
        assert_checks(&db);
    }
}

#[test]
fn a_transaction_reads_its_snapshot_and_cannot_commit_on_a_stale_read() {
    for mode in occ_modes() {
        let vfs = SimVfs::new();
        let db = open(&vfs, mode);
        seed_numbered(&db, 2000);
        let mut a = db.begin_write().unwrap();
        assert_eq!(number(get_in(&a, 10)), 10);
        db.insert("t", 10, b"changed").unwrap();
        // Still the snapshot's value, then its own write on top.
        assert_eq!(number(get_in(&a, 10)), 10, "{mode}");
        put(&mut a, 1999, b"from a");
        assert_eq!(get_in(&a, 1999).as_deref(), Some(&b"from a"[..]));
        // It read key 10's leaf, which a later commit changed: write skew is refused.
        assert!(matches!(a.commit(), Err(Error::Conflict { .. })), "{mode}");
        assert_eq!(db.get("t", 1999).unwrap().as_deref(), Some(&b"1999"[..]));
        // A transaction that only read commits whatever happened since.
        let r = db.begin_write().unwrap();
        assert_eq!(get_in(&r, 10).as_deref(), Some(&b"changed"[..]));
        db.insert("t", 10, b"again").unwrap();
        r.commit().unwrap();
    }
}

/// One transaction of a schedule: what it read and wrote, in order.
struct Live {
    txn: WriteTxn,
    id: usize,
    /// (key, value read) and (key, value written) in program order.
    log: Vec<(i64, Option<Vec<u8>>, bool)>,
    /// The model as of its snapshot, with its own writes applied as it makes them.
    view: BTreeMap<i64, Vec<u8>>,
}

/// Run one seeded schedule: up to `width` transactions live at once, each doing 1..=6
/// gets/puts/deletes on keys below `keys` before it commits or rolls back; steps of
/// the live transactions interleave at random. Every read must return the snapshot's
/// value plus the transaction's own writes (committed or not); every committed writer is
/// checked against a serial replay in commit order (its reads saw exactly the state the
/// commits before it left, plus its own writes); the final state must equal the replay.
/// (A transaction that wrote nothing serializes at its snapshot, and is not validated.)
fn schedule(mode: JournalMode, seed_n: u64, width: usize, txns: usize, keys: i64) {
    let vfs = SimVfs::new();
    let db = open(&vfs, mode);
    seed_numbered(&db, keys);
    let mut rng = XorShift(seed_n.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut model: BTreeMap<i64, Vec<u8>> =
        (0..keys).map(|k| (k, k.to_string().into_bytes())).collect();
    let mut live: Vec<Live> = Vec::new();
    let mut started = 0;
    let mut committed = 0;
    while started < txns || !live.is_empty() {
        if live.len() < width && started < txns && (live.is_empty() || rng.below(3) == 0) {
            live.push(Live {
                txn: db.begin_write().unwrap(),
                id: started,
                log: Vec::new(),
                view: model.clone(),
            });
            started += 1;
            continue;
        }
        let i = rng.below(live.len() as u64) as usize;
        let l = &mut live[i];
        if l.log.len() < 1 + (l.id % 6) {
            let k = rng.below(keys as u64 + keys as u64 / 4) as i64;
            let t = l.txn.open_tree("t").unwrap();
            match rng.below(3) {
                0 => {
                    let v = l.txn.get(&t, k).unwrap();
                    assert_eq!(
                        v.as_ref(),
                        l.view.get(&k),
                        "{mode} seed {seed_n}: txn {} read key {k} not as its snapshot has it",
                        l.id
                    );
                    l.log.push((k, v, false));
                }
                1 => {
                    let v = format!("{k}/{}/{}", l.id, l.log.len()).into_bytes();
                    l.txn.insert(&t, k, &v).unwrap();
                    l.view.insert(k, v.clone());
                    l.log.push((k, Some(v), true));
                }
                _ => {
                    // Removing an absent key changes nothing: it is a read of absence.
                    let was = l.txn.remove(&t, k).unwrap();
                    assert_eq!(was.as_ref(), l.view.get(&k), "{mode} seed {seed_n}: remove");
                    let changed = l.view.remove(&k).is_some();
                    l.log.push((k, if changed { None } else { was }, changed));
                }
            }
            continue;
        }
        let l = live.swap_remove(i);
        if rng.below(8) == 0 {
            l.txn.rollback().unwrap();
            continue;
        }
        let wrote = l.log.iter().any(|(_, _, w)| *w);
        match l.txn.commit() {
            Ok(()) if !wrote => {}
            Ok(()) => {
                // Serializable in commit order: replay it on the model now.
                let mut mine = model.clone();
                for (k, v, wrote) in &l.log {
                    if *wrote {
                        match v {
                            Some(v) => mine.insert(*k, v.clone()),
                            None => mine.remove(k),
                        };
                    } else {
                        assert_eq!(
                            mine.get(k),
                            v.as_ref(),
                            "{mode} seed {seed_n}: txn {} read key {k} not as the serial order has it",
                            l.id
                        );
                    }
                }
                model = mine;
                committed += 1;
            }
            Err(Error::Conflict { .. }) => {}
            Err(e) => panic!("{mode} seed {seed_n}: commit failed: {e}"),
        }
    }
    assert!(committed > 0);
    assert_eq!(dump(&db), model, "{mode} seed {seed_n}: final state");
    assert_checks(&db);
    drop(db);
    let db = open(&vfs, mode);
    assert_eq!(dump(&db), model, "{mode} seed {seed_n}: after reopen");
    assert_checks(&db);
}

#[test]
fn seeded_interleavings_are_serializable_in_commit_order() {
    let n = env_count("INPAGE_OCC_SCHEDULES", 40);
    for mode in occ_modes() {
        for s in 0..n {
            // Few keys: many conflicts; more keys over small pages: splits, merges and
            // growth by several writers at once.
            let keys = if s % 2 == 0 { 40 } else { 600 };
            schedule(mode, s, 2 + (s % 4) as usize, 30, keys);
        }
    }
}

#[test]
fn growth_and_frees_by_concurrent_writers_leave_every_page_accounted_for() {
    for mode in occ_modes() {
        let vfs = SimVfs::new();
        let db = open(&vfs, mode);
        seed_numbered(&db, 10);
        // Three writers each insert a disjoint key range big enough to grow the file;
        // one rolls back (its pages are abandoned), one conflicts (it shares a leaf).
        let mut a = db.begin_write().unwrap();
        let mut b = db.begin_write().unwrap();
        let mut c = db.begin_write().unwrap();
        for k in 0..300 {
            put(&mut a, 10_000 + k, &[1; 40]);
            put(&mut b, 20_000 + k, &[2; 40]);
            put(&mut c, 30_000 + k, &[3; 40]);
        }
        c.rollback().unwrap();
        a.commit().unwrap();
        // b's inserts went through the same leaf a split: a conflict.
        assert!(matches!(b.commit(), Err(Error::Conflict { .. })), "{mode}");
        assert_checks(&db);
        let pages = db.header().page_count;
        // The abandoned pages are reused: writing the same again does not grow further
        // than one writer alone would.
        db.write(|w| {
            for k in 0..300 {
                put(w, 20_000 + k, &[2; 40]);
            }
            Ok(())
        })
        .unwrap();
        assert!(db.header().page_count <= pages + pages / 2, "{mode}");
        assert_checks(&db);
        drop(db);
        let db = open(&vfs, mode);
        assert_eq!(dump(&db).len(), 610, "{mode}");
        assert_checks(&db);
    }
}

#[test]
fn threads_incrementing_counters_lose_nothing() {
    for mode in occ_modes() {
        let vfs = SimVfs::new();
        let db = open(&vfs, mode);
        seed_numbered(&db, 8);
        let threads = 4;
        let per = 25;
        let barrier = Arc::new(Barrier::new(threads));
        std::thread::scope(|s| {
            for t in 0..threads {
                let (db, barrier) = (db.clone(), barrier.clone());
                s.spawn(move || {
                    barrier.wait();
                    for i in 0..per {
                        let k = ((t + i) % 8) as i64;
                        db.write(|w| {
                            let v = number(get_in(w, k));
                            put(w, k, (v + 1).to_string().as_bytes());
                            Ok(())
                        })
                        .unwrap();
                    }
                });
            }
        });
        let total: i64 = (0..8).map(|k| number(db.get("t", k).unwrap()) - k).sum();
        assert_eq!(total, (threads * per) as i64, "{mode}");
        assert_checks(&db);
    }
}
