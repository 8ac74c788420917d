//! `inpage torture`: many cases per mode, chosen deterministically from the seed, judged by
//! the oracle; violations are shrunk and printed as replay specs.
//!
//! Case choice. Cases come in groups of `--cuts-per-workload`: each group draws a workload
//! seed (hence a workload and database parameters) from (run seed, mode name, group
//! index), makes one failure-free reference run of the whole sequence (`--depth` stages,
//! each `--txns` transactions, a process crash and recovery between stages) that
//! measures each stage's disk ops and the sync points inside them, then draws that many
//! crash sequences from the measured ranges. Per stage: the cut is, half the time,
//! uniform over the stage's mutating disk ops (the end included: "power cut after the
//! last ack"), and otherwise *aimed* at a sync that found unsynced writes (a commit's or
//! a recovery's sync), so the cut lands with the writes that sync protects pending;
//! after stage 1, `--first-sync-pct` (default 25) percent of the cuts take the stage's
//! first sync, the one that would also make durable whatever the recovery before it left
//! unsynced. The
//! crash is aimed (`Aim::TearNewest`: the newest multi-sector write torn inside the
//! span its checksum guards) in half the aimed and a quarter of the uniform cuts; one
//! stage in five also gets a second cut 0..32 ops into its reopen. With `--io-errors`
//! the cases instead inject one fault in stage 1 (EIO once / persistent on any counted
//! op, EIO on the Nth sync or write, ENOSPC after a growth budget) and end with a power
//! cut or a process crash (half each). Results do not depend on `--jobs`. A case counts
//! as *torn* when at least one of its crashes left a write partly on the medium.
//!
//! With `--handles 2` every case runs two handles on the database, standing for two
//! processes (`SimVfs::take_turns`: byte-range locks between handles, the side file a disk
//! region): the workload's transactions alternate between them, so every commit is made by
//! a handle whose picture the other's last commit made stale, and a clean reopen closes
//! and opens both. Readers are not held across steps then (a reader's turn would keep
//! the other handle's writer out, as another process's reader does), and a turn refused
//! on a healthy disk is a violation. Only modes that share a file between processes.
//!
//! Shrinking (greedy, on the first `--shrink` violations of a mode): the fewest stages
//! that still violate, then the shortest prefix of the workload steps, then for each
//! stage from the last the earliest cut point (or fault index) that still violates,
//! then dropping recovery cuts and tear aims the violation survives without. Each
//! candidate is a full deterministic re-run.

use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use inpage::Mutant;
use inpage_sim::Aim;

use crate::case::{parse_model, Case, Crash, Fault, Stage};
use crate::mode::{DbParams, Mode};
use crate::oracle::{run_case, CaseRun};
use crate::rng::{mix, Rng};
use crate::workload::{WorkloadKind, WorkloadSpec};

