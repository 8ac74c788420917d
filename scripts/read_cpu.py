#!/usr/bin/env python3
"""Read paths, for counting the instructions one operation costs under callgrind on
whatever libsqlite3 the process loaded (stock, or the inpage drop-in through
LD_LIBRARY_PATH).

usage:
  python3 scripts/read_cpu.py DB load N          t (N rows, an index on a random text
                                                 key) and u (N rows pointing into t)
  python3 scripts/read_cpu.py DB rowid N         N rowid lookups, one statement each
  python3 scripts/read_cpu.py DB kseek N         N index seeks, one statement each
  python3 scripts/read_cpu.py DB join N          one statement joining u to t through
                                                 the index on u.tid, over t.id < N
  python3 scripts/read_cpu.py DB range N         N index ranges of 100 rows

Load once, then run one operation at two sizes under callgrind; the difference of the
two counts over the difference of the sizes is the cost of one operation (Python's own
start-up cancels out), e.g. with LIB the directory holding libsqlite3.so.0:

  LD_LIBRARY_PATH=LIB python3 scripts/read_cpu.py /tmp/r.db load 20000
  for n in 5000 15000; do LD_LIBRARY_PATH=LIB valgrind --tool=callgrind \\
    --callgrind-out-file=/dev/null python3 scripts/read_cpu.py /tmp/r.db join $n; done

Each operation checks what it read, so a wrong answer fails the run.
"""
import random
import sqlite3
import sys

db, what, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
c = sqlite3.connect(db, isolation_level=None)
if what == "load":
    c.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, k TEXT, v TEXT)")
    c.execute("CREATE TABLE u(id INTEGER PRIMARY KEY, tid INTEGER, w TEXT)")
    r = random.Random(1)
    c.execute("BEGIN")
    c.executemany("INSERT INTO t VALUES(?,?,?)",
                  ((i, "key%08d" % r.randrange(10**8), "v" * 40) for i in range(n)))
    c.executemany("INSERT INTO u VALUES(?,?,?)",
                  ((i, r.randrange(n), "w" * 20) for i in range(n)))
    c.execute("COMMIT")
    c.execute("CREATE INDEX tk ON t(k)")
    c.execute("CREATE INDEX ut ON u(tid)")
    sys.exit(0)
rows = c.execute("SELECT count(*) FROM t").fetchone()[0]
r = random.Random(2)
keys = [row[0] for row in c.execute("SELECT k FROM t")] if what == "kseek" else None
c.execute("BEGIN")
seen = 0
if what == "rowid":
    for _ in range(n):
        seen += len(c.execute("SELECT v FROM t WHERE id=?",
                              (r.randrange(rows),)).fetchone()[0]) == 40
elif what == "kseek":
    for _ in range(n):
        seen += c.execute("SELECT id FROM t WHERE k=?",
                          (keys[r.randrange(len(keys))],)).fetchone() is not None
elif what == "join":
    want = c.execute("SELECT count(*) FROM u WHERE tid < ?", (n,)).fetchone()[0]
    got = c.execute("SELECT count(*), sum(length(w)) FROM t JOIN u ON u.tid = t.id "
                    "WHERE t.id < ?", (n,)).fetchone()
    seen = n if got == (want, 20 * want) else 0
elif what == "range":
    for _ in range(n):
        lo = "key%08d" % r.randrange(10**8)
        ks = [row[0] for row in c.execute(
            "SELECT k FROM t WHERE k >= ? ORDER BY k LIMIT 100", (lo,))]
        seen += ks == sorted(ks) and all(k >= lo for k in ks)
else:
    raise SystemExit(f"unknown operation {what!r}")
c.execute("COMMIT")
if seen != n:
    raise SystemExit(f"{what}: {seen} of {n} operations read what they should")
