//! Device profiles: what a flash device of a given class charges per request, per byte and
//! per flush, and the deterministic time model built on them.
//!
//! Invariants:
//! - A profile is a small table of public numbers; each names its source (BENCHMARKS.md
//!   repeats the table with the sources). Only `virtio` is measured, on this machine.
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
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct DeviceCounters {
    /// Write requests that carry data (see `from_lab`).
    pub write_reqs: f64,
    /// KiB written, data and journal device together.
    pub write_kib: f64,
    /// Flush requests (`/sys/block/*/stat` field 16), both devices.
    pub flushes: f64,
    /// Read requests (field 1), both devices.
    pub read_reqs: f64,
    /// KiB read (field 3), both devices.
    pub read_kib: f64,
}

impl DeviceCounters {
    /// Counters of the ext4 lab's two devices over a window of `n` transactions.
    ///
    /// Field 5 of the block stat counts an *empty* flush bio (what `fdatasync` sends
    /// through `blkdev_issue_flush` when ext4's journal is on another device) as a write
    /// request of 0 sectors, and field 16 counts it as a flush too; measured here: a
    /// bare `fdatasync` adds 1 write and 0 sectors on the data device. The data device of
    /// the lab only ever receives flushes that way (jbd2 sends its ordered flushes to the
    /// journal device as pre/post flushes of the commit block, which field 5 does not
    /// count), so data-carrying write requests are `data writes - data flushes +
    /// journal writes`. Without that correction every flush would be charged twice.
    pub fn from_lab(data: &DevStat, journal: &DevStat, n: f64) -> Option<Self> {
        let n = n.max(1.0);
        let df = data.flushes?;
        let jf = journal.flushes?;
        Some(DeviceCounters {
            write_reqs: (data.writes.saturating_sub(df) + journal.writes) as f64 / n,
            write_kib: (data.kib() + journal.kib()) / n,
            flushes: (df + jf) as f64 / n,
            read_reqs: (data.reads + journal.reads) as f64 / n,
            read_kib: (data.sectors_read + journal.sectors_read) as f64 * 0.5 / n,
        })
    }
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
/// Each number is a round figure for its device class, taken from the public source named
/// in `source` (BENCHMARKS.md, "Device profiles", repeats the table). Conventions, which
/// follow what the lab's counters see (see `DeviceCounters`):
/// - `write_req_us` is the device's cost of one 4 KiB write request at queue depth 1
///   (command, transfer of the first block and program into the device cache);
///   `write_mib_s` charges every byte on top (so a 4 KiB request costs a little more than
///   `write_req_us`; the error is under 5 % at these bandwidths).
/// - `flush_us` is one cache flush (eMMC FLUSH_CACHE, UFS/SCSI SYNCHRONIZE CACHE, NVMe
///   Flush) with a few dirty blocks in the cache: what a `write + fdatasync` pays beyond
///   the write itself.
/// - reads likewise: `read_req_us` per 4 KiB request, `read_mib_s` per byte.
pub fn profiles() -> Vec<Profile> {
    vec![
        Profile {
            name: "emmc",
            write_req_us: 300.0,
            write_mib_s: 120.0,
            flush_us: 1500.0,
            read_req_us: 150.0,
            read_mib_s: 250.0,
            source: "eMMC 5.x phone (Galaxy S4 class, the LS-MVBT and WALDIO papers' devices): \
                     bandwidths = AndroBench sequential figures of eMMC 5.1 phones (about \
                     200-280 MB/s read, 100-200 MB/s write; JEDEC JESD84-B51 HS400 caps the bus \
                     at 400 MB/s); 4 KiB random write at QD1 about 12 MB/s (about 330 us per \
                     request); flush from LS-MVBT (FAST'14, Sec. 6): a one-row SQLite WAL insert \
                     with one fsync takes 2.0-2.5 ms on eMMC; flush_us is chosen so the model puts \
                     such an insert (3 writes, 1-2 flushes) in that range",
        },
        Profile {
            name: "ufs",
            write_req_us: 100.0,
            write_mib_s: 200.0,
            flush_us: 900.0,
            read_req_us: 80.0,
            read_mib_s: 500.0,
            source: "UFS 2.0/2.1 phone (Galaxy S7/S10, the DHL and IPS/2VTO papers' devices): \
                     AndroBench UFS 2.1 sequential about 500-820 MB/s read, 200-240 MB/s write \
                     (boardor.com \"How powerful is UFS3.0\", AndroBench table); 4 KiB random write at \
                     QD1 about 40 MB/s (about 100 us); flush from the DHL paper (ICDE'20, Sec. V): \
                     a one-row WAL insert takes about 2.1 ms on UFS 2.0 including its \
                     file-system journal writes; flush_us chosen so the model lands there",
        },
        Profile {
            name: "nvme",
            write_req_us: 20.0,
            write_mib_s: 2000.0,
            flush_us: 400.0,
            read_req_us: 80.0,
            read_mib_s: 3000.0,
            source: "consumer TLC NVMe SSD without power-loss protection: QD1 4 KiB write \
                     about 15-25 us into the DRAM/SLC cache and QD1 4 KiB read about 70-90 us \
                     (TechPowerUp/AnandTech SSD reviews, IO latency pages); sequential about \
                     2-3.5 GB/s; a flush must program the cache to NAND, hundreds of us",
        },
        Profile {
            name: "virtio",
            write_req_us: 55.0,
            write_mib_s: 300.0,
            flush_us: 200.0,
            read_req_us: 60.0,
            read_mib_s: 500.0,
            source: "this lab's virtual disk, measured here with `inpage bench floor --lab ext4 \
                     --txns 1000 --rounds 3`: overwrite (1 write + 1 flush) 255 us of sync, \
                     append (3 writes, 27 KiB, 3 flushes) 855 us; split assuming 200 us per \
                     flush (the spike in issue 9). Reads not measured: assumed like writes",
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

/// The counters of `/sys/block/<dev>/stat` the lab uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DevStat {
    /// Field 1: read requests completed (the device model's read side).
    pub reads: u64,
    /// Field 3: sectors read.
    pub sectors_read: u64,
    /// Field 5 (1-based, Documentation/block/stat.rst): write requests completed.
    pub writes: u64,
    /// Field 7: sectors written (512 bytes each, whatever the device's block size).
    pub sectors_written: u64,
    /// Field 16: flush requests completed (kernels ≥ 5.5; `None` before).
    pub flushes: Option<u64>,
}

impl DevStat {
    pub fn delta(&self, earlier: &DevStat) -> DevStat {
        DevStat {
            reads: self.reads.saturating_sub(earlier.reads),
            sectors_read: self.sectors_read.saturating_sub(earlier.sectors_read),
            writes: self.writes.saturating_sub(earlier.writes),
            sectors_written: self.sectors_written.saturating_sub(earlier.sectors_written),
            flushes: match (self.flushes, earlier.flushes) {
                (Some(a), Some(b)) => Some(a.saturating_sub(b)),
                _ => None,
            },
        }
    }
    pub fn kib(&self) -> f64 {
        self.sectors_written as f64 * 512.0 / 1024.0
    }
}

/// Whether `p` is a mount point in `/proc/mounts`.
pub fn is_mounted(p: &std::path::Path) -> bool {
    let want = p.to_string_lossy();
    std::fs::read_to_string("/proc/mounts")
        .map(|m| {
            m.lines()
                .any(|l| l.split_whitespace().nth(1) == Some(&want))
        })
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_profile_is_named_sourced_and_positive() {
        let all = profiles();
        let names: Vec<&str> = all.iter().map(|p| p.name).collect();
        assert_eq!(names, ["emmc", "ufs", "nvme", "virtio"]);
        for p in &all {
            assert!(p.source.len() > 40, "{}: source named", p.name);
            for v in [
                p.write_req_us,
                p.write_mib_s,
                p.flush_us,
                p.read_req_us,
                p.read_mib_s,
            ] {
                assert!(v.is_finite() && v > 0.0, "{}", p.name);
            }
            assert_eq!(profile(p.name).unwrap(), *p);
        }
        let e = profile("floppy").unwrap_err();
        assert!(e.contains("emmc, ufs, nvme, virtio"), "{e}");
        // A flush dominates a 4 KiB write on every phone-like profile: that is what makes
        // syncs, not bytes, the cost on phones.
        for n in ["emmc", "ufs", "nvme"] {
            let p = profile(n).unwrap();
            assert!(p.flush_us > p.write_req_us, "{n}");
        }
    }

    #[test]
    fn model_charges_each_counter() {
        let p = Profile {
            name: "t",
            write_req_us: 100.0,
            write_mib_s: 1.0,
            flush_us: 1000.0,
            read_req_us: 10.0,
            read_mib_s: 2.0,
            source: "test",
        };
        let c = DeviceCounters {
            write_reqs: 2.0,
            write_kib: 1024.0,
            flushes: 1.5,
            read_reqs: 3.0,
            read_kib: 512.0,
        };
        // 2*100 + 1 MiB at 1 MiB/s + 1.5*1000 + 3*10 + 0.5 MiB at 2 MiB/s
        let want = 200.0 + 1e6 + 1500.0 + 30.0 + 250_000.0;
        assert!((p.device_us(&c) - want).abs() < 1e-6);
        assert!((p.model_us(&c, 42.0) - want - 42.0).abs() < 1e-6);
        assert_eq!(p.device_us(&DeviceCounters::default()), 0.0);
    }

    #[test]
    fn lab_counters_do_not_charge_empty_flush_writes_twice() {
        // The floor's append as measured on the lab: data device 2 writes (the 4 KiB
        // page and the empty flush bio), 8 sectors, 1 flush; journal device 2 writes (log
        // blocks, commit block), 40 sectors, 2 flushes (pre/post of the commit).
        let d = DevStat {
            writes: 2,
            sectors_written: 8,
            flushes: Some(1),
            reads: 1,
            sectors_read: 8,
        };
        let j = DevStat {
            writes: 2,
            sectors_written: 40,
            flushes: Some(2),
            ..DevStat::default()
        };
        let c = DeviceCounters::from_lab(&d, &j, 1.0).unwrap();
        assert_eq!(c.write_reqs, 3.0);
        assert_eq!(c.write_kib, 24.0);
        assert_eq!(c.flushes, 3.0);
        assert_eq!((c.read_reqs, c.read_kib), (1.0, 4.0));
        let half = DeviceCounters::from_lab(&d, &j, 2.0).unwrap();
        assert_eq!(half.write_reqs, 1.5);
        // No flush counter (kernels before 5.5): no model.
        let old = DevStat { flushes: None, ..d };
        assert_eq!(DeviceCounters::from_lab(&old, &j, 1.0), None);
    }
}
