//! Tree tests: an in-memory page store that polices the `PageWrite` contract, unit tests,
//! model-based proptests against `BTreeMap`, and corruption tests.

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap, HashSet};

use proptest::prelude::*;

use super::*;
use crate::error::Error;
use crate::page::{cell, slotted, PageRef, PageWrite};

/// In-memory store. In strict mode it panics when the tree breaks the page contract
/// (reading a freed or never-written page, double free, writing an unallocated page);
/// in lenient mode (for corruption tests, where a bad pointer may lead anywhere) those
/// are `Corrupt` errors instead.
struct MemStore {
    page_size: usize,
    pages: HashMap<Pgno, PageRef>,
    free: Vec<Pgno>,
    free_set: HashSet<Pgno>,
    next: Pgno,
    unwritten: HashSet<Pgno>,
    strict: bool,
    /// Page writes so far (the cost of an operation).
    writes: usize,
}

impl MemStore {
    fn new(page_size: usize) -> MemStore {
        MemStore {
            page_size,
            pages: HashMap::new(),
            free: Vec::new(),
            free_set: HashSet::new(),
            next: 1, // page 0 is the file header
            unwritten: HashSet::new(),
            strict: true,
            writes: 0,
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
        pgno != 0 && pgno < self.next && !self.free_set.contains(&pgno)
    }

    /// Overwrite bytes of a stored page, bypassing the tree (to simulate corruption).
    fn poke(&mut self, pgno: Pgno, f: impl FnOnce(&mut [u8])) {
        let mut buf = self.pages[&pgno].to_vec();
        f(&mut buf);
        self.pages.insert(pgno, buf.into());
    }
}

impl PageRead for MemStore {
    fn page_size(&self) -> usize {
        self.page_size
    }
    fn read(&self, pgno: Pgno) -> Result<PageRef> {
        if !self.allocated(pgno) {
            self.violation(pgno, "read of a free or unallocated page")?;
        }
        if self.unwritten.contains(&pgno) {
            self.violation(pgno, "read of an allocated page never written")?;
        }
        Ok(self.pages[&pgno].clone())
    }
}

impl PageWrite for MemStore {
    fn write(&mut self, pgno: Pgno, data: PageRef) -> Result<()> {
        assert_eq!(data.len(), self.page_size, "write of a wrong-sized buffer");
        if !self.allocated(pgno) {
            return self.violation(pgno, "write to a free or unallocated page");
        }
        self.unwritten.remove(&pgno);
        self.pages.insert(pgno, data);
        self.writes += 1;
        Ok(())
    }
    fn allocate(&mut self) -> Result<Pgno> {
        let pgno = match self.free.pop() {
            Some(p) => {
                self.free_set.remove(&p);
                p
            }
            None => {
                self.next += 1;
                self.next - 1
            }
        };
        self.unwritten.insert(pgno);
        Ok(pgno)
    }
    fn free(&mut self, pgno: Pgno) -> Result<()> {
        if !self.allocated(pgno) {
            return self.violation(pgno, "double free or free of an unallocated page");
        }
        if self.unwritten.contains(&pgno) {
            self.violation(pgno, "freed a page that was allocated but never written")?;
        }
        self.free.push(pgno);
        self.free_set.insert(pgno);
        self.pages.remove(&pgno);
        Ok(())
    }
    fn dirty_image(&mut self, pgno: Pgno) -> Option<&mut PageRef> {
        // Every written page is this store's own, as a transaction's dirty pages are:
        // the tree edits it in place when nothing else holds it.
        if !self.allocated(pgno) || self.unwritten.contains(&pgno) {
            return None;
        }
        self.pages.get_mut(&pgno)
    }
}

fn bytewise(a: &[u8], b: &[u8]) -> Ordering {
    a.cmp(b)
}

fn reverse(a: &[u8], b: &[u8]) -> Ordering {
    b.cmp(a)
}

/// Orders keys by their bytes read from the end: keys sharing a long prefix (longer than
/// a long key's in-cell prefix) and differing at the end are ordered by what only the
/// tail chain holds, so a comparison that saw only the stored prefix would misorder.
fn by_end(a: &[u8], b: &[u8]) -> Ordering {
    a.iter().rev().cmp(b.iter().rev())
}

const FWD: TreeOptions = TreeOptions { redistribute: true };

/// Check `root` and that its pages plus the free list are exactly the pages ever
/// allocated: nothing leaked, nothing owned twice, nothing left unwritten.
fn check_owned(store: &MemStore, roots: &[Pgno], cmp: &CmpFn) -> Vec<TreeStats> {
    let mut owned = HashSet::new();
    let mut all_stats = Vec::new();
    for &root in roots {
        let stats = check(store, root, cmp, &mut |p| {
            assert!(owned.insert(p), "page {p} visited twice");
            Ok(())
        })
        .unwrap_or_else(|e| panic!("check failed: {e}"));
        assert_eq!(stats.entries, count(store, root).unwrap());
        all_stats.push(stats);
    }
    assert!(
        store.unwritten.is_empty(),
        "allocated but never written: {:?}",
        store.unwritten
    );
    assert!(
        owned.is_disjoint(&store.free_set),
        "a tree owns a free page"
    );
    let all: HashSet<Pgno> = (1..store.next).collect();
    let covered: HashSet<Pgno> = owned.union(&store.free_set).copied().collect();
    assert_eq!(
        covered,
        all,
        "leaked pages: {:?}",
        all.difference(&covered).collect::<Vec<_>>()
    );
    let pages: u64 = all_stats
        .iter()
        .map(|s| s.leaf_pages + s.interior_pages + s.overflow_pages)
        .sum();
    assert_eq!(pages as usize, owned.len());
    all_stats
}

fn key_of(i: u32, len: usize) -> Vec<u8> {
    let mut k = i.to_be_bytes().to_vec();
    k.resize(len.max(4), b'k');
    k
}

fn value_of(i: u32, len: usize) -> Vec<u8> {
    (0..len).map(|j| (i as usize * 31 + j) as u8).collect()
}

fn collect(store: &MemStore, root: Pgno, cmp: &CmpFn, forward: bool) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut c = Cursor::new(store, root, cmp);
    let mut out = Vec::new();
    let mut ok = if forward { c.first() } else { c.last() }.unwrap();
    while ok {
        out.push((c.key().to_vec(), c.value().unwrap()));
        ok = if forward { c.next() } else { c.prev() }.unwrap();
    }
    assert!(!c.valid());
    out
}

