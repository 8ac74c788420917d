//! IPS overflow pages.
//!
//! Recovery trusts whatever parses as a descriptor head, so no page of an IPS file carries
//! user bytes in its first 64 bytes. An overflow page has a descriptor in slot 0 and its
//! data after both slots:
//!
//! ```text
//! slot 0:  tid u64 | txn_size u32 | len u16 (the tree's nslots field) | 6 zero bytes |
//!          type OVERFLOW u8 (at 20, as a tree descriptor's) | flags 0 | 2 zero bytes |
//!          next u32 (the tree's right field) | crc u32
//! slot 1:  zero (INV)
//! 64..64+len   data; the rest of the page is zero
//! ```
//!
//! The crc is xxh3 (folded, as for tree versions) over descriptor bytes 0..28 and the
//! data. Overflow pages are written once, by the transaction that allocated them, and
//! never changed (a changed value gets a new chain), so one version is all they need; a
//! torn write shows it whole or fails its crc, and recovery counts it in `txn_size`.

use super::*;
#[cfg(test)]
pub use crate::page::versioned::overflow_data;
pub use crate::page::versioned::Overflow;
use crate::page::versioned::OverflowFormat;

/// The shared side-by-side overflow format (`page::versioned::OverflowFormat`) with IPS's
/// descriptor field positions.
pub(crate) static OVERFLOW: OverflowFormat = OverflowFormat {
    layout: "IPS",
    type_at: D_TYPE,
    next_at: D_RIGHT,
    geometry_ok,
};

#[cfg(test)]
/// Image of overflow page `pgno` of transaction `tid` (txn_size 0 until commit) holding
/// `data`. Errors: `InvalidArgument` for a bad geometry, tid 0 or too much data.
pub fn overflow_page(
    pgno: Pgno,
    page_size: usize,
    usable: usize,
    tid: u64,
    next: Pgno,
    data: &[u8],
) -> Result<Vec<u8>> {
    OVERFLOW.image(pgno, page_size, usable, tid, next, data)
}

/// Decode and verify an overflow page. Errors: `Corrupt` if slot 0 is not a valid
/// overflow descriptor (INV, another type, a length past the page, a bad crc).
pub fn open_overflow(pgno: Pgno, buf: &[u8], usable: usize) -> Result<Overflow<'_>> {
    OVERFLOW.open(pgno, buf, usable)
}
