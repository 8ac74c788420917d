//! `inpage bench mvbt`: the LS-MVBT paper's Fig. 6 workload (FAST '14, §6.2) and the
//! space row of issue 16.
//!
//! Fig. 6: a table of `records` rows with random 8-byte keys, then `txns` transactions.
//! The paper reports per insert ("LS-MVBT makes just one B-tree node dirty on average"
//! per insert), so by default each transaction is ONE operation, alternating an insert of
//! a new random key and a delete of a random existing key; `--pair` makes each
//! transaction do both. The WAL rows run at each checkpoint interval (`wal/cp63`, ...):
//! the window times every commit, the automatic checkpoints they trigger and a final
//! checkpoint of what is left in the log (the paper counts the checkpoint-on-close), and
//! divides by the transactions.
//!
//! Space (`--space`): `records` rows, then `updates` one-row updates of random existing
//! keys with fresh values, then every file's size, before and after a final checkpoint.
//!
//! Invariants:
//! - Plans are pure functions of their arguments (seeded), so every contender in every
//!   round does exactly the same operations; every operation changes the table (inserted
//!   keys are new, deleted keys exist, updates write a value no row holds), so a commit
//!   always appends to a WAL — which `EngineStore`'s checkpoint detection relies on.
//! - The single-operation plan keeps the table within one row of `records`
//!   (inserts and deletes alternate, starting with an insert).
//! - Rounds interleave the rows as the other benches do (`runner::rotation`); each trial
//!   runs on fresh files, set up (preload, clean close) before `settle` and the window.
//! - A row's checkpoint interval reaches the store itself: the engine's
//!   `Config::wal_autocheckpoint`, SQLite's `PRAGMA wal_autocheckpoint` (read back).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use inpage::vfs::{AccountingVfs, IoKind, IoStats, OsVfs, Vfs};
use inpage::JournalMode;
use serde::{Deserialize, Serialize};

use crate::contender::{
    self, Contender, EngineStore, Kind, SqliteFlavor, SqliteStore, Store, WalCommit,
};
use crate::lab::check_interrupted;
use crate::report::{median, Report, ResultRow, Sample};
use crate::runner::{guarded, probe, rotation, sample, Session};
use crate::workload::{mobibench_value, update_value, KeyGen, Op};
use crate::LabArgs;

/// The workload name of the Fig. 6 rows.
pub const FIG6_WORKLOAD: &str = "mvbt-fig6";

/// Fig. 6 contenders when none are named: the two MVBT modes, the four ablations, DHL and
/// IPS for reference, and the WALs (each at every checkpoint interval).
pub const FIG6_DEFAULT: &[&str] = &[
    "mvbt",
    "ls-mvbt",
    "ls-mvbt-no-split",
    "ls-mvbt-no-reserve",
    "ls-mvbt-no-gc",
    "ls-mvbt-header",
    "dhl-cc",
    "ips",
    "wal",
    "sqlite-wal",
    "sqlite-wal-r",
];

/// Space contenders when none are named.
pub const SPACE_DEFAULT: &[&str] = &["mvbt", "ls-mvbt", "ls-mvbt-no-gc", "wal", "dhl-cc", "ips"];

/// The paper's checkpoint intervals (pages).
pub const PAPER_CHECKPOINTS: &str = "63,125,250,500,1000";

#[derive(Args, Debug, Clone)]
pub struct MvbtArgs {
    #[command(flatten)]
    pub lab: LabArgs,
    /// Contenders, comma-separated (default: the Fig. 6 set, or with --space the space
    /// set). WAL contenders run once per --checkpoints interval.
    #[arg(long, value_delimiter = ',')]
    pub contenders: Vec<String>,
    /// Rounds; rows are interleaved within each round, results are medians.
    #[arg(long, default_value_t = 5)]
    pub rounds: u32,
    /// WAL checkpoint intervals in pages, comma-separated (engine `wal_autocheckpoint`,
    /// SQLite `PRAGMA wal_autocheckpoint`).
    #[arg(long, value_delimiter = ',', default_value = PAPER_CHECKPOINTS)]
    pub checkpoints: Vec<u32>,
    /// Rows in the table before the measured transactions.
    #[arg(long, default_value_t = 2000)]
    pub records: u64,
    /// Measured transactions per round.
    #[arg(long, default_value_t = 1000)]
    pub txns: u64,
    /// Value size in bytes.
    #[arg(long, default_value_t = 100)]
    pub value_size: usize,
    /// Each transaction inserts a new random key AND deletes a random existing one
    /// (default: one operation per transaction, inserts and deletes alternating).
    #[arg(long, conflicts_with = "inserts")]
    pub pair: bool,
    /// Every transaction inserts one new random key, so the table grows and nodes split:
    /// the paper's ablation workload (§6.6–6.7: 1,000 records of 128 bytes into an empty
    /// table; use `--records 0 --value-size 128`).
    #[arg(long)]
    pub inserts: bool,
    /// Seed of the key generator.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Transactions of the same workload run after the reopen and before the measured
    /// window (not measured), so a WAL is in its steady state: past its first checkpoint
    /// and reused instead of growing with every commit. 0 = the paper's fresh start.
    #[arg(long, default_value_t = 0)]
    pub warmup: u64,
    /// Measure file sizes after --updates one-row updates instead of Fig. 6's time.
    #[arg(long)]
    pub space: bool,
    /// --space: one-row update transactions (random existing keys, fresh values).
    #[arg(long, default_value_t = 100_000)]
    pub updates: u64,
    /// Write the results as JSON to this file.
    #[arg(long)]
    pub json: Option<std::path::PathBuf>,
}

