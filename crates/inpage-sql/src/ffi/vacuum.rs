//! `PRAGMA auto_vacuum`, `PRAGMA incremental_vacuum` and `PRAGMA freelist_count` on the
//! engine's setting ([`AutoVacuum`], stored in the file's header) and its page moves
//! (`WriteTxn::vacuum_free`).
//!
//! As in stock SQLite (btree.c `sqlite3BtreeSetAutoVacuum`, pragma.c):
//! - Before the database has a table, the pragma's setting is kept by the connection and
//!   written with the first table it creates (`ipg_create` calls [`apply_pending`]), as
//!   SQLite writes it into page 1 when it creates the database.
//! - Once the database has a table, `NONE` cannot become `FULL` or `INCREMENTAL` or back
//!   (SQLITE_READONLY, which the pragma ignores: it then reads the old value) except by
//!   `VACUUM`, which takes the connection's last requested setting (`db->nextAutovac`,
//!   passed by glue.c); `FULL` and `INCREMENTAL` switch freely (the pragma's program writes
//!   meta 7, `BTREE_INCR_VACUUM`, which here names the setting instead of a stored value).
//! - Modes whose pages cannot move (the DHL, IPS and MVBT layouts keep committed
//!   versions in their pages) refuse `FULL` and `INCREMENTAL` the same way, so the pragma
//!   keeps reading 0 there: nothing pretends to shrink the file.
//!
//! `FULL` moves pages in the engine's commit; `incremental_vacuum(N)` is N calls of
//! [`ipg_incr_vacuum`], each giving one page back (`SQLITE_DONE` once none is free).

use super::*;
use inpage::AutoVacuum;

impl Conn {
    /// The header this connection sees now: its transaction's, else the latest.
    fn header_now(&self) -> Option<inpage::Header> {
        match &self.txn {
            Txn::Read(r) => Some(r.snapshot_header().clone()),
            Txn::Write(w) => Some(w.snapshot_header().clone()),
            Txn::None => self.db.as_ref().map(|d| d.header()),
        }
    }

    /// Whether the database has a table yet (SQLite's `BTS_PAGESIZE_FIXED`, near
    /// enough): table numbers come from meta 4, zero until the first table.
    fn has_tables(&self) -> bool {
        self.header_now().is_some_and(|h| h.meta[3] != 0)
    }

    /// Whether the database's mode can move pages (unknown while detached: yes, and the
    /// engine refuses later if not).
    fn pages_can_move(&self) -> bool {
        self.db
            .as_ref()
            .is_none_or(|d| d.journal_mode().keeps_free_list())
    }
}

fn setting(code: c_int) -> Option<AutoVacuum> {
    u8::try_from(code).ok().and_then(AutoVacuum::from_code)
}

/// `sqlite3BtreeGetAutoVacuum`: 0 NONE, 1 FULL, 2 INCREMENTAL.
///
/// # Safety
/// `conn` as in [`conn`].
#[no_mangle]
pub unsafe extern "C" fn ipg_auto_vacuum_get(conn: *mut Conn) -> c_int {
    guard(0, || {
        // SAFETY: contract.
        let Some(c) = (unsafe { self::conn(conn) }) else {
            return 0;
        };
        match c.next_av {
            Some(av) if !c.has_tables() => c_int::from(av.code()),
            _ => c
                .header_now()
                .map_or(0, |h| c_int::from(h.auto_vacuum.code())),
        }
    })
}

/// `sqlite3BtreeSetAutoVacuum` (module docs): OK, or SQLITE_READONLY where the setting
/// cannot change now.
///
/// # Safety
/// `conn` as in [`conn`].
#[no_mangle]
pub unsafe extern "C" fn ipg_auto_vacuum_set(conn: *mut Conn, code: c_int) -> c_int {
    guard(INTERNAL, || {
        // SAFETY: contract.
        let Some(c) = (unsafe { self::conn(conn) }) else {
            return MISUSE;
        };
        let Some(av) = setting(code) else {
            return MISUSE;
        };
        if av != AutoVacuum::None && !c.pages_can_move() {
            return READONLY;
        }
        if !c.has_tables() {
            c.next_av = Some(av);
            return OK;
        }
        let now = c.header_now().map_or(AutoVacuum::None, |h| h.auto_vacuum);
        if (av == AutoVacuum::None) != (now == AutoVacuum::None) {
            return READONLY;
        }
        OK
    })
}

