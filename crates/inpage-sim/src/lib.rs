//! The simulated disk and the fault wrapper that inpage's torture harness, fuzzer, bench
//! and tests run the engine on. Test tooling, kept out of the engine: a build that stores
//! data never links it.
//!
//! - [`SimVfs`]: files in memory with a crash model. Every write since a file's last
//!   sync is pending; a simulated power cut ([`SimVfs::crash`]) keeps, loses, reorders or
//!   tears pending writes as [`CrashModel`] allows, exactly as a disk with a volatile
//!   write cache may, and counts the device requests a real disk would see.
//! - [`FaultVfs`]: wraps any [`inpage_vfs::Vfs`] and fails chosen operations with EIO or
//!   ENOSPC ([`FaultPlan`]).
//!
//! Both implement the engine's storage trait from `inpage-vfs`, the crate below the
//! engine, so the engine's own tests use them through a dev-dependency without a cycle.

#![forbid(unsafe_code)]

mod fault;
mod sim;

pub use fault::{FaultPlan, FaultVfs};
pub use sim::{Aim, CrashModel, CrashReport, SimVfs};
