//! DHL overflow pages: the shared side-by-side format (`page::versioned::OverflowFormat`,
//! which states why it is safe), with DHL's descriptor field positions: the data length in
//! the tree's `ncells` field, the type byte at 14, the next page in the `right` field.
//!
//! ```text
//! slot 0:  tid u64 | txn_size u32 | len u16 (the tree's ncells field) | type OVERFLOW u8 |
//!          flags u8 | next u32 (the tree's right field) | 6 zero bytes | checksum u32
//! slot 1:  zero (INV)
//! 64..64+len   data; the rest of the page is zero
//! ```

use super::*;
#[cfg(test)]
pub use crate::page::versioned::overflow_data;
pub use crate::page::versioned::Overflow;
use crate::page::versioned::OverflowFormat;

pub(crate) static OVERFLOW: OverflowFormat = OverflowFormat {
    layout: "DHL",
    type_at: D_TYPE,
    next_at: D_RIGHT,
    geometry_ok,
};

#[cfg(test)]
/// Image of overflow page `pgno` written by transaction `tid` (txn_size 0, for [`restamp`] to
/// set at commit) holding `data`.
/// Errors: `InvalidArgument` for a bad geometry, tid 0 or more data than a page carries.
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
/// overflow descriptor (INV, another type, a length past the page, a bad checksum).
pub fn open_overflow(pgno: Pgno, buf: &[u8], usable: usize) -> Result<Overflow<'_>> {
    OVERFLOW.open(pgno, buf, usable)
}
