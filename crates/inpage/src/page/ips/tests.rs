//! Unit tests of the IPS page: limits, round trips, versions and rollback, torn writes of
//! every sector mix, `edit` against `build`, corruption, restamping, recovery's views, and
//! planted bugs the torn-write and corruption checks must catch.
//!
//! Invariant: expectations come from the format rules or from the cell lists the test
//! itself wrote (a model), never from the code under test.

use super::*;
use crate::page::cell::{interior_cell, leaf_cell_inline, CELL_HEADER};
use crate::page::cells::CellArray;
use crate::page::layout::DescInfo;
use crate::page::strategies::{self, ed, rec, st, SIZES};
use crate::page::{PageRef, PAGE_TRAILER};
use crate::seam::{plant, Plant};
use proptest::prelude::*;

/// [`super::build`] as an owned buffer the tests can tear and flip bits in (the crate
/// hands images out as shared `PageRef`s).
fn build(
    pgno: Pgno,
    page_size: usize,
    usable: usize,
    base: Option<&[u8]>,
    keep_max_tid: u64,
    version: &Version<'_>,
) -> Result<Option<Vec<u8>>> {
    super::build(pgno, page_size, usable, base, keep_max_tid, version)
        .map(|img| img.map(|i| i.to_vec()))
}

/// [`super::edit`] as an owned buffer (see [`build`]).
fn edit(
    pgno: Pgno,
    page: &[u8],
    usable: usize,
    tid: u64,
    i: usize,
    remove: bool,
    insert: Option<&[u8]>,
) -> Result<Option<(Vec<u8>, usize)>> {
    super::edit(pgno, page, usable, ed(tid, i, remove, insert))
        .map(|r| r.map(|(img, used)| (img.to_vec(), used)))
}

const PS: usize = 4096;
const US: usize = PS - PAGE_TRAILER;
const SECTOR: usize = 512;

fn ver(tid: u64, leaf: bool, right: Pgno, cells: &[Vec<u8>]) -> Version<'_> {
    Version {
        tid,
        txn_size: 0,
        leaf,
        right,
        cells,
    }
}

fn cost(cells: &[Vec<u8>]) -> usize {
    cells.iter().map(|c| cell_cost(c.len())).sum()
}

/// Cells a reader at `max_tid` sees, read through the detached key-ordered view (what the
/// tree reads); checked against the view's own decoding.
fn seen(buf: &[u8], usable: usize, max_tid: u64) -> Result<Vec<Vec<u8>>> {
    let v = Ips::visible(1, buf, usable, max_tid)?;
    let d = v.detach();
    let a: CellArray<'_> = d.attach(buf);
    let cells = a.cells()?;
    assert_eq!(cells, v.cells(), "detached view and slot replay disagree");
    assert_eq!(a.right_child(), v.right_child());
    Ok(cells)
}

fn arb_cell(leaf: bool, usable: usize) -> impl Strategy<Value = Vec<u8>> {
    strategies::arb_cell(leaf, usable, 24)
}

/// Cells whose total cost is at most `budget` (a prefix of a random list).
fn arb_cells(leaf: bool, usable: usize, budget: usize) -> impl Strategy<Value = Vec<Vec<u8>>> {
    strategies::arb_cells(arb_cell(leaf, usable), 200, budget, cell_cost)
}

/// One-cell change: (kind 0 insert / 1 replace / 2 remove, position seed, new cell).
type Op = (u8, usize, Vec<u8>);

fn arb_ops(leaf: bool, usable: usize) -> impl Strategy<Value = Vec<Op>> {
    proptest::collection::vec((0..3u8, any::<usize>(), arb_cell(leaf, usable)), 0..12)
}

fn apply(cells: &[Vec<u8>], (kind, pos, cell): &Op) -> Vec<Vec<u8>> {
    let mut out = cells.to_vec();
    match (kind, out.is_empty()) {
        (0, _) | (_, true) => out.insert(pos % (out.len() + 1), cell.clone()),
        (1, false) => {
            let i = pos % out.len();
            out[i] = cell.clone();
        }
        _ => {
            out.remove(pos % cells.len());
        }
    }
    out
}

/// The bytes version `p` owns in its image: descriptor, TB, slots [0, nslots) and
/// records [rec_lo, usable), as (start, end) ranges.
fn owned_ranges(p: &View<'_>) -> Vec<(usize, usize)> {
    let d = p.slot() * DESC_SIZE;
    let tb = tb_off(p.usable, p.slot());
    vec![
        (d, d + DESC_SIZE),
        (tb, tb + tb_len(p.usable)),
        (slots_start(p.usable), p.slots_end()),
        (p.rec_lo(), p.usable),
    ]
}

/// The ranges version `v`'s crc covers (what a torn write may damage).
fn covered_ranges(v: &View<'_>) -> Vec<(usize, usize)> {
    let d = v.slot() * DESC_SIZE;
    let tb = tb_off(v.usable, v.slot());
    let ss = slots_start(v.usable);
    vec![
        (d, d + D_CRC + 4),
        (tb, tb + tb_len(v.usable)),
        (ss + SLOT_SIZE * v.base_nslots(), v.slots_end()),
        (v.rec_lo(), v.rec_hi()),
    ]
}

#[test]
fn layout_and_limits() {
    for ps in SIZES {
        let us = ps - PAGE_TRAILER;
        assert!(slots_start(us) < us / 2, "{ps}: header region");
        assert_eq!(tb_len(us) % 8, 0);
        assert!(tb_len(us) * 8 >= max_slots(us));
        // A maximal cell costs well under half the capacity (the split bound).
        assert!(
            2 * cell_cost(max_cell(us)) < capacity(us),
            "{ps}: max cell {} vs capacity {}",
            max_cell(us),
            capacity(us)
        );
        // A capacity of the smallest cells fits a fresh page and its slot count.
        let n = capacity(us) / cell_cost(CELL_HEADER);
        let cells: Vec<Vec<u8>> = (0..n).map(|_| leaf_cell_inline(&[], &[])).collect();
        assert!(n <= max_slots(us));
        let b = build(1, ps, us, None, 0, &ver(1, true, 0, &cells))
            .unwrap()
            .expect("capacity fits fresh");
        assert_eq!(seen(&b, us, 1).unwrap(), cells);
        // Heads lie in [0, 64): the journal's raw scan.
        assert_eq!(descriptor_heads(&b).unwrap(), [(1, 0), (0, 0)]);
    }
    // The format's field positions, by hand.
    let b = build(
        1,
        PS,
        US,
        None,
        0,
        &ver(0x0102, false, 77, &[interior_cell(5, b"k")]),
    )
    .unwrap()
    .unwrap();
    assert_eq!(get_u64(&b, 0), 0x0102);
    assert_eq!(get_u16(&b, 12), 1); // nslots
    assert_eq!(get_u16(&b, 14), 0); // base
    let c_len = interior_cell(5, b"k").len();
    assert_eq!(get_u16(&b, 16), US - c_len); // rec_lo
    assert_eq!(get_u16(&b, 18), US); // rec_hi
    assert_eq!(b[20], page_type::INTERIOR);
    assert_eq!(get_u16(&b, 22), 1);
    assert_eq!(get_u32(&b, 24), 77);
    let ss = slots_start(US);
    assert_eq!((get_u16(&b, ss), get_u16(&b, ss + 2)), (US - c_len, 0xFFFF));
}

