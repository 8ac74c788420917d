//! Whole-database copies: VACUUM (`ipg_copy`), the online backup API in steps
//! (`ipg_backup_*`), `sqlite3_serialize`/`sqlite3_deserialize` (`ipg_serialize`,
//! `ipg_deserialize`), and `PRAGMA wal_checkpoint` (`ipg_checkpoint`).
//!
//! Invariants, and why they hold:
//! - A copy is tree by tree: every `sqlite/<n>` tree of the source, same names and
//!   kinds, streamed in the source's order into a bulk load (`WriteTxn::load_tree`: each
//!   node written once, packed to capacity; an index entry goes after the ones before
//!   it, so no `KeyInfo` is needed), then the eight meta values. The destination's own
//!   `sqlite/<n>` trees are dropped first, in the same write transaction, so the copy
//!   replaces the destination atomically; where the mode allows, by resetting the whole
//!   page space (`clear_ours`), so the copy lands in the low pages and the file shrinks
//!   to it.
//! - A backup's steps all write one destination transaction, committed by the step that
//!   copies the last tree. Each step reads the source's latest committed state (or the
//!   source connection's own transaction, as SQLite's does); if that state is not the one
//!   the earlier steps copied, the destination transaction is rolled back to its start
//!   and the copy begins again from the new state (SQLite restarts a backup the same
//!   way when another connection writes the source). So the destination ends up equal to
//!   one committed state of the source, never a mix.
//! - Progress is counted in trees (`sqlite_schema`, each table and index), not pages: a
//!   step copies whole trees, `pagecount` is the number of trees and `remaining` those
//!   not yet copied.
//! - A serialized image is an inpage database file (mode `dhl-cc`, the source's page
//!   size) holding a copy of the database; deserializing opens such an image as a private
//!   in-memory database replacing the schema's. A buffer that is not such an image is
//!   refused with `SQLITE_NOTADB` and the database is left as it was.

use super::*;
use inpage::vfs::{MemVfs, OpenOptions, Vfs};
use inpage::{CursorOps, TreeInfo};

/// Trees of the SQL layer (the catalog also holds nothing else today).
fn ours(i: &TreeInfo) -> bool {
    i.name.starts_with("sqlite/")
}

/// Stream tree `info` of `tx` into a new tree of the same name in `w`.
fn copy_tree<T: CursorOps>(tx: &T, w: &mut WriteTxn, info: &TreeInfo) -> Result<(), Error> {
    let indexed = info.external_order;
    let (src, dst) = if indexed {
        (
            tx.open_probe_tree(&info.name, record_order::no_order())?,
            w.create_probe_tree(&info.name, record_order::no_order())?,
        )
    } else {
        (
            tx.open_tree(&info.name)?,
            w.create_tree(&info.name, info.kind)?,
        )
    };
    // A fresh cursor on an unchanged tree steps without comparing; the copy is loaded in
    // bulk (each node written once, packed), in the source's order. The rows of a leaf
    // are pushed straight from its image (`Cursor::leaf_rest`), so a row costs no copy of
    // its value and no step through the cursor API; a row whose key or value lives in a
    // chain goes the row-at-a-time way.
    let int = !indexed && info.kind == inpage::KeyKind::Int;
    let mut c = tx.open_cursor(&src)?;
    w.load_tree(&dst, |load| {
        let mut ok = tx.cursor_first(&mut c)?;
        while ok {
            let mut failed = None;
            let n = c.leaf_rest(&mut |ik, k, v| {
                let r = match ik.filter(|_| int) {
                    Some(i) => load.push(Key::Int(i), v),
                    None => load.push(Key::Bytes(k), v),
                };
                r.map_err(|e| failed = Some(e)).is_ok()
            });
            if let Some(e) = failed {
                return Err(e);
            }
            if n > 1 {
                tx.cursor_skip_in_leaf(&mut c, n - 1)?;
            }
            if n == 0 {
                let v = tx.cursor_value(&c)?.unwrap_or_default();
                if let Some(k) = c.key() {
                    match c.int_key().filter(|_| int) {
                        Some(i) => load.push(Key::Int(i), &v)?,
                        None => load.push(Key::Bytes(k), &v)?,
                    }
                }
            }
            ok = tx.cursor_next(&mut c)?;
        }
        Ok(())
    })?;
    Ok(())
}

