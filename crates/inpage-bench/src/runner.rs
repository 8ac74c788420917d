//! The method: rounds of interleaved trials, each on fresh files, measured only over the
//! transaction phase.
//!
//! Invariants (these are what make numbers from a shared, noisy machine comparable):
//! - Every round runs every contender once per workload point, in an order rotated by
//!   the round number, so no contender always runs first (cold machine) or last.
//! - Each trial gets a fresh directory and fresh files (recovery: each contender's table
//!   of one size is built once and every round reopens it, since a crash trial rolls the
//!   interrupted insert back and a reopen changes no row); setup (schema, preload, warm-up)
//!   happens before the measured window, then `sync` + drop caches (where root allows),
//!   then the store is opened, then the window opens. Closing (WAL checkpoints) happens
//!   after the window. Device and syscall counters are read at exactly the window edges.
//! - A trial that fails or panics aborts the run with the contender's name: partial
//!   results would silently compare different sets of contenders.
//! - Per-transaction numbers divide by the transactions of all threads together.
//! - The modeled time of a round (`Sample::model_us`) is a pure function of that round's
//!   device counters and its process CPU time over the same window, so rounds that do
//!   the same I/O model the same time up to the CPU time's noise. With several threads
//!   the model is serial (all threads' requests and CPU, per transaction): it ranks
//!   schemes by the device work they cause, not by how well they overlap.
//! - Every measured update writes a value no row holds yet (it carries the transaction
//!   number), unless `fixed_update_value` asks for Mobibench's single string: otherwise a
//!   store that skips unchanged cells (SQLite, the engine) would skip work the others do.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use inpage::vfs::{AccountingVfs, IoKind, IoStats, IoStatsSnapshot, OsVfs, Vfs};

use crate::contender::{Contender, FloorMode, FloorStore, Kind, Store};
use crate::device::{DeviceCounters, Profile};
use crate::lab::{check_interrupted, prefetch_dir, read_proc_io, settle, DevStat, Lab, ProcIo};
use crate::recovery::{calibrate_writes, copy_dir, crash_child, pre_updates, ChildSpec};
use crate::report::{Collector, CommitLatency, Latency, Point, Sample};
use crate::sql::ReadKind;
use crate::workload::{mobibench_value, update_value, Op, Plan, SplitMix64};

/// How long a recovery child may take to reach its stop point.
const CHILD_TIMEOUT: Duration = Duration::from_secs(120);

/// A run in progress: the lab, the method settings and the progress display.
pub struct Session {
    pub lab: Lab,
    pub rounds: u32,
    /// The executable to spawn for recovery children (`bench recovery-child ...`).
    pub exe: PathBuf,
    seq: u64,
    pub(crate) pb: ProgressBar,
    caches_dropped: Option<bool>,
    pub collector: Collector,
    order: u32,
    /// The device profile of the modeled columns.
    pub profile: Profile,
}

impl Session {
    pub fn new(lab: Lab, rounds: u32, total_trials: u64, exe: PathBuf) -> Session {
        // indicatif hides the bar by itself when stderr is not a terminal.
        let pb = ProgressBar::new(total_trials);
        pb.set_style(
            ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        Session {
            lab,
            rounds,
            exe,
            seq: 0,
            pb,
            caches_dropped: None,
            collector: Collector::default(),
            order: 0,
            profile: crate::device::profiles().swap_remove(0),
        }
    }

    /// Use `p` for the modeled columns (default: the first profile, emmc).
    pub fn with_profile(mut self, p: Profile) -> Session {
        self.profile = p;
        self
    }

    /// A new, empty directory for one trial.
    pub(crate) fn fresh_dir(&mut self, label: &str) -> Result<PathBuf, String> {
        self.seq += 1;
        let d = self.lab.root().join(format!("{:05}-{label}", self.seq));
        std::fs::create_dir_all(&d).map_err(|e| format!("{}: {e}", d.display()))?;
        Ok(d)
    }

    /// sync + drop caches; remembers (and reports once) whether dropping works here.
    pub(crate) fn settle(&mut self) {
        let ok = settle();
        if self.caches_dropped.is_none() && !ok {
            self.pb.suspend(|| {
                eprintln!("note: cannot drop the page cache (not root?): caches stay warm")
            });
        }
        self.caches_dropped.get_or_insert(ok);
    }

    pub(crate) fn next_point(&mut self, workload: &str, op: &str, k: u32) -> Point {
        self.order += 1;
        Point {
            order: self.order,
            workload: workload.into(),
            op: op.into(),
            ops_per_txn: k,
            records: None,
        }
    }

    pub fn finish_progress(&self) {
        self.pb.finish_and_clear();
    }
}

/// Counters at one edge of a measured window.
pub(crate) struct Probe {
    dev: Option<(DevStat, DevStat)>,
    io: Option<ProcIo>,
    pub(crate) acct: IoStatsSnapshot,
    /// Process CPU time (all threads, user + system).
    cpu: Duration,
    /// The same split into user and kernel time (`getrusage`; coarser on some kernels).
    user: Duration,
    sys: Duration,
}

/// CPU time the whole process has used: every contender's work (and any helper thread
/// an engine starts) runs in this process, so the same clock serves engine and peers.
fn process_cpu() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    Duration::new(
        t.tv_sec.max(0) as u64,
        t.tv_nsec.clamp(0, 999_999_999) as u32,
    )
}

