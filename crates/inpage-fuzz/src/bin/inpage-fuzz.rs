//! `inpage-fuzz`: long fuzz runs and replay of saved findings.
//!
//! `run` supervises worker processes: each worker runs inputs in order and records the
//! index it is on in a small file before each one; a worker that dies without printing
//! its totals (an abort, an allocation failure) is a finding at that index, and a new
//! worker continues after it. A worker that hit a hang prints its totals and exits (its
//! hung thread dies with it). Exit code 1 when there were findings.

use std::io::{BufRead, BufReader};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use clap::{Args, Parser, Subcommand};
use inpage_fuzz::corpus::Files;
use inpage_fuzz::exec::{self, Finding, FindingKind};
use inpage_fuzz::{corpus, generate, save, RunConfig};

#[derive(Parser)]
#[command(
    name = "inpage-fuzz",
    about = "Fuzz inpage with damaged database, journal and WAL files"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Args, Clone)]
struct RunArgs {
    /// Run seed: inputs are a pure function of (seed, index).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Number of inputs.
    #[arg(long, default_value_t = 10_000)]
    inputs: u64,
    /// Stop after this many seconds even if inputs remain.
    #[arg(long)]
    seconds: Option<u64>,
    /// Per-input time limit in seconds (longer is a hang).
    #[arg(long, default_value_t = 20)]
    limit: u64,
    /// Also cut WAL files short and require a committed state after such inputs
    /// (finds WAL frames older than the last checkpoint replayed over newer pages).
    #[arg(long)]
    wal_oracle: bool,
    /// Directory for findings.
    #[arg(long, default_value = "fuzz-findings")]
    out: PathBuf,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run a campaign under a supervisor that survives aborting inputs.
    Run(RunArgs),
    /// One worker process (used by `run`).
    #[command(hide = true)]
    Worker {
        #[command(flatten)]
        args: RunArgs,
        #[arg(long)]
        start: u64,
        #[arg(long)]
        inflight: PathBuf,
    },
    /// Run the files saved in a finding directory and print the outcome.
    Replay { dir: PathBuf },
    /// Regenerate input INDEX of the run seeded SEED, run it (with its oracle) and print
    /// the outcome; `--save DIR` also writes its files.
    Input {
        #[arg(long)]
        seed: u64,
        #[arg(long)]
        index: u64,
        #[arg(long)]
        wal_oracle: bool,
        #[arg(long)]
        save: Option<PathBuf>,
    },
    /// List the seed corpus (entry, file sizes) and how each entry opens.
    Corpus,
    /// Save the files of one corpus entry (by the name `corpus` lists), to damage by
    /// hand into a regression input (for example after a format change).
    Base { name: String, save: PathBuf },
}

fn save_base(name: &str, dir: &std::path::Path) -> Result<bool, String> {
    let corpus = corpus::build();
    let base = corpus
        .iter()
        .find(|b| b.name == name)
        .ok_or_else(|| format!("no corpus entry named {name:?} (see `inpage-fuzz corpus`)"))?;
    base.files
        .save(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    println!("saved {name} to {}", dir.display());
    Ok(true)
}

static INFLIGHT: OnceLock<std::fs::File> = OnceLock::new();

fn record_inflight(index: u64) {
    if let Some(f) = INFLIGHT.get() {
        let _ = f.write_at(&index.to_le_bytes(), 0);
    }
}

fn worker(args: &RunArgs, start: u64, inflight: PathBuf) -> Result<bool, String> {
    let f = std::fs::File::create(&inflight).map_err(|e| format!("{}: {e}", inflight.display()))?;
    let _ = INFLIGHT.set(f);
    exec::install_panic_hook();
    let corpus = corpus::build();
    let report = inpage_fuzz::run(
        &corpus,
        &RunConfig {
            seed: args.seed,
            start,
            inputs: args.inputs.saturating_sub(start),
            max_time: args.seconds.map(Duration::from_secs),
            limit: Duration::from_secs(args.limit),
            out: Some(args.out.clone()),
            wal_oracle: args.wal_oracle,
            before_input: Some(record_inflight),
        },
    );
    for f in &report.findings {
        println!(
            "finding {} at index {}: {} ({})",
            f.finding.kind.name(),
            f.input.index,
            f.finding.detail.lines().next().unwrap_or(""),
            f.dir
                .as_ref()
                .map_or("not saved".into(), |d| d.display().to_string())
        );
    }
    println!(
        "totals inputs={} opened={} checked_ok={} committed={} findings={} next={} hung={}",
        report.inputs,
        report.opened,
        report.checked_ok,
        report.committed,
        report.findings.len() as u64 + report.repeats,
        report.next,
        report.hung as u8
    );
    Ok(report.findings.is_empty())
}

#[derive(Default)]
struct Totals {
    inputs: u64,
    opened: u64,
    checked_ok: u64,
    committed: u64,
    findings: u64,
}

fn field(line: &str, name: &str) -> Option<u64> {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(name)?.strip_prefix('=')?.parse().ok())
}

