//! Every saved fuzz finding, replayed: `crates/inpage/tests/fuzz-regressions/<name>/`
//! holds the files of one shrunk finding (`fuzz.db` and any `fuzz.db-journal`,
//! `fuzz.db-wal`) and `note.txt` saying what it was and how it was fixed.
//!
//! Invariants:
//! - An input is run exactly as the fuzzer runs it (every open mode, every tree read
//!   three ways, the check, the commit probe), so a fix that regresses is a finding
//!   again here.
//! - Each input must still reach the engine (some open succeeds), so a format change
//!   that makes every regression input an early typed error is noticed. A format change
//!   rebuilds the inputs from the new corpus (`inpage-fuzz base`) with the same damage
//!   (each note.txt says how); a finding that the new format makes unreachable moves
//!   to a unit test that builds its state directly (the integer tree over byte keys,
//!   once two swapped pages, now caught by the page-number-bound checksums: `check.rs`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use inpage::check::check;
use inpage::{Config, Database};
use inpage_fuzz::corpus::{db_path, Files};
use inpage_fuzz::exec;

fn regressions_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../inpage/tests/fuzz-regressions")
}

fn inputs() -> Vec<(String, Files)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(regressions_dir()).expect("fuzz-regressions directory") {
        let dir = entry.expect("directory entry").path();
        if !dir.is_dir() {
            continue;
        }
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        assert!(dir.join("note.txt").is_file(), "{name}: no note.txt");
        let files = Files::load(&dir).expect("loading regression input");
        assert!(files.db.is_some(), "{name}: no fuzz.db");
        out.push((name, files));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[test]
fn every_regression_input_runs_without_a_finding() {
    exec::install_panic_hook();
    let inputs = inputs();
    assert!(inputs.len() >= 2, "regression inputs missing");
    for (name, files) in &inputs {
        let out = exec::run(files, true, None);
        assert_eq!(out.finding, None, "{name}");
        assert!(out.opened > 0, "{name}: no open succeeds any more");
    }
}

/// A WAL cut by hand after a torn checkpoint: the frames that would finish the
/// checkpoint are gone, so no committed state can be read. Until the open refuses it,
/// the check must (see the input's note.txt).
#[test]
fn a_wal_cut_after_a_torn_checkpoint_fails_the_check_when_it_opens() {
    let (name, files) = inputs()
        .into_iter()
        .find(|(n, _)| n == "wal-cut-after-torn-checkpoint")
        .expect("wal-cut-after-torn-checkpoint input");
    assert!(files.wal.is_some(), "{name}: no WAL");
    let modes = std::iter::once(None).chain(inpage::JournalMode::all().map(Some));
    for mode in modes {
        let config = Config {
            journal_mode: mode,
            ..Config::default()
                .vfs(Arc::new(files.to_sim()))
                .create(false)
        };
        let Ok(db) = Database::open(db_path(), config) else {
            continue;
        };
        let r = db.begin_read().expect("read transaction");
        assert!(
            check(&r, &HashMap::new()).is_err(),
            "{name}: opened with {mode:?} and the check passes a state no commit left"
        );
    }
}
