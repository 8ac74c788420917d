//! Deterministic workloads, the model they are checked against, and the code that runs
//! them on a database.
//!
//! A workload is a list of steps generated from a seed alone: transactions (K operations
//! on several trees, values from empty to several overflow pages, savepoints rolled back
//! to or released, some transactions rolled back), explicit checkpoints and clean
//! close-and-reopen. The generator tracks the keys a failure-free run would hold, so
//! updates and deletes hit existing keys; a crashed run only ever executes a *prefix* of
//! the same list, which is what makes "state after commit i" well defined.
//!
//! Values encode (tree, key, version) in their bytes and lengths vary, so a stale, torn or
//! misplaced value differs from the model's byte for byte.

use std::collections::BTreeMap;

use inpage::{Database, Error, KeyKind, OwnedKey, ReadableTxn, Tree, WriteTxn};

use crate::rng::Rng;

/// The model: tree name → key → value. A tree that exists but is empty is present with an
/// empty map; a tree that does not exist is absent.
pub type Model = BTreeMap<String, BTreeMap<OwnedKey, Vec<u8>>>;

/// Trees every workload uses: two integer-keyed, one byte-keyed.
pub const TREES: [(&str, KeyKind); 3] = [
    ("ints", KeyKind::Int),
    ("more", KeyKind::Int),
    ("bytes", KeyKind::Bytes),
];

/// What kind of operations dominate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum WorkloadKind {
    /// Inserts, updates, deletes, savepoints, rollbacks, clears, checkpoints, reopens.
    Mixed,
    /// Mostly inserts of new keys.
    Insert,
    /// Updates of existing keys (after a first load).
    Update,
    /// Deletes of existing keys (with a bulk load whenever the trees run low).
    Delete,
    /// Mixed, with half the byte tree's keys long (up to ~3x the page's inline key
    /// limit, behind a shared filler so their tails decide their order): key tail chains
    /// in leaves and separators, split, merged, freed and recovered.
    LongKeys,
}

impl WorkloadKind {
    pub fn name(self) -> &'static str {
        match self {
            WorkloadKind::Mixed => "mixed",
            WorkloadKind::Insert => "insert",
            WorkloadKind::Update => "update",
            WorkloadKind::Delete => "delete",
            WorkloadKind::LongKeys => "long-keys",
        }
    }

    pub fn parse(s: &str) -> Result<WorkloadKind, String> {
        [
            WorkloadKind::Mixed,
            WorkloadKind::Insert,
            WorkloadKind::Update,
            WorkloadKind::Delete,
            WorkloadKind::LongKeys,
        ]
        .into_iter()
        .find(|k| k.name().eq_ignore_ascii_case(s.trim()))
        .ok_or_else(|| {
            format!("unknown workload {s:?}; valid: mixed, insert, update, delete, long-keys")
        })
    }
}

/// Everything the generator needs: the same spec always yields the same steps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkloadSpec {
    pub kind: WorkloadKind,
    pub ops_per_txn: usize,
    pub txns: usize,
    pub seed: u64,
    pub page_size: u32,
}

/// One operation inside a transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    Put {
        tree: usize,
        key: OwnedKey,
        value: Vec<u8>,
    },
    Del {
        tree: usize,
        key: OwnedKey,
    },
    /// Remove every entry of a tree (frees whole subtrees and overflow chains).
    Clear {
        tree: usize,
    },
    /// Push a savepoint.
    Savepoint,
    /// Roll back to the newest savepoint (which stays).
    RollbackTo,
    /// Release the newest savepoint, keeping its changes.
    Release,
    /// Rebuild the whole database compactly, as `VACUUM` does: read every tree, empty
    /// the database (`WriteTxn::clear_all` where the mode allows, which drops the page
    /// count so the file is cut back after a checkpoint; else drop each tree), create
    /// the trees again and load them in key order. The contents stay the same.
    Rebuild,
    /// Give up to this many free pages back (`WriteTxn::vacuum_free`, what
    /// `auto_vacuum` runs): the pages at the end of the file move into free pages below,
    /// their holders repointed. The contents stay the same. Modes that cannot move pages
    /// skip it.
    GiveBack {
        pages: u32,
    },
}

