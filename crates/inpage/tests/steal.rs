//! Steal (`Config::cache_spill`): a write transaction bigger than the page cache writes
//! its changed pages to the file before it commits, in every mode whose capabilities say
//! it can (the registry decides, so a new such mode is tested here without an edit).
//!
//! What must hold: the transaction's memory stays bounded by the spill limit; it commits
//! exactly its changes; readers never see its spilled pages; a crash before its commit
//! returns leaves the database as before it, a crash after leaves it all; a rollback (and
//! a rollback to a savepoint) takes the spilled versions back out of the file, also for
//! the next transaction, which reuses the tid.

mod common;

use std::collections::BTreeMap;

use common::*;
use inpage::{Config, Database, JournalMode, KeyKind, ReadableTxn};
use inpage_sim::{CrashModel, SimVfs};

/// The modes that steal, from the registry.
fn steal_modes() -> Vec<JournalMode> {
    let m: Vec<JournalMode> = JournalMode::all()
        .filter(|m| m.capabilities().steals)
        .collect();
    assert!(
        m.contains(&JournalMode::IPS),
        "IPS must steal (its rollback is a flip)"
    );
    m
}

fn config(vfs: &SimVfs, mode: JournalMode, cache: usize) -> Config {
    sim_config(vfs, mode, 4096).cache_pages(cache)
}

/// Power cuts taken while `db` is still open (no clean-close mark spares recovery its
/// vote), each reopened: every one must hold exactly `want` and pass the check.
fn survives_power_cuts(
    db: Database,
    vfs: &SimVfs,
    mode: JournalMode,
    cache: usize,
    want: &BTreeMap<i64, Vec<u8>>,
) {
    let crashes: Vec<SimVfs> = (0..4)
        .map(|seed| vfs.crash(seed, CrashModel::full()))
        .collect();
    drop(db);
    for (seed, crashed) in crashes.into_iter().enumerate() {
        let db = Database::open(DB, config(&crashed, mode, cache)).unwrap();
        assert_eq!(&dump(&db), want, "{mode}: seed {seed}");
        assert_checks(&db);
    }
}

/// A fresh simulated disk holding a database of `mode` with a `cache`-page cache and
/// the committed table of `base_table(n)`: the disk, the open database, the table.
fn with_table(
    mode: JournalMode,
    cache: usize,
    n: i64,
) -> (SimVfs, Database, BTreeMap<i64, Vec<u8>>) {
    let vfs = SimVfs::new();
    let db = Database::open(DB, config(&vfs, mode, cache)).unwrap();
    let model = base_table(&db, n);
    (vfs, db, model)
}

/// A committed table of `n` rows (keys 0, 10, 20, ...).
fn base_table(db: &Database, n: i64) -> BTreeMap<i64, Vec<u8>> {
    let mut model = BTreeMap::new();
    let mut w = db.begin_write().unwrap();
    let t = w.create_tree("t", KeyKind::Int).unwrap();
    for i in 0..n {
        let v = value_for(i * 10, 0, 60);
        w.insert(&t, i * 10, &v).unwrap();
        model.insert(i * 10, v);
    }
    w.commit().unwrap();
    model
}

/// Insert `rows` rows (keys interleaved with the base table's, so old leaves change
/// too) in one transaction, asserting its memory bound; returns the model after it and
/// the most dirty pages it held.
fn big_insert(
    w: &mut inpage::WriteTxn,
    model: &BTreeMap<i64, Vec<u8>>,
    rows: i64,
    limit: usize,
) -> (BTreeMap<i64, Vec<u8>>, usize) {
    let t = w.open_tree("t").unwrap();
    let mut after = model.clone();
    let mut most = 0;
    for i in 0..rows {
        let k = i * 3 + 1;
        let v = value_for(k, 1, 100);
        w.insert(&t, k, &v).unwrap();
        after.insert(k, v);
        most = most.max(w.dirty_pages());
        assert!(
            w.dirty_pages() <= limit,
            "{} dirty pages with a spill limit of {limit}",
            w.dirty_pages()
        );
    }
    (after, most)
}

