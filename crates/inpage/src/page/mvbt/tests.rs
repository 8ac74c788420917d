//! Unit tests of the MVBT page: limits, round trips, versions and snapshot views,
//! rollback (including a later writer reusing the rolled-back tid), every torn-sector mix
//! of an old and a new image, lazy garbage collection on and off, restamping and
//! recovery's views, and damaged pages (refused, never a panic).
//!
//! Invariant: expectations come from the cell lists the test itself wrote (a model) or
//! from the format rules, never from the code under test.

use super::*;
use crate::page::cell::{interior_cell, leaf_cell_inline};
use crate::page::strategies::{self, rec, SIZES};
use crate::page::PAGE_TRAILER;
use crate::seam::{plant, Plant};
use proptest::prelude::*;

const PS: usize = 4096;
const US: usize = PS - PAGE_TRAILER;
const SECTOR: usize = 512;

/// A version and the lazy-GC switch it is built with.
struct Ver<'c>(Version<'c>, bool);

fn ver(tid: u64, cells: &[Vec<u8>], lazy_gc: bool) -> Ver<'_> {
    let v = Version {
        tid,
        txn_size: 0,
        leaf: true,
        right: 0,
        cells,
    };
    Ver(v, lazy_gc)
}

/// [`super::build`] of `v` with its switch.
fn build(
    pgno: Pgno,
    page_size: usize,
    usable: usize,
    base: Option<&[u8]>,
    keep: u64,
    v: &Ver<'_>,
) -> Result<Option<Vec<u8>>> {
    super::build(pgno, page_size, usable, base, keep, &v.0, v.1)
}

fn cost(cells: &[Vec<u8>]) -> usize {
    cells.iter().map(|c| cell_cost(c.len())).sum()
}

/// Cells a reader at `max_tid` sees, through the detached key-ordered view (what the
/// tree reads), checked against the view's own decoding.
fn seen(buf: &[u8], usable: usize, max_tid: u64) -> Result<Vec<Vec<u8>>> {
    let v = Mvbt::visible(1, buf, usable, max_tid)?;
    let d = v.detach();
    let cells = d.attach(buf).cells()?;
    assert_eq!(cells, v.cells(), "detached view and entry array disagree");
    Ok(cells)
}

/// Build `cells` as transaction `tid` over `base` (protecting `tid - 1`), stamped with
/// `txn_size` 1 as a commit would.
fn write(base: Option<&[u8]>, tid: u64, cells: &[Vec<u8>], lazy_gc: bool) -> Vec<u8> {
    let mut out = build(1, PS, US, base, tid - 1, &ver(tid, cells, lazy_gc))
        .unwrap()
        .expect("fits");
    assert!(restamp(1, &mut out, US, tid, 1));
    out
}

fn keys(n: u32, size: usize) -> Vec<Vec<u8>> {
    (0..n).map(|k| rec(k, size)).collect()
}

#[test]
fn a_maximal_cell_costs_under_half_the_capacity_for_every_page_size() {
    for ps in SIZES {
        let us = ps - PAGE_TRAILER;
        for reserve in [false, true] {
            assert!(
                2 * cell_cost(max_cell(us)) < capacity(us, reserve),
                "page size {ps}, reserve {reserve}"
            );
        }
        assert!(us <= crate::page::versioned::MAX_USABLE);
        // An array can name every record the page can hold, with the array itself.
        assert!(max_cells(us) * (MIN_RECORD + 2) >= us - AREA_START - MIN_RECORD - 2);
    }
}

