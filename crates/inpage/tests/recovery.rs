//! Recovery tests per journal mode: cut the power of the simulated disk at every I/O
//! operation of a commit (and of a checkpoint), let the crash lose, reorder and tear the
//! unsynced writes, reopen, and require the state before or after the interrupted
//! transaction, a passing integrity check, and a database that keeps working.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::*;
use inpage::{Database, JournalMode, WalSync};
use inpage_sim::{CrashModel, SimVfs};

/// Open and apply the first `k` transactions; returns the db. A mode whose commits are
/// not durable when acknowledged (`waldio-ns`) then checkpoints, so the state before the
/// next commit is the one a power cut must keep.
fn prepare(vfs: &SimVfs, mode: JournalMode, page_size: u32, txns: &[Txn], k: usize) -> Database {
    let db = Database::open(DB, sim_config(vfs, mode, page_size)).unwrap();
    for t in &txns[..k] {
        apply(&db, t).unwrap();
    }
    if !mode.capabilities().durable_at_ack {
        db.checkpoint().unwrap();
    }
    db
}

/// After a crash: reopen, compare with the allowed states, check, then write once more
/// and reopen again to show recovery left a working database.
fn verify_after_crash(
    crashed: &SimVfs,
    mode: JournalMode,
    page_size: u32,
    allowed: &[&BTreeMap<i64, Vec<u8>>],
    what: &str,
) {
    let db = Database::open(DB, sim_config(crashed, mode, page_size))
        .unwrap_or_else(|e| panic!("{what}: reopen failed: {e}"));
    let got = dump(&db);
    assert!(
        allowed.iter().any(|m| **m == got),
        "{what}: state after recovery matches none of the allowed states ({} keys; allowed sizes {:?})",
        got.len(),
        allowed.iter().map(|m| m.len()).collect::<Vec<_>>()
    );
    assert_checks(&db);
    let extra: Txn = vec![(10_000, Some(b"after recovery".to_vec()))];
    apply(&db, &extra).unwrap_or_else(|e| panic!("{what}: write after recovery: {e}"));
    drop(db);
    let db = Database::open(DB, sim_config(crashed, mode, page_size)).unwrap();
    let mut want = got.clone();
    apply_model(&mut want, &extra);
    assert_eq!(dump(&db), want, "{what}: write after recovery lost");
    assert_checks(&db);
}

/// Crash at every operation of transaction `k` (of `txns`), with `seeds` crash seeds each.
fn crash_every_op_of_commit(
    mode: JournalMode,
    page_size: u32,
    txns: &[Txn],
    k: usize,
    seeds: u64,
) -> usize {
    let states = states(txns);
    // A mode that keeps commits in a buffer (`waldio-gs`) writes them later: its commit
    // is cut together with the checkpoint that writes it.
    let apply = |db: &Database, t: &Txn| -> inpage::Result<()> {
        apply(db, t)?;
        if !mode.capabilities().survives_process_crash {
            db.checkpoint()?;
        }
        Ok(())
    };
    // Reference run: how many mutating operations does commit k take?
    let vfs = SimVfs::new();
    let db = prepare(&vfs, mode, page_size, txns, k);
    let before = vfs.op_count();
    apply(&db, &txns[k]).unwrap();
    let ops = vfs.op_count() - before;
    drop(db);
    if ops == 0 {
        // The transaction changed nothing (e.g. removed absent keys): no I/O to cut.
        assert_eq!(states[k], states[k + 1]);
        return 0;
    }
    let mut cuts = 0;
    for cut in 0..ops {
        for seed in 0..seeds {
            let vfs = SimVfs::new();
            let db = prepare(&vfs, mode, page_size, txns, k);
            vfs.set_power_cut_after(cut);
            let res = apply(&db, &txns[k]);
            assert!(
                res.is_err(),
                "{mode} cut {cut}/{ops}: commit should see the power cut"
            );
            drop(db);
            let crashed = vfs.crash(seed, CrashModel::full());
            let what = format!("{mode} page {page_size} txn {k} cut {cut}/{ops} seed {seed}");
            verify_after_crash(
                &crashed,
                mode,
                page_size,
                &[&states[k], &states[k + 1]],
                &what,
            );
            cuts += 1;
        }
    }
    cuts
}