#[test]
fn build_rejects_bad_arguments() {
    let c = vec![rec(1, 20)];
    assert!(build(1, PS, US, None, 0, &ver(0, true, 0, &c)).is_err());
    assert!(build(1, PS, 100, None, 0, &ver(1, true, 0, &c)).is_err());
    assert!(build(
        1,
        PS,
        US,
        None,
        0,
        &ver(1, false, 0, &[interior_cell(3, b"a")])
    )
    .is_err());
    assert!(build(
        1,
        PS,
        US,
        None,
        0,
        &ver(1, false, 4, &[interior_cell(0, b"a")])
    )
    .is_err());
    let mut bad = rec(1, 20);
    bad.push(0);
    assert!(build(1, PS, US, None, 0, &ver(1, true, 0, &[bad])).is_err());
    // A stamped version: commit stamps IPS versions, the builder refuses to.
    let stamped = Version {
        txn_size: 3,
        ..ver(1, true, 0, &c)
    };
    assert!(build(1, PS, US, None, 0, &stamped).is_err());
    // Older than the protected version.
    let b = build(1, PS, US, None, 0, &ver(5, true, 0, &c))
        .unwrap()
        .unwrap();
    assert!(build(1, PS, US, Some(&b), 5, &ver(3, true, 0, &c)).is_err());
}

#[test]
fn order_comes_from_pred_links_not_from_addresses() {
    // P: keys 10, 20, 30. V inserts 15 and 25, removes 30, replaces 10.
    let p_cells = vec![rec(10, 20), rec(20, 20), rec(30, 20)];
    let b1 = build(1, PS, US, None, 0, &ver(1, true, 0, &p_cells))
        .unwrap()
        .unwrap();
    let v_cells = vec![rec(10, 40), rec(15, 20), rec(20, 20), rec(25, 30)];
    let b2 = build(1, PS, US, Some(&b1), 1, &ver(2, true, 0, &v_cells))
        .unwrap()
        .unwrap();
    let v = Ips::visible(1, &b2, US, 2).unwrap();
    assert_eq!(
        (v.slot(), v.base_nslots(), v.nslots(), v.nlive()),
        (1, 3, 6, 4)
    );
    // Slot 1 (key 20) is kept, 0 and 2 tombstoned; new slots 3, 4, 5 appended in order.
    assert_eq!(v.order(), vec![3, 4, 1, 5]);
    assert!(v.dead(0) && v.dead(2) && !v.dead(1));
    assert_eq!(v.entry(3).1, NO_PRED);
    assert_eq!(v.entry(4).1, 3);
    assert_eq!(v.entry(5).1, 1);
    assert_eq!(seen(&b2, US, 2).unwrap(), v_cells);
    assert_eq!(seen(&b2, US, 1).unwrap(), p_cells);
    // Rollback is one descriptor's tid.
    let mut rb = b2.clone();
    assert!(invalidate(&mut rb, 2));
    assert_eq!(seen(&rb, US, 2).unwrap(), p_cells);
    assert_eq!(rb[..DESC_SIZE], b2[..DESC_SIZE]);
}

#[test]
fn edit_appends_one_slot_and_extends_its_own_version_in_place() {
    let p_cells: Vec<Vec<u8>> = (0..20).map(|k| rec(2 * k, 30)).collect();
    let b1 = build(1, PS, US, None, 0, &ver(1, true, 0, &p_cells))
        .unwrap()
        .unwrap();
    // First edit of transaction 2: a new version in slot 1.
    let (b2, used) = edit(1, &b1, US, 2, 5, false, Some(&rec(9, 25)))
        .unwrap()
        .unwrap();
    let mut model = p_cells.clone();
    model.insert(5, rec(9, 25));
    assert_eq!(used, cost(&model));
    let v = Ips::visible(1, &b2, US, 2).unwrap();
    assert_eq!((v.slot(), v.nslots(), v.base_nslots()), (1, 21, 20));
    assert_eq!(seen(&b2, US, 2).unwrap(), model);
    // Second edit: replace cell 0, same slot, in place.
    let (b3, _) = edit(1, &b2, US, 2, 0, true, Some(&rec(0, 50)))
        .unwrap()
        .unwrap();
    model[0] = rec(0, 50);
    let v = Ips::visible(1, &b3, US, 2).unwrap();
    assert_eq!(
        (v.slot(), v.nslots(), v.base_nslots(), v.nlive()),
        (1, 22, 20, 21)
    );
    assert_eq!(seen(&b3, US, 2).unwrap(), model);
    // Only V's descriptor, TB bit, the new slot and the record changed.
    let changed: Vec<usize> = (0..PS).filter(|&i| b2[i] != b3[i]).collect();
    let tb = tb_off(US, 1);
    for &i in &changed {
        assert!(
            (DESC_SIZE..2 * DESC_SIZE).contains(&i)
                || i == tb
                || (slots_start(US) + 4 * 21..slots_start(US) + 4 * 22).contains(&i)
                || (v.rec_lo()..v.rec_lo() + 50).contains(&i),
            "byte {i} changed"
        );
    }
    // P untouched.
    assert_eq!(seen(&b3, US, 1).unwrap(), p_cells);
    // Out-of-range indices are errors, not panics.
    assert!(edit(1, &b3, US, 2, 22, true, None).is_err());
    assert!(edit(1, &b3, US, 2, 22, false, Some(&rec(1, 20))).is_err());
}

#[test]
fn an_empty_version_inherits_nothing_and_the_next_one_is_compact() {
    // P full of garbage (many replacements), then an empty node (a root pointer), then a
    // full node again: the last one is laid out from slot 0 and the page's end.
    let cells: Vec<Vec<u8>> = (0..30).map(|k| rec(k, 60)).collect();
    let mut img = build(1, PS, US, None, 0, &ver(1, false, 9, &[]))
        .unwrap()
        .unwrap();
    img = build(1, PS, US, Some(&img), 1, &ver(2, true, 0, &cells))
        .unwrap()
        .unwrap();
    let p = Ips::visible(1, &img, US, 2).unwrap();
    assert_eq!(p.nslots(), 30);
    let b2 = build(1, PS, US, Some(&img), 2, &ver(3, false, 77, &[]))
        .unwrap()
        .unwrap();
    let e = Ips::visible(1, &b2, US, 3).unwrap();
    assert_eq!(
        (e.nslots(), e.base_nslots(), e.rec_lo(), e.rec_hi()),
        (0, 0, US, US)
    );
    assert_eq!((e.is_leaf(), e.right_child(), e.nlive()), (false, 77, 0));
    // P is intact beside it.
    assert_eq!(seen(&b2, US, 2).unwrap(), cells);
    let b3 = build(1, PS, US, Some(&b2), 3, &ver(4, true, 0, &cells))
        .unwrap()
        .unwrap();
    let w = Ips::visible(1, &b3, US, 4).unwrap();
    assert_eq!((w.base_nslots(), w.nslots(), w.rec_hi()), (0, 30, US));
    assert_eq!(w.rec_lo(), US - 30 * 60);
    assert_eq!(seen(&b3, US, 4).unwrap(), cells);
    assert_eq!(seen(&b3, US, 3).unwrap(), Vec::<Vec<u8>>::new());
    // Torn writes of the compact version over the empty one: relabel P=3 -> check_torn's
    // tids (2 = protected, 3 = new) by building the same history one tid lower.
    let a1 = build(1, PS, US, None, 0, &ver(1, true, 0, &cells))
        .unwrap()
        .unwrap();
    let a2 = build(1, PS, US, Some(&a1), 1, &ver(2, false, 5, &[]))
        .unwrap()
        .unwrap();
    let a3 = build(1, PS, US, Some(&a2), 2, &ver(3, true, 0, &cells))
        .unwrap()
        .unwrap();
    assert!(check_torn(US, &a2, &a3, &[], &cells, all_masks(US)).is_ok());
}

