//! Not part of the API: on-disk format facts that inpage's own tests and tools check
//! bytes against (header slot layout, the page trailer). No stability promise; anything a
//! user needs is in the documented modules.

pub use crate::format::header::{
    decode_slot, free_snapshot_ref, FREE_SNAPSHOT, HEADER_LEN, HEADER_SLOTS, MAX_TID,
};
pub use crate::page::{stamp_crc, PAGE_TRAILER};
/// The page-number hasher of the engine's maps (one multiplication), for a caller's maps
/// keyed by small integers it picks itself (the SQL glue's tree handles by root number).
pub use crate::pager::PgnoHasher;
/// The side file several processes share while the database is open (`procs`).
pub use crate::procs::shm_path;
