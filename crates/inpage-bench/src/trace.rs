//! `bench trace`: SQL traces replayed through the SQL contenders (`sql-<mode>`, inpage's
//! SQL front end) and stock SQLite (`sqlite-<flavor>`), priced by the lab's counters.
//!
//! A trace is text, one statement per line; blank lines and `--` comments are skipped.
//! If any line ends with `;`, statements are `;`-terminated instead and may run over
//! several lines (each ends where SQLite's `sqlite3_complete` says it does). `BEGIN` …
//! `COMMIT` (or `END`, `ROLLBACK`) makes one transaction of the statements between; every
//! other statement is a transaction of its own (autocommit). A file whose name starts with `loading` is set
//! up before each measured file and not measured (the apps' "loading" sets).
//!
//! Invariants:
//! - Every contender runs exactly the same statements in the same order, and each
//!   statement's outcome — an error, the rows a query returned, the rows an INSERT,
//!   UPDATE or DELETE changed — is compared with the first stock SQLite contender's in
//!   the same round. A difference fails the run, naming the file and line: a store that
//!   answers wrongly, or fails where stock does not, never reports a number. (Values are
//!   not compared: a trace may read the clock or `random()`.) Without a stock contender
//!   any error fails the run.
//! - The measured window covers the measured file after its warm-up (its first
//!   `--warmup` write transactions and the reads among them, at most half of the file's
//!   writes, run unmeasured after the loading files), so a WAL peer is measured past its
//!   first checkpoint, its log file reused, as apps meet it. The store stays open from loading to the end: an app keeps
//!   its database open.
//! - Per-transaction figures (and tx/s) count the measured *write* transactions (those
//!   with a statement that is not a query): a trace's reads come between them, so their
//!   time, CPU and I/O are in every figure, but a durable commit is the unit, as in the
//!   Mobibench rows. The commit latency percentiles are over the write transactions
//!   alone, the waits a user meets on a durable commit.
//! - Trials rotate as in every other section (`runner::rotation`), on fresh files.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use inpage::vfs::IoStats;

use crate::contender::Contender;
use crate::lab::check_interrupted;
use crate::report::{CommitLatency, Point};
use crate::runner::{guarded, probe, rotation, sample, Session};

/// What a statement is, from its first keyword.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StmtKind {
    /// SELECT, VALUES, EXPLAIN: its outcome is the number of rows it returned.
    Query,
    /// INSERT, REPLACE, UPDATE, DELETE: its outcome is the number of rows it changed.
    Change,
    Begin,
    /// COMMIT, END, ROLLBACK (a full one; `ROLLBACK TO` a savepoint is `Other`).
    End,
    /// Anything else (schema, PRAGMA, SAVEPOINT, WITH …): only its error is compared.
    Other,
}

impl StmtKind {
    fn of(sql: &str) -> StmtKind {
        let mut words = sql
            .split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
            .filter(|w| !w.is_empty());
        let first = words.next().unwrap_or("").to_ascii_uppercase();
        match first.as_str() {
            "SELECT" | "VALUES" | "EXPLAIN" => StmtKind::Query,
            "INSERT" | "REPLACE" | "UPDATE" | "DELETE" => StmtKind::Change,
            "BEGIN" => StmtKind::Begin,
            "COMMIT" | "END" => StmtKind::End,
            "ROLLBACK" => match words.next().map(|w| w.to_ascii_uppercase()) {
                Some(w) if w == "TO" => StmtKind::Other,
                Some(w) if w == "TRANSACTION" => match words.next() {
                    Some(t) if t.eq_ignore_ascii_case("TO") => StmtKind::Other,
                    _ => StmtKind::End,
                },
                _ => StmtKind::End,
            },
            _ => StmtKind::Other,
        }
    }
}

/// One statement of a trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stmt {
    pub sql: String,
    /// 1-based line of the file where it starts.
    pub line: u32,
    pub kind: StmtKind,
}

/// One transaction: statements `first..end` of the trace (BEGIN and COMMIT included).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Txn {
    pub first: usize,
    pub end: usize,
    /// It has a statement that is not a query (and not BEGIN/COMMIT).
    pub writes: bool,
}