#[test]
fn an_own_empty_version_is_not_extended_over_the_committed_one() {
    // Transaction 2 empties a leaf (an empty version inherits nothing), then inserts into
    // it: appending in place would write slot 0 and the page's end, which are P's.
    let cells: Vec<Vec<u8>> = (0..10).map(|k| rec(k, 40)).collect();
    let b1 = build(1, PS, US, None, 0, &ver(1, true, 0, &cells))
        .unwrap()
        .unwrap();
    let e = build(1, PS, US, Some(&b1), 1, &ver(2, true, 0, &[]))
        .unwrap()
        .unwrap();
    match edit(1, &e, US, 2, 0, false, Some(&rec(99, 30))).unwrap() {
        None => {}
        Some((img, _)) => {
            assert_eq!(seen(&img, US, 1).unwrap(), cells, "P damaged");
            assert_eq!(seen(&img, US, 2).unwrap(), vec![rec(99, 30)]);
        }
    }
    // The same on a fresh page (nothing beside it) is extended in place.
    let f = build(1, PS, US, None, 0, &ver(2, true, 0, &[]))
        .unwrap()
        .unwrap();
    let (img, used) = edit(1, &f, US, 2, 0, false, Some(&rec(99, 30)))
        .unwrap()
        .unwrap();
    assert_eq!(used, cell_cost(30));
    assert_eq!(seen(&img, US, 2).unwrap(), vec![rec(99, 30)]);
}

#[test]
fn full_pages_refuse_and_fresh_pages_take_capacity() {
    // Keep replacing one row until the version no longer fits: None, then the node goes
    // to a fresh page (what relocation does), where it fits compactly again.
    let cells: Vec<Vec<u8>> = (0..40).map(|k| rec(k, 60)).collect();
    assert!(cost(&cells) <= capacity(US));
    let mut img = build(1, PS, US, None, 0, &ver(1, true, 0, &cells))
        .unwrap()
        .unwrap();
    let mut model = cells.clone();
    let mut tid = 1;
    let mut refused = false;
    for n in 0..200u32 {
        tid += 1;
        let i = (n as usize * 7) % model.len();
        model[i] = rec(i as u32, 60 + (n as usize % 3));
        match edit(1, &img, US, tid, i, true, Some(&model[i])).unwrap() {
            Some((b, _)) => img = b,
            None => {
                refused = true;
                assert!(
                    build(1, PS, US, Some(&img), tid - 1, &ver(tid, true, 0, &model))
                        .unwrap()
                        .is_none()
                );
                img = build(1, PS, US, None, 0, &ver(tid, true, 0, &model))
                    .unwrap()
                    .unwrap();
            }
        }
        assert_eq!(seen(&img, US, tid).unwrap(), model);
    }
    assert!(refused, "a page of appends must fill up");
}

/// Base where one slot holds tid 2 (committed) and the other tid 1 (older, from a random
/// history), and a new version with tid 3 built on it, alternating build and edit.
type History = (Vec<u8>, Vec<u8>, Vec<Vec<u8>>, Vec<Vec<u8>>);

fn history(
    usable: usize,
    leaf: bool,
    v1: &[Vec<u8>],
    ops: &[Op],
    by_edit: bool,
) -> Option<History> {
    let ps = usable + PAGE_TRAILER;
    let b1 = build(1, ps, usable, None, 0, &ver(1, leaf, 8, v1)).unwrap()?;
    let (half, rest) = ops.split_at(ops.len() / 2);
    let v2 = half.iter().fold(v1.to_vec(), |c, op| apply(&c, op));
    let b2 = build(1, ps, usable, Some(&b1), 1, &ver(2, leaf, 9, &v2)).unwrap()?;
    let mut v3 = v2.clone();
    let mut b3 = b2.clone();
    if by_edit && leaf {
        for op in rest {
            let before = v3.clone();
            v3 = apply(&v3, op);
            let (i, remove, insert) = one_edit(&before, &v3, op);
            let (b, _) = edit(1, &b3, usable, 3, i, remove, insert.as_deref()).unwrap()?;
            b3 = b;
        }
        if rest.is_empty() {
            return None;
        }
    } else {
        v3 = rest.iter().fold(v3, |c, op| apply(&c, op));
        b3 = build(1, ps, usable, Some(&b2), 2, &ver(3, leaf, 10, &v3)).unwrap()?;
    }
    Some((b2, b3, v2, v3))
}

/// The `edit` arguments that turn `before` into `after` for `op` (see [`apply`]).
fn one_edit(before: &[Vec<u8>], after: &[Vec<u8>], op: &Op) -> (usize, bool, Option<Vec<u8>>) {
    let (kind, pos, cell) = op;
    match (kind, before.is_empty()) {
        (0, _) | (_, true) => (pos % (before.len() + 1), false, Some(cell.clone())),
        (1, false) => (pos % before.len(), true, Some(cell.clone())),
        _ => {
            let i = pos % before.len();
            debug_assert_eq!(after.len() + 1, before.len());
            (i, true, None)
        }
    }
}

/// Check every sector mix in `masks` of `old` -> `new` (P = tid 2, N = tid 3); the number
/// of mixes in which N is not readable. Returns Err with the first violation.
fn check_torn(
    usable: usize,
    old: &[u8],
    new: &[u8],
    p_cells: &[Vec<u8>],
    n_cells: &[Vec<u8>],
    masks: impl Iterator<Item = u64>,
) -> std::result::Result<usize, String> {
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
        let p = seen(&mix, usable, 2).map_err(|e| format!("mask {mask:#x}: P lost: {e}"))?;
        if p != p_cells {
            return Err(format!("mask {mask:#x}: P shows other cells"));
        }
        match seen(&mix, usable, 3) {
            Ok(top) if Ips::visible(1, &mix, usable, 3).unwrap().tid() == 3 => {
                if top != n_cells {
                    return Err(format!("mask {mask:#x}: N valid with other cells"));
                }
            }
            Ok(top) => {
                if top != p_cells {
                    return Err(format!("mask {mask:#x}: fallback is not P"));
                }
                n_invalid += 1;
            }
            Err(Error::Corrupt { .. }) => {
                let mut rolled_back = mix.clone();
                invalidate(&mut rolled_back, 3);
                let p = seen(&rolled_back, usable, 3)
                    .map_err(|e| format!("mask {mask:#x}: P after rollback: {e}"))?;
                if p != p_cells {
                    return Err(format!("mask {mask:#x}: P after rollback differs"));
                }
                n_invalid += 1;
            }
            Err(e) => return Err(format!("mask {mask:#x}: {e}")),
        }
    }
    Ok(n_invalid)
}

fn all_masks(usable: usize) -> std::ops::Range<u64> {
    0..1u64 << ((usable + PAGE_TRAILER) / SECTOR)
}

