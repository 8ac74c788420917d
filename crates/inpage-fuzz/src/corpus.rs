//! The seed corpus: valid file sets of every journal mode, clean and crash-left.
//!
//! Invariants:
//! - The corpus is a pure function of nothing but the engine: fixed workloads on the
//!   simulated disk, fixed cut points derived from each workload's own op count, fixed
//!   crash seeds. So a fuzz input named by (run seed, index) is reproducible anywhere.
//! - The modes come from `JournalMode::ALL`, so a mode added to the engine is fuzzed
//!   without touching this crate.
//! - Every entry was produced by the engine itself (a clean close, a process crash with
//!   the page cache intact, or a power cut on the full crash model), so each one is a
//!   state the engine must open; the mutator then damages them.

use std::sync::Arc;

use inpage::vfs::Vfs;
use inpage::{Config, Database, JournalMode, KeyKind};
use inpage_sim::{CrashModel, SimVfs};

use crate::exec::{read_all, State};
use crate::rng::Rng;

pub use crate::files::{db_path, Files, Target, DB_NAME};

/// One corpus entry.
#[derive(Clone, Debug)]
pub struct Base {
    /// Human-readable origin, e.g. `wal/512/cut@37`.
    pub name: String,
    pub mode: JournalMode,
    pub page_size: u32,
    pub files: Files,
    /// Every state the workload committed (the empty database first), in order.
    pub states: Arc<Vec<State>>,
}

fn config(vfs: &SimVfs, mode: JournalMode, page_size: u32, ckpt: u32) -> Config {
    let vfs: Arc<dyn Vfs> = Arc::new(vfs.clone());
    Config::default()
        .vfs(vfs)
        .journal_mode(mode)
        .page_size(page_size)
        .cache_pages(16)
        .chunk_pages(2)
        // 0: keep every frame in the WAL so crash-left WAL files have something to
        // replay; small: the WAL is checkpointed and reused, so it holds old frames.
        .wal_autocheckpoint(ckpt)
}

/// A value of `len` bytes that differs per key and version.
fn value(key: u64, version: u64, len: usize) -> Vec<u8> {
    let mut r = Rng::new(key.wrapping_mul(0x9E37) ^ version);
    (0..len).map(|_| r.next_u64() as u8).collect()
}

/// The fixed workload: two trees of each key kind, small and overflow values, updates,
/// removals, a dropped tree and meta values, over several commits so a cut can fall in
/// any of them. Stops at the first error (a power cut ends it that way).
fn workload(db: &Database, page_size: u32, states: &mut Vec<State>) -> inpage::Result<()> {
    let mut snap = |db: &Database| {
        if let Ok(st) = db
            .begin_read()
            .map_err(|e| e.to_string())
            .and_then(|r| read_all(&r))
        {
            states.push(st);
        }
    };
    snap(db);
    let big = page_size as usize * 2 + 37;
    let mut w = db.begin_write()?;
    let ints = w.create_tree("ints", KeyKind::Int)?;
    let bytes = w.create_tree("bytes", KeyKind::Bytes)?;
    let doomed = w.create_tree("doomed", KeyKind::Int)?;
    for k in 0..40u64 {
        let len = if k % 13 == 0 {
            big
        } else {
            8 + (k as usize * 7) % 90
        };
        w.insert(&ints, k as i64, &value(k, 1, len))?;
    }
    for k in 0..5u64 {
        w.insert(&doomed, k as i64, &value(k, 9, 20))?;
    }
    w.commit()?;
    snap(db);

    let mut w = db.begin_write()?;
    for k in 0..30u64 {
        let key = format!("key-{:04}-{}", k * 3, "x".repeat((k % 5) as usize));
        w.insert(&bytes, key.as_bytes(), &value(k, 2, 10 + (k as usize % 40)))?;
    }
    w.set_meta(0, 7)?;
    w.commit()?;
    snap(db);

    let mut w = db.begin_write()?;
    for k in (0..40u64).step_by(3) {
        w.remove(&ints, k as i64)?;
    }
    for k in 40..70u64 {
        w.insert(&ints, k as i64, &value(k, 3, 30))?;
    }
    w.insert(&bytes, &b"overflow"[..], &value(99, 3, big))?;
    w.commit()?;
    snap(db);

    let mut w = db.begin_write()?;
    w.drop_tree("doomed")?;
    let more = w.create_tree("more", KeyKind::Bytes)?;
    for k in 0..12u64 {
        w.insert(&more, format!("m{k}").as_bytes(), &value(k, 4, 50))?;
    }
    // A rolled-back savepoint: its pages must leave no trace.
    let sp = w.savepoint();
    w.insert(&more, &b"gone"[..], &value(1, 5, 60))?;
    w.rollback_to(&sp)?;
    w.release(sp)?;
    w.commit()?;
    snap(db);

    let mut w = db.begin_write()?;
    for k in 0..25u64 {
        w.insert(&ints, k as i64, &value(k, 6, 12))?;
    }
    w.set_meta(1, 99)?;
    w.commit()?;
    snap(db);
    Ok(())
}

