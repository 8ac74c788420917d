//! In-memory databases (`Database::open_memory`, `vfs::MemVfs`).

use std::path::Path;

use inpage::check::check;
use inpage::vfs::{MemVfs, OpenOptions, Vfs};
use inpage::{Config, CursorOps, Database, JournalMode, KeyKind, ReadableTxn};

#[test]
fn a_memory_database_works_and_leaves_no_file() {
    let db = Database::open_memory(Config::default().page_size(512)).unwrap();
    assert_eq!(db.journal_mode(), JournalMode::OFF);
    let other = Database::open_memory(Config::default()).unwrap();
    let mut w = db.begin_write().unwrap();
    let t = w.create_tree("t", KeyKind::Int).unwrap();
    for k in 0..2000i64 {
        w.insert(&t, k, &vec![k as u8; (k % 700) as usize]).unwrap();
    }
    w.commit().unwrap();
    let mut w = db.begin_write().unwrap();
    w.remove(&t, 5).unwrap();
    w.rollback().unwrap();
    let r = db.begin_read().unwrap();
    assert_eq!(r.count(&t).unwrap(), 2000);
    assert_eq!(r.get(&t, 5).unwrap(), Some(vec![5u8; 5]));
    let mut c = r.open_cursor(&t).unwrap();
    assert!(r.cursor_last(&mut c).unwrap());
    assert_eq!(c.int_key(), Some(1999));
    check(&r, &Default::default()).unwrap();
    // Each memory database is its own: the other one has no tree "t".
    assert!(other.begin_read().unwrap().open_tree("t").is_err());
    drop(r);
    db.close().unwrap();
    assert!(!Path::new("/memory.db").exists());
}

#[test]
fn a_memory_database_honours_a_named_mode() {
    for mode in JournalMode::all() {
        let db = Database::open_memory(Config::default().journal_mode(mode)).unwrap();
        assert_eq!(db.journal_mode(), mode);
        let mut w = db.begin_write().unwrap();
        let t = w.create_tree("t", KeyKind::Bytes).unwrap();
        for i in 0..300u32 {
            w.insert(&t, format!("k{i}").as_str(), &[i as u8; 100])
                .unwrap();
        }
        w.commit().unwrap();
        let mut w = db.begin_write().unwrap();
        w.remove(&t, "k7").unwrap();
        w.commit().unwrap();
        let r = db.begin_read().unwrap();
        assert_eq!(r.get(&t, "k8").unwrap(), Some(vec![8u8; 100]), "{mode}");
        assert_eq!(r.get(&t, "k7").unwrap(), None, "{mode}");
        assert_eq!(r.count(&t).unwrap(), 299, "{mode}");
        check(&r, &Default::default()).unwrap();
    }
}

#[test]
fn mem_vfs_files_behave_like_files() {
    let vfs = MemVfs::new();
    let p = Path::new("/a");
    assert!(vfs.open(p, OpenOptions::default()).is_err(), "no create");
    let f = vfs.open(p, OpenOptions::CREATE).unwrap();
    f.write_at(b"hello", 10).unwrap();
    assert_eq!(f.len().unwrap(), 15);
    let mut buf = [9u8; 20];
    assert_eq!(f.read_at(&mut buf, 0).unwrap(), 15);
    assert_eq!(&buf[..15], b"\0\0\0\0\0\0\0\0\0\0hello");
    assert_eq!(f.read_at(&mut buf, 15).unwrap(), 0);
    f.allocate(8, 4).unwrap();
    f.read_exact_at(&mut buf[..5], 10).unwrap();
    assert_eq!(&buf[..5], b"\0\0llo");
    f.set_len(3).unwrap();
    assert_eq!(f.len().unwrap(), 3);
    // Another open sees the same file; create_new refuses it.
    let g = vfs.open(p, OpenOptions::default()).unwrap();
    assert_eq!(g.len().unwrap(), 3);
    let excl = OpenOptions {
        create: true,
        create_new: true,
        ..Default::default()
    };
    assert!(vfs.open(p, excl).is_err());
    vfs.rename(p, Path::new("/b")).unwrap();
    assert!(!vfs.exists(p).unwrap());
    assert!(vfs.exists(Path::new("/b")).unwrap());
    vfs.delete(Path::new("/b")).unwrap();
    assert!(vfs.delete(Path::new("/b")).is_err());
}
