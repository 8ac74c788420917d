//! `inpage bench nvlog`: the xLog paper's workloads (issue 18) — commit latency,
//! commits per second and write amplification of one-record transactions.
//!
//! - Records (`--sizes`, the paper's 100 B … 100 KiB): `txns` commits back to back, each
//!   inserting one record of the size, with sequential keys and, separately, random keys
//!   (`--keys`).
//! - Key-value puts (`--kv-txns`): commits each putting one record of a random size in
//!   100..=1600 bytes under a random key.
//!
//! Write amplification is what the device wrote (data and file-system journal KiB of the
//! ext4 lab) divided by the record bytes (key + value) committed. So that a mode which
//! defers writes cannot look cheaper by leaving them out, every trial ends with a
//! checkpoint (nvlog's pending batch, a WAL's log moved into the database), whose device
//! bytes count while its time does not: latency and commits per second are the commits'.
//!
//! Invariants:
//! - Plans are pure functions of their arguments (seeded), so every contender in every
//!   round commits exactly the same records; every key is new in its trial, so each
//!   commit inserts (never replaces) and the record bytes are exact.
//! - Rounds rotate the contender order (`runner::rotation`); each trial runs on a fresh
//!   directory.

use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use inpage::vfs::IoStats;
use serde::{Deserialize, Serialize};

use crate::contender::{self, Contender};
use crate::lab::check_interrupted;
use crate::report::median;
use crate::runner::{guarded, probe, rotation, sample, Session};
use crate::workload::KeyGen;
use crate::workload::{Op, SplitMix64};
use crate::LabArgs;

/// Contenders when none are named: the paper compares xLog with SQLite's WAL; `dhl-cc`
/// is the engine's default; the floor is one 4 KiB overwrite + fdatasync per commit (the
/// device's cheapest durable commit of a small record, not of a large one).
pub const DEFAULT: &[&str] = &["nvlog", "dhl-cc", "sqlite-wal-r", "floor"];

/// The paper's record sizes.
pub const PAPER_SIZES: &str = "100,1024,10240,102400";

#[derive(Args, Debug, Clone)]
pub struct NvlogArgs {
    #[command(flatten)]
    pub lab: LabArgs,
    /// Contenders, comma-separated (default: nvlog, dhl-cc, sqlite-wal-r, floor).
    #[arg(long, value_delimiter = ',')]
    pub contenders: Vec<String>,
    /// Rounds; contenders are rotated within each round, results are medians.
    #[arg(long, default_value_t = 3)]
    pub rounds: u32,
    /// Record (value) sizes in bytes, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = PAPER_SIZES)]
    pub sizes: Vec<usize>,
    /// Commits per record size and key order.
    #[arg(long, default_value_t = 1000)]
    pub txns: u64,
    /// Key orders to run: seq, rand (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "seq,rand")]
    pub keys: Vec<String>,
    /// Key-value puts of 100..=1600-byte records under random keys (0: skip).
    #[arg(long, default_value_t = 1000)]
    pub kv_txns: u64,
    /// Seed of the key and size generator.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Write the results as JSON to this file.
    #[arg(long)]
    pub json: Option<std::path::PathBuf>,
}

/// One workload point: the commits' (key, value length).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// `records` or `kv`.
    pub workload: &'static str,
    /// The record size (0 for `kv`, whose sizes vary).
    pub size: usize,
    /// `seq` or `rand`.
    pub keys: &'static str,
    pub commits: Vec<(i64, usize)>,
}

impl Plan {
    /// Bytes the commits carry: key (8) + value, summed.
    pub fn record_bytes(&self) -> u64 {
        self.commits.iter().map(|&(_, len)| 8 + len as u64).sum()
    }
}

/// `txns` records of `size` bytes under sequential (1, 2, …) or random distinct keys.
pub fn records_plan(size: usize, txns: u64, random: bool, seed: u64) -> Plan {
    let keys: Vec<i64> = if random {
        let mut g = KeyGen::with_rng(SplitMix64::new(seed ^ 0x6e76_6c6f_6700_0001));
        (0..txns).map(|_| g.fresh()).collect()
    } else {
        (1..=txns as i64).collect()
    };
    Plan {
        workload: "records",
        size,
        keys: if random { "rand" } else { "seq" },
        commits: keys.into_iter().map(|k| (k, size)).collect(),
    }
}

