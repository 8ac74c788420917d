#!/usr/bin/env python3
"""Per-statement cost of autocommit statements through one or more builds of the drop-in.

Each argument is a directory holding a `libsqlite3.so.0` (the drop-in of some build, or a
stock SQLite); every library runs the same workload in a child process (Python's sqlite3
picks the library up through LD_LIBRARY_PATH), interleaved over `--rounds` rounds, and the
median per library is printed: 20,000 autocommit point reads and 3,000 autocommit updates
on a 2,000-row table in the file's default journal mode, in a fresh directory under
--dir (default /tmp). What it shows: the fixed cost a transaction pays (locks, the
change counter of several processes, `procs`), which a point read barely hides.

    python3 scripts/autocommit_cost.py [--rounds 5] [--dir /tmp] LIBDIR...
"""
import argparse, os, statistics, subprocess, sys

CHILD = r'''
import sqlite3, time, os, sys, tempfile
d = tempfile.mkdtemp(dir=sys.argv[1])
c = sqlite3.connect(os.path.join(d, "x.db"), isolation_level=None)
c.execute("create table t(k integer primary key, v)")
c.execute("begin")
for i in range(2000): c.execute("insert into t values (?, ?)", (i, "x" * 50))
c.execute("commit")
t0 = time.perf_counter()
for i in range(20000): c.execute("select v from t where k=?", (i % 2000,)).fetchone()
t1 = time.perf_counter()
for i in range(3000): c.execute("update t set v=? where k=?", ("y" * 50, i % 2000))
t2 = time.perf_counter()
print((t1 - t0) / 20000 * 1e6, (t2 - t1) / 3000 * 1e6)
'''

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--dir", default="/tmp")
    ap.add_argument("libs", nargs="+")
    a = ap.parse_args()
    got = {l: ([], []) for l in a.libs}
    for _ in range(a.rounds):
        for lib in a.libs:
            env = dict(os.environ, LD_LIBRARY_PATH=lib)
            out = subprocess.run([sys.executable, "-c", CHILD, a.dir], env=env,
                                 capture_output=True, text=True, check=True).stdout
            r, w = map(float, out.split())
            got[lib][0].append(r)
            got[lib][1].append(w)
    for lib, (r, w) in got.items():
        print("%-40s point read %.2f us/stmt, update %.1f us/stmt (medians of %d)"
              % (lib, statistics.median(r), statistics.median(w), a.rounds))

if __name__ == "__main__":
    main()
