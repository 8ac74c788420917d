//! Simulated disk: a deterministic in-memory file system with a persistence model, for
//! crash testing.
//!
//! Model:
//! - A file is an *inode* holding a durable image (what the medium has) and an ordered
//!   list of pending (unsynced) operations: writes and size changes. The volatile image
//!   (durable + every pending op applied in issue order) is kept materialized because
//!   reads see it and must be cheap.
//! - `sync_data`/`sync_all` make all of that inode's pending ops durable. They are applied
//!   to the durable image rather than copying the volatile one, so a sync costs what was
//!   written since the last one, not the file size. Both orders give the same bytes
//!   because the volatile image is by definition the in-order application.
//! - Names live in two namespaces: volatile (what `open` sees) and durable (what a power
//!   cut leaves). Both map a path to an inode, so a file's data follows the inode through
//!   renames. `sync_dir(d)` replaces the durable entries whose parent is `d` with the
//!   volatile ones. Directories are implicit: the directory of a file is its parent path,
//!   an empty parent being `"."`.
//! - `crash(seed, model)` builds a fresh disk from the durable namespace; each inode gets
//!   its durable image plus a subset of its pending ops chosen by the model, with a PRNG
//!   seeded from `seed` and the inode number only. So the result is a pure function of the
//!   disk state and the seed, and one file's pending ops never change another file's
//!   outcome. Every byte of a crashed file therefore comes from its durable image, from
//!   some pending write that covered it, or is a zero from a size extension: nothing is
//!   invented (the proptest below checks this).
//! - A power cut point (`set_power_cut_after`) stops the disk after a number of mutating
//!   calls: from then on every call on this disk and its handles fails and changes
//!   nothing. Each mutating call counts as one op whether or not it succeeds, so the same
//!   workload replayed on a fresh disk hits the same op indices.
//! - `OpenOptions::direct` (O_DIRECT) is modeled as Linux does it: on a direct handle an
//!   offset, length or buffer address that is not a multiple of 512 fails with EINVAL
//!   and changes nothing (not counted as an op). A direct write bypasses the page cache
//!   but lands in the device's volatile write cache, so it is a pending op like any
//!   other: lost, reordered or torn by a power cut until a sync. Every handle reads the
//!   same volatile image (the kernel keeps direct and buffered I/O coherent).
//! - Randomness the engine needs (`Vfs::nonce`: journal nonces, WAL salts) is drawn from
//!   the disk's seed (`SimVfs::with_seed`), and a crashed disk's stream is derived from
//!   the old one and the crash seed, so a replayed run writes identical bytes.
//! - `crash_report` says what a power cut did (writes lost, writes torn); with
//!   `Aim::TearNewest` it forces a tear where a checksum must catch it (see `Aim`).
//! - Memory regions (`Vfs::open_region`, the `nvlog` journal's ring) live in their own
//!   namespace beside the files. A region store is a mutating op (a cut can land on it);
//!   a stored word is pending until `Region::persist` covers it. A process crash keeps
//!   every region as it is. A power cut keeps the regions only if the disk says they are
//!   persistent memory (`set_regions_persistent`, carried to the crashed disk); then
//!   each pending 8-byte word independently keeps its new or its old value (CPU caches
//!   write lines back in any order, 8-byte stores are atomic) under a model that loses
//!   writes, or all its new values otherwise. Without that, a cut drops every region.
//! - All state is behind one mutex, so every call is atomic with respect to the others
//!   and the disk is `Send + Sync`. A poisoned lock is recovered rather than propagated:
//!   no code path panics while holding it, and tests must not cascade panics.

use inpage_vfs::*;
use std::collections::BTreeMap;
use std::io;
use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::{Mutex, MutexGuard};

/// Sector size: the smallest unit a device writes atomically.
pub const SECTOR: usize = 512;

/// Largest file the simulated disk accepts. The disk lives in memory; refusing absurd
/// offsets with EFBIG keeps a bad offset from becoming an allocation abort.
pub const MAX_FILE_LEN: u64 = 1 << 32;

/// Which misbehaviours a simulated power cut may show.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CrashModel {
    /// Each pending op independently survives or is lost (else all survive).
    pub lose: bool,
    /// Surviving ops are applied in a random order (else in issue order).
    pub reorder: bool,
    /// A surviving write may be torn: only some of its sectors reach the medium.
    pub tear: bool,
    /// The device writes aligned blocks of this size atomically, so tearing never splits
    /// one. The tear unit is `lcm(512, p)`; `Some(0)` is treated like `None`.
    pub atomic_pages: Option<usize>,
}

impl CrashModel {
    /// Power cut on a device with a volatile cache and no atomicity promise.
    pub fn full() -> CrashModel {
        CrashModel {
            lose: true,
            reorder: true,
            tear: true,
            atomic_pages: None,
        }
    }

    /// Unsynced ops may be lost, but survivors apply in order and whole.
    pub fn lose_only() -> CrashModel {
        CrashModel {
            lose: true,
            reorder: false,
            tear: false,
            atomic_pages: None,
        }
    }

    /// Everything pending survives, in order: a process crash, where the OS page cache
    /// outlives the process. (Namespace changes still need `sync_dir`; use
    /// [`SimVfs::process_crash`] for a crash that keeps the volatile namespace too.)
    pub fn none() -> CrashModel {
        CrashModel {
            lose: false,
            reorder: false,
            tear: false,
            atomic_pages: None,
        }
    }

    /// The full model on a device that writes `page_size`-aligned pages atomically.
    pub fn atomic_pages(page_size: usize) -> CrashModel {
        CrashModel {
            atomic_pages: Some(page_size),
            ..CrashModel::full()
        }
    }

    /// Bytes in the smallest unit a tear can keep or drop.
    pub fn tear_unit(&self) -> usize {
        match self.atomic_pages {
            None | Some(0) => SECTOR,
            Some(p) => lcm(SECTOR, p),
        }
    }
}

fn gcd(mut a: usize, mut b: usize) -> usize {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

fn lcm(a: usize, b: usize) -> usize {
    // Saturate rather than overflow for silly page sizes; a huge unit only means
    // "never tear", which is still sound.
    (a / gcd(a, b)).saturating_mul(b)
}

/// splitmix64: tiny, good enough for choosing survivors, and fully deterministic.
#[derive(Debug)]
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn coin(&mut self) -> bool {
        self.next() & 1 == 1
    }

    /// Uniform-ish in `0..n`; `n` must be > 0. The modulo bias is irrelevant here.
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// An unsynced change to one inode.
#[derive(Clone, Debug, PartialEq, Eq)]
enum PendingOp {
    Write { offset: usize, data: Vec<u8> },
    SetLen(usize),
}

fn apply_write(img: &mut Vec<u8>, offset: usize, data: &[u8]) {
    if data.is_empty() {
        return;
    }
    let end = offset + data.len();
    if img.len() < end {
        img.resize(end, 0);
    }
    img[offset..end].copy_from_slice(data);
}

fn apply(img: &mut Vec<u8>, op: &PendingOp) {
    match op {
        PendingOp::Write { offset, data } => apply_write(img, *offset, data),
        PendingOp::SetLen(len) => img.resize(*len, 0),
    }
}

#[derive(Debug, Default)]
struct Inode {
    durable: Vec<u8>,
    volatile: Vec<u8>,
    pending: Vec<PendingOp>,
    /// Open handles; an inode with no handles and no name in either namespace is freed.
    handles: usize,
}

impl Inode {
    fn with_durable(data: Vec<u8>) -> Inode {
        Inode {
            volatile: data.clone(),
            durable: data,
            pending: Vec::new(),
            handles: 0,
        }
    }

    fn push(&mut self, op: PendingOp) {
        apply(&mut self.volatile, &op);
        self.pending.push(op);
    }

    fn sync(&mut self) {
        for op in self.pending.drain(..) {
            apply(&mut self.durable, &op);
        }
    }

    /// The image a power cut leaves for this inode, and what happened to its writes.
    fn crashed(&self, rng: &mut Rng, model: &CrashModel, aim: Aim) -> (Vec<u8>, CrashReport) {
        let unit = model.tear_unit();
        let spans_units =
            |offset: usize, len: usize| len > 0 && offset / unit != (offset + len - 1) / unit;
        // The forced tear (Aim::TearNewest): index of the write it applies to.
        let forced = match aim {
            Aim::TearNewest if model.tear => self.pending.iter().rposition(|op| {
                matches!(op, PendingOp::Write { offset, data }
                    if spans_units(*offset, data.len()) && data.iter().any(|&b| b != 0))
            }),
            _ => None,
        };
        let mut report = CrashReport {
            pending_writes: self
                .pending
                .iter()
                .filter(|op| matches!(op, PendingOp::Write { .. }))
                .count() as u64,
            ..CrashReport::default()
        };
        let mut survivors: Vec<(usize, &PendingOp)> = self
            .pending
            .iter()
            .enumerate()
            .filter(|(i, op)| {
                let keep = !model.lose || rng.coin() || forced == Some(*i);
                if !keep && matches!(op, PendingOp::Write { .. }) {
                    report.lost_writes += 1;
                }
                keep
            })
            .collect();
        if model.reorder {
            // Fisher-Yates.
            for i in (1..survivors.len()).rev() {
                let j = rng.below(i + 1);
                survivors.swap(i, j);
            }
        }
        let mut img = self.durable.clone();
        for (i, op) in survivors {
            match op {
                PendingOp::Write { offset, data }
                    if forced == Some(i) || (model.tear && rng.coin()) =>
                {
                    // Torn: keep each tear unit (aligned to absolute file offsets, as the
                    // device sees them) independently; a forced tear keeps the first
                    // unit and drops at least one other.
                    let end = offset + data.len();
                    let mut pieces = Vec::new();
                    let mut start = *offset;
                    while start < end {
                        let unit_end = (start / unit).saturating_add(1).saturating_mul(unit);
                        let piece_end = unit_end.min(end);
                        pieces.push((start, piece_end, rng.coin()));
                        start = piece_end;
                    }
                    if forced == Some(i) && pieces.len() >= 2 {
                        pieces[0].2 = true;
                        if pieces.iter().all(|p| p.2) {
                            let drop = 1 + rng.below(pieces.len() - 1);
                            pieces[drop].2 = false;
                        }
                    }
                    let kept = pieces.iter().filter(|p| p.2).count();
                    if kept == 0 {
                        report.lost_writes += 1;
                    } else if kept < pieces.len() {
                        report.torn_writes += 1;
                    }
                    for (a, b, keep) in pieces {
                        if keep {
                            apply_write(&mut img, a, &data[a - offset..b - offset]);
                        }
                    }
                }
                op => apply(&mut img, op),
            }
        }
        (img, report)
    }
}

type Ino = u64;

/// What a simulated power cut did to the pending writes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CrashReport {
    /// Pending writes (including `allocate` zero-fills) at the cut.
    pub pending_writes: u64,
    /// Writes of which nothing reached the medium.
    pub lost_writes: u64,
    /// Writes of which some tear units reached the medium and some did not.
    pub torn_writes: u64,
}