// ------------------------------------------------------------------------------ plans

/// Fig. 6's operations: the preload and the transactions, of which the first `warmup`
/// run before the measured window opens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fig6Plan {
    pub ops: Fig6Ops,
    pub preload: Vec<i64>,
    pub txns: Vec<Vec<(Op, i64)>>,
    pub warmup: usize,
}

impl Fig6Plan {
    /// The transactions of the measured window.
    pub fn measured(&self) -> &[Vec<(Op, i64)>] {
        &self.txns[self.warmup.min(self.txns.len())..]
    }
}

/// What each measured transaction does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fig6Ops {
    /// One operation, inserts of a new key and deletes of an existing one alternating.
    Alternate,
    /// An insert of a new key and a delete of an existing one (`--pair`).
    Pair,
    /// One insert of a new key (`--inserts`): the table grows.
    Inserts,
}

impl Fig6Ops {
    /// The operation label of the report's point, and the table's description.
    fn describe(self) -> (&'static str, &'static str) {
        match self {
            Fig6Ops::Alternate => (
                "insert|delete",
                "one operation each, alternating insert of a new random key / delete of a random existing key",
            ),
            Fig6Ops::Pair => (
                "insert+delete",
                "each inserts a new random key AND deletes a random existing one (--pair)",
            ),
            Fig6Ops::Inserts => (
                "insert",
                "each inserts one new random key, the table grows (--inserts)",
            ),
        }
    }
}

/// `records` random keys, then `txns` transactions of the shape `ops` says.
pub fn fig6_plan(records: u64, txns: u64, ops: Fig6Ops, seed: u64) -> Fig6Plan {
    let pair = ops == Fig6Ops::Pair;
    let mut g = KeyGen::new(seed);
    let preload: Vec<i64> = (0..records).map(|_| g.fresh()).collect();
    let mut live = preload.clone();
    let mut out = Vec::with_capacity(txns as usize);
    for t in 0..txns {
        if pair {
            // The victim is drawn before the insert, so it is a row that existed.
            let victim = (!live.is_empty()).then(|| g.take(&mut live));
            let k = g.fresh();
            live.push(k);
            let mut ops = vec![(Op::Insert, k)];
            ops.extend(victim.map(|v| (Op::Delete, v)));
            out.push(ops);
        } else if ops == Fig6Ops::Inserts || t % 2 == 0 || live.is_empty() {
            let k = g.fresh();
            live.push(k);
            out.push(vec![(Op::Insert, k)]);
        } else {
            out.push(vec![(Op::Delete, g.take(&mut live))]);
        }
    }
    Fig6Plan {
        ops,
        preload,
        txns: out,
        warmup: 0,
    }
}

/// The space workload: `records` random keys, then `updates` random existing keys.
pub fn space_plan(records: u64, updates: u64, seed: u64) -> (Vec<i64>, Vec<i64>) {
    let mut g = KeyGen::new(seed);
    let preload: Vec<i64> = (0..records).map(|_| g.fresh()).collect();
    let ups = (0..updates)
        .map(|_| preload[g.rng.below(records.max(1)) as usize])
        .collect();
    (preload, ups)
}

// ------------------------------------------------------------------------------- rows

/// One row of the Fig. 6 table: a contender, at a checkpoint interval if it has a WAL.
#[derive(Clone, Debug)]
pub struct Fig6Row {
    /// `wal/cp63` for a WAL row, the contender's name otherwise.
    pub name: String,
    pub base: Contender,
    pub checkpoint: Option<u32>,
}

/// Whether `c` keeps a write-ahead log with an automatic checkpoint.
pub fn has_wal(c: &Contender) -> bool {
    match c.kind {
        Kind::Engine { mode, .. } => mode == JournalMode::WAL,
        Kind::Sqlite(f) => matches!(
            f,
            SqliteFlavor::Wal | SqliteFlavor::WalApps | SqliteFlavor::AndroidWal
        ),
        _ => false,
    }
}

/// Every contender once, WAL contenders once per interval (in the order given).
pub fn fig6_rows(cs: &[Contender], checkpoints: &[u32]) -> Vec<Fig6Row> {
    let mut v = Vec::new();
    for c in cs {
        if has_wal(c) {
            for &cp in checkpoints {
                v.push(Fig6Row {
                    name: format!("{}/cp{cp}", c.name),
                    base: c.clone(),
                    checkpoint: Some(cp),
                });
            }
        } else {
            v.push(Fig6Row {
                name: c.name.clone(),
                base: c.clone(),
                checkpoint: None,
            });
        }
    }
    v
}

