//! Deferred merges (`TreePolicy::defers_merges`, IPS): a delete that leaves a leaf
//! underfull keeps it in place (one page write) instead of merging it with a sibling,
//! and the data stays exactly the model's. The same workload under `dhl-cc` (which
//! merges) ends with fewer leaves, so the difference is the deferral, not the workload.

mod common;

use std::collections::BTreeMap;

use common::*;
use inpage::check::check;
use inpage::{Database, JournalMode, KeyKind};
use inpage_sim::SimVfs;

/// Leaves after loading 600 rows and deleting 540 of them one per transaction; the tree
/// is checked against the model.
fn leaves_after_deletes(mode: JournalMode) -> u64 {
    let vfs = SimVfs::new();
    let db = Database::open(DB, sim_config(&vfs, mode, 512)).unwrap();
    let mut model = BTreeMap::new();
    let mut w = db.begin_write().unwrap();
    let t = w.create_tree("t", KeyKind::Int).unwrap();
    for k in 0..600i64 {
        let v = value_for(k, 0, 30);
        w.insert(&t, k, &v).unwrap();
        model.insert(k, v);
    }
    w.commit().unwrap();
    // Every key not divisible by 10, in a scattered order.
    let mut victims: Vec<i64> = (0..600).filter(|k| k % 10 != 0).collect();
    victims.sort_by_key(|k| (k * 7919) % 601);
    for k in victims {
        let mut w = db.begin_write().unwrap();
        assert!(w.remove(&t, k).unwrap().is_some(), "{mode}: key {k}");
        w.commit().unwrap();
        model.remove(&k);
    }
    assert_eq!(dump(&db), model, "{mode}");
    let r = db.begin_read().unwrap();
    let rep = check(&r, &Default::default()).unwrap();
    let (_, s) = rep.trees.iter().find(|(i, _)| i.name == "t").unwrap();
    s.leaf_pages
}

#[test]
fn ips_defers_merges_that_dhl_makes() {
    let dhl_leaves = leaves_after_deletes(JournalMode::DHL_CC);
    let ips_leaves = leaves_after_deletes(JournalMode::IPS);
    assert!(
        ips_leaves > dhl_leaves,
        "ips {ips_leaves} leaves, dhl-cc {dhl_leaves}: no merge was deferred"
    );
}
