//! Write-ahead log mode `wal` (SQLite's wal.c protocol, single process).
//!
//! File `<db>-wal` (all integers little-endian):
//! ```text
//! header, 32 bytes:
//!   0 magic "inpgWAL\0"   8 version u32 (1)   12 page_size u32   16 checkpoint_seq u32
//!   20 salt1 u32          24 salt2 u32        28 crc32c(bytes 0..28) u32
//! frames from offset 32, each 24 + page_size bytes:
//!   0 pgno u32   4 db_size u32 (page count after the commit; nonzero only on a commit frame)
//!   8 salt1 u32  12 salt2 u32  16 chain crc u32  20 low 32 bits of the tid u32
//!   24 page image
//! chain = xxh3(seed prev; frame bytes 0..16 ‖ frame bytes 20..24 ‖ image) folded to 32
//! bits, where prev is the previous frame's chain value, or the header crc for the first
//! frame (`image_checksum`; not crc32c, which embedded page checksums would cancel).
//! ```
//!
//! Invariants, and why they hold under a disk that loses, reorders and tears unsynced
//! writes:
//! - *Recovery keeps exactly a prefix of the committed transactions.* A frame counts only
//!   if its salts equal the header's and its chain crc verifies, and the scan stops at the
//!   first frame that fails; frames are kept only up to the last commit frame. A lost,
//!   torn or reordered write breaks the chain at that point, so no later frame survives.
//!   With `WalSync::Full` the commit's frames are fdatasync'ed before `commit` returns, so
//!   the prefix includes every acknowledged commit; with `Normal` it may be shorter.
//! - *The database file is written only by a checkpoint, and only with the newest
//!   committed frame of each page.* Before writing it the WAL is synced (if a commit
//!   skipped that), so a power cut in the middle of the copy still finds every frame it
//!   was copying and replays them over whatever part of the copy reached the disk.
//! - *Old frames never replay over newer checkpointed data.* After a checkpoint has
//!   fdatasync'ed the database the log is reset: the next commit writes a header with a
//!   new salt (salt1 + 1, fresh salt2) at offset 0 and fdatasyncs it before writing any
//!   frame. Until that header is durable the old header and old frames may come back, but
//!   every page they hold is already in the database with that same image (the database
//!   has not been written since); after it, old frames fail the salt check.
//! - *A log is replayed only over the database it was written for.* Its commits carry
//!   consecutive tids `first..=last`; while it is needed the database header's FCC lies in
//!   `first - 1..=last` (a checkpoint writes page 0, stamped with the FCC, with the rest).
//!   An FCC past `last` means the log was checkpointed and the database has committed
//!   since: its frames are skipped (`RecoveryReport::stale_frames`), which is what keeps
//!   an old generation cut to a prefix (by `journal_size_limit`, or by hand) from putting
//!   old images over newer pages. An FCC below `first - 1` is refused as a corrupt
//!   journal (`frame_log::replay_is_stale`).
//! - *Metadata embedding: the FCC lives in the commit frames, not in a page-0 frame per
//!   commit* (`embeds_fcc`, `recovers_fcc`). A commit that changes nothing in the header
//!   but the counter leaves page 0 out, so a one-row commit logs as many frames as SQLite's
//!   (which does not touch page 1 per commit either). Recovery settles the FCC as the
//!   larger of the database header's and the last kept commit's tid; the frames hold its
//!   low 32 bits, placed in the window above, relative to the header in the newest kept
//!   frame of page 0 (or the database's). Each checkpoint writes page 0 with the FCC, so
//!   the database header is exact whenever the log is empty. That, rather than letting the
//!   on-disk counter go stale and making recovery tolerate it, is the choice because the
//!   generation check above needs an exact counter: with a stale one a log older than the
//!   database would fall inside the window and put old images over newer pages, and a
//!   reopen would hand out tids already used. The rewrite is in place, so a torn one must
//!   find a copy of page 0 in the log: the first commit of every generation logs page 0
//!   (the database's committed image) even when the pager left it out. That one frame per
//!   generation is the whole cost: page 0 is then always among the pages a checkpoint
//!   copies, and the stamp only changes its bytes.
//! - *Readers never see a frame being overwritten.* `read_page` holds the index read lock
//!   while it reads a frame; frames are only appended past the published ones, and the
//!   reset that lets offsets be reused clears the index under its write lock.
//!
//! Simplification: recovery on open always checkpoints what it kept and resets the log,
//! so every session starts with an empty log (no shared-memory index, no readers from
//! other processes). With `wal_prealloc` the file is zero-filled to the checkpoint interval
//! once and never truncated below it; zeros after the last frame end the scan because a
//! salt never equals zero. Such a log outlives a clean close, so close writes the next
//! generation's header over it (unsynced: if a power cut brings the old one back, its
//! frames only rewrite the images the database holds); otherwise every reopen would copy
//! all of the last generation's frames into the database again.

use std::io;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};

use super::frame_log::{self, Frame, FrameCodec, Index, LogFormat, LogHeader, Scan, LOG_HDR_LEN};
use super::util::{check_batch, db_fcc, fresh_salt};
use super::RecoveryAction;
use super::{
    Capabilities, CommitBatch, Journal, JournalCtx, JournalOption, Log, ModeSpec, Mutant, Opened,
    RecoveryReport, WalSync,
};
use crate::error::{Error, Pgno, Result};
use crate::le::get_u32 as le32;
use crate::page::stock::STOCK;
use crate::page::PageRef;

/// Registry entry of `wal`.
pub(crate) static WAL: ModeSpec = ModeSpec {
    name: "wal",
    code: 5,
    format: 5,
    summary: "write-ahead log (SQLite WAL), checkpointed into the database",
    layout: &STOCK,
    caps: Capabilities {
        atomic: true,
        embeds_fcc: true,
        recovers_fcc: true,
        direct_writes: false,
        replays_log: true,
        intent_map: false,
        side_files: &["wal"],
        steals: false,
        durable_at_ack: true,
        survives_process_crash: true,
        region_backed: false,
        appends_beside_readers: false,
    },
    options: &[JournalOption::WalPrealloc],
    check_options: super::options::any_value,
    open: |ctx, _| {
        let (j, r) = Wal::open(ctx)?;
        let fcc = j.fcc();
        Ok(Opened {
            fcc: Some(fcc),
            ..Opened::plain(j, r)
        })
    },
};
use crate::format::header::{Header, MAX_TID};
use crate::vfs::File;

const MAGIC: [u8; 8] = *b"inpgWAL\0";
const VERSION: u32 = 1;
const WAL_HDR: usize = LOG_HDR_LEN;
const FRAME_HDR: usize = 24;
/// Frames per preallocated log when auto-checkpoint is off.
const PREALLOC_DEFAULT_FRAMES: u64 = 1000;

