//! Storage: the narrow trait every layer above talks to, from the `inpage-vfs` crate
//! (re-exported here whole, so `inpage::vfs` is the one path applications and the engine
//! use), plus the one storage concern that is engine logic: recording the undo of a
//! commit that spans several databases (`undo`).
//!
//! The simulated disk and the fault wrapper are not here: they are test tooling, in the
//! `inpage-sim` crate, which the engine's tests, the torture harness, the fuzzer and the
//! bench depend on and a build that stores data never links. The engine's unit tests see
//! them at `crate::vfs` as before (re-exported under `cfg(test)` only).

pub use inpage_vfs::*;

pub(crate) mod undo;

#[cfg(test)]
pub use inpage_sim::{Aim, CrashModel, CrashReport, FaultPlan, FaultVfs, SimVfs};
