#!/usr/bin/env python3
"""One contender's run of the SQL operations bench (issue 38's table): bulk load, index
build, seeks, joins, ranges, backup, delete + VACUUM, random-key load, blob I/O, deletes
under auto_vacuum FULL and INCREMENTAL, and file sizes, through Python's sqlite3 on whatever libsqlite3 the process loaded (stock, or the
inpage drop-in through LD_LIBRARY_PATH; scripts/sql_ops.sh runs both side by side).

Every operation checks its own result (row counts, the bytes a blob read returns), so a
wrong answer fails the run instead of timing well. Prints one JSON object: seconds per
operation and bytes per file size.

usage: sql_ops.py DIR [--rows N] [--journal-mode M]
"""
import argparse
import json
import os
import random
import shutil
import sqlite3
import time

ap = argparse.ArgumentParser()
ap.add_argument("dir")
ap.add_argument("--rows", type=int, default=100_000)
ap.add_argument("--journal-mode", default="")
a = ap.parse_args()
N = a.rows
shutil.rmtree(a.dir, ignore_errors=True)
os.makedirs(a.dir)
res = {"sqlite_version": sqlite3.sqlite_version, "rows": N}


def connect(path):
    c = sqlite3.connect(path, isolation_level=None)
    if a.journal_mode:
        c.execute(f"PRAGMA journal_mode={a.journal_mode}")
    # The apps' settings (WORKLOADS.md): durable commits, a bounded WAL.
    c.execute("PRAGMA synchronous=FULL")
    c.execute("PRAGMA journal_size_limit=524288")
    return c


def file_bytes(c, path):
    """The database file's size once its log is checkpointed into it. The log itself is
    left out: stock's TRUNCATE checkpoint empties it, inpage's keeps it at most
    journal_size_limit (512 KiB here)."""
    c.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    return os.path.getsize(path)


def timed(name, f):
    t0 = time.perf_counter()
    f()
    res[name] = round(time.perf_counter() - t0, 4)


def expect(got, want, what):
    if got != want:
        raise SystemExit(f"{what}: got {got!r}, want {want!r}")


def name_of(i):
    return f"name-{(i * 2654435761) % (1 << 32):08x}"


path = os.path.join(a.dir, "a.db")
c = connect(path)
c.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, v TEXT)")
c.execute("CREATE INDEX t_name ON t(name)")
res["empty_bytes"] = file_bytes(c, path)
rows = [(i, name_of(i), "x" * 40) for i in range(N)]


def insert():
    c.execute("BEGIN")
    c.executemany("INSERT INTO t VALUES(?,?,?)", rows)
    c.execute("COMMIT")