/// `txns` puts of 100..=1600-byte records under random distinct keys.
pub fn kv_plan(txns: u64, seed: u64) -> Plan {
    let mut g = KeyGen::with_rng(SplitMix64::new(seed ^ 0x6e76_6c6f_6700_0002));
    let keys: Vec<i64> = (0..txns).map(|_| g.fresh()).collect();
    let commits = keys
        .into_iter()
        .map(|k| (k, 100 + g.rng.below(1501) as usize))
        .collect();
    Plan {
        workload: "kv",
        size: 0,
        keys: "rand",
        commits,
    }
}

/// One contender on one point, medians over rounds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NvlogRow {
    pub workload: String,
    /// Record size in bytes (0: the key-value puts' 100..=1600).
    pub size: usize,
    pub keys: String,
    pub contender: String,
    pub commits_per_s: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    /// Device KiB (data + file-system journal) ÷ record KiB, checkpoint included.
    pub write_amp: Option<f64>,
    /// Device flushes per 1,000 commits, checkpoint included.
    pub flushes_per_1000: Option<f64>,
    /// Device KiB per commit, checkpoint included.
    pub dev_kib_per_commit: Option<f64>,
    /// Process CPU µs per commit.
    pub cpu_us: Option<f64>,
    /// This row's commits per second ÷ the reference's at the same point.
    pub vs_reference: Option<f64>,
}

/// The report (`--json`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NvlogReport {
    pub lab: String,
    pub rounds: u32,
    pub reference: String,
    pub results: Vec<NvlogRow>,
}

/// What one trial measured.
struct Trial {
    commits_per_s: f64,
    p50_us: f64,
    p99_us: f64,
    write_amp: Option<f64>,
    flushes_per_1000: Option<f64>,
    dev_kib_per_commit: Option<f64>,
    cpu_us: Option<f64>,
}

/// The `q`-quantile (0..=1) of `v` by nearest rank; 0 for no values.
pub fn quantile(v: &[f64], q: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let rank = ((q * s.len() as f64).ceil() as usize).clamp(1, s.len());
    s[rank - 1]
}

/// Removes the default nvlog region of the trial's database when the trial ends: a clean
/// close removes it already, but a trial that fails leaves its database crashed, and its
/// region (under `/dev/shm`, outside the lab) would outlive the directory the lab deletes.
struct RegionGuard(std::path::PathBuf);