#[test]
fn a_50000_row_transaction_commits_with_a_256_page_cache() {
    for mode in steal_modes() {
        let (vfs, db, model) = with_table(mode, 256, 1000);
        let reader = db.begin_read().unwrap();
        let mut w = db.begin_write().unwrap();
        let (after, most) = big_insert(&mut w, &model, 50_000, 256);
        assert!(
            w.spilled_pages() > 256,
            "{mode}: only {} spilled pages for 50,000 rows",
            w.spilled_pages()
        );
        assert!(
            most > 128,
            "{mode}: the limit was never approached ({most})"
        );
        // A reader from before, and one during, see none of it.
        assert_eq!(dump(&db), model, "{mode}: a new reader saw spilled pages");
        w.commit().unwrap();
        let t = reader.open_tree("t").unwrap();
        assert_eq!(
            reader.count(&t).unwrap(),
            1000,
            "{mode}: old snapshot moved"
        );
        drop(reader);
        assert_eq!(dump(&db), after, "{mode}");
        assert_checks(&db);
        // The acknowledged commit survives power cuts that lose or tear every unsynced
        // write.
        survives_power_cuts(db, &vfs, mode, 256, &after);
    }
}

#[test]
fn a_crash_inside_a_stealing_transaction_recovers_the_state_before_it() {
    for mode in steal_modes() {
        let (vfs, db, model) = with_table(mode, 32, 500);
        drop(db);
        // How many file operations the transaction makes, to cut at points inside it.
        let probe = vfs.crash(0, CrashModel::none());
        let db = Database::open(DB, config(&probe, mode, 32)).unwrap();
        let start = probe.op_count();
        let mut w = db.begin_write().unwrap();
        let (after, _) = big_insert(&mut w, &model, 3000, 32);
        assert!(w.spilled_pages() > 32, "{mode}: nothing spilled");
        let before_commit = probe.op_count();
        w.commit().unwrap();
        let end = probe.op_count();
        drop(db);
        assert!(before_commit > start + 10, "{mode}: spills made no writes");
        let cuts: Vec<u64> = (1..=12)
            .map(|i| start + (end - start) * i / 13)
            .chain([before_commit, before_commit + 1, end - 1])
            .collect();
        for (i, cut) in cuts.into_iter().enumerate() {
            let disk = vfs.crash(0, CrashModel::none());
            let db = Database::open(DB, config(&disk, mode, 32)).unwrap();
            disk.set_power_cut_after(cut - disk.op_count().min(cut));
            let committed = (|| {
                let mut w = db.begin_write()?;
                let t = w.open_tree("t")?;
                for i in 0..3000i64 {
                    let k = i * 3 + 1;
                    w.insert(&t, k, &value_for(k, 1, 100))?;
                }
                w.commit()
            })()
            .is_ok();
            drop(db);
            for seed in 0..4u64 {
                let crashed = disk.crash(seed * 31 + i as u64, CrashModel::full());
                let db = Database::open(DB, config(&crashed, mode, 32)).unwrap();
                let got = dump(&db);
                if committed {
                    assert_eq!(got, after, "{mode}: cut {cut}, acknowledged commit lost");
                } else {
                    assert!(
                        got == model || got == after,
                        "{mode}: cut {cut} (ops {start}..{end}) left {} rows, neither {} nor {}",
                        got.len(),
                        model.len(),
                        after.len()
                    );
                    if cut < before_commit {
                        assert_eq!(got, model, "{mode}: cut {cut} before the commit began");
                    }
                }
                assert_checks(&db);
                // The next transaction reuses the rolled-back tid; its data must be
                // exactly its own after a crash that loses nothing it synced.
                apply(&db, &[(2, Some(value_for(2, 9, 20)))]).unwrap();
                drop(db);
                let again = crashed.crash(seed, CrashModel::full());
                let db = Database::open(DB, config(&again, mode, 32)).unwrap();
                let mut want = got.clone();
                want.insert(2, value_for(2, 9, 20));
                assert_eq!(dump(&db), want, "{mode}: cut {cut}, the next transaction");
                assert_checks(&db);
            }
        }
    }
}

#[test]
fn rollback_takes_spilled_versions_back_out_of_the_file() {
    for mode in steal_modes() {
        let (vfs, db, model) = with_table(mode, 32, 500);
        for end in ["rollback", "drop", "rollback_all"] {
            let mut w = db.begin_write().unwrap();
            big_insert(&mut w, &model, 2000, 32);
            assert!(w.spilled_pages() > 0, "{mode}");
            match end {
                "rollback" => w.rollback().unwrap(),
                "drop" => drop(w),
                _ => {
                    w.rollback_all().unwrap();
                    assert_eq!(w.spilled_pages(), 0);
                    let t = w.open_tree("t").unwrap();
                    assert_eq!(w.count(&t).unwrap(), 500, "{mode}: after rollback_all");
                    w.commit().unwrap();
                }
            }
            assert_eq!(dump(&db), model, "{mode}: after {end}");
        }
        // The next transaction (same tid as the rolled-back ones) commits a little.
        let mut want = model.clone();
        let ops: Vec<(i64, Option<Vec<u8>>)> = (0..5)
            .map(|k| (k * 3 + 1, Some(value_for(k, 7, 50))))
            .collect();
        apply(&db, &ops).unwrap();
        apply_model(&mut want, &ops);
        assert_eq!(dump(&db), want, "{mode}");
        assert_checks(&db);
        survives_power_cuts(db, &vfs, mode, 32, &want);
    }
}

