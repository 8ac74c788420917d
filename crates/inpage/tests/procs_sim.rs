//! Two handles on the simulated disk standing for two processes (`SimVfs::take_turns`):
//! they take turns through byte-range locks and the side region as processes do
//! (`procs`), so the torture's disk covers what the real-process kill tests cannot, a
//! power cut. In every mode that shares a file between processes:
//! - every commit of either handle is what the other's next transaction sees;
//! - a power cut at every I/O operation of a commit, by the handle that did not write
//!   last (it must look again first) and by the one that did, with the unsynced writes
//!   lost, reordered and torn, leaves on reopen the state before or after that commit,
//!   a passing check, and two handles that go on taking turns;
//! - in a mode whose commits append beside readers (`redo`), a reader of one handle held
//!   across the other's commits keeps its snapshot, also when a power cut hits them;
//! - the planted bugs (a writer that does not tell the others, `Mutant::SkipWriteAnnounce`;
//!   a handle that does not read the others' appends, `Mutant::SkipCatchUp`) are found
//!   (`mutants` builds).
//!
//! A mode with a redo ring runs twice: with a small ring (flushes and wrap-around within
//! the scenario: each flush sends the other handle to open the file again) and with a
//! large one (commits only append: the other handle follows them, `journal::Appends`).

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::*;
use inpage::{Config, Database, JournalMode, JournalOption, NvlogFlush};
use inpage_sim::{CrashModel, SimVfs};

/// Every atomic mode that shares its file between processes (the registry's, so a new
/// mode is picked up).
fn sharing_modes() -> Vec<JournalMode> {
    JournalMode::all()
        .filter(|m| m.capabilities().atomic && m.shares_between_processes())
        .collect()
}

/// A mode and the size of its redo ring (0: it has none).
#[derive(Clone, Copy, Debug)]
struct Setup {
    mode: JournalMode,
    ring: u32,
}

impl std::fmt::Display for Setup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.ring {
            0 => write!(f, "{}", self.mode),
            r => write!(f, "{} ({} KiB ring)", self.mode, r >> 10),
        }
    }
}

/// Every sharing mode; one with a redo ring twice (module notes).
fn setups() -> Vec<Setup> {
    sharing_modes()
        .into_iter()
        .flat_map(|mode| {
            let rings: &[u32] = match mode.options().contains(&JournalOption::NvlogFlush) {
                true => &[16 << 10, 1 << 20],
                false => &[0],
            };
            rings.iter().map(move |&ring| Setup { mode, ring })
        })
        .collect()
}

/// A disk whose handles take turns, and a config on it: a short busy timeout (a handle
/// that is never let in fails the test in milliseconds, not seconds), flushes by the
/// committing thread (deterministic I/O, so the ops of a commit can be counted and cut).
fn disk() -> SimVfs {
    let vfs = SimVfs::new();
    vfs.take_turns(true);
    vfs
}

fn config(vfs: &SimVfs, s: Setup) -> Config {
    let c = sim_config(vfs, s.mode, 512)
        .busy_timeout(Duration::from_millis(200))
        .flush_wait(Duration::from_millis(200));
    match s.ring {
        0 => c,
        ring => c.nvlog_flush(NvlogFlush::Inline).nvlog_ring_bytes(ring),
    }
}

/// Ten transactions of inserts, updates and deletes over 60 keys, values of several
/// sizes (some past a 512-byte page: overflow chains).
fn scenario() -> Vec<Txn> {
    let mut x = 0x5eed_u64;
    let mut rnd = move |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    (0..10u32)
        .map(|t| {
            (0..1 + rnd(6))
                .map(|_| {
                    let k = rnd(60) as i64;
                    let v =
                        (rnd(5) != 0).then(|| value_for(k, t, [8, 40, 120, 700][rnd(4) as usize]));
                    (k, v)
                })
                .collect()
        })
        .collect()
}

