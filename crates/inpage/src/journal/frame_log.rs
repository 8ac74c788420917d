//! The frame log the write-ahead modes share: `wal`, `waldio`, and through `wal` the
//! flush of `nvlog`.
//!
//! A log is a header ([`LogHeader`]: magic, version, page size, checkpoint sequence, two
//! salts, sealed by a crc32c) and then frames. A frame is one page image plus its fields
//! ([`Frame`]): the page number, the page count after the commit (nonzero only on a
//! commit's last frame, its *commit frame*), the header's salts, the commit's tid, and a
//! chain value seeded by the previous frame's (the header crc for the first frame). The
//! formats differ only in where a frame keeps those fields and which bytes the chain
//! covers; a [`FrameCodec`] says that, and everything else lives here once: writing the
//! fields of a commit's frames, the recovery scan, the index of the newest committed
//! frame of each page, the generation window check, and the checkpoint's copy into the
//! database.
//!
//! Invariants, and why they hold under a disk that loses, reorders and tears unsynced
//! writes:
//! - *The scan keeps exactly a prefix of the committed transactions.* A frame counts only
//!   if its salts equal the header's and its chain verifies; the scan stops at the first
//!   frame that fails, and indexes a commit's frames only once its commit frame verified.
//!   A lost, torn or reordered write breaks the chain at that point, so no later frame
//!   survives. Frames after the last commit frame are counted as discarded.
//! - *The index names, for each page, the newest committed frame of the current
//!   generation, and nothing of an unfinished commit.* The scan inserts a commit's frames
//!   in log order when its commit frame verifies; a writer inserts its frames only after
//!   writing them; `Index::clear` (a reset) empties it before any offset is reused.
//! - *A log replays only over the database it was written for* ([`replay_is_stale`]): a
//!   generation's commits carry consecutive tids `first..=last` and it began on a database
//!   at `first - 1`; a checkpoint writes page 0 with the FCC, so while the log is needed
//!   the database header's FCC is in `first - 1..=last`. Above, the log is an older
//!   generation whose images are all in the database (skipped); below, it is from a later
//!   life of the database than the file (refused).
//! - *A checkpoint writes the database only from committed frames*, each page once from
//!   its newest frame, page 0 stamped with the FCC; the caller syncs the log before and the
//!   database after, and clears the index only then, so until that point every page is
//!   still read from the log and a crash replays the log over a half-done copy.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::util::{check_db_length, fresh_salt, nonzero, read_up_to, stamp_fcc};
use super::{JournalCtx, Mutant, RecoveryAction, RecoveryReport};
use crate::error::{Error, Pgno, Result};
use crate::vfs::{File, OpenOptions};

/// Which log a [`LogHeader`] belongs to: its magic and format version (`wal`, `waldio`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LogFormat {
    pub magic: [u8; 8],
    pub version: u32,
}

/// Bytes of a [`LogHeader`] on disk.
pub(crate) const LOG_HDR_LEN: usize = 32;

/// The header of one generation of a write-ahead log (between two resets): magic,
/// version, page size, checkpoint sequence and two salts, sealed by a crc32c. Frames
/// carry the salts, so frames of an earlier generation (or a preallocated log's zeros)
/// never pass for this one's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LogHeader {
    pub format: LogFormat,
    pub page_size: u32,
    pub ckpt_seq: u32,
    pub salt1: u32,
    pub salt2: u32,
}

impl LogHeader {
    /// The first generation of a new log, with salts fresh from the VFS.
    pub(crate) fn first(format: LogFormat, page_size: u32, vfs: &dyn crate::vfs::Vfs) -> LogHeader {
        LogHeader {
            format,
            page_size,
            ckpt_seq: 0,
            salt1: fresh_salt(vfs),
            salt2: fresh_salt(vfs),
        }
    }

    pub(crate) fn encode(&self) -> [u8; LOG_HDR_LEN] {
        let mut b = [0u8; LOG_HDR_LEN];
        b[0..8].copy_from_slice(&self.format.magic);
        b[8..12].copy_from_slice(&self.format.version.to_le_bytes());
        b[12..16].copy_from_slice(&self.page_size.to_le_bytes());
        b[16..20].copy_from_slice(&self.ckpt_seq.to_le_bytes());
        b[20..24].copy_from_slice(&self.salt1.to_le_bytes());
        b[24..28].copy_from_slice(&self.salt2.to_le_bytes());
        let crc = crc32c::crc32c(&b[..28]);
        b[28..32].copy_from_slice(&crc.to_le_bytes());
        b
    }

    pub(crate) fn crc(&self) -> u32 {
        crate::le::get_u32(&self.encode(), 28)
    }