/// The log header of one generation (between two resets): `frame_log::LogHeader`.
type WalHeader = LogHeader;

/// `wal`'s frames: a 24-byte header before each page image (module docs).
struct WalFrames;

impl FrameCodec for WalFrames {
    const FORMAT: LogFormat = LogFormat {
        magic: MAGIC,
        version: VERSION,
    };
    const TID_BITS: u32 = 32;

    fn frame_len(ps: usize) -> usize {
        FRAME_HDR + ps
    }

    fn frame_offset(ps: usize, i: u64) -> u64 {
        WAL_HDR as u64 + i * Self::frame_len(ps) as u64
    }

    fn image_at(off: u64) -> u64 {
        off + FRAME_HDR as u64
    }

    fn fields(f: &[u8]) -> Frame {
        Frame {
            pgno: le32(f, 0),
            db_size: le32(f, 4),
            salt1: le32(f, 8),
            salt2: le32(f, 12),
            tid: u64::from(le32(f, 20)),
            chain: le32(f, 16),
        }
    }

    fn seal(frame: &mut [u8], f: &Frame, prev: u32) -> u32 {
        frame[0..4].copy_from_slice(&f.pgno.to_le_bytes());
        frame[4..8].copy_from_slice(&f.db_size.to_le_bytes());
        frame[8..12].copy_from_slice(&f.salt1.to_le_bytes());
        frame[12..16].copy_from_slice(&f.salt2.to_le_bytes());
        frame[20..24].copy_from_slice(&(f.tid as u32).to_le_bytes());
        let chain = Self::chain(prev, frame);
        frame[16..20].copy_from_slice(&chain.to_le_bytes());
        chain
    }

    /// The chain covers the frame header but its chain field, then the image.
    fn chain(prev: u32, frame: &[u8]) -> u32 {
        let mut tag = [0u8; 20];
        tag[..16].copy_from_slice(&frame[0..16]);
        tag[16..].copy_from_slice(&frame[20..24]);
        super::image_checksum(prev as u64, &tag, &frame[FRAME_HDR..])
    }
}

/// State only the writer (commit, checkpoint, close) touches.
#[derive(Debug)]
struct Writer {
    hdr: WalHeader,
    /// The next commit must write `hdr` at offset 0 and sync it before any frame.
    header_pending: bool,
    /// Frames written in this generation (the next frame's index).
    next_frame: u64,
    /// Chain crc of the last frame written (or of the header).
    chain: u32,
    /// Page count after the last commit in the log.
    db_size: u32,
    /// The FCC: tid of the last commit (in the log, or checkpointed into the database).
    fcc: u64,
    /// Frames were written since the last WAL sync (NORMAL mode, or found at open).
    wal_dirty: bool,
    /// Whether this session synced the directory holding the WAL (see `commit`).
    dir_synced: bool,
    closed: bool,
    /// A commit in this session shrank the page count, and the database file has not
    /// been cut back to it yet (`checkpoint_locked`).
    shrunk: bool,
}

/// The WAL commit protocol.
#[derive(Debug)]
pub(crate) struct Wal {
    ctx: JournalCtx,
    path: PathBuf,
    file: Arc<dyn File>,
    /// Minimum file length (prealloc), 0 without prealloc.
    prealloc_len: u64,
    writer: Mutex<Writer>,
    index: RwLock<Index>,
}

impl Wal {
    /// Open the log: scan it, keep every frame up to the last valid commit frame,
    /// checkpoint them into the database and reset the log (module docs).
    pub(crate) fn open(ctx: JournalCtx) -> Result<(Wal, RecoveryReport)> {
        let (path, file) = frame_log::open_log(&ctx, "wal")?;
        let ps = ctx.db.page_size;
        let mut scan = frame_log::scan::<WalFrames>(&*file, ps, &path, ctx.config.mutant())?;
        let prealloc_len = if ctx.config.wal_prealloc {
            let frames = match ctx.config.wal_autocheckpoint {
                0 => PREALLOC_DEFAULT_FRAMES,
                n => n as u64,
            };
            WalFrames::frame_offset(ps, frames + 1)
        } else {
            0
        };
        let disk_fcc = db_fcc(&ctx)?;
        let stale_frames = frame_log::drop_stale::<WalFrames>(&mut scan, disk_fcc, &path)?;
        let fcc = settle_fcc(&*file, &scan, disk_fcc, ps, &path)?;
        let mut report = scan.report(stale_frames);
        let hdr = match scan.hdr {
            Some(h) => h,
            None => WalHeader::first(WalFrames::FORMAT, ps as u32, &*ctx.vfs),
        };
        let kept = scan.index.frames;
        let wal = Wal {
            path,
            file,
            prealloc_len,
            writer: Mutex::new(Writer {
                hdr,
                header_pending: scan.hdr.is_none(),
                next_frame: scan.index.frames,
                chain: scan.chain,
                db_size: scan.db_size,
                fcc,
                // The frames may sit only in the OS cache (a process crash in NORMAL
                // mode): sync them before the checkpoint writes the database.
                wal_dirty: kept > 0,
                dir_synced: false,
                closed: false,
                shrunk: false,
            }),
            index: RwLock::new(scan.index),
            ctx,
        };
        {
            let mut w = wal.lock_writer()?;
            if kept > 0 && wal.ctx.config.attach {
                // Other processes read the database and these frames: they stay where
                // they are, read from there (as below when there is no room), durable.
                if w.wal_dirty {
                    wal.sync_wal()?;
                    w.wal_dirty = false;
                }
            } else if kept > 0 {
                match wal.checkpoint_locked(&mut w) {
                    Ok(()) => {}
                    // A full file system: the kept frames stay where they are and are
                    // read from there (the index holds them, the writer continues their
                    // generation), as in a session that has not checkpointed yet. The
                    // checkpoint may have written some of them into the database already:
                    // those pages are read from the log until a checkpoint finishes, so
                    // the copies there are never seen half-made. ENOSPC is an error of
                    // the checkpoint, not of the open (SQLite reads its WAL in place).
                    Err(e) if e.is_no_space() => {
                        // Made durable all the same: a crashed process may have left them
                        // in the OS cache only, and they are now the committed state.
                        if w.wal_dirty {
                            wal.sync_wal()?;
                            w.wal_dirty = false;
                        }
                        report.push(RecoveryAction::DeferCheckpoint);
                    }
                    Err(e) => return Err(e),
                }
            } else {
                // Even with nothing to keep, the next commit must start a new generation:
                // appending after discarded frames could splice old and new frames.
                wal.reset(&mut w)?;
            }
        }
        if prealloc_len > 0 && !wal.ctx.config.attach {
            let len = wal.file.len().map_err(Error::io("stat", &wal.path))?;
            if len < prealloc_len {
                // Without room the log simply grows as commits need it (each of which
                // then fails on its own while there is none).
                match wal.file.allocate(len, prealloc_len - len) {
                    Ok(()) => wal
                        .file
                        .sync_data()
                        .map_err(Error::io("fdatasync", &wal.path))?,
                    Err(e) if crate::error::io_is_no_space(&e) => {}
                    Err(e) => return Err(Error::io("allocate", &wal.path)(e)),
                }
            }
        }
        Ok((wal, report))
    }