/// `inpage torture`.
#[derive(clap::Args, Clone, Debug)]
pub struct TortureArgs {
    #[arg(long, default_value = "all", help = Mode::help_list("Mode(s): all, or a comma-separated list of"))]
    pub mode: String,
    /// Crash sequences (cases) per mode.
    #[arg(long, default_value_t = 1000)]
    pub crashes: u64,
    /// Stages per crash sequence: cut, recover, continue the workload, cut again...
    #[arg(long, default_value_t = 3)]
    pub depth: usize,
    /// Run seed: the same seed gives the same cases and the same result.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Power-cut model: a list of lose,reorder,tear, or atomic-pages (all three on a
    /// device that writes whole pages atomically), or none.
    #[arg(long, default_value = "lose,reorder,tear")]
    pub model: String,
    /// Workload: mixed, insert, update, delete or long-keys.
    #[arg(long, default_value = "mixed")]
    pub workload: String,
    /// Operations per transaction.
    #[arg(long, default_value_t = 8)]
    pub ops_per_txn: usize,
    /// Transactions per stage of a crash sequence.
    #[arg(long, default_value_t = 8)]
    pub txns: usize,
    /// Percent of the cuts after stage 1 placed at the stage's first sync (right after a
    /// recovery).
    #[arg(long, default_value_t = 25)]
    pub first_sync_pct: u64,
    /// Inject I/O errors (EIO on write/sync/any op, ENOSPC) instead of plain power cuts.
    #[arg(long)]
    pub io_errors: bool,
    /// Handles on the database, each standing for a process: 2 take turns on the
    /// simulated disk (byte-range locks, the side region), the workload's transactions
    /// alternating between them, so each commit finds the other's picture stale. Only
    /// modes that share a file between processes.
    #[arg(long, default_value_t = 1)]
    pub handles: u32,
    /// Run one case from a replay spec printed by an earlier run.
    #[arg(long)]
    pub replay: Option<String>,
    /// Cases drawn per generated workload.
    #[arg(long, default_value_t = 16)]
    pub cuts_per_workload: u64,
    /// Shrink at most this many violations per mode (the rest print unshrunk specs).
    #[arg(long, default_value_t = 3)]
    pub shrink: usize,
    /// Worker threads (results do not depend on it).
    #[arg(long, default_value_t = 1)]
    pub jobs: usize,
    /// Run a deliberately broken engine variant (none, no-sync-before-mark,
    /// no-sync-at-commit, skip-checksum, unsynced-recovery, vote-off-by-one,
    /// wal-past-commit) to show the harness catches it.
    #[arg(long, hide = true, default_value = "none", value_parser = parse_mutant)]
    pub mutant: Mutant,
    /// Same as `--mutant no-sync-before-mark` (kept for older scripts).
    #[arg(long, hide = true)]
    pub broken_journal_sync: bool,
}

fn parse_mutant(s: &str) -> Result<Mutant, String> {
    let m = Mutant::from_name(s).ok_or_else(|| {
        format!(
            "unknown mutant {s:?}; valid: none, {}",
            Mutant::ALL.map(|m| m.name()).join(", ")
        )
    })?;
    crate::planted(m)
}

impl TortureArgs {
    fn effective_mutant(&self) -> Mutant {
        if self.broken_journal_sync && self.mutant == Mutant::None {
            Mutant::NoSyncBeforeMark
        } else {
            self.mutant
        }
    }
}

impl Default for TortureArgs {
    fn default() -> Self {
        TortureArgs {
            mode: "all".into(),
            crashes: 1000,
            depth: 3,
            first_sync_pct: 25,
            seed: 0,
            model: "lose,reorder,tear".into(),
            workload: "mixed".into(),
            ops_per_txn: 8,
            txns: 8,
            io_errors: false,
            handles: 1,
            replay: None,
            cuts_per_workload: 16,
            shrink: 3,
            jobs: 1,
            mutant: Mutant::None,
            broken_journal_sync: false,
        }
    }
}

/// One violation found.
#[derive(Clone, Debug)]
pub struct Violation {
    pub case: Case,
    /// Seed the case was derived from (group seed and case index).
    pub case_seed: u64,
    pub messages: Vec<String>,
    /// The shrunk case, when shrinking ran.
    pub shrunk: Option<Case>,
}

/// Result for one mode.
#[derive(Clone, Debug)]
pub struct ModeReport {
    pub mode: Mode,
    pub crashes: u64,
    /// Cases in which at least one crash tore a write (part of it on the medium).
    pub torn: u64,
    /// Cases in which an injected fault actually fired (I/O-error runs).
    pub faults_fired: u64,
    /// Cases in which a recovery rolled back versions a stealing transaction spilled
    /// before its commit, or a large transaction from page 0 alone (DHL's ordered commit,
    /// which every stealing transaction takes): the cut landed inside that transaction.
    pub stealing: u64,
    pub violations: Vec<Violation>,
}

/// Result of a torture run.
#[derive(Clone, Debug, Default)]
pub struct Report {
    pub modes: Vec<ModeReport>,
}