impl Fig6Row {
    /// Open (creating) the row's store in `dir`, with its checkpoint interval.
    pub fn open(&self, dir: &Path, stats: &Arc<IoStats>) -> Result<Box<dyn Store>, String> {
        let Some(cp) = self.checkpoint else {
            return self.base.open(dir, stats);
        };
        let r: Result<Box<dyn Store>, String> = match self.base.kind {
            Kind::Engine { mode, tweak } => {
                let vfs: Arc<dyn Vfs> = Arc::new(AccountingVfs::with_stats(
                    Arc::new(OsVfs::new()),
                    stats.clone(),
                ));
                let config = EngineStore::config(mode, tweak, vfs).wal_autocheckpoint(cp);
                EngineStore::open_config(dir, config).map(|s| Box::new(s) as _)
            }
            Kind::Sqlite(f) => SqliteStore::open_checkpointed(dir, f, cp).map(|s| Box::new(s) as _),
            _ => Err("no write-ahead log to checkpoint".into()),
        };
        r.map_err(|e| format!("{}: open: {e}", self.name))
    }
}

// ----------------------------------------------------------------------------- trials

/// From each commit's time and log effect, the final checkpoint and the window: the
/// share of the window spent checkpointing, and the mean frames of the commits that did
/// not checkpoint. A checkpoint the store did not time itself is charged the commit's
/// excess over the median commit that did not checkpoint. `(None, None)` without a log.
pub fn wal_summary(
    commits: &[(Duration, Option<WalCommit>)],
    final_checkpoint: Duration,
    wall: Duration,
) -> (Option<f64>, Option<f64>) {
    if commits.iter().all(|(_, w)| w.is_none()) {
        return (None, None);
    }
    let plain: Vec<f64> = commits
        .iter()
        .filter(|(_, w)| w.is_some_and(|w| !w.checkpointed))
        .map(|(d, _)| d.as_secs_f64())
        .collect();
    let typical = median(&plain).unwrap_or(0.0);
    let mut cp = final_checkpoint.as_secs_f64();
    for (d, w) in commits {
        match w {
            Some(w) if w.checkpointed => {
                cp += match w.checkpoint_nanos {
                    Some(ns) => ns as f64 / 1e9,
                    None => (d.as_secs_f64() - typical).max(0.0),
                };
            }
            _ => {}
        }
    }
    let frames: Vec<f64> = commits
        .iter()
        .filter_map(|(_, w)| w.filter(|w| !w.checkpointed).and_then(|w| w.frames))
        .map(|f| f as f64)
        .collect();
    let mean = (!frames.is_empty()).then(|| frames.iter().sum::<f64>() / frames.len() as f64);
    (Some(cp / wall.as_secs_f64().max(1e-9)), mean)
}

/// One measured Fig. 6 trial of `row`.
fn fig6_trial(
    s: &mut Session,
    row: &Fig6Row,
    plan: &Fig6Plan,
    value_size: usize,
) -> Result<Sample, String> {
    let dir = s.fresh_dir(&row.name.replace('/', "-"))?;
    let stats = Arc::new(IoStats::new());
    let v = mobibench_value(value_size, false);
    {
        let mut st = row.open(&dir, &stats)?;
        st.preload(&plan.preload, &v)?;
        st.close()?;
    }
    s.settle();
    let mut st = row.open(&dir, &stats)?;
    for ops in &plan.txns[..plan.warmup.min(plan.txns.len())] {
        check_interrupted()?;
        st.txn_ops(ops, &v)?;
    }
    let mut commits = Vec::with_capacity(plan.txns.len());
    let before = probe(&s.lab, &stats)?;
    let t0 = Instant::now();
    for ops in plan.measured() {
        check_interrupted()?;
        let tc = Instant::now();
        st.txn_ops(ops, &v)?;
        commits.push((tc.elapsed(), st.last_commit()));
    }
    let mut final_cp = Duration::ZERO;
    if row.checkpoint.is_some() {
        let tc = Instant::now();
        st.checkpoint()?;
        final_cp = tc.elapsed();
    }
    let wall = t0.elapsed();
    let after = probe(&s.lab, &stats)?;
    st.close()?;
    let n = plan.measured().len() as u64;
    let mut smp = sample(
        row.base.accounted(),
        &before,
        &after,
        wall,
        n,
        1,
        &s.profile,
    );
    let (share, frames) = wal_summary(&commits, final_cp, wall);
    smp.checkpoint_share = share;
    smp.pages_dirtied = frames.or_else(|| {
        // Engine modes writing pages in place: one write call per page (a span of it).
        let calls = after.acct.delta(&before.acct).get(IoKind::Write).calls;
        (matches!(row.base.kind, Kind::Engine { .. }) && row.checkpoint.is_none())
            .then(|| calls as f64 / n.max(1) as f64)
    });
    std::fs::remove_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    Ok(smp)
}

