//! The public API: trees, cursors, ranges, meta values, savepoints, comparators, the
//! single-writer rule and snapshot readers on other threads.

mod common;

use std::cmp::Ordering;
use std::ops::Bound;
use std::sync::{Arc, Barrier};
use std::thread;

use common::*;
use inpage::{
    Comparator, Config, CursorOps, Database, Error, JournalMode, Key, KeyKind, ReadableTxn,
    SeekResult,
};
use inpage_sim::SimVfs;

fn sim_db(mode: JournalMode) -> (SimVfs, Database) {
    let vfs = SimVfs::new();
    let db = Database::open(DB, sim_config(&vfs, mode, 4096)).unwrap();
    (vfs, db)
}

#[test]
fn readme_example_on_real_files() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.db");
    let db = Database::open(&path, Config::default().journal_mode(JournalMode::WAL)).unwrap();
    let mut w = db.begin_write().unwrap();
    let users = w.open_or_create_tree("users", KeyKind::Int).unwrap();
    w.insert(&users, 42, b"Ada").unwrap();
    w.commit().unwrap();
    let r = db.begin_read().unwrap();
    assert_eq!(r.get(&users, 42).unwrap().as_deref(), Some(&b"Ada"[..]));
    drop(r);
    db.close().unwrap();
    let db = Database::open(&path, Config::default()).unwrap();
    assert_eq!(db.journal_mode(), JournalMode::WAL);
    assert_eq!(db.get("users", 42).unwrap().as_deref(), Some(&b"Ada"[..]));
}

#[test]
fn auto_commit_operations_bump_fcc_once_each() {
    for mode in JournalMode::all() {
        let (_vfs, db) = sim_db(mode);
        let mut w = db.begin_write().unwrap();
        w.create_tree("t", KeyKind::Int).unwrap();
        w.commit().unwrap();
        let f0 = db.fcc();
        assert_eq!(db.insert("t", 1, b"one").unwrap(), None);
        assert_eq!(
            db.insert("t", 1, b"uno").unwrap().as_deref(),
            Some(&b"one"[..])
        );
        assert_eq!(db.remove("t", 1).unwrap().as_deref(), Some(&b"uno"[..]));
        assert_eq!(db.get("t", 1).unwrap(), None);
        assert_eq!(db.fcc(), f0 + 3, "{mode}");
        // A transaction that changes nothing does no I/O and keeps the FCC.
        db.begin_write().unwrap().commit().unwrap();
        assert_eq!(db.fcc(), f0 + 3);
    }
}

#[test]
fn cursors_and_ranges() {
    let (_vfs, db) = sim_db(JournalMode::DELETE);
    let mut w = db.begin_write().unwrap();
    let t = w.create_tree("t", KeyKind::Int).unwrap();
    for k in (-500..500).step_by(5) {
        w.insert(&t, k, &value_for(k, 0, (k.unsigned_abs() as usize) % 700))
            .unwrap();
    }
    w.commit().unwrap();
    let r = db.begin_read().unwrap();
    let keys = |lo: Bound<Key>, hi: Bound<Key>| -> Vec<i64> {
        r.range(&t, lo, hi)
            .unwrap()
            .map(|kv| kv.unwrap().0.as_int().unwrap())
            .collect()
    };
    assert_eq!(
        keys(Bound::Included(Key::Int(-7)), Bound::Included(Key::Int(10))),
        vec![-5, 0, 5, 10]
    );
    assert_eq!(
        keys(Bound::Excluded(Key::Int(-5)), Bound::Excluded(Key::Int(10))),
        vec![0, 5]
    );
    assert_eq!(
        keys(Bound::Included(Key::Int(496)), Bound::Unbounded),
        Vec::<i64>::new()
    );
    assert_eq!(keys(Bound::Unbounded, Bound::Unbounded).len(), 200);
    let mut c = r.cursor(&t).unwrap();
    assert!(c.last().unwrap());
    assert_eq!(c.key().unwrap().unwrap().as_int(), Some(495));
    assert!(c.seek(3).unwrap());
    assert_eq!(c.key().unwrap().unwrap().as_int(), Some(5));
    assert_eq!(c.value().unwrap().unwrap(), value_for(5, 0, 5));
    assert!(c.prev().unwrap());
    assert_eq!(c.key().unwrap().unwrap().as_int(), Some(0));
    assert!(c.seek_le(3).unwrap());
    assert_eq!(c.key().unwrap().unwrap().as_int(), Some(0));
    assert!(!c.seek(1000).unwrap());
    assert!(!c.valid());
    assert_eq!(c.key().unwrap(), None);
    assert!(c.first().unwrap());
    assert!(!c.prev().unwrap());
}