impl Report {
    pub fn crashes(&self) -> u64 {
        self.modes.iter().map(|m| m.crashes).sum()
    }
    pub fn violations(&self) -> usize {
        self.modes.iter().map(|m| m.violations.len()).sum()
    }
    pub fn torn(&self) -> u64 {
        self.modes.iter().map(|m| m.torn).sum()
    }
    /// The final line: `crashes=N torn=T violations=V`, with a qualifier when some
    /// violations are in modes that promise no atomicity (they do not fail the run).
    pub fn final_line(&self) -> String {
        let unpromised: Vec<&ModeReport> = self
            .modes
            .iter()
            .filter(|m| !m.mode.promises_atomicity())
            .collect();
        let v_unpromised: usize = unpromised.iter().map(|m| m.violations.len()).sum();
        let names: Vec<String> = unpromised.iter().map(|m| m.mode.name()).collect();
        let qualifier = if unpromised.is_empty() {
            String::new()
        } else if unpromised.len() == self.modes.len() {
            format!(
                " (not promised: {} {} no atomicity)",
                names.join(" and "),
                if names.len() == 1 { "has" } else { "have" }
            )
        } else {
            format!(
                " ({v_unpromised} of them not promised: {} {} no atomicity)",
                names.join(" and "),
                if names.len() == 1 { "has" } else { "have" }
            )
        };
        format!(
            "crashes={} torn={} violations={}{qualifier}",
            self.crashes(),
            self.torn(),
            self.violations()
        )
    }
    /// True when no mode that promises atomicity had a violation.
    pub fn passed(&self) -> bool {
        self.modes
            .iter()
            .all(|m| !m.mode.promises_atomicity() || m.violations.is_empty())
    }
}

/// Run `inpage torture`: prints violations and the final `crashes=N violations=V` line on
/// stdout, progress on stderr. Ok(true) when no atomic mode had a violation.
pub fn torture(args: &TortureArgs) -> Result<bool, String> {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let report = run_torture(args, &mut out, true)?;
    writeln!(out, "{}", report.final_line()).map_err(|e| e.to_string())?;
    out.flush().map_err(|e| e.to_string())?;
    Ok(report.passed())
}

fn validate(args: &TortureArgs) -> Result<(Vec<Mode>, WorkloadKind), String> {
    let mut modes = Mode::parse_list(&args.mode)?;
    let kind = WorkloadKind::parse(&args.workload)?;
    parse_model(&args.model, 4096)?;
    match args.handles {
        1 => {}
        2 => {
            // `all` means every mode that can take turns; a named one that cannot is an
            // error, never silently run with one handle.
            if args.mode.trim().eq_ignore_ascii_case("all") {
                modes.retain(|m| m.shares_between_processes());
            } else if let Some(m) = modes.iter().find(|m| !m.shares_between_processes()) {
                return Err(format!(
                    "--handles 2: mode {} keeps its file to one process at a time",
                    m.name()
                ));
            }
        }
        h => return Err(format!("--handles {h} must be 1 or 2")),
    }
    if args.ops_per_txn == 0 || args.ops_per_txn > 10_000 {
        return Err(format!(
            "--ops-per-txn {} must be in 1..=10000",
            args.ops_per_txn
        ));
    }
    if args.txns == 0 || args.txns > 100_000 {
        return Err(format!("--txns {} must be in 1..=100000", args.txns));
    }
    if args.first_sync_pct > 100 {
        return Err(format!(
            "--first-sync-pct {} must be at most 100",
            args.first_sync_pct
        ));
    }
    if args.depth == 0 || args.depth > 64 {
        return Err(format!("--depth {} must be in 1..=64", args.depth));
    }
    if args.cuts_per_workload == 0 {
        return Err("--cuts-per-workload must be at least 1".into());
    }
    if args.jobs == 0 || args.jobs > 256 {
        return Err(format!("--jobs {} must be in 1..=256", args.jobs));
    }
    Ok((modes, kind))
}