/// How a transaction ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    Commit,
    Rollback,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Txn {
    pub ops: Vec<Op>,
    pub end: End,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    Txn(Txn),
    /// `Database::checkpoint`.
    Checkpoint,
    /// `Database::close` then `Database::open`.
    Reopen,
}

/// A value whose bytes depend on (tree, key, version), `len` bytes long.
pub fn value_for(tree: usize, key: &OwnedKey, version: u64, len: usize) -> Vec<u8> {
    let k = match key {
        OwnedKey::Int(i) => *i as u64,
        OwnedKey::Bytes(b) => b.iter().fold(0u64, |a, &c| a.wrapping_mul(31) ^ c as u64),
    };
    let mut r = Rng::new(crate::rng::mix(&[tree as u64, k, version]));
    let mut v = Vec::with_capacity(len);
    while v.len() < len {
        v.extend_from_slice(&r.next_u64().to_le_bytes());
    }
    v.truncate(len);
    v
}

/// Key number `n` of `tree`. With `long` (the long-keys workload, pages of `page_size`
/// bytes), odd byte keys get a filler of up to 3/4 of a page in front (the inline key
/// limit is about a quarter page), a length fixed by `n` so a key is always the same.
fn key_for(tree: usize, n: u64, long: Option<u32>) -> OwnedKey {
    match TREES[tree].1 {
        // Spread around zero so negative integer keys are covered too.
        KeyKind::Int => OwnedKey::Int(n as i64 - 1000),
        KeyKind::Bytes => {
            let mut k = Vec::new();
            if let Some(ps) = long.filter(|_| n % 2 == 1) {
                k.resize((n.wrapping_mul(7919) % (3 * ps as u64 / 4)) as usize, b'L');
            }
            k.extend_from_slice(format!("key-{n:06}").as_bytes());
            OwnedKey::Bytes(k)
        }
    }
}

fn value_len(r: &mut Rng, page_size: u32) -> usize {
    let ps = page_size as u64;
    let len = match r.below(100) {
        0..=54 => r.range(0, 40),
        55..=79 => r.range(41, ps / 4),
        // Near the largest value that still fits in a leaf cell.
        80..=91 => r.range(ps / 4, ps / 2),
        // Several overflow pages.
        _ => r.range(ps, 3 * ps + 100),
    };
    len as usize
}

/// Apply one transaction's operations to a model (savepoints included); the result is
/// the state the transaction commits.
pub fn apply_txn(base: &Model, txn: &Txn) -> Model {
    let mut m = base.clone();
    for (name, _) in TREES {
        m.entry(name.to_string()).or_default();
    }
    let mut stack: Vec<Model> = Vec::new();
    for op in &txn.ops {
        match op {
            Op::Put { tree, key, value } => {
                m.get_mut(TREES[*tree].0)
                    .expect("tree created above")
                    .insert(key.clone(), value.clone());
            }
            Op::Del { tree, key } => {
                m.get_mut(TREES[*tree].0)
                    .expect("tree created above")
                    .remove(key);
            }
            Op::Clear { tree } => {
                m.get_mut(TREES[*tree].0)
                    .expect("tree created above")
                    .clear();
            }
            Op::Savepoint => stack.push(m.clone()),
            Op::RollbackTo => {
                if let Some(s) = stack.last() {
                    m = s.clone();
                }
            }
            Op::Release => {
                stack.pop();
            }
            Op::Rebuild | Op::GiveBack { .. } => {}
        }
    }
    m
}

