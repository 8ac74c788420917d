//! Journal mode `nvlog` (xLog, `docs/NVLOG-DESIGN.md`): a commit appends the
//! transaction's redo record to a ring in a memory-mapped region and returns without a
//! sync; a flusher moves batches of commits into the database with one fdatasync each.
//!
//! Two levels of commit:
//! - *Logical commit* (what `commit` acknowledges): the record `seq | len | sum |
//!   payload` is stored in the region's ring and persisted there (`Region::persist`), and
//!   the new page images enter the in-memory overlay that `read_page` consults first. The
//!   record is physical redo: for each page, the byte runs where the new image differs
//!   from its committed image (from zeros for a page past the old page count).
//! - *Flush*: the pending commits `a..=b` become ONE transaction of an inner write-ahead
//!   log (`wal::Wal::commit_range`, standing for the tids `a..=b`): the newest image of
//!   each page any of them wrote, so a page changed by many commits of the batch is
//!   logged once. Pages past the file's committed end (the page count before `a`) are
//!   not logged: they are written once, in place, and fdatasync'ed before the WAL
//!   transaction that links them in is written (*direct pages*). One `sync_log`
//!   (fdatasync) makes the transaction durable, and only then the region's watermark
//!   slot moves to `b`, releasing its ring space. The WAL is checkpointed into the
//!   database file as in `wal` mode.
//! - *Direct commit*: a record that would not fit even an empty ring (a bulk load, a
//!   `VACUUM`, a backup) skips the ring: the pending commits are flushed, and the commit
//!   becomes a WAL transaction of its own, its direct pages placed as a flush places
//!   them (`Core::place`), synced before the watermark moves past it.
//!
//! Invariants, and why they hold:
//! - *seq is the pager's tid, and tids are consecutive.* The pager commits tid `fcc + 1`
//!   after an open that reported `fcc` (`recovers_fcc`); `commit` refuses anything else.
//!   A flush's WAL transaction stands for the whole range `a..=b` of its commits (its
//!   first frame names `a`, its commit frame `b`), and `a` is the previous flush's `b` + 1
//!   (checked by the WAL in release builds). So the WAL sees the consecutive tids its
//!   generation window needs (`wal::replay_is_stale`), and its recovery keeps a prefix of
//!   whole batches: the file is always at some batch's last commit, a state every reader
//!   saw. The images logged are the ones the pager produced at `b`'s commit or earlier,
//!   each the page's newest, i.e. exactly the file at `b`. (A DHL counting commit cannot
//!   carry a batch yet: DHL pages hold versions tagged by the pager with each logical
//!   tid, and writing a page changed by two commits of one batch would overwrite the
//!   version the file's last durable commit still needs; see the design note.)
//! - *Direct pages never disturb a committed state, and are durable before anything
//!   references them.* (Flushes and direct commits alike: a direct commit flushes first,
//!   so its old page count is the previous flush's.) A page at or past the page count
//!   the file had after the previous flush is in no committed state the WAL can recover
//!   (its recovery keeps a prefix of whole flushes, and the previous one is synced), so
//!   writing it in place loses
//!   nothing a crash could need; and its fdatasync precedes every byte of the WAL
//!   transaction whose tree points at it, so no recovered transaction links a page that
//!   is not there. A page the current log generation holds a frame of is logged
//!   instead: the checkpoint copies that frame, which would overwrite the direct write.
//!   After a crash inside a flush the file may hold such pages past its committed end;
//!   they belong to nothing and are written again when the space is next used.
//! - *An acknowledged commit is in the region or in the file.* It is persisted in the
//!   ring before `commit` returns, and its ring space is released only by a watermark
//!   write that follows the fdatasync covering it in the WAL. So if the region survives
//!   (always for a process crash; for a power cut only on persistent memory), recovery
//!   finds every acknowledged commit either in the file (WAL recovery) or as a record
//!   past the file's FCC.
//! - *Without the region, the file alone is consistent and holds at least the
//!   watermark.* The WAL keeps a prefix of whole commits, and everything up to the last
//!   watermark was synced before the watermark moved. A lost region therefore loses only
//!   commits after the durable watermark, never half of one, never out of order.
//! - *Replay applies exactly the records the region vouches for, in order.* Recovery
//!   starts at the watermark slot's ring position expecting seq `watermark + 1`, and
//!   stops at the first record whose seq is not the next expected one or whose checksum
//!   fails (a torn record of a commit that was never acknowledged, or stale bytes of an
//!   earlier lap). Records at or below the file's FCC are already in it and skipped; each
//!   later one is rebuilt on the committed image recovery has reached, which is the image
//!   its diff was computed against. A watermark above the file's FCC means the file lost
//!   commits the region released: refused as corruption, never papered over.
//! - *A record a crash interrupted never comes back.* Replay stops at it, and the next
//!   session's first record goes to the same place with the same seq; a torn store of
//!   that record could leave the old one whole again (it kept only where the two agree),
//!   and the crash after it would replay a commit the previous recovery rolled back. So
//!   the open clears the header at the next record's place, persisted, before anything
//!   is written there (`clear_stale_header`); a torn new header is then zeros or its
//!   own, and only its own payload verifies under it.
//! - *The ring lives where `RingHome` says:* a memory region (`nvlog`) or the file
//!   `<db>-redo` (`redo`, `journal::redo`), whose persist is an fdatasync, so there an
//!   acknowledged commit is durable. Everything above holds for both.
//! - *A ring file is created by the first commit that needs one* (`RingHome::lazy`), with
//!   its identity file, and its watermark slot is written (the last commit, all in the
//!   file) before its first record: until then every commit is in the file (replayed and
//!   synced at open, or committed straight into the WAL), so there is nothing a ring
//!   would have to vouch for. A database only read, or switched to another mode before
//!   its first write, never gets one.
//! - *Beside other processes, an open writes nothing they read* (`JournalConfig::attach`,
//!   `redo`'s append turns): records past the file's commit stay pending in memory
//!   instead of going into the WAL, the WAL keeps its frames in place, the watermark is
//!   left as it is, and a foreign or blank ring refuses (`Error::Busy`: the caller takes
//!   the whole file). Only the header at the next record's place is cleared, past every
//!   record the others read. Such an open, and every open while another process has the
//!   file, replays no record past the last one published (`JournalConfig::replay_until`):
//!   one past it was never acknowledged, and another process writes over it.
//! - *A paused flusher starts no flush* (`DeferredFlush`, for a transaction across
//!   databases); a pause waits for the flush under way, which holds `flushing`.
//! - *The checksum is xxh3 keyed by the database identity, not crc32c:* payloads embed
//!   page images whose trailers hold crc32c values of the bytes before them, which a
//!   crc32c over the record would cancel (`journal::image_checksum`). Keying by the
//!   identity also makes another database's records fail.
//! - *A region is replayed only into its database.* The region header carries a random
//!   id that the database keeps in its side file `<db>-nvlog` (written and synced, with
//!   its directory, before the region is created); a region with another id is refused
//!   (`Error::ForeignRegion`) rather than replayed or overwritten.
//! - *The watermark slot update is atomic.* Two slots, each with a generation and a
//!   crc32c; an update writes the older slot. A torn slot fails its crc and the other one
//!   (the previous watermark, still true) wins.
//! - *A full ring waits, never drops:* a commit that does not fit runs (or waits for) a
//!   flush first. A record bigger than the whole ring is committed straight into the WAL
//!   with its own fdatasync, after the pending records, keeping the order.
//! - *A record never shares a store unit with a live one after it:* a store may zero the
//!   rest of its last unit (`Region::write_granule`: a sector of a ring file written with
//!   `O_DIRECT`), so a record is accepted only with that much room left after it
//!   (`Placed::slack`); free ring space is all that can follow it in its unit.
//! - *Readers see every acknowledged commit:* the overlay holds each page of a commit
//!   not yet flushed, and an entry is removed only after the WAL holds that page's image
//!   of that commit or a newer one.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::util::check_batch;
use super::wal::Wal;
use super::RecoveryAction;
use super::{
    Absorbed, Appends, Capabilities, CommitBatch, DeferredFlush, GateAnswer, Journal,
    JournalConfig, JournalCtx, JournalOption, Log, ModeSpec, Mutant, NvlogFlush, Opened,
    RecoveryReport, RegionBacked, WalSync,
};
use crate::error::{Error, Pgno, Result};
use crate::le::{get_u32, get_u64};
use crate::page::stock::STOCK;
use crate::page::{stamp_crc, PageRef};
use crate::vfs::{OpenOptions, Region};

/// Registry entry of `nvlog`.
pub(crate) static NVLOG: ModeSpec = ModeSpec {
    name: "nvlog",
    code: 23,
    format: 23,
    summary: "xLog: a commit appends a redo record to a memory-mapped region and returns without a sync; a flusher moves batches into the database with one fdatasync each. Survives process crashes always, power loss only if the region is on persistent memory (the default under /dev/shm is not)",
    layout: &STOCK,
    caps: Capabilities {
        atomic: true,
        embeds_fcc: true,
        recovers_fcc: true,
        direct_writes: false,
        replays_log: true,
        intent_map: false,
        side_files: &["wal", "nvlog"],
        steals: false,
        durable_at_ack: false,
        survives_process_crash: true,
        region_backed: true,
        appends_beside_readers: false,
    },
    options: &[
        JournalOption::WalPrealloc,
        JournalOption::NvlogRegion,
        JournalOption::NvlogRingBytes,
        JournalOption::NvlogFlush,
        JournalOption::NvlogDirectPages,
    ],
    check_options,
    open: |ctx, _| open_mode(ctx, RingHome::Memory),
};

/// `ModeSpec::open` of the modes built on this journal (`nvlog`, `redo`).
pub(super) fn open_mode(ctx: JournalCtx, home: RingHome) -> Result<Opened> {
    let (j, recovery, fcc) = NvlogJournal::open(ctx, home)?;
    Ok(Opened {
        fcc: Some(fcc),
        ..Opened::plain(j, recovery)
    })
}

/// `ModeSpec::check_options` of `nvlog`: the ring holds at least a few records.
pub(super) fn check_options(c: &JournalConfig) -> Result<()> {
    match c.nvlog_ring_bytes {
        Some(n) if n < MIN_RING => Err(Error::Config(format!(
            "nvlog_ring_bytes {n} is below the minimum {MIN_RING}"
        ))),
        _ => Ok(()),
    }
}

const REGION_MAGIC: [u8; 8] = *b"inpgNVR\0";
const REGION_VERSION: u32 = 1;
const ID_MAGIC: [u8; 8] = *b"inpgNVID";
/// Region header: magic, version, page size, db id, ring bytes, crc32c (`docs/FORMAT.md`).
const HDR_LEN: usize = 36;
/// The two watermark slots.
const SLOT_AT: [usize; 2] = [64, 96];
const SLOT_LEN: usize = 28;
/// Where the ring starts.
const RING_AT: usize = 128;
/// Record header: seq u64, payload length u32, checksum u32.
const REC_HDR: usize = 16;
const DEFAULT_RING: u32 = 4 << 20;
const MIN_RING: u32 = 16 << 10;
/// The longest an acknowledged commit waits in the region before the background flusher
/// starts moving it into the file.
const FLUSH_DELAY: Duration = Duration::from_millis(20);
/// Commits waiting for a flush that trigger one whatever the ring's fill: each holds its
/// page images in memory (the overlay), which a ring of tiny records would let grow far
/// past the ring's size.
const MAX_PENDING: usize = 1024;
/// Bytes of page images the waiting commits may hold, in rings: a flush starts at this
/// much whatever the ring's fill or the count of commits. Records hold only the bytes
/// that changed, so a ring a quarter full can stand for many times its size in images
/// (1,024 commits of eight scattered pages are 32 MiB at 4 KiB pages); this bounds a
/// database's memory for them at twice the ring.
const MAX_PENDING_IMAGES_RINGS: u64 = 2;
/// Two diff runs closer than this are merged (a run header costs 8 bytes).
const RUN_GAP: usize = 16;

