//! `inpage bench concurrent`: several threads on one database (the IPS + 2VTO paper's
//! Fig. 8–11 grid; WORKLOADS.md, "IPS / 2VTO").
//!
//! A table of `--records` rows is loaded; then each of `--threads` threads runs
//! `--queries` statements in transactions of `--stmts` statements: each statement is an
//! UPDATE of one row with probability `--write-ratio` % (for transactions of more than one
//! statement: 15 % writes, the paper's 85 % reads), else a point SELECT; keys are drawn
//! from a Zipfian distribution with skew θ (`--zipf`; 0 = uniform) over the rows, the
//! ranks scrambled over the key space (hot rows spread over the table, as YCSB does). A
//! transaction with no UPDATE is a read transaction (engine: `begin_read`; SQLite: a plain
//! `SELECT` or `BEGIN`), one with an UPDATE a write transaction (engine:
//! `Database::write_counted`, which replays it after a conflict; SQLite: `BEGIN
//! IMMEDIATE`, as Android's `beginTransaction` does, with a busy timeout).
//!
//! Contenders (the engine's concurrency settings on IPS pages unless named otherwise, and
//! SQLite as apps configure it): `serial`, `occ`, `2vto`, `2vto-dhl` (2VTO over DHL
//! pages), `2vto-nosleep` (AFUW without the forced sleep), `sqlite-wal-r` (WAL,
//! `synchronous=FULL`, `wal_autocheckpoint=100`, `journal_size_limit=524288`, one
//! connection per thread, `busy_timeout` 10 s).
//!
//! Reported per grid point, medians over rounds (contenders interleaved in each round):
//! transactions per second, aborts per *write* transaction (mean and max over every
//! transaction of every round: replays after `Error::Conflict`; SQLite: retries after an
//! `SQLITE_BUSY` that outlasted the busy timeout — waits inside the busy handler are not
//! aborts), latency percentiles over every transaction, and the share of write
//! transaction time spent before the attempt that succeeded began ("wait": the writer
//! flag under `serial`, rolled-back attempts, AFUW's forced sleep or the no-sleep
//! back-off; a 2VTO commit's wait for older transactions comes after it and is not in
//! it; SQLite's busy waits are inside its statements and are not in it either).
//!
//! Invariants: every row a thread writes exists (the table is loaded first), a failing
//! trial is an error naming the contender (never a silently missing row), and every loop
//! device and mount the lab made is released by `Lab`'s drop.

use std::path::Path;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use inpage::{Concurrency, Config, Database, JournalMode, KeyKind, ReadableTxn};
use serde::Serialize;

use crate::contender::{SqliteFlavor, SqliteStore};
use crate::lab::{check_interrupted, Lab};

/// A contender of this bench.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ConcContender {
    Engine {
        name: &'static str,
        mode: JournalMode,
        concurrency: Concurrency,
        /// `Config::group_commit` (off: the ablation, one flush per commit).
        group: bool,
    },
    SqliteWalApps,
}

impl ConcContender {
    pub fn all() -> Vec<ConcContender> {
        let e = |name, mode, concurrency| ConcContender::Engine {
            name,
            mode,
            concurrency,
            group: true,
        };
        let nogroup = |name, concurrency| ConcContender::Engine {
            name,
            mode: JournalMode::IPS,
            concurrency,
            group: false,
        };
        vec![
            e("serial", JournalMode::IPS, Concurrency::Serial),
            e("occ", JournalMode::IPS, Concurrency::Occ),
            e(
                "2vto",
                JournalMode::IPS,
                Concurrency::TwoVto { forced_sleep: true },
            ),
            e(
                "2vto-dhl",
                JournalMode::DHL_CC,
                Concurrency::TwoVto { forced_sleep: true },
            ),
            e(
                "2vto-nosleep",
                JournalMode::IPS,
                Concurrency::TwoVto {
                    forced_sleep: false,
                },
            ),
            nogroup("occ-nogroup", Concurrency::Occ),
            nogroup("2vto-nogroup", Concurrency::TwoVto { forced_sleep: true }),
            ConcContender::SqliteWalApps,
        ]
    }

