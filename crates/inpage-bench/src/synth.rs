//! Synthetic app-like SQL traces for `bench trace`: a seeded generator following what
//! real Android apps' SQL looks like in aggregate (issue 37's measurements of five apps'
//! traces), so the trace bench has a workload anyone can regenerate.
//!
//! What it follows:
//! - Tables with 1–2 indexes (`app-small`: 4 tables / 8 indexes) or many tables, about
//!   half indexed (`app-wide`: 39 tables / 21 indexes); a few tables take most of the
//!   traffic (Zipf over tables).
//! - Write transactions: 71 % one statement, 21 % eight, 6 % two to four, 2 % 16–180.
//!   A statement of a multi-statement transaction stays on its table with probability
//!   3/4, as a sync batch does.
//! - A statement touches the table's leaf and each index's leaf: inserts append (rowid
//!   order, hot rightmost leaf) with a random `key` (scattered index leaf) and a Zipf-hot
//!   group (`grp`, `ts`: a conversation's newest entries); updates hit recent rows 70 %
//!   of the time (the same hot leaves again and again).
//! - Reads outnumber write statements about 10 to 1: autocommit point queries by rowid
//!   and by key, a group's newest 20 rows, a group's count.
//!
//! Invariants:
//! - The output is a pure function of (profile, seed, transactions): the sequences come
//!   from `SplitMix64`, never from a crate whose stream could change.
//! - Every generated statement succeeds on stock SQLite (no generated key collides, no
//!   row is deleted twice), so any error in a replay is the replaying store's. The
//!   generator tracks the rows that exist and never deletes a table's newest row, so the
//!   rowid SQLite gives an insert without one (max + 1) is the one it tracks.

use std::fmt::Write as _;

use crate::concurrent::Zipf;
use crate::trace::{Trace, TraceSet};
use crate::workload::SplitMix64;

/// An app shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AppProfile {
    pub name: &'static str,
    pub tables: usize,
    pub indexes: usize,
    /// Rows loaded before the measured part, over all tables.
    pub rows: u64,
}

/// The shipped profiles.
pub const PROFILES: [AppProfile; 2] = [
    AppProfile {
        name: "app-small",
        tables: 4,
        indexes: 8,
        rows: 20_000,
    },
    AppProfile {
        name: "app-wide",
        tables: 39,
        indexes: 21,
        rows: 20_000,
    },
];

/// The profile named `name`.
pub fn profile(name: &str) -> Result<AppProfile, String> {
    PROFILES
        .iter()
        .find(|p| p.name.eq_ignore_ascii_case(name.trim()))
        .copied()
        .ok_or_else(|| {
            let names: Vec<_> = PROFILES.iter().map(|p| p.name).collect();
            format!("unknown app profile '{name}' (valid: {})", names.join(", "))
        })
}

impl AppProfile {
    /// This profile loading `rows` rows instead of its own number (`None`: unchanged).
    pub fn with_rows(mut self, rows: Option<u64>) -> Result<AppProfile, String> {
        if let Some(r) = rows {
            if r == 0 {
                return Err("--rows must be at least 1".into());
            }
            self.rows = r;
        }
        Ok(self)
    }
}

/// Groups (conversations, folders) per table.
const GROUPS: usize = 64;
/// Rows counted as recent: the target of most updates.
const RECENT: usize = 200;

struct Table {
    /// 0, 1 or 2: `key` is indexed when 2, (`grp`, `ts`) when 1 or 2.
    indexes: usize,
    /// Rowids that exist, ascending (inserts push the next one; deletes never take the
    /// last one, which keeps rowid = max + 1 predictable).
    alive: Vec<i64>,
}

struct Gen {
    rng: SplitMix64,
    tables: Vec<Table>,
    table_pick: Zipf,
    group_pick: Zipf,
    clock: i64,
}

impl Gen {
    fn new(p: &AppProfile, seed: u64) -> Gen {
        // The first `indexes - tables` tables (the hottest) get two indexes, the next ones
        // one, the rest none: 4 / 8 is two each, 39 / 21 is one on 21 tables.
        let two = p.indexes.saturating_sub(p.tables);
        let one = p.indexes.min(p.tables) - two.min(p.indexes.min(p.tables));
        let tables = (0..p.tables)
            .map(|i| Table {
                indexes: if i < two {
                    2
                } else if i < two + one {
                    1
                } else {
                    0
                },
                alive: Vec::new(),
            })
            .collect();
        Gen {
            rng: SplitMix64::new(seed ^ 0xa99_7ace),
            tables,
            table_pick: Zipf::new(p.tables, 0.9),
            group_pick: Zipf::new(GROUPS, 1.1),
            clock: 1_700_000_000_000,
        }
    }