/// Fig. 6 over `rows`: `s.rounds` rounds, rows rotated each round.
pub fn run_fig6(
    s: &mut Session,
    rows: &[Fig6Row],
    plan: &Fig6Plan,
    value_size: usize,
) -> Result<(), String> {
    let k = plan.txns.first().map_or(1, |t| t.len() as u32);
    let pt = s.next_point(FIG6_WORKLOAD, plan.ops.describe().0, k);
    for round in 0..s.rounds {
        for ri in rotation(rows.len(), round) {
            let row = &rows[ri];
            s.pb.set_message(format!("mvbt fig6 {} (round {})", row.name, round + 1));
            let smp = guarded(&row.name, || fig6_trial(s, row, plan, value_size))?;
            s.collector
                .add(pt.clone(), &row.name, plan.measured().len() as u64, smp);
            s.pb.inc(1);
        }
    }
    Ok(())
}

/// The reference every row is compared with: `wal` at the row's interval, and for rows
/// without one, `wal` at the largest interval (WAL's fastest setting in the paper).
pub fn set_ratios(results: &mut [ResultRow], rows: &[Fig6Row], reference: &str) {
    let ms = |r: &ResultRow| 1000.0 / r.tx_per_s_median.max(1e-12);
    let refs: Vec<(u32, f64)> = rows
        .iter()
        .filter(|x| x.base.name == reference)
        .filter_map(|x| {
            let cp = x.checkpoint?;
            let r = results.iter().find(|r| r.contender == x.name)?;
            Some((cp, ms(r)))
        })
        .collect();
    let largest = refs.iter().max_by_key(|(cp, _)| *cp).map(|&(_, m)| m);
    for r in results.iter_mut() {
        let row = rows.iter().find(|x| x.name == r.contender);
        r.checkpoint = row.and_then(|x| x.checkpoint);
        let base = match r.checkpoint {
            Some(cp) => refs.iter().find(|(c, _)| *c == cp).map(|&(_, m)| m),
            None => largest,
        };
        r.ratio_to_baseline = base.map(|b| b / ms(r));
        r.model_ratio_to_baseline = None;
    }
}

fn cell(v: Option<f64>, prec: usize) -> String {
    v.map_or_else(|| "-".into(), |x| format!("{x:.prec$}"))
}

/// The Fig. 6 text table, and for the rows without a checkpoint interval their speed-up
/// over each WAL reference at every interval.
pub fn fig6_table(r: &Report, rows: &[Fig6Row], ops: Fig6Ops, warmup: u64) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "lab: {}  rounds: {}  transactions: {}  (medians over rounds; flushes, pages, KiB = loop-device counters)",
        r.lab,
        r.rounds,
        ops.describe().1
    );
    if warmup > 0 {
        let _ = writeln!(
            out,
            "warm-up: {warmup} transactions of the same workload after the reopen, unmeasured"
        );
    }
    if !r.sqlite.version.is_empty() {
        let _ = writeln!(
            out,
            "sqlite {} built with LIBSQLITE3_FLAGS='{}'",
            r.sqlite.version, r.sqlite.build_flags
        );
    }
    let _ = writeln!(
        out,
        "ms/txn includes the automatic checkpoints and a final checkpoint of the log (WAL rows); \
         vs-wal = wal's ms/txn at the same interval / this row's (rows without one: wal at the \
         largest interval); cp% = share of the time spent checkpointing; dirtied = WAL frames \
         per commit without a checkpoint (engine and SQLite), or page write calls per commit \
         (engine modes writing in place); devPg = data-device KiB / 4"
    );
    let head = [
        "contender",
        "ms/txn",
        "vs-wal",
        "flush",
        "devPg",
        "KiB",
        "dirtied",
        "cp%",
        "cpu_us",
    ];
    let mut cells: Vec<Vec<String>> = vec![head.iter().map(|s| s.to_string()).collect()];
    for x in &r.results {
        let kib = match (x.data_kib_per_txn, x.journal_kib_per_txn) {
            (Some(d), Some(j)) => Some(d + j),
            (d, _) => d,
        };
        cells.push(vec![
            x.contender.clone(),
            format!("{:.3}", 1000.0 / x.tx_per_s_median.max(1e-12)),
            cell(x.ratio_to_baseline, 2),
            cell(x.flushes_per_txn, 2),
            cell(x.data_kib_per_txn.map(|k| k / 4.0), 2),
            cell(kib, 1),
            cell(x.pages_dirtied_per_txn, 2),
            cell(x.checkpoint_share.map(|s| s * 100.0), 1),
            cell(x.cpu_us_per_txn, 0),
        ]);
    }
    push_cells(&mut out, &cells);
    let ms_of = |name: &str| {
        r.results
            .iter()
            .find(|x| x.contender == name)
            .map(|x| 1000.0 / x.tx_per_s_median.max(1e-12))
    };
    let plain: Vec<&Fig6Row> = rows.iter().filter(|x| x.checkpoint.is_none()).collect();
    let mut refs: Vec<&str> = Vec::new();
    for x in rows.iter().filter(|x| x.checkpoint.is_some()) {
        if !refs.contains(&x.base.name.as_str()) {
            refs.push(&x.base.name);
        }
    }
    for reference in refs {
        let cps: Vec<u32> = rows
            .iter()
            .filter(|x| x.base.name == reference)
            .filter_map(|x| x.checkpoint)
            .collect();
        if plain.is_empty() {
            break;
        }
        let _ = writeln!(
            out,
            "\nspeed-up over {reference} at each interval ({reference} ms/txn / row ms/txn):"
        );
        let mut cells = vec![std::iter::once("contender".to_string())
            .chain(cps.iter().map(|c| format!("cp{c}")))
            .collect::<Vec<_>>()];
        for x in &plain {
            let mine = ms_of(&x.name);
            let mut line = vec![x.name.clone()];
            for cp in &cps {
                let theirs = ms_of(&format!("{reference}/cp{cp}"));
                line.push(cell(theirs.zip(mine).map(|(t, m)| t / m.max(1e-12)), 2));
            }
            cells.push(line);
        }
        push_cells(&mut out, &cells);
    }
    out
}