/// The library form of `torture`: writes violations (not the final line) to `out`,
/// shows a progress bar on stderr when `progress` and stderr is a terminal.
pub fn run_torture(
    args: &TortureArgs,
    out: &mut dyn Write,
    progress: bool,
) -> Result<Report, String> {
    if let Some(spec) = &args.replay {
        return replay(spec, out);
    }
    crate::planted(args.effective_mutant())?;
    let (modes, kind) = validate(args)?;
    let bar = if progress {
        let b = ProgressBar::with_draw_target(
            Some(args.crashes.saturating_mul(modes.len() as u64)),
            ProgressDrawTarget::stderr(),
        );
        if let Ok(style) = ProgressStyle::with_template(
            "{msg:>14} [{elapsed_precise}] {bar:40} {pos}/{len} crashes ({per_sec}, eta {eta})",
        ) {
            b.set_style(style);
        }
        b
    } else {
        ProgressBar::hidden()
    };
    let mut report = Report::default();
    for mode in modes {
        bar.set_message(mode.name());
        let mr = run_mode(args, mode, kind, &bar)?;
        for (i, viol) in mr.violations.iter().enumerate() {
            print_violation(out, i + 1, &mr, viol).map_err(|e| e.to_string())?;
        }
        bar.suspend(|| {
            eprintln!(
                "{}: crashes={} torn={} violations={}{}{}{}",
                mode.name(),
                mr.crashes,
                mr.torn,
                mr.violations.len(),
                if args.io_errors {
                    format!(" faults-fired={}", mr.faults_fired)
                } else {
                    String::new()
                },
                if mode.journal.capabilities().steals {
                    format!(" in-large-txn={}", mr.stealing)
                } else {
                    String::new()
                },
                if mode.promises_atomicity() {
                    ""
                } else {
                    " (this mode promises no atomicity: violations do not fail the run)"
                }
            )
        });
        report.modes.push(mr);
    }
    bar.finish_and_clear();
    Ok(report)
}

fn print_violation(
    out: &mut dyn Write,
    n: usize,
    mr: &ModeReport,
    v: &Violation,
) -> std::io::Result<()> {
    let note = if mr.mode.promises_atomicity() {
        ""
    } else {
        " (no atomicity promised)"
    };
    writeln!(
        out,
        "violation {n} mode={}{note} seed={}: {}",
        mr.mode.name(),
        v.case_seed,
        v.messages.join("; ")
    )?;
    match &v.shrunk {
        Some(s) => writeln!(
            out,
            "  shrunk: stages {}->{}, steps {}->{}; replay: inpage torture --replay '{}'",
            v.case.depth(),
            s.depth(),
            v.case.steps,
            s.steps,
            s.spec()
        ),
        None => writeln!(
            out,
            "  not shrunk; replay: inpage torture --replay '{}'",
            v.case.spec()
        ),
    }
}

fn replay(spec: &str, out: &mut dyn Write) -> Result<Report, String> {
    let case = Case::parse(spec)?;
    let run = run_case(&case);
    let mut mr = ModeReport {
        mode: case.mode,
        crashes: 1,
        torn: u64::from(run.torn_crashes > 0),
        faults_fired: u64::from(run.fault_fired),
        stealing: u64::from(run.spill_recoveries > 0),
        violations: Vec::new(),
    };
    if run.violated() {
        mr.violations.push(Violation {
            case_seed: case.workload.seed,
            case,
            messages: run.violations,
            shrunk: None,
        });
        print_violation(out, 1, &mr, &mr.violations[0]).map_err(|e| e.to_string())?;
    }
    Ok(Report { modes: vec![mr] })
}

/// Stable per-mode seed component: FNV-1a of the name, so adding a mode to the engine
/// does not change the cases of the others.
fn name_hash(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

struct GroupResult {
    crashes: u64,
    torn: u64,
    faults_fired: u64,
    stealing: u64,
    violations: Vec<Violation>,
}

fn run_mode(
    args: &TortureArgs,
    mode: Mode,
    kind: WorkloadKind,
    bar: &ProgressBar,
) -> Result<ModeReport, String> {
    let per = args.cuts_per_workload;
    let groups = args.crashes.div_ceil(per) as usize;
    let results: Mutex<Vec<Option<GroupResult>>> = Mutex::new((0..groups).map(|_| None).collect());
    let next = AtomicUsize::new(0);
    let error: Mutex<Option<String>> = Mutex::new(None);
    std::thread::scope(|s| {
        for _ in 0..args.jobs.min(groups.max(1)) {
            s.spawn(|| loop {
                let g = next.fetch_add(1, Ordering::Relaxed);
                if g >= groups {
                    break;
                }
                let n = per.min(args.crashes - g as u64 * per);
                match run_group(args, mode, kind, g as u64, n, bar) {
                    Ok(r) => results.lock().unwrap_or_else(|e| e.into_inner())[g] = Some(r),
                    Err(e) => {
                        *error.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
                        break;
                    }
                }
            });
        }
    });
    if let Some(e) = error.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(e);
    }
    let mut mr = ModeReport {
        mode,
        crashes: 0,
        torn: 0,
        faults_fired: 0,
        stealing: 0,
        violations: Vec::new(),
    };
    for r in results
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .into_iter()
        .flatten()
    {
        mr.crashes += r.crashes;
        mr.torn += r.torn;
        mr.faults_fired += r.faults_fired;
        mr.stealing += r.stealing;
        mr.violations.extend(r.violations);
    }
    // Shrink after the fact so the result is independent of thread scheduling.
    for v in mr.violations.iter_mut().take(args.shrink) {
        v.shrunk = Some(shrink(&v.case));
    }
    Ok(mr)
}