    /// Contenders run only when named: serial writers on the WALDIO log, without and
    /// with its group commit (issue 17's thread runs: `--write-ratio 100`), and OCC over
    /// DHL pages.
    pub fn extra() -> Vec<ConcContender> {
        let serial = |name, mode| ConcContender::Engine {
            name,
            mode,
            concurrency: Concurrency::Serial,
            group: false,
        };
        vec![
            serial("waldio", JournalMode::WALDIO),
            serial("waldio-gc", JournalMode::WALDIO_GC),
            // OCC over DHL pages: the fair peer of `2vto-dhl`.
            ConcContender::Engine {
                name: "occ-dhl",
                mode: JournalMode::DHL_CC,
                concurrency: Concurrency::Occ,
                group: true,
            },
        ]
    }

    pub fn name(&self) -> &'static str {
        match self {
            ConcContender::Engine { name, .. } => name,
            ConcContender::SqliteWalApps => "sqlite-wal-r",
        }
    }

    pub fn parse(names: &[String]) -> Result<Vec<ConcContender>, String> {
        if names.is_empty() {
            return Ok(ConcContender::all());
        }
        names
            .iter()
            .map(|n| {
                let every = || {
                    ConcContender::all()
                        .into_iter()
                        .chain(ConcContender::extra())
                };
                every().find(|c| c.name() == n).ok_or_else(|| {
                    let known: Vec<_> = every().map(|c| c.name()).collect();
                    format!("unknown contender {n:?} (known: {})", known.join(", "))
                })
            })
            .collect()
    }
}

/// One point of the grid.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Point {
    pub threads: usize,
    pub write_ratio: u32,
    pub zipf_theta: f64,
    pub stmts: usize,
}

/// What the run is asked to do besides the grid.
#[derive(Clone, Debug)]
pub struct Params {
    pub records: i64,
    pub queries: usize,
    pub rounds: u32,
    pub seed: u64,
}

/// Zipfian ranks over `n` items with skew `theta` (0: uniform), by inverting a
/// precomputed CDF.
pub struct Zipf {
    cdf: Vec<f64>,
}

impl Zipf {
    pub fn new(n: usize, theta: f64) -> Zipf {
        let mut cdf = Vec::with_capacity(n);
        let mut sum = 0.0;
        for i in 1..=n {
            sum += 1.0 / (i as f64).powf(theta);
            cdf.push(sum);
        }
        for c in &mut cdf {
            *c /= sum;
        }
        Zipf { cdf }
    }

    /// The rank (0 = hottest) for a uniform `u` in [0, 1).
    pub fn rank(&self, u: f64) -> usize {
        self.cdf
            .partition_point(|&c| c <= u)
            .min(self.cdf.len() - 1)
    }
}

/// xorshift64*, one per thread.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The key of rank `r` among `n` rows: ranks scrambled over the keys by a fixed odd
/// multiplier (a bijection mod `n` when it shares no factor with `n`).
fn key_of(r: usize, n: i64) -> i64 {
    let mut m: i64 = 2_654_435_761 % n.max(2);
    while gcd(m, n) != 1 {
        m += 1;
    }
    (r as i64 * m) % n
}

fn gcd(a: i64, b: i64) -> i64 {
    if b == 0 {
        a.abs()
    } else {
        gcd(b, a % b)
    }
}

/// One statement: (key, is an UPDATE).
type Stmt = (i64, bool);

/// One transaction of a thread.
#[derive(Clone, Copy, Debug, Default)]
struct TxnDone {
    us: f64,
    aborts: u32,
    /// Before the successful attempt began.
    replay_us: f64,
    /// From the end of the successful attempt's statements to the commit's return
    /// (engine: validation, the group's queue, the write and fdatasync; SQLite: the
    /// `COMMIT` of a multi-statement transaction; None for SQLite's autocommit, where
    /// the commit is inside the statement).
    commit_us: Option<f64>,
    write: bool,
}

type Done = Vec<TxnDone>;