/// Generate the steps of a workload.
pub fn generate(spec: &WorkloadSpec) -> Vec<Step> {
    let mut r = Rng::new(crate::rng::mix(&[spec.seed, 0x5745_4C44]));
    let k = spec.ops_per_txn.max(1);
    // Independent of `txns`, so a longer run of the same seed extends a shorter one.
    let keyspace = (k * 16).max(64) as u64;
    let mut model = Model::new();
    let mut version = 0u64;
    let mut next_fresh = [0u64; 3];
    let mut steps = Vec::new();
    // Rebuilds come from a stream of their own, so the rest of a seed's steps are the
    // ones it had before rebuilds existed.
    let mut rebuilds = Rng::new(crate::rng::mix(&[spec.seed, 0x5245_4255]));
    // Page moves too (a stream added later still).
    let mut give_backs = Rng::new(crate::rng::mix(&[spec.seed, 0x4749_5645]));
    let mut put = |r: &mut Rng, tree: usize, key: OwnedKey| -> Op {
        version += 1;
        let len = value_len(r, spec.page_size);
        let value = value_for(tree, &key, version, len);
        Op::Put { tree, key, value }
    };
    let existing = |m: &Model, r: &mut Rng, tree: usize| -> Option<OwnedKey> {
        let t = m.get(TREES[tree].0)?;
        if t.is_empty() {
            return None;
        }
        t.keys().nth(r.below(t.len() as u64) as usize).cloned()
    };
    for _ in 0..spec.txns {
        // Between transactions: the occasional checkpoint or clean reopen.
        if !steps.is_empty() {
            match r.below(100) {
                0..=5 => steps.push(Step::Checkpoint),
                6..=9 => steps.push(Step::Reopen),
                _ => {}
            }
        }
        let total: usize = model.values().map(|t| t.len()).sum();
        let bulk = match spec.kind {
            WorkloadKind::Update => total == 0,
            WorkloadKind::Delete => total < k,
            _ => false,
        };
        let mut ops = Vec::new();
        let mut working = model.clone();
        let mut depth = 0usize;
        let n_ops = if bulk && spec.kind == WorkloadKind::Delete {
            4 * k
        } else {
            k
        };
        // Savepoints only where the txn is not a bulk load, in ~15% of transactions.
        let sp_at = (!bulk && r.pct(15)).then(|| r.below(k as u64) as usize);
        let sp_end = sp_at.map(|s| s + 1 + r.below((k - s) as u64) as usize);
        for i in 0..n_ops {
            if sp_at == Some(i) {
                ops.push(Op::Savepoint);
                depth += 1;
            }
            if sp_end == Some(i) && depth > 0 {
                ops.push(if r.pct(60) {
                    Op::RollbackTo
                } else {
                    Op::Release
                });
                if matches!(ops.last(), Some(Op::Release)) {
                    depth -= 1;
                }
            }
            let tree = r.below(TREES.len() as u64) as usize;
            let long = (spec.kind == WorkloadKind::LongKeys).then_some(spec.page_size);
            let fresh = |r: &mut Rng, next: &mut [u64; 3]| {
                if spec.kind == WorkloadKind::Insert && r.pct(80) {
                    next[tree] += 1 + r.below(3);
                    key_for(tree, next[tree] % keyspace.max(1) + keyspace, long)
                } else {
                    key_for(tree, r.below(keyspace), long)
                }
            };
            let op = if bulk {
                let key = fresh(&mut r, &mut next_fresh);
                put(&mut r, tree, key)
            } else {
                match spec.kind {
                    WorkloadKind::Insert => {
                        let key = fresh(&mut r, &mut next_fresh);
                        put(&mut r, tree, key)
                    }
                    WorkloadKind::Update => match existing(&working, &mut r, tree) {
                        Some(key) => put(&mut r, tree, key),
                        None => {
                            let key = fresh(&mut r, &mut next_fresh);
                            put(&mut r, tree, key)
                        }
                    },
                    WorkloadKind::Delete => match existing(&working, &mut r, tree) {
                        Some(key) => Op::Del { tree, key },
                        None => {
                            let key = fresh(&mut r, &mut next_fresh);
                            Op::Del { tree, key }
                        }
                    },
                    WorkloadKind::Mixed | WorkloadKind::LongKeys => match r.below(100) {
                        0..=39 => {
                            let key = fresh(&mut r, &mut next_fresh);
                            put(&mut r, tree, key)
                        }
                        40..=64 => match existing(&working, &mut r, tree) {
                            Some(key) => put(&mut r, tree, key),
                            None => {
                                let key = fresh(&mut r, &mut next_fresh);
                                put(&mut r, tree, key)
                            }
                        },
                        65..=97 => match existing(&working, &mut r, tree) {
                            Some(key) => Op::Del { tree, key },
                            None => Op::Del {
                                tree,
                                key: fresh(&mut r, &mut next_fresh),
                            },
                        },
                        _ => Op::Clear { tree },
                    },
                }
            };
            // Keep `working` current so later ops of this txn see its own changes.
            working = apply_txn(
                &working,
                &Txn {
                    ops: vec![op.clone()],
                    end: End::Commit,
                },
            );
            ops.push(op);
        }
        let end = if !bulk && r.pct(10) {
            End::Rollback
        } else {
            End::Commit
        };
        // A rebuild in 1 in 10 mixed transactions, anywhere among its operations (before
        // a savepoint, inside one rolled back to, or last).
        if matches!(spec.kind, WorkloadKind::Mixed | WorkloadKind::LongKeys) && rebuilds.pct(10) {
            let at = rebuilds.below(ops.len() as u64 + 1) as usize;
            ops.insert(at, Op::Rebuild);
        }
        // Free pages given back in 1 in 5 of them: a few, or all.
        if matches!(spec.kind, WorkloadKind::Mixed | WorkloadKind::LongKeys) && give_backs.pct(20) {
            let at = give_backs.below(ops.len() as u64 + 1) as usize;
            let pages = if give_backs.pct(50) {
                1 + give_backs.below(8) as u32
            } else {
                u32::MAX
            };
            ops.insert(at, Op::GiveBack { pages });
        }
        let txn = Txn { ops, end };
        if end == End::Commit {
            model = apply_txn(&model, &txn);
        }
        steps.push(Step::Txn(txn));
    }
    steps
}

