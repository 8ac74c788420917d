//! Unit tests of the DHL page: layout limits, validation of damaged pages, torn writes
//! of every sector mix, placement policy (reuse of garbage, the reserve), restamping, and
//! proptests comparing the production code with the oracle in `reference.rs`.
//!
//! Invariant: no test here derives its expected value from the code under test; the
//! expectations come from the format rules, hand-built images or the oracle.

use super::build::*;
use super::overflow::*;
use super::reference;
use super::*;
use crate::page::cell::{
    interior_cell, interior_from_key_part, leaf_cell_inline, leaf_cell_overflow, CELL_HEADER,
};
use crate::page::slotted;
use crate::page::strategies::{self, ed, rec, st};
use proptest::prelude::*;
use std::cmp::Ordering;

const PS: usize = 4096;
const US: usize = 4092;
const SECTOR: usize = 512;

fn cmp(a: &[u8], b: &[u8]) -> Ordering {
    a.cmp(b)
}

fn ver(tid: u64, leaf: bool, right: Pgno, cells: &[Vec<u8>]) -> Version<'_> {
    Version {
        tid,
        txn_size: (tid as u32).wrapping_add(7),
        leaf,
        right,
        cells,
    }
}

fn cost(cells: &[Vec<u8>]) -> usize {
    cells.iter().map(|c| cell_cost(c.len())).sum()
}

/// (tid, leaf, right, cells) of a valid slot, for comparing versions across images.
type Content = (u64, bool, Pgno, Vec<Vec<u8>>);

fn content(buf: &[u8], usable: usize, slot: usize) -> Option<Content> {
    let v = Dhl::open_slot(1, buf, usable, slot).ok()?;
    Some((v.tid(), v.is_leaf(), v.right_child(), v.cells().unwrap()))
}

fn visible_cells(buf: &[u8], usable: usize, max_tid: u64) -> Vec<Vec<u8>> {
    Dhl::visible(1, buf, usable, max_tid)
        .unwrap()
        .cells()
        .unwrap()
}

/// Any well-formed cell of the given kind for `usable` (inline, overflow or interior).
fn arb_cell(leaf: bool, usable: usize) -> impl Strategy<Value = Vec<u8>> {
    strategies::arb_cell(leaf, usable, 40)
}

/// Cells of one kind whose total cost is at most `budget` (a prefix of a random list).
fn arb_cells(leaf: bool, usable: usize, budget: usize) -> impl Strategy<Value = Vec<Vec<u8>>> {
    strategies::arb_cells(arb_cell(leaf, usable), 300, budget, cell_cost)
}

/// One-cell change: (kind 0 insert / 1 replace / 2 remove, position seed, new cell).
fn apply(cells: &[Vec<u8>], kind: u8, pos: usize, cell: Vec<u8>) -> Vec<Vec<u8>> {
    let mut out = cells.to_vec();
    match (kind, out.is_empty()) {
        (0, _) | (_, true) => out.insert(pos % (out.len() + 1), cell),
        (1, false) => {
            let i = pos % out.len();
            out[i] = cell;
        }
        _ => {
            out.remove(pos % cells.len());
        }
    }
    out
}

/// Recompute the crc of `slot` after a test tampered with it, so that structural
/// checks, not the crc, have to reject the tampering.
fn recrc(buf: &mut [u8], usable: usize, slot: usize) {
    let d = slot * DESC_SIZE;
    let leaf = buf[d + D_TYPE] == page_type::LEAF;
    let n = get_u16(buf, d + D_NCELLS);
    let a = get_u16(buf, d + D_ARRAY);
    let a_end = (a + 2 * n).min(usable);
    let cells: Vec<(usize, usize)> = (0..n)
        .filter(|i| a + 2 * i + 2 <= usable)
        .map(|i| get_u16(buf, a + 2 * i))
        .filter(|&off| (RECORD_START..usable).contains(&off))
        .filter_map(|off| cell_size(leaf, usable, &buf[off..usable]).map(|s| (off, s)))
        .collect();
    let crc = version_crc(1, buf, slot, (a.min(a_end), a_end), cells.into_iter());
    buf[d + D_CRC..d + D_CRC + 4].copy_from_slice(&crc.to_le_bytes());
}

#[test]
fn layout_and_limits() {
    assert_eq!(max_cell(US), 1018);
    assert_eq!(reserve_cell(US), 255);
    assert_eq!(capacity(US), 4028 - 255 - 4);
    assert_eq!(reserve_cell(508), 31);
    assert_eq!(capacity(508), 444 - 31 - 4);
    assert!(capacity(65532) > 0);
    let cells = vec![interior_cell(9, b"m")];
    let buf = build(3, PS, US, None, 0, &ver(0x0102, false, 77, &cells))
        .unwrap()
        .unwrap();
    assert_eq!(buf.len(), PS);
    assert_eq!(get_u64(&buf, 0), 0x0102);
    assert_eq!(get_u32(&buf, 8), 0x0102 + 7);
    assert_eq!(get_u16(&buf, 12), 1);
    assert_eq!(buf[14], page_type::INTERIOR);
    assert_eq!(buf[15], 0);
    assert_eq!(get_u32(&buf, 16), 77);
    assert_eq!(get_u16(&buf, 20), RECORD_START);
    assert_eq!(&buf[22..28], &[0; 6]);
    assert!(buf[32..64].iter().all(|&b| b == 0), "slot 1 INV");
    // The single cell sits at the top of the usable area; the trailer is untouched.
    assert_eq!(get_u16(&buf, 64), US - 7);
    assert!(buf[US..].iter().all(|&b| b == 0));
    let v = Dhl::visible(3, &buf, US, u64::MAX).unwrap();
    assert_eq!((v.slot(), v.ncells(), v.array_off()), (0, 1, RECORD_START));
    assert_eq!((v.child(0).unwrap(), v.child(1).unwrap()), (9, 77));
    assert_eq!(v.child_index(b"m", &cmp).unwrap(), 1);
    assert_eq!(v.child_index(b"a", &cmp).unwrap(), 0);
    assert!(v.payload(0).is_err());
    assert!(v.cell(1).is_err());
    // Not visible to snapshots older than its tid.
    assert!(Dhl::visible(3, &buf, US, 0x0101).is_err());
    assert_eq!(v.used(), cell_cost(7));
}

#[test]
fn leaf_accessors_match_slotted() {
    let cells = vec![
        leaf_cell_inline(b"a", b"1"),
        leaf_cell_overflow(b"b", 9000, 42),
        leaf_cell_inline(b"d", b"4"),
    ];
    let buf = build(1, PS, US, None, 0, &ver(5, true, 99, &cells))
        .unwrap()
        .unwrap();
    let v = Dhl::visible(1, &buf, US, 5).unwrap();
    let s = slotted::build(PS, US, true, &cells, 0);
    let s = slotted::Page::open(1, &s, US).unwrap();
    assert_eq!(v.right_child(), 0, "leaves store no right child");
    for i in 0..3 {
        assert_eq!(v.cell(i).unwrap(), s.cell(i).unwrap());
        assert_eq!(v.key(i).unwrap(), s.key(i).unwrap());
        assert_eq!(v.payload(i).unwrap(), s.payload(i).unwrap());
    }
    for k in [&b"a"[..], b"b", b"c", b"d", b"e", b""] {
        assert_eq!(v.search(k, &cmp).unwrap(), s.search(k, &cmp).unwrap());
    }
    assert!(v.child(0).is_err());
}

#[test]
fn build_rejects_bad_arguments() {
    let good = vec![rec(1, 20)];
    let bad_leaf = vec![vec![1, 0, 0, 0, 0, 0]]; // klen 1 but no key byte
    assert!(build(1, PS, US, None, 0, &ver(0, true, 0, &good)).is_err());
    assert!(build(1, PS, US, None, 0, &ver(1, true, 0, &bad_leaf)).is_err());
    assert!(build(1, PS, 10, None, 0, &ver(1, true, 0, &good)).is_err());
    assert!(build(1, 100_000, 70_000, None, 0, &ver(1, true, 0, &good)).is_err());
    assert!(build(1, PS, US, Some(&[0u8; 100]), 0, &ver(1, true, 0, &good)).is_err());
    let too_big = vec![leaf_cell_inline(b"k", &[0; 2000])]; // must be an overflow cell
    assert!(build(1, PS, US, None, 0, &ver(1, true, 0, &too_big)).is_err());
    // A version older than the protected one would be hidden behind it.
    let base = build(1, PS, US, None, 0, &ver(5, true, 0, &good))
        .unwrap()
        .unwrap();
    assert!(build(1, PS, US, Some(&base), 5, &ver(4, true, 0, &good)).is_err());
    // Too many bytes for a fresh page: None, not an error.
    let many: Vec<_> = (0..5).map(|k| rec(k, 1000)).collect();
    assert_eq!(
        build(1, PS, US, None, 0, &ver(1, true, 0, &many)).unwrap(),
        None
    );
    // Bad geometry gives a page nobody can read rather than a panic.
    assert!(empty_leaf(PS, 10, 1).iter().all(|&b| b == 0));
    let e = empty_leaf(PS, US, 3);
    let v = Dhl::visible(1, &e, US, 3).unwrap();
    assert!(v.is_leaf() && v.ncells() == 0 && v.tid() == 3);
}

#[test]
fn emptying_a_page_whose_version_fills_the_record_area() {
    // 4 cells of 109 bytes + their array fill all 444 record bytes of a 512-byte page.
    let cells: Vec<_> = (0..4).map(|k| rec(k, 109)).collect();
    let p = build(1, 512, 508, None, 0, &ver(1, true, 0, &cells))
        .unwrap()
        .unwrap();
    assert!(Dhl::visible(1, &p, 508, 1)
        .unwrap()
        .free_holes()
        .unwrap()
        .is_empty());
    let n = build(1, 512, 508, Some(&p), 1, &ver(2, true, 0, &[]))
        .unwrap()
        .unwrap();
    assert_eq!(visible_cells(&n, 508, 1), cells);
    assert_eq!(Dhl::visible(1, &n, 508, 2).unwrap().ncells(), 0);
    let one = vec![rec(9, 10)];
    assert_eq!(
        build(1, 512, 508, Some(&p), 1, &ver(2, true, 0, &one)).unwrap(),
        None
    );
}

