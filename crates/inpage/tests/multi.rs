//! Transactions across databases (`inpage::commit_all`): a power cut at every I/O
//! operation of such a commit — and at every operation of the recovery after it — on the
//! simulated disk (lost, reordered and torn unsynced writes), then the databases reopened
//! in either order: both hold the transaction or neither does, every database checks,
//! and both keep working. Every mode of the registry that can take part, each paired
//! with itself and with modes of the other families (rollback journal, log, counting).

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use common::*;
use inpage::{Config, Database, Error, JournalMode, KeyKind};
use inpage_sim::{CrashModel, SimVfs};

const ONE: &str = "/a/one.db";
const TWO: &str = "/b/two.db";

fn can_take_part(m: JournalMode) -> bool {
    let c = m.capabilities();
    !c.region_backed && c.survives_process_crash
}

thread_local! {
    /// The planted bug the databases of this thread's test open with (`mutant_*`).
    static MUTANT: std::cell::Cell<inpage::Mutant> = const { std::cell::Cell::new(inpage::Mutant::None) };
}

fn cfg(vfs: &SimVfs, mode: JournalMode) -> Config {
    let mut c = sim_config(vfs, mode, 4096);
    if mode.options().contains(&inpage::JournalOption::NvlogFlush) {
        // `redo`: flushes on the committing thread (the cuts count operations, which a
        // background thread would make vary), and often (a small ring), so they land
        // inside the parts the transaction records. The paused background flusher is
        // `multi_kill`'s.
        c = c
            .nvlog_flush(inpage::NvlogFlush::Inline)
            .nvlog_ring_bytes(16 << 10);
    }
    #[cfg(feature = "mutants")]
    let c = c.mutant(MUTANT.with(|m| m.get()));
    c
}

/// Apply `t` to tree "t" of both databases (the second gets each value reversed, so a
/// swapped or stale page is seen) in one transaction across them.
fn apply_both(a: &Database, b: &Database, t: &Txn) -> inpage::Result<()> {
    let mut wa = a.begin_write()?;
    let mut wb = b.begin_write()?;
    let ta = wa.open_or_create_tree("t", KeyKind::Int)?;
    let tb = wb.open_or_create_tree("t", KeyKind::Int)?;
    for (k, v) in t {
        match v {
            Some(v) => {
                wa.insert(&ta, *k, v)?;
                let r: Vec<u8> = v.iter().rev().copied().collect();
                wb.insert(&tb, *k, &r)?;
            }
            None => {
                wa.remove(&ta, *k)?;
                wb.remove(&tb, *k)?;
            }
        }
    }
    inpage::commit_all(vec![wa, wb])
}

fn reversed(m: &BTreeMap<i64, Vec<u8>>) -> BTreeMap<i64, Vec<u8>> {
    m.iter()
        .map(|(k, v)| (*k, v.iter().rev().copied().collect()))
        .collect()
}

fn prepare(
    vfs: &SimVfs,
    m1: JournalMode,
    m2: JournalMode,
    txns: &[Txn],
    k: usize,
) -> (Database, Database) {
    let a = Database::open(ONE, cfg(vfs, m1)).unwrap();
    let b = Database::open(TWO, cfg(vfs, m2)).unwrap();
    for t in &txns[..k] {
        apply_both(&a, &b, t).unwrap();
    }
    (a, b)
}

/// Reopen after a crash (`first_two`: the second database first) and return the index
/// of the state both hold; checks, a write and a reopen on the way.
fn settle(
    crashed: &SimVfs,
    m1: JournalMode,
    m2: JournalMode,
    allowed: &[BTreeMap<i64, Vec<u8>>],
    first_two: bool,
    what: &str,
) -> usize {
    // A read-only look first: it must see the outcome recovery will settle on, and
    // change nothing.
    let ro = Database::open_read_only(ONE, cfg(crashed, m1))
        .unwrap_or_else(|e| panic!("{what}: ro: {e}"));
    let ro_state = dump(&ro);
    drop(ro);
    let (a, b) = if first_two {
        let b = Database::open(TWO, cfg(crashed, m2))
            .unwrap_or_else(|e| panic!("{what}: reopen two: {e}"));
        let a = Database::open(ONE, cfg(crashed, m1))
            .unwrap_or_else(|e| panic!("{what}: reopen one: {e}"));
        (a, b)
    } else {
        let a = Database::open(ONE, cfg(crashed, m1))
            .unwrap_or_else(|e| panic!("{what}: reopen one: {e}"));
        let b = Database::open(TWO, cfg(crashed, m2))
            .unwrap_or_else(|e| panic!("{what}: reopen two: {e}"));
        (a, b)
    };
    let (ga, gb) = (dump(&a), dump(&b));
    let i = allowed
        .iter()
        .position(|s| *s == ga)
        .unwrap_or_else(|| panic!("{what}: database one matches no allowed state"));
    assert_eq!(
        gb,
        reversed(&allowed[i]),
        "{what}: database two is not at database one's state"
    );
    assert_eq!(
        ro_state, ga,
        "{what}: the read-only open saw another outcome"
    );
    assert_checks(&a);
    assert_checks(&b);
    let extra: Txn = vec![(9_999, Some(b"after recovery".to_vec()))];
    apply_both(&a, &b, &extra).unwrap_or_else(|e| panic!("{what}: write after recovery: {e}"));
    drop((a, b));
    let a = Database::open(ONE, cfg(crashed, m1)).unwrap();
    let b = Database::open(TWO, cfg(crashed, m2)).unwrap();
    let mut want = allowed[i].clone();
    apply_model(&mut want, &extra);
    assert_eq!(dump(&a), want, "{what}: write after recovery lost (one)");
    assert_eq!(
        dump(&b),
        reversed(&want),
        "{what}: write after recovery lost (two)"
    );
    // Nothing of the transaction's bookkeeping is left behind.
    for f in crashed.file_names() {
        let n = f.to_string_lossy();
        assert!(
            !n.contains("-super-") && !n.ends_with("-undo"),
            "{what}: {n} left behind"
        );
    }
    i
}