#[test]
fn empty_tree() {
    let mut s = MemStore::new(512);
    let root = create(&mut s).unwrap();
    assert_eq!(get(&s, root, &bytewise, b"x").unwrap(), None);
    assert_eq!(count(&s, root).unwrap(), 0);
    let mut c = Cursor::new(&s, root, &bytewise);
    assert!(!c.valid());
    assert!(!c.first().unwrap());
    assert!(!c.last().unwrap());
    assert!(!c.seek(b"").unwrap());
    assert!(!c.seek_le(b"zzz").unwrap());
    assert!(!c.next().unwrap() && !c.prev().unwrap());
    assert_eq!(remove(&mut s, root, &bytewise, FWD, b"x").unwrap(), None);
    let stats = check_owned(&s, &[root], &bytewise);
    assert_eq!(
        stats[0],
        TreeStats {
            depth: 1,
            leaf_pages: 1,
            ..TreeStats::default()
        }
    );
    // The empty key is a key like any other.
    insert(&mut s, root, &bytewise, FWD, b"", b"empty").unwrap();
    assert_eq!(
        get(&s, root, &bytewise, b"").unwrap().as_deref(),
        Some(&b"empty"[..])
    );
}

/// Ascending inserts take the append split: leaves stay full (but for the first, from the
/// root's midpoint split, and the last), and an insert writes little more than its one
/// leaf. Any other order overflows a leaf in the middle, which shares its cells with a
/// sibling that has room before it splits at the midpoint: fuller pages than midpoint
/// splits alone (`redistribute: false`) leave.
#[test]
fn inserts_fill_leaves() {
    const N: u32 = 3000;
    let leaves = |order: &[u32], opts: TreeOptions| {
        let mut s = MemStore::new(4096);
        let root = create(&mut s).unwrap();
        s.writes = 0;
        for &i in order {
            insert(
                &mut s,
                root,
                &bytewise,
                opts,
                &key_of(i, 8),
                &value_of(i, 100),
            )
            .unwrap();
        }
        let stats = check_owned(&s, &[root], &bytewise);
        assert_eq!(stats[0].entries, N as u64);
        (stats[0].leaf_pages, s.writes as f64 / N as f64)
    };
    let asc: Vec<u32> = (0..N).collect();
    let (asc_leaves, asc_writes) = leaves(&asc, FWD);
    let f = super::format::Format::of(&MemStore::new(4096));
    let cell = 2 + 4 + 8 + 100;
    let per_leaf = (f.capacity() / f.cost(cell)) as u64;
    // The root's own first split is a midpoint split: one half-full leaf more at most.
    let full = (N as u64).div_ceil(per_leaf);
    assert!(
        (full..=full + 1).contains(&asc_leaves),
        "{asc_leaves} leaves, {full} full ones would do"
    );
    assert!(asc_writes < 1.06, "{asc_writes} page writes per insert");
    let split_only = TreeOptions {
        redistribute: false,
    };
    // Descending keys always insert at the front of the first leaf: with midpoint
    // splits alone every leaf is left half full; sharing with the right sibling first
    // fills them to within a quarter page of full.
    let desc: Vec<u32> = (0..N).rev().collect();
    let (desc_split, _) = leaves(&desc, split_only);
    let (desc_shared, _) = leaves(&desc, FWD);
    assert!(
        desc_split > asc_leaves * 3 / 2,
        "{desc_split} vs {asc_leaves}"
    );
    assert!(
        desc_shared < asc_leaves * 4 / 3,
        "{desc_shared} leaves when sharing, {asc_leaves} ascending"
    );
    // Random keys: over a tenth fewer leaves than midpoint splits leave.
    let mut random: Vec<u32> = (0..N).collect();
    let mut x = 0x9E37_79B9u32;
    for i in (1..random.len()).rev() {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        random.swap(i, x as usize % (i + 1));
    }
    let (random_split, _) = leaves(&random, split_only);
    let (random_shared, _) = leaves(&random, FWD);
    assert!(
        random_shared * 100 < random_split * 90,
        "{random_shared} leaves when sharing, {random_split} with midpoint splits"
    );
}

