//! The oracle: run one case on a simulated disk, crash it, recover, and judge the result.
//!
//! While the workload runs, the oracle keeps `states[i]`, the model after the i-th
//! acknowledged commit (`commit` returned Ok), and the in-flight state: the model after
//! the transaction whose `commit` returned an error, if any (its outcome is unknown, so
//! both are allowed). Rolled-back transactions, transactions whose body failed before
//! `commit`, and savepoint-rolled-back work never enter the model. The workload stops at
//! the first error.
//!
//! A case is a crash sequence (see `case`): each stage runs its segment of the workload
//! from the state the previous stage's recovery was judged to hold (stage 1 from the
//! empty database), then crashes; the rule below is applied after every crash, and the
//! next stage continues on the database that recovery produced, so a recovery step that
//! matters only for later transactions (tids, invalidations, a log reset) is judged by
//! the crash after them.
//!
//! **The rule.** After the crash (and, if the case says so, a second power cut inside the
//! reopen and a third open), the database must open, pass `inpage::check::check`, and its
//! full scan must equal exactly one of the allowed states:
//! - modes durable at acknowledgement: `states[last]`, or the in-flight state;
//! - `wal-normal` after a power cut: `states[floor..=last]` or the in-flight state, where
//!   `floor` is the last commit acknowledged before a successful explicit checkpoint or
//!   clean close (those sync the log), so the survivors are a prefix of the acknowledged
//!   commits that includes everything made durable on purpose. For a region-backed mode
//!   whose region a cut drops (`nvlog-region-lost`), `floor` also follows the durable
//!   watermark the database reports (`Database::durable_tid`) after each commit.
//!
//! Point gets of every key any allowed state mentions and per-tree counts must then agree
//! with the matched state (a scan and a seek take different paths through the tree), and
//! after the last stage one more commit must succeed (recovery left a working database).
//! `states` restart at each stage from the matched state, which is durable: it is what a
//! crashed disk, whose every byte is on the medium, holds.
//!
//! **Readers.** While a stage runs, a third of the steps open a read transaction that is
//! held for one to four steps: across commits, the spills inside them, rollbacks and
//! checkpoints (a clean close ends them). Each reader's full scan must equal the
//! acknowledged state it started on, checked right before every commit it spans (the
//! transaction's changes made, spilled ones in the file) and when it is let go. A read
//! error counts only on a healthy handle (no power cut yet). Cases with an injected I/O
//! error hold no readers: a reader's read would meet the fault meant for the workload.
//!
//! Error-path rules (any case): a call during which an injected fault fired must not
//! return Ok (the engine must report it, never acknowledge a commit it could not make
//! durable), except ENOSPC, which an open or commit may absorb by deferring a checkpoint
//! or flush (the judged state shows whether anything acknowledged was lost); after a commit or checkpoint failed having written to the disk, the handle
//! must refuse new reads and writes (poisoned) until it is reopened, unless it failed
//! with `Error::NoSpace`, which promises that nothing of it took effect: then the commit
//! did not happen (no in-flight state is allowed) and the handle stays usable. Engine
//! panics are violations too.

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use inpage::check::check;
use inpage::vfs::{AccountingVfs, IoKind, IoStats, Vfs};
use inpage::{Database, ReadableTxn};
use inpage_sim::{FaultPlan, FaultVfs, SimVfs};
use std::path::PathBuf;

use crate::case::{Case, Crash, Fault, Stage};
use crate::rng::{mix, Rng};
use crate::workload::{
    apply_txn, describe_diff, dump, exec_txn_with, generate, show_key, Model, Step, TxnError,
    TxnOutcome, TREES,
};

/// Database path on the simulated disk.
pub const DB: &str = "/torture/db";

/// What one stage's segment did on the disk (the reference run sizes the cuts with it).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StageRun {
    /// Mutating disk ops from the stage's start (stage 1: from the creating open; later
    /// stages: from the end of the recovery before them) to its crash.
    pub ops: u64,
    /// Op indices, on the same scale, of syncs that found unsynced writes: a cut there
    /// refuses the sync with the writes a commit (or a recovery) depends on pending.
    pub sync_points: Vec<u64>,
}

