//! The tree over DHL pages: a transactional in-memory store that polices the DHL write
//! contract, and a model-based proptest over many transactions with simulated crashes.
//!
//! What the store checks on every write to a page that existed before the transaction:
//! the committed version (the one a reader at `tid - 1` sees) reads back exactly as it did
//! from the committed image. That is the property that makes DHL need no journal: a crash
//! or abort at any point leaves every committed version in place. The crash simulation
//! then checks the consequence at tree level: the committed images overlaid with the
//! transaction's dirty ones, read at `tid - 1`, are exactly the committed tree.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

use super::btree::{self, Events, EVENTS};
use super::*;
use crate::error::Error;
use crate::page::double_header::Dhl;
use crate::page::versioned::SlotCheck;
use crate::page::{cell, double_header, Layout, PageRef, PageWrite};

/// The state of one open transaction.
struct Txn {
    tid: u64,
    dirty: HashMap<Pgno, PageRef>,
    /// Allocated by this transaction (no committed version).
    fresh: HashSet<Pgno>,
    /// Freed by this transaction: neither written nor handed out again before commit.
    freed: HashSet<Pgno>,
    /// Working copies of the store's free pool and size.
    pool: BTreeSet<Pgno>,
    next: Pgno,
}

/// In-memory DHL store with transactions. Panics when the tree breaks the page contract
/// (reading or writing a free page, reading an unwritten one, writing a freed one, or
/// disturbing a committed version).
struct DhlStore {
    page_size: usize,
    /// Committed images ("the disk"); free pages keep their stale images, as on disk.
    disk: HashMap<Pgno, PageRef>,
    /// Free pages reusable now: freed by committed transactions.
    pool: BTreeSet<Pgno>,
    next: Pgno,
    committed_tid: u64,
    txn: Option<Txn>,
    /// Off for corruption tests, where a bad pointer may lead anywhere: contract
    /// violations are then `Corrupt` errors and writes are not policed.
    strict: bool,
}

fn content(v: &double_header::View<'_>) -> (u64, bool, Pgno, Vec<Vec<u8>>) {
    (v.tid(), v.is_leaf(), v.right_child(), v.cells().unwrap())
}

impl DhlStore {
    fn new(page_size: usize) -> DhlStore {
        DhlStore {
            page_size,
            disk: HashMap::new(),
            pool: BTreeSet::new(),
            next: 1, // page 0 is the file header
            committed_tid: 0,
            txn: None,
            strict: true,
        }
    }

    fn begin(&mut self, tid: u64) {
        assert!(self.txn.is_none() && tid > self.committed_tid);
        self.txn = Some(Txn {
            tid,
            dirty: HashMap::new(),
            fresh: HashSet::new(),
            freed: HashSet::new(),
            pool: self.pool.clone(),
            next: self.next,
        });
    }

    fn txn(&self) -> &Txn {
        self.txn.as_ref().expect("no open transaction")
    }

    fn commit(&mut self) {
        let t = self.txn.take().expect("no open transaction");
        let unwritten: Vec<_> = t
            .fresh
            .difference(&t.freed)
            .filter(|p| !t.dirty.contains_key(p))
            .collect();
        assert!(
            unwritten.is_empty(),
            "allocated but never written: {unwritten:?}"
        );
        self.disk.extend(t.dirty);
        self.pool = t.pool;
        self.pool.extend(t.freed);
        self.next = t.next;
        self.committed_tid = t.tid;
    }

    fn abort(&mut self) {
        self.txn.take().expect("no open transaction");
    }

    /// Read-only view of the committed state.
    fn committed(&self) -> ImageView {
        ImageView {
            page_size: self.page_size,
            pages: self.disk.clone(),
            visible_tid: self.committed_tid,
        }
    }

