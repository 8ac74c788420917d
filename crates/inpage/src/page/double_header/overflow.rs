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

use crate::page::versioned::{OverflowFormat, SlotCheck};

pub(crate) static OVERFLOW: OverflowFormat = OverflowFormat {
    layout: "DHL",
    type_at: D_TYPE,
    next_at: D_RIGHT,
    geometry_ok: <super::Dhl as SlotCheck>::geometry_ok,
};
