//! Development front end: `inpage-bench-dev bench <BenchCmd>`, the same argv shape as
//! `inpage bench ...`, so the recovery benchmark's child (spawned through
//! `current_exe()` as `bench recovery-child ...`) works from either binary.

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "inpage-bench-dev",
    about = "The inpage benchmark lab (development binary)"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Top,
}

#[derive(Subcommand)]
enum Top {
    /// Benchmarks (same as `inpage bench`).
    Bench {
        #[command(subcommand)]
        cmd: inpage_bench::BenchCmd,
    },
}

fn main() {
    let Top::Bench { cmd } = Cli::parse().cmd;
    if let Err(e) = inpage_bench::run(cmd) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