/// The handle that commits transaction `i`: they alternate, so each commit but the first
/// is made by a handle whose picture another handle's commit made stale.
fn writer<'a>(i: usize, a: &'a Database, b: &'a Database) -> &'a Database {
    if i % 2 == 0 {
        a
    } else {
        b
    }
}

#[test]
fn two_handles_see_each_others_commits_in_every_sharing_mode() {
    let txns = scenario();
    let states = states(&txns);
    for setup in setups() {
        let mode = setup;
        let vfs = disk();
        let a = Database::open(DB, config(&vfs, setup)).unwrap();
        let b = Database::open(DB, config(&vfs, setup)).unwrap();
        let appends = setup.mode.capabilities().appends_beside_readers;
        for (i, t) in txns.iter().enumerate() {
            // Where commits append beside readers, the other handle reads across this one
            // and keeps its snapshot.
            // (Not across the ring's creation or a flush: those take the whole file, and
            // fail with Busy beside a reader, `commit_beside_a_reader_that_needs_the_...`.)
            let other = if i % 2 == 0 { &b } else { &a };
            let held =
                (appends && setup.ring >= 1 << 20 && i > 0).then(|| other.begin_read().unwrap());
            apply(writer(i, &a, &b), t).unwrap_or_else(|e| panic!("{mode} txn {i}: {e}"));
            if let Some(r) = held {
                assert_eq!(
                    rows_of(&r, "t"),
                    states[i],
                    "{mode}: a snapshot across txn {i}"
                );
            }
            assert_eq!(dump(&a), states[i + 1], "{mode}: a after txn {i}");
            assert_eq!(dump(&b), states[i + 1], "{mode}: b after txn {i}");
        }
        assert_checks(&a);
        assert_checks(&b);
        if appends && setup.ring >= 1 << 20 {
            // Without flushes, each handle read the other's commits from the ring.
            for (name, d) in [("a", &a), ("b", &b)] {
                let (_, absorbed) = d.followed();
                assert!(absorbed >= 4, "{mode}: {name} followed {absorbed} commits");
            }
        }
        // They do take turns: a write transaction keeps the other handle out, unless
        // its commits only append (then the other's readers go on beside it).
        let w = a.begin_write().unwrap();
        let appends = setup.mode.capabilities().appends_beside_readers;
        assert_eq!(
            b.try_begin_read().is_ok(),
            appends,
            "{mode}: a reader beside the other handle's writer"
        );
        drop(w);
        assert!(
            b.try_begin_read().is_ok(),
            "{mode}: the turn was not given back"
        );
    }
}

/// Where commits append beside readers, one that must take the whole file (here: the
/// small ring's flush) while the other handle holds a reader waits `flush_wait`, then
/// fails with Busy having written nothing: the reader keeps its snapshot, and once it
/// ends the commit goes through.
#[test]
fn a_commit_that_needs_the_whole_file_beside_a_reader_fails_cleanly() {
    let txns = scenario();
    let states = states(&txns);
    for setup in setups()
        .into_iter()
        .filter(|s| s.mode.capabilities().appends_beside_readers && s.ring < 1 << 20)
    {
        let vfs = disk();
        let a = Database::open(DB, config(&vfs, setup)).unwrap();
        let b = Database::open(DB, config(&vfs, setup)).unwrap();
        let mut busy = 0;
        let mut at = 0;
        for t in &txns {
            let r = b.begin_read().unwrap();
            match apply(&a, t) {
                Ok(()) => at += 1,
                Err(inpage::Error::Busy) => {
                    busy += 1;
                    assert_eq!(
                        rows_of(&r, "t"),
                        states[at],
                        "{setup}: the reader's snapshot"
                    );
                    drop(r);
                    assert_eq!(dump(&a), states[at], "{setup}: a refused commit wrote");
                    apply(&a, t).unwrap_or_else(|e| panic!("{setup}: again: {e}"));
                    at += 1;
                    continue;
                }
                Err(e) => panic!("{setup}: {e}"),
            }
            assert_eq!(
                rows_of(&r, "t"),
                states[at - 1],
                "{setup}: the reader's snapshot"
            );
        }
        assert!(busy > 0, "{setup}: no commit needed the whole file");
        assert_eq!(dump(&b), states[txns.len()], "{setup}");
        assert_checks(&a);
    }
}

