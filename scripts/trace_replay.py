#!/usr/bin/env python3
"""Replay SQL trace files (as `inpage bench trace` reads them: one statement per line,
`;`-terminated lines allowed) through Python's sqlite3 into a new database DB, in
autocommit mode (the trace's own BEGIN/COMMIT group statements), reading every row.
Whatever libsqlite3 LD_LIBRARY_PATH names is the one that runs, so instruction counts of
the drop-in and of stock SQLite compare on the same statements, e.g.

  inpage bench trace-gen --profile app-small --rows 3000 --txns 600 --out T
  grep -v '^SELECT' T/app-small.sql > T/writes.sql
  LD_LIBRARY_PATH=DIR_OF_LIB valgrind --tool=callgrind \\
      python3 scripts/trace_replay.py /tmp/r.db T/loading-app-small.sql T/writes.sql

and the same with the loading file alone, to subtract. PRAGMAS="PRAGMA a=b;PRAGMA c=d"
runs those first (stock SQLite as apps set it: journal_mode=WAL, wal_autocheckpoint=100,
journal_size_limit=524288, synchronous=FULL).
"""
import os
import sqlite3
import sys

db, files = sys.argv[1], sys.argv[2:]
for suffix in ("", "-wal", "-shm", "-journal"):
    if os.path.exists(db + suffix):
        os.remove(db + suffix)
conn = sqlite3.connect(db, isolation_level=None)
for p in os.environ.get("PRAGMAS", "").split(";"):
    if p.strip():
        conn.execute(p).fetchall()
for f in files:
    with open(f) as lines:
        for line in lines:
            line = line.strip()
            if line and not line.startswith("--"):
                for _ in conn.execute(line):
                    pass
conn.close()
print(sqlite3.sqlite_version)