/// User and kernel CPU time the process has used (all threads).
fn process_cpu_split() -> (Duration, Duration) {
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes one `rusage` through the pointer, which points at one;
    // RUSAGE_SELF is a valid `who`.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, ru.as_mut_ptr()) } != 0 {
        return (Duration::ZERO, Duration::ZERO);
    }
    // SAFETY: the call succeeded, so it filled the struct (zeroed before, in any case).
    let ru = unsafe { ru.assume_init() };
    let tv = |t: libc::timeval| {
        Duration::new(
            t.tv_sec.max(0) as u64,
            (t.tv_usec.clamp(0, 999_999) * 1000) as u32,
        )
    };
    (tv(ru.ru_utime), tv(ru.ru_stime))
}

pub(crate) fn probe(lab: &Lab, stats: &IoStats) -> Result<Probe, String> {
    let (user, sys) = process_cpu_split();
    Ok(Probe {
        dev: lab.dev_stats()?,
        io: read_proc_io(),
        acct: stats.snapshot(),
        cpu: process_cpu(),
        user,
        sys,
    })
}

/// Turn two probes around a window into per-transaction numbers; `profile` gives the
/// modeled time.
pub(crate) fn sample(
    accounted: bool,
    a: &Probe,
    b: &Probe,
    wall: Duration,
    ntx: u64,
    threads: u32,
    profile: &Profile,
) -> Sample {
    let n = ntx.max(1) as f64;
    let acct = b.acct.delta(&a.acct);
    let io = match (a.io, b.io) {
        (Some(x), Some(y)) => Some(y.delta(&x)),
        _ => None,
    };
    let dev = match (a.dev, b.dev) {
        (Some((d0, j0)), Some((d1, j1))) => Some((d1.delta(&d0), j1.delta(&j0))),
        _ => None,
    };
    let wr = |k: IoKind| acct.get(k);
    let (data_kib, journal_kib, dev_writes, flushes) = match dev {
        Some((d, j)) => (
            Some(d.kib() / n),
            Some(j.kib() / n),
            Some((d.writes + j.writes) as f64 / n),
            match (d.flushes, j.flushes) {
                (Some(x), Some(y)) => Some((x + y) as f64 / n),
                _ => None,
            },
        ),
        None => {
            // No devices: syscall-level bytes (ours exactly, peers' from /proc/self/io).
            let bytes = if accounted {
                Some((wr(IoKind::Write).bytes + wr(IoKind::Allocate).bytes) as f64)
            } else {
                io.map(|x| x.wchar as f64)
            };
            (bytes.map(|b| b / 1024.0 / n), None, None, None)
        }
    };
    let unaligned_writes = accounted.then(|| acct.unaligned_writes() as f64 / n);
    let (write_calls, sync_calls, latency) = if accounted {
        let w = wr(IoKind::Write).calls + wr(IoKind::Allocate).calls;
        let s = wr(IoKind::Sync).calls + wr(IoKind::SyncAll).calls + wr(IoKind::SyncDir).calls;
        let wn = wr(IoKind::Write).nanos + wr(IoKind::Allocate).nanos + wr(IoKind::SetLen).nanos;
        let sn = wr(IoKind::Sync).nanos + wr(IoKind::SyncAll).nanos + wr(IoKind::SyncDir).nanos;
        // Each thread's wall time is its own: the busy time of all threads together.
        let busy = wall.as_nanos() as f64 * f64::from(threads.max(1));
        let write_us = wn as f64 / n / 1000.0;
        let sync_us = sn as f64 / n / 1000.0;
        let compute_us = (busy / n / 1000.0 - write_us - sync_us).max(0.0);
        (
            Some(w as f64 / n),
            Some(s as f64 / n),
            Some(Latency {
                compute: compute_us,
                write: write_us,
                sync: sync_us,
            }),
        )
    } else {
        (io.map(|x| x.syscw as f64 / n), None, None)
    };
    let secs = wall.as_secs_f64().max(1e-9);
    let cpu_us = b.cpu.saturating_sub(a.cpu).as_secs_f64() * 1e6 / n;
    let user_us = b.user.saturating_sub(a.user).as_secs_f64() * 1e6 / n;
    let sys_us = b.sys.saturating_sub(a.sys).as_secs_f64() * 1e6 / n;
    let counters = dev.and_then(|(d, j)| DeviceCounters::from_lab(&d, &j, n));
    Sample {
        tx_per_s: ntx as f64 / secs,
        write_reqs: counters.map(|c| c.write_reqs),
        read_reqs: counters.map(|c| c.read_reqs),
        read_kib: counters.map(|c| c.read_kib),
        cpu_us: Some(cpu_us),
        user_us: Some(user_us),
        sys_us: Some(sys_us),
        model_us: counters.map(|c| profile.model_us(&c, cpu_us)),
        data_kib,
        journal_kib,
        dev_writes,
        flushes,
        write_calls,
        unaligned_writes,
        sync_calls,
        latency,
        commit_latency: None,
        recovery_ms: None,
        read_call_kib: None,
        open_ms: None,
        first_write_ms: None,
        checkpoint_share: None,
        pages_dirtied: None,
    }
}