/// How long the background flusher waits before it tries again after a flush found no
/// room in the file system.
const RETRY_DELAY: Duration = Duration::from_millis(100);
/// How soon the background flusher asks for the write turn again after another process
/// had one (`journal::Gate`).
const GATE_RETRY: Duration = Duration::from_millis(5);

/// Why a flush failed: `Retry`, the file system had no room and nothing that counts was
/// changed; `Fatal`, anything else (the session ends).
enum Flush {
    Retry(Error),
    Fatal(Error),
}

/// The default region: under `/dev/shm`, named by a hash of the database's absolute path.
pub(crate) fn default_region_path(db_path: &Path) -> PathBuf {
    let abs = std::path::absolute(db_path).unwrap_or_else(|_| db_path.to_path_buf());
    let h = xxhash_rust::xxh3::xxh3_64(abs.as_os_str().as_encoded_bytes());
    PathBuf::from(format!("/dev/shm/inpage-{h:016x}-nvlog"))
}

/// Where the ring lives, which decides what an acknowledged commit survives and so which
/// mode it is: `nvlog` keeps it in a memory region, `redo` in a file beside the database.
/// The record format, replay and flush are the same; only the persist point, the flush
/// deadline and the ring's life at a clean close differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RingHome {
    /// A memory-mapped region (`Config::nvlog_region`, default under `/dev/shm`):
    /// `persist` is an `msync`, so a record survives a process crash, and a power cut
    /// only on persistent memory.
    Memory,
    /// The file `<db>-redo` (`journal::ring_file`): `persist` is an fdatasync, so a
    /// record is on the medium when its commit returns. Created by the first commit (a
    /// zero-fill of the whole ring), not at open; it outlives a clean close (recreating
    /// it would cost another zero-fill), its watermark then saying nothing in it is newer
    /// than the file.
    File,
}

impl RingHome {
    /// The ring a journal context uses.
    fn path(self, ctx: &JournalCtx) -> PathBuf {
        match self {
            RingHome::Memory => ctx.config.nvlog_region_for(&ctx.db_path),
            RingHome::File => ctx.side_path("redo"),
        }
    }

    /// Whether the ring's path is derived from the database's (nothing else can have put
    /// a ring there), so one left by an earlier database at this path may be replaced.
    fn derived_path(self, ctx: &JournalCtx) -> bool {
        self == RingHome::File || ctx.config.nvlog_region.is_none()
    }

    fn open(
        self,
        ctx: &JournalCtx,
        path: &Path,
        create: Option<usize>,
    ) -> io::Result<Arc<dyn Region>> {
        match self {
            RingHome::Memory => ctx.vfs.open_region(path, create),
            RingHome::File => super::ring_file::open(
                &*ctx.vfs,
                path,
                create,
                ctx.config.direct_writes,
                ctx.db.page_size,
            ),
        }
    }

    fn delete(self, ctx: &JournalCtx, path: &Path) -> io::Result<()> {
        match self {
            RingHome::Memory => ctx.vfs.delete_region(path),
            RingHome::File => super::ring_file::delete(&*ctx.vfs, path),
        }
    }

    /// The longest an acknowledged commit waits before the background flusher starts on
    /// it. A volatile ring bounds what a power cut can take; a durable one needs no
    /// deadline, and batches then grow to the fill threshold (fewer, larger flushes: a hot
    /// page reaches the file once per batch).
    fn flush_delay(self) -> Option<Duration> {
        match self {
            RingHome::Memory => Some(FLUSH_DELAY),
            RingHome::File => None,
        }
    }

    /// Whether a missing ring is created by the first commit instead of at open. A ring
    /// file costs a zero-fill of its whole size (4 MiB by default) and the flash writes
    /// that go with it: an app that opens a new file only to switch it to WAL, or a tool
    /// that only reads, should not pay them. A memory region costs no device write.
    fn lazy(self) -> bool {
        self == RingHome::File
    }
}

/// Ring position → region offsets of `len` bytes starting there: (offset, bytes) of the
/// part before the ring's end and of the part that wraps to its start.
fn ring_pieces(ring: u64, pos: u64, len: usize) -> [(usize, usize); 2] {
    let at = (pos % ring) as usize;
    let first = len.min(ring as usize - at);
    [(RING_AT + at, first), (RING_AT, len - first)]
}

fn record_sum(id: u64, hdr: &[u8], payload: &[u8]) -> u32 {
    super::image_checksum(id, &hdr[..12], payload)
}

/// One logical commit not yet flushed.
#[derive(Debug)]
struct Pending {
    seq: u64,
    /// Ring position just past its record.
    end: u64,
    /// When it was acknowledged (the background flusher's deadline is the oldest's plus
    /// `FLUSH_DELAY`).
    at: Instant,
    pages: Vec<(Pgno, PageRef)>,
    old_page_count: u32,
    new_page_count: u32,
}

impl Pending {
    fn image_bytes(&self) -> u64 {
        self.pages.iter().map(|(_, img)| img.len() as u64).sum()
    }
}

/// Ring and commit state, under one mutex.
#[derive(Debug)]
struct State {
    /// Ring position of the first record not yet flushed (the watermark slot's).
    head: u64,
    /// Ring position of the next record.
    tail: u64,
    /// Seq of the last acknowledged commit.
    last_seq: u64,
    /// Generation of the newest watermark slot.
    gen: u64,
    /// The newest watermark written: every commit up to it is synced in the file.
    watermark: u64,
    pending: VecDeque<Arc<Pending>>,
    /// Bytes of the page images `pending` holds.
    pending_bytes: u64,
    /// A flush failed: the file may hold any prefix of it, so nothing more is accepted.
    failed: Option<String>,
    /// The error a background flush failed with, handed to the next caller as is (an
    /// ENOSPC stays an ENOSPC); later callers get `failed`.
    failure: Option<Error>,
    closed: bool,
    /// The background flusher must exit.
    stop: bool,
    /// Pauses in force (`DeferredFlush`): the background flusher starts no flush.
    paused: u32,
    /// The page count the last flush left in the file (None before this session's first).
    flushed_pages: Option<u32>,
}

impl State {
    /// Whether the commits waiting reached a flush threshold: a quarter of the ring, or
    /// `MAX_PENDING` commits, or page images of `MAX_PENDING_IMAGES_RINGS` rings. All
    /// count a batch being flushed until its watermark moves, so the background flusher
    /// asks again after each flush.
    fn over_threshold(&self, ring: u64) -> bool {
        self.tail - self.head >= ring / 4
            || self.pending.len() >= MAX_PENDING
            || self.pending_bytes >= ring * MAX_PENDING_IMAGES_RINGS
    }

    fn push_pending(&mut self, p: Arc<Pending>) {
        self.pending_bytes += p.image_bytes();
        self.pending.push_back(p);
    }
}

/// A ring in place: its storage, and the database identity its header names and its
/// records' checksums are keyed by.
#[derive(Debug)]
struct Placed {
    region: Arc<dyn Region>,
    id: u64,
    /// Bytes kept free after every record (`Region::write_granule` less one): a store
    /// may zero the rest of its last unit, which must not hold a live record.
    slack: u64,
}

impl Placed {
    fn new(region: Arc<dyn Region>, id: u64) -> Placed {
        let slack = region.write_granule().saturating_sub(1) as u64;
        Placed { region, id, slack }
    }
}

/// Everything the committer and the flusher thread share.
#[derive(Debug)]
struct Core {
    ctx: JournalCtx,
    inner: Wal,
    /// The ring's storage and identity: set at open if a ring exists or the home is not
    /// lazy, else by the first commit (`Core::ensure_ring`, under the state lock).
    placed: OnceLock<Placed>,
    region_path: PathBuf,
    ring: u64,
    state: Mutex<State>,
    /// Wakes the background flusher.
    wake: Condvar,
    /// One flush at a time; held across the WAL commits and the sync.
    flushing: Mutex<()>,
    /// pgno → (seq, image) of pages committed but not yet flushed.
    overlay: RwLock<HashMap<Pgno, (u64, PageRef)>>,
    mode: NvlogFlush,
    home: RingHome,
    /// A read-only copy's view of the ring file as other processes write it, for
    /// reading what they append (`Appends`): opened through `Vfs::read_through`, since
    /// the copy's own view is a private copy of what it read at open.
    appended: OnceLock<Arc<dyn Region>>,
}

/// The `nvlog` commit protocol.
#[derive(Debug)]
pub(crate) struct NvlogJournal {
    core: Arc<Core>,
    flusher: Mutex<Option<JoinHandle<()>>>,
    /// The `vfs::fork` generation it was opened in: a child of `fork()` has no flusher
    /// thread to stop (module `vfs::fork`).
    fork_gen: u64,
}

fn io_err<'p>(what: &'static str, path: &'p Path) -> impl FnOnce(io::Error) -> Error + 'p {
    Error::io(what, path)
}

/// The decoded region header.
struct RegionHeader {
    id: u64,
    ring: u64,
    page_size: u32,
}

fn encode_header(h: &RegionHeader) -> [u8; HDR_LEN] {
    let mut b = [0u8; HDR_LEN];
    b[0..8].copy_from_slice(&REGION_MAGIC);
    b[8..12].copy_from_slice(&REGION_VERSION.to_le_bytes());
    b[12..16].copy_from_slice(&h.page_size.to_le_bytes());
    b[16..24].copy_from_slice(&h.id.to_le_bytes());
    b[24..32].copy_from_slice(&h.ring.to_le_bytes());
    let crc = crc32c::crc32c(&b[..32]);
    b[32..36].copy_from_slice(&crc.to_le_bytes());
    b
}

fn decode_header(b: &[u8]) -> Option<RegionHeader> {
    if b.len() < HDR_LEN || b[0..8] != REGION_MAGIC || get_u32(b, 8) != REGION_VERSION {
        return None;
    }
    if crc32c::crc32c(&b[..32]) != get_u32(b, 32) {
        return None;
    }
    Some(RegionHeader {
        page_size: get_u32(b, 12),
        id: get_u64(b, 16),
        ring: get_u64(b, 24),
    })
}

/// A watermark slot: (watermark seq, ring head, generation).
fn encode_slot(watermark: u64, head: u64, gen: u64) -> [u8; SLOT_LEN] {
    let mut b = [0u8; SLOT_LEN];
    b[0..8].copy_from_slice(&watermark.to_le_bytes());
    b[8..16].copy_from_slice(&head.to_le_bytes());
    b[16..24].copy_from_slice(&gen.to_le_bytes());
    let crc = crc32c::crc32c(&b[..24]);
    b[24..28].copy_from_slice(&crc.to_le_bytes());
    b
}

fn decode_slot(b: &[u8]) -> Option<(u64, u64, u64)> {
    (crc32c::crc32c(&b[..24]) == get_u32(b, 24) && get_u64(b, 16) != 0)
        .then(|| (get_u64(b, 0), get_u64(b, 8), get_u64(b, 16)))
}