/// Append `cells` as aligned text rows: the first column left-aligned, the rest right.
pub(crate) fn push_cells(out: &mut String, cells: &[Vec<String>]) {
    let cols = cells.iter().map(Vec::len).max().unwrap_or(0);
    let width: Vec<usize> = (0..cols)
        .map(|i| {
            cells
                .iter()
                .filter_map(|r| r.get(i))
                .map(String::len)
                .max()
                .unwrap_or(0)
        })
        .collect();
    for r in cells {
        let line: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(i, c)| {
                if i == 0 {
                    format!("{c:<w$}", w = width[i])
                } else {
                    format!("{c:>w$}", w = width[i])
                }
            })
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
}

// ------------------------------------------------------------------------------ space

/// File sizes of one contender after the space workload.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpaceRow {
    pub contender: String,
    /// `test.db` after the updates (the WAL not checkpointed yet).
    pub db_bytes: u64,
    /// Every other file in the store's directory then (WAL, shm, journal).
    pub side_bytes: u64,
    /// `db_bytes + side_bytes`.
    pub total_bytes: u64,
    /// `test.db` after a final checkpoint (equal to `db_bytes` without a log).
    pub db_after_checkpoint_bytes: u64,
    /// Every file after a clean close.
    pub closed_bytes: u64,
    /// `total_bytes` / the reference contender's (`wal`), if it ran.
    pub ratio_to_reference: Option<f64>,
    /// Engine rows, after the close: the database's page count and how many of those are
    /// free (`inpage::check`); the file itself is grown in 64-page chunks past them.
    #[serde(default)]
    pub page_count: Option<u32>,
    #[serde(default)]
    pub free_pages: Option<u32>,
}

/// The space report (`--space --json`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpaceReport {
    pub lab: String,
    pub records: u64,
    pub updates: u64,
    pub value_size: usize,
    pub reference: String,
    pub results: Vec<SpaceRow>,
}

/// Sizes of `dir`'s files: (`test.db`, everything else).
pub fn dir_sizes(dir: &Path) -> Result<(u64, u64), String> {
    let (mut db, mut side) = (0, 0);
    let rd = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for e in rd {
        let e = e.map_err(|e| format!("{}: {e}", dir.display()))?;
        let md = e
            .metadata()
            .map_err(|x| format!("{}: {x}", e.path().display()))?;
        if !md.is_file() {
            continue;
        }
        if e.file_name() == "test.db" {
            db = md.len();
        } else {
            side += md.len();
        }
    }
    Ok((db, side))
}

fn space_trial(
    s: &mut Session,
    c: &Contender,
    preload: &[i64],
    updates: &[i64],
    value_size: usize,
) -> Result<SpaceRow, String> {
    let dir = s.fresh_dir(&format!("{}-space", c.name))?;
    let stats = Arc::new(IoStats::new());
    let mut st = c.open(&dir, &stats)?;
    st.preload(preload, &mobibench_value(value_size, false))?;
    for (t, &k) in updates.iter().enumerate() {
        if t % 1000 == 0 {
            check_interrupted()?;
            s.pb.set_message(format!("mvbt space {} {t}/{}", c.name, updates.len()));
        }
        st.txn(Op::Update, &[k], &update_value(value_size, t as u64))?;
    }
    let (db, side) = dir_sizes(&dir)?;
    st.checkpoint()?;
    let (db_cp, _) = dir_sizes(&dir)?;
    st.close()?;
    let (db_closed, side_closed) = dir_sizes(&dir)?;
    let pages = match c.kind {
        Kind::Engine { .. } => Some(engine_pages(&dir.join("test.db"))?),
        _ => None,
    };
    std::fs::remove_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    Ok(SpaceRow {
        contender: c.name.clone(),
        db_bytes: db,
        side_bytes: side,
        total_bytes: db + side,
        db_after_checkpoint_bytes: db_cp,
        closed_bytes: db_closed + side_closed,
        ratio_to_reference: None,
        page_count: pages.map(|p| p.0),
        free_pages: pages.map(|p| p.1),
    })
}