fn crash_every_op(
    m1: JournalMode,
    m2: JournalMode,
    txns: &[Txn],
    k: usize,
    seeds: u64,
) -> (usize, [usize; 2]) {
    let all = states(txns);
    let allowed = [all[k].clone(), all[k + 1].clone()];
    let vfs = SimVfs::new();
    let (a, b) = prepare(&vfs, m1, m2, txns, k);
    let before = vfs.op_count();
    apply_both(&a, &b, &txns[k]).unwrap();
    let ops = vfs.op_count() - before;
    drop((a, b));
    let mut outcomes = [0; 2];
    let mut cuts = 0;
    for cut in 0..ops {
        for seed in 0..seeds {
            let vfs = SimVfs::new();
            let (a, b) = prepare(&vfs, m1, m2, txns, k);
            vfs.set_power_cut_after(cut);
            // A cut in the last steps (removing the stale undo logs) does not fail the
            // commit: it was acknowledged, so only the new state is allowed then.
            let acked = apply_both(&a, &b, &txns[k]).is_ok();
            drop((a, b));
            let crashed = vfs.crash(seed, CrashModel::full());
            let what = format!("{m1}+{m2} txn {k} cut {cut}/{ops} seed {seed}");
            let got = settle(&crashed, m1, m2, &allowed, seed % 2 == 1, &what);
            assert!(
                !acked || got == 1,
                "{what}: an acknowledged commit was lost"
            );
            outcomes[got] += 1;
            cuts += 1;
        }
    }
    (cuts, outcomes)
}

fn pairs() -> Vec<(JournalMode, JournalMode)> {
    let modes: Vec<JournalMode> = JournalMode::all().filter(|m| can_take_part(*m)).collect();
    let mut v = Vec::new();
    for m in &modes {
        v.push((*m, *m));
    }
    // Mixed pairs: each mode with the default and with a log mode.
    for m in &modes {
        if *m != JournalMode::DHL_CC {
            v.push((JournalMode::DHL_CC, *m));
        }
        if *m != JournalMode::WAL {
            v.push((*m, JournalMode::WAL));
        }
    }
    v
}

#[test]
fn power_cut_during_a_commit_across_databases() {
    let txns = gen_txns(21, 4, 10, 150, 5000);
    let mut total = 0;
    for (m1, m2) in pairs() {
        let (cuts, outcomes) = crash_every_op(m1, m2, &txns, 2, 2);
        // Both outcomes occur: the test cuts before and after the commit point.
        assert!(
            outcomes[0] > 0 && outcomes[1] > 0,
            "{m1}+{m2}: outcomes {outcomes:?}"
        );
        total += cuts;
    }
    println!("{total} cuts, 0 torn");
}

