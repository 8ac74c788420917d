//! `inpage bench multiprocess`: several processes on one database file (issue 39), each
//! contender with the same layout of processes: writers updating one random row per
//! durable transaction, readers reading one random row per transaction, all at once for
//! a fixed time.
//!
//! Each trial loads `--records` rows into a fresh database in the lab, closes it, then
//! starts one process per writer and reader: this binary again, as the hidden
//! `bench multiprocess-worker`. A worker opens the store the way the contender's users
//! do (`Contender::open_busy`: the engine's defaults, inpage's SQL front end, stock SQLite
//! with the apps' WAL settings), waiting up to `BUSY` (the engine's own default) for the
//! others from its first statement on, says
//! `ready` on its standard output and waits for `go` on its standard input, so every
//! process starts together after all have opened; it then runs transactions until its
//! time is up, closes the store (outside the measurement) and prints one JSON line: its
//! transactions' latencies, its errors and its measured time.
//!
//! Reported per layout and contender, medians over rounds (contenders interleaved in each
//! round): write and read transactions per second (summed over the processes of each
//! role), their p50/p99 latency over every transaction of every round, and errors (a
//! transaction that failed, `SQLITE_BUSY` after the timeout among them). The layout with
//! one writer alone is the single-process reference.
//!
//! Invariants: a worker that fails to open, never says `ready`, or exits without its
//! result line fails the trial with the contender's name and the worker's standard error
//! (never a silently missing process); every worker is killed and reaped before a trial
//! returns, also on failure; the lab's loop devices and mounts are released by `Lab`'s
//! drop.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use inpage::vfs::IoStats;
use serde::{Deserialize, Serialize};

use crate::contender::Contender;
use crate::lab::{check_interrupted, Lab};
use crate::workload::{mobibench_value, Op};

/// What every worker waits for another process before `SQLITE_BUSY` / `Error::Busy`:
/// `Config::busy_timeout`'s default, and what `inpage sql` uses.
pub const BUSY: Duration = Duration::from_secs(5);

/// Bytes of the value a writer stores (Mobibench's record size).
const VALUE_BYTES: usize = 100;

/// Writers and readers of one trial, e.g. `1w1r`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Layout {
    pub writers: usize,
    pub readers: usize,
}

impl Layout {
    /// `<n>w`, `<m>r` or `<n>w<m>r`, at least one process, at most 16.
    pub fn parse(s: &str) -> Result<Layout, String> {
        let bad = || format!("--layouts: '{s}' is not <n>w<m>r (e.g. 1w, 1w1r, 2w2r)");
        let (mut writers, mut readers, mut num) = (None, None, String::new());
        for ch in s.trim().chars() {
            match ch {
                '0'..='9' => num.push(ch),
                'w' | 'r' => {
                    let n: usize = num.parse().map_err(|_| bad())?;
                    num.clear();
                    let slot = if ch == 'w' {
                        &mut writers
                    } else {
                        &mut readers
                    };
                    if slot.replace(n).is_some() {
                        return Err(bad());
                    }
                }
                _ => return Err(bad()),
            }
        }
        if !num.is_empty() {
            return Err(bad());
        }
        let l = Layout {
            writers: writers.unwrap_or(0),
            readers: readers.unwrap_or(0),
        };
        match l.writers + l.readers {
            0 => Err(format!("--layouts: '{s}' has no process")),
            n if n > 16 => Err(format!("--layouts: '{s}' has {n} processes (at most 16)")),
            _ => Ok(l),
        }
    }

    pub fn name(&self) -> String {
        match (self.writers, self.readers) {
            (w, 0) => format!("{w}w"),
            (0, r) => format!("{r}r"),
            (w, r) => format!("{w}w{r}r"),
        }
    }
}

/// A worker's role.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
pub enum Role {
    Writer,
    Reader,
}

/// The hidden worker's arguments (`bench multiprocess-worker`).
#[derive(Args, Debug, Clone)]
pub struct WorkerArgs {
    #[arg(long)]
    pub contender: String,
    #[arg(long)]
    pub dir: PathBuf,
    #[arg(long, value_enum)]
    pub role: Role,
    #[arg(long)]
    pub seconds: f64,
    #[arg(long)]
    pub records: i64,
    #[arg(long)]
    pub seed: u64,
}