/// Open two handles on `vfs` and commit the first `k` transactions alternately.
fn prepare(vfs: &SimVfs, setup: Setup, txns: &[Txn], k: usize) -> (Database, Database) {
    let a = Database::open(DB, config(vfs, setup)).unwrap();
    let b = Database::open(DB, config(vfs, setup)).unwrap();
    for (i, t) in txns[..k].iter().enumerate() {
        apply(writer(i, &a, &b), t).unwrap_or_else(|e| panic!("{setup} txn {i}: {e}"));
    }
    let mode = setup;
    // A mode whose commits are durable only at a checkpoint (`waldio-ns`) makes the
    // state before the cut commit durable first: that is the state a cut must keep.
    if !setup.mode.capabilities().durable_at_ack {
        a.checkpoint()
            .unwrap_or_else(|e| panic!("{mode}: checkpoint: {e}"));
    }
    (a, b)
}

#[test]
fn power_cut_in_either_handles_commit_in_every_sharing_mode() {
    let txns = scenario();
    let states = states(&txns);
    let mut cuts = 0;
    for setup in setups() {
        let mode = setup;
        // Transaction 6 by `a` after `b` wrote 5; transaction 7 by `b` after `a` wrote 6.
        for k in [6, 7] {
            let vfs = disk();
            let (a, b) = prepare(&vfs, setup, &txns, k);
            let before = vfs.op_count();
            apply(writer(k, &a, &b), &txns[k]).unwrap();
            let ops = vfs.op_count() - before;
            drop((a, b));
            for cut in 0..ops {
                for seed in 0..2 {
                    let vfs = disk();
                    let (a, b) = prepare(&vfs, setup, &txns, k);
                    // Where commits only append, the other handle reads across the cut one.
                    let appends = setup.mode.capabilities().appends_beside_readers;
                    let other = if k % 2 == 0 { &b } else { &a };
                    let held =
                        (appends && setup.ring >= 1 << 20).then(|| other.begin_read().unwrap());
                    vfs.set_power_cut_after(cut);
                    let what = format!("{mode} txn {k} cut {cut}/{ops} seed {seed}");
                    assert!(
                        apply(writer(k, &a, &b), &txns[k]).is_err(),
                        "{what}: the commit should see the power cut"
                    );
                    if let Some(r) = held {
                        assert_eq!(rows_of(&r, "t"), states[k], "{what}: the reader's snapshot");
                    }
                    drop((a, b));
                    let crashed = vfs.crash(seed, CrashModel::full());
                    let a = Database::open(DB, config(&crashed, setup))
                        .unwrap_or_else(|e| panic!("{what}: reopen: {e}"));
                    let b = Database::open(DB, config(&crashed, setup))
                        .unwrap_or_else(|e| panic!("{what}: second handle: {e}"));
                    let got = dump(&b);
                    assert!(
                        got == states[k] || got == states[k + 1],
                        "{what}: recovered a state that is neither before nor after the commit"
                    );
                    assert_checks(&a);
                    // The two go on taking turns after recovery.
                    let extra: Txn = vec![(1_000, Some(b"after".to_vec()))];
                    apply(&b, &extra).unwrap_or_else(|e| panic!("{what}: write after: {e}"));
                    let mut want = got;
                    apply_model(&mut want, &extra);
                    assert_eq!(dump(&a), want, "{what}: the other handle missed the write");
                    cuts += 1;
                }
            }
        }
    }
    eprintln!("{cuts} power cuts");
    assert!(cuts > 100, "{cuts} cuts");
}