#[test]
fn structural_checks_do_not_rely_on_the_crc() {
    let cells: Vec<_> = (0..4).map(|k| rec(k, 30)).collect();
    let good = build(1, PS, US, None, 0, &ver(2, true, 0, &cells))
        .unwrap()
        .unwrap();
    let tamper = |f: &dyn Fn(&mut Vec<u8>)| {
        let mut b = good.clone();
        f(&mut b);
        recrc(&mut b, US, 0);
        Dhl::check_slot(1, &b, US, 0).err()
    };
    assert!(tamper(&|_| {}).is_none(), "recrc alone keeps it valid");
    let second = get_u16(&good, RECORD_START + 2);
    let e = tamper(&|b| {
        b[RECORD_START..RECORD_START + 2].copy_from_slice(&(second as u16).to_le_bytes())
    });
    assert!(e.unwrap().contains("overlap"));
    let e = tamper(&|b| {
        b[RECORD_START..RECORD_START + 2].copy_from_slice(&(RECORD_START as u16 + 2).to_le_bytes())
    });
    assert!(e.is_some(), "a cell inside the array");
    let e = tamper(&|b| b[D_ARRAY..D_ARRAY + 2].copy_from_slice(&(US as u16 - 4).to_le_bytes()));
    assert!(e.unwrap().contains("outside the record area"));
    let e = tamper(&|b| b[D_ARRAY..D_ARRAY + 2].copy_from_slice(&10u16.to_le_bytes()));
    assert!(e.unwrap().contains("outside the record area"));
    assert!(tamper(&|b| b[D_TYPE] = page_type::OVERFLOW).is_some());
    assert!(
        tamper(&|b| b[D_RIGHT] = 1).is_some(),
        "leaf with a right child"
    );
    let e = tamper(&|b| {
        b[RECORD_START..RECORD_START + 2].copy_from_slice(&(US as u16 - 3).to_le_bytes())
    });
    assert!(e.unwrap().contains("malformed"));
    // And the crc catches what is structurally fine.
    let mut b = good.clone();
    let last = get_u16(&b, RECORD_START + 6);
    b[last + 12] ^= 1;
    assert!(Dhl::check_slot(1, &b, US, 0).unwrap_err().contains("crc"));
}

#[test]
fn descriptors_and_invalidate() {
    let c1 = vec![rec(1, 40)];
    let p = build(1, PS, US, None, 0, &ver(4, true, 0, &c1))
        .unwrap()
        .unwrap();
    let c2 = vec![rec(1, 40), rec(2, 40)];
    let mut n = build(1, PS, US, Some(&p), 4, &ver(5, true, 0, &c2))
        .unwrap()
        .unwrap();
    let d = descriptors(1, &n, US);
    assert_eq!(
        d[0],
        Some(DescInfo {
            slot: 0,
            tid: 4,
            txn_size: 11,
            valid: true
        })
    );
    assert_eq!(
        d[1],
        Some(DescInfo {
            slot: 1,
            tid: 5,
            txn_size: 12,
            valid: true
        })
    );
    // A torn descriptor is reported, but not valid.
    let mut torn = n.clone();
    torn[US - 1] ^= 0xff;
    assert_eq!(descriptors(1, &torn, US)[1].map(|d| d.valid), Some(false));
    assert!(!invalidate(&mut n, 9));
    assert!(!invalidate(&mut n, 0));
    let before = n.clone();
    assert!(invalidate(&mut n, 5));
    assert!(!invalidate(&mut n, 5), "idempotent");
    assert_eq!(descriptors(1, &n, US)[1], None);
    assert_eq!(visible_cells(&n, US, u64::MAX), c1);
    let changed: Vec<usize> = (0..PS).filter(|&i| n[i] != before[i]).collect();
    assert!(
        changed.iter().all(|&i| (32..40).contains(&i)),
        "only the tid changed"
    );
    assert_eq!(descriptors(1, &[0u8; 10], US), [None, None]);
}

/// (old image, new image, P's cells, N's cells).
type History = (Vec<u8>, Vec<u8>, Vec<Vec<u8>>, Vec<Vec<u8>>);

/// Base where slot P holds tid 2 (committed) and the other slot tid 1 (older), from a
/// random history, and a new version with tid 3 built on it.
fn history(
    usable: usize,
    leaf: bool,
    v1: &[Vec<u8>],
    ops: &[(u8, usize, Vec<u8>)],
) -> Option<History> {
    let ps = usable + 4;
    let b1 = build(1, ps, usable, None, 0, &ver(1, leaf, 8, v1)).unwrap()?;
    let (half, rest) = ops.split_at(ops.len() / 2);
    let mut v2 = v1.to_vec();
    for (k, p, c) in half {
        v2 = apply(&v2, *k, *p, c.clone());
    }
    let b2 = build(1, ps, usable, Some(&b1), 1, &ver(2, leaf, 9, &v2)).unwrap()?;
    let mut v3 = v2.clone();
    for (k, p, c) in rest {
        v3 = apply(&v3, *k, *p, c.clone());
    }
    let b3 = build(1, ps, usable, Some(&b2), 2, &ver(3, leaf, 10, &v3)).unwrap()?;
    Some((b2, b3, v2, v3))
}

/// Check every sector mix in `masks` of `old` → `new` (P = tid 2, N = tid 3).
fn check_torn(
    usable: usize,
    old: &[u8],
    new: &[u8],
    p_cells: &[Vec<u8>],
    n_cells: &[Vec<u8>],
    masks: impl Iterator<Item = u64>,
) -> usize {
    let sectors = old.len() / SECTOR;
    let mut n_invalid = 0;
    for mask in masks {
        let mut mix = old.to_vec();
        for s in 0..sectors {
            if mask >> s & 1 == 1 {
                mix[s * SECTOR..(s + 1) * SECTOR]
                    .copy_from_slice(&new[s * SECTOR..(s + 1) * SECTOR]);
            }
        }
        let p = Dhl::visible(1, &mix, usable, 2).expect("P survives every mix");
        assert_eq!(p.tid(), 2);
        assert_eq!(p.cells().unwrap(), p_cells);
        for slot in 0..2 {
            if let Some(c) = content(&mix, usable, slot) {
                assert!(
                    Some(&c) == content(old, usable, slot).as_ref()
                        || Some(&c) == content(new, usable, slot).as_ref(),
                    "mask {mask:#x}: slot {slot} shows a version nobody wrote"
                );
            }
        }
        // Read as if N had committed: either N is whole, or its damage is reported
        // (never a silent fall-back). Recovery zeroes N's tid when N did not complete,
        // after which P is what a reader at 3 sees.
        match Dhl::visible(1, &mix, usable, 3) {
            Ok(top) if top.tid() == 3 => assert_eq!(top.cells().unwrap(), n_cells),
            Ok(top) => {
                // N's descriptor did not land (sector 0 old): P is the newest.
                assert_eq!(top.tid(), 2);
                assert_eq!(top.cells().unwrap(), p_cells);
                n_invalid += 1;
            }
            Err(Error::Corrupt { .. }) => {
                let mut rolled_back = mix.clone();
                invalidate(&mut rolled_back, 3);
                let p = Dhl::visible(1, &rolled_back, usable, 3).expect("P after rollback");
                assert_eq!(p.tid(), 2);
                assert_eq!(p.cells().unwrap(), p_cells);
                n_invalid += 1;
            }
            Err(e) => panic!("mask {mask:#x}: {e}"),
        }
    }
    n_invalid
}

fn arb_ops(leaf: bool, usable: usize) -> impl Strategy<Value = Vec<(u8, usize, Vec<u8>)>> {
    proptest::collection::vec((0..3u8, any::<usize>(), arb_cell(leaf, usable)), 0..12)
}

/// Cells of `size` bytes with keys 0, 2, 4, ... filling the capacity.
fn full(usable: usize, size: usize) -> Vec<Vec<u8>> {
    (0..capacity(usable) / cell_cost(size))
        .map(|k| rec(2 * k as u32, size))
        .collect()
}

fn offsets(buf: &[u8], tid: u64) -> Vec<usize> {
    let v = Dhl::visible(1, buf, US, tid).unwrap();
    (0..v.ncells())
        .map(|i| v.cell_range(i).unwrap().0)
        .collect()
}

#[test]
fn torn_write_of_a_full_page_update() {
    // A deterministic case that exercises both outcomes for the new version.
    let v1 = full(US, 40);
    let b1 = build(1, PS, US, None, 0, &ver(1, true, 0, &v1))
        .unwrap()
        .unwrap();
    let mut v2 = v1.clone();
    v2[3] = rec(6, 150);
    let b2 = build(1, PS, US, Some(&b1), 1, &ver(2, true, 0, &v2))
        .unwrap()
        .unwrap();
    let mut v3 = v2.clone();
    v3.insert(10, rec(19, 80));
    v3.remove(40);
    let b3 = build(1, PS, US, Some(&b2), 2, &ver(3, true, 0, &v3))
        .unwrap()
        .unwrap();
    let invalid = check_torn(US, &b2, &b3, &v2, &v3, 0..256);
    assert!(invalid >= 128, "sector 0 old hides N in half the mixes");
    assert!(invalid < 256, "the full write shows N");
}