/// The statements of every transaction of one thread.
fn plan(p: &Point, params: &Params, thread: usize, round: u32) -> Vec<Vec<Stmt>> {
    let zipf = Zipf::new(params.records as usize, p.zipf_theta);
    let mut rng = Rng(
        (params.seed ^ (thread as u64) << 32 ^ u64::from(round) << 48)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            | 1,
    );
    let write_pct = if p.stmts > 1 { 15 } else { p.write_ratio };
    let txns = params.queries / p.stmts.max(1);
    (0..txns)
        .map(|_| {
            (0..p.stmts)
                .map(|_| {
                    let k = key_of(zipf.rank(rng.unit()), params.records);
                    (k, rng.next() % 100 < u64::from(write_pct))
                })
                .collect()
        })
        .collect()
}

/// What one trial measured.
#[derive(Clone, Debug, Default)]
pub struct Trial {
    pub tx_per_s: f64,
    /// Per transaction: latency (µs), and for write transactions the aborts and the µs
    /// before the successful attempt.
    pub latencies_us: Vec<f64>,
    pub aborts: Vec<u32>,
    pub replay_us: f64,
    /// None when a write transaction's commit could not be timed apart.
    pub commit_us: Option<f64>,
    pub write_us: f64,
    /// Engine with concurrent writers: (write transactions committed, flushes).
    pub flushes: Option<(u64, u64)>,
    /// Flush requests the lab's data device completed during the threads' run.
    pub dev_flushes: Option<u64>,
}

/// The data device's flush requests since `before` (None outside the ext4 lab, or on a
/// kernel that does not count them).
fn flushes_since(
    lab: &Lab,
    before: Option<(crate::lab::DevStat, crate::lab::DevStat)>,
) -> Result<Option<u64>, String> {
    Ok(match (before, lab.dev_stats()?) {
        (Some((b, _)), Some((a, _))) => a.delta(&b).flushes,
        _ => None,
    })
}

const TABLE: &str = "t";

fn value(k: i64, v: u64) -> Vec<u8> {
    let mut b = format!("{k:08}:{v:016}").into_bytes();
    b.resize(100, b'x');
    b
}

fn load_engine(
    dir: &Path,
    mode: JournalMode,
    c: Concurrency,
    group: bool,
    n: i64,
) -> Result<Database, String> {
    let mut cfg = Config::default().journal_mode(mode).concurrency(c);
    if c != Concurrency::Serial {
        cfg = cfg.group_commit(group);
    }
    let db = Database::open(dir.join("test.db"), cfg).map_err(|e| e.to_string())?;
    let mut w = db.begin_write().map_err(|e| e.to_string())?;
    let t = w
        .create_tree(TABLE, KeyKind::Int)
        .map_err(|e| e.to_string())?;
    for k in 0..n {
        w.insert(&t, k, &value(k, 0)).map_err(|e| e.to_string())?;
    }
    w.commit().map_err(|e| e.to_string())?;
    Ok(db)
}

/// Run one thread's transactions on the engine.
fn engine_thread(db: &Database, txns: &[Vec<Stmt>]) -> Result<Done, String> {
    let mut out = Vec::with_capacity(txns.len());
    for (i, stmts) in txns.iter().enumerate() {
        if i % 64 == 0 {
            check_interrupted()?;
        }
        let t0 = Instant::now();
        if stmts.iter().any(|s| s.1) {
            let mut last_start = t0;
            let mut last_end = t0;
            let ((), aborts) = db
                .write_counted(|w| {
                    last_start = Instant::now();
                    let t = w.open_tree(TABLE)?;
                    for &(k, upd) in stmts {
                        if upd {
                            w.insert(&t, k, &value(k, i as u64 + 1))?;
                        } else {
                            w.get(&t, k)?;
                        }
                    }
                    last_end = Instant::now();
                    Ok(())
                })
                .map_err(|e| e.to_string())?;
            out.push(TxnDone {
                us: t0.elapsed().as_secs_f64() * 1e6,
                aborts,
                replay_us: (last_start - t0).as_secs_f64() * 1e6,
                commit_us: Some(last_end.elapsed().as_secs_f64() * 1e6),
                write: true,
            });
        } else {
            let r = db.begin_read().map_err(|e| e.to_string())?;
            let t = r.open_tree(TABLE).map_err(|e| e.to_string())?;
            for &(k, _) in stmts {
                r.get(&t, k).map_err(|e| e.to_string())?;
            }
            out.push(TxnDone {
                us: t0.elapsed().as_secs_f64() * 1e6,
                ..TxnDone::default()
            });
        }
    }
    Ok(out)
}