    /// A header of `format` in `b`, or None (short, foreign, other version, bad crc).
    pub(crate) fn decode(format: LogFormat, b: &[u8]) -> Option<LogHeader> {
        use crate::le::get_u32 as le32;
        if b.len() < LOG_HDR_LEN || b[0..8] != format.magic || le32(b, 8) != format.version {
            return None;
        }
        if le32(b, 28) != crc32c::crc32c(&b[..28]) {
            return None;
        }
        Some(LogHeader {
            format,
            page_size: le32(b, 12),
            ckpt_seq: le32(b, 16),
            salt1: le32(b, 20),
            salt2: le32(b, 24),
        })
    }

    /// The header of the generation after this one (`salt2` fresh from the VFS).
    pub(crate) fn next(&self, salt2: u32) -> LogHeader {
        LogHeader {
            ckpt_seq: self.ckpt_seq.wrapping_add(1),
            salt1: nonzero(self.salt1.wrapping_add(1)),
            salt2,
            ..*self
        }
    }
}

/// The fields a frame carries beside its page image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Frame {
    pub pgno: Pgno,
    /// Page count after the commit on its commit frame, 0 on the others.
    pub db_size: u32,
    pub salt1: u32,
    pub salt2: u32,
    /// The commit's tid, as much of it as the format stores (`FrameCodec::TID_BITS`).
    pub tid: u64,
    /// The chain value stored in the frame.
    pub chain: u32,
}

/// Where one log format keeps a frame's fields, and what its chain covers.
pub(crate) trait FrameCodec {
    /// The header's magic and version.
    const FORMAT: LogFormat;
    /// How many low bits of a tid a frame stores (32 or 64); the generation window is
    /// compared modulo `2^TID_BITS`.
    const TID_BITS: u32;
    /// Bytes of one frame in a database of `ps`-byte pages.
    fn frame_len(ps: usize) -> usize;
    /// Offset of frame `i` in the log.
    fn frame_offset(ps: usize, i: u64) -> u64;
    /// Offset of the page image of the frame at `off`.
    fn image_at(off: u64) -> u64;
    /// The fields of a whole frame.
    fn fields(frame: &[u8]) -> Frame;
    /// Write `f` (its `chain` ignored) into a frame whose image is in place, and seal it
    /// with the chain value seeded by `prev`, which is returned.
    fn seal(frame: &mut [u8], f: &Frame, prev: u32) -> u32;
    /// The chain value of a whole frame, seeded by `prev`.
    fn chain(prev: u32, frame: &[u8]) -> u32;
}

/// Which frame holds the newest committed image of each page of the current generation.
#[derive(Debug, Default)]
pub(crate) struct Index {
    /// pgno → byte offset of the frame.
    pub map: HashMap<Pgno, u64>,
    /// Committed frames in the generation.
    pub frames: u64,
}

impl Index {
    /// Forget every frame (a reset: the generation's offsets may be reused next).
    pub(crate) fn clear(&mut self) {
        self.map.clear();
        self.frames = 0;
    }

    /// The indexed pages and their frames, by page number (the checkpoint's order).
    pub(crate) fn sorted(&self) -> Vec<(Pgno, u64)> {
        let mut pages: Vec<(Pgno, u64)> = self.map.iter().map(|(&p, &o)| (p, o)).collect();
        pages.sort_unstable();
        pages
    }
}

/// What the recovery scan found.
pub(crate) struct Scan {
    /// The log's header, if it has a valid one of this format.
    pub hdr: Option<LogHeader>,
    /// The committed frames kept (`index.frames` is also the next frame's index).
    pub index: Index,
    /// Chain value of the last kept frame (the header crc if none).
    pub chain: u32,
    /// Page count after the last kept commit.
    pub db_size: u32,
    /// Frames read and not kept: a torn frame, and those of an unfinished commit.
    pub discarded: u64,
    /// The tids (as stored, `FrameCodec::TID_BITS`) of the first and last kept commits;
    /// the first is the tid field of the first commit's first frame, so a commit that
    /// stands for a range of tids (`wal::Wal::commit_range`) names its start there.
    pub first_tid: u64,
    pub last_tid: u64,
}

impl Scan {
    /// The report of a recovery that kept this scan's frames and skipped `stale` ones.
    pub(crate) fn report(&self, stale: u64) -> RecoveryReport {
        let replay = (self.index.frames > 0).then_some(RecoveryAction::ReplayFrames {
            frames: self.index.frames,
            pages: self.index.map.len() as u64,
        });
        let discard = (self.discarded > 0).then_some(RecoveryAction::DiscardFrames {
            frames: self.discarded,
        });
        let ignore = (stale > 0).then_some(RecoveryAction::IgnoreStaleFrames { frames: stale });
        RecoveryReport::of([replay, discard, ignore].into_iter().flatten())
    }
}