#[test]
fn insert_writes_only_the_new_cell_and_array() {
    let p_cells = full(US, 16);
    let n = p_cells.len();
    let p = build(1, PS, US, None, 0, &ver(1, true, 0, &p_cells))
        .unwrap()
        .unwrap();
    let mut next = p_cells.clone();
    next.insert(n / 2, rec(n as u32 + 1, 16));
    let out = build(1, PS, US, Some(&p), 1, &ver(2, true, 0, &next))
        .unwrap()
        .unwrap();
    let changed = (0..PS).filter(|&i| p[i] != out[i]).count();
    println!("insert into {n} cells: {changed} bytes changed");
    assert!(changed <= DESC_SIZE + PTR_SIZE * (n + 1) + 16);
    // Every old cell is shared at its old offset.
    let (po, no) = (offsets(&out, 1), offsets(&out, 2));
    assert_eq!(&no[..n / 2], &po[..n / 2]);
    assert_eq!(&no[n / 2 + 1..], &po[n / 2..]);
    assert_eq!(&out[..DESC_SIZE], &p[..DESC_SIZE], "P's slot untouched");
}

/// Bytes referenced by the version with this tid.
fn referenced(buf: &[u8], tid: u64) -> Vec<bool> {
    let v = Dhl::visible(1, buf, US, tid).unwrap();
    let mut m = vec![false; US];
    for (s, e) in v.ranges().unwrap() {
        m[s..e].iter_mut().for_each(|b| *b = true);
    }
    m
}

#[test]
fn garbage_of_the_older_version_is_reused() {
    let p_cells = full(US, 100);
    let p = build(1, PS, US, None, 0, &ver(1, true, 0, &p_cells))
        .unwrap()
        .unwrap();
    let mut n1 = p_cells.clone();
    n1[2] = rec(4, 100 + 1);
    let b1 = build(1, PS, US, Some(&p), 1, &ver(2, true, 0, &n1))
        .unwrap()
        .unwrap();
    let mut n2 = n1.clone();
    n2[5] = leaf_cell_inline(&10u32.to_be_bytes(), &[0xee; 90]);
    let b2 = build(1, PS, US, Some(&b1), 2, &ver(3, true, 0, &n2))
        .unwrap()
        .unwrap();
    let (rp, r1, r2) = (referenced(&b1, 1), referenced(&b1, 2), referenced(&b2, 3));
    let p_only: Vec<usize> = (0..US).filter(|&i| rp[i] && !r1[i]).collect();
    let reused = p_only.iter().filter(|&&i| r2[i]).count();
    println!(
        "{} bytes only P referenced, {reused} reused by N2",
        p_only.len()
    );
    assert!(
        reused >= 100,
        "N2's new cell or array went into P's garbage"
    );
    // Garbage N2 did not reuse is zeroed; P is gone, N1 is intact.
    assert!(p_only.iter().all(|&i| r2[i] || b2[i] == 0));
    assert_eq!(visible_cells(&b2, US, 2), n1);
    assert!(Dhl::visible(1, &b2, US, 1)
        .unwrap_err()
        .to_string()
        .contains("no valid"));
    // Steady state: a full page takes any number of same-size updates in place (the
    // replaced copy leaves a hole the next one fits exactly).
    let (mut img, mut cells) = (b2, n2);
    for t in 4..1000u64 {
        let i = (t as usize * 7919) % cells.len();
        cells[i] = leaf_cell_inline(&(2 * i as u32).to_be_bytes(), &[t as u8; 90]);
        img = build(1, PS, US, Some(&img), t - 1, &ver(t, true, 0, &cells))
            .unwrap()
            .unwrap_or_else(|| panic!("update {t} did not fit"));
    }
    assert_eq!(visible_cells(&img, US, u64::MAX), cells);
}

#[test]
fn same_transaction_rebuild_replaces_its_own_version() {
    let p_cells = full(US, 64);
    let p = build(1, PS, US, None, 0, &ver(1, true, 0, &p_cells))
        .unwrap()
        .unwrap();
    let mut a = p_cells.clone();
    a[0] = rec(0, 250);
    let first = build(1, PS, US, Some(&p), 1, &ver(2, true, 0, &a))
        .unwrap()
        .unwrap();
    let mut b = p_cells.clone();
    b.remove(7);
    b[1] = rec(2, 240);
    // The first build's version (tid 2) is not protected: its 250-byte cell and array
    // are free, so this fits although both together would not.
    let second = build(1, PS, US, Some(&first), 1, &ver(2, true, 0, &b))
        .unwrap()
        .unwrap();
    let rp = referenced(&p, 1);
    for i in 0..US {
        if rp[i] {
            assert_eq!(second[i], p[i], "P byte {i} moved");
        }
    }
    assert_eq!(&second[..DESC_SIZE], &p[..DESC_SIZE]);
    assert_eq!(visible_cells(&second, US, 1), p_cells);
    assert_eq!(visible_cells(&second, US, 2), b);
    let d = descriptors(1, &second, US);
    assert_eq!((d[0].unwrap().tid, d[1].unwrap().tid), (1, 2));
    // Nothing of the first build survives outside what the second references.
    let r2 = referenced(&second, 2);
    assert!((RECORD_START..US).all(|i| rp[i] || r2[i] || second[i] == 0));
}

#[test]
fn overflow_pages_round_trip_and_reject_damage() {
    let data: Vec<u8> = (0..overflow_data(US)).map(|i| (i * 7) as u8).collect();
    for len in [1, 100, data.len()] {
        let p = OVERFLOW.image(3, PS, US, 9, 42, &data[..len]).unwrap();
        assert!(p[DESC_SIZE..RECORD_START].iter().all(|&b| b == 0));
        let o = OVERFLOW.open(3, &p, US).unwrap();
        // Bound to page 3 (its checksum is seeded with the page number).
        assert!(OVERFLOW.open(2, &p, US).is_err());
        assert_eq!(
            (o.tid, o.txn_size, o.next, o.data),
            (9, 0, 42, &data[..len])
        );
        // Any flipped byte of the descriptor or the data is caught.
        for at in (0..D_CRC + 4)
            .chain(RECORD_START..RECORD_START + len)
            .step_by(3)
        {
            let mut b = p.clone();
            b[at] ^= 0x10;
            assert!(OVERFLOW.open(3, &b, US).is_err(), "byte {at}");
        }
        // Not a tree version, and a tree page is not an overflow page.
        assert!(Dhl::visible(3, &p, US, u64::MAX).is_err());
    }
    assert!(OVERFLOW.open(3, &empty_leaf(PS, US, 1), US).is_err());
    assert!(OVERFLOW.image(1, PS, US, 0, 0, b"x").is_err());
    assert!(OVERFLOW
        .image(1, PS, US, 1, 0, &vec![0; overflow_data(US) + 1])
        .is_err());
}

/// Version `ver` would give, but built with txn_size 0 as the tree builds it.
fn ver0(tid: u64, leaf: bool, right: Pgno, cells: &[Vec<u8>]) -> Version<'_> {
    Version {
        txn_size: 0,
        ..ver(tid, leaf, right, cells)
    }
}

/// Indices where `a` and `b` differ.
fn diff(a: &[u8], b: &[u8]) -> Vec<usize> {
    (0..a.len().max(b.len()))
        .filter(|&i| a.get(i) != b.get(i))
        .collect()
}

/// Whether byte `i` is the txn_size or checksum field of descriptor `slot`.
fn stamp_field(slot: usize, i: usize) -> bool {
    let d = slot * DESC_SIZE;
    (d + D_TXN_SIZE..d + D_TXN_SIZE + 4).contains(&i) || (d + D_CRC..d + D_CRC + 4).contains(&i)
}

/// Run `restamp` on a copy of `buf` and check its contract against [`page_versions`]:
/// exactly the valid slots with `tid` get `txn_size` and stay valid, every other slot
/// reads as before, and no byte outside the stamped slots' two fields changes. Returns
/// the stamped image.
fn check_restamp(buf: &[u8], usable: usize, tid: u64, txn_size: u32) -> Vec<u8> {
    let before = page_versions(1, buf, usable);
    let mut b = buf.to_vec();
    let stamped = restamp(1, &mut b, usable, tid, txn_size);
    let hit = |s: usize| before[s].is_some_and(|d| d.valid && d.tid == tid);
    assert_eq!(stamped, hit(0) || hit(1));
    for i in diff(buf, &b) {
        assert!(
            (0..2).any(|s| hit(s) && stamp_field(s, i)),
            "byte {i} changed outside a stamped descriptor's fields"
        );
    }
    let after = page_versions(1, &b, usable);
    for s in 0..2 {
        let want = if hit(s) {
            before[s].map(|d| DescInfo { txn_size, ..d })
        } else {
            before[s]
        };
        assert_eq!(after[s], want, "slot {s}");
    }
    b
}

