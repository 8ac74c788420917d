//! What the Python-driven tests share: the cdylib cargo built, a directory that offers it
//! as `libsqlite3.so.0` (for LD_LIBRARY_PATH), and why python3 cannot run them here.
#![allow(dead_code)] // each test binary uses a part of it

use std::path::{Path, PathBuf};
use std::process::Command;

/// The cdylib cargo built for this test run (next to the test binary, or uplifted).
pub fn cdylib() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    let name = format!(
        "{}sqlite3{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    );
    [deps.join(&name), deps.parent().unwrap().join(&name)]
        .into_iter()
        .find(|p| p.exists())
        .unwrap_or_else(|| panic!("{name} not found next to {exe:?}"))
}

/// `dir/lib` holding a `libsqlite3.so.0` symlink to the cdylib.
pub fn lib_dir(dir: &Path) -> PathBuf {
    let lib = dir.join("lib");
    std::fs::create_dir(&lib).unwrap();
    std::os::unix::fs::symlink(cdylib(), lib.join("libsqlite3.so.0")).unwrap();
    lib
}

/// Why python3 cannot run a test here: `probe` (Python code) must exit 0 and print a
/// line starting with `True`; `None` when it does.
pub fn python_missing(probe: &str, what: &str) -> Option<String> {
    match Command::new("python3").args(["-c", probe]).output() {
        Ok(o) if o.status.success() && o.stdout.starts_with(b"True") => None,
        Ok(o) => Some(format!(
            "python3's sqlite3 {what}: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )),
        Err(e) => Some(format!("python3 not runnable: {e}")),
    }
}

/// Why python3 with a sqlite3 module is not available, if it is not.
pub fn no_python_sqlite3() -> Option<String> {
    python_missing("import sqlite3; print(True)", "module is missing")
}