fn metas<T: ReadableTxn>(tx: &T) -> Result<[u32; 8], Error> {
    let mut meta = [0u32; 8];
    for (i, m) in meta.iter_mut().enumerate() {
        *m = tx.meta(i)?;
    }
    Ok(meta)
}

/// Empty `w` of the SQL layer's trees before a copy replaces them. Where the database
/// holds nothing else and the mode allows it, the whole page space is reset
/// (`WriteTxn::clear_all`), so the copy fills the low pages and the file is cut back to
/// it, as SQLite's `VACUUM` and backup leave a file no longer than its content. Else
/// (a DHL mode, or trees the SQL layer does not own) the trees are dropped one by one:
/// their pages become free pages of a file that keeps its length.
fn clear_ours(w: &mut WriteTxn) -> Result<(), Error> {
    let trees = w.list_trees()?;
    if trees.iter().all(ours) && w.can_clear_all() {
        return w.clear_all();
    }
    for old in trees.into_iter().filter(ours) {
        w.drop_tree(&old.name)?;
    }
    Ok(())
}

/// Replace everything in `w` by a copy of `tx`.
fn copy_into<T: CursorOps>(tx: &T, w: &mut WriteTxn) -> Result<(), Error> {
    let trees: Vec<TreeInfo> = tx.list_trees()?.into_iter().filter(ours).collect();
    let meta = metas(tx)?;
    clear_ours(w)?;
    for info in &trees {
        copy_tree(tx, w, info)?;
    }
    for (i, m) in meta.iter().enumerate() {
        w.set_meta(i, *m)?;
    }
    Ok(())
}

/// Replace everything in `to` (in a write transaction) by a copy of `from` (in any
/// transaction): SQLite's `sqlite3BtreeCopyFile` (VACUUM).
///
/// # Safety
/// `to`, `from` as in [`conn`], distinct.
#[no_mangle]
pub unsafe extern "C" fn ipg_copy(to: *mut Conn, from: *mut Conn) -> c_int {
    guard(INTERNAL, || {
        if std::ptr::eq(to, from) {
            return MISUSE;
        }
        // SAFETY: contract (distinct, live connections).
        let (Some(t), Some(f)) = (unsafe { self::conn(to) }, unsafe { self::conn(from) }) else {
            return MISUSE;
        };
        t.trees.clear();
        let Txn::Write(w) = &mut t.txn else {
            return MISUSE;
        };
        let r = with_txn!(f, tx => copy_into(tx, w));
        match r {
            Ok(()) => OK,
            Err(e) => t.fail(&e),
        }
    })
}

/// VACUUM in place: replace everything in `conn`'s write transaction by a packed copy of
/// the database's own committed state (which the transaction, just begun by VACUUM, has
/// not changed). A read transaction holds that state while the write transaction
/// rebuilds the pages under it; it ends before the commit.
///
/// # Safety
/// `conn` as in [`conn`].
#[no_mangle]
pub unsafe extern "C" fn ipg_vacuum_self(conn: *mut Conn) -> c_int {
    guard(INTERNAL, || {
        // SAFETY: contract.
        let Some(c) = (unsafe { self::conn(conn) }) else {
            return MISUSE;
        };
        c.trees.clear();
        let tx = match c.db().and_then(|d| d.begin_read()) {
            Ok(tx) => tx,
            Err(e) => return c.fail(&e),
        };
        let Txn::Write(w) = &mut c.txn else {
            return MISUSE;
        };
        let r = copy_into(&tx, w);
        drop(tx);
        match r {
            Ok(()) => OK,
            Err(e) => c.fail(&e),
        }
    })
}

