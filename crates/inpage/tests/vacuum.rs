//! Giving free pages back (`auto_vacuum`, `WriteTxn::vacuum_free`): in every mode whose
//! free space is a page list, the pages at the end of the file move into free pages below
//! — tree nodes, roots (the catalog's included), overflow chains of values and of long
//! keys — and the page count and, after a checkpoint, the file drop by the pages given
//! back; every row reads back the same and the integrity check passes; a savepoint
//! rolled back undoes it; `Full` gives every free page back at each commit, `Incremental`
//! only when asked; the setting survives a reopen; modes that cannot move pages refuse.

mod common;

use std::collections::BTreeMap;

use common::*;
use inpage::{AutoVacuum, Database, Error, JournalMode, KeyKind, ReadableTxn};
use inpage_sim::SimVfs;

const PS: u32 = 1024;

/// What every tree holds, by name: (key bytes, value).
type Content = BTreeMap<String, Vec<(Vec<u8>, Vec<u8>)>>;

fn content<T: ReadableTxn>(txn: &T) -> Content {
    let mut out = Content::new();
    for info in txn.list_trees().unwrap() {
        let t = txn.open_tree(&info.name).unwrap();
        let mut c = txn.cursor(&t).unwrap();
        let mut rows = Vec::new();
        let mut ok = c.first().unwrap();
        while ok {
            let k = c.key().unwrap().unwrap();
            rows.push((format!("{k:?}").into_bytes(), c.value().unwrap().unwrap()));
            ok = c.next().unwrap();
        }
        out.insert(info.name.clone(), rows);
    }
    out
}

/// Four trees, loaded interleaved so every tree has pages all over the file: small rows,
/// values in overflow chains (3 pages each at 1 KiB pages), and byte keys too long to
/// store whole (their tails in chains, in leaves and, as separators, in interior pages).
fn load(db: &Database, n: i64) {
    let mut w = db.begin_write().unwrap();
    let small = w.create_tree("small", KeyKind::Int).unwrap();
    let big = w.create_tree("big", KeyKind::Int).unwrap();
    let long = w.create_tree("long", KeyKind::Bytes).unwrap();
    let doomed = w.create_tree("doomed", KeyKind::Int).unwrap();
    for k in 0..n {
        w.insert(&small, k, &value_for(k, 1, 60)).unwrap();
        if k % 4 == 0 {
            w.insert(&big, k, &value_for(k, 1, 2500)).unwrap();
        }
        if k % 8 == 0 {
            let key = format!("{k:08}").repeat(40).into_bytes();
            w.insert(&long, key.as_slice(), &value_for(k, 1, 20))
                .unwrap();
        }
        w.insert(&doomed, k, &value_for(k, 1, 100)).unwrap();
    }
    w.commit().unwrap();
}

/// Free pages all over the file: drop one tree, delete most rows of the others.
fn free_much(db: &Database) {
    let mut w = db.begin_write().unwrap();
    w.drop_tree("doomed").unwrap();
    let small = w.open_tree("small").unwrap();
    let big = w.open_tree("big").unwrap();
    let keys: Vec<i64> = rows_of(&w, "small").into_keys().collect();
    for k in keys {
        if k % 5 != 0 {
            w.remove(&small, k).unwrap();
            w.remove(&big, k).unwrap();
        }
    }
    w.commit().unwrap();
}

#[test]
fn vacuum_free_moves_every_kind_of_page_and_shrinks_in_every_page_list_mode() {
    for mode in page_list_modes() {
        let vfs = SimVfs::new();
        let db = Database::open(DB, sim_config(&vfs, mode, PS)).unwrap();
        load(&db, 600);
        free_much(&db);
        let want = content(&db.begin_read().unwrap());
        let h = db.header();
        assert!(
            h.freelist_count > 100,
            "{mode}: {} free pages",
            h.freelist_count
        );
        // A few pages first (the incremental steps), then the rest.
        let mut w = db.begin_write().unwrap();
        assert_eq!(w.vacuum_free(3).unwrap(), 3, "{mode}");
        assert_eq!(
            content(&w),
            want,
            "{mode}: after 3 pages, in the transaction"
        );
        w.commit().unwrap();
        assert_eq!(db.header().page_count, h.page_count - 3, "{mode}");
        assert_checks(&db);
        let mut w = db.begin_write().unwrap();
        let n = w.vacuum_free(u32::MAX).unwrap();
        assert_eq!(n, h.freelist_count - 3, "{mode}");
        w.commit().unwrap();
        let after = db.header();
        assert_eq!(after.freelist_count, 0, "{mode}");
        assert_eq!(after.page_count, h.page_count - h.freelist_count, "{mode}");
        assert_eq!(content(&db.begin_read().unwrap()), want, "{mode}");
        assert_checks(&db);
        // One more commit (`dash` cuts each of its two files when a commit makes it
        // current), then the log into the file: the file is cut to the page count.
        touch(&db);
        db.checkpoint().unwrap();
        assert_eq!(
            file_len(&vfs),
            u64::from(db.header().page_count) * u64::from(PS),
            "{mode}: the file is cut back to the page count"
        );
        // Reopened, the data and the structure are intact.
        drop(db);
        let db = Database::open(DB, sim_config(&vfs, mode, PS)).unwrap();
        assert_eq!(
            content(&db.begin_read().unwrap()),
            want,
            "{mode}: after a reopen"
        );
        assert_checks(&db);
    }
}