#[test]
fn a_fresh_page_round_trips_leaf_and_interior_nodes() {
    let cells = keys(40, 37);
    let img = write(None, 1, &cells, true);
    assert_eq!(seen(&img, US, 1).unwrap(), cells);
    assert!(
        Mvbt::visible(1, &img, US, 0).is_err(),
        "nothing visible before tid 1"
    );
    let inner: Vec<Vec<u8>> = (1..9u32)
        .map(|c| interior_cell(c, &c.to_be_bytes()))
        .collect();
    let v = Ver(
        Version {
            tid: 3,
            txn_size: 0,
            leaf: false,
            right: 99,
            cells: &inner,
        },
        true,
    );
    let img = build(1, PS, US, None, 2, &v).unwrap().unwrap();
    let view = Mvbt::visible(1, &img, US, 3).unwrap();
    assert_eq!(view.txn_size(), 0, "built unstamped");
    // A stamped version is written as asked (what a restamp would make of it).
    let stamped = Ver(Version { txn_size: 4, ..v.0 }, true);
    let img4 = build(1, PS, US, None, 2, &stamped).unwrap().unwrap();
    assert_eq!(Mvbt::visible(1, &img4, US, 3).unwrap().txn_size(), 4);
    let mut restamped = img.clone();
    assert!(restamp(1, &mut restamped, US, 3, 4));
    assert_eq!(restamped[..US], img4[..US]);
    assert!(!view.is_leaf());
    assert_eq!(view.right_child(), 99);
    assert_eq!(view.cells(), inner);
    // Every record is aligned, so no `end` straddles a sector.
    for k in 0..view.ncells() {
        assert_eq!(view.record(k) % ALIGN, 0);
    }
}

#[test]
fn a_node_at_capacity_fits_a_fresh_page_at_every_size() {
    for ps in SIZES {
        let us = ps - PAGE_TRAILER;
        for reserve in [false, true] {
            // Smallest cells, then maximal ones, up to capacity.
            for size in [CELL_HEADER + 4, max_cell(us)] {
                let mut cells = Vec::new();
                let mut k = 0u32;
                while cost(&cells) + cell_cost(size) <= capacity(us, reserve) {
                    cells.push(if size < 10 {
                        leaf_cell_inline(&k.to_be_bytes(), &[])
                    } else {
                        rec(k, size)
                    });
                    k += 1;
                }
                let v = ver(1, &cells, true);
                let img = build(1, ps, us, None, 0, &v).unwrap();
                let img = img.unwrap_or_else(|| panic!("page size {ps}: {} cells", cells.len()));
                assert_eq!(Mvbt::visible(1, &img, us, 1).unwrap().cells(), cells);
            }
        }
    }
}

#[test]
fn a_new_version_keeps_the_old_one_and_snapshots_see_each() {
    let old = keys(30, 40);
    let p = write(None, 1, &old, true);
    let mut new = old.clone();
    new.remove(3); // a delete: end = 2 on a committed record
    new[10] = rec(10, 60); // a replacement
    new.push(rec(500, 20)); // an insert
    let v = write(Some(&p), 2, &new, true);
    assert_eq!(
        seen(&v, US, 1).unwrap(),
        old,
        "snapshot 1 still sees the old node"
    );
    assert_eq!(seen(&v, US, 2).unwrap(), new);
    assert_eq!(seen(&v, US, 9).unwrap(), new);
    // The deleted record carries its life span [1, 2) in the page.
    let view = Mvbt::visible(1, &v, US, 1).unwrap();
    let k = (0..view.ncells())
        .find(|&k| view.cell(k) == &old[3][..])
        .unwrap();
    assert_eq!(view.span(k), (1, 2));
    // A third version overwrites the oldest descriptor and keeps version 2.
    let mut third = new.clone();
    third.remove(0);
    let w = write(Some(&v), 3, &third, true);
    assert_eq!(seen(&w, US, 2).unwrap(), new);
    assert_eq!(seen(&w, US, 3).unwrap(), third);
}