/// Run `f`, turning a panic into an error naming the contender.
pub(crate) fn guarded<T>(name: &str, f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r.map_err(|e| {
            if e.starts_with(name) || e == "interrupted" {
                e
            } else {
                format!("{name}: {e}")
            }
        }),
        Err(p) => {
            let msg = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "panic".into());
            Err(format!("{name} panicked: {msg}"))
        }
    }
}

/// Round-robin order of `n` contenders for round `r`.
pub fn rotation(n: usize, r: u32) -> impl Iterator<Item = usize> {
    let s = if n == 0 { 0 } else { r as usize % n };
    (0..n).map(move |i| (i + s) % n)
}

/// Value size, threads and update values of one trial.
#[derive(Clone, Copy, Debug)]
struct TrialShape {
    value_size: usize,
    threads: u32,
    fixed_update_value: bool,
    /// Open loop: transactions due at this rate per second (`MobiParams::rate`).
    rate: Option<f64>,
}

type Opener<'a> = &'a dyn Fn(&Path, &Arc<IoStats>) -> Result<Box<dyn Store>, String>;

/// One measured trial: `threads` databases set up with `plan.preload`, then `plan.txns`
/// on each, all threads starting together.
fn txn_trial(
    s: &mut Session,
    label: &str,
    open: Opener<'_>,
    accounted: bool,
    plan: &Plan,
    shape: TrialShape,
) -> Result<Sample, String> {
    let TrialShape {
        value_size,
        threads,
        fixed_update_value,
        rate,
    } = shape;
    let dir = s.fresh_dir(label)?;
    let stats = Arc::new(IoStats::new());
    let load_v = mobibench_value(value_size, false);
    // One value per transaction, built before the window opens.
    let values: Vec<Vec<u8>> = if plan.op == Op::Update && !fixed_update_value {
        (0..plan.txns.len() as u64)
            .map(|t| update_value(value_size, t))
            .collect()
    } else {
        vec![mobibench_value(value_size, plan.op == Op::Update)]
    };
    let op_v = |t: usize| -> &[u8] { &values[t.min(values.len() - 1)] };
    let dirs: Vec<PathBuf> = (0..threads).map(|t| dir.join(format!("t{t}"))).collect();
    for d in &dirs {
        std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
        let mut st = open(d, &stats)?;
        st.preload(&plan.preload, &load_v)?;
        st.close()?;
    }
    s.settle();
    let mut stores = dirs
        .iter()
        .map(|d| open(d, &stats))
        .collect::<Result<Vec<_>, _>>()?;
    // The warm-up: unmeasured, before the window opens, on every database.
    for st in stores.iter_mut() {
        for (t, keys) in plan.txns[..plan.warmup].iter().enumerate() {
            check_interrupted()?;
            st.txn(plan.op, keys, op_v(t))?;
        }
    }
    let first = plan.warmup;
    let before = probe(&s.lab, &stats)?;
    // Each transaction's wall time, µs (`CommitLatency`); the clock reads cost tens of
    // nanoseconds against transactions of tens of microseconds and more.
    // Open loop: transaction `t` is due `t / rate` after the window opened (`start`), and
    // its latency counts from then, waiting included.
    let timed = |st: &mut Box<dyn Store>, t: usize, keys: &[i64], start: Instant| {
        let begin = match rate {
            Some(r) => {
                let due = start + Duration::from_secs_f64(t as f64 / r);
                std::thread::sleep(due.saturating_duration_since(Instant::now()));
                due
            }
            None => Instant::now(),
        };
        st.txn(plan.op, keys, op_v(first + t))?;
        Ok::<f64, String>(begin.elapsed().as_secs_f64() * 1e6)
    };
    let mut commit_us: Vec<f64> = Vec::with_capacity(plan.measured().len() * stores.len());
    let wall = if stores.len() == 1 {
        let t0 = Instant::now();
        for (t, keys) in plan.measured().iter().enumerate() {
            check_interrupted()?;
            commit_us.push(timed(&mut stores[0], t, keys, t0)?);
        }
        t0.elapsed()
    } else {
        let barrier = Barrier::new(stores.len() + 1);
        let (wall, results) = std::thread::scope(|sc| {
            let handles: Vec<_> = stores
                .iter_mut()
                .map(|st| {
                    let (barrier, timed) = (&barrier, &timed);
                    sc.spawn(move || -> Result<Vec<f64>, String> {
                        barrier.wait();
                        let start = Instant::now();
                        let mut us = Vec::with_capacity(plan.measured().len());
                        for (t, keys) in plan.measured().iter().enumerate() {
                            check_interrupted()?;
                            us.push(timed(st, t, keys, start)?);
                        }
                        Ok(us)
                    })
                })
                .collect();
            barrier.wait();
            let t0 = Instant::now();
            let results: Vec<Result<Vec<f64>, String>> = handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|_| Err("thread panicked".into())))
                .collect();
            (t0.elapsed(), results)
        });
        for r in results {
            commit_us.extend(r?);
        }
        wall
    };
    let after = probe(&s.lab, &stats)?;
    for st in stores {
        st.close()?;
    }
    let ntx = plan.measured().len() as u64 * u64::from(threads);
    let mut out = sample(accounted, &before, &after, wall, ntx, threads, &s.profile);
    out.commit_latency = CommitLatency::of(&commit_us);
    // Keep the lab file system small; its deletion I/O lands before the next settle.
    std::fs::remove_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    Ok(out)
}

