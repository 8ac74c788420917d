//! `Concurrency::TwoVto` (two-version timestamp ordering with AFUW): first updater wins
//! at the write, the oldest transaction wounds, commits in timestamp order, stale pages
//! refused, seeded interleavings checked for snapshot isolation, and threads showing at
//! most one replay per transaction with the forced sleep.
//!
//! Invariant: expectations come from a model (a map replayed in commit order), never
//! from the engine.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Barrier};

use common::concurrency::*;
use common::*;
use inpage::{Concurrency, Database, Error, JournalMode, ReadableTxn, WriteTxn};
use inpage_sim::SimVfs;

const VTO: Concurrency = Concurrency::TwoVto { forced_sleep: true };

/// The modes that accept `TwoVto` (each registry mode tried; the rest must refuse).
fn vto_modes() -> Vec<JournalMode> {
    let ok = modes_accepting(VTO);
    let names: BTreeSet<String> = ok.iter().map(|m| m.to_string()).collect();
    assert!(names.contains("ips") && names.contains("dhl-cc") && !names.contains("wal"));
    ok
}

fn open(vfs: &SimVfs, mode: JournalMode, c: Concurrency) -> Database {
    open_with(vfs, mode, c)
}

#[test]
fn the_first_updater_wins_and_the_oldest_takes_locks() {
    for mode in vto_modes() {
        let vfs = SimVfs::new();
        let db = open(&vfs, mode, VTO);
        seed_numbered(&db, 10); // one leaf
                                // Younger loses at its write.
        let mut a = db.begin_write().unwrap();
        let mut b = db.begin_write().unwrap();
        put_in(&mut a, 3, b"a").unwrap();
        assert!(
            matches!(put_in(&mut b, 4, b"b"), Err(Error::Conflict { .. })),
            "{mode}"
        );
        drop(b);
        a.commit().unwrap();
        // The oldest takes the lock from a younger holder, which then cannot commit.
        let mut a = db.begin_write().unwrap();
        let mut b = db.begin_write().unwrap();
        put_in(&mut b, 4, b"b").unwrap();
        put_in(&mut a, 5, b"a").unwrap();
        a.commit().unwrap();
        assert!(matches!(b.commit(), Err(Error::Conflict { .. })), "{mode}");
        assert_eq!(db.get("t", 4).unwrap().as_deref(), Some(&b"4"[..]));
        assert_eq!(db.get("t", 5).unwrap().as_deref(), Some(&b"a"[..]));
        assert!(db.conflicts() >= 2);
        assert_checks(&db);
    }
}

#[test]
fn commits_happen_in_start_order_and_stale_pages_are_refused() {
    for mode in vto_modes() {
        let vfs = SimVfs::new();
        let db = open(&vfs, mode, VTO);
        seed_numbered(&db, 2000);
        let mut a = db.begin_write().unwrap();
        let mut b = db.begin_write().unwrap();
        put_in(&mut a, 3, b"a").unwrap();
        put_in(&mut b, 1990, b"b").unwrap();
        assert!(a.may_commit() && !b.may_commit(), "{mode}");
        // b's commit waits for a.
        let f0 = db.fcc();
        std::thread::scope(|s| {
            let h = s.spawn(move || b.commit());
            std::thread::sleep(std::time::Duration::from_millis(20));
            assert_eq!(db.fcc(), f0, "{mode}: the younger committed first");
            a.commit().unwrap();
            h.join().unwrap().unwrap();
        });
        // Two commits, or one group commit carrying both (b may queue behind a).
        assert!((f0 + 1..=f0 + 2).contains(&db.fcc()), "{mode}");
        assert_eq!(db.get("t", 3).unwrap().as_deref(), Some(&b"a"[..]));
        assert_eq!(db.get("t", 1990).unwrap().as_deref(), Some(&b"b"[..]));
        // c began before d's commit changed key 7's leaf; c's write there is stale.
        let d = {
            let mut d = db.begin_write().unwrap();
            put_in(&mut d, 7, b"d").unwrap();
            d
        };
        let mut c = db.begin_write().unwrap();
        d.commit().unwrap();
        assert!(
            matches!(put_in(&mut c, 8, b"c"), Err(Error::Conflict { .. })),
            "{mode}"
        );
        drop(c);
        // Snapshot isolation, as documented: reads are not validated, so two
        // transactions that read each other's keys and write disjoint pages both commit.
        let mut x = db.begin_write().unwrap();
        let mut y = db.begin_write().unwrap();
        let (vx, vy) = (number(get_in(&x, 1500)), number(get_in(&y, 100)));
        put_in(&mut x, 100, (vx + 1).to_string().as_bytes()).unwrap();
        put_in(&mut y, 1500, (vy + 1).to_string().as_bytes()).unwrap();
        x.commit().unwrap();
        y.commit().unwrap();
        // Each wrote what it computed from the other's old value (write skew).
        assert_eq!(number(db.get("t", 100).unwrap()), 1501, "{mode}");
        assert_eq!(number(db.get("t", 1500).unwrap()), 101, "{mode}");
        assert_checks(&db);
    }
}

struct Live {
    txn: WriteTxn,
    id: usize,
    ops: usize,
    /// Snapshot view plus own writes.
    view: BTreeMap<i64, Vec<u8>>,
    wrote: BTreeMap<i64, Option<Vec<u8>>>,
    /// Commits before it began.
    began_after: usize,
}