    /// What recovery would read after a crash now: every committed image, overlaid with
    /// whatever this transaction wrote, read at the last committed tid.
    fn crashed(&self) -> ImageView {
        let t = self.txn();
        let mut pages = self.disk.clone();
        pages.extend(t.dirty.iter().map(|(&p, i)| (p, i.clone())));
        ImageView {
            page_size: self.page_size,
            pages,
            visible_tid: t.tid - 1,
        }
    }

    fn violation(&self, pgno: Pgno, what: &str) -> Result<()> {
        assert!(
            !self.strict,
            "page contract violated on page {pgno}: {what}"
        );
        Err(Error::corrupt(pgno, what.to_string()))
    }

    fn allocated(&self, pgno: Pgno) -> bool {
        match &self.txn {
            Some(t) => {
                pgno != 0 && pgno < t.next && !t.pool.contains(&pgno) && !t.freed.contains(&pgno)
            }
            None => pgno != 0 && pgno < self.next && !self.pool.contains(&pgno),
        }
    }
}

impl PageRead for DhlStore {
    fn page_size(&self) -> usize {
        self.page_size
    }
    fn layout(&self) -> Layout {
        &crate::page::double_header::DHL
    }
    fn visible_tid(&self) -> u64 {
        self.txn.as_ref().map_or(self.committed_tid, |t| t.tid)
    }
    fn read(&self, pgno: Pgno) -> Result<PageRef> {
        if !self.allocated(pgno) {
            self.violation(pgno, "read of a free or unallocated page")?;
        }
        if let Some(t) = &self.txn {
            if let Some(img) = t.dirty.get(&pgno) {
                return Ok(img.clone());
            }
            if t.fresh.contains(&pgno) {
                self.violation(pgno, "read of an allocated page never written")?;
            }
        }
        if !self.disk.contains_key(&pgno) {
            self.violation(pgno, "read of a page never written")?;
        }
        Ok(self.disk[&pgno].clone())
    }
}

impl PageWrite for DhlStore {
    fn write(&mut self, pgno: Pgno, data: PageRef) -> Result<()> {
        assert_eq!(data.len(), self.page_size);
        if !self.allocated(pgno) {
            return self.violation(pgno, "write to a free or unallocated page");
        }
        let usable = self.usable_size();
        let t = self.txn();
        let tid = t.tid;
        if !self.strict {
            // Corrupt input: only "no panic" is checked.
        } else if t.fresh.contains(&pgno) {
            let written = Dhl::visible(pgno, &data, usable, tid)
                .map(|v| v.tid())
                .or_else(|_| {
                    double_header::OVERFLOW
                        .open(pgno, &data, usable)
                        .map(|o| o.tid)
                });
            assert_eq!(
                written.ok(),
                Some(tid),
                "page {pgno}: fresh write is not version {tid}"
            );
        } else {
            // The DHL safety property: the committed version is untouched.
            let old = &self.disk[&pgno];
            let before = Dhl::visible(pgno, old, usable, tid - 1).unwrap_or_else(|e| {
                panic!("page {pgno}: rewrote a page without a committed tree version: {e}")
            });
            let after = Dhl::visible(pgno, &data, usable, tid - 1)
                .unwrap_or_else(|e| panic!("page {pgno}: write lost the committed version: {e}"));
            assert_eq!(
                content(&before),
                content(&after),
                "page {pgno}: committed version disturbed"
            );
            let new = Dhl::visible(pgno, &data, usable, tid).unwrap();
            assert_eq!(
                new.tid(),
                tid,
                "page {pgno}: write did not add version {tid}"
            );
        }
        let t = self.txn.as_mut().unwrap();
        t.dirty.insert(pgno, data);
        Ok(())
    }
    fn allocate(&mut self) -> Result<Pgno> {
        let t = self.txn.as_mut().expect("allocate outside a transaction");
        let pgno = match t.pool.pop_first() {
            Some(p) => p,
            None => {
                t.next += 1;
                t.next - 1
            }
        };
        t.fresh.insert(pgno);
        Ok(pgno)
    }
    fn free(&mut self, pgno: Pgno) -> Result<()> {
        if !self.allocated(pgno) {
            return self.violation(pgno, "double free or free of an unallocated page");
        }
        let t = self.txn();
        if t.fresh.contains(&pgno) && !t.dirty.contains_key(&pgno) {
            self.violation(pgno, "freed a page that was allocated but never written")?;
        }
        let t = self.txn.as_mut().expect("free outside a transaction");
        t.freed.insert(pgno);
        Ok(())
    }
    fn tid(&self) -> u64 {
        self.txn().tid
    }
    fn is_fresh(&self, pgno: Pgno) -> bool {
        self.txn().fresh.contains(&pgno)
    }
}