/// Where a transaction failed.
#[derive(Debug)]
pub enum TxnError {
    /// Before `commit` was called: the transaction never reached the journal.
    Body(Error),
    /// `commit` returned an error: the outcome is unknown (either way is allowed).
    Commit(Error),
}

/// What a transaction did when it did not fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxnOutcome {
    Committed,
    RolledBack,
}

/// Run one transaction on `db`.
pub fn exec_txn(db: &Database, txn: &Txn) -> Result<TxnOutcome, TxnError> {
    exec_txn_with(db, txn, || {})
}

/// `exec_txn`, calling `before_commit` right before `commit` (the oracle notes the disk's
/// op count there, to tell a commit that changed the disk from one that failed early).
pub fn exec_txn_with(
    db: &Database,
    txn: &Txn,
    mut before_commit: impl FnMut(),
) -> Result<TxnOutcome, TxnError> {
    let mut w = db.begin_write().map_err(TxnError::Body)?;
    let body = (|| -> Result<(), Error> {
        let trees: Vec<Tree> = TREES
            .iter()
            .map(|(name, kind)| w.open_or_create_tree(name, *kind))
            .collect::<Result<_, _>>()?;
        run_ops(&mut w, &trees, &txn.ops)
    })();
    if let Err(e) = body {
        // A failed rollback poisons the handle; the body's error is the one to report.
        let _ = w.rollback();
        return Err(TxnError::Body(e));
    }
    match txn.end {
        End::Commit => {
            before_commit();
            w.commit()
        }
        .map(|()| TxnOutcome::Committed)
        .map_err(TxnError::Commit),
        End::Rollback => w
            .rollback()
            .map(|()| TxnOutcome::RolledBack)
            .map_err(TxnError::Body),
    }
}

fn run_ops(w: &mut WriteTxn, trees: &[Tree], ops: &[Op]) -> Result<(), Error> {
    let mut sps = Vec::new();
    for op in ops {
        match op {
            Op::Put { tree, key, value } => {
                w.insert(&trees[*tree], key.as_key(), value)?;
            }
            Op::Del { tree, key } => {
                w.remove(&trees[*tree], key.as_key())?;
            }
            Op::Clear { tree } => w.clear_tree(&trees[*tree])?,
            Op::Savepoint => sps.push(w.savepoint()),
            Op::RollbackTo => {
                if let Some(sp) = sps.last() {
                    w.rollback_to(sp)?;
                }
            }
            Op::Release => {
                if let Some(sp) = sps.pop() {
                    w.release(sp)?;
                }
            }
            Op::Rebuild => rebuild(w)?,
            Op::GiveBack { pages } => {
                if w.can_vacuum() {
                    w.vacuum_free(*pages)?;
                }
            }
        }
    }
    Ok(())
}

