//! Owned cursors (`Cursor`) and probe-ordered trees against a `BTreeMap` model.
//!
//! Property test: three cursors on one tree (an integer tree, and a probe-ordered byte tree
//! whose order is the keys' reversed bytes, i.e. not memcmp, and whose keys are often
//! long keys differing only in their tails) under random interleavings of
//! seek / first / last / next / prev / restore, inserts and deletes through the cursors
//! (with and without save_position), plain-API writes, savepoints with rollback_to,
//! rollback_all and commits, for every journal mode of the registry. After every step each
//! cursor's key and value, and `has_moved`, are compared with the model's rule: a cursor's
//! identity is its key; next = first key greater, prev = last key less.

mod common;

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::sync::Arc;

use common::*;
use inpage::check::check;
use inpage::inspect::max_inline_value_in;
use inpage::{
    Comparator, Cursor, CursorOps, Database, Error, JournalMode, KeyKind, ReadableTxn, Restored,
    SeekResult, Tree, WriteTxn,
};
use inpage_sim::SimVfs;
use proptest::prelude::*;
use proptest::test_runner::TestRunner;

/// The probe tree's order: keys compared by their reversed bytes.
fn rev_cmp(a: &[u8], b: &[u8]) -> Ordering {
    a.iter().rev().cmp(b.iter().rev())
}