fn supervise(args: &RunArgs) -> Result<bool, String> {
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    std::fs::create_dir_all(&args.out).map_err(|e| format!("{}: {e}", args.out.display()))?;
    let inflight = args.out.join(format!("inflight-{}", args.seed));
    let started = Instant::now();
    let mut next = 0u64;
    let mut t = Totals::default();
    let mut corpus_cache = None;
    while next < args.inputs {
        let remaining = args
            .seconds
            .map(|s| s.saturating_sub(started.elapsed().as_secs()));
        if remaining == Some(0) {
            break;
        }
        let mut cmd = Command::new(&exe);
        cmd.arg("worker")
            .args(["--seed", &args.seed.to_string()])
            .args(["--inputs", &args.inputs.to_string()])
            .args(["--limit", &args.limit.to_string()])
            .arg("--out")
            .arg(&args.out)
            .args(["--start", &next.to_string()])
            .args(args.wal_oracle.then_some("--wal-oracle"))
            .arg("--inflight")
            .arg(&inflight)
            .stdout(Stdio::piped());
        if let Some(s) = remaining {
            cmd.args(["--seconds", &s.to_string()]);
        }
        let mut child = cmd.spawn().map_err(|e| format!("spawning worker: {e}"))?;
        let stdout = child.stdout.take().ok_or("worker has no stdout")?;
        let mut totals_line = None;
        for line in BufReader::new(stdout).lines() {
            let line = line.map_err(|e| format!("reading worker output: {e}"))?;
            if line.starts_with("totals ") {
                totals_line = Some(line);
            } else {
                println!("{line}");
            }
        }
        let status = child
            .wait()
            .map_err(|e| format!("waiting for worker: {e}"))?;
        match totals_line {
            Some(l) => {
                t.inputs += field(&l, "inputs").unwrap_or(0);
                t.opened += field(&l, "opened").unwrap_or(0);
                t.checked_ok += field(&l, "checked_ok").unwrap_or(0);
                t.committed += field(&l, "committed").unwrap_or(0);
                t.findings += field(&l, "findings").unwrap_or(0);
                next = field(&l, "next").unwrap_or(args.inputs);
                if field(&l, "hung") != Some(1) {
                    // Finished its inputs or its time bound.
                    break;
                }
            }
            None => {
                // The worker died inside an input: that input is a finding.
                let bytes = std::fs::read(&inflight).unwrap_or_default();
                let index = bytes
                    .get(..8)
                    .and_then(|b| b.try_into().ok())
                    .map(u64::from_le_bytes)
                    .unwrap_or(next);
                let corpus = corpus_cache.get_or_insert_with(corpus::build);
                let input = generate(corpus, args.seed, index, args.wal_oracle);
                let finding = Finding {
                    kind: FindingKind::Abort,
                    open_mode: None,
                    detail: format!("worker process died: {status}"),
                };
                let dir = save(&args.out, corpus, args.seed, &input, &finding)
                    .map_err(|e| format!("saving finding: {e}"))?;
                println!(
                    "finding abort at index {index}: {status} ({})",
                    dir.display()
                );
                t.inputs += index.saturating_sub(next) + 1;
                t.findings += 1;
                next = index + 1;
            }
        }
    }
    let _ = std::fs::remove_file(&inflight);
    println!(
        "seed={} inputs={} opens_ok={} checked_ok={} commits={} findings={} wall={:.0}s",
        args.seed,
        t.inputs,
        t.opened,
        t.checked_ok,
        t.committed,
        t.findings,
        started.elapsed().as_secs_f64()
    );
    Ok(t.findings == 0)
}

fn run_input(
    seed: u64,
    index: u64,
    wal_oracle: bool,
    save_to: Option<PathBuf>,
) -> Result<bool, String> {
    exec::install_panic_hook();
    let corpus = corpus::build();
    let input = generate(&corpus, seed, index, wal_oracle);
    println!("base {}: {:?}", corpus[input.base].name, input.mutations);
    let files = input.files(&corpus);
    if let Some(dir) = save_to {
        files
            .save(&dir)
            .map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let oracle = input.oracle(&corpus);
    let out = exec::run(&files, input.write, oracle.as_deref().map(|v| &v[..]));
    print_outcome(out)
}

fn replay(dir: &std::path::Path) -> Result<bool, String> {
    exec::install_panic_hook();
    let files = Files::load(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    print_outcome(exec::run(&files, true, None))
}

fn print_outcome(out: exec::Outcome) -> Result<bool, String> {
    println!(
        "opened={} checked_ok={} committed={}",
        out.opened, out.checked_ok, out.committed
    );
    match out.finding {
        Some(f) => {
            println!(
                "finding {} (open mode {}): {}",
                f.kind.name(),
                f.open_mode.map_or("file's own", |m| m.name()),
                f.detail
            );
            Ok(false)
        }
        None => {
            println!("no finding");
            Ok(true)
        }
    }
}

fn list_corpus() -> Result<bool, String> {
    exec::install_panic_hook();
    let corpus = corpus::build();
    let mut ok = true;
    for b in &corpus {
        let states = b.mode.promises_atomicity().then_some(&b.states[..]);
        let out = exec::run(&b.files, true, states);
        ok &= out.finding.is_none() && out.checked_ok > 0;
        let len = |f: Option<&Vec<u8>>| f.map_or("-".to_string(), |v| v.len().to_string());
        println!(
            "{:40} db={:>7} journal={:>7} wal={:>7} opened={} checked_ok={} committed={} {}",
            b.name,
            len(b.files.db.as_ref()),
            len(b.files.journal.as_ref()),
            len(b.files.wal.as_ref()),
            out.opened,
            out.checked_ok,
            out.committed,
            out.finding.map_or(String::new(), |f| format!(
                "FINDING {}: {}",
                f.kind.name(),
                f.detail
            ))
        );
    }
    println!("{} entries", corpus.len());
    Ok(ok)
}

fn main() -> ExitCode {
    let result = match Cli::parse().cmd {
        Cmd::Run(a) => supervise(&a),
        Cmd::Worker {
            args,
            start,
            inflight,
        } => worker(&args, start, inflight),
        Cmd::Replay { dir } => replay(&dir),
        Cmd::Corpus => list_corpus(),
        Cmd::Base { name, save } => save_base(&name, &save),
        Cmd::Input {
            seed,
            index,
            wal_oracle,
            save,
        } => run_input(seed, index, wal_oracle, save),
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