/// A parsed trace file.
#[derive(Clone, Debug)]
pub struct Trace {
    pub name: String,
    pub stmts: Vec<Stmt>,
    pub txns: Vec<Txn>,
}

impl Trace {
    /// Parse `text` (see the module docs). Errors: a statement left open at the end of
    /// the text, BEGIN inside a transaction, COMMIT outside one.
    pub fn parse(name: &str, text: &str) -> Result<Trace, String> {
        // Line mode needs no tokenizing: a line is a statement, `;` or not.
        let semicolons = text.lines().any(|l| {
            let l = l.trim();
            !l.starts_with("--") && l.ends_with(';')
        });
        let mut stmts = Vec::new();
        let mut acc = String::new();
        let mut start = 0u32;
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if acc.is_empty() && (line.is_empty() || line.starts_with("--")) {
                continue;
            }
            if acc.is_empty() {
                start = i as u32 + 1;
            } else {
                acc.push('\n');
            }
            acc.push_str(line);
            if !semicolons || inpage_sql::conn::is_complete(&acc) {
                let sql = std::mem::take(&mut acc);
                stmts.push(Stmt {
                    kind: StmtKind::of(&sql),
                    sql,
                    line: start,
                });
            }
        }
        if !acc.is_empty() {
            return Err(format!(
                "{name}: line {start}: the statement is not complete at the end of the file"
            ));
        }
        let mut txns = Vec::new();
        let mut open: Option<Txn> = None;
        for (i, s) in stmts.iter().enumerate() {
            match (s.kind, open.as_mut()) {
                (StmtKind::Begin, Some(_)) => {
                    return Err(format!(
                        "{name}: line {}: BEGIN inside a transaction",
                        s.line
                    ))
                }
                (StmtKind::Begin, None) => {
                    open = Some(Txn {
                        first: i,
                        end: i + 1,
                        writes: false,
                    })
                }
                (StmtKind::End, Some(t)) => {
                    t.end = i + 1;
                    txns.extend(open.take());
                }
                (StmtKind::End, None) => {
                    return Err(format!(
                        "{name}: line {}: COMMIT outside a transaction",
                        s.line
                    ))
                }
                (k, Some(t)) => {
                    t.end = i + 1;
                    t.writes |= k != StmtKind::Query;
                }
                (k, None) => txns.push(Txn {
                    first: i,
                    end: i + 1,
                    writes: k != StmtKind::Query,
                }),
            }
        }
        if let Some(t) = open {
            return Err(format!(
                "{name}: line {}: transaction not ended at the end of the file",
                stmts[t.first].line
            ));
        }
        Ok(Trace {
            name: name.to_string(),
            stmts,
            txns,
        })
    }

    /// Read and parse `path`; its name is the file name without `.sql`.
    pub fn load(path: &Path) -> Result<Trace, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().trim_end_matches(".sql").to_string())
            .unwrap_or_else(|| path.display().to_string());
        Trace::parse(&name, &text)
    }

    /// Transactions run before the measured window: those up to and including the
    /// `warmup`-th write transaction, at most half of the write transactions (the reads
    /// between them come along: they warm the cache as an app's do).
    pub fn warmup(&self, warmup: u64) -> usize {
        let writes = self.txns.iter().filter(|t| t.writes).count();
        let w = (warmup as usize).min(writes / 2);
        if w == 0 {
            return 0;
        }
        self.txns
            .iter()
            .enumerate()
            .filter(|(_, t)| t.writes)
            .nth(w - 1)
            .map_or(0, |(i, _)| i + 1)
    }

    /// Write transactions in the measured window: what per-transaction figures divide
    /// by (at least 1).
    pub fn measured_writes(&self, warmup: u64) -> u64 {
        let n = self.txns[self.warmup(warmup)..]
            .iter()
            .filter(|t| t.writes)
            .count();
        n.max(1) as u64
    }
}

/// What one statement did on one contender.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Rows returned (query), rows changed (INSERT/UPDATE/DELETE) or 0 (anything else).
    Ok(u64),
    Failed(String),
}

