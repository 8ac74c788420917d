//! I/O errors: EIO on any operation of a commit, and ENOSPC on growth. The failed commit
//! is reported as an error (never as success), the handle refuses further work until it
//! is reopened, open snapshots keep reading, and after a reopen — with or without a power
//! cut on top — the database holds the state before or after that transaction and passes
//! the integrity check.

mod common;

use std::sync::Arc;

use common::*;
use inpage::{Config, Database, Error, JournalMode, JournalOption, ReadableTxn};
use inpage_sim::{CrashModel, FaultPlan, FaultVfs, SimVfs};

fn fault_config(vfs: &SimVfs, plan: &Arc<FaultPlan>, mode: JournalMode) -> Config {
    let fv = FaultVfs::new(Arc::new(vfs.clone()), plan.clone());
    sim_config(vfs, mode, 4096).vfs(Arc::new(fv))
}

/// A mode whose commits are not durable when acknowledged (`waldio-ns`) makes them so
/// with a checkpoint, so "the state before the failed commit" survives a power cut.
fn settle(db: &Database, mode: JournalMode) {
    if !mode.capabilities().durable_at_ack {
        db.checkpoint().unwrap();
    }
}

#[test]
fn eio_at_every_operation_of_a_commit() {
    let txns = gen_txns(5, 4, 10, 300, 6000);
    let before_state = {
        let mut m = Default::default();
        for t in &txns[..3] {
            apply_model(&mut m, t);
        }
        m
    };
    let mut after_state = before_state.clone();
    apply_model(&mut after_state, &txns[3]);
    let mut injected = 0;
    let mut cases = 0;
    for mode in atomic_modes() {
        // Reference run: operations seen by the fault layer during commit 3.
        let vfs = SimVfs::new();
        let plan = Arc::new(FaultPlan::new());
        let db = Database::open(DB, fault_config(&vfs, &plan, mode)).unwrap();
        for t in &txns[..3] {
            apply(&db, t).unwrap();
        }
        settle(&db, mode);
        let start = plan.ops_seen();
        apply(&db, &txns[3]).unwrap();
        let ops = plan.ops_seen() - start;
        drop(db);
        for n in 0..ops {
            for power_cut in [false, true] {
                let vfs = SimVfs::new();
                let plan = Arc::new(FaultPlan::new());
                let db = Database::open(DB, fault_config(&vfs, &plan, mode)).unwrap();
                for t in &txns[..3] {
                    apply(&db, t).unwrap();
                }
                settle(&db, mode);
                let reader = db.begin_read().unwrap();
                plan.fail_op(n, false);
                let what = format!("{mode} EIO at op {n}/{ops} cut {power_cut}");
                match apply(&db, &txns[3]) {
                    Err(Error::Io { .. }) => {}
                    // Reads of cached pages may let the commit reach the failing op later
                    // than in the reference run; it must fail all the same.
                    other => panic!("{what}: expected an I/O error, got {other:?}"),
                }
                injected += plan.injected();
                cases += 1;
                // Poisoned until reopened; the open snapshot still reads the old state.
                assert!(
                    matches!(db.begin_write(), Err(Error::Poisoned(_))),
                    "{what}"
                );
                assert!(matches!(db.begin_read(), Err(Error::Poisoned(_))), "{what}");
                let t = reader.open_tree("t").unwrap();
                assert_eq!(
                    reader.count(&t).unwrap(),
                    before_state.len() as u64,
                    "{what}"
                );
                drop(reader);
                drop(db);
                let disk = if power_cut {
                    vfs.crash(n, CrashModel::full())
                } else {
                    vfs.process_crash()
                };
                let db = Database::open(DB, sim_config(&disk, mode, 4096)).unwrap();
                let got = dump(&db);
                assert!(
                    got == before_state || got == after_state,
                    "{what}: wrong state"
                );
                assert_checks(&db);
                apply(&db, &[(9999, Some(b"x".to_vec()))]).unwrap();
            }
        }
    }
    assert_eq!(injected, cases, "every case injects exactly one fault");
    assert!(cases > 50, "too few cases: {cases}");
}

#[test]
fn enospc_on_growth_fails_cleanly() {
    for mode in JournalMode::all() {
        let vfs = SimVfs::new();
        let plan = Arc::new(FaultPlan::new());
        let db = Database::open(DB, fault_config(&vfs, &plan, mode)).unwrap();
        let mut model = Default::default();
        let mut in_flight = Vec::new();
        plan.enospc_after_bytes(300_000);
        let mut failed = false;
        let mut clean = false;
        for i in 0..200 {
            let ops: Vec<(i64, Option<Vec<u8>>)> = (0..10)
                .map(|j| (i * 10 + j, Some(value_for(i * 10 + j, 0, 900))))
                .collect();
            match apply(&db, &ops) {
                Ok(()) => apply_model(&mut model, &ops),
                Err(e @ (Error::Io { .. } | Error::NoSpace { .. })) => {
                    let (Error::Io { source, .. } | Error::NoSpace { source, .. }) = &e else {
                        unreachable!()
                    };
                    assert_eq!(source.raw_os_error(), Some(28), "{mode}: ENOSPC expected");
                    if matches!(e, Error::NoSpace { .. }) {
                        // A clean failure: the handle goes on, with the state before.
                        assert_eq!(dump(&db), model, "{mode}: NoSpace changed the state");
                        clean = true;
                    }
                    in_flight = ops;
                    failed = true;
                    break;
                }
                Err(e) => panic!("{mode}: unexpected {e}"),
            }
        }
        // A mode with a flusher (`nvlog_flush`: `nvlog`, `redo`) acknowledges commits in
        // its ring (preallocated: its writes never grow a file) and retries the flush
        // into the full file later: it may never fail within the budget, and then the
        // reopen below must hold every commit.
        assert!(
            failed || mode.options().contains(&JournalOption::NvlogFlush),
            "{mode}: never ran out of space"
        );
        drop(db);
        let db = Database::open(DB, sim_config(&vfs.process_crash(), mode, 4096)).unwrap();
        if mode.promises_atomicity() {
            // A failed commit has an unknown outcome (WAL: the frames may be durable and
            // the auto-checkpoint the part that ran out of space), but never a partial one.
            let got = dump(&db);
            let mut after = model.clone();
            apply_model(&mut after, &in_flight);
            assert!(
                got == model || (got == after && !clean),
                "{mode}: neither before nor after (or after, though the commit failed cleanly)"
            );
        }
        assert_checks(&db);
    }
}