/// Open (creating) the log `<db>-<suffix>`. The pager leaves the database length check
/// to a mode that recovers the FCC: without a log the header on disk is the committed
/// one, so a file shorter than it says is refused before the log is created; with a
/// log, replaying it may be what restores the length.
pub(crate) fn open_log(ctx: &JournalCtx, suffix: &str) -> Result<(PathBuf, Arc<dyn File>)> {
    let path = ctx.side_path(suffix);
    if !ctx.vfs.exists(&path).map_err(Error::io("stat", &path))? {
        check_db_length(ctx)?;
    }
    let opts = OpenOptions::CREATE;
    let file = ctx
        .vfs
        .open(&path, opts)
        .map_err(Error::io("open", &path))?;
    Ok((path, file))
}

/// Read the log and index every frame of its header's generation up to the last valid
/// commit frame (module invariants). Errors: a header of another page size, or a
/// committed frame past its commit's page count (`CorruptJournal`); I/O.
pub(crate) fn scan<C: FrameCodec>(
    file: &dyn File,
    ps: usize,
    path: &Path,
    mutant: Mutant,
) -> Result<Scan> {
    let mut s = Scan {
        hdr: None,
        index: Index::default(),
        chain: 0,
        db_size: 0,
        discarded: 0,
        first_tid: 0,
        last_tid: 0,
    };
    let mut hb = [0u8; LOG_HDR_LEN];
    let n = read_up_to(file, &mut hb, 0).map_err(Error::io("read", path))?;
    // An invalid header was never synced, so no frame after it was committed.
    let Some(hdr) = LogHeader::decode(C::FORMAT, &hb[..n]) else {
        return Ok(s);
    };
    if hdr.page_size as usize != ps {
        return Err(Error::CorruptJournal {
            path: path.to_path_buf(),
            reason: format!(
                "log page size {} differs from the database's {ps}",
                hdr.page_size
            ),
        });
    }
    s.hdr = Some(hdr);
    s.chain = hdr.crc();
    let mut frame = vec![0u8; C::frame_len(ps)];
    let mut chain = hdr.crc();
    let mut pending: Vec<(Pgno, u64)> = Vec::new();
    // The tid field of the first frame of the commit being read.
    let mut commit_first = 0u64;
    let mut i = 0u64;
    loop {
        let off = C::frame_offset(ps, i);
        if read_up_to(file, &mut frame, off).map_err(Error::io("read", path))? < frame.len() {
            break;
        }
        let f = C::fields(&frame);
        if f.salt1 != hdr.salt1 || f.salt2 != hdr.salt2 {
            break; // zeros, or a frame of an earlier generation
        }
        let c = C::chain(chain, &frame);
        if c != f.chain && mutant != Mutant::SkipChecksum {
            s.discarded += 1; // torn or lost write inside this generation
            break;
        }
        chain = c;
        i += 1;
        if pending.is_empty() {
            commit_first = f.tid;
        }
        pending.push((f.pgno, off));
        if f.db_size != 0 {
            if s.index.frames == 0 {
                s.first_tid = commit_first;
            }
            s.last_tid = f.tid;
            for (pgno, off) in pending.drain(..) {
                if pgno >= f.db_size {
                    return Err(Error::CorruptJournal {
                        path: path.to_path_buf(),
                        reason: format!(
                            "committed frame for page {pgno} past the page count {}",
                            f.db_size
                        ),
                    });
                }
                s.index.map.insert(pgno, off);
            }
            s.index.frames = i;
            s.chain = chain;
            s.db_size = f.db_size;
        }
    }
    if mutant == Mutant::WalPastCommit && !pending.is_empty() {
        s.index.map.extend(pending.drain(..));
        s.index.frames = i;
        s.chain = chain;
    }
    s.discarded += pending.len() as u64;
    Ok(s)
}

