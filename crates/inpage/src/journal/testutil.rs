//! Helpers shared by the journal tests (test-only).
//!
//! Invariant: the images and batches built here are what the pager would hand a journal
//! (full page size, stamped trailer), so a test failure points at the journal, not at
//! the fixture.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::journal::{
    recover_hot_journal, CommitBatch, DbFile, Journal, JournalConfig, JournalCtx, JournalMode,
    OffJournal, RollbackJournal, Wal, WalSync,
};
use crate::page::{stamp_crc, PageRef};
use crate::vfs::{
    AccountingVfs, CrashModel, FaultPlan, FaultVfs, File, IoKind, OpenOptions, SimVfs, Vfs,
};

/// Larger than a sector, so a simulated power cut can tear a page.
pub const PS: usize = 1024;

/// A page image filled with a byte derived from (pgno, version), trailer stamped.
pub fn image(pgno: u32, version: u32) -> PageRef {
    let mut v = vec![0u8; PS];
    let mut x = (pgno as u64) << 32 | version as u64 | 1;
    for b in v.iter_mut() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
    v[0] = pgno as u8;
    v[1] = version as u8;
    stamp_crc(&mut v, pgno);
    v.into()
}

pub fn ctx(vfs: &Arc<dyn Vfs>, dir: &Path, config: JournalConfig, chunk: u32) -> JournalCtx {
    let db_path: PathBuf = dir.join("test.db");
    let file = vfs.open(&db_path, OpenOptions::CREATE).unwrap();
    JournalCtx::new(
        vfs.clone(),
        db_path.clone(),
        Arc::new(DbFile::new(file, db_path, PS, chunk)),
        config,
    )
}

/// In-memory model of a database: page images by number.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Model {
    pub pages: Vec<PageRef>,
}

impl Model {
    /// The database as the pager creates it, whole and synced before any commit
    /// (`Pager::create_file`): two pages, so every journal has `old_page_count >= 2`.
    pub fn genesis() -> Model {
        Model {
            pages: vec![image(0, 0), image(1, 0)],
        }
    }
}

/// One transaction's pages, built against a model.
pub struct Txn {
    pub tid: u64,
    pub pages: Vec<(u32, PageRef)>,
    pub originals: Vec<(u32, PageRef)>,
    pub old: u32,
    pub new: u32,
}

impl Txn {
    /// Write `pgnos` (sorted, unique; page 0 added) at `version`, growing to `new`.
    pub fn build(model: &Model, tid: u64, pgnos: &[u32], new: u32) -> Txn {
        let old = model.pages.len() as u32;
        let mut set: Vec<u32> = pgnos.to_vec();
        set.push(0);
        set.extend(old..new);
        set.sort_unstable();
        set.dedup();
        let pages = set.iter().map(|&p| (p, image(p, tid as u32))).collect();
        let originals = set
            .iter()
            .filter(|&&p| p < old)
            .map(|&p| (p, model.pages[p as usize].clone()))
            .collect();
        Txn {
            tid,
            pages,
            originals,
            old,
            new: new.max(old),
        }
    }
    pub fn batch(&self) -> CommitBatch<'_> {
        CommitBatch {
            tid: self.tid,
            pages: &self.pages,
            originals: &self.originals,
            old_page_count: self.old,
            new_page_count: self.new,
            restamp: &[],
            discard: &[],
        }
    }
    pub fn apply(&self, model: &Model) -> Model {
        let mut m = model.clone();
        m.pages.resize(self.new as usize, image(0, 0));
        for (p, img) in &self.pages {
            m.pages[*p as usize] = img.clone();
        }
        m
    }
}

/// Read every page of the model through a journal and compare.
pub fn matches(j: &dyn Journal, model: &Model) -> Result<(), String> {
    let mut buf = vec![0u8; PS];
    for (i, want) in model.pages.iter().enumerate() {
        j.read_page(i as u32, &mut buf)
            .map_err(|e| format!("page {i}: {e}"))?;
        if buf[..] != want[..] {
            return Err(format!("page {i}: got version {} want {}", buf[1], want[1]));
        }
    }
    Ok(())
}

pub fn mem_vfs() -> Arc<dyn Vfs> {
    Arc::new(SimVfs::new())
}

/// Which protocol a crash test drives.
#[derive(Clone, Copy, Debug)]
pub enum Kind {
    Off,
    Rollback(JournalMode),
    Wal(WalSync),
}