#[test]
fn torn_write_of_a_full_page_update_shows_both_outcomes() {
    let v1: Vec<Vec<u8>> = (0..(capacity(US) / cell_cost(40)) as u32 - 8)
        .map(|k| rec(2 * k, 40))
        .collect();
    let ops: Vec<Op> = vec![
        (1, 3, rec(6, 150)),
        (0, 1, rec(1, 30)),
        (0, 10, rec(19, 80)),
        (2, 40, vec![]),
    ];
    for by_edit in [false, true] {
        let (old, new, p, n) = history(US, true, &v1, &ops, by_edit).unwrap();
        let invalid = check_torn(US, &old, &new, &p, &n, all_masks(US)).unwrap();
        assert!(invalid >= 128, "sector 0 old hides N in half the mixes");
        assert!(invalid < 256, "the full write shows N");
    }
}

/// Flip each byte of `ranges` in turn; the number of flips after which `slot` still
/// validates (0 when the crc and checks see every one).
fn undetected_flips(buf: &[u8], slot: usize, ranges: &[(usize, usize)]) -> usize {
    let mut missed = 0;
    for &(s, e) in ranges {
        for i in s..e {
            for x in [0x01, 0x03, 0x0C, 0x5A, 0x80] {
                let mut b = buf.to_vec();
                b[i] ^= x;
                if Ips::check_slot(1, &b, US, slot).is_ok() {
                    missed += 1;
                }
            }
        }
    }
    missed
}

/// A version with tombstones and links: P of 30 cells, V replacing, inserting, removing.
fn versioned_page() -> (Vec<u8>, Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let p: Vec<Vec<u8>> = (0..30).map(|k| rec(4 * k, 24)).collect();
    let b1 = build(1, PS, US, None, 0, &ver(1, true, 0, &p))
        .unwrap()
        .unwrap();
    let mut v = p.clone();
    v[3] = rec(12, 40);
    v.insert(7, rec(27, 30));
    v.insert(7, rec(26, 30));
    v.remove(20);
    let b2 = build(1, PS, US, Some(&b1), 1, &ver(2, true, 0, &v))
        .unwrap()
        .unwrap();
    (b2, p, v)
}

#[test]
fn every_covered_byte_is_checked_and_free_bytes_are_not_read() {
    let (b, p, v) = versioned_page();
    assert_eq!(seen(&b, US, 2).unwrap(), v);
    let view = Ips::visible(1, &b, US, 2).unwrap();
    assert_eq!(undetected_flips(&b, 1, &covered_ranges(&view)), 0);
    // The free gap and the trailer are nobody's: flipping them changes no view.
    for i in (view.slots_end()..view.rec_lo()).chain(US..PS) {
        let mut d = b.clone();
        d[i] ^= 0xFF;
        assert_eq!(seen(&d, US, 2).unwrap(), v, "byte {i}");
        assert_eq!(seen(&d, US, 1).unwrap(), p, "byte {i}");
    }
}

#[test]
fn planted_crc_bugs_are_caught() {
    // Bug 1: the crc skips V's slot entries (pred links); bug 2: it skips TB[V]. Either
    // leaves single-byte damage the structural checks cannot see (a pred moved to another
    // earlier slot reorders the node; two tombstone bits swapped keep nlive), so the
    // corruption check must report missed flips under the bug and none without it.
    let (b, p, v) = versioned_page();
    let view = Ips::visible(1, &b, US, 2).unwrap();
    assert_eq!(undetected_flips(&b, 1, &covered_ranges(&view)), 0);
    for bug in [Plant::IpsCrcSkipsSlots, Plant::IpsCrcSkipsTombstones] {
        plant(bug, true);
        let b1 = build(1, PS, US, None, 0, &ver(1, true, 0, &p))
            .unwrap()
            .unwrap();
        let b2 = build(1, PS, US, Some(&b1), 1, &ver(2, true, 0, &v))
            .unwrap()
            .unwrap();
        let view = Ips::visible(1, &b2, US, 2).unwrap();
        let missed = undetected_flips(&b2, 1, &covered_ranges(&view));
        plant(bug, false);
        assert!(
            missed > 0,
            "{bug:?}: the corruption check sees nothing wrong"
        );
    }
}

#[test]
fn restamp_sets_txn_size_and_nothing_else() {
    let (b, _, v) = versioned_page();
    let mut s = b.clone();
    assert!(restamp(1, &mut s, US, 2, 9));
    let changed: Vec<usize> = (0..PS).filter(|&i| b[i] != s[i]).collect();
    let d = DESC_SIZE;
    assert!(changed
        .iter()
        .all(|&i| (d + D_TXN_SIZE..d + D_TXN_SIZE + 4).contains(&i)
            || (d + D_CRC..d + D_CRC + 4).contains(&i)));
    let w = Ips::visible(1, &s, US, 2).unwrap();
    assert_eq!((w.tid(), w.txn_size()), (2, 9));
    assert_eq!(seen(&s, US, 2).unwrap(), v);
    // The committed version is untouched; a page without a tid-5 version is refused.
    assert_eq!(s[..DESC_SIZE], b[..DESC_SIZE]);
    let mut t = s.clone();
    assert!(!restamp(1, &mut t, US, 5, 1));
    assert_eq!(t, s);
    assert!(!restamp(1, &mut t, US, 0, 1));
    // The layout's finalize refuses it with an error.
    use crate::page::layout::{Geometry, PageLayout};
    let g = Geometry {
        page_size: PS,
        usable: US,
    };
    assert!(IPS
        .finalize(1, PageRef::from(s.clone()), g, st(5, 5, 1))
        .is_err());
    let f = IPS
        .finalize(1, PageRef::from(b.clone()), g, st(2, 2, 4))
        .unwrap();
    assert_eq!(Ips::visible(1, &f, US, 2).unwrap().txn_size(), 4);
    // Only the descriptor changes: the trailer (never checked on IPS pages) is left as
    // the transaction wrote it.
    let changed: Vec<usize> = (0..PS).filter(|&i| b[i] != f[i]).collect();
    assert!(changed
        .iter()
        .all(|&i| (d + D_TXN_SIZE..d + D_TXN_SIZE + 4).contains(&i)
            || (d + D_CRC..d + D_CRC + 4).contains(&i)));
}

#[test]
fn finalize_retags_a_working_version_for_its_commit_tid() {
    use crate::page::layout::{Geometry, PageLayout};
    let g = Geometry {
        page_size: PS,
        usable: US,
    };
    // A committed version (tid 1) and a concurrent writer's version built under its
    // working tid 9, keeping everything up to 1, then committed as 2.
    let c1 = vec![rec(1, 40), rec(3, 70)];
    let p = build(1, PS, US, None, 0, &ver(1, true, 0, &c1))
        .unwrap()
        .unwrap();
    let c2 = vec![rec(1, 40), rec(2, 500), rec(3, 70)];
    let w = build(1, PS, US, Some(&p), 1, &ver(9, true, 0, &c2))
        .unwrap()
        .unwrap();
    let f = IPS
        .finalize(1, PageRef::from(w.clone()), g, st(9, 2, 3))
        .unwrap();
    let d = DESC_SIZE;
    for i in (0..PS).filter(|&i| w[i] != f[i]) {
        assert!(
            (d..d + 8).contains(&i)
                || (d + D_TXN_SIZE..d + D_TXN_SIZE + 4).contains(&i)
                || (d + D_CRC..d + D_CRC + 4).contains(&i),
            "byte {i} changed outside the re-tagged descriptor"
        );
    }
    let v = Ips::visible(1, &f, US, 2).unwrap();
    assert_eq!((v.tid(), v.txn_size()), (2, 3));
    assert_eq!(seen(&f, US, 2).unwrap(), c2);
    assert_eq!(seen(&f, US, 1).unwrap(), c1);
    assert_eq!(Ips::visible(1, &f, US, 100).unwrap().tid(), 2);
    // The same image a serial writer committing as 2 gets.
    let serial = build(1, PS, US, Some(&p), 1, &ver(2, true, 0, &c2))
        .unwrap()
        .unwrap();
    let serial = IPS
        .finalize(1, PageRef::from(serial), g, st(2, 2, 3))
        .unwrap();
    assert_eq!(f, serial);
    // Nothing is tagged 9 any more; overflow pages re-tag too.
    assert!(IPS.finalize(1, f.clone(), g, st(9, 3, 3)).is_err());
    let o = OVERFLOW
        .image(4, PS, US, 9, 0, b"chunk of a value")
        .unwrap();
    let o = IPS.finalize(4, PageRef::from(o), g, st(9, 2, 3)).unwrap();
    let r = OVERFLOW.open(4, &o, US).unwrap();
    assert_eq!((r.tid, r.data), (2, &b"chunk of a value"[..]));
    // A layout that keeps tids in its cells refuses to re-tag.
    assert!(!crate::page::mvbt::LS_MVBT.retags());
    assert!(IPS.retags() && crate::page::double_header::DHL.retags());
}