/// What running a case showed.
#[derive(Clone, Debug, Default)]
pub struct CaseRun {
    /// Every rule the case broke (empty = passed).
    pub violations: Vec<String>,
    /// Per stage run (a violation ends the sequence, so maybe fewer than the depth).
    pub stages: Vec<StageRun>,
    /// Ops counted by the fault layer in stage 1 (for choosing `eio@N`).
    pub fault_ops: u64,
    /// `sync_data` calls in stage 1 (for `sync@N`).
    pub syncs: u64,
    /// `write_at` calls in stage 1 (for `write@N`).
    pub writes: u64,
    /// Bytes written or allocated in stage 1: an upper bound of growth (for
    /// `enospc@BYTES`).
    pub written_bytes: u64,
    /// Commits acknowledged over all stages.
    pub acked: usize,
    /// Whether an injected fault fired.
    pub fault_fired: bool,
    /// Crashes of this case (stages, and cuts inside a reopen) that tore a write.
    pub torn_crashes: u64,
    /// Judged recoveries that rolled back versions a stealing transaction had spilled
    /// before its commit, or a large transaction (which DHL commits in order, a stealing
    /// one included) from page 0: cuts that landed inside a large transaction.
    pub spill_recoveries: u64,
}

impl CaseRun {
    pub fn violated(&self) -> bool {
        !self.violations.is_empty()
    }
}

thread_local! {
    /// Judged recoveries that rolled back spilled versions, on this thread (`judge` has
    /// no `CaseRun` at hand; `run_case_disk` reads and resets it around a case).
    static SPILL_RECOVERIES: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Run a case; never panics (an engine panic becomes a violation).
pub fn run_case(case: &Case) -> CaseRun {
    run_case_disk(case).0
}

/// `run_case`, also returning every file of the final disk (after the last judged
/// recovery and its commit), so tests can compare replays byte for byte.
pub fn run_case_disk(case: &Case) -> (CaseRun, Vec<(PathBuf, Vec<u8>)>) {
    SPILL_RECOVERIES.with(|c| c.set(0));
    match catch_unwind(AssertUnwindSafe(|| run_inner(case))) {
        Ok((mut r, disk)) => {
            r.spill_recoveries = SPILL_RECOVERIES.with(|c| c.take());
            let files = disk
                .file_names()
                .into_iter()
                .filter_map(|p| disk.read_file(&p).map(|d| (p, d)))
                .collect();
            (r, files)
        }
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "non-string panic".into());
            (
                CaseRun {
                    violations: vec![format!("panic: {msg}")],
                    ..Default::default()
                },
                Vec::new(),
            )
        }
    }
}

/// Percent of steps that open a reader, and how many steps one is held at most.
const READER_PCT: u64 = 35;
const MAX_HOLD: u64 = 4;

/// A read transaction the oracle holds across later steps (commits, spills inside them,
/// checkpoints), and the state it must go on seeing.
struct HeldReader {
    txn: inpage::ReadTxn,
    /// Index into the segment's `states` of the commit its snapshot is.
    state: usize,
    /// Workload step it was opened at (for messages).
    opened_at: usize,
    /// Segment step before which it is verified and dropped.
    until: usize,
}

impl HeldReader {
    /// The reader's full scan must be its snapshot's state. A read error is a violation
    /// only on a `healthy` handle (no injected fault fired, no power cut yet): a fault
    /// may leave the handle refusing reads, never answering them wrong.
    fn verify(&self, states: &[Model], healthy: bool, when: &str, v: &mut Vec<String>) {
        let want = &states[self.state];
        match dump(&self.txn) {
            Ok(got) if got == *want => {}
            Ok(got) => v.push(format!(
                "a reader opened at step {} on acknowledged commit {} read another state {when}: {}",
                self.opened_at,
                self.state,
                describe_diff(&got, want)
            )),
            Err(e) if healthy => v.push(format!(
                "a reader opened at step {} on acknowledged commit {} failed {when}: {e}",
                self.opened_at, self.state
            )),
            Err(_) => {}
        }
    }
}

/// Ensures a fault that fired during a call made that call fail.
struct FaultWatch {
    plan: Arc<FaultPlan>,
    seen: u64,
    /// A full file system may be absorbed: an open or commit may succeed with its
    /// checkpoint or flush deferred (the log keeps the pages), so a call that met ENOSPC
    /// may return Ok; whether it kept what it acknowledged is judged after the crash.
    absorbs: bool,
}