#[test]
fn limits() {
    assert_eq!(max_key_len(508), 112);
    assert_eq!(max_key_len(4092), 1008);
    // Keys past the inline limit are long keys: stored whole, found whole.
    let mut s = MemStore::new(512);
    let root = create(&mut s).unwrap();
    for len in [113, 300, 5000] {
        let k = key_of(len as u32, len);
        assert_eq!(get(&s, root, &bytewise, &k).unwrap(), None);
        assert_eq!(
            insert(&mut s, root, &bytewise, FWD, &k, b"v").unwrap(),
            None
        );
        // Same prefix, different tail: a different key.
        let mut other = k.clone();
        *other.last_mut().unwrap() ^= 1;
        assert_eq!(get(&s, root, &bytewise, &other).unwrap(), None);
        assert_eq!(get(&s, root, &bytewise, &k).unwrap(), Some(b"v".to_vec()));
    }
    for len in [113, 300, 5000] {
        let k = key_of(len as u32, len);
        assert_eq!(
            remove(&mut s, root, &bytewise, FWD, &k).unwrap(),
            Some(b"v".to_vec())
        );
    }
    // Every tail chain went with its cell: only the root is left.
    let stats = check_owned(&s, &[root], &bytewise).remove(0);
    assert_eq!((stats.entries, stats.overflow_pages), (0, 0));
}

#[test]
fn grow_and_shrink_keep_the_root() {
    for (ps, opts) in [
        (512, FWD),
        (
            512,
            TreeOptions {
                redistribute: false,
            },
        ),
        (4096, FWD),
    ] {
        let mut s = MemStore::new(ps);
        let root = create(&mut s).unwrap();
        let n = 3000u32;
        // Insert in a scrambled order, then remove in another, checking along the way.
        let order: Vec<u32> = (0..n).map(|i| (i * 7919) % n).collect();
        for (j, &i) in order.iter().enumerate() {
            assert_eq!(
                insert(
                    &mut s,
                    root,
                    &bytewise,
                    opts,
                    &key_of(i, 20),
                    &value_of(i, 30)
                )
                .unwrap(),
                None
            );
            if j % 500 == 0 {
                check_owned(&s, &[root], &bytewise);
            }
        }
        let stats = check_owned(&s, &[root], &bytewise).remove(0);
        assert_eq!(stats.entries, n as u64);
        assert!(
            stats.depth >= if ps == 512 { 4 } else { 2 },
            "{ps}: depth {}",
            stats.depth
        );
        let all = collect(&s, root, &bytewise, true);
        assert_eq!(all.len(), n as usize);
        assert!(all.windows(2).all(|w| w[0].0 < w[1].0));
        let mut back = collect(&s, root, &bytewise, false);
        back.reverse();
        assert_eq!(all, back);
        for (j, i) in (0..n).map(|i| (i * 4001) % n).enumerate() {
            assert_eq!(
                remove(&mut s, root, &bytewise, opts, &key_of(i, 20)).unwrap(),
                Some(value_of(i, 30))
            );
            if j % 500 == 0 {
                check_owned(&s, &[root], &bytewise);
            }
        }
        let stats = check_owned(&s, &[root], &bytewise).remove(0);
        assert_eq!((stats.entries, stats.depth, stats.leaf_pages), (0, 1, 1));
        assert_eq!(
            s.free_set.len() as u32,
            s.next - 2,
            "everything but the root is free"
        );
    }
}

#[test]
fn overflow_values_replace_and_free() {
    let mut s = MemStore::new(512);
    let root = create(&mut s).unwrap();
    let big = value_of(1, 3 * 512 + 17);
    assert_eq!(
        insert(&mut s, root, &bytewise, FWD, b"k", &big).unwrap(),
        None
    );
    let stats = check_owned(&s, &[root], &bytewise).remove(0);
    assert_eq!(stats.overflow_pages, 4); // 1553 bytes / 500 per page
    assert_eq!(get(&s, root, &bytewise, b"k").unwrap(), Some(big.clone()));
    // Replacing returns the old value and frees the old chain.
    let small = value_of(2, 10);
    assert_eq!(
        insert(&mut s, root, &bytewise, FWD, b"k", &small).unwrap(),
        Some(big.clone())
    );
    assert_eq!(check_owned(&s, &[root], &bytewise)[0].overflow_pages, 0);
    insert(&mut s, root, &bytewise, FWD, b"k", &big).unwrap();
    assert_eq!(
        remove(&mut s, root, &bytewise, FWD, b"k").unwrap(),
        Some(big)
    );
    let stats = check_owned(&s, &[root], &bytewise).remove(0);
    assert_eq!((stats.entries, stats.overflow_pages), (0, 0));
    // Boundary: the largest inline value and the smallest overflowing one.
    let inline = cell::max_cell(508) - cell::CELL_HEADER - 1;
    insert(&mut s, root, &bytewise, FWD, b"a", &value_of(3, inline)).unwrap();
    insert(&mut s, root, &bytewise, FWD, b"b", &value_of(4, inline + 1)).unwrap();
    assert_eq!(check_owned(&s, &[root], &bytewise)[0].overflow_pages, 1);
    assert_eq!(
        get(&s, root, &bytewise, b"a").unwrap(),
        Some(value_of(3, inline))
    );
    assert_eq!(
        get(&s, root, &bytewise, b"b").unwrap(),
        Some(value_of(4, inline + 1))
    );
}