fn scenario(seed: u64, page_size: u32) -> Vec<Txn> {
    // Enough data to split pages and spill values into overflow pages.
    gen_txns(seed, 6, 12, 200, 2 * page_size as usize)
}

/// The matrix: every registered mode that promises atomicity (a mode that does not has
/// nothing to check after a cut), from the registry, so a new mode is covered here
/// without touching this file.
fn matrix() -> Vec<JournalMode> {
    JournalMode::all()
        .filter(|m| m.promises_atomicity())
        .collect()
}

/// A power cut at every operation of six commits, at both page sizes, in every mode.
#[test]
fn power_cut_during_commit_every_mode() {
    for (n, mode) in matrix().into_iter().enumerate() {
        for (i, ps) in [4096u32, 512].into_iter().enumerate() {
            let txns = scenario(10 * n as u64 + i as u64 + 1, ps);
            let mut total = 0;
            for k in 0..6 {
                total += crash_every_op_of_commit(mode, ps, &txns, k, 8);
            }
            eprintln!("{mode} page {ps}: {total} crashes");
            // At least a write and a sync per commit; a mode without the sync at commit
            // (`waldio-ns`) writes a commit with one call.
            let per_commit = if mode.capabilities().durable_at_ack {
                2
            } else {
                1
            };
            assert!(
                total >= 5 * 8 * per_commit,
                "{mode}: too few crash points ({total})"
            );
        }
    }
}

/// A mode in the registry that promises atomicity but is missing here would land
/// without crash-recovery tests.
#[test]
fn the_matrix_covers_the_registry() {
    let m = matrix();
    for mode in JournalMode::all().filter(|m| m.promises_atomicity()) {
        assert!(m.contains(&mode), "{mode} is not crash-tested");
    }
    assert!(m.len() >= 7, "{m:?}");
}

/// Creating a database is itself crash-safe, in every mode (the registry's, including
/// those that promise no atomicity for commits: the layout is the engine's): a power cut
/// at any operation of the first open leaves a path that a later open either finds
/// absent or empty (and lays out) or finds laid out — never a file it refuses. A
/// read-only look at the cut state changes nothing.
#[test]
fn power_cut_during_creation_every_mode() {
    for mode in JournalMode::all() {
        let vfs = SimVfs::new();
        let db = Database::open(DB, sim_config(&vfs, mode, 4096)).unwrap();
        let ops = vfs.op_count();
        drop(db);
        assert!(ops > 0);
        for cut in 0..ops {
            for seed in 0..3 {
                let vfs = SimVfs::new();
                vfs.set_power_cut_after(cut);
                assert!(
                    Database::open(DB, sim_config(&vfs, mode, 4096)).is_err(),
                    "{mode} cut {cut}/{ops}: the open should see the cut"
                );
                let crashed = vfs.crash(seed, CrashModel::full());
                let what = format!("{mode} creation cut {cut}/{ops} seed {seed}");
                let before: Vec<_> = crashed
                    .file_names()
                    .into_iter()
                    .map(|p| (p.clone(), crashed.read_file(&p)))
                    .collect();
                if crashed.read_file(std::path::Path::new(DB)).is_some() {
                    let ro = Database::open_read_only(DB, sim_config(&crashed, mode, 4096))
                        .unwrap_or_else(|e| panic!("{what}: read-only open: {e}"));
                    assert!(dump(&ro).is_empty(), "{what}");
                    drop(ro);
                    let after: Vec<_> = crashed
                        .file_names()
                        .into_iter()
                        .map(|p| (p.clone(), crashed.read_file(&p)))
                        .collect();
                    assert_eq!(before, after, "{what}: a read-only open changed files");
                }
                verify_after_crash(&crashed, mode, 4096, &[&BTreeMap::new()], &what);
            }
        }
    }
}