/// What a worker prints when it is done.
#[derive(Debug, Serialize, Deserialize)]
pub struct WorkerResult {
    pub role: Role,
    /// Latency of every transaction that succeeded, µs.
    pub latencies_us: Vec<f64>,
    pub errors: u64,
    pub first_error: Option<String>,
    /// The worker's measured time, from `go` to its last transaction's end.
    pub seconds: f64,
}

/// The worker: open, `ready`, wait for `go`, run, close, print the result.
pub fn worker_main(a: &WorkerArgs) -> Result<(), String> {
    let c = crate::contender::select(std::slice::from_ref(&a.contender))?
        .pop()
        .ok_or("no contender")?;
    let stats = Arc::new(IoStats::new());
    let mut store = c.open_busy(&a.dir, &stats, BUSY)?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "ready").map_err(|e| format!("stdout: {e}"))?;
    out.flush().map_err(|e| format!("stdout: {e}"))?;
    let mut line = String::new();
    std::io::stdin()
        .read_line(&mut line)
        .map_err(|e| format!("stdin: {e}"))?;
    if line.trim() != "go" {
        return Err(format!("worker: expected 'go', got {line:?}"));
    }
    let value = mobibench_value(VALUE_BYTES, true);
    let mut x = a.seed | 1;
    let mut next_key = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % a.records as u64) as i64
    };
    let (mut latencies_us, mut errors, mut first_error) = (Vec::new(), 0u64, None);
    let t0 = Instant::now();
    let end = t0 + Duration::from_secs_f64(a.seconds);
    let mut now = t0;
    while now < end {
        let k = next_key();
        let r = match a.role {
            Role::Writer => store.txn(Op::Update, &[k], &value),
            Role::Reader => store.get(k).and_then(|found| {
                found
                    .then_some(())
                    .ok_or_else(|| format!("row {k} is missing"))
            }),
        };
        let t = Instant::now();
        match r {
            Ok(()) => latencies_us.push((t - now).as_secs_f64() * 1e6),
            Err(e) => {
                errors += 1;
                first_error.get_or_insert(e);
            }
        }
        now = t;
    }
    let seconds = (now - t0).as_secs_f64();
    store.close()?;
    let r = WorkerResult {
        role: a.role,
        latencies_us,
        errors,
        first_error,
        seconds,
    };
    let s = serde_json::to_string(&r).map_err(|e| format!("json: {e}"))?;
    writeln!(out, "{s}").map_err(|e| format!("stdout: {e}"))?;
    Ok(())
}

/// One trial's workers: killed and reaped when dropped, whatever happened.
struct Workers(Vec<(Child, Option<ChildStdin>, BufReader<ChildStdout>)>);

