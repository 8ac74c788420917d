"""Seeded random SQL for the differential test (tests/differential.rs, issue 13).

Runs the same statement stream on whatever libsqlite3 this python3 loads (stock SQLite,
or inpage-sql through LD_LIBRARY_PATH) and prints one line per statement:
`seed<TAB>index<TAB>sql<TAB>result`; lines starting with `#` (library version, journal
mode) are not compared. Two runs are then compared line by line.

Invariants, and why they hold:
- The stream depends only on the seed: the generator never looks at a result (its
  model of open transactions, savepoints and existing indexes is its own guess), so
  both libraries get byte-identical SQL even when a statement fails on one of them.
- Every printed result is deterministic on a correct engine: queries have a total
  ORDER BY (ties broken by a unique key) or are marked `sorted` and compared as
  multisets; no floats; no DISTINCT, GROUP BY or min/max over a NOCASE value (which
  row's spelling comes back is unspecified).
- Errors are compared by class and extended code (`IntegrityError
  SQLITE_CONSTRAINT_UNIQUE`), never by message text (it differs between versions).

Standalone, to replay a seed: `python3 differential.py --seeds 7 --stmts 400 --dir D`
(`--dir :memory:` for in-memory databases; `--replay F.json` runs a saved list of
statements instead, e.g. a minimised failing stream from differential/). INPAGE_DIFF_CORRUPT=<seed>:<index> alters
that one result, to prove the comparison catches a difference.
"""

import argparse
import os
import random
import sqlite3

SCHEMA = [
    # Both libraries with their defaults (foreign keys off in both, as stock builds it):
    # t4's REFERENCES clause is checked only where a stream switches enforcement on.
    "CREATE TABLE t1(id INTEGER PRIMARY KEY, a INT, b TEXT, "
    "c INT NOT NULL DEFAULT 0 CHECK (c >= 0))",
    "CREATE TABLE t2(k TEXT COLLATE NOCASE NOT NULL, n INT NOT NULL, v TEXT, "
    "PRIMARY KEY (k, n)) WITHOUT ROWID",
    "CREATE TABLE t3(id INTEGER PRIMARY KEY, ref INT, w TEXT UNIQUE)",
]

# name -> body; several may fail to build (UNIQUE over duplicates): compared as errors.
INDEXES = {
    "i1a": "t1(a)",
    "i1b": "t1(b COLLATE NOCASE)",
    "i1ab": "t1(a DESC, b)",
    "i1ca": "t1(c, a DESC, id)",
    "i1p": "t1(a) WHERE a > 10",
    "u1bc": "UNIQUE t1(b, c)",
    "i2v": "t2(v)",
    "i2n": "t2(n DESC)",
    "i2vn": "t2(v COLLATE NOCASE, n)",
    "u2v": "UNIQUE t2(v DESC)",
    "i3r": "t3(ref, w DESC)",
}

WORDS = ["apple", "Apple", "APPLE", "banana", "Banana", "cherry", "date", "Date",
         "elder", "fig", "", "a b", "\u00fcber", "\u00dcber", "zz"]


def q(v):
    if v is None:
        return "NULL"
    if isinstance(v, int):
        return str(v)
    return "'" + v.replace("'", "''") + "'"