#[test]
fn overflow_pages_and_recovery_views() {
    let data: Vec<u8> = (0..1000u32).map(|i| (i * 7) as u8).collect();
    let mut o = OVERFLOW.image(3, PS, US, 6, 42, &data).unwrap();
    let v = OVERFLOW.open(3, &o, US).unwrap();
    assert_eq!((v.tid, v.txn_size, v.next, v.data), (6, 0, 42, &data[..]));
    assert_eq!(
        Ips::page_versions(3, &o, US),
        [
            Some(DescInfo {
                slot: 0,
                tid: 6,
                txn_size: 0,
                valid: true
            }),
            None
        ]
    );
    // Not a tree page.
    assert!(Ips::visible(3, &o, US, 10).is_err());
    // Bound to page 3: nowhere else does it verify.
    assert_eq!(
        Ips::page_versions(4, &o, US)[0].map(|d| d.valid),
        Some(false)
    );
    assert!(OVERFLOW.open(4, &o, US).is_err());
    assert!(!restamp(4, &mut o.clone(), US, 6, 3));
    assert!(restamp(3, &mut o, US, 6, 3));
    assert_eq!(OVERFLOW.open(3, &o, US).unwrap().txn_size, 3);
    assert_eq!(descriptor_heads(&o).unwrap(), [(6, 3), (0, 0)]);
    for i in (0..D_CRC + 4).chain(VERSION_HEADS..VERSION_HEADS + data.len()) {
        let mut d = o.clone();
        d[i] ^= 1;
        assert!(OVERFLOW.open(3, &d, US).is_err(), "byte {i}");
    }
    assert!(OVERFLOW.image(1, PS, US, 0, 1, &data).is_err());
    assert!(OVERFLOW
        .image(1, PS, US, 1, 1, &vec![0; overflow_data(US) + 1])
        .is_err());

    // Tree pages: both versions, a torn one shows as invalid; invalidate drops one.
    let (b, _, _) = versioned_page();
    let pv = Ips::page_versions(1, &b, US);
    assert_eq!(pv[0].map(|d| (d.tid, d.valid)), Some((1, true)));
    assert_eq!(pv[1].map(|d| (d.tid, d.valid)), Some((2, true)));
    let mut t = b.clone();
    let last_rec = Ips::visible(1, &t, US, 2).unwrap().rec_lo();
    t[last_rec] ^= 1;
    assert_eq!(
        Ips::page_versions(1, &t, US)[1].map(|d| d.valid),
        Some(false)
    );
    assert_eq!(
        Ips::page_versions(1, &t, US)[0].map(|d| d.valid),
        Some(true)
    );
    assert!(invalidate(&mut t, 2));
    assert!(!invalidate(&mut t, 2));
    assert_eq!(Ips::page_versions(1, &t, US)[1], None);
    assert!(Ips::page_versions(1, &b[..100], US) == [None, None]);
    // The same through the layout's PageVersions, as the counting commit calls it.
    use crate::page::layout::{PageLayout, PageVersions};
    let pv: &dyn PageVersions =
        PageLayout::versions(&IPS).expect("IPS keeps versions side by side");
    assert_eq!(pv.heads(&b), Some([(1, 0), (2, 0)]));
    assert_eq!(pv.versions(1, &b, US), Ips::page_versions(1, &b, US));
    assert_eq!(
        pv.versions(3, &o, US)[0].map(|d| (d.tid, d.valid)),
        Some((6, true))
    );
    let mut c = b.clone();
    assert!(pv.invalidate(&mut c, 1));
    assert_eq!(c[SECTOR..], b[SECTOR..], "rollback writes sector 0 only");
    assert_eq!(seen(&c, US, 2).unwrap(), seen(&b, US, 2).unwrap());
}

#[test]
fn memo_is_per_image_not_per_page() {
    let (b, _, v) = versioned_page();
    let good = PageRef::from(b.clone());
    let n = visible_node(1, &good, US, 2).unwrap();
    assert_eq!(n.attach(&good).cells().unwrap(), v);
    // Same page number, damaged copy: must be validated again and refused at tid 2.
    let mut d = b.clone();
    let lo = Ips::visible(1, &d, US, 2).unwrap().rec_lo();
    d[lo + 1] ^= 0x40;
    let bad = PageRef::from(d);
    assert!(visible_node(1, &bad, US, 2).is_err());
    // The memo still answers for the good image, and per reader snapshot.
    let again = visible_node(1, &good, US, 2).unwrap();
    assert_eq!(again.attach(&good).cells().unwrap(), v);
    let older = visible_node(1, &good, US, 1).unwrap();
    assert_eq!(older.ncells(), 30);
    // An edit of the remembered image (which skips validating it again) gives the same
    // image as an edit of an unremembered copy, and the damaged copy is refused.
    let remembered = edit(1, &good, US, 3, 2, true, Some(&rec(5, 33))).unwrap();
    let copy = edit(1, &b.clone(), US, 3, 2, true, Some(&rec(5, 33))).unwrap();
    assert_eq!(remembered, copy);
    assert!(edit(1, &bad, US, 3, 2, true, None).is_err());
}

/// Restamp `img` as the commit does, once through the version its builder sealed (which
/// must be recorded) and once through validation (the record forgotten): the images must
/// be byte-identical and the nodes the same cells, key order and used capacity.
fn sealed_matches_validated(pgno: Pgno, img: &[u8], tid: u64) -> Opened {
    assert!(sealed_holds(pgno), "the builder recorded page {pgno}");
    let mut fast = img.to_vec();
    let (ok, fnode) = restamp_node(pgno, &mut fast, US, st(tid, tid, 3));
    assert!(ok);
    assert!(!sealed_holds(pgno), "the restamp took the record");
    let mut slow = img.to_vec();
    let (ok, snode) = restamp_node(pgno, &mut slow, US, st(tid, tid, 3));
    assert!(ok);
    assert_eq!(
        fast, slow,
        "restamp through the sealed record changed other bytes"
    );
    let ((fs, f), (ss, s)) = (fnode.unwrap(), snode.unwrap());
    assert_eq!(fs, ss);
    assert_eq!(f.order, s.order);
    assert_eq!(f.used, s.used);
    assert_eq!(
        f.node.attach(&fast).cells().unwrap(),
        s.node.attach(&slow).cells().unwrap()
    );
    let v = Ips::visible(pgno, &slow, US, tid).unwrap();
    assert_eq!(f.used, v.used());
    f
}