/// An online backup in progress (`sqlite3_backup`): what the destination's write
/// transaction holds so far.
///
/// Between two files of the same page layout and size (`WriteTxn::can_copy_pages_of`)
/// it copies pages, as SQLite's backup does: the destination becomes a page-for-page
/// image of the source's state, `n` pages per step, and the progress counts pages. It
/// counts the pages a SQLite file of the state would have, near enough: the engine's
/// header page and its catalog's root page are left out (the first step copies the
/// catalog's root besides its `n`), so a one-table database is two pages, as clients
/// that step a page at a time expect (CPython's `test_backup`). Otherwise (a DHL mode on
/// either side, another page size) it copies the SQL layer's trees row by row, `n` trees
/// per step.
pub struct Backup {
    /// The committed state of the source the copy so far is of (None: nothing copied).
    from_fcc: Option<u64>,
    /// Copying pages (else trees).
    by_pages: bool,
    /// Pages still to copy (by pages), the catalog's root among them until
    /// `catalog_copied`.
    pages_left: u32,
    catalog_copied: bool,
    /// Trees of that state not yet copied (in catalog order; by trees).
    todo: Vec<TreeInfo>,
    /// How many pages or trees the source state has.
    total: usize,
    meta: [u32; 8],
}

/// A new backup (nothing copied yet). Freed by [`ipg_backup_free`].
#[no_mangle]
pub extern "C" fn ipg_backup_new() -> *mut Backup {
    Box::into_raw(Box::new(Backup {
        from_fcc: None,
        by_pages: false,
        pages_left: 0,
        catalog_copied: false,
        todo: Vec::new(),
        total: 0,
        meta: [0; 8],
    }))
}

/// # Safety
/// `b` is null or from [`ipg_backup_new`], not yet freed.
#[no_mangle]
pub unsafe extern "C" fn ipg_backup_free(b: *mut Backup) {
    if !b.is_null() {
        // SAFETY: contract.
        drop(unsafe { Box::from_raw(b) });
    }
}

impl Backup {
    /// Copy up to `n` pages or trees (all if negative) of `tx` into `w`, starting over if
    /// `tx`'s state is not the one copied so far. Ok(true) once everything is copied.
    fn step<T: CursorOps>(&mut self, tx: &T, w: &mut WriteTxn, n: c_int) -> Result<bool, Error> {
        let fcc = tx.snapshot_fcc();
        if self.from_fcc != Some(fcc) {
            if self.from_fcc.is_some() {
                // The source changed since the last step: start again from its new state.
                w.rollback_all()?;
            }
            self.by_pages = w.can_copy_pages_of(tx);
            if self.by_pages {
                let count = w.begin_page_copy(tx)?;
                self.total = count.saturating_sub(2) as usize;
                self.pages_left = count - 1;
                self.catalog_copied = false;
                self.todo.clear();
            } else {
                self.todo = tx.list_trees()?.into_iter().filter(ours).collect();
                self.total = self.todo.len();
                self.meta = metas(tx)?;
                clear_ours(w)?;
            }
            self.from_fcc = Some(fcc);
        }
        // n = 0 copies nothing (the step still notices a changed source), as SQLite's.
        if self.by_pages {
            let mut n = u32::try_from(n).unwrap_or(u32::MAX);
            if n > 0 && !self.catalog_copied {
                n = n.saturating_add(1);
                self.catalog_copied = true;
            }
            self.pages_left = w.copy_pages(tx, n)?;
            // The header took the source's meta values with its pages.
            return Ok(self.pages_left == 0);
        }
        let take = if n < 0 {
            self.todo.len()
        } else {
            (n as usize).min(self.todo.len())
        };
        for info in self.todo.drain(..take).collect::<Vec<_>>() {
            copy_tree(tx, w, &info)?;
        }
        if !self.todo.is_empty() {
            return Ok(false);
        }
        for (i, m) in self.meta.iter().enumerate() {
            w.set_meta(i, *m)?;
        }
        Ok(true)
    }

    /// Pages or trees not yet copied.
    fn remaining(&self) -> usize {
        if self.by_pages {
            let uncounted = u32::from(!self.catalog_copied);
            self.pages_left.saturating_sub(uncounted) as usize
        } else {
            self.todo.len()
        }
    }
}

