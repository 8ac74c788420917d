//! The cdylib as a drop-in libsqlite3: Python's sqlite3 module loads it through
//! LD_LIBRARY_PATH (a `libsqlite3.so.0` symlink to the library cargo built) and runs on
//! inpage. Skipped, with the reason printed, only if python3 or its sqlite3 module is
//! missing.

use std::path::PathBuf;
use std::process::Command;

/// The cdylib cargo built for this test run (next to the test binary, or uplifted).
fn cdylib() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    let name = format!(
        "{}inpage_sql{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    );
    [deps.join(&name), deps.parent().unwrap().join(&name)]
        .into_iter()
        .find(|p| p.exists())
        .unwrap_or_else(|| panic!("{name} not found next to {exe:?}"))
}

const SCRIPT: &str = r#"
import sqlite3, sys
path = sys.argv[1]
print("version", sqlite3.sqlite_version)
c = sqlite3.connect(path)
print("mode", c.execute("PRAGMA journal_mode").fetchone()[0])
c.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT)")
c.execute("CREATE INDEX t_name ON t(name)")
with c:
    c.executemany("INSERT INTO t(name) VALUES(?)", [("n%04d" % i,) for i in range(500)])
try:
    with c:
        c.execute("DELETE FROM t")
        raise RuntimeError("roll back")
except RuntimeError:
    pass
c.close()
c = sqlite3.connect(path)
print("count", c.execute("SELECT count(*) FROM t").fetchone()[0])
print("range", c.execute("SELECT min(id), max(id) FROM t WHERE name >= 'n0490'").fetchone())
print("mode", c.execute("PRAGMA journal_mode='wal'").fetchone()[0])
# The variadic API (exported through naked tail jumps): ints, a string and a double.
import ctypes
lib = ctypes.CDLL("libsqlite3.so.0")
lib.sqlite3_mprintf.restype = ctypes.c_void_p
p = lib.sqlite3_mprintf(b"%d-%s-%.2f", 42, b"x", ctypes.c_double(1.5))
print("mprintf", ctypes.string_at(p).decode())
lib.sqlite3_free(ctypes.c_void_p(p))
"#;

#[test]
fn python_sqlite3_runs_on_the_cdylib() {
    match Command::new("python3")
        .args(["-c", "import sqlite3"])
        .output()
    {
        Ok(o) if o.status.success() => {}
        Ok(o) => {
            println!(
                "SKIPPED: python3 has no sqlite3 module: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            return;
        }
        Err(e) => {
            println!("SKIPPED: python3 not runnable: {e}");
            return;
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("lib");
    std::fs::create_dir(&lib).unwrap();
    std::os::unix::fs::symlink(cdylib(), lib.join("libsqlite3.so.0")).unwrap();
    let db = dir.path().join("py.db");
    let out = Command::new("python3")
        .args(["-c", SCRIPT])
        .arg(&db)
        .env("LD_LIBRARY_PATH", &lib)
        .env_remove(inpage_sql::JOURNAL_MODE_ENV)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "python failed:\n{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // 3.53.2 is the vendored amalgamation (the system library is another version).
    let want = "version 3.53.2\nmode dhl-cc\ncount 500\nrange (491, 500)\nmode dhl-cc\nmprintf 42-x-1.50\n";
    assert_eq!(text, want);
}