timed("insert_indexed", insert)
expect(c.execute("SELECT count(*) FROM t").fetchone()[0], N, "rows after the load")
timed("create_index", lambda: c.execute("CREATE INDEX t_v ON t(v, id)"))
seek_names = [r[1] for r in random.Random(1).sample(rows, N // 5)]


def seeks():
    c.execute("BEGIN")
    found = sum(c.execute("SELECT id FROM t WHERE name=?", (n,)).fetchone() is not None
                for n in seek_names)
    c.execute("COMMIT")
    expect(found, len(seek_names), "index seeks")


timed("index_seeks_txn", seeks)
c.execute("CREATE TABLE s(k TEXT)")
c.execute("BEGIN")
c.executemany("INSERT INTO s VALUES(?)", [(n,) for n in seek_names])
c.execute("COMMIT")
timed("join_indexed", lambda: expect(
    c.execute("SELECT count(*) FROM s JOIN t ON t.name = s.k").fetchone()[0],
    len(seek_names), "join"))
timed("seeks_one_statement", lambda: expect(
    c.execute("SELECT count(*) FROM t WHERE name IN (SELECT k FROM s)").fetchone()[0],
    len(seek_names), "IN seeks"))


def ranges():
    r = random.Random(2)
    for _ in range(200):
        lo = f"name-{r.randrange(1 << 32):08x}"
        c.execute("SELECT count(*), sum(length(v)) FROM "
                  "(SELECT v FROM t WHERE name >= ? ORDER BY name LIMIT 1000)", (lo,)).fetchone()


timed("index_ranges", ranges)
res["loaded_bytes"] = file_bytes(c, path)


def backup():
    b = sqlite3.connect(os.path.join(a.dir, "b.db"))
    c.backup(b)
    expect(b.execute("SELECT count(*) FROM t").fetchone()[0], N, "rows in the backup")
    b.close()


timed("backup", backup)
timed("delete_90pct", lambda: c.execute("DELETE FROM t WHERE id % 10 != 0"))
timed("vacuum", lambda: c.execute("VACUUM"))
expect(c.execute("SELECT count(*) FROM t").fetchone()[0], (N + 9) // 10, "rows after VACUUM")
res["vacuumed_bytes"] = file_bytes(c, path)
c.close()

path2 = os.path.join(a.dir, "r.db")
c2 = connect(path2)
c2.execute("CREATE TABLE r(k TEXT PRIMARY KEY, v TEXT) WITHOUT ROWID")
rnd = random.Random(3)
keys = [f"{rnd.random():.17f}" for _ in range(N)]


def random_load():
    c2.execute("BEGIN")
    c2.executemany("INSERT OR REPLACE INTO r VALUES(?,?)", [(k, "y" * 30) for k in keys])
    c2.execute("COMMIT")


timed("random_key_load", random_load)
res["random_load_bytes"] = file_bytes(c2, path2)
c2.close()

path3 = os.path.join(a.dir, "blob.db")
c3 = connect(path3)
c3.execute("CREATE TABLE b(id INTEGER PRIMARY KEY, data BLOB)")
blob_len = max(1, N // 3125) << 20  # 32 MiB at 100,000 rows
c3.execute("INSERT INTO b VALUES(1, zeroblob(?))", (blob_len,))
chunk = 65536
spots = [(i * 1999) % (blob_len // chunk) * chunk for i in range(16)]


def blob_writes():
    with c3.blobopen("b", "data", 1) as bl:
        for at in spots:
            bl.seek(at)
            bl.write(bytes([at // chunk % 251]) * chunk)


def blob_reads():
    with c3.blobopen("b", "data", 1, readonly=True) as bl:
        for at in reversed(spots):
            bl.seek(at)
            expect(bl.read(chunk)[:1], bytes([at // chunk % 251]), "blob bytes read back")


timed("blob_write_64k", blob_writes)
timed("blob_read_64k", blob_reads)
c3.close()


def auto_vacuum_db(name, setting):
    """A database created with `auto_vacuum` set: the pragma goes first, before the
    journal mode (stock fixes the setting once the file has a header), then the rows of
    the indexed load, one in 40 with a value in an overflow chain."""
    p = os.path.join(a.dir, name)
    cv = sqlite3.connect(p, isolation_level=None)
    cv.execute(f"PRAGMA auto_vacuum={setting}")
    if a.journal_mode:
        cv.execute(f"PRAGMA journal_mode={a.journal_mode}")
    cv.execute("PRAGMA synchronous=FULL")
    cv.execute("PRAGMA journal_size_limit=524288")
    cv.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, v BLOB)")
    cv.execute("CREATE INDEX t_name ON t(name)")
    cv.execute("BEGIN")
    cv.executemany("INSERT INTO t VALUES(?,?,?)",
                   [(i, name_of(i), b"z" * (5000 if i % 40 == 0 else 40)) for i in range(N)])
    cv.execute("COMMIT")
    return cv, p


# auto_vacuum=FULL: the 90 % delete gives its pages back in its commit.
c4, path4 = auto_vacuum_db("full.db", "FULL")
timed("full_delete_90pct", lambda: c4.execute("DELETE FROM t WHERE id % 10 != 0"))
expect(c4.execute("PRAGMA freelist_count").fetchone()[0], 0, "free pages under FULL")
expect(c4.execute("SELECT count(*) FROM t").fetchone()[0], (N + 9) // 10, "rows after delete")
res["full_deleted_bytes"] = file_bytes(c4, path4)
c4.close()

# auto_vacuum=INCREMENTAL: the same delete, then every free page given back.
c5, path5 = auto_vacuum_db("incr.db", "INCREMENTAL")
c5.execute("DELETE FROM t WHERE id % 10 != 0")
expect(c5.execute("PRAGMA freelist_count").fetchone()[0] > 0, True, "free pages after delete")
# executescript steps the pragma to its end (execute steps it once: one page).
timed("incremental_vacuum", lambda: c5.executescript("PRAGMA incremental_vacuum;"))
expect(c5.execute("PRAGMA freelist_count").fetchone()[0], 0, "free pages after it")
expect(c5.execute("PRAGMA integrity_check").fetchone()[0], "ok", "integrity after it")
res["incr_vacuumed_bytes"] = file_bytes(c5, path5)
c5.close()
print(json.dumps(res))