/// Where a power cut's damage is aimed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Aim {
    /// Every pending op independently, as the model says.
    #[default]
    Uniform,
    /// As `Uniform`, except that in each file the newest pending write that spans at
    /// least two tear units and is not all zeros (not a zero-fill) survives torn: its
    /// first unit reaches the medium, at least one later unit does not. That is the tear
    /// a checksum exists for: the start of a record (its header, a slot header's tid)
    /// present, its body not. Needs `model.tear`; otherwise the same as `Uniform`.
    TearNewest,
}

#[derive(Debug, Default)]
struct Disk {
    inodes: BTreeMap<Ino, Inode>,
    next_ino: Ino,
    volatile_ns: BTreeMap<PathBuf, Ino>,
    durable_ns: BTreeMap<PathBuf, Ino>,
    /// Mutating calls made so far (not counting calls refused by a power cut).
    ops: u64,
    /// The disk stops once `ops` reaches this.
    cut_at: Option<u64>,
    /// State of the stream `Vfs::nonce` draws from.
    nonce: u64,
    /// Op indices (the value of `ops` before the call) of syncs that found pending ops.
    sync_points: Vec<u64>,
    /// Writes made through direct handles.
    direct_writes: u64,
    /// Memory regions by path (module docs).
    regions: BTreeMap<PathBuf, SimRegionData>,
    /// Whether a power cut keeps the regions (persistent memory) or drops them.
    regions_persistent: bool,
    /// Whether handles take turns (`SimVfs::take_turns`): then `File::lock_range` keeps
    /// `locks`, as open-file-description locks do, and each handle stands for a process.
    take_turns: bool,
    /// Byte-range locks by (inode, byte): the handles holding the byte and how. Not
    /// disk state: never counted as an op, never cut, gone after a crash.
    locks: BTreeMap<(Ino, u64), Vec<(u64, LockKind)>>,
    /// The id the next open handle gets (its locks are its own, `SimFile::id`).
    next_handle: u64,
}

/// A simulated memory region: what survives (`durable`), what reads see (`volatile`),
/// and the ranges stored since they were last persisted.
#[derive(Debug, Clone, Default)]
struct SimRegionData {
    durable: Vec<u8>,
    volatile: Vec<u8>,
    pending: Vec<(usize, usize)>,
}

/// Bytes a CPU stores atomically: the unit a cut keeps or drops in a region.
const REGION_WORD: usize = 8;

impl SimRegionData {
    fn fresh(len: usize) -> SimRegionData {
        SimRegionData {
            durable: vec![0; len],
            volatile: vec![0; len],
            pending: Vec::new(),
        }
    }

    /// What a power cut leaves of this region (module docs).
    fn crashed(&self, rng: &mut Rng, model: &CrashModel) -> SimRegionData {
        let mut img = self.durable.clone();
        for &(start, end) in &self.pending {
            let mut w = start / REGION_WORD * REGION_WORD;
            while w < end {
                let e = (w + REGION_WORD).min(img.len());
                if !model.lose || rng.coin() {
                    img[w..e].copy_from_slice(&self.volatile[w..e]);
                }
                w = e;
            }
        }
        SimRegionData {
            durable: img.clone(),
            volatile: img,
            pending: Vec::new(),
        }
    }
}

fn power_cut() -> io::Error {
    io::Error::other("simulated power cut")
}

fn not_found(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("{}: no such file", path.display()),
    )
}

fn too_large() -> io::Error {
    io::Error::from(rustix::io::Errno::FBIG)
}

/// `[offset, offset+len)` as in-memory indices, or EFBIG past `MAX_FILE_LEN`.
fn range(offset: u64, len: u64) -> io::Result<(usize, usize)> {
    let end = offset
        .checked_add(len)
        .filter(|&e| e <= MAX_FILE_LEN)
        .ok_or_else(too_large)?;
    // Also refuses what the address space cannot hold on narrow targets.
    match (usize::try_from(offset), usize::try_from(end)) {
        (Ok(s), Ok(e)) => Ok((s, e)),
        _ => Err(too_large()),
    }
}

/// Directory a path's entry lives in; `"."` for a bare name.
fn dir_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

fn norm_dir(dir: &Path) -> PathBuf {
    if dir.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        dir.to_path_buf()
    }
}

impl Disk {
    fn is_cut(&self) -> bool {
        self.cut_at.is_some_and(|c| self.ops >= c)
    }

    /// Gate for non-mutating calls.
    fn check_read(&self) -> io::Result<()> {
        if self.is_cut() {
            Err(power_cut())
        } else {
            Ok(())
        }
    }

    /// Gate for mutating calls: refuse after the cut, else count the call.
    fn begin_mutation(&mut self) -> io::Result<()> {
        self.check_read()?;
        self.ops += 1;
        Ok(())
    }

    fn new_inode(&mut self, inode: Inode) -> Ino {
        let ino = self.next_ino;
        self.next_ino += 1;
        self.inodes.insert(ino, inode);
        ino
    }

    /// Free an inode nothing refers to any more, so long tests don't accumulate garbage.
    fn maybe_free(&mut self, ino: Ino) {
        let referenced = self.inodes.get(&ino).is_some_and(|i| i.handles > 0)
            || self.volatile_ns.values().any(|&i| i == ino)
            || self.durable_ns.values().any(|&i| i == ino);
        if !referenced {
            self.inodes.remove(&ino);
        }
    }

    fn inode_mut(&mut self, ino: Ino) -> io::Result<&mut Inode> {
        // A handle keeps its inode alive, so this only fails on an internal bug; report it
        // as an error rather than panic.
        self.inodes
            .get_mut(&ino)
            .ok_or_else(|| io::Error::other("simulated inode vanished"))
    }
}

/// Simulated disk. `Clone` shares the same disk.
#[derive(Debug, Clone, Default)]
pub struct SimVfs {
    disk: Arc<Mutex<Disk>>,
}

fn lock(disk: &Mutex<Disk>) -> MutexGuard<'_, Disk> {
    disk.lock().unwrap_or_else(|e| e.into_inner())
}

impl SimVfs {
    /// An empty disk whose nonce stream starts from 0.
    pub fn new() -> SimVfs {
        SimVfs::default()
    }

    /// Make handles on this disk take turns as handles in different processes do
    /// (`Vfs::handles_take_turns`): byte-range locks that conflict between handles, so
    /// two `Database` handles on it behave as two processes (their side region, the
    /// `<db>-shm` a real system shares through a mapped file, is the disk's region, kept
    /// or lost by a power cut as regions are). Kept by `crash` and `process_crash`; the
    /// locks themselves are not (every handle died).
    pub fn take_turns(&self, on: bool) {
        self.lock().take_turns = on;
    }

    /// An empty disk whose nonce stream (`Vfs::nonce`) starts from `seed`.
    pub fn with_seed(seed: u64) -> SimVfs {
        let d = SimVfs::default();
        d.lock().nonce = seed;
        d
    }