#[test]
fn restamp_keeps_tree_versions_valid_with_the_new_txn_size() {
    // Leaf: a committed version (tid 4) and the new one (tid 5) built with txn_size 0.
    let c1 = vec![rec(1, 40), rec(3, 70)];
    let p = build(1, PS, US, None, 0, &ver(4, true, 0, &c1))
        .unwrap()
        .unwrap();
    let c2 = vec![rec(1, 40), rec(2, 500), leaf_cell_overflow(b"k", 5000, 7)];
    let n = build(1, PS, US, Some(&p), 4, &ver0(5, true, 0, &c2))
        .unwrap()
        .unwrap();
    let s = check_restamp(&n, US, 5, 3);
    let changed = diff(&n, &s);
    assert!(!changed.is_empty() && changed.iter().all(|&i| stamp_field(1, i)));
    let v = Dhl::visible(1, &s, US, 5).unwrap();
    assert_eq!((v.slot(), v.tid(), v.txn_size()), (1, 5, 3));
    assert_eq!(v.cells().unwrap(), c2);
    let old = Dhl::visible(1, &s, US, 4).unwrap();
    assert_eq!(
        (old.tid(), old.txn_size(), old.cells().unwrap()),
        (4, 11, c1)
    );
    // The same image as building with the count in the first place, and stamping is
    // repeatable (back to 0 gives the built image).
    let direct = build(
        1,
        PS,
        US,
        Some(&p),
        4,
        &Version {
            txn_size: 3,
            ..ver(5, true, 0, &c2)
        },
    )
    .unwrap()
    .unwrap();
    assert_eq!(s, direct);
    assert_eq!(check_restamp(&s, US, 5, 0), n);
    assert_eq!(page_versions(1, &s, US), descriptors(1, &s, US));
    // The committed version can be stamped too; only slot 0's fields change.
    let s4 = check_restamp(&s, US, 4, 0xdead_beef);
    assert!(diff(&s, &s4).iter().all(|&i| stamp_field(0, i)));
    assert_eq!(Dhl::visible(1, &s4, US, 4).unwrap().txn_size(), 0xdead_beef);
    assert_eq!(Dhl::visible(1, &s4, US, 5).unwrap().txn_size(), 3);

    // Interior, fresh page (slot 0, slot 1 INV).
    let ci = vec![interior_cell(11, b"b"), interior_cell(12, b"d")];
    let i = build(1, PS, US, None, 0, &ver0(8, false, 13, &ci))
        .unwrap()
        .unwrap();
    let si = check_restamp(&i, US, 8, u32::MAX);
    assert!(diff(&i, &si).iter().all(|&i| stamp_field(0, i)));
    let v = Dhl::visible(1, &si, US, 8).unwrap();
    assert_eq!(
        (v.is_leaf(), v.txn_size(), v.right_child()),
        (false, u32::MAX, 13)
    );
    assert_eq!(v.cells().unwrap(), ci);

    // An empty leaf (no array, no cells).
    let e = check_restamp(&empty_leaf(PS, US, 6), US, 6, 1);
    assert_eq!(Dhl::visible(1, &e, US, 6).unwrap().txn_size(), 1);
}

#[test]
fn restamp_keeps_overflow_pages_valid_with_the_new_txn_size() {
    let data: Vec<u8> = (0..overflow_data(US)).map(|i| (i * 13) as u8).collect();
    for len in [0, 1, 100, data.len()] {
        let p = OVERFLOW.image(1, PS, US, 9, 42, &data[..len]).unwrap();
        let s = check_restamp(&p, US, 9, 77);
        let changed = diff(&p, &s);
        assert!(!changed.is_empty() && changed.iter().all(|&i| stamp_field(0, i)));
        let o = OVERFLOW.open(1, &s, US).unwrap();
        assert_eq!(
            (o.tid, o.txn_size, o.next, o.data),
            (9, 77, 42, &data[..len])
        );
        assert_eq!(check_restamp(&s, US, 9, 0), p);
    }
}

#[test]
fn restamp_of_an_absent_or_invalid_version_changes_nothing() {
    let cells = vec![rec(1, 40), rec(2, 40)];
    let p = build(1, PS, US, None, 0, &ver(4, true, 0, &cells))
        .unwrap()
        .unwrap();
    let n = build(1, PS, US, Some(&p), 4, &ver0(5, true, 0, &[rec(7, 50)]))
        .unwrap()
        .unwrap();
    let ovfl = OVERFLOW.image(1, PS, US, 9, 0, b"data").unwrap();
    let mut torn = n.clone();
    let last = get_u16(&torn, get_u16(&torn, DESC_SIZE + D_ARRAY));
    torn[last + 12] ^= 1; // a data byte of slot 1's only cell (not shared with slot 0)
    let mut bad_ovfl = ovfl.clone();
    bad_ovfl[RECORD_START + 2] ^= 1;
    let mut inv = n.clone();
    assert!(invalidate(&mut inv, 5));
    for (img, tid) in [
        (&n, 6),    // no such tid
        (&n, 0),    // INV is never stamped
        (&torn, 5), // present, but not a valid version
        (&bad_ovfl, 9),
        (&ovfl, 8),
        (&inv, 5),
    ] {
        let mut b = img.clone();
        assert!(!restamp(1, &mut b, US, tid, 1), "tid {tid}");
        assert_eq!(&b, img, "tid {tid}: buffer changed");
        check_restamp(img, US, tid, 1);
    }
    // A damaged slot with the tid is skipped, a valid one beside it still stamped.
    let s = check_restamp(&torn, US, 4, 2);
    assert!(diff(&torn, &s).iter().all(|&i| stamp_field(0, i)));
    assert_eq!(Dhl::visible(1, &s, US, 4).unwrap().txn_size(), 2);
    let mut both = n.clone();
    both[..8].copy_from_slice(&5u64.to_le_bytes()); // slot 0 claims tid 5, crc now bad
    let s = check_restamp(&both, US, 5, 2);
    assert!(diff(&both, &s).iter().all(|&i| stamp_field(1, i)));
    let mut all_bad = torn.clone();
    all_bad[..8].copy_from_slice(&5u64.to_le_bytes());
    let mut b = all_bad.clone();
    assert!(!restamp(1, &mut b, US, 5, 1));
    assert_eq!(b, all_bad);
    // Bad geometry: nothing to stamp, no panic.
    for (len, usable) in [(10, US), (PS, 10), (PS, PS + 1), (PS, 70_000)] {
        let mut b = n[..len.min(PS)].to_vec();
        assert!(!restamp(1, &mut b, usable, 5, 1));
        assert_eq!(b, &n[..len.min(PS)]);
    }
}

#[test]
fn page_versions_counts_overflow_pages() {
    let p = OVERFLOW
        .image(1, PS, US, 9, 42, b"some value bytes")
        .unwrap();
    let ok = DescInfo {
        slot: 0,
        tid: 9,
        txn_size: 0,
        valid: true,
    };
    assert_eq!(page_versions(1, &p, US), [Some(ok), None]);
    assert_eq!(
        descriptors(1, &p, US)[0].map(|d| d.valid),
        Some(false),
        "descriptors sees tree versions only"
    );
    // A damaged data byte, descriptor byte or the other slot's bytes.
    let mut d = p.clone();
    d[RECORD_START + 3] ^= 0x40;
    assert_eq!(
        page_versions(1, &d, US),
        [Some(DescInfo { valid: false, ..ok }), None]
    );
    let mut d = p.clone();
    d[D_RIGHT] ^= 1;
    assert_eq!(page_versions(1, &d, US)[0].map(|d| d.valid), Some(false));
    let mut d = p.clone();
    d[DESC_SIZE..DESC_SIZE + 8].copy_from_slice(&9u64.to_le_bytes());
    d[DESC_SIZE + D_TYPE] = page_type::OVERFLOW;
    let pv = page_versions(1, &d, US);
    assert_eq!(pv[0], Some(ok), "slot 1 does not cover slot 0's checksum");
    assert_eq!(
        pv[1].map(|d| (d.tid, d.valid)),
        Some((9, false)),
        "overflow only in slot 0"
    );
    // Tree pages: the same as descriptors.
    let t = build(1, PS, US, None, 0, &ver(3, true, 0, &[rec(1, 30)]))
        .unwrap()
        .unwrap();
    assert_eq!(page_versions(1, &t, US), descriptors(1, &t, US));
    assert_eq!(page_versions(1, &t, US)[0].map(|d| d.valid), Some(true));
    assert_eq!(page_versions(1, &p[..40], US), [None, None]);
    assert_eq!(page_versions(1, &p, 10), [None, None]);
}

#[test]
fn capacity_table() {
    // Records whose cell is `size` bytes, 4 KiB pages: stock = cell + 2-byte pointer in
    // slotted::capacity; DHL = cell + two pointers in double_header::capacity (one reserve_cell
    // reserved). Each DHL count is checked: it builds fresh and takes a reserve_cell.
    println!(
        "4 KiB page (usable {US}): stock capacity {}, DHL capacity {}, max_cell {}",
        slotted::capacity(US),
        capacity(US),
        max_cell(US)
    );
    println!(
        "{:>5} {:>6} {:>5} {:>7} {:>22}",
        "cell", "stock", "DHL", "DHL/st", "DHL reserve=1 record"
    );
    for size in [8usize, 16, 32, 64, 128] {
        let stock = slotted::capacity(US) / (size + PTR_SIZE);
        let dhl = capacity(US) / cell_cost(size);
        let small_reserve = (US - RECORD_START - cell_cost(size)) / cell_cost(size);
        println!(
            "{size:>5} {stock:>6} {dhl:>5} {:>6.1}% {small_reserve:>22}",
            100.0 * dhl as f64 / stock as f64
        );
        let cells: Vec<_> = (0..dhl as u16)
            .map(|k| leaf_cell_inline(&k.to_be_bytes(), &vec![0; size - 8]))
            .collect();
        let p = build(1, PS, US, None, 0, &ver(1, true, 0, &cells))
            .unwrap()
            .unwrap();
        let mut next = cells.clone();
        next.push(leaf_cell_inline(&[0xff; 2], &vec![0; reserve_cell(US) - 8]));
        assert!(build(1, PS, US, Some(&p), 1, &ver(2, true, 0, &next))
            .unwrap()
            .is_some());
        let stock_page = slotted::build(PS, US, true, &cells[..], 0);
        assert!(
            slotted::Page::open(1, &stock_page, US)
                .unwrap()
                .free_space()
                >= (stock - dhl) * (size + 2)
        );
    }
}

