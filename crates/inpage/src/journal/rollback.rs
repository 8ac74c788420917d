//! Rollback-journal modes `delete`, `truncate` and `persist` (SQLite's pager.c protocol).
//!
//! File `<db>-journal`:
//! ```text
//! sector 0 (512 bytes, header; the rest of the sector is zero):
//!   0  magic  "inpgJRNL"           8  version u32 (1)       12 page_size u32
//!   16 nonce u64                   24 old_page_count u32    28 nrec u32
//!   32 tid u64                     40 crc32c(bytes 0..40) u32
//! then nrec records from offset 512, each 4 + page_size + 4 bytes:
//!   pgno u32 | original page image | xxh3(seed nonce; pgno ‖ image) u32 (`image_checksum`: not
//!   crc32c, see there)
//! ```
//! All integers little-endian.
//!
//! Commit: records for `batch.originals` and the header are written, the journal is
//! fdatasync'ed (and its directory synced if it may be new), only then are the new pages
//! written into the database and fdatasync'ed, and only then is the journal finalized
//! (unlink + dir sync / truncate + fsync / zeroed header + fdatasync). The commit is done
//! when finalize is durable.
//!
//! Invariants, and why they hold under a disk that loses, reorders and tears unsynced
//! writes at 512-byte sectors:
//! - *The database is never written while the journal that can undo the write is not
//!   durable.* The journal sync (plus the dir sync that makes a new file's entry durable)
//!   precedes every database write, so after a power cut either the database is untouched
//!   or the whole journal (header and every record) is on disk.
//! - *A record is trusted only if its crc verifies under this transaction's nonce.* The
//!   nonce is fresh per transaction, so leftovers of an older transaction in a reused
//!   (truncate/persist) file, torn records and lost writes all fail the check. Recovery
//!   stops at the first failing record; that can only happen when the journal was never
//!   synced, in which case the database was not touched and a partial rollback rewrites
//!   pages with the images they already have.
//! - *A journal is hot only while its transaction may be half-applied.* The header sits
//!   alone in sector 0 so finalize (zeroing it, truncating, unlinking) is one atomic step;
//!   it is made durable before `commit` returns, so a committed transaction is never
//!   rolled back by a resurrected journal.
//! - Pages at or past `old_page_count` are not journaled: the restored header page 0
//!   brings back the old page count and the pages past it are dead. The file is not
//!   shrunk, which keeps the zero-filled chunks allocated. Every database is created
//!   whole (header and catalog root, renamed into place) before its first commit, so
//!   `old_page_count >= 2` in every journal we write: a valid header claiming less is not
//!   ours to act on (it would have recovery cut the database short) and is reported as a
//!   corrupt journal, with nothing written.
//!
//! Rolling back is idempotent, so a crash during recovery just leaves a hot journal that
//! the next open rolls back again.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::util::{check_batch, read_up_to};
use super::{
    dir_of, side_path, Capabilities, CommitBatch, Journal, JournalCtx, JournalMode, ModeSpec,
    Opened, RecoveryAction, RecoveryReport, RollBackHow,
};
use crate::error::{Error, Pgno, Result};
use crate::format::header::valid_page_size;
use crate::le::{get_u32 as le32, get_u64 as le64};
use crate::page::stock::STOCK;

const ROLLBACK_CAPS: Capabilities = Capabilities {
    atomic: true,
    embeds_fcc: false,
    recovers_fcc: false,
    direct_writes: false,
    replays_log: false,
    intent_map: false,
    side_files: &["journal"],
    steals: false,
    durable_at_ack: true,
    survives_process_crash: true,
    region_backed: false,
    appends_beside_readers: false,
};

/// Registry entry of `delete`.
pub(crate) static DELETE: ModeSpec = ModeSpec {
    name: "delete",
    code: 2,
    format: 2,
    summary: "rollback journal, deleted at commit (SQLite DELETE)",
    layout: &STOCK,
    caps: ROLLBACK_CAPS,
    options: &[],
    check_options: super::options::any_value,
    open: open_rollback,
};