    fn lock(&self) -> MutexGuard<'_, Disk> {
        lock(&self.disk)
    }

    /// The disk a power cut would leave now, as a new independent `SimVfs`: the durable
    /// namespace, and for each file its durable image plus the pending ops `model` lets
    /// survive. Deterministic in `seed`. Works whether or not a power-cut point fired;
    /// the new disk has no cut point and a zero op count.
    pub fn crash(&self, seed: u64, model: CrashModel) -> SimVfs {
        self.crash_report(seed, model, Aim::Uniform).0
    }

    /// `crash`, aimed as `aim` says, with a report of what the cut did to the writes
    /// (summed over files).
    pub fn crash_report(&self, seed: u64, model: CrashModel, aim: Aim) -> (SimVfs, CrashReport) {
        let d = self.lock();
        let mut report = CrashReport::default();
        let mut images: BTreeMap<Ino, Vec<u8>> = BTreeMap::new();
        for &ino in d.durable_ns.values() {
            if images.contains_key(&ino) {
                continue;
            }
            let Some(inode) = d.inodes.get(&ino) else {
                continue;
            };
            // Per-inode stream: mixing the inode number in through one splitmix step
            // decorrelates files while staying a pure function of (seed, ino).
            let mut rng = Rng::new(seed ^ Rng::new(ino).next());
            let (img, r) = inode.crashed(&mut rng, &model, aim);
            report.pending_writes += r.pending_writes;
            report.lost_writes += r.lost_writes;
            report.torn_writes += r.torn_writes;
            images.insert(ino, img);
        }
        let inodes = images
            .into_iter()
            .map(|(ino, img)| (ino, Inode::with_durable(img)))
            .collect();
        let regions = if d.regions_persistent {
            let mut rng = Rng::new(seed ^ 0x5245_4749_4F4E);
            d.regions
                .iter()
                .map(|(p, r)| (p.clone(), r.crashed(&mut rng, &model)))
                .collect()
        } else {
            BTreeMap::new()
        };
        let disk = Disk {
            inodes,
            next_ino: d.next_ino,
            volatile_ns: d.durable_ns.clone(),
            durable_ns: d.durable_ns.clone(),
            ops: 0,
            cut_at: None,
            nonce: Rng::new(d.nonce ^ seed.rotate_left(17)).next(),
            sync_points: Vec::new(),
            direct_writes: 0,
            regions,
            regions_persistent: d.regions_persistent,
            take_turns: d.take_turns,
            ..Disk::default()
        };
        (
            SimVfs {
                disk: Arc::new(Mutex::new(disk)),
            },
            report,
        )
    }

    /// A process crash: the OS (page cache and dentry cache) survives, so the new disk
    /// has the current volatile namespace and contents, all still pending-free. Useful to
    /// test reopen without any durability effect.
    pub fn process_crash(&self) -> SimVfs {
        let d = self.lock();
        let mut inodes = BTreeMap::new();
        for &ino in d.volatile_ns.values() {
            if let Some(inode) = d.inodes.get(&ino) {
                inodes
                    .entry(ino)
                    .or_insert_with(|| Inode::with_durable(inode.volatile.clone()));
            }
        }
        let disk = Disk {
            inodes,
            next_ino: d.next_ino,
            volatile_ns: d.volatile_ns.clone(),
            durable_ns: d.volatile_ns.clone(),
            ops: 0,
            cut_at: None,
            nonce: Rng::new(d.nonce ^ 0x9C0C_E55C).next(),
            sync_points: Vec::new(),
            direct_writes: 0,
            // The OS keeps every region through a process crash, stored or persisted.
            regions: d
                .regions
                .iter()
                .map(|(p, r)| {
                    let mut r = r.clone();
                    r.durable = r.volatile.clone();
                    r.pending.clear();
                    (p.clone(), r)
                })
                .collect(),
            regions_persistent: d.regions_persistent,
            take_turns: d.take_turns,
            ..Disk::default()
        };
        SimVfs {
            disk: Arc::new(Mutex::new(disk)),
        }
    }

    /// After `ops` more mutating calls, every further call on this disk and its open
    /// files fails with "simulated power cut" and changes nothing. `0` cuts now.
    pub fn set_power_cut_after(&self, ops: u64) {
        let mut d = self.lock();
        d.cut_at = Some(d.ops.saturating_add(ops));
    }

    /// Whether a power cut keeps the memory regions (persistent memory, e.g. a DAX
    /// mount) or drops them (`/dev/shm`); default false. Carried to crashed disks.
    pub fn set_regions_persistent(&self, yes: bool) {
        self.lock().regions_persistent = yes;
    }

    /// Paths of the memory regions, sorted. Ignores the power cut.
    pub fn region_names(&self) -> Vec<PathBuf> {
        self.lock().regions.keys().cloned().collect()
    }

    /// Remove the power-cut point (the disk works again, as after a reboot without
    /// losing anything; prefer `crash` to model a real cut).
    pub fn clear_power_cut(&self) {
        self.lock().cut_at = None;
    }

    /// Mutating calls made so far (calls refused by the cut are not counted).
    pub fn op_count(&self) -> u64 {
        self.lock().ops
    }

    /// Whether the power-cut point has been reached.
    pub fn is_cut(&self) -> bool {
        self.lock().is_cut()
    }

    /// Paths in the volatile namespace, sorted. Ignores the power cut.
    pub fn file_names(&self) -> Vec<PathBuf> {
        self.lock().volatile_ns.keys().cloned().collect()
    }

    /// Current (volatile) content of a file. Ignores the power cut.
    pub fn read_file(&self, path: &Path) -> Option<Vec<u8>> {
        let d = self.lock();
        let ino = d.volatile_ns.get(path)?;
        d.inodes.get(ino).map(|i| i.volatile.clone())
    }

    /// Content a file has on the medium (durable image of the inode the durable
    /// namespace names). Ignores the power cut.
    pub fn read_durable(&self, path: &Path) -> Option<Vec<u8>> {
        let d = self.lock();
        let ino = d.durable_ns.get(path)?;
        d.inodes.get(ino).map(|i| i.durable.clone())
    }

    /// Set a file's content durably (name and data), dropping its pending ops: for
    /// setting up inputs such as corrupt files. An existing file keeps its inode, so open
    /// handles see the new content. Not counted as an op; ignores the power cut.
    pub fn write_file(&self, path: &Path, data: &[u8]) {
        let mut d = self.lock();
        let ino = match d.volatile_ns.get(path) {
            Some(&ino) => ino,
            None => d.new_inode(Inode::default()),
        };
        let old_durable = d.durable_ns.insert(path.to_path_buf(), ino);
        d.volatile_ns.insert(path.to_path_buf(), ino);
        if let Some(inode) = d.inodes.get_mut(&ino) {
            inode.durable = data.to_vec();
            inode.volatile = data.to_vec();
            inode.pending.clear();
        }
        if let Some(old) = old_durable {
            d.maybe_free(old);
        }
    }

    /// Op indices of the syncs so far that found unsynced ops on their file: the value
    /// `op_count` had just before each such call, so `set_power_cut_after` with it on a
    /// replay of the same calls cuts exactly there (the writes pending, the sync refused).
    pub fn sync_points(&self) -> Vec<u64> {
        self.lock().sync_points.clone()
    }

    /// Writes made through direct (`O_DIRECT`) handles so far.
    pub fn direct_writes(&self) -> u64 {
        self.lock().direct_writes
    }

    /// Number of unsynced ops of the file the volatile namespace names (0 if none).
    pub fn pending_ops(&self, path: &Path) -> usize {
        let d = self.lock();
        d.volatile_ns
            .get(path)
            .and_then(|ino| d.inodes.get(ino))
            .map_or(0, |i| i.pending.len())
    }
}

impl Vfs for SimVfs {
    fn in_process_memory(&self) -> bool {
        true
    }

    fn handles_take_turns(&self) -> bool {
        self.lock().take_turns
    }

