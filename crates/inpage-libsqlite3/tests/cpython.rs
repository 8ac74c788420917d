//! CPython's own `test_sqlite3` suite (Lib/test/test_sqlite3, 436 tests in 3.11) on the
//! drop-in: Python's `sqlite3` module loads the cdylib through LD_LIBRARY_PATH and the
//! whole suite must pass, with no test skipped that the system's stock SQLite does not
//! skip too. Both runs are made here, so the comparison holds on any machine.
//!
//! The suite ships with CPython (pyenv, python.org builds) or, for Debian's python3, in
//! `libpython3.X-testsuite`, which `scripts/setup.sh` installs; a python3 without it
//! fails this test with that hint rather than skipping it.

mod pylib;

use std::collections::BTreeSet;
use std::process::Command;

/// A python3 that has the suite, or why there is none.
fn python_with_suite() -> Result<String, String> {
    let mut tried = Vec::new();
    for py in ["python3", "/usr/bin/python3"] {
        match Command::new(py)
            .args(["-c", "import sqlite3, test.test_sqlite3; print(True)"])
            .output()
        {
            // (Importing the suite prints the versions it tests first.)
            Ok(o) if o.status.success() && o.stdout.ends_with(b"True\n") => return Ok(py.into()),
            Ok(o) => tried.push(format!(
                "{py}: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            )),
            Err(e) => tried.push(format!("{py}: {e}")),
        }
    }
    Err(format!(
        "no python3 with CPython's test_sqlite3 suite (Debian: apt-get install \
         libpython3-all-testsuite, or the libpython3.X-testsuite of your python3): {tried:?}"
    ))
}

struct Run {
    ok: bool,
    failed: BTreeSet<String>,
    skipped: BTreeSet<String>,
    ran: usize,
    tail: String,
}

fn run_suite(py: &str, lib: Option<&std::path::Path>, cwd: &std::path::Path) -> Run {
    let mut cmd = Command::new(py);
    cmd.args(["-m", "test", "test_sqlite3", "-v"])
        .current_dir(cwd)
        .env_remove(inpage_sql::JOURNAL_MODE_ENV);
    match lib {
        Some(l) => cmd.env("LD_LIBRARY_PATH", l),
        None => cmd.env_remove("LD_LIBRARY_PATH"),
    };
    let o = cmd.output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let mut failed = BTreeSet::new();
    let mut skipped = BTreeSet::new();
    let mut ran = 0;
    for l in out.lines() {
        // `test_x (test.test_sqlite3.mod.Class.test_x) ... ok|FAIL|ERROR|skipped '...'`
        let Some((name, verdict)) = l.split_once(") ... ") else {
            continue;
        };
        ran += 1;
        let name = name.to_string() + ")";
        if verdict.starts_with("skipped") {
            skipped.insert(name);
        } else if verdict != "ok" && !verdict.starts_with("expected failure") {
            failed.insert(name);
        }
    }
    // unittest's own count ("Ran 436 tests in 0.7s"): subtests and tests whose names span
    // lines are not all on `... ok` lines.
    if let Some(n) = out.lines().find_map(|l| {
        l.strip_prefix("Ran ")
            .and_then(|r| r.split_whitespace().next())
            .and_then(|n| n.parse().ok())
    }) {
        ran = n;
    }
    for l in out.lines() {
        for p in ["FAIL: ", "ERROR: "] {
            if let Some(n) = l.strip_prefix(p) {
                failed.insert(n.to_string());
            }
        }
    }
    let tail: Vec<&str> = out.lines().rev().take(12).collect();
    Run {
        ok: o.status.success(),
        failed,
        skipped,
        ran,
        tail: tail.into_iter().rev().collect::<Vec<_>>().join("\n"),
    }
}

#[test]
fn cpython_test_sqlite3_passes_on_the_drop_in() {
    if pylib::no_python_sqlite3().is_some() {
        // No python3 at all: the other Python tests say so; this one needs one too.
        panic!("{}", pylib::no_python_sqlite3().unwrap());
    }
    let py = python_with_suite().unwrap_or_else(|e| panic!("{e}"));
    let dir = tempfile::tempdir().unwrap();
    let lib = pylib::lib_dir(dir.path());
    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let stock = run_suite(&py, None, &work);
    let ours = run_suite(&py, Some(&lib), &work);
    assert!(
        ours.ran >= 400,
        "the suite ran {} tests:\n{}",
        ours.ran,
        ours.tail
    );
    assert!(
        ours.ok && ours.failed.is_empty(),
        "test_sqlite3 on the drop-in: {} failed: {:#?}\n{}",
        ours.failed.len(),
        ours.failed,
        ours.tail
    );
    let extra: Vec<&String> = ours.skipped.difference(&stock.skipped).collect();
    assert!(
        extra.is_empty(),
        "skipped on the drop-in but not on stock SQLite: {extra:#?}"
    );
    println!(
        "test_sqlite3: {} tests, {} skipped (stock SQLite: {} tests, {} skipped, {} failed)",
        ours.ran,
        ours.skipped.len(),
        stock.ran,
        stock.skipped.len(),
        stock.failed.len()
    );
}