/// Read-only set of page images seen at one snapshot.
struct ImageView {
    page_size: usize,
    pages: HashMap<Pgno, PageRef>,
    visible_tid: u64,
}

impl PageRead for ImageView {
    fn page_size(&self) -> usize {
        self.page_size
    }
    fn layout(&self) -> Layout {
        &crate::page::double_header::DHL
    }
    fn visible_tid(&self) -> u64 {
        self.visible_tid
    }
    fn read(&self, pgno: Pgno) -> Result<PageRef> {
        self.pages
            .get(&pgno)
            .cloned()
            .ok_or_else(|| Error::corrupt(pgno, "no such page"))
    }
}

fn bytewise(a: &[u8], b: &[u8]) -> Ordering {
    a.cmp(b)
}

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// `check` passes on `view`, every entry equals `model` in order, and the tree's pages
/// are disjoint from `pool`. Returns the pages the tree owns.
fn verify(view: &ImageView, root: Pgno, model: &Model, pool: &BTreeSet<Pgno>) -> HashSet<Pgno> {
    let mut owned = HashSet::new();
    let stats = check(view, root, &bytewise, &mut |p| {
        assert!(owned.insert(p), "page {p} visited twice");
        assert!(!pool.contains(&p), "the tree owns free page {p}");
        Ok(())
    })
    .unwrap_or_else(|e| panic!("check failed: {e}"));
    assert_eq!(stats.entries, model.len() as u64);
    let mut c = Cursor::new(view, root, &bytewise);
    let mut all = Vec::new();
    let mut ok = c.first().unwrap();
    while ok {
        all.push((c.key().to_vec(), c.value().unwrap()));
        ok = c.next().unwrap();
    }
    let expect: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert!(all == expect, "scan differs from the model");
    owned
}

/// After a commit: the committed tree is right and owned ∪ pool is every page.
fn verify_committed(s: &DhlStore, root: Pgno, model: &Model) {
    let owned = verify(&s.committed(), root, model, &s.pool);
    let covered: HashSet<Pgno> = owned
        .union(&s.pool.iter().copied().collect())
        .copied()
        .collect();
    assert_eq!(covered, (1..s.next).collect::<HashSet<_>>(), "leaked pages");
}

#[derive(Clone, Debug)]
enum DOp {
    Insert(usize, usize),
    Remove(usize),
    Get(usize),
}

#[derive(Clone, Debug)]
struct TxnPlan {
    ops: Vec<DOp>,
    commit: bool,
    /// Simulate a crash after this many ops (before the commit).
    crash_at: Option<usize>,
}

#[derive(Clone, Debug)]
struct DhlScenario {
    page_size: usize,
    redistribute: bool,
    keys: Vec<Vec<u8>>,
    txns: Vec<TxnPlan>,
    end: u8,
}

fn value_of(i: usize, len: usize) -> Vec<u8> {
    (0..len).map(|j| (i * 31 + j) as u8).collect()
}