/// Tiny deterministic generator for the random walks.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Committed one-cell changes on one page, as a tree would make them: a version over
/// capacity is built (it must fit: the tree may write it before splitting) but not
/// committed; a build that does not fit is relocated (fresh image). Returns
/// (builds, builds without reserve, failed builds).
fn walk(
    usable: usize,
    seed: u64,
    steps: usize,
    inserts_only: bool,
    max_size: usize,
) -> (usize, usize, usize) {
    let mut rng = Rng(seed);
    let mut keys: Vec<u32> = Vec::new();
    let mut cells: Vec<Vec<u8>> = Vec::new();
    let mut img = empty_leaf(usable + 4, usable, 1);
    let (mut no_reserve, mut failed) = (0, 0);
    for t in 2..steps as u64 + 2 {
        let p = Dhl::visible(1, &img, usable, t - 1).unwrap();
        let reserve = has_reserve(&p);
        no_reserve += usize::from(!reserve);
        // Skewed towards small cells, as real rows are.
        let spread = rng.below(max_size.min(max_cell(usable)) - 9) + 1;
        let size = 10 + rng.below(spread);
        let (mut nk, mut nc) = (keys.clone(), cells.clone());
        let op = if inserts_only { 0 } else { rng.below(3) };
        if op == 0 || nc.is_empty() {
            let k = rng.next() as u32;
            let at = nk.partition_point(|&x| x < k);
            if nk.get(at) == Some(&k) {
                continue;
            }
            nk.insert(at, k);
            nc.insert(at, rec(k, size));
        } else if op == 1 {
            let i = rng.below(nc.len());
            nc[i] = rec(nk[i], size);
        } else {
            let i = rng.below(nc.len());
            nk.remove(i);
            nc.remove(i);
        }
        let built = build(
            1,
            usable + 4,
            usable,
            Some(&img),
            t - 1,
            &ver(t, true, 0, &nc),
        )
        .unwrap();
        assert!(
            built.is_some() || !reserve || size > reserve_cell(usable),
            "seed {seed} step {t}: reserve held but build failed"
        );
        failed += usize::from(built.is_none());
        if cost(&nc) > capacity(usable) {
            if inserts_only {
                break;
            }
            continue; // the tree splits instead
        }
        img = match built {
            Some(b) => b,
            None => build(1, usable + 4, usable, None, 0, &ver(t, true, 0, &nc))
                .unwrap()
                .unwrap(),
        };
        assert_eq!(visible_cells(&img, usable, t), nc);
        (keys, cells) = (nk, nc);
    }
    (steps, no_reserve, failed)
}

#[test]
fn inserts_only_keep_the_reserve() {
    for usable in [508, US] {
        for seed in 1..40 {
            let (_, no_reserve, failed) = walk(usable, seed, 2000, true, reserve_cell(usable));
            assert_eq!((no_reserve, failed), (0, 0), "usable {usable} seed {seed}");
        }
    }
}

#[test]
fn random_walk_fragmentation_stats() {
    // Not a guarantee: measures how often mixed histories lose the reserve (module
    // notes, (b)) and how often a one-cell change then needs relocation.
    for (usable, max_size) in [(508, 122), (US, 64), (US, 300), (US, 1018), (16380, 200)] {
        let (mut steps, mut no_reserve, mut failed) = (0, 0, 0);
        for seed in 1..21 {
            let r = walk(usable, seed, 2000, false, max_size);
            steps += r.0;
            no_reserve += r.1;
            failed += r.2;
        }
        println!(
            "usable {usable:>5}, cells 10..={max_size:>4}: {steps} changes, reserve lost before {no_reserve}, relocations {failed} ({:.3}%)",
            100.0 * failed as f64 / steps as f64
        );
    }
}

#[test]
fn adversarial_fragmentation_defeats_the_reserve() {
    // Documents the limit of (b): removals leave 10-byte holes that 11-byte cells
    // cannot reuse, so at full capacity the free space is real but scattered.
    let mut cells: Vec<Vec<u8>> = full(US, 10);
    let mut img = build(1, PS, US, None, 0, &ver(1, true, 0, &cells))
        .unwrap()
        .unwrap();
    let mut t = 1;
    let mut step = |cells: &Vec<Vec<u8>>, img: &mut Vec<u8>| {
        t += 1;
        let b = build(1, PS, US, Some(img), t - 1, &ver(t, true, 0, cells)).unwrap();
        b.map(|b| *img = b).is_some()
    };
    // Remove every other cell of the original run: 107 separate 10-byte holes.
    for i in 0..cells.len() / 2 {
        cells.remove(i + 1);
        assert!(step(&cells, &mut img));
    }
    // Refill with 11-byte cells, leaving just enough capacity for a 100-byte cell (or
    // until one no longer fits: the scattered holes run out first).
    let mut k = 1;
    while cost(&cells) + cell_cost(11) + cell_cost(100) <= capacity(US) {
        cells.push(rec(1_000_000 + k, 11));
        k += 1;
        if !step(&cells, &mut img) {
            cells.pop();
            break;
        }
    }
    let p = Dhl::visible(1, &img, US, u64::MAX).unwrap();
    assert!(!has_reserve(&p));
    let mut next = cells.clone();
    next.push(rec(2_000_000, 100));
    assert!(
        cost(&next) <= capacity(US),
        "the new version is within capacity"
    );
    assert!(
        !step(&next, &mut img),
        "but does not fit next to the fragmented one"
    );
    assert!(build(1, PS, US, None, 0, &ver(99, true, 0, &next))
        .unwrap()
        .is_some());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn round_trip(
        (leaf, cells, other) in any::<bool>().prop_flat_map(|leaf| (
            Just(leaf), arb_cells(leaf, US, capacity(US)), arb_cells(leaf, US, capacity(US)))),
        right in 1..u32::MAX,
    ) {
        let b = build(1, PS, US, None, 0, &ver(7, leaf, right, &cells)).unwrap().unwrap();
        let v = Dhl::visible(1, &b, US, 7).unwrap();
        prop_assert_eq!(v.cells().unwrap(), cells.clone());
        prop_assert_eq!((v.tid(), v.txn_size(), v.is_leaf()), (7, 14, leaf));
        prop_assert_eq!(v.right_child(), if leaf { 0 } else { right });
        // A second, unrelated version next to it: when it fits, both read back.
        if let Some(b2) = build(1, PS, US, Some(&b), 7, &ver(8, leaf, right, &other)).unwrap() {
            prop_assert_eq!(visible_cells(&b2, US, 7), cells);
            prop_assert_eq!(visible_cells(&b2, US, 8), other);
        }
    }

    #[test]
    fn torn_writes_4k_exhaustive(
        leaf in any::<bool>(),
        v1 in arb_cells(true, US, capacity(US)),
        ops in arb_ops(true, US),
    ) {
        let conv = |cs: &[Vec<u8>]| -> Vec<Vec<u8>> {
            if leaf { cs.to_vec() } else {
                cs.iter().map(|c| interior_from_key_part(US, c, get_u32(c, 2) | 1)).collect()
            }
        };
        let v1 = conv(&v1);
        let ops: Vec<_> = ops.into_iter().map(|(k, p, c)| (k, p, conv(&[c]).remove(0))).collect();
        if let Some((old, new, p, n)) = history(US, leaf, &v1, &ops) {
            check_torn(US, &old, &new, &p, &n, 0..256);
        }
    }

    #[test]
    fn torn_writes_16k_sampled(
        v1 in arb_cells(true, 16380, capacity(16380)),
        ops in arb_ops(true, 16380),
        masks in proptest::collection::vec(any::<u32>(), 64),
    ) {
        if let Some((old, new, p, n)) = history(16380, true, &v1, &ops) {
            let masks = masks.into_iter().map(u64::from).chain([0, u32::MAX as u64, 1, !1u32 as u64]);
            check_torn(16380, &old, &new, &p, &n, masks);
        }
    }

    #[test]
    fn fresh_page_holds_capacity(
        usable in prop_oneof![Just(508usize), Just(US), Just(65532)],
        leaf in any::<bool>(),
        seed in proptest::collection::vec((any::<u16>(), 0..64usize), 0..2000),
    ) {
        // Fill up to exactly the capacity with cells of varied sizes (a).
        let mc = max_cell(usable);
        let mut cells = Vec::new();
        let mut total = 0;
        for (k, len) in seed {
            let size = (CELL_HEADER + 2 + len * len % mc).clamp(CELL_HEADER + 2, mc);
            if total + cell_cost(size) > capacity(usable) {
                continue;
            }
            total += cell_cost(size);
            let key = k.to_be_bytes();
            cells.push(if leaf {
                leaf_cell_inline(&key, &vec![1; size - CELL_HEADER - 2])
            } else {
                interior_cell(1, &[&key[..], &vec![2; size - CELL_HEADER - 2]].concat())
            });
        }
        let b = build(1, usable + 4, usable, None, 0, &ver(1, leaf, 3, &cells)).unwrap();
        prop_assert!(b.is_some());
        prop_assert_eq!(visible_cells(&b.unwrap(), usable, 1), cells);
    }

    #[test]
    fn one_change_fits_next_to_a_compact_version(
        (usable, cells, cell) in prop_oneof![Just(508usize), Just(US), Just(65532)]
            .prop_flat_map(|u| (Just(u), arb_cells(true, u, capacity(u)), arb_cell(true, u))),
        kind in 0..3u8,
        pos in any::<usize>(),
        big in any::<bool>(),
    ) {
        // (b) from a compactly written version at any fill up to the capacity,
        // including a new cell of the largest size (b) covers.
        let r = reserve_cell(usable);
        let cell = if big || cell.len() > r { rec(77, r) } else { cell };
        let p = build(1, usable + 4, usable, None, 0, &ver(1, true, 0, &cells)).unwrap().unwrap();
        prop_assert!(has_reserve(&Dhl::visible(1, &p, usable, 1).unwrap()));
        let next = apply(&cells, kind, pos, cell);
        let n = build(1, usable + 4, usable, Some(&p), 1, &ver(2, true, 0, &next)).unwrap();
        prop_assert!(n.is_some(), "one-cell change did not fit");
        let n = n.unwrap();
        prop_assert_eq!(visible_cells(&n, usable, 1), cells);
        prop_assert_eq!(visible_cells(&n, usable, 2), next);
    }

    #[test]
    fn garbage_input_never_panics(
        bytes in proptest::collection::vec(any::<u8>(), 0..PS + 8),
        max_tid in any::<u64>(),
        usable in prop_oneof![Just(US), Just(0usize), Just(70_000), any::<usize>()],
    ) {
        let _ = Dhl::visible(1, &bytes, usable, max_tid);
        let _ = descriptors(1, &bytes, usable);
        let _ = Dhl::open_slot(1, &bytes, usable, 1);
        let mut m = bytes.clone();
        let _ = invalidate(&mut m, max_tid);
        let _ = page_versions(1, &bytes, usable);
        let _ = restamp(1, &mut m, usable, max_tid, max_tid as u32);
        let cells = vec![rec(1, 20)];
        let _ = build(1, PS, usable, Some(&bytes), max_tid, &ver(max_tid | 1, true, 0, &cells));
    }

    #[test]
    fn damaged_pages_show_only_written_versions(
        v1 in arb_cells(true, US, capacity(US)),
        ops in arb_ops(true, US),
        hits in proptest::collection::vec((0..US, any::<u8>(), any::<bool>()), 1..6),
    ) {
        // Random byte damage, with the damaged descriptors' crcs recomputed half of the
        // time so that the structural checks are exercised, not only the crc.
        if let Some((_, new, p, n)) = history(US, true, &v1, &ops) {
            let mut b = new.clone();
            for (at, val, recrc_it) in hits {
                b[at] = val;
                if recrc_it {
                    recrc(&mut b, US, 0);
                    recrc(&mut b, US, 1);
                }
            }
            for max_tid in [1, 2, 3, u64::MAX] {
                if let Ok(v) = Dhl::visible(1, &b, US, max_tid) {
                    // Every accessor stays in bounds whatever the view claims.
                    for i in 0..=v.ncells() {
                        let _ = (v.cell(i), v.key(i), v.payload(i), v.child(i));
                    }
                    let _ = v.search(b"k", &cmp);
                    let _ = v.free_holes();
                }
            }
            let d = descriptors(1, &b, US);
            prop_assert!(d.iter().flatten().all(|d| d.slot < 2));
            for tid in [1, 2, 3] {
                check_restamp(&b, US, tid, 5);
            }
            let _ = build(1, PS, US, Some(&b), 2, &ver(3, true, 0, &n));
            let _ = p;
        }
    }

    #[test]
    fn restamp_on_garbage_keeps_its_contract(
        bytes in proptest::collection::vec(any::<u8>(), 0..PS + 8),
        usable in prop_oneof![3 => Just(US), 1 => Just(508usize), 1 => Just(0usize), 1 => any::<usize>()],
        which in 0..3usize,
        any_tid in any::<u64>(),
        txn_size in any::<u32>(),
        ovfl in proptest::option::of((1..u64::MAX, any::<u32>(), 0..PS)),
    ) {
        // Random bytes, or a valid overflow page with random bytes everywhere its
        // checksum does not cover (slot 1, past the data), so that the stamping path
        // runs too; the tid is either random or one the buffer claims.
        let mut b = bytes.clone();
        if let Some((tid, next, len)) = ovfl {
            let len = len.min(bytes.len()).min(overflow_data(US));
            b = OVERFLOW.image(1, PS, US, tid, next, &bytes[..len]).unwrap();
            for i in (DESC_SIZE..RECORD_START).chain(RECORD_START + len..PS) {
                b[i] = bytes.get(i).copied().unwrap_or(b[i]);
            }
        }
        let tid = match which {
            0 if b.len() >= 8 => get_u64(&b, 0),
            1 if b.len() >= 40 => get_u64(&b, DESC_SIZE),
            _ => any_tid,
        };
        check_restamp(&b, usable, tid, txn_size);
    }

    #[test]
    fn restamp_on_built_pages(
        v1 in arb_cells(true, US, capacity(US)),
        ops in arb_ops(true, US),
        tid in 0..5u64,
        txn_size in any::<u32>(),
    ) {
        if let Some((_, new, p, n)) = history(US, true, &v1, &ops) {
            let s = check_restamp(&new, US, tid, txn_size);
            prop_assert_eq!(visible_cells(&s, US, 2), p);
            prop_assert_eq!(visible_cells(&s, US, 3), n);
            if tid == 2 || tid == 3 {
                prop_assert_eq!(Dhl::visible(1, &s, US, tid).unwrap().txn_size(), txn_size);
            }
        }
    }
}

