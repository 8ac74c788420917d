//! Bad input: a foreign file, an empty file, a truncated file, a flipped byte. Each gives
//! a typed error (never a panic) and leaves the file byte-for-byte unchanged.

mod common;

use std::path::{Path, PathBuf};

use common::*;
use inpage::check::check;
use inpage::{Config, Database, Error, JournalMode, JournalOption, KeyKind, ReadableTxn};

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
    ["journal", "wal", "init", "create"]
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
    for mode in [None, Some(JournalMode::WAL), Some(JournalMode::DELETE)] {
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

/// A 0-byte file is an empty database, as in stock SQLite (Python's `dbm.sqlite3` and
/// "create a temporary file, then open it" rely on it): a read-write open lays it out in
/// the mode asked for, a read-only open sees an empty database and leaves the file
/// empty.
#[test]
fn empty_file_opens_as_an_empty_database() {
    let dir = tempfile::tempdir().unwrap();
    for mode in JournalMode::all() {
        let path = dir.path().join(format!("empty-{mode}.db"));
        std::fs::write(&path, b"").unwrap();
        let ro = Database::open_read_only(&path, Config::default()).unwrap();
        assert!(ro.begin_read().unwrap().list_trees().unwrap().is_empty());
        drop(ro);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 0, "{mode}");
        assert!(side_files(&path).is_empty(), "{mode}");

        let db = Database::open(&path, Config::default().journal_mode(mode)).unwrap();
        assert_eq!(db.journal_mode(), mode);
        let mut w = db.begin_write().unwrap();
        let t = w.create_tree("t", KeyKind::Int).unwrap();
        w.insert(&t, 1, b"one").unwrap();
        w.commit().unwrap();
        db.close().unwrap();
        let db = Database::open(&path, Config::default()).unwrap();
        assert_eq!(db.journal_mode(), mode);
        assert_eq!(db.get("t", 1).unwrap().as_deref(), Some(&b"one"[..]));
        assert_checks(&db);
        drop(db);
        let marker = PathBuf::from(format!("{}-create", path.display()));
        assert!(!marker.exists(), "{mode}: the creation marker stayed");
    }
}

/// A creation marker (`<db>-create`) left beside a file it was not made for (the file
/// was replaced after a cut creation) is ignored: a foreign file is still refused and
/// left byte-identical, and so is the marker.
#[test]
fn creation_marker_beside_a_foreign_file_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    // A real marker: cut a creation on the simulated disk after the marker's sync.
    let mut marker_bytes = None;
    for cut in 1..40 {
        let sim = inpage_sim::SimVfs::new();
        let cfg = Config::default().vfs(std::sync::Arc::new(sim.clone()));
        sim.set_power_cut_after(cut);
        let _ = Database::open("/d/x.db", cfg);
        let crashed = sim.crash(0, inpage_sim::CrashModel::lose_only());
        if let Some(m) = crashed.read_durable(std::path::Path::new("/d/x.db-create")) {
            if !m.is_empty() {
                marker_bytes = Some(m);
                break;
            }
        }
    }
    let marker_bytes = marker_bytes.expect("some cut leaves a durable marker");
    let path = dir.path().join("foreign.db");
    let content: Vec<u8> = b"not a database, but not empty either".repeat(50);
    std::fs::write(&path, &content).unwrap();
    let mpath = PathBuf::from(format!("{}-create", path.display()));
    std::fs::write(&mpath, &marker_bytes).unwrap();
    for ro in [true, false] {
        let r = if ro {
            Database::open_read_only(&path, Config::default())
        } else {
            Database::open(&path, Config::default())
        };
        assert!(matches!(r, Err(Error::NotADatabase { .. })), "{r:?}");
        assert_eq!(file_bytes(&path), content);
        assert_eq!(file_bytes(&mpath), marker_bytes);
    }
}

