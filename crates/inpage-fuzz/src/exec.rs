//! Running one input: open it every way, read everything, check, and judge.
//!
//! Invariants:
//! - Every open starts from a fresh simulated disk holding exactly the input's files,
//!   because recovery may rewrite them; so the opens are independent of each other.
//! - A typed error anywhere is an acceptable answer to bad input. A finding is only:
//!   a panic (caught here), a hang (the caller's watchdog), or an inconsistency the
//!   engine should have refused — the integrity check passes but a read then fails or
//!   disagrees with another read of the same snapshot, or a commit on a checked database
//!   leaves one that no longer checks or loses the commit across a reopen.
//! - Reads are bounded by [`MAX_ENTRIES`] per tree, so a corrupt tree whose check fails
//!   cannot make one input run for minutes; the bound is far above any corpus tree.

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use inpage::check::check;
use inpage::vfs::Vfs;
use inpage::{Config, Database, JournalMode, KeyKind, OwnedKey, ReadableTxn};

use crate::files::{db_path, Files};

/// Per-tree bound on entries read by one iteration.
pub const MAX_ENTRIES: usize = 100_000;

/// What an input did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Opens that succeeded (out of `1 + JournalMode::ALL.len()`).
    pub opened: u32,
    /// Opens whose integrity check passed.
    pub checked_ok: u32,
    /// Commits made on a checked database.
    pub committed: u32,
    /// The first finding, if any.
    pub finding: Option<Finding>,
}

/// Something the engine must not do on any input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub kind: FindingKind,
    /// Journal mode asked for at open (`None` = the file's).
    pub open_mode: Option<JournalMode>,
    pub detail: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FindingKind {
    Panic,
    Hang,
    /// The check passed but the data it vouched for is not readable or not consistent.
    CheckedButInconsistent,
    /// A commit on a checked database broke it or was lost.
    BadCommit,
    /// The input may only lose commits (a WAL cut short or removed), yet the database
    /// reads as a state no commit of its workload left.
    NoSuchCommit,
    /// The process died (abort, out of memory); found by the supervisor.
    Abort,
}

impl FindingKind {
    pub fn name(self) -> &'static str {
        match self {
            FindingKind::Panic => "panic",
            FindingKind::Hang => "hang",
            FindingKind::CheckedButInconsistent => "checked-but-inconsistent",
            FindingKind::BadCommit => "bad-commit",
            FindingKind::NoSuchCommit => "no-such-commit",
            FindingKind::Abort => "abort",
        }
    }
}

impl Finding {
    /// What shrinking must preserve: the kind and the first line (panic location and
    /// message, or the inconsistency), without numbers that shift as mutations go.
    pub fn signature(&self) -> String {
        let first = self.detail.lines().next().unwrap_or("");
        let s: String = first
            .chars()
            .map(|c| if c.is_ascii_digit() { '#' } else { c })
            .collect();
        format!("{}: {}", self.kind.name(), s)
    }
}

/// The configuration inputs are opened with: the file's own settings except the mode,
/// a small cache so reads go through eviction.
fn config(vfs: Arc<dyn Vfs>, mode: Option<JournalMode>) -> Config {
    Config {
        journal_mode: mode,
        ..Config::default()
            .vfs(vfs)
            .create(false)
            .cache_pages(16)
            .chunk_pages(1)
    }
}

pub type Entries = Vec<(OwnedKey, Vec<u8>)>;

/// Everything a snapshot holds: each tree's name and entries, in name order.
pub type State = Vec<(String, Entries)>;