    /// The writer state; a panic while it was held may have left it half-updated (chain,
    /// frame count), so that poisons the handle instead of being trusted.
    fn lock_writer(&self) -> Result<std::sync::MutexGuard<'_, Writer>> {
        self.writer.lock().map_err(|_| {
            Error::Poisoned("a thread panicked while holding the WAL writer lock".into())
        })
    }

    /// Make every frame written so far durable (one fdatasync, if any frame waits for
    /// one): for a caller that commits several transactions with `WalSync::Normal` and
    /// then needs them all durable at once (`nvlog`'s flush).
    pub(crate) fn sync_log(&self) -> Result<()> {
        let mut w = self.lock_writer()?;
        if w.closed {
            return Err(closed());
        }
        if w.wal_dirty {
            self.sync_wal()?;
            w.wal_dirty = false;
        }
        Ok(())
    }

    /// Whether the current generation holds a committed frame of `pgno`: its image then
    /// comes from the log, and the next checkpoint copies that frame into the database.
    pub(crate) fn holds(&self, pgno: Pgno) -> bool {
        let idx = self.index.read().unwrap_or_else(|e| e.into_inner());
        idx.map.contains_key(&pgno)
    }

    /// The FCC: tid of the last commit, in the log or in the database.
    pub(crate) fn fcc(&self) -> u64 {
        self.writer.lock().unwrap_or_else(|e| e.into_inner()).fcc
    }

    fn frame_offset(&self, i: u64) -> u64 {
        WalFrames::frame_offset(self.ctx.db.page_size, i)
    }

    fn sync_wal(&self) -> Result<()> {
        self.file
            .sync_data()
            .map_err(Error::io("fdatasync", &self.path))
    }

    /// Copy the newest committed frame of every page into the database, sync it, reset.
    fn checkpoint_locked(&self, w: &mut Writer) -> Result<()> {
        if w.closed {
            return Err(closed());
        }
        let pages = {
            let idx = self.index.read().unwrap_or_else(|e| e.into_inner());
            if idx.frames == 0 {
                return self.cut_if_shrunk(w);
            }
            idx.sorted()
        };
        if w.wal_dirty {
            self.sync_wal()?;
            w.wal_dirty = false;
        }
        // Until `reset`, every page written here is still read from the log (the index
        // is untouched), and a crash replays the log over them: a full file system while
        // growing or writing the database leaves the checkpoint undone, nothing lost.
        let at = (w.db_size, w.fcc);
        frame_log::copy_to_db::<WalFrames>(&self.ctx, &*self.file, &self.path, &pages, at, |_| {})?;
        self.ctx.db.sync()?;
        self.reset(w)?;
        self.cut_if_shrunk(w)
    }

    /// After a checkpoint (the log holds no frame the database lacks): cut the database
    /// file back to the page count if a commit shrank it (`DbFile::cut_tail`). Frames of
    /// pages past the new end were copied like any, and are cut with the rest. A crash
    /// before or after the cut leaves a file at least as long as its page count, and
    /// replaying this log again only writes pages the database no longer counts.
    fn cut_if_shrunk(&self, w: &mut Writer) -> Result<()> {
        if w.shrunk {
            self.ctx.db.cut_tail(w.db_size)?;
            w.shrunk = false;
        }
        Ok(())
    }

    /// Start a new generation: forget every frame, and make the next commit write (and
    /// sync) a header with new salts before its frames.
    fn reset(&self, w: &mut Writer) -> Result<()> {
        {
            let mut idx = self.index.write().unwrap_or_else(|e| e.into_inner());
            idx.clear();
        }
        w.hdr = w.hdr.next(fresh_salt(&*self.ctx.vfs));
        w.header_pending = true;
        w.next_frame = 0;
        // Attached beside other processes (`JournalConfig::attach`), the file is left as
        // it is: cutting it is a write their pictures may not expect.
        if let Some(limit) = self
            .ctx
            .limits
            .size_limit()
            .filter(|_| !self.ctx.config.attach)
        {
            let keep = limit.max(self.prealloc_len);
            let len = self.file.len().map_err(Error::io("stat", &self.path))?;
            if len > keep {
                // No sync needed: whatever length survives a crash, the durable prefix of
                // the log only holds frames already in the database.
                self.file
                    .set_len(keep)
                    .map_err(Error::io("truncate", &self.path))?;
            }
        }
        Ok(())
    }

    fn start_generation(&self, w: &mut Writer) -> Result<()> {
        w.hdr.page_size = self.ctx.db.page_size as u32;
        self.file
            .write_at(&w.hdr.encode(), 0)
            .map_err(Error::io("write", &self.path))?;
        // syncHeader: the new salt must be durable before any frame can overwrite an old
        // one, or an old header could come back with a mix of frames. Since every
        // checkpoint also syncs the log before writing the database, an old header can
        // only replay frames the database already holds, so this sync is belt and braces
        // (the crash tests pass without it); it is kept, as SQLite does, so that the
        // reset stays safe on its own.
        self.sync_wal()?;
        if !w.dir_synced {
            // Once per session: the WAL may have been created by this or a crashed
            // process, and acknowledged frames in a file whose entry vanishes are lost.
            let dir = self.ctx.dir();
            self.ctx
                .vfs
                .sync_dir(&dir)
                .map_err(Error::io("sync_dir", &dir))?;
            w.dir_synced = true;
        }
        w.header_pending = false;
        w.next_frame = 0;
        w.chain = w.hdr.crc();
        w.wal_dirty = false;
        Ok(())
    }
}

/// The FCC recovery settles on: the newer of the database header's and the last kept
/// commit's.
///
/// A commit frame carries only the low 32 bits of its tid; the high bits come from a full
/// FCC known to lie in the generation's window `first - 1..=last`: the header in the
/// newest kept frame of page 0 (the first commit of every generation logs page 0), or the
/// database header's (`frame_log::replay_is_stale` has checked it lies in the window).
/// A generation holds far fewer than 2^31 commits, so the low bits' distance from that
/// base is exact.
fn settle_fcc(
    file: &dyn File,
    scan: &Scan,
    disk: Option<u64>,
    ps: usize,
    path: &std::path::Path,
) -> Result<u64> {
    let disk = disk.unwrap_or(0);
    if scan.index.frames == 0 {
        return Ok(disk);
    }
    let logged = match scan.index.map.get(&0) {
        Some(&off) => {
            let mut p0 = vec![0u8; ps];
            file.read_exact_at(&mut p0, WalFrames::image_at(off))
                .map_err(Error::io("read", path))?;
            Header::decode(&p0).ok().map(|h| h.fcc)
        }
        None => None,
    };
    let base = logged.unwrap_or(disk);
    let last = base + u64::from((scan.last_tid as u32).wrapping_sub(base as u32));
    if last > MAX_TID {
        return Err(Error::CorruptJournal {
            path: path.to_path_buf(),
            reason: format!("log commits reach tid {last}, past the largest ({MAX_TID})"),
        });
    }
    Ok(last.max(disk))
}

