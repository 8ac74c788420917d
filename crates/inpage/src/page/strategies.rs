//! Test-only: the random cells the page formats' property tests build nodes from, and
//! the fixed cells and page sizes their unit tests share. The formats differ in what a
//! cell costs, never in what a cell is (`page::cell`), so one generator serves all three.

use proptest::prelude::*;

use crate::page::cell::{
    interior_cell, leaf_cell_inline, leaf_cell_overflow, max_cell, CELL_HEADER,
};
use crate::page::layout::{LeafEdit, Stamp};

/// Every page size the format allows.
pub(crate) const SIZES: [usize; 8] = [512, 1024, 2048, 4096, 8192, 16384, 32768, 65536];

/// Leaf cell of exactly `size` bytes (>= 10) with a 4-byte big-endian key.
pub(crate) fn rec(key: u32, size: usize) -> Vec<u8> {
    leaf_cell_inline(&key.to_be_bytes(), &vec![key as u8; size - 10])
}

/// The edit of transaction `tid` that removes cell `at` if `remove`, then inserts `insert`.
pub(crate) fn ed(tid: u64, at: usize, remove: bool, insert: Option<&[u8]>) -> LeafEdit<'_> {
    LeafEdit {
        tid,
        at,
        remove,
        insert,
    }
}

/// The commit stamp of versions written as `written`, committing as `tid` of `txn_size`.
pub(crate) fn st(written: u64, tid: u64, txn_size: u32) -> Stamp {
    Stamp {
        written,
        tid,
        txn_size,
    }
}

/// Any well-formed cell of the given kind for `usable`, with a key of fewer than
/// `key_max` bytes: an interior cell, or a leaf cell inline (mostly small) or pointing to
/// an overflow chain.
pub(crate) fn arb_cell(
    leaf: bool,
    usable: usize,
    key_max: usize,
) -> impl Strategy<Value = Vec<u8>> {
    let mc = max_cell(usable);
    (
        proptest::collection::vec(any::<u8>(), 0..key_max),
        prop_oneof![4 => 0..24usize, 1 => 0..mc],
        any::<bool>(),
        1..u32::MAX,
    )
        .prop_map(move |(key, vlen, ovfl, n)| {
            if !leaf {
                interior_cell(n, &key)
            } else if ovfl {
                leaf_cell_overflow(&key, (mc + n as usize % 100_000) as u32, n)
            } else {
                let vlen = vlen.min(mc - CELL_HEADER - key.len());
                leaf_cell_inline(&key, &vec![n as u8; vlen])
            }
        })
}

/// Up to `n` cells of `cell` whose total `cost` is at most `budget` (a prefix of a
/// random list).
pub(crate) fn arb_cells(
    cell: impl Strategy<Value = Vec<u8>>,
    n: usize,
    budget: usize,
    cost: fn(usize) -> usize,
) -> impl Strategy<Value = Vec<Vec<u8>>> {
    proptest::collection::vec(cell, 0..n).prop_map(move |mut cs| {
        let mut total = 0;
        let keep = cs
            .iter()
            .take_while(|c| {
                total += cost(c.len());
                total <= budget
            })
            .count();
        cs.truncate(keep);
        cs
    })
}