#[test]
fn rollback_restores_the_old_node_and_a_reused_tid_starts_clean() {
    let old = keys(20, 50);
    let p = write(None, 1, &old, true);
    let mut doomed = old.clone();
    doomed.drain(0..5); // deletes that will be rolled back
    doomed.push(rec(900, 30));
    let mut v = build(1, PS, US, Some(&p), 1, &ver(2, &doomed, true))
        .unwrap()
        .unwrap();
    assert!(invalidate(&mut v, 2));
    assert!(!invalidate(&mut v, 2), "repeating it changes nothing");
    assert_eq!(seen(&v, US, 2).unwrap(), old);
    assert_eq!(seen(&v, US, u64::MAX - 1).unwrap(), old);
    // The next transaction gets tid 2 again; the stale `end = 2` marks must not delete
    // anything in its version, and the rolled-back insert must not appear.
    let mut next = old.clone();
    next.push(rec(700, 25));
    for gc in [true, false] {
        let w = write(Some(&v), 2, &next, gc);
        assert_eq!(seen(&w, US, 2).unwrap(), next, "lazy gc {gc}");
        assert_eq!(seen(&w, US, 1).unwrap(), old);
    }
}

#[test]
fn lazy_gc_drops_dead_entries_and_plain_mvbt_keeps_them_until_a_copy() {
    for gc in [true, false] {
        let mut cells = keys(30, 30);
        let mut img = write(None, 1, &cells, gc);
        for tid in 2..6u64 {
            cells.remove(0);
            img = write(Some(&img), tid, &cells, gc);
            let view = Mvbt::visible(1, &img, US, tid).unwrap();
            assert_eq!(view.cells(), cells);
            let dead = view.ncells() - view.nlive();
            if gc {
                assert_eq!(dead, 0);
            } else {
                assert_eq!(dead as u64, tid - 1, "every delete so far stays an entry");
            }
        }
    }
}

/// A node at capacity whose cells are updated one per transaction (the space workload on
/// one leaf): with lazy GC each version takes the bytes of the records and arrays its
/// protected version no longer names, so the page takes updates in place indefinitely;
/// without, dead records stay named and the page runs out (the tree would copy it).
#[test]
fn lazy_gc_reuses_dead_records_in_place_and_plain_mvbt_runs_out() {
    for gc in [true, false] {
        let n = (capacity(US, true) / cell_cost(60)) as u32;
        let mut cells = keys(n, 60);
        let mut img = write(None, 1, &cells, gc);
        let mut in_place = 0;
        for tid in 2..200u64 {
            let k = (tid * 7 % u64::from(n)) as usize;
            let mut c = cells[k].clone();
            let last = c.len() - 1;
            c[last] = c[last].wrapping_add(1);
            cells[k] = c;
            let protect = tid - 1;
            match build(1, PS, US, Some(&img), protect, &ver(tid, &cells, gc)).unwrap() {
                Some(mut out) => {
                    assert!(restamp(1, &mut out, US, tid, 1));
                    // The protected version reads the same from the new image.
                    assert_eq!(
                        seen(&out, US, protect).unwrap(),
                        seen(&img, US, protect).unwrap()
                    );
                    assert_eq!(seen(&out, US, tid).unwrap(), cells);
                    img = out;
                    in_place += 1;
                }
                None => break,
            }
        }
        if gc {
            assert_eq!(in_place, 198, "lazy GC: every update fits in place");
        } else {
            assert!(
                in_place < 40,
                "dead records stay named: {in_place} updates fit"
            );
        }
    }
}

#[test]
fn a_version_that_does_not_fit_beside_the_committed_one_is_refused() {
    let cap = capacity(US, true);
    let n = (cap / cell_cost(200)) as u32;
    let cells = keys(n, 200);
    let p = write(None, 1, &cells, true);
    // Replace every cell: the new records cannot fit beside the committed ones.
    let new: Vec<Vec<u8>> = (0..n).map(|k| rec(k, 201)).collect();
    assert!(build(1, PS, US, Some(&p), 1, &ver(2, &new, true))
        .unwrap()
        .is_none());
    // The same node on a fresh page fits.
    assert!(build(1, PS, US, None, 1, &ver(2, &new, true))
        .unwrap()
        .is_some());
}

