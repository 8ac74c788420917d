#!/usr/bin/env python3
"""What `auto_vacuum=FULL` costs a commit that frees a page, through whatever libsqlite3
the process loaded (stock, or the inpage drop-in through LD_LIBRARY_PATH): a table of
N rows with an index (the indexed load of scripts/sql_ops.py), then 200 autocommit
deletes of 100 consecutive rows each (each empties about a leaf, so most commits free a
page), with auto_vacuum NONE and then FULL. Prints, per setting, the page count before
and after, the free pages left and the mean time per delete commit.

usage: python3 scripts/auto_vacuum_cost.py DIR [N]   (N defaults to 400000; DIR is emptied)
"""
import os
import shutil
import sqlite3
import sys
import time

d = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 400_000
shutil.rmtree(d, ignore_errors=True)
os.makedirs(d)
for setting in ["NONE", "FULL"]:
    p = os.path.join(d, f"{setting}.db")
    c = sqlite3.connect(p, isolation_level=None)
    c.execute(f"PRAGMA auto_vacuum={setting}")
    c.execute("PRAGMA journal_mode=WAL")
    c.execute("PRAGMA synchronous=FULL")
    c.execute("PRAGMA journal_size_limit=524288")
    c.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, v TEXT)")
    c.execute("CREATE INDEX t_name ON t(name)")
    c.execute("BEGIN")
    c.executemany("INSERT INTO t VALUES(?,?,?)",
                  [(i, f"name-{(i * 2654435761) % (1 << 32):08x}", "x" * 40) for i in range(n)])
    c.execute("COMMIT")
    pages = c.execute("PRAGMA page_count").fetchone()[0]
    commits = 0
    t0 = time.perf_counter()
    for start in range(0, n // 2, n // 400):
        c.execute("DELETE FROM t WHERE id >= ? AND id < ?", (start, start + 100))
        commits += 1
    t1 = time.perf_counter()
    after = c.execute("PRAGMA page_count").fetchone()[0]
    free = c.execute("PRAGMA freelist_count").fetchone()[0]
    if c.execute("PRAGMA integrity_check").fetchone()[0] != "ok":
        raise SystemExit(f"{setting}: integrity_check failed")
    print(f"{setting}: pages {pages} -> {after}, free {free}, "
          f"{(t1 - t0) / commits * 1e6:.0f} us per delete commit ({commits} commits)")
    c.close()