#[test]
fn truncated_file_is_rejected_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    for mode in JournalMode::all() {
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
    for mode in JournalMode::all() {
        let path = make_db(dir.path(), mode);
        let good = file_bytes(&path);
        let pages = good.len() / 4096;
        for pgno in 0..pages {
            for offset in [0usize, 9, 2000, 4095] {
                let mut bad = good.clone();
                bad[pgno * 4096 + offset] ^= 0x40;
                std::fs::write(&path, &bad).unwrap();
                let what = format!("{mode} page {pgno} offset {offset}");
                let outcome = match mode.layout_name() {
                    // Both keep per-version checksums and a version beside the committed one.
                    "dhl" | "ips" | "mvbt" => flipped_dhl(&path, pgno, &what),
                    // DASH keeps two shadow files: damage to the one it would open looks
                    // like a torn last commit (the older file is opened instead, a
                    // rollback), damage to the other one is never read.
                    "stock" if mode == JournalMode::DASH => flipped_dhl(&path, pgno, &what),
                    "stock" => flipped_stock(&path, pgno, &what),
                    other => panic!("{mode}: no expectations for flipped bits in {other} pages"),
                };
                if outcome != Outcome::RolledBack {
                    assert!(
                        file_bytes(&path) == bad,
                        "{what}: file changed ({outcome:?})"
                    );
                }
            }
        }
        std::fs::write(&path, &good).unwrap();
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Detected,
    Harmless,
    RolledBack,
}

/// Stock pages carry a crc over the whole page: every flip inside the database's pages
/// is reported, naming the page; flips past the last page touch the unused tail.
fn flipped_stock(path: &Path, pgno: usize, what: &str) -> Outcome {
    match Database::open(path, Config::default()) {
        Err(Error::NotADatabase { .. }) => {
            assert_eq!(pgno, 0, "{what}");
            Outcome::Detected
        }
        Err(e) => panic!("{what}: unexpected open error {e}"),
        Ok(db) => {
            assert_ne!(pgno, 0, "{what}: corrupt header accepted");
            let r = db.begin_read().unwrap();
            let pages = db.header().page_count as usize;
            match check(&r, &Default::default()) {
                Err(Error::Corrupt { pgno: p, .. }) => assert_eq!(p as usize, pgno, "{what}"),
                Err(e) => panic!("{what}: expected Corrupt, got {e}"),
                Ok(_) => {
                    assert!(
                        pgno >= pages,
                        "{what}: damage inside the database not found"
                    );
                    assert_full(&r, what);
                    return Outcome::Harmless;
                }
            }
            assert_reads_full_or_fail_at(&r, pgno, what);
            Outcome::Detected
        }
    }
}

/// DHL pages are checked per version: damage to a version a reader would see is
/// reported, damage to bytes no version uses is harmless, and — counting commit being
/// unable to tell a damaged page of the last transaction from one its crash left
/// unwritten — the last transaction may be rolled back instead (a consistent, older
/// state; the one case in which opening writes to the file).
fn flipped_dhl(path: &Path, pgno: usize, what: &str) -> Outcome {
    match Database::open(path, Config::default()) {
        Err(Error::NotADatabase { .. }) => Outcome::Detected,
        Err(Error::Corrupt { pgno: p, .. }) => {
            assert_eq!(p as usize, pgno, "{what}");
            Outcome::Detected
        }
        Err(e) => panic!("{what}: unexpected open error {e}"),
        Ok(db) => {
            let r = db.begin_read().unwrap();
            match check(&r, &Default::default()) {
                Err(Error::Corrupt { pgno: p, .. }) => {
                    assert_eq!(p as usize, pgno, "{what}");
                    assert_reads_full_or_fail_at(&r, pgno, what);
                    Outcome::Detected
                }
                Err(e) => panic!("{what}: expected Corrupt, got {e}"),
                Ok(_) => match r.open_tree("t") {
                    Ok(_) => {
                        assert_full(&r, what);
                        Outcome::Harmless
                    }
                    Err(Error::TreeNotFound(_)) => {
                        assert_ne!(
                            db.journal_mode(),
                            JournalMode::DHL_TC,
                            "{what}: dhl-tc has a commit mark and must not roll back"
                        );
                        assert!(db.recovery_report().rolled_back, "{what}");
                        Outcome::RolledBack
                    }
                    Err(e) => panic!("{what}: {e}"),
                },
            }
        }
    }
}

fn assert_full(r: &inpage::ReadTxn, what: &str) {
    let t = r.open_tree("t").unwrap();
    for k in 0..400 {
        assert_eq!(r.get(&t, k).unwrap(), Some(value_for(k, 1, 100)), "{what}");
    }
}

/// Reading every key either returns the right value or reports the damaged page.
fn assert_reads_full_or_fail_at(r: &inpage::ReadTxn, pgno: usize, what: &str) {
    if let Ok(t) = r.open_tree("t") {
        for k in 0..400 {
            match r.get(&t, k) {
                Ok(v) => assert_eq!(v, Some(value_for(k, 1, 100)), "{what}"),
                Err(Error::Corrupt { pgno: p, .. }) => assert_eq!(p as usize, pgno, "{what}"),
                Err(e) => panic!("{what}: {e}"),
            }
        }
    }
}

#[test]
fn mode_mismatch_is_a_clear_error_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = make_db(dir.path(), JournalMode::DELETE);
    let before = file_bytes(&path);
    match Database::open(&path, Config::default().journal_mode(JournalMode::WAL)) {
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
    assert_eq!(db.journal_mode(), JournalMode::DELETE);
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
    // A key past the inline limit is a long key, not an error (the limit is u32::MAX).
    let huge = vec![7u8; 10_000];
    assert_eq!(w.insert(&b, &huge, b"v").unwrap(), None);
    assert_eq!(w.get(&b, &huge).unwrap(), Some(b"v".to_vec()));
}

/// A configuration that asks something of `o`, on top of `c`.
fn asking(o: JournalOption, c: Config, dir: &Path) -> Config {
    match o {
        JournalOption::WalPrealloc => c.wal_prealloc(true),
        JournalOption::DirectWrites => c.direct_writes(inpage::DirectWrites::On),
        JournalOption::IntentRegionPages => c.intent_region_pages(8),
        JournalOption::IntentScanMib => c.intent_scan_mib(4),
        JournalOption::OrderedCommitPages => c.ordered_commit_pages(16),
        JournalOption::NvlogRegion => c.nvlog_region(dir.join("asked-region")),
        JournalOption::NvlogRingBytes => c.nvlog_ring_bytes(1 << 20),
        JournalOption::NvlogFlush => c.nvlog_flush(inpage::NvlogFlush::Inline),
        JournalOption::NvlogDirectPages => c.nvlog_direct_pages(false),
        other => panic!("option {other} is new: say here how a configuration asks it"),
    }
}

/// Options the file or its journal mode would ignore are refused, with the error that
/// names them, and the file is left as it was: a page size other than the file's, and
/// every journal option the mode does not list among those it reads (the registry's
/// `JournalMode::options`, so a new mode or option is covered without editing this).
/// A value the reading mode cannot take is refused by that mode. A new file with such
/// options is not created at all.
#[test]
fn options_that_would_be_ignored_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    for mode in JournalMode::all() {
        let path = dir.path().join(format!("{mode}.db"));
        drop(Database::open(&path, Config::default().journal_mode(mode).page_size(1024)).unwrap());
        let mut before = file_bytes(&path);
        match Database::open(&path, Config::default().page_size(4096)) {
            Err(Error::PageSizeMismatch {
                file: 1024,
                requested: 4096,
                ..
            }) => {}
            other => panic!("{mode}: page size 4096 on a 1024 file gave {other:?}"),
        }
        for o in JournalOption::ALL {
            let got = Database::open(&path, asking(o, Config::default(), dir.path()));
            if mode.options().contains(&o) {
                // `O_DIRECT` may be refused by the temporary directory's file system.
                if o != JournalOption::DirectWrites {
                    got.unwrap_or_else(|e| panic!("{mode} reads {o}, yet: {e}"));
                }
                before = file_bytes(&path);
                continue;
            }
            match &got {
                Err(Error::Config(m)) if m.contains(o.name()) && m.contains(mode.name()) => {}
                other => panic!("{mode} does not read {o}, yet opening with it gave {other:?}"),
            }
            drop(got);
            assert!(
                mode.capabilities().replays_log || file_bytes(&path) == before,
                "{mode}: the open refused for {o} changed the file"
            );
        }
        let bad_value = if mode.options().contains(&JournalOption::IntentRegionPages) {
            Some(Config::default().intent_region_pages(3))
        } else if mode.options().contains(&JournalOption::NvlogRingBytes) {
            Some(Config::default().nvlog_ring_bytes(1))
        } else {
            None
        };
        if let Some(c) = bad_value {
            let got = Database::open(&path, c);
            assert!(matches!(&got, Err(Error::Config(_))), "{mode}: {got:?}");
        }
        if mode.options().contains(&JournalOption::IntentScanMib) {
            let got = Database::open(&path, Config::default().intent_scan_mib(0));
            assert!(
                matches!(&got, Err(Error::Config(m)) if m.contains("intent_scan_mib 0")),
                "{mode}: {got:?}"
            );
        }
        // The file's own values (or none) open it.
        drop(Database::open(&path, Config::default().page_size(1024)).unwrap());
        if !mode.capabilities().replays_log {
            assert!(
                file_bytes(&path) == before,
                "{mode}: a refused open changed the file"
            );
        }
    }
    let fresh = dir.path().join("fresh.db");
    assert!(matches!(
        Database::open(
            &fresh,
            Config::default()
                .journal_mode(JournalMode::WAL)
                .direct_writes(inpage::DirectWrites::On)
        ),
        Err(Error::Config(_))
    ));
    assert!(!fresh.exists(), "a refused config created the file");
}

