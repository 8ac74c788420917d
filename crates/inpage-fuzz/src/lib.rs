//! Mutational fuzzer for `inpage` on stable Rust: damaged database, journal and WAL files
//! of every journal mode are opened every way, every tree is read (iteration, cursors
//! both ways, point lookups), the integrity check runs, and a database that checks takes
//! a commit and a reopen.
//!
//! Invariants:
//! - An input is a pure function of (run seed, index): a corpus entry ([`corpus`]) and a
//!   list of mutations ([`mutate`]) drawn from the input's own seed. So a finding is
//!   replayed from two numbers, and shrinking (dropping mutations) replays sub-lists.
//! - Each input runs on a worker thread under a watchdog: a panic is caught on the
//!   worker ([`exec`]), a hang is an input that does not finish within the time limit.
//!   A hung worker cannot be stopped, so the run ends at a hang; the `inpage-fuzz`
//!   binary runs workers as child processes and restarts them, which also catches aborts
//!   (allocation failure) that no in-process guard can.
//! - A finding is what the engine must never do on any input (see [`exec`]); typed
//!   errors are the expected answer to bad input and are only counted.

pub mod corpus;
pub mod exec;
pub mod files;
pub mod mutate;
pub mod rng;

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use std::sync::Arc;

use corpus::{Base, Files, Target};
use exec::{Finding, FindingKind, Outcome, State};
use mutate::Mutation;
use rng::Rng;

/// One generated input.
#[derive(Clone, Debug)]
pub struct Input {
    pub index: u64,
    pub base: usize,
    pub mutations: Vec<Mutation>,
    /// Whether the commit probe runs on opens that check.
    pub write: bool,
    /// Whether to judge the state read against the committed states when the input
    /// only lost commits (see [`Input::oracle`]).
    pub state_oracle: bool,
}

impl Input {
    pub fn files(&self, corpus: &[Base]) -> Files {
        mutate::apply_all(&corpus[self.base].files, &self.mutations, corpus)
    }

    /// Whether the mutations can only have lost commits (the WAL cut short or removed,
    /// as a crash or a careless user might leave it): then what the database reads must
    /// be a state its workload committed.
    pub fn loses_only(&self) -> bool {
        self.mutations.iter().all(|m| {
            matches!(
                m,
                Mutation::Truncate { t: Target::Wal, .. } | Mutation::Remove { t: Target::Wal }
            )
        })
    }

    /// The committed states the input must read as, when [`Input::loses_only`].
    /// Only bases of modes that promise atomicity hold a committed state to begin with.
    pub fn oracle(&self, corpus: &[Base]) -> Option<Arc<Vec<State>>> {
        let b = &corpus[self.base];
        (self.state_oracle && self.loses_only() && b.mode.promises_atomicity())
            .then(|| b.states.clone())
    }
}

/// Most mutations stacked on one input.
pub const MAX_MUTATIONS: u64 = 8;

/// Generate input `index` of the run seeded `seed`. `wal_oracle`: also draw WAL
/// truncations and judge inputs that only lost commits against the committed states.
pub fn generate(corpus: &[Base], seed: u64, index: u64, wal_oracle: bool) -> Input {
    let mut r = Rng::new(rng::input_seed(seed, index));
    let base = r.index(corpus.len());
    // Mostly few mutations (a damaged field reaches deep code only if the rest is
    // intact), sometimes many.
    let mut n = 1;
    while n < MAX_MUTATIONS && r.pct(45) {
        n += 1;
    }
    if let Some(wal) = corpus[base]
        .files
        .wal
        .as_ref()
        .filter(|_| wal_oracle && r.pct(12))
    {
        // A WAL cut short anywhere (or at a frame boundary), checked against the
        // committed states.
        let len = if r.pct(50) {
            r.index(wal.len() + 1)
        } else {
            let frame = corpus[base].page_size as usize + 24;
            32 + frame * r.index(wal.len() / frame + 1)
        };
        return Input {
            index,
            base,
            mutations: vec![Mutation::Truncate {
                t: Target::Wal,
                len,
            }],
            write: r.pct(35),
            state_oracle: true,
        };
    }
    let page_size = corpus[base].page_size;
    let mut files = corpus[base].files.clone();
    let mut mutations = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let m = mutate::draw(&mut r, &files, page_size, corpus);
        mutate::apply(&mut files, &m, corpus);
        mutations.push(m);
    }
    Input {
        index,
        base,
        mutations,
        write: r.pct(35),
        state_oracle: wal_oracle,
    }
}

