//! Way in (1): an unmodified rusqlite program (`examples/rusqlite-on-inpage`) built
//! against this crate's libsqlite3.so instead of a bundled SQLite, the way the README
//! tells rusqlite users to: rusqlite without its "bundled" feature, `SQLITE3_LIB_DIR`
//! naming the directory of inpage's libsqlite3.so (`SQLITE3_NO_PKG_CONFIG=1` so that
//! pkg-config cannot pick the system's SQLite instead), `LD_LIBRARY_PATH` at run time.
//! The program must report SQLite 3.53.2 (the system's is another version) and the
//! engine's default journal mode (`redo`), which only inpage has.

mod pylib;

use std::path::{Path, PathBuf};
use std::process::Command;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap()
        .to_path_buf()
}

#[test]
fn rusqlite_program_runs_on_inpage() {
    let dir = tempfile::tempdir().unwrap();
    // libsqlite3-sys links `-lsqlite3`: offer the cdylib under that name.
    let lib = dir.path().join("lib");
    std::fs::create_dir(&lib).unwrap();
    std::os::unix::fs::symlink(pylib::cdylib(), lib.join("libsqlite3.so")).unwrap();
    let example = workspace().join("examples/rusqlite-on-inpage");
    // Its own target directory (kept between runs, so only the first build is slow),
    // not the one the running `cargo test` holds.
    let target = workspace().join("target/rusqlite-example");
    let out = Command::new(env!("CARGO"))
        .args([
            "build",
            "--offline",
            "--locked",
            "--quiet",
            "--manifest-path",
        ])
        .arg(example.join("Cargo.toml"))
        .env("CARGO_TARGET_DIR", &target)
        .env("SQLITE3_LIB_DIR", &lib)
        .env("SQLITE3_NO_PKG_CONFIG", "1")
        .env_remove("RUSTFLAGS")
        .output()
        .expect("run cargo");
    assert!(
        out.status.success(),
        "building the rusqlite example failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let db = dir.path().join("rq.db");
    let run = Command::new(target.join("debug/rusqlite-on-inpage"))
        .arg(&db)
        .env("LD_LIBRARY_PATH", &lib)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert_eq!(
        stdout.trim(),
        format!(
            "rows=100 found=v042 journal_mode={} integrity=ok sqlite=3.53.2",
            inpage::DEFAULT_JOURNAL_MODE.name()
        )
    );
    // The file it wrote is an inpage file: stock SQLite (if this machine has its shell)
    // refuses it.
    if let Ok(o) = Command::new("sqlite3")
        .arg(&db)
        .arg("SELECT count(*) FROM sqlite_schema")
        .output()
    {
        assert!(!o.status.success(), "stock sqlite3 opened an inpage file");
    }
}