#[test]
fn power_cut_during_checkpoint() {
    let ps = 4096;
    let txns = scenario(21, ps);
    let states = states(&txns);
    let n = txns.len();
    let vfs = SimVfs::new();
    let db = prepare(&vfs, JournalMode::WAL, ps, &txns, n);
    let before = vfs.op_count();
    db.checkpoint().unwrap();
    let ops = vfs.op_count() - before;
    drop(db);
    assert!(ops > 2, "checkpoint wrote too little: {ops} ops");
    for cut in 0..ops {
        for seed in 0..3 {
            let vfs = SimVfs::new();
            let db = prepare(&vfs, JournalMode::WAL, ps, &txns, n);
            vfs.set_power_cut_after(cut);
            assert!(db.checkpoint().is_err());
            drop(db);
            let crashed = vfs.crash(seed, CrashModel::full());
            let what = format!("wal checkpoint cut {cut}/{ops} seed {seed}");
            // Every commit was synced (FULL), so all of them must survive.
            verify_after_crash(&crashed, JournalMode::WAL, ps, &[&states[n]], &what);
        }
    }
}

#[test]
fn power_cut_during_auto_checkpoint_commit() {
    // A tiny checkpoint interval makes most commits checkpoint.
    let ps = 512;
    let txns = scenario(31, ps);
    let states = states(&txns);
    for k in [2, 4] {
        let vfs = SimVfs::new();
        let cfg = |v: &SimVfs| sim_config(v, JournalMode::WAL, ps).wal_autocheckpoint(3);
        let db = Database::open(DB, cfg(&vfs)).unwrap();
        for t in &txns[..k] {
            apply(&db, t).unwrap();
        }
        let before = vfs.op_count();
        apply(&db, &txns[k]).unwrap();
        let ops = vfs.op_count() - before;
        drop(db);
        for cut in 0..ops {
            let vfs = SimVfs::new();
            let db = Database::open(DB, cfg(&vfs)).unwrap();
            for t in &txns[..k] {
                apply(&db, t).unwrap();
            }
            vfs.set_power_cut_after(cut);
            let _ = apply(&db, &txns[k]);
            drop(db);
            let crashed = vfs.crash(cut, CrashModel::full());
            let db = Database::open(DB, cfg(&crashed)).unwrap();
            let got = dump(&db);
            assert!(
                got == states[k] || got == states[k + 1],
                "auto-checkpoint k {k} cut {cut}"
            );
            assert_checks(&db);
        }
    }
}

#[test]
fn wal_normal_keeps_a_prefix_of_commits() {
    let ps = 4096;
    let txns = scenario(41, ps);
    let states = states(&txns);
    for seed in 0..20 {
        let vfs = SimVfs::new();
        let cfg = |v: &SimVfs| sim_config(v, JournalMode::WAL, ps).wal_sync(WalSync::Normal);
        let db = Database::open(DB, cfg(&vfs)).unwrap();
        for t in &txns {
            apply(&db, t).unwrap();
        }
        let crashed = vfs.crash(seed, CrashModel::full());
        drop(db);
        let db = Database::open(DB, cfg(&crashed)).unwrap();
        let got = dump(&db);
        assert!(
            states.contains(&got),
            "seed {seed}: not a prefix of the commits"
        );
        assert_checks(&db);
    }
}

#[test]
fn crash_during_recovery_is_recovered() {
    // Interrupt a rollback-journal commit, then cut the power again at every operation of
    // the recovery itself.
    let ps = 4096;
    let txns = scenario(51, ps);
    let states = states(&txns);
    let k = 4;
    for mode in matrix() {
        let vfs = SimVfs::new();
        let db = prepare(&vfs, mode, ps, &txns, k);
        let before = vfs.op_count();
        apply(&db, &txns[k]).unwrap();
        let ops = vfs.op_count() - before;
        drop(db);
        // Cut near the end of the commit, where the database file is being written.
        let cut = ops.saturating_sub(3);
        let vfs = SimVfs::new();
        let db = prepare(&vfs, mode, ps, &txns, k);
        vfs.set_power_cut_after(cut);
        let _ = apply(&db, &txns[k]);
        drop(db);
        let first = vfs.crash(7, CrashModel::full());
        // Measure recovery's own operations.
        let probe = first.crash(0, CrashModel::none());
        let before = probe.op_count();
        drop(Database::open(DB, sim_config(&probe, mode, ps)).unwrap());
        let rec_ops = probe.op_count() - before;
        for cut2 in 0..rec_ops {
            let second = first.crash(0, CrashModel::none());
            second.set_power_cut_after(cut2);
            let _ = Database::open(DB, sim_config(&second, mode, ps));
            let third = second.crash(cut2, CrashModel::full());
            let what = format!("{mode} recovery cut {cut2}/{rec_ops}");
            verify_after_crash(&third, mode, ps, &[&states[k], &states[k + 1]], &what);
        }
    }
}