/// What a view says about its version, for comparing implementations.
fn view_facts(v: &View<'_>) -> (usize, u64, u32, usize, usize, bool, Pgno) {
    (
        v.slot,
        v.tid,
        v.txn_size,
        v.ncells,
        v.array_off,
        v.leaf,
        v.right,
    )
}

/// Every entry point on `buf` agrees with the reference: validation, reading and stamping
/// give the same verdicts, reasons and bytes; `build` (from `buf` and from nothing) obeys
/// the rules `reference::check_build` states.
fn check_against_reference(buf: &[u8], usable: usize, new_cells: &[Vec<u8>]) {
    let facts = |r: std::result::Result<View<'_>, String>| r.map(|v| view_facts(&v));
    for slot in 0..2 {
        assert_eq!(
            facts(Dhl::check_slot(1, buf, usable, slot)),
            facts(reference::check_slot(1, buf, usable, slot)),
            "check_slot {slot}"
        );
    }
    for max_tid in [0, 1, 2, 3, 4, u64::MAX] {
        let got = Dhl::visible(1, buf, usable, max_tid);
        let want = reference::visible(1, buf, usable, max_tid);
        match (&got, &want) {
            (Ok(g), Ok(w)) => {
                assert_eq!(view_facts(g), view_facts(w), "visible {max_tid}");
                assert_eq!(g.free_holes().unwrap(), reference::free_holes(w).unwrap());
            }
            _ => assert_eq!(
                got.map(|v| view_facts(&v)).map_err(|e| e.to_string()),
                want.map(|v| view_facts(&v)).map_err(|e| e.to_string()),
                "visible {max_tid}"
            ),
        }
    }
    for tid in [1, 2, 3, 4] {
        let (mut got, mut want) = (buf.to_vec(), buf.to_vec());
        assert_eq!(
            restamp(1, &mut got, usable, tid, 77),
            reference::restamp(1, &mut want, usable, tid, 77)
        );
        assert!(got == want, "restamp {tid}");
    }
    let ps = buf.len().max(usable);
    for (keep, tid) in [(2, 3), (3, 3), (1, 4), (u64::MAX - 1, u64::MAX)] {
        for leaf in [true, false] {
            let v = ver(tid, leaf, 5, new_cells);
            for base in [Some(buf), None] {
                let got = build(1, ps, usable, base, keep, &v);
                if let Err(why) = reference::check_build(1, ps, usable, base, keep, &v, got) {
                    panic!(
                        "build keep {keep} tid {tid} leaf {leaf} base {}: {why}",
                        base.is_some()
                    );
                }
            }
        }
    }
}

#[test]
fn one_shot_checksum_equals_the_streaming_one() {
    // Random bytes as a "page", random in-bounds (possibly overlapping) pieces.
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut rnd = |n: usize| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % n as u64) as usize
    };
    for round in 0..2000 {
        let usable = [508, 4092, 16380, 65535][round % 4];
        let buf: Vec<u8> = (0..usable).map(|_| rnd(256) as u8).collect();
        let slot = rnd(2);
        let a = RECORD_START + rnd(usable - RECORD_START);
        let array = (a, a + rnd(usable - a + 1).min(600));
        let cells: Vec<(usize, usize)> = (0..rnd(300))
            .map(|_| {
                let off = RECORD_START + rnd(usable - RECORD_START);
                (off, rnd((usable - off).min(1100) + 1))
            })
            .collect();
        let mut covered = buf[slot * DESC_SIZE..slot * DESC_SIZE + D_CRC].to_vec();
        covered.extend_from_slice(&buf[array.0..array.1]);
        for &(off, n) in &cells {
            covered.extend_from_slice(&buf[off..off + n]);
        }
        assert_eq!(
            covered_crc(1, &covered),
            version_crc(1, &buf, slot, array, cells.into_iter()),
            "round {round}"
        );
    }
}

