//! What the root-only lab tests (`lab.rs`, `emulate.rs`) share: finding the loop devices
//! and mounts a test left behind. Each test works under its own temporary directory and
//! looks only there, so another lab on the machine cannot make it fail.

use std::path::Path;
use std::process::Command;

/// Loop devices whose backing file lies under `base`, sorted.
pub fn losetup_under(base: &Path) -> Vec<String> {
    let out = Command::new("losetup").arg("-a").output().expect("losetup");
    let base = base.to_string_lossy().into_owned();
    let mut v: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains(&base))
        .map(str::to_string)
        .collect();
    v.sort();
    v
}

/// Mounts whose mount point lies under `base`.
pub fn mounts_under(base: &Path) -> Vec<String> {
    let base = base.to_string_lossy().into_owned();
    std::fs::read_to_string("/proc/mounts")
        .unwrap()
        .lines()
        .filter(|l| l.contains(&base))
        .map(str::to_string)
        .collect()
}
