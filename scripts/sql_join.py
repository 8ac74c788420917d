#!/usr/bin/env python3
"""The `join_indexed` row of scripts/sql_ops.py on its own, for profiles and instruction
counts: loads the same 100,000-row table with an index and the 20,000 seek keys into
DIR/j.db (once), then runs the join REPS times on a fresh connection and prints the mean
time. Whatever libsqlite3 LD_LIBRARY_PATH names is the one measured, e.g.

  LD_LIBRARY_PATH=DIR_OF_LIB valgrind --tool=callgrind python3 scripts/sql_join.py /tmp/j 2

(run it once without valgrind first so the load is not counted).
"""
import os
import random
import sqlite3
import sys
import time

d, reps = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 5
os.makedirs(d, exist_ok=True)
path = os.path.join(d, "j.db")
if not os.path.exists(path):
    c = sqlite3.connect(path, isolation_level=None)
    name_of = lambda i: f"name-{(i * 2654435761) % (1 << 32):08x}"
    rows = [(i, name_of(i), "x" * 40) for i in range(100000)]
    c.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, v TEXT)")
    c.execute("CREATE INDEX t_name ON t(name)")
    c.execute("BEGIN")
    c.executemany("INSERT INTO t VALUES(?,?,?)", rows)
    c.execute("COMMIT")
    seek = [r[1] for r in random.Random(1).sample(rows, len(rows) // 5)]
    c.execute("CREATE TABLE s(k TEXT)")
    c.execute("BEGIN")
    c.executemany("INSERT INTO s VALUES(?)", [(n,) for n in seek])
    c.execute("COMMIT")
    c.close()
c = sqlite3.connect(path, isolation_level=None)
n = c.execute("SELECT count(*) FROM s").fetchone()[0]
t0 = time.perf_counter()
for _ in range(reps):
    got = c.execute("SELECT count(*) FROM s JOIN t ON t.name = s.k").fetchone()[0]
    assert got == n, (got, n)
print(f"join {(time.perf_counter() - t0) / reps * 1000:.1f} ms")