#[test]
fn rollback_to_a_savepoint_drops_what_was_spilled_after_it() {
    for mode in steal_modes() {
        let (vfs, db, model) = with_table(mode, 32, 500);
        let mut w = db.begin_write().unwrap();
        let t = w.open_tree("t").unwrap();
        // Before the savepoint: changes, some spilled.
        let (mut want, _) = big_insert(&mut w, &model, 600, 32);
        let sp = w.savepoint();
        // After it: deletes and inserts over the same leaves, spilled again.
        for k in (0..6000i64).step_by(7) {
            w.remove(&t, k).unwrap();
        }
        for k in 100_000..102_000i64 {
            w.insert(&t, k, &value_for(k, 3, 80)).unwrap();
        }
        w.rollback_to(&sp).unwrap();
        assert_eq!(w.count(&t).unwrap() as usize, want.len(), "{mode}");
        // Work on after the rollback: more spills, then commit.
        for k in 200_000..201_500i64 {
            let v = value_for(k, 4, 90);
            w.insert(&t, k, &v).unwrap();
            want.insert(k, v);
        }
        w.release(sp).unwrap();
        w.commit().unwrap();
        assert_eq!(dump(&db), want, "{mode}");
        assert_checks(&db);
        survives_power_cuts(db, &vfs, mode, 32, &want);
    }
}

#[test]
fn a_transaction_that_empties_the_table_frees_spilled_pages() {
    for mode in steal_modes() {
        let (vfs, db, model) = with_table(mode, 32, 3000);
        let mut w = db.begin_write().unwrap();
        let t = w.open_tree("t").unwrap();
        let (_, _) = big_insert(&mut w, &model, 1500, 32);
        // Delete everything again: leaves spilled above are freed (and merged away).
        for k in model.keys().copied().chain((0..1500).map(|i| i * 3 + 1)) {
            w.remove(&t, k).unwrap();
        }
        w.insert(&t, 5, b"last").unwrap();
        w.commit().unwrap();
        let want: BTreeMap<i64, Vec<u8>> = [(5, b"last".to_vec())].into();
        assert_eq!(dump(&db), want, "{mode}");
        assert_checks(&db);
        survives_power_cuts(db, &vfs, mode, 32, &want);
    }
}

#[test]
fn modes_that_cannot_steal_keep_every_page_in_memory_and_say_so() {
    for mode in JournalMode::all().filter(|m| !m.capabilities().steals) {
        let (_disk, db, model) = with_table(mode, 16, 100);
        let mut w = db.begin_write().unwrap();
        let (after, most) = big_insert(&mut w, &model, 2000, usize::MAX);
        assert!(most > 16, "{mode}: the transaction never outgrew the cache");
        assert_eq!(w.spilled_pages(), 0, "{mode}");
        w.commit().unwrap();
        assert_eq!(dump(&db), after, "{mode}");
    }
    // And turning spilling off keeps a stealing mode's pages in memory too.
    let vfs = SimVfs::new();
    let cfg = config(&vfs, JournalMode::IPS, 16).cache_spill(false);
    let db = Database::open(DB, cfg).unwrap();
    let model = base_table(&db, 100);
    let mut w = db.begin_write().unwrap();
    let (_, most) = big_insert(&mut w, &model, 2000, usize::MAX);
    assert!(most > 16 && w.spilled_pages() == 0);
    assert!(matches!(
        Database::open(DB, config(&vfs, JournalMode::IPS, 16).spill_pages(0)),
        Err(inpage::Error::Config(_))
    ));
}

/// Nested savepoints: a page spilled before the outer one and changed again before the
/// inner one keeps its spilled image through a rollback to the inner savepoint, because
/// rolling back to the outer one needs it.
#[test]
fn nested_savepoints_keep_what_the_outer_one_restores() {
    for mode in steal_modes() {
        let (vfs, db, model) = with_table(mode, 32, 500);
        let mut w = db.begin_write().unwrap();
        let t = w.open_tree("t").unwrap();
        let (at_outer, _) = big_insert(&mut w, &model, 1500, 32);
        assert!(w.spilled_pages() > 0, "{mode}");
        let outer = w.savepoint();
        // Change rows all over the table: pages spilled before `outer` become dirty.
        for k in at_outer.keys().copied().step_by(5).collect::<Vec<_>>() {
            w.insert(&t, k, &value_for(k, 5, 40)).unwrap();
        }
        let inner = w.savepoint();
        for k in 300_000..301_000i64 {
            w.insert(&t, k, &value_for(k, 6, 90)).unwrap();
        }
        w.rollback_to(&inner).unwrap();
        w.rollback_to(&outer).unwrap();
        let got: BTreeMap<i64, Vec<u8>> = w
            .iter(&t)
            .unwrap()
            .map(|kv| {
                let (k, v) = kv.unwrap();
                (k.as_int().unwrap(), v)
            })
            .collect();
        assert_eq!(got, at_outer, "{mode}: rolled back to the outer savepoint");
        w.commit().unwrap();
        assert_eq!(dump(&db), at_outer, "{mode}");
        assert_checks(&db);
        survives_power_cuts(db, &vfs, mode, 32, &at_outer);
    }
}

