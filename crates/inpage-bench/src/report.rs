//! Results: per-round samples, their medians, the JSON report and the text table.
//!
//! Invariants:
//! - The JSON shape is a contract with other tools (BENCHMARKS.md, plots): field names
//!   and nesting are exactly those of `Report` / `ResultRow`, nothing is added or
//!   renamed silently. Unknown fields are rejected when reading one back.
//! - A per-transaction number is the median over rounds of the per-round values; `null`
//!   means "not measurable in this lab or for this contender", never zero.
//! - Ratios compare medians measured in the same run (same machine state, interleaved),
//!   never against stored numbers. A ratio is `null` only when the baseline has no row
//!   with the same workload, op and transaction size (e.g. the floor workload, or
//!   recovery with a baseline that cannot crash).
//! - Floats written are finite (serde_json would turn NaN into null and break the shape).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

/// The whole report (`--json`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Report {
    /// "ext4" or "none".
    pub lab: String,
    pub rounds: u32,
    pub baseline: String,
    /// The device profile of the modeled columns (`--device`; see `device`).
    #[serde(default)]
    pub device_profile: String,
    /// What the `model_*` fields are (they are computed, not measured).
    #[serde(default)]
    pub model_note: String,
    /// How the SQLite peer was built.
    #[serde(default)]
    pub sqlite: SqliteBuild,
    pub results: Vec<ResultRow>,
    /// Contenders that cannot take part in a section, and why ("n/a" in the table).
    #[serde(default)]
    pub not_applicable: Vec<NotApplicable>,
    /// What a section says about its rows beyond the columns (e.g. a trace's size and
    /// that every contender's outcomes agreed).
    #[serde(default)]
    pub notes: Vec<String>,
}

/// A contender that cannot take part in one section of a run, and why: shown as "n/a"
/// with the reason instead of rows (it is not an error).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NotApplicable {
    /// The section's workload name (e.g. `recovery-crash`).
    pub workload: String,
    pub contender: String,
    pub reason: String,
}

/// The bundled SQLite the peers run on: version, the extra compiler flags the project's
/// build configuration passed (`LIBSQLITE3_FLAGS`, see `.cargo/config.toml`), and
/// `PRAGMA compile_options` (which lists `SQLITE_*` options only, not `HAVE_FDATASYNC`;
/// hence the flags field).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SqliteBuild {
    pub version: String,
    pub build_flags: String,
    pub compile_options: Vec<String>,
}

/// The model note written into every report.
pub fn model_note(profile: &str) -> String {
    format!(
        "model_* fields are MODELED, not measured: device profile '{profile}' applied to the \
         row's exact device counters (data-carrying write requests, KiB written, flushes, read \
         requests, KiB read; ext4 lab loop devices) plus the measured process CPU time per \
         transaction; null where the lab has no device counters (lab 'none')"
    )
}

/// Time split of one transaction, in microseconds (median over rounds).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Latency {
    pub compute: f64,
    pub write: f64,
    pub sync: f64,
}

/// Commit latency of one contender on one workload point, µs: the wall time of each
/// measured transaction (every thread's pooled), each percentile the median over rounds
/// of that round's. A round of fewer than 1,000 transactions has its slowest as p99.9.
/// Measured, not modeled: a checkpoint that runs inside a commit shows here.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommitLatency {
    pub p50: f64,
    pub p99: f64,
    pub p999: f64,
}

impl CommitLatency {
    /// The percentiles of `us` (nearest rank); None for no transactions.
    pub fn of(us: &[f64]) -> Option<CommitLatency> {
        let mut s: Vec<f64> = us.iter().copied().filter(|x| x.is_finite()).collect();
        if s.is_empty() {
            return None;
        }
        s.sort_by(f64::total_cmp);
        let rank = |q: f64| s[((q * s.len() as f64).ceil() as usize).clamp(1, s.len()) - 1];
        Some(CommitLatency {
            p50: rank(0.50),
            p99: rank(0.99),
            p999: rank(0.999),
        })
    }

    /// Each percentile's median over `rounds`; None unless every round has them.
    fn median_of(rounds: &[Option<CommitLatency>]) -> Option<CommitLatency> {
        let all: Option<Vec<CommitLatency>> = rounds.iter().copied().collect();
        let all = all.filter(|v| !v.is_empty())?;
        let m = |f: fn(&CommitLatency) -> f64| median(&all.iter().map(f).collect::<Vec<_>>());
        Some(CommitLatency {
            p50: m(|c| c.p50)?,
            p99: m(|c| c.p99)?,
            p999: m(|c| c.p999)?,
        })
    }
}