type Job = (Files, bool, Option<Arc<Vec<State>>>);

/// A worker thread running inputs, with a watchdog on each.
pub struct Worker {
    jobs: mpsc::Sender<Job>,
    results: mpsc::Receiver<Outcome>,
}

impl Default for Worker {
    fn default() -> Self {
        Worker::new()
    }
}

impl Worker {
    pub fn new() -> Worker {
        let (jobs, job_rx) = mpsc::channel::<Job>();
        let (res_tx, results) = mpsc::channel();
        std::thread::Builder::new()
            .name("inpage-fuzz-worker".into())
            .spawn(move || {
                while let Ok((files, write, states)) = job_rx.recv() {
                    if res_tx
                        .send(exec::run(&files, write, states.as_deref().map(|v| &v[..])))
                        .is_err()
                    {
                        break;
                    }
                }
            })
            .expect("spawning the fuzz worker thread");
        Worker { jobs, results }
    }

    /// Run one input; a hang replaces the worker (the hung thread is abandoned).
    pub fn run(
        &mut self,
        files: Files,
        write: bool,
        states: Option<Arc<Vec<State>>>,
        limit: Duration,
    ) -> Outcome {
        let sent = self.jobs.send((files, write, states));
        let res = match sent {
            Ok(()) => self.results.recv_timeout(limit),
            Err(_) => Err(mpsc::RecvTimeoutError::Disconnected),
        };
        match res {
            Ok(o) => o,
            Err(e) => {
                *self = Worker::new();
                Outcome {
                    finding: Some(Finding {
                        kind: FindingKind::Hang,
                        open_mode: None,
                        detail: match e {
                            mpsc::RecvTimeoutError::Timeout => {
                                format!("input still running after {limit:?}")
                            }
                            mpsc::RecvTimeoutError::Disconnected => "worker thread died".into(),
                        },
                    }),
                    ..Outcome::default()
                }
            }
        }
    }
}

/// Shrink a finding: drop mutations one at a time while the finding keeps its
/// signature. Hangs are not shrunk (each try would abandon a spinning thread).
pub fn shrink(
    corpus: &[Base],
    input: &Input,
    finding: &Finding,
    worker: &mut Worker,
    limit: Duration,
) -> (Input, Finding) {
    let mut best = input.clone();
    let mut best_finding = finding.clone();
    if finding.kind == FindingKind::Hang {
        return (best, best_finding);
    }
    let sig = finding.signature();
    let mut i = 0;
    while i < best.mutations.len() {
        let mut cand = best.clone();
        cand.mutations.remove(i);
        let out = worker.run(cand.files(corpus), cand.write, cand.oracle(corpus), limit);
        match out.finding {
            Some(f) if f.signature() == sig => {
                best = cand;
                best_finding = f;
            }
            _ => i += 1,
        }
    }
    if best.write {
        let mut cand = best.clone();
        cand.write = false;
        if let Some(f) = worker
            .run(cand.files(corpus), false, cand.oracle(corpus), limit)
            .finding
        {
            if f.signature() == sig {
                best = cand;
                best_finding = f;
            }
        }
    }
    (best, best_finding)
}

/// A finding, shrunk, as saved.
#[derive(Clone, Debug)]
pub struct Found {
    pub seed: u64,
    pub input: Input,
    pub finding: Finding,
    pub dir: Option<PathBuf>,
}