/// One `sqlite3_backup_step`: copy up to `n` pages (or trees, see [`Backup`]) of `src`
/// into `dest` (in a write transaction the glue began). Returns DONE once everything is
/// copied (the glue then commits), OK if some remain; `remaining` and `total` count
/// them.
///
/// # Safety
/// `b` from [`ipg_backup_new`]; `dest`, `src` as in [`conn`], distinct; the out
/// pointers valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ipg_backup_step(
    b: *mut Backup,
    dest: *mut Conn,
    src: *mut Conn,
    n: c_int,
    remaining: *mut c_int,
    total: *mut c_int,
) -> c_int {
    guard(INTERNAL, || {
        // SAFETY: contract.
        let (Some(b), Some(t), Some(f)) =
            (unsafe { b.as_mut() }, unsafe { self::conn(dest) }, unsafe {
                self::conn(src)
            })
        else {
            return MISUSE;
        };
        t.trees.clear();
        let Txn::Write(w) = &mut t.txn else {
            return MISUSE;
        };
        // The source connection's own transaction if it has one (as SQLite reads through
        // the source b-tree), else the latest committed state.
        let r = match &f.txn {
            Txn::Read(tx) => b.step(tx, w, n),
            Txn::Write(tx) => b.step(tx, w, n),
            Txn::None => match f.db().and_then(|d| d.begin_read()) {
                Ok(tx) => b.step(&tx, w, n),
                Err(e) => Err(e),
            },
        };
        let left = b.remaining();
        // SAFETY: contract.
        unsafe {
            *remaining = c_int::try_from(left).unwrap_or(c_int::MAX);
            *total = c_int::try_from(b.total).unwrap_or(c_int::MAX);
        }
        match r {
            Ok(true) => DONE,
            Ok(false) => OK,
            Err(e) => t.fail(&e),
        }
    })
}

/// The path an image lives at inside its private in-memory file system.
const IMAGE: &str = "/image.db";

/// `sqlite3_serialize`: an inpage database file holding a copy of `conn`'s database (its
/// transaction's view if one is open, else the latest commit), in `*out`/`*len`, valid
/// until the next call on this connection.
///
/// # Safety
/// `conn` as in [`conn`]; `out`, `len` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ipg_serialize(
    conn: *mut Conn,
    out: *mut *const u8,
    len: *mut i64,
) -> c_int {
    guard(INTERNAL, || {
        // SAFETY: contract.
        let Some(c) = (unsafe { self::conn(conn) }) else {
            return MISUSE;
        };
        let image = match &c.txn {
            Txn::Read(tx) => serialize(tx, c.held().page_size()),
            Txn::Write(tx) => serialize(tx, c.held().page_size()),
            Txn::None => c
                .db()
                .and_then(|d| d.begin_read().and_then(|tx| serialize(&tx, d.page_size()))),
        };
        match image {
            Ok(bytes) => {
                c.image = bytes;
                // SAFETY: contract; the bytes live in the connection until the next call.
                unsafe {
                    *out = c.image.as_ptr();
                    *len = c.image.len() as i64;
                }
                OK
            }
            Err(e) => c.fail(&e),
        }
    })
}

fn serialize<T: CursorOps>(tx: &T, page_size: usize) -> Result<Vec<u8>, Error> {
    let vfs = Arc::new(MemVfs::new());
    let cfg = Config::default()
        .vfs(vfs.clone())
        .journal_mode(inpage::DEFAULT_JOURNAL_MODE)
        .page_size(page_size as u32)
        .direct_writes(inpage::DirectWrites::Off);
    let db = Database::open(IMAGE, cfg)?;
    let mut w = db.begin_write()?;
    copy_into(tx, &mut w)?;
    w.commit()?;
    db.close()?;
    let f = vfs
        .open(std::path::Path::new(IMAGE), OpenOptions::default())
        .map_err(Error::io("open", std::path::Path::new(IMAGE)))?;
    let n = f
        .len()
        .map_err(Error::io("stat", std::path::Path::new(IMAGE)))?;
    let mut bytes = vec![0u8; n as usize];
    f.read_exact_at(&mut bytes, 0)
        .map_err(Error::io("read", std::path::Path::new(IMAGE)))?;
    Ok(bytes)
}