/// One contender on one workload point.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResultRow {
    pub contender: String,
    /// "mobibench", "recovery" (open after a crash, cold page cache), "recovery-warm",
    /// "reopen" (open after a clean close, cold page cache), "reopen-warm" or "floor".
    pub workload: String,
    /// Mobibench op, "insert" for recovery, "overwrite"/"append" for the floor.
    pub op: String,
    pub ops_per_txn: u32,
    /// Transactions per round (all threads together).
    pub txns: u64,
    pub tx_per_s_median: f64,
    pub tx_per_s_rounds: Vec<f64>,
    pub ratio_to_baseline: Option<f64>,
    pub data_kib_per_txn: Option<f64>,
    pub journal_kib_per_txn: Option<f64>,
    pub flushes_per_txn: Option<f64>,
    pub write_calls_per_txn: Option<f64>,
    /// Of `write_calls_per_txn`, the writes whose offset or length is not a multiple of
    /// 4 KiB (engine contenders only: counted by the accounting VFS).
    #[serde(default)]
    pub unaligned_writes_per_txn: Option<f64>,
    pub sync_calls_per_txn: Option<f64>,
    pub latency_us: Option<Latency>,
    /// Commit latency percentiles (transaction benches: Mobibench and the floor).
    #[serde(default)]
    pub commit_latency_us: Option<CommitLatency>,
    pub recovery_ms_median: Option<f64>,
    /// Device write requests that carry data, per transaction (model input; ext4 lab).
    #[serde(default)]
    pub write_reqs_per_txn: Option<f64>,
    /// Device read requests and KiB read per transaction (model input; ext4 lab).
    #[serde(default)]
    pub read_reqs_per_txn: Option<f64>,
    #[serde(default)]
    pub read_kib_per_txn: Option<f64>,
    /// Measured process CPU time per transaction (user + system), µs.
    #[serde(default)]
    pub cpu_us_per_txn: Option<f64>,
    /// The same, user time only (`getrusage`), µs.
    #[serde(default)]
    pub user_us_per_txn: Option<f64>,
    /// The same, kernel time only, µs.
    #[serde(default)]
    pub sys_us_per_txn: Option<f64>,
    /// MODELED: profile applied to the device counters, plus `cpu_us_per_txn` (median over
    /// rounds of the per-round model).
    #[serde(default)]
    pub model_us_per_txn: Option<f64>,
    /// MODELED: 1e6 / model µs, median over rounds, and per round.
    #[serde(default)]
    pub model_tx_per_s: Option<f64>,
    #[serde(default)]
    pub model_tx_per_s_rounds: Vec<f64>,
    /// MODELED: `model_tx_per_s` ÷ the baseline's.
    #[serde(default)]
    pub model_ratio_to_baseline: Option<f64>,
    /// Recovery and reopen rows: records in the table (the size axis).
    #[serde(default)]
    pub records: Option<u64>,
    /// Recovery and reopen rows: time to build the table (bulk load, then a clean close),
    /// ms; not part of any measured window.
    #[serde(default)]
    pub build_ms: Option<f64>,
    /// KiB passed through read syscalls (`/proc/self/io` rchar: page cache hits count
    /// too) per transaction; for recovery and reopen rows, during the timed open.
    #[serde(default)]
    pub read_call_kib_per_txn: Option<f64>,
    /// Recovery and reopen rows: the open alone (until the handle is returned), median ms.
    #[serde(default)]
    pub open_ms_median: Option<f64>,
    /// Recovery and reopen rows: the first write transaction after the open (one-row
    /// update), median ms.
    #[serde(default)]
    pub first_write_ms_median: Option<f64>,
    /// `bench mvbt`: the WAL checkpoint interval (pages) the row ran with; absent for the
    /// rows of modes without one and in every other bench.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<u32>,
    /// `bench mvbt`: the share of the measured time spent checkpointing (the automatic
    /// checkpoints' excess over a plain commit, plus the checkpoint-on-close), median.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_share: Option<f64>,
    /// `bench mvbt`: pages a commit writes, median over rounds. WAL rows (engine and
    /// SQLite): the mean frames appended by the commits that ran no checkpoint; engine
    /// modes writing pages in place: page write calls per transaction (one span of a
    /// page each).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pages_dirtied_per_txn: Option<f64>,
}

/// What one round of one contender on one workload point measured.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Sample {
    pub tx_per_s: f64,
    pub data_kib: Option<f64>,
    pub journal_kib: Option<f64>,
    /// Device write requests per transaction (ext4 lab; table only).
    pub dev_writes: Option<f64>,
    pub flushes: Option<f64>,
    pub write_calls: Option<f64>,
    /// Write calls not 4 KiB-aligned in offset and length, per transaction.
    pub unaligned_writes: Option<f64>,
    pub sync_calls: Option<f64>,
    pub latency: Option<Latency>,
    /// Commit latency percentiles of the round.
    pub commit_latency: Option<CommitLatency>,
    pub recovery_ms: Option<f64>,
    /// Data-carrying device write requests, read requests and KiB read (ext4 lab).
    pub write_reqs: Option<f64>,
    pub read_reqs: Option<f64>,
    pub read_kib: Option<f64>,
    /// Process CPU time per transaction, µs.
    pub cpu_us: Option<f64>,
    /// Its user and kernel parts, µs.
    pub user_us: Option<f64>,
    pub sys_us: Option<f64>,
    /// Modeled time per transaction, µs (device profile + `cpu_us`).
    pub model_us: Option<f64>,
    /// KiB through read syscalls per transaction (`/proc/self/io` rchar).
    pub read_call_kib: Option<f64>,
    /// Recovery and reopen trials: the open alone, ms.
    pub open_ms: Option<f64>,
    /// Recovery and reopen trials: the first write transaction after the open, ms.
    pub first_write_ms: Option<f64>,
    /// `bench mvbt`: share of the window spent checkpointing a WAL.
    pub checkpoint_share: Option<f64>,
    /// `bench mvbt`: pages a commit writes (see `ResultRow::pages_dirtied_per_txn`).
    pub pages_dirtied: Option<f64>,
}

/// Identifies a workload point across contenders.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Point {
    /// Position of the workload in the run (keeps report order = run order).
    pub order: u32,
    pub workload: String,
    pub op: String,
    pub ops_per_txn: u32,
    /// Records in the table (recovery and reopen points).
    pub records: Option<u64>,
}

/// Median (mean of the middle two for an even count); `None` for no values.
/// The `q` quantile of `sorted` (nearest rank; NaN when empty).
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() as f64 - 1.0) * q).round() as usize]
}

pub fn median(v: &[f64]) -> Option<f64> {
    let mut s: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    if s.is_empty() {
        return None;
    }
    s.sort_by(f64::total_cmp);
    let n = s.len();
    Some(if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    })
}