fn sqlite_thread(conn: &rusqlite::Connection, txns: &[Vec<Stmt>]) -> Result<Done, String> {
    let es = |e: rusqlite::Error| e.to_string();
    let mut out = Vec::with_capacity(txns.len());
    for (i, stmts) in txns.iter().enumerate() {
        if i % 64 == 0 {
            check_interrupted()?;
        }
        let t0 = Instant::now();
        let write = stmts.iter().any(|s| s.1);
        let mut aborts = 0;
        let mut last_start;
        let mut commit_us = None;
        loop {
            last_start = Instant::now();
            let r = (|| -> rusqlite::Result<()> {
                let multi = stmts.len() > 1;
                if multi {
                    conn.execute_batch(if write { "BEGIN IMMEDIATE" } else { "BEGIN" })?;
                }
                for &(k, upd) in stmts {
                    if upd {
                        let v = String::from_utf8(value(k, i as u64 + 1)).expect("ascii");
                        conn.prepare_cached("UPDATE tblMyList SET Value = ?2 WHERE id = ?1")?
                            .execute(rusqlite::params![k, v])?;
                    } else {
                        conn.prepare_cached("SELECT Value FROM tblMyList WHERE id = ?1")?
                            .query_row([k], |r| r.get::<_, String>(0))?;
                    }
                }
                if multi {
                    let c0 = Instant::now();
                    conn.execute_batch("COMMIT")?;
                    commit_us = Some(c0.elapsed().as_secs_f64() * 1e6);
                }
                Ok(())
            })();
            match r {
                Ok(()) => break,
                Err(rusqlite::Error::SqliteFailure(f, _))
                    if f.code == rusqlite::ErrorCode::DatabaseBusy && aborts < 1000 =>
                {
                    let _ = conn.execute_batch("ROLLBACK");
                    aborts += 1;
                }
                Err(e) => {
                    let _ = conn.execute_batch("ROLLBACK");
                    return Err(es(e));
                }
            }
        }
        out.push(TxnDone {
            us: t0.elapsed().as_secs_f64() * 1e6,
            aborts,
            replay_us: (last_start - t0).as_secs_f64() * 1e6,
            commit_us: commit_us.filter(|_| write),
            write,
        });
    }
    Ok(out)
}