/// `encode_after` with nothing reserved: the payload alone.
#[cfg(test)]
fn encode_payload(
    batch: &CommitBatch<'_>,
    base_of: &mut dyn FnMut(Pgno) -> Result<Option<PageRef>>,
) -> Result<Vec<u8>> {
    encode_after(batch, base_of, 0, usize::MAX).map(|r| r.expect("no limit"))
}

/// The redo payload of a commit, after `reserve` zero bytes (where `commit` puts the
/// record header, so the record is built in one buffer): `old_page_count u32 |
/// new_page_count u32 | pages u32`, then per page `pgno u32 | runs u32` and per run
/// `offset u32 | len u32 | bytes`.
///
/// None as soon as the record would pass `limit` bytes: a commit too large for the ring
/// goes straight to the WAL (`Core::commit_direct`), and a bulk load's record of many
/// megabytes is not built only to be dropped.
fn encode_after(
    batch: &CommitBatch<'_>,
    base_of: &mut dyn FnMut(Pgno) -> Result<Option<PageRef>>,
    reserve: usize,
    limit: usize,
) -> Result<Option<Vec<u8>>> {
    // Room for a typical record at once (a few runs per page), so that building it does
    // not grow the buffer step by step.
    let mut out = Vec::with_capacity(reserve + 12 + batch.pages.len() * 512);
    out.resize(reserve, 0);
    out.extend_from_slice(&batch.old_page_count.to_le_bytes());
    out.extend_from_slice(&batch.new_page_count.to_le_bytes());
    out.extend_from_slice(&(batch.pages.len() as u32).to_le_bytes());
    for (pgno, new) in batch.pages {
        let base = base_of(*pgno)?;
        let old: &[u8] = match &base {
            Some(b) if b.len() == new.len() => b,
            Some(b) => {
                return Err(Error::InvalidArgument(format!(
                    "nvlog: base of page {pgno} has {} bytes, its new image {}",
                    b.len(),
                    new.len()
                )))
            }
            None => &ZEROS[..new.len()],
        };
        out.extend_from_slice(&pgno.to_le_bytes());
        let count_at = out.len();
        out.extend_from_slice(&0u32.to_le_bytes());
        let mut runs = 0u32;
        let mut from = 0;
        while let Some(start) = next_diff(old, new, from) {
            let end = run_end(old, new, start);
            out.extend_from_slice(&(start as u32).to_le_bytes());
            out.extend_from_slice(&((end - start) as u32).to_le_bytes());
            out.extend_from_slice(&new[start..end]);
            runs += 1;
            from = end;
        }
        out[count_at..count_at + 4].copy_from_slice(&runs.to_le_bytes());
        if out.len() > limit {
            return Ok(None);
        }
    }
    Ok(Some(out))
}

/// A copy of page `pgno`'s image with its trailer stamped: what goes to the file
/// (commits hand their pages unstamped, `Journal::stamps_trailers`). A copy, because the
/// image is shared with the overlay, the pager's cache and readers.
fn stamped(pgno: Pgno, img: &PageRef) -> PageRef {
    let mut v = img.to_vec();
    stamp_crc(&mut v, pgno);
    PageRef::from(v)
}

fn stamped_all(pages: &[(Pgno, PageRef)]) -> Vec<(Pgno, PageRef)> {
    pages
        .iter()
        .map(|(p, img)| (*p, stamped(*p, img)))
        .collect()
}

/// Pages past the file's end a flush or direct commit writes in one call at most
/// (`Core::place`): 256 KiB at 4 KiB pages.
const DIRECT_RUN: usize = 64;

/// The base of a page that had none (new, or page 0): the largest page of zeros.
static ZEROS: [u8; 65536] = [0; 65536];

/// The first index at or after `from` where `old` and `new` (equal lengths) differ.
/// Skips equal 256-byte blocks (one vectorized `bcmp` each), then 32 bytes at a time (four
/// words XORed): a commit diffs every page it wrote against its committed image, and most
/// of each page is unchanged. The first differing byte of a word is its XOR's lowest set
/// byte (little-endian), so no byte loop follows the word that differs.
fn next_diff(old: &[u8], new: &[u8], mut from: usize) -> Option<usize> {
    const BLOCK: usize = 256;
    debug_assert_eq!(old.len(), new.len());
    while from + BLOCK <= new.len() && old[from..from + BLOCK] == new[from..from + BLOCK] {
        from += BLOCK;
    }
    let first = |at: usize, x: u64| at + x.trailing_zeros() as usize / 8;
    while from + 32 <= new.len() {
        let (o, n) = (&old[from..from + 32], &new[from..from + 32]);
        let x = [
            le_word(o, 0) ^ le_word(n, 0),
            le_word(o, 8) ^ le_word(n, 8),
            le_word(o, 16) ^ le_word(n, 16),
            le_word(o, 24) ^ le_word(n, 24),
        ];
        if x[0] | x[1] | x[2] | x[3] != 0 {
            let k = x.iter().position(|&w| w != 0).expect("one word differs");
            return Some(first(from + 8 * k, x[k]));
        }
        from += 32;
    }
    while from + 8 <= new.len() {
        let x = le_word(old, from) ^ le_word(new, from);
        if x != 0 {
            return Some(first(from, x));
        }
        from += 8;
    }
    (from..new.len()).find(|&i| old[i] != new[i])
}

/// The end of the run that starts with the difference at `start`: it extends while the
/// next difference is within `RUN_GAP` bytes. Eight bytes at a time where the whole word
/// is within the gap (the last differing byte of a word is found from the XOR's high
/// bits, so the run ends exactly where the byte scan's would), bytes at the edge.
fn run_end(old: &[u8], new: &[u8], start: usize) -> usize {
    let mut end = start + 1;
    let mut i = end;
    dense_run(old, new, &mut i, &mut end);
    loop {
        let limit = new.len().min(end + RUN_GAP);
        if i >= limit {
            return end;
        }
        if i + 8 <= limit {
            let x = le_word(old, i) ^ le_word(new, i);
            i += 8;
            if x != 0 {
                // Little-endian: byte k of the word is bits 8k..8k+8.
                end = i - 8 + (63 - x.leading_zeros() as usize) / 8 + 1;
                dense_run(old, new, &mut i, &mut end);
            }
        } else {
            if old[i] != new[i] {
                end = i + 1;
            }
            i += 1;
        }
    }
}

#[inline(always)]
fn le_word(b: &[u8], i: usize) -> u64 {
    u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"))
}

/// `run_end`'s dense stretches (a shifted pointer array, moved cells), 32 bytes at a
/// time: when each of four words differs somewhere, no two differences in them are
/// RUN_GAP apart, and the first is within RUN_GAP of `end` while `i <= end + 8`, so the
/// run goes on to the last differing byte of the fourth word. Tried at the run's start
/// and after each differing word found byte-exactly.
#[inline(always)]
fn dense_run(old: &[u8], new: &[u8], i: &mut usize, end: &mut usize) {
    while *i <= *end + 8 && *i + 32 <= new.len() {
        let (o, n) = (&old[*i..*i + 32], &new[*i..*i + 32]);
        let last = le_word(o, 24) ^ le_word(n, 24);
        if le_word(o, 0) == le_word(n, 0)
            || le_word(o, 8) == le_word(n, 8)
            || le_word(o, 16) == le_word(n, 16)
            || last == 0
        {
            return;
        }
        *end = *i + 24 + (63 - last.leading_zeros() as usize) / 8 + 1;
        *i += 32;
    }
}

/// The byte runs of one page in a record: (offset in the page, new bytes).
type Runs<'a> = Vec<(usize, &'a [u8])>;

/// A decoded record: page counts and, per page, its runs.
struct Redo<'a> {
    old_page_count: u32,
    new_page_count: u32,
    pages: Vec<(Pgno, Runs<'a>)>,
}

fn decode_payload(p: &[u8], page_size: usize) -> std::result::Result<Redo<'_>, String> {
    let short = || "record payload is truncated".to_string();
    let u32_at = |o: usize| -> std::result::Result<u32, String> {
        p.get(o..o + 4).map(|_| get_u32(p, o)).ok_or_else(short)
    };
    let old_page_count = u32_at(0)?;
    let new_page_count = u32_at(4)?;
    let n = u32_at(8)? as usize;
    let mut at = 12;
    let mut pages = Vec::new();
    for _ in 0..n {
        let pgno = u32_at(at)?;
        let runs = u32_at(at + 4)? as usize;
        at += 8;
        if pgno >= new_page_count {
            return Err(format!(
                "record page {pgno} is past its page count {new_page_count}"
            ));
        }
        let mut v = Vec::new();
        for _ in 0..runs {
            let off = u32_at(at)? as usize;
            let len = u32_at(at + 4)? as usize;
            at += 8;
            if off.checked_add(len).is_none_or(|e| e > page_size) {
                return Err(format!("record run {off}+{len} past the page size"));
            }
            let bytes = p.get(at..at + len).ok_or_else(short)?;
            at += len;
            v.push((off, bytes));
        }
        pages.push((pgno, v));
    }
    if at != p.len() {
        return Err("record payload has trailing bytes".into());
    }
    Ok(Redo {
        old_page_count,
        new_page_count,
        pages,
    })
}