#[test]
fn bad_arguments_and_a_page_without_a_committed_version_are_errors() {
    let cells = keys(3, 20);
    assert!(build(1, PS, US, None, 0, &ver(0, &cells, true)).is_err());
    let interior = Ver(
        Version {
            tid: 1,
            txn_size: 0,
            leaf: false,
            right: 0,
            cells: &[],
        },
        true,
    );
    assert!(build(1, PS, US, None, 0, &interior).is_err());
    let big = vec![rec(1, max_cell(US) + 1)];
    assert!(build(1, PS, US, None, 0, &ver(1, &big, true)).is_err());
    let zero = vec![0u8; PS];
    assert!(matches!(
        build(1, PS, US, Some(&zero), 4, &ver(5, &cells, true)),
        Err(Error::Corrupt { .. })
    ));
}

#[test]
fn restamp_and_recovery_views() {
    let p = write(None, 1, &keys(5, 20), true);
    let mut v = build(1, PS, US, Some(&p), 1, &ver(2, &keys(6, 20), true))
        .unwrap()
        .unwrap();
    let vs = Mvbt::page_versions(1, &v, US);
    let infos: Vec<_> = vs
        .iter()
        .flatten()
        .map(|d| (d.tid, d.txn_size, d.valid))
        .collect();
    assert!(infos.contains(&(1, 1, true)) && infos.contains(&(2, 0, true)));
    assert!(restamp(1, &mut v, US, 2, 7));
    assert!(!restamp(1, &mut v, US, 3, 7), "no version of transaction 3");
    let heads = descriptor_heads(&v).unwrap();
    assert!(heads.contains(&(2, 7)) && heads.contains(&(1, 1)));
    assert_eq!(seen(&v, US, 2).unwrap(), keys(6, 20));
    // Overflow pages: written once, valid in slot 0, restamped like a version.
    let mut o = OVERFLOW.image(1, PS, US, 4, 9, b"chunk").unwrap();
    assert!(restamp(1, &mut o, US, 4, 3));
    let ov = OVERFLOW.open(1, &o, US).unwrap();
    assert_eq!(
        (ov.tid, ov.txn_size, ov.next, ov.data),
        (4, 3, 9, &b"chunk"[..])
    );
    assert!(Mvbt::page_versions(1, &o, US)[0].is_some_and(|d| d.valid));
    o[VERSION_HEADS + 2] ^= 1;
    assert!(OVERFLOW.open(1, &o, US).is_err());
}

/// Every mix of `old` and `new` images, sector by sector.
fn mixes<'a>(old: &'a [u8], new: &'a [u8]) -> impl Iterator<Item = Vec<u8>> + 'a {
    let n = old.len() / SECTOR;
    (0u32..1 << n).map(move |mask| {
        let mut m = old.to_vec();
        for s in 0..n {
            if mask >> s & 1 == 1 {
                m[s * SECTOR..(s + 1) * SECTOR].copy_from_slice(&new[s * SECTOR..(s + 1) * SECTOR]);
            }
        }
        m
    })
}

#[test]
fn a_checksum_over_the_raw_end_fields_is_caught_by_the_torn_mixes() {
    // Planted: hashing `end` as stored makes the committed version depend on bytes a
    // later writer changes, so some torn mix (sector 0 old: the new version absent, a
    // deleted record's sector new) shows the committed version damaged.
    plant(Plant::MvbtRawEnd, true);
    let old_cells = keys(30, 40);
    let p = write(None, 1, &old_cells, true);
    let mut new_cells = old_cells.clone();
    new_cells.drain(10..25);
    let new = write(Some(&p), 2, &new_cells, true);
    let damaged = mixes(&p, &new).any(|m| seen(&m, US, 1).ok() != Some(old_cells.clone()));
    plant(Plant::MvbtRawEnd, false);
    assert!(damaged, "no mix exposed the planted bug");
}