#[test]
fn maximum_cells_always_fit() {
    // Every cell as large as a cell can be: inline values filling max_cell, and maximum
    // keys with overflow values, in a scrambled order.
    for ps in [512, 1024, 4096] {
        let mut s = MemStore::new(ps);
        let usable = ps - 4;
        let root = create(&mut s).unwrap();
        let kmax = max_key_len(usable);
        let n = 400u32;
        for i in (0..n).map(|i| (i * 163) % n) {
            let k = key_of(i, kmax - (i as usize % 3));
            let vlen = if i % 2 == 0 {
                cell::max_cell(usable) - cell::CELL_HEADER - k.len()
            } else {
                ps
            };
            insert(&mut s, root, &bytewise, FWD, &k, &value_of(i, vlen)).unwrap();
        }
        assert_eq!(check_owned(&s, &[root], &bytewise)[0].entries, n as u64);
        clear(&mut s, root).unwrap();
        let stats = check_owned(&s, &[root], &bytewise).remove(0);
        assert_eq!((stats.entries, stats.leaf_pages), (0, 1));
    }
}

#[test]
fn clear_and_destroy_free_everything() {
    let mut s = MemStore::new(512);
    let a = create(&mut s).unwrap();
    let b = create(&mut s).unwrap();
    for i in 0..300 {
        insert(
            &mut s,
            a,
            &bytewise,
            FWD,
            &key_of(i, 10),
            &value_of(i, (i as usize * 13) % 1200),
        )
        .unwrap();
        insert(&mut s, b, &bytewise, FWD, &key_of(i, 50), &value_of(i, 8)).unwrap();
    }
    check_owned(&s, &[a, b], &bytewise);
    clear(&mut s, a).unwrap();
    assert_eq!(count(&s, a).unwrap(), 0);
    check_owned(&s, &[a, b], &bytewise);
    insert(&mut s, a, &bytewise, FWD, b"again", b"1").unwrap();
    destroy(&mut s, b).unwrap();
    check_owned(&s, &[a], &bytewise);
    destroy(&mut s, a).unwrap();
    assert_eq!(s.free_set.len() as u32, s.next - 1);
}

#[test]
fn custom_comparator_reverse_order() {
    let mut s = MemStore::new(512);
    let root = create(&mut s).unwrap();
    for i in 0..500u32 {
        insert(&mut s, root, &reverse, FWD, &key_of(i, 8), &value_of(i, 5)).unwrap();
    }
    check_owned(&s, &[root], &reverse);
    // Checking with the wrong comparator must notice the order.
    assert!(matches!(
        check(&s, root, &bytewise, &mut |_| Ok(())),
        Err(Error::Corrupt { .. })
    ));
    let keys: Vec<Vec<u8>> = collect(&s, root, &reverse, true)
        .into_iter()
        .map(|kv| kv.0)
        .collect();
    let expect: Vec<Vec<u8>> = (0..500u32).rev().map(|i| key_of(i, 8)).collect();
    assert_eq!(keys, expect);
    let mut c = Cursor::new(&s, root, &reverse);
    // seek: first key >= k in reverse order, i.e. the largest key bytewise <= k.
    assert!(c.seek(&key_of(100, 9)).unwrap());
    assert_eq!(c.key(), key_of(100, 8));
    assert!(c.seek_le(&key_of(100, 9)).unwrap());
    assert_eq!(c.key(), key_of(101, 8));
    for i in (0..500u32).step_by(2) {
        assert_eq!(
            remove(&mut s, root, &reverse, FWD, &key_of(i, 8)).unwrap(),
            Some(value_of(i, 5))
        );
    }
    assert_eq!(check_owned(&s, &[root], &reverse)[0].entries, 250);
}

/// A tree over several levels, for corruption tests: returns the store, root, the keys
/// and one leaf page with the key it holds.
fn sample_tree() -> (MemStore, Pgno, Vec<Vec<u8>>) {
    let mut s = MemStore::new(512);
    let root = create(&mut s).unwrap();
    let keys: Vec<Vec<u8>> = (0..200).map(|i| key_of(i, 12)).collect();
    for (i, k) in keys.iter().enumerate() {
        insert(
            &mut s,
            root,
            &bytewise,
            FWD,
            k,
            &value_of(i as u32, if i % 17 == 0 { 900 } else { 20 }),
        )
        .unwrap();
    }
    (s, root, keys)
}

fn leaf_holding(s: &MemStore, root: Pgno, key: &[u8]) -> Pgno {
    let path = super::btree::descend(s, root, &bytewise, key).unwrap();
    path.last().unwrap().pgno
}

#[test]
fn corrupt_cell_offset_is_reported() {
    let (mut s, root, keys) = sample_tree();
    let leaf = leaf_holding(&s, root, &keys[100]);
    assert_ne!(leaf, root);
    let first_key = {
        let page = s.read(leaf).unwrap();
        slotted::Page::open(leaf, &page, 508)
            .unwrap()
            .inline_key(0)
            .unwrap()
            .to_vec()
    };
    // Point the first cell at the last usable byte: its header runs past the page.
    s.poke(leaf, |b| b[12..14].copy_from_slice(&507u16.to_le_bytes()));
    let corrupt_here = |r: Result<()>| match r {
        Err(Error::Corrupt { pgno, reason }) => {
            assert_eq!(pgno, leaf, "{reason}");
        }
        other => panic!("expected Corrupt on page {leaf}, got {other:?}"),
    };
    corrupt_here(get(&s, root, &bytewise, &first_key).map(|_| ()));
    corrupt_here(check(&s, root, &bytewise, &mut |_| Ok(())).map(|_| ()));
    let mut c = Cursor::new(&s, root, &bytewise);
    corrupt_here((|| {
        let mut ok = c.first()?;
        while ok {
            ok = c.next()?;
        }
        Ok(())
    })());
    // Overlapping cells: in bounds each, but check sees the overlap.
    let (mut s, root, keys) = sample_tree();
    let leaf = leaf_holding(&s, root, &keys[100]);
    s.poke(leaf, |b| {
        let second = [b[14], b[15]];
        b[12..14].copy_from_slice(&second);
    });
    let e = check(&s, root, &bytewise, &mut |_| Ok(())).unwrap_err();
    assert!(
        matches!(&e, Error::Corrupt { pgno, .. } if *pgno == leaf),
        "{e}"
    );
    // A leaf with a cell out of key order.
    let (mut s, root, keys) = sample_tree();
    let leaf = leaf_holding(&s, root, &keys[100]);
    s.poke(leaf, |b| {
        let (x, y) = ([b[12], b[13]], [b[14], b[15]]);
        b[12..14].copy_from_slice(&y);
        b[14..16].copy_from_slice(&x);
    });
    let e = check(&s, root, &bytewise, &mut |_| Ok(())).unwrap_err();
    assert!(e.to_string().contains("out of order"), "{e}");
}

