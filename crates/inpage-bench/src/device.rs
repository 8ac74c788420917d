//! Device profiles: what a flash device of a given class charges per request, per byte and
//! per flush, and the deterministic time model built on them.
//!
//! Invariants:
//! - A profile is a small table of public numbers; each names its source (BENCHMARKS.md
//!   repeats the table with the sources). Nothing here is measured on this machine.
//! - The model is a pure function of a row's exact device counters and its measured CPU
//!   time: the same counters give the same modeled time, whatever the machine's noise.
//!   That is what makes ratios on modeled time comparable across runs.
//! - The FUSE-emulated device (`emulate`) charges the same parameters as the model, so a
//!   disagreement between emulated and modeled time is a wait the model cannot see (or a
//!   calibration error), never two different tables.

use serde::{Deserialize, Serialize};

/// One device class.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    /// `emmc`, `ufs`, `nvme`, `virtio`.
    pub name: &'static str,
    /// Fixed cost of one write request (command + program latency), µs.
    pub write_req_us: f64,
    /// Sustained write bandwidth, MiB/s (charged per byte on top of the request cost).
    pub write_mib_s: f64,
    /// One cache flush (FLUSH CACHE / SYNCHRONIZE CACHE), µs.
    pub flush_us: f64,
    /// Fixed cost of one read request, µs.
    pub read_req_us: f64,
    /// Sustained read bandwidth, MiB/s.
    pub read_mib_s: f64,
    /// Where the numbers come from (public source).
    pub source: &'static str,
}

/// The exact device-level counters of one transaction (per-transaction averages).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct DeviceCounters {
    pub write_reqs: f64,
    pub write_kib: f64,
    pub flushes: f64,
    pub read_reqs: f64,
    pub read_kib: f64,
}

impl Profile {
    /// Modeled device time of one transaction, µs (device only; CPU is added by the caller).
    pub fn device_us(&self, c: &DeviceCounters) -> f64 {
        let mib = 1024.0;
        c.write_reqs * self.write_req_us
            + c.write_kib / mib / self.write_mib_s * 1e6
            + c.flushes * self.flush_us
            + c.read_reqs * self.read_req_us
            + c.read_kib / mib / self.read_mib_s * 1e6
    }

    /// Modeled time of one transaction: device time plus the measured CPU time, µs.
    pub fn model_us(&self, c: &DeviceCounters, cpu_us: f64) -> f64 {
        self.device_us(c) + cpu_us
    }
}

/// Every profile, in the order the report lists them.
///
/// The numbers are placeholders of the right order of magnitude until each is tied to a
/// public source (see BENCHMARKS.md, "Device profiles").
pub fn profiles() -> Vec<Profile> {
    vec![
        Profile {
            name: "emmc",
            write_req_us: 400.0,
            write_mib_s: 40.0,
            flush_us: 2000.0,
            read_req_us: 200.0,
            read_mib_s: 150.0,
            source: "TODO",
        },
        Profile {
            name: "ufs",
            write_req_us: 120.0,
            write_mib_s: 150.0,
            flush_us: 800.0,
            read_req_us: 100.0,
            read_mib_s: 500.0,
            source: "TODO",
        },
        Profile {
            name: "nvme",
            write_req_us: 20.0,
            write_mib_s: 1000.0,
            flush_us: 300.0,
            read_req_us: 80.0,
            read_mib_s: 2000.0,
            source: "TODO",
        },
        Profile {
            name: "virtio",
            write_req_us: 40.0,
            write_mib_s: 500.0,
            flush_us: 200.0,
            read_req_us: 40.0,
            read_mib_s: 500.0,
            source: "TODO",
        },
    ]
}

/// The profile named `name`, or an error listing the valid names.
pub fn profile(name: &str) -> Result<Profile, String> {
    let all = profiles();
    let names: Vec<&str> = all.iter().map(|p| p.name).collect();
    all.into_iter().find(|p| p.name == name).ok_or_else(|| {
        format!(
            "unknown device profile '{name}' (valid: {})",
            names.join(", ")
        )
    })
}