#[test]
fn every_torn_mix_keeps_the_committed_version_and_shows_the_new_one_whole_or_not() {
    // The committed image carries a rolled-back version's stale marks, the harder case.
    let old_cells = keys(30, 40);
    let p = write(None, 1, &old_cells, true);
    let mut doomed = keys(15, 40);
    doomed.push(rec(2000, 100));
    let mut rolled = build(1, PS, US, Some(&p), 1, &ver(2, &doomed, true))
        .unwrap()
        .unwrap();
    invalidate(&mut rolled, 2);
    let mut new_cells = old_cells.clone();
    new_cells.drain(10..25);
    new_cells.insert(5, rec(1000, 90));
    for gc in [true, false] {
        let new = write(Some(&rolled), 2, &new_cells, gc);
        let mut whole = 0;
        for m in mixes(&rolled, &new) {
            assert_eq!(seen(&m, US, 1).unwrap(), old_cells);
            match seen(&m, US, 2) {
                Ok(c) if c == new_cells => whole += 1,
                Ok(c) => assert_eq!(c, old_cells, "a mix shows a third node"),
                Err(Error::Corrupt { .. }) => {
                    // The new version is torn: recovery would invalidate it.
                    let mut r = m.clone();
                    invalidate(&mut r, 2);
                    assert_eq!(seen(&r, US, 2).unwrap(), old_cells);
                }
                Err(e) => panic!("{e}"),
            }
        }
        assert!(whole >= 1, "the all-new image shows the new node");
    }
}

/// Version 3 is written into the bytes of records version 2 deleted (lazy GC frees them)
/// and of version 1's array; every torn mix of it keeps version 2 whole. Planted: a
/// writer that finds its free bytes from the version it replaces (1) instead of the one
/// it protects (2) is caught by the same mixes.
#[test]
fn a_version_in_reused_bytes_tears_without_touching_the_committed_one() {
    let cells = keys(30, 40);
    let v1 = write(None, 1, &cells, true);
    let mut v2_cells = cells.clone();
    v2_cells.drain(0..12);
    let v2 = write(Some(&v1), 2, &v2_cells, true);
    // Deleting its first cell makes version 3's array differ from version 2's at once.
    let mut v3_cells = v2_cells[1..].to_vec();
    v3_cells.extend((100..110).map(|k| rec(k, 40)));
    for planted in [false, true] {
        plant(Plant::MvbtWrongHoles, planted);
        let v3 = build(1, PS, US, Some(&v2), 2, &ver(3, &v3_cells, true));
        plant(Plant::MvbtWrongHoles, false);
        let mut v3 = v3.unwrap().expect("fits in the freed bytes");
        assert!(restamp(1, &mut v3, US, 3, 1));
        let p = Mvbt::visible(1, &v2, US, 2).unwrap();
        let broken = mixes(&v2, &v3).any(|m| seen(&m, US, 2).ok() != Some(v2_cells.clone()));
        if planted {
            assert!(broken, "no mix exposed the planted overlap");
        } else {
            assert!(!broken, "a torn mix damaged the committed version");
            assert_eq!(seen(&v3, US, 3).unwrap(), v3_cells);
            // New records took the bytes of records version 2 deleted.
            let named = |v: &View<'_>| (0..v.ncells()).map(|k| v.record(k)).collect::<Vec<_>>();
            let (in1, in2) = (named(&Mvbt::visible(1, &v1, US, 1).unwrap()), named(&p));
            let freed: Vec<usize> = in1.into_iter().filter(|o| !in2.contains(o)).collect();
            let fresh: Vec<usize> = named(&Mvbt::visible(1, &v3, US, 3).unwrap())
                .into_iter()
                .filter(|o| !in2.contains(o))
                .collect();
            assert!(
                fresh.iter().any(|&o| freed
                    .iter()
                    .any(|&f| o < f + record_len(40) && f < o + record_len(40))),
                "no new record reused a deleted one's bytes: {fresh:?} / {freed:?}"
            );
        }
    }
}