impl Drop for Workers {
    fn drop(&mut self) {
        for (child, stdin, _) in &mut self.0 {
            drop(stdin.take());
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A worker's standard error, for a failure's message.
fn stderr_of(child: &mut Child) -> String {
    use std::io::Read;
    let mut s = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut s);
    }
    s.trim().to_string()
}

/// The bench's parameters.
#[derive(Clone, Debug)]
pub struct Params {
    pub seconds: f64,
    pub records: i64,
    pub rounds: u32,
    pub seed: u64,
}

/// One trial's results, per role.
#[derive(Clone, Debug, Default)]
pub struct Trial {
    pub write_tps: f64,
    pub read_tps: f64,
    pub write_us: Vec<f64>,
    pub read_us: Vec<f64>,
    pub errors: u64,
    pub first_error: Option<String>,
}

/// Load the table, then run the layout's processes together.
pub fn trial(
    exe: &Path,
    dir: &Path,
    c: &Contender,
    l: Layout,
    p: &Params,
    round: u32,
) -> Result<Trial, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    {
        let stats = Arc::new(IoStats::new());
        let mut s = c.open(dir, &stats)?;
        let keys: Vec<i64> = (0..p.records).collect();
        s.preload(&keys, &mobibench_value(VALUE_BYTES, false))?;
        s.close()?;
    }
    let roles = std::iter::repeat_n(Role::Writer, l.writers)
        .chain(std::iter::repeat_n(Role::Reader, l.readers));
    let mut workers = Workers(Vec::new());
    for (i, role) in roles.enumerate() {
        let seed = p
            .seed
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .wrapping_add(u64::from(round) << 32 | i as u64);
        let mut child = Command::new(exe)
            .args(["bench", "multiprocess-worker", "--contender", &c.name])
            .arg("--dir")
            .arg(dir)
            .args([
                "--role",
                match role {
                    Role::Writer => "writer",
                    Role::Reader => "reader",
                },
            ])
            .args(["--seconds", &p.seconds.to_string()])
            .args(["--records", &p.records.to_string()])
            .args(["--seed", &seed.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("{}: spawn worker: {e}", c.name))?;
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().expect("piped"));
        workers.0.push((child, stdin, stdout));
    }
    let fail = |child: &mut Child, what: &str| {
        let _ = child.kill();
        let _ = child.wait();
        format!("{}: worker {what}: {}", c.name, stderr_of(child))
    };
    for (child, _, out) in &mut workers.0 {
        let mut line = String::new();
        match out.read_line(&mut line) {
            Ok(_) if line.trim() == "ready" => {}
            _ => return Err(fail(child, "did not open")),
        }
    }
    for (child, stdin, _) in &mut workers.0 {
        let sent = stdin
            .as_mut()
            .map(|s| s.write_all(b"go\n").and_then(|()| s.flush()));
        if !matches!(sent, Some(Ok(()))) {
            return Err(fail(child, "did not take 'go'"));
        }
    }
    let mut t = Trial::default();
    for (child, _, out) in &mut workers.0 {
        let mut line = String::new();
        let r: WorkerResult = match out.read_line(&mut line) {
            Ok(n) if n > 0 => serde_json::from_str(line.trim())
                .map_err(|e| format!("{}: worker result: {e}", c.name))?,
            _ => return Err(fail(child, "ended without a result")),
        };
        let status = child.wait().map_err(|e| format!("{}: wait: {e}", c.name))?;
        if !status.success() {
            return Err(fail(child, &format!("exited with {status}")));
        }
        let tps = r.latencies_us.len() as f64 / r.seconds.max(1e-9);
        match r.role {
            Role::Writer => {
                t.write_tps += tps;
                t.write_us.extend(r.latencies_us);
            }
            Role::Reader => {
                t.read_tps += tps;
                t.read_us.extend(r.latencies_us);
            }
        }
        t.errors += r.errors;
        if t.first_error.is_none() {
            t.first_error = r.first_error;
        }
    }
    Ok(t)
}

/// Latency percentiles, µs.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Latency {
    pub p50: f64,
    pub p99: f64,
}

/// A result row.
#[derive(Clone, Debug, Serialize)]
pub struct MpRow {
    pub layout: String,
    pub writers: usize,
    pub readers: usize,
    pub contender: String,
    pub write_tx_per_s_median: f64,
    pub read_tx_per_s_median: f64,
    pub write_tx_per_s_rounds: Vec<f64>,
    pub read_tx_per_s_rounds: Vec<f64>,
    /// Write and read throughput over the baseline's, this layout.
    pub write_ratio_to_baseline: Option<f64>,
    pub read_ratio_to_baseline: Option<f64>,
    /// Over every transaction of every round.
    pub write_latency_us: Latency,
    pub read_latency_us: Latency,
    /// Failed transactions over every round, and the first one's message.
    pub errors: u64,
    pub first_error: Option<String>,
}

fn latency(mut v: Vec<f64>) -> Latency {
    v.sort_by(f64::total_cmp);
    Latency {
        p50: crate::report::quantile(&v, 0.50),
        p99: crate::report::quantile(&v, 0.99),
    }
}