/// (pages, free pages) of a closed engine database, read-only.
fn engine_pages(path: &Path) -> Result<(u32, u32), String> {
    use inpage::{Config, Database};
    let db = Database::open_read_only(path, Config::default()).map_err(|e| e.to_string())?;
    let r = db.begin_read().map_err(|e| e.to_string())?;
    let rep = inpage::check::check(&r, &Default::default()).map_err(|e| e.to_string())?;
    Ok((rep.page_count, rep.free_pages))
}

/// The space workload over `cs`, one trial each (sizes do not vary between rounds).
pub fn run_space(
    s: &mut Session,
    cs: &[Contender],
    records: u64,
    updates: u64,
    value_size: usize,
    seed: u64,
) -> Result<Vec<SpaceRow>, String> {
    let (preload, ups) = space_plan(records, updates, seed);
    let mut rows = Vec::new();
    for c in cs {
        rows.push(guarded(&c.name, || {
            space_trial(s, c, &preload, &ups, value_size)
        })?);
        s.pb.inc(1);
    }
    let reference = rows
        .iter()
        .find(|r| r.contender == "wal")
        .map(|r| r.total_bytes);
    for r in &mut rows {
        r.ratio_to_reference = reference
            .filter(|&b| b > 0)
            .map(|b| r.total_bytes as f64 / b as f64);
    }
    Ok(rows)
}

/// The space text table.
pub fn space_table(r: &SpaceReport) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "lab: {}  {} rows of {}-byte values (random keys), then {} one-row updates (random \
         existing keys, fresh values), one durable transaction each; sizes in KiB",
        r.lab, r.records, r.value_size, r.updates
    );
    let _ = writeln!(
        out,
        "db = test.db, side = every other file (WAL/shm), total = both, db-cp = test.db after a \
         final checkpoint, closed = all files after a clean close; vs-{0} = total / {0}'s total; \
         pages, free = the engine database's page count after the close and how many are \
         free (its file is grown in 64-page chunks past the page count)",
        r.reference
    );
    let kib = |b: u64| format!("{:.0}", b as f64 / 1024.0);
    let mut cells = vec![[
        "contender",
        "db",
        "side",
        "total",
        "db-cp",
        "closed",
        "vs-wal",
        "pages",
        "free",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect::<Vec<_>>()];
    for x in &r.results {
        cells.push(vec![
            x.contender.clone(),
            kib(x.db_bytes),
            kib(x.side_bytes),
            kib(x.total_bytes),
            kib(x.db_after_checkpoint_bytes),
            kib(x.closed_bytes),
            cell(x.ratio_to_reference, 2),
            x.page_count.map_or("-".into(), |p| p.to_string()),
            x.free_pages.map_or("-".into(), |p| p.to_string()),
        ]);
    }
    push_cells(&mut out, &cells);
    out
}