impl Outcome {
    /// The same result: the same count, or both failed (messages differ in wording
    /// between the C API's and rusqlite's renderings of one error).
    fn agrees(&self, o: &Outcome) -> bool {
        match (self, o) {
            (Outcome::Ok(a), Outcome::Ok(b)) => a == b,
            (Outcome::Failed(_), Outcome::Failed(_)) => true,
            _ => false,
        }
    }
}

/// One trace workload: the loading files and the measured one.
pub struct TraceSet {
    pub loading: Vec<Trace>,
    pub measured: Vec<Trace>,
}

impl TraceSet {
    /// Files whose name starts with `loading` are loading sets; the rest are measured.
    pub fn from_files(files: &[PathBuf]) -> Result<TraceSet, String> {
        let mut set = TraceSet {
            loading: Vec::new(),
            measured: Vec::new(),
        };
        for f in files {
            let t = Trace::load(f)?;
            if t.name.starts_with("loading") {
                set.loading.push(t);
            } else {
                set.measured.push(t);
            }
        }
        Ok(set)
    }
}

/// Method settings of a trace run.
#[derive(Clone, Copy, Debug)]
pub struct TraceParams {
    pub warmup: u64,
}

/// Run `trace`'s statements `stmts` on `st`, appending each statement's outcome.
fn run_stmts(
    st: &mut dyn crate::store::Store,
    trace: &Trace,
    range: std::ops::Range<usize>,
    out: &mut Vec<Outcome>,
) {
    for s in &trace.stmts[range] {
        out.push(match st.exec(&s.sql) {
            Ok((rows, changes)) => Outcome::Ok(match s.kind {
                StmtKind::Query => rows,
                StmtKind::Change => changes,
                _ => 0,
            }),
            Err(e) => Outcome::Failed(e),
        });
    }
}

/// One trial: fresh files, the loading sets, the warm-up, then the measured window.
/// Returns the sample and every statement's outcome (loading sets first).
fn trace_trial(
    s: &mut Session,
    c: &Contender,
    set: &TraceSet,
    trace: &Trace,
    p: TraceParams,
) -> Result<(crate::report::Sample, Vec<Outcome>), String> {
    let dir = s.fresh_dir(&c.name)?;
    let stats = Arc::new(IoStats::new());
    let mut st = c.open(&dir, &stats)?;
    let mut outcomes = Vec::new();
    for l in &set.loading {
        check_interrupted()?;
        run_stmts(st.as_mut(), l, 0..l.stmts.len(), &mut outcomes);
    }
    let w = trace.warmup(p.warmup);
    let warm_end = trace.txns.get(w).map_or(trace.stmts.len(), |t| t.first);
    run_stmts(st.as_mut(), trace, 0..warm_end, &mut outcomes);
    s.settle();
    let before = probe(&s.lab, &stats)?;
    let mut write_us = Vec::new();
    let t0 = Instant::now();
    for t in &trace.txns[w..] {
        check_interrupted()?;
        let begin = Instant::now();
        run_stmts(st.as_mut(), trace, t.first..t.end, &mut outcomes);
        if t.writes {
            write_us.push(begin.elapsed().as_secs_f64() * 1e6);
        }
    }
    let wall = t0.elapsed();
    let after = probe(&s.lab, &stats)?;
    st.close()?;
    let ntx = trace.measured_writes(p.warmup);
    let mut out = sample(c.accounted(), &before, &after, wall, ntx, 1, &s.profile);
    out.commit_latency = CommitLatency::of(&write_us);
    std::fs::remove_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    Ok((out, outcomes))
}

/// Where statement `i` of the outcomes list (loading sets first) is: file and line.
fn locate(set: &TraceSet, trace: &Trace, mut i: usize) -> String {
    for t in set.loading.iter().chain(std::iter::once(trace)) {
        if i < t.stmts.len() {
            let s = &t.stmts[i];
            let head: String = s.sql.chars().take(60).collect();
            return format!("{} line {} ({head})", t.name, s.line);
        }
        i -= t.stmts.len();
    }
    "past the end".into()
}