/// Mobibench parameters.
#[derive(Clone, Debug)]
pub struct MobiParams {
    pub ops: Vec<Op>,
    pub ops_per_txn: Vec<u32>,
    pub txns: u64,
    pub value_size: usize,
    pub random: bool,
    pub threads: u32,
    pub seed: u64,
    /// Write Mobibench's one fixed string in every update (rows often unchanged) instead
    /// of a value carrying the transaction number.
    pub fixed_update_value: bool,
    /// Unmeasured transactions of the same workload before the measured window.
    pub warmup: u64,
    /// Open loop: transactions due at this rate per second and thread (`--rate`).
    pub rate: Option<f64>,
}

impl MobiParams {
    pub fn trials(&self, contenders: usize, rounds: u32) -> u64 {
        (self.ops.len() * self.ops_per_txn.len() * contenders) as u64 * u64::from(rounds)
    }
}

/// The Mobibench workload over `contenders`.
pub fn run_mobibench(s: &mut Session, cs: &[Contender], p: &MobiParams) -> Result<(), String> {
    // A cold start (no warm-up: a WAL still growing, its file system metadata journaled
    // on every commit) is what an app pays once after it starts, not on every commit:
    // its rows are labelled so they are never read as the steady state.
    let workload = match (p.rate, p.warmup) {
        (Some(r), _) => format!("mobibench-open-{r}tps"),
        (None, 0) => "mobibench-cold".into(),
        (None, _) => "mobibench".into(),
    };
    let mut points = Vec::new();
    for &op in &p.ops {
        for &k in &p.ops_per_txn {
            let pt = s.next_point(&workload, op.name(), k);
            let plan = Plan::with_warmup(op, p.warmup, p.txns, k, p.random, p.seed);
            points.push((op, k, pt, plan));
        }
    }
    for round in 0..s.rounds {
        for (op, k, pt, plan) in &points {
            for ci in rotation(cs.len(), round) {
                let c = &cs[ci];
                s.pb.set_message(format!(
                    "mobibench {op} k={k} {} (round {})",
                    c.name,
                    round + 1
                ));
                let open = |d: &Path, st: &Arc<IoStats>| c.open(d, st);
                let smp = guarded(&c.name, || {
                    txn_trial(
                        s,
                        &c.name,
                        &open,
                        c.accounted(),
                        plan,
                        TrialShape {
                            value_size: p.value_size,
                            threads: p.threads,
                            fixed_update_value: p.fixed_update_value,
                            rate: p.rate,
                        },
                    )
                })?;
                s.collector.add(
                    pt.clone(),
                    &c.name,
                    plan.measured().len() as u64 * u64::from(p.threads),
                    smp,
                );
                s.pb.inc(1);
            }
        }
    }
    Ok(())
}

/// Read workload parameters (`mobibench-sql`).
#[derive(Clone, Debug)]
pub struct ReadParams {
    pub kinds: Vec<ReadKind>,
    pub rows: u64,
    pub queries: u64,
    pub value_size: usize,
    pub seed: u64,
}

/// Reads through SQL: for each query kind, each contender fills a fresh read table,
/// reopens it, runs the queries once to warm its cache, then runs them again measured.
/// Every answer's row count is checked (1, 1, 1,000), so a store that answers wrongly
/// fails instead of looking fast.
pub fn run_reads(s: &mut Session, cs: &[Contender], p: &ReadParams) -> Result<(), String> {
    let pts: Vec<(ReadKind, Point)> = p
        .kinds
        .iter()
        .map(|&k| (k, s.next_point("reads", k.name(), 1)))
        .collect();
    for round in 0..s.rounds {
        for (kind, pt) in &pts {
            for ci in rotation(cs.len(), round) {
                let c = &cs[ci];
                s.pb.set_message(format!(
                    "reads {} {} (round {})",
                    kind.name(),
                    c.name,
                    round + 1
                ));
                let smp = guarded(&c.name, || read_trial(s, c, *kind, p))?;
                s.collector.add(pt.clone(), &c.name, p.queries, smp);
                s.pb.inc(1);
            }
        }
    }
    Ok(())
}