/// Registry entry of `truncate`.
pub(crate) static TRUNCATE: ModeSpec = ModeSpec {
    name: "truncate",
    code: 3,
    format: 2,
    summary: "rollback journal, truncated at commit (SQLite TRUNCATE)",
    layout: &STOCK,
    caps: ROLLBACK_CAPS,
    options: &[],
    check_options: super::options::any_value,
    open: open_rollback,
};

/// Registry entry of `persist`.
pub(crate) static PERSIST: ModeSpec = ModeSpec {
    name: "persist",
    code: 4,
    format: 2,
    summary: "rollback journal, header zeroed at commit (SQLite PERSIST)",
    layout: &STOCK,
    caps: ROLLBACK_CAPS,
    options: &[],
    check_options: super::options::any_value,
    open: open_rollback,
};

fn open_rollback(ctx: JournalCtx, mode: JournalMode) -> Result<Opened> {
    let (j, r) = RollbackJournal::open(ctx, mode)?;
    Ok(Opened::plain(j, r))
}
use crate::vfs::{File, OpenOptions, Vfs};

const MAGIC: [u8; 8] = *b"inpgJRNL";
const VERSION: u32 = 1;
/// The header owns the whole first sector so that its write is atomic on a disk that
/// tears only at sector boundaries, and no record write can tear it.
const HDR_SECTOR: usize = 512;
const HDR_CRC_AT: usize = 40;

/// A journal header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Header {
    page_size: u32,
    nonce: u64,
    old_page_count: u32,
    nrec: u32,
    tid: u64,
}

impl Header {
    fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; HDR_SECTOR];
        b[0..8].copy_from_slice(&MAGIC);
        b[8..12].copy_from_slice(&VERSION.to_le_bytes());
        b[12..16].copy_from_slice(&self.page_size.to_le_bytes());
        b[16..24].copy_from_slice(&self.nonce.to_le_bytes());
        b[24..28].copy_from_slice(&self.old_page_count.to_le_bytes());
        b[28..32].copy_from_slice(&self.nrec.to_le_bytes());
        b[32..40].copy_from_slice(&self.tid.to_le_bytes());
        let crc = crc32c::crc32c(&b[..HDR_CRC_AT]);
        b[HDR_CRC_AT..HDR_CRC_AT + 4].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// `None` when the sector is not a valid header of ours (foreign, torn, zeroed).
    fn decode(b: &[u8]) -> Option<Header> {
        if b.len() < HDR_CRC_AT + 4 || b[0..8] != MAGIC || le32(b, 8) != VERSION {
            return None;
        }
        if le32(b, HDR_CRC_AT) != crc32c::crc32c(&b[..HDR_CRC_AT]) {
            return None;
        }
        let h = Header {
            page_size: le32(b, 12),
            nonce: le64(b, 16),
            old_page_count: le32(b, 24),
            nrec: le32(b, 28),
            tid: le64(b, 32),
        };
        valid_page_size(h.page_size).then_some(h)
    }

    /// Hot: its transaction may have been half-applied to the database.
    fn is_hot(&self) -> bool {
        self.nrec > 0
    }
}

fn record_crc(nonce: u64, pgno: Pgno, data: &[u8]) -> u32 {
    super::image_checksum(nonce, &pgno.to_le_bytes(), data)
}

/// The rollback-journal commit protocol.
#[derive(Debug)]
pub(crate) struct RollbackJournal {
    ctx: JournalCtx,
    mode: JournalMode,
    path: PathBuf,
    writer: Mutex<Writer>,
}

#[derive(Debug, Default)]
struct Writer {
    /// Kept open between commits in truncate/persist modes.
    file: Option<Arc<dyn File>>,
    /// Whether this session has synced the directory since it started using the journal.
    /// Once per session even when the file already exists: an earlier process may have
    /// created it and crashed before its directory entry was durable.
    dir_synced: bool,
}