    fn unit(&mut self) -> f64 {
        (self.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn table(&mut self) -> usize {
        let u = self.unit();
        self.table_pick.rank(u)
    }

    fn group(&mut self) -> usize {
        let u = self.unit();
        self.group_pick.rank(u)
    }

    fn tick(&mut self) -> i64 {
        self.clock += 1 + self.rng.below(1000) as i64;
        self.clock
    }

    fn body(&mut self) -> String {
        let len = if self.rng.below(10) == 0 {
            200 + self.rng.below(800)
        } else {
            20 + self.rng.below(100)
        };
        (0..len)
            .map(|_| (b'a' + self.rng.below(26) as u8) as char)
            .collect()
    }

    fn key(t: usize, id: i64) -> String {
        let h = (id as u64 ^ ((t as u64) << 40)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        format!("{h:016x}")
    }

    /// A row of table `t`: recent with probability `recent`, else uniform.
    fn row(&mut self, t: usize, recent: f64) -> Option<i64> {
        let n = self.tables[t].alive.len();
        if n == 0 {
            return None;
        }
        let i = if self.unit() < recent {
            n - 1 - self.rng.below(n.min(RECENT) as u64) as usize
        } else {
            self.rng.below(n as u64) as usize
        };
        Some(self.tables[t].alive[i])
    }

    fn insert(&mut self, t: usize, out: &mut String) {
        let id = self.tables[t].alive.last().map_or(1, |l| l + 1);
        let (g, ts, body) = (self.group(), self.tick(), self.body());
        self.tables[t].alive.push(id);
        let _ = writeln!(
            out,
            "INSERT INTO t{t}(key, grp, ts, state, body) VALUES('{}', {g}, {ts}, 0, '{body}');",
            Gen::key(t, id)
        );
    }

    /// One write statement on table `t`: insert 45 %, update 45 %, delete 10 %.
    fn write(&mut self, t: usize, out: &mut String) {
        let r = self.rng.below(100);
        if r < 45 || self.tables[t].alive.len() < 2 {
            return self.insert(t, out);
        }
        if r < 90 {
            let Some(id) = self.row(t, 0.7) else {
                return self.insert(t, out);
            };
            if self.rng.below(2) == 0 {
                let s = 1 + self.rng.below(3);
                let _ = writeln!(out, "UPDATE t{t} SET state = {s} WHERE id = {id};");
            } else {
                let (ts, body) = (self.tick(), self.body());
                let _ = writeln!(
                    out,
                    "UPDATE t{t} SET ts = {ts}, body = '{body}' WHERE id = {id};"
                );
            }
            return;
        }
        // Never the newest row (see the module invariants).
        let n = self.tables[t].alive.len();
        let i = self.rng.below(n as u64 - 1) as usize;
        let id = self.tables[t].alive.remove(i);
        let _ = writeln!(out, "DELETE FROM t{t} WHERE id = {id};");
    }

    /// One autocommit read on a hot table.
    fn read(&mut self, out: &mut String) {
        let t = self.table();
        let ix = self.tables[t].indexes;
        let r = self.rng.below(100);
        if r < 40 || ix == 0 {
            let id = self.row(t, 0.6).unwrap_or(1);
            let _ = writeln!(out, "SELECT * FROM t{t} WHERE id = {id};");
        } else if r < 70 {
            let g = self.group();
            let _ = writeln!(
                out,
                "SELECT id, ts, body FROM t{t} WHERE grp = {g} ORDER BY ts DESC LIMIT 20;"
            );
        } else if r < 90 && ix == 2 {
            let id = self.row(t, 0.5).unwrap_or(1);
            let _ = writeln!(
                out,
                "SELECT id, state FROM t{t} WHERE key = '{}';",
                Gen::key(t, id)
            );
        } else {
            let g = self.group();
            let _ = writeln!(out, "SELECT count(*) FROM t{t} WHERE grp = {g};");
        }
    }

    /// Statements of the next write transaction.
    fn txn_size(&mut self) -> usize {
        match self.rng.below(100) {
            0..=70 => 1,
            71..=91 => 8,
            92..=97 => 2 + self.rng.below(3) as usize,
            _ => 16 + self.rng.below(165) as usize,
        }
    }
}

/// `(loading.sql, bench.sql)` of `p` with `txns` write transactions.
pub fn generate(p: &AppProfile, seed: u64, txns: u64) -> (String, String) {
    let mut g = Gen::new(p, seed);
    let mut load = String::new();
    for (t, tab) in g.tables.iter().enumerate() {
        let _ = writeln!(
            load,
            "CREATE TABLE t{t}(id INTEGER PRIMARY KEY, key TEXT NOT NULL, grp INTEGER NOT NULL, \
             ts INTEGER NOT NULL, state INTEGER NOT NULL, body TEXT);"
        );
        if tab.indexes >= 1 {
            let _ = writeln!(load, "CREATE INDEX t{t}_grp_ts ON t{t}(grp, ts);");
        }
        if tab.indexes >= 2 {
            let _ = writeln!(load, "CREATE INDEX t{t}_key ON t{t}(key);");
        }
    }
    // Rows per table by the same Zipf as the traffic, at least 20 each.
    let weights: Vec<f64> = (1..=p.tables).map(|i| 1.0 / (i as f64).powf(0.9)).collect();
    let total: f64 = weights.iter().sum();
    for (t, w) in weights.iter().enumerate() {
        let rows = ((p.rows as f64 * w / total) as u64).max(20);
        for start in (0..rows).step_by(500) {
            load.push_str("BEGIN;\n");
            for _ in start..(start + 500).min(rows) {
                g.insert(t, &mut load);
            }
            load.push_str("COMMIT;\n");
        }
    }
    let mut bench = String::new();
    for _ in 0..txns {
        let n = g.txn_size();
        // Reads first: about ten per write statement, spread ±50 %.
        let reads = (10 * n) / 2 + g.rng.below(10 * n as u64 + 1) as usize;
        for _ in 0..reads {
            g.read(&mut bench);
        }
        let mut t = g.table();
        if n > 1 {
            bench.push_str("BEGIN;\n");
        }
        for i in 0..n {
            if i > 0 && g.rng.below(4) == 0 {
                t = g.table();
            }
            g.write(t, &mut bench);
        }
        if n > 1 {
            bench.push_str("COMMIT;\n");
        }
    }
    (load, bench)
}

/// The parsed trace set of profile `p` (loading set named `loading-<profile>`).
pub fn trace_set(p: &AppProfile, seed: u64, txns: u64) -> Result<TraceSet, String> {
    let (load, bench) = generate(p, seed, txns);
    Ok(TraceSet {
        loading: vec![Trace::parse(&format!("loading-{}", p.name), &load)?],
        measured: vec![Trace::parse(p.name, &bench)?],
    })
}

/// The trace sets of the profiles named in `names`, each loading `rows` rows (`None`: the
/// profile's own number).
pub fn trace_sets(
    names: &[String],
    seed: u64,
    txns: u64,
    rows: Option<u64>,
) -> Result<Vec<TraceSet>, String> {
    names
        .iter()
        .map(|n| trace_set(&profile(n)?.with_rows(rows)?, seed, txns))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::StmtKind;

    #[test]
    fn traces_follow_the_app_statistics() {
        for p in PROFILES {
            let set = trace_set(&p, 7, 4000).unwrap();
            let t = &set.measured[0];
            let writes: Vec<_> = t.txns.iter().filter(|x| x.writes).collect();
            assert_eq!(writes.len(), 4000, "{}", p.name);
            let size = |x: &&crate::trace::Txn| {
                t.stmts[x.first..x.end]
                    .iter()
                    .filter(|s| s.kind == StmtKind::Change)
                    .count()
            };
            let share = |f: &dyn Fn(usize) -> bool| {
                writes.iter().filter(|x| f(size(x))).count() as f64 / writes.len() as f64
            };
            let one = share(&|n| n == 1);
            let eight = share(&|n| n == 8);
            let big = share(&|n| n >= 16);
            assert!((0.68..0.74).contains(&one), "{}: {one}", p.name);
            assert!((0.18..0.24).contains(&eight), "{}: {eight}", p.name);
            assert!((0.01..0.03).contains(&big), "{}: {big}", p.name);
            let q = t.stmts.iter().filter(|s| s.kind == StmtKind::Query).count() as f64;
            let w = t
                .stmts
                .iter()
                .filter(|s| s.kind == StmtKind::Change)
                .count() as f64;
            assert!(
                (9.0..11.0).contains(&(q / w)),
                "{}: reads/writes {}",
                p.name,
                q / w
            );
            let load = &set.loading[0];
            let idx = load
                .stmts
                .iter()
                .filter(|s| s.sql.starts_with("CREATE INDEX"))
                .count();
            let tabs = load
                .stmts
                .iter()
                .filter(|s| s.sql.starts_with("CREATE TABLE"))
                .count();
            assert_eq!((tabs, idx), (p.tables, p.indexes), "{}", p.name);
        }
    }

    #[test]
    fn generation_is_a_function_of_its_inputs() {
        let p = profile("app-small").unwrap();
        assert_eq!(generate(&p, 3, 50), generate(&p, 3, 50));
        assert_ne!(generate(&p, 3, 50).1, generate(&p, 4, 50).1);
        assert!(profile("nope").unwrap_err().contains("app-small, app-wide"));
    }

    #[test]
    fn every_generated_statement_succeeds_on_stock_sqlite() {
        for p in PROFILES {
            let (load, bench) = generate(&p, 11, 300);
            let conn = rusqlite::Connection::open_in_memory().unwrap();
            for text in [&load, &bench] {
                let t = Trace::parse(p.name, text).unwrap();
                for s in &t.stmts {
                    let mut st = conn.prepare(&s.sql).unwrap();
                    let mut rows = st.raw_query();
                    while rows.next().unwrap().is_some() {}
                    drop(rows);
                    if s.kind == StmtKind::Change {
                        assert_eq!(conn.changes(), 1, "{}: {}", p.name, s.sql);
                    }
                }
            }
        }
    }
}