impl Core {
    fn lock_state(&self) -> Result<MutexGuard<'_, State>> {
        let mut s = self
            .state
            .lock()
            .map_err(|_| Error::Poisoned("a thread panicked inside the nvlog journal".into()))?;
        if let Some(e) = s.failure.take() {
            return Err(e);
        }
        if let Some(why) = &s.failed {
            return Err(Error::Poisoned(format!("an nvlog flush failed: {why}")));
        }
        if s.closed {
            return Err(Error::InvalidArgument("the nvlog journal is closed".into()));
        }
        Ok(s)
    }

    fn region_err(&self) -> impl FnOnce(io::Error) -> Error + '_ {
        io_err("region", &self.region_path)
    }

    fn ring_write(&self, pos: u64, data: &[u8]) -> Result<()> {
        let region = &self
            .placed
            .get()
            .ok_or_else(|| {
                Error::InvalidArgument("nvlog: a record written before its ring exists".into())
            })?
            .region;
        let mut done = 0;
        for (off, n) in ring_pieces(self.ring, pos, data.len()) {
            if n > 0 {
                region
                    .write(off, &data[done..done + n])
                    .map_err(self.region_err())?;
                region.persist(off, n).map_err(self.region_err())?;
                done += n;
            }
        }
        Ok(())
    }

    /// Write the older watermark slot with a new generation, and persist it. Without a
    /// ring (none created yet) there is nothing to vouch for: the state alone moves, and
    /// `ensure_ring` writes the slot before the first record.
    fn write_watermark(&self, s: &mut State, watermark: u64, head: u64) -> Result<()> {
        let gen = s.gen + 1;
        if let Some(p) = self.placed.get() {
            let at = SLOT_AT[(gen % 2) as usize];
            p.region
                .write(at, &encode_slot(watermark, head, gen))
                .map_err(self.region_err())?;
            p.region.persist(at, SLOT_LEN).map_err(self.region_err())?;
        }
        s.gen = gen;
        s.watermark = watermark;
        Ok(())
    }

    /// The ring, created if this session has none yet (module docs: a ring file is
    /// created by the first commit that needs one): identity, zero-filled ring, header,
    /// then a watermark slot at the last commit, all persisted before it is returned.
    fn ensure_ring(&self, s: &mut State) -> Result<&Placed> {
        if let Some(p) = self.placed.get() {
            return Ok(p);
        }
        // Checked in release builds: a commit pending without a ring would be in memory
        // only, and the watermark written below would declare it in the file.
        if !s.pending.is_empty() || s.tail != s.head {
            return Err(Error::InvalidArgument(format!(
                "nvlog: {} commits pending without a ring",
                s.pending.len()
            )));
        }
        let id = identity(&self.ctx)?;
        let region = self
            .home
            .open(
                &self.ctx,
                &self.region_path,
                Some(RING_AT + self.ring as usize),
            )
            .map_err(io_err("create region", &self.region_path))?;
        if (region.len() - RING_AT) as u64 != self.ring {
            return Err(Error::CorruptJournal {
                path: self.region_path.clone(),
                reason: format!(
                    "created with {} ring bytes, asked for {}",
                    region.len() - RING_AT,
                    self.ring
                ),
            });
        }
        init_region(&*region, id, self.ring, self.ctx.db.page_size, s.tail)
            .map_err(self.region_err())?;
        // Only this thread sets it: the caller holds the state lock.
        let _ = self.placed.set(Placed::new(region, id));
        let (last, tail) = (s.last_seq, s.tail);
        if self.ctx.config.mutant() != Mutant::RingUnmarked {
            self.write_watermark(s, last, tail)?;
        }
        self.placed.get().ok_or_else(|| {
            Error::InvalidArgument("nvlog: the ring was not kept once created".into())
        })
    }

    /// The whole file, for a commit that writes more than its record into the ring
    /// where its thread may hold only an append turn (`Gate::whole`: other processes'
    /// readers leave first, and open the file again after it). `Error::Busy` if they did
    /// not leave in time: nothing of the commit is written yet. Nothing to take where no
    /// other process can have the file, or the ring is not one they append to.
    fn whole(&self) -> Result<Option<Box<dyn Send>>> {
        match &self.ctx.gate {
            Some(g) if self.home == RingHome::File => g.whole().map(Some),
            _ => Ok(None),
        }
    }

    /// Record a failed flush: every later call is refused (`failed`); `keep` hands the
    /// error itself to the next caller (a background flush has no caller to return it
    /// to). One lock, so no caller sees the refusal without the error.
    fn fail(&self, why: String, keep: Option<Error>) {
        if let Ok(mut s) = self.state.lock() {
            s.failed.get_or_insert(why);
            if s.failure.is_none() {
                s.failure = keep;
            }
        }
    }

    /// Move every pending commit into the file (module docs: flush). A flush that found
    /// no room (`Flush::Retry`) changed nothing that counts and is tried again later; any
    /// other failure ends the session.
    fn flush(&self) -> Result<()> {
        match self.flush_pending() {
            Ok(()) => Ok(()),
            Err(Flush::Retry(e)) => Err(crate::error::clean_failure(e)),
            Err(Flush::Fatal(e)) => {
                self.fail(e.to_string(), None);
                Err(e)
            }
        }
    }

    fn flush_pending(&self) -> std::result::Result<(), Flush> {
        let _one = self.flushing.lock().map_err(|_| {
            Flush::Fatal(Error::Poisoned(
                "a thread panicked while flushing nvlog".into(),
            ))
        })?;
        let batch: Vec<Arc<Pending>> = self
            .lock_state()
            .map_err(Flush::Fatal)?
            .pending
            .iter()
            .cloned()
            .collect();
        let Some(last) = batch.last().cloned() else {
            return Ok(());
        };
        // Up to the WAL transaction's write nothing is committed or synced: a full file
        // system leaves the log as it was (its writer state moves only after a whole
        // write) and the pages written in place past the committed end belong to no
        // committed state, so the batch stays pending and a later flush writes it again.
        // From the sync on, a failure may have lost written pages (a failed fdatasync
        // forgets them): fatal.
        self.write_batch(&batch, &last).map_err(|e| {
            if e.is_no_space() {
                Flush::Retry(e)
            } else {
                Flush::Fatal(e)
            }
        })?;
        self.settle_batch(&last).map_err(Flush::Fatal)
    }

    /// The writes of a flush, up to and including the WAL transaction (see
    /// `flush_pending`).
    fn write_batch(&self, batch: &[Arc<Pending>], last: &Pending) -> Result<()> {
        // One WAL transaction for the whole batch: the newest image of every page a
        // commit of it wrote (a page left past the final page count was freed by a later
        // commit of the batch and is not part of the file at its end).
        let mut newest: std::collections::BTreeMap<Pgno, PageRef> = Default::default();
        for p in batch {
            for (pgno, img) in &p.pages {
                newest.insert(*pgno, img.clone());
            }
        }
        // Commits hand their pages unstamped (`stamps_trailers`): the file's copies are
        // stamped here, once per page per flush.
        if self.ctx.config.mutant() != Mutant::FlushUnstamped {
            for (pgno, img) in newest.iter_mut() {
                *img = stamped(*pgno, img);
            }
        }
        let first = batch.first().expect("a flush has a commit");
        if let Some(n) = self.lock_state()?.flushed_pages {
            // Checked in release builds: the pages written in place are chosen by this
            // count, and a count above the file's would overwrite committed pages.
            assert_eq!(
                n, first.old_page_count,
                "nvlog flush of {}..={} starts from page count {} but the last flush left {n}",
                first.seq, last.seq, first.old_page_count
            );
        }
        let logged = self.place(newest, (first.old_page_count, last.new_page_count), false)?;
        let pages = logged;
        let one = CommitBatch {
            tid: last.seq,
            pages: &pages,
            originals: &[],
            old_page_count: first.old_page_count,
            new_page_count: last.new_page_count,
            restamp: &[],
            discard: &[],
        };
        if self.ctx.config.mutant() == Mutant::BatchPerCommitTids {
            // The bug: the batch named by its last commit alone.
            self.inner.commit(&one)
        } else {
            self.inner.commit_range(&one, first.seq)
        }
    }

    /// The rest of a flush once its WAL transaction is written: sync, watermark, and
    /// the flushed commits leave `pending` and the overlay.
    fn settle_batch(&self, last: &Pending) -> Result<()> {
        let mut s = self.lock_state()?;
        if self.ctx.config.mutant() == Mutant::WatermarkBeforeSync {
            self.write_watermark(&mut s, last.seq, last.end)?;
            drop(s);
            self.inner.sync_log()?;
            s = self.lock_state()?;
        } else {
            drop(s);
            self.inner.sync_log()?;
            s = self.lock_state()?;
            self.write_watermark(&mut s, last.seq, last.end)?;
        }
        s.head = last.end;
        s.flushed_pages = Some(last.new_page_count);
        while let Some(p) = s.pending.pop_front() {
            if p.seq > last.seq {
                s.pending.push_front(p);
                break;
            }
            s.pending_bytes -= p.image_bytes();
        }
        drop(s);
        let mut ov = self.overlay.write().unwrap_or_else(|e| e.into_inner());
        ov.retain(|_, (seq, _)| *seq > last.seq);
        Ok(())
    }

    /// Commit a transaction whose record does not fit the ring: straight into the WAL,
    /// synced, after the pending ones (module docs).
    /// Of `pages` (ascending; stamped unless `stamp`, which stamps what goes to the file
    /// here) for a WAL transaction from page count `old` to `new`, write those past the
    /// file's committed end (`old`: the page count after the previous flush, which the
    /// WAL holds durably) that the log holds no frame of in place, synced; return the
    /// rest, which the WAL transaction logs. The pages written in place are part of no
    /// committed state until that transaction links them in, so they are written once
    /// (module docs). A page the log holds (the file shrank below it and grew again in
    /// this generation) goes through the log, or the next checkpoint would copy its old
    /// frame over it. Pages past `new` (freed by a later commit of a batch) are dropped.
    ///
    /// Consecutive pages go in one write each (up to [`DIRECT_RUN`] pages). A few pages
    /// grow the file as commits do, by zero-filled chunks (`DbFile::ensure_capacity`: one
    /// allocation per chunk, not one per flush); a run's worth or more (a bulk load, a
    /// backup) is written past the end as it is, since zeros would only be written over,
    /// and the fdatasync after the pages makes them and the length durable together.
    fn place(
        &self,
        pages: impl IntoIterator<Item = (Pgno, PageRef)>,
        (old, new): (u32, u32),
        stamp: bool,
    ) -> Result<Vec<(Pgno, PageRef)>> {
        let (mut direct, mut logged): (Vec<_>, Vec<_>) = pages
            .into_iter()
            .filter(|(pgno, _)| *pgno < new)
            .partition(|(pgno, _)| {
                self.ctx.config.nvlog_direct_pages && *pgno >= old && !self.inner.holds(*pgno)
            });
        if logged.is_empty() {
            // The WAL transaction needs a page to carry its commit frame.
            logged.extend(direct.pop());
        }
        if stamp {
            for (pgno, img) in logged.iter_mut() {
                *img = stamped(*pgno, img);
            }
        }
        if direct.is_empty() {
            return Ok(logged);
        }
        if direct.len() < DIRECT_RUN {
            // Grown in chunks only if asked (`Config::chunk_pages_for`: 0 by default).
            self.ctx.db.ensure_capacity(new)?;
        }
        let ps = self.ctx.db.page_size;
        let mut run: Vec<u8> = Vec::with_capacity(DIRECT_RUN * ps);
        let mut first = direct[0].0;
        for (k, (pgno, img)) in direct.iter().enumerate() {
            let at = run.len();
            run.extend_from_slice(img);
            if stamp {
                stamp_crc(&mut run[at..], *pgno);
            }
            let next = direct.get(k + 1).map(|(p, _)| *p);
            if next != Some(pgno + 1) || run.len() >= DIRECT_RUN * ps {
                self.ctx.db.write_run(first, &run)?;
                run.clear();
                first = next.unwrap_or(0);
            }
        }
        if self.ctx.config.mutant() != Mutant::DirectPagesUnsynced {
            self.ctx.db.sync()?;
        }
        Ok(logged)
    }

    fn commit_direct(&self, batch: &CommitBatch<'_>) -> Result<()> {
        self.flush()?;
        let _one = self
            .flushing
            .lock()
            .map_err(|_| Error::Poisoned("a thread panicked while flushing nvlog".into()))?;
        let r: Result<()> = (|| {
            // As a flush writes its batch: new pages in place, the rest through the log
            // (a bulk load, a VACUUM or a backup into a fresh file writes its pages once).
            let pages = self.place(
                batch.pages.iter().cloned(),
                (batch.old_page_count, batch.new_page_count),
                true,
            )?;
            let batch = &CommitBatch {
                pages: &pages,
                ..*batch
            };
            self.inner.commit(batch)?;
            self.inner.sync_log()?;
            let mut s = self.lock_state()?;
            let tail = s.tail;
            self.write_watermark(&mut s, batch.tid, tail)?;
            s.head = tail;
            s.last_seq = batch.tid;
            s.flushed_pages = Some(batch.new_page_count);
            Ok(())
        })();
        if let Err(e) = &r {
            self.fail(e.to_string(), None);
        }
        r
    }
}