#[test]
fn occupancy_bitmap_matches_sorted_ranges() {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut rnd = |n: usize| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % n as u64) as usize
    };
    for round in 0..3000 {
        let usable = [RECORD_START + 1, 200, 508, 4092, 65535][round % 5];
        let ranges: Vec<(usize, usize)> = (0..rnd(40))
            .map(|_| {
                let s = RECORD_START + rnd(usable - RECORD_START);
                (s, s + 1 + rnd((usable - s).min(300)))
            })
            .collect();
        let mut sorted = ranges.clone();
        sorted.sort_unstable();
        let overlap = sorted.windows(2).any(|w| w[0].1 > w[1].0);
        let mut want = Vec::new();
        let mut at = RECORD_START;
        for &(s, e) in &sorted {
            if s > at {
                want.push((at, s));
            }
            at = at.max(e);
        }
        if at < usable {
            want.push((at, usable));
        }
        let mut s = Scratch::default();
        s.used.clear(usable);
        let fresh = ranges.iter().all(|&(a, e)| s.used.mark(a, e));
        assert_eq!(fresh, !overlap, "round {round}: {ranges:?}");
        assert_eq!(holes_around(&mut s, usable, &ranges), want, "round {round}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn matches_the_reference_implementation(
        leaf in any::<bool>(),
        v1 in arb_cells(true, US, capacity(US)),
        ops in arb_ops(true, US),
        hits in proptest::collection::vec((0..PS, any::<u8>(), 0..3u8), 0..6),
    ) {
        let conv = |cs: &[Vec<u8>]| -> Vec<Vec<u8>> {
            if leaf { cs.to_vec() } else {
                cs.iter().map(|c| interior_from_key_part(US, c, get_u32(c, 2) | 1)).collect()
            }
        };
        let v1 = conv(&v1);
        let ops: Vec<_> = ops.into_iter().map(|(k, p, c)| (k, p, conv(&[c]).remove(0))).collect();
        if let Some((old, new, _, n)) = history(US, leaf, &v1, &ops) {
            check_against_reference(&old, US, &n);
            // Damage, with the crcs recomputed (structural checks) or not (crc check).
            let mut b = new.clone();
            for (at, val, how) in hits {
                b[at] = val;
                if how == 1 {
                    recrc(&mut b, US, 0);
                    recrc(&mut b, US, 1);
                }
                check_against_reference(&b, US, &n);
            }
            // Overlaps specifically: point one cell of each slot at another one's bytes.
            let mut o = new.clone();
            for slot in 0..2 {
                let d = slot * DESC_SIZE;
                let (a, k) = (get_u16(&o, d + D_ARRAY), get_u16(&o, d + D_NCELLS));
                if k >= 2 && a + 2 * k <= US {
                    let second = o[a + 2..a + 4].to_vec();
                    o[a..a + 2].copy_from_slice(&second);
                }
            }
            check_against_reference(&o, US, &n);
            recrc(&mut o, US, 0);
            recrc(&mut o, US, 1);
            check_against_reference(&o, US, &n);
            // Both slots claiming one tid (never written, but disk bytes can say so):
            // ties go to slot 0.
            for from in 0..2 {
                let mut t = new.clone();
                let tid = get_u64(&t, from * DESC_SIZE + D_TID);
                let to = (1 - from) * DESC_SIZE + D_TID;
                t[to..to + 8].copy_from_slice(&tid.to_le_bytes());
                recrc(&mut t, US, 1 - from);
                check_against_reference(&t, US, &n);
            }
        }
    }

    /// Placement at the edge: one new cell exactly as long as a hole next to the
    /// protected version (or that hole minus the new array), the case a planner with an
    /// off-by-one in its fit test gets wrong, checked by the oracle (which requires a fit
    /// whenever at most two pieces have a placement).
    #[test]
    fn exact_fits_are_placed(
        v1 in arb_cells(true, US, capacity(US)),
        ops in arb_ops(true, US),
        pick in any::<proptest::sample::Index>(),
        minus_array in any::<bool>(),
    ) {
        if let Some((_, new, _, n)) = history(US, true, &v1, &ops) {
            let holes = Dhl::visible(1, &new, US, 3).unwrap().free_holes().unwrap();
            prop_assume!(!holes.is_empty());
            let (s, e) = holes[pick.index(holes.len())];
            let array = if minus_array { PTR_SIZE * (n.len() + 1) } else { 0 };
            let size = (e - s).saturating_sub(array);
            prop_assume!((10..=max_cell(US)).contains(&size));
            let mut cells = n.clone();
            cells.push(rec(u32::MAX, size));
            let v = ver(4, true, 0, &cells);
            let got = build(1, PS, US, Some(&new), 3, &v);
            if let Err(why) = reference::check_build(1, PS, US, Some(&new), 3, &v, got) {
                panic!("hole [{s}, {e}), cell of {size} bytes: {why}");
            }
        }
    }

    #[test]
    fn matches_the_reference_on_garbage(
        bytes in proptest::collection::vec(any::<u8>(), RECORD_START..PS + 8),
        usable in prop_oneof![Just(US), Just(508usize), Just(RECORD_START)],
    ) {
        let cells = vec![rec(1, 20), rec(2, 30)];
        check_against_reference(&bytes, usable, &cells);
    }
}

/// The validation memo of `visible_page` remembers an image, never a page number: a
/// second image of the same page with a damaged cell is checked again and refused, even
/// though the first (good) image of that page was validated and is still alive. A memo
/// keyed by page number alone, or one whose image could be changed in place, would serve
/// the damaged bytes.
#[test]
fn validation_memo_is_per_image_not_per_page() {
    let cells: Vec<Vec<u8>> = (0..20).map(|k| rec(k, 40)).collect();
    let good = build(9, PS, US, None, 0, &ver(5, true, 0, &cells))
        .unwrap()
        .unwrap();
    let good: PageRef = std::sync::Arc::from(good);
    let first = visible_page(9, &good, US, 10).unwrap().cells().unwrap();
    assert_eq!(first, cells);
    // Same page number, same descriptors, one value byte flipped: only the crc can tell.
    let mut bad = good.to_vec();
    let at = (RECORD_START..US)
        .find(|&i| bad[i..].starts_with(&cells[3][..12]))
        .expect("cell 3 in the image");
    bad[at + 12] ^= 0x40;
    let bad: PageRef = std::sync::Arc::from(bad);
    assert!(
        visible_page(9, &bad, US, 10).is_err(),
        "damaged image served from the memo"
    );
    // The good image is still remembered and still reads.
    let slot = visible_page(9, &good, US, 10).unwrap().slot();
    assert!(crate::page::versioned::recall(&MEMO, &good, 9, US, slot).is_some());
    assert_eq!(
        visible_page(9, &good, US, 10).unwrap().cells().unwrap(),
        cells
    );
}

#[test]
fn restamp_as_retags_a_working_version_for_its_commit_tid() {
    // A committed version (tid 4) and a concurrent writer's version built under its
    // working tid 9, keeping everything up to 4, then committed as 5.
    let c1 = vec![rec(1, 40), rec(3, 70)];
    let p = build(1, PS, US, None, 0, &ver(4, true, 0, &c1))
        .unwrap()
        .unwrap();
    let c2 = vec![rec(1, 40), rec(2, 500)];
    let w = build(1, PS, US, Some(&p), 4, &ver0(9, true, 0, &c2))
        .unwrap()
        .unwrap();
    let mut s = w.clone();
    assert!(restamp_as(1, &mut s, US, st(9, 5, 2)));
    // Only the new version's descriptor changed: its tag, txn_size and checksum.
    for i in diff(&w, &s) {
        assert!(
            stamp_field(1, i) || (DESC_SIZE + D_TID..DESC_SIZE + D_TID + 8).contains(&i),
            "byte {i} changed outside the re-tagged descriptor"
        );
    }
    let v = Dhl::visible(1, &s, US, 5).unwrap();
    assert_eq!((v.slot(), v.tid(), v.txn_size()), (1, 5, 2));
    assert_eq!(v.cells().unwrap(), c2);
    // Snapshots before the commit still see the committed version; the working tag is
    // gone, so a second re-tag from it finds nothing.
    assert_eq!(Dhl::visible(1, &s, US, 4).unwrap().cells().unwrap(), c1);
    assert_eq!(Dhl::visible(1, &s, US, 100).unwrap().tid(), 5);
    assert!(!restamp_as(1, &mut s.clone(), US, st(9, 6, 2)));
    // The result is the image a serial writer committing as 5 would have built.
    let serial = build(1, PS, US, Some(&p), 4, &ver0(5, true, 0, &c2))
        .unwrap()
        .unwrap();
    let mut serial = serial;
    assert!(restamp(1, &mut serial, US, 5, 2));
    assert_eq!(s, serial);
    // Overflow pages are re-tagged too.
    let o = OVERFLOW
        .image(1, PS, US, 9, 0, b"chunk of a value")
        .unwrap();
    let mut o2 = o.clone();
    assert!(restamp_as(1, &mut o2, US, st(9, 5, 2)));
    let r = OVERFLOW.open(1, &o2, US).unwrap();
    assert_eq!((r.tid, r.data), (5, &b"chunk of a value"[..]));
}

