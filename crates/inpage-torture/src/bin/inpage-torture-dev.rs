//! Development binary exposing the harness's subcommands with the same arguments the
//! `inpage` CLI gives them (`torture`, `workload`, `verify`), so the process-kill test
//! can spawn a child before the main CLI is wired. Exit code 1 on a failed run or error.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use inpage_torture::{TortureArgs, VerifyArgs, WorkloadArgs};

#[derive(Parser)]
#[command(
    name = "inpage-torture-dev",
    about = "inpage crash-torture harness (dev binary)"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Simulated power cuts and I/O errors checked against a model.
    Torture(TortureArgs),
    /// Run a deterministic workload on a real file, printing `commit <i>` per ack.
    Workload(WorkloadArgs),
    /// Check a file holds the state after commit I or I+1 of a workload.
    Verify(VerifyArgs),
}

fn main() -> ExitCode {
    let result = match Cli::parse().cmd {
        Cmd::Torture(a) => inpage_torture::torture(&a),
        Cmd::Workload(a) => inpage_torture::workload(&a).map(|()| true),
        Cmd::Verify(a) => inpage_torture::verify(&a).map(|()| true),
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