fn closed() -> Error {
    Error::InvalidArgument("the WAL journal is closed".into())
}

impl Wal {
    /// Commit `batch` as one transaction standing for the consecutive tids
    /// `first_tid..=batch.tid` (`nvlog`: a flush of several logical commits, whose pages
    /// are the newest image of each page any of them wrote). Recovery keeps it whole or
    /// not at all, like any commit.
    /// A plain commit is the range `batch.tid..=batch.tid`.
    pub(crate) fn commit_range(&self, batch: &CommitBatch<'_>, first_tid: u64) -> Result<()> {
        let mut w = self.lock_writer()?;
        if w.closed {
            return Err(closed());
        }
        let ps = self.ctx.db.page_size;
        check_batch(batch, ps, false)?;
        // Checked in release builds: a range that does not start right after the last
        // commit would put the next open's window check (`replay_is_stale`) in the wrong
        // place, and a log could then be skipped as stale or replayed over newer pages.
        assert!(
            first_tid <= batch.tid && (first_tid == w.fcc + 1 || first_tid == batch.tid),
            "WAL commit range {first_tid}..={} does not follow FCC {}",
            batch.tid,
            w.fcc
        );
        // A full file system before the commit frame is durable leaves nothing
        // committed: the header write names a generation with no frames yet, and a
        // prefix of this commit's frames has no commit frame, so the next commit writes
        // over it (`Error::NoSpace`, the handle stays usable).
        if w.header_pending {
            self.start_generation(&mut w)
                .map_err(crate::error::clean_failure)?;
        }
        // The first commit of a generation logs page 0 even when the pager left it out
        // (metadata embedding), so that the checkpoint's rewrite of page 0 with the FCC
        // always has a copy in the log to replay if the rewrite tears (module docs).
        let with_p0: Vec<(Pgno, PageRef)>;
        let pages: &[(Pgno, PageRef)] =
            if w.next_frame == 0 && batch.pages.first().map(|p| p.0) != Some(0) {
                // No frame is indexed at frame 0, so the database holds the committed
                // page 0 (stamped with the FCC by the last checkpoint).
                debug_assert_eq!(self.log_frames(), 0);
                let mut p0 = vec![0u8; ps];
                self.ctx.db.read_page(0, &mut p0)?;
                with_p0 = std::iter::once((0, PageRef::from(p0)))
                    .chain(batch.pages.iter().cloned())
                    .collect();
                &with_p0
            } else {
                batch.pages
            };
        // A ranged commit of one page at the start of a generation: the scan takes the
        // generation's first tid from the first frame of its first commit, so that frame
        // must name the range's start, not be the commit frame. Log the page twice (the
        // later frame wins, as for any page logged twice).
        let doubled: Vec<(Pgno, PageRef)>;
        let pages: &[(Pgno, PageRef)] =
            if w.next_frame == 0 && pages.len() == 1 && first_tid != batch.tid {
                doubled = vec![pages[0].clone(), pages[0].clone()];
                &doubled
            } else {
                pages
            };
        let n = pages.len();
        let flen = WalFrames::frame_len(ps);
        let mut buf = vec![0u8; n * flen];
        for ((_, data), f) in pages.iter().zip(buf.chunks_exact_mut(flen)) {
            f[FRAME_HDR..].copy_from_slice(data);
        }
        let chain = frame_log::seal_commit::<WalFrames>(
            &mut buf,
            ps,
            pages.iter().map(|p| p.0),
            &w.hdr,
            (first_tid, batch.tid),
            batch.new_page_count,
            w.chain,
        );
        let first = self.frame_offset(w.next_frame);
        self.file
            .write_at(&buf, first)
            .map_err(Error::io("write", &self.path))
            .map_err(crate::error::clean_failure)?;
        match self.ctx.config.wal_sync {
            WalSync::Full if self.ctx.config.mutant() == Mutant::NoSyncAtCommit => {}
            WalSync::Full => self.sync_wal()?,
            WalSync::Normal => w.wal_dirty = true,
        }
        {
            let mut idx = self.index.write().unwrap_or_else(|e| e.into_inner());
            for (i, (pgno, _)) in pages.iter().enumerate() {
                idx.map
                    .insert(*pgno, self.frame_offset(w.next_frame + i as u64));
            }
            idx.frames = w.next_frame + n as u64;
        }
        w.next_frame += n as u64;
        w.chain = chain;
        w.db_size = batch.new_page_count;
        w.shrunk |= batch.new_page_count < batch.old_page_count;
        w.fcc = batch.tid;
        let auto = u64::from(self.ctx.limits.autocheckpoint());
        if auto > 0 && w.next_frame >= auto {
            match self.checkpoint_locked(&mut w) {
                // The commit is in the log and indexed: a full file system is an error of
                // this checkpoint, not of the commit (as SQLite's automatic checkpoint
                // is); the next one tries again.
                Err(e) if e.is_no_space() => {}
                r => r?,
            }
        }
        Ok(())
    }
}

impl Journal for Wal {
    fn read_page(&self, pgno: Pgno, buf: &mut [u8]) -> Result<()> {
        // Held across the read so a reset cannot let the frame be overwritten meanwhile.
        let idx = self.index.read().unwrap_or_else(|e| e.into_inner());
        match idx.map.get(&pgno) {
            Some(&off) => self
                .file
                .read_exact_at(buf, WalFrames::image_at(off))
                .map_err(Error::io("read", &self.path)),
            None => self.ctx.db.read_page(pgno, buf),
        }
    }

    fn commit(&self, batch: &CommitBatch<'_>) -> Result<()> {
        self.commit_range(batch, batch.tid)
    }

    fn checkpoint(&self) -> Result<()> {
        let mut w = self.lock_writer()?;
        self.checkpoint_locked(&mut w)
    }