/// Modeled tx/s of each round that has a model.
fn model_rounds(s: &[Sample]) -> Vec<f64> {
    s.iter()
        .filter_map(|x| x.model_us)
        .filter(|us| *us > 0.0)
        .map(|us| 1e6 / us)
        .collect()
}

fn median_opt(v: impl Iterator<Item = Option<f64>>) -> Option<f64> {
    let vals: Vec<f64> = v.flatten().collect();
    median(&vals)
}

/// Samples collected during a run, keyed by point and contender (in first-seen order).
#[derive(Debug, Default)]
pub struct Collector {
    samples: BTreeMap<Point, Vec<(String, Vec<Sample>, u64)>>,
    /// Build time (ms) of each contender's table, by (contender, records).
    builds: BTreeMap<(String, u64), f64>,
    /// What a section says about its rows beyond the columns (`Report::notes`).
    pub notes: Vec<String>,
    /// Contenders a section could not run, with the reason.
    pub not_applicable: Vec<NotApplicable>,
}

impl Collector {
    pub fn add(&mut self, p: Point, contender: &str, txns: u64, s: Sample) {
        let e = self.samples.entry(p).or_default();
        match e.iter_mut().find(|(c, _, _)| c == contender) {
            Some((_, v, _)) => v.push(s),
            None => e.push((contender.to_string(), vec![s], txns)),
        }
    }

    /// Record that `contender` cannot take part in `workload`, and why (once).
    pub fn add_na(&mut self, workload: &str, contender: &str, reason: &str) {
        let na = NotApplicable {
            workload: workload.to_string(),
            contender: contender.to_string(),
            reason: reason.to_string(),
        };
        if !self.not_applicable.contains(&na) {
            self.not_applicable.push(na);
        }
    }

    /// Record how long building `contender`'s table of `records` records took.
    pub fn add_build(&mut self, contender: &str, records: u64, ms: f64) {
        self.builds.insert((contender.to_string(), records), ms);
    }

    /// Medians and ratios, in run order; also the device write requests per row (table).
    pub fn finish(&self, baseline: &str) -> (Vec<ResultRow>, Vec<Option<f64>>) {
        let mut rows = Vec::new();
        let mut dev = Vec::new();
        for (p, list) in &self.samples {
            let med = |c: &str| {
                list.iter()
                    .find(|(n, _, _)| n == c)
                    .and_then(|(_, s, _)| median(&s.iter().map(|x| x.tx_per_s).collect::<Vec<_>>()))
            };
            let base = med(baseline);
            let model_med = |c: &str| {
                list.iter()
                    .find(|(n, _, _)| n == c)
                    .and_then(|(_, s, _)| median(&model_rounds(s)))
            };
            let model_base = model_med(baseline);
            for (name, s, txns) in list {
                let rounds: Vec<f64> = s.iter().map(|x| x.tx_per_s).collect();
                let m = median(&rounds).unwrap_or(0.0);
                let lat = if s.iter().all(|x| x.latency.is_some()) && !s.is_empty() {
                    let l: Vec<Latency> = s.iter().filter_map(|x| x.latency).collect();
                    Some(Latency {
                        compute: median(&l.iter().map(|x| x.compute).collect::<Vec<_>>())
                            .unwrap_or(0.0),
                        write: median(&l.iter().map(|x| x.write).collect::<Vec<_>>())
                            .unwrap_or(0.0),
                        sync: median(&l.iter().map(|x| x.sync).collect::<Vec<_>>()).unwrap_or(0.0),
                    })
                } else {
                    None
                };
                rows.push(ResultRow {
                    contender: name.clone(),
                    workload: p.workload.clone(),
                    op: p.op.clone(),
                    ops_per_txn: p.ops_per_txn,
                    txns: *txns,
                    tx_per_s_median: m,
                    tx_per_s_rounds: rounds,
                    ratio_to_baseline: base.filter(|b| *b > 0.0).map(|b| m / b),
                    data_kib_per_txn: median_opt(s.iter().map(|x| x.data_kib)),
                    journal_kib_per_txn: median_opt(s.iter().map(|x| x.journal_kib)),
                    flushes_per_txn: median_opt(s.iter().map(|x| x.flushes)),
                    write_calls_per_txn: median_opt(s.iter().map(|x| x.write_calls)),
                    unaligned_writes_per_txn: median_opt(s.iter().map(|x| x.unaligned_writes)),
                    sync_calls_per_txn: median_opt(s.iter().map(|x| x.sync_calls)),
                    latency_us: lat,
                    commit_latency_us: CommitLatency::median_of(
                        &s.iter().map(|x| x.commit_latency).collect::<Vec<_>>(),
                    ),
                    recovery_ms_median: median_opt(s.iter().map(|x| x.recovery_ms)),
                    write_reqs_per_txn: median_opt(s.iter().map(|x| x.write_reqs)),
                    read_reqs_per_txn: median_opt(s.iter().map(|x| x.read_reqs)),
                    read_kib_per_txn: median_opt(s.iter().map(|x| x.read_kib)),
                    cpu_us_per_txn: median_opt(s.iter().map(|x| x.cpu_us)),
                    user_us_per_txn: median_opt(s.iter().map(|x| x.user_us)),
                    sys_us_per_txn: median_opt(s.iter().map(|x| x.sys_us)),
                    model_us_per_txn: median_opt(s.iter().map(|x| x.model_us)),
                    model_tx_per_s: median(&model_rounds(s)),
                    model_tx_per_s_rounds: model_rounds(s),
                    model_ratio_to_baseline: match (median(&model_rounds(s)), model_base) {
                        (Some(m), Some(b)) if b > 0.0 => Some(m / b),
                        _ => None,
                    },
                    records: p.records,
                    build_ms: p
                        .records
                        .and_then(|n| self.builds.get(&(name.clone(), n)).copied()),
                    read_call_kib_per_txn: median_opt(s.iter().map(|x| x.read_call_kib)),
                    open_ms_median: median_opt(s.iter().map(|x| x.open_ms)),
                    first_write_ms_median: median_opt(s.iter().map(|x| x.first_write_ms)),
                    checkpoint: None,
                    checkpoint_share: median_opt(s.iter().map(|x| x.checkpoint_share)),
                    pages_dirtied_per_txn: median_opt(s.iter().map(|x| x.pages_dirtied)),
                });
                dev.push(median_opt(s.iter().map(|x| x.dev_writes)));
            }
        }
        (rows, dev)
    }
}