#[test]
fn custom_comparator_orders_keys() {
    let (_vfs, db) = sim_db(JournalMode::WAL);
    let rev: Comparator = Arc::new(|a: &[u8], b: &[u8]| b.cmp(a));
    let mut w = db.begin_write().unwrap();
    let t = w.create_tree_with("rev", rev.clone()).unwrap();
    for word in ["apple", "kiwi", "banana", "cherry"] {
        w.insert(&t, word, word.as_bytes()).unwrap();
    }
    w.commit().unwrap();
    let r = db.begin_read().unwrap();
    assert!(matches!(r.open_tree("rev"), Err(Error::InvalidArgument(_))));
    let t = r.open_tree_with("rev", rev.clone()).unwrap();
    let keys: Vec<Vec<u8>> = r.iter(&t).unwrap().map(|kv| kv.unwrap().1).collect();
    assert_eq!(
        keys,
        vec![
            b"kiwi".to_vec(),
            b"cherry".to_vec(),
            b"banana".to_vec(),
            b"apple".to_vec()
        ]
    );
    let mut cmps = std::collections::HashMap::new();
    cmps.insert("rev".to_string(), rev);
    inpage::check::check(&r, &cmps).unwrap();
    let _ = Ordering::Less;
}

#[test]
fn meta_values_and_savepoints() {
    let (_vfs, db) = sim_db(JournalMode::PERSIST);
    let mut w = db.begin_write().unwrap();
    let t = w.create_tree("t", KeyKind::Int).unwrap();
    w.insert(&t, 1, b"a").unwrap();
    w.set_meta(3, 33).unwrap();
    let sp1 = w.savepoint();
    w.insert(&t, 2, b"b").unwrap();
    w.set_meta(3, 44).unwrap();
    let sp2 = w.savepoint();
    w.insert(&t, 3, b"c").unwrap();
    w.rollback_to(&sp2).unwrap();
    assert_eq!(w.get(&t, 3).unwrap(), None);
    assert_eq!(w.get(&t, 2).unwrap().as_deref(), Some(&b"b"[..]));
    w.rollback_to(&sp1).unwrap();
    assert_eq!(w.get(&t, 2).unwrap(), None);
    assert_eq!(w.meta(3).unwrap(), 33);
    assert!(w.rollback_to(&sp2).is_err(), "sp2 was rolled past");
    w.insert(&t, 4, b"d").unwrap();
    w.release(sp1).unwrap();
    w.commit().unwrap();
    let r = db.begin_read().unwrap();
    let got: Vec<i64> = r
        .iter(&t)
        .unwrap()
        .map(|kv| kv.unwrap().0.as_int().unwrap())
        .collect();
    assert_eq!(got, vec![1, 4]);
    assert_eq!(r.meta(3).unwrap(), 33);
    assert_checks(&db);
}

/// DHL keeps no free list on disk: the free pages are found by walking the trees before
/// the first write after open. Pages freed before a close are reused after the reopen.
#[test]
fn dhl_free_pages_are_found_again_after_reopen() {
    let vfs = SimVfs::new();
    let cfg = || sim_config(&vfs, JournalMode::DHL_CC, 4096);
    let big = vec![9u8; 9000];
    let pages = {
        let db = Database::open(DB, cfg()).unwrap();
        let mut w = db.begin_write().unwrap();
        let t = w.create_tree("a", KeyKind::Int).unwrap();
        for k in 0..300 {
            w.insert(&t, k, &big).unwrap();
        }
        w.commit().unwrap();
        let pages = db.header().page_count;
        let mut w = db.begin_write().unwrap();
        w.drop_tree("a").unwrap();
        w.commit().unwrap();
        db.close().unwrap();
        pages
    };
    let db = Database::open(DB, cfg()).unwrap();
    // Reads need no free set.
    assert!(db.begin_read().unwrap().list_trees().unwrap().is_empty());
    let mut w = db.begin_write().unwrap();
    let t = w.create_tree("b", KeyKind::Int).unwrap();
    for k in 0..300 {
        w.insert(&t, k, &big).unwrap();
    }
    w.commit().unwrap();
    assert!(
        db.header().page_count <= pages + 1,
        "pages freed before the reopen were not reused: {} > {pages}",
        db.header().page_count
    );
    assert_checks(&db);
}

