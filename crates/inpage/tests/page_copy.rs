//! Page-for-page copies (`WriteTxn::begin_page_copy` / `copy_pages`, what the SQL
//! layer's online backup copies with): in every mode whose pages hold no versions, a copy
//! in steps makes the destination the source's state (rows, trees, free pages, meta
//! values) and a file that opens and checks clean; a commit with pages missing is
//! refused and leaves the destination as it was; a source that moved is refused; modes
//! whose pages hold versions refuse to begin.

mod common;

use common::*;
use inpage::{Database, Error, JournalMode, KeyKind, ReadableTxn};
use inpage_sim::SimVfs;

const PS: u32 = 1024;
const SRC: &str = "/db/source.db";

/// A source with two trees, free pages (deleted rows) and meta values.
fn source(vfs: &SimVfs, mode: JournalMode) -> Database {
    let db = Database::open(SRC, sim_config(vfs, mode, PS)).unwrap();
    let mut w = db.begin_write().unwrap();
    let t = w.open_or_create_tree("t", KeyKind::Int).unwrap();
    let u = w.open_or_create_tree("u", KeyKind::Bytes).unwrap();
    for k in 0..600 {
        w.insert(&t, k, &value_for(k, 3, 150)).unwrap();
        w.insert(&u, format!("key-{k:05}").as_bytes(), &value_for(k, 4, 40))
            .unwrap();
    }
    w.insert(&t, 9_999, &value_for(9_999, 3, 5_000)).unwrap(); // an overflow chain
    w.set_meta(1, 77).unwrap();
    w.commit().unwrap();
    let mut w = db.begin_write().unwrap();
    let t = w.open_tree("t").unwrap();
    for k in (0..600).filter(|k| k % 3 != 0) {
        w.remove(&t, k).unwrap();
    }
    w.commit().unwrap();
    assert!(
        db.header().freelist_count > 0,
        "{mode}: the source has free pages"
    );
    db
}

/// A destination holding other rows (more pages than the copy needs).
fn destination(vfs: &SimVfs, mode: JournalMode) -> Database {
    let db = Database::open(DB, sim_config(vfs, mode, PS)).unwrap();
    let mut w = db.begin_write().unwrap();
    let t = w.open_or_create_tree("t", KeyKind::Int).unwrap();
    for k in 0..3_000 {
        w.insert(&t, k, &value_for(k, 1, 200)).unwrap();
    }
    w.commit().unwrap();
    db
}

fn bytes_rows<T: ReadableTxn>(txn: &T) -> Vec<(Vec<u8>, Vec<u8>)> {
    let u = txn.open_tree("u").unwrap();
    txn.iter(&u)
        .unwrap()
        .map(|kv| {
            let (k, v) = kv.unwrap();
            (k.as_bytes().unwrap().to_vec(), v)
        })
        .collect()
}

fn copyable(mode: JournalMode) -> bool {
    let vfs = SimVfs::new();
    let src = Database::open(SRC, sim_config(&vfs, mode, PS)).unwrap();
    let dst = Database::open(DB, sim_config(&vfs, mode, PS)).unwrap();
    let r = src.begin_read().unwrap();
    let w = dst.begin_write().unwrap();
    w.can_copy_pages_of(&r)
}