/// Read one tree three ways (iteration, cursor backwards, point lookups) and compare.
fn read_tree<T: ReadableTxn>(r: &T, name: &str) -> Result<Entries, String> {
    let t = r
        .open_tree(name)
        .map_err(|e| format!("open_tree {name:?}: {e}"))?;
    let mut fwd: Entries = Vec::new();
    for item in r.iter(&t).map_err(|e| format!("iter {name:?}: {e}"))? {
        fwd.push(item.map_err(|e| format!("iterating {name:?}: {e}"))?);
        if fwd.len() > MAX_ENTRIES {
            return Err(format!("{name:?} has more than {MAX_ENTRIES} entries"));
        }
    }
    for pair in fwd.windows(2) {
        if pair[0].0 >= pair[1].0 {
            return Err(format!(
                "{name:?}: keys out of order: {:?} then {:?}",
                pair[0].0, pair[1].0
            ));
        }
    }
    let mut bwd: Entries = Vec::new();
    let mut c = r.cursor(&t).map_err(|e| format!("cursor {name:?}: {e}"))?;
    let mut ok = c.last().map_err(|e| format!("cursor last {name:?}: {e}"))?;
    while ok {
        let k = c.key().map_err(|e| format!("cursor key {name:?}: {e}"))?;
        let v = c
            .value()
            .map_err(|e| format!("cursor value {name:?}: {e}"))?;
        match (k, v) {
            (Some(k), Some(v)) => bwd.push((k, v)),
            _ => return Err(format!("{name:?}: positioned cursor has no entry")),
        }
        if bwd.len() > MAX_ENTRIES {
            return Err(format!("{name:?}: backwards past {MAX_ENTRIES} entries"));
        }
        ok = c.prev().map_err(|e| format!("cursor prev {name:?}: {e}"))?;
    }
    bwd.reverse();
    if bwd != fwd {
        return Err(format!(
            "{name:?}: forward iteration read {} entries, backward {} (or different ones)",
            fwd.len(),
            bwd.len()
        ));
    }
    let n = r.count(&t).map_err(|e| format!("count {name:?}: {e}"))?;
    if n != fwd.len() as u64 {
        return Err(format!(
            "{name:?}: count {n} but iteration read {}",
            fwd.len()
        ));
    }
    // Point lookups of a sample (every entry of small trees).
    let step = (fwd.len() / 64).max(1);
    for (k, v) in fwd.iter().step_by(step) {
        let got = match k {
            OwnedKey::Int(i) => r.get(&t, *i),
            OwnedKey::Bytes(b) => r.get(&t, b.as_slice()),
        }
        .map_err(|e| format!("get {name:?} {k:?}: {e}"))?;
        if got.as_ref() != Some(v) {
            return Err(format!("{name:?}: get {k:?} disagrees with iteration"));
        }
    }
    Ok(fwd)
}

/// Read everything a snapshot holds. `Err` carries the first failure.
pub fn read_all<T: ReadableTxn>(r: &T) -> Result<State, String> {
    let trees = r.list_trees().map_err(|e| format!("list_trees: {e}"))?;
    let mut out = Vec::new();
    for info in trees {
        if info.custom_comparator || info.external_order {
            // The corpus makes none; a mutated catalog can claim one. Opening it without
            // the comparator must be a typed error, which `open_tree` gives.
            if r.open_tree(&info.name).is_ok() {
                return Err(format!(
                    "{:?}: tree with a caller-defined order opened without it",
                    info.name
                ));
            }
            continue;
        }
        let entries = read_tree(r, &info.name)?;
        out.push((info.name, entries));
    }
    Ok(out)
}

/// Key written by the commit probe: outside the corpus's key space.
const PROBE_KEY: i64 = 1 << 40;

/// Exercise one open database; returns a finding or `None`.
fn exercise(
    db: &Database,
    out: &mut Outcome,
    write: bool,
    states: Option<&[State]>,
) -> Option<(FindingKind, String)> {
    let r = db.begin_read().ok()?;
    let checked = check(&r, &HashMap::new());
    let read = read_all(&r);
    if let (Some(states), Ok(state)) = (states, &read) {
        if !states.contains(state) {
            return Some((
                FindingKind::NoSuchCommit,
                format!(
                    "read {} trees ({} entries), which matches none of the {} committed \
                     states; the check {} it",
                    state.len(),
                    state.iter().map(|(_, e)| e.len()).sum::<usize>(),
                    states.len(),
                    if checked.is_ok() { "passes" } else { "refuses" }
                ),
            ));
        }
    }
    // Also every meta slot (bounds-checked inside).
    for i in 0..4 {
        let _ = r.meta(i);
    }
    let checked_ok = checked.is_ok();
    if let Ok(report) = &checked {
        out.checked_ok += 1;
        if let Err(e) = &read {
            return Some((
                FindingKind::CheckedButInconsistent,
                format!("check passed ({} trees) but: {e}", report.trees.len()),
            ));
        }
    }
    drop(r);
    if !(write && checked_ok) {
        return None;
    }

    // Commit probe: a database that checks must take a commit and still check.
    let tree_name = "fuzz-probe";
    let res = (|| -> inpage::Result<()> {
        let mut w = db.begin_write()?;
        let t = w.open_or_create_tree(tree_name, KeyKind::Int)?;
        w.insert(&t, PROBE_KEY, b"probe")?;
        for info in w.list_trees()? {
            if info.name == tree_name || info.custom_comparator || info.external_order {
                continue;
            }
            let t = w.open_tree(&info.name)?;
            match info.kind {
                KeyKind::Int => {
                    w.insert(&t, -7, b"fuzz")?;
                    w.remove(&t, 3)?;
                }
                KeyKind::Bytes => {
                    w.insert(&t, &b"fuzz"[..], b"probe")?;
                }
            }
        }
        w.commit()
    })();
    if res.is_err() {
        // A typed error: the free space or a page the check does not cover may be bad.
        return None;
    }
    out.committed += 1;
    let r = match db.begin_read() {
        Ok(r) => r,
        Err(e) => return Some((FindingKind::BadCommit, format!("read after commit: {e}"))),
    };
    if let Err(e) = check(&r, &HashMap::new()) {
        return Some((
            FindingKind::BadCommit,
            format!("check passed, commit succeeded, check now fails: {e}"),
        ));
    }
    if let Err(e) = read_all(&r) {
        return Some((
            FindingKind::BadCommit,
            format!("check passed after commit but: {e}"),
        ));
    }
    None
}