/// Save a finding's files and description under `out`; returns its directory.
pub fn save(
    out: &Path,
    corpus: &[Base],
    seed: u64,
    input: &Input,
    finding: &Finding,
) -> std::io::Result<PathBuf> {
    let dir = out.join(format!("{}-s{seed}-i{}", finding.kind.name(), input.index));
    input.files(corpus).save(&dir)?;
    let text = format!(
        "finding: {}\nsignature: {}\nopen mode: {}\nseed: {seed}\nindex: {}\nbase: {}\nwrite probe: {}\nmutations:\n{}\n",
        finding.detail,
        finding.signature(),
        finding.open_mode.map_or("file's own", |m| m.name()),
        input.index,
        corpus[input.base].name,
        input.write,
        input
            .mutations
            .iter()
            .map(|m| format!("  {m:?}"))
            .collect::<Vec<_>>()
            .join("\n"),
    );
    std::fs::write(dir.join("finding.txt"), text)?;
    Ok(dir)
}

/// Settings of a run.
#[derive(Clone, Debug)]
pub struct RunConfig {
    pub seed: u64,
    /// First input index (a restarted worker continues after the input that killed its
    /// predecessor).
    pub start: u64,
    /// Number of inputs (from `start`).
    pub inputs: u64,
    /// Stop after this long even if inputs remain.
    pub max_time: Option<Duration>,
    /// Per-input time limit (a hang).
    pub limit: Duration,
    /// Where to save findings (none: keep them in the report only).
    pub out: Option<PathBuf>,
    /// Draw WAL truncations and judge inputs that only lost commits (see
    /// [`generate`]).
    pub wal_oracle: bool,
    /// Called before each input with its index (the binary records it so a supervisor
    /// knows which input killed a worker process).
    pub before_input: Option<fn(u64)>,
}

/// Totals of a run.
#[derive(Clone, Debug, Default)]
pub struct Report {
    pub inputs: u64,
    pub opened: u64,
    pub checked_ok: u64,
    pub committed: u64,
    pub findings: Vec<Found>,
    /// Findings not kept because [`MAX_SAVED_PER_SIGNATURE`] of their signature were
    /// already kept (counted, neither shrunk nor saved).
    pub repeats: u64,
    /// The run ended at a hang (the hung thread still runs; exit the process).
    pub hung: bool,
    /// The next index to run.
    pub next: u64,
}

/// Findings of one signature shrunk and kept per run: a known finding that many inputs
/// reach (a damaged field every mutation of it trips) must not fill the disk or spend
/// the run shrinking copies of itself.
pub const MAX_SAVED_PER_SIGNATURE: u32 = 3;

/// Run a fuzz campaign.
pub fn run(corpus: &[Base], cfg: &RunConfig) -> Report {
    let started = std::time::Instant::now();
    let mut worker = Worker::new();
    let mut seen: std::collections::HashMap<String, u32> = Default::default();
    let mut report = Report {
        next: cfg.start,
        ..Report::default()
    };
    for index in cfg.start..cfg.start.saturating_add(cfg.inputs) {
        if cfg.max_time.is_some_and(|t| started.elapsed() >= t) {
            break;
        }
        if let Some(f) = cfg.before_input {
            f(index);
        }
        let input = generate(corpus, cfg.seed, index, cfg.wal_oracle);
        let out = worker.run(
            input.files(corpus),
            input.write,
            input.oracle(corpus),
            cfg.limit,
        );
        report.inputs += 1;
        report.next = index + 1;
        report.opened += out.opened as u64;
        report.checked_ok += out.checked_ok as u64;
        report.committed += out.committed as u64;
        if let Some(f) = out.finding {
            let hung = f.kind == FindingKind::Hang;
            let count = seen.entry(f.signature()).or_default();
            *count += 1;
            if *count > MAX_SAVED_PER_SIGNATURE && !hung {
                report.repeats += 1;
                continue;
            }
            let (input, finding) = shrink(corpus, &input, &f, &mut worker, cfg.limit);
            let dir = cfg
                .out
                .as_ref()
                .and_then(|o| save(o, corpus, cfg.seed, &input, &finding).ok());
            report.findings.push(Found {
                seed: cfg.seed,
                input,
                finding,
                dir,
            });
            if hung {
                report.hung = true;
                break;
            }
        }
    }
    report
}