/// Compare every contender's outcomes with the reference's (the first stock SQLite
/// contender, else none: then any error fails).
fn check_outcomes(
    set: &TraceSet,
    trace: &Trace,
    runs: &[(String, Vec<Outcome>)],
    reference: Option<&str>,
) -> Result<usize, String> {
    let refr = reference.and_then(|r| runs.iter().find(|(n, _)| n == r));
    for (name, got) in runs {
        let Some((rname, want)) = refr else {
            if let Some((i, Outcome::Failed(e))) = got
                .iter()
                .enumerate()
                .find(|(_, o)| matches!(o, Outcome::Failed(_)))
            {
                return Err(format!(
                    "{name}: {}: {e} (no stock SQLite contender in the run to compare with)",
                    locate(set, trace, i)
                ));
            }
            continue;
        };
        if got.len() != want.len() {
            return Err(format!(
                "{name}: ran {} statements, {rname} {}",
                got.len(),
                want.len()
            ));
        }
        if let Some(i) = (0..got.len()).find(|&i| !got[i].agrees(&want[i])) {
            let say = |o: &Outcome| match o {
                Outcome::Ok(n) => format!("{n} rows"),
                Outcome::Failed(e) => format!("error '{e}'"),
            };
            return Err(format!(
                "{name}: {}: {} where {rname} gave {}",
                locate(set, trace, i),
                say(&got[i]),
                say(&want[i])
            ));
        }
    }
    Ok(refr.map_or(0, |(_, w)| {
        w.iter().filter(|o| matches!(o, Outcome::Failed(_))).count()
    }))
}

/// Trials per round.
pub fn trials(sets: &[TraceSet], contenders: usize) -> u64 {
    (sets.iter().map(|s| s.measured.len()).sum::<usize>() * contenders) as u64
}