fn read_trial(
    s: &mut Session,
    c: &Contender,
    kind: ReadKind,
    p: &ReadParams,
) -> Result<Sample, String> {
    let dir = s.fresh_dir(&c.name)?;
    let stats = Arc::new(IoStats::new());
    let value = mobibench_value(p.value_size, false);
    {
        let mut st = c.open(&dir, &stats)?;
        st.reads_setup(p.rows, &value)?;
        st.close()?;
    }
    s.settle();
    let last = match kind {
        ReadKind::Range => p.rows - crate::sql::RANGE_ROWS + 1,
        ReadKind::Rowid | ReadKind::Index => p.rows,
    };
    let want = match kind {
        ReadKind::Range => crate::sql::RANGE_ROWS,
        ReadKind::Rowid | ReadKind::Index => 1,
    };
    let mut rng = SplitMix64::new(p.seed ^ 0x5eed_0f4e_ad00);
    let ids: Vec<i64> = (0..p.queries)
        .map(|_| 1 + (rng.next_u64() % last) as i64)
        .collect();
    let mut st = c.open(&dir, &stats)?;
    for &id in &ids {
        check_interrupted()?;
        st.read(kind, id)?; // warm-up: the same pages the measured pass reads
    }
    let before = probe(&s.lab, &stats)?;
    let t0 = Instant::now();
    for &id in &ids {
        let n = st.read(kind, id)?;
        if n != want {
            return Err(format!(
                "{} {}: id {id} returned {n} rows, want {want}",
                c.name,
                kind.name()
            ));
        }
    }
    let wall = t0.elapsed();
    let after = probe(&s.lab, &stats)?;
    st.close()?;
    let out = sample(false, &before, &after, wall, p.queries, 1, &s.profile);
    std::fs::remove_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    Ok(out)
}

/// The floor workload: overwrite and append, `txns` one-page durable commits each.
pub fn run_floor(s: &mut Session, txns: u64) -> Result<(), String> {
    let modes = [FloorMode::Overwrite, FloorMode::Append];
    let pts: Vec<Point> = modes
        .iter()
        .map(|m| s.next_point("floor", m.name(), 1))
        .collect();
    let plan = Plan {
        op: Op::Insert,
        preload: Vec::new(),
        txns: vec![Vec::new(); txns as usize],
        warmup: 0,
    };
    for round in 0..s.rounds {
        for mi in rotation(modes.len(), round) {
            let m = modes[mi];
            s.pb.set_message(format!("floor {} (round {})", m.name(), round + 1));
            let open = |d: &Path, st: &Arc<IoStats>| -> Result<Box<dyn Store>, String> {
                let vfs: Arc<dyn Vfs> = Arc::new(AccountingVfs::with_stats(
                    Arc::new(OsVfs::new()),
                    st.clone(),
                ));
                Ok(Box::new(FloorStore::open(d, m, vfs)?))
            };
            let smp = guarded("floor", || {
                let shape = TrialShape {
                    value_size: 0,
                    threads: 1,
                    fixed_update_value: false,
                    rate: None,
                };
                txn_trial(s, "floor", &open, true, &plan, shape)
            })?;
            s.collector.add(pts[mi].clone(), "floor", txns, smp);
            s.pb.inc(1);
        }
    }
    Ok(())
}

/// Rows per transaction when a recovery table is built (setup, not measured).
pub const BUILD_BATCH: usize = 10_000;

/// Recovery parameters.
#[derive(Clone, Debug)]
pub struct RecoveryParams {
    /// Records in the interrupted insert transaction (crash points).
    pub records: Vec<u32>,
    /// Records in the table before the timed open, ascending (the size axis).
    pub sizes: Vec<u64>,
    pub value_size: usize,
    /// Engine: stop at this commit write instead of the calibrated middle.
    pub stop_at_write: Option<u64>,
    /// Page cache states to time the open with: `true` = cold (synced and dropped), `false`
    /// = warm (every page of the database's files cached). Warm rows are reported as
    /// workload `recovery-warm` / `reopen-warm`.
    pub cold: Vec<bool>,
    /// Time the open after a child killed mid-commit (workload `recovery`).
    pub crash: bool,
    /// Time the open after a clean close (workload `reopen`).
    pub reopen: bool,
    /// Crash trials: committed one-row updates before the interrupted insert.
    pub pre_updates: u32,
    /// Sets of tables, each built in another contender order; round r opens set
    /// r mod `build_orders` (placement in the file system sways cold opens).
    pub build_orders: u32,
    /// Each trial runs on a fresh copy of its table as built (removed afterwards).
    pub fresh_copy: bool,
}

impl RecoveryParams {
    /// Timed opens per contender and round.
    fn opens_per_round(&self) -> u64 {
        let per_size = self.cold.len() as u64
            * (if self.crash {
                self.records.len() as u64
            } else {
                0
            } + u64::from(self.reopen));
        per_size * self.sizes.len() as u64
    }

    pub fn trials(&self, contenders: usize, rounds: u32) -> u64 {
        self.opens_per_round() * contenders as u64 * u64::from(rounds)
    }

    /// Data device size the ext4 lab needs: every contender's table of the largest size
    /// at once plus one engine calibration copy, at a generous bytes-per-record bound
    /// (the largest measured, SQLite's WAL pair after a bulk load, is under 2x the raw
    /// record), and 256 MiB for the file system itself.
    pub fn lab_mib(&self, contenders: usize) -> u64 {
        // Every size's tables live side by side (sizes are interleaved within rounds).
        let n: u64 = self.sizes.iter().sum();
        let per_record = (self.value_size as u64 + 64) * 3;
        let tables = contenders as u64 * u64::from(self.build_orders.max(1)) + 1;
        let bytes = n.saturating_mul(per_record).saturating_mul(tables);
        bytes.div_ceil(1 << 20) + 256
    }
}

/// One timed-open point: workload name and the interrupted transaction's size (0 for a
/// clean close).
fn open_workload(crash: bool, cold: bool) -> &'static str {
    match (crash, cold) {
        (true, true) => "recovery",
        (true, false) => "recovery-warm",
        (false, true) => "reopen",
        (false, false) => "reopen-warm",
    }
}