/// The capabilities that name an option agree with the options a mode reads: direct
/// page writes, the write-intent map and the nvlog region are each read exactly by the
/// modes that declare them.
#[test]
fn capabilities_and_read_options_agree() {
    for mode in JournalMode::all() {
        let caps = mode.capabilities();
        let reads = |o| mode.options().contains(&o);
        assert_eq!(
            caps.direct_writes,
            reads(JournalOption::DirectWrites),
            "{mode}"
        );
        assert_eq!(
            caps.intent_map,
            reads(JournalOption::IntentRegionPages),
            "{mode}"
        );
        assert_eq!(
            caps.intent_map,
            reads(JournalOption::IntentScanMib),
            "{mode}"
        );
        assert_eq!(
            caps.region_backed,
            reads(JournalOption::NvlogRegion),
            "{mode}"
        );
        assert!(
            !reads(JournalOption::WalPrealloc) || caps.replays_log,
            "{mode} preallocates a log it does not have"
        );
    }
}

/// A header or a DHL version claiming a transaction id past `MAX_TID` (a crafted
/// `fcc = u64::MAX` would overflow `fcc + 1`) is reported as damage, in every mode, and
/// nothing is written.
#[test]
fn a_tid_beyond_the_largest_is_an_error_and_changes_nothing() {
    use inpage::internals::{decode_slot, HEADER_LEN, HEADER_SLOTS, MAX_TID};
    let dir = tempfile::tempdir().unwrap();
    for mode in JournalMode::all() {
        let path = make_db(dir.path(), mode);
        let good = file_bytes(&path);
        let sides = |p: &Path| -> Vec<(PathBuf, Vec<u8>)> {
            side_files(p)
                .into_iter()
                .map(|s| (s.clone(), file_bytes(&s)))
                .collect()
        };
        let sides_before = sides(&path);
        let dhl = matches!(mode.layout_name(), "dhl" | "ips" | "mvbt");
        let mut crafted = Vec::new();
        // The header (the visible slot, under DHL) with fcc = u64::MAX, crc recomputed.
        for fcc in [MAX_TID + 1, u64::MAX] {
            let mut bad = good.clone();
            let slots = if dhl { HEADER_SLOTS } else { 1 };
            let slot = (0..slots)
                .filter_map(|s| decode_slot(&good, s).ok().map(|h| (s, h)))
                .max_by_key(|(_, h)| h.fcc)
                .map(|(s, _)| s)
                .unwrap();
            let mut h = decode_slot(&good, slot).unwrap();
            h.fcc = fcc;
            h.encode(&mut bad[slot * HEADER_LEN..]);
            inpage::internals::stamp_crc(&mut bad[..4096], 0);
            crafted.push((format!("header fcc {fcc}"), bad));
        }
        if dhl {
            // Page 1's second slot header claiming tid u64::MAX, in a file left as a crash
            // leaves it: no clean-shutdown mark (re-encoding a slot clears it) and no
            // intent areas (zeroed), so the open scans every page. (After a clean close
            // an open reads O(1) pages and never looks at page 1.)
            let mut bad = good.clone();
            for s in 0..HEADER_SLOTS {
                if let Ok(h) = decode_slot(&good, s) {
                    h.encode(&mut bad[s * HEADER_LEN..]);
                }
            }
            bad[2 * HEADER_LEN..504].fill(0);
            bad[4096 + 32..4096 + 40].copy_from_slice(&u64::MAX.to_le_bytes());
            crafted.push(("page 1 slot header tid u64::MAX".into(), bad));
        }
        for (what, bad) in crafted {
            std::fs::write(&path, &bad).unwrap();
            for ro in [false, true] {
                let r = Database::open(&path, Config::default().read_only(ro));
                let msg = match r {
                    Err(e @ (Error::NotADatabase { .. } | Error::Corrupt { .. })) => e.to_string(),
                    other => panic!("{mode} {what}: expected a damage error, got {other:?}"),
                };
                assert!(
                    msg.contains("largest transaction id") || msg.contains("largest tid"),
                    "{mode} {what}: {msg}"
                );
                assert_eq!(file_bytes(&path), bad, "{mode} {what}: file changed");
                assert_eq!(sides(&path), sides_before, "{mode} {what}: side files");
            }
        }
    }
}