fn run_group(
    args: &TortureArgs,
    mode: Mode,
    kind: WorkloadKind,
    group: u64,
    n: u64,
    bar: &ProgressBar,
) -> Result<GroupResult, String> {
    let gseed = mix(&[args.seed, name_hash(&mode.name()), group]);
    let params = DbParams {
        handles: args.handles,
        ..DbParams::from_seed(gseed)
    };
    let model = parse_model(&args.model, params.page_size)?;
    let workload = WorkloadSpec {
        kind,
        ops_per_txn: args.ops_per_txn,
        txns: args.txns * args.depth,
        seed: gseed,
        page_size: params.page_size,
    };
    let steps = crate::workload::generate(&workload).len();
    let base = Case {
        mode,
        workload,
        params,
        steps,
        stages: vec![
            Stage {
                cut: None,
                crash: Crash::Process,
                rcut: None,
                aim: Aim::Uniform,
            };
            args.depth
        ],
        model,
        fault: None,
        mutant: args.effective_mutant(),
    };
    let mut res = GroupResult {
        crashes: 0,
        torn: 0,
        faults_fired: 0,
        stealing: 0,
        violations: Vec::new(),
    };
    // The reference run is judged too (a process crash after the last ack), but it is
    // not counted as a crash.
    let reference = run_case(&base);
    if reference.violated() {
        res.violations.push(Violation {
            case: base.clone(),
            case_seed: gseed,
            messages: reference.violations.clone(),
            shrunk: None,
        });
    }
    for i in 0..n {
        let cseed = mix(&[gseed, i]);
        let case = draw_case(
            &base,
            &reference,
            cseed,
            args.io_errors,
            args.first_sync_pct,
        );
        let run: CaseRun = run_case(&case);
        res.crashes += 1;
        res.torn += u64::from(run.torn_crashes > 0);
        res.faults_fired += u64::from(run.fault_fired);
        res.stealing += u64::from(run.spill_recoveries > 0);
        if run.violated() {
            res.violations.push(Violation {
                case,
                case_seed: cseed,
                messages: run.violations,
                shrunk: None,
            });
        }
        bar.inc(1);
    }
    Ok(res)
}