#[test]
fn the_commit_takes_what_the_builder_sealed_only_if_the_bytes_are_the_sealed_ones() {
    sealed_forget();
    let cells: Vec<Vec<u8>> = (0..20).map(|k| rec(k * 2, 60)).collect();
    let b1 = build(7, PS, US, None, 0, &ver(1, true, 0, &cells))
        .unwrap()
        .unwrap();
    let n = sealed_matches_validated(7, &b1, 1);
    assert_eq!(n.node.attach(&b1).cells().unwrap(), cells);
    // An edit over the committed version, then the same through a remembered image.
    let (e, used) = edit(7, &b1, US, 2, 5, false, Some(&rec(9, 40)))
        .unwrap()
        .unwrap();
    let mut model = cells.clone();
    model.insert(5, rec(9, 40));
    assert_eq!(used, cost(&model));
    let n = sealed_matches_validated(7, &e, 2);
    assert_eq!(n.node.attach(&e).cells().unwrap(), model);
    // A byte of the version's own record changed after sealing: the record is not
    // taken, the page is validated, and a page failing validation is not stamped.
    let (e, _) = edit(7, &b1, US, 2, 5, false, Some(&rec(9, 40)))
        .unwrap()
        .unwrap();
    let mut bad = e.clone();
    let lo = Ips::visible(7, &e, US, 2).unwrap().rec_lo();
    bad[lo + 12] ^= 1;
    let (ok, node) = restamp_node(7, &mut bad, US, st(2, 2, 3));
    assert!(!ok && node.is_none());
    // A record for another page, or for the other descriptor slot, is not taken either.
    let (e, _) = edit(7, &b1, US, 2, 0, true, None).unwrap().unwrap();
    let mut other = e.clone();
    let (ok, node) = restamp_node(8, &mut other, US, st(2, 2, 3));
    // Nor is the image: its checksum is bound to page 7, so as page 8 it does not
    // validate, and nothing is stamped.
    assert!(!ok && node.is_none() && sealed_holds(7));
    assert_eq!(other, e);
    let (ok, node) = restamp_node(7, &mut other, US, st(2, 2, 3));
    assert!(ok && !sealed_holds(7));
    assert_eq!(node.unwrap().1.order.len(), 19);
}

#[test]
fn builds_and_edits_of_a_remembered_image_equal_those_of_a_copy() {
    let (b, _, v) = versioned_page();
    let good = PageRef::from(b.clone());
    // Remember the image (as the tree's descent does), then build and edit over it and
    // over an unremembered copy.
    visible_node(1, &good, US, 2).unwrap();
    let mut next = v.clone();
    next.remove(3);
    next.push(rec(900, 50));
    let over_memo = build(1, PS, US, Some(&good), 2, &ver(3, true, 0, &next)).unwrap();
    let over_copy = build(1, PS, US, Some(&b.clone()), 2, &ver(3, true, 0, &next)).unwrap();
    assert_eq!(over_memo, over_copy);
    assert_eq!(seen(&over_memo.unwrap(), US, 3).unwrap(), next);
    let e_memo = edit(1, &good, US, 3, 0, true, None).unwrap();
    let e_copy = edit(1, &b.clone(), US, 3, 0, true, None).unwrap();
    assert_eq!(e_memo, e_copy);
    assert_eq!(e_memo.unwrap().1, cost(&v[1..]));
}