impl RollbackJournal {
    /// Open a rollback-journal mode (`Delete`, `Truncate` or `Persist`), rolling back a
    /// hot journal if the pager has not already done so.
    pub(crate) fn open(
        ctx: JournalCtx,
        mode: JournalMode,
    ) -> Result<(RollbackJournal, RecoveryReport)> {
        if ![
            JournalMode::DELETE,
            JournalMode::TRUNCATE,
            JournalMode::PERSIST,
        ]
        .contains(&mode)
        {
            return Err(Error::Config(format!(
                "journal mode `{mode}` is not a rollback-journal mode"
            )));
        }
        let report = recover_hot_journal(&ctx.vfs, &ctx.db_path, &ctx.db.file)?.unwrap_or_default();
        // Recovery wrote and may have truncated the file behind DbFile's back.
        ctx.db.forget_len();
        let path = ctx.side_path("journal");
        if mode == JournalMode::DELETE {
            remove_finalized(&ctx.vfs, &path, &ctx.dir())?;
        }
        Ok((
            RollbackJournal {
                ctx,
                mode,
                path,
                writer: Mutex::new(Writer::default()),
            },
            report,
        ))
    }

    fn write_journal(&self, w: &mut Writer, batch: &CommitBatch<'_>) -> Result<Arc<dyn File>> {
        let io = |op| Error::io(op, &self.path);
        let file = match (&w.file, self.mode) {
            (Some(f), m) if m != JournalMode::DELETE => f.clone(),
            _ => self
                .ctx
                .vfs
                .open(&self.path, OpenOptions::CREATE)
                .map_err(io("open"))?,
        };
        let ps = self.ctx.db.page_size;
        let hdr = Header {
            page_size: ps as u32,
            nonce: self.ctx.vfs.nonce(batch.tid),
            old_page_count: batch.old_page_count,
            nrec: batch.originals.len() as u32,
            tid: batch.tid,
        };
        let mut recs = Vec::with_capacity(batch.originals.len() * (ps + 8));
        for (pgno, data) in batch.originals {
            recs.extend_from_slice(&pgno.to_le_bytes());
            recs.extend_from_slice(data);
            recs.extend_from_slice(&record_crc(hdr.nonce, *pgno, data).to_le_bytes());
        }
        // One sync covers records and header: until it returns the database is untouched,
        // so any subset of them surviving a crash is harmless (see module docs).
        file.write_at(&recs, HDR_SECTOR as u64)
            .map_err(io("write"))?;
        file.write_at(&hdr.encode(), 0).map_err(io("write"))?;
        if self.ctx.config.mutant() == super::Mutant::NoSyncBeforeMark {
            // Deliberately unsafe (tests of the torture harness only): the database is
            // about to be overwritten while its undo records may still be volatile.
            return Ok(file);
        }
        file.sync_data().map_err(io("fdatasync"))?;
        if self.mode == JournalMode::DELETE || !w.dir_synced {
            let dir = self.ctx.dir();
            self.ctx
                .vfs
                .sync_dir(&dir)
                .map_err(Error::io("sync_dir", &dir))?;
            w.dir_synced = true;
        }
        Ok(file)
    }
}

/// Pages of the batch that existed before it must each have their pre-image in
/// `originals`; a batch without them could not be rolled back.
fn check_originals(batch: &CommitBatch<'_>) -> Result<()> {
    let old = batch
        .pages
        .iter()
        .map(|(p, _)| *p)
        .filter(|&p| p < batch.old_page_count);
    if !old.eq(batch.originals.iter().map(|(p, _)| *p)) {
        return Err(Error::InvalidArgument(
            "commit batch: originals do not match the pages below old_page_count".into(),
        ));
    }
    Ok(())
}