/// One seeded schedule. Checks: every read is the snapshot's value plus own writes;
/// commits come in start order; two committed transactions that overlapped in time wrote
/// disjoint keys (no lost update); the final state is the replay of the committed
/// writes in commit order.
fn schedule(mode: JournalMode, seed_n: u64, width: usize, txns: usize, keys: i64) {
    let vfs = SimVfs::new();
    let db = open(&vfs, mode, VTO);
    seed_numbered(&db, keys);
    let mut rng = XorShift(seed_n.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut model: BTreeMap<i64, Vec<u8>> =
        (0..keys).map(|k| (k, k.to_string().into_bytes())).collect();
    // Committed: (start id, commit index, keys written).
    let mut done: Vec<(usize, usize, usize, BTreeSet<i64>)> = Vec::new();
    let mut live: Vec<Live> = Vec::new();
    let (mut started, mut last_id) = (0, None::<usize>);
    while started < txns || !live.is_empty() {
        if live.len() < width && started < txns && (live.is_empty() || rng.below(3) == 0) {
            live.push(Live {
                txn: db.begin_write().unwrap(),
                id: started,
                ops: 1 + (started % 5),
                view: model.clone(),
                wrote: BTreeMap::new(),
                began_after: done.len(),
            });
            started += 1;
            continue;
        }
        let i = rng.below(live.len() as u64) as usize;
        let l = &mut live[i];
        if l.ops > 0 {
            l.ops -= 1;
            let k = rng.below(keys as u64) as i64;
            let t = l.txn.open_tree("t").unwrap();
            let r = if rng.below(2) == 0 {
                let v = l.txn.get(&t, k).unwrap();
                assert_eq!(v.as_ref(), l.view.get(&k), "{mode} seed {seed_n}: read");
                Ok(())
            } else {
                let v = format!("{k}/{}", l.id).into_bytes();
                l.txn.insert(&t, k, &v).map(|_| {
                    l.view.insert(k, v.clone());
                    l.wrote.insert(k, Some(v));
                })
            };
            match r {
                Ok(()) => {}
                Err(Error::Conflict { .. }) => {
                    live.swap_remove(i);
                }
                Err(e) => panic!("{mode} seed {seed_n}: {e}"),
            }
            continue;
        }
        if !l.txn.may_commit() {
            continue; // an older one must end first; another step is picked
        }
        let l = live.swap_remove(i);
        match l.txn.commit() {
            Ok(()) => {
                if let Some(p) = last_id {
                    assert!(p < l.id, "{mode} seed {seed_n}: commit out of start order");
                }
                last_id = Some(l.id);
                for (k, v) in &l.wrote {
                    if let Some(v) = v {
                        model.insert(*k, v.clone());
                    }
                }
                let keys: BTreeSet<i64> = l.wrote.keys().copied().collect();
                let n = done.len();
                for (id, at, _, other) in &done {
                    // Overlapping: the other committed after this one began.
                    if *at >= l.began_after {
                        assert!(
                            other.is_disjoint(&keys),
                            "{mode} seed {seed_n}: txns {id} and {} both wrote {:?}",
                            l.id,
                            other.intersection(&keys).collect::<Vec<_>>()
                        );
                    }
                }
                done.push((l.id, n, 0, keys));
            }
            Err(Error::Conflict { .. }) => {}
            Err(e) => panic!("{mode} seed {seed_n}: commit: {e}"),
        }
    }
    assert_eq!(dump(&db), model, "{mode} seed {seed_n}: final state");
    assert_checks(&db);
    drop(db);
    let db = open(&vfs, mode, VTO);
    assert_eq!(dump(&db), model, "{mode} seed {seed_n}: after reopen");
}

#[test]
fn seeded_interleavings_keep_snapshot_isolation() {
    let n = env_count("INPAGE_VTO_SCHEDULES", 100);
    for mode in vto_modes() {
        for s in 0..n {
            let keys = if s % 2 == 0 { 40 } else { 600 };
            schedule(mode, s, 2 + (s % 4) as usize, 30, keys);
        }
    }
}

/// Four threads incrementing hot counters through `write_counted`; the total must be
/// exact, and with the forced sleep no call replays more than once.
fn hot_counters(mode: JournalMode, c: Concurrency) -> u32 {
    let vfs = SimVfs::new();
    let db = open(&vfs, mode, c);
    seed_numbered(&db, 4);
    let (threads, per) = (4, 30);
    let barrier = Arc::new(Barrier::new(threads));
    let max = std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|t| {
                let (db, barrier) = (db.clone(), barrier.clone());
                s.spawn(move || {
                    barrier.wait();
                    let mut max = 0;
                    for i in 0..per {
                        let k = ((t * 7 + i) % 4) as i64;
                        let ((), replays) = db
                            .write_counted(|w| {
                                let v = number(get_in(w, k));
                                put_in(w, k, (v + 1).to_string().as_bytes())
                            })
                            .unwrap_or_else(|e| panic!("{mode} {c:?}: {e}"));
                        max = max.max(replays);
                    }
                    max
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).max().unwrap()
    });
    let total: i64 = (0..4).map(|k| number(db.get("t", k).unwrap()) - k).sum();
    assert_eq!(total, (threads * per) as i64, "{mode} {c:?}");
    assert_checks(&db);
    max
}

#[test]
fn afuw_replays_a_transaction_at_most_once() {
    for mode in vto_modes() {
        assert!(
            hot_counters(mode, VTO) <= 1,
            "{mode}: a transaction replayed twice"
        );
        // The ablation keeps the counts right too (its replays are not bounded).
        hot_counters(
            mode,
            Concurrency::TwoVto {
                forced_sleep: false,
            },
        );
    }
}