fn rev_order() -> Comparator {
    Arc::new(rev_cmp)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Flavor {
    Int,
    Rev,
}

impl Flavor {
    /// Stored key bytes of model key `k` (integer trees: the engine's encoding).
    fn stored(self, k: u8) -> Vec<u8> {
        match self {
            Flavor::Int => ((k as u64) ^ (1 << 63)).to_be_bytes().to_vec(),
            // Every third key is padded in front with a filler of 60..360 bytes, so at
            // 512-byte pages (inline limit 112) it is often a long key whose in-cell
            // prefix is all filler: only the tail decides its place in the order.
            Flavor::Rev => {
                let mut v = match k % 3 {
                    0 => vec![b'p'; 60 + (k as usize * 37) % 300],
                    _ => Vec::new(),
                };
                v.extend([k % 7, k / 7]);
                v
            }
        }
    }
    /// The key the model sorts by (so `BTreeMap` order is the tree's order).
    fn sort(self, k: u8) -> Vec<u8> {
        let mut s = self.stored(k);
        if self == Flavor::Rev {
            s.reverse();
        }
        s
    }
}

#[derive(Clone, Debug)]
enum Op {
    First(usize),
    Last(usize),
    Seek(usize, u8),
    Next(usize),
    Prev(usize),
    Restore(usize),
    CurInsert(usize, u8, usize, u32),
    CurDelete(usize, bool),
    Put(u8, usize, u32),
    Del(u8),
    Bulk(u8, u8),
    Savepoint,
    RollbackTo,
    RollbackAll,
    Commit,
}

fn op() -> impl Strategy<Value = Op> {
    let c = 0..3usize;
    let len = prop_oneof![8 => 0..60usize, 1 => 500..1500usize];
    prop_oneof![
        2 => c.clone().prop_map(Op::First),
        2 => c.clone().prop_map(Op::Last),
        4 => (c.clone(), 0..90u8).prop_map(|(i, k)| Op::Seek(i, k)),
        8 => c.clone().prop_map(Op::Next),
        6 => c.clone().prop_map(Op::Prev),
        2 => c.clone().prop_map(Op::Restore),
        5 => (c.clone(), 0..90u8, len.clone(), any::<u32>()).prop_map(|(i, k, l, v)| Op::CurInsert(i, k, l, v)),
        4 => (c.clone(), any::<bool>()).prop_map(|(i, s)| Op::CurDelete(i, s)),
        5 => (0..90u8, len, any::<u32>()).prop_map(|(k, l, v)| Op::Put(k, l, v)),
        3 => (0..90u8).prop_map(Op::Del),
        1 => (0..90u8, 1..60u8).prop_map(|(k, n)| Op::Bulk(k, n)),
        1 => Just(Op::Savepoint),
        1 => Just(Op::RollbackTo),
        1 => Just(Op::RollbackAll),
        1 => Just(Op::Commit),
    ]
}

/// A model cursor: invalid, on a key, or between the neighbours of a (deleted) key. For
/// `At`, also the value it read when it got there (for `has_moved`).
#[derive(Clone, Debug, PartialEq)]
enum MCur {
    Invalid,
    At(Vec<u8>, Vec<u8>),
    Gone(Vec<u8>),
}

type Model = BTreeMap<Vec<u8>, (Vec<u8>, Vec<u8>)>; // sort key -> (stored key, value)

struct Run {
    flavor: Flavor,
    db: Database,
    tree: Tree,
    txn: Option<WriteTxn>,
    cursors: Vec<Cursor>,
    model: Model,
    committed: Model,
    saves: Vec<(inpage::Savepoint, Model)>,
    mcur: Vec<MCur>,
    mode: JournalMode,
}

impl Run {
    fn new(flavor: Flavor, mode: JournalMode) -> Run {
        let vfs = SimVfs::new();
        let db = Database::open(DB, sim_config(&vfs, mode, 512)).unwrap();
        let mut w = db.begin_write().unwrap();
        let tree = match flavor {
            Flavor::Int => w.create_tree("t", KeyKind::Int).unwrap(),
            Flavor::Rev => w.create_probe_tree("t", rev_order()).unwrap(),
        };
        w.commit().unwrap();
        let txn = db.begin_write().unwrap();
        let cursors = (0..3).map(|_| txn.open_cursor(&tree).unwrap()).collect();
        Run {
            flavor,
            db,
            tree,
            txn: Some(txn),
            cursors,
            model: Model::new(),
            committed: Model::new(),
            saves: Vec::new(),
            mcur: vec![MCur::Invalid; 3],
            mode,
        }
    }

    fn w(&mut self) -> &mut WriteTxn {
        self.txn.as_mut().unwrap()
    }

    fn at(&self, sort: &[u8]) -> MCur {
        let (_, v) = &self.model[sort];
        MCur::At(sort.to_vec(), v.clone())
    }

    fn first_after(&self, k: &[u8]) -> MCur {
        use std::ops::Bound::*;
        match self.model.range::<[u8], _>((Excluded(k), Unbounded)).next() {
            Some((s, _)) => self.at(s),
            None => MCur::Invalid,
        }
    }

    fn last_before(&self, k: &[u8]) -> MCur {
        match self
            .model
            .range::<[u8], _>((std::ops::Bound::Unbounded, std::ops::Bound::Excluded(k)))
            .next_back()
        {
            Some((s, _)) => self.at(s),
            None => MCur::Invalid,
        }
    }

    fn put(&mut self, k: u8, value: Vec<u8>) -> inpage::Result<Option<Vec<u8>>> {
        let (f, tree) = (self.flavor, self.tree.clone());
        let w = self.txn.as_mut().unwrap();
        let r = match f {
            Flavor::Int => w.insert(&tree, k as i64, &value),
            Flavor::Rev => {
                let target = f.stored(k);
                w.insert_by(&tree, &mut |s| rev_cmp(s, &target), &f.stored(k), &value)
            }
        };
        self.model.insert(f.sort(k), (f.stored(k), value));
        r
    }

    fn step(&mut self, op: &Op) {
        let f = self.flavor;
        match *op {
            Op::First(i) => {
                let t = self.txn.as_ref().unwrap();
                let got = t.cursor_first(&mut self.cursors[i]).unwrap();
                self.mcur[i] = match self.model.keys().next() {
                    Some(s) => self.at(&s.clone()),
                    None => MCur::Invalid,
                };
                assert_eq!(got, self.mcur[i] != MCur::Invalid);
            }
            Op::Last(i) => {
                let t = self.txn.as_ref().unwrap();
                let got = t.cursor_last(&mut self.cursors[i]).unwrap();
                self.mcur[i] = match self.model.keys().next_back() {
                    Some(s) => self.at(&s.clone()),
                    None => MCur::Invalid,
                };
                assert_eq!(got, self.mcur[i] != MCur::Invalid);
            }
            Op::Seek(i, k) => {
                let t = self.txn.as_ref().unwrap();
                let got = match f {
                    Flavor::Int => t.cursor_seek(&mut self.cursors[i], k as i64).unwrap(),
                    Flavor::Rev => {
                        let target = f.stored(k);
                        t.cursor_seek_by(&mut self.cursors[i], &mut |s| rev_cmp(s, &target))
                            .unwrap()
                    }
                };
                let s = f.sort(k);
                let (want, res) = if self.model.contains_key(&s) {
                    (self.at(&s), SeekResult::Exact)
                } else {
                    match self.first_after(&s) {
                        MCur::Invalid => match self.model.keys().next_back() {
                            Some(l) => (self.at(&l.clone()), SeekResult::Before),
                            None => (MCur::Invalid, SeekResult::Empty),
                        },
                        m => (m, SeekResult::After),
                    }
                };
                assert_eq!(got, res, "seek {k}");
                self.mcur[i] = want;
            }
            Op::Next(i) | Op::Prev(i) => {
                let next = matches!(op, Op::Next(_));
                let t = self.txn.as_ref().unwrap();
                let got = if next {
                    t.cursor_next(&mut self.cursors[i]).unwrap()
                } else {
                    t.cursor_prev(&mut self.cursors[i]).unwrap()
                };
                self.mcur[i] = match self.mcur[i].clone() {
                    MCur::Invalid => MCur::Invalid,
                    MCur::At(k, _) | MCur::Gone(k) => {
                        if next {
                            self.first_after(&k)
                        } else {
                            self.last_before(&k)
                        }
                    }
                };
                assert_eq!(got, self.mcur[i] != MCur::Invalid, "{op:?}");
            }
            Op::Restore(i) => {
                let t = self.txn.as_ref().unwrap();
                let got = t.cursor_restore(&mut self.cursors[i]).unwrap();
                let (m, want) = match self.mcur[i].clone() {
                    MCur::Invalid => (MCur::Invalid, Restored::Gone),
                    MCur::At(k, _) | MCur::Gone(k) => {
                        if self.model.contains_key(&k) {
                            (self.at(&k), Restored::Same)
                        } else {
                            (MCur::Gone(k), Restored::Gone)
                        }
                    }
                };
                assert_eq!(got, want);
                self.mcur[i] = m;
            }
            Op::CurInsert(i, k, len, ver) => {
                let value = value_for(k as i64, ver, len);
                let tree_kind = f;
                let mut c = self.cursors[i].clone();
                let w = self.w();
                let old = match tree_kind {
                    Flavor::Int => w.cursor_insert(&mut c, k as i64, &value).unwrap(),
                    Flavor::Rev => {
                        let target = f.stored(k);
                        w.cursor_insert_by(
                            &mut c,
                            &mut |s| rev_cmp(s, &target),
                            &f.stored(k),
                            &value,
                        )
                        .unwrap()
                    }
                };
                self.cursors[i] = c;
                let prev = self.model.insert(f.sort(k), (f.stored(k), value));
                assert_eq!(old, prev.map(|p| p.1));
                self.mcur[i] = self.at(&f.sort(k));
            }
            Op::CurDelete(i, save) => {
                let mut c = self.cursors[i].clone();
                let r = self.w().cursor_delete(&mut c, save);
                self.cursors[i] = c;
                match self.mcur[i].clone() {
                    MCur::At(k, _) if self.model.contains_key(&k) => {
                        r.unwrap();
                        self.model.remove(&k);
                        self.mcur[i] = if save { MCur::Gone(k) } else { MCur::Invalid };
                    }
                    MCur::At(k, _) => {
                        assert!(matches!(r, Err(Error::InvalidArgument(_))), "{r:?}");
                        self.mcur[i] = MCur::Gone(k);
                    }
                    _ => assert!(matches!(r, Err(Error::InvalidArgument(_))), "{r:?}"),
                }
            }
            Op::Put(k, len, ver) => {
                let prev = self.model.get(&f.sort(k)).map(|p| p.1.clone());
                let old = self.put(k, value_for(k as i64, ver, len)).unwrap();
                assert_eq!(old, prev);
            }
            Op::Del(k) => {
                let (tree, w) = (self.tree.clone(), self.txn.as_mut().unwrap());
                let got = match f {
                    Flavor::Int => w.remove(&tree, k as i64).unwrap(),
                    Flavor::Rev => {
                        let target = f.stored(k);
                        w.remove_by(&tree, &mut |s| rev_cmp(s, &target)).unwrap()
                    }
                };
                assert_eq!(got, self.model.remove(&f.sort(k)).map(|p| p.1));
            }
            Op::Bulk(k, n) => {
                for j in 0..n {
                    let key = k.wrapping_add(j) % 90;
                    self.put(key, value_for(key as i64, j as u32, 30)).unwrap();
                }
            }
            Op::Savepoint => {
                let sp = self.w().savepoint();
                self.saves.push((sp, self.model.clone()));
            }
            Op::RollbackTo => {
                if let Some((sp, m)) = self.saves.last() {
                    self.txn.as_mut().unwrap().rollback_to(sp).unwrap();
                    self.model = m.clone();
                }
            }
            Op::RollbackAll => {
                self.w().rollback_all().unwrap();
                self.saves.clear();
                self.model = self.committed.clone();
            }
            Op::Commit => {
                self.txn.take().unwrap().commit().unwrap();
                self.saves.clear();
                self.committed = self.model.clone();
                self.txn = Some(self.db.begin_write().unwrap());
            }
        }
        self.verify();
    }

    /// Every cursor agrees with its model cursor.
    fn verify(&self) {
        let t = self.txn.as_ref().unwrap();
        for (i, (c, m)) in self.cursors.iter().zip(&self.mcur).enumerate() {
            let moved = t.cursor_has_moved(c).unwrap();
            match m {
                MCur::Invalid | MCur::Gone(_) => {
                    assert_eq!(c.key(), None, "cursor {i}: {m:?}");
                    assert!(moved, "cursor {i} off a row must report moved");
                }
                MCur::At(k, seen) => {
                    let mut stored = k.clone();
                    if self.flavor == Flavor::Rev {
                        stored.reverse();
                    }
                    assert_eq!(c.key(), Some(&stored[..]), "cursor {i}: {m:?}");
                    let now = self.model.get(k).map(|p| p.1.clone());
                    assert_eq!(t.cursor_value(c).unwrap(), now, "cursor {i} value");
                    let mut window = [0u8; 16];
                    let off = 7u64;
                    let copied = t.cursor_read_value(c, off, &mut window).unwrap();
                    let want = now.as_ref().map(|v| {
                        let s = (off as usize).min(v.len());
                        v[s..(s + 16).min(v.len())].to_vec()
                    });
                    assert_eq!(
                        copied.map(|n| window[..n].to_vec()),
                        want,
                        "cursor {i} window"
                    );
                    assert_eq!(
                        t.cursor_value_len(c).unwrap(),
                        now.as_ref().map(|v| v.len() as u64)
                    );
                    let model_moved = now.as_ref() != Some(seen);
                    if model_moved {
                        assert!(moved, "cursor {i}: row changed but has_moved is false");
                    } else if stored.len() <= inline_key_512(self.mode)
                        && Some(seen.len()) <= max_inline_value_in(self.mode, 512, stored.len())
                    {
                        // An unchanged inline row is never reported moved, and the bytes
                        // the cursor hands out are the row's. (A long key's row, like an
                        // overflow value's, reports moved once its tree changed.)
                        assert!(!moved, "cursor {i}: unchanged row reported moved");
                        assert_eq!(c.value_local().unwrap(), Some(&seen[..]));
                    }
                }
            }
        }
    }
}

/// The inline key limit at the 512-byte pages these runs use: `(508 - 12) / 4 - 12`, with
/// the usable size less the mode's reserved tail (the `waldio` modes).
fn inline_key_512(mode: JournalMode) -> usize {
    (508 - mode.reserved_tail() - 12) / 4 - 12
}

fn cases() -> u32 {
    std::env::var("INPAGE_PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(16)
}

fn modes() -> Vec<JournalMode> {
    JournalMode::all().collect()
}

fn run_flavor(flavor: Flavor) {
    let mut ran = 0;
    for mode in modes() {
        let mut runner = TestRunner::new(ProptestConfig {
            cases: cases(),
            failure_persistence: None,
            ..ProptestConfig::default()
        });
        let ops = proptest::collection::vec(op(), 1..200);
        if let Err(e) = runner.run(&ops, |ops| {
            let mut run = Run::new(flavor, mode);
            for op in &ops {
                run.step(op);
            }
            let Run { txn, db, .. } = run;
            txn.unwrap().commit().unwrap();
            let mut cmps = std::collections::HashMap::new();
            cmps.insert("t".to_string(), rev_order());
            check(&db.begin_read().unwrap(), &cmps).unwrap();
            Ok(())
        }) {
            panic!("{flavor:?} tree, {mode}: {e}");
        }
        ran += 1;
    }
    assert_eq!(ran, JournalMode::all().count());
}

#[test]
fn cursors_on_an_int_tree_match_the_model() {
    run_flavor(Flavor::Int);
}

#[test]
fn cursors_on_a_probe_tree_match_the_model() {
    run_flavor(Flavor::Rev);
}

/// The matrix is the registry: a new mode is cursor-checked without touching this file.
#[test]
fn the_matrix_covers_the_registry() {
    let m = modes();
    for mode in JournalMode::all() {
        assert!(m.contains(&mode), "{mode} is not cursor-checked");
    }
    assert_eq!(m.len(), JournalMode::ALL.len());
}

fn mem_db() -> Database {
    let vfs = SimVfs::new();
    Database::open(DB, sim_config(&vfs, JournalMode::OFF, 512)).unwrap()
}

/// A memcmp probe seeks exactly like a `Key` seek, on an integer tree and a byte tree.
#[test]
fn probe_seek_equals_key_seek_for_a_memcmp_probe() {
    let db = mem_db();
    let mut w = db.begin_write().unwrap();
    let ints = w.create_tree("i", KeyKind::Int).unwrap();
    let bytes = w.create_tree("b", KeyKind::Bytes).unwrap();
    for k in (0..400i64).step_by(3) {
        w.insert(&ints, k, &k.to_le_bytes()).unwrap();
        w.insert(&bytes, format!("k{k:04}").as_str(), b"v").unwrap();
    }
    let mut a = w.open_cursor(&ints).unwrap();
    let mut b = w.open_cursor(&ints).unwrap();
    for k in -5..410i64 {
        let r1 = w.cursor_seek(&mut a, k).unwrap();
        let enc = ((k as u64) ^ (1 << 63)).to_be_bytes();
        let r2 = w.cursor_seek_by(&mut b, &mut |s| s.cmp(&enc[..])).unwrap();
        assert_eq!(r1, r2, "int {k}");
        assert_eq!(a.key(), b.key());
        let want = if k < 0 {
            SeekResult::After
        } else if k > 399 {
            SeekResult::Before
        } else if k % 3 == 0 {
            SeekResult::Exact
        } else {
            SeekResult::After
        };
        assert_eq!(r1, want, "int {k}");
    }
    let mut a = w.open_cursor(&bytes).unwrap();
    let mut b = w.open_cursor(&bytes).unwrap();
    for k in 0..410i64 {
        let key = format!("k{k:04}");
        let r1 = w.cursor_seek(&mut a, key.as_str()).unwrap();
        let r2 = w
            .cursor_seek_by(&mut b, &mut |s| s.cmp(key.as_bytes()))
            .unwrap();
        assert_eq!((r1, a.key()), (r2, b.key()), "bytes {key}");
    }
}

/// An insert by probe replaces the entry the probe finds Equal, even when its bytes
/// differ (SQLite's index insert by the first nMem fields).
#[test]
fn insert_by_probe_replaces_the_probe_equal_entry() {
    let db = mem_db();
    let mut w = db.begin_write().unwrap();
    // Order by the first byte only: entries are (field, payload) with a unique field.
    let order: Comparator = Arc::new(|a: &[u8], b: &[u8]| a[..1].cmp(&b[..1]));
    let t = w.create_probe_tree("p", order).unwrap();
    for f in 0..50u8 {
        let key = [f, 0xAA];
        w.insert_by(&t, &mut |s| s[..1].cmp(&key[..1]), &key, b"one")
            .unwrap();
    }
    let mut c = w.open_cursor(&t).unwrap();
    let key = [7u8, 0xBB];
    let old = w
        .cursor_insert_by(&mut c, &mut |s| s[..1].cmp(&key[..1]), &key, b"two")
        .unwrap();
    assert_eq!(old.as_deref(), Some(&b"one"[..]));
    assert_eq!(c.key(), Some(&key[..]));
    assert_eq!(w.count(&t).unwrap(), 50);
    let r = w
        .cursor_seek_by(&mut c, &mut |s| s[..1].cmp(&[7u8][..]))
        .unwrap();
    assert_eq!(r, SeekResult::Exact);
    assert_eq!(c.key(), Some(&[7u8, 0xBB][..]));
    assert_eq!(w.cursor_value(&c).unwrap().as_deref(), Some(&b"two"[..]));
    let gone = w.remove_by(&t, &mut |s| s[..1].cmp(&[7u8][..])).unwrap();
    assert_eq!(gone.as_deref(), Some(&b"two"[..]));
    assert_eq!(w.count(&t).unwrap(), 49);
}

/// Key-based calls on a probe-ordered tree are refused; `check` accepts the tree
/// without its order; the flag survives a reopen.
#[test]
fn key_calls_on_a_probe_tree_are_refused() {
    let vfs = SimVfs::new();
    let cfg = || sim_config(&vfs, JournalMode::WAL, 512);
    let db = Database::open(DB, cfg()).unwrap();
    let mut w = db.begin_write().unwrap();
    let t = w.create_probe_tree("p", rev_order()).unwrap();
    for k in 0..200u8 {
        let key = [k % 13, k];
        w.insert_by(&t, &mut |s| rev_cmp(s, &key), &key, b"x")
            .unwrap();
    }
    let refused = |r: inpage::Result<()>| {
        assert!(
            matches!(&r, Err(Error::InvalidArgument(m)) if m.contains("probe-ordered")),
            "{r:?}"
        )
    };
    refused(w.insert(&t, b"ab", b"v").map(|_| ()));
    refused(w.remove(&t, b"ab").map(|_| ()));
    refused(w.get(&t, b"ab").map(|_| ()));
    refused(w.cursor(&t).map(|_| ()));
    let mut c = w.open_cursor(&t).unwrap();
    refused(w.cursor_seek(&mut c, b"ab").map(|_| ()));
    refused(w.cursor_insert(&mut c, b"ab", b"v").map(|_| ()));
    refused(w.open_tree("p").map(|_| ()));
    w.commit().unwrap();
    db.close().unwrap();
    let db = Database::open(DB, cfg()).unwrap();
    let r = db.begin_read().unwrap();
    refused(r.open_tree("p").map(|_| ()));
    let t = r.open_probe_tree("p", rev_order()).unwrap();
    assert_eq!(r.count(&t).unwrap(), 200);
    // Walk in the tree's order: reversed bytes ascending.
    let mut c = r.open_cursor(&t).unwrap();
    let mut prev: Option<Vec<u8>> = None;
    let mut ok = r.cursor_first(&mut c).unwrap();
    let mut n = 0;
    while ok {
        let k = c.key().unwrap().to_vec();
        if let Some(p) = &prev {
            assert_eq!(rev_cmp(p, &k), Ordering::Less);
        }
        prev = Some(k);
        n += 1;
        ok = r.cursor_next(&mut c).unwrap();
    }
    assert_eq!(n, 200);
    let report = check(&r, &Default::default()).unwrap();
    let (info, stats) = report.trees.iter().find(|(i, _)| i.name == "p").unwrap();
    assert!(info.external_order);
    assert_eq!(stats.entries, 200);
    // A plain tree is not a probe tree.
    drop(r);
    let mut w = db.begin_write().unwrap();
    w.create_tree("plain", KeyKind::Bytes).unwrap();
    refused(w.open_probe_tree("plain", rev_order()).map(|_| ()));
}

/// rollback_all undoes everything, keeps the transaction open and usable, and drops
/// savepoints.
#[test]
fn rollback_all_keeps_the_txn_open() {
    let db = mem_db();
    let mut w = db.begin_write().unwrap();
    let t = w.create_tree("t", KeyKind::Int).unwrap();
    w.insert(&t, 1, b"committed").unwrap();
    w.set_meta(0, 7).unwrap();
    w.commit().unwrap();

    let mut w = db.begin_write().unwrap();
    let sp = w.savepoint();
    w.insert(&t, 1, b"changed").unwrap();
    w.insert(&t, 2, b"new").unwrap();
    w.create_tree("u", KeyKind::Bytes).unwrap();
    w.set_meta(0, 8).unwrap();
    let mut c = w.open_cursor(&t).unwrap();
    assert!(w.cursor_last(&mut c).unwrap());
    assert_eq!(c.int_key(), Some(2));
    w.rollback_all().unwrap();
    assert_eq!(w.get(&t, 1).unwrap().as_deref(), Some(&b"committed"[..]));
    assert_eq!(w.get(&t, 2).unwrap(), None);
    assert!(matches!(w.open_tree("u"), Err(Error::TreeNotFound(_))));
    assert_eq!(w.meta(0).unwrap(), 7);
    assert!(w.rollback_to(&sp).is_err(), "savepoints are dropped");
    assert!(w.cursor_has_moved(&c).unwrap());
    assert_eq!(w.cursor_restore(&mut c).unwrap(), Restored::Gone);
    assert!(w.cursor_prev(&mut c).unwrap());
    assert_eq!(c.int_key(), Some(1));
    // Still open: write and commit.
    w.insert(&t, 3, b"after").unwrap();
    w.commit().unwrap();
    let r = db.begin_read().unwrap();
    assert_eq!(r.count(&t).unwrap(), 2);
    assert_eq!(r.get(&t, 3).unwrap().as_deref(), Some(&b"after"[..]));
    check(&r, &Default::default()).unwrap();
}

/// A cursor steps within its kept pages while the tree is unchanged, and keeps reading
/// the same bytes for its row while another cursor writes elsewhere in the tree.
#[test]
fn a_cursor_survives_writes_through_another_cursor() {
    let db = mem_db();
    let mut w = db.begin_write().unwrap();
    let t = w.create_tree("t", KeyKind::Int).unwrap();
    for k in 0..300i64 {
        w.insert(&t, k * 2, &value_for(k, 0, 20)).unwrap();
    }
    let mut scan = w.open_cursor(&t).unwrap();
    let mut writer = w.open_cursor(&t).unwrap();
    assert!(w.cursor_first(&mut scan).unwrap());
    let mut seen = vec![];
    loop {
        let k = scan.int_key().unwrap();
        seen.push(k);
        assert!(
            seen.len() <= 600,
            "the scan does not end: {:?}",
            &seen[590..]
        );
        // UPDATE-through-index pattern: insert ahead of the scan, delete behind it.
        if k % 4 == 0 {
            w.cursor_insert(&mut writer, k + 1, b"odd").unwrap();
        }
        if k >= 10 {
            w.cursor_seek(&mut writer, k - 10).unwrap();
            if writer.int_key() == Some(k - 10) {
                w.cursor_delete(&mut writer, true).unwrap();
            }
        }
        assert!(!w.cursor_has_moved(&scan).unwrap());
        if !w.cursor_next(&mut scan).unwrap() {
            break;
        }
    }
    // Every original key and every inserted odd key, each once, in order.
    let mut want: Vec<i64> = (0..300).map(|k| k * 2).collect();
    want.extend(
        (0..300)
            .map(|k| k * 2)
            .filter(|k| k % 4 == 0)
            .map(|k| k + 1),
    );
    want.sort();
    assert_eq!(seen, want);
    w.commit().unwrap();
    check(&db.begin_read().unwrap(), &Default::default()).unwrap();
}

/// The glue keeps cursors behind a mutex shared between threads.
#[test]
fn cursors_are_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Cursor>();
}

/// SQLite's one-pass DELETE: delete with save_position, then next, over the whole tree
/// (and backwards with prev), leaves it empty; every row is visited once.
#[test]
fn delete_with_save_position_then_step_visits_every_row() {
    let db = mem_db();
    let mut w = db.begin_write().unwrap();
    let t = w.create_tree("t", KeyKind::Int).unwrap();
    for k in 0..500i64 {
        w.insert(&t, k, &value_for(k, 1, (k % 50) as usize))
            .unwrap();
    }
    let mut c = w.open_cursor(&t).unwrap();
    let mut seen = vec![];
    let mut ok = w.cursor_first(&mut c).unwrap();
    while ok {
        let k = c.int_key().unwrap();
        seen.push(k);
        if k % 2 == 0 {
            w.cursor_delete(&mut c, true).unwrap();
            assert_eq!(c.key(), None);
        }
        ok = w.cursor_next(&mut c).unwrap();
    }
    assert_eq!(seen, (0..500).collect::<Vec<_>>());
    assert_eq!(w.count(&t).unwrap(), 250);
    let mut back = vec![];
    let mut ok = w.cursor_last(&mut c).unwrap();
    while ok {
        back.push(c.int_key().unwrap());
        w.cursor_delete(&mut c, true).unwrap();
        ok = w.cursor_prev(&mut c).unwrap();
    }
    assert_eq!(
        back,
        (0..500).rev().filter(|k| k % 2 == 1).collect::<Vec<_>>()
    );
    assert_eq!(w.count(&t).unwrap(), 0);
    // Without save_position the cursor is invalid afterwards.
    w.insert(&t, 1, b"x").unwrap();
    assert!(w.cursor_first(&mut c).unwrap());
    w.cursor_delete(&mut c, false).unwrap();
    assert!(!w.cursor_next(&mut c).unwrap());
    assert!(w.cursor_delete(&mut c, true).is_err());
}

/// A cursor positioned in a read transaction carries into a write transaction (and a
/// custom-comparator tree re-seeks by its comparator).
#[test]
fn a_cursor_moves_between_transactions() {
    let db = mem_db();
    let desc: Comparator = Arc::new(|a: &[u8], b: &[u8]| b.cmp(a));
    let mut w = db.begin_write().unwrap();
    let t = w.create_tree_with("d", desc.clone()).unwrap();
    for k in 0..100u8 {
        w.insert(&t, &[k], b"v").unwrap();
    }
    w.commit().unwrap();
    let r = db.begin_read().unwrap();
    let t = r.open_tree_with("d", desc).unwrap();
    let mut c = r.open_cursor(&t).unwrap();
    assert_eq!(r.cursor_seek(&mut c, &[50u8]).unwrap(), SeekResult::Exact);
    assert!(r.cursor_next(&mut c).unwrap());
    assert_eq!(c.key(), Some(&[49u8][..]));
    drop(r);
    let mut w = db.begin_write().unwrap();
    w.remove(&t, &[48u8]).unwrap();
    assert!(!w.cursor_has_moved(&c).unwrap(), "row 49 is unchanged");
    assert!(w.cursor_next(&mut c).unwrap());
    assert_eq!(c.key(), Some(&[47u8][..]));
    assert!(w.cursor_prev(&mut c).unwrap());
    assert_eq!(c.key(), Some(&[49u8][..]));
}

/// A scan over a probe tree keeps its fast path while writes land in other leaves: it
/// never calls the tree's order (for SQLite a record unpack and compare per call), and
/// it still sees every row exactly once.
#[test]
fn a_scan_needs_no_order_calls_while_other_leaves_change() {
    use std::sync::atomic::{AtomicUsize, Ordering as AO};
    static CALLS: AtomicUsize = AtomicUsize::new(0);
    let counted: Comparator = Arc::new(|a: &[u8], b: &[u8]| {
        CALLS.fetch_add(1, AO::Relaxed);
        a.cmp(b)
    });
    let db = mem_db();
    let mut w = db.begin_write().unwrap();
    let t = w.create_probe_tree("p", counted).unwrap();
    let key = |i: u32| format!("k{i:06}").into_bytes();
    for i in 0..2000u32 {
        let k = key(i);
        w.insert_by(&t, &mut |s| s.cmp(&k[..]), &k, &[1u8; 20])
            .unwrap();
    }
    let mut c = w.open_cursor(&t).unwrap();
    assert!(w.cursor_first(&mut c).unwrap());
    CALLS.store(0, AO::Relaxed);
    let mut n = 0;
    let mut ok = true;
    while ok {
        n += 1;
        // Rewrite a row far ahead of the scan (another leaf), through the probe API.
        let far = key((n + 1000) % 2000);
        if c.key() != Some(&far[..]) {
            w.insert_by(&t, &mut |s| s.cmp(&far[..]), &far, &[2u8; 20])
                .unwrap();
        }
        ok = w.cursor_next(&mut c).unwrap();
    }
    assert_eq!(n, 2000);
    let calls = CALLS.load(AO::Relaxed);
    // Steps that cross into a rewritten leaf re-seek; the ones inside an unchanged path
    // do not. Far fewer calls than one re-seek per step (about 11 compares each).
    assert!(calls < 2000, "{calls} order calls for 2000 steps");
}

/// A read error in the middle of cursor steps is a typed error, and leaves a cursor that
/// answers every later call (no panic); once the disk reads again the cursor works.
#[test]
fn read_errors_leave_cursors_usable() {
    use inpage::vfs::IoKind;
    use inpage_sim::{FaultPlan, FaultVfs};
    let vfs = SimVfs::new();
    let plan = Arc::new(FaultPlan::new());
    let cfg = || {
        sim_config(&vfs, JournalMode::OFF, 512)
            .vfs(Arc::new(FaultVfs::new(Arc::new(vfs.clone()), plan.clone())))
    };
    let db = Database::open(DB, cfg()).unwrap();
    let mut w = db.begin_write().unwrap();
    let t = w.create_tree("t", KeyKind::Int).unwrap();
    for k in 0..3000i64 {
        w.insert(&t, k, &value_for(k, 0, 40)).unwrap();
    }
    w.commit().unwrap();
    db.close().unwrap();
    for nth in [0u64, 1, 3] {
        let db = Database::open(DB, cfg()).unwrap();
        let mut w = db.begin_write().unwrap();
        let t = w.open_tree("t").unwrap();
        let mut c = w.open_cursor(&t).unwrap();
        let mut d = w.open_cursor(&t).unwrap();
        assert!(w.cursor_first(&mut c).unwrap());
        assert!(w.cursor_last(&mut d).unwrap());
        plan.fail_kind(IoKind::Read, nth, true);
        let mut failed = false;
        for _ in 0..3000 {
            match w.cursor_next(&mut c) {
                Ok(true) => {}
                Ok(false) => break,
                Err(e) => {
                    assert!(matches!(e, Error::Io { .. }), "{e:?}");
                    failed = true;
                    break;
                }
            }
        }
        assert!(failed, "the cold cache must read the disk");
        // Every call answers; none panics.
        let _ = c.key();
        let _ = c.value_local();
        let _ = w.cursor_has_moved(&c);
        let _ = w.cursor_value(&c);
        let _ = w.cursor_restore(&mut c);
        let _ = w.cursor_prev(&mut c);
        let _ = w.cursor_delete(&mut c, true);
        plan.disarm();
        // The other cursor never failed and still reads; the failed one repositions.
        assert_eq!(d.int_key(), Some(2999));
        assert!(w.cursor_seek(&mut c, 1500i64).unwrap() == SeekResult::Exact);
        assert!(w.cursor_next(&mut c).unwrap());
        assert_eq!(c.int_key(), Some(1501));
        drop(w);
        db.close().unwrap();
    }
}

/// `leaf_rest` shows exactly the rows `cursor_next` would reach within the leaf (and
/// stops before a value in an overflow chain); `cursor_skip_in_leaf(k)` lands where `k`
/// steps land; a stale cursor's skip is refused. Every mode of the registry.
#[test]
fn leaf_runs_match_stepping() {
    for mode in modes() {
        let vfs = SimVfs::new();
        let db = Database::open(DB, sim_config(&vfs, mode, 512)).unwrap();
        let big = max_inline_value_in(mode, 512, 8).unwrap() + 50;
        let mut w = db.begin_write().unwrap();
        let t = w.create_tree("t", KeyKind::Int).unwrap();
        for k in 0..400i64 {
            let len = if k % 37 == 5 { big } else { 12 };
            w.insert(&t, k, &value_for(k, 0, len)).unwrap();
        }
        w.commit().unwrap();

        let r = db.begin_read().unwrap();
        let mut c = r.open_cursor(&t).unwrap();
        let mut stepper = r.open_cursor(&t).unwrap();
        assert!(r.cursor_first(&mut c).unwrap());
        assert!(r.cursor_first(&mut stepper).unwrap());
        let (mut seen, mut longest) = (0, 0);
        loop {
            let mut rows: Vec<(i64, Vec<u8>)> = vec![];
            let n = c.leaf_rest(&mut |ik, _, v| {
                rows.push((ik.unwrap(), v.to_vec()));
                true
            });
            assert_eq!(n, rows.len(), "{mode}");
            // The rows are the next ones in key order, values in full (inline only).
            for (i, (k, v)) in rows.iter().enumerate() {
                if i > 0 {
                    assert!(r.cursor_next(&mut stepper).unwrap(), "{mode}");
                }
                assert_eq!(stepper.int_key(), Some(*k), "{mode}");
                assert_eq!(Some(v.clone()), r.cursor_value(&stepper).unwrap(), "{mode}");
                assert!(v.len() < big, "{mode}: an overflow value in a run");
            }
            if n > 1 {
                // Skipping to the last row of the run lands where the stepper is.
                assert!(r.cursor_skip_in_leaf(&mut c, n - 1).unwrap(), "{mode}");
                assert_eq!(c.int_key(), stepper.int_key(), "{mode}");
            }
            seen += n.max(1);
            longest = longest.max(n);
            if !r.cursor_next(&mut c).unwrap() {
                break;
            }
            assert!(r.cursor_next(&mut stepper).unwrap(), "{mode}");
            assert_eq!(c.int_key(), stepper.int_key(), "{mode}");
        }
        assert_eq!(seen, 400, "{mode}: every row once");
        // An MVBT record carries a 16-byte life span and is 8-byte aligned: a 512-byte
        // leaf holds 8 of these rows at most (7 with ls-mvbt's reserved space), and
        // leaves split to about half, so runs of 5 or more show a full leaf was read.
        let min_run = if mode.layout_name().contains("mvbt") {
            5
        } else {
            8
        };
        assert!(longest >= min_run, "{mode}: runs of at most {longest} rows");
        drop(r);

        // A cursor positioned before a write to its tree is stale: no skipping.
        let mut w = db.begin_write().unwrap();
        let mut c = w.open_cursor(&t).unwrap();
        assert!(w.cursor_first(&mut c).unwrap());
        assert!(c.leaf_rest(&mut |_, _, _| true) > 1, "{mode}");
        w.insert(&t, 1, b"changed").unwrap();
        assert!(
            matches!(
                w.cursor_skip_in_leaf(&mut c, 1),
                Err(Error::InvalidArgument(_))
            ),
            "{mode}"
        );
        w.rollback().unwrap();
    }
}

/// Inserts through a cursor that stands next to their place (a sorted index build, an
/// append after the last row, a row between two neighbours, a replace) take the
/// cursor's own path instead of a descent; the trees they build are the ones a model
/// says, in every mode, through splits at every level (512-byte pages).
#[test]
fn inserts_next_to_the_cursor_build_the_same_trees() {
    for mode in JournalMode::all() {
        let vfs = SimVfs::new();
        let db = Database::open("/cur.db", sim_config(&vfs, mode, 512)).unwrap();
        let mut w = db.begin_write().unwrap();
        let t = w.create_tree("t", KeyKind::Int).unwrap();
        let mut c = w.open_cursor(&t).unwrap();
        let mut model = BTreeMap::new();
        // Ascending appends, then every odd key between its neighbours, then replaces.
        for k in (0..3000i64).step_by(2) {
            w.cursor_insert(&mut c, k, &value_for(k, 0, 20)).unwrap();
            model.insert(k, value_for(k, 0, 20));
        }
        for k in (1..3000i64).step_by(2) {
            w.cursor_seek(&mut c, k - 1).unwrap();
            w.cursor_insert(&mut c, k, &value_for(k, 1, 30)).unwrap();
            model.insert(k, value_for(k, 1, 30));
            w.cursor_insert(&mut c, k, &value_for(k, 2, 10)).unwrap();
            model.insert(k, value_for(k, 2, 10));
        }
        w.commit().unwrap();
        let r = db.begin_read().unwrap();
        check(&r, &Default::default()).unwrap_or_else(|e| panic!("{mode}: {e}"));
        let mut c = r.open_cursor(&t).unwrap();
        let mut ok = r.cursor_first(&mut c).unwrap();
        let mut got = BTreeMap::new();
        while ok {
            got.insert(c.int_key().unwrap(), r.cursor_value(&c).unwrap().unwrap());
            ok = r.cursor_next(&mut c).unwrap();
        }
        assert!(got == model, "{mode}");
    }
}