/// A DHL database of `mode` on a fresh simulated disk with 3,000 rows of 200 bytes in
/// tree "t" (one transaction), left open.
fn dhl_table(mode: JournalMode) -> (SimVfs, Database, inpage::Tree) {
    let vfs = SimVfs::new();
    let db = Database::open(DB, sim_config(&vfs, mode, 4096)).unwrap();
    let mut w = db.begin_write().unwrap();
    let t = w.create_tree("t", inpage::KeyKind::Int).unwrap();
    for k in 0..3000 {
        w.insert(&t, k, &[k as u8; 200]).unwrap();
    }
    w.commit().unwrap();
    (vfs, db, t)
}

/// DHL: an open after a clean close reads O(1) pages (the clean-shutdown mark), an open
/// after a crash scans only the regions the intent map marks, and the first commit after
/// a clean reopen
/// voids the mark before it writes (so a crash anywhere inside it is recovered).
#[test]
fn dhl_open_after_a_clean_close_reads_constant_pages() {
    use inpage::vfs::{AccountingVfs, IoKind};
    let read_at_open = |v: &SimVfs, mode: JournalMode| {
        let acct = AccountingVfs::new(Arc::new(v.clone()));
        let stats = acct.stats();
        let db = Database::open(DB, sim_config(v, mode, 4096).vfs(Arc::new(acct))).unwrap();
        (stats.snapshot().get(IoKind::Read).bytes / 4096, db)
    };
    for mode in JournalMode::all().filter(|m| m.capabilities().intent_map) {
        let (vfs, db, _) = dhl_table(mode);
        db.insert("t", 1, b"last").unwrap();
        let pages = u64::from(db.header().page_count);
        assert!(pages > 150, "{mode}: {pages} pages");
        db.close().unwrap();
        let closed = vfs.crash(0, CrashModel::none());

        let (clean, db) = read_at_open(&closed.crash(0, CrashModel::none()), mode);
        assert!(
            clean <= 4,
            "{mode}: a clean reopen read {clean} of {pages} pages"
        );
        assert!(db.recovery_report().is_clean());
        assert_eq!(
            db.get("t", 1).unwrap().as_deref(),
            Some(&b"last"[..]),
            "{mode}"
        );
        drop(db);

        // A crash after the first commit of a session (no clean close): no mark, so a
        // scan, but only of the regions the intent map marks (the commit's own).
        let v = closed.crash(0, CrashModel::none());
        let db = Database::open(DB, sim_config(&v, mode, 4096)).unwrap();
        db.insert("t", 5000, b"after reopen").unwrap();
        let crashed = v.crash(0, CrashModel::none());
        drop(db);
        let (scanned, db) = read_at_open(&crashed, mode);
        assert!(
            scanned > 1 && scanned * 4 < pages,
            "{mode}: an open after a crash read {scanned} of {pages} pages"
        );
        assert_eq!(
            db.get("t", 5000).unwrap().as_deref(),
            Some(&b"after reopen"[..])
        );
        drop(db);

        // The first commit after a clean reopen, cut at every one of its operations and
        // torn: each state must open, pass the check, and hold the old or the new row.
        let mut cut = 0;
        loop {
            let v = closed.crash(0, CrashModel::none());
            let db = Database::open(DB, sim_config(&v, mode, 4096)).unwrap();
            v.set_power_cut_after(cut);
            let done = db.insert("t", 5000, b"after reopen").is_ok();
            let crashed = v.crash(cut + 1, CrashModel::full());
            drop(db);
            let db = Database::open(DB, sim_config(&crashed, mode, 4096))
                .unwrap_or_else(|e| panic!("{mode} cut {cut}: {e}"));
            assert_checks(&db);
            let got = db.get("t", 5000).unwrap();
            assert!(
                got.is_none() || got.as_deref() == Some(&b"after reopen"[..]),
                "{mode} cut {cut}: {got:?}"
            );
            if done {
                assert!(
                    got.is_some(),
                    "{mode} cut {cut}: an acknowledged commit was lost"
                );
            }
            assert_eq!(db.get("t", 1).unwrap().as_deref(), Some(&b"last"[..]));
            drop(db);
            if done {
                break;
            }
            cut += 1;
        }
        assert!(
            cut >= 3,
            "{mode}: the commit after the reopen took only {cut} operations"
        );
    }
}