class Gen:
    def __init__(self, seed, long_max=300):
        self.r = random.Random(seed)
        self.long_max = long_max
        self.in_txn = False
        self.savepoints = []
        self.sp_next = 0
        self.t4 = False

    def int_(self, lo=-3, hi=40, null=0.08):
        return None if self.r.random() < null else self.r.randrange(lo, hi)

    def text(self, null=0.08):
        r = self.r
        if r.random() < null:
            return None
        w = r.choice(WORDS)
        if r.random() < 0.15:  # long values split pages; with --long-keys, index keys too
            w += "x" * r.randrange(40, self.long_max)
        elif r.random() < 0.4:
            w += str(r.randrange(30))
        return w

    def row1(self, with_id):
        r = self.r
        c = r.randrange(-1, 30) if r.random() < 0.05 else r.randrange(0, 30)
        if r.random() < 0.03:
            c = None  # NOT NULL violation
        vals = [self.int_(), self.text(), c]
        if with_id:
            vals.insert(0, r.randrange(1, 400))
        return "(" + ", ".join(map(q, vals)) + ")"

    def row2(self):
        return "(%s, %s, %s)" % (q(self.text(0.02) or "k"), q(self.r.randrange(0, 12)),
                                 q(self.text()))

    def row3(self):
        return "(%s, %s)" % (q(self.int_(1, 300)), q(self.text(0.2)))

    def where1(self):
        r = self.r
        x, y = sorted([r.randrange(-3, 40), r.randrange(-3, 40)])
        return r.choice([
            "a BETWEEN %d AND %d" % (x, y),
            "id %% %d = %d" % (r.randrange(2, 7), r.randrange(2)),
            "b = %s COLLATE NOCASE" % q(r.choice(WORDS)),
            "b LIKE %s" % q(r.choice("abcdefz") + "%"),
            "a IS NULL",
            "c > %d" % r.randrange(30),
            "a IN (%s)" % ", ".join(str(r.randrange(-3, 40)) for _ in range(r.randrange(1, 6))),
            "id IN (SELECT ref FROM t3)",
            "id > %d" % r.randrange(0, 400),
        ])

    def where2(self):
        r = self.r
        return r.choice([
            "k = %s" % q(r.choice(WORDS)),
            "k >= %s" % q(r.choice(WORDS)),
            "n BETWEEN %d AND %d" % (r.randrange(6), r.randrange(4, 12)),
            "v IS NULL",
            "v > %s" % q(r.choice(WORDS)),
            "n IN (SELECT a FROM t1)",
        ])

    def write(self):
        r = self.r
        k = r.randrange(17)
        if k == 0:
            return "INSERT INTO t1 VALUES " + ", ".join(
                self.row1(True) for _ in range(r.randrange(1, 6)))
        if k in (1, 2):
            verb = r.choice(["INSERT", "INSERT", "INSERT OR REPLACE", "INSERT OR IGNORE",
                             "REPLACE"])
            return "%s INTO t1(a, b, c) VALUES %s" % (verb, ", ".join(
                self.row1(False) for _ in range(r.randrange(1, 8))))
        if k == 3:
            return "INSERT OR REPLACE INTO t1 VALUES " + self.row1(True)
        if k in (4, 5):
            verb = r.choice(["INSERT", "INSERT", "INSERT OR REPLACE", "INSERT OR IGNORE"])
            return "%s INTO t2 VALUES %s" % (verb, ", ".join(
                self.row2() for _ in range(r.randrange(1, 8))))
        if k == 6:
            verb = r.choice(["INSERT", "INSERT OR REPLACE"])
            return "%s INTO t3(ref, w) VALUES %s" % (verb, ", ".join(
                self.row3() for _ in range(r.randrange(1, 5))))
        if k == 7:
            return r.choice([
                "UPDATE t1 SET a = a + %d WHERE %s" % (r.randrange(-5, 6), self.where1()),
                "UPDATE t1 SET b = %s, c = c + 1 WHERE %s" % (q(self.text()), self.where1()),
                "UPDATE t1 SET c = c - %d WHERE %s" % (r.randrange(0, 4), self.where1()),
            ])
        if k == 8:  # rowid changes: conflicts with existing rows are errors or replaces
            return "UPDATE OR %s t1 SET id = id + %d WHERE %s" % (
                r.choice(["ABORT", "REPLACE", "IGNORE", "FAIL"]), r.randrange(-20, 21),
                self.where1())
        if k == 9:
            return r.choice([
                "UPDATE t2 SET v = %s WHERE %s" % (q(self.text()), self.where2()),
                "UPDATE t2 SET n = n + %d WHERE %s" % (r.randrange(-2, 3), self.where2()),
                "UPDATE OR REPLACE t2 SET k = %s WHERE %s" % (q(r.choice(WORDS)), self.where2()),
            ])
        if k == 10:
            return "UPDATE t3 SET w = %s WHERE ref %% %d = 0" % (q(self.text()),
                                                                 r.randrange(2, 9))
        if k == 11:
            return "DELETE FROM t1 WHERE " + self.where1()
        if k == 12:
            return "DELETE FROM t2 WHERE " + self.where2()
        if k == 13:
            return r.choice(["DELETE FROM t3 WHERE ref > %d" % r.randrange(300),
                             "DELETE FROM t3 WHERE ref NOT IN (SELECT id FROM t1)",
                             "DELETE FROM t1" if r.random() < 0.1 else "DELETE FROM t3"])
        if k == 14:
            return r.choice([
                "INSERT INTO t1(a, b, c) SELECT n, v, n FROM t2 WHERE " + self.where2(),
                "INSERT OR IGNORE INTO t2 SELECT coalesce(b, 'nb'), a %% 12, b FROM t1 "
                "WHERE a IS NOT NULL AND " + self.where1(),
                "INSERT INTO t3(ref, w) SELECT id, b FROM t1 WHERE " + self.where1(),
            ])
        if k == 15:
            return "INSERT INTO t2 VALUES %s ON CONFLICT(k, n) DO UPDATE SET v = " \
                   "coalesce(v, '') || excluded.v" % self.row2()
        if r.random() < 0.1:
            # Enforcement switched on and off by the stream (a no-op inside a
            # transaction, in both libraries).
            return "PRAGMA foreign_keys = " + r.choice(["ON", "OFF"])
        if not self.t4 or r.random() < 0.3:
            self.t4 = not self.t4
            if self.t4:
                return "CREATE TABLE IF NOT EXISTS t4(x INTEGER PRIMARY KEY, y TEXT, " \
                       "z INT REFERENCES t1)"
            return "DROP TABLE IF EXISTS t4"
        return r.choice(["INSERT INTO t4(y, z) SELECT b, id FROM t1 WHERE " + self.where1(),
                         "DELETE FROM t4 WHERE x %% 3 = %d" % r.randrange(3)])

    def ddl(self):
        r = self.r
        name = r.choice(sorted(INDEXES))
        if r.random() < 0.55:
            body = INDEXES[name]
            uniq = ""
            if body.startswith("UNIQUE "):
                uniq, body = "UNIQUE ", body[7:]
            tab, rest = body.split("(", 1)
            return "CREATE %sINDEX IF NOT EXISTS %s ON %s(%s" % (uniq, name, tab, rest)
        return "DROP INDEX IF EXISTS " + name

    def txn(self):
        r = self.r
        k = r.randrange(10)
        if not self.in_txn:
            if k < 6:
                self.in_txn = True
                return r.choice(["BEGIN", "BEGIN IMMEDIATE", "BEGIN DEFERRED"])
            if k < 8:  # a savepoint outside BEGIN opens a transaction
                self.in_txn = True
                return self.savepoint()
            return r.choice(["COMMIT", "ROLLBACK", "RELEASE nosuch"])  # errors
        if k < 4:
            return self.savepoint()
        if k < 6 and self.savepoints:
            sp = r.choice(self.savepoints)
            del self.savepoints[self.savepoints.index(sp) + 1:]
            return "ROLLBACK TO " + sp
        if k < 8 and self.savepoints:
            sp = r.choice(self.savepoints)
            del self.savepoints[self.savepoints.index(sp):]
            if not self.savepoints and self.in_txn == "sp":
                self.in_txn = False
            return "RELEASE " + sp
        self.in_txn = False
        self.savepoints = []
        return r.choice(["COMMIT", "ROLLBACK", "END"])

    def savepoint(self):
        name = "s%d" % self.sp_next
        self.sp_next += 1
        if not self.in_txn:
            self.in_txn = "sp"
        self.savepoints.append(name)
        return "SAVEPOINT " + name

    def query(self):
        """(sql, sort): sort means compare the rows as a multiset."""
        r = self.r
        k = r.randrange(16)
        if k == 0:
            return "SELECT * FROM t1 WHERE %s ORDER BY id" % self.where1(), False
        if k == 1:
            return ("SELECT id, b FROM t1 WHERE %s ORDER BY b COLLATE NOCASE %s, id"
                    % (self.where1(), r.choice(["", "DESC"])), False)
        if k == 2:
            return ("SELECT k, n, v FROM t2 WHERE %s ORDER BY k %s, n %s LIMIT %d"
                    % (self.where2(), r.choice(["", "DESC"]), r.choice(["", "DESC"]),
                       r.randrange(1, 40)), False)
        if k == 3:
            return "SELECT DISTINCT a FROM t1 ORDER BY a %s" % r.choice(["", "DESC"]), False
        if k == 4:
            return "SELECT DISTINCT lower(k), v FROM t2 ORDER BY 1, 2", False
        if k == 5:
            return ("SELECT a, count(*), sum(c), min(b), max(b) FROM t1 GROUP BY a "
                    "ORDER BY a", False)
        if k == 6:
            return ("SELECT n, count(*), max(v) FROM t2 GROUP BY n HAVING count(*) > %d "
                    "ORDER BY 2 DESC, 1" % r.randrange(3), False)
        if k == 7:
            return ("SELECT t1.id, t2.k, t2.n FROM t1 JOIN t2 ON t1.a = t2.n WHERE %s "
                    "ORDER BY t1.id, t2.k, t2.n LIMIT 60" % self.where1(), False)
        if k == 8:
            return ("SELECT t1.id, t3.id, t3.w FROM t1 LEFT JOIN t3 ON t3.ref = t1.id "
                    "WHERE %s ORDER BY 1, 2" % self.where1(), False)
        if k == 9:
            return r.choice(["SELECT count(*) FROM t1", "SELECT count(*) FROM t2",
                             "SELECT count(*) FROM t3",
                             "SELECT count(*), sum(a), sum(c), max(id) FROM t1 WHERE "
                             + self.where1()]), False
        if k == 10:
            return "SELECT a, b, c FROM t1 WHERE " + self.where1(), True
        if k == 11:
            return "SELECT k, n FROM t2 WHERE " + self.where2(), True
        if k == 12:
            return ("SELECT id FROM t1 WHERE b IN (SELECT v FROM t2) ORDER BY id DESC "
                    "LIMIT %d" % r.randrange(1, 30), False)
        if k == 13:
            return ("SELECT id, b FROM t1 WHERE b > %s ORDER BY b, id LIMIT 25"
                    % q(r.choice(WORDS)), False)
        if k == 14:
            return r.choice(["SELECT count(*) FROM t4", "PRAGMA foreign_keys"]), False
        return ("SELECT w, ref FROM t3 WHERE w IS NOT NULL ORDER BY w %s LIMIT 20"
                % r.choice(["", "DESC"]), False)

    def statement(self):
        r = self.r.random()
        if r < 0.45:
            return self.write(), None
        if r < 0.52:
            return self.ddl(), None
        if r < 0.64:
            return self.txn(), None
        return self.query()