fn dhl_scenario() -> impl Strategy<Value = DhlScenario> {
    (
        prop_oneof![2 => Just(512usize), 1 => Just(4096)],
        any::<bool>(),
    )
        .prop_flat_map(|(page_size, redistribute)| {
            let usable = page_size - 4;
            let kmax = max_key_len(usable);
            let cell = cell::max_cell(usable);
            let key = (super::tests::key_len(kmax), any::<u64>())
                .prop_map(move |(len, seed)| super::tests::test_key(seed, len, kmax));
            // Few keys, so one transaction replaces cells of the same pages many times.
            let nk = if page_size == 512 { 48 } else { 160 };
            let idx = 0..nk;
            let vlen = prop_oneof![6 => 0..40usize, 3 => 0..=cell, 1 => 0..3 * page_size];
            let op = prop_oneof![
                10 => (idx.clone(), vlen).prop_map(|(k, v)| DOp::Insert(k, v)),
                5 => idx.clone().prop_map(DOp::Remove),
                1 => idx.prop_map(DOp::Get),
            ];
            let txn = (
                proptest::collection::vec(op, 1..60),
                prop_oneof![4 => Just(true), 1 => Just(false)],
                proptest::option::weighted(0.5, any::<usize>()),
            )
                .prop_map(|(ops, commit, crash)| TxnPlan {
                    crash_at: crash.map(|c| c % (ops.len() + 1)),
                    ops,
                    commit,
                });
            (
                proptest::collection::vec(key, nk),
                proptest::collection::vec(txn, 1..30),
                0..3u8,
            )
                .prop_map(move |(keys, txns, end)| DhlScenario {
                    page_size,
                    redistribute,
                    keys,
                    txns,
                    end,
                })
        })
}

/// Whether the committed root is a root pointer (an interior node without keys).
fn root_is_pointer(s: &DhlStore, root: Pgno) -> bool {
    let img = &s.disk[&root];
    let v = Dhl::visible(root, img, s.usable_size(), s.committed_tid).unwrap();
    !v.is_leaf() && v.ncells() == 0
}

/// Committed root-pointer transitions seen by a run: (created, removed).
type PointerCounts = (u64, u64);

fn run_dhl(sc: &DhlScenario) -> PointerCounts {
    let mut counts = (0, 0);
    let opts = TreeOptions {
        redistribute: sc.redistribute,
    };
    let mut s = DhlStore::new(sc.page_size);
    let mut tid = 1;
    s.begin(tid);
    let root = create(&mut s).unwrap();
    s.commit();
    let mut model = Model::new();
    verify_committed(&s, root, &model);
    let mut pointer = false;
    for (t, plan) in sc.txns.iter().enumerate() {
        // Aborted tids are skipped, as on disk they may not be reused.
        tid += 1;
        s.begin(tid);
        let mut work = model.clone();
        for (n, op) in plan.ops.iter().enumerate() {
            if plan.crash_at == Some(n) {
                verify(&s.crashed(), root, &model, &s.pool);
            }
            match *op {
                DOp::Insert(k, vlen) => {
                    let key = &sc.keys[k];
                    let v = value_of(t * 100 + n, vlen);
                    let old = insert(&mut s, root, &bytewise, opts, key, &v).unwrap();
                    assert_eq!(old, work.insert(key.clone(), v), "txn {t} insert #{n}");
                }
                DOp::Remove(k) => {
                    let key = &sc.keys[k];
                    let old = remove(&mut s, root, &bytewise, opts, key).unwrap();
                    assert_eq!(old, work.remove(key), "txn {t} remove #{n}");
                }
                DOp::Get(k) => {
                    let key = &sc.keys[k];
                    let got = get(&s, root, &bytewise, key).unwrap();
                    assert_eq!(got.as_ref(), work.get(key), "txn {t} get #{n}");
                }
            }
        }
        if plan.crash_at == Some(plan.ops.len()) {
            verify(&s.crashed(), root, &model, &s.pool);
        }
        if plan.commit {
            s.commit();
            model = work;
        } else {
            s.abort();
        }
        verify_committed(&s, root, &model);
        let was = std::mem::replace(&mut pointer, root_is_pointer(&s, root));
        match (was, pointer) {
            (false, true) => counts.0 += 1,
            (true, false) => counts.1 += 1,
            _ => {}
        }
    }
    tid += 1;
    s.begin(tid);
    match sc.end {
        0 => clear(&mut s, root).unwrap(),
        1 => destroy(&mut s, root).unwrap(),
        _ => {
            for k in model.keys() {
                assert!(remove(&mut s, root, &bytewise, opts, k).unwrap().is_some());
            }
        }
    }
    verify(&s.crashed(), root, &model, &s.pool);
    s.commit();
    if sc.end == 1 {
        assert_eq!(s.pool.len() as u32, s.next - 1, "destroy freed everything");
    } else {
        verify_committed(&s, root, &Model::new());
        let stats = check(&s.committed(), root, &bytewise, &mut |_| Ok(())).unwrap();
        // Emptying the tree may leave a root pointer to an empty leaf only if even an
        // empty leaf did not fit in the root, which cannot happen.
        assert_eq!((stats.leaf_pages, stats.interior_pages), (1, 0));
    }
    counts
}