/// Write the setting the pragma asked for before the first table when `ipg_create` made
/// that table (number 2: table 1 is the schema's), in its write transaction. A setting
/// asked for while another connection created the first table is dropped, as stock
/// drops it.
pub(super) fn apply_pending(c: &mut Conn, table: u32) -> Result<(), Error> {
    let Some(av) = c.next_av.take() else {
        return Ok(());
    };
    if table != 2 {
        return Ok(());
    }
    match &mut c.txn {
        Txn::Write(w) => take_setting(w, av),
        _ => Ok(()),
    }
}

/// Store `av` where the transaction can hold it; elsewhere nothing changes (the pragma
/// then reads NONE, as stock answers a database that cannot take it).
fn take_setting(w: &mut WriteTxn, av: AutoVacuum) -> Result<(), Error> {
    if av == AutoVacuum::None || w.can_vacuum() {
        w.set_auto_vacuum(av)
    } else {
        Ok(())
    }
}

/// `VACUUM` in place: the database takes setting `code` (SQLite's `nextAutovac`, or
/// the database's own) inside VACUUM's write transaction, where the mode can move pages.
///
/// # Safety
/// `conn` as in [`conn`].
#[no_mangle]
pub unsafe extern "C" fn ipg_auto_vacuum_vacuum(conn: *mut Conn, code: c_int) -> c_int {
    guard(INTERNAL, || {
        // SAFETY: contract.
        let Some(c) = (unsafe { self::conn(conn) }) else {
            return MISUSE;
        };
        let Some(av) = setting(code) else {
            return MISUSE;
        };
        let r = match &mut c.txn {
            Txn::Write(w) => take_setting(w, av),
            _ => return MISUSE,
        };
        match r {
            Ok(()) => OK,
            Err(e) => c.fail(&e),
        }
    })
}

/// Meta 0 (`BTREE_FREE_PAGE_COUNT`, `PRAGMA freelist_count`): the free-list length (0
/// in the modes that keep no free list).
pub(super) fn free_count(c: &Conn) -> u32 {
    c.header_now().map_or(0, |h| h.freelist_count)
}

/// Meta 7 (`BTREE_INCR_VACUUM`): 1 when the setting is INCREMENTAL.
pub(super) fn incr_flag(c: &Conn) -> u32 {
    c.header_now()
        .map_or(0, |h| u32::from(h.auto_vacuum == AutoVacuum::Incremental))
}

/// Writing meta 7 switches between FULL (0) and INCREMENTAL (else) on a database that
/// has one of them; on one with NONE it is ignored (SQLite writes it only where meta 4
/// says the database is auto-vacuum capable).
pub(super) fn set_incr_flag(w: &mut WriteTxn, v: u32) -> Result<(), Error> {
    if w.auto_vacuum() == AutoVacuum::None {
        return Ok(());
    }
    w.set_auto_vacuum(if v != 0 {
        AutoVacuum::Incremental
    } else {
        AutoVacuum::Full
    })
}

/// `sqlite3BtreeIncrVacuum`: give one free page back; SQLITE_DONE when there is none,
/// or the database has no auto_vacuum setting (as stock answers a database without it).
///
/// # Safety
/// `conn` as in [`conn`].
#[no_mangle]
pub unsafe extern "C" fn ipg_incr_vacuum(conn: *mut Conn) -> c_int {
    guard(INTERNAL, || {
        // SAFETY: contract.
        let Some(c) = (unsafe { self::conn(conn) }) else {
            return MISUSE;
        };
        let w = match c.write() {
            Ok(w) => w,
            Err(rc) => return rc,
        };
        if w.auto_vacuum() == AutoVacuum::None || !w.can_vacuum() {
            return DONE;
        }
        match w.vacuum_free(1) {
            Ok(0) => DONE,
            Ok(_) => OK,
            Err(e) => c.fail(&e),
        }
    })
}