/// Every round, every layout, every contender (interleaved), a fresh trial.
pub fn run(
    lab: &Lab,
    contenders: &[Contender],
    layouts: &[Layout],
    p: &Params,
    baseline: &str,
) -> Result<Vec<MpRow>, String> {
    let exe = std::env::current_exe().map_err(|e| format!("current executable: {e}"))?;
    let mut trials: Vec<Vec<Vec<Trial>>> = vec![vec![Vec::new(); contenders.len()]; layouts.len()];
    let total = p.rounds as usize * layouts.len() * contenders.len();
    let mut seq = 0;
    for round in 0..p.rounds {
        for (li, l) in layouts.iter().enumerate() {
            for (ci, c) in contenders.iter().enumerate() {
                check_interrupted()?;
                seq += 1;
                if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
                    eprint!("\r[{seq}/{total}] {} {}            ", c.name, l.name());
                }
                let dir = lab.root().join(format!("{seq:05}-{}", c.name));
                let t = trial(&exe, &dir, c, *l, p, round);
                std::fs::remove_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
                trials[li][ci].push(t?);
            }
        }
    }
    if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        eprintln!();
    }
    let med = |v: &[f64]| crate::report::median(v).unwrap_or(f64::NAN);
    let mut rows = Vec::new();
    for (li, l) in layouts.iter().enumerate() {
        let mut layout_rows: Vec<MpRow> = contenders
            .iter()
            .enumerate()
            .map(|(ci, c)| {
                let ts = &trials[li][ci];
                let w: Vec<f64> = ts.iter().map(|t| t.write_tps).collect();
                let r: Vec<f64> = ts.iter().map(|t| t.read_tps).collect();
                MpRow {
                    layout: l.name(),
                    writers: l.writers,
                    readers: l.readers,
                    contender: c.name.clone(),
                    write_tx_per_s_median: med(&w),
                    read_tx_per_s_median: med(&r),
                    write_tx_per_s_rounds: w,
                    read_tx_per_s_rounds: r,
                    write_ratio_to_baseline: None,
                    read_ratio_to_baseline: None,
                    write_latency_us: latency(ts.iter().flat_map(|t| t.write_us.clone()).collect()),
                    read_latency_us: latency(ts.iter().flat_map(|t| t.read_us.clone()).collect()),
                    errors: ts.iter().map(|t| t.errors).sum(),
                    first_error: ts.iter().find_map(|t| t.first_error.clone()),
                }
            })
            .collect();
        let base = layout_rows
            .iter()
            .find(|r| r.contender == baseline)
            .map(|r| (r.write_tx_per_s_median, r.read_tx_per_s_median));
        for r in &mut layout_rows {
            if let Some((bw, br)) = base {
                r.write_ratio_to_baseline = (l.writers > 0).then(|| r.write_tx_per_s_median / bw);
                r.read_ratio_to_baseline = (l.readers > 0).then(|| r.read_tx_per_s_median / br);
            }
        }
        rows.extend(layout_rows);
    }
    Ok(rows)
}

/// The text table.
pub fn table(rows: &[MpRow]) -> String {
    let mut s = String::from(
        "layout  contender        write tx/s  ratio   w p50_us   w p99_us    read tx/s  ratio   r p50_us   r p99_us  errors\n",
    );
    let ratio = |x: Option<f64>| x.map_or("-".into(), |x| format!("{x:.2}"));
    let num = |x: f64, n: usize| {
        if x.is_nan() {
            format!("{:>n$}", "-")
        } else {
            format!("{x:>n$.0}")
        }
    };
    // A role the layout has none of shows "-", not 0.
    let tps = |procs: usize, v: f64| num(if procs > 0 { v } else { f64::NAN }, 11);
    for r in rows {
        s += &format!(
            "{:<7} {:<15} {} {:>6} {} {}  {} {:>6} {} {} {:>7}\n",
            r.layout,
            r.contender,
            tps(r.writers, r.write_tx_per_s_median),
            ratio(r.write_ratio_to_baseline),
            num(r.write_latency_us.p50, 10),
            num(r.write_latency_us.p99, 10),
            tps(r.readers, r.read_tx_per_s_median),
            ratio(r.read_ratio_to_baseline),
            num(r.read_latency_us.p50, 10),
            num(r.read_latency_us.p99, 10),
            r.errors,
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_parse_and_name_themselves() {
        for (s, w, r) in [("1w", 1, 0), ("1w1r", 1, 1), ("2w2r", 2, 2), ("3r", 0, 3)] {
            let l = Layout::parse(s).unwrap();
            assert_eq!((l.writers, l.readers), (w, r), "{s}");
            assert_eq!(l.name(), s);
        }
        for bad in ["", "0w", "w", "1x", "1w1w", "1w2", "9w9r"] {
            assert!(Layout::parse(bad).is_err(), "{bad:?} accepted");
        }
    }
}