/// Whether the committed frames the scan kept are older than the database (`Ok(true)`:
/// skip them), belong to it (`Ok(false)`: replay), or cannot belong to it (an error).
///
/// The window is `first - 1..=last` (module invariants), compared modulo `2^TID_BITS`
/// for a format that stores only low bits (a generation holds far fewer than 2^31
/// commits, so within half the range the side is exact). Below it, the log is from a
/// later life of the database than the file (another copy's log, or a restored backup):
/// refused, since neither replaying nor ignoring it gives a committed state. Above it,
/// the log was checkpointed and the database has committed since: the file holds an
/// older generation, e.g. a log cut short by `journal_size_limit` or by hand after its
/// checkpoint, whose prefix would put old images over newer pages.
pub(crate) fn replay_is_stale<C: FrameCodec>(
    scan: &Scan,
    db_fcc: u64,
    path: &Path,
) -> Result<bool> {
    let mask = if C::TID_BITS >= 64 {
        u64::MAX
    } else {
        (1u64 << C::TID_BITS) - 1
    };
    let half = (mask >> 1) + 1;
    let (first, last) = (scan.first_tid, scan.last_tid);
    let base = first.wrapping_sub(1) & mask;
    let db = db_fcc & mask;
    if db.wrapping_sub(base) & mask <= last.wrapping_sub(base) & mask {
        return Ok(false);
    }
    let behind = base.wrapping_sub(db) & mask;
    if behind != 0 && behind < half {
        let bits = if C::TID_BITS < 64 {
            format!(" (low {} bits)", C::TID_BITS)
        } else {
            String::new()
        };
        return Err(Error::CorruptJournal {
            path: path.to_path_buf(),
            reason: format!(
                "log holds transactions {first}..={last}{bits} but the database is at \
                 {db_fcc}: the log belongs to a later state of this database than the file"
            ),
        });
    }
    Ok(true)
}

/// Keep the scan's frames, or drop them if they are older than the database
/// (`replay_is_stale`); returns how many frames were dropped.
pub(crate) fn drop_stale<C: FrameCodec>(
    scan: &mut Scan,
    disk_fcc: Option<u64>,
    path: &Path,
) -> Result<u64> {
    match disk_fcc {
        Some(db) if scan.index.frames > 0 && replay_is_stale::<C>(scan, db, path)? => {
            // Everything in it is already in the database, which has moved on: replaying
            // it would put older images over newer pages.
            let stale = scan.index.frames;
            scan.index = Index::default();
            Ok(stale)
        }
        _ => Ok(0),
    }
}

/// Seal the frames of one commit in `buf` (whole frames of `ps`-byte pages, images in
/// place; `pgnos` their pages) with the
/// generation's salts, chained from `prev`: the last one is the commit frame (page count
/// `db_size`, tid `tid`), the others name `first_tid`. Returns the last chain value.
pub(crate) fn seal_commit<C: FrameCodec>(
    buf: &mut [u8],
    ps: usize,
    pgnos: impl ExactSizeIterator<Item = Pgno>,
    hdr: &LogHeader,
    (first_tid, tid): (u64, u64),
    db_size: u32,
    mut prev: u32,
) -> u32 {
    let n = pgnos.len();
    debug_assert_eq!(n * C::frame_len(ps), buf.len());
    for (i, (pgno, frame)) in pgnos
        .zip(buf.chunks_exact_mut(C::frame_len(ps)))
        .enumerate()
    {
        let last = i + 1 == n;
        let f = Frame {
            pgno,
            db_size: if last { db_size } else { 0 },
            salt1: hdr.salt1,
            salt2: hdr.salt2,
            tid: if last { tid } else { first_tid },
            chain: 0,
        };
        prev = C::seal(frame, &f, prev);
    }
    prev
}

/// Copy the newest committed frame of every page in `pages` (sorted, from
/// `Index::sorted`) into the database: grown to `db_size` first, page 0 stamped with
/// `fcc` (commits that changed only the counter left it out of the log, so its newest
/// frame may name an older FCC; the first commit of every generation logs it, so a torn
/// rewrite is repaired by replay). `fix` clears what of a frame is not page (a format
/// that keeps its fields in the image). Does not sync; a full file system is a clean
/// failure (nothing of the checkpoint is relied on until the caller syncs and resets).
pub(crate) fn copy_to_db<C: FrameCodec>(
    ctx: &JournalCtx,
    log: &dyn File,
    path: &Path,
    pages: &[(Pgno, u64)],
    (db_size, fcc): (u32, u64),
    fix: impl Fn(&mut [u8]),
) -> Result<()> {
    let db = &ctx.db;
    db.ensure_capacity(db_size)
        .map_err(crate::error::clean_failure)?;
    let mut buf = vec![0u8; db.page_size];
    for &(pgno, off) in pages {
        // Only the writer writes the log, and the caller is it: no lock needed to read.
        log.read_exact_at(&mut buf, C::image_at(off))
            .map_err(Error::io("read", path))?;
        fix(&mut buf);
        if pgno == 0 {
            stamp_fcc(&mut buf, fcc);
        }
        db.write_page(pgno, &buf)
            .map_err(crate::error::clean_failure)?;
    }
    Ok(())
}