#[test]
fn dropped_and_cleared_trees_free_their_pages_for_reuse() {
    let (_vfs, db) = sim_db(JournalMode::DELETE);
    let big = vec![9u8; 9000];
    let mut w = db.begin_write().unwrap();
    let t = w.create_tree("a", KeyKind::Int).unwrap();
    for k in 0..300 {
        w.insert(&t, k, if k % 10 == 0 { &big } else { b"small" })
            .unwrap();
    }
    w.commit().unwrap();
    let pages = db.header().page_count;
    let mut w = db.begin_write().unwrap();
    w.drop_tree("a").unwrap();
    w.commit().unwrap();
    assert_checks(&db);
    assert!(db.header().freelist_count > 10);
    let mut w = db.begin_write().unwrap();
    let t = w.create_tree("b", KeyKind::Int).unwrap();
    for k in 0..300 {
        w.insert(&t, k, if k % 10 == 0 { &big } else { b"small" })
            .unwrap();
    }
    w.commit().unwrap();
    assert!(
        db.header().page_count <= pages + 1,
        "freed pages were not reused"
    );
    let mut w = db.begin_write().unwrap();
    w.clear_tree(&t).unwrap();
    assert_eq!(w.count(&t).unwrap(), 0);
    w.commit().unwrap();
    assert_checks(&db);
    let r = db.begin_read().unwrap();
    let names: Vec<String> = r
        .list_trees()
        .unwrap()
        .into_iter()
        .map(|i| i.name)
        .collect();
    assert_eq!(names, vec!["b".to_string()]);
}

#[test]
fn one_writer_at_a_time() {
    let (_vfs, db) = sim_db(JournalMode::WAL);
    let w = db.begin_write().unwrap();
    assert!(matches!(db.try_begin_write(), Err(Error::Busy)));
    drop(w);
    let w = db.try_begin_write().unwrap();
    let db2 = db.clone();
    let waiter = thread::spawn(move || {
        let mut w = db2.begin_write().unwrap();
        w.create_tree("from-thread", KeyKind::Int).unwrap();
        w.commit().unwrap();
    });
    thread::sleep(std::time::Duration::from_millis(50));
    assert!(!waiter.is_finished(), "second writer did not wait");
    w.rollback().unwrap();
    waiter.join().unwrap();
    assert!(db.begin_read().unwrap().open_tree("from-thread").is_ok());
}

/// Writers on several threads queue for the writer flag: each waiting one is woken when
/// the flag is released (the release wakes only when someone waits), none is lost, and
/// every transaction commits.
#[test]
fn queued_writers_are_all_woken() {
    let (_vfs, db) = sim_db(JournalMode::DHL_CC);
    let mut w = db.begin_write().unwrap();
    w.create_tree("t", KeyKind::Int).unwrap();
    w.commit().unwrap();
    let (threads, per_thread) = (4i64, 150i64);
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    for t in 0..threads {
        let (db, done_tx) = (db.clone(), done_tx.clone());
        thread::spawn(move || {
            for k in 0..per_thread {
                let mut w = db.begin_write().unwrap();
                let tree = w.open_tree("t").unwrap();
                w.insert(&tree, t * per_thread + k, b"v").unwrap();
                w.commit().unwrap();
            }
            done_tx.send(()).unwrap();
        });
    }
    for _ in 0..threads {
        done_rx
            .recv_timeout(std::time::Duration::from_secs(120))
            .expect("a queued writer was never woken");
    }
    let r = db.begin_read().unwrap();
    let tree = r.open_tree("t").unwrap();
    for k in 0..threads * per_thread {
        assert!(r.get(&tree, k).unwrap().is_some(), "row {k}");
    }
}

