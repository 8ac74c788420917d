//! Bad input: a foreign file, an empty file, a truncated file, a flipped byte. Each gives
//! a typed error (never a panic) and leaves the file byte-for-byte unchanged.

mod common;

use std::path::{Path, PathBuf};

use common::*;
use inpage::check::check;
use inpage::{Config, Database, Error, JournalMode, KeyKind, ReadableTxn};

fn make_db(dir: &Path, mode: JournalMode) -> PathBuf {
    let path = dir.join(format!("{mode}.db"));
    let db = Database::open(&path, Config::default().journal_mode(mode)).unwrap();
    let mut w = db.begin_write().unwrap();
    let t = w.create_tree("t", KeyKind::Int).unwrap();
    for k in 0..400 {
        w.insert(&t, k, &value_for(k, 1, 100)).unwrap();
    }
    w.commit().unwrap();
    db.close().unwrap();
    path
}

fn side_files(path: &Path) -> Vec<PathBuf> {
    ["journal", "wal", "init"]
        .iter()
        .map(|s| PathBuf::from(format!("{}-{s}", path.display())))
        .filter(|p| p.exists())
        .collect()
}

#[test]
fn foreign_file_is_rejected_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("foreign.db");
    let content: Vec<u8> = b"SQLite format 3\0"
        .iter()
        .copied()
        .cycle()
        .take(8192)
        .collect();
    std::fs::write(&path, &content).unwrap();
    for mode in [None, Some(JournalMode::Wal), Some(JournalMode::Delete)] {
        let cfg = Config {
            journal_mode: mode,
            ..Default::default()
        };
        match Database::open(&path, cfg) {
            Err(Error::NotADatabase { reason, .. }) => {
                assert!(reason.contains("magic"), "{reason}")
            }
            other => panic!("expected NotADatabase, got {other:?}"),
        }
    }
    assert_eq!(file_bytes(&path), content);
    assert!(side_files(&path).is_empty());
}

#[test]
fn empty_file_is_rejected_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("empty.db");
    std::fs::write(&path, b"").unwrap();
    match Database::open(&path, Config::default()) {
        Err(Error::NotADatabase { reason, .. }) => assert!(reason.contains("empty"), "{reason}"),
        other => panic!("expected NotADatabase, got {other:?}"),
    }
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);
    assert!(side_files(&path).is_empty());
}

#[test]
fn truncated_file_is_rejected_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    for mode in JournalMode::ALL {
        let path = make_db(dir.path(), mode);
        let full = file_bytes(&path);
        let sides_before: Vec<(PathBuf, Vec<u8>)> = side_files(&path)
            .into_iter()
            .map(|p| (p.clone(), file_bytes(&p)))
            .collect();
        let header_pages = u32::from_le_bytes(full[28..32].try_into().unwrap()) as usize;
        for cut in [4096 * (header_pages - 1), 4096 + 100, 100, 50] {
            std::fs::write(&path, &full[..cut]).unwrap();
            let err = Database::open(&path, Config::default()).unwrap_err();
            assert!(
                matches!(err, Error::Truncated { .. } | Error::NotADatabase { .. }),
                "{mode} cut {cut}: {err:?}"
            );
            assert_eq!(file_bytes(&path), &full[..cut], "{mode}: file changed");
            let sides: Vec<(PathBuf, Vec<u8>)> = side_files(&path)
                .into_iter()
                .map(|p| (p.clone(), file_bytes(&p)))
                .collect();
            assert_eq!(sides, sides_before, "{mode}: side files changed");
        }
    }
}

#[test]
fn flipped_byte_in_every_page_is_detected_and_nothing_changes() {
    let dir = tempfile::tempdir().unwrap();
    for mode in JournalMode::ALL {
        let path = make_db(dir.path(), mode);
        let good = file_bytes(&path);
        let page_count = u32::from_le_bytes(good[28..32].try_into().unwrap()) as usize;
        for pgno in 0..page_count {
            for offset in [0usize, 9, 2000, 4095] {
                let mut bad = good.clone();
                bad[pgno * 4096 + offset] ^= 0x40;
                std::fs::write(&path, &bad).unwrap();
                let what = format!("{mode} page {pgno} offset {offset}");
                match Database::open(&path, Config::default()) {
                    Err(Error::NotADatabase { .. }) => assert_eq!(pgno, 0, "{what}"),
                    Err(e) => panic!("{what}: unexpected open error {e}"),
                    Ok(db) => {
                        assert_ne!(pgno, 0, "{what}: corrupt header accepted");
                        let r = db.begin_read().unwrap();
                        let err = check(&r, &Default::default()).unwrap_err();
                        match err {
                            Error::Corrupt { pgno: p, .. } => {
                                assert_eq!(p as usize, pgno, "{what}: {err}")
                            }
                            e => panic!("{what}: expected Corrupt, got {e}"),
                        }
                        // Reading every key either works or reports the same page.
                        if let Ok(t) = r.open_tree("t") {
                            for k in 0..400 {
                                match r.get(&t, k) {
                                    Ok(v) => assert_eq!(v, Some(value_for(k, 1, 100)), "{what}"),
                                    Err(Error::Corrupt { pgno: p, .. }) => {
                                        assert_eq!(p as usize, pgno)
                                    }
                                    Err(e) => panic!("{what}: {e}"),
                                }
                            }
                        }
                        drop(r);
                        drop(db);
                    }
                }
                assert_eq!(file_bytes(&path), bad, "{what}: file changed");
            }
        }
        std::fs::write(&path, &good).unwrap();
    }
}

#[test]
fn mode_mismatch_is_a_clear_error_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = make_db(dir.path(), JournalMode::Delete);
    let before = file_bytes(&path);
    match Database::open(&path, Config::default().journal_mode(JournalMode::Wal)) {
        Err(Error::ModeMismatch {
            file, requested, ..
        }) => {
            assert_eq!((file.as_str(), requested.as_str()), ("delete", "wal"))
        }
        other => panic!("expected ModeMismatch, got {other:?}"),
    }
    assert_eq!(file_bytes(&path), before);
    assert!(side_files(&path).is_empty());
    // Without a requested mode the file's own is used.
    let db = Database::open(&path, Config::default()).unwrap();
    assert_eq!(db.journal_mode(), JournalMode::Delete);
}

#[test]
fn bad_config_and_arguments_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.db");
    for ps in [0u32, 100, 256, 3000, 131072] {
        assert!(matches!(
            Database::open(&path, Config::default().page_size(ps)),
            Err(Error::Config(_))
        ));
    }
    assert!(!path.exists(), "a rejected config created the file");
    assert!(matches!(
        Database::open(&path, Config::default().create(false)),
        Err(Error::Io { .. })
    ));
    let db = Database::open(&path, Config::default()).unwrap();
    let mut w = db.begin_write().unwrap();
    let t = w.create_tree("ints", KeyKind::Int).unwrap();
    assert!(matches!(
        w.insert(&t, &b"bytes"[..], b"v"),
        Err(Error::KeyKindMismatch { .. })
    ));
    assert!(matches!(
        w.create_tree("ints", KeyKind::Int),
        Err(Error::TreeExists(_))
    ));
    assert!(matches!(w.open_tree("nope"), Err(Error::TreeNotFound(_))));
    assert!(matches!(
        w.create_tree("", KeyKind::Int),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(w.set_meta(99, 1), Err(Error::InvalidArgument(_))));
    let b = w.create_tree("b", KeyKind::Bytes).unwrap();
    let huge = vec![7u8; 10_000];
    assert!(matches!(
        w.insert(&b, &huge, b"v"),
        Err(Error::KeyTooLarge { .. })
    ));
}