/// One-row updates of table `t` (rows `0..rows`, 200-byte values) at keys drawn from a
/// seeded generator; each writes a value no row holds yet, so each commits a change.
struct RandomUpdates {
    rows: u64,
    seed: u64,
}

impl RandomUpdates {
    /// Create table `t` with `rows` rows in one transaction.
    fn load(db: &Database, rows: u64, seed: u64) -> RandomUpdates {
        let mut w = db.begin_write().unwrap();
        let t = w.create_tree("t", inpage::KeyKind::Int).unwrap();
        for k in 0..rows {
            w.insert(&t, k as i64, &[1u8; 200]).unwrap();
        }
        w.commit().unwrap();
        RandomUpdates { rows, seed }
    }

    fn run(&mut self, db: &Database, n: usize) {
        for _ in 0..n {
            self.seed = self
                .seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let mut value = [2u8; 200];
            value[..8].copy_from_slice(&self.seed.to_le_bytes());
            db.insert("t", ((self.seed >> 33) % self.rows) as i64, &value)
                .unwrap();
        }
    }

    /// The syncs `n` updates take beyond the protocol's own per commit (measured on a
    /// second update of one row: same page, so inside the marked regions): the marking
    /// syncs.
    fn marking_syncs(&mut self, db: &Database, stats: &inpage::vfs::IoStats, n: usize) -> u64 {
        let syncs = || stats.snapshot().get(inpage::vfs::IoKind::Sync).calls;
        db.insert("t", 7, &[4u8; 200]).unwrap();
        let before = syncs();
        db.insert("t", 7, &[5u8; 200]).unwrap();
        let per_commit = syncs() - before;
        let before = syncs();
        self.run(db, n);
        (syncs() - before).saturating_sub(n as u64 * per_commit)
    }
}

/// DHL: random one-row updates of a small, wholly hot table settle into one sync per
/// transaction (no marking write once the intent map covers the working set, by
/// coarsening its regions once), and an open after a crash still scans at most the
/// intent map's bound of regions, not the file.
#[test]
fn dhl_random_updates_of_a_small_hot_table_need_no_marking_writes() {
    use inpage::vfs::{AccountingVfs, IoKind};
    for mode in JournalMode::all().filter(|m| m.capabilities().intent_map) {
        let vfs = SimVfs::new();
        let acct = AccountingVfs::new(Arc::new(vfs.clone()));
        let stats = acct.stats();
        let db = Database::open(DB, sim_config(&vfs, mode, 4096).vfs(Arc::new(acct))).unwrap();
        let mut updates = RandomUpdates::load(&db, 1800, 0x9e37_79b9_7f4a_7c15);
        let pages = u64::from(db.header().page_count);
        // 4-page regions: the table spans more of them than the map keeps (24).
        assert!(
            pages > 24 * 4 && pages <= 2 * 24 * 4,
            "{mode}: {pages} pages"
        );
        updates.run(&db, 600);
        let extra = updates.marking_syncs(&db, &stats, 400);
        assert!(
            extra <= 4,
            "{mode}: 400 one-row updates of a {pages}-page table took {extra} marking syncs"
        );
        let crashed = vfs.crash(0, CrashModel::none());
        drop(db);
        let acct = AccountingVfs::new(Arc::new(crashed.clone()));
        let stats = acct.stats();
        let db = Database::open(DB, sim_config(&crashed, mode, 4096).vfs(Arc::new(acct))).unwrap();
        let read = stats.snapshot().get(IoKind::Read).bytes / 4096;
        assert!(
            read <= 24 * 8 + 4,
            "{mode}: recovery read {read} of {pages} pages"
        );
        assert_checks(&db);
    }
}