#[test]
fn readers_see_stable_snapshots_on_other_threads() {
    for mode in JournalMode::all() {
        let (_vfs, db) = sim_db(mode);
        let mut w = db.begin_write().unwrap();
        let t = w.create_tree("t", KeyKind::Int).unwrap();
        for k in 0..200 {
            w.insert(&t, k, &value_for(k, 0, 300)).unwrap();
        }
        w.commit().unwrap();

        // Readers pinned at version 0 check their view while the writer rewrites every
        // key many times (forcing page replacements, cache eviction and checkpoints).
        let readers = 3;
        let barrier = Arc::new(Barrier::new(readers + 1));
        let handles: Vec<_> = (0..readers)
            .map(|_| {
                let r = db.begin_read().unwrap();
                let t = t.clone();
                let barrier = barrier.clone();
                thread::spawn(move || {
                    barrier.wait();
                    for _ in 0..5 {
                        for k in 0..200 {
                            assert_eq!(r.get(&t, k).unwrap(), Some(value_for(k, 0, 300)));
                        }
                        assert_eq!(r.count(&t).unwrap(), 200);
                    }
                })
            })
            .collect();
        barrier.wait();
        for round in 1..=10u32 {
            let mut w = db.begin_write().unwrap();
            // An uncommitted change must never be visible.
            w.insert(&t, 1000, b"uncommitted").unwrap();
            for k in 0..200 {
                w.insert(&t, k, &value_for(k, round, 300)).unwrap();
            }
            w.remove(&t, 1000).unwrap();
            w.commit().unwrap();
        }
        for h in handles {
            h.join().unwrap();
        }
        let r = db.begin_read().unwrap();
        assert_eq!(r.get(&t, 7).unwrap(), Some(value_for(7, 10, 300)), "{mode}");
        assert_checks(&db);
    }
}

/// New readers started while commits run (with a 16-page cache, so most reads miss and go
/// to the file without the pager's lock) each see one whole transaction: every key
/// carries the same round.
#[test]
fn fresh_readers_during_commits_see_whole_transactions() {
    for mode in JournalMode::all() {
        let vfs = SimVfs::new();
        let db = Database::open(DB, sim_config(&vfs, mode, 4096).cache_pages(16)).unwrap();
        let mut w = db.begin_write().unwrap();
        let t = w.create_tree("t", KeyKind::Int).unwrap();
        for k in 0..150 {
            w.insert(&t, k, &value_for(k, 0, 200)).unwrap();
        }
        w.set_meta(0, 0).unwrap();
        w.commit().unwrap();
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let (db, t, stop) = (db.clone(), t.clone(), stop.clone());
                thread::spawn(move || {
                    let mut seen = 0;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) || seen == 0 {
                        let r = db.begin_read().unwrap();
                        let round = r.meta(0).unwrap();
                        for k in 0..150 {
                            assert_eq!(
                                r.get(&t, k).unwrap(),
                                Some(value_for(k, round, 200)),
                                "{mode}: key {k} at round {round}"
                            );
                        }
                        seen += 1;
                    }
                    seen
                })
            })
            .collect();
        for round in 1..=40u32 {
            let mut w = db.begin_write().unwrap();
            for k in 0..150 {
                w.insert(&t, k, &value_for(k, round, 200)).unwrap();
            }
            w.set_meta(0, round).unwrap();
            w.commit().unwrap();
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for r in readers {
            assert!(r.join().unwrap() > 0);
        }
        assert_checks(&db);
    }
}

/// A `Tree` handle remembers its catalog record, but never past a change of the catalog:
/// after the tree is dropped and created again (a new root), an old handle reads the new
/// tree, and a snapshot from before the drop still reads the old one through its handle.
#[test]
fn tree_handles_follow_drop_and_recreate() {
    for mode in JournalMode::all() {
        let (_vfs, db) = sim_db(mode);
        let mut w = db.begin_write().unwrap();
        let t = w.create_tree("t", KeyKind::Int).unwrap();
        w.create_tree("pad", KeyKind::Int).unwrap();
        w.insert(&t, 1, b"old").unwrap();
        w.commit().unwrap();
        let before = db.begin_read().unwrap();
        assert_eq!(before.get(&t, 1).unwrap().as_deref(), Some(&b"old"[..]));
        let old_root = before.tree_info(&t).unwrap().root;

        let mut w = db.begin_write().unwrap();
        w.drop_tree("t").unwrap();
        assert!(
            matches!(w.get(&t, 1), Err(Error::TreeNotFound(_))),
            "{mode}"
        );
        let pad = w.open_tree("pad").unwrap();
        for k in 0..50 {
            w.insert(&pad, k, &[7u8; 300]).unwrap(); // reuse the freed root, or not
        }
        w.create_tree("t", KeyKind::Int).unwrap();
        w.insert(&t, 2, b"new").unwrap();
        w.commit().unwrap();

        let after = db.begin_read().unwrap();
        assert_eq!(after.get(&t, 1).unwrap(), None, "{mode}");
        assert_eq!(after.get(&t, 2).unwrap().as_deref(), Some(&b"new"[..]));
        assert_eq!(before.get(&t, 1).unwrap().as_deref(), Some(&b"old"[..]));
        assert_eq!(before.tree_info(&t).unwrap().root, old_root);
        assert_eq!(after.get(&t, 2).unwrap().as_deref(), Some(&b"new"[..]));
        drop(before);
        drop(after);
        assert_checks(&db);
    }
}

