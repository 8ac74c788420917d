//! Index order for this landing: SQLite's record comparator as the tree comparator of
//! every index tree. TEMPORARY — replaced by the engine's probe API (issue 13 M0, in
//! progress: seeks and inserts ordered by a caller-held probe), after which this module
//! goes away whole.
//!
//! Why the trick is needed today: the engine orders a byte tree with a symmetric
//! `cmp(a, b)` fixed per tree, but SQLite compares stored records under the cursor's
//! `KeyInfo`, and seeks with a pre-unpacked probe (`UnpackedRecord`, with `default_rc`).
//! So the `KeyInfo` of the running operation and the seek probe travel in thread-locals,
//! and a seek passes [`MARKER`] as its key; the comparator recognises it and compares
//! the stored record against the probe instead.
//!
//! Invariants, and why they hold:
//! - [`MARKER`] can never equal a stored key: it is not a valid SQLite record (its
//!   header-size varint is larger than the marker itself, see [`is_record_header_sane`]),
//!   every stored index key comes from `OP_MakeRecord` (a valid record), and the insert
//!   path refuses the marker bytes with SQLITE_CORRUPT (release-mode check, `ffi.rs`).
//! - The thread-locals are set only for the duration of one engine call made from the
//!   thread that SQLite is running the statement on ([`with_order`]), and reset after,
//!   also when the call fails; the comparator is never called outside such a call.

use std::cell::Cell;
use std::cmp::Ordering;
use std::ffi::{c_int, c_void};
use std::ptr::null_mut;

extern "C" {
    /// `<0` when the stored record `key` sorts before the probe (`UnpackedRecord*`).
    fn ipg_c_cmp_probe(n: c_int, key: *const u8, probe: *mut c_void) -> c_int;
    /// Compare two stored records under a `KeyInfo*`; `*failed` = 1: no answer (OOM,
    /// corrupt record).
    fn ipg_c_cmp_records(
        keyinfo: *mut c_void,
        n1: c_int,
        k1: *const u8,
        n2: c_int,
        k2: *const u8,
        failed: *mut c_int,
    ) -> c_int;
}

thread_local! {
    static KEYINFO: Cell<*mut c_void> = const { Cell::new(null_mut()) };
    static PROBE: Cell<*mut c_void> = const { Cell::new(null_mut()) };
}

/// The seek key that stands for "the probe". First byte 0x7f: a record header of 127
/// bytes, longer than these 16 bytes, so it is not a valid record encoding.
pub const MARKER: &[u8] = b"\x7finpage-probe\xff\xff";

/// Whether `rec` starts with a record header size that fits in `rec` (SQLite's first
/// sanity test of a record: the header-size varint, 1..=9 bytes, then `size <= len`).
pub fn is_record_header_sane(rec: &[u8]) -> bool {
    let mut v: u64 = 0;
    for (i, b) in rec.iter().enumerate().take(9) {
        if i == 8 {
            v = (v << 8) | u64::from(*b);
            return v as usize <= rec.len() && v > i as u64;
        }
        v = (v << 7) | u64::from(b & 0x7f);
        if b & 0x80 == 0 {
            return v as usize <= rec.len() && v > i as u64;
        }
    }
    false
}

fn sign(c: c_int) -> Ordering {
    c.cmp(&0)
}

/// Compare a stored record with the probe of the running seek.
pub fn cmp_probe(stored: &[u8], probe: *mut c_void) -> Ordering {
    debug_assert!(!probe.is_null());
    // SAFETY: `probe` is the `UnpackedRecord*` SQLite passed to the running seek (it
    // outlives the call); `stored` is a live slice of `stored.len()` bytes.
    sign(unsafe { ipg_c_cmp_probe(stored.len() as c_int, stored.as_ptr(), probe) })
}

/// The comparator of every index tree: two records, or a record and the probe marker.
pub fn record_cmp(a: &[u8], b: &[u8]) -> Ordering {
    if a == MARKER || b == MARKER {
        let probe = PROBE.with(|p| p.get());
        assert!(
            !probe.is_null(),
            "index seek marker compared outside a seek"
        );
        let stored = if b == MARKER { a } else { b };
        let c = cmp_probe(stored, probe);
        return if b == MARKER { c } else { c.reverse() };
    }
    let ki = KEYINFO.with(|k| k.get());
    assert!(!ki.is_null(), "index comparison without a KeyInfo");
    let mut failed: c_int = 0;
    // SAFETY: KEYINFO is the KeyInfo of the cursor whose engine call is running
    // (`with_order`); SQLite keeps it alive while the cursor is open. Both slices live;
    // `failed` is a live local.
    let c = unsafe {
        ipg_c_cmp_records(
            ki,
            a.len() as c_int,
            a.as_ptr(),
            b.len() as c_int,
            b.as_ptr(),
            &mut failed,
        )
    };
    // A comparator has no error path: a made-up answer could make an insert replace an
    // unrelated entry, so stop the engine call (the entry point's catch_unwind turns
    // this into SQLITE_INTERNAL, and the statement rolls back).
    assert!(
        failed == 0,
        "index record comparison failed (out of memory or corrupt record)"
    );
    sign(c)
}

/// Run one engine call with the cursor's `KeyInfo` (and, for a seek, the probe) set for
/// the comparator; both are cleared after the call whatever it returns.
pub fn with_order<R>(keyinfo: *mut c_void, probe: *mut c_void, f: impl FnOnce() -> R) -> R {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            KEYINFO.with(|k| k.set(null_mut()));
            PROBE.with(|p| p.set(null_mut()));
        }
    }
    KEYINFO.with(|k| k.set(keyinfo));
    PROBE.with(|p| p.set(probe));
    let _reset = Reset;
    f()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marker_is_not_a_valid_record() {
        assert!(!is_record_header_sane(MARKER));
        // A real record: header of 3 bytes (size, INTEGER 1-byte, TEXT len 1), then 7, "a".
        assert!(is_record_header_sane(&[3, 1, 15, 7, b'a']));
        // A header longer than the record is refused, as for the marker.
        assert!(!is_record_header_sane(&[9, 1, 15]));
        assert!(!is_record_header_sane(&[]));
    }
}