/// Open as the pager does: hot-journal recovery first, then the mode.
pub fn open_any(vfs: &Arc<dyn Vfs>, kind: Kind, cfg: &JournalConfig) -> Result<Box<dyn Journal>> {
    let db_path = PathBuf::from("/d/test.db");
    let opts = OpenOptions::CREATE;
    let file = vfs
        .open(&db_path, opts)
        .map_err(Error::io("open", &db_path))?;
    // Creating the database whole and making its directory entry durable is the
    // pager's job; this stands in for it.
    if file.len().map_err(Error::io("stat", &db_path))? == 0 {
        for (pgno, img) in Model::genesis().pages.iter().enumerate() {
            file.write_at(img, (pgno * PS) as u64)
                .map_err(Error::io("write", &db_path))?;
        }
        file.sync_data().map_err(Error::io("fdatasync", &db_path))?;
    }
    vfs.sync_dir(Path::new("/d"))
        .map_err(Error::io("sync_dir", &db_path))?;
    recover_hot_journal(vfs, &db_path, &file)?;
    let mut cfg = cfg.clone();
    if let Kind::Wal(s) = kind {
        cfg.wal_sync = s;
    }
    let ctx = JournalCtx::new(
        vfs.clone(),
        db_path.clone(),
        Arc::new(DbFile::new(file, db_path, PS, 4)),
        cfg,
    );
    Ok(match kind {
        Kind::Off => Box::new(OffJournal::open(ctx, JournalMode::OFF)?.0),
        Kind::Rollback(m) => Box::new(RollbackJournal::open(ctx, m)?.0),
        Kind::Wal(_) => Box::new(Wal::open(ctx)?.0),
    })
}