#[test]
fn file_grows_in_zero_filled_steps() {
    for chunk in [0u32, 1, 8, 64] {
        let vfs = SimVfs::new();
        let db = Database::open(
            DB,
            sim_config(&vfs, JournalMode::DELETE, 4096).chunk_pages(chunk),
        )
        .unwrap();
        let mut w = db.begin_write().unwrap();
        let t = w.create_tree("t", KeyKind::Int).unwrap();
        w.commit().unwrap();
        for round in 0..40 {
            let mut w = db.begin_write().unwrap();
            for k in 0..40 {
                w.insert(&t, round * 40 + k, &[7u8; 200]).unwrap();
            }
            w.commit().unwrap();
            let len = vfs.read_file(std::path::Path::new(DB)).unwrap().len() as u64;
            let need = db.header().page_count as u64 * 4096;
            if chunk == 0 {
                assert_eq!(len, need, "page-at-a-time growth");
            } else {
                // Whole pages, never a chunk ahead of what is used, and whole chunks
                // once the file holds eight (smaller steps before: a small database
                // stays small).
                let c = chunk as u64 * 4096;
                assert_eq!(len % 4096, 0, "chunk {chunk}: length {len}");
                if need >= 8 * c {
                    assert_eq!(len % c, 0, "chunk {chunk}: length {len} not whole chunks");
                }
                assert!(
                    len >= need && len < need + c,
                    "chunk {chunk}: {len} vs {need}"
                );
            }
        }
        // Unused tail pages read as zeros (they were written, not just reserved).
        let bytes = vfs.read_file(std::path::Path::new(DB)).unwrap();
        let used = db.header().page_count as usize * 4096;
        assert!(bytes[used..].iter().all(|&b| b == 0));
    }
}

#[test]
fn off_opt_leaves_the_header_page_out_of_counter_only_commits() {
    use inpage::vfs::{AccountingVfs, IoKind};
    let written_per_commit = |mode: JournalMode| {
        let vfs = SimVfs::new();
        let acct = AccountingVfs::new(Arc::new(vfs.clone()));
        let stats = acct.stats();
        let db = Database::open(DB, sim_config(&vfs, mode, 4096).vfs(Arc::new(acct))).unwrap();
        let mut w = db.begin_write().unwrap();
        let t = w.create_tree("t", KeyKind::Int).unwrap();
        for k in 0..20 {
            w.insert(&t, k, b"v0").unwrap();
        }
        w.commit().unwrap();
        let before = stats.snapshot();
        for round in 1..=10u8 {
            // One existing key: one leaf page changes, the file does not grow.
            db.insert("t", 7, &[round; 50]).unwrap();
        }
        let d = stats.snapshot().delta(&before);
        let fcc = db.fcc();
        drop(db);
        let db = Database::open(DB, sim_config(&vfs, mode, 4096)).unwrap();
        assert_eq!(db.get("t", 7).unwrap(), Some(vec![10u8; 50]), "{mode}");
        assert_checks(&db);
        (d.get(IoKind::Write).bytes / 10, fcc, db.fcc())
    };
    let (off, off_fcc, off_reopened) = written_per_commit(JournalMode::OFF);
    let (opt, opt_fcc, opt_reopened) = written_per_commit(JournalMode::OFF_OPT);
    assert_eq!(off, 2 * 4096, "off writes the leaf and the header page");
    assert_eq!(opt, 4096, "off-opt writes only the leaf");
    assert_eq!((off_fcc, off_reopened), (11, 11));
    // The counter on disk is stale in off-opt (nothing reads it back); it restarts from
    // the last header write, the commit that created the tree.
    assert_eq!((opt_fcc, opt_reopened), (11, 1));
}

