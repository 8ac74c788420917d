#!/usr/bin/env python3
"""Two bulk loads and the file each leaves, through whatever libsqlite3 the process
loaded (stock, or the inpage drop-in through LD_LIBRARY_PATH): N random keys into a
WITHOUT ROWID table (scripts/sql_ops.py's random_key_load), and N rows into a table with
an index on a hashed text column (its insert_indexed). For comparing page fill, and,
run under `valgrind --tool=callgrind`, the instructions two builds spend on the same
loads (the Python part is the same for both).

usage: python3 scripts/load_sizes.py DIR [N]   (N defaults to 100000; DIR is emptied)
Prints one JSON object: seconds and bytes per load.
"""
import json
import os
import random
import shutil
import sqlite3
import sys
import time

d = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 100_000
shutil.rmtree(d, ignore_errors=True)
os.makedirs(d)
res = {"sqlite_version": sqlite3.sqlite_version, "rows": n}


def load(name, path, schema, sql, rows):
    c = sqlite3.connect(path, isolation_level=None)
    c.execute("PRAGMA synchronous=FULL")
    for s in schema:
        c.execute(s)
    t0 = time.perf_counter()
    c.execute("BEGIN")
    c.executemany(sql, rows)
    c.execute("COMMIT")
    res[name + "_s"] = round(time.perf_counter() - t0, 3)
    c.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    res[name + "_bytes"] = os.path.getsize(path)
    ok = c.execute("PRAGMA integrity_check").fetchone()[0]
    if ok != "ok":
        raise SystemExit(f"{name}: integrity_check says {ok}")
    c.close()


rnd = random.Random(3)
load("random_key_load", os.path.join(d, "r.db"),
     ["CREATE TABLE r(k TEXT PRIMARY KEY, v TEXT) WITHOUT ROWID"],
     "INSERT OR REPLACE INTO r VALUES(?,?)",
     [(f"{rnd.random():.17f}", "y" * 30) for _ in range(n)])
load("indexed_load", os.path.join(d, "a.db"),
     ["CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, v TEXT)",
      "CREATE INDEX t_name ON t(name)"],
     "INSERT INTO t VALUES(?,?,?)",
     [(i, f"name-{(i * 2654435761) % (1 << 32):08x}", "x" * 40) for i in range(n)])
print(json.dumps(res))