/// Run the workload on a fresh disk; returns the disk and whether it completed.
fn run_workload(
    mode: JournalMode,
    page_size: u32,
    ckpt: u32,
    cut_after: Option<u64>,
) -> (SimVfs, bool) {
    let vfs = SimVfs::new();
    if let Some(n) = cut_after {
        vfs.set_power_cut_after(n);
    }
    let ok = match Database::open(DB_NAME, config(&vfs, mode, page_size, ckpt)) {
        Ok(db) => {
            let ok = workload(&db, page_size, &mut Vec::new()).is_ok();
            // Leaving the handle without closing: whatever is on the disk now is what a
            // crashed process leaves (the drop may checkpoint, but after a cut it fails).
            std::mem::forget(db);
            ok
        }
        Err(_) => false,
    };
    (vfs, ok)
}

/// Page sizes the corpus covers: the smallest (deep trees, many overflow pages) and the
/// default.
pub const PAGE_SIZES: [u32; 2] = [512, 4096];

/// Number of power-cut points per (mode, page size).
const CUTS: u64 = 12;

/// Build the corpus. Deterministic; takes well under a second in release builds.
pub fn build() -> Vec<Base> {
    let mut out = Vec::new();
    for mode in JournalMode::all() {
        // WAL also with frequent checkpoints: a reused WAL holds frames older than the
        // last checkpoint behind the live ones.
        let ckpts: &[u32] = if mode == JournalMode::WAL {
            &[0, 6]
        } else {
            &[0]
        };
        for (page_size, &ckpt) in PAGE_SIZES
            .into_iter()
            .flat_map(|p| ckpts.iter().map(move |c| (p, c)))
        {
            let tag = if ckpt == 0 {
                format!("{}/{page_size}", mode.name())
            } else {
                format!("{}/{page_size}/ckpt{ckpt}", mode.name())
            };

            // Clean close: the database alone (WAL checkpointed and removed).
            let vfs = SimVfs::new();
            let mut states = Vec::new();
            let mut clean = None;
            if let Ok(db) = Database::open(DB_NAME, config(&vfs, mode, page_size, ckpt)) {
                if workload(&db, page_size, &mut states).is_ok() && db.close().is_ok() {
                    clean = Some(Files::from_sim(&vfs));
                }
            }
            let states = Arc::new(states);
            if let Some(files) = clean {
                out.push(Base {
                    name: format!("{tag}/clean"),
                    mode,
                    page_size,
                    files,
                    states: states.clone(),
                });
            }

            // Process crash after the last commit: side files as the session left them
            // (a WAL full of frames).
            let (vfs, completed) = run_workload(mode, page_size, ckpt, None);
            let total_ops = vfs.op_count();
            if completed {
                out.push(Base {
                    name: format!("{tag}/open"),
                    mode,
                    page_size,
                    files: Files::from_sim(&vfs.process_crash()),
                    states: states.clone(),
                });
            }

            // Power cuts spread over the workload, each crashed on the full model (lost,
            // reordered, torn writes) and as a process crash.
            for i in 1..=CUTS {
                let at = total_ops * i / (CUTS + 1);
                let (vfs, _) = run_workload(mode, page_size, ckpt, Some(at));
                let seed = at ^ ((page_size as u64) << 20) ^ ((mode.code() as u64) << 40);
                out.push(Base {
                    name: format!("{tag}/cut@{at}/full"),
                    mode,
                    page_size,
                    files: Files::from_sim(&vfs.crash(seed, CrashModel::full())),
                    states: states.clone(),
                });
                out.push(Base {
                    name: format!("{tag}/cut@{at}/process"),
                    mode,
                    page_size,
                    files: Files::from_sim(&vfs.process_crash()),
                    states: states.clone(),
                });
            }
        }
    }
    // A cut before the database file existed leaves nothing to damage.
    out.retain(|b| b.files.db.is_some());
    out
}