/// A step of a crash-test workload.
#[derive(Clone, Copy, Debug)]
pub enum Step {
    /// Commit: pages written (page 0 implied), new page count.
    Commit(&'static [u32], u32),
    Checkpoint,
    Close,
}

/// The models after each commit of `steps` (index 0 = empty database).
pub fn models(steps: &[Step]) -> (Vec<Model>, Vec<Txn>) {
    let mut models = vec![Model::genesis()];
    let mut txns = Vec::new();
    for s in steps {
        if let Step::Commit(pg, new) = s {
            let m = models.last().cloned().unwrap_or_default();
            let t = Txn::build(&m, txns.len() as u64 + 1, pg, *new);
            models.push(t.apply(&m));
            txns.push(t);
        }
    }
    (models, txns)
}

/// What a run managed before the disk died.
#[derive(Clone, Copy, Debug, Default)]
pub struct Outcome {
    /// Model index of the last commit that returned Ok.
    pub acked: usize,
    /// Model index of the commit that returned Err, if any.
    pub in_flight: Option<usize>,
    /// Model index known durable even without a sync per commit (last checkpoint).
    pub floor: usize,
}

/// Run the workload until something fails.
pub fn replay(vfs: &Arc<dyn Vfs>, kind: Kind, cfg: &JournalConfig, steps: &[Step]) -> Outcome {
    let (_, txns) = models(steps);
    let mut out = Outcome::default();
    let Ok(j) = open_any(vfs, kind, cfg) else {
        return out;
    };
    let mut k = 0;
    for s in steps {
        let r = match s {
            Step::Commit(..) => {
                k += 1;
                let r = j.commit(&txns[k - 1].batch());
                match r {
                    Ok(()) => out.acked = k,
                    Err(_) => out.in_flight = Some(k),
                }
                r
            }
            Step::Checkpoint | Step::Close => {
                let r = if matches!(s, Step::Close) {
                    j.close()
                } else {
                    j.checkpoint()
                };
                if r.is_ok() {
                    out.floor = out.acked;
                }
                r
            }
        };
        if r.is_err() {
            break;
        }
    }
    out
}

/// Whether the database read through `j` is exactly `m` (the empty model: page 0 is
/// missing or zero, i.e. no database yet).
pub fn is_state(j: &dyn Journal, m: &Model) -> bool {
    if m.pages.is_empty() {
        let mut buf = vec![0u8; PS];
        return j.read_page(0, &mut buf).is_err() || buf.iter().all(|&b| b == 0);
    }
    matches(j, m).is_ok()
}

/// Which model the recovered database equals, if any.
pub fn which_state(j: &dyn Journal, models: &[Model]) -> Option<usize> {
    (0..models.len()).rev().find(|&i| is_state(j, &models[i]))
}

/// For every power-cut point of the workload and several seeds: crash, recover (also
/// with a second cut inside recovery), and check the state against the models.
/// `prefix_ok`: any state between the last checkpoint and the in-flight commit is
/// acceptable (WAL NORMAL), else only the last acknowledged or the in-flight one.
pub fn crash_test(kind: Kind, cfg: &JournalConfig, steps: &[Step], prefix_ok: bool) {
    let (models, _) = models(steps);
    let total = {
        let sim = SimVfs::new();
        let vfs: Arc<dyn Vfs> = Arc::new(sim.clone());
        let out = replay(&vfs, kind, cfg, steps);
        assert_eq!(out.acked, models.len() - 1, "{kind:?}: clean run failed");
        sim.op_count()
    };
    let mut seen = std::collections::BTreeSet::new();
    for cut in 0..=total {
        let sim = SimVfs::new();
        sim.set_power_cut_after(cut);
        let vfs: Arc<dyn Vfs> = Arc::new(sim.clone());
        let out = replay(&vfs, kind, cfg, steps);
        let top = out.in_flight.unwrap_or(out.acked);
        let allowed: Vec<usize> = if prefix_ok {
            (out.floor..=top).collect()
        } else {
            let mut v = vec![out.acked];
            v.extend(out.in_flight);
            v
        };
        for seed in 0..16u64 {
            let model = if seed % 3 == 2 {
                CrashModel::lose_only()
            } else {
                CrashModel::full()
            };
            let mut crashed = sim.crash(seed * 7919 + cut, model);
            // Odd seeds also cut the power once during recovery, at a point that
            // varies with the seed and the first cut.
            if seed % 2 == 1 {
                let probe = crashed.crash(0, CrashModel::none());
                let pv: Arc<dyn Vfs> = Arc::new(probe.clone());
                let rec_ops = open_any(&pv, kind, cfg)
                    .map(|_| probe.op_count())
                    .unwrap_or(0);
                let at = (seed * 31 + cut) % (rec_ops + 1);
                crashed.set_power_cut_after(at);
                let cv: Arc<dyn Vfs> = Arc::new(crashed.clone());
                let _ = open_any(&cv, kind, cfg);
                crashed = crashed.crash(seed, model);
            }
            let cv: Arc<dyn Vfs> = Arc::new(crashed.clone());
            let j = open_any(&cv, kind, cfg)
                .unwrap_or_else(|e| panic!("{kind:?} cut {cut} seed {seed}: recovery failed: {e}"));
            let got = which_state(&*j, &models);
            assert!(
                got.is_some_and(|g| allowed.contains(&g)),
                "{kind:?} cut {cut}/{total} seed {seed}: state {got:?}, allowed {allowed:?} ({out:?})"
            );
            seen.insert(got);
            // The recovered database must accept a new commit and keep it through
            // another power cut (stale log or journal state would break this).
            let base = &models[got.unwrap_or(0)];
            let new = (base.pages.len() as u32).max(5);
            let t = Txn::build(base, 100, &[1], new);
            j.commit(&t.batch()).unwrap();
            drop(j);
            let cv: Arc<dyn Vfs> = Arc::new(crashed.crash(seed, model));
            let j = open_any(&cv, kind, cfg).unwrap();
            let after = t.apply(base);
            assert!(
                is_state(&*j, &after) || (prefix_ok && is_state(&*j, base)),
                "{kind:?} cut {cut} seed {seed}: commit after recovery lost"
            );
        }
    }
    // The workload must actually have exercised both sides of every commit.
    assert!(
        seen.len() >= models.len() - 1,
        "{kind:?}: states seen {seen:?}"
    );
}

/// Fail, with EIO, each of the first few syncs (of each kind) of a commit in turn:
/// the commit must return Err, and after a power cut the reopened database must hold
/// the state before or after that commit.
pub fn eio_test(kind: Kind, cfg: &JournalConfig) {
    let steps = [Step::Commit(&[], 5), Step::Commit(&[1, 3], 7)];
    let (models, txns) = models(&steps);
    let mut injected = 0;
    for fail in [
        IoKind::Sync,
        IoKind::SyncAll,
        IoKind::SyncDir,
        IoKind::Write,
    ] {
        for nth in 0..4 {
            let sim = SimVfs::new();
            let plan = Arc::new(FaultPlan::new());
            let vfs: Arc<dyn Vfs> = Arc::new(FaultVfs::new(Arc::new(sim.clone()), plan.clone()));
            let j = open_any(&vfs, kind, cfg).unwrap();
            j.commit(&txns[0].batch()).unwrap();
            plan.fail_kind(fail, nth, false);
            let r = j.commit(&txns[1].batch());
            let fired = plan.injected() > 0;
            injected += fired as u32;
            assert_eq!(r.is_err(), fired, "{kind:?} {fail:?} #{nth}: {r:?}");
            drop(j);
            for seed in 0..4 {
                let cv: Arc<dyn Vfs> = Arc::new(sim.crash(seed, CrashModel::full()));
                let j = open_any(&cv, kind, cfg).unwrap();
                let got = which_state(&*j, &models);
                if matches!(kind, Kind::Off) {
                    continue; // no atomicity promised
                }
                let ok = if fired {
                    [Some(1), Some(2)].contains(&got)
                } else {
                    got == Some(2)
                };
                assert!(ok, "{kind:?} {fail:?} #{nth} seed {seed}: state {got:?}");
            }
        }
    }
    assert!(injected > 0, "{kind:?}: no fault fired");
}

/// fdatasync + fsync + directory syncs of one steady-state commit (no growth).
pub fn syncs_per_commit(kind: Kind, cfg: &JournalConfig, nth_commit: usize) -> u64 {
    let acc = Arc::new(AccountingVfs::new(Arc::new(SimVfs::new())));
    let stats = acc.stats();
    let vfs: Arc<dyn Vfs> = acc;
    let j = open_any(&vfs, kind, cfg).unwrap();
    let mut model = Model::default();
    let mut last = 0;
    for tid in 0..=nth_commit as u64 {
        let t = Txn::build(&model, tid + 1, &[1], 4);
        let before = stats.snapshot();
        j.commit(&t.batch()).unwrap();
        let d = stats.snapshot().delta(&before);
        last = [IoKind::Sync, IoKind::SyncAll, IoKind::SyncDir]
            .iter()
            .map(|&k| d.get(k).calls)
            .sum();
        model = t.apply(&model);
    }
    last
}

/// Raw db file contents, page by page (for checks not going through a journal).
pub fn db_page(file: &Arc<dyn File>, pgno: u32) -> Vec<u8> {
    let mut buf = vec![0u8; PS];
    file.read_exact_at(&mut buf, pgno as u64 * PS as u64)
        .unwrap();
    buf
}

/// Threads committing under a power cut (the group commit tests: `txn/group.rs`,
/// `journal/waldio.rs`). On a fresh disk, `open` makes a database with trees "s" and
/// "m0".."m2"; then, on a copy, `prepare` may plant a bug in the reopened handle and
/// three threads each commit 30 transactions — row `j` in its own tree and row
/// `1000·thread + j` in "s" — until the power cut after `cut` operations stops them.
/// After the crash (full model, `seed`) and `reopen`: the check passes, every
/// transaction is whole (both rows or neither, `what` names the case in the panic), and
/// the result is the number of acknowledged transactions missing, with the handle's
/// group statistics before the crash.
pub fn threads_until_power_cut(
    open: &dyn Fn(&SimVfs) -> crate::Database,
    prepare: &dyn Fn(&crate::Database),
    reopen: &dyn Fn(&SimVfs) -> crate::Database,
    cut: u64,
    seed: u64,
    what: &str,
) -> (u64, crate::GroupStats) {
    use crate::{KeyKind, ReadableTxn};
    use std::collections::BTreeMap;
    use std::sync::Mutex;
    let vfs = SimVfs::new();
    {
        let db = open(&vfs);
        db.write(|w| {
            w.create_tree("s", KeyKind::Int)?;
            for th in 0..3 {
                w.create_tree(&format!("m{th}"), KeyKind::Int)?;
            }
            Ok(())
        })
        .unwrap();
    }
    let disk = vfs.crash(0, CrashModel::none());
    let db = open(&disk);
    prepare(&db);
    disk.set_power_cut_after(cut);
    let acked: Mutex<BTreeMap<(u64, i64), Vec<u8>>> = Mutex::new(BTreeMap::new());
    std::thread::scope(|s| {
        for th in 0..3u64 {
            let (db, acked) = (&db, &acked);
            s.spawn(move || {
                for j in 0..30i64 {
                    let v = format!("{seed}:{th}:{j}").into_bytes();
                    let r = db.write(|w| {
                        let m = w.open_tree(&format!("m{th}"))?;
                        w.insert(&m, j, &v)?;
                        let t = w.open_tree("s")?;
                        w.insert(&t, th as i64 * 1000 + j, &v).map(|_| ())
                    });
                    match r {
                        Ok(()) => {
                            acked.lock().unwrap().insert((th, j), v);
                        }
                        Err(_) => return,
                    }
                }
            });
        }
    });
    let stats = db.group_stats();
    drop(db);
    let crashed = disk.crash(seed, CrashModel::full());
    let db = reopen(&crashed);
    crate::check::check(&db.begin_read().unwrap(), &Default::default()).unwrap();
    let r = db.begin_read().unwrap();
    let s = r.open_tree("s").unwrap();
    let acked = acked.into_inner().unwrap();
    let mut lost = 0;
    for th in 0..3u64 {
        let m = r.open_tree(&format!("m{th}")).unwrap();
        for j in 0..30i64 {
            let mine = r.get(&m, j).unwrap();
            let shared = r.get(&s, th as i64 * 1000 + j).unwrap();
            assert_eq!(mine, shared, "{what} seed {seed}: torn transaction");
            if let Some(v) = acked.get(&(th, j)) {
                lost += u64::from(mine.as_ref() != Some(v));
            }
        }
    }
    (lost, stats)
}
