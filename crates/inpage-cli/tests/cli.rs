//! `inpage inspect` and `inpage check` on good, corrupt and missing files.

use std::path::Path;
use std::process::Command;

use inpage::{Config, Database, JournalMode, KeyKind, ReadableTxn};

fn inpage(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_inpage"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn make(path: &Path) {
    let db = Database::open(path, Config::default().journal_mode(JournalMode::WAL)).unwrap();
    let mut w = db.begin_write().unwrap();
    let t = w.create_tree("users", KeyKind::Int).unwrap();
    for k in 0..500 {
        w.insert(&t, k, &vec![b'x'; (k as usize * 37) % 5000])
            .unwrap();
    }
    w.remove(&t, 3).unwrap();
    w.create_tree("names", KeyKind::Bytes).unwrap();
    w.commit().unwrap();
    db.close().unwrap();
}

#[test]
fn inspect_and_check_a_good_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("good.db");
    make(&path);
    let p = path.to_str().unwrap();
    let (code, out, err) = inpage(&["inspect", p]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("journal mode    wal"), "{out}");
    assert!(out.contains("fcc             1"), "{out}");
    assert!(
        out.contains("page writes     through the page cache"),
        "{out}"
    );
    assert!(
        out.contains("users") && out.contains("entries 499"),
        "{out}"
    );
    assert!(out.contains("overflow"), "{out}");
    let (code, out, err) = inpage(&["check", p]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with("ok:") && out.contains("2 trees, 499 entries"),
        "{out}"
    );
}

#[test]
fn check_reports_a_corrupt_page_with_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.db");
    make(&path);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[5 * 4096 + 100] ^= 1;
    std::fs::write(&path, &bytes).unwrap();
    let (code, _out, err) = inpage(&["check", path.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(
        err.contains("corrupt page 5") && err.contains("checksum"),
        "{err}"
    );
    assert_eq!(
        std::fs::read(&path).unwrap(),
        bytes,
        "check changed the file"
    );
}

#[test]
fn missing_and_foreign_files_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.db");
    let (code, _, err) = inpage(&["check", missing.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(err.contains("does not exist"), "{err}");
    assert!(!missing.exists(), "check created a file");
    let foreign = dir.path().join("foreign.db");
    std::fs::write(&foreign, vec![0xAB; 10_000]).unwrap();
    let (code, _, err) = inpage(&["inspect", foreign.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(err.contains("not an inpage database"), "{err}");
    let (code, _, _) = inpage(&["frobnicate"]);
    assert_eq!(code, 2, "clap usage error");
}

#[test]
fn inspect_page_shows_both_dhl_slot_headers() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dhl.db");
    let db = Database::open(&path, Config::default().journal_mode(JournalMode::DHL_CC)).unwrap();
    let mut w = db.begin_write().unwrap();
    let t = w.create_tree("t", KeyKind::Int).unwrap();
    w.insert(&t, 1, b"one").unwrap();
    w.commit().unwrap();
    db.insert("t", 2, b"two").unwrap();
    db.close().unwrap();
    let p = path.to_str().unwrap();
    let (code, out, err) = inpage(&["inspect", p, "--page", "0"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("header slot 0: fcc") && out.contains("header slot 1:"),
        "{out}"
    );
    // The tree's root: two versions, the newer one visible.
    let root = {
        let db = Database::open(&path, Config::default()).unwrap();
        let r = db.begin_read().unwrap();
        let info = r.tree_info(&r.open_tree("t").unwrap()).unwrap();
        info.root
    };
    let (code, out, err) = inpage(&["inspect", p, "--page", &root.to_string()]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("slot header 0: tid") && out.contains("slot header 1: tid"),
        "{out}"
    );
    assert!(
        out.contains("visible:") && out.contains("with 2 cells"),
        "{out}"
    );
    let (code, _, err) = inpage(&["inspect", p, "--page", "99999"]);
    assert_eq!(code, 1);
    assert!(err.contains("past the end"), "{err}");
}

#[test]
fn help_lists_every_journal_mode() {
    let (code, out, err) = inpage(&["--help"]);
    assert_eq!(code, 0, "{err}");
    for mode in JournalMode::all() {
        assert!(
            out.contains(&format!(" {},", mode.name()))
                || out.contains(&format!(" {} ", mode.name())),
            "{mode} missing from --help:\n{out}"
        );
    }
}

#[test]
fn inspect_names_the_reserved_tail_of_a_waldio_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.db");
    {
        let db =
            Database::open(&path, Config::default().journal_mode(JournalMode::WALDIO)).unwrap();
        let mut w = db.begin_write().unwrap();
        let t = w.create_tree("t", KeyKind::Int).unwrap();
        for k in 0..300 {
            w.insert(&t, k, &[b'y'; 100][..]).unwrap();
        }
        w.commit().unwrap();
        db.close().unwrap();
    }
    // The log stays next to the database, preallocated: 1000 frames and its header page.
    let log = std::fs::metadata(dir.path().join("w.db-waldio")).unwrap();
    assert_eq!(log.len(), 1001 * 4096);
    let p = path.to_str().unwrap();
    let (code, out, err) = inpage(&["inspect", p]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("journal mode    waldio"), "{out}");
    assert!(out.contains("reserved tail   32 bytes"), "{out}");
    assert!(out.contains("entries 300"), "{out}");
    let (code, out, err) = inpage(&["check", p]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("ok:"), "{out}");
}

/// `inspect` states what each mode promises, from its capabilities: the WALDIO modes
/// differ exactly there.
#[test]
fn inspect_states_what_the_mode_promises() {
    for (mode, want) in [
        (
            JournalMode::WALDIO,
            "survives a process kill and a power cut",
        ),
        (
            JournalMode::WALDIO_GC,
            "survives a process kill and a power cut",
        ),
        (
            JournalMode::WALDIO_NS,
            "a power cut may lose the newest ones",
        ),
        (
            JournalMode::WALDIO_GS,
            "even a process kill may lose the newest",
        ),
        (JournalMode::OFF, "no atomicity"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.db");
        {
            let db = Database::open(&path, Config::default().journal_mode(mode)).unwrap();
            db.write(|w| w.create_tree("t", KeyKind::Int).map(|_| ()))
                .unwrap();
            db.close().unwrap();
        }
        let (code, out, err) = inpage(&["inspect", path.to_str().unwrap()]);
        assert_eq!(code, 0, "{mode}: {err}");
        let line = out
            .lines()
            .find(|l| l.contains("(promises)"))
            .unwrap_or_else(|| panic!("{mode}: no promises line in {out}"));
        assert!(line.contains(want), "{mode}: {line}");
    }
}