impl NvlogJournal {
    /// Open: WAL recovery of the file, then replay of the region's records past it
    /// (module docs), then a flush of what was replayed.
    pub(crate) fn open(
        ctx: JournalCtx,
        home: RingHome,
    ) -> Result<(NvlogJournal, RecoveryReport, u64)> {
        let ps = ctx.db.page_size;
        if home.lazy() && ctx.config.direct_writes == super::DirectWrites::On {
            // Refused at open, not by the first commit, which creates the ring: the
            // database's file system is the ring's.
            super::util::open_direct(&*ctx.vfs, &ctx.db_path, ps, super::DirectWrites::On)?;
        }
        let ring_cfg = ctx.config.nvlog_ring_bytes.unwrap_or(DEFAULT_RING);
        let mut inner_cfg = ctx.config.clone();
        inner_cfg.wal_sync = WalSync::Normal;
        let (inner, mut report) = Wal::open(JournalCtx {
            config: inner_cfg,
            ..ctx.clone()
        })?;
        let file_fcc = inner.fcc();
        let rpath = home.path(&ctx);
        let mut fcc = file_fcc;
        let mut tail = 0u64;
        let mut gen = 0u64;
        // Commits rebuilt from the region that found no room in the WAL (see below), and
        // the watermark slot they stay behind.
        let mut unflushed: Vec<Rebuilt> = Vec::new();
        let (mut kept_head, mut kept_watermark) = (0u64, 0u64);
        let mut region = match home.open(&ctx, &rpath, None) {
            Ok(r) => Some(r),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(io_err("open region", &rpath)(e)),
        };
        // Read (or drawn and written) before any region is created with it, and needed
        // now to tell an existing region's records ours; a lazy home without a ring
        // leaves it to the first commit (`Core::ensure_ring`).
        let id = if region.is_some() || !home.lazy() {
            Some(identity(&ctx)?)
        } else {
            None
        };
        // The default region's name is derived from this database's path, so anything
        // there was left by a database at this path; a configured one may be shared by
        // mistake, and is never replaced.
        let default_path = home.derived_path(&ctx);
        // Attached beside other processes (`JournalConfig::attach`): the ring stays as
        // they use it, and its records are replayed into memory only.
        let attach = ctx.config.attach;
        if let (Some(r), Some(id)) = (region.take(), id) {
            let mut hb = [0u8; RING_AT];
            let valid = match (r.len() >= RING_AT).then(|| r.read(0, &mut hb)) {
                // Attached, a failed read is that, not a blank ring to leave to the whole
                // file (`refuse`).
                Some(Err(e)) if attach => return Err(io_err("region", &rpath)(e)),
                Some(read) => read.is_ok(),
                None => false,
            };
            match decode_header(&hb).filter(|_| valid) {
                // Left by an earlier database at this path (deleted with its identity
                // file): this one has never committed, so nothing of it is there.
                // Attached, what only the whole file may repair (a foreign or blank ring)
                // is `Busy`, and the caller takes the whole file.
                Some(h) if h.id != id && attach => return Err(Error::Busy),
                Some(h) if h.id != id && default_path && file_fcc == 0 => {
                    drop(r);
                    home.delete(&ctx, &rpath)
                        .map_err(io_err("delete region", &rpath))?;
                    report.push(RecoveryAction::ReplaceRegion);
                }
                Some(h) if h.id != id => {
                    return Err(Error::ForeignRegion {
                        region: rpath,
                        reason: format!(
                            "it names database id {:016x}, {} has {:016x}{}",
                            h.id,
                            side_path_of(&ctx).display(),
                            id,
                            if default_path {
                                " (the identity file was replaced after this database \
                                 committed; the region's records cannot be told to be its)"
                            } else {
                                " (a configured region: it may belong to another database)"
                            }
                        ),
                    })
                }
                Some(h) => {
                    if h.page_size as usize != ps || h.ring != (r.len() - RING_AT) as u64 {
                        return Err(Error::CorruptJournal {
                            path: rpath,
                            reason: format!(
                                "region header says page size {} and ring {} bytes; the \
                                 database has page size {ps}, the region {} ring bytes",
                                h.page_size,
                                h.ring,
                                r.len() - RING_AT
                            ),
                        });
                    }
                    let slot = SLOT_AT
                        .iter()
                        .filter_map(|&at| decode_slot(&hb[at..at + SLOT_LEN]))
                        .max_by_key(|s| s.2);
                    if let Some((watermark, head, g)) = slot {
                        if watermark > file_fcc {
                            return Err(Error::CorruptJournal {
                                path: rpath,
                                reason: format!(
                                    "the region's watermark says commits up to {watermark} \
                                     are in the database, but it holds only up to {file_fcc}"
                                ),
                            });
                        }
                        let (last, end, rebuilt) = replay(
                            &ctx, home, &inner, &*r, id, h.ring, watermark, head, file_fcc,
                        )?;
                        if !rebuilt.is_empty() {
                            report.push(RecoveryAction::ReplayRegion {
                                commits: rebuilt.len() as u64,
                            });
                        }
                        // Into the WAL, in order. Without room for one, it and the rest
                        // stay in the region (which keeps vouching for them: the
                        // watermark does not move) and become this session's pending
                        // commits, read from the overlay and flushed once there is room.
                        for c in rebuilt {
                            if !unflushed.is_empty() || attach {
                                unflushed.push(c);
                                continue;
                            }
                            match inner.commit(&CommitBatch {
                                tid: c.seq,
                                // Rebuilt on stamped file images by runs that may leave
                                // their trailers stale (`stamps_trailers`).
                                pages: &stamped_all(&c.pages),
                                originals: &[],
                                old_page_count: c.old_page_count,
                                new_page_count: c.new_page_count,
                                restamp: &[],
                                discard: &[],
                            }) {
                                Ok(()) => {}
                                Err(e) if e.is_no_space() => unflushed.push(c),
                                Err(e) => return Err(e),
                            }
                        }
                        fcc = last.max(file_fcc);
                        tail = end;
                        gen = g;
                        kept_head = head;
                        kept_watermark = watermark;
                    }
                    if h.ring == ring_cfg as u64 || !unflushed.is_empty() || attach {
                        region = Some(r);
                    } else {
                        // Replayed (and synced below): start a ring of the configured size.
                        drop(r);
                        inner.sync_log()?;
                        home.delete(&ctx, &rpath)
                            .map_err(io_err("delete region", &rpath))?;
                        tail = 0;
                        gen = 0;
                    }
                }
                // Never initialized (a cut before its header was persisted): no record
                // can be in it, and it is all zeros past the header, which is written
                // first. Too small to hold a header and a ring (empty: a creation cut
                // before it was sized, by a build that did not create atomically): no
                // record either; recreated where that cannot destroy anyone's data (an
                // empty file, or the default path). Anything else is not an nvlog
                // region: refused, not overwritten.
                None if attach => return Err(Error::Busy),
                None if r.len() < RING_AT + MIN_RING as usize && (r.len() == 0 || default_path) => {
                    drop(r);
                    home.delete(&ctx, &rpath)
                        .map_err(io_err("delete region", &rpath))?;
                    report.push(RecoveryAction::ReplaceRegion);
                }
                None => {
                    let mut rest = vec![0u8; r.len().saturating_sub(HDR_LEN)];
                    let ours = r.len() >= RING_AT + MIN_RING as usize
                        && r.read(HDR_LEN, &mut rest).is_ok()
                        && rest.iter().all(|&b| b == 0);
                    if !ours {
                        return Err(Error::ForeignRegion {
                            region: rpath,
                            reason: format!(
                                "it is not an nvlog region ({} bytes, no valid header, \
                                 not blank)",
                                r.len()
                            ),
                        });
                    }
                    region = Some(r);
                }
            }
        }
        inner.sync_log()?;
        if report.region_records > 0 && !attach {
            // As WAL recovery does: the file must hold every page its header counts
            // before the pager checks its length, and the next session starts with an
            // empty log — when there is room for it (else the log is read in place, as
            // the WAL's own open does).
            match inner.checkpoint() {
                Err(e) if e.is_no_space() => report.push(RecoveryAction::DeferCheckpoint),
                r => r?,
            }
        }
        if !unflushed.is_empty() && !attach {
            report.push(RecoveryAction::DeferCheckpoint);
        }
        let region = match region {
            Some(r) => Some(r),
            None if home.lazy() => None,
            None => Some(
                home.open(&ctx, &rpath, Some(RING_AT + ring_cfg as usize))
                    .map_err(io_err("create region", &rpath))?,
            ),
        };
        let placed = OnceLock::new();
        let ring = match (region, id) {
            (Some(region), Some(id)) => {
                let ring = (region.len() - RING_AT) as u64;
                init_region(&*region, id, ring, ps, tail).map_err(io_err("region", &rpath))?;
                let _ = placed.set(Placed::new(region, id));
                ring
            }
            // Created by the first commit, at the configured size.
            _ => ring_cfg as u64,
        };
        // Everything up to `durable` is in the file (synced above); the unflushed commits
        // follow it in the ring, from `head`.
        let (durable, head) = match unflushed.first() {
            Some(c) => (c.seq - 1, c.start),
            None => (fcc, tail),
        };
        debug_assert!(unflushed.is_empty() || durable >= kept_watermark.max(file_fcc));
        debug_assert!(unflushed.is_empty() || head >= kept_head);
        let mut overlay = HashMap::new();
        let mut pending = VecDeque::new();
        let mut pending_bytes = 0;
        let now = Instant::now();
        for c in unflushed {
            for (pgno, img) in &c.pages {
                overlay.insert(*pgno, (c.seq, img.clone()));
            }
            overlay.retain(|p, _| *p < c.new_page_count);
            let p = Arc::new(Pending {
                seq: c.seq,
                end: c.end,
                at: now,
                pages: c.pages,
                old_page_count: c.old_page_count,
                new_page_count: c.new_page_count,
            });
            pending_bytes += p.image_bytes();
            pending.push_back(p);
        }
        let core = Arc::new(Core {
            inner,
            placed,
            region_path: rpath,
            ring,
            state: Mutex::new(State {
                head,
                tail,
                last_seq: fcc,
                gen,
                watermark: durable,
                pending,
                pending_bytes,
                failed: None,
                failure: None,
                closed: false,
                stop: false,
                paused: 0,
                flushed_pages: None,
            }),
            wake: Condvar::new(),
            flushing: Mutex::new(()),
            overlay: RwLock::new(overlay),
            mode: ctx.config.nvlog_flush,
            home,
            appended: OnceLock::new(),
            ctx,
        });
        if !attach {
            // Everything up to `durable` is durable in the file now: say so, so the
            // records just replayed into it are never replayed again.
            let mut s = core.lock_state()?;
            core.write_watermark(&mut s, durable, head)?;
        }
        // A lazy ring's flusher starts with it (`NvlogJournal::start_ring`).
        let flusher = match core.placed.get() {
            Some(_) => spawn_flusher(&core)?,
            None => None,
        };
        Ok((
            NvlogJournal {
                core,
                flusher: Mutex::new(flusher),
                fork_gen: crate::vfs::fork::generation(),
            },
            report,
            fcc,
        ))
    }

    /// The ring, created (first commit of a session that has none) with its flusher.
    fn start_ring(&self) -> Result<&Placed> {
        let placed = {
            let mut s = self.core.lock_state()?;
            self.core.ensure_ring(&mut s)?
        };
        let mut f = self.flusher.lock().unwrap_or_else(|e| e.into_inner());
        if f.is_none() {
            *f = spawn_flusher(&self.core)?;
        }
        Ok(placed)
    }

    fn stop_flusher(&self) {
        if let Ok(mut s) = self.core.state.lock() {
            s.stop = true;
        }
        self.core.wake.notify_all();
        let h = self
            .flusher
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(h) = h {
            let _ = h.join();
        }
    }
}