/// `inpage bench mvbt`.
pub fn run(a: &MvbtArgs) -> Result<(), String> {
    if a.rounds == 0 || a.txns == 0 || (a.records == 0 && !a.inserts) {
        return Err(
            "--rounds, --txns and --records must be at least 1 (--records 0 only with --inserts)"
                .into(),
        );
    }
    if a.value_size == 0 || a.value_size > 1 << 20 {
        return Err("--value-size must be in 1..=1048576".into());
    }
    let names: Vec<String> = if a.contenders.is_empty() {
        let d = if a.space { SPACE_DEFAULT } else { FIG6_DEFAULT };
        d.iter().map(|s| s.to_string()).collect()
    } else {
        a.contenders.clone()
    };
    let cs = contender::select(&names)?;
    crate::lab::install_interrupt_handler();
    if a.space {
        let mut s = crate::session(&a.lab, 1, cs.len() as u64)?;
        let rows = run_space(&mut s, &cs, a.records, a.updates, a.value_size, a.seed)?;
        s.finish_progress();
        let r = SpaceReport {
            lab: s.lab.name().to_string(),
            records: a.records,
            updates: a.updates,
            value_size: a.value_size,
            reference: "wal".into(),
            results: rows,
        };
        drop(s);
        print!("{}", space_table(&r));
        if let Some(p) = &a.json {
            crate::write_json(&r, p)?;
        }
        return Ok(());
    }
    let mut cps = a.checkpoints.clone();
    cps.dedup();
    if cps.is_empty() || cps.contains(&0) {
        return Err("--checkpoints needs intervals of at least 1 page".into());
    }
    let rows = fig6_rows(&cs, &cps);
    let ops = match (a.pair, a.inserts) {
        (true, _) => Fig6Ops::Pair,
        (_, true) => Fig6Ops::Inserts,
        _ => Fig6Ops::Alternate,
    };
    let mut plan = fig6_plan(a.records, a.warmup + a.txns, ops, a.seed);
    plan.warmup = a.warmup as usize;
    let mut s = crate::session(&a.lab, a.rounds, rows.len() as u64 * u64::from(a.rounds))?;
    run_fig6(&mut s, &rows, &plan, a.value_size)?;
    let baseline = rows
        .iter()
        .find(|x| x.base.name == "wal")
        .map_or_else(|| rows[0].name.clone(), |x| x.name.clone());
    let (mut r, _) = crate::finish(s, &baseline);
    r.baseline = "wal at the row's checkpoint interval (rows without one: the largest)".into();
    set_ratios(&mut r.results, &rows, "wal");
    print!("{}", fig6_table(&r, &rows, ops, a.warmup));
    if let Some(p) = &a.json {
        crate::write_json(&r, p)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn one_op_plan_keeps_the_table_size_and_every_op_changes_it() {
        let p = fig6_plan(2000, 1000, Fig6Ops::Alternate, 7);
        assert_eq!(p.preload.len(), 2000);
        assert_eq!(p.txns.len(), 1000);
        let mut live: HashSet<i64> = p.preload.iter().copied().collect();
        assert_eq!(live.len(), 2000, "distinct preload keys");
        let mut ever = live.clone();
        for (t, ops) in p.txns.iter().enumerate() {
            assert_eq!(ops.len(), 1);
            let (op, k) = ops[0];
            assert!(k > 0);
            match op {
                Op::Insert => {
                    assert_eq!(t % 2, 0);
                    assert!(ever.insert(k), "insert of a key never used: {k}");
                    live.insert(k);
                }
                Op::Delete => {
                    assert_eq!(t % 2, 1);
                    assert!(live.remove(&k), "delete of an existing key: {k}");
                }
                Op::Update => panic!("no updates in fig6"),
            }
            assert!((2000..=2001).contains(&live.len()), "{}", live.len());
        }
        assert_eq!(live.len(), 2000);
        assert_eq!(
            p,
            fig6_plan(2000, 1000, Fig6Ops::Alternate, 7),
            "deterministic"
        );
        assert_ne!(p, fig6_plan(2000, 1000, Fig6Ops::Alternate, 8));
    }

    #[test]
    fn pair_plan_inserts_and_deletes_in_each_txn() {
        let p = fig6_plan(50, 200, Fig6Ops::Pair, 1);
        let mut live: HashSet<i64> = p.preload.iter().copied().collect();
        for ops in &p.txns {
            assert_eq!(ops.len(), 2);
            assert_eq!(ops[0].0, Op::Insert);
            assert_eq!(ops[1].0, Op::Delete);
            assert!(live.remove(&ops[1].1), "victim existed before the txn");
            assert!(live.insert(ops[0].1));
        }
        assert_eq!(live.len(), 50);
    }

    #[test]
    fn insert_plan_grows_the_table_from_empty() {
        let p = fig6_plan(0, 300, Fig6Ops::Inserts, 2);
        assert!(p.preload.is_empty());
        let mut live = HashSet::new();
        for ops in &p.txns {
            assert_eq!(ops.len(), 1);
            assert_eq!(ops[0].0, Op::Insert);
            assert!(live.insert(ops[0].1), "a new key every time");
        }
        assert_eq!(live.len(), 300);
    }

    #[test]
    fn space_plan_updates_existing_keys() {
        let (pre, ups) = space_plan(100, 1000, 3);
        let set: HashSet<i64> = pre.iter().copied().collect();
        assert_eq!(set.len(), 100);
        assert_eq!(ups.len(), 1000);
        assert!(ups.iter().all(|k| set.contains(k)));
        let distinct: HashSet<i64> = ups.iter().copied().collect();
        assert!(
            distinct.len() > 90,
            "spread over the table: {}",
            distinct.len()
        );
    }

    #[test]
    fn wal_rows_per_interval() {
        let cs = contender::select(&[
            "ls-mvbt".into(),
            "wal".into(),
            "sqlite-wal-r".into(),
            "dhl-cc".into(),
        ])
        .unwrap();
        let rows = fig6_rows(&cs, &[63, 1000]);
        let names: Vec<&str> = rows.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "ls-mvbt",
                "wal/cp63",
                "wal/cp1000",
                "sqlite-wal-r/cp63",
                "sqlite-wal-r/cp1000",
                "dhl-cc"
            ]
        );
        assert_eq!(rows[1].checkpoint, Some(63));
        assert_eq!(rows[0].checkpoint, None);
    }

    /// The interval reaches the engine's Config, and its checkpoints happen there: the
    /// log never holds more than the interval, and the commits report them.
    #[test]
    fn engine_checkpoint_interval_reaches_the_config() {
        let cs = contender::select(&["wal".into()]).unwrap();
        let row = &fig6_rows(&cs, &[5])[0];
        let dir = tempfile::tempdir().unwrap();
        let stats = Arc::new(IoStats::new());
        let Kind::Engine { mode, tweak } = row.base.kind else {
            panic!("wal is an engine row")
        };
        let vfs: Arc<dyn Vfs> = Arc::new(OsVfs::new());
        let config = EngineStore::config(mode, tweak, vfs).wal_autocheckpoint(5);
        let e = EngineStore::open_config(dir.path(), config).unwrap();
        assert_eq!(e.database().config().journal.wal_autocheckpoint, 5);
        Box::new(e).close().unwrap();
        let mut st = row.open(dir.path(), &stats).unwrap();
        let v = mobibench_value(100, false);
        let mut checkpoints = 0;
        for k in 1..=40 {
            st.txn_ops(&[(Op::Insert, k)], &v).unwrap();
            let w = st
                .last_commit()
                .expect("a WAL commit reports its log effect");
            assert!(st.log_frames().unwrap() < 5);
            if w.checkpointed {
                checkpoints += 1;
                assert_eq!(w.frames, None);
            } else {
                assert!(w.frames.unwrap() >= 1);
            }
        }
        assert!(checkpoints >= 5, "{checkpoints}");
        st.close().unwrap();
    }

    /// SQLite: the pragma is set, and the timed hook checkpoints at that interval.
    #[test]
    fn sqlite_checkpoint_interval_reaches_the_pragma() {
        let dir = tempfile::tempdir().unwrap();
        let mut st = SqliteStore::open_checkpointed(dir.path(), SqliteFlavor::WalApps, 7).unwrap();
        assert_eq!(st.checkpoint_interval(), Some(7));
        let v = mobibench_value(100, false);
        let (mut checkpoints, mut frames) = (0, 0);
        for k in 1..=50 {
            st.txn_ops(&[(Op::Insert, k)], &v).unwrap();
            let w = st.last_commit().unwrap();
            // SQLite's rule: a checkpoint exactly when the log has reached the interval.
            assert_eq!(w.checkpointed, st.log_frames().unwrap() >= 7, "commit {k}");
            if w.checkpointed {
                checkpoints += 1;
                assert!(w.checkpoint_nanos.is_some());
            }
            frames += w.frames.unwrap();
        }
        assert!(checkpoints >= 3, "{checkpoints}");
        assert!(frames >= 50, "each commit appends a frame: {frames}");
        st.checkpoint().unwrap();
        Box::new(st).close().unwrap();
        assert!(SqliteStore::open_checkpointed(dir.path(), SqliteFlavor::Delete, 7).is_err());
    }

    #[test]
    fn wal_summary_charges_checkpoints() {
        let ms = Duration::from_millis;
        let plain = |f| {
            Some(WalCommit {
                frames: Some(f),
                checkpointed: false,
                checkpoint_nanos: None,
            })
        };
        let cp = Some(WalCommit {
            frames: None,
            checkpointed: true,
            checkpoint_nanos: None,
        });
        let commits = vec![
            (ms(1), plain(2)),
            (ms(1), plain(4)),
            (ms(5), cp),
            (ms(1), plain(3)),
        ];
        let (share, frames) = wal_summary(&commits, ms(2), ms(10));
        // (5 - 1) + 2 of 10 ms.
        assert!((share.unwrap() - 0.6).abs() < 1e-9, "{share:?}");
        assert_eq!(frames, Some(3.0));
        let timed = Some(WalCommit {
            frames: Some(1),
            checkpointed: true,
            checkpoint_nanos: Some(3_000_000),
        });
        let (share, _) = wal_summary(&[(ms(4), timed), (ms(1), plain(1))], ms(0), ms(5));
        assert!((share.unwrap() - 0.6).abs() < 1e-9);
        assert_eq!(wal_summary(&[(ms(1), None)], ms(0), ms(1)), (None, None));
    }

    #[test]
    fn space_sizes_read_the_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("test.db"), vec![0u8; 8192]).unwrap();
        std::fs::write(dir.path().join("test.db-wal"), vec![0u8; 100]).unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        assert_eq!(dir_sizes(dir.path()).unwrap(), (8192, 100));
    }

    /// The space trial's rows for two real stores in a plain directory.
    #[test]
    fn space_rows_for_real_stores() {
        let lab = crate::lab::Lab::dir(None).unwrap();
        let mut s = Session::new(lab, 1, 2, std::path::PathBuf::from("/nonexistent"));
        let cs = contender::select(&["ls-mvbt".into(), "wal".into()]).unwrap();
        let rows = run_space(&mut s, &cs, 200, 300, 100, 1).unwrap();
        assert_eq!(rows.len(), 2);
        for r in &rows {
            assert!(r.db_bytes >= 4096, "{r:?}");
            assert_eq!(r.total_bytes, r.db_bytes + r.side_bytes);
            assert!(r.closed_bytes > 0);
            let (pages, free) = (r.page_count.unwrap(), r.free_pages.unwrap());
            // The file is grown in 64-page chunks past the pages the database uses.
            assert!(
                u64::from(pages) * 4096 <= r.db_after_checkpoint_bytes,
                "{r:?}"
            );
            assert!(u64::from(pages) * 4096 + 64 * 4096 > r.db_after_checkpoint_bytes);
            assert!(free < pages, "{r:?}");
        }
        let wal = &rows[1];
        assert!(
            wal.side_bytes > 0,
            "the WAL holds frames before the checkpoint"
        );
        assert_eq!(wal.ratio_to_reference, Some(1.0));
        assert!(rows[0].ratio_to_reference.is_some());
    }
}
