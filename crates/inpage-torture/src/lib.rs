//! Crash-torture harness for `inpage`.
//!
//! It runs deterministic workloads on the simulated disk (`inpage_sim::SimVfs`) as crash
//! sequences: cut the power at any I/O operation (also inside recovery), recover, judge
//! the result against a model of acknowledged commits (see [`oracle`] for the exact
//! rule), continue the workload on the recovered database, cut again, and so on. Cuts
//! are aimed at the syncs a commit or a recovery depends on and tears at the spans a
//! checksum guards (see [`torture`]); I/O errors are injected with `FaultVfs`.
//! Violations are shrunk to the fewest stages, the shortest workload prefix and the
//! earliest crash points and printed as replay specs ([`case`]). The engine's mutants
//! (`inpage::Mutant`, `--mutant`) show that each broken commit/recovery variant is
//! found (`tests/mutants.rs`).
//!
//! Entry points for the `inpage` CLI: [`torture`], [`workload`] and [`verify`] with their
//! clap argument structs. Everything is a pure function of its seed: the same arguments
//! give the same cases, the same verdicts and the same output on any machine.

pub mod case;
pub mod mode;
pub mod oracle;
pub mod real;
pub mod rng;
pub mod torture;
pub mod workload;

pub use case::{Case, Crash, Fault, Stage};
pub use mode::{DbParams, Mode};
pub use real::{verify, workload, VerifyArgs, WorkloadArgs};
pub use torture::{run_torture, shrink, torture, Report, TortureArgs};

/// `m` if this build can run it: the planted bugs (`inpage::Mutant`) are compiled only
/// into the test builds and the development binary (`--features mutants`), never into the
/// `inpage` CLI, so asking for one there is an error, not a silent run of the engine as
/// written.
pub fn planted(m: inpage::Mutant) -> Result<inpage::Mutant, String> {
    if m != inpage::Mutant::None && !cfg!(feature = "mutants") {
        return Err(format!(
            "mutant {}: this build has no planted bugs (they are compiled only into the test \
             builds and the development binary: cargo run -p inpage-torture --features \
             mutants --bin inpage-torture-dev -- torture ...)",
            m.name()
        ));
    }
    Ok(m)
}