    fn checkpoint_truncating(&self) -> Result<()> {
        let mut w = self.lock_writer()?;
        self.checkpoint_locked(&mut w)?;
        // Every frame is in the database, synced (or there were none). The checkpoint
        // started a new generation if it copied frames; without frames a header may
        // still stand alone in the file, so one starts here: either way the next commit
        // writes a header first, and nothing in the file is left to keep. No sync: a log
        // of any length that survives a crash only holds frames the database already
        // has. A preallocated log keeps its size (it is sized once, at open, so that
        // appends never allocate).
        if !w.header_pending {
            self.reset(&mut w)?;
        }
        if self.prealloc_len > 0 {
            return Ok(());
        }
        self.file
            .set_len(0)
            .map_err(Error::io("truncate", &self.path))
    }

    fn close(&self) -> Result<()> {
        let mut w = self.lock_writer()?;
        if w.closed {
            return Ok(());
        }
        self.checkpoint_locked(&mut w)?;
        w.closed = true;
        if self.prealloc_len > 0 && w.header_pending {
            // A preallocated log stays, and its frames are all in the database now. Put
            // the next generation's header over the old one so the next open finds no
            // frame to replay (it would copy every one of them again). Not synced: if the
            // old header comes back after a power cut, replaying its frames rewrites the
            // images the database already holds, under an FCC inside their window.
            self.file
                .write_at(&w.hdr.encode(), 0)
                .map_err(Error::io("write", &self.path))?;
        }
        if self.prealloc_len == 0 {
            match self.ctx.vfs.delete(&self.path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io("unlink", &self.path)(e)),
            }
            let dir = self.ctx.dir();
            self.ctx
                .vfs
                .sync_dir(&dir)
                .map_err(Error::io("sync_dir", &dir))?;
        }
        Ok(())
    }

    fn log(&self) -> Option<&dyn Log> {
        Some(self)
    }
}

