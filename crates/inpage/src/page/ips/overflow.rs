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

use crate::page::versioned::OverflowFormat;

/// The shared side-by-side overflow format (`page::versioned::OverflowFormat`) with IPS's
/// descriptor field positions.
pub(crate) static OVERFLOW: OverflowFormat = OverflowFormat {
    layout: "IPS",
    type_at: D_TYPE,
    next_at: D_RIGHT,
    geometry_ok: <super::Ips as SlotCheck>::geometry_ok,
};
