//! Journal mode `redo`: a sector-granular redo log in a file beside the database.
//!
//! A commit appends one record to the ring in `<db>-redo` — for each page it changed, only
//! the byte runs that differ from the page's committed image — with one write and one
//! fdatasync, and returns: durable at acknowledgement, in one device request however many
//! scattered pages the transaction touched, with bytes proportional to what changed
//! rather than to whole pages. A background flusher moves batches of commits into the
//! database through an inner write-ahead log (the newest image of each page a batch
//! touched, once, with one fdatasync), and that log is checkpointed into the database
//! (sorted, hot pages once per batch). Commits never wait for a flush unless the ring is
//! full.
//!
//! It is the `nvlog` protocol (`journal::nvlog`: record format, replay, watermark, flush)
//! with its ring in a file (`RingHome::File`, `journal::ring_file`) instead of a memory
//! region. Everything `nvlog`'s module docs prove holds unchanged, and one promise is
//! stronger: the record is fdatasync'ed before `commit` returns, so an acknowledged
//! commit survives a power cut as well as a process crash (`durable_at_ack`).
//! Invariants that are this mode's own:
//! - *A record is acknowledged only after the fdatasync that covers it.* `Region::persist`
//!   of a file ring is `sync_data`; `nvlog` persists each record before it acknowledges.
//! - *The ring file is never sparse and never grows*, so a commit's write needs no
//!   file-system metadata (`ring_file` module docs).
//! - *A commit writes only the sectors its record covers* where the file system takes
//!   `O_DIRECT` (`Config::direct_writes`, `Auto` by default): the rest of its last sector
//!   is zeroed, so every record leaves that much of the ring free after it
//!   (`Region::write_granule`; `nvlog`'s room check keeps it).
//! - *No flush deadline.* A flush starts when a quarter of the ring is filled or 1,024
//!   commits wait (`RingHome::flush_delay`): nothing in the ring needs rescuing, and
//!   larger batches write each hot page to the database once per batch.
//! - *The ring is created by a session's first commit* (`RingHome::lazy`), not at open: a
//!   database only read, or switched to another mode while empty (apps ask for WAL right
//!   after opening a new file), never pays its zero-fill. The first watermark slot names
//!   the last commit, all in the file, before the first record is written.
//! - *The ring outlives a clean close*; the close's flush leaves its watermark at the last
//!   commit, so the next open replays nothing and reuses it without a zero-fill.
//! - *Other processes read beside a commit* (`Capabilities::appends_beside_readers`,
//!   `procs`' append turns): a commit writes nothing but its record past the ring's last
//!   one, which no other process reads before the committer publishes it, so it needs
//!   only `RESERVED`, not the whole file; another process takes the record in by reading
//!   it where its own picture of the ring ends (`journal::Appends`), instead of opening
//!   the file again. What writes anything else — the ring's creation, a record that does
//!   not fit, a flush (the background one and a full ring's), a checkpoint — takes the
//!   whole file first (`Gate::whole`, `Gate::try_write`), which sends the others to open
//!   the file again. While another process has the file open, records go through the
//!   page cache instead of around it (`Region::others_read`): that process reads them
//!   there.
//!
//! The default mode (`config::DEFAULT_JOURNAL_MODE`), chosen by issue 37's measurements.

use super::nvlog::{open_mode, RingHome};
use super::{Capabilities, JournalOption, ModeSpec};
use crate::page::stock::STOCK;

/// Registry entry of `redo`.
pub(crate) static REDO: ModeSpec = ModeSpec {
    name: "redo",
    code: 24,
    format: 24,
    summary: "sector-granular redo log: a commit appends only the changed byte runs of its pages to a ring file beside the database, one write and one fdatasync; a background flusher moves batches into the database through a checkpointed log",
    layout: &STOCK,
    caps: Capabilities {
        atomic: true,
        embeds_fcc: true,
        recovers_fcc: true,
        direct_writes: true,
        replays_log: true,
        intent_map: false,
        side_files: &["wal", "nvlog", "redo"],
        steals: false,
        durable_at_ack: true,
        survives_process_crash: true,
        region_backed: false,
        appends_beside_readers: true,
    },
    options: &[
        JournalOption::DirectWrites,
        JournalOption::WalPrealloc,
        JournalOption::NvlogRingBytes,
        JournalOption::NvlogFlush,
        JournalOption::NvlogDirectPages,
    ],
    check_options: super::nvlog::check_options,
    open: |ctx, _| open_mode(ctx, RingHome::File),
};