impl FaultWatch {
    /// Call after an API call returned Ok: a fault injected during it was swallowed.
    fn ok(&mut self, what: &str, out: &mut Vec<String>) {
        let now = self.plan.injected();
        if now > self.seen && !self.absorbs {
            out.push(format!(
                "{what} returned Ok although an injected I/O error fired during it"
            ));
        }
        self.seen = now;
    }
    fn err(&mut self) {
        self.seen = self.plan.injected();
    }
    /// Whether any injected fault fired so far.
    fn fired(&self) -> bool {
        self.plan.injected() > 0
    }
}

/// Step index where each stage's segment starts, plus the end: segment `k` begins after
/// the `k * txns / depth`-th transaction step, so every segment has the same number of
/// transactions (and the checkpoints/reopens between them).
pub fn segment_bounds(steps: &[Step], txns: usize, depth: usize) -> Vec<usize> {
    let depth = depth.max(1);
    let per = txns / depth;
    let mut bounds = vec![0];
    let mut seen = 0usize;
    for (i, s) in steps.iter().enumerate() {
        if bounds.len() == depth {
            break;
        }
        if matches!(s, Step::Txn(_)) {
            seen += 1;
            if per > 0 && seen % per == 0 {
                bounds.push(i + 1);
            }
        }
    }
    while bounds.len() < depth {
        bounds.push(steps.len());
    }
    bounds.push(steps.len());
    bounds
}

/// The run of one stage's segment: the states it acknowledged and how it ended.
struct Segment {
    states: Vec<Model>,
    floor: usize,
    inflight: Option<Model>,
}

