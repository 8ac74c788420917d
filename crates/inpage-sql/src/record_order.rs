//! Index order: SQLite's record comparison, handed to the engine's probe-ordered trees.
//!
//! Every index (BLOBKEY) b-tree is an inpage probe tree: a seek or an insert passes a
//! probe that compares a stored record with the caller's `UnpackedRecord`
//! ([`Probe`]); the tree's symmetric `order` ([`keyinfo_order`]) compares two stored
//! records under the cursor's `KeyInfo`, and the engine asks for it only to find a
//! cursor's key again after the tree changed.
//!
//! Invariants, and why they hold:
//! - The `KeyInfo` an order uses is alive for as long as the order can be called: the
//!   order owns a reference ([`KeyInfoHold`], sqlite3KeyInfoRef/Unref), and the order
//!   lives only in the tree handle and engine cursor of one `Cur`, dropped when SQLite
//!   closes that cursor (under the connection's mutex, before its `sqlite3*` goes).
//! - The order and probes run only inside engine calls made from a glue entry point,
//!   i.e. on the thread SQLite is running the connection on, one call at a time.
//! - A comparison that cannot answer (out of memory, corrupt record) never makes up an
//!   order: it panics, the entry point's `catch_unwind` turns it into SQLITE_INTERNAL,
//!   and the statement rolls back.

use std::cmp::Ordering;
use std::ffi::{c_int, c_void};
use std::sync::Arc;

use inpage::Comparator;

extern "C" {
    /// The `RecordCompare` function (`sqlite3VdbeFindCompare`) for a probe
    /// (`UnpackedRecord*`): `<0` when a stored record sorts before the probe.
    fn ipg_c_find_compare(probe: *mut c_void) -> *mut c_void;
    /// Compare two stored records under a `KeyInfo*`; `*failed` = 1: no answer (OOM,
    /// corrupt record).
    fn ipg_c_cmp_records(
        keyinfo: *mut c_void,
        n_order: c_int,
        n1: c_int,
        k1: *const u8,
        n2: c_int,
        k2: *const u8,
        failed: *mut c_int,
    ) -> c_int;
    fn ipg_c_keyinfo_ref(keyinfo: *mut c_void);
    fn ipg_c_keyinfo_unref(keyinfo: *mut c_void);
}

/// SQLite's `RecordCompare`: a stored record against an `UnpackedRecord*`.
type RecordCompare = unsafe extern "C" fn(c_int, *const u8, *mut c_void) -> c_int;

/// A stored record compared with a probe (`UnpackedRecord*`), by the comparator chosen
/// once: an engine call compares its probe with a dozen or more stored records, and
/// stock SQLite picks the comparator once per seek too. The caller zeroes the probe's
/// `errCode` before the engine call and checks it after (SQLPLAN trap 2).
pub struct Probe {
    cmp: RecordCompare,
    probe: *mut c_void,
}

impl Probe {
    /// # Safety
    /// `probe` is a live `UnpackedRecord*` for as long as the `Probe` is used, and is
    /// not changed meanwhile (the comparator chosen depends on it).
    pub unsafe fn new(probe: *mut c_void) -> Probe {
        debug_assert!(!probe.is_null());
        // SAFETY: `probe` is live (contract).
        let f = unsafe { ipg_c_find_compare(probe) };
        assert!(
            !f.is_null(),
            "sqlite3VdbeFindCompare returned no comparator"
        );
        // SAFETY: a non-null function pointer of SQLite's `RecordCompare` type, which
        // has exactly this signature (`int (*)(int, const void*, UnpackedRecord*)`).
        let cmp = unsafe { std::mem::transmute::<*mut c_void, RecordCompare>(f) };
        Probe { cmp, probe }
    }

    /// How the stored record `stored` orders against the probe.
    pub fn cmp(&self, stored: &[u8]) -> Ordering {
        // SAFETY: `probe` is live and unchanged (`Probe::new`'s contract); `stored` is a
        // live slice of `stored.len()` bytes (records are far below i32::MAX).
        unsafe { (self.cmp)(stored.len() as c_int, stored.as_ptr(), self.probe) }.cmp(&0)
    }
}

/// A counted reference on a SQLite `KeyInfo`, released when dropped.
struct KeyInfoHold(*mut c_void);

// SAFETY: the pointer is only dereferenced (by C) inside glue entry points, which SQLite
// serialises per connection (module invariants); moving the holder between threads
// moves no access with it.
unsafe impl Send for KeyInfoHold {}
// SAFETY: as for Send: no two threads use the KeyInfo at once.
unsafe impl Sync for KeyInfoHold {}

impl KeyInfoHold {
    // A method, so closures capture the whole holder (with its Send/Sync), not the field.
    fn ptr(&self) -> *mut c_void {
        self.0
    }
}

impl Drop for KeyInfoHold {
    fn drop(&mut self) {
        // SAFETY: the reference taken in `keyinfo_order` is released exactly once.
        unsafe { ipg_c_keyinfo_unref(self.0) };
    }
}

/// The `order` of an index tree under `keyinfo`: two stored records compared as SQLite
/// does, on their first `n_order` fields (0 = all) — the fields inserts place entries by
/// (`ipgOrderFields` in glue.c), so that the order agrees with every insert's probe.
///
/// # Safety
/// `keyinfo` is a live `KeyInfo*` (this takes its own reference on it).
pub unsafe fn keyinfo_order(keyinfo: *mut c_void, n_order: c_int) -> Comparator {
    debug_assert!(!keyinfo.is_null());
    // SAFETY: live (contract); the reference is released by `KeyInfoHold::drop`.
    unsafe { ipg_c_keyinfo_ref(keyinfo) };
    let hold = KeyInfoHold(keyinfo);
    Arc::new(move |a: &[u8], b: &[u8]| {
        let mut failed: c_int = 0;
        // SAFETY: `hold` keeps the KeyInfo alive; both slices live; `failed` is a local.
        let c = unsafe {
            ipg_c_cmp_records(
                hold.ptr(),
                n_order,
                a.len() as c_int,
                a.as_ptr(),
                b.len() as c_int,
                b.as_ptr(),
                &mut failed,
            )
        };
        // No error path here: a made-up answer could lose a row (module invariants).
        assert!(
            failed == 0,
            "index record comparison failed (out of memory or corrupt record)"
        );
        c.cmp(&0)
    })
}

/// The order of an index tree opened without a `KeyInfo` (counting, clearing, copying:
/// walks that never compare). Asked anyway, it stops the call (SQLITE_INTERNAL) rather
/// than guess an order.
pub fn no_order() -> Comparator {
    Arc::new(|_: &[u8], _: &[u8]| -> Ordering { panic!("index order asked for without a KeyInfo") })
}