#[test]
fn layout_describe_and_classify() {
    use crate::page::layout::{Geometry, PageLayout};
    let g = Geometry {
        page_size: PS,
        usable: US,
    };
    let (b, _, v) = versioned_page();
    let lines = IPS.describe(1, &b, g, 2);
    assert_eq!(lines.len(), 3);
    assert!(lines[1].contains("tid 2") && lines[1].contains("valid"));
    assert!(
        lines[2].contains(&format!("{} cells", v.len())),
        "{lines:?}"
    );
    assert_eq!(IPS.classify(1, &b, g, 2), "leaf");
    let o = OVERFLOW.image(1, PS, US, 1, 0, b"xy").unwrap();
    assert_eq!(IPS.classify(1, &o, g, 2), "overflow");
    assert_eq!(IPS.classify(1, &vec![0; PS], g, 2), "unused");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn round_trip(
        (leaf, cells) in any::<bool>().prop_flat_map(|leaf| (Just(leaf), arb_cells(leaf, US, capacity(US)))),
        right in 1..u32::MAX,
    ) {
        let b = build(1, PS, US, None, 0, &ver(7, leaf, right, &cells)).unwrap().unwrap();
        prop_assert_eq!(seen(&b, US, 7).unwrap(), cells.clone());
        let v = Ips::visible(1, &b, US, 7).unwrap();
        prop_assert_eq!((v.tid(), v.txn_size(), v.is_leaf(), v.slot()), (7, 0, leaf, 0));
        prop_assert_eq!(v.right_child(), if leaf { 0 } else { right });
        prop_assert_eq!(v.used(), cost(&cells));
        prop_assert!(Ips::visible(1, &b, US, 6).is_err());
        let page = PageRef::from(b.clone());
        let n = visible_node(1, &page, US, 7).unwrap();
        prop_assert_eq!(n.attach(&page).cells().unwrap(), cells);
    }

    #[test]
    fn versions_keep_p_and_roll_back(
        v1 in arb_cells(true, US, capacity(US)),
        ops in arb_ops(true, US),
        extra in arb_ops(true, US),
    ) {
        let b1 = build(1, PS, US, None, 0, &ver(1, true, 0, &v1)).unwrap().unwrap();
        let v2 = ops.iter().fold(v1.clone(), |c, op| apply(&c, op));
        let Some(b2) = build(1, PS, US, Some(&b1), 1, &ver(2, true, 0, &v2)).unwrap() else {
            return Ok(());
        };
        prop_assert_eq!(seen(&b2, US, 2).unwrap(), v2.clone());
        prop_assert_eq!(seen(&b2, US, 1).unwrap(), v1.clone());
        // P's bytes are identical in both images.
        let p = Ips::visible(1, &b1, US, 1).unwrap();
        for (s, e) in owned_ranges(&p) {
            prop_assert_eq!(&b1[s..e], &b2[s..e]);
        }
        let mut rb = b2.clone();
        prop_assert!(invalidate(&mut rb, 2));
        prop_assert_eq!(seen(&rb, US, 2).unwrap(), v1.clone());
        // Rebuilding within the same transaction replaces its own version.
        let v2b = extra.iter().fold(v2.clone(), |c, op| apply(&c, op));
        if let Some(b2b) = build(1, PS, US, Some(&b2), 1, &ver(2, true, 0, &v2b)).unwrap() {
            prop_assert_eq!(seen(&b2b, US, 2).unwrap(), v2b.clone());
            prop_assert_eq!(seen(&b2b, US, 1).unwrap(), v1.clone());
        }
        // A third transaction over the second replaces the first's slot.
        let v3 = extra.iter().fold(v2.clone(), |c, op| apply(&c, op));
        if let Some(b3) = build(1, PS, US, Some(&b2), 2, &ver(3, true, 0, &v3)).unwrap() {
            prop_assert_eq!(seen(&b3, US, 3).unwrap(), v3);
            prop_assert_eq!(seen(&b3, US, 2).unwrap(), v2);
            prop_assert!(Ips::visible(1, &b3, US, 1).is_err());
        }
    }

    #[test]
    fn torn_writes_small_pages_exhaustive(
        ps in prop_oneof![Just(512usize), Just(1024), Just(2048), Just(4096)],
        leaf in any::<bool>(),
        by_edit in any::<bool>(),
        seed in (any::<u64>(), 0..4usize),
        v1 in arb_cells(true, 508, 1 << 20),
        ops in arb_ops(true, 508),
    ) {
        let us = ps - PAGE_TRAILER;
        let conv = |cs: &[Vec<u8>]| -> Vec<Vec<u8>> {
            cs.iter()
                .filter(|c| cell_size(true, us, c) == Some(c.len()))
                .map(|c| if leaf { c.clone() } else {
                    let k = crate::page::cell::cell_key(us, c);
                    let key = match k { crate::page::cell::CellKey::Inline(k) => k.to_vec(), _ => vec![] };
                    interior_cell((seed.0 as u32) | 1, &key)
                })
                .collect()
        };
        let mut v1 = conv(&v1);
        let mut total = 0;
        v1.retain(|c| { total += cell_cost(c.len()); total <= capacity(us) });
        let ops: Vec<Op> = ops.into_iter()
            .filter_map(|(k, p, c)| conv(&[c]).pop().map(|c| (k, p, c)))
            .collect();
        if let Some((old, new, p, n)) = history(us, leaf, &v1, &ops, by_edit) {
            check_torn(us, &old, &new, &p, &n, all_masks(us)).map_err(TestCaseError::fail)?;
        }
    }

    #[test]
    fn torn_writes_16k_sampled(
        v1 in arb_cells(true, 16380, capacity(16380)),
        ops in arb_ops(true, 16380),
        by_edit in any::<bool>(),
        masks in proptest::collection::vec(any::<u32>(), 64),
    ) {
        if let Some((old, new, p, n)) = history(16380, true, &v1, &ops, by_edit) {
            let masks = masks.into_iter().map(u64::from).chain([0, u32::MAX as u64, 1, !1u32 as u64]);
            check_torn(16380, &old, &new, &p, &n, masks).map_err(TestCaseError::fail)?;
        }
    }

    #[test]
    fn a_version_on_p_is_zero_outside_what_p_and_it_own(
        v1 in arb_cells(true, US, capacity(US)),
        ops in arb_ops(true, US),
        more in arb_ops(true, US),
        last in arb_ops(true, US),
    ) {
        // b2 holds P (tid 2) over an older version (tid 1) in the other slot, and its
        // trailer is garbage; b3a adds this transaction's (tid 3) first build. Building
        // tid 3 again replaces that build: P's bytes and the new version's own must stay,
        // everything else (the first build's slots and records, the older version, the
        // trailer) must be zero, whether the builder starts from a copy of the image or
        // from a zero page (a base of another length).
        let b1 = build(1, PS, US, None, 0, &ver(1, true, 0, &v1)).unwrap().unwrap();
        let v2 = ops.iter().fold(v1.clone(), |m, op| apply(&m, op));
        prop_assume!(cost(&v2) <= capacity(US));
        let Some(mut b2) = build(1, PS, US, Some(&b1), 1, &ver(2, true, 0, &v2)).unwrap() else {
            return Ok(());
        };
        b2[US..].fill(0xAB);
        let v3a = more.iter().fold(v2.clone(), |m, op| apply(&m, op));
        prop_assume!(cost(&v3a) <= capacity(US));
        let Some(mut b3a) = build(1, PS, US, Some(&b2), 2, &ver(3, true, 0, &v3a)).unwrap() else {
            return Ok(());
        };
        b3a[US..].fill(0xAB);
        let v3 = last.iter().fold(v2.clone(), |m, op| apply(&m, op));
        prop_assume!(cost(&v3) <= capacity(US));
        let on_copy = build(1, PS, US, Some(&b3a), 2, &ver(3, true, 0, &v3)).unwrap();
        let mut longer = b3a.clone();
        longer.extend_from_slice(&[0xCD; 16]);
        let on_zero = build(1, PS, US, Some(&longer), 2, &ver(3, true, 0, &v3)).unwrap();
        prop_assert_eq!(&on_copy, &on_zero);
        let zero_elsewhere = |img: &[u8]| -> std::result::Result<(), TestCaseError> {
            let mut kept = owned_ranges(&Ips::visible(1, img, US, 2).unwrap());
            kept.extend(covered_ranges(&Ips::visible(1, img, US, 3).unwrap()));
            for (i, &byte) in img.iter().enumerate() {
                if !kept.iter().any(|&(s, e)| (s..e).contains(&i)) {
                    prop_assert_eq!(byte, 0, "byte {} is neither P's nor the new version's", i);
                }
            }
            Ok(())
        };
        if let Some(b3) = on_copy {
            prop_assert_eq!(Ips::visible(1, &b3, US, 2).unwrap().tid(), 2);
            prop_assert_eq!(seen(&b3, US, 3).unwrap(), v3.clone());
            zero_elsewhere(&b3)?;
        }
        // The same for a one-cell edit over P next to the first build's leftovers.
        let op = (0, 0, rec(3, 20));
        let (i, remove, insert) = one_edit(&v2, &apply(&v2, &op), &op);
        let mut b2x = b3a.clone();
        assert!(invalidate(&mut b2x, 3));
        if let Some((e, _)) = edit(1, &b2x, US, 3, i, remove, insert.as_deref()).unwrap() {
            zero_elsewhere(&e)?;
        }
    }

    #[test]
    fn edit_matches_build(
        v1 in arb_cells(true, US, capacity(US)),
        ops in proptest::collection::vec((0..3u8, any::<usize>(), arb_cell(true, US)), 1..30),
    ) {
        let b1 = build(1, PS, US, None, 0, &ver(1, true, 0, &v1)).unwrap().unwrap();
        let mut img = b1.clone();
        let mut model = v1.clone();
        let mut relocated = false;
        for op in &ops {
            let before = model.clone();
            model = apply(&model, op);
            if cost(&model) > capacity(US) {
                // The tree splits such a node instead.
                model = before;
                continue;
            }
            let (i, remove, insert) = one_edit(&before, &model, op);
            match edit(1, &img, US, 2, i, remove, insert.as_deref()).unwrap() {
                Some((b, used)) => {
                    prop_assert_eq!(used, cost(&model));
                    prop_assert!(used <= capacity(US));
                    img = b;
                }
                None => {
                    // What the tree does next: node_image over the same base, else a
                    // fresh page.
                    img = match build(1, PS, US, Some(&img), 1, &ver(2, true, 0, &model)).unwrap() {
                        Some(b) => b,
                        None => {
                            relocated = true;
                            build(1, PS, US, None, 0, &ver(2, true, 0, &model)).unwrap().unwrap()
                        }
                    };
                }
            }
            prop_assert_eq!(seen(&img, US, 2).unwrap(), model.clone());
            // What the commit takes from the builder is what validating the page gives.
            let n = sealed_matches_validated(1, &img, 2);
            prop_assert_eq!(n.used, cost(&model));
            // An edit of the same bytes remembered (order and used from the memo) gives
            // the same image as the edit of the unremembered image above would.
            let remembered = PageRef::from(img.clone());
            visible_node(1, &remembered, US, 2).unwrap();
            let probe = (0u8, model.len(), rec(1, 12));
            let (i, remove, insert) = one_edit(&model, &apply(&model, &probe), &probe);
            prop_assert_eq!(
                edit(1, &remembered, US, 2, i, remove, insert.as_deref()).unwrap(),
                edit(1, &img, US, 2, i, remove, insert.as_deref()).unwrap()
            );
            // P is intact at every step while the node stays on its page.
            if !relocated {
                prop_assert_eq!(seen(&img, US, 1).unwrap(), v1.clone());
            }
            // node_image of the same cells over the committed image opens the same.
            if let Some(b) = build(1, PS, US, Some(&b1), 1, &ver(2, true, 0, &model)).unwrap() {
                prop_assert_eq!(seen(&b, US, 2).unwrap(), model.clone());
            }
        }
    }

    #[test]
    fn fresh_page_holds_capacity(
        ps in prop_oneof![Just(512usize), Just(PS), Just(65536)],
        leaf in any::<bool>(),
        seed in proptest::collection::vec((any::<u16>(), 0..64usize), 0..3000),
    ) {
        let usable = ps - PAGE_TRAILER;
        let mc = max_cell(usable);
        let mut cells = Vec::new();
        let mut total = 0;
        for (k, len) in seed {
            let size = (CELL_HEADER + 2 + len * len % mc).clamp(CELL_HEADER, mc);
            if total + cell_cost(size) > capacity(usable) {
                continue;
            }
            total += cell_cost(size);
            let key = k.to_be_bytes();
            let key = &key[..(size - CELL_HEADER).min(2)];
            cells.push(if leaf {
                leaf_cell_inline(key, &vec![1; size - CELL_HEADER - key.len()])
            } else {
                interior_cell(1, &[key, &vec![2; size - CELL_HEADER - key.len()]].concat())
            });
        }
        let b = build(1, ps, usable, None, 0, &ver(1, leaf, 3, &cells)).unwrap();
        prop_assert!(b.is_some());
        prop_assert_eq!(seen(&b.unwrap(), usable, 1).unwrap(), cells);
    }

    #[test]
    fn garbage_never_panics(
        bytes in proptest::collection::vec(any::<u8>(), 0..4200),
        tid in 0..5u64,
        i in 0..40usize,
    ) {
        use crate::page::layout::{Geometry, PageLayout};
        let g = Geometry { page_size: PS, usable: US };
        let _ = Ips::visible(1, &bytes, US, tid);
        let _ = Ips::page_versions(1, &bytes, US);
        let _ = descriptor_heads(&bytes);
        let _ = OVERFLOW.open(1, &bytes, US);
        let mut b = bytes.clone();
        let _ = invalidate(&mut b, tid);
        let _ = restamp(1, &mut b, US, tid, 3);
        if bytes.len() >= PS {
            let _ = IPS.describe(1, &bytes, g, tid);
            let _ = IPS.classify(1, &bytes, g, tid);
            let _ = edit(1, &bytes, US, tid.max(1), i, i % 2 == 0, Some(&rec(1, 20)));
            let _ = build(1, PS, US, Some(&bytes), tid, &ver(tid + 1, true, 0, &[rec(1, 20)]));
        }
    }

    #[test]
    fn damaged_pages_never_panic_and_show_only_written_cells(
        hits in proptest::collection::vec((any::<u16>(), any::<u8>()), 1..8),
    ) {
        // Random byte writes into a real two-version page: readers never panic, and a
        // version that still validates shows P's or V's cells (up to crc collisions,
        // for damage outside what any crc covers: inherited records).
        let (b, p, v) = versioned_page();
        let mut d = b.clone();
        for (at, x) in hits {
            d[at as usize % PS] ^= x | 1;
        }
        let _ = Ips::page_versions(1, &d, US);
        let _ = edit(1, &d, US, 3, 0, true, None);
        let _ = build(1, PS, US, Some(&d), 2, &ver(3, true, 0, &v));
        let mut r = d.clone();
        let _ = restamp(1, &mut r, US, 2, 5);
        for t in 1..=2 {
            if let Ok(w) = Ips::visible(1, &d, US, t) {
                let cells = w.cells();
                let pv = Ips::visible(1, &b, US, 1).unwrap();
                let inherited_damage = (slots_start(US)..pv.slots_end())
                    .chain(pv.rec_lo()..US)
                    .any(|i| d[i] != b[i]);
                prop_assert!(cells == p || cells == v || inherited_damage);
            }
        }
    }
}

