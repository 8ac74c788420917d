//! `inpage workload` and `inpage verify`: the same deterministic workloads on real files,
//! for process-kill testing.
//!
//! `workload` prints `commit <i>` and flushes stdout right after the i-th commit is
//! acknowledged, so a parent that kills it knows a lower bound of what was acknowledged:
//! after reading `commit I`, commit I was acknowledged, and commit I+1 may have been
//! acknowledged without its line being read. `verify` therefore accepts exactly the state
//! after commit I or after commit I+1. A process kill keeps every write the OS accepted,
//! so this holds in every mode that promises atomicity, `wal-normal` included.
//!
//! The workload's operations never depend on `--txns` (it only says when to stop), so
//! `verify` regenerates the same commits without being told how many were planned.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use inpage::vfs::OsVfs;
use inpage::Database;

use crate::mode::{DbParams, Mode};
use crate::oracle::compare;
use crate::workload::{commit_states, exec_txn, generate, Step, TxnOutcome, WorkloadKind};
use crate::workload::{Model, WorkloadSpec};

/// `inpage workload FILE`.
#[derive(clap::Args, Clone, Debug)]
pub struct WorkloadArgs {
    /// Database file to create (must not exist).
    pub file: PathBuf,
    #[arg(long, help = Mode::help_list("Journal mode:"))]
    pub mode: String,
    /// Workload seed.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Transactions to run (some are rolled back, so commits are fewer).
    #[arg(long, default_value_t = 100)]
    pub txns: usize,
    /// Operations per transaction.
    #[arg(long, default_value_t = 8)]
    pub ops_per_txn: usize,
    /// Workload: mixed, insert, update or delete.
    #[arg(long, default_value = "mixed")]
    pub workload: String,
}

/// `inpage verify FILE`.
#[derive(clap::Args, Clone, Debug)]
pub struct VerifyArgs {
    /// Database file written by `workload`.
    pub file: PathBuf,
    #[arg(long, help = Mode::help_list("Journal mode the workload used:"))]
    pub mode: String,
    /// Workload seed.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Last commit number the workload acknowledged (0 = none).
    #[arg(long)]
    pub acked: usize,
    /// Operations per transaction (as given to workload).
    #[arg(long, default_value_t = 8)]
    pub ops_per_txn: usize,
    /// Workload (as given to workload).
    #[arg(long, default_value = "mixed")]
    pub workload: String,
}

fn spec(kind: &str, ops_per_txn: usize, seed: u64, txns: usize) -> Result<WorkloadSpec, String> {
    let kind = WorkloadKind::parse(kind)?;
    if ops_per_txn == 0 || ops_per_txn > 10_000 {
        return Err(format!("--ops-per-txn {ops_per_txn} must be in 1..=10000"));
    }
    Ok(WorkloadSpec {
        kind,
        ops_per_txn,
        txns,
        seed,
        page_size: DbParams::from_seed(seed).page_size,
    })
}

fn config(mode: Mode, seed: u64) -> inpage::Config {
    let c = mode.config(
        Arc::new(OsVfs::new()),
        DbParams::from_seed(seed),
        inpage::Mutant::None,
    );
    if mode.journal.capabilities().region_backed {
        // Real processes need no replayable I/O: kill the background flusher mid-flush
        // too (the simulated torture flushes inline).
        c.nvlog_flush(inpage::NvlogFlush::Background)
    } else {
        c
    }
}

/// Run the workload on a new file, printing `commit <i>` after each acknowledged commit.
pub fn workload(args: &WorkloadArgs) -> Result<(), String> {
    let mode = Mode::parse(&args.mode)?;
    if args.txns > 1_000_000 {
        return Err(format!("--txns {} must be at most 1000000", args.txns));
    }
    let spec = spec(&args.workload, args.ops_per_txn, args.seed, args.txns)?;
    if args.file.exists() {
        return Err(format!(
            "{} already exists; workload creates a new database",
            args.file.display()
        ));
    }
    let cfg = config(mode, args.seed);
    let open = || Database::open(&args.file, cfg.clone()).map_err(|e| e.to_string());
    let mut db = open()?;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut acked = 0usize;
    for step in generate(&spec) {
        match step {
            Step::Txn(t) => match exec_txn(&db, &t) {
                Ok(TxnOutcome::Committed) => {
                    acked += 1;
                    writeln!(out, "commit {acked}").map_err(|e| e.to_string())?;
                    out.flush().map_err(|e| e.to_string())?;
                }
                Ok(TxnOutcome::RolledBack) => {}
                Err(e) => return Err(format!("transaction after commit {acked}: {e:?}")),
            },
            Step::Checkpoint => db.checkpoint().map_err(|e| format!("checkpoint: {e}"))?,
            Step::Reopen => {
                db.close().map_err(|e| format!("close: {e}"))?;
                db = open()?;
            }
        }
    }
    db.close().map_err(|e| format!("close: {e}"))
}

/// The states after commits 0..=n of the workload (`states[i]` = after commit i).
fn states_through(kind: &str, k: usize, seed: u64, n: usize) -> Result<Vec<Model>, String> {
    let mut txns = 2 * n + 8;
    loop {
        let states = commit_states(&generate(&spec(kind, k, seed, txns)?));
        if states.len() > n + 1 || txns > 4 * n + 1000 {
            return Ok(states);
        }
        txns *= 2;
    }
}

/// Ok only if the file opens, passes the integrity check, and holds exactly the state
/// after commit `acked` or after commit `acked + 1`.
pub fn verify(args: &VerifyArgs) -> Result<(), String> {
    let mode = Mode::parse(&args.mode)?;
    if args.acked > 1_000_000 {
        return Err(format!("--acked {} is too large", args.acked));
    }
    if !args.file.exists() {
        return Err(format!("{} does not exist", args.file.display()));
    }
    let states = states_through(&args.workload, args.ops_per_txn, args.seed, args.acked + 1)?;
    if states.len() <= args.acked {
        return Err(format!(
            "the workload has only {} commits, --acked {} is impossible",
            states.len() - 1,
            args.acked
        ));
    }
    let db = Database::open(&args.file, config(mode, args.seed).create(false))
        .map_err(|e| format!("open: {e}"))?;
    let mut allowed = vec![(format!("after commit {}", args.acked), &states[args.acked])];
    if let Some(next) = states.get(args.acked + 1) {
        allowed.push((format!("after commit {}", args.acked + 1), next));
    }
    if !mode.journal.capabilities().survives_process_crash {
        // Commits acknowledged from process memory (`waldio-gs`): a kill may lose the
        // newest of them, never half of one, so any earlier commit's state is allowed.
        for (i, st) in states.iter().enumerate().take(args.acked) {
            allowed.push((format!("after commit {i} (buffered commits lost)"), st));
        }
    }
    compare(&db, &allowed)?;
    // A clean close, so a region-backed mode removes its region (under /dev/shm).
    db.close()
        .map_err(|e| format!("close after verifying: {e}"))
}