# Run at the end of every seed (and after reopening a file): the whole content.
FINAL = [
    ("PRAGMA integrity_check", False),
    ("SELECT * FROM t1 ORDER BY id", False),
    ("SELECT * FROM t2 ORDER BY k, n", False),
    ("SELECT * FROM t3 ORDER BY id", False),
    ("SELECT type, name, tbl_name, sql FROM sqlite_schema ORDER BY name", False),
]


def execute(c, sql, sort):
    try:
        cur = c.execute(sql)
        rows = cur.fetchall()
    except sqlite3.Error as e:
        return "error %s %s" % (type(e).__name__, getattr(e, "sqlite_errorname", "?"))
    if sort is None:
        return "ok %d" % cur.rowcount
    if sort:
        rows.sort(key=repr)
        return "sorted %r" % (rows,)
    return "rows %r" % (rows,)


def run_seed(seed, stmts, where, corrupt, replay=None, long_max=300):
    path = where if where == ":memory:" else os.path.join(where, "s%d.db" % seed)
    c = sqlite3.connect(path, isolation_level=None)
    # Not compared (stock SQLite says `delete`/`memory`): the Rust side checks ours.
    print("#mode\t%d\t%s" % (seed, c.execute("PRAGMA journal_mode").fetchone()[0]))
    gen = Gen(seed, long_max)
    stream = [(s, None) for s in SCHEMA] + [gen.statement() for _ in range(stmts)] + FINAL
    if replay is not None:  # a saved (minimised) stream instead of the generated one
        stream = [(s, False if s.lstrip().upper().startswith("SELECT") else None)
                  for s in replay] + FINAL
    reopen = [] if where == ":memory:" else [("-- reopen", None)] + FINAL
    for i, (sql, sort) in enumerate(stream + reopen):
        if sql == "-- reopen":
            c.close()
            c = sqlite3.connect(path, isolation_level=None)
            res = "reopened"
        else:
            res = execute(c, sql, sort)
        if corrupt == (seed, i):
            res += " CORRUPTED"
        print("%d\t%d\t%s\t%s" % (seed, i, sql, res))
    c.close()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seeds", required=True, help="comma list, or a range lo-hi")
    p.add_argument("--stmts", type=int, default=400)
    p.add_argument("--dir", required=True, help="directory for the files, or :memory:")
    p.add_argument("--replay", help="JSON list of statements to run instead (one seed)")
    p.add_argument("--long-keys", action="store_true",
                   help="text values up to 3,000 bytes: index keys past the engine's inline limit")
    a = p.parse_args()
    if "-" in a.seeds:
        lo, hi = map(int, a.seeds.split("-"))
        seeds = range(lo, hi + 1)
    else:
        seeds = [int(s) for s in a.seeds.split(",")]
    corrupt = os.environ.get("INPAGE_DIFF_CORRUPT")
    corrupt = tuple(map(int, corrupt.split(":"))) if corrupt else None
    print("#version\t%s" % sqlite3.sqlite_version)
    replay = None
    if a.replay:
        import json
        with open(a.replay, encoding="utf-8") as f:
            replay = json.load(f)
    for seed in seeds:
        run_seed(seed, a.stmts, a.dir, corrupt, replay, 3000 if a.long_keys else 300)


main()