/// A contender's table of one size, built once and reused by every round.
struct Table {
    dir: PathBuf,
}

/// The recovery workload over the contenders that have a transaction to interrupt.
///
/// Every contender's table of every size is built first (bulk load in `BUILD_BATCH`-row
/// transactions, clean close; build time recorded apart). Then each round times, per
/// size (rotated by round), per cache state, a reopen after the clean close and an open
/// after a crash per interrupted-transaction size, contenders rotated: the sizes of one
/// round are measured minutes, not a whole run, apart, so ratios across sizes (the "does
/// open time grow with the file" check) are not a comparison of two noisy time windows.
/// A crash trial leaves the table recovered and closed again (the interrupted insert is
/// rolled back), so the next trial sees the same rows; the tables are deleted at the end.
pub fn run_recovery(s: &mut Session, cs: &[Contender], p: &RecoveryParams) -> Result<(), String> {
    for c in cs {
        if p.reopen {
            if let Some(why) = c.reopen_na() {
                s.collector.add_na("reopen", &c.name, why);
            }
        }
        if p.crash {
            if let Some(why) = c.crash_na() {
                s.collector.add_na("recovery", &c.name, why);
            }
        }
    }
    let cs: Vec<&Contender> = cs.iter().filter(|c| c.recoverable()).collect();
    let mut kinds: Vec<(bool, u32)> = Vec::new();
    if p.reopen {
        kinds.push((false, 0));
    }
    if p.crash {
        kinds.extend(p.records.iter().map(|&k| (true, k)));
    }
    let mut sizes = Vec::new();
    for &n in &p.sizes {
        let mut pts = Vec::new();
        for &cold in &p.cold {
            for &(crash, k) in &kinds {
                let mut pt = s.next_point(open_workload(crash, cold), "insert", k);
                pt.records = Some(n);
                pts.push((cold, crash, k, pt));
            }
        }
        // sets[j][ci]: contender ci's table of set j, set j built starting with
        // contender j.
        let orders = p.build_orders.max(1);
        let mut sets: Vec<Vec<Table>> = Vec::new();
        for j in 0..orders {
            let mut set: Vec<Option<Table>> = (0..cs.len()).map(|_| None).collect();
            for ci in rotation(cs.len(), j) {
                let c = cs[ci];
                s.pb.set_message(format!("recovery: building {n} records for {}", c.name));
                let copy = if orders > 1 { Some(j) } else { None };
                set[ci] = Some(guarded(&c.name, || build_table(s, c, n, p, copy))?);
            }
            sets.push(
                set.into_iter()
                    .map(|t| t.expect("every contender built"))
                    .collect(),
            );
        }
        sizes.push((n, pts, sets));
    }
    for round in 0..s.rounds {
        for si in rotation(sizes.len(), round) {
            let (n, pts, sets) = &sizes[si];
            let tables = &sets[round as usize % sets.len()];
            let n = *n;
            for (cold, crash, k, pt) in pts {
                for ci in rotation(cs.len(), round) {
                    let c = cs[ci];
                    if *crash && c.crash_na().is_some() {
                        // No crash to stage: "n/a" with the reason (`crash_na`).
                        s.pb.inc(1);
                        continue;
                    }
                    let what = if *crash { "crash" } else { "reopen" };
                    s.pb.set_message(format!(
                        "{what} n={n} k={k} {} {} (round {})",
                        if *cold { "cold" } else { "warm" },
                        c.name,
                        round + 1
                    ));
                    let built = &tables[ci];
                    let copy = match p.fresh_copy {
                        true => Some(Table {
                            dir: s.fresh_dir(&format!("{}-trial", c.name))?,
                        }),
                        false => None,
                    };
                    if let Some(t) = &copy {
                        copy_dir(&built.dir, &t.dir)?;
                    }
                    let t = copy.as_ref().unwrap_or(built);
                    let smp = guarded(&c.name, || {
                        open_trial(s, c, t, n, if *crash { Some(*k) } else { None }, *cold, p)
                    })?;
                    if let Some(t) = copy {
                        std::fs::remove_dir_all(&t.dir)
                            .map_err(|e| format!("{}: {e}", t.dir.display()))?;
                    }
                    s.collector.add(pt.clone(), &c.name, 1, smp);
                    s.pb.inc(1);
                }
            }
        }
    }
    for (_, _, sets) in sizes {
        for t in sets.into_iter().flatten() {
            std::fs::remove_dir_all(&t.dir).map_err(|e| format!("{}: {e}", t.dir.display()))?;
        }
    }
    Ok(())
}

/// Build `c`'s table of `n` records and, for engine contenders, calibrate the stop
/// write of each interrupted size.
fn build_table(
    s: &mut Session,
    c: &Contender,
    n: u64,
    p: &RecoveryParams,
    copy: Option<u32>,
) -> Result<Table, String> {
    let dir = match copy {
        Some(j) => s.fresh_dir(&format!("{}-{n}-b{j}", c.name))?,
        None => s.fresh_dir(&format!("{}-{n}", c.name))?,
    };
    let stats = Arc::new(IoStats::new());
    let v = mobibench_value(p.value_size, false);
    let t0 = Instant::now();
    {
        let mut st = c.open(&dir, &stats)?;
        let mut first = 1i64;
        let end = n as i64 + 1;
        while first < end {
            check_interrupted()?;
            let last = (first + BUILD_BATCH as i64).min(end);
            let keys: Vec<i64> = (first..last).collect();
            st.txn(Op::Insert, &keys, &v)?;
            first = last;
        }
        st.close()?;
    }
    s.collector
        .add_build(&c.name, n, t0.elapsed().as_secs_f64() * 1000.0);
    Ok(Table { dir })
}