fn f(v: Option<f64>, prec: usize) -> String {
    match v {
        Some(x) => format!("{x:.prec$}"),
        None => "-".into(),
    }
}

/// The "tx/s" cell. A recovery row times one open, not transactions (its `tx_per_s` is
/// 1000 / ms, kept in the JSON so ratios stay "higher is faster"), so the table shows the
/// recovery time there instead, marked with its unit.
fn rate_cell(x: &ResultRow) -> String {
    match x.recovery_ms_median {
        Some(ms) if x.workload.starts_with("recovery") => format!("{ms:.2} ms"),
        _ => format!("{:.1}", x.tx_per_s_median),
    }
}

/// The text table printed on stdout.
pub fn table(r: &Report, dev_writes: &[Option<f64>]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "lab: {}  rounds: {}  baseline: {}  (per-transaction numbers are medians over rounds{})",
        r.lab,
        r.rounds,
        r.baseline,
        if r.lab == "none" {
            "; lab 'none': no device counters, KiB = bytes passed to write calls"
        } else {
            "; KiB/writes/flushes = loop-device counters"
        }
    );
    if !r.sqlite.version.is_empty() {
        let _ = writeln!(
            out,
            "sqlite {} built with LIBSQLITE3_FLAGS='{}'; compile_options: {}",
            r.sqlite.version,
            r.sqlite.build_flags,
            r.sqlite.compile_options.join(" ")
        );
    }
    if !r.device_profile.is_empty() {
        let _ = writeln!(
            out,
            "columns M:us, M:tx/s, M:ratio are MODELED (device profile '{}' applied to the \
             device counters + measured process CPU 'pcpu_us'{}); all other columns are measured",
            r.device_profile,
            if r.lab == "none" {
                "; lab 'none' has no device counters, so they are empty"
            } else {
                ""
            }
        );
    }
    if r.results
        .iter()
        .any(|x| x.workload.starts_with("recovery") && x.recovery_ms_median.is_some())
    {
        let _ = writeln!(
            out,
            "recovery rows: the tx/s column shows the recovery time (reopen + first access, \
             ms); their ratio is still the baseline's time / this one's (higher is faster)"
        );
    }
    let head = [
        "workload",
        "op",
        "k",
        "contender",
        "tx/s",
        "ratio",
        "dataKiB",
        "jrnlKiB",
        "devWr",
        "flush",
        "wcalls",
        "unal4k",
        "syncs",
        "cpu_us",
        "wr_us",
        "sync_us",
        "recov_ms",
        "pcpu_us",
        "usr_us",
        "sys_us",
        "M:us",
        "M:tx/s",
        "M:ratio",
        "p50_us",
        "p99_us",
        "p999_us",
    ];
    let mut cells: Vec<Vec<String>> = vec![head.iter().map(|s| s.to_string()).collect()];
    for (i, x) in r.results.iter().enumerate() {
        cells.push(vec![
            x.workload.clone(),
            x.op.clone(),
            x.ops_per_txn.to_string(),
            x.contender.clone(),
            rate_cell(x),
            f(x.ratio_to_baseline, 2),
            f(x.data_kib_per_txn, 1),
            f(x.journal_kib_per_txn, 1),
            f(dev_writes.get(i).copied().flatten(), 1),
            f(x.flushes_per_txn, 2),
            f(x.write_calls_per_txn, 1),
            f(x.unaligned_writes_per_txn, 1),
            f(x.sync_calls_per_txn, 1),
            f(x.latency_us.map(|l| l.compute), 0),
            f(x.latency_us.map(|l| l.write), 0),
            f(x.latency_us.map(|l| l.sync), 0),
            f(x.recovery_ms_median, 2),
            f(x.cpu_us_per_txn, 0),
            f(x.user_us_per_txn, 0),
            f(x.sys_us_per_txn, 0),
            f(x.model_us_per_txn, 0),
            f(x.model_tx_per_s, 1),
            f(x.model_ratio_to_baseline, 2),
            f(x.commit_latency_us.map(|l| l.p50), 0),
            f(x.commit_latency_us.map(|l| l.p99), 0),
            f(x.commit_latency_us.map(|l| l.p999), 0),
        ]);
    }
    let ncol = head.len();
    let w: Vec<usize> = (0..ncol)
        .map(|c| cells.iter().map(|r| r[c].len()).max().unwrap_or(0))
        .collect();
    let mut prev: Option<(String, String, String)> = None;
    for (i, row) in cells.iter().enumerate() {
        // A blank line between workload points keeps contenders of one point together.
        let key = (row[0].clone(), row[1].clone(), row[2].clone());
        if i > 1 && prev.as_ref() != Some(&key) {
            out.push('\n');
        }
        prev = Some(key);
        let _ = writeln!(out, "{}", table_line(row, &w, 4));
    }
    if !r.not_applicable.is_empty() {
        let _ = writeln!(out, "\nn/a (contenders a section does not run, and why):");
        for na in &r.not_applicable {
            let _ = writeln!(
                out,
                "  {:<16} {:<20} n/a: {}",
                na.workload, na.contender, na.reason
            );
        }
    }
    for n in &r.notes {
        let _ = writeln!(out, "note: {n}");
    }
    out
}