fn run_inner(case: &Case) -> (CaseRun, SimVfs) {
    let all_steps = generate(&case.workload);
    let n_steps = case.steps.min(all_steps.len());
    let depth = case.depth().max(1);
    let bounds: Vec<usize> = segment_bounds(&all_steps, case.workload.txns, depth)
        .into_iter()
        .map(|b| b.min(n_steps))
        .collect();
    let mut run = CaseRun::default();
    // INPAGE_TORTURE_TRACE=1 narrates a (replayed) case on stderr, for debugging.
    let trace = std::env::var_os("INPAGE_TORTURE_TRACE").is_some();

    // The nonce stream (journal nonces, WAL salts) comes from the case, so a replay
    // writes the same bytes.
    let mut disk = SimVfs::with_seed(mix(&[case.workload.seed, 0x4E4F_4E43]));
    // Carried to every crashed disk: what a power cut does to memory regions.
    disk.set_regions_persistent(case.mode.regions_persistent());
    // Two handles stand for two processes: they take turns (carried to crashed disks).
    disk.take_turns(case.params.handles > 1);
    let bare_cfg = |d: &SimVfs| {
        case.mode
            .config(Arc::new(d.clone()), case.params, case.mutant)
    };
    let mut base = Model::new();
    let mut carried: Option<Database> = None;
    // The second handle (`handles=2`), opened by each segment and dropped with the first
    // after the crash image is taken.
    let mut other: Option<Database> = None;
    let default_stage = Stage {
        cut: None,
        crash: Crash::Process,
        rcut: None,
        aim: inpage_sim::Aim::Uniform,
    };
    for k in 0..depth {
        let stage = case.stages.get(k).copied().unwrap_or(default_stage);
        let last_stage = k + 1 == depth;
        let v = &mut run.violations;
        let plan = Arc::new(FaultPlan::new());
        let stats = Arc::new(IoStats::new());
        let mut watch = FaultWatch {
            plan: plan.clone(),
            seen: 0,
            absorbs: matches!(case.fault, Some(Fault::Enospc { .. })),
        };
        let ops_start = disk.op_count();
        let syncs_start = disk.sync_points().len();
        if let Some(c) = stage.cut {
            disk.set_power_cut_after(c);
        }
        // Stage 1 creates the database through the fault and accounting layers (the
        // fault is stage 1's); later stages continue on the handle recovery returned.
        let cfg = if k == 0 {
            // FaultVfs outermost so an injected failure reaches neither the counters nor
            // the disk; the accounting layer sizes fault choices for later cases.
            let acct = AccountingVfs::with_stats(Arc::new(disk.clone()), stats.clone());
            match case.fault {
                None => {}
                Some(Fault::Eio { op, persistent }) => plan.fail_op(op, persistent),
                Some(Fault::Sync { nth }) => plan.fail_kind(IoKind::Sync, nth, false),
                Some(Fault::Write { nth }) => plan.fail_kind(IoKind::Write, nth, false),
                Some(Fault::Enospc { bytes }) => plan.enospc_after_bytes(bytes),
            }
            let vfs: Arc<dyn Vfs> = Arc::new(FaultVfs::new(Arc::new(acct), plan.clone()));
            case.mode.config(vfs, case.params, case.mutant)
        } else {
            bare_cfg(&disk)
        };
        let mut db = match carried.take() {
            Some(d) => Some(d),
            None => match Database::open(DB, cfg.clone()) {
                Ok(d) => {
                    watch.ok("open", v);
                    Some(d)
                }
                Err(_) => {
                    watch.err();
                    None
                }
            },
        };
        let seg = run_segment(
            case,
            bounds[k],
            &all_steps[bounds[k]..bounds[k + 1]],
            &base,
            &disk,
            &cfg,
            &mut db,
            &mut other,
            &mut watch,
            v,
            trace,
        );
        let Segment {
            states,
            mut floor,
            inflight,
        } = seg;
        run.acked += states.len() - 1;
        let stage_syncs = disk.sync_points();
        run.stages.push(StageRun {
            ops: disk.op_count() - ops_start,
            sync_points: stage_syncs[syncs_start.min(stage_syncs.len())..]
                .iter()
                .map(|s| s - ops_start)
                .collect(),
        });
        if k == 0 {
            run.fault_ops = plan.ops_seen();
            let snap = stats.snapshot();
            run.syncs = snap.get(IoKind::Sync).calls;
            run.writes = snap.get(IoKind::Write).calls;
            run.written_bytes = snap.get(IoKind::Write).bytes + snap.get(IoKind::Allocate).bytes;
            run.fault_fired = plan.injected() > 0;
        }

        // The crash image is taken with the handle still open: nothing a clean shutdown
        // would do gets to run first.
        let mut crashed = match stage.crash {
            Crash::Power(seed) => {
                let (d, r) = disk.crash_report(seed, case.model, stage.aim);
                run.torn_crashes += u64::from(r.torn_writes > 0);
                d
            }
            Crash::Process => {
                // The OS keeps every write it accepted, synced or not — all acknowledged
                // commits, unless the mode acknowledges them from process memory.
                // A power cut inside the reopen (`rcut`) before recovery made them durable
                // loses what only a memory region held, where regions do not survive
                // power: then only the floor the segment established holds.
                let region_dies = stage.rcut.is_some() && case.mode.power_cut_drops_region();
                if case.mode.survives_process_crash() && !region_dies {
                    floor = states.len() - 1;
                }
                disk.process_crash()
            }
        };
        drop(db);
        drop(other.take());
        if let Some(rc) = stage.rcut {
            crashed.set_power_cut_after(rc);
            drop(Database::open(DB, bare_cfg(&crashed)));
            let seed = match stage.crash {
                Crash::Power(s) => s,
                Crash::Process => 0,
            };
            let (d, r) = crashed.crash_report(mix(&[seed, rc]), case.model, stage.aim);
            run.torn_crashes += u64::from(r.torn_writes > 0);
            crashed = d;
        }
        disk = crashed;

        let mut allowed: Vec<(String, &Model)> = (floor..states.len())
            .map(|i| (format!("after commit {i} of the stage"), &states[i]))
            .collect();
        if let Some(m) = &inflight {
            allowed.push(("with the failed/in-flight commit".into(), m));
        }
        match judge(&disk, case, &allowed, last_stage) {
            Ok((idx, db)) => {
                base = allowed[idx].1.clone();
                carried = db;
            }
            Err(e) => {
                run.violations.push(format!(
                    "{}{e} [acked commits {}, must keep at least {floor}, in-flight: {}]",
                    if depth > 1 {
                        format!("stage {} of {depth}: ", k + 1)
                    } else {
                        String::new()
                    },
                    states.len() - 1,
                    if inflight.is_some() { "yes" } else { "no" }
                ));
                break;
            }
        }
    }
    (run, disk)
}