#[test]
fn a_copy_in_steps_makes_the_destination_the_source_state() {
    let mut copied = 0;
    for mode in JournalMode::all().filter(|m| copyable(*m)) {
        copied += 1;
        let vfs = SimVfs::new();
        let src = source(&vfs, mode);
        let dst = destination(&vfs, mode);
        let r = src.begin_read().unwrap();
        let mut w = dst.begin_write().unwrap();
        let count = w.begin_page_copy(&r).unwrap();
        assert_eq!(count, src.header().page_count, "{mode}");
        let mut left = count - 1;
        let mut steps = 0;
        while left > 0 {
            let now = w.copy_pages(&r, 7).unwrap();
            assert_eq!(now, left.saturating_sub(7), "{mode}: pages left");
            left = now;
            steps += 1;
        }
        assert!(steps > 3, "{mode}: {count} pages in steps of 7");
        w.commit().unwrap();
        assert_eq!(dump(&dst), rows_of(&r, "t"), "{mode}");
        let d = dst.begin_read().unwrap();
        assert_eq!(bytes_rows(&d), bytes_rows(&r), "{mode}");
        assert_eq!(d.meta(1).unwrap(), 77, "{mode}: meta values come along");
        drop(d);
        assert_eq!(dst.header().page_count, count, "{mode}");
        assert_eq!(dst.header().freelist_count, src.header().freelist_count);
        assert_checks(&dst);
        // The copy lives on: reopened, written to (its free pages reused), checked.
        drop(r);
        drop(dst);
        let dst = Database::open(DB, sim_config(&vfs, mode, PS)).unwrap();
        apply(&dst, &[(5_000, Some(value_for(5_000, 9, 300))), (3, None)]).unwrap();
        let mut want = rows_of(&src.begin_read().unwrap(), "t");
        want.insert(5_000, value_for(5_000, 9, 300));
        want.remove(&3);
        assert_eq!(dump(&dst), want, "{mode}: after reopen and a write");
        assert_checks(&dst);
    }
    assert!(copied >= 5, "only {copied} modes copy pages");
}

#[test]
fn an_unfinished_copy_does_not_commit_and_a_moved_source_is_refused() {
    for mode in JournalMode::all().filter(|m| copyable(*m)) {
        let vfs = SimVfs::new();
        let src = source(&vfs, mode);
        let dst = destination(&vfs, mode);
        let before = dump(&dst);
        let r = src.begin_read().unwrap();
        let mut w = dst.begin_write().unwrap();
        w.begin_page_copy(&r).unwrap();
        w.copy_pages(&r, 5).unwrap();
        match w.commit() {
            Err(Error::InvalidArgument(m)) => assert!(m.contains("not copied"), "{m}"),
            other => panic!("{mode}: commit of a half copy: {other:?}"),
        }
        assert_eq!(dump(&dst), before, "{mode}: the destination is as it was");
        assert_checks(&dst);
        // The source commits between two steps: the copy refuses to go on.
        let mut w = dst.begin_write().unwrap();
        w.begin_page_copy(&r).unwrap();
        w.copy_pages(&r, 5).unwrap();
        drop(r);
        apply(&src, &[(1, Some(value_for(1, 8, 10)))]).unwrap();
        let r2 = src.begin_read().unwrap();
        assert!(
            matches!(w.copy_pages(&r2, 5), Err(Error::InvalidArgument(_))),
            "{mode}: a copy from a source that moved"
        );
        // Starting over from the new state works.
        w.rollback_all().unwrap();
        w.begin_page_copy(&r2).unwrap();
        assert_eq!(w.copy_pages(&r2, u32::MAX).unwrap(), 0);
        w.commit().unwrap();
        assert_eq!(dump(&dst), rows_of(&r2, "t"), "{mode}");
        assert_checks(&dst);
    }
}

#[test]
fn modes_whose_pages_hold_versions_refuse_to_begin() {
    let mut refused = 0;
    for mode in JournalMode::all().filter(|m| !m.keeps_free_list()) {
        let vfs = SimVfs::new();
        let src = Database::open(SRC, sim_config(&vfs, mode, PS)).unwrap();
        apply(&src, &[(1, Some(value_for(1, 1, 10)))]).unwrap();
        let dst = destination(&vfs, mode);
        let before = dump(&dst);
        let r = src.begin_read().unwrap();
        let mut w = dst.begin_write().unwrap();
        assert!(!w.can_copy_pages_of(&r), "{mode}");
        assert!(
            matches!(w.begin_page_copy(&r), Err(Error::InvalidArgument(_))),
            "{mode}"
        );
        w.commit().unwrap();
        assert_eq!(dump(&dst), before, "{mode}");
        refused += 1;
    }
    assert!(refused >= 5, "only {refused} modes refused");
}