    /// `opts.direct` is accepted and ignored: the simulated disk has no page cache to
    /// bypass and no alignment rules, and durability is governed by syncs either way.
    /// `create_new` implies `create`, as with `std::fs::OpenOptions`. Counted as a
    /// mutating op when it may create (`create` or `create_new`).
    fn open(&self, path: &Path, opts: OpenOptions) -> io::Result<Arc<dyn File>> {
        let mut d = self.lock();
        let may_create = opts.create || opts.create_new;
        if may_create {
            d.begin_mutation()?;
        } else {
            d.check_read()?;
        }
        let ino = match d.volatile_ns.get(path) {
            Some(_) if opts.create_new => {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!("{}: file exists", path.display()),
                ))
            }
            Some(&ino) => ino,
            None if may_create => {
                let ino = d.new_inode(Inode::default());
                d.volatile_ns.insert(path.to_path_buf(), ino);
                ino
            }
            None => return Err(not_found(path)),
        };
        d.inode_mut(ino)?.handles += 1;
        d.next_handle += 1;
        Ok(Arc::new(SimFile {
            disk: self.disk.clone(),
            ino,
            direct: opts.direct,
            id: d.next_handle,
        }))
    }

    fn delete(&self, path: &Path) -> io::Result<()> {
        let mut d = self.lock();
        d.begin_mutation()?;
        let ino = d.volatile_ns.remove(path).ok_or_else(|| not_found(path))?;
        d.maybe_free(ino);
        Ok(())
    }

    fn exists(&self, path: &Path) -> io::Result<bool> {
        let d = self.lock();
        d.check_read()?;
        Ok(d.volatile_ns.contains_key(path))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut d = self.lock();
        d.begin_mutation()?;
        let ino = *d.volatile_ns.get(from).ok_or_else(|| not_found(from))?;
        if from == to {
            return Ok(());
        }
        d.volatile_ns.remove(from);
        if let Some(old) = d.volatile_ns.insert(to.to_path_buf(), ino) {
            d.maybe_free(old);
        }
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut d = self.lock();
        d.begin_mutation()?;
        let dir = norm_dir(dir);
        let dropped: Vec<(PathBuf, Ino)> = d
            .durable_ns
            .iter()
            .filter(|(p, _)| dir_of(p) == dir)
            .map(|(p, &i)| (p.clone(), i))
            .collect();
        for (p, _) in &dropped {
            d.durable_ns.remove(p);
        }
        let added: Vec<(PathBuf, Ino)> = d
            .volatile_ns
            .iter()
            .filter(|(p, _)| dir_of(p) == dir)
            .map(|(p, &i)| (p.clone(), i))
            .collect();
        d.durable_ns.extend(added);
        for (_, ino) in dropped {
            d.maybe_free(ino);
        }
        Ok(())
    }

    /// Drawn from the disk's seed (module docs); not a disk op.
    fn nonce(&self, salt: u64) -> u64 {
        let mut d = self.lock();
        let mut r = Rng::new(d.nonce);
        let v = r.next();
        d.nonce = r.0;
        v ^ Rng::new(salt).next()
    }

    /// Counted as a mutating op when it creates the region.
    fn open_region(&self, path: &Path, create: Option<usize>) -> io::Result<Arc<dyn Region>> {
        let mut d = self.lock();
        if !d.regions.contains_key(path) {
            let len = create.ok_or_else(|| not_found(path))?;
            d.begin_mutation()?;
            range(0, len as u64)?;
            d.regions
                .insert(path.to_path_buf(), SimRegionData::fresh(len));
        } else {
            d.check_read()?;
        }
        Ok(Arc::new(SimRegion {
            disk: self.disk.clone(),
            path: path.to_path_buf(),
        }))
    }

    fn delete_region(&self, path: &Path) -> io::Result<()> {
        let mut d = self.lock();
        d.begin_mutation()?;
        d.regions
            .remove(path)
            .map(drop)
            .ok_or_else(|| not_found(path))
    }
}

/// A memory region on a [`SimVfs`] (module docs), found by path on each access.
#[derive(Debug)]
pub struct SimRegion {
    disk: Arc<Mutex<Disk>>,
    path: PathBuf,
}

impl SimRegion {
    fn with<T>(
        &self,
        mutate: bool,
        f: impl FnOnce(&mut SimRegionData) -> io::Result<T>,
    ) -> io::Result<T> {
        let mut d = lock(&self.disk);
        if mutate {
            d.begin_mutation()?;
        } else {
            d.check_read()?;
        }
        let r = d
            .regions
            .get_mut(&self.path)
            .ok_or_else(|| not_found(&self.path))?;
        f(r)
    }
}

impl Region for SimRegion {
    fn len(&self) -> usize {
        let d = lock(&self.disk);
        d.regions.get(&self.path).map_or(0, |r| r.volatile.len())
    }

    fn read(&self, offset: usize, buf: &mut [u8]) -> io::Result<()> {
        self.with(false, |r| {
            inpage_vfs::check_range(r.volatile.len(), offset, buf.len())?;
            buf.copy_from_slice(&r.volatile[offset..offset + buf.len()]);
            Ok(())
        })
    }

    fn write(&self, offset: usize, data: &[u8]) -> io::Result<()> {
        self.with(true, |r| {
            inpage_vfs::check_range(r.volatile.len(), offset, data.len())?;
            r.volatile[offset..offset + data.len()].copy_from_slice(data);
            r.pending.push((offset, offset + data.len()));
            Ok(())
        })
    }

    fn persist(&self, offset: usize, len: usize) -> io::Result<()> {
        self.with(true, |r| {
            inpage_vfs::check_range(r.volatile.len(), offset, len)?;
            let end = offset + len;
            r.durable[offset..end].copy_from_slice(&r.volatile[offset..end]);
            // A range partly outside stays pending; its persisted part now reads the
            // same either way.
            r.pending.retain(|&(a, b)| a < offset || b > end);
            Ok(())
        })
    }
}

/// An open file on a [`SimVfs`]. The handle refers to the inode, not the name, so it
/// keeps working after the name is renamed or deleted, as on POSIX.
#[derive(Debug)]
pub struct SimFile {
    disk: Arc<Mutex<Disk>>,
    ino: Ino,
    /// Opened with O_DIRECT: offsets, lengths and buffers must be sector-aligned.
    direct: bool,
    /// Whose byte-range locks are whose (`Disk::locks`): one per open, as an open file
    /// description.
    id: u64,
}

impl SimFile {
    /// EINVAL for an O_DIRECT transfer Linux would refuse (module docs).
    fn check_direct(&self, addr: *const u8, len: usize, offset: u64) -> io::Result<()> {
        let misaligned = |x: u64| x % SECTOR as u64 != 0;
        if self.direct && (misaligned(addr as u64) || misaligned(len as u64) || misaligned(offset))
        {
            return Err(io::Error::from(rustix::io::Errno::INVAL));
        }
        Ok(())
    }

    fn mutate(&self, f: impl FnOnce(&mut Inode) -> io::Result<()>) -> io::Result<()> {
        let mut d = lock(&self.disk);
        d.begin_mutation()?;
        f(d.inode_mut(self.ino)?)
    }

    fn sync(&self) -> io::Result<()> {
        let mut d = lock(&self.disk);
        let at = d.ops;
        d.begin_mutation()?;
        let inode = d.inode_mut(self.ino)?;
        let had_pending = !inode.pending.is_empty();
        inode.sync();
        if had_pending {
            d.sync_points.push(at);
        }
        Ok(())
    }
}

impl Drop for SimFile {
    fn drop(&mut self) {
        let mut d = lock(&self.disk);
        // Closing an open file description lets go of its locks.
        if d.take_turns {
            let id = self.id;
            d.locks.retain(|_, holders| {
                holders.retain(|(h, _)| *h != id);
                !holders.is_empty()
            });
        }
        if let Some(i) = d.inodes.get_mut(&self.ino) {
            i.handles = i.handles.saturating_sub(1);
        }
        d.maybe_free(self.ino);
    }
}