/// Run one stage's workload segment on `db` (which it may replace on a clean reopen, or
/// leave `None` when that failed). `states[0]` is `base`.
#[allow(clippy::too_many_arguments)]
fn run_segment(
    case: &Case,
    first_step: usize,
    steps: &[Step],
    base: &Model,
    disk: &SimVfs,
    cfg: &inpage::Config,
    db: &mut Option<Database>,
    other: &mut Option<Database>,
    watch: &mut FaultWatch,
    v: &mut Vec<String>,
    trace: bool,
) -> Segment {
    let two = case.params.handles > 1;
    // The second handle joins as a second process would: an open beside the first.
    let open_other = |other: &mut Option<Database>, watch: &mut FaultWatch, v: &mut Vec<String>| {
        match Database::open(DB, cfg.clone()) {
            Ok(d) => {
                watch.ok("open of the second handle", v);
                *other = Some(d);
                true
            }
            Err(e) => {
                if !disk.is_cut() && !watch.fired() {
                    v.push(format!(
                        "the second handle failed to open on a healthy disk: {e}"
                    ));
                }
                watch.err();
                false
            }
        }
    };
    if two && other.is_none() && db.is_some() && !open_other(other, watch, v) {
        return Segment {
            states: vec![base.clone()],
            floor: 0,
            inflight: None,
        };
    }
    // Which handle made the commit or checkpoint that failed (its poison is checked), and
    // whether the other handle had committed since that one last did: then the failed
    // call may have failed in the reload its turn starts with, which leaves the handle
    // to reload again (and recover) at its next turn rather than poisoned.
    let mut failed_on_other = false;
    let mut failed_stale = false;
    // Which handle committed last (two handles): `Some(true)` the second.
    let mut last_by_other: Option<bool> = None;
    let mut states: Vec<Model> = vec![base.clone()];
    let mut floor = 0usize;
    let mut inflight: Option<Model> = None;
    let durable = case.mode.durable_at_ack();
    // The tid of each state, for modes that report which commits are durable without
    // their memory region (`Database::durable_tid`, `nvlog`): losses are allowed only
    // after it, so the floor follows it.
    let mut tids: Vec<u64> = vec![db.as_ref().map_or(0, |d| d.fcc())];
    // A failed commit or checkpoint that changed the disk must poison the handle; one
    // that failed before its first write (e.g. reading a pre-image) leaves nothing to
    // distrust, so the engine may keep the handle usable.
    let mut expect_poison = false;
    let mut ops_before = 0u64;
    let mut stopped = db.is_none();
    // Readers held across steps (module docs), drawn from the case and the segment's
    // place in the workload, never from the disk, so every run of a case holds the same.
    let mut rr = Rng::new(mix(&[case.workload.seed, 0x5245_4144, first_step as u64]));
    let mut readers: Vec<HeldReader> = Vec::new();
    for (i, step) in steps.iter().enumerate() {
        if stopped {
            break;
        }
        let Some(d) = db.as_ref() else { break };
        let last = states.len() - 1;
        let healthy = !disk.is_cut() && !watch.fired();
        readers.retain(|h| {
            let keep = h.until > i;
            if !keep {
                h.verify(&states, healthy, &format!("at step {}", first_step + i), v);
            }
            keep
        });
        if matches!(step, Step::Reopen) {
            // A clean close ends every transaction of the handle.
            for h in readers.drain(..) {
                h.verify(&states, healthy, "before a close", v);
            }
        } else if case.fault.is_none() && rr.pct(READER_PCT) && !two {
            // (Two handles hold no readers across steps: a reader's turn would keep the
            // other handle's writer out, as another process's reader does.)
            match d.begin_read() {
                Ok(txn) => readers.push(HeldReader {
                    txn,
                    state: last,
                    opened_at: first_step + i,
                    until: i + 1 + rr.below(MAX_HOLD) as usize,
                }),
                Err(e) if healthy => v.push(format!(
                    "begin_read at step {} failed on a healthy handle: {e}",
                    first_step + i
                )),
                Err(_) => {}
            }
        }
        if trace {
            let what = match step {
                Step::Txn(t) => format!("txn {:?} of {} ops", t.end, t.ops.len()),
                other => format!("{other:?}"),
            };
            eprintln!("step {i}: {what} (disk ops so far {})", disk.op_count());
        }
        match step {
            Step::Txn(t) => {
                // With two handles the transactions alternate between them, so each
                // commit is made by a handle whose picture the other's commit made stale.
                let on_other = two && (first_step + i) % 2 == 1;
                let d = match (on_other, other.as_ref()) {
                    (false, _) => d,
                    (true, Some(o)) => o,
                    (true, None) => break,
                };
                let outcome = {
                    let fired = watch.fired();
                    exec_txn_with(d, t, || {
                        // The transaction's changes are made (spilled ones are in the file):
                        // the readers must still see their snapshots.
                        let healthy = !disk.is_cut() && !fired;
                        for h in &readers {
                            h.verify(
                                &states,
                                healthy,
                                "while a transaction was about to commit",
                                v,
                            );
                        }
                        ops_before = disk.op_count();
                    })
                };
                match outcome {
                    Ok(TxnOutcome::Committed) => {
                        watch.ok(&format!("commit {}", last + 1), v);
                        last_by_other = Some(on_other);
                        let next = apply_txn(&states[last], t);
                        states.push(next);
                        tids.push(d.fcc());
                        if durable {
                            floor = states.len() - 1;
                        }
                        if let Some(w) = d.durable_tid() {
                            while floor + 1 < states.len() && tids[floor + 1] <= w {
                                floor += 1;
                            }
                        }
                    }
                    Ok(TxnOutcome::RolledBack) => watch.ok("a rolled-back transaction", v),
                    Err(TxnError::Body(e)) => {
                        // Two handles on a healthy disk always get their turn: a refusal
                        // is a turn never given back.
                        if two
                            && !disk.is_cut()
                            && !watch.fired()
                            && matches!(e, inpage::Error::Busy | inpage::Error::Locked { .. })
                        {
                            v.push(format!(
                                "step {}: a handle never got its turn on a healthy disk: {e}",
                                first_step + i
                            ));
                        }
                        watch.err();
                        stopped = true;
                    }
                    // A full file system before anything became visible: the commit did not
                    // happen (its outcome is known) and the handle stays usable.
                    Err(TxnError::Commit(inpage::Error::NoSpace { .. })) => {
                        watch.err();
                        stopped = true;
                    }
                    Err(TxnError::Commit(_)) => {
                        watch.err();
                        inflight = Some(apply_txn(&states[last], t));
                        expect_poison = disk.op_count() > ops_before;
                        failed_on_other = on_other;
                        failed_stale = two && last_by_other == Some(!on_other);
                        stopped = true;
                    }
                }
            }
            Step::Checkpoint => {
                ops_before = disk.op_count();
                match d.checkpoint() {
                    Ok(()) => {
                        watch.ok("checkpoint", v);
                        floor = last;
                    }
                    Err(e) => {
                        watch.err();
                        // `NoSpace`: the log keeps what the checkpoint did not copy.
                        expect_poison = disk.op_count() > ops_before
                            && !matches!(e, inpage::Error::NoSpace { .. });
                        failed_stale = two && last_by_other == Some(true);
                        stopped = true;
                    }
                }
            }
            Step::Reopen => {
                // Both handles close (the last one out is the clean shutdown) and open.
                if let Some(o) = other.take() {
                    if o.close().is_err() {
                        watch.err();
                        stopped = true;
                        continue;
                    }
                    watch.ok("close of the second handle", v);
                }
                let d = db.take().expect("checked above");
                match d.close() {
                    Ok(()) => {
                        watch.ok("close", v);
                        floor = last;
                    }
                    Err(_) => {
                        watch.err();
                        stopped = true;
                        continue;
                    }
                }
                match Database::open(DB, cfg.clone()) {
                    Ok(d) => {
                        watch.ok("reopen", v);
                        *db = Some(d);
                        if two && !open_other(other, watch, v) {
                            stopped = true;
                        }
                    }
                    Err(_) => {
                        watch.err();
                        stopped = true;
                    }
                }
            }
        }
    }
    let healthy = !stopped && !disk.is_cut() && !watch.fired();
    for h in readers.drain(..) {
        h.verify(&states, healthy, "at the end of the stage", v);
    }
    if expect_poison && !failed_stale {
        let failed = if failed_on_other {
            other.as_ref()
        } else {
            db.as_ref()
        };
        if let Some(d) = failed {
            if let Ok(w) = d.begin_write() {
                let _ = w.rollback();
                v.push("after a commit or checkpoint failed having written to the disk, the handle still starts write transactions (not poisoned)".into());
            }
            if d.begin_read().is_ok() {
                v.push("after a commit or checkpoint failed having written to the disk, the handle still starts read transactions (not poisoned)".into());
            }
        }
    }
    if trace {
        eprintln!(
            "stopped={stopped} acked={} floor={floor} inflight={} disk ops={} files={:?}",
            states.len() - 1,
            inflight.is_some(),
            disk.op_count(),
            disk.file_names()
        );
    }
    Segment {
        states,
        floor,
        inflight,
    }
}