/// DHL writes only the sectors of a page that changed: a one-row update of a database
/// with many rows writes well under a page, and reopening (which scans every page) sees
/// exactly the committed state.
#[test]
fn dhl_commits_write_only_the_changed_sectors() {
    use inpage::vfs::{AccountingVfs, IoKind};
    let sim = SimVfs::new();
    let acct = Arc::new(AccountingVfs::new(Arc::new(sim.clone())));
    let stats = acct.stats();
    let cfg = || {
        sim_config(&sim, JournalMode::DHL_CC, 4096)
            .vfs(acct.clone())
            .cache_pages(2000)
    };
    let db = Database::open(DB, cfg()).unwrap();
    let mut w = db.begin_write().unwrap();
    let t = w.create_tree("t", KeyKind::Int).unwrap();
    for k in 0..2000 {
        w.insert(&t, k, &[1u8; 100]).unwrap();
    }
    w.commit().unwrap();
    let before = stats.snapshot();
    let n = 200;
    for k in 0..n {
        let mut w = db.begin_write().unwrap();
        w.insert(&t, (k * 37) % 2000, &[2u8; 100]).unwrap();
        w.commit().unwrap();
    }
    let d = stats.snapshot().delta(&before).get(IoKind::Write);
    assert_eq!(d.calls, n as u64, "one write call per one-page commit");
    let per_commit = d.bytes as f64 / n as f64;
    assert!(
        per_commit < 3072.0 && d.bytes % 512 == 0,
        "{per_commit} bytes per one-row commit"
    );
    db.close().unwrap();
    let db = Database::open(DB, cfg()).unwrap();
    let r = db.begin_read().unwrap();
    let t = r.open_tree("t").unwrap();
    for k in 0..2000 {
        let want = if (0..n).any(|i| (i * 37) % 2000 == k) {
            2u8
        } else {
            1u8
        };
        assert_eq!(r.get(&t, k).unwrap(), Some(vec![want; 100]), "key {k}");
    }
    assert_checks(&db);
}

/// `DirectWrites::On` on a real file system that accepts O_DIRECT (this machine's /tmp
/// and /var/tmp are ext4): writes bypass the page cache and the data reads back after a
/// reopen through the page cache; `Off` never uses it.
#[test]
fn direct_writes_on_real_files() {
    use inpage::DirectWrites;
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let path = dir.path().join("d.db");
    for (setting, want) in [(DirectWrites::On, true), (DirectWrites::Off, false)] {
        // `dhl-cc`: a mode whose commits write pages in place, so the setting decides.
        let cfg = || {
            Config::default()
                .journal_mode(JournalMode::DHL_CC)
                .direct_writes(setting)
        };
        {
            let db = Database::open(&path, cfg()).unwrap();
            assert_eq!(db.direct_writes(), want, "{setting:?}");
            let mut w = db.begin_write().unwrap();
            let t = w.open_or_create_tree("t", KeyKind::Int).unwrap();
            w.commit().unwrap();
            for k in 0..300 {
                let mut w = db.begin_write().unwrap();
                w.insert(&t, k, format!("{setting:?} {k}").as_bytes())
                    .unwrap();
                w.commit().unwrap();
            }
        }
        let db = Database::open(&path, Config::default().direct_writes(DirectWrites::Off)).unwrap();
        let r = db.begin_read().unwrap();
        let t = r.open_tree("t").unwrap();
        for k in 0..300 {
            assert_eq!(
                r.get(&t, k).unwrap(),
                Some(format!("{setting:?} {k}").into_bytes())
            );
        }
        assert_checks(&db);
    }
    // A stock mode never writes directly.
    let p2 = dir.path().join("s.db");
    let db = Database::open(&p2, Config::default().journal_mode(JournalMode::WAL)).unwrap();
    assert!(!db.direct_writes());
}

