//! The on-disk format's ground floor: what every layer agrees a file's bytes mean, and
//! nothing about how a layer uses them.
//!
//! Invariants:
//! - This module imports nothing of the engine but `error` and `le`: the page layouts,
//!   the journals and the pager all read and write these bytes, so none of them may be
//!   below it (`tests/layers.rs` checks the order).
//! - The header names its journal mode by a plain id ([`header::ModeId`]); which modes
//!   exist is the registry's business (`journal::JournalMode`), resolved by the pager.
//! - Every page ends in a trailer (`trailer`), a checksum bound to the page's number.

pub mod header;
pub mod trailer;