/// The rules of an in-place edit (`edit.rs`), checked on `new` with the oracle: the
/// committed version of `committed` (tid 3) is there bit for bit, the own version (tid 4)
/// reads back as exactly `want`, and every byte outside the two versions is zero.
fn check_edit(committed: Option<&[u8]>, new: &[u8], want: &[Vec<u8>]) {
    let mut kept = vec![false; PS];
    kept[..RECORD_START].fill(true);
    if let Some(c) = committed {
        let p = reference::visible(1, c, US, 3).expect("the committed version");
        let d = p.slot() * DESC_SIZE;
        assert_eq!(
            new[d..d + DESC_SIZE],
            c[d..d + DESC_SIZE],
            "protected descriptor"
        );
        for (s, e) in p.ranges().unwrap() {
            assert_eq!(new[s..e], c[s..e], "protected bytes [{s}, {e})");
            kept[s..e].fill(true);
        }
        let q = reference::visible(1, new, US, 3).expect("still visible at tid 3");
        assert_eq!(view_facts(&q), view_facts(&p));
    }
    let own = reference::visible(1, new, US, 4).expect("the own version");
    assert_eq!(own.tid(), 4);
    assert_eq!(own.cells().unwrap(), want);
    for (s, e) in own.ranges().unwrap() {
        kept[s..e].fill(true);
    }
    if let Some(at) = (0..PS).find(|&i| !kept[i] && new[i] != 0) {
        panic!("byte {at} belongs to no version but is {}", new[at]);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// In-place edits of a transaction's own version, one after another as a bulk load
    /// makes them (falling back to `build` where the edit declines, as the tree does):
    /// each result keeps the committed version, reads back as the expected cells, costs
    /// what its cells cost and leaves no stale byte; and every sector mix of the committed
    /// image with the last one still shows the committed version.
    #[test]
    fn edits_of_the_own_version_keep_the_committed_one(
        v1 in arb_cells(true, US, capacity(US)),
        v2 in arb_cells(true, US, capacity(US) / 2),
        fresh in any::<bool>(),
        edits in proptest::collection::vec(
            (any::<proptest::sample::Index>(), 0..3u8, strategies::arb_cell(true, US, 40)),
            1..60,
        ),
    ) {
        let committed = if fresh {
            None
        } else {
            build(1, PS, US, None, 0, &ver(3, true, 0, &v1)).unwrap()
        };
        let Some(mut img) = build(1, PS, US, committed.as_deref(), 3, &ver(4, true, 0, &v2)).unwrap() else {
            return Ok(());
        };
        let mut cells = v2.clone();
        let mut edited = 0;
        for (at, op, c) in edits {
            let (remove, insert) = [(false, true), (true, false), (true, true)][op as usize];
            if remove && cells.is_empty() {
                continue;
            }
            let i = at.index(cells.len() + usize::from(!remove));
            let mut want = cells.clone();
            if remove {
                want.remove(i);
            }
            if insert {
                want.insert(i, c.clone());
            }
            match edit(1, &img, US, ed(4, i, remove, insert.then_some(&c[..]))).unwrap() {
                Some((new, used)) => {
                    check_edit(committed.as_deref(), &new, &want);
                    prop_assert_eq!(used, cost(&want));
                    img = new.to_vec();
                    edited += 1;
                }
                None if cost(&want) > capacity(US) => continue,
                None => match build(1, PS, US, Some(&img), 3, &ver(4, true, 0, &want)).unwrap() {
                    Some(b) => img = b,
                    None => continue,
                },
            }
            cells = want;
        }
        if let (Some(c), true) = (&committed, edited > 0) {
            let p = view_facts(&reference::visible(1, c, US, 3).unwrap());
            for mask in 0..1u32 << (PS / SECTOR) {
                let mut mix = c.clone();
                for k in 0..PS / SECTOR {
                    if mask >> k & 1 == 1 {
                        mix[k * SECTOR..(k + 1) * SECTOR]
                            .copy_from_slice(&img[k * SECTOR..(k + 1) * SECTOR]);
                    }
                }
                let v = reference::visible(1, &mix, US, 3).unwrap();
                prop_assert_eq!(view_facts(&v), p);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// The first edit of a committed leaf (over an older version or none in the other
    /// slot) is exactly `build`'s image of the edited version where the cells are
    /// distinct, as a tree's are; it declines exactly where `build` finds no room or the
    /// version exceeds the capacity; and the oracle's rules hold on every result.
    #[test]
    fn a_first_edit_is_build_of_the_edited_version(
        older in arb_cells(true, US, capacity(US)),
        v in arb_cells(true, US, capacity(US)),
        stale in any::<bool>(),
        at in any::<proptest::sample::Index>(),
        op in 0..3u8,
        c in strategies::arb_cell(true, US, 300),
    ) {
        let under = if stale {
            build(1, PS, US, None, 0, &ver(2, true, 0, &older)).unwrap()
        } else {
            None
        };
        let Some(committed) = build(1, PS, US, under.as_deref(), 2, &ver(3, true, 0, &v)).unwrap() else {
            return Ok(());
        };
        let (remove, insert) = [(false, true), (true, false), (true, true)][op as usize];
        if remove && v.is_empty() {
            return Ok(());
        }
        let i = at.index(v.len() + usize::from(!remove));
        let mut want = v.clone();
        if remove {
            want.remove(i);
        }
        if insert {
            want.insert(i, c.clone());
        }
        let got = edit(1, &committed, US, ed(4, i, remove, insert.then_some(&c[..]))).unwrap();
        // As the tree builds it: txn_size 0 until the commit stamps it.
        let tree_built = Version { txn_size: 0, ..ver(4, true, 0, &want) };
        let built = build(1, PS, US, Some(&committed), 3, &tree_built).unwrap();
        let mut distinct = want.clone();
        distinct.sort();
        distinct.dedup();
        let distinct = distinct.len() == want.len() && {
            let mut p = v.clone();
            p.sort();
            p.dedup();
            p.len() == v.len()
        };
        match (got, built) {
            (Some((new, used)), b) => {
                check_edit(Some(&committed), &new, &want);
                prop_assert_eq!(used, cost(&want));
                if distinct {
                    let b = b.expect("build fits where the edit does");
                    let diff = (0..PS).find(|&k| new[k] != b[k]);
                    prop_assert!(diff.is_none(), "images differ first at byte {:?}", diff);
                }
            }
            (None, Some(_)) => prop_assert!(cost(&want) > capacity(US), "declined where build fits"),
            (None, None) => {}
        }
    }
}

/// The first edit of a committed leaf never writes a byte of the committed version:
/// after it, and in every sector mix of it with the committed image, the committed
/// version reads back whole. Planted: an edit that places its cell and array without
/// marking the committed version's bytes overwrites them, which its release check sees:
/// it declines (the tree then rebuilds the node through `build`).
#[test]
fn a_first_edit_never_writes_the_committed_versions_bytes() {
    use crate::seam::{plant, Plant};
    let cells: Vec<Vec<u8>> = (0..24).map(|k| rec(k, 40)).collect();
    let older = build(1, PS, US, None, 0, &ver(2, true, 0, &cells[..8]))
        .unwrap()
        .unwrap();
    let committed = build(1, PS, US, Some(&older), 2, &ver(3, true, 0, &cells))
        .unwrap()
        .unwrap();
    let p = view_facts(&reference::visible(1, &committed, US, 3).unwrap());
    let edit_5 = || edit(1, &committed, US, ed(4, 5, false, Some(&rec(100, 40))));
    plant(Plant::DhlFirstEditWrongHoles, true);
    let planted = edit_5();
    plant(Plant::DhlFirstEditWrongHoles, false);
    assert!(
        planted.unwrap().is_none(),
        "the planted placement was not caught"
    );
    let (new, _) = edit_5().unwrap().expect("the edit fits");
    for mask in 0..1u32 << (PS / SECTOR) {
        let mut mix = committed.clone();
        for k in 0..PS / SECTOR {
            if mask >> k & 1 == 1 {
                mix[k * SECTOR..(k + 1) * SECTOR]
                    .copy_from_slice(&new[k * SECTOR..(k + 1) * SECTOR]);
            }
        }
        let v = reference::visible(1, &mix, US, 3).unwrap();
        assert_eq!(view_facts(&v), p, "sector mix {mask:#x}");
    }
}

/// An edit declines what it is not for: an interior node; a cell index out of range is
/// an error. The first edit of a committed leaf is `build`'s image of the edited version.
#[test]
fn edits_decline_other_versions_and_refuse_bad_indexes() {
    let cells = vec![rec(1, 20), rec(2, 30)];
    let committed = build(1, PS, US, None, 0, &ver(3, true, 0, &cells))
        .unwrap()
        .unwrap();
    let (first, _) = edit(1, &committed, US, ed(4, 0, false, Some(&rec(0, 20))))
        .unwrap()
        .unwrap();
    let want = [rec(0, 20), rec(1, 20), rec(2, 30)];
    let tree_built = Version {
        txn_size: 0,
        ..ver(4, true, 0, &want)
    };
    let built = build(1, PS, US, Some(&committed), 3, &tree_built);
    assert!(
        first[..] == built.unwrap().unwrap()[..],
        "the first edit is build's image"
    );
    check_edit(Some(&committed), &first, &want);
    assert!(matches!(
        edit(1, &committed, US, ed(4, 3, true, None)),
        Err(Error::InvalidArgument(_))
    ));
    let interior: Vec<Vec<u8>> = cells
        .iter()
        .map(|c| interior_from_key_part(US, c, 9))
        .collect();
    let own = build(1, PS, US, None, 0, &ver(4, false, 5, &interior))
        .unwrap()
        .unwrap();
    assert!(edit(1, &own, US, ed(4, 0, true, None)).unwrap().is_none());
    let own = build(1, PS, US, Some(&committed), 3, &ver(4, true, 0, &cells))
        .unwrap()
        .unwrap();
    assert!(matches!(
        edit(1, &own, US, ed(4, 2, true, None)),
        Err(Error::InvalidArgument(_))
    ));
    let (new, used) = edit(1, &own, US, ed(4, 2, false, Some(&rec(3, 40))))
        .unwrap()
        .unwrap();
    assert_eq!(used, cost(&[rec(1, 20), rec(2, 30), rec(3, 40)]));
    check_edit(
        Some(&committed),
        &new,
        &[rec(1, 20), rec(2, 30), rec(3, 40)],
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Subsequent edits of a leaf in one transaction start from what the previous edit
    /// of it knew (`edit::LastEdit`): each gives exactly the image an edit that walks the
    /// page afresh gives, and the version holds the cells a model of the edits holds.
    #[test]
    fn an_edit_from_the_last_edit_is_the_edit_afresh(
        v in arb_cells(true, US, capacity(US) / 2),
        ops in proptest::collection::vec(
            (any::<bool>(), any::<proptest::sample::Index>(), strategies::arb_cell(true, US, 120)),
            1..12,
        ),
    ) {
        let Some(committed) = build(1, PS, US, None, 2, &ver(3, true, 0, &v)).unwrap() else {
            return Ok(());
        };
        let mut page: PageRef = committed.into();
        let mut model = v.clone();
        for (n, (remove, at, c)) in ops.iter().enumerate() {
            let remove = *remove && !model.is_empty();
            let i = at.index(model.len() + usize::from(!remove));
            let e = || ed(4, i, remove, (!remove).then_some(&c[..]));
            let warm = edit(1, &page, US, e()).unwrap();
            if n > 0 {
                edit::forget_last_edits();
                let cold = edit(1, &page, US, e()).unwrap();
                prop_assert_eq!(
                    warm.as_ref().map(|(p, u)| (p.to_vec(), *u)),
                    cold.as_ref().map(|(p, u)| (p.to_vec(), *u)),
                    "edit {} differs from the edit afresh", n
                );
            }
            let Some((next, _)) = warm else {
                break;
            };
            if remove {
                model.remove(i);
            } else {
                model.insert(i, c.clone());
            }
            let got = reference::visible(1, &next, US, 4).expect("the edited version");
            prop_assert_eq!(got.cells().unwrap(), model.clone());
            page = next;
        }
    }
}