/// A commit with spilled pages that are no longer the transaction's (a tree created,
/// filled past the spill limit and dropped in the same transaction), cut at every
/// operation: the state recovery settles on must survive a second power cut taken before
/// anything else is written (recovery's own invalidations are still unsynced then, so
/// any subset of them may be lost). The torture found this broken once: with such a
/// page's version still in the file beside the few stamped ones, losing every
/// invalidation but that one's made the second recovery find the transaction complete.
#[test]
fn recovery_of_a_commit_with_discarded_spills_survives_a_second_cut() {
    for mode in steal_modes() {
        let vfs = SimVfs::new();
        let cfg = |disk: &SimVfs| config(disk, mode, 16).spill_pages(2);
        let db = Database::open(DB, cfg(&vfs)).unwrap();
        let model = base_table(&db, 50);
        drop(db);
        let run = |db: &Database| -> inpage::Result<()> {
            let mut w = db.begin_write()?;
            let t = w.open_tree("t")?;
            w.insert(&t, 7, b"seven")?;
            let u = w.create_tree("u", KeyKind::Int)?;
            for k in 0..300i64 {
                w.insert(&u, k, &value_for(k, 3, 60))?;
            }
            w.drop_tree("u")?;
            w.commit()
        };
        let probe = vfs.crash(0, CrashModel::none());
        let db = Database::open(DB, cfg(&probe)).unwrap();
        let start = probe.op_count();
        run(&db).unwrap();
        let end = probe.op_count();
        drop(db);
        let mut after = model.clone();
        after.insert(7, b"seven".to_vec());
        // The commit is the last stretch of operations; cut at each of its last 16.
        for cut in end.saturating_sub(16).max(start)..end {
            let disk = vfs.crash(0, CrashModel::none());
            let db = Database::open(DB, cfg(&disk)).unwrap();
            disk.set_power_cut_after(cut - disk.op_count().min(cut));
            let _ = run(&db);
            drop(db);
            for seed in 0..3u64 {
                let first = disk.crash(seed, CrashModel::full());
                let db = Database::open(DB, cfg(&first)).unwrap();
                let settled = dump(&db);
                assert!(
                    settled == model || settled == after,
                    "{mode}: cut {cut}: neither before nor after"
                );
                for again in 0..32u64 {
                    let second = first.crash(seed * 101 + again, CrashModel::full());
                    let db2 = Database::open(DB, cfg(&second)).unwrap();
                    assert!(
                        dump(&db2) == settled,
                        "{mode}: cut {cut}, seed {seed}/{again}: a second cut changed what recovery settled on"
                    );
                }
                drop(db);
            }
        }
    }
}

/// A reader older than two stealing transactions in a row keeps its snapshot: the second
/// spill of a page overwrites, in the file, the version the reader sees (the first
/// spill's commit only re-stamped its own version, so no commit kept that image either);
/// the pager must keep it from the spill. Found when IPS began to split full leaves.
#[test]
fn an_old_reader_survives_pages_spilled_twice() {
    for mode in steal_modes() {
        let vfs = SimVfs::new();
        let db = Database::open(DB, config(&vfs, mode, 16).spill_pages(2)).unwrap();
        let write_all = |round: u32| {
            let mut w = db.begin_write().unwrap();
            let t = w.open_or_create_tree("t", KeyKind::Int).unwrap();
            for k in 0..120 {
                w.insert(&t, k, &value_for(k, round, 200)).unwrap();
            }
            w.commit().unwrap();
        };
        write_all(0);
        let r = db.begin_read().unwrap();
        for round in 1..=3 {
            write_all(round);
        }
        let t = r.open_tree("t").unwrap();
        for k in 0..120 {
            assert_eq!(
                r.get(&t, k).unwrap(),
                Some(value_for(k, 0, 200)),
                "{mode}: key {k} at the reader's snapshot"
            );
        }
    }
}