/// Draw one case from the reference run's measurements (module docs).
fn draw_case(
    base: &Case,
    reference: &CaseRun,
    seed: u64,
    io_errors: bool,
    first_sync_pct: u64,
) -> Case {
    let mut r = Rng::new(seed);
    let mut c = base.clone();
    if io_errors {
        let crash_seed = r.next_u64();
        c.fault = Some(match r.below(5) {
            0 => Fault::Eio {
                op: r.below(reference.fault_ops.max(1)),
                persistent: false,
            },
            1 => Fault::Eio {
                op: r.below(reference.fault_ops.max(1)),
                persistent: true,
            },
            2 => Fault::Sync {
                nth: r.below(reference.syncs.max(1)),
            },
            3 => Fault::Write {
                nth: r.below(reference.writes.max(1)),
            },
            _ => Fault::Enospc {
                bytes: r.below(reference.written_bytes.max(1)),
            },
        });
        let first = &mut c.stages[0];
        first.crash = if r.pct(50) {
            Crash::Power(crash_seed)
        } else {
            Crash::Process
        };
        first.rcut = r.pct(10).then(|| r.below(32));
        for st in c.stages.iter_mut().skip(1) {
            st.cut = Some(r.below(reference_ops(reference, 1) + 1));
            st.crash = Crash::Power(r.next_u64());
        }
    } else {
        for (k, st) in c.stages.iter_mut().enumerate() {
            let crash_seed = r.next_u64();
            let syncs = reference
                .stages
                .get(k)
                .map_or(&[][..], |s| &s.sync_points[..]);
            let first_sync = k > 0 && !syncs.is_empty() && r.pct(first_sync_pct);
            let aimed = first_sync || (!syncs.is_empty() && r.pct(50));
            st.cut = Some(if first_sync {
                // The first sync after a recovery also makes the recovery's own unsynced
                // writes durable, if it left any: cut right there.
                syncs[0]
            } else if aimed {
                syncs[r.below(syncs.len() as u64) as usize]
            } else {
                r.below(reference_ops(reference, k) + 1)
            });
            st.aim = if r.pct(if aimed { 50 } else { 25 }) {
                Aim::TearNewest
            } else {
                Aim::Uniform
            };
            st.crash = Crash::Power(crash_seed);
            st.rcut = r.pct(20).then(|| r.below(32));
        }
    }
    c
}

/// Disk ops the reference run's stage `k` took (the last measured stage's if fewer).
fn reference_ops(reference: &CaseRun, k: usize) -> u64 {
    reference
        .stages
        .get(k)
        .or(reference.stages.last())
        .map_or(0, |s| s.ops)
}

/// Greedy shrink (see module docs). Returns the input when nothing smaller violates.
pub fn shrink(case: &Case) -> Case {
    let violates = |c: &Case| run_case(c).violated();
    let mut best = case.clone();
    // Fewer stages: a prefix of the sequence with a proportional prefix of the workload.
    let per = best.workload.txns / best.depth().max(1);
    for j in 1..best.depth() {
        let mut c = best.clone();
        c.stages.truncate(j);
        c.workload.txns = per * j;
        c.steps = c.steps.min(crate::workload::generate(&c.workload).len());
        if violates(&c) {
            best = c;
            break;
        }
    }
    for steps in 0..best.steps {
        let c = Case {
            steps,
            ..best.clone()
        };
        if violates(&c) {
            best = c;
            break;
        }
    }
    for k in (0..best.depth()).rev() {
        if let Some(cut) = best.stages[k].cut {
            for x in 0..cut {
                let mut c = best.clone();
                c.stages[k].cut = Some(x);
                if violates(&c) {
                    best = c;
                    break;
                }
            }
        }
    }
    let earlier = |f: Fault, x: u64| match f {
        Fault::Eio { persistent, .. } => Fault::Eio { op: x, persistent },
        Fault::Sync { .. } => Fault::Sync { nth: x },
        Fault::Write { .. } => Fault::Write { nth: x },
        Fault::Enospc { .. } => Fault::Enospc { bytes: x },
    };
    if let Some(f) = best.fault {
        let at = match f {
            Fault::Eio { op, .. } => op,
            Fault::Sync { nth } | Fault::Write { nth } => nth,
            // Bytes shrink by halving: a linear walk over bytes would be far too slow.
            Fault::Enospc { .. } => 0,
        };
        for x in 0..at {
            let c = Case {
                fault: Some(earlier(f, x)),
                ..best.clone()
            };
            if violates(&c) {
                best = c;
                break;
            }
        }
        if let Fault::Enospc { mut bytes } = f {
            while bytes > 0 {
                let c = Case {
                    fault: Some(Fault::Enospc { bytes: bytes / 2 }),
                    ..best.clone()
                };
                if !violates(&c) {
                    break;
                }
                best = c;
                bytes /= 2;
            }
        }
    }
    for k in 0..best.depth() {
        if best.stages[k].rcut.is_some() {
            let mut c = best.clone();
            c.stages[k].rcut = None;
            if violates(&c) {
                best = c;
            }
        }
        if best.stages[k].aim != Aim::Uniform {
            let mut c = best.clone();
            c.stages[k].aim = Aim::Uniform;
            if violates(&c) {
                best = c;
            }
        }
    }
    best
}