#[test]
fn dhl_tree_matches_model_across_transactions_and_crashes() {
    let cases = std::env::var("DHL_TREE_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256);
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    // Per page size: (scenarios, events, committed root pointers created, removed).
    let totals = std::cell::RefCell::new(BTreeMap::<usize, (u64, Events, u64, u64)>::new());
    runner
        .run(&dhl_scenario(), |sc| {
            let before = EVENTS.with(|e| e.get());
            let (created, removed) = run_dhl(&sc);
            let after = EVENTS.with(|e| e.get());
            let mut totals = totals.borrow_mut();
            let t = totals.entry(sc.page_size).or_default();
            t.0 += 1;
            t.1.relocations += after.relocations - before.relocations;
            t.1.root_pointers += after.root_pointers - before.root_pointers;
            t.1.root_collapses += after.root_collapses - before.root_collapses;
            t.2 += created;
            t.3 += removed;
            Ok(())
        })
        .unwrap();
    let totals = totals.into_inner();
    for (ps, (n, ev, created, removed)) in &totals {
        println!(
            "DHL tree, {ps}-byte pages, {n} scenarios: {} relocations, {} root-pointer writes, \
             {} root collapses; committed root pointers created {created}, removed {removed}",
            ev.relocations, ev.root_pointers, ev.root_collapses
        );
    }
    let all = |f: fn(&(u64, Events, u64, u64)) -> u64| totals.values().map(f).sum::<u64>();
    assert!(all(|t| t.1.relocations) > 0, "relocation never exercised");
    assert!(
        all(|t| t.1.root_pointers) > 0,
        "root pointer never exercised"
    );
    assert!(
        all(|t| t.3) > 0,
        "a committed root pointer was never collapsed"
    );
}

/// A committed DHL tree of a few levels with overflow chains, built over several
/// transactions so that pages hold two versions.
/// One-insert transactions with ascending keys (Mobibench's insert) write about one page
/// each: the append split leaves the full leaf alone and starts a new one, and a leaf that
/// only grows is never merged back.
#[test]
fn ascending_one_insert_transactions_write_one_page() {
    const N: u32 = 3000;
    let mut s = DhlStore::new(4096);
    s.begin(1);
    let root = create(&mut s).unwrap();
    s.commit();
    let mut pages = 0;
    for i in 0..N {
        s.begin(i as u64 + 2);
        let key = i.to_be_bytes();
        insert(
            &mut s,
            root,
            &bytewise,
            TreeOptions::default(),
            &key,
            &value_of(i as usize, 100),
        )
        .unwrap();
        pages += s.txn().dirty.len();
        s.commit();
    }
    let per_txn = pages as f64 / N as f64;
    assert!(per_txn < 1.06, "{per_txn} pages per transaction");
    let mut model = Model::new();
    for i in 0..N {
        model.insert(i.to_be_bytes().to_vec(), value_of(i as usize, 100));
    }
    verify_committed(&s, root, &model);
}

fn sample_dhl_tree() -> (DhlStore, Pgno, Vec<Vec<u8>>) {
    let mut s = DhlStore::new(512);
    s.begin(1);
    let root = create(&mut s).unwrap();
    s.commit();
    let keys: Vec<Vec<u8>> = (0..120u32)
        .map(|i| format!("key{i:05}").into_bytes())
        .collect();
    for (t, chunk) in keys.chunks(10).enumerate() {
        s.begin(t as u64 + 2);
        for (i, k) in chunk.iter().enumerate() {
            let len = if i % 9 == 0 { 700 } else { i * 3 };
            insert(
                &mut s,
                root,
                &bytewise,
                TreeOptions::default(),
                k,
                &value_of(i, len),
            )
            .unwrap();
        }
        s.commit();
    }
    (s, root, keys)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    /// Random byte damage to committed pages of a DHL tree: reads and a write
    /// transaction may fail, but only with an error, never a panic.
    #[test]
    fn prop_dhl_corruption_never_panics(
        damage in proptest::collection::vec((any::<u32>(), any::<u16>(), any::<u8>()), 1..6),
        redistribute in any::<bool>(),
    ) {
        let (mut s, root, keys) = sample_dhl_tree();
        let opts = TreeOptions { redistribute };
        let mut pages: Vec<Pgno> = s.disk.keys().copied().collect();
        pages.sort_unstable();
        for (p, off, byte) in damage {
            let pgno = pages[p as usize % pages.len()];
            // Mostly the descriptors, arrays and the first cells.
            let at = if off % 2 == 0 { off as usize % 128 } else { off as usize % 508 };
            let mut img = s.disk[&pgno].to_vec();
            img[at] ^= byte | 1;
            s.disk.insert(pgno, img.into());
        }
        s.strict = false;
        let view = s.committed();
        let _ = check(&view, root, &bytewise, &mut |_| Ok(()));
        let _ = count(&view, root);
        let mut c = Cursor::new(&view, root, &bytewise);
        let mut ok = c.first();
        while let Ok(true) = ok {
            let _ = c.value();
            ok = c.next();
        }
        s.begin(100);
        for (i, k) in keys.iter().enumerate().step_by(3) {
            let _ = get(&s, root, &bytewise, k);
            let _ = insert(&mut s, root, &bytewise, opts, k, &value_of(i, i * 7));
            let _ = remove(&mut s, root, &bytewise, opts, &keys[(i * 11) % keys.len()]);
        }
        let _ = clear(&mut s, root);
    }
}

#[test]
fn dhl_overflow_checksum_is_verified() {
    let (mut s, root, keys) = sample_dhl_tree();
    // keys[0] has a 700-byte value: an overflow chain of two pages.
    let view = s.committed();
    let first = {
        let path = btree::descend(&view, root, &bytewise, &keys[0]).unwrap();
        let leaf = path.last().unwrap();
        let p = Dhl::visible(leaf.pgno, &leaf.page, 508, u64::MAX).unwrap();
        let i = p.search(&keys[0], &bytewise).unwrap().unwrap();
        match p.payload(i).unwrap() {
            cell::Payload::Overflow { first, .. } => first,
            other => panic!("expected an overflow value, got {other:?}"),
        }
    };
    let mut img = s.disk[&first].to_vec();
    img[double_header::RECORD_START + 5] ^= 1;
    s.disk.insert(first, img.into());
    let err = get(&s.committed(), root, &bytewise, &keys[0]).unwrap_err();
    assert!(err.to_string().contains("checksum"), "{err}");
    assert!(check(&s.committed(), root, &bytewise, &mut |_| Ok(())).is_err());
}