/// The trace workload: every measured file of every set on every contender, each round.
pub fn run_traces(
    s: &mut Session,
    cs: &[Contender],
    sets: &[TraceSet],
    p: TraceParams,
) -> Result<(), String> {
    if let Some(c) = cs.iter().find(|c| !c.speaks_sql()) {
        return Err(format!("{}: not an SQL contender (traces are SQL)", c.name));
    }
    if sets.iter().all(|x| x.measured.is_empty()) {
        return Err("no trace to measure (files named loading* are set-up only)".into());
    }
    let reference = cs
        .iter()
        .find(|c| c.name.starts_with("sqlite-"))
        .map(|c| c.name.clone());
    let mut points: Vec<(&TraceSet, &Trace, Point)> = Vec::new();
    for set in sets {
        for t in &set.measured {
            points.push((set, t, s.next_point("trace", &t.name, 0)));
        }
    }
    for round in 0..s.rounds {
        for (set, trace, pt) in &points {
            let (set, trace) = (*set, *trace);
            let mut runs = Vec::new();
            for ci in rotation(cs.len(), round) {
                let c = &cs[ci];
                s.pb.set_message(format!(
                    "trace {} {} (round {})",
                    trace.name,
                    c.name,
                    round + 1
                ));
                let (smp, outcomes) = guarded(&c.name, || trace_trial(s, c, set, trace, p))?;
                let ntx = trace.measured_writes(p.warmup);
                s.collector.add(pt.clone(), &c.name, ntx, smp);
                runs.push((c.name.clone(), outcomes));
                s.pb.inc(1);
            }
            let failed = check_outcomes(set, trace, &runs, reference.as_deref())?;
            if round == 0 {
                let writes = trace.txns.iter().filter(|t| t.writes).count();
                s.collector.notes.push(format!(
                    "trace {}: {} statements, {} transactions ({writes} writing), {} warm-up; \
                     {failed} statements fail on stock SQLite too (outcomes agree on every \
                     contender); per-transaction columns are per measured write transaction",
                    trace.name,
                    trace.stmts.len(),
                    trace.txns.len(),
                    trace.warmup(p.warmup),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_and_transactions_are_parsed() {
        let text = "-- a comment\n\
            CREATE TABLE t(a, b);\n\
            \n\
            INSERT INTO t VALUES(1, 'x;y');\n\
            BEGIN;\n\
            INSERT INTO t VALUES(2,\n\
            'two');\n\
            SELECT * FROM t;\n\
            COMMIT;\n\
            select count(*) from t;\n\
            BEGIN IMMEDIATE;\n\
            select 1;\n\
            ROLLBACK;\n";
        let t = Trace::parse("x", text).unwrap();
        let kinds: Vec<_> = t.stmts.iter().map(|s| s.kind).collect();
        use StmtKind::*;
        assert_eq!(
            kinds,
            [Other, Change, Begin, Change, Query, End, Query, Begin, Query, End]
        );
        assert_eq!(t.stmts[1].sql, "INSERT INTO t VALUES(1, 'x;y');");
        assert_eq!(t.stmts[3].sql, "INSERT INTO t VALUES(2,\n'two');");
        assert_eq!(t.stmts[3].line, 6);
        let spans: Vec<_> = t.txns.iter().map(|x| (x.first, x.end, x.writes)).collect();
        assert_eq!(
            spans,
            [
                (0, 1, true),
                (1, 2, true),
                (2, 6, true),
                (6, 7, false),
                (7, 10, false)
            ]
        );
        // Three write transactions: a warm-up of one (at most half), through the first.
        assert_eq!(t.warmup(200), 1);
        assert_eq!(t.warmup(0), 0);
        // Line mode: no `;` anywhere, each line is a statement.
        let t = Trace::parse("y", "BEGIN\nINSERT INTO t VALUES(1)\nCOMMIT\nSELECT 1").unwrap();
        assert_eq!(t.stmts.len(), 4);
        assert_eq!(t.txns.len(), 2);
        assert!(t.txns[0].writes && !t.txns[1].writes);
        assert_eq!(StmtKind::of("rollback to sp1"), Other);
        assert_eq!(StmtKind::of("ROLLBACK TRANSACTION TO sp1"), Other);
        assert_eq!(StmtKind::of("  replace into t values(1)"), Change);
    }

    #[test]
    fn malformed_traces_are_refused_with_the_line() {
        let e = Trace::parse("f", "BEGIN\nBEGIN\nCOMMIT").unwrap_err();
        assert!(e.contains("f: line 2: BEGIN inside"), "{e}");
        let e = Trace::parse("f", "SELECT 1;\nCOMMIT;").unwrap_err();
        assert!(e.contains("line 2: COMMIT outside"), "{e}");
        let e = Trace::parse("f", "BEGIN\nSELECT 1").unwrap_err();
        assert!(e.contains("line 1: transaction not ended"), "{e}");
        let e = Trace::parse("f", "SELECT 'open;\nstring;").unwrap_err();
        assert!(e.contains("line 1: the statement is not complete"), "{e}");
    }

    #[test]
    fn outcomes_that_differ_from_stock_fail_the_run() {
        let t = Trace::parse("bench", "SELECT 1\nINSERT INTO t VALUES(1)").unwrap();
        let set = TraceSet {
            loading: vec![],
            measured: vec![t.clone()],
        };
        let ok = vec![Outcome::Ok(1), Outcome::Ok(1)];
        let dup = vec![Outcome::Ok(1), Outcome::Failed("UNIQUE".into())];
        let runs = vec![
            ("sqlite-wal".to_string(), dup),
            (
                "sql-wal".into(),
                vec![Outcome::Ok(1), Outcome::Failed("UNIQUE (1555)".into())],
            ),
        ];
        assert_eq!(check_outcomes(&set, &t, &runs, Some("sqlite-wal")), Ok(1));
        let runs = vec![
            ("sqlite-wal".to_string(), ok.clone()),
            ("sql-wal".into(), ok),
        ];
        assert_eq!(check_outcomes(&set, &t, &runs, Some("sqlite-wal")), Ok(0));
        let runs = vec![
            (
                "sqlite-wal".to_string(),
                vec![Outcome::Ok(1), Outcome::Ok(1)],
            ),
            ("sql-wal".into(), vec![Outcome::Ok(0), Outcome::Ok(1)]),
        ];
        let e = check_outcomes(&set, &t, &runs, Some("sqlite-wal")).unwrap_err();
        assert!(
            e.contains("sql-wal: bench line 1 (SELECT 1): 0 rows where sqlite-wal gave 1 rows"),
            "{e}"
        );
        let runs = vec![(
            "sql-wal".to_string(),
            vec![Outcome::Ok(1), Outcome::Failed("boom".into())],
        )];
        let e = check_outcomes(&set, &t, &runs, None).unwrap_err();
        assert!(e.contains("line 2") && e.contains("boom"), "{e}");
    }
}
