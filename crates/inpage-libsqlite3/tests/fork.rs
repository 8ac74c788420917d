//! `fork()` under the drop-in, as Python's `multiprocessing` (fork start method),
//! pre-fork servers and daemons meet it: a parent holding a connection — with a reader
//! mid-scan and a write transaction open — forks; each child tries the connection it
//! inherited (which must fail with an error, never write) and opens its own (which is
//! independent of the parent's: refused while the parent holds the database, or
//! working); the parent goes on committing. Whatever happens, every commit acknowledged
//! to anyone is in the file afterwards and `integrity_check` is ok. Every registry mode,
//! two children (the three-process variant).

mod pylib;

use std::process::Command;

const SCRIPT: &str = r#"
import os, sqlite3, sys
path, mode, nchildren = sys.argv[1], sys.argv[2], int(sys.argv[3])
uri = "file:%s?journal_mode=%s" % (path, mode)
c = sqlite3.connect(uri, uri=True, isolation_level=None)
c.execute("create table t(x)")
c.execute("insert into t values (0)")
acked = 1
reader = sqlite3.connect(uri, uri=True)
cur = reader.execute("select x from t")
cur.fetchone()
c.execute("begin")
c.execute("insert into t values (1)")
children = []
for n in range(nchildren):
    rd, wr = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(rd)
        status, mine = 0, 0
        try:
            c.execute("insert into t values (99)")
            status |= 1   # the inherited connection wrote
        except sqlite3.Error:
            pass
        try:
            cur.fetchall()
        except sqlite3.Error:
            pass
        try:
            d = sqlite3.connect(uri, uri=True, timeout=0, isolation_level=None)
            for i in range(100):
                d.execute("insert into t values (?)", (1000 * (n + 1) + i,))
                mine += 1
        except sqlite3.OperationalError as e:
            if "locked" not in str(e):
                status |= 2
                os.write(2, ("child error: %s\n" % e).encode())
        os.write(wr, ("%d %d" % (status, mine)).encode())
        os._exit(0)
    os.close(wr)
    children.append((pid, rd))
c.execute("commit")
acked += 1
for i in range(10):
    c.execute("insert into t values (?)", (2000 + i,))
    acked += 1
status = 0
for pid, rd in children:
    got = b""
    while True:
        b = os.read(rd, 100)
        if not b:
            break
        got += b
    os.waitpid(pid, 0)
    s, mine = map(int, got.split())
    status |= s
    acked += mine
del cur
reader.close()
c.close()
c = sqlite3.connect(path)
print(status, c.execute("select count(*) from t").fetchone()[0] - acked,
      c.execute("pragma integrity_check").fetchone()[0])
"#;

#[test]
fn fork_keeps_every_acknowledged_commit_in_every_mode() {
    if let Some(why) = pylib::no_python_sqlite3() {
        println!("SKIPPED: {why}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let lib = pylib::lib_dir(dir.path());
    for mode in inpage::JournalMode::all() {
        for children in [1, 2] {
            let db = dir.path().join(format!("fork-{mode}-{children}.db"));
            let mut cmd = Command::new("python3");
            cmd.args(["-c", SCRIPT])
                .arg(&db)
                .arg(mode.name())
                .arg(children.to_string())
                .env("LD_LIBRARY_PATH", &lib)
                .env_remove(inpage_sql::JOURNAL_MODE_ENV);
            let o = cmd.output().unwrap();
            let out = String::from_utf8_lossy(&o.stdout);
            assert!(
                o.status.success(),
                "{mode} x{children}: {out}\n{}",
                String::from_utf8_lossy(&o.stderr)
            );
            // status 0 (no child wrote through its inherited connection or met an error
            // other than "locked"), 0 rows missing or extra, integrity ok.
            assert_eq!(out.trim(), "0 0 ok", "{mode} x{children}");
        }
    }
}