/// A power cut during the recovery of a cut commit, at every operation of it, then
/// recovery again: still all or nothing.
#[test]
fn power_cut_during_recovery_of_a_commit_across_databases() {
    let txns = gen_txns(22, 3, 8, 100, 3000);
    let all = states(&txns);
    let allowed = [all[1].clone(), all[2].clone()];
    for (m1, m2) in [
        (JournalMode::DHL_CC, JournalMode::WAL),
        (JournalMode::DELETE, JournalMode::IPS),
    ] {
        let vfs = SimVfs::new();
        let (a, b) = prepare(&vfs, m1, m2, &txns, 1);
        let before = vfs.op_count();
        apply_both(&a, &b, &txns[1]).unwrap();
        let ops = vfs.op_count() - before;
        drop((a, b));
        for cut in (0..ops).step_by(3) {
            let vfs = SimVfs::new();
            let (a, b) = prepare(&vfs, m1, m2, &txns, 1);
            vfs.set_power_cut_after(cut);
            let _ = apply_both(&a, &b, &txns[1]);
            drop((a, b));
            let crashed = vfs.crash(cut, CrashModel::full());
            // Count the recovery's operations, then cut it at each.
            let probe = crashed.crash(0, CrashModel::none());
            let before = probe.op_count();
            drop(Database::open(ONE, cfg(&probe, m1)).unwrap());
            drop(Database::open(TWO, cfg(&probe, m2)).unwrap());
            let rops = probe.op_count() - before;
            for rcut in 0..rops {
                let again = crashed.crash(0, CrashModel::none());
                again.set_power_cut_after(rcut);
                let _ = Database::open(ONE, cfg(&again, m1)).map(|a| {
                    let _ = Database::open(TWO, cfg(&again, m2));
                    drop(a);
                });
                let twice = again.crash(rcut, CrashModel::full());
                let what = format!("{m1}+{m2} cut {cut}, recovery cut {rcut}/{rops}");
                settle(&twice, m1, m2, &allowed, rcut % 2 == 0, &what);
            }
        }
    }
}

/// The bug this protocol must never have, planted (`Mutant::UndoUnsynced`: an original
/// not durable before the change it undoes is issued): the cuts above find it.
#[cfg(feature = "mutants")]
#[test]
fn mutant_undo_unsynced_is_found() {
    MUTANT.with(|m| m.set(inpage::Mutant::UndoUnsynced));
    let txns = gen_txns(21, 4, 10, 150, 5000);
    let mut found = Vec::new();
    for (m1, m2) in [
        (JournalMode::DHL_CC, JournalMode::DHL_CC),
        (JournalMode::DHL_CC, JournalMode::WAL),
        (JournalMode::DELETE, JournalMode::WAL),
    ] {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            crash_every_op(m1, m2, &txns, 2, 2)
        }));
        found.push((m1, m2, r.is_err()));
    }
    MUTANT.with(|m| m.set(inpage::Mutant::None));
    assert!(
        found.iter().all(|f| f.2),
        "undo-unsynced not found in every pair: {found:?}"
    );
}

/// A database that cannot take part is refused before anything is written, with the
/// typed error; the transactions roll back.
#[test]
fn modes_that_cannot_take_part_are_refused_unchanged() {
    for m in JournalMode::all().filter(|m| !can_take_part(*m)) {
        let vfs = SimVfs::new();
        let mut c2 = cfg(&vfs, m);
        if m.capabilities().region_backed {
            c2 = c2.nvlog_region("/b/region");
        }
        let a = Database::open(ONE, cfg(&vfs, JournalMode::DHL_CC)).unwrap();
        let b = Database::open(TWO, c2.clone()).unwrap();
        let t: Txn = vec![(1, Some(b"x".to_vec()))];
        match apply_both(&a, &b, &t) {
            Err(Error::AcrossDatabases { path, reason }) => {
                assert_eq!(path, Path::new(TWO), "{m}");
                assert!(reason.contains(m.name()), "{m}: {reason}");
            }
            other => panic!("{m}: expected AcrossDatabases, got {other:?}"),
        }
        assert!(dump(&a).is_empty() && dump(&b).is_empty(), "{m}");
        drop((a, b));
        for f in vfs.file_names() {
            assert!(!f.to_string_lossy().contains("-super-"), "{m}: {f:?}");
        }
        let _ = c2;
    }
}

/// An in-memory database commits with the files (nothing to make durable), and a
/// database whose transaction changed nothing needs no undo log.
#[test]
fn memory_and_unchanged_databases_commit_plainly() {
    let vfs = SimVfs::new();
    let a = Database::open(ONE, cfg(&vfs, JournalMode::DHL_CC)).unwrap();
    let b = Database::open(TWO, cfg(&vfs, JournalMode::WAL)).unwrap();
    let m = Database::open_memory(Config::default()).unwrap();
    let mut wa = a.begin_write().unwrap();
    let wb = b.begin_write().unwrap();
    let mut wm = m.begin_write().unwrap();
    let ta = wa.create_tree("t", KeyKind::Int).unwrap();
    let tm = wm.create_tree("t", KeyKind::Int).unwrap();
    wa.insert(&ta, 1, b"a").unwrap();
    wm.insert(&tm, 1, b"m").unwrap();
    let before = vfs.file_names();
    inpage::commit_all(vec![wa, wb, wm]).unwrap();
    assert_eq!(a.get("t", 1).unwrap().as_deref(), Some(&b"a"[..]));
    assert_eq!(m.get("t", 1).unwrap().as_deref(), Some(&b"m"[..]));
    for f in vfs.file_names() {
        let n = f.to_string_lossy();
        assert!(!n.contains("-super-") && !n.ends_with("-undo"), "{n}");
    }
    let _ = (before, Arc::new(0));
}