/// One trial: load the table in a fresh directory, run the threads, measure.
pub fn trial(
    lab: &Lab,
    dir: &Path,
    c: ConcContender,
    p: &Point,
    params: &Params,
    round: u32,
) -> Result<Trial, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let plans: Vec<Vec<Vec<Stmt>>> = (0..p.threads).map(|t| plan(p, params, t, round)).collect();
    let barrier = Arc::new(Barrier::new(p.threads + 1));
    let run = |work: &(dyn Fn(usize) -> Result<Done, String> + Sync)| {
        std::thread::scope(|s| {
            let hs: Vec<_> = (0..p.threads)
                .map(|t| {
                    let b = barrier.clone();
                    s.spawn(move || {
                        b.wait();
                        work(t)
                    })
                })
                .collect();
            barrier.wait();
            let t0 = Instant::now();
            let rs: Vec<_> = hs
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|_| Err("thread panicked".into())))
                .collect();
            (t0.elapsed(), rs)
        })
    };
    // Write transactions and the flushes that committed them (group commit's counters).
    let mut flushes = None;
    // Flush requests the data device completed during the run (ext4 lab).
    let dev_flushes;
    let (wall, results) = match c {
        ConcContender::Engine {
            mode,
            concurrency,
            group,
            ..
        } => {
            let db = load_engine(dir, mode, concurrency, group, params.records)?;
            let before = db.group_stats();
            let dev0 = lab.dev_stats()?;
            let r = run(&|t| engine_thread(&db, &plans[t]));
            dev_flushes = flushes_since(lab, dev0)?;
            let after = db.group_stats();
            if after.groups > before.groups {
                flushes = Some((after.members - before.members, after.groups - before.groups));
            }
            db.close().map_err(|e| e.to_string())?;
            r
        }
        ConcContender::SqliteWalApps => {
            let first = SqliteStore::open(dir, SqliteFlavor::WalApps)?;
            {
                let conn = first.connection();
                conn.execute_batch("BEGIN").map_err(|e| e.to_string())?;
                for k in 0..params.records {
                    let v = String::from_utf8(value(k, 0)).expect("ascii");
                    conn.execute(
                        "INSERT INTO tblMyList (id, Value, creation_date) VALUES (?1, ?2, 0)",
                        rusqlite::params![k, v],
                    )
                    .map_err(|e| e.to_string())?;
                }
                conn.execute_batch("COMMIT").map_err(|e| e.to_string())?;
            }
            let conns: Vec<SqliteStore> = (0..p.threads)
                .map(|_| {
                    let s = SqliteStore::open(dir, SqliteFlavor::WalApps)?;
                    s.connection()
                        .busy_timeout(Duration::from_secs(10))
                        .map_err(|e| e.to_string())?;
                    Ok(s)
                })
                .collect::<Result<_, String>>()?;
            let conns: Vec<std::sync::Mutex<SqliteStore>> =
                conns.into_iter().map(std::sync::Mutex::new).collect();
            let dev0 = lab.dev_stats()?;
            let r = run(&|t| {
                let s = conns[t].lock().unwrap_or_else(|e| e.into_inner());
                sqlite_thread(s.connection(), &plans[t])
            });
            dev_flushes = flushes_since(lab, dev0)?;
            drop(first);
            r
        }
    };
    let mut trial = Trial {
        flushes,
        dev_flushes,
        commit_us: Some(0.0),
        ..Trial::default()
    };
    let mut n = 0usize;
    for r in results {
        for d in r.map_err(|e| format!("{}: {e}", c.name()))? {
            trial.latencies_us.push(d.us);
            n += 1;
            if d.write {
                trial.aborts.push(d.aborts);
                trial.replay_us += d.replay_us;
                match (d.commit_us, &mut trial.commit_us) {
                    (Some(c), Some(sum)) => *sum += c,
                    _ => trial.commit_us = None,
                }
                trial.write_us += d.us;
            }
        }
    }
    trial.tx_per_s = n as f64 / wall.as_secs_f64();
    Ok(trial)
}

/// Latency percentiles (µs) of a run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Percentiles {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
}

/// A JSON row: the bench's row fields that apply, plus the grid and the aborts.
#[derive(Clone, Debug, Serialize)]
pub struct ConcRow {
    pub contender: String,
    pub workload: String,
    pub op: String,
    pub ops_per_txn: u32,
    /// Transactions per round (all threads).
    pub txns: u64,
    pub tx_per_s_median: f64,
    pub tx_per_s_rounds: Vec<f64>,
    pub ratio_to_baseline: Option<f64>,
    pub threads: usize,
    pub write_ratio: u32,
    pub zipf_theta: f64,
    pub aborts_per_txn_mean: f64,
    pub aborts_per_txn_max: u32,
    /// Over every transaction of every round.
    pub latency_percentiles_us: Percentiles,
    /// Share of write-transaction time before the successful attempt began (module
    /// notes: writer-flag wait, rolled-back attempts, forced sleep, back-off).
    pub wait_share: f64,
    /// Share of write-transaction time from the end of the successful attempt's
    /// statements to the commit's return: validation, the group commit queue, the page
    /// writes and the fdatasync (None: not measurable, SQLite's autocommit).
    pub commit_share: Option<f64>,
    /// Engine with concurrent writers: write transactions per flush (group commit's
    /// batching; 1.0 without it), over every round.
    pub write_txns_per_flush: Option<f64>,
    /// Flush requests of the lab's data device per write transaction, over every round
    /// (every contender, SQLite too; checkpoints included). None outside the ext4 lab.
    pub device_flushes_per_write_txn: Option<f64>,
}