/// The background flusher: flush when a fill threshold is reached (`over_threshold`) or
/// when the oldest waiting commit has waited `FLUSH_DELAY`, and sleep while none waits.
/// The deadline is the oldest commit's, not a free-running tick, so a burst's first
/// batch is not cut short by a tick that happened to fall just after it began, and an
/// idle database wakes nobody. A failure is recorded in the state (`Core::fail`), which
/// the next commit reports.
fn background(core: &Core) {
    let mut s = match core.state.lock() {
        Ok(s) => s,
        Err(_) => return,
    };
    loop {
        if s.stop || s.failed.is_some() || s.closed {
            return;
        }
        if s.paused > 0 {
            // `resume_flushes` wakes us.
            s = match core.wake.wait(s) {
                Ok(s) => s,
                Err(_) => return,
            };
            continue;
        }
        let due = match (s.pending.front(), core.home.flush_delay()) {
            (Some(p), Some(delay)) => Some(p.at + delay),
            // No deadline: wait for the threshold (far off, like an idle wait).
            (Some(_), None) if !s.over_threshold(core.ring) => None,
            (Some(p), None) => Some(p.at),
            (None, _) => None,
        };
        let now = Instant::now();
        let woke = match due {
            Some(due) if due <= now || s.over_threshold(core.ring) => {
                drop(s);
                // On a file other processes share, only under the write turn.
                let turn = match core.ctx.gate.as_ref().map(|g| g.try_write()) {
                    None => None,
                    Some(GateAnswer::Go(t)) => Some(t),
                    Some(GateAnswer::Never) => return,
                    Some(GateAnswer::Later) => {
                        s = match core
                            .state
                            .lock()
                            .ok()
                            .and_then(|s| core.wake.wait_timeout(s, GATE_RETRY).ok())
                        {
                            Some((s, _)) => s,
                            None => return,
                        };
                        continue;
                    }
                };
                let flushed = core.flush_pending();
                drop(turn);
                match flushed {
                    Ok(()) => core.state.lock().ok(),
                    Err(Flush::Fatal(e)) => {
                        core.fail(e.to_string(), Some(e));
                        return;
                    }
                    // No room in the file system: the commits stay in the region (where
                    // they are safe) and the flush is tried again a little later.
                    Err(Flush::Retry(_)) => core
                        .state
                        .lock()
                        .ok()
                        .and_then(|s| core.wake.wait_timeout(s, RETRY_DELAY).ok())
                        .map(|(s, _)| s),
                }
            }
            // A commit that finds nothing pending wakes us (`commit`).
            None => core.wake.wait(s).ok(),
            Some(due) => core.wake.wait_timeout(s, due - now).ok().map(|(s, _)| s),
        };
        s = match woke {
            Some(s) => s,
            None => return,
        };
    }
}

/// The background flusher's thread, in `NvlogFlush::Background`.
fn spawn_flusher(core: &Arc<Core>) -> Result<Option<JoinHandle<()>>> {
    if core.mode != NvlogFlush::Background {
        return Ok(None);
    }
    let c = core.clone();
    std::thread::Builder::new()
        .name("inpage-nvlog-flush".into())
        .spawn(move || background(&c))
        .map(Some)
        .map_err(Error::io("spawn flusher", Path::new("nvlog")))
}

/// Make a region ready for this session's records from ring position `tail`: its header
/// written if blank (a new ring), and the header at `tail` cleared.
fn init_region(region: &dyn Region, id: u64, ring: u64, ps: usize, tail: u64) -> io::Result<()> {
    let mut hb = [0u8; HDR_LEN];
    region.read(0, &mut hb)?;
    if decode_header(&hb).is_none() {
        let h = encode_header(&RegionHeader {
            id,
            ring,
            page_size: ps as u32,
        });
        region.write(0, &h)?;
        region.persist(0, HDR_LEN)?;
    }
    // The bytes where this session's first record goes may hold the record a crash
    // interrupted (replay stopped there: torn, or lost in part). The new record has the
    // same seq, so a torn store of it that happened to land only where the two agree (the
    // seq) would complete the old one: an unacknowledged commit, rolled back by this
    // recovery, would come back at the next. Clearing the old header, durably, before
    // anything is written there rules that out: a torn new header is then zeros or its
    // own, and only its own payload verifies under it.
    clear_stale_header(region, ring, tail)
}

/// Zero the record header at ring position `pos` and persist it, unless it is zero
/// already (`init_region`).
fn clear_stale_header(region: &dyn Region, ring: u64, pos: u64) -> io::Result<()> {
    for (off, n) in ring_pieces(ring, pos, REC_HDR) {
        if n == 0 {
            continue;
        }
        let mut b = [0u8; REC_HDR];
        region.read(off, &mut b[..n])?;
        if b[..n].iter().any(|&x| x != 0) {
            region.write(off, &[0u8; REC_HDR][..n])?;
            region.persist(off, n)?;
        }
    }
    Ok(())
}

/// A commit rebuilt from its record in the region (what recovery replays).
struct Rebuilt {
    seq: u64,
    /// Ring positions of its record and just past it.
    start: u64,
    end: u64,
    pages: Vec<(Pgno, PageRef)>,
    old_page_count: u32,
    new_page_count: u32,
}

/// Read the region's records past `file_fcc`, starting at `head` with seq
/// `watermark + 1`, and rebuild each commit's pages on the committed images before it
/// (the file's, through `inner`, and the commits rebuilt before it). Returns the last seq
/// seen, the ring position after it, and the commits past `file_fcc` in order.
#[allow(clippy::too_many_arguments)]
fn replay(
    ctx: &JournalCtx,
    home: RingHome,
    inner: &Wal,
    region: &dyn Region,
    id: u64,
    ring: u64,
    watermark: u64,
    head: u64,
    file_fcc: u64,
) -> Result<(u64, u64, Vec<Rebuilt>)> {
    let ps = ctx.db.page_size;
    let rpath = home.path(ctx);
    let skip_sum = ctx.config.mutant() == Mutant::ReplayPastBadChecksum;
    let read = |pos: u64, buf: &mut [u8]| -> Result<()> {
        let mut done = 0;
        for (off, n) in ring_pieces(ring, pos, buf.len()) {
            if n > 0 {
                region
                    .read(off, &mut buf[done..done + n])
                    .map_err(io_err("region", &rpath))?;
                done += n;
            }
        }
        Ok(())
    };
    let (mut pos, mut expect) = (head, watermark + 1);
    let mut rebuilt: Vec<Rebuilt> = Vec::new();
    // The newest image of each page the commits rebuilt so far wrote.
    let mut newest: HashMap<Pgno, PageRef> = HashMap::new();
    let mut page = vec![0u8; ps];
    loop {
        let used = pos - head;
        if used + REC_HDR as u64 > ring {
            break;
        }
        let mut hdr = [0u8; REC_HDR];
        read(pos, &mut hdr)?;
        let (seq, len) = (get_u64(&hdr, 0), get_u32(&hdr, 8) as u64);
        if seq != expect || used + REC_HDR as u64 + len > ring {
            break;
        }
        if ctx.config.replay_until.is_some_and(|end| seq > end) {
            // Never acknowledged, and another process writes over it (`replay_until`).
            break;
        }
        let mut payload = vec![0u8; len as usize];
        read(pos + REC_HDR as u64, &mut payload)?;
        if record_sum(id, &hdr, &payload) != get_u32(&hdr, 12) && !skip_sum {
            break;
        }
        let start = pos;
        pos += REC_HDR as u64 + len;
        expect += 1;
        if seq <= file_fcc {
            continue;
        }
        let redo = decode_payload(&payload, ps).map_err(|reason| Error::CorruptJournal {
            path: rpath.clone(),
            reason: format!("record {seq}: {reason}"),
        })?;
        let mut pages = Vec::with_capacity(redo.pages.len());
        for (pgno, runs) in &redo.pages {
            // The same bases as `commit` diffed against (page 0 whole, from zeros).
            if *pgno < redo.old_page_count && *pgno != 0 {
                match newest.get(pgno) {
                    Some(img) => page.copy_from_slice(img),
                    None => inner.read_page(*pgno, &mut page)?,
                }
            } else {
                page.fill(0);
            }
            for (off, bytes) in runs {
                page[*off..*off + bytes.len()].copy_from_slice(bytes);
            }
            pages.push((*pgno, PageRef::from(page.clone())));
        }
        for (pgno, img) in &pages {
            newest.insert(*pgno, img.clone());
        }
        newest.retain(|p, _| *p < redo.new_page_count);
        rebuilt.push(Rebuilt {
            seq,
            start,
            end: pos,
            pages,
            old_page_count: redo.old_page_count,
            new_page_count: redo.new_page_count,
        });
    }
    Ok((expect - 1, pos, rebuilt))
}

fn side_path_of(ctx: &JournalCtx) -> PathBuf {
    ctx.side_path("nvlog")
}

/// The database's identity: read from `<db>-nvlog`, or drawn and written there (synced,
/// with its directory) before any region uses it.
fn identity(ctx: &JournalCtx) -> Result<u64> {
    let path = side_path_of(ctx);
    let vfs = &ctx.vfs;
    if vfs.exists(&path).map_err(io_err("stat", &path))? {
        let f = vfs
            .open(&path, OpenOptions::default())
            .map_err(io_err("open", &path))?;
        let mut b = [0u8; 20];
        let n = super::util::read_up_to(&*f, &mut b, 0).map_err(io_err("read", &path))?;
        if n == 20 && b[0..8] == ID_MAGIC && crc32c::crc32c(&b[..16]) == get_u32(&b, 16) {
            return Ok(get_u64(&b, 8));
        }
        // Torn: it was never synced, so no region was created with it.
    }
    let id = vfs.nonce(0x4e56_4944).max(1);
    let mut b = [0u8; 20];
    b[0..8].copy_from_slice(&ID_MAGIC);
    b[8..16].copy_from_slice(&id.to_le_bytes());
    let crc = crc32c::crc32c(&b[..16]);
    b[16..20].copy_from_slice(&crc.to_le_bytes());
    let f = vfs
        .open(&path, OpenOptions::CREATE)
        .map_err(io_err("open", &path))?;
    f.write_at(&b, 0).map_err(io_err("write", &path))?;
    f.sync_data().map_err(io_err("fdatasync", &path))?;
    let dir = ctx.dir();
    vfs.sync_dir(&dir).map_err(io_err("sync_dir", &dir))?;
    Ok(id)
}

impl Journal for NvlogJournal {
    fn read_page(&self, pgno: Pgno, buf: &mut [u8]) -> Result<()> {
        let hit = {
            let ov = self.core.overlay.read().unwrap_or_else(|e| e.into_inner());
            ov.get(&pgno).map(|(_, p)| p.clone())
        };
        match hit {
            Some(p) if p.len() == buf.len() => {
                // Overlay images are unstamped (`stamps_trailers`); the reader checks.
                buf.copy_from_slice(&p);
                stamp_crc(buf, pgno);
                Ok(())
            }
            Some(p) => Err(Error::InvalidArgument(format!(
                "read of page {pgno} into {} bytes, page size {}",
                buf.len(),
                p.len()
            ))),
            None => self.core.inner.read_page(pgno, buf),
        }
    }

    fn stamps_trailers(&self) -> bool {
        true
    }