/// `intent_scan_mib` sets the trade the write-intent map makes: marks accumulate while
/// they span at most that much, so random one-row updates of a 2 MiB table pay a
/// marking sync on most commits under a 1 MiB budget and on almost none under 4 MiB,
/// while crash recovery reads at most the budget (plus page 0 and the header reads).
#[test]
fn dhl_scan_budget_trades_marking_syncs_for_recovery_reads() {
    use inpage::vfs::{AccountingVfs, IoKind};
    let mode = JournalMode::DHL_CC;
    assert!(mode.capabilities().intent_map);
    let mut seen = Vec::new();
    for mib in [1u32, 4] {
        let vfs = SimVfs::new();
        let acct = AccountingVfs::new(Arc::new(vfs.clone()));
        let stats = acct.stats();
        let config = || sim_config(&vfs, mode, 4096).intent_scan_mib(mib);
        let db = Database::open(DB, config().vfs(Arc::new(acct))).unwrap();
        let mut updates = RandomUpdates::load(&db, 7000, 0x2545_f491_4f6c_dd1d);
        let pages = u64::from(db.header().page_count);
        assert!((384..1024).contains(&pages), "{pages} pages");
        updates.run(&db, 300);
        let marking = updates.marking_syncs(&db, &stats, 200);
        let crashed = vfs.crash(0, CrashModel::none());
        drop(db);
        let acct = AccountingVfs::new(Arc::new(crashed.clone()));
        let stats = acct.stats();
        let db = Database::open(
            DB,
            sim_config(&crashed, mode, 4096)
                .intent_scan_mib(mib)
                .vfs(Arc::new(acct)),
        )
        .unwrap();
        let read = stats.snapshot().get(IoKind::Read).bytes / 4096;
        assert!(
            read <= u64::from(mib) * 256 + 8,
            "{mib} MiB budget: recovery read {read} of {pages} pages"
        );
        assert_checks(&db);
        seen.push((marking, read));
    }
    let (tight, loose) = (seen[0], seen[1]);
    assert!(
        tight.0 >= 100 && loose.0 <= 10,
        "marking syncs of 200 updates: {} under 1 MiB, {} under 4 MiB",
        tight.0,
        loose.0
    );
    assert!(loose.1 > tight.1, "recovery reads: {seen:?}");
}