#[test]
fn corrupt_overflow_chain_is_reported() {
    let (mut s, root, keys) = sample_tree();
    // keys[0] has a 900-byte value: two overflow pages.
    let leaf = leaf_holding(&s, root, &keys[0]);
    let page = s.read(leaf).unwrap();
    let p = slotted::Page::open(leaf, &page, 508).unwrap();
    let i = p.search(&keys[0], &bytewise).unwrap().unwrap();
    let cell::Payload::Overflow { first, .. } = p.payload(i).unwrap() else {
        panic!("not overflow")
    };
    s.poke(first, |b| b[4..8].copy_from_slice(&0u32.to_le_bytes())); // cut the chain short
    let e = get(&s, root, &bytewise, &keys[0]).unwrap_err();
    assert!(e.to_string().contains("ends after 1 of 2 pages"), "{e}");
    assert!(check(&s, root, &bytewise, &mut |_| Ok(())).is_err());
    s.poke(first, |b| b[4..8].copy_from_slice(&first.to_le_bytes())); // a cycle
    assert!(get(&s, root, &bytewise, &keys[0])
        .unwrap_err()
        .to_string()
        .contains("loops"));
}

// ---------------------------------------------------------------------------------------
// Model-based property tests.

/// Model key ordered like the tree's comparator.
#[derive(Clone, Debug, PartialEq, Eq)]
struct MKey {
    k: Vec<u8>,
    order: u8,
}
impl Ord for MKey {
    fn cmp(&self, o: &Self) -> Ordering {
        order_fn(self.order)(&self.k, &o.k)
    }
}

/// The scenario's comparator: 0 bytewise, 1 reverse, 2 [`by_end`].
fn order_fn(order: u8) -> &'static CmpFn {
    match order {
        0 => &bytewise,
        1 => &reverse,
        _ => &by_end,
    }
}
impl PartialOrd for MKey {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

#[derive(Clone, Debug)]
enum Op {
    Insert(usize, usize),
    Remove(usize),
    Get(usize),
    /// Position with seek (or seek_le), first or last, then move: true = next.
    Walk {
        at: usize,
        how: u8,
        moves: Vec<bool>,
    },
    Count,
}

#[derive(Clone, Debug)]
struct Scenario {
    page_size: usize,
    redistribute: bool,
    order: u8,
    keys: Vec<Vec<u8>>,
    ops: Vec<Op>,
    end: u8,
}

pub(super) fn xorshift_bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // A small alphabet makes shared prefixes (and thus close keys) common.
            b'a' + (x % 4) as u8
        })
        .collect()
}

/// A test key of `len` bytes from `seed`. Every third seed gives a key whose first
/// `min(len, kmax)` bytes are the same filler for all such keys, so long keys that differ
/// only past the inline limit (and so past their in-cell prefix) are common.
pub(super) fn test_key(seed: u64, len: usize, kmax: usize) -> Vec<u8> {
    let mut k = xorshift_bytes(seed, len);
    if seed % 3 == 0 {
        let shared = len.min(kmax);
        k[..shared].fill(b'p');
    }
    k
}

/// Key lengths: short, up to and at the inline limit, and long (up to 3x the limit).
pub(super) fn key_len(kmax: usize) -> impl Strategy<Value = usize> {
    prop_oneof![
        3 => 0..=kmax,
        1 => Just(kmax),
        1 => Just(kmax + 1),
        1 => 0..8usize,
        3 => kmax + 1..=3 * kmax,
    ]
}

fn scenario() -> impl Strategy<Value = Scenario> {
    (
        prop_oneof![Just(512usize), Just(4096)],
        any::<bool>(),
        0..3u8,
    )
        .prop_flat_map(|(page_size, redistribute, order)| {
            let usable = page_size - 4;
            let kmax = max_key_len(usable);
            let cell = cell::max_cell(usable);
            let key = (key_len(kmax), any::<u64>())
                .prop_map(move |(len, seed)| test_key(seed, len, kmax));
            let nk = 160;
            let idx = 0..nk;
            let vlen = prop_oneof![6 => 0..40usize, 3 => 0..=cell, 1 => 0..3 * page_size];
            let op = prop_oneof![
                10 => (idx.clone(), vlen).prop_map(|(k, v)| Op::Insert(k, v)),
                6 => idx.clone().prop_map(Op::Remove),
                2 => idx.clone().prop_map(Op::Get),
                2 => (idx, 0..4u8, proptest::collection::vec(any::<bool>(), 0..40))
                    .prop_map(|(at, how, moves)| Op::Walk { at, how, moves }),
                1 => Just(Op::Count),
            ];
            (
                proptest::collection::vec(key, nk),
                proptest::collection::vec(op, 1..800),
                0..3u8,
            )
                .prop_map(move |(keys, ops, end)| Scenario {
                    page_size,
                    redistribute,
                    order,
                    keys,
                    ops,
                    end,
                })
        })
}