/// Make the journal no longer hot, durably, the way `mode` does it.
fn finalize(
    vfs: &Arc<dyn Vfs>,
    path: &Path,
    file: &Arc<dyn File>,
    mode: JournalMode,
) -> Result<()> {
    let io = |op| Error::io(op, path);
    if mode == JournalMode::DELETE {
        match vfs.delete(path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(io("unlink")(e)),
        }
        let dir = dir_of(path);
        vfs.sync_dir(&dir).map_err(Error::io("sync_dir", &dir))
    } else if mode == JournalMode::TRUNCATE {
        file.set_len(0).map_err(io("truncate"))?;
        file.sync_all().map_err(io("fsync"))
    } else {
        file.write_at(&[0u8; HDR_SECTOR], 0).map_err(io("write"))?;
        file.sync_data().map_err(io("fdatasync"))
    }
}

/// In delete mode a journal left on disk by recovery (header zeroed) or by a crash before
/// anything was written is removed at open, so the directory looks as SQLite users expect.
/// A file whose first sector is anything else is not ours to delete.
fn remove_finalized(vfs: &Arc<dyn Vfs>, path: &Path, dir: &Path) -> Result<()> {
    if !vfs.exists(path).map_err(Error::io("stat", path))? {
        return Ok(());
    }
    let file = match vfs.open(path, OpenOptions::default()) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::io("open", path)(e)),
    };
    let mut b = vec![0u8; HDR_SECTOR];
    let n = read_up_to(&*file, &mut b, 0).map_err(Error::io("read", path))?;
    if b[..n].iter().any(|&x| x != 0) {
        return Ok(());
    }
    drop(file);
    match vfs.delete(path) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::io("unlink", path)(e)),
    }
    vfs.sync_dir(dir).map_err(Error::io("sync_dir", dir))
}

/// Called by the pager on every open, before it reads the db header and for every mode
/// (the header page itself may be half-written): if `<db>-journal` exists and is hot
/// (valid header with our magic, and records — or a first-commit journal, which has
/// none), roll it back into `db_file`, sync the db, and finalize the journal by zeroing
/// its header sector and syncing it. Page size comes from the journal header.
/// `Ok(None)` if there was no hot journal; a journal that is present but not ours or not
/// hot is left alone.
pub(crate) fn recover_hot_journal(
    vfs: &Arc<dyn Vfs>,
    db_path: &Path,
    db_file: &Arc<dyn File>,
) -> Result<Option<RecoveryReport>> {
    let path = side_path(db_path, "journal");
    let io = |op| Error::io(op, &path);
    if !vfs.exists(&path).map_err(io("stat"))? {
        return Ok(None);
    }
    let file = match vfs.open(&path, OpenOptions::default()) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io("open")(e)),
    };
    let mut sector = vec![0u8; HDR_SECTOR];
    let n = read_up_to(&*file, &mut sector, 0).map_err(io("read"))?;
    let hdr = match Header::decode(&sector[..n]) {
        Some(h) if h.old_page_count < 2 => {
            return Err(Error::CorruptJournal {
                path: path.clone(),
                reason: format!(
                    "header claims the database had {} pages before the transaction \
                     (every database has at least 2); refusing to roll it back",
                    h.old_page_count
                ),
            })
        }
        Some(h) if h.is_hot() => h,
        _ => return Ok(None),
    };

    let ps = hdr.page_size as usize;
    let rec_size = ps + 8;
    let mut rec = vec![0u8; rec_size];
    let (mut restored, mut torn) = (0u64, 0u64);
    for i in 0..hdr.nrec {
        let off = HDR_SECTOR as u64 + i as u64 * rec_size as u64;
        let got = read_up_to(&*file, &mut rec, off).map_err(io("read"))?;
        let pgno = le32(&rec, 0);
        let data = &rec[4..4 + ps];
        if got < rec_size || le32(&rec, 4 + ps) != record_crc(hdr.nonce, pgno, data) {
            // Only possible when the journal never reached its sync, so the database was
            // never written past this point (module invariant 1).
            torn = (hdr.nrec - i) as u64;
            break;
        }
        if pgno >= hdr.old_page_count {
            return Err(Error::CorruptJournal {
                path: path.clone(),
                reason: format!(
                    "record {i} restores page {pgno}, past the old page count {}",
                    hdr.old_page_count
                ),
            });
        }
        db_file
            .write_at(data, pgno as u64 * ps as u64)
            .map_err(Error::io("write", db_path))?;
        restored += 1;
    }
    db_file
        .sync_data()
        .map_err(Error::io("fdatasync", db_path))?;
    // Zeroing the header is a valid finalize in every mode; delete mode removes the file
    // at open (`remove_finalized`), truncate mode truncates it at the next commit.
    finalize(vfs, &path, &file, JournalMode::PERSIST)?;
    Ok(Some(RecoveryReport::of([RecoveryAction::RollBack {
        tid: Some(hdr.tid),
        how: RollBackHow::HotJournal { restored, torn },
    }])))
}