#[test]
fn every_single_bit_flip_in_a_version_is_refused_or_harmless() {
    let cells = keys(12, 33);
    let p = write(None, 1, &cells, true);
    let img = write(Some(&p), 2, &cells[1..], true);
    let view = Mvbt::visible(1, &img, US, 2).unwrap();
    let (lo, slot) = (view.rec_lo(), view.slot());
    // Bytes version 2 depends on: its descriptor, its array, its records.
    let a = view.rec_lo();
    let mut bytes: Vec<usize> = (slot * DESC_SIZE..(slot + 1) * DESC_SIZE).collect();
    bytes.extend(a..a + 2 * view.ncells());
    bytes.extend(lo..US);
    for at in bytes {
        for bit in 0..8 {
            let mut m = img.clone();
            m[at] ^= 1 << bit;
            match Mvbt::visible(1, &m, US, 2) {
                Ok(v) => assert_eq!(
                    v.cells(),
                    if v.tid() == 2 {
                        &cells[1..]
                    } else {
                        &cells[..]
                    },
                    "byte {at} bit {bit}"
                ),
                Err(Error::Corrupt { .. }) => {}
                Err(e) => panic!("{e}"),
            }
        }
    }
}

fn arb_cells(usable: usize, budget: usize) -> impl Strategy<Value = Vec<Vec<u8>>> {
    strategies::arb_cells(
        strategies::arb_cell(true, usable, 24),
        120,
        budget,
        cell_cost,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// A sequence of transactions, each committing or rolling back, with random node
    /// contents: every committed snapshot reads back as the model says, whatever fits
    /// is kept beside the committed version, and what does not fit goes to a fresh page.
    #[test]
    fn transactions_commit_and_roll_back_as_the_model_says(
        steps in proptest::collection::vec((arb_cells(US, capacity(US, true)), any::<bool>(), any::<bool>()), 1..12),
        gc in any::<bool>(),
    ) {
        let first = keys(3, 20);
        let mut img = write(None, 1, &first, gc);
        let mut committed: Vec<(u64, Vec<Vec<u8>>)> = vec![(1, first)];
        let mut tid = 2;
        for (cells, commit, _) in steps {
            let built = build(1, PS, US, Some(&img), tid - 1, &ver(tid, &cells, gc)).unwrap();
            let (mut next, copied) = match built {
                Some(b) => (b, false),
                None => (build(1, PS, US, None, tid - 1, &ver(tid, &cells, gc)).unwrap().unwrap(), true),
            };
            if commit {
                prop_assert!(restamp(1, &mut next, US, tid, 1));
                prop_assert_eq!(seen(&next, US, tid).unwrap(), cells.clone());
                if !copied {
                    let (t, prev) = committed.last().unwrap();
                    prop_assert_eq!(&seen(&next, US, tid - 1).unwrap(), prev);
                    prop_assert_eq!(seen(&next, US, *t).unwrap(), prev.clone());
                }
                committed.push((tid, cells));
                img = next;
                tid += 1;
            } else if !copied {
                prop_assert!(invalidate(&mut next, tid));
                let (_, prev) = committed.last().unwrap();
                prop_assert_eq!(&seen(&next, US, tid).unwrap(), prev);
                img = next; // the next writer reuses this tid over the stale marks
            }
        }
    }

    /// Any bytes: opening, describing the versions and restamping never panic.
    #[test]
    fn arbitrary_pages_are_refused_not_panicked_on(
        bytes in proptest::collection::vec(any::<u8>(), 0..PS + 8),
        tid in any::<u64>(),
    ) {
        let _ = Mvbt::visible(1, &bytes, US, tid);
        let _ = Mvbt::page_versions(1, &bytes, US);
        let _ = OVERFLOW.open(1, &bytes, US);
        let mut b = bytes.clone();
        let _ = restamp(1, &mut b, US, tid, 1);
        let _ = build(1, PS, US, Some(&bytes), tid.saturating_sub(1), &ver(tid.max(1), &[], true));
    }

    /// Random corruption of a valid page: refused or still a valid node, never a panic.
    #[test]
    fn damaged_pages_are_refused_not_panicked_on(
        cells in arb_cells(US, capacity(US, false)),
        hits in proptest::collection::vec((0..US, any::<u8>()), 1..8),
    ) {
        let p = write(None, 1, &cells, true);
        let mut m = p.clone();
        for (at, b) in hits {
            m[at] = b;
        }
        match Mvbt::visible(1, &m, US, 5) {
            Ok(v) => { let _ = v.detach().attach(&m).cells(); }
            Err(Error::Corrupt { .. }) => {}
            Err(e) => prop_assert!(false, "{}", e),
        }
    }
}

#[test]
fn a_node_that_changes_type_carries_nothing_over() {
    // A root pointer (interior) absorbing a leaf child, and back: with and without lazy
    // GC, no record of the other type is reused or kept as a dead entry.
    let inner: Vec<Vec<u8>> = (1..6u32)
        .map(|c| interior_cell(c, &c.to_be_bytes()))
        .collect();
    let as_interior = |tid: u64| {
        let v = Version {
            tid,
            txn_size: 0,
            leaf: false,
            right: 77,
            cells: &inner,
        };
        Ver(v, false)
    };
    let p = build(1, PS, US, None, 0, &as_interior(1)).unwrap().unwrap();
    let mut p = p;
    assert!(restamp(1, &mut p, US, 1, 1));
    for gc in [true, false] {
        let leaves = keys(8, 30);
        let v = write(Some(&p), 2, &leaves, gc);
        let view = Mvbt::visible(1, &v, US, 2).unwrap();
        assert_eq!(view.cells(), leaves);
        assert_eq!(
            view.ncells(),
            view.nlive(),
            "lazy gc {gc}: no interior entry kept"
        );
        let mut back = v.clone();
        let w = build(1, PS, US, Some(&back), 2, &as_interior(3))
            .unwrap()
            .unwrap();
        back = w;
        assert_eq!(Mvbt::visible(1, &back, US, 3).unwrap().cells(), inner);
        assert_eq!(seen(&back, US, 2).unwrap(), leaves);
    }
}

#[test]
fn the_memo_answers_as_visible_for_every_snapshot() {
    let old = keys(10, 30);
    let p = write(None, 1, &old, true);
    let mut new = old.clone();
    new.remove(4);
    let img: Arc<[u8]> = write(Some(&p), 2, &new, true).into();
    for _ in 0..2 {
        for (snap, want) in [(1, &old), (2, &new), (9, &new)] {
            let d = visible_node(1, &img, US, snap).unwrap();
            assert_eq!(&d.attach(&img).cells().unwrap(), want, "snapshot {snap}");
        }
        assert!(visible_node(1, &img, US, 0).is_err());
    }
}

#[test]
fn an_empty_version_always_fits_beside_a_full_one() {
    // The tree's root pointer: whatever the committed version holds (with or without
    // dead entries), an empty version fits beside it.
    for gc in [true, false] {
        let mut cells = keys((capacity(US, false) / cell_cost(40)) as u32, 40);
        let mut img = write(None, 1, &cells, gc);
        let mut tid = 2;
        // Delete until the page is nearly out of gap, keeping dead entries without gc.
        while let Some(b) = {
            cells.pop();
            build(1, PS, US, Some(&img), tid - 1, &ver(tid, &cells, gc)).unwrap()
        } {
            img = b;
            assert!(restamp(1, &mut img, US, tid, 1));
            tid += 1;
        }
        let empty = build(1, PS, US, Some(&img), tid - 1, &ver(tid, &[], gc)).unwrap();
        let empty = empty.expect("an empty version fits");
        assert!(seen(&empty, US, tid).unwrap().is_empty(), "lazy gc {gc}");
    }
}