/// Reopen the crashed disk and compare with the allowed states. Returns the index of the
/// matched state and, unless this is the last stage, the open database to continue on;
/// after the last stage it checks that recovery left a database that takes a commit.
fn judge(
    disk: &SimVfs,
    case: &Case,
    allowed: &[(String, &Model)],
    last_stage: bool,
) -> Result<(usize, Option<Database>), String> {
    let cfg = case
        .mode
        .config(Arc::new(disk.clone()), case.params, case.mutant);
    if std::env::var_os("INPAGE_TORTURE_TRACE").is_some() {
        if let Some(img) = disk.read_file(std::path::Path::new(DB)) {
            let ps = case.params.page_size as usize;
            for (p, page) in img.chunks(ps).enumerate() {
                let lines =
                    inpage::inspect::describe_page(case.mode.journal, p as u32, page, u64::MAX);
                eprintln!("  page {p}: {}", lines.join("; "));
            }
        }
    }
    let db = Database::open(DB, cfg).map_err(|e| format!("reopen after the crash failed: {e}"))?;
    if std::env::var_os("INPAGE_TORTURE_TRACE").is_some() {
        eprintln!("recovered: fcc {}, {:?}", db.fcc(), db.recovery_report());
    }
    let r = db.recovery_report();
    if r.spilled_rolled_back > 0 || r.deferred {
        SPILL_RECOVERIES.with(|c| c.set(c.get() + 1));
    }
    let idx = compare(&db, allowed)?;
    if !last_stage {
        return Ok((idx, Some(db)));
    }
    // Recovery must leave a database that takes new commits.
    let mut w = db
        .begin_write()
        .map_err(|e| format!("write after recovery: {e}"))?;
    let t = w
        .open_or_create_tree(TREES[0].0, TREES[0].1)
        .map_err(|e| format!("write after recovery: {e}"))?;
    w.insert(&t, i64::MAX, b"after recovery")
        .map_err(|e| format!("write after recovery: {e}"))?;
    w.commit()
        .map_err(|e| format!("commit after recovery: {e}"))?;
    Ok((idx, None))
}