/// DHL: the first write after a clean reopen takes its free pages from the snapshot the
/// close kept instead of walking every tree (debug builds also walk and compare, inside
/// the engine); a close cut short, or a damaged snapshot page, only makes it walk.
#[test]
fn dhl_first_write_after_a_clean_close_does_not_walk_the_trees() {
    use inpage::internals::{free_snapshot_ref, HEADER_SLOTS};
    use inpage::vfs::{AccountingVfs, IoKind};
    // Pages read by the first write transaction after an open (the open itself apart).
    let first_write_reads = |v: &SimVfs, mode: JournalMode, key: i64| {
        let acct = AccountingVfs::new(Arc::new(v.clone()));
        let stats = acct.stats();
        let db = Database::open(DB, sim_config(v, mode, 4096).vfs(Arc::new(acct))).unwrap();
        // Before the write: the check also proves a kept snapshot against the trees.
        assert_checks(&db);
        let before = stats.snapshot().get(IoKind::Read).bytes;
        db.insert("t", key, b"first write").unwrap();
        let n = (stats.snapshot().get(IoKind::Read).bytes - before) / 4096;
        assert_checks(&db);
        (n, db)
    };
    // The snapshot's first chain page, from the marked slot's reference.
    let chain_head = |v: &SimVfs| {
        let p0 = v.read_file(std::path::Path::new(DB)).unwrap();
        (0..HEADER_SLOTS)
            .find_map(|s| free_snapshot_ref(&p0, s).filter(|r| r.chain_pages > 0))
            .map(|r| r.head)
    };
    for mode in JournalMode::all().filter(|m| m.capabilities().intent_map) {
        let (vfs, db, t) = dhl_table(mode);
        // Free pages: delete a third of the rows.
        let mut w = db.begin_write().unwrap();
        for k in 1000..2000 {
            w.remove(&t, k).unwrap();
        }
        w.commit().unwrap();
        let pages = u64::from(db.header().page_count);
        db.close().unwrap();
        let closed = vfs.crash(0, CrashModel::none());
        let head = chain_head(&closed).unwrap_or_else(|| panic!("{mode}: no snapshot kept"));

        // Clean reopen: the first write reads a few pages, not the file.
        let (reads, db) = first_write_reads(&closed.crash(0, CrashModel::none()), mode, 5000);
        assert!(
            reads * 10 < pages,
            "{mode}: the first write read {reads} of {pages} pages"
        );
        drop(db);

        // A damaged snapshot page: the crc refuses it and the first write walks.
        let damaged = closed.crash(0, CrashModel::none());
        let mut bytes = damaged.read_file(std::path::Path::new(DB)).unwrap();
        bytes[head as usize * 4096 + 200] ^= 0x40;
        damaged.write_file(std::path::Path::new(DB), &bytes);
        let (reads, db) = first_write_reads(&damaged, mode, 5000);
        assert!(
            reads * 2 > pages,
            "{mode}: a damaged snapshot was used ({reads} of {pages} pages read)"
        );
        assert_eq!(
            db.get("t", 999).unwrap().as_deref(),
            Some(&[231u8; 200][..])
        );
        assert_eq!(db.get("t", 1500).unwrap(), None);
        drop(db);

        // A session that writes (voiding the mark), then crashes: no snapshot is
        // trusted, the next first write walks, and nothing is lost.
        let v = closed.crash(0, CrashModel::none());
        let db = Database::open(DB, sim_config(&v, mode, 4096)).unwrap();
        for k in 1000..1200 {
            db.insert("t", k, &[7u8; 300]).unwrap();
        }
        let crashed = v.crash(0, CrashModel::none());
        drop(db);
        let (reads, db) = first_write_reads(&crashed, mode, 5001);
        assert!(reads * 2 > pages, "{mode}: {reads} of {pages} pages read");
        assert_eq!(db.get("t", 1100).unwrap().as_deref(), Some(&[7u8; 300][..]));
        drop(db);

        // A close cut at every one of its operations, and torn: every state opens,
        // checks, keeps the rows, and its first write works (a snapshot it trusts is
        // compared with a walk inside the engine).
        let mut cut = 0;
        loop {
            let v = closed.crash(0, CrashModel::none());
            let db = Database::open(DB, sim_config(&v, mode, 4096)).unwrap();
            db.insert("t", 1500, b"session").unwrap();
            v.set_power_cut_after(cut);
            let done = db.close().is_ok() && !v.is_cut();
            let crashed = v.crash(cut + 1, CrashModel::full());
            let (_, db) = first_write_reads(&crashed, mode, 5002);
            assert_eq!(db.get("t", 1500).unwrap().as_deref(), Some(&b"session"[..]));
            assert_eq!(
                db.get("t", 2500).unwrap().as_deref(),
                Some(&[196u8; 200][..])
            );
            drop(db);
            if done {
                break;
            }
            cut += 1;
        }
        assert!(cut >= 2, "{mode}: the close took only {cut} operations");
    }
}