impl Drop for RegionGuard {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn trial(s: &mut Session, c: &Contender, plan: &Plan, value: &[u8]) -> Result<Trial, String> {
    let dir = s.fresh_dir(&c.name)?;
    let _region = RegionGuard(
        inpage::Config::default()
            .journal
            .nvlog_region_for(&dir.join("test.db")),
    );
    let stats = Arc::new(IoStats::new());
    let mut st = c.open(&dir, &stats)?;
    // No rows; the floor pre-writes its file here, so its commits are plain overwrites.
    st.preload(&[], &value[..0])?;
    // What the preload deferred (the table's creation, waiting in an nvlog region or a
    // WAL) is written now, not by a flush that happens to fall inside the measured
    // commits: the window holds exactly their writes and the final checkpoint's.
    st.checkpoint()?;
    s.settle();
    let before = probe(&s.lab, &stats)?;
    let mut lat = Vec::with_capacity(plan.commits.len());
    let t0 = Instant::now();
    for &(k, len) in &plan.commits {
        check_interrupted()?;
        let tc = Instant::now();
        st.txn(Op::Insert, &[k], &value[..len])?;
        lat.push(tc.elapsed().as_secs_f64() * 1e6);
    }
    let wall = t0.elapsed();
    // Deferred writes count: move everything into the database before the second probe.
    st.checkpoint()?;
    let after = probe(&s.lab, &stats)?;
    st.close()?;
    let n = plan.commits.len() as u64;
    let smp = sample(c.accounted(), &before, &after, wall, n, 1, &s.profile);
    let dev_kib = match (smp.data_kib, smp.journal_kib) {
        (Some(d), Some(j)) => Some(d + j),
        (d, _) => d,
    };
    let record_kib_per_commit = plan.record_bytes() as f64 / 1024.0 / n.max(1) as f64;
    std::fs::remove_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    Ok(Trial {
        commits_per_s: n as f64 / wall.max(Duration::from_nanos(1)).as_secs_f64(),
        p50_us: quantile(&lat, 0.50),
        p99_us: quantile(&lat, 0.99),
        write_amp: dev_kib.map(|k| k / record_kib_per_commit.max(1e-12)),
        flushes_per_1000: smp.flushes.map(|f| f * 1000.0),
        dev_kib_per_commit: dev_kib,
        cpu_us: smp.cpu_us,
    })
}

fn med(v: &[Trial], f: impl Fn(&Trial) -> Option<f64>) -> Option<f64> {
    let xs: Vec<f64> = v.iter().filter_map(f).collect();
    median(&xs)
}

/// Every plan over every contender, `s.rounds` rounds each.
pub fn run_plans(
    s: &mut Session,
    cs: &[Contender],
    plans: &[Plan],
    reference: &str,
) -> Result<Vec<NvlogRow>, String> {
    let largest = plans.iter().flat_map(|p| &p.commits).map(|&(_, l)| l).max();
    let mut rng = SplitMix64::new(0x6e76_6c6f_6700_0003);
    // Random letters: the SQL peers store the value as text.
    let value: Vec<u8> = (0..largest.unwrap_or(0))
        .map(|_| b'a' + (rng.next_u64() % 26) as u8)
        .collect();
    let mut rows = Vec::new();
    for plan in plans {
        let mut trials: Vec<Vec<Trial>> = cs.iter().map(|_| Vec::new()).collect();
        for round in 0..s.rounds {
            for ci in rotation(cs.len(), round) {
                let c = &cs[ci];
                s.pb.set_message(format!(
                    "nvlog {} {} {} {} (round {})",
                    plan.workload,
                    plan.size,
                    plan.keys,
                    c.name,
                    round + 1
                ));
                let t = guarded(&c.name, || trial(s, c, plan, &value))?;
                trials[ci].push(t);
                s.pb.inc(1);
            }
        }
        let first = rows.len();
        for (c, t) in cs.iter().zip(&trials) {
            rows.push(NvlogRow {
                workload: plan.workload.to_string(),
                size: plan.size,
                keys: plan.keys.to_string(),
                contender: c.name.clone(),
                commits_per_s: med(t, |x| Some(x.commits_per_s)).unwrap_or(0.0),
                p50_us: med(t, |x| Some(x.p50_us)).unwrap_or(0.0),
                p99_us: med(t, |x| Some(x.p99_us)).unwrap_or(0.0),
                write_amp: med(t, |x| x.write_amp),
                flushes_per_1000: med(t, |x| x.flushes_per_1000),
                dev_kib_per_commit: med(t, |x| x.dev_kib_per_commit),
                cpu_us: med(t, |x| x.cpu_us),
                vs_reference: None,
            });
        }
        let base = rows[first..]
            .iter()
            .find(|r| r.contender == reference)
            .map(|r| r.commits_per_s);
        for r in &mut rows[first..] {
            r.vs_reference = base.map(|b| r.commits_per_s / b.max(1e-12));
        }
    }
    Ok(rows)
}

fn cell(v: Option<f64>, prec: usize) -> String {
    v.map_or_else(|| "-".into(), |x| format!("{x:.prec$}"))
}

/// The text table.
pub fn table(r: &NvlogReport) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "lab: {}  rounds: {}  (medians over rounds; one record per commit; WA = device KiB \
         (data + fs journal) / record KiB, flushes per 1,000 commits and devKiB per commit, \
         all with the final checkpoint; commits/s and latency without it; vs = commits/s / \
         {}'s at the same point)",
        r.lab, r.rounds, r.reference
    );
    let head = [
        "workload",
        "size",
        "keys",
        "contender",
        "commits/s",
        "vs",
        "p50_us",
        "p99_us",
        "WA",
        "flush/1k",
        "devKiB",
        "cpu_us",
    ];
    let mut cells: Vec<Vec<String>> = vec![head.iter().map(|s| s.to_string()).collect()];
    for x in &r.results {
        cells.push(vec![
            x.workload.clone(),
            if x.size == 0 {
                "100-1600".into()
            } else {
                x.size.to_string()
            },
            x.keys.clone(),
            x.contender.clone(),
            format!("{:.0}", x.commits_per_s),
            cell(x.vs_reference, 2),
            format!("{:.0}", x.p50_us),
            format!("{:.0}", x.p99_us),
            cell(x.write_amp, 2),
            cell(x.flushes_per_1000, 0),
            cell(x.dev_kib_per_commit, 2),
            cell(x.cpu_us, 0),
        ]);
    }
    crate::mvbt::push_cells(&mut out, &cells);
    out
}

/// The plans the arguments ask for.
pub fn plans(a: &NvlogArgs) -> Result<Vec<Plan>, String> {
    let mut v = Vec::new();
    for &size in &a.sizes {
        if size == 0 || size > 1 << 20 {
            return Err(format!("--sizes: {size} is not in 1..=1048576"));
        }
        for k in &a.keys {
            let random = match k.as_str() {
                "seq" => false,
                "rand" => true,
                other => return Err(format!("--keys: '{other}' is neither seq nor rand")),
            };
            v.push(records_plan(size, a.txns, random, a.seed));
        }
    }
    if a.kv_txns > 0 {
        v.push(kv_plan(a.kv_txns, a.seed));
    }
    Ok(v)
}