/// [`Op::Rebuild`]: every tree read whole, the database emptied, the trees loaded again.
fn rebuild(w: &mut WriteTxn) -> Result<(), Error> {
    let infos = w.list_trees()?;
    let contents = dump(w)?;
    if w.can_clear_all() {
        w.clear_all()?;
    } else {
        for info in &infos {
            w.drop_tree(&info.name)?;
        }
    }
    for info in &infos {
        let t = w.create_tree(&info.name, info.kind)?;
        let entries = contents.get(&info.name).expect("dumped above");
        w.load_tree(&t, |load| {
            for (k, v) in entries {
                load.push(k.as_key(), v)?;
            }
            Ok(())
        })?;
    }
    Ok(())
}

/// The states after each acknowledged commit of a failure-free run: `states[i]` is the
/// state after commit `i` (`states[0]` is the empty database).
pub fn commit_states(steps: &[Step]) -> Vec<Model> {
    let mut states = vec![Model::new()];
    for s in steps {
        if let Step::Txn(t) = s {
            if t.end == End::Commit {
                let next = apply_txn(states.last().expect("non-empty"), t);
                states.push(next);
            }
        }
    }
    states
}

/// Read the whole database through a full scan of every tree.
pub fn dump<T: ReadableTxn>(r: &T) -> Result<Model, Error> {
    let mut m = Model::new();
    for info in r.list_trees()? {
        let t = r.open_tree(&info.name)?;
        let mut entries = BTreeMap::new();
        for kv in r.iter(&t)? {
            let (k, v) = kv?;
            entries.insert(k, v);
        }
        m.insert(info.name.clone(), entries);
    }
    Ok(m)
}

/// A short description of how `got` differs from `want` (first few differences).
pub fn describe_diff(got: &Model, want: &Model) -> String {
    let mut out = Vec::new();
    let names: std::collections::BTreeSet<&String> = got.keys().chain(want.keys()).collect();
    for name in names {
        match (got.get(name), want.get(name)) {
            (None, Some(_)) => out.push(format!("tree {name:?} missing")),
            (Some(_), None) => out.push(format!("unexpected tree {name:?}")),
            (Some(g), Some(w)) => {
                for (k, wv) in w {
                    match g.get(k) {
                        None => out.push(format!("{name}[{}] missing", show_key(k))),
                        Some(gv) if gv != wv => out.push(format!(
                            "{name}[{}] has {} bytes, want {} bytes{}",
                            show_key(k),
                            gv.len(),
                            wv.len(),
                            if gv.len() == wv.len() {
                                " (content differs)"
                            } else {
                                ""
                            }
                        )),
                        _ => {}
                    }
                }
                for k in g.keys().filter(|k| !w.contains_key(*k)) {
                    out.push(format!("{name}[{}] should be absent", show_key(k)));
                }
            }
            (None, None) => {}
        }
    }
    let n = out.len();
    out.truncate(4);
    if n > 4 {
        out.push(format!("... {} more", n - 4));
    }
    if out.is_empty() {
        "no difference".into()
    } else {
        out.join("; ")
    }
}

pub fn show_key(k: &OwnedKey) -> String {
    match k {
        OwnedKey::Int(i) => i.to_string(),
        OwnedKey::Bytes(b) => format!("{:?}", String::from_utf8_lossy(b)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The long-keys workload writes byte keys past the inline limit (1,008 bytes at
    /// 4 KiB pages) up to ~3x it; the mixed workload's keys stay short.
    #[test]
    fn long_keys_workload_writes_long_keys() {
        let longest = |kind| {
            let spec = WorkloadSpec {
                kind,
                ops_per_txn: 8,
                txns: 200,
                seed: 5,
                page_size: 4096,
            };
            generate(&spec)
                .iter()
                .filter_map(|s| match s {
                    Step::Txn(t) => Some(t.ops.iter()),
                    _ => None,
                })
                .flatten()
                .filter_map(|op| match op {
                    Op::Put {
                        key: OwnedKey::Bytes(k),
                        ..
                    } => Some(k.len()),
                    _ => None,
                })
                .collect::<Vec<usize>>()
        };
        let long = longest(WorkloadKind::LongKeys);
        assert!(long.iter().filter(|&&n| n > 1008).count() > long.len() / 4);
        assert!(long.iter().all(|&n| n <= 3 * 1024 + 10));
        assert!(longest(WorkloadKind::Mixed).iter().all(|&n| n < 20));
    }
}