#[test]
fn full_gives_every_free_page_back_at_each_commit_and_survives_a_reopen() {
    for mode in page_list_modes() {
        let vfs = SimVfs::new();
        let db = Database::open(DB, sim_config(&vfs, mode, PS)).unwrap();
        let mut w = db.begin_write().unwrap();
        w.set_auto_vacuum(AutoVacuum::Full).unwrap();
        w.commit().unwrap();
        load(&db, 400);
        assert_eq!(db.header().auto_vacuum, AutoVacuum::Full, "{mode}");
        let loaded = db.header().page_count;
        free_much(&db);
        let h = db.header();
        assert_eq!(
            h.freelist_count, 0,
            "{mode}: no free page stays after a commit"
        );
        assert!(
            h.page_count * 2 < loaded,
            "{mode}: {loaded} pages, then {}",
            h.page_count
        );
        assert_checks(&db);
        drop(db);
        let db = Database::open(DB, sim_config(&vfs, mode, PS)).unwrap();
        assert_eq!(
            db.begin_read().unwrap().auto_vacuum(),
            AutoVacuum::Full,
            "{mode}"
        );
        // Growth after the shrink reuses nothing stale and checks clean.
        load_more(&db);
        assert_checks(&db);
    }
}

/// A commit that changes one row of "small" in place (the file does not grow).
fn touch(db: &Database) {
    let mut w = db.begin_write().unwrap();
    let small = w.open_tree("small").unwrap();
    let v = w.get(&small, 0i64).unwrap().unwrap();
    w.insert(&small, 0i64, &v).unwrap();
    w.commit().unwrap();
}

fn load_more(db: &Database) {
    let mut w = db.begin_write().unwrap();
    let big = w.open_tree("big").unwrap();
    for k in 10_000..10_050 {
        w.insert(&big, k, &value_for(k, 3, 3000)).unwrap();
    }
    w.commit().unwrap();
}

#[test]
fn incremental_keeps_free_pages_until_asked_and_a_rollback_undoes_a_move() {
    let mode = JournalMode::WAL;
    let vfs = SimVfs::new();
    let db = Database::open(DB, sim_config(&vfs, mode, PS)).unwrap();
    let mut w = db.begin_write().unwrap();
    w.set_auto_vacuum(AutoVacuum::Incremental).unwrap();
    w.commit().unwrap();
    load(&db, 300);
    free_much(&db);
    let h = db.header();
    assert!(h.freelist_count > 50, "{} free pages", h.freelist_count);
    let want = content(&db.begin_read().unwrap());
    let mut w = db.begin_write().unwrap();
    let sp = w.savepoint();
    assert_eq!(w.vacuum_free(u32::MAX).unwrap(), h.freelist_count);
    w.rollback_to(&sp).unwrap();
    assert_eq!(w.snapshot_header().page_count, h.page_count);
    assert_eq!(content(&w), want);
    w.commit().unwrap();
    assert_eq!(db.header().freelist_count, h.freelist_count);
    assert_checks(&db);
}

#[test]
fn a_reader_keeps_its_snapshot_across_a_move() {
    for mode in page_list_modes() {
        let vfs = SimVfs::new();
        let db = Database::open(DB, sim_config(&vfs, mode, PS)).unwrap();
        load(&db, 300);
        free_much(&db);
        let r = db.begin_read().unwrap();
        let want = content(&r);
        let mut w = db.begin_write().unwrap();
        w.vacuum_free(u32::MAX).unwrap();
        w.commit().unwrap();
        apply(&db, &[(7, Some(value_for(7, 9, 60)))]).unwrap_or_else(|e| panic!("{mode}: {e}"));
        assert_eq!(content(&r), want, "{mode}: the reader's snapshot");
        drop(r);
        assert_checks(&db);
    }
}

#[test]
fn modes_that_cannot_move_pages_refuse_and_change_nothing() {
    for mode in JournalMode::all().filter(|m| !m.keeps_free_list()) {
        let vfs = SimVfs::new();
        let db = Database::open(DB, sim_config(&vfs, mode, PS)).unwrap();
        load(&db, 50);
        let before = db.header();
        let mut w = db.begin_write().unwrap();
        assert!(!w.can_vacuum(), "{mode}");
        assert!(
            matches!(
                w.set_auto_vacuum(AutoVacuum::Full),
                Err(Error::InvalidArgument(_))
            ),
            "{mode}"
        );
        assert!(
            matches!(w.vacuum_free(1), Err(Error::InvalidArgument(_))),
            "{mode}"
        );
        w.set_auto_vacuum(AutoVacuum::None).unwrap();
        w.commit().unwrap();
        assert_eq!(db.header().page_count, before.page_count, "{mode}");
        assert_eq!(db.header().auto_vacuum, AutoVacuum::None, "{mode}");
    }
}
