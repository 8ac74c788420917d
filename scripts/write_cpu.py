#!/usr/bin/env python3
"""Write paths, for counting the instructions they cost under callgrind on whatever
libsqlite3 the process loaded (stock, or the inpage drop-in through LD_LIBRARY_PATH).

usage:
  python3 scripts/write_cpu.py DIR PHASES [JOURNAL_MODE]

PHASES is a comma-separated list run in order on a new database DIR/a.db holding
t(id INTEGER PRIMARY KEY, name TEXT, v TEXT) with an index on name:
  none     nothing more (the baseline: Python, the schema)
  load     20,000 rows in one transaction, ascending rowids, random-looking names
  index    CREATE INDEX on (v, id) over the loaded rows
  delete   DELETE of the 18,000 rows whose id is not a multiple of 10

Run `none`, `load`, `load,index` and `load,delete` under callgrind; the differences of
the counts are the cost of each phase (Python's start-up cancels out), e.g. with LIB the
directory holding libsqlite3.so.0:

  for p in none load load,index load,delete; do LD_LIBRARY_PATH=LIB valgrind \\
    --tool=callgrind --callgrind-out-file=/dev/null \\
    python3 scripts/write_cpu.py /tmp/w $p; done

Stock SQLite as apps run it takes JOURNAL_MODE wal. Each phase checks its row count.
"""
import os
import sqlite3
import sys

d, phases = sys.argv[1], sys.argv[2].split(",")
mode = sys.argv[3] if len(sys.argv) > 3 else None
os.makedirs(d, exist_ok=True)
for f in os.listdir(d):
    os.remove(os.path.join(d, f))
c = sqlite3.connect(os.path.join(d, "a.db"), isolation_level=None)
if mode:
    c.execute(f"PRAGMA journal_mode={mode}")
c.execute("PRAGMA synchronous=FULL")
c.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, v TEXT)")
c.execute("CREATE INDEX t_name ON t(name)")
N = 20000
rows = [(i, f"name-{(i * 2654435761) % (1 << 32):08x}", "x" * 40) for i in range(N)]


def count():
    return c.execute("SELECT count(*) FROM t").fetchone()[0]


if "load" in phases:
    c.execute("BEGIN")
    c.executemany("INSERT INTO t VALUES(?,?,?)", rows)
    c.execute("COMMIT")
    assert count() == N
if "index" in phases:
    c.execute("CREATE INDEX t_v ON t(v, id)")
if "delete" in phases:
    c.execute("DELETE FROM t WHERE id % 10 != 0")
    assert count() == N // 10