#[test]
fn the_engine_runs_on_ips_pages() {
    // End to end through the ips journal mode: one-row transactions (edit_leaf's fast
    // path, relocations, splits, merges), a rolled-back transaction, the integrity check
    // and a reopen, against a model.
    use crate::txn::ReadableTxn;
    use crate::vfs::SimVfs;
    use crate::{Config, Database, JournalMode, KeyKind};
    use std::collections::BTreeMap;
    use std::sync::Arc;
    let vfs = Arc::new(SimVfs::new());
    let cfg = || {
        Config::default()
            .vfs(vfs.clone())
            .journal_mode(JournalMode::IPS)
    };
    let db = Database::open("/e2e.db", cfg()).unwrap();
    let t = {
        let mut w = db.begin_write().unwrap();
        let t = w.open_or_create_tree("t", KeyKind::Int).unwrap();
        w.commit().unwrap();
        t
    };
    let mut model = BTreeMap::new();
    let mut x: u64 = 7;
    for n in 0..3000u64 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let k = (x % 700) as i64;
        let v = vec![(n % 251) as u8; 20 + (x % 90) as usize];
        let mut w = db.begin_write().unwrap();
        if x % 5 == 0 {
            assert_eq!(w.remove(&t, k).unwrap(), model.remove(&k));
        } else {
            w.insert(&t, k, &v).unwrap();
            model.insert(k, v);
        }
        w.commit().unwrap();
    }
    // A rolled-back transaction leaves nothing behind.
    let mut w = db.begin_write().unwrap();
    for k in 0..300 {
        w.insert(&t, k, b"rolled back").unwrap();
    }
    w.rollback().unwrap();
    let verify = |db: &Database| {
        let r = db.begin_read().unwrap();
        let t = r.open_tree("t").unwrap();
        for k in 0..700i64 {
            assert_eq!(r.get(&t, k).unwrap(), model.get(&k).cloned(), "key {k}");
        }
        let rep = crate::check::check(&r, &Default::default()).unwrap();
        let (_, s) = rep.trees.iter().find(|(i, _)| i.name == "t").unwrap();
        assert_eq!(s.entries as usize, model.len());
    };
    verify(&db);
    db.close().unwrap();
    let db = Database::open("/e2e.db", cfg()).unwrap();
    verify(&db);
}

#[test]
fn finalize_remembers_the_node_of_the_image_it_returns() {
    use crate::page::layout::{Geometry, PageLayout};
    let g = Geometry {
        page_size: PS,
        usable: US,
    };
    let (b, _, v) = versioned_page();
    let dirty = PageRef::from(b);
    let done = IPS.finalize(1, dirty.clone(), g, st(2, 2, 7)).unwrap();
    // The commit's image is remembered with its node (no validation or replay at its
    // next open), and that node is exactly what validating it afresh gives.
    let slot = newest_candidate(&done, |t| t <= 2).unwrap();
    let kept = recall(&MEMO, &done, 1, US, slot).expect("finalize remembered the image");
    assert_eq!(kept.node.attach(&done).cells().unwrap(), v);
    let copy = done.to_vec();
    let fresh = Ips::visible(1, &copy, US, 2).unwrap();
    assert_eq!(fresh.txn_size(), 7);
    assert_eq!(fresh.detach().attach(&done).cells().unwrap(), v);
}