/// The main job's headline, readable in ten seconds: the default mode's one-row
/// Mobibench transactions against SQLite as apps configure it (`sqlite-wal-r`: WAL,
/// fdatasync, the apps' checkpoint and size settings, warmed up) and against the device
/// floor — throughput ratios (modeled on the run's device profile where the lab counts
/// the device, else measured), device KiB and flushes per transaction — and where the
/// full report is.
pub fn headline(r: &Report, default_mode: &str, out: &std::path::Path) -> String {
    const PEER: &str = "sqlite-wal-r";
    const FLOOR: &str = "floor";
    let modeled = r.lab != "none";
    let row = |c: &str, op: &str| {
        r.results.iter().find(|x| {
            x.workload == "mobibench" && x.op == op && x.ops_per_txn == 1 && x.contender == c
        })
    };
    let rate = |x: &ResultRow| {
        if modeled {
            x.model_tx_per_s
        } else {
            Some(x.tx_per_s_median)
        }
    };
    let kib = |x: &ResultRow| match (x.data_kib_per_txn, x.journal_kib_per_txn) {
        (Some(d), j) => Some(d + j.unwrap_or(0.0)),
        _ => None,
    };
    let num = |v: Option<f64>, d: usize| v.map_or("-".to_string(), |v| format!("{v:.d$}"));
    let mut h = String::new();
    let _ =
        writeln!(
        h,
        "Headline: one-row transactions (Mobibench), {default_mode} (inpage's default) against \
         SQLite's WAL as apps configure it ({PEER}: fdatasync, warmed up) and the device floor \
         (one 4 KiB overwrite + fdatasync); lab {}, {}:",
        r.lab,
        if modeled {
            format!("throughput modeled on device profile '{}'", r.device_profile)
        } else {
            "measured throughput (no device counters)".to_string()
        }
    );
    for op in ["insert", "update", "delete"] {
        let (Some(d), p, f) = (row(default_mode, op), row(PEER, op), row(FLOOR, op)) else {
            let _ = writeln!(h, "  {op:<7} no {default_mode} row");
            continue;
        };
        let ratio = |o: Option<&ResultRow>| match (rate(d), o.and_then(rate)) {
            (Some(a), Some(b)) if b > 0.0 => format!("{:.2}x", a / b),
            _ => "-".into(),
        };
        let _ = writeln!(
            h,
            "  {op:<7} {} {PEER}, {} the floor; {} KiB and {} flushes per transaction \
             ({PEER}: {} KiB, {} flushes)",
            ratio(p),
            ratio(f),
            num(kib(d), 1),
            num(d.flushes_per_txn, 2),
            num(p.and_then(kib), 1),
            num(p.and_then(|x| x.flushes_per_txn), 2),
        );
    }
    // The app-like traces (`bench trace --synthetic`), where the run has them.
    let sql = format!("sql-{default_mode}");
    let traces: Vec<&ResultRow> = r
        .results
        .iter()
        .filter(|x| x.workload == "trace" && x.contender == sql)
        .collect();
    if !traces.is_empty() {
        let _ = writeln!(
            h,
            "App-like SQL traces (synthetic, `bench trace`), {sql} against {PEER}, per write \
             transaction (reads between them included):"
        );
    }
    for d in traces {
        let p = r
            .results
            .iter()
            .find(|x| x.workload == "trace" && x.op == d.op && x.contender == PEER);
        let ratio = match (rate(d), p.and_then(rate)) {
            (Some(a), Some(b)) if b > 0.0 => format!("{:.2}x", a / b),
            _ => "-".into(),
        };
        let _ = writeln!(
            h,
            "  {:<9} {ratio} {PEER}; {} KiB, {} flushes, {} us CPU ({PEER}: {} KiB, {} flushes, \
             {} us CPU)",
            d.op,
            num(kib(d), 1),
            num(d.flushes_per_txn, 2),
            num(d.cpu_us_per_txn, 0),
            num(p.and_then(kib), 1),
            num(p.and_then(|x| x.flushes_per_txn), 2),
            num(p.and_then(|x| x.cpu_us_per_txn), 0),
        );
    }
    let _ = writeln!(
        h,
        "Full report: {} (table.txt, results.json, plots/)",
        out.join("index.html").display()
    );
    h
}