impl Journal for RollbackJournal {
    fn read_page(&self, pgno: Pgno, buf: &mut [u8]) -> Result<()> {
        // The database file always holds the latest committed image of every page the
        // pager may ask for: it only asks for pages no commit is writing.
        self.ctx.db.read_page(pgno, buf)
    }

    fn commit(&self, batch: &CommitBatch<'_>) -> Result<()> {
        let mut w = self.writer.lock().map_err(|_| {
            Error::Poisoned("a thread panicked while holding the journal writer lock".into())
        })?;
        let db = &self.ctx.db;
        check_batch(batch, db.page_size, false)?;
        check_originals(batch)?;
        let file = self.write_journal(&mut w, batch)?;

        db.ensure_capacity(batch.new_page_count)?;
        db.write_pages(batch.pages)?;
        db.sync()?;

        finalize(&self.ctx.vfs, &self.path, &file, self.mode)?;
        if batch.new_page_count < batch.old_page_count {
            // Only once the journal is durably not hot: a rollback to the longer state
            // would need the pages past the new end (`DbFile::cut_tail`).
            db.cut_tail(batch.new_page_count)?;
        }
        if self.mode == JournalMode::DELETE {
            w.file = None;
            return Ok(());
        }
        if let Some(limit) = self.ctx.limits.size_limit() {
            let len = file.len().map_err(Error::io("stat", &self.path))?;
            if len > limit {
                // The header is already zero (or the file empty), so cutting the file
                // needs no sync: whatever length survives, the journal is not hot.
                file.set_len(limit)
                    .map_err(Error::io("truncate", &self.path))?;
            }
        }
        w.file = Some(file);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::testutil::*;
    use crate::journal::JournalConfig;

    const MODES: [JournalMode; 3] = [
        JournalMode::DELETE,
        JournalMode::TRUNCATE,
        JournalMode::PERSIST,
    ];

    fn open(
        vfs: &Arc<dyn Vfs>,
        mode: JournalMode,
        cfg: JournalConfig,
    ) -> (RollbackJournal, RecoveryReport) {
        RollbackJournal::open(ctx(vfs, Path::new("/d"), cfg, 4), mode).unwrap()
    }

    fn jpath() -> PathBuf {
        PathBuf::from("/d/test.db-journal")
    }

    #[test]
    fn commits_survive_reopen_and_journal_is_finalized() {
        for mode in MODES {
            let vfs = mem_vfs();
            let mut model = Model::default();
            let txns: [(&[u32], u32); 4] = [(&[], 3), (&[1], 3), (&[2], 9), (&[1, 5, 8], 9)];
            for (tid, (pg, new)) in txns.iter().enumerate() {
                let (j, rep) = open(&vfs, mode, JournalConfig::default());
                assert!(!rep.rolled_back);
                matches(&j, &model).unwrap();
                let t = Txn::build(&model, tid as u64 + 1, pg, *new);
                j.commit(&t.batch()).unwrap();
                model = t.apply(&model);
                matches(&j, &model).unwrap();
                let exists = vfs.exists(&jpath()).unwrap();
                if mode == JournalMode::DELETE {
                    assert!(!exists);
                } else if mode == JournalMode::TRUNCATE {
                    let f = vfs.open(&jpath(), OpenOptions::default()).unwrap();
                    assert_eq!(f.len().unwrap(), 0);
                } else {
                    let f = vfs.open(&jpath(), OpenOptions::default()).unwrap();
                    let mut b = vec![0u8; HDR_SECTOR];
                    f.read_exact_at(&mut b, 0).unwrap();
                    assert!(b.iter().all(|&x| x == 0));
                    assert!(f.len().unwrap() >= HDR_SECTOR as u64);
                }
            }
            let (j, _) = open(&vfs, mode, JournalConfig::default());
            matches(&j, &model).unwrap();
        }
    }

    /// Leave a hot journal as a crash after the journal sync would, with the db half
    /// written, and check that recovery restores the old images and un-hots the journal.
    #[test]
    fn hot_journal_is_rolled_back() {
        for mode in MODES {
            let vfs = mem_vfs();
            let (j, _) = open(&vfs, mode, JournalConfig::default());
            let t1 = Txn::build(&Model::default(), 1, &[], 4);
            j.commit(&t1.batch()).unwrap();
            let m1 = t1.apply(&Model::default());
            let t2 = Txn::build(&m1, 2, &[1, 3], 6);
            {
                let mut w = j.writer.lock().unwrap();
                j.write_journal(&mut w, &t2.batch()).unwrap();
            }
            for (pgno, page) in &t2.pages[..2] {
                j.ctx.db.write_page(*pgno, page).unwrap();
            }
            drop(j);
            let db = ctx(&vfs, Path::new("/d"), JournalConfig::default(), 4).db;
            let rep = recover_hot_journal(&vfs, Path::new("/d/test.db"), &db.file)
                .unwrap()
                .unwrap();
            assert!(rep.rolled_back);
            assert_eq!(rep.pages_restored, 3);
            assert_eq!(rep.frames_discarded, 0);
            // Not hot any more: a second call does nothing.
            assert!(recover_hot_journal(&vfs, Path::new("/d/test.db"), &db.file)
                .unwrap()
                .is_none());
            let (j, rep) = open(&vfs, mode, JournalConfig::default());
            assert!(!rep.rolled_back);
            matches(&j, &m1).unwrap();
            assert_eq!(vfs.exists(&jpath()).unwrap(), mode != JournalMode::DELETE);
        }
    }

    #[test]
    fn torn_record_stops_rollback_and_an_empty_database_journal_is_corrupt() {
        let vfs = mem_vfs();
        let (j, _) = open(&vfs, JournalMode::PERSIST, JournalConfig::default());
        let t1 = Txn::build(&Model::default(), 1, &[], 4);
        {
            let mut w = j.writer.lock().unwrap();
            j.write_journal(&mut w, &t1.batch()).unwrap();
        }
        j.ctx.db.write_page(0, &t1.pages[0].1).unwrap();
        let db = j.ctx.db.clone();
        drop(j);
        // A journal saying the database had no pages cannot come from a database the
        // pager created (it exists whole before any commit); rolling it back would cut
        // the file to nothing. It is refused, and the database file is left as it is.
        let journal_before = file_bytes(&vfs, &jpath());
        let db_before = file_bytes(&vfs, Path::new("/d/test.db"));
        assert!(!db_before.is_empty());
        let r = recover_hot_journal(&vfs, Path::new("/d/test.db"), &db.file);
        match r {
            Err(Error::CorruptJournal { reason, .. }) => {
                assert!(reason.contains("0 pages"), "{reason}")
            }
            other => panic!("expected CorruptJournal, got {other:?}"),
        }
        assert_eq!(file_bytes(&vfs, Path::new("/d/test.db")), db_before);
        assert_eq!(file_bytes(&vfs, &jpath()), journal_before);
        // Cleared by hand (as a user would after reading the error), the database opens.
        vfs.delete(&jpath()).unwrap();

        let (j, _) = open(&vfs, JournalMode::PERSIST, JournalConfig::default());
        j.commit(&t1.batch()).unwrap();
        let m1 = t1.apply(&Model::default());
        let t2 = Txn::build(&m1, 2, &[1, 2, 3], 4);
        {
            let mut w = j.writer.lock().unwrap();
            j.write_journal(&mut w, &t2.batch()).unwrap();
        }
        // Corrupt the third record: only the first two may be restored.
        let f = vfs.open(&jpath(), OpenOptions::default()).unwrap();
        let rec = (PS + 8) as u64;
        f.write_at(&[0xAB; 7], HDR_SECTOR as u64 + 2 * rec + 100)
            .unwrap();
        drop(j);
        let rep = recover_hot_journal(&vfs, Path::new("/d/test.db"), &db.file)
            .unwrap()
            .unwrap();
        assert_eq!((rep.pages_restored, rep.frames_discarded), (2, 2));
    }

    fn file_bytes(vfs: &Arc<dyn Vfs>, path: &Path) -> Vec<u8> {
        let f = vfs.open(path, OpenOptions::default()).unwrap();
        let mut v = vec![0u8; f.len().unwrap() as usize];
        f.read_exact_at(&mut v, 0).unwrap();
        v
    }

    #[test]
    fn foreign_or_cold_journal_is_left_alone() {
        let vfs = mem_vfs();
        let f = vfs.open(&jpath(), OpenOptions::CREATE).unwrap();
        f.write_at(&[7u8; 3000], 0).unwrap();
        let mut hdr = Header {
            page_size: 1000, // not a power of two
            nonce: 1,
            old_page_count: 3,
            nrec: 1,
            tid: 1,
        };
        let db = ctx(&vfs, Path::new("/d"), JournalConfig::default(), 4).db;
        db.write_page(0, &image(0, 1)).unwrap();
        let recover = || recover_hot_journal(&vfs, Path::new("/d/test.db"), &db.file).unwrap();
        assert!(recover().is_none());
        f.write_at(&hdr.encode(), 0).unwrap();
        assert!(recover().is_none());
        hdr.page_size = 512;
        hdr.nrec = 0;
        f.write_at(&hdr.encode(), 0).unwrap();
        assert!(recover().is_none());
        f.set_len(10).unwrap();
        assert!(recover().is_none());
        assert_eq!(db_page(&db.file, 0), &image(0, 1)[..]);
        // A delete-mode open keeps a file it does not recognize.
        let _ = open(&vfs, JournalMode::DELETE, JournalConfig::default());
        assert!(vfs.exists(&jpath()).unwrap());
    }

    #[test]
    fn valid_record_for_a_page_past_the_old_size_is_corrupt() {
        let vfs = mem_vfs();
        let f = vfs.open(&jpath(), OpenOptions::CREATE).unwrap();
        let hdr = Header {
            page_size: PS as u32,
            nonce: 9,
            old_page_count: 2,
            nrec: 1,
            tid: 1,
        };
        f.write_at(&hdr.encode(), 0).unwrap();
        let data = image(5, 1);
        let mut rec = 5u32.to_le_bytes().to_vec();
        rec.extend_from_slice(&data);
        rec.extend_from_slice(&record_crc(9, 5, &data).to_le_bytes());
        f.write_at(&rec, HDR_SECTOR as u64).unwrap();
        let db = ctx(&vfs, Path::new("/d"), JournalConfig::default(), 4).db;
        let r = recover_hot_journal(&vfs, Path::new("/d/test.db"), &db.file);
        assert!(
            matches!(r, Err(Error::CorruptJournal { .. })),
            "{:?}",
            r.err()
        );
    }

    const STEPS: [Step; 3] = [
        Step::Commit(&[], 5),
        Step::Commit(&[1, 3], 5),
        Step::Commit(&[2, 4], 11),
    ];

    #[test]
    fn crash_at_every_point_delete() {
        crash_test(
            Kind::Rollback(JournalMode::DELETE),
            &JournalConfig::default(),
            &STEPS,
            false,
        );
    }

    #[test]
    fn crash_at_every_point_truncate() {
        crash_test(
            Kind::Rollback(JournalMode::TRUNCATE),
            &JournalConfig::default(),
            &STEPS,
            false,
        );
    }

    #[test]
    fn crash_at_every_point_persist() {
        let cfg = JournalConfig {
            journal_size_limit: Some(1500),
            ..Default::default()
        };
        crash_test(Kind::Rollback(JournalMode::PERSIST), &cfg, &STEPS, false);
    }

    #[test]
    fn eio_makes_commit_fail() {
        for mode in MODES {
            eio_test(Kind::Rollback(mode), &JournalConfig::default());
        }
    }

    #[test]
    fn syncs_per_commit_match_the_docs() {
        let cfg = JournalConfig::default();
        let n = |m, i| syncs_per_commit(Kind::Rollback(m), &cfg, i);
        // journal fdatasync, dir sync (create), db fdatasync, dir sync (unlink)
        assert_eq!(n(JournalMode::DELETE, 2), 4);
        // journal fdatasync, db fdatasync, journal fsync / fdatasync; +1 dir sync the
        // first time in a session
        assert_eq!(n(JournalMode::TRUNCATE, 2), 3);
        assert_eq!(n(JournalMode::PERSIST, 2), 3);
        // The first commit of a session also syncs the directory, and this one grows the
        // database by a zero-filled chunk (one more fdatasync).
        assert_eq!(n(JournalMode::PERSIST, 0), 5);
    }

    #[test]
    fn journal_size_limit_is_honored() {
        for mode in [JournalMode::PERSIST, JournalMode::TRUNCATE] {
            let vfs = mem_vfs();
            let cfg = JournalConfig {
                journal_size_limit: Some(2048),
                ..Default::default()
            };
            let (j, _) = open(&vfs, mode, cfg);
            let t1 = Txn::build(&Model::default(), 1, &[], 20);
            j.commit(&t1.batch()).unwrap();
            let m1 = t1.apply(&Model::default());
            let all: Vec<u32> = (0..20).collect();
            let t2 = Txn::build(&m1, 2, &all, 20);
            j.commit(&t2.batch()).unwrap();
            let f = vfs.open(&jpath(), OpenOptions::default()).unwrap();
            assert!(f.len().unwrap() <= 2048, "{mode}");
            matches(&j, &t2.apply(&m1)).unwrap();
        }
    }

    #[test]
    fn bad_batches_are_rejected() {
        let vfs = mem_vfs();
        let (j, _) = open(&vfs, JournalMode::DELETE, JournalConfig::default());
        let t1 = Txn::build(&Model::default(), 1, &[], 3);
        j.commit(&t1.batch()).unwrap();
        let m1 = t1.apply(&Model::default());
        let mut t2 = Txn::build(&m1, 2, &[1], 3);
        t2.originals.pop();
        assert!(matches!(
            j.commit(&t2.batch()),
            Err(Error::InvalidArgument(_))
        ));
        let r = RollbackJournal::open(
            ctx(&vfs, Path::new("/d"), JournalConfig::default(), 4),
            JournalMode::WAL,
        );
        assert!(matches!(r, Err(Error::Config(_))));
    }
}
