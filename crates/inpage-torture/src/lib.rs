//! Crash-torture harness for `inpage`.
//!
//! It runs deterministic workloads on the simulated disk (`inpage::vfs::SimVfs`), cuts
//! the power at any I/O operation (also inside recovery) or injects I/O errors
//! (`FaultVfs`), reopens, and checks the result against a model of acknowledged commits
//! (see [`oracle`] for the exact rule). Violations are shrunk to the shortest workload
//! prefix and earliest crash point and printed as replay specs ([`case`]).
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

pub use case::{Case, Crash, Fault};
pub use mode::{DbParams, Mode};
pub use real::{verify, workload, VerifyArgs, WorkloadArgs};
pub use torture::{run_torture, shrink, torture, Report, TortureArgs};