    fn commit(&self, batch: &CommitBatch<'_>) -> Result<()> {
        let core = &*self.core;
        let ps = core.ctx.db.page_size;
        check_batch(batch, ps, false)?;
        {
            let s = core.lock_state()?;
            if batch.tid != s.last_seq + 1 {
                return Err(Error::InvalidArgument(format!(
                    "nvlog commit of tid {} after {}: tids must be consecutive",
                    batch.tid, s.last_seq
                )));
            }
        }
        let (id, slack) = match core.placed.get() {
            Some(p) => (p.id, p.slack),
            None => {
                // Other processes' pictures have no ring to follow: they open the file
                // again after this (`Gate::whole` announces it).
                let _whole = core.whole()?;
                self.start_ring().map(|p| (p.id, p.slack))?
            }
        };
        let slack = if core.ctx.config.mutant() == Mutant::RingNoSlack {
            0
        } else {
            slack
        };
        // A record longer than this would never fit, even in an empty ring.
        let fits = usize::try_from(core.ring.saturating_sub(slack)).unwrap_or(usize::MAX);
        let rec = encode_after(
            batch,
            &mut |pgno| {
                // Page 0 is logged whole: the WAL's checkpoint stamps the FCC into the file's
                // copy, so the file's page 0 may differ from the pager's committed image in
                // bytes no diff against that image would cover.
                if pgno >= batch.old_page_count || pgno == 0 {
                    return Ok(None);
                }
                // `originals` is sorted by page number; a page missing from it is the
                // overlay's (shared, not copied) or read from the file.
                if let Ok(i) = batch.originals.binary_search_by_key(&pgno, |(p, _)| *p) {
                    return Ok(Some(batch.originals[i].1.clone()));
                }
                let pending = {
                    let ov = core.overlay.read().unwrap_or_else(|e| e.into_inner());
                    ov.get(&pgno).map(|(_, p)| p.clone())
                };
                match pending {
                    Some(p) => Ok(Some(p)),
                    None => {
                        let mut b = vec![0u8; ps];
                        core.inner.read_page(pgno, &mut b)?;
                        Ok(Some(PageRef::from(b)))
                    }
                }
            },
            REC_HDR,
            fits,
        )?;
        let Some(mut rec) = rec else {
            let _whole = core.whole()?;
            return core.commit_direct(batch);
        };
        let rec_len = rec.len();
        rec[0..8].copy_from_slice(&batch.tid.to_le_bytes());
        rec[8..12].copy_from_slice(&((rec_len - REC_HDR) as u32).to_le_bytes());
        // `record_sum` of the header's first 12 bytes and the payload, hashed where they
        // lie (the sum's own field, 12..16, is the gap between them).
        let sum = super::image_checksum_gapped(id, &mut rec, 12, REC_HDR - 12);
        debug_assert_eq!(sum, record_sum(id, &rec[..REC_HDR], &rec[REC_HDR..]));
        rec[12..16].copy_from_slice(&sum.to_le_bytes());
        let over = loop {
            {
                let mut s = core.lock_state()?;
                if core.ring - (s.tail - s.head) >= rec_len as u64 + slack {
                    let pos = s.tail;
                    if let Some(g) = core
                        .ctx
                        .gate
                        .as_ref()
                        .filter(|_| core.home == RingHome::File)
                    {
                        // Another process reads the ring as it is written: through the
                        // page cache, where it finds the record, not around it.
                        if let Some(p) = core.placed.get() {
                            p.region.others_read(!g.alone());
                        }
                    }
                    // Header and payload in one store and one persist: a durable ring
                    // pays a device request and a flush per persist.
                    core.ring_write(pos, &rec)?;
                    s.tail += rec_len as u64;
                    s.last_seq = batch.tid;
                    let end = s.tail;
                    if s.pending.is_empty() && core.mode == NvlogFlush::Background {
                        // The flusher sleeps until a commit waits: start its clock.
                        core.wake.notify_all();
                    }
                    s.push_pending(Arc::new(Pending {
                        seq: batch.tid,
                        end,
                        at: Instant::now(),
                        pages: batch.pages.to_vec(),
                        old_page_count: batch.old_page_count,
                        new_page_count: batch.new_page_count,
                    }));
                    {
                        let mut ov = core.overlay.write().unwrap_or_else(|e| e.into_inner());
                        for (pgno, img) in batch.pages {
                            ov.insert(*pgno, (batch.tid, img.clone()));
                        }
                        // Pages past a shrunken page count are not committed any more.
                        // (Only a shrink leaves any: each shrink drops them, and the
                        // overlay holds pages below the page counts since.)
                        if batch.new_page_count < batch.old_page_count {
                            ov.retain(|p, _| *p < batch.new_page_count);
                        }
                    }
                    break s.over_threshold(core.ring);
                }
            }
            // The ring is full: wait for (or be) the flusher.
            let _whole = core.whole()?;
            core.flush()?;
        };
        // Durable: other processes may read it now (outside the state lock: the turn's
        // lock is taken before this journal's elsewhere).
        if let Some(g) = core
            .ctx
            .gate
            .as_ref()
            .filter(|_| core.home == RingHome::File)
        {
            g.appended(batch.tid)?;
        }
        if over {
            match core.mode {
                // The commit is in the ring already (acknowledged): a flush that found
                // no room is tried again by a later commit, and does not fail this one.
                NvlogFlush::Inline => match core.whole().and_then(|w| core.flush().map(|()| w)) {
                    // Busy: other processes' readers kept the file; a later commit
                    // tries again.
                    Err(e) if !(e.is_no_space() || matches!(e, Error::Busy)) => return Err(e),
                    _ => {}
                },
                // Asleep, it wakes and checks the threshold; flushing, it checks once done.
                NvlogFlush::Background => core.wake.notify_all(),
            }
        }
        Ok(())
    }

    fn checkpoint(&self) -> Result<()> {
        // Under a write transaction's append turn: the flush and the checkpoint write the
        // files other processes read (`Gate::whole`).
        let _whole = self.core.whole()?;
        self.core.flush()?;
        // Not beside a flush: a checkpoint that cuts the file back after a shrink
        // (`Wal::checkpoint`) must not cut pages a flush wrote in place past the log's
        // page count before the log transaction that counts them.
        let _one = self
            .core
            .flushing
            .lock()
            .map_err(|_| Error::Poisoned("a thread panicked while flushing nvlog".into()))?;
        self.core.inner.checkpoint()
    }

    fn close(&self) -> Result<()> {
        self.stop_flusher();
        {
            let s = self.core.state.lock().unwrap_or_else(|e| e.into_inner());
            if s.closed {
                return Ok(());
            }
        }
        self.core.flush()?;
        self.core.inner.close()?;
        self.core
            .state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .closed = true;
        if self.core.home == RingHome::File {
            // Kept for the next open (module docs of `RingHome::File`): the flush above
            // moved the watermark past every record in it.
            return Ok(());
        }
        // Everything is in the file: the region has nothing left to vouch for.
        match self.core.ctx.vfs.delete_region(&self.core.region_path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io_err("delete region", &self.core.region_path)(e)),
        }
    }

    fn log(&self) -> Option<&dyn Log> {
        Some(self)
    }

    fn appends(&self) -> Option<&dyn Appends> {
        (self.core.home == RingHome::File).then_some(self as &dyn Appends)
    }

    fn deferred_flush(&self) -> Option<&dyn DeferredFlush> {
        (self.core.mode == NvlogFlush::Background).then_some(self as &dyn DeferredFlush)
    }

    fn prepare_recorded_commit(&self) -> Result<()> {
        if self.core.placed.get().is_none() {
            // As a commit creating it: the others open the file again after this.
            let _whole = self.core.whole()?;
            self.start_ring()?;
        }
        Ok(())
    }

    fn region(&self) -> Option<&dyn RegionBacked> {
        // A file ring is durable at acknowledgement: nothing lives only in memory.
        (self.core.home == RingHome::Memory).then_some(self as &dyn RegionBacked)
    }
}

impl Log for NvlogJournal {
    fn log_frames(&self) -> u64 {
        Log::log_frames(&self.core.inner)
    }
}

impl Core {
    /// The ring as other processes write it: this picture's own (`placed`), or for a
    /// read-only copy the file opened again where they see it (`Core::appended`). Read,
    /// as they write it, with `O_DIRECT` where the file system takes it
    /// (`ring_file::FileRegion::read`).
    fn appended_ring<'a>(&'a self, placed: &'a Placed) -> Result<&'a Arc<dyn Region>> {
        let Some(vfs) = self.ctx.vfs.read_through() else {
            return Ok(&placed.region);
        };
        if let Some(r) = self.appended.get() {
            return Ok(r);
        }
        let r = super::ring_file::open(
            &*vfs,
            &self.region_path,
            None,
            super::DirectWrites::Auto,
            self.ctx.db.page_size,
        )
        .map_err(io_err("open region", &self.region_path))?;
        Ok(self.appended.get_or_init(|| r))
    }

    /// The committed image of `pgno` as this journal holds it: the newest pending
    /// commit's (unstamped), else the file's through the WAL (stamped).
    fn committed_image(&self, pgno: Pgno) -> Result<PageRef> {
        let pending = {
            let ov = self.overlay.read().unwrap_or_else(|e| e.into_inner());
            ov.get(&pgno).map(|(_, p)| p.clone())
        };
        match pending {
            Some(p) => Ok(p),
            None => {
                let mut b = vec![0u8; self.ctx.db.page_size];
                self.inner.read_page(pgno, &mut b)?;
                Ok(PageRef::from(b))
            }
        }
    }
}