/// Replacing a value by identical bytes dirties no page and makes the commit free, in
/// stock and DHL layouts alike (inline and overflow values); a changed value still writes.
#[test]
fn identical_replacement_writes_nothing() {
    use inpage::vfs::{AccountingVfs, IoKind, Vfs};
    for mode in JournalMode::all() {
        let sim = SimVfs::new();
        let acc = Arc::new(AccountingVfs::new(Arc::new(sim.clone())));
        let stats = acc.stats();
        let vfs: Arc<dyn Vfs> = acc;
        let db = Database::open(DB, sim_config(&sim, mode, 4096).vfs(vfs)).unwrap();
        let big = value_for(1000, 1, 10_000);
        let mut w = db.begin_write().unwrap();
        let t = w.create_tree("t", KeyKind::Int).unwrap();
        for k in 1..=50 {
            w.insert(&t, k, &value_for(k, 1, 100)).unwrap();
        }
        w.insert(&t, 1000, &big).unwrap();
        w.commit().unwrap();
        let fcc = db.fcc();

        let before = stats.snapshot();
        let mut w = db.begin_write().unwrap();
        let old = w.insert(&t, 7, &value_for(7, 1, 100)).unwrap();
        assert_eq!(old, Some(value_for(7, 1, 100)), "{mode}");
        assert_eq!(
            w.insert(&t, 1000, &big).unwrap(),
            Some(big.clone()),
            "{mode}"
        );
        assert_eq!(
            w.dirty_pages(),
            0,
            "{mode}: identical values dirtied a page"
        );
        w.commit().unwrap();
        let d = stats.snapshot().delta(&before);
        assert_eq!(d.get(IoKind::Write).calls, 0, "{mode}: a page was written");
        assert_eq!(d.total().calls, 0, "{mode}: the commit did I/O");
        assert_eq!(db.fcc(), fcc, "{mode}: nothing committed, the FCC stays");

        // The same key with one byte changed is a real update.
        let mut changed = value_for(7, 1, 100);
        changed[99] ^= 1;
        let mut w = db.begin_write().unwrap();
        w.insert(&t, 7, &changed).unwrap();
        assert!(w.dirty_pages() >= 1, "{mode}");
        w.commit().unwrap();
        // (A mode may buffer the commit's write, `waldio-gs`: the FCC says it committed.)
        assert_eq!(db.fcc(), fcc + 1, "{mode}: the real update committed");
        assert_eq!(db.get("t", 7).unwrap(), Some(changed), "{mode}");
        assert_checks(&db);
    }
}

/// A new database stays small: its file grows in steps proportional to its size (a chunk
/// only once it is large), so a database with one empty tree is at most 16 KiB in every
/// mode (stock SQLite: 8 KiB), whatever chunk its mode grows by later.
#[test]
fn an_empty_database_is_at_most_16_kib() {
    for mode in JournalMode::all() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("e.db");
        {
            let db = Database::open(&path, Config::default().journal_mode(mode)).unwrap();
            let mut w = db.begin_write().unwrap();
            w.create_tree("t", KeyKind::Int).unwrap();
            w.commit().unwrap();
        }
        let len = std::fs::metadata(&path).unwrap().len();
        assert!(len <= 16 << 10, "{mode}: an empty database of {len} bytes");
    }
}

