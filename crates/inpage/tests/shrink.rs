//! Shrinking the database (`WriteTxn::clear_all`, what `VACUUM` rebuilds with): in every
//! mode whose free space is a page list the page count drops to the rebuilt content and
//! the file is cut back to it once the journal has it all in the file; readers of the
//! longer state keep reading it whole across the shrink, the cut and later growth; modes
//! that cannot shrink refuse without changing anything.

mod common;

use std::collections::BTreeMap;

use common::*;
use inpage::{Database, Error, JournalMode, KeyKind, ReadableTxn, WriteTxn};
use inpage_sim::SimVfs;

const PS: u32 = 1024;

/// Rows 0..n of tree "t", 200-byte values (version 1).
fn load(db: &Database, n: i64) {
    let mut w = db.begin_write().unwrap();
    let t = w.open_or_create_tree("t", KeyKind::Int).unwrap();
    for k in 0..n {
        w.insert(&t, k, &value_for(k, 1, 200)).unwrap();
    }
    w.commit().unwrap();
}

/// Rebuild as `VACUUM` does: keep the rows `keep` selects, empty the database, load them.
fn rebuild(w: &mut WriteTxn, keep: impl Fn(i64) -> bool) -> inpage::Result<()> {
    let rows: Vec<(i64, Vec<u8>)> = rows_of(&*w, "t")
        .into_iter()
        .filter(|(k, _)| keep(*k))
        .collect();
    w.clear_all()?;
    let t = w.create_tree("t", KeyKind::Int)?;
    w.load_tree(&t, |l| {
        for (k, v) in &rows {
            l.push(*k, v)?;
        }
        Ok(())
    })?;
    Ok(())
}

#[test]
fn a_rebuild_shrinks_the_page_count_and_the_file_in_every_page_list_mode() {
    for mode in page_list_modes() {
        let vfs = SimVfs::new();
        let db = Database::open(DB, sim_config(&vfs, mode, PS)).unwrap();
        load(&db, 2000);
        db.checkpoint().unwrap();
        let before = db.header().page_count;
        let mut w = db.begin_write().unwrap();
        rebuild(&mut w, |k| k % 10 == 0).unwrap();
        w.commit().unwrap();
        // One more commit: `dash` cuts each of its two files back when a commit makes it
        // current, so the main file is cut within two commits of the shrink.
        apply(&db, &[(0, Some(value_for(0, 1, 200)))]).unwrap();
        db.checkpoint().unwrap();
        let after = db.header().page_count;
        assert!(
            after * 5 < before,
            "{mode}: {before} pages before the rebuild, {after} after"
        );
        assert_eq!(
            file_len(&vfs),
            u64::from(after) * u64::from(PS),
            "{mode}: the file is cut back to the page count after a checkpoint"
        );
        let want: BTreeMap<i64, Vec<u8>> = (0..2000)
            .filter(|k| k % 10 == 0)
            .map(|k| (k, value_for(k, 1, 200)))
            .collect();
        assert_eq!(dump(&db), want, "{mode}");
        assert_checks(&db);
        // The file grows again from the shrunken end, and reopens whole.
        load(&db, 300);
        db.close().unwrap();
        let db = Database::open(DB, sim_config(&vfs, mode, PS)).unwrap();
        let mut want = want;
        want.extend((0..300).map(|k| (k, value_for(k, 1, 200))));
        assert_eq!(dump(&db), want, "{mode} after growth and a reopen");
        assert_checks(&db);
    }
}

#[test]
fn a_reader_of_the_longer_state_reads_it_whole_across_the_shrink_the_cut_and_growth() {
    for mode in page_list_modes() {
        let vfs = SimVfs::new();
        let db = Database::open(DB, sim_config(&vfs, mode, PS)).unwrap();
        load(&db, 1500);
        let old = dump(&db);
        let r = db.begin_read().unwrap();
        let mut w = db.begin_write().unwrap();
        rebuild(&mut w, |k| k < 20).unwrap();
        w.commit().unwrap();
        db.checkpoint().unwrap();
        // Growth over the pages past the shrunken end, with new images, then all of it
        // into the file.
        let mut w = db.begin_write().unwrap();
        let t = w.open_tree("t").unwrap();
        for k in 0..1500 {
            w.insert(&t, k, &value_for(k, 2, 200)).unwrap();
        }
        w.commit().unwrap();
        db.checkpoint().unwrap();
        let seen = rows_of(&r, "t");
        assert!(seen == old, "{mode}: the old reader saw another state");
        drop(r);
        let now: BTreeMap<i64, Vec<u8>> = (0..1500).map(|k| (k, value_for(k, 2, 200))).collect();
        assert_eq!(dump(&db), now, "{mode}");
        assert_checks(&db);
    }
}

#[test]
fn a_rebuild_rolled_back_to_a_savepoint_or_aborted_leaves_the_database_as_it_was() {
    for mode in page_list_modes() {
        let vfs = SimVfs::new();
        let db = Database::open(DB, sim_config(&vfs, mode, PS)).unwrap();
        load(&db, 500);
        let old = dump(&db);
        let pages = db.header().page_count;
        let mut w = db.begin_write().unwrap();
        let sp = w.savepoint();
        rebuild(&mut w, |k| k < 3).unwrap();
        w.rollback_to(&sp).unwrap();
        w.commit().unwrap();
        assert_eq!(dump(&db), old, "{mode}: rolled back to the savepoint");
        let mut w = db.begin_write().unwrap();
        rebuild(&mut w, |k| k < 3).unwrap();
        w.rollback().unwrap();
        assert_eq!(dump(&db), old, "{mode}: rolled back");
        assert_eq!(db.header().page_count, pages, "{mode}");
        assert_checks(&db);
    }
}

#[test]
fn modes_that_cannot_shrink_refuse_and_change_nothing() {
    for mode in JournalMode::all().filter(|m| !m.keeps_free_list()) {
        let vfs = SimVfs::new();
        let db = Database::open(DB, sim_config(&vfs, mode, PS)).unwrap();
        load(&db, 200);
        let old = dump(&db);
        let mut w = db.begin_write().unwrap();
        assert!(!w.can_clear_all(), "{mode}");
        match w.clear_all() {
            Err(Error::InvalidArgument(msg)) => assert!(msg.contains("page-list"), "{msg}"),
            other => panic!("{mode}: clear_all gave {other:?}"),
        }
        w.commit().unwrap();
        assert_eq!(dump(&db), old, "{mode}");
        assert_checks(&db);
    }
}