/// `sqlite3_deserialize`: make `conn`'s database a private in-memory copy of the image
/// `data[..len]` (read-only if `read_only`). The connection must have no transaction.
/// A buffer that is not a database image is NOTADB and changes nothing.
///
/// # Safety
/// `conn` as in [`conn`]; `data` valid for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn ipg_deserialize(
    conn: *mut Conn,
    data: *const u8,
    len: i64,
    read_only: c_int,
) -> c_int {
    guard(INTERNAL, || {
        // SAFETY: contract.
        let Some(c) = (unsafe { self::conn(conn) }) else {
            return MISUSE;
        };
        if c.txn_open() {
            return BUSY;
        }
        let bytes: &[u8] = if len <= 0 || data.is_null() {
            &[]
        } else {
            // SAFETY: contract.
            unsafe { std::slice::from_raw_parts(data, len as usize) }
        };
        let vfs = Arc::new(MemVfs::new());
        let opened = (|| {
            let f = vfs
                .open(std::path::Path::new(IMAGE), OpenOptions::CREATE)
                .map_err(Error::io("create", std::path::Path::new(IMAGE)))?;
            f.write_at(bytes, 0)
                .map_err(Error::io("write", std::path::Path::new(IMAGE)))?;
            if bytes.is_empty() {
                // An empty image is an empty database, as an empty file is.
                return Database::open(IMAGE, Config::default().vfs(vfs.clone()));
            }
            Database::open(
                IMAGE,
                Config::default()
                    .vfs(vfs.clone())
                    .create(false)
                    .direct_writes(inpage::DirectWrites::Off),
            )
        })();
        match opened {
            Ok(db) => {
                let old = c.db.replace(db);
                c.pending = None;
                if let Some(p) = c.shared_path.take() {
                    if old.is_some() && c.fork_gen == inpage::vfs::fork_generation() {
                        close_shared(&p);
                    }
                }
                drop(old);
                c.mem = true;
                c.read_only = read_only != 0;
                c.trees.clear();
                c.trees_view = None;
                c.own_fcc = 0;
                OK
            }
            Err(e) => {
                c.fail(&e);
                NOTADB
            }
        }
    })
}

/// `PRAGMA wal_checkpoint` / `sqlite3_wal_checkpoint_v2` on a database: in a mode with a
/// log, move it into the database file (`*log`: frames in the log before, `*done`: frames
/// moved; after `truncate`, SQLite's TRUNCATE, the log's file is cut to zero bytes and
/// both are 0); in other modes nothing to do (the outputs are left alone, as SQLite
/// leaves them for a database not in WAL mode). BUSY while a write transaction is active,
/// LOCKED if this connection has a transaction open.
///
/// # Safety
/// `conn` as in [`conn`]; `log`, `done` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ipg_checkpoint(
    conn: *mut Conn,
    truncate: c_int,
    log: *mut c_int,
    done: *mut c_int,
) -> c_int {
    guard(INTERNAL, || {
        // SAFETY: contract.
        let Some(c) = (unsafe { self::conn(conn) }) else {
            return MISUSE;
        };
        if c.txn_open() {
            return LOCKED;
        }
        if c.mem || c.read_only {
            return OK;
        }
        let d = match c.db() {
            Ok(d) => d,
            Err(e) => return c.fail(&e),
        };
        if !d.journal_mode().capabilities().replays_log {
            return OK;
        }
        let frames = d.log_frames();
        let r = if truncate != 0 {
            d.try_checkpoint_truncating()
        } else {
            d.try_checkpoint()
        };
        match r {
            Ok(()) => {
                // After TRUNCATE the log holds no frame at all, as stock reports it.
                let n = if truncate != 0 {
                    0
                } else {
                    c_int::try_from(frames).unwrap_or(c_int::MAX)
                };
                // SAFETY: contract.
                unsafe {
                    *log = n;
                    *done = n;
                }
                OK
            }
            Err(e) => c.fail(&e),
        }
    })
}