/// Run the grid: for each round, each point, each contender (interleaved), a fresh trial.
pub fn run(
    lab: &Lab,
    contenders: &[ConcContender],
    points: &[Point],
    params: &Params,
    baseline: &str,
) -> Result<Vec<ConcRow>, String> {
    let mut trials: Vec<Vec<Vec<Trial>>> = vec![vec![Vec::new(); contenders.len()]; points.len()];
    let mut seq = 0;
    let total = params.rounds as usize * points.len() * contenders.len();
    for round in 0..params.rounds {
        for (pi, p) in points.iter().enumerate() {
            for (ci, c) in contenders.iter().enumerate() {
                seq += 1;
                if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
                    eprint!("\r[{seq}/{total}] {} {p:?}            ", c.name());
                }
                let dir = lab.root().join(format!("{seq:05}-{}", c.name()));
                let t = trial(lab, &dir, *c, p, params, round)?;
                std::fs::remove_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
                trials[pi][ci].push(t);
            }
        }
    }
    if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        eprintln!();
    }
    let mut rows = Vec::new();
    for (pi, p) in points.iter().enumerate() {
        let mut point_rows: Vec<ConcRow> = Vec::new();
        for (ci, c) in contenders.iter().enumerate() {
            let ts = &trials[pi][ci];
            let tps: Vec<f64> = ts.iter().map(|t| t.tx_per_s).collect();
            let aborts: Vec<u32> = ts.iter().flat_map(|t| t.aborts.iter().copied()).collect();
            let mut lat: Vec<f64> = ts
                .iter()
                .flat_map(|t| t.latencies_us.iter().copied())
                .collect();
            lat.sort_by(f64::total_cmp);
            let (replay, write): (f64, f64) = ts
                .iter()
                .fold((0.0, 0.0), |(r, w), t| (r + t.replay_us, w + t.write_us));
            let commit: Option<f64> = ts.iter().map(|t| t.commit_us).sum();
            let dev_flushes: Option<u64> = ts.iter().map(|t| t.dev_flushes).sum();
            let flushed: Option<(u64, u64)> = ts
                .iter()
                .map(|t| t.flushes)
                .try_fold((0, 0), |(m, g), f| f.map(|(fm, fg)| (m + fm, g + fg)));
            point_rows.push(ConcRow {
                contender: c.name().to_string(),
                workload: "concurrent".into(),
                op: "mixed".into(),
                ops_per_txn: p.stmts as u32,
                txns: (params.queries / p.stmts.max(1) * p.threads) as u64,
                tx_per_s_median: crate::report::median(&tps).unwrap_or(f64::NAN),
                tx_per_s_rounds: tps,
                ratio_to_baseline: None,
                threads: p.threads,
                write_ratio: if p.stmts > 1 { 15 } else { p.write_ratio },
                zipf_theta: p.zipf_theta,
                aborts_per_txn_mean: if aborts.is_empty() {
                    0.0
                } else {
                    aborts.iter().map(|&a| f64::from(a)).sum::<f64>() / aborts.len() as f64
                },
                aborts_per_txn_max: aborts.iter().copied().max().unwrap_or(0),
                latency_percentiles_us: Percentiles {
                    p50: crate::report::quantile(&lat, 0.50),
                    p90: crate::report::quantile(&lat, 0.90),
                    p99: crate::report::quantile(&lat, 0.99),
                },
                wait_share: if write > 0.0 { replay / write } else { 0.0 },
                commit_share: commit.filter(|_| write > 0.0).map(|c| c / write),
                write_txns_per_flush: flushed
                    .filter(|&(_, g)| g > 0)
                    .map(|(m, g)| m as f64 / g as f64),
                device_flushes_per_write_txn: dev_flushes
                    .filter(|_| !aborts.is_empty())
                    .map(|f| f as f64 / aborts.len() as f64),
            });
        }
        let base = point_rows
            .iter()
            .find(|r| r.contender == baseline)
            .map(|r| r.tx_per_s_median);
        for r in &mut point_rows {
            r.ratio_to_baseline = base.map(|b| r.tx_per_s_median / b);
        }
        rows.extend(point_rows);
    }
    Ok(rows)
}