/// Record where a panic inside [`run`] happened instead of printing it (findings are
/// reported with their location); a panic anywhere else (a test's assertion) goes to
/// the hook that was installed before.
pub fn install_panic_hook() {
    let prev = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !IN_RUN.with(|r| r.get()) {
            return prev(info);
        }
        let loc = info
            .location()
            .map(|l| format!("{}:{}", l.file(), l.line()))
            .unwrap_or_default();
        let msg = if let Some(s) = info.payload().downcast_ref::<&str>() {
            s.to_string()
        } else if let Some(s) = info.payload().downcast_ref::<String>() {
            s.clone()
        } else {
            String::new()
        };
        LAST_PANIC.with(|p| *p.borrow_mut() = Some(format!("{loc}: {msg}")));
    }));
}

thread_local! {
    static LAST_PANIC: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
    static IN_RUN: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Run one input. `write`: also run the commit probe on opens that check. `states`:
/// when the input may only have lost commits, the states its workload committed, one of
/// which every successful read must find.
pub fn run(files: &Files, write: bool, states: Option<&[State]>) -> Outcome {
    let mut out = Outcome::default();
    let modes = std::iter::once(None).chain(JournalMode::all().map(Some));
    for mode in modes {
        LAST_PANIC.with(|p| p.borrow_mut().take());
        IN_RUN.with(|r| r.set(true));
        let result = catch_unwind(AssertUnwindSafe(|| -> Option<(FindingKind, String)> {
            let vfs = files.to_sim();
            let db = Database::open(db_path(), config(Arc::new(vfs.clone()), mode)).ok()?;
            out.opened += 1;
            let found = exercise(&db, &mut out, write, states);
            if found.is_some() {
                return found;
            }
            let committed_before = out.committed;
            let _ = db.close();
            if write && committed_before > 0 && out.checked_ok > 0 {
                // The probe commit must survive a clean close and reopen.
                let db = match Database::open(db_path(), config(Arc::new(vfs), None)) {
                    Ok(db) => db,
                    Err(e) => {
                        return Some((FindingKind::BadCommit, format!("reopen after commit: {e}")))
                    }
                };
                let r = db.begin_read().ok()?;
                let probe = r.open_tree("fuzz-probe").and_then(|t| r.get(&t, PROBE_KEY));
                if !matches!(&probe, Ok(Some(v)) if v.as_slice() == b"probe") {
                    return Some((
                        FindingKind::BadCommit,
                        format!("committed probe lost across reopen: {probe:?}"),
                    ));
                }
                if let Err(e) = check(&r, &HashMap::new()) {
                    return Some((
                        FindingKind::BadCommit,
                        format!("reopen after commit fails check: {e}"),
                    ));
                }
            }
            None
        }));
        IN_RUN.with(|r| r.set(false));
        let found = match result {
            Ok(f) => f,
            Err(_) => {
                let where_ = LAST_PANIC
                    .with(|p| p.borrow_mut().take())
                    .unwrap_or_else(|| "panic without a message".into());
                Some((FindingKind::Panic, where_))
            }
        };
        if let Some((kind, detail)) = found {
            out.finding = Some(Finding {
                kind,
                open_mode: mode,
                detail,
            });
            return out;
        }
    }
    out
}