/// Whether two handles with `mutant` planted, committing the scenario alternately on
/// `setup`, fail or disagree with the model somewhere.
#[cfg(feature = "mutants")]
fn mutant_found(setup: Setup, mutant: inpage::Mutant) -> bool {
    let txns = scenario();
    let states = states(&txns);
    let vfs = disk();
    let cfg = config(&vfs, setup).mutant(mutant);
    let a = Database::open(DB, cfg.clone()).unwrap();
    let b = Database::open(DB, cfg).unwrap();
    txns.iter().enumerate().any(|(i, t)| {
        apply(writer(i, &a, &b), t).is_err()
            || std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                dump(&a) != states[i + 1] || dump(&b) != states[i + 1]
            }))
            .unwrap_or(true)
    })
}

/// The bug this protocol must never have, planted: a writer that does not bump the
/// change counter leaves the other handle working from its stale picture.
#[cfg(feature = "mutants")]
#[test]
fn mutant_skip_write_announce_is_found_on_the_simulated_disk() {
    for setup in setups() {
        assert!(
            mutant_found(setup, inpage::Mutant::SkipWriteAnnounce),
            "{setup}: skip-write-announce not found"
        );
    }
}

/// The bug the append turns must never have, planted: a handle that does not read the
/// other's appended commits misses them, and writes its own over them.
#[cfg(feature = "mutants")]
#[test]
fn mutant_skip_catch_up_is_found_on_the_simulated_disk() {
    // (With the small ring nearly every commit flushes, which sends the other handle to
    // open the file again: there is nothing to follow.)
    let modes: Vec<_> = setups()
        .into_iter()
        .filter(|s| s.mode.capabilities().appends_beside_readers && s.ring >= 1 << 20)
        .collect();
    assert!(!modes.is_empty(), "no mode appends beside readers");
    for setup in modes {
        assert!(
            mutant_found(setup, inpage::Mutant::SkipCatchUp),
            "{setup}: skip-catch-up not found"
        );
    }
}

/// Closing both handles, in either order, makes every acknowledged commit durable: a
/// power cut right after the second close loses nothing, also in a mode whose commits
/// are durable only at a checkpoint or a clean close (`waldio-ns`). (Bugs this found: a
/// stale handle's refused close announced a write, which made the last handle stale
/// too, so nobody shut down; and the handle that made those commits left without a
/// checkpoint.)
#[test]
fn closing_both_handles_in_either_order_keeps_every_commit() {
    for mode in setups() {
        for last_closer_wrote_last in [true, false] {
            let vfs = disk();
            let a = Database::open(DB, config(&vfs, mode)).unwrap();
            let b = Database::open(DB, config(&vfs, mode)).unwrap();
            let mut want = BTreeMap::new();
            for (i, d) in [&a, &b, &a, &b].into_iter().enumerate() {
                let t: Txn = vec![(i as i64, Some(value_for(i as i64, 1, 300)))];
                apply(d, &t).unwrap();
                apply_model(&mut want, &t);
            }
            // `b` wrote last.
            let (first, last) = if last_closer_wrote_last {
                (a, b)
            } else {
                (b, a)
            };
            first.close().unwrap();
            let before = vfs.op_count();
            last.close().unwrap();
            let shutdown_ops = vfs.op_count() - before;
            for seed in 0..4 {
                let crashed = vfs.crash(seed, CrashModel::full());
                let db = Database::open(DB, config(&crashed, mode)).unwrap();
                let got = dump(&db);
                assert!(
                    got == want,
                    "{mode}: {} of {} keys after both handles closed (the one that wrote \
                     last closed {}; the last close made {shutdown_ops} disk ops)",
                    got.len(),
                    want.len(),
                    if last_closer_wrote_last {
                        "last"
                    } else {
                        "first"
                    }
                );
            }
        }
    }
}