/// `inpage bench nvlog`.
pub fn run(a: &NvlogArgs) -> Result<(), String> {
    if a.rounds == 0 || a.txns == 0 {
        return Err("--rounds and --txns must be at least 1".into());
    }
    let plans = plans(a)?;
    let names: Vec<String> = if a.contenders.is_empty() {
        DEFAULT.iter().map(|s| s.to_string()).collect()
    } else {
        a.contenders.clone()
    };
    let cs = contender::select(&names)?;
    let reference = if names.iter().any(|n| n == "sqlite-wal-r") {
        "sqlite-wal-r".to_string()
    } else {
        names[0].clone()
    };
    crate::lab::install_interrupt_handler();
    let trials = plans.len() as u64 * cs.len() as u64 * u64::from(a.rounds);
    let mut s = crate::session(&a.lab, a.rounds, trials)?;
    let results = run_plans(&mut s, &cs, &plans, &reference)?;
    s.finish_progress();
    let r = NvlogReport {
        lab: s.lab.name().to_string(),
        rounds: a.rounds,
        reference,
        results,
    };
    drop(s);
    print!("{}", table(&r));
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
    fn plans_are_deterministic_and_every_key_is_new() {
        let a = records_plan(100, 500, true, 3);
        assert_eq!(a, records_plan(100, 500, true, 3));
        assert_ne!(a, records_plan(100, 500, true, 4));
        let keys: HashSet<i64> = a.commits.iter().map(|&(k, _)| k).collect();
        assert_eq!(keys.len(), 500);
        let s = records_plan(1024, 10, false, 3);
        assert_eq!(s.commits, (1..=10).map(|k| (k, 1024)).collect::<Vec<_>>());
        assert_eq!(s.record_bytes(), 10 * (8 + 1024));
        let kv = kv_plan(1000, 1);
        assert!(kv.commits.iter().all(|&(_, l)| (100..=1600).contains(&l)));
        let sizes: HashSet<usize> = kv.commits.iter().map(|&(_, l)| l).collect();
        assert!(sizes.len() > 100, "sizes vary: {}", sizes.len());
    }

    #[test]
    fn quantiles_by_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(quantile(&v, 0.5), 50.0);
        assert_eq!(quantile(&v, 0.99), 99.0);
        assert_eq!(quantile(&[7.0], 0.99), 7.0);
        assert_eq!(quantile(&[], 0.5), 0.0);
    }

    #[test]
    fn bad_arguments_are_refused() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            a: NvlogArgs,
        }
        let parse = |args: &[&str]| {
            let mut v = vec!["x"];
            v.extend_from_slice(args);
            Cli::try_parse_from(v).map(|c| c.a)
        };
        assert!(plans(&parse(&["--sizes", "0"]).unwrap()).is_err());
        assert!(plans(&parse(&["--keys", "zigzag"]).unwrap()).is_err());
        let ok = plans(&parse(&["--sizes", "100,200", "--keys", "seq"]).unwrap()).unwrap();
        assert_eq!(ok.len(), 3, "two record points and the kv point");
    }

    /// Real stores in a plain directory: every row is filled in and the reference's
    /// ratio is 1.
    #[test]
    fn rows_for_real_stores() {
        let lab = crate::lab::Lab::dir(None).unwrap();
        let exe = std::env::current_exe().unwrap();
        let mut s = Session::new(lab, 1, 0, exe);
        let cs = contender::select(&["dhl-cc".to_string(), "sqlite-wal-r".to_string()]).unwrap();
        let plans = vec![records_plan(100, 20, false, 1), kv_plan(20, 1)];
        let rows = run_plans(&mut s, &cs, &plans, "sqlite-wal-r").unwrap();
        assert_eq!(rows.len(), 4);
        for r in &rows {
            assert!(r.commits_per_s > 0.0 && r.p99_us >= r.p50_us, "{r:?}");
            assert!(r.write_amp.is_some_and(|w| w > 0.0), "{r:?}");
        }
        let reference = rows.iter().find(|r| r.contender == "sqlite-wal-r").unwrap();
        assert_eq!(reference.vs_reference, Some(1.0));
        assert!(table(&NvlogReport {
            lab: "none".into(),
            rounds: 1,
            reference: "sqlite-wal-r".into(),
            results: rows,
        })
        .contains("100-1600"));
    }
}