/// Integrity check, full scan equal to one allowed state, point gets and counts agreeing.
/// Returns the index of the matched state.
pub fn compare(db: &Database, allowed: &[(String, &Model)]) -> Result<usize, String> {
    let r = db
        .begin_read()
        .map_err(|e| format!("begin_read after recovery: {e}"))?;
    check(&r, &HashMap::new()).map_err(|e| format!("integrity check failed: {e}"))?;
    let got = dump(&r).map_err(|e| format!("full scan failed: {e}"))?;
    let Some(idx) = allowed.iter().position(|(_, m)| **m == got) else {
        let diffs: Vec<String> = allowed
            .iter()
            .rev()
            .take(2)
            .map(|(name, m)| format!("vs {name}: {}", describe_diff(&got, m)))
            .collect();
        return Err(format!(
            "state matches none of the {} allowed states (fcc {}): {}",
            allowed.len(),
            db.fcc(),
            diffs.join(" | ")
        ));
    };
    let want = allowed[idx].1;
    for (name, entries) in want {
        let t = r
            .open_tree(name)
            .map_err(|e| format!("open tree {name:?}: {e}"))?;
        let n = r.count(&t).map_err(|e| format!("count {name:?}: {e}"))?;
        if n != entries.len() as u64 {
            return Err(format!(
                "count of {name:?} is {n}, the scan found {}",
                entries.len()
            ));
        }
        // Every key any allowed state mentions: present ones must read back exactly,
        // the others must be absent.
        let keys: std::collections::BTreeSet<_> = allowed
            .iter()
            .filter_map(|(_, m)| m.get(name))
            .flat_map(|t| t.keys())
            .collect();
        for k in keys {
            let g = r
                .get(&t, k.as_key())
                .map_err(|e| format!("get {name}[{}]: {e}", show_key(k)))?;
            if g.as_ref() != entries.get(k) {
                return Err(format!(
                    "point get {name}[{}] disagrees with the scan ({} vs {})",
                    show_key(k),
                    g.map_or("absent".into(), |v| format!("{} bytes", v.len())),
                    entries
                        .get(k)
                        .map_or("absent".into(), |v| format!("{} bytes", v.len()))
                ));
            }
        }
    }
    Ok(idx)
}