/// The size axis of recovery and reopen rows as pivots, one column per contender:
/// open time (median ms), KiB read during the open (through read calls; the data
/// device's KiB in brackets where the lab counts it), and the build time of each
/// table. Empty when no row has a table size.
pub fn size_table(r: &Report) -> String {
    let rows: Vec<&ResultRow> = r
        .results
        .iter()
        .filter(|x| x.records.is_some() && x.recovery_ms_median.is_some())
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    let mut names: Vec<String> = Vec::new();
    let mut keys: Vec<(String, u32, u64)> = Vec::new();
    for x in &rows {
        if !names.contains(&x.contender) {
            names.push(x.contender.clone());
        }
        let k = (x.workload.clone(), x.ops_per_txn, x.records.unwrap_or(0));
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    let find = |c: &str, k: &(String, u32, u64)| {
        rows.iter().copied().find(|x| {
            x.contender == c && x.workload == k.0 && x.ops_per_txn == k.1 && x.records == Some(k.2)
        })
    };
    let mut out = String::new();
    let pivot = |out: &mut String, what: &str, cell: &dyn Fn(&ResultRow) -> String| {
        let _ = writeln!(out, "\n{what}");
        let mut head = vec!["workload".to_string(), "k".into(), "records".into()];
        head.extend(names.iter().cloned());
        let mut cells = vec![head];
        for k in &keys {
            let mut line = vec![k.0.clone(), k.1.to_string(), k.2.to_string()];
            line.extend(
                names
                    .iter()
                    .map(|c| find(c, k).map(cell).unwrap_or_else(|| "-".into())),
            );
            cells.push(line);
        }
        write_cells(out, &cells);
    };
    // Each time, then its growth with size: over the same contender's at the smallest
    // table (same workload and interrupted size), the "does open time grow with the
    // file" check.
    type Metric = fn(&ResultRow) -> Option<f64>;
    let metrics: [(&str, &str, Metric); 2] = [
        (
            "open + first read, ms (median over rounds):",
            "open time / the same contender's at the smallest table:",
            |x| x.recovery_ms_median,
        ),
        (
            "open alone, ms (until the store's handle is returned; SQLite's includes the \
             connection's PRAGMAs and schema read, where its WAL recovery runs):",
            "open alone / the same contender's at the smallest table:",
            |x| x.open_ms_median,
        ),
    ];
    for (title, growth, metric) in metrics {
        pivot(&mut out, title, &|x| f(metric(x), 2));
        let smallest = |x: &ResultRow| {
            rows.iter()
                .copied()
                .filter(|y| {
                    y.contender == x.contender
                        && y.workload == x.workload
                        && y.ops_per_txn == x.ops_per_txn
                })
                .min_by_key(|y| y.records)
                .and_then(metric)
        };
        pivot(&mut out, growth, &|x| match (metric(x), smallest(x)) {
            (Some(m), Some(b)) if b > 0.0 => format!("{:.2}", m / b),
            _ => "-".into(),
        });
    }
    pivot(
        &mut out,
        "first write after the open (a one-row update committed right after the first \
         read; not part of the open times above), ms:",
        &|x| f(x.first_write_ms_median, 2),
    );
    pivot(
        &mut out,
        "KiB read during the open: read calls [data device]:",
        &|x| match x.read_kib_per_txn {
            Some(d) => format!("{} [{d:.0}]", f(x.read_call_kib_per_txn, 0)),
            None => f(x.read_call_kib_per_txn, 0),
        },
    );
    let _ = writeln!(
        out,
        "\nbuild (bulk load in 10,000-row transactions + clean close; not measured), s:"
    );
    let sizes: Vec<u64> = {
        let mut v: Vec<u64> = rows.iter().filter_map(|x| x.records).collect();
        v.sort_unstable();
        v.dedup();
        v
    };
    let mut cells = vec![{
        let mut h = vec!["records".to_string()];
        h.extend(names.iter().cloned());
        h
    }];
    for n in sizes {
        let mut line = vec![n.to_string()];
        for c in &names {
            let b = rows
                .iter()
                .find(|x| &x.contender == c && x.records == Some(n))
                .and_then(|x| x.build_ms);
            line.push(f(b.map(|ms| ms / 1000.0), 2));
        }
        cells.push(line);
    }
    write_cells(&mut out, &cells);
    out
}

/// One table line: the first `left` columns left-aligned (labels), the rest right-aligned
/// (numbers), each padded to its width in `w`, two spaces apart.
pub(crate) fn table_line(row: &[String], w: &[usize], left: usize) -> String {
    let line: Vec<String> = row
        .iter()
        .enumerate()
        .map(|(c, s)| {
            if c < left {
                format!("{s:<w$}", w = w[c])
            } else {
                format!("{s:>w$}", w = w[c])
            }
        })
        .collect();
    line.join("  ").trim_end().to_string()
}

/// Write rows of cells as aligned columns (each as wide as its widest cell).
fn write_cells(out: &mut String, cells: &[Vec<String>]) {
    let Some(first) = cells.first() else {
        return;
    };
    let w: Vec<usize> = (0..first.len())
        .map(|c| cells.iter().map(|r| r[c].len()).max().unwrap_or(0))
        .collect();
    for line in cells {
        let _ = writeln!(out, "{}", table_line(line, &w, 1));
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    fn row() -> ResultRow {
        ResultRow {
            contender: "sqlite-wal".into(),
            workload: "mobibench".into(),
            op: "insert".into(),
            ops_per_txn: 1,
            txns: 300,
            tx_per_s_median: 1234.5,
            tx_per_s_rounds: vec![1200.0, 1234.5, 1300.25],
            ratio_to_baseline: Some(1.0),
            data_kib_per_txn: Some(8.0),
            journal_kib_per_txn: Some(12.5),
            flushes_per_txn: Some(2.0),
            write_calls_per_txn: None,
            unaligned_writes_per_txn: None,
            sync_calls_per_txn: None,
            latency_us: Some(Latency {
                compute: 10.0,
                write: 20.0,
                sync: 300.0,
            }),
            commit_latency_us: Some(CommitLatency {
                p50: 300.0,
                p99: 900.0,
                p999: 2000.0,
            }),
            recovery_ms_median: None,
            write_reqs_per_txn: Some(3.0),
            read_reqs_per_txn: Some(0.0),
            read_kib_per_txn: Some(0.0),
            cpu_us_per_txn: Some(40.0),
            user_us_per_txn: None,
            sys_us_per_txn: None,
            model_us_per_txn: Some(2000.0),
            model_tx_per_s: Some(500.0),
            model_tx_per_s_rounds: vec![500.0, 499.0, 501.0],
            model_ratio_to_baseline: Some(1.0),
            records: None,
            build_ms: None,
            read_call_kib_per_txn: None,
            open_ms_median: None,
            first_write_ms_median: None,
            checkpoint: None,
            checkpoint_share: None,
            pages_dirtied_per_txn: None,
        }
    }

    /// Nearest-rank percentiles of one round, and their medians over rounds.
    #[test]
    fn commit_latency_percentiles() {
        let us: Vec<f64> = (1..=1000).map(f64::from).collect();
        let c = CommitLatency::of(&us).unwrap();
        assert_eq!((c.p50, c.p99, c.p999), (500.0, 990.0, 999.0));
        let few = CommitLatency::of(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((few.p50, few.p99, few.p999), (2.0, 3.0, 3.0));
        assert_eq!(CommitLatency::of(&[]), None);
        let rounds = [Some(c), Some(few), Some(c)];
        assert_eq!(CommitLatency::median_of(&rounds), Some(c));
        assert_eq!(CommitLatency::median_of(&[Some(c), None]), None);
    }

    #[test]
    fn json_shape_exact_and_round_trips() {
        let r = Report {
            lab: "ext4".into(),
            rounds: 3,
            baseline: "sqlite-wal".into(),
            device_profile: "emmc".into(),
            model_note: model_note("emmc"),
            sqlite: SqliteBuild {
                version: "3.50.0".into(),
                build_flags: "-DHAVE_FDATASYNC=1".into(),
                compile_options: vec!["THREADSAFE=1".into()],
            },
            results: vec![row()],
            not_applicable: Vec::new(),
            notes: Vec::new(),
        };
        let s = serde_json::to_string_pretty(&r).unwrap();
        let back: Report = serde_json::from_str(&s).unwrap();
        assert_eq!(back, r);
        let v: serde_json::Value = serde_json::from_str(&s).unwrap();
        let keys = |o: &serde_json::Value| {
            let mut k: Vec<String> = o.as_object().unwrap().keys().cloned().collect();
            k.sort();
            k
        };
        assert_eq!(
            keys(&v),
            [
                "baseline",
                "device_profile",
                "lab",
                "model_note",
                "not_applicable",
                "notes",
                "results",
                "rounds",
                "sqlite"
            ]
        );
        assert_eq!(
            keys(&v["sqlite"]),
            ["build_flags", "compile_options", "version"]
        );
        assert!(v["model_note"].as_str().unwrap().contains("MODELED"));
        let row = &v["results"][0];
        let mut want = vec![
            "contender",
            "workload",
            "op",
            "ops_per_txn",
            "txns",
            "tx_per_s_median",
            "tx_per_s_rounds",
            "ratio_to_baseline",
            "data_kib_per_txn",
            "journal_kib_per_txn",
            "flushes_per_txn",
            "write_calls_per_txn",
            "unaligned_writes_per_txn",
            "sync_calls_per_txn",
            "latency_us",
            "commit_latency_us",
            "recovery_ms_median",
            "write_reqs_per_txn",
            "read_reqs_per_txn",
            "read_kib_per_txn",
            "cpu_us_per_txn",
            "user_us_per_txn",
            "sys_us_per_txn",
            "model_us_per_txn",
            "model_tx_per_s",
            "model_tx_per_s_rounds",
            "model_ratio_to_baseline",
            "records",
            "build_ms",
            "read_call_kib_per_txn",
            "open_ms_median",
            "first_write_ms_median",
        ];
        want.sort();
        assert_eq!(keys(row), want);
        assert_eq!(keys(&row["latency_us"]), ["compute", "sync", "write"]);
        assert_eq!(keys(&row["commit_latency_us"]), ["p50", "p99", "p999"]);
        assert!(row["write_calls_per_txn"].is_null());
        assert!(row["ops_per_txn"].is_u64() && row["txns"].is_u64());
        assert!(row["tx_per_s_rounds"].is_array());
        // Unknown fields are refused, so a renamed field cannot slip through.
        let bad = s.replace("\"txns\"", "\"transactions\"");
        assert!(serde_json::from_str::<Report>(&bad).is_err());
    }

    #[test]
    fn medians_and_ratios() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
        let mut c = Collector::default();
        let p = Point {
            order: 0,
            workload: "mobibench".into(),
            op: "insert".into(),
            ops_per_txn: 1,
            records: None,
        };
        for (name, tps, model_us) in [
            ("a", 100.0, 1000.0),
            ("b", 50.0, 4000.0),
            ("a", 300.0, 1000.0),
            ("b", 60.0, 4000.0),
            ("a", 200.0, 1250.0),
            ("b", 70.0, 2000.0),
        ] {
            c.add(
                p.clone(),
                name,
                10,
                Sample {
                    tx_per_s: tps,
                    flushes: if name == "a" { Some(1.0) } else { None },
                    model_us: Some(model_us),
                    ..Sample::default()
                },
            );
        }
        let (rows, _) = c.finish("b");
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].contender, "a");
        assert_eq!(rows[0].tx_per_s_median, 200.0);
        assert_eq!(rows[0].tx_per_s_rounds, vec![100.0, 300.0, 200.0]);
        assert!((rows[0].ratio_to_baseline.unwrap() - 200.0 / 60.0).abs() < 1e-12);
        assert_eq!(rows[1].ratio_to_baseline, Some(1.0));
        assert_eq!(rows[0].flushes_per_txn, Some(1.0));
        assert_eq!(rows[1].flushes_per_txn, None);
        // Modeled: per-round 1e6/us, medians, ratio of modeled medians.
        assert_eq!(rows[0].model_tx_per_s_rounds, vec![1000.0, 1000.0, 800.0]);
        assert_eq!(rows[0].model_tx_per_s, Some(1000.0));
        assert_eq!(rows[1].model_tx_per_s, Some(250.0));
        assert_eq!(rows[0].model_ratio_to_baseline, Some(4.0));
        assert_eq!(rows[0].model_us_per_txn, Some(1000.0));
        let (rows, _) = c.finish("missing");
        assert_eq!(rows[0].ratio_to_baseline, None);
        let t = table(
            &Report {
                lab: "none".into(),
                rounds: 3,
                baseline: "b".into(),
                device_profile: "emmc".into(),
                model_note: String::new(),
                sqlite: SqliteBuild::default(),
                results: rows,
                not_applicable: Vec::new(),
                notes: Vec::new(),
            },
            &[],
        );
        assert!(t.contains("tx/s") && t.contains("200.0"), "{t}");
        assert!(t.contains("MODELED (device profile 'emmc'"), "{t}");
        assert!(t.contains("M:tx/s") && t.contains("1000.0"), "{t}");
    }

    #[test]
    fn recovery_rows_show_their_time_in_the_rate_column() {
        let mobi = row();
        let rec = ResultRow {
            workload: "recovery".into(),
            op: "insert".into(),
            tx_per_s_median: 80.0,
            recovery_ms_median: Some(12.5),
            ..row()
        };
        let warm = ResultRow {
            workload: "recovery-warm".into(),
            tx_per_s_median: 250.0,
            recovery_ms_median: Some(4.0),
            ..rec.clone()
        };
        assert_eq!(rate_cell(&mobi), "1234.5");
        assert_eq!(rate_cell(&rec), "12.50 ms");
        assert_eq!(rate_cell(&warm), "4.00 ms");
        let t = table(
            &Report {
                lab: "none".into(),
                rounds: 3,
                baseline: "sqlite-wal".into(),
                device_profile: String::new(),
                model_note: String::new(),
                sqlite: SqliteBuild::default(),
                results: vec![mobi, rec.clone(), warm],
                not_applicable: Vec::new(),
                notes: Vec::new(),
            },
            &[],
        );
        assert!(t.contains("12.50 ms") && t.contains("4.00 ms"), "{t}");
        assert!(t.contains("recovery rows: the tx/s column"), "{t}");
        assert!(!t.contains("80.0") && !t.contains("250.0"), "{t}");
        // The JSON keeps the rate (ratios stay "higher is faster").
        let j = serde_json::to_value(&rec).unwrap();
        assert_eq!(j["tx_per_s_median"], 80.0);
        assert_eq!(j["recovery_ms_median"], 12.5);
    }

    #[test]
    fn size_table_pivots_contenders_by_size() {
        let mut c = Collector::default();
        for (n, name, ms, dev) in [
            (1200u64, "dhl-cc", 2.0, Some(268.0)),
            (1200, "sqlite-wal", 1.0, Some(24.0)),
            (1_000_000, "dhl-cc", 90.0, None),
        ] {
            let p = Point {
                order: if n == 1200 { 1 } else { 2 },
                workload: "reopen".into(),
                op: "insert".into(),
                ops_per_txn: 0,
                records: Some(n),
            };
            c.add(
                p,
                name,
                1,
                Sample {
                    tx_per_s: 1000.0 / ms,
                    recovery_ms: Some(ms),
                    open_ms: Some(ms / 4.0),
                    first_write_ms: (name == "dhl-cc").then_some(ms * 10.0),
                    read_kib: dev,
                    read_call_kib: Some(dev.unwrap_or(5.0) + 1.0),
                    ..Sample::default()
                },
            );
            c.add_build(name, n, 1500.0);
        }
        let (rows, _) = c.finish("sqlite-wal");
        assert_eq!(rows[0].records, Some(1200));
        assert_eq!(rows[0].build_ms, Some(1500.0));
        assert_eq!(rows[0].read_call_kib_per_txn, Some(269.0));
        let r = Report {
            lab: "ext4".into(),
            rounds: 1,
            baseline: "sqlite-wal".into(),
            device_profile: String::new(),
            model_note: String::new(),
            sqlite: SqliteBuild::default(),
            results: rows,
            not_applicable: Vec::new(),
            notes: Vec::new(),
        };
        let t = size_table(&r);
        let line = |start: &str| {
            t.lines()
                .find(|l| l.starts_with(start))
                .unwrap_or_else(|| panic!("{start} in {t}"))
                .split_whitespace()
                .map(str::to_string)
                .collect::<Vec<_>>()
        };
        let head = line("workload");
        assert_eq!(head[3..], ["dhl-cc", "sqlite-wal"]);
        let ms: Vec<String> = t
            .lines()
            .filter(|l| l.starts_with("reopen"))
            .map(str::to_string)
            .collect();
        assert_eq!(ms.len(), 12, "two sizes in six pivots: {t}");
        assert!(ms[0].ends_with("2.00        1.00"), "{t}");
        assert!(
            ms[1].ends_with("90.00           -"),
            "missing cell is '-': {t}"
        );
        assert!(ms[2].ends_with("1.00        1.00"), "{t}");
        assert!(ms[3].ends_with("45.00           -"), "90 ms / 2 ms: {t}");
        // The open alone, its growth, and the first write after the open.
        assert!(ms[4].ends_with("0.50        0.25"), "{t}");
        assert!(ms[5].ends_with("22.50           -"), "{t}");
        assert!(
            ms[7].ends_with("45.00           -"),
            "22.5 ms / 0.5 ms: {t}"
        );
        assert!(ms[8].ends_with("20.00           -"), "{t}");
        assert!(ms[9].ends_with("900.00           -"), "{t}");
        assert!(
            ms[10].contains("269 [268]") && ms[10].ends_with("25 [24]"),
            "{t}"
        );
        assert!(ms[11].contains("6") && !ms[11].contains('['), "{t}");
        let builds = line("1000000");
        assert_eq!(builds[1..], ["1.50", "-"]);
        // Rows without a size: no size table.
        let mut plain = r.clone();
        plain.results.iter_mut().for_each(|x| x.records = None);
        assert_eq!(size_table(&plain), "");
    }
}