impl Log for Wal {
    fn log_frames(&self) -> u64 {
        self.index.read().unwrap_or_else(|e| e.into_inner()).frames
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::testutil::*;
    use crate::journal::util::stamp_fcc;
    use crate::journal::JournalConfig;
    use crate::page::layout::PageLayout;
    use crate::vfs::{OpenOptions, Vfs};
    use std::path::Path;

    fn open(vfs: &Arc<dyn Vfs>, cfg: JournalConfig) -> (Wal, RecoveryReport) {
        Wal::open(ctx(vfs, Path::new("/d"), cfg, 4)).unwrap()
    }

    fn wpath() -> PathBuf {
        PathBuf::from("/d/test.db-wal")
    }

    fn no_auto() -> JournalConfig {
        JournalConfig {
            wal_autocheckpoint: 0,
            ..Default::default()
        }
    }

    /// Run `txns` (pages written, new page count) from an empty model.
    fn run(j: &Wal, txns: &[(&[u32], u32)]) -> Model {
        let mut model = Model::default();
        for (tid, (pg, new)) in txns.iter().enumerate() {
            let t = Txn::build(&model, tid as u64 + 1, pg, *new);
            j.commit(&t.batch()).unwrap();
            model = t.apply(&model);
            matches(j, &model).unwrap();
        }
        model
    }

    const TXNS: [(&[u32], u32); 4] = [(&[], 3), (&[1], 3), (&[2], 9), (&[1, 5, 8], 9)];

    #[test]
    fn commits_are_read_from_the_log_and_recovered_on_reopen() {
        let vfs = mem_vfs();
        let (j, rep) = open(&vfs, no_auto());
        assert_eq!(rep, RecoveryReport::default());
        let model = run(&j, &TXNS);
        assert_eq!(j.log_frames(), 3 + 2 + 8 + 4);
        // The database file was never written: everything is in the log.
        assert_eq!(j.ctx.db.file_len().unwrap(), 0);
        drop(j); // a crash: no close
        let (j, rep) = open(&vfs, no_auto());
        assert_eq!(rep.frames_kept, 17);
        assert_eq!(rep.frames_discarded, 0);
        assert_eq!(rep.pages_restored, 9);
        assert_eq!(j.log_frames(), 0);
        matches(&j, &model).unwrap();
        for (i, p) in model.pages.iter().enumerate() {
            assert_eq!(db_page(&j.ctx.db.file, i as u32), &p[..]);
        }
        // Commits after recovery start a new generation and survive another reopen.
        let t = Txn::build(&model, 9, &[4], 9);
        j.commit(&t.batch()).unwrap();
        let model = t.apply(&model);
        drop(j);
        let (j, rep) = open(&vfs, no_auto());
        assert_eq!(rep.frames_kept, 2);
        matches(&j, &model).unwrap();
        j.close().unwrap();
        assert!(!vfs.exists(&wpath()).unwrap());
        let (j, rep) = open(&vfs, no_auto());
        assert_eq!(rep, RecoveryReport::default());
        matches(&j, &model).unwrap();
    }

    #[test]
    fn uncommitted_and_torn_tails_are_discarded() {
        let vfs = mem_vfs();
        let (j, _) = open(&vfs, no_auto());
        let model = run(&j, &TXNS[..3]);
        let t = Txn::build(&model, 4, &[1, 5, 8], 9);
        j.commit(&t.batch()).unwrap();
        let fs = (FRAME_HDR + PS) as u64;
        // Tear the commit frame of the last transaction: its 3 earlier frames are
        // uncommitted, the torn one fails its checksum.
        j.file
            .write_at(&[0xEE; 10], j.frame_offset(16) + 200)
            .unwrap();
        drop(j);
        let (j, rep) = open(&vfs, no_auto());
        assert_eq!((rep.frames_kept, rep.frames_discarded), (13, 4));
        matches(&j, &model).unwrap();
        // Garbage after a valid log ends the scan too.
        let t = Txn::build(&model, 5, &[2], 9);
        j.commit(&t.batch()).unwrap();
        let model = t.apply(&model);
        j.file
            .write_at(&vec![0x55; fs as usize * 2], j.frame_offset(2))
            .unwrap();
        drop(j);
        let (j, rep) = open(&vfs, no_auto());
        assert_eq!((rep.frames_kept, rep.frames_discarded), (2, 0));
        matches(&j, &model).unwrap();
    }

    #[test]
    fn autocheckpoint_fires_at_the_threshold() {
        let vfs = mem_vfs();
        let cfg = JournalConfig {
            wal_autocheckpoint: 5,
            ..Default::default()
        };
        let (j, _) = open(&vfs, cfg);
        let mut model = Model::default();
        let t = Txn::build(&model, 1, &[], 3);
        j.commit(&t.batch()).unwrap();
        model = t.apply(&model);
        assert_eq!(j.log_frames(), 3);
        let t = Txn::build(&model, 2, &[], 3); // page 0 only
        j.commit(&t.batch()).unwrap();
        model = t.apply(&model);
        assert_eq!(j.log_frames(), 4);
        let t = Txn::build(&model, 3, &[2], 3);
        j.commit(&t.batch()).unwrap(); // 6 frames >= 5: checkpoint
        model = t.apply(&model);
        assert_eq!(j.log_frames(), 0);
        for (i, p) in model.pages.iter().enumerate() {
            assert_eq!(db_page(&j.ctx.db.file, i as u32), &p[..]);
        }
        matches(&j, &model).unwrap();
    }

    #[test]
    fn explicit_checkpoint_and_size_limit() {
        let vfs = mem_vfs();
        let cfg = JournalConfig {
            wal_autocheckpoint: 0,
            journal_size_limit: Some(1000),
            ..Default::default()
        };
        let (j, _) = open(&vfs, cfg);
        let model = run(&j, &TXNS);
        assert!(j.file.len().unwrap() > 1000);
        j.checkpoint().unwrap();
        assert_eq!(j.log_frames(), 0);
        assert_eq!(j.file.len().unwrap(), 1000);
        for (i, p) in model.pages.iter().enumerate() {
            assert_eq!(db_page(&j.ctx.db.file, i as u32), &p[..]);
        }
        matches(&j, &model).unwrap();
        // The log restarts cleanly after the truncation.
        let t = Txn::build(&model, 9, &[3], 9);
        j.commit(&t.batch()).unwrap();
        let model = t.apply(&model);
        drop(j);
        let (j, rep) = open(&vfs, no_auto());
        assert_eq!(rep.frames_kept, 2);
        matches(&j, &model).unwrap();
    }

    #[test]
    fn a_truncating_checkpoint_leaves_an_empty_file_and_the_log_restarts() {
        let vfs = mem_vfs();
        let (j, _) = open(&vfs, no_auto());
        let model = run(&j, &TXNS);
        assert!(j.file.len().unwrap() > 0);
        j.checkpoint_truncating().unwrap();
        assert_eq!((j.log_frames(), j.file.len().unwrap()), (0, 0));
        for (i, p) in model.pages.iter().enumerate() {
            assert_eq!(db_page(&j.ctx.db.file, i as u32), &p[..]);
        }
        matches(&j, &model).unwrap();
        // Again on the empty log (nothing to copy), then a commit logs from the start.
        j.checkpoint_truncating().unwrap();
        assert_eq!(j.file.len().unwrap(), 0);
        let t = Txn::build(&model, 9, &[3], 9);
        j.commit(&t.batch()).unwrap();
        let model = t.apply(&model);
        drop(j);
        let (j, rep) = open(&vfs, no_auto());
        assert_eq!(rep.frames_kept, 2);
        matches(&j, &model).unwrap();
    }

    #[test]
    fn prealloc_sizes_the_file_once_and_commits_do_not_grow_it() {
        let vfs = mem_vfs();
        let cfg = JournalConfig {
            wal_autocheckpoint: 8,
            wal_prealloc: true,
            journal_size_limit: Some(0),
            ..Default::default()
        };
        let want = 32 + 9 * (24 + PS as u64);
        let (j, _) = open(&vfs, cfg.clone());
        assert_eq!(j.file.len().unwrap(), want);
        let mut model = Model::default();
        for tid in 1..40u64 {
            let t = Txn::build(&model, tid, &[(tid % 5) as u32 + 1], 7);
            j.commit(&t.batch()).unwrap();
            model = t.apply(&model);
            assert_eq!(j.file.len().unwrap(), want);
        }
        matches(&j, &model).unwrap();
        // A truncating checkpoint keeps the preallocated size: it is sized once, at open.
        j.checkpoint_truncating().unwrap();
        assert_eq!((j.log_frames(), j.file.len().unwrap()), (0, want));
        j.close().unwrap();
        assert!(vfs.exists(&wpath()).unwrap());
        let (j, _) = open(&vfs, cfg);
        assert_eq!(j.file.len().unwrap(), want);
        matches(&j, &model).unwrap();
        let cfg0 = JournalConfig {
            wal_autocheckpoint: 0,
            wal_prealloc: true,
            ..Default::default()
        };
        drop(j);
        vfs.delete(&wpath()).unwrap();
        let (j, _) = open(&vfs, cfg0);
        assert_eq!(j.file.len().unwrap(), 32 + 1001 * (24 + PS as u64));
    }

    #[test]
    fn foreign_or_mismatched_logs() {
        let vfs = mem_vfs();
        let f = vfs.open(&wpath(), OpenOptions::CREATE).unwrap();
        f.write_at(&[0x42; 5000], 0).unwrap();
        let (j, rep) = open(&vfs, no_auto());
        assert_eq!(rep, RecoveryReport::default());
        run(&j, &TXNS[..1]);
        drop(j);
        let hdr = WalHeader {
            format: WalFrames::FORMAT,
            page_size: 2048,
            ckpt_seq: 0,
            salt1: 1,
            salt2: 2,
        };
        f.write_at(&hdr.encode(), 0).unwrap();
        let r = Wal::open(ctx(&vfs, Path::new("/d"), no_auto(), 4));
        assert!(
            matches!(r, Err(Error::CorruptJournal { .. })),
            "{:?}",
            r.err()
        );
    }

    const STEPS: [Step; 6] = [
        Step::Commit(&[], 5),
        Step::Commit(&[1, 3], 5),
        Step::Checkpoint,
        Step::Commit(&[2, 4], 11),
        Step::Commit(&[1], 11),
        Step::Close,
    ];

    #[test]
    fn crash_at_every_point_full() {
        crash_test(Kind::Wal(WalSync::Full), &no_auto(), &STEPS, false);
    }

    #[test]
    fn crash_at_every_point_full_autocheckpoint_prealloc() {
        let cfg = JournalConfig {
            wal_autocheckpoint: 6,
            wal_prealloc: true,
            ..Default::default()
        };
        crash_test(Kind::Wal(WalSync::Full), &cfg, &STEPS, false);
        let cfg = JournalConfig {
            wal_autocheckpoint: 4,
            journal_size_limit: Some(100),
            ..Default::default()
        };
        crash_test(Kind::Wal(WalSync::Full), &cfg, &STEPS, false);
    }

    #[test]
    fn crash_at_every_point_normal_keeps_a_prefix() {
        crash_test(Kind::Wal(WalSync::Normal), &no_auto(), &STEPS, true);
        let cfg = JournalConfig {
            wal_autocheckpoint: 6,
            ..Default::default()
        };
        crash_test(Kind::Wal(WalSync::Normal), &cfg, &STEPS, true);
    }

    #[test]
    fn eio_makes_commit_fail() {
        eio_test(Kind::Wal(WalSync::Full), &no_auto());
    }

    #[test]
    fn syncs_per_commit_match_the_docs() {
        // First commit of a generation: header fdatasync + dir sync + frames fdatasync.
        assert_eq!(syncs_per_commit(Kind::Wal(WalSync::Full), &no_auto(), 0), 3);
        assert_eq!(syncs_per_commit(Kind::Wal(WalSync::Full), &no_auto(), 3), 1);
        assert_eq!(
            syncs_per_commit(Kind::Wal(WalSync::Normal), &no_auto(), 3),
            0
        );
    }

    #[test]
    fn readers_run_concurrently_with_commits_and_checkpoints() {
        let vfs = mem_vfs();
        let cfg = JournalConfig {
            wal_autocheckpoint: 7,
            ..Default::default()
        };
        let (j, _) = open(&vfs, cfg);
        let t = Txn::build(&Model::default(), 1, &[], 4);
        j.commit(&t.batch()).unwrap();
        let j = Arc::new(j);
        // Page 3 is never written again, so readers may read it at any time.
        let want = t.pages[3].1.clone();
        let readers: Vec<_> = (0..3)
            .map(|_| {
                let j = j.clone();
                let want = want.clone();
                std::thread::spawn(move || {
                    let mut buf = vec![0u8; PS];
                    for _ in 0..2000 {
                        j.read_page(3, &mut buf).unwrap();
                        assert_eq!(buf, &want[..]);
                    }
                })
            })
            .collect();
        let mut model = t.apply(&Model::default());
        for tid in 2..200u64 {
            let t = Txn::build(&model, tid, &[1 + (tid % 2) as u32], 4);
            j.commit(&t.batch()).unwrap();
            model = t.apply(&model);
        }
        for r in readers {
            r.join().unwrap();
        }
        matches(&*j, &model).unwrap();
    }

    /// A stock header page naming `fcc`, for a database of `page_count` pages.
    fn header_page(fcc: u64, page_count: u32) -> PageRef {
        let h = Header {
            page_size: PS as u32,
            mode: crate::journal::JournalMode::WAL.id(),
            page_count,
            fcc,
            last_txn_size: 0,
            freelist_head: 0,
            freelist_count: 0,
            catalog_root: 1,
            meta: [0; crate::format::header::META_SLOTS],
            auto_vacuum: Default::default(),
        };
        STOCK.header_image(&[], 0, &h)
    }

    fn fcc_of(page0: &[u8]) -> u64 {
        Header::decode(page0).unwrap().fcc
    }

    /// A commit of one page that leaves the header alone (what the pager hands a mode
    /// with `embeds_fcc` for a counter-only commit).
    fn one_page(j: &Wal, tid: u64, pgno: u32) -> PageRef {
        let img = image(pgno, tid as u32);
        let pages = [(pgno, img.clone())];
        j.commit(&CommitBatch {
            tid,
            pages: &pages,
            originals: &[],
            old_page_count: 3,
            new_page_count: 3,
            restamp: &[],
            discard: &[],
        })
        .unwrap();
        img
    }

    #[test]
    fn counter_only_commits_log_one_frame_and_recovery_settles_the_fcc_across_the_wrap() {
        let vfs = mem_vfs();
        // The database as a checkpoint left it, its FCC just below 2^32, so the commits
        // below cross the wrap of the 32-bit tid field.
        let base = (1u64 << 32) - 2;
        let c = ctx(&vfs, Path::new("/d"), no_auto(), 4);
        c.db.write_page(0, &header_page(base, 3)).unwrap();
        c.db.write_page(1, &image(1, 0)).unwrap();
        c.db.write_page(2, &image(2, 0)).unwrap();
        let (j, rep) = Wal::open(c).unwrap();
        assert_eq!(rep, RecoveryReport::default());
        assert_eq!(j.fcc(), base);
        // First commit of the generation: page 0 (the database's image) + the page.
        one_page(&j, base + 1, 1);
        assert_eq!(j.log_frames(), 2);
        let mut f0 = vec![0u8; FRAME_HDR + PS];
        j.file.read_exact_at(&mut f0, j.frame_offset(0)).unwrap();
        assert_eq!(le32(&f0, 0), 0);
        assert_eq!(fcc_of(&f0[FRAME_HDR..]), base);
        // Every later counter-only commit is one frame.
        for tid in base + 2..=base + 4 {
            one_page(&j, tid, 1 + (tid % 2) as u32);
            assert_eq!(j.log_frames(), 2 + tid - (base + 1));
        }
        // Page 1 was last written by base + 4, page 2 by base + 3.
        let p1 = image(1, (base + 4) as u32);
        let p2 = image(2, (base + 3) as u32);
        assert_eq!(j.fcc(), base + 4);
        drop(j); // a crash: no close
        let (j, rep) = Wal::open(ctx(&vfs, Path::new("/d"), no_auto(), 4)).unwrap();
        assert_eq!((rep.frames_kept, rep.stale_frames), (5, 0));
        assert_eq!(j.fcc(), (1 << 32) + 2);
        // The recovery checkpoint stamped page 0 with it, and replayed the pages.
        assert_eq!(fcc_of(&db_page(&j.ctx.db.file, 0)), (1 << 32) + 2);
        assert!(db_page(&j.ctx.db.file, 1) == p1[..]);
        assert!(db_page(&j.ctx.db.file, 2) == p2[..]);
        // The next generation logs the stamped page 0 first; a checkpoint stamps again.
        one_page(&j, base + 5, 2);
        j.file.read_exact_at(&mut f0, j.frame_offset(0)).unwrap();
        assert_eq!(fcc_of(&f0[FRAME_HDR..]), base + 4);
        j.checkpoint().unwrap();
        assert_eq!(fcc_of(&db_page(&j.ctx.db.file, 0)), base + 5);
        j.close().unwrap();
        let (j, rep) = Wal::open(ctx(&vfs, Path::new("/d"), no_auto(), 4)).unwrap();
        assert_eq!(rep, RecoveryReport::default());
        assert_eq!(j.fcc(), base + 5);
    }

    /// `nvlog`'s flushes: a commit standing for a range of tids names the range's start in
    /// its first frame, so a reopen places the generation's window right (the database
    /// is at the start − 1) and settles the FCC at the range's end; a one-page range at
    /// the start of a generation logs its page twice so that first frame exists.
    #[test]
    fn ranged_commits_reopen_at_their_last_tid() {
        let vfs = mem_vfs();
        let base = 40u64;
        let c = ctx(&vfs, Path::new("/d"), no_auto(), 4);
        c.db.write_page(0, &header_page(base, 3)).unwrap();
        c.db.write_page(1, &image(1, 0)).unwrap();
        c.db.write_page(2, &image(2, 0)).unwrap();
        let (j, _) = Wal::open(c).unwrap();
        let range = |j: &Wal, first: u64, last: u64, pages: &[(u32, PageRef)]| {
            j.commit_range(
                &CommitBatch {
                    tid: last,
                    pages,
                    originals: &[],
                    old_page_count: 3,
                    new_page_count: 3,
                    restamp: &[],
                    discard: &[],
                },
                first,
            )
        };
        // Commits base+1..=base+5 as one: page 0 (logged first, as every generation's
        // first commit does) and pages 1 and 2.
        let (p1, p2) = (image(1, 5), image(2, 5));
        range(&j, base + 1, base + 5, &[(1, p1.clone()), (2, p2.clone())]).unwrap();
        assert_eq!(j.log_frames(), 3);
        // Then base+6..=base+8, page 1 only (mid-generation: one frame).
        let p1 = image(1, 8);
        range(&j, base + 6, base + 8, &[(1, p1.clone())]).unwrap();
        assert_eq!((j.log_frames(), j.fcc()), (4, base + 8));
        drop(j); // a crash
        let (j, rep) = Wal::open(ctx(&vfs, Path::new("/d"), no_auto(), 4)).unwrap();
        assert_eq!((rep.frames_kept, rep.stale_frames), (4, 0));
        assert_eq!(j.fcc(), base + 8);
        assert!(db_page(&j.ctx.db.file, 1) == p1[..] && db_page(&j.ctx.db.file, 2) == p2[..]);
        // A new generation whose first commit is a range of page 0 alone: two frames.
        let h = header_page(base + 8, 3);
        range(&j, base + 9, base + 12, &[(0, h.clone())]).unwrap();
        assert_eq!(j.log_frames(), 2);
        drop(j);
        let (j, rep) = Wal::open(ctx(&vfs, Path::new("/d"), no_auto(), 4)).unwrap();
        assert_eq!((rep.frames_kept, rep.stale_frames), (2, 0));
        assert_eq!(j.fcc(), base + 12);
        // A range that does not follow the FCC is refused before anything is written.
        let bad = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            range(&j, base + 14, base + 15, &[(1, image(1, 15))])
        }));
        assert!(bad.is_err(), "a gap before the range must be refused");
    }

    #[test]
    fn a_torn_page0_rewrite_at_checkpoint_is_repaired_from_the_log() {
        let vfs = mem_vfs();
        let c = ctx(&vfs, Path::new("/d"), no_auto(), 4);
        c.db.write_page(0, &header_page(7, 3)).unwrap();
        c.db.write_page(1, &image(1, 0)).unwrap();
        c.db.write_page(2, &image(2, 0)).unwrap();
        let (j, _) = Wal::open(c).unwrap();
        one_page(&j, 8, 1);
        one_page(&j, 9, 2);
        // A checkpoint that died while rewriting page 0: its first half reached the disk.
        let mut torn = db_page(&j.ctx.db.file, 0);
        let stamped = {
            let mut p = torn.clone();
            assert!(stamp_fcc(&mut p, 9));
            p
        };
        torn[..PS / 2].copy_from_slice(&stamped[..PS / 2]);
        j.ctx.db.write_page(0, &torn).unwrap();
        drop(j);
        let (j, rep) = Wal::open(ctx(&vfs, Path::new("/d"), no_auto(), 4)).unwrap();
        assert_eq!(rep.frames_kept, 3);
        assert_eq!(j.fcc(), 9);
        assert!(db_page(&j.ctx.db.file, 0) == stamped, "page 0 not repaired");
    }

    #[test]
    fn a_one_row_commit_logs_one_frame() {
        use crate::vfs::SimVfs;
        use crate::{Config, Database, JournalMode, KeyKind};
        let vfs = SimVfs::new();
        let cfg = || {
            Config::default()
                .vfs(Arc::new(vfs.clone()))
                .journal_mode(JournalMode::WAL)
                .wal_autocheckpoint(0)
        };
        let db = Database::open("/d/one.db", cfg()).unwrap();
        let mut w = db.begin_write().unwrap();
        let t = w.open_or_create_tree("t", KeyKind::Int).unwrap();
        for k in 0..20i64 {
            w.insert(&t, k, b"value").unwrap();
        }
        w.commit().unwrap();
        let frames = db.log_frames();
        for k in 0..20i64 {
            // Same size in place: only the leaf changes (SQLite's WAL logs one frame too).
            db.insert("t", k, b"VALUE").unwrap();
            assert_eq!(db.log_frames(), frames + 1 + k as u64, "update {k}");
        }
        let fcc = db.fcc();
        std::mem::forget(db); // a process crash: no close, the lock goes with the vfs
        let vfs = vfs.crash(1, crate::vfs::CrashModel::full());
        let db = Database::open(
            "/d/one.db",
            Config::default()
                .vfs(Arc::new(vfs.clone()))
                .journal_mode(JournalMode::WAL),
        )
        .unwrap();
        assert_eq!(db.fcc(), fcc);
        assert_eq!(db.header().fcc, fcc);
        assert_eq!(db.get("t", 19i64).unwrap().as_deref(), Some(&b"VALUE"[..]));
    }

    #[test]
    fn a_clean_reopen_of_a_preallocated_log_writes_nothing() {
        use crate::vfs::{AccountingVfs, IoKind, SimVfs};
        use crate::{Config, Database, JournalMode};
        let sim = SimVfs::new();
        let cfg = |vfs: Arc<dyn Vfs>| {
            Config::default()
                .vfs(vfs)
                .journal_mode(JournalMode::WAL)
                .wal_prealloc(true)
                .wal_autocheckpoint(100)
        };
        let db = Database::open("/d/pre.db", cfg(Arc::new(sim.clone()))).unwrap();
        let mut w = db.begin_write().unwrap();
        w.open_or_create_tree("t", crate::KeyKind::Int).unwrap();
        w.commit().unwrap();
        for k in 0..300i64 {
            db.insert("t", k, &[k as u8; 40][..]).unwrap();
        }
        db.close().unwrap();
        for round in 0..2 {
            let acc = Arc::new(AccountingVfs::new(Arc::new(sim.clone())));
            let stats = acc.stats();
            let db = Database::open("/d/pre.db", cfg(acc)).unwrap();
            let opened = stats.snapshot();
            assert!(
                db.recovery_report().is_clean(),
                "{:?}",
                db.recovery_report()
            );
            assert_eq!(opened.get(IoKind::Write).bytes, 0, "round {round}");
            assert_eq!(opened.get(IoKind::Allocate).calls, 0, "round {round}");
            assert_eq!(opened.get(IoKind::Sync).calls, 0, "round {round}");
            assert_eq!(
                db.get("t", 299i64).unwrap().as_deref(),
                Some(&[43u8; 40][..])
            );
            // Close writes the checkpoint (nothing here) and the next header: 32 bytes.
            db.close().unwrap();
            let closed = stats.snapshot().delta(&opened);
            assert_eq!(closed.get(IoKind::Write).bytes, WAL_HDR as u64);
        }
    }
}