/// The keys of the interrupted insert into a table of `n` records: the next `k`.
fn interrupted_keys(n: u64, k: u32) -> Vec<i64> {
    let first = n as i64 + 1;
    (first..first + i64::from(k)).collect()
}

/// One timed open of `t`: after a crash of an insert of `crash` records (`Some`) or
/// after the clean close that ended the previous trial (`None`), with a cold or warm
/// page cache. Timed: open + the first read of row 1. The store is closed cleanly after
/// the window, so the next trial starts from a clean close again.
fn open_trial(
    s: &mut Session,
    c: &Contender,
    t: &Table,
    n: u64,
    crash: Option<u32>,
    cold: bool,
    p: &RecoveryParams,
) -> Result<Sample, String> {
    let stats = Arc::new(IoStats::new());
    let keys = crash.map(|k| interrupted_keys(n, k));
    if let (Some(k), Some(keys)) = (crash, &keys) {
        let ki = p.records.iter().position(|&x| x == k).unwrap_or(0);
        s.seq += 1;
        s.settle();
        let _ = ki;
        // The stop point: the given write, or the write at half the commit's bytes,
        // calibrated on a copy of the table as this trial finds it, with the child's own
        // updates. What a commit writes can depend on the sessions before it (`dash`
        // rewrites the pages of the last commit, which a crash and its recovery change),
        // so a calibration made once after the build could name a write the commit never
        // reaches.
        let (stop_at_write, stop_keep) = match (c.kind, p.stop_at_write) {
            (Kind::Engine { .. } | Kind::Sqlite(_), Some(w)) => (w.max(1), 0),
            (Kind::Engine { .. } | Kind::Sqlite(_), None) => {
                let scratch = t.dir.with_extension("calib");
                let v = mobibench_value(p.value_size, false);
                let ups = pre_updates(p.pre_updates, n, s.seq, p.value_size);
                let sizes = calibrate_writes(c, &t.dir, &scratch, keys, &v, &ups)?;
                crate::recovery::half_bytes(&sizes).ok_or(
                    "the commit did no writes; nothing to interrupt (a mode that buffers its \
                     commits must say so: Contender::crash_na)",
                )?
            }
            _ => (0, 0),
        };
        let spec = ChildSpec {
            contender: c.name.clone(),
            dir: t.dir.clone(),
            first_key: keys[0],
            records: k,
            value_size: p.value_size,
            stop_at_write,
            stop_keep,
            pre_updates: p.pre_updates,
            table_records: n,
            // Fresh values every trial.
            update_seed: s.seq,
        };
        crash_child(&s.exe, &spec, CHILD_TIMEOUT)?;
    }
    if cold {
        s.settle();
    } else {
        prefetch_dir(&t.dir)?;
    }
    let before = probe(&s.lab, &stats)?;
    let t0 = Instant::now();
    let mut st = c.open(&t.dir, &stats)?;
    let opened = t0.elapsed();
    let found = st.get(1);
    let wall = t0.elapsed();
    let after = probe(&s.lab, &stats)?;
    let what = if crash.is_some() {
        "recovery"
    } else {
        "reopen"
    };
    match found {
        Ok(true) => {}
        Ok(false) => {
            s.pb.suspend(|| eprintln!("warning: {}: row 1 missing after {what}", c.name))
        }
        Err(e) => {
            s.pb.suspend(|| eprintln!("warning: {}: first access after {what} failed: {e}", c.name))
        }
    }
    if let Some(keys) = &keys {
        let leaked = st.get(keys[0]).unwrap_or(false);
        if leaked && c.name != "off" && c.name != "sqlite-off" {
            s.pb.suspend(|| {
                eprintln!(
                    "warning: {}: interrupted insert visible after recovery",
                    c.name
                )
            });
        }
    }
    // The last row of the table must be there too (a recovery that loses a committed
    // tail would otherwise pass on row 1 alone).
    if !st.get(n as i64).unwrap_or(false) {
        s.pb.suspend(|| eprintln!("warning: {}: row {n} missing after {what}", c.name));
    }
    // The first write after the open, timed apart: an open that defers work (a free-space
    // walk, a mark to void) pays it here. Row 1 gets a value of the same size, so later
    // trials see the same table; a fresh value each trial, so no store can skip it.
    s.seq += 1;
    let value = update_value(p.value_size, s.seq);
    let t1 = Instant::now();
    st.txn(Op::Update, &[1], &value)?;
    let first_write = t1.elapsed();
    st.close()?;
    let mut smp = sample(c.accounted(), &before, &after, wall, 1, 1, &s.profile);
    smp.first_write_ms = Some(first_write.as_secs_f64() * 1000.0);
    let ms = wall.as_secs_f64() * 1000.0;
    smp.recovery_ms = Some(ms);
    smp.open_ms = Some(opened.as_secs_f64() * 1000.0);
    smp.tx_per_s = 1000.0 / ms.max(1e-6);
    smp.read_call_kib = match (before.io, after.io) {
        (Some(a), Some(b)) => Some(b.delta(&a).rchar as f64 / 1024.0),
        _ => None,
    };
    // The time split is for transactions; recovery reports its total only.
    smp.latency = None;
    Ok(smp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotation_covers_all() {
        let v: Vec<usize> = rotation(4, 1).collect();
        assert_eq!(v, vec![1, 2, 3, 0]);
        let v: Vec<usize> = rotation(4, 5).collect();
        assert_eq!(v, vec![1, 2, 3, 0]);
        assert_eq!(rotation(0, 3).count(), 0);
    }

    #[test]
    fn recovery_trials_and_lab_size() {
        let p = RecoveryParams {
            records: vec![1, 16],
            sizes: vec![1200, 1_000_000],
            value_size: 128,
            stop_at_write: None,
            cold: vec![true, false],
            crash: true,
            reopen: true,
            pre_updates: 0,
            build_orders: 1,
            fresh_copy: false,
        };
        // 2 sizes x 2 caches x (2 crash sizes + 1 reopen) x 5 contenders x 3 rounds.
        assert_eq!(p.trials(5, 3), 2 * 2 * 3 * 5 * 3);
        let crash_only = RecoveryParams {
            reopen: false,
            cold: vec![true],
            ..p.clone()
        };
        assert_eq!(crash_only.trials(5, 3), 2 * 2 * 5 * 3);
        // Every size's table (they coexist), for every contender plus a copy, plus slack.
        let mib = p.lab_mib(5);
        let total: u64 = p.sizes.iter().sum();
        assert_eq!(mib, (total * 192 * 3 * 6).div_ceil(1 << 20) + 256);
        assert!(mib > 6 * 200, "room for six 200 MiB tables: {mib}");
        assert_eq!(open_workload(true, true), "recovery");
        assert_eq!(open_workload(false, false), "reopen-warm");
        assert_eq!(interrupted_keys(1200, 3), vec![1201, 1202, 1203]);
    }

    #[test]
    fn sample_math() {
        let stats = IoStats::new();
        let zero = DevStat {
            flushes: Some(0),
            ..DevStat::default()
        };
        let a = Probe {
            dev: Some((zero, zero)),
            io: None,
            acct: stats.snapshot(),
            cpu: Duration::from_micros(1000),
            user: Duration::from_micros(700),
            sys: Duration::from_micros(300),
        };
        stats.record(IoKind::Write, 8192, 2_000_000);
        stats.record(IoKind::Sync, 0, 5_000_000);
        let b = Probe {
            dev: Some((
                DevStat {
                    writes: 4,
                    sectors_written: 32,
                    flushes: Some(2),
                    ..DevStat::default()
                },
                DevStat {
                    writes: 2,
                    sectors_written: 16,
                    flushes: Some(2),
                    ..DevStat::default()
                },
            )),
            io: None,
            acct: stats.snapshot(),
            cpu: Duration::from_micros(1100),
            user: Duration::from_micros(760),
            sys: Duration::from_micros(340),
        };
        let p = crate::device::profile("emmc").unwrap();
        let s = sample(true, &a, &b, Duration::from_millis(10), 2, 1, &p);
        assert_eq!(s.tx_per_s, 200.0);
        assert_eq!(s.data_kib, Some(8.0));
        assert_eq!(s.journal_kib, Some(4.0));
        assert_eq!(s.flushes, Some(2.0));
        assert_eq!(s.dev_writes, Some(3.0));
        assert_eq!(s.write_calls, Some(0.5));
        let l = s.latency.unwrap();
        assert_eq!((l.write, l.sync), (1000.0, 2500.0));
        assert!((l.compute - 1500.0).abs() < 1e-9);
        // Model inputs: (4 - 2 empty flush writes + 2) / 2 = 2 data writes, 12 KiB, 2
        // flushes per transaction, 50 us of CPU.
        assert_eq!(s.write_reqs, Some(2.0));
        assert_eq!(s.cpu_us, Some(50.0));
        assert_eq!((s.user_us, s.sys_us), (Some(30.0), Some(20.0)));
        let c = DeviceCounters {
            write_reqs: 2.0,
            write_kib: 12.0,
            flushes: 2.0,
            ..DeviceCounters::default()
        };
        assert!((s.model_us.unwrap() - p.model_us(&c, 50.0)).abs() < 1e-9);
        let peer = sample(false, &a, &b, Duration::from_millis(10), 2, 1, &p);
        assert_eq!(peer.latency, None);
        assert_eq!(peer.sync_calls, None);
        assert_eq!(
            peer.model_us, s.model_us,
            "the model does not depend on accounting"
        );
        // No device counters (lab none): no model.
        let none_a = Probe { dev: None, ..a };
        let none_b = Probe { dev: None, ..b };
        let n = sample(true, &none_a, &none_b, Duration::from_millis(10), 2, 1, &p);
        assert_eq!((n.model_us, n.write_reqs), (None, None));
        assert_eq!(n.cpu_us, Some(50.0));
    }
}
