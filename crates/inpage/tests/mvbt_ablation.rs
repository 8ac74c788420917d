//! The multi-version B-tree modes against each other (issue 16): the paper's Fig. 6
//! workload (a 2,000-row table, transactions each inserting one random key and deleting
//! another) counted in page writes and syncs on the accounting VFS, and the file size
//! after many one-row updates. Every run is checked against a model, so a mode that saved
//! writes by losing data fails; the assertions are on counts, never on time.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::*;
use inpage::vfs::{AccountingVfs, IoKind};
use inpage::{Config, Database, JournalMode, KeyKind};
use inpage_sim::SimVfs;

const ROWS: i64 = 2000;
const TXNS: usize = 300;

fn modes() -> Vec<JournalMode> {
    JournalMode::all()
        .filter(|m| m.to_string().contains("mvbt"))
        .collect()
}

/// xorshift, so the workload is the same for every mode.
fn next(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

struct Run {
    writes_per_txn: f64,
    syncs_per_txn: f64,
}

/// Load `ROWS` rows (100-byte values), then `TXNS` transactions each inserting a fresh
/// random key and deleting a random existing one; page writes and syncs per transaction
/// of the second phase.
fn fig6(mode: JournalMode) -> Run {
    let sim = SimVfs::new();
    let acc = AccountingVfs::new(Arc::new(sim.clone()));
    let stats = acc.stats();
    let cfg = Config::default()
        .vfs(Arc::new(acc))
        .journal_mode(mode)
        .page_size(4096);
    let db = Database::open(DB, cfg).unwrap();
    let mut model = BTreeMap::new();
    let mut w = db.begin_write().unwrap();
    let t = w.create_tree("t", KeyKind::Int).unwrap();
    let mut x = 0x2545_f491_4f6c_dd1d_u64;
    while model.len() < ROWS as usize {
        let k = (next(&mut x) % 1_000_000) as i64;
        let v = value_for(k, 0, 100);
        w.insert(&t, k, &v).unwrap();
        model.insert(k, v);
    }
    w.commit().unwrap();
    let before = stats.snapshot();
    for i in 0..TXNS {
        let mut w = db.begin_write().unwrap();
        let k = (next(&mut x) % 1_000_000) as i64;
        let v = value_for(k, i as u32, 100);
        w.insert(&t, k, &v).unwrap();
        model.insert(k, v);
        let victim = *model
            .keys()
            .nth((next(&mut x) % model.len() as u64) as usize)
            .unwrap();
        assert!(w.remove(&t, victim).unwrap().is_some(), "{mode}");
        model.remove(&victim);
        w.commit().unwrap();
    }
    let d = stats.snapshot().delta(&before);
    assert_eq!(dump(&db), model, "{mode}");
    assert_checks(&db);
    Run {
        writes_per_txn: d.get(IoKind::Write).calls as f64 / TXNS as f64,
        syncs_per_txn: d.get(IoKind::Sync).calls as f64 / TXNS as f64,
    }
}

#[test]
fn fig6_page_writes_per_transaction() {
    let mut runs = BTreeMap::new();
    // `dhl-cc` and `ips` for reference (printed, not compared).
    let reference = [JournalMode::DHL_CC, JournalMode::IPS];
    for mode in modes().into_iter().chain(reference) {
        let r = fig6(mode);
        eprintln!(
            "{mode}: {:.2} page writes, {:.2} syncs per transaction",
            r.writes_per_txn, r.syncs_per_txn
        );
        runs.insert(mode.to_string(), r.writes_per_txn);
    }
    let ls = runs["ls-mvbt"];
    // The plain MVBT writes the header page with every commit and keeps dead entries, and
    // so writes more pages than LS-MVBT; so does LS-MVBT writing the FCC to the header
    // page, and LS-MVBT keeping dead entries (their records stay named, so their bytes
    // are not reused in place and nodes are copied sooner). A version split writes as
    // many pages as a lazy one here — the old node is freed, never rewritten, since free
    // pages are found by the tree walk — and reserved space changes little in this short
    // run: neither is compared (the bench measures them, BENCHMARKS.md "LS-MVBT").
    assert!(runs["mvbt"] > ls + 0.5, "{runs:?}");
    assert!(runs["ls-mvbt-header"] > ls + 0.5, "{runs:?}");
    assert!(runs["ls-mvbt-no-gc"] > ls, "{runs:?}");
}

/// Many one-row updates of a small table: dead records are reclaimed (copied out of
/// nodes, dead nodes freed and reused), so the file stays within a small multiple of the
/// size it had after the load.
#[test]
fn the_file_stays_bounded_under_updates() {
    for mode in modes() {
        let vfs = SimVfs::new();
        let db = Database::open(DB, sim_config(&vfs, mode, 4096)).unwrap();
        let mut w = db.begin_write().unwrap();
        let t = w.create_tree("t", KeyKind::Int).unwrap();
        for k in 0..ROWS {
            w.insert(&t, k, &value_for(k, 0, 100)).unwrap();
        }
        w.commit().unwrap();
        let loaded = db.header().page_count;
        let mut x = 0x9e37_79b9_u64;
        let mut model: BTreeMap<i64, Vec<u8>> =
            (0..ROWS).map(|k| (k, value_for(k, 0, 100))).collect();
        for i in 1..=3000u32 {
            let k = (next(&mut x) % ROWS as u64) as i64;
            let v = value_for(k, i, 100);
            let mut w = db.begin_write().unwrap();
            w.insert(&t, k, &v).unwrap();
            w.commit().unwrap();
            model.insert(k, v);
        }
        let after = db.header().page_count;
        eprintln!("{mode}: {loaded} pages after the load, {after} after 3,000 updates");
        assert_eq!(dump(&db), model, "{mode}");
        assert!(after <= 3 * loaded, "{mode}: {loaded} -> {after} pages");
    }
}