/// Bulk load in every mode: a tree filled by `load_tree` (small pages, so several
/// levels; long keys with tail chains and values on overflow pages) reads back exactly,
/// passes the full check, takes ordinary inserts and removals after, and survives a
/// reopen. A non-empty tree and keys out of order are refused.
#[test]
fn bulk_loaded_trees_are_ordinary_trees() {
    for mode in JournalMode::all() {
        let vfs = SimVfs::new();
        let cfg = sim_config(&vfs, mode, 512);
        let rows: Vec<(Vec<u8>, Vec<u8>)> = (0..1500u32)
            .map(|i| {
                let klen = if i % 97 == 0 { 300 } else { 8 };
                let mut k = format!("{i:08}").into_bytes();
                k.resize(klen, b'k');
                let vlen = [3, 40, 700][i as usize % 3];
                (k, value_for(i64::from(i), 1, vlen))
            })
            .collect();
        {
            let db = Database::open(DB, cfg.clone()).unwrap();
            let mut w = db.begin_write().unwrap();
            let t = w.create_tree("t", KeyKind::Bytes).unwrap();
            let n = w
                .load_tree(&t, |load| {
                    for (k, v) in &rows {
                        load.push(&k[..], v)?;
                    }
                    Ok(())
                })
                .unwrap();
            assert_eq!(n, rows.len() as u64, "{mode}");
            let again = w.load_tree(&t, |load| load.push(&b"z"[..], b"v"));
            assert!(matches!(again, Err(Error::InvalidArgument(_))), "{mode}");
            let u = w.create_tree("u", KeyKind::Int).unwrap();
            let out_of_order = w.load_tree(&u, |load| {
                load.push(2, b"two")?;
                load.push(1, b"one")
            });
            assert!(
                matches!(out_of_order, Err(Error::InvalidArgument(_))),
                "{mode}"
            );
            drop(w);
            let mut w = db.begin_write().unwrap();
            let t = w.create_tree("t", KeyKind::Bytes).unwrap();
            w.load_tree(&t, |load| {
                for (k, v) in &rows {
                    load.push(&k[..], v)?;
                }
                Ok(())
            })
            .unwrap();
            w.insert(&t, &b"00000000x"[..], b"new").unwrap();
            assert!(w.remove(&t, &rows[700].0[..]).unwrap().is_some());
            w.commit().unwrap();
        }
        let db = Database::open(DB, cfg).unwrap();
        let r = db.begin_read().unwrap();
        inpage::check::check(&r, &Default::default()).unwrap_or_else(|e| panic!("{mode}: {e}"));
        let t = r.open_tree("t").unwrap();
        assert_eq!(r.count(&t).unwrap(), rows.len() as u64, "{mode}");
        for (i, (k, v)) in rows.iter().enumerate() {
            let got = r.get(&t, &k[..]).unwrap();
            assert_eq!(
                got.as_deref(),
                (i != 700).then_some(&v[..]),
                "{mode} row {i}"
            );
        }
        assert_eq!(
            r.get(&t, &b"00000000x"[..]).unwrap().as_deref(),
            Some(&b"new"[..])
        );
    }
}

/// Incremental value I/O in every mode: ranges written into a value that lives in an
/// overflow chain (across page boundaries, at both ends) and into an inline one read back
/// exactly, through a ranged read and a whole read, after commit and reopen, and the
/// file passes the full check; a range past the value is refused and changes nothing.
#[test]
fn values_are_overwritten_and_read_by_range() {
    for mode in JournalMode::all() {
        let vfs = SimVfs::new();
        let cfg = sim_config(&vfs, mode, 4096);
        let mut big = value_for(1, 0, 200_000);
        let mut small = value_for(2, 0, 40);
        {
            let db = Database::open(DB, cfg.clone()).unwrap();
            let mut w = db.begin_write().unwrap();
            let t = w.create_tree("t", KeyKind::Int).unwrap();
            w.insert(&t, 1, &big).unwrap();
            w.insert(&t, 2, &small).unwrap();
            w.commit().unwrap();
            let mut w = db.begin_write().unwrap();
            let mut c = w.open_cursor(&t).unwrap();
            assert_eq!(w.cursor_seek(&mut c, 1).unwrap(), SeekResult::Exact);
            for (at, len, byte) in [
                (0usize, 10usize, 1u8),
                (4000, 300, 2),
                (65_530, 70_000, 3),
                (199_990, 10, 4),
            ] {
                let bytes = vec![byte; len];
                w.cursor_overwrite_value(&mut c, at as u64, &bytes).unwrap();
                big[at..at + len].copy_from_slice(&bytes);
                let mut got = vec![0u8; len + 20];
                let n = w
                    .cursor_read_value(&c, at.saturating_sub(10) as u64, &mut got)
                    .unwrap();
                let from = at.saturating_sub(10);
                let n = n.unwrap();
                assert_eq!(&got[..n], &big[from..from + n], "{mode} at {at}");
            }
            let past = w.cursor_overwrite_value(&mut c, 199_995, &[9u8; 10]);
            assert!(matches!(past, Err(Error::InvalidArgument(_))), "{mode}");
            assert_eq!(w.cursor_seek(&mut c, 2).unwrap(), SeekResult::Exact);
            w.cursor_overwrite_value(&mut c, 5, b"hello").unwrap();
            small[5..10].copy_from_slice(b"hello");
            w.commit().unwrap();
        }
        let db = Database::open(DB, cfg).unwrap();
        let r = db.begin_read().unwrap();
        inpage::check::check(&r, &Default::default()).unwrap_or_else(|e| panic!("{mode}: {e}"));
        let t = r.open_tree("t").unwrap();
        assert!(r.get(&t, 1).unwrap().unwrap() == big, "{mode}");
        assert_eq!(r.get(&t, 2).unwrap().unwrap(), small, "{mode}");
    }
}