impl File for SimFile {
    /// Open-file-description semantics while the disk takes turns (`SimVfs::take_turns`):
    /// a byte held exclusively by another handle, or shared by one while this asks for
    /// it exclusively, refuses the whole range (nothing taken); this handle's own locks
    /// never conflict with it and are replaced. Otherwise every lock succeeds (one handle
    /// per file, as before).
    fn lock_range(&self, start: u64, len: u64, kind: Option<LockKind>) -> io::Result<bool> {
        let mut d = lock(&self.disk);
        if !d.take_turns {
            return Ok(true);
        }
        if len == 0 || len > 64 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("simulated locks cover 1 to 64 bytes, not {len}"),
            ));
        }
        let (ino, id) = (self.ino, self.id);
        let bytes = start..start.checked_add(len).ok_or(io::ErrorKind::InvalidInput)?;
        if let Some(want) = kind {
            let conflict = bytes.clone().any(|b| {
                d.locks.get(&(ino, b)).is_some_and(|holders| {
                    holders.iter().any(|&(h, k)| {
                        h != id && (want == LockKind::Exclusive || k == LockKind::Exclusive)
                    })
                })
            });
            if conflict {
                return Ok(false);
            }
        }
        for b in bytes {
            let holders = d.locks.entry((ino, b)).or_default();
            holders.retain(|&(h, _)| h != id);
            if let Some(k) = kind {
                holders.push((id, k));
            }
            if holders.is_empty() {
                d.locks.remove(&(ino, b));
            }
        }
        Ok(true)
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.check_direct(buf.as_ptr(), buf.len(), offset)?;
        let mut d = lock(&self.disk);
        d.check_read()?;
        let img = &d.inode_mut(self.ino)?.volatile;
        if offset >= img.len() as u64 {
            return Ok(0);
        }
        let start = offset as usize;
        let n = buf.len().min(img.len() - start);
        buf[..n].copy_from_slice(&img[start..start + n]);
        Ok(n)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.check_direct(buf.as_ptr(), buf.len(), offset)?;
        self.mutate(|inode| {
            let (start, _) = range(offset, buf.len() as u64)?;
            if !buf.is_empty() {
                inode.push(PendingOp::Write {
                    offset: start,
                    data: buf.to_vec(),
                });
            }
            Ok(())
        })?;
        if self.direct {
            lock(&self.disk).direct_writes += 1;
        }
        Ok(())
    }

    fn sync_data(&self) -> io::Result<()> {
        self.sync()
    }

    fn sync_all(&self) -> io::Result<()> {
        self.sync()
    }

    fn len(&self) -> io::Result<u64> {
        let mut d = lock(&self.disk);
        d.check_read()?;
        Ok(d.inode_mut(self.ino)?.volatile.len() as u64)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.mutate(|inode| {
            let (_, end) = range(0, len)?;
            inode.push(PendingOp::SetLen(end));
            Ok(())
        })
    }

    /// One op (not one per chunk), recorded as a single pending write of zeros.
    fn allocate(&self, offset: u64, len: u64) -> io::Result<()> {
        self.mutate(|inode| {
            let (start, end) = range(offset, len)?;
            if end > start {
                inode.push(PendingOp::Write {
                    offset: start,
                    data: vec![0; end - start],
                });
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn p(s: &str) -> PathBuf {
        PathBuf::from(s)
    }

    /// A file that exists durably (created, dir synced), with `data` synced.
    fn durable_file(vfs: &SimVfs, name: &str, data: &[u8]) -> Arc<dyn File> {
        let f = vfs.open(&p(name), OpenOptions::CREATE).unwrap();
        f.write_at(data, 0).unwrap();
        f.sync_data().unwrap();
        vfs.sync_dir(&dir_of(&p(name))).unwrap();
        f
    }

    #[test]
    fn locks_conflict_between_handles_only_when_taking_turns() {
        let vfs = SimVfs::new();
        let (a, b) = (
            vfs.open(&p("f"), OpenOptions::CREATE).unwrap(),
            vfs.open(&p("f"), OpenOptions::CREATE).unwrap(),
        );
        let (sh, ex) = (Some(LockKind::Shared), Some(LockKind::Exclusive));
        // One handle per file by default: every lock is granted.
        assert!(a.lock_range(10, 1, ex).unwrap() && b.lock_range(10, 1, ex).unwrap());
        vfs.take_turns(true);
        assert!(a.lock_range(10, 3, ex).unwrap());
        assert!(!b.lock_range(11, 1, sh).unwrap(), "shared beside exclusive");
        assert!(
            a.lock_range(10, 3, ex).unwrap(),
            "a handle's own locks never conflict"
        );
        assert!(a.lock_range(10, 3, sh).unwrap(), "downgrade");
        assert!(b.lock_range(11, 1, sh).unwrap(), "shared beside shared");
        assert!(
            !b.lock_range(9, 3, ex).unwrap(),
            "a refused range takes none of its bytes"
        );
        assert!(b.lock_range(9, 1, ex).unwrap(), "byte 9 was left free");
        assert!(
            !a.lock_range(10, 2, ex).unwrap(),
            "upgrade refused while b shares 11"
        );
        // Closing a handle lets go of its locks; another handle of the same file too.
        drop(b);
        assert!(a.lock_range(9, 3, ex).unwrap());
        let c = vfs.open(&p("f"), OpenOptions::default()).unwrap();
        assert!(!c.lock_range(9, 1, sh).unwrap());
        a.lock_range(9, 3, None).unwrap();
        assert!(c.lock_range(9, 1, ex).unwrap());
        // Locks do not outlive a crash; taking turns does.
        let crashed = vfs.crash(1, CrashModel::full());
        assert!(crashed.handles_take_turns());
        let d = crashed.open(&p("f"), OpenOptions::CREATE).unwrap();
        assert!(d.lock_range(9, 1, ex).unwrap());
    }

    #[test]
    fn basic_read_write() {
        let vfs = SimVfs::new();
        let f = vfs.open(&p("a"), OpenOptions::CREATE).unwrap();
        f.write_at(b"hello", 3).unwrap();
        assert_eq!(f.len().unwrap(), 8);
        let mut buf = [9u8; 10];
        assert_eq!(f.read_at(&mut buf, 0).unwrap(), 8);
        assert_eq!(&buf[..8], b"\0\0\0hello");
        assert_eq!(f.read_at(&mut buf, 8).unwrap(), 0);
        assert_eq!(f.read_at(&mut buf, u64::MAX).unwrap(), 0);
        assert_eq!(vfs.read_file(&p("a")).unwrap(), b"\0\0\0hello");
        assert_eq!(vfs.pending_ops(&p("a")), 1);
        f.sync_data().unwrap();
        assert_eq!(vfs.pending_ops(&p("a")), 0);
        // Absurd offsets are refused, not allocated.
        assert!(f.write_at(b"x", u64::MAX).is_err());
        assert!(f.write_at(b"x", MAX_FILE_LEN).is_err());
        assert!(f.allocate(u64::MAX, 2).is_err());
        assert!(f.set_len(u64::MAX).is_err());
    }

    #[test]
    fn open_errors() {
        let vfs = SimVfs::new();
        let e = vfs.open(&p("x"), OpenOptions::default()).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        vfs.open(&p("x"), OpenOptions::CREATE).unwrap();
        let e = vfs
            .open(
                &p("x"),
                OpenOptions {
                    create: true,
                    create_new: true,
                    direct: true,
                },
            )
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(
            vfs.delete(&p("nope")).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        assert_eq!(
            vfs.rename(&p("nope"), &p("x")).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        assert!(vfs.exists(&p("x")).unwrap());
        vfs.delete(&p("x")).unwrap();
        assert!(!vfs.exists(&p("x")).unwrap());
    }

    #[test]
    fn unsynced_write_lost_under_lose() {
        let vfs = SimVfs::new();
        let f = durable_file(&vfs, "db", &[1u8; 1024]);
        f.write_at(&[2u8; 1024], 0).unwrap();
        let mut lost = false;
        let mut kept = false;
        for seed in 0..64 {
            let c = vfs.crash(seed, CrashModel::lose_only());
            let img = c.read_file(&p("db")).unwrap();
            if img == [1u8; 1024] {
                lost = true;
            } else {
                assert_eq!(img, [2u8; 1024]);
                kept = true;
            }
        }
        assert!(lost && kept);
    }

    #[test]
    fn synced_write_survives_every_crash() {
        let vfs = SimVfs::new();
        let f = durable_file(&vfs, "dir/db", &[7u8; 3000]);
        f.write_at(&[8u8; 100], 5000).unwrap();
        f.sync_all().unwrap();
        f.write_at(&[9u8; 600], 100).unwrap();
        let models = [
            CrashModel::full(),
            CrashModel::lose_only(),
            CrashModel::none(),
            CrashModel::atomic_pages(4096),
        ];
        for seed in 0..50 {
            for m in models {
                let img = vfs.crash(seed, m).read_file(&p("dir/db")).unwrap();
                assert_eq!(img.len(), 5100);
                assert!(img[..100].iter().all(|&b| b == 7));
                assert!(img[700..3000].iter().all(|&b| b == 7));
                assert!(img[3000..5000].iter().all(|&b| b == 0));
                assert!(img[5000..].iter().all(|&b| b == 8));
            }
        }
    }

    #[test]
    fn set_len_durability() {
        let vfs = SimVfs::new();
        let f = durable_file(&vfs, "f", &[5u8; 4096]);
        f.set_len(1000).unwrap();
        assert_eq!(f.len().unwrap(), 1000);
        let mut lens = std::collections::BTreeSet::new();
        for seed in 0..64 {
            let img = vfs
                .crash(seed, CrashModel::full())
                .read_file(&p("f"))
                .unwrap();
            assert!(img.iter().all(|&b| b == 5));
            lens.insert(img.len());
        }
        assert_eq!(lens.into_iter().collect::<Vec<_>>(), vec![1000, 4096]);
        f.set_len(2000).unwrap();
        f.sync_data().unwrap();
        for seed in 0..16 {
            let img = vfs
                .crash(seed, CrashModel::full())
                .read_file(&p("f"))
                .unwrap();
            assert_eq!(img.len(), 2000);
            assert!(img[..1000].iter().all(|&b| b == 5));
            assert!(img[1000..].iter().all(|&b| b == 0));
        }
    }

    #[test]
    fn created_file_needs_sync_dir() {
        let vfs = SimVfs::new();
        let f = vfs.open(&p("d/new"), OpenOptions::CREATE).unwrap();
        f.write_at(b"data", 0).unwrap();
        f.sync_all().unwrap();
        // Syncing some other directory does not help.
        vfs.sync_dir(&p("other")).unwrap();
        vfs.sync_dir(&p(".")).unwrap();
        for m in [CrashModel::none(), CrashModel::full()] {
            assert!(vfs.crash(1, m).file_names().is_empty());
        }
        vfs.sync_dir(&p("d")).unwrap();
        for m in [CrashModel::none(), CrashModel::full()] {
            let c = vfs.crash(1, m);
            assert_eq!(c.file_names(), vec![p("d/new")]);
            assert_eq!(c.read_file(&p("d/new")).unwrap(), b"data");
        }
        // A bare name lives in ".", and "" means "." too.
        let g = vfs.open(&p("top"), OpenOptions::CREATE).unwrap();
        g.sync_data().unwrap();
        vfs.sync_dir(Path::new("")).unwrap();
        assert!(vfs.crash(0, CrashModel::full()).exists(&p("top")).unwrap());
    }

    #[test]
    fn delete_needs_sync_dir() {
        let vfs = SimVfs::new();
        drop(durable_file(&vfs, "a", b"old"));
        vfs.delete(&p("a")).unwrap();
        assert!(!vfs.exists(&p("a")).unwrap());
        let c = vfs.crash(0, CrashModel::full());
        assert_eq!(c.read_file(&p("a")).unwrap(), b"old");
        vfs.sync_dir(&p(".")).unwrap();
        assert!(vfs.crash(0, CrashModel::full()).file_names().is_empty());
    }

    #[test]
    fn rename_durability_needs_sync_dir() {
        let vfs = SimVfs::new();
        drop(durable_file(&vfs, "d/db", b"old contents"));
        let t = vfs.open(&p("d/tmp"), OpenOptions::CREATE).unwrap();
        t.write_at(b"new", 0).unwrap();
        t.sync_data().unwrap();
        vfs.rename(&p("d/tmp"), &p("d/db")).unwrap();
        assert_eq!(vfs.read_file(&p("d/db")).unwrap(), b"new");
        assert_eq!(vfs.file_names(), vec![p("d/db")]);
        // Rename not durable yet: the old file is what a crash leaves.
        let c = vfs.crash(3, CrashModel::full());
        assert_eq!(c.file_names(), vec![p("d/db")]);
        assert_eq!(c.read_file(&p("d/db")).unwrap(), b"old contents");
        vfs.sync_dir(&p("d")).unwrap();
        let c = vfs.crash(3, CrashModel::full());
        assert_eq!(c.file_names(), vec![p("d/db")]);
        assert_eq!(c.read_file(&p("d/db")).unwrap(), b"new");
        // Data follows the inode: the handle opened as tmp still writes to d/db.
        t.write_at(b"N", 0).unwrap();
        assert_eq!(vfs.read_file(&p("d/db")).unwrap(), b"New");
    }

    #[test]
    fn tearing_only_at_sector_boundaries() {
        let vfs = SimVfs::new();
        let f = durable_file(&vfs, "f", &[0xAAu8; 8192]);
        // Unaligned start and end, so partial sectors occur at both ends.
        let (start, len) = (300usize, 5000usize);
        f.write_at(&vec![0xBBu8; len], start as u64).unwrap();
        let mut torn_seen = false;
        for seed in 0..200 {
            let img = vfs
                .crash(seed, CrashModel::full())
                .read_file(&p("f"))
                .unwrap();
            assert_eq!(img.len(), 8192);
            for (k, _) in img.chunks(SECTOR).enumerate() {
                // Within a sector, the written part is all old or all new.
                let s0 = k * SECTOR;
                let lo = start.max(s0);
                let hi = (start + len).min(s0 + SECTOR);
                if lo < hi {
                    let part = &img[lo..hi];
                    assert!(
                        part.iter().all(|&b| b == 0xAA) || part.iter().all(|&b| b == 0xBB),
                        "seed {seed}: sector at {s0} split"
                    );
                }
            }
            let new = img.iter().filter(|&&b| b == 0xBB).count();
            if new != 0 && new != len {
                torn_seen = true;
            }
        }
        assert!(torn_seen);
    }

    #[test]
    fn tearing_respects_atomic_pages() {
        let vfs = SimVfs::new();
        let f = durable_file(&vfs, "f", &[0xAAu8; 32768]);
        f.write_at(&[0xBBu8; 16384], 4096).unwrap();
        f.write_at(&[0xCCu8; 8192], 20480).unwrap();
        let mut torn_seen = false;
        for seed in 0..200 {
            let img = vfs
                .crash(seed, CrashModel::atomic_pages(4096))
                .read_file(&p("f"))
                .unwrap();
            for page in img.chunks(4096) {
                assert!(
                    page.iter().all(|&b| b == page[0]),
                    "seed {seed}: page split"
                );
            }
            let new = img[4096..20480].iter().filter(|&&b| b == 0xBB).count();
            if new != 0 && new != 16384 {
                torn_seen = true;
            }
        }
        assert!(torn_seen);
        assert_eq!(CrashModel::atomic_pages(0).tear_unit(), SECTOR);
        assert_eq!(CrashModel::atomic_pages(256).tear_unit(), SECTOR);
        assert_eq!(CrashModel::atomic_pages(16384).tear_unit(), 16384);
    }

    #[test]
    fn later_write_can_survive_without_earlier() {
        let vfs = SimVfs::new();
        let f = durable_file(&vfs, "f", &[0u8; 1024]);
        f.write_at(&[1u8; 512], 0).unwrap();
        f.write_at(&[2u8; 512], 512).unwrap();
        // Same range twice: with reorder, the older value can end up on top.
        f.write_at(&[3u8; 512], 0).unwrap();
        f.write_at(&[4u8; 512], 0).unwrap();
        let mut later_only = false;
        let mut older_on_top = false;
        for seed in 0..200 {
            let img = vfs
                .crash(seed, CrashModel::lose_only())
                .read_file(&p("f"))
                .unwrap();
            if img[0] == 0 && img[512] == 2 {
                later_only = true;
            }
        }
        for seed in 0..200 {
            let m = CrashModel {
                lose: false,
                reorder: true,
                tear: false,
                atomic_pages: None,
            };
            let img = vfs.crash(seed, m).read_file(&p("f")).unwrap();
            assert_eq!(img[512], 2, "nothing lost without `lose`");
            if img[0] != 4 {
                older_on_top = true;
            }
        }
        assert!(later_only && older_on_top);
        // Without reorder or lose, the last write wins.
        for seed in 0..20 {
            let img = vfs
                .crash(seed, CrashModel::none())
                .read_file(&p("f"))
                .unwrap();
            assert!(img[..512].iter().all(|&b| b == 4));
        }
    }

    #[test]
    fn power_cut_after_n_ops() {
        let workload = |vfs: &SimVfs| -> io::Result<()> {
            let f = vfs.open(&p("f"), OpenOptions::CREATE)?; // op 0
            f.write_at(b"abc", 0)?; // op 1
            f.sync_data()?; // op 2
            vfs.sync_dir(&p("."))?; // op 3
            let mut b = [0u8; 3];
            f.read_exact_at(&mut b, 0)?; // not counted
            f.set_len(10)?; // op 4
            f.allocate(10, 10)?; // op 5
            vfs.rename(&p("f"), &p("g"))?; // op 6
            vfs.delete(&p("g"))?; // op 7
            f.sync_all() // op 8
        };
        let vfs = SimVfs::new();
        workload(&vfs).unwrap();
        let n = vfs.op_count();
        assert_eq!(n, 9);
        for cut in 0..=n {
            let vfs = SimVfs::new();
            vfs.set_power_cut_after(cut);
            let r = workload(&vfs);
            assert_eq!(r.is_err(), cut < n, "cut {cut}");
            assert_eq!(vfs.op_count(), cut);
            assert!(vfs.is_cut());
            if let Err(e) = r {
                assert_eq!(e.to_string(), "simulated power cut");
            }
            // Everything fails afterwards, including reads and non-counted calls.
            assert!(vfs.exists(&p("f")).is_err());
            assert!(vfs.open(&p("h"), OpenOptions::CREATE).is_err());
            assert!(vfs.sync_dir(&p(".")).is_err());
            assert_eq!(vfs.op_count(), cut);
            // crash() works after a cut: the file exists durably iff op 3 ran and op 7
            // (the delete, whose dir was never synced) doesn't matter.
            let c = vfs.crash(0, CrashModel::none());
            assert_eq!(c.exists(&p("f")).unwrap(), cut >= 4, "cut {cut}");
        }
        // A handle opened before the cut fails too and changes nothing.
        let vfs = SimVfs::new();
        let f = vfs.open(&p("f"), OpenOptions::CREATE).unwrap();
        f.write_at(b"keep", 0).unwrap();
        vfs.set_power_cut_after(1);
        f.write_at(b"1", 0).unwrap();
        assert!(vfs.is_cut());
        assert_eq!(vfs.op_count(), 3);
        assert!(f.write_at(b"2", 0).is_err());
        assert!(f.read_at(&mut [0u8; 4], 0).is_err());
        assert!(f.len().is_err());
        assert_eq!(vfs.read_file(&p("f")).unwrap(), b"1eep");
    }

    #[test]
    fn same_seed_same_result() {
        let vfs = SimVfs::new();
        let f = durable_file(&vfs, "f", &[0u8; 65536]);
        for i in 0..40u64 {
            let fill = vec![i as u8; 700 + i as usize * 37];
            f.write_at(&fill, (i * 1531) % 60000).unwrap();
            if i % 7 == 0 {
                f.set_len(60000 + i * 100).unwrap();
            }
        }
        let a = vfs.crash(42, CrashModel::full()).read_file(&p("f"));
        let b = vfs.crash(42, CrashModel::full()).read_file(&p("f"));
        assert_eq!(a, b);
        let distinct: std::collections::BTreeSet<_> = (0..20)
            .map(|s| vfs.crash(s, CrashModel::full()).read_file(&p("f")))
            .collect();
        assert!(distinct.len() > 1);
        // A clone shares the disk.
        let v2 = vfs.clone();
        v2.open(&p("g"), OpenOptions::CREATE).unwrap();
        assert!(vfs.exists(&p("g")).unwrap());
    }

    #[test]
    fn regions_survive_process_crashes_and_power_cuts_only_when_persistent() {
        let p = Path::new("/shm/r");
        for persistent in [false, true] {
            let d = SimVfs::new();
            d.set_regions_persistent(persistent);
            let r = d.open_region(p, Some(64)).unwrap();
            r.write(0, &[1; 16]).unwrap();
            r.persist(0, 16).unwrap();
            r.write(16, &[2; 16]).unwrap(); // not persisted
            let pc = d.process_crash();
            let mut b = [0u8; 32];
            pc.open_region(p, None).unwrap().read(0, &mut b).unwrap();
            assert_eq!(&b[..16], &[1; 16]);
            assert_eq!(&b[16..], &[2; 16], "a process crash keeps stored bytes");
            let cut = d.crash(5, CrashModel::none());
            match cut.open_region(p, None) {
                Ok(r) => {
                    assert!(persistent);
                    r.read(0, &mut b).unwrap();
                    assert_eq!(b, [[1u8; 16], [2u8; 16]].concat()[..]);
                }
                Err(e) => {
                    assert!(!persistent);
                    assert_eq!(e.kind(), io::ErrorKind::NotFound);
                }
            }
            // Under a model that loses writes, each unpersisted word keeps its new or
            // its old value; the persisted bytes always survive.
            let mut mixed = false;
            for seed in 0..32 {
                let Ok(r) = d.crash(seed, CrashModel::full()).open_region(p, None) else {
                    continue;
                };
                r.read(0, &mut b).unwrap();
                assert_eq!(&b[..16], &[1; 16]);
                for w in b[16..].chunks(REGION_WORD) {
                    assert!(w == [0; 8] || w == [2; 8], "word torn inside: {w:?}");
                }
                mixed |= b[16..24] != b[24..32];
            }
            assert_eq!(mixed, persistent);
            assert_eq!(d.region_names(), vec![p.to_path_buf()]);
            d.delete_region(p).unwrap();
            assert!(d.region_names().is_empty());
        }
    }

    #[test]
    fn crash_model_none_keeps_everything() {
        let vfs = SimVfs::new();
        let f = durable_file(&vfs, "f", &[1u8; 5000]);
        f.write_at(&[2u8; 1000], 4500).unwrap();
        f.set_len(5200).unwrap();
        f.allocate(6000, 100).unwrap();
        f.write_at(b"tail", 6100).unwrap();
        let want = vfs.read_file(&p("f")).unwrap();
        for seed in 0..10 {
            let c = vfs.crash(seed, CrashModel::none());
            assert_eq!(c.read_file(&p("f")).unwrap(), want);
            assert_eq!(c.pending_ops(&p("f")), 0);
        }
        let pc = vfs.process_crash();
        assert_eq!(pc.read_file(&p("f")).unwrap(), want);
    }

    #[test]
    fn write_file_and_handles_after_delete() {
        let vfs = SimVfs::new();
        vfs.write_file(&p("x/corrupt"), b"garbage");
        let c = vfs.crash(0, CrashModel::full());
        assert_eq!(c.read_file(&p("x/corrupt")).unwrap(), b"garbage");
        let f = vfs.open(&p("x/corrupt"), OpenOptions::default()).unwrap();
        vfs.write_file(&p("x/corrupt"), b"other");
        let mut b = [0u8; 5];
        f.read_exact_at(&mut b, 0).unwrap();
        assert_eq!(&b, b"other");
        // An open handle keeps a deleted inode alive, as on POSIX.
        vfs.delete(&p("x/corrupt")).unwrap();
        vfs.sync_dir(&p("x")).unwrap();
        f.write_at(b"still", 0).unwrap();
        f.read_exact_at(&mut b, 0).unwrap();
        assert_eq!(&b, b"still");
        drop(f);
        assert!(vfs.lock().inodes.is_empty(), "unreferenced inode freed");
    }

    // Self-checks: the crash model must keep doing what the torture relies on. Each test
    // fails if the simulator is weakened in one way (tears only at page boundaries, no
    // reordering, no loss, O_DIRECT alignment not enforced, nonces not seeded).

    /// A page-aligned 4 KiB write is torn at every one of its seven interior 512-byte
    /// boundaries in some crash, and every sector is seen both kept and dropped, so the
    /// model never quietly assumes atomic pages.
    #[test]
    fn self_check_tears_at_every_sector_boundary_inside_a_page() {
        let vfs = SimVfs::new();
        let f = durable_file(&vfs, "f", &[0u8; 8192]);
        f.write_at(&[0xEEu8; 4096], 4096).unwrap();
        let sectors = 4096 / SECTOR;
        let mut split_at = vec![false; sectors];
        let mut kept = vec![false; sectors];
        let mut dropped = vec![false; sectors];
        for seed in 0..400 {
            let img = vfs
                .crash(seed, CrashModel::full())
                .read_file(&p("f"))
                .unwrap();
            let new: Vec<bool> = (0..sectors)
                .map(|k| img[4096 + k * SECTOR] == 0xEE)
                .collect();
            for k in 0..sectors {
                kept[k] |= new[k];
                dropped[k] |= !new[k];
                if k > 0 && new[k] != new[k - 1] {
                    split_at[k] = true;
                }
            }
        }
        assert!(kept.iter().all(|&x| x) && dropped.iter().all(|&x| x));
        assert!(
            split_at[1..].iter().all(|&x| x),
            "interior sector boundaries never torn: {split_at:?}"
        );
    }

    /// `crash_report` counts torn writes, and `Aim::TearNewest` always tears the newest
    /// multi-sector non-zero write with its first sector kept.
    #[test]
    fn self_check_reports_and_aims_tears() {
        let vfs = SimVfs::new();
        let f = durable_file(&vfs, "f", &[0u8; 8192]);
        f.write_at(&[1u8; 1024], 0).unwrap();
        f.allocate(8192, 4096).unwrap(); // zeros: never the aimed write
        f.write_at(&[2u8; 2048], 2048).unwrap();
        let mut torn = 0;
        for seed in 0..100 {
            let (d, r) = vfs.crash_report(seed, CrashModel::full(), Aim::TearNewest);
            assert_eq!(r.pending_writes, 3);
            assert!(r.torn_writes >= 1, "seed {seed}: {r:?}");
            let img = d.read_file(&p("f")).unwrap();
            assert_eq!(
                img[2048], 2,
                "seed {seed}: first sector of the aimed write kept"
            );
            assert!(
                img[2048..4096].chunks(SECTOR).any(|s| s[0] != 2),
                "seed {seed}: a later sector of the aimed write dropped"
            );
            let (_, r) = vfs.crash_report(seed, CrashModel::full(), Aim::Uniform);
            torn += r.torn_writes;
        }
        assert!(torn > 0, "uniform crashes tear sometimes");
        // No tear without `tear`, aimed or not.
        let (_, r) = vfs.crash_report(1, CrashModel::lose_only(), Aim::TearNewest);
        assert_eq!(r.torn_writes, 0);
    }

    /// Reordering: with every pending write surviving whole, an older write to the same
    /// sector ends on top in some crash, and never without `reorder`.
    #[test]
    fn self_check_reorders() {
        let vfs = SimVfs::new();
        let f = durable_file(&vfs, "f", &[0u8; 512]);
        for v in 1..=4u8 {
            f.write_at(&[v; 512], 0).unwrap();
        }
        let keep_all = |reorder| CrashModel {
            lose: false,
            reorder,
            tear: false,
            atomic_pages: None,
        };
        let older_on_top = (0..100)
            .any(|seed| vfs.crash(seed, keep_all(true)).read_file(&p("f")).unwrap()[0] != 4);
        assert!(older_on_top, "reordering never observed");
        for seed in 0..50 {
            assert_eq!(
                vfs.crash(seed, keep_all(false)).read_file(&p("f")).unwrap()[0],
                4
            );
        }
    }

    /// Loss: an unsynced write is lost in some crashes and kept in others; once synced it
    /// survives every crash; a file that was never synced keeps no data.
    #[test]
    fn self_check_loses_unsynced_writes() {
        let vfs = SimVfs::new();
        let f = durable_file(&vfs, "f", &[0u8; 1024]);
        f.write_at(&[7u8; 512], 0).unwrap();
        let outcomes: Vec<bool> = (0..100)
            .map(|seed| {
                vfs.crash(seed, CrashModel::full())
                    .read_file(&p("f"))
                    .unwrap()[0]
                    == 7
            })
            .collect();
        assert!(outcomes.contains(&true) && outcomes.contains(&false));
        assert_eq!(
            vfs.crash_report(3, CrashModel::full(), Aim::Uniform)
                .1
                .pending_writes,
            1
        );
        f.sync_data().unwrap();
        for seed in 0..50 {
            assert_eq!(
                vfs.crash(seed, CrashModel::full())
                    .read_file(&p("f"))
                    .unwrap()[0],
                7
            );
        }
        assert_eq!(vfs.sync_points().last(), Some(&(vfs.op_count() - 1)));
        f.sync_data().unwrap(); // nothing pending: not a sync point
        assert_eq!(vfs.sync_points().last(), Some(&(vfs.op_count() - 2)));
    }

    /// O_DIRECT: misaligned offset, length or buffer is EINVAL and changes nothing; an
    /// aligned direct write is visible to buffered handles and still volatile.
    #[test]
    fn self_check_direct_io_alignment_and_volatility() {
        let vfs = SimVfs::new();
        let _durable = durable_file(&vfs, "f", &[0u8; 4096]);
        let direct = vfs
            .open(
                &p("f"),
                OpenOptions {
                    direct: true,
                    ..OpenOptions::default()
                },
            )
            .unwrap();
        let mut raw = vec![5u8; 2048];
        let off = raw.as_ptr().align_offset(SECTOR);
        let ops = vfs.op_count();
        let einval = |r: io::Result<()>| {
            let e = r.unwrap_err();
            assert_eq!(
                e.raw_os_error(),
                Some(rustix::io::Errno::INVAL.raw_os_error())
            );
        };
        einval(direct.write_at(&raw[off..off + 512], 100)); // offset
        einval(direct.write_at(&raw[off..off + 100], 512)); // length
        einval(direct.write_at(&raw[off + 1..off + 513], 512)); // buffer address
        let mut rbuf = vec![0u8; 1024];
        let roff = rbuf.as_ptr().align_offset(SECTOR);
        let e = direct
            .read_at(&mut rbuf[roff + 1..roff + 513], 0)
            .unwrap_err();
        assert_eq!(
            e.raw_os_error(),
            Some(rustix::io::Errno::INVAL.raw_os_error())
        );
        assert_eq!(vfs.op_count(), ops, "refused calls change nothing");
        assert_eq!(vfs.read_file(&p("f")).unwrap(), vec![0u8; 4096]);
        direct.write_at(&raw[off..off + 1024], 512).unwrap();
        assert_eq!(vfs.direct_writes(), 1);
        let buffered = vfs.open(&p("f"), OpenOptions::default()).unwrap();
        let mut b = [0u8; 1];
        buffered.read_at(&mut b, 600).unwrap();
        assert_eq!(b[0], 5, "direct write visible to buffered readers");
        let lost = (0..100).any(|seed| {
            vfs.crash(seed, CrashModel::full())
                .read_file(&p("f"))
                .unwrap()[600]
                == 0
        });
        assert!(lost, "a direct write is volatile until a sync");
        raw.clear();
    }

    /// Nonces come from the disk's seed: same seed, same stream; another seed or a
    /// crashed disk, another stream; crashing twice with the same seed, the same stream.
    #[test]
    fn self_check_nonces_are_seeded() {
        let draw = |v: &SimVfs| (0..4).map(|i| v.nonce(i)).collect::<Vec<_>>();
        let a = SimVfs::with_seed(11);
        let b = SimVfs::with_seed(11);
        let first = draw(&a);
        assert_eq!(first, draw(&b));
        assert_ne!(first, draw(&SimVfs::with_seed(12)));
        let ca = a.crash(5, CrashModel::full());
        let cb = b.crash(5, CrashModel::full());
        let after = draw(&ca);
        assert_eq!(after, draw(&cb));
        assert_ne!(after, first);
        assert_ne!(after, draw(&a.crash(6, CrashModel::full())));
    }

    #[test]
    fn thread_safe() {
        let vfs = SimVfs::new();
        let f = vfs.open(&p("f"), OpenOptions::CREATE).unwrap();
        std::thread::scope(|s| {
            for t in 0..4u8 {
                let f = f.clone();
                s.spawn(move || {
                    for i in 0..100u64 {
                        f.write_at(&[t; 16], (u64::from(t) * 100 + i) * 16).unwrap();
                    }
                    f.sync_data().unwrap();
                });
            }
        });
        assert_eq!(f.len().unwrap(), 400 * 16);
        assert_eq!(vfs.op_count(), 1 + 4 * 101);
    }

    #[derive(Clone, Debug)]
    enum TOp {
        Write(u16, Vec<u8>),
        SetLen(u16),
        Allocate(u16, u16),
        Sync,
    }

    fn top() -> impl Strategy<Value = TOp> {
        prop_oneof![
            6 => (0u16..5000, proptest::collection::vec(any::<u8>(), 1..1500))
                .prop_map(|(o, d)| TOp::Write(o, d)),
            1 => (0u16..6000).prop_map(TOp::SetLen),
            1 => (0u16..5000, 0u16..1500).prop_map(|(o, l)| TOp::Allocate(o, l)),
            1 => Just(TOp::Sync),
        ]
    }

    fn model() -> impl Strategy<Value = CrashModel> {
        (
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
            prop_oneof![Just(None), Just(Some(1024usize)), Just(Some(4096usize))],
        )
            .prop_map(|(lose, reorder, tear, atomic_pages)| CrashModel {
                lose,
                reorder,
                tear,
                atomic_pages,
            })
    }

    proptest! {
        /// No invented bytes: after any crash each byte is its durable value, the value of
        /// some pending write covering it, or a zero from a size change; the length is
        /// one a surviving op subset could produce. Also checks volatile reads against an
        /// independent model.
        #[test]
        fn crash_never_invents_bytes(
            ops in proptest::collection::vec(top(), 0..40),
            seed in any::<u64>(),
            m in model(),
        ) {
            let vfs = SimVfs::new();
            let f = durable_file(&vfs, "f", &[]);
            let mut durable: Vec<u8> = Vec::new();
            let mut volatile: Vec<u8> = Vec::new();
            let mut pending: Vec<PendingOp> = Vec::new();
            for op in &ops {
                let pop = match op {
                    TOp::Write(o, d) => {
                        f.write_at(d, u64::from(*o)).unwrap();
                        PendingOp::Write { offset: *o as usize, data: d.clone() }
                    }
                    TOp::SetLen(l) => {
                        f.set_len(u64::from(*l)).unwrap();
                        PendingOp::SetLen(*l as usize)
                    }
                    TOp::Allocate(o, l) => {
                        f.allocate(u64::from(*o), u64::from(*l)).unwrap();
                        if *l == 0 { continue; }
                        PendingOp::Write { offset: *o as usize, data: vec![0; *l as usize] }
                    }
                    TOp::Sync => {
                        f.sync_data().unwrap();
                        durable = volatile.clone();
                        pending.clear();
                        continue;
                    }
                };
                apply(&mut volatile, &pop);
                pending.push(pop);
            }
            prop_assert_eq!(vfs.read_file(&p("f")).unwrap(), volatile.clone());
            prop_assert_eq!(vfs.pending_ops(&p("f")), pending.len());

            let img = vfs.crash(seed, m).read_file(&p("f")).unwrap();
            let max_len = pending.iter().map(|op| match op {
                PendingOp::Write { offset, data } => offset + data.len(),
                PendingOp::SetLen(l) => *l,
            }).chain([durable.len()]).max().unwrap_or(0);
            prop_assert!(img.len() <= max_len);
            let min_trunc = pending.iter().filter_map(|op| match op {
                PendingOp::SetLen(l) => Some(*l),
                _ => None,
            }).min().unwrap_or(usize::MAX);
            for (i, &b) in img.iter().enumerate() {
                let ok = durable.get(i) == Some(&b)
                    || (b == 0 && (i >= durable.len() || i >= min_trunc))
                    || pending.iter().any(|op| matches!(op,
                        PendingOp::Write { offset, data }
                            if i >= *offset && i < offset + data.len() && data[i - offset] == b));
                prop_assert!(ok, "byte {} = {} invented", i, b);
            }
            if m == CrashModel::none() {
                prop_assert_eq!(img, volatile.clone());
            }
            if !m.lose && !m.reorder && !m.tear {
                // Same as none() whatever atomic_pages says.
                let again = vfs.crash(seed, m).read_file(&p("f")).unwrap();
                prop_assert_eq!(again, volatile.clone());
            }
            // Sync applies pending ops to the durable image; it must equal the volatile.
            f.sync_data().unwrap();
            prop_assert_eq!(vfs.read_durable(&p("f")).unwrap(), volatile);
        }

        /// The crashed namespace is exactly the durable namespace of an independent model.
        #[test]
        fn crash_namespace_matches_model(
            ops in proptest::collection::vec((0u8..5, 0u8..4, 0u8..4), 0..30),
            seed in any::<u64>(),
        ) {
            let names = ["a", "b", "d/a", "d/b"];
            let dirs = [".", "d"];
            let vfs = SimVfs::new();
            // name -> content tag; files are written once at creation and synced.
            let mut vol: BTreeMap<PathBuf, u8> = BTreeMap::new();
            let mut dur: BTreeMap<PathBuf, u8> = BTreeMap::new();
            for (k, (kind, x, y)) in ops.iter().enumerate() {
                let (a, b) = (p(names[*x as usize]), p(names[*y as usize]));
                match kind {
                    0 | 1 => {
                        if let std::collections::btree_map::Entry::Vacant(e) = vol.entry(a.clone()) {
                            let f = vfs.open(&a, OpenOptions::CREATE).unwrap();
                            f.write_at(&[k as u8], 0).unwrap();
                            f.sync_data().unwrap();
                            e.insert(k as u8);
                        }
                    }
                    2 => {
                        let r = vfs.delete(&a);
                        prop_assert_eq!(r.is_ok(), vol.remove(&a).is_some());
                    }
                    3 => {
                        let r = vfs.rename(&a, &b);
                        match vol.remove(&a) {
                            Some(t) => { r.unwrap(); vol.insert(b, t); }
                            None => prop_assert!(r.is_err()),
                        }
                    }
                    _ => {
                        let d = p(dirs[*x as usize % 2]);
                        vfs.sync_dir(&d).unwrap();
                        dur.retain(|n, _| dir_of(n) != d);
                        for (n, t) in &vol {
                            if dir_of(n) == d { dur.insert(n.clone(), *t); }
                        }
                    }
                }
            }
            prop_assert_eq!(vfs.file_names(), vol.keys().cloned().collect::<Vec<_>>());
            let c = vfs.crash(seed, CrashModel::full());
            let got: BTreeMap<PathBuf, u8> = c.file_names().into_iter()
                .map(|n| { let t = c.read_file(&n).unwrap()[0]; (n, t) })
                .collect();
            prop_assert_eq!(got, dur);
        }
    }
}