fn run(sc: &Scenario) {
    let cmp: &CmpFn = order_fn(sc.order);
    let opts = TreeOptions {
        redistribute: sc.redistribute,
    };
    let mk = |k: &[u8]| MKey {
        k: k.to_vec(),
        order: sc.order,
    };
    let mut s = MemStore::new(sc.page_size);
    let root = create(&mut s).unwrap();
    let mut model: BTreeMap<MKey, Vec<u8>> = BTreeMap::new();
    for (n, op) in sc.ops.iter().enumerate() {
        if n % 100 == 99 {
            check_owned(&s, &[root], cmp);
        }
        match op {
            Op::Insert(k, vlen) => {
                let key = &sc.keys[*k];
                let v = value_of(n as u32, *vlen);
                let old = insert(&mut s, root, cmp, opts, key, &v).unwrap();
                assert_eq!(old, model.insert(mk(key), v), "insert #{n}");
            }
            Op::Remove(k) => {
                let key = &sc.keys[*k];
                assert_eq!(
                    remove(&mut s, root, cmp, opts, key).unwrap(),
                    model.remove(&mk(key)),
                    "remove #{n}"
                );
            }
            Op::Get(k) => {
                let key = &sc.keys[*k];
                assert_eq!(
                    get(&s, root, cmp, key).unwrap().as_ref(),
                    model.get(&mk(key)),
                    "get #{n}"
                );
            }
            Op::Count => assert_eq!(count(&s, root).unwrap(), model.len() as u64),
            Op::Walk { at, how, moves } => {
                let entries: Vec<(&MKey, &Vec<u8>)> = model.iter().collect();
                let key = mk(&sc.keys[*at]);
                let mut c = Cursor::new(&s, root, cmp);
                // Model position as an index into `entries` (None = invalid).
                let (ok, mut pos) = match how {
                    0 => (
                        c.seek(&key.k).unwrap(),
                        entries.iter().position(|e| *e.0 >= key),
                    ),
                    1 => (
                        c.seek_le(&key.k).unwrap(),
                        entries.iter().rposition(|e| *e.0 <= key),
                    ),
                    2 => (c.first().unwrap(), (!entries.is_empty()).then_some(0)),
                    _ => (c.last().unwrap(), entries.len().checked_sub(1)),
                };
                assert_eq!(ok, pos.is_some(), "walk #{n} positioning {how}");
                for &fwd in moves {
                    if let Some(p) = pos {
                        assert_eq!(c.key(), &entries[p].0.k[..], "walk #{n}");
                        assert_eq!(&c.value().unwrap(), entries[p].1, "walk #{n}");
                    }
                    let ok = if fwd { c.next() } else { c.prev() }.unwrap();
                    pos = match pos {
                        Some(p) if fwd => (p + 1 < entries.len()).then_some(p + 1),
                        Some(p) => p.checked_sub(1),
                        None => None,
                    };
                    assert_eq!(ok, pos.is_some(), "walk #{n} step");
                    assert_eq!(c.valid(), pos.is_some());
                }
            }
        }
    }
    let stats = check_owned(&s, &[root], cmp).remove(0);
    assert_eq!(stats.entries, model.len() as u64);
    let all = collect(&s, root, cmp, true);
    let expect: Vec<(Vec<u8>, Vec<u8>)> = model
        .iter()
        .map(|(k, v)| (k.k.clone(), v.clone()))
        .collect();
    assert_eq!(all, expect);
    match sc.end {
        0 => {
            clear(&mut s, root).unwrap();
            let stats = check_owned(&s, &[root], cmp).remove(0);
            assert_eq!((stats.entries, stats.leaf_pages, stats.depth), (0, 1, 1));
        }
        1 => {
            destroy(&mut s, root).unwrap();
            assert_eq!(s.free_set.len() as u32, s.next - 1);
        }
        _ => {
            // Removing everything must shrink the tree back to a lone root leaf.
            for k in model.keys() {
                assert!(remove(&mut s, root, cmp, opts, &k.k).unwrap().is_some());
            }
            let stats = check_owned(&s, &[root], cmp).remove(0);
            assert_eq!((stats.entries, stats.leaf_pages, stats.depth), (0, 1, 1));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn prop_tree_matches_model(sc in scenario()) {
        run(&sc);
    }

    /// Random byte damage to random pages of a tree: every operation may fail, but only
    /// with an error, never a panic.
    #[test]
    fn prop_corruption_never_panics(
        damage in proptest::collection::vec((any::<u32>(), any::<u16>(), any::<u8>()), 1..6),
        redistribute in any::<bool>(),
    ) {
        let (mut s, root, keys) = sample_tree();
        let opts = TreeOptions { redistribute };
        let pages: Vec<Pgno> = {
            let mut v: Vec<Pgno> = s.pages.keys().copied().collect();
            v.sort_unstable();
            v
        };
        for (p, off, byte) in damage {
            let pgno = pages[p as usize % pages.len()];
            // Damage the header and pointer area most of the time: it is the interesting part.
            let at = if off % 2 == 0 { off as usize % 40 } else { off as usize % 508 };
            s.poke(pgno, |b| b[at] ^= byte | 1);
        }
        s.strict = false;
        let _ = check(&s, root, &bytewise, &mut |_| Ok(()));
        let _ = count(&s, root);
        for k in keys.iter().step_by(7) {
            let _ = get(&s, root, &bytewise, k);
            let mut c = Cursor::new(&s, root, &bytewise);
            if let Ok(true) = c.seek(k) {
                let _ = c.value();
                for _ in 0..50 {
                    match c.prev() {
                        Ok(true) => { let _ = c.key(); }
                        _ => break,
                    }
                }
            }
        }
        let mut c = Cursor::new(&s, root, &bytewise);
        let mut ok = c.last();
        while let Ok(true) = ok {
            ok = c.prev();
        }
        for (i, k) in keys.iter().enumerate().step_by(3) {
            let _ = insert(&mut s, root, &bytewise, opts, k, &value_of(i as u32, i * 5));
            let _ = remove(&mut s, root, &bytewise, opts, &keys[(i * 11) % keys.len()]);
        }
        let _ = clear(&mut s, root);
    }
}

/// A long key's tail chain is checked like a value's: a leaf's and a separator's chain
/// cut short or looping is reported by `check` and by the reads that need the key.
#[test]
fn corrupt_key_tail_chain_is_reported() {
    let mut s = MemStore::new(512);
    let root = create(&mut s).unwrap();
    // 1200-byte keys: a 14-byte prefix in the cell, a tail of three overflow pages.
    let keys: Vec<Vec<u8>> = (0..40u32).map(|i| key_of(i, 1200)).collect();
    for k in &keys {
        insert(&mut s, root, &bytewise, FWD, k, b"v").unwrap();
    }
    let stats = check_owned(&s, &[root], &bytewise).remove(0);
    assert!(
        stats.depth > 1 && stats.overflow_pages >= 3 * 40,
        "{stats:?}"
    );
    let tail_of = |s: &MemStore, pgno: Pgno, i: usize| {
        let page = s.read(pgno).unwrap();
        let p = slotted::Page::open(pgno, &page, 508).unwrap();
        p.key(i).unwrap().tail().expect("a long key").1
    };
    // A leaf key's chain, cut after its first page.
    let leaf = leaf_holding(&s, root, &keys[7]);
    let first = tail_of(&s, leaf, 0);
    let saved = s.read(first).unwrap().to_vec();
    s.poke(first, |b| b[4..8].copy_from_slice(&0u32.to_le_bytes()));
    let e = check(&s, root, &bytewise, &mut |_| Ok(())).unwrap_err();
    assert!(e.to_string().contains("ends after 1 of"), "{e}");
    s.poke(first, |b| b[4..8].copy_from_slice(&first.to_le_bytes()));
    let e = check(&s, root, &bytewise, &mut |_| Ok(())).unwrap_err();
    assert!(e.to_string().contains("loops"), "{e}");
    s.poke(first, |b| b.copy_from_slice(&saved));
    check_owned(&s, &[root], &bytewise);
    // A separator's chain (the root is interior): its own copy, checked too.
    let sep_first = tail_of(&s, root, 0);
    assert_ne!(sep_first, first);
    s.poke(sep_first, |b| b[4..8].copy_from_slice(&0u32.to_le_bytes()));
    let e = check(&s, root, &bytewise, &mut |_| Ok(())).unwrap_err();
    assert!(e.to_string().contains("ends after 1 of"), "{e}");
    assert!(get(&s, root, &bytewise, &keys[20]).is_err());
}

/// Where a seek-or-last lands: on the entry a plain seek finds (`want_key`), else, past
/// every key, on the tree's last entry.
fn seek_or_last_lands(
    want_key: &Option<Vec<u8>>,
    last: Option<&Vec<u8>>,
) -> (cursor::SeekEnd, Option<Vec<u8>>) {
    match want_key {
        Some(w) => (cursor::SeekEnd::At, Some(w.clone())),
        None => (cursor::SeekEnd::Last, last.cloned()),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// A bytewise seek (`RawCursor::seek_bytes`, word compares for 8-byte keys), and one
    /// that reuses the kept path of the previous seek, land where a probe seek does, for
    /// keys of every length — 8-byte ones, others, and long keys whose tail is in a chain.
    #[test]
    fn prop_bytewise_and_kept_seeks_match_probe_seeks(
        keys in proptest::collection::btree_set(
            prop_oneof![
                4 => proptest::collection::vec(any::<u8>(), 8..=8),
                2 => proptest::collection::vec(any::<u8>(), 0..20),
                1 => proptest::collection::vec(any::<u8>(), 100..300),
            ],
            1..300,
        ),
        targets in proptest::collection::vec(
            prop_oneof![
                proptest::collection::vec(any::<u8>(), 8..=8),
                proptest::collection::vec(any::<u8>(), 0..300),
            ],
            1..40,
        ),
        pick in proptest::collection::vec(any::<prop::sample::Index>(), 0..40),
    ) {
        let mut s = MemStore::new(512);
        let root = create(&mut s).unwrap();
        let keys: Vec<Vec<u8>> = keys.into_iter().collect();
        for (i, k) in keys.iter().enumerate() {
            insert(&mut s, root, &bytewise, FWD, k, &value_of(i as u32, 3)).unwrap();
        }
        // Targets: random bytes, and keys of the tree (exact hits), interleaved.
        let mut all: Vec<Vec<u8>> = targets;
        all.extend(pick.iter().map(|ix| keys[ix.index(keys.len())].clone()));
        let mut kept = cursor::RawCursor::new(&s, root);
        for (n, t) in all.iter().enumerate() {
            let mut fresh = cursor::RawCursor::new(&s, root);
            let want = fresh.seek_by(&s, &mut |k: &[u8]| k.cmp(t)).unwrap();
            let want_key = want.then(|| fresh.key().to_vec());
            // Alternate the kept cursor between the probe and the bytewise search.
            let got = if n % 2 == 0 {
                kept.seek_bytes(&s, t, true).unwrap()
            } else {
                kept.seek_by_kept(&s, &mut |k: &[u8]| k.cmp(t)).unwrap()
            };
            prop_assert_eq!(got, want, "target {:?}", t);
            prop_assert_eq!(got.then(|| kept.key().to_vec()), want_key.clone());
            let mut once = cursor::RawCursor::new(&s, root);
            let got = once.seek_bytes(&s, t, false).unwrap();
            prop_assert_eq!(got.then(|| once.key().to_vec()), want_key.clone());
            // Seek-or-last: the same entry, or the tree's last one past every key.
            let last_key = keys.last().cloned();
            let mut ol = cursor::RawCursor::new(&s, root);
            let end = if n % 2 == 0 {
                ol.seek_bytes_or_last(&s, t, false).unwrap()
            } else {
                ol.seek_by_or_last(&s, &mut |k: &[u8]| k.cmp(t), false).unwrap()
            };
            prop_assert_eq!(
                (end, Some(ol.key().to_vec())),
                seek_or_last_lands(&want_key, last_key.as_ref())
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// Seeks near each other from a kept path (an `IN` list, a join's inner loop) may end
    /// in the leaf the previous one reached without descending (`target_inside_leaf`):
    /// they land where a fresh seek does, also under a probe that finds many keys Equal
    /// (an index probe on fewer fields than the key holds, equal runs across leaves),
    /// and seek-or-last past every key.
    #[test]
    fn prop_sorted_kept_seeks_match_fresh_seeks(
        keys in proptest::collection::btree_set(
            proptest::collection::vec(0u8..4, 1..7),
            1..400,
        ),
        targets in proptest::collection::vec(proptest::collection::vec(0u8..5, 0..5), 1..80),
        fields in 1usize..5,
    ) {
        let mut s = MemStore::new(512);
        let root = create(&mut s).unwrap();
        for (i, k) in keys.iter().enumerate() {
            insert(&mut s, root, &bytewise, FWD, k, &value_of(i as u32, 3)).unwrap();
        }
        // In order, then back down again (each seek near the last, in either direction).
        let mut targets = targets;
        targets.sort();
        let down: Vec<Vec<u8>> = targets.iter().rev().cloned().collect();
        targets.extend(down);
        // Order by the first `fields` bytes only: coarser than the tree's memcmp order.
        let coarse = |k: &[u8], t: &[u8]| k[..k.len().min(fields)].cmp(&t[..t.len().min(fields)]);
        let mut kept = cursor::RawCursor::new(&s, root);
        let mut kept_or_last = cursor::RawCursor::new(&s, root);
        for t in &targets {
            let mut fresh = cursor::RawCursor::new(&s, root);
            let want = fresh.seek_by(&s, &mut |k: &[u8]| coarse(k, t)).unwrap();
            let want_key = want.then(|| fresh.key().to_vec());
            let got = kept.seek_by_kept(&s, &mut |k: &[u8]| coarse(k, t)).unwrap();
            prop_assert_eq!(got.then(|| kept.key().to_vec()), want_key.clone(), "target {:?}", t);
            let end = kept_or_last
                .seek_by_or_last(&s, &mut |k: &[u8]| coarse(k, t), true)
                .unwrap();
            prop_assert_eq!(
                (end, Some(kept_or_last.key().to_vec())),
                seek_or_last_lands(&want_key, keys.last())
            );
        }
    }
}

/// The parent patch's feared bug, planted: a split's child pointer set by its index
/// before the new separator went in. The same random inserts that leave a sound tree
/// without it must fail the ownership and content checks with it.
#[test]
fn a_parent_patch_pointing_the_wrong_child_is_caught() {
    use crate::seam::{plant, Plant};
    let run = || {
        let mut s = MemStore::new(1024);
        let root = create(&mut s).unwrap();
        let mut model = BTreeMap::new();
        let mut x = 0x2545_F491u32;
        for _ in 0..1500 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            let (k, v) = (key_of(x % 100_000, 8), value_of(x, 40));
            insert(&mut s, root, &bytewise, FWD, &k, &v).unwrap();
            model.insert(k, v);
        }
        check_owned(&s, &[root], &bytewise);
        assert_eq!(
            collect(&s, root, &bytewise, true),
            model.into_iter().collect::<Vec<_>>()
        );
    };
    run();
    plant(Plant::ParentPatchChildBeforeCell, true);
    let caught = std::panic::catch_unwind(run).is_err();
    plant(Plant::ParentPatchChildBeforeCell, false);
    assert!(
        caught,
        "a parent patch pointing the wrong child went unnoticed"
    );
}