/// DHL counting modes: a transaction of at least `ordered_commit_pages` pages (page 0
/// among them) commits in order, so a crash before its header slot reaches the disk is
/// recovered from page 0 alone, where the counting vote would read every page it wrote.
/// The versions it left are invalidated at the start of the next commit; a crash anywhere
/// in that commit is recovered again to the old state or the old state plus that commit.
#[test]
fn dhl_large_transaction_cut_before_its_header_is_rolled_back_from_page_0() {
    use inpage::vfs::{AccountingVfs, IoKind};
    use inpage::ReadableTxn;
    // A cache that holds the whole transaction: cuts land in its commit, not in spills
    // (a spilling transaction's crash before its commit is a counting recovery).
    let big_cache = |c: inpage::Config| c.cache_pages(4096);
    let read_at_open = |v: &SimVfs, mode: JournalMode| {
        let acct = AccountingVfs::new(Arc::new(v.clone()));
        let stats = acct.stats();
        let db =
            Database::open(DB, big_cache(sim_config(v, mode, 4096)).vfs(Arc::new(acct))).unwrap();
        (stats.snapshot().get(IoKind::Read).bytes / 4096, db)
    };
    let big = |db: &Database| -> inpage::Result<()> {
        let mut w = db.begin_write()?;
        let t = w.open_tree("t")?;
        for k in 0..3000 {
            w.insert(&t, k, &[0xB1; 300])?;
        }
        w.commit()
    };
    let old = |db: &Database, what: &str| {
        for k in (0..3000).step_by(97) {
            assert_eq!(
                db.get("t", k).unwrap().as_deref(),
                Some(&[k as u8; 200][..]),
                "{what}: row {k}"
            );
        }
    };
    let modes = JournalMode::all().filter(|m| m.capabilities().intent_map && m.name() != "dhl-tc");
    for mode in modes {
        let (vfs, db, _) = dhl_table(mode);
        db.close().unwrap();
        let base = vfs.crash(0, CrashModel::none());
        // Reference run: the operations of the large commit.
        let v = base.crash(0, CrashModel::none());
        let db = Database::open(DB, big_cache(sim_config(&v, mode, 4096))).unwrap();
        let before = v.op_count();
        big(&db).unwrap();
        let ops = v.op_count() - before;
        drop(db);
        for cut in [ops / 4, ops / 2, ops * 3 / 4] {
            let what = format!("{mode} cut {cut}/{ops}");
            let v = base.crash(0, CrashModel::none());
            let db = Database::open(DB, big_cache(sim_config(&v, mode, 4096))).unwrap();
            v.set_power_cut_after(cut);
            assert!(big(&db).is_err(), "{what}: the commit should see the cut");
            drop(db);
            let crashed = v.crash(cut, CrashModel::full());
            let (read, db) = read_at_open(&crashed, mode);
            assert!(read <= 4, "{what}: the open read {read} pages");
            let r = db.recovery_report();
            assert!(r.rolled_back && r.pages_restored == 0, "{what}: {r:?}");
            old(&db, &what);
            drop(db);
            // The next commit invalidates what the cut transaction left; cut it at every
            // operation too.
            let mut cut2 = 0;
            loop {
                let w = crashed.crash(0, CrashModel::none());
                let db = Database::open(DB, big_cache(sim_config(&w, mode, 4096))).unwrap();
                w.set_power_cut_after(cut2);
                let done = db.insert("t", 9_999, b"after").is_ok();
                let again = w.crash(cut2, CrashModel::full());
                drop(db);
                let what = format!("{what}, next commit cut {cut2}");
                let db = Database::open(DB, big_cache(sim_config(&again, mode, 4096)))
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                assert_checks(&db);
                old(&db, &what);
                let got = db.get("t", 9_999).unwrap();
                assert!(
                    got.as_deref() == Some(&b"after"[..]) || (got.is_none() && !done),
                    "{what}: {got:?} (acknowledged: {done})"
                );
                if done {
                    // And the file holds no version of the cut transaction any more: a
                    // second reopen after a crash finds the row and the old rows alone.
                    db.insert("t", 10_000, b"later").unwrap();
                    let last = again.crash(0, CrashModel::none());
                    drop(db);
                    let db = Database::open(DB, big_cache(sim_config(&last, mode, 4096))).unwrap();
                    assert_checks(&db);
                    old(&db, &what);
                    assert_eq!(db.get("t", 10_000).unwrap().as_deref(), Some(&b"later"[..]));
                    break;
                }
                cut2 += 1;
            }
            assert!(cut2 >= 3, "{what}: the next commit took {cut2} operations");
        }
    }
}