/// The text table.
pub fn table(rows: &[ConcRow]) -> String {
    let mut s = String::from(
        "threads  wr%  zipf  stmts  contender        tx/s   ratio  aborts/wtxn  max  p50_us  p90_us  p99_us   wait  commit  wtx/flush  devflush/wtx\n",
    );
    for r in rows {
        s += &format!(
            "{:>7}  {:>3}  {:>4.1}  {:>5}  {:<13} {:>8.1}  {:>6}  {:>11.3}  {:>3}  {:>6.0}  {:>6.0}  {:>6.0}  {:>5.1}%  {:>6}  {:>9}  {:>12}\n",
            r.threads,
            r.write_ratio,
            r.zipf_theta,
            r.ops_per_txn,
            r.contender,
            r.tx_per_s_median,
            r.ratio_to_baseline.map_or("-".into(), |x| format!("{x:.2}")),
            r.aborts_per_txn_mean,
            r.aborts_per_txn_max,
            r.latency_percentiles_us.p50,
            r.latency_percentiles_us.p90,
            r.latency_percentiles_us.p99,
            100.0 * r.wait_share,
            r.commit_share
                .map_or("-".into(), |c| format!("{:.1}%", 100.0 * c)),
            r.write_txns_per_flush
                .map_or("-".into(), |x| format!("{x:.2}")),
            r.device_flushes_per_write_txn
                .map_or("-".into(), |x| format!("{x:.2}")),
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zipf_is_uniform_at_zero_and_skewed_at_one() {
        let u = Zipf::new(1000, 0.0);
        let z = Zipf::new(1000, 1.0);
        let mut rng = Rng(7);
        let (mut hot_u, mut hot_z) = (0, 0);
        for _ in 0..20_000 {
            hot_u += usize::from(u.rank(rng.unit()) < 10);
            hot_z += usize::from(z.rank(rng.unit()) < 10);
        }
        // Uniform: the 10 hottest of 1,000 get ~1 %; θ = 1: H(10)/H(1000) ≈ 39 %.
        assert!((100..350).contains(&hot_u), "{hot_u}");
        assert!((7000..8500).contains(&hot_z), "{hot_z}");
    }

    #[test]
    fn keys_are_a_permutation_and_plans_honour_the_ratio() {
        let n = 5000;
        let mut seen = vec![false; n as usize];
        for r in 0..n as usize {
            let k = key_of(r, n);
            assert!(!seen[k as usize]);
            seen[k as usize] = true;
        }
        let p = Point {
            threads: 1,
            write_ratio: 20,
            zipf_theta: 0.0,
            stmts: 1,
        };
        let params = Params {
            records: n,
            queries: 10_000,
            rounds: 1,
            seed: 1,
        };
        let txns = plan(&p, &params, 0, 0);
        assert_eq!(txns.len(), 10_000);
        let w = txns.iter().filter(|t| t[0].1).count();
        assert!((1700..2300).contains(&w), "{w}");
        let multi = Point { stmts: 4, ..p };
        let txns = plan(&multi, &params, 0, 0);
        assert_eq!(txns.len(), 2500);
        let w = txns.iter().flatten().filter(|s| s.1).count();
        assert!((1200..1800).contains(&w), "85 % reads: {w}");
    }

    #[test]
    fn a_small_grid_runs_every_contender_and_counts_its_transactions() {
        let lab = Lab::dir(None).unwrap();
        let points = [Point {
            threads: 2,
            write_ratio: 50,
            zipf_theta: 1.0,
            stmts: 2,
        }];
        let params = Params {
            records: 200,
            queries: 60,
            rounds: 1,
            seed: 3,
        };
        let rows = run(
            &lab,
            &ConcContender::all(),
            &points,
            &params,
            "sqlite-wal-r",
        )
        .unwrap();
        assert_eq!(rows.len(), ConcContender::all().len());
        for r in &rows {
            assert_eq!(r.txns, 60, "{}", r.contender);
            assert!(r.tx_per_s_median > 0.0);
            if r.contender == "2vto" {
                assert!(r.aborts_per_txn_max <= 1, "AFUW: {r:?}");
            }
        }
        assert!(table(&rows).contains("2vto-nosleep"));
    }
}