/// `redo`'s ring is a file every process reads: a process follows another's commits by
/// reading their records where its own picture of the ring ends (its `tail`, the next
/// record's place, which is where the other process appended them), exactly as replay
/// reads them at open, and takes each in as `commit` takes its own: pending, in the
/// overlay, flushed by whichever process flushes next. Nothing but appends can have
/// changed the ring meanwhile: a flush (which frees ring space for the next lap) takes
/// the whole file and sends every other process to open it again, so the records
/// between this picture's tail and the other's are all there.
impl Appends for NvlogJournal {
    fn absorb(&self, from: u64, end: u64) -> Result<Vec<Absorbed>> {
        let core = &*self.core;
        let ps = core.ctx.db.page_size;
        let mut s = core.lock_state()?;
        // Checked in release builds: records are rebuilt on this journal's committed
        // images, which are those of `from` only if the two agree.
        if s.last_seq != from {
            return Err(Error::InvalidArgument(format!(
                "redo: asked for the commits after {from}, but the ring is at {}",
                s.last_seq
            )));
        }
        // No ring in this picture: the one another process created came with a whole
        // turn, after which this picture is opened again, not followed.
        let Some(placed) = core.placed.get() else {
            return Ok(Vec::new());
        };
        let ring = core.appended_ring(placed)?;
        let read = |pos: u64, buf: &mut [u8]| -> Result<()> {
            let mut done = 0;
            for (off, n) in ring_pieces(core.ring, pos, buf.len()) {
                if n > 0 {
                    ring.read(off, &mut buf[done..done + n])
                        .map_err(core.region_err())?;
                    done += n;
                }
            }
            Ok(())
        };
        let mut out = Vec::new();
        let mut page = vec![0u8; ps];
        let now = Instant::now();
        while s.last_seq < end {
            let pos = s.tail;
            let used = pos - s.head;
            if used + REC_HDR as u64 > core.ring {
                break;
            }
            let mut hdr = [0u8; REC_HDR];
            read(pos, &mut hdr)?;
            let (seq, len) = (get_u64(&hdr, 0), get_u32(&hdr, 8) as u64);
            if seq != s.last_seq + 1 || used + REC_HDR as u64 + len > core.ring {
                break;
            }
            let mut payload = vec![0u8; len as usize];
            read(pos + REC_HDR as u64, &mut payload)?;
            if record_sum(placed.id, &hdr, &payload) != get_u32(&hdr, 12) {
                break;
            }
            let redo = decode_payload(&payload, ps).map_err(|reason| Error::CorruptJournal {
                path: core.region_path.clone(),
                reason: format!("record {seq}: {reason}"),
            })?;
            let mut pages = Vec::with_capacity(redo.pages.len());
            let mut before = Vec::new();
            for (pgno, runs) in &redo.pages {
                // The bases `commit` diffed against: the committed image, page 0 and
                // pages past the old count from zeros.
                let committed = match *pgno < redo.old_page_count {
                    true => Some(core.committed_image(*pgno)?),
                    false => None,
                };
                match &committed {
                    Some(img) if *pgno != 0 => page.copy_from_slice(img),
                    _ => page.fill(0),
                }
                for (off, bytes) in runs {
                    page[*off..*off + bytes.len()].copy_from_slice(bytes);
                }
                before.extend(committed.map(|img| (*pgno, img)));
                pages.push((*pgno, PageRef::from(page.clone())));
            }
            for pgno in redo.new_page_count..redo.old_page_count {
                if !pages.iter().any(|(p, _)| *p == pgno) {
                    before.push((pgno, core.committed_image(pgno)?));
                }
            }
            let rec_end = pos + REC_HDR as u64 + len;
            s.tail = rec_end;
            s.last_seq = seq;
            s.push_pending(Arc::new(Pending {
                seq,
                end: rec_end,
                at: now,
                pages: pages.clone(),
                old_page_count: redo.old_page_count,
                new_page_count: redo.new_page_count,
            }));
            {
                let mut ov = core.overlay.write().unwrap_or_else(|e| e.into_inner());
                for (pgno, img) in &pages {
                    ov.insert(*pgno, (seq, img.clone()));
                }
                if redo.new_page_count < redo.old_page_count {
                    ov.retain(|p, _| *p < redo.new_page_count);
                }
            }
            out.push(Absorbed {
                tid: seq,
                pages,
                before,
                old_page_count: redo.old_page_count,
                new_page_count: redo.new_page_count,
            });
        }
        if !out.is_empty() {
            // This process's next store must not write back sectors from before them.
            placed.region.refresh().map_err(core.region_err())?;
            if core.mode == NvlogFlush::Background {
                core.wake.notify_all();
            }
        }
        Ok(out)
    }
}

impl DeferredFlush for NvlogJournal {
    fn pause_flushes(&self) -> Result<()> {
        self.core.lock_state()?.paused += 1;
        // A flush already running may write on after the caller starts recording: wait
        // for it (the flusher takes this lock for the whole of a flush).
        drop(
            self.core
                .flushing
                .lock()
                .map_err(|_| Error::Poisoned("a thread panicked while flushing nvlog".into()))?,
        );
        Ok(())
    }

    fn resume_flushes(&self) {
        let mut s = self.core.state.lock().unwrap_or_else(|e| e.into_inner());
        s.paused = s.paused.saturating_sub(1);
        drop(s);
        self.core.wake.notify_all();
    }
}

impl RegionBacked for NvlogJournal {
    fn durable_tid(&self) -> u64 {
        let s = self.core.state.lock().unwrap_or_else(|e| e.into_inner());
        s.watermark
    }
}

impl Drop for NvlogJournal {
    fn drop(&mut self) {
        if crate::vfs::fork::generation() != self.fork_gen {
            // Inherited through fork(): the flusher is a thread of the parent (joining
            // it here would wait forever), and its state's locks may have been held at
            // the fork. Touch neither; the handle is forgotten.
            let h = self
                .flusher
                .get_mut()
                .unwrap_or_else(|e| e.into_inner())
                .take();
            std::mem::forget(h);
            return;
        }
        self.stop_flusher();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch_of<'a>(
        pages: &'a [(Pgno, PageRef)],
        originals: &'a [(Pgno, PageRef)],
        old: u32,
        new: u32,
    ) -> CommitBatch<'a> {
        CommitBatch {
            tid: 7,
            pages,
            originals,
            old_page_count: old,
            new_page_count: new,
            restamp: &[],
            discard: &[],
        }
    }

    /// Apply a decoded record to `bases` the way replay does.
    fn rebuild(payload: &[u8], ps: usize, bases: &HashMap<Pgno, Vec<u8>>) -> Vec<(Pgno, Vec<u8>)> {
        let redo = decode_payload(payload, ps).unwrap();
        redo.pages
            .iter()
            .map(|(pgno, runs)| {
                let mut p = if *pgno < redo.old_page_count && *pgno != 0 {
                    bases[pgno].clone()
                } else {
                    vec![0; ps]
                };
                for (off, b) in runs {
                    p[*off..*off + b.len()].copy_from_slice(b);
                }
                (*pgno, p)
            })
            .collect()
    }

    /// The runs the word-at-a-time scan finds are the ones a plain byte scan finds
    /// (the encoding before it), for edits at every alignment and at the page's end.
    #[test]
    fn word_diffs_find_the_runs_a_byte_scan_finds() {
        fn byte_runs(old: &[u8], new: &[u8]) -> Vec<(usize, usize)> {
            let differs = |i: usize| old[i] != new[i];
            let (mut out, mut i) = (Vec::new(), 0);
            while i < new.len() {
                if !differs(i) {
                    i += 1;
                    continue;
                }
                let (start, mut end) = (i, i + 1);
                let mut j = end;
                while j < new.len() && j < end + RUN_GAP {
                    if differs(j) {
                        end = j + 1;
                    }
                    j += 1;
                }
                out.push((start, end));
                i = end;
            }
            out
        }
        fn word_runs(old: &[u8], new: &[u8]) -> Vec<(usize, usize)> {
            let (mut out, mut from) = (Vec::new(), 0);
            while let Some(start) = next_diff(old, new, from) {
                let end = run_end(old, new, start);
                out.push((start, end));
                from = end;
            }
            out
        }
        let mut x = 0x9e37_79b9u64;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for round in 0..2000 {
            let ps = [512usize, 1024, 4096][round % 3];
            let old: Vec<u8> = (0..ps).map(|_| rnd() as u8).collect();
            let mut new = old.clone();
            for _ in 0..(rnd() % 6) {
                let at = rnd() as usize % ps;
                let len = (1 + rnd() as usize % 24).min(ps - at);
                for b in &mut new[at..at + len] {
                    *b = b.wrapping_add(1 + (rnd() % 255) as u8);
                }
            }
            if round % 5 == 0 {
                new[ps - 1] ^= 1;
            }
            if round % 7 == 0 {
                // A page that differs almost everywhere (a new page against zeros).
                for b in new.iter_mut().step_by(3) {
                    *b = b.wrapping_add(1);
                }
            }
            if round % 11 == 0 {
                // A dense stretch with gaps of every width up to twice RUN_GAP in it.
                let at = rnd() as usize % (ps / 2);
                let mut j = at;
                while j < (at + 600).min(ps) {
                    new[j] = new[j].wrapping_add(1);
                    j += 1 + rnd() as usize % (2 * RUN_GAP + 2);
                }
            }
            assert_eq!(
                word_runs(&old, &new),
                byte_runs(&old, &new),
                "round {round}"
            );
        }
    }

    #[test]
    fn redo_rebuilds_every_page_from_its_base() {
        let ps = 512;
        let mut x = 0x1234_5678u64;
        let mut rnd = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for round in 0..50 {
            let old: Vec<u8> = (0..ps).map(|_| rnd() as u8).collect();
            let mut new = old.clone();
            for _ in 0..(round % 7) {
                let at = rnd() as usize % ps;
                let len = (rnd() as usize % 40).min(ps - at);
                for b in &mut new[at..at + len] {
                    *b = rnd() as u8;
                }
            }
            let fresh: Vec<u8> = (0..ps)
                .map(|i| if i % 3 == 0 { rnd() as u8 } else { 0 })
                .collect();
            let header: Vec<u8> = (0..ps).map(|_| rnd() as u8).collect();
            let pages: Vec<(Pgno, PageRef)> = vec![
                (0, PageRef::from(header.clone())),
                (1, PageRef::from(new.clone())),
                (3, PageRef::from(fresh.clone())),
            ];
            let originals = vec![
                (0, PageRef::from(vec![9u8; ps])),
                (1, PageRef::from(old.clone())),
            ];
            let b = batch_of(&pages, &originals, 2, 4);
            let payload = encode_payload(&b, &mut |pgno| {
                Ok((pgno != 0 && pgno < 2).then(|| PageRef::from(old.clone())))
            })
            .unwrap();
            let bases = HashMap::from([(1, old.clone())]);
            let got = rebuild(&payload, ps, &bases);
            assert_eq!(got, vec![(0, header), (1, new.clone()), (3, fresh)]);
            if new == old {
                // An unchanged page costs its 8-byte entry and nothing more.
                assert!(payload.len() < 12 + 8 + ps + 8 + 8 + ps + 8 * 200);
            }
        }
    }

    #[test]
    fn damaged_payloads_are_refused_not_panicked_on() {
        let ps = 512;
        let pages = vec![(1, PageRef::from(vec![7u8; ps]))];
        let b = batch_of(&pages, &[], 1, 2);
        let good = encode_payload(&b, &mut |_| Ok(None)).unwrap();
        assert!(decode_payload(&good, ps).is_ok());
        for cut in 0..good.len() {
            assert!(decode_payload(&good[..cut], ps).is_err(), "cut {cut}");
        }
        for i in 0..24 {
            let mut bad = good.clone();
            bad[i] ^= 0xFF;
            let _ = decode_payload(&bad, ps); // must not panic
        }
        let mut past = good.clone();
        past[12..16].copy_from_slice(&5u32.to_le_bytes()); // pgno past the page count
        assert!(decode_payload(&past, ps).is_err());
    }

    #[test]
    fn a_torn_watermark_slot_falls_back_to_the_other() {
        let a = encode_slot(10, 4000, 3);
        let b = encode_slot(12, 4800, 4);
        assert_eq!(decode_slot(&a), Some((10, 4000, 3)));
        let mut torn = b;
        torn[0..8].copy_from_slice(&99u64.to_le_bytes());
        assert_eq!(decode_slot(&torn), None);
        let newest = [a, torn]
            .iter()
            .filter_map(|s| decode_slot(s))
            .max_by_key(|s| s.2);
        assert_eq!(newest, Some((10, 4000, 3)));
        assert_eq!(
            decode_slot(&[0u8; SLOT_LEN]),
            None,
            "a zero slot is no slot"
        );
    }

    #[test]
    fn the_region_header_round_trips_and_rejects_damage() {
        let h = encode_header(&RegionHeader {
            id: 0xABCD,
            ring: 1 << 20,
            page_size: 4096,
        });
        let d = decode_header(&h).unwrap();
        assert_eq!((d.id, d.ring, d.page_size), (0xABCD, 1 << 20, 4096));
        for i in 0..HDR_LEN {
            let mut bad = h;
            bad[i] ^= 1;
            assert!(decode_header(&bad).is_none(), "byte {i}");
        }
    }

    #[test]
    fn the_default_region_is_under_dev_shm_and_depends_on_the_path() {
        let a = default_region_path(Path::new("/data/a.db"));
        let b = default_region_path(Path::new("/data/b.db"));
        assert!(a.starts_with("/dev/shm") && b.starts_with("/dev/shm"));
        assert_ne!(a, b);
        assert_eq!(a, default_region_path(Path::new("/data/a.db")));
    }
}
