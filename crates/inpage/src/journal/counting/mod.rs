//! Doubleheader-logging commit protocols: `dhl-tc`, `dhl-cc` and `dhl-cc-header`.
//!
//! There is no side file. Every tree and overflow page is a DHL page (`page::double_header`): a
//! write of transaction `T` adds a version tagged `T` next to the committed version and
//! never disturbs it, so the database file itself is the undo log. Page 0 keeps two
//! header slots for the same reason (`pager::header::visible_slot`).
//!
//! Invariants, and why they hold:
//! - *A transaction's versions count only once it is complete.* With counting commit
//!   (`dhl-cc`, `dhl-cc-header`) every page of the batch carries `(tid, txn_size)`,
//!   `txn_size` being the number of pages in the batch, and one fdatasync makes them
//!   durable. Recovery finds the largest tid `M` among valid versions: if exactly
//!   `txn_size` valid versions carry `M`, every page of `M` reached the disk; otherwise
//!   some did not and `M` is rolled back. `M - 1` is complete either way, because `M`
//!   began writing only after `M - 1`'s fdatasync returned. With the traditional commit
//!   (`dhl-tc`) the header page's new slot is the commit mark, written only after the
//!   other pages are synced, so the FCC is the largest valid header-slot fcc.
//! - *Rolling back is invalidation.* A version of an aborted transaction is made invalid
//!   by zeroing its tid (or its header slot), a write inside sector 0; the committed
//!   version beside it is untouched and becomes the visible one again. Recovery's
//!   invalidations are synced before the database is next written (the next commit, before
//!   any of its pages, or a clean close; an open that only reads pays no flush, unless
//!   other processes may write after it: an open or reload under the write turn of real
//!   files settles them before it lets the turn go, `Journal::settle_recovery`, since
//!   another process's next commit reuses the rolled-back tid), and redoing them is
//!   harmless, so a crash before that or during recovery is recovered the same way.
//! - *A large transaction commits in order, and its crash is recovered from page 0.* A
//!   counting-commit transaction of at least `Config::ordered_commit_pages` pages
//!   first marks its regions in an *ordered* intent area (synced), writes its other
//!   pages, syncs, and only then writes its mark — page 0 with its header slot, or, if it
//!   leaves the header alone, the area rewritten to claim its tid — and syncs again. Its
//!   pages still carry `(tid, txn_size)` and page 0 (if written) still votes, so the vote
//!   reaches the same verdict; but while the ordered area belongs to the newest slot, the
//!   mark being absent already says the transaction did not commit (`intent` notes), and
//!   recovery settles the FCC without reading another page. The
//!   versions it left are invalidated, by a scan of the area's regions, and synced at the
//!   start of the next commit, spill or clean close, before anything reuses the tid or
//!   replaces the area; until then `read_page` applies the same invalidation to what it
//!   returns, so the pager's images are what the file will hold. A crash before that
//!   finds the same area and defers again.
//! - *Torn writes need no atomic pages.* A version's checksum covers its descriptor, its
//!   offset array and every byte it references; a page write torn at any sector boundary
//!   can only leave the new version invalid, which recovery then counts as missing.
//! - *Tids are not reused while an invalid-but-present version could be confused with a
//!   new one:* recovery zeroes the tid of every valid version newer than the FCC it
//!   settles on, so the next transaction (tid FCC + 1) finds no valid version with its tid.
//! - *Spilled versions never vote* (steal, `Steal::spill`). A transaction bigger than
//!   the cache writes versions of its tid with `txn_size` 0 before it commits; no count
//!   of pages is 0, and the vote requires every valid version of the newest tid to claim
//!   the same size, so a crash before the commit rolls them back like any incomplete
//!   transaction. The commit first invalidates, durably, those no longer part of it, then
//!   stamps each remaining one with the transaction's size (sector 0 only, before its
//!   sync); it refuses to run if a spilled page is left unaccounted for. The order keeps
//!   recovery's redo sound: a spilled version beside stamped ones is then always one the
//!   count misses, so losing part of recovery's invalidations can only leave the
//!   transaction incomplete. Every page holding such a version stays marked
//!   in the intent map until the transaction ends (`pending`), so recovery's bounded
//!   scan finds them. A rollback invalidates them and, like recovery, syncs that before
//!   the tid is reused or a marking write could drop their regions.
//! - *A page write covers only what changed.* The pager hands over each page's committed
//!   image (`CommitBatch::originals`), which is what the file holds: it was read from the
//!   file or written by the last commit, whose sync succeeded (a failed commit poisons the
//!   handle). So writing the one sector-aligned span where the new image differs leaves
//!   the file holding exactly the new image, and a crash can only leave a mix of old and
//!   new sectors inside that span, which the torn-write argument above already covers.
//!   The page trailer is outside every span: DHL pages are checked per version, never by
//!   the trailer, which recovery's invalidations do not maintain either. With `O_DIRECT`
//!   the device receives just the span (typically 1-8 sectors for a one-row change)
//!   instead of a whole block; one write call per page keeps the latency of a page write.
//!   A direct write waits for the device, so only a single page written before a sync
//!   goes that way; several go through the page cache (whole blocks) and are written back
//!   together by the sync. Both handles are on one file and the kernel keeps them
//!   coherent (a direct write first writes back and drops cached pages of its range).

mod freesnap;
mod intent;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::util::{aligned_into, check_batch, open_direct};
use super::{
    Capabilities, CommitBatch, Journal, JournalConfig, JournalCtx, JournalMode, JournalOption,
    KeepsFree, ModeSpec, Mutant, Opened, RecoveryReport, Steal,
};
use super::{RecoveryAction, RollBackHow};
use crate::error::{Error, Pgno, Result};
use crate::format::header::{
    clean_mark, decode_slot, free_snapshot_ref, set_clean_mark, visible_slot, HEADER_LEN,
    HEADER_SLOTS, MAX_TID,
};
use crate::page::double_header::DHL;
use crate::page::{Layout, PageRef, PageVersions, Stamp, PAGE_TRAILER};
use crate::vfs::File;
use intent::Intent;

/// A registry entry for this commit protocol: every such mode recovers the FCC from the
/// pages and may write them directly; they differ in the commit (traditional or
/// counting), in metadata embedding and in the page layout, which must keep its versions
/// side by side (`PageLayout::versions`: DHL's, or another such as IPS).
pub(crate) const fn counting_spec(
    name: &'static str,
    code: u8,
    format: u8,
    summary: &'static str,
    embeds_fcc: bool,
    layout: Layout,
) -> ModeSpec {
    ModeSpec {
        name,
        code,
        format,
        summary,
        layout,
        caps: Capabilities {
            atomic: true,
            embeds_fcc,
            recovers_fcc: true,
            direct_writes: true,
            replays_log: false,
            intent_map: true,
            side_files: &[],
            steals: true,
            durable_at_ack: true,
            survives_process_crash: true,
            region_backed: false,
            appends_beside_readers: false,
        },
        options: &[
            JournalOption::DirectWrites,
            JournalOption::IntentRegionPages,
            JournalOption::IntentScanMib,
            JournalOption::OrderedCommitPages,
        ],
        check_options,
        open: open_counting,
    }
}

/// `ModeSpec::check_options` of the counting modes: the intent map's smallest region is
/// a power of two no larger than the map can address; the scan budget is at least 1 MiB
/// and at most what a u64 of bytes holds comfortably (1 TiB).
fn check_options(c: &JournalConfig) -> Result<()> {
    if let Some(n) = c.intent_region_pages {
        if !n.is_power_of_two() || n > 65536 {
            return Err(Error::Config(format!(
                "intent_region_pages {n} must be a power of two in 1..=65536"
            )));
        }
    }
    match c.intent_scan_mib {
        Some(m) if !(1..=1 << 20).contains(&m) => Err(Error::Config(format!(
            "intent_scan_mib {m} must be in 1..=1048576"
        ))),
        _ => Ok(()),
    }
}

/// Registry entry of `dhl-tc`.
pub(crate) static DHL_TC: ModeSpec = counting_spec(
    "dhl-tc",
    7,
    7,
    "doubleheader logging, traditional commit: pages, fdatasync, header slot, fdatasync",
    false,
    &DHL,
);

/// Registry entry of `dhl-cc`.
pub(crate) static DHL_CC: ModeSpec = counting_spec(
    "dhl-cc",
    8,
    8,
    "doubleheader logging, counting commit with metadata embedding: one fdatasync",
    true,
    &DHL,
);

/// Registry entry of `dhl-cc-header`.
pub(crate) static DHL_CC_HEADER: ModeSpec = counting_spec(
    "dhl-cc-header",
    9,
    8,
    "counting commit without metadata embedding: the header page in every commit",
    false,
    &DHL,
);

/// The versions of the mode's layout: every mode this protocol runs keeps them.
fn page_versions(mode: JournalMode) -> &'static dyn PageVersions {
    mode.layout()
        .versions()
        .expect("a counting-commit mode's layout keeps its versions side by side")
}

fn open_counting(ctx: JournalCtx, mode: JournalMode) -> Result<Opened> {
    let (j, recovery) = CountingJournal::open(ctx, mode)?;
    Ok(Opened {
        fcc: Some(j.fcc),
        direct_writes: j.direct.is_some(),
        journal: Box::new(j),
        recovery,
    })
}

/// A valid version found by the recovery scan.
struct Found {
    pgno: Pgno,
    slot: usize,
    tid: u64,
    txn_size: u32,
    /// Invalid versions (torn by a crash) do not count, but newer-than-FCC ones are
    /// still invalidated so their tid can never be mistaken for a later transaction's.
    /// `None`: not validated, because the vote never needed it.
    valid: Option<bool>,
}

/// Bytes recovery's scan reads per call.
const SCAN_CHUNK: usize = 64 * 1024;

/// The DHL commit protocols.
#[derive(Debug)]
pub(crate) struct CountingJournal {
    ctx: JournalCtx,
    mode: JournalMode,
    /// The FCC recovery settled on; `last_tid` follows the commits after it.
    fcc: u64,
    last_tid: AtomicU64,
    /// What the file owes before the next write (`Debt`, with its transitions).
    debt: Mutex<Debt>,
    /// The tid of a `Debt::Deferred` transaction while its versions may still be on disk,
    /// else 0: published beside `debt` so reads need no lock. Reads hide those versions,
    /// with the same invalidation the disk will get, so a page the pager caches now is
    /// byte for byte what the file holds afterwards (`CommitBatch::originals`).
    void_tid: AtomicU64,
    /// The intent area of the slot visible at the FCC, as it is on disk (None: that area
    /// is invalid, and the next commit writes a fresh one).
    intent: Mutex<Option<Intent>>,
    writer: Mutex<()>,
    /// `O_DIRECT` handle on the database file for page writes, if in use.
    direct: Option<Arc<dyn File>>,
    /// Alignment of direct writes: the torn-write unit (512) unless the device needs more.
    align: usize,
    /// The aligned buffer direct writes copy a page's span into, kept between writes (an
    /// allocation, zeroing and free per page write otherwise; only the writer uses it).
    scratch: Mutex<Vec<u8>>,
    /// Steal: the pages holding a version that `spill` wrote for the transaction in
    /// flight (tid FCC + 1). Every marking write keeps them marked in the intent area
    /// until that transaction ends, so recovery's bounded scan finds them.
    pending: Mutex<BTreeSet<Pgno>>,
    /// Pages the last commits wrote, newest last: a marking write that resets the intent
    /// area keeps their regions marked too (up to half its room), so a working set that
    /// outgrew the area does not pay a marking flush for each of its regions again.
    recent: Mutex<std::collections::VecDeque<Pgno>>,
}

/// What the file owes before the journal writes anything of a new transaction: the
/// counting journal's lifecycle between writes, one state at a time.
///
/// ```text
///   open ── recover ──► Marked | Settled | Unsynced | Deferred(area)
///
///   Deferred(area) ── sync_recovery: invalidate its versions, fdatasync ──► Settled
///   Unsynced ──────── sync_recovery: fdatasync ───────────────────────────► Settled
///   Marked ────────── rewrite_page0: void the mark in sector 0, fdatasync ─► Settled
///   Settled ───────── discard: invalidate spilled versions, no sync ──────► Unsynced
///   Settled ───────── close_with: mark page 0 clean at the FCC, fdatasync ─► Marked
/// ```
///
/// Every write (commit, spill, discard, clean close) first calls `sync_recovery`, so it
/// starts from `Marked` or `Settled`; the first marking write of a commit or spill leaves
/// `Marked`. `CountingJournal::transition` checks each arrow against this table in debug
/// builds, and keeps `void_tid` equal to the deferred transaction's tid exactly while in
/// `Deferred`.
#[derive(Debug)]
enum Debt {
    /// Nothing owed: every write is synced and no clean-shutdown mark vouches for the FCC.
    Settled,
    /// Page 0 carries a clean-shutdown mark at the FCC (trusted by recovery, or written
    /// by a clean close): it must be voided, durably, before a transaction writes a page,
    /// or a crash in that transaction would find the mark and skip recovery.
    Marked,
    /// Invalidations (recovery's, or a discard's) are written but not synced: they must
    /// be durable before the tid is reused or a marking write drops their regions.
    Unsynced,
    /// An ordered transaction (FCC + 1) was rolled back from page 0 alone
    /// (`Recovered::debt`): the area whose regions hold its versions, which are
    /// invalidated and synced before the next write.
    Deferred(Intent),
}

impl Debt {
    /// The arrows of the diagram (staying put is always allowed: a sync with nothing
    /// owed, a close with the mark already in place).
    fn may_become(&self, next: &Debt) -> bool {
        use Debt::*;
        matches!(
            (self, next),
            (Settled, Settled)
                | (Marked, Marked)
                | (Unsynced, Unsynced)
                | (Deferred(_) | Unsynced | Marked, Settled)
                | (Settled, Unsynced | Marked)
                // A spill under the `KeepCleanMark` mutant leaves the mark, and its
                // discard then owes a sync too; the mark is what that mutant keeps.
                | (Marked, Unsynced)
        )
    }
}

/// `Config::ordered_commit_pages` by default: a transaction this large pays one flush
/// more than its counting commit, beside dozens of page writes, and a crash in it is
/// recovered without reading its pages.
const DEFAULT_ORDERED_PAGES: u32 = 64;

/// Pages `CountingJournal::recent` remembers.
const RECENT_PAGES: usize = 64;

/// The sector size of the torn-write model, and the smallest unit a span is made of.
const SECTOR: usize = 512;

/// The sector-aligned byte range of the usable part of a page (`..usable`) where `new`
/// differs from `old`, or None if it does not.
fn changed_span(old: &[u8], new: &[u8], usable: usize) -> Option<std::ops::Range<usize>> {
    // Whole-sector comparisons (memcmp) find the sectors; only the last sector, which
    // holds the trailer, is compared up to `usable`.
    let sectors = usable.div_ceil(SECTOR);
    let differs = |k: usize| {
        let r = k * SECTOR..((k + 1) * SECTOR).min(usable);
        old[r.clone()] != new[r]
    };
    let first = (0..sectors).find(|&k| differs(k))?;
    let last = (first..sectors).rev().find(|&k| differs(k))?;
    Some(first * SECTOR..((last + 1) * SECTOR).min(new.len()))
}

impl CountingJournal {
    /// Open a DHL mode, running recovery (scan every page, settle the FCC, invalidate
    /// versions of an incomplete transaction).
    pub(crate) fn open(
        ctx: JournalCtx,
        mode: JournalMode,
    ) -> Result<(CountingJournal, RecoveryReport)> {
        // Any mode whose layout keeps side-by-side versions (DHL's, IPS's) runs here.
        if mode.layout().versions().is_none() {
            return Err(Error::Config(format!(
                "CountingJournal opened for mode {mode}, whose pages keep no versions"
            )));
        }
        let Recovered { fcc, report, debt } = recover(&ctx, mode)?;
        // An ordered area must not stay on disk once its tid is reused: kept as the
        // in-memory area, it would cover the next commit's pages and skip the marking
        // write that replaces it, and a crash would then roll back a complete counting
        // commit. None makes that write happen.
        let intent = {
            let mut p0 = vec![0u8; ctx.db.page_size];
            ctx.db.read_page(0, &mut p0)?;
            visible_slot(&p0, fcc)
                .and_then(|(s, _)| Intent::decode(&p0, s))
                .filter(|i| !i.ordered || ctx.config.mutant() == Mutant::OrderedAreaKept)
        };
        // After recovery, whose few writes go through the page cache.
        let direct = open_direct(
            &*ctx.vfs,
            &ctx.db_path,
            ctx.db.page_size,
            ctx.config.direct_writes,
        )?;
        let align = direct.as_ref().map_or(SECTOR, |(_, a)| *a);
        let direct = direct.map(|(f, _)| f);
        Ok((
            CountingJournal {
                ctx,
                mode,
                fcc,
                last_tid: AtomicU64::new(fcc),
                void_tid: AtomicU64::new(match debt {
                    Debt::Deferred(_) => fcc + 1,
                    _ => 0,
                }),
                debt: Mutex::new(debt),
                intent: Mutex::new(intent),
                writer: Mutex::new(()),
                direct,
                align,
                scratch: Mutex::new(Vec::new()),
                pending: Mutex::new(BTreeSet::new()),
                recent: Mutex::new(std::collections::VecDeque::new()),
            },
            report,
        ))
    }
}

/// The FCC a trusted clean-shutdown mark in `page0` names (`header::CLEAN_MARK`): the
/// largest mark of a valid slot, if it is at least every valid slot's fcc and the file
/// holds every page the header at that FCC counts, in whole pages.
fn trusted_mark(page0: &[u8], file_len: u64, ps: usize) -> Option<u64> {
    let slots: Vec<(usize, u64)> = (0..HEADER_SLOTS)
        .filter_map(|s| decode_slot(page0, s).ok().map(|h| (s, h.fcc)))
        .collect();
    let mark = slots.iter().map(|&(s, _)| clean_mark(page0, s)).max()?;
    let newest = slots.iter().map(|&(_, f)| f).max()?;
    if mark == 0 || mark < newest || mark > MAX_TID {
        return None;
    }
    let (_, h) = visible_slot(page0, mark)?;
    let need = h.page_count as u64 * ps as u64;
    (file_len >= need && file_len % ps as u64 == 0).then_some(mark)
}

/// Recovery: the FCC, what was done, whether a clean-shutdown mark was trusted (then
/// nothing was scanned and the mark is still on disk, to be voided before the next
/// commit writes), and whether its invalidations still need a sync.
fn recover(ctx: &JournalCtx, mode: JournalMode) -> Result<Recovered> {
    let db = &ctx.db;
    let ps = db.page_size;
    let file_len = db.file_len()?;
    let pages = file_len / ps as u64;
    let mut buf = vec![0u8; ps];
    // Phase 1: page 0. A clean close left nothing to recover: no scan, O(1) pages read.
    if pages > 0 {
        db.read_page(0, &mut buf)?;
        if let Some(fcc) = trusted_mark(&buf, file_len, ps) {
            return Ok(Recovered {
                fcc,
                report: RecoveryReport::default(),
                debt: Debt::Marked,
            });
        }
    }
    let mut found = if pages > 0 {
        header_votes(&buf)?
    } else {
        Vec::new()
    };
    // Phase 2: what to scan. Only the regions the newest valid header slot's intent area
    // marks (`intent`): every version above its `base` lies there. Without a valid area,
    // the whole file.
    let count_votes = mode != JournalMode::DHL_TC;
    let newest = (0..HEADER_SLOTS)
        .filter_map(|s| decode_slot(&buf, s).ok().map(|h| (h.fcc, s)))
        .max();
    let intent = newest.and_then(|(_, s)| Intent::decode(&buf, s));
    let base = intent.as_ref().map_or(0, |i| i.base);
    // An ordered transaction whose header slot is not on disk did not commit (`intent`
    // notes): the FCC is the newest slot's, found without reading any other page. Its
    // versions, which lie in the area's regions, are invalidated before the next write
    // (`Debt::Deferred`); until then reads hide them.
    let ordered_abort = count_votes
        && matches!((newest, &intent), (Some((f, _)), Some(i)) if i.ordered && i.base >= f);
    let ranges = match &intent {
        _ if ordered_abort => Vec::new(),
        Some(i) => i.ranges(pages),
        None => vec![(1, pages)],
    };
    // Phase 3: the scan, and phase 4: the FCC it settles on.
    scan_heads(ctx, mode, &ranges, intent.is_some(), &mut found)?;
    let fcc = match count_votes {
        false => found
            .iter()
            .filter(|f| f.pgno == 0 && f.valid == Some(true))
            .map(|f| f.tid)
            .max()
            .unwrap_or(0),
        true => vote(ctx, mode, &mut found, base)?,
    };
    // Phase 5: the file's length at that FCC (before anything is written: bad input
    // changes nothing).
    let torn_tail = pages > 0 && cut_torn_tail(db, fcc, pages)?;
    // Phase 6: roll back what lies above the FCC.
    let (stale, rolled_back_pages) = roll_back(ctx, mode, &found, fcc)?;
    // The invalidations (and a cut tail) are made durable before the first write that
    // could depend on them, not here: `CountingJournal::sync_recovery` runs at the start of the
    // next commit (before any of its pages, and before a marking write could drop their
    // regions from the intent map) and before a clean-shutdown mark. Until then a crash
    // finds the versions again, in regions the map still marks, and recovery redoes the
    // invalidation. An open that only reads pays no flush.
    let needs_sync = stale > 0 || torn_tail;
    if ordered_abort {
        // What recovery settled on, checked in release builds: the FCC is the newest
        // slot's, and nothing was found above it to roll back here.
        assert!(
            stale == 0 && fcc == base,
            "DHL recovery of ordered transaction {} settled on FCC {fcc}",
            base + 1
        );
    }
    Ok(Recovered {
        fcc,
        report: RecoveryReport::of((stale > 0 || ordered_abort).then(|| {
            RecoveryAction::RollBack {
                tid: Some(fcc + 1),
                how: match rolled_back_pages {
                    Some((present, claimed)) => RollBackHow::Versions {
                        found: present,
                        claimed,
                        spilled: found
                            .iter()
                            .filter(|f| f.tid > fcc && f.txn_size == 0)
                            .count() as u64,
                    },
                    None => RollBackHow::FromPageZero,
                },
            }
        })),
        debt: match intent.filter(|_| ordered_abort) {
            // Paying a deferred invalidation ends with a sync, which covers recovery's
            // own unsynced writes too.
            Some(area) => Debt::Deferred(area),
            None if needs_sync => Debt::Unsynced,
            None => Debt::Settled,
        },
    })
}

/// Recovery, phase 1: the valid header slots of `page0` as votes (`dhl-tc`'s commit
/// marks, and page 0's version under counting commit). Errors: a damaged slot (both live
/// in sector 0, which a crash writes whole, so damage there is corruption, not a torn
/// commit).
fn header_votes(page0: &[u8]) -> Result<Vec<Found>> {
    let mut found = Vec::new();
    for slot in 0..HEADER_SLOTS {
        match decode_slot(page0, slot) {
            Ok(h) => found.push(Found {
                pgno: 0,
                slot,
                tid: h.fcc,
                txn_size: h.last_txn_size,
                valid: Some(true),
            }),
            Err(reason)
                if page0[slot * HEADER_LEN..(slot + 1) * HEADER_LEN]
                    .iter()
                    .any(|&b| b != 0) =>
            {
                return Err(Error::corrupt(
                    0,
                    format!("header slot {slot} is damaged: {reason}"),
                ));
            }
            Err(_) => {}
        }
    }
    Ok(found)
}

/// Recovery, phase 3: the version heads of every page in `ranges`, appended to `found`.
///
/// The scan reads the file in chunks and keeps only the descriptor heads; a version is
/// validated (checksums over its cells) only where the vote may need it: while its page
/// is in memory if its tid is at least the largest seen so far (which covers every
/// version of the largest tid), and later, by a re-read (`vote`), only if the largest
/// tids turn out to have no valid version (torn writes). That gives exactly the FCC a
/// full validation would, reading the file once in the common case. Errors: a version
/// claiming a tid past `MAX_TID`.
fn scan_heads(
    ctx: &JournalCtx,
    mode: JournalMode,
    ranges: &[(u64, u64)],
    bounded: bool,
    found: &mut Vec<Found>,
) -> Result<()> {
    let usable = ctx.db.page_size - PAGE_TRAILER;
    let skip_checksum = ctx.config.mutant() == Mutant::SkipChecksum;
    let versions = page_versions(mode);
    let count_votes = mode != JournalMode::DHL_TC;
    let mut running_max = found.iter().map(|f| f.tid).max().unwrap_or(0);
    // The marked regions lie anywhere in the file: `scan_pages` asks for all of them at
    // once. (A whole-file scan is sequential; the OS's readahead already covers it.)
    scan_pages(&ctx.db, ranges, bounded, |pgno, page| {
        let Some(heads) = versions.heads(page) else {
            return Ok(());
        };
        let candidate = count_votes && heads.iter().any(|&(t, _)| t != 0 && t >= running_max);
        let slots = candidate.then(|| versions.versions(pgno, page, usable));
        for (slot, (tid, txn_size)) in heads.into_iter().enumerate() {
            if tid > MAX_TID {
                // No commit ever gets this far (the header bounds the FCC the same way),
                // and `tid + 1` must not overflow below.
                return Err(Error::corrupt(
                    pgno,
                    format!("version claims transaction {tid}, beyond the largest tid {MAX_TID}"),
                ));
            }
            if tid != 0 {
                let valid = slots
                    .filter(|_| tid >= running_max)
                    .map(|v| v[slot].is_some_and(|d| d.valid || skip_checksum));
                found.push(Found {
                    pgno,
                    slot,
                    tid,
                    txn_size,
                    valid,
                });
            }
        }
        running_max = running_max.max(heads[0].0).max(heads[1].0);
        Ok(())
    })
}

/// Recovery, phase 4 under counting commit: the FCC the vote settles on. The newest tid
/// `M` with a valid version is complete if exactly `txn_size` valid versions carry it
/// (and agree on the size); the FCC is then `M`, else `M − 1`, and never below the
/// intent `base` (versions at or below it are committed and may lie in regions not
/// scanned, so they are left out of `found`). Validates, by a re-read, the versions the
/// scan did not, largest tid first, down to the first tid with a valid version.
fn vote(ctx: &JournalCtx, mode: JournalMode, found: &mut Vec<Found>, base: u64) -> Result<u64> {
    let db = &ctx.db;
    let usable = db.page_size - PAGE_TRAILER;
    let mutant = ctx.config.mutant();
    let skip_checksum = mutant == Mutant::SkipChecksum;
    let versions = page_versions(mode);
    let mut buf = vec![0u8; db.page_size];
    found.retain(|f| f.tid > base);
    // Only valid versions vote: a torn version's tid is readable (sector 0) but its
    // content is not there.
    found.sort_unstable_by_key(|f| std::cmp::Reverse(f.tid));
    let mut m = 0;
    let mut at = 0;
    while at < found.len() {
        let t = found[at].tid;
        let end = at + found[at..].partition_point(|f| f.tid == t);
        for f in &mut found[at..end] {
            if f.valid.is_none() {
                db.read_page(f.pgno, &mut buf)?;
                let v = versions.versions(f.pgno, &buf, usable)[f.slot];
                f.valid = Some(v.is_some_and(|d| d.valid || skip_checksum));
            }
        }
        if found[at..end].iter().any(|f| f.valid == Some(true)) {
            m = t;
            break;
        }
        at = end;
    }
    let of_m: Vec<&Found> = found
        .iter()
        .filter(|f| f.valid == Some(true) && f.tid == m)
        .collect();
    let complete = of_m.first().is_some_and(|f| {
        let votes = of_m.len() + usize::from(mutant == Mutant::VoteOffByOne);
        (of_m.len() == f.txn_size as usize || votes == f.txn_size as usize)
            && of_m.iter().all(|g| g.txn_size == f.txn_size)
    });
    Ok(if complete || m == 0 {
        m.max(base)
    } else {
        (m - 1).max(base)
    })
}

/// Recovery, phase 5: refuse a file shorter than the header at `fcc` counts (before
/// anything is written), and cut a partial last page. Returns whether it cut one.
///
/// A file ending inside a page: a growing commit's write was cut short (with
/// `chunk_pages = 0` the size becomes durable only with the commit's sync). That page lies
/// past every committed page (`need` is whole pages and the committed length is a
/// multiple of the page size), so it can only hold the in-flight transaction's version,
/// which the scan cannot see. Left in place, a later growth over the page would write
/// only its changed span and the stale version (tid FCC + 1, reused by the next
/// transaction) would vote again. It is cut away, durably with the invalidations.
fn cut_torn_tail(db: &crate::journal::DbFile, fcc: u64, pages: u64) -> Result<bool> {
    let ps = db.page_size;
    let mut p0 = vec![0u8; ps];
    db.read_page(0, &mut p0)?;
    let Some((_, h)) = visible_slot(&p0, fcc) else {
        return Ok(false);
    };
    let need = h.page_count as u64 * ps as u64;
    let len = db.file_len()?;
    if len < need {
        return Err(Error::Truncated {
            path: db.path.clone(),
            expected: need,
            actual: len,
        });
    }
    let whole = pages * ps as u64;
    if whole == len {
        return Ok(false);
    }
    debug_assert!(whole >= need);
    db.set_len(whole)?;
    Ok(true)
}

/// Recovery, phase 6: invalidate every version above `fcc` (not synced; see `recover`).
/// Returns how many, and for a rolled-back transaction how many pages were present and
/// how many it claimed.
///
/// Versions newer than the FCC are the rolled-back transaction's: valid ones, and
/// invalid ones carrying its tid (torn by the crash). Any other version claiming a tid
/// above the FCC was never written as such: that is damage, which is reported, not
/// "rolled back" (that would silently drop committed data).
fn roll_back(
    ctx: &JournalCtx,
    mode: JournalMode,
    found: &[Found],
    fcc: u64,
) -> Result<(u64, Option<(u32, u32)>)> {
    if let Some(f) = found.iter().find(|f| f.tid > fcc + 1) {
        return Err(Error::corrupt(
            f.pgno,
            format!(
                "version claims transaction {} but the last committed one is {fcc}",
                f.tid
            ),
        ));
    }
    let stale: Vec<&Found> = found.iter().filter(|f| f.tid > fcc).collect();
    // What recovery settled on, checked in release builds: only the one transaction after
    // the FCC is rolled back (anything else was refused as damage above), and under
    // counting commit a complete newest transaction is never rolled back.
    assert!(
        stale.iter().all(|f| f.tid == fcc + 1),
        "DHL recovery would roll back more than transaction {}",
        fcc + 1
    );
    let rolled_back_pages = (!stale.is_empty()).then(|| {
        let claimed = stale.iter().map(|f| f.txn_size).max().unwrap_or(0);
        (stale.len() as u32, claimed)
    });
    if let Some((present, claimed)) = rolled_back_pages {
        let complete = stale
            .iter()
            .all(|f| f.valid == Some(true) && f.txn_size == claimed)
            && present == claimed;
        assert!(
            mode == JournalMode::DHL_TC || !complete,
            "DHL recovery would roll back transaction {} although all {claimed} of its pages are valid",
            fcc + 1
        );
    }
    invalidate_stale(&ctx.db, page_versions(mode), fcc, &stale)?;
    Ok((stale.len() as u64, rolled_back_pages))
}

/// What `recover` settled on.
struct Recovered {
    fcc: u64,
    report: RecoveryReport,
    /// What the file owes before the next write: `Marked` if a clean-shutdown mark was
    /// trusted (nothing was scanned), `Unsynced` if its invalidations need a sync,
    /// `Deferred` if an ordered transaction (FCC + 1) was rolled back from page 0 alone.
    debt: Debt,
}

/// Every version above `fcc` in the pages of `ranges` (valid or not), for the deferred
/// invalidation of an ordered transaction recovery rolled back. Only `fcc + 1` can be
/// there (the transaction in flight); any larger tid is damage, refused as at recovery.
fn scan_newer(
    db: &super::dbfile::DbFile,
    versions: &dyn PageVersions,
    fcc: u64,
    ranges: &[(u64, u64)],
) -> Result<Vec<Found>> {
    let mut found = Vec::new();
    scan_pages(db, ranges, true, |at, page| {
        let Some(heads) = versions.heads(page) else {
            return Ok(());
        };
        for (slot, (tid, txn_size)) in heads.into_iter().enumerate() {
            if tid > fcc + 1 {
                return Err(Error::corrupt(
                    at,
                    format!("version claims transaction {tid} but the last committed one is {fcc}"),
                ));
            }
            if tid == fcc + 1 {
                found.push(Found {
                    pgno: at,
                    slot,
                    tid,
                    txn_size,
                    valid: None,
                });
            }
        }
        Ok(())
    })?;
    Ok(found)
}

/// Read the pages of `ranges` in chunks of `SCAN_CHUNK` bytes and hand each to `visit`.
/// `prefetch`: ask for every range at once first, so the device serves scattered ones
/// concurrently rather than one random read after another.
fn scan_pages(
    db: &super::dbfile::DbFile,
    ranges: &[(u64, u64)],
    prefetch: bool,
    mut visit: impl FnMut(Pgno, &[u8]) -> Result<()>,
) -> Result<()> {
    let ps = db.page_size;
    let chunk_pages = (SCAN_CHUNK / ps).max(1) as u64;
    let mut chunk = vec![0u8; chunk_pages as usize * ps];
    if prefetch {
        for &(start, end) in ranges {
            db.prefetch(start as Pgno, end);
        }
    }
    for &(start, end) in ranges {
        let mut pgno = start;
        while pgno < end {
            let n = chunk_pages.min(end - pgno);
            let bytes = &mut chunk[..n as usize * ps];
            db.read_pages(pgno as Pgno, bytes)?;
            for (i, page) in bytes.chunks_exact(ps).enumerate() {
                visit((pgno + i as u64) as Pgno, page)?;
            }
            pgno += n;
        }
    }
    Ok(())
}

/// Invalidate the versions in `stale` (all of transaction `fcc + 1`), without syncing,
/// and check each took: they are what makes that tid free for the next transaction.
fn invalidate_stale(
    db: &super::dbfile::DbFile,
    versions: &dyn PageVersions,
    fcc: u64,
    stale: &[&Found],
) -> Result<()> {
    let mut buf = vec![0u8; db.page_size];
    for f in stale {
        db.read_page(f.pgno, &mut buf)?;
        if f.pgno == 0 {
            let at = f.slot * HEADER_LEN;
            buf[at..at + HEADER_LEN].fill(0);
        } else {
            versions.invalidate(&mut buf, f.tid);
        }
        db.write_page(f.pgno, &buf)?;
    }
    for f in stale {
        db.read_page(f.pgno, &mut buf)?;
        let left = if f.pgno == 0 {
            decode_slot(&buf, f.slot).is_ok_and(|h| h.fcc > fcc)
        } else {
            versions
                .heads(&buf)
                .is_some_and(|h| h.iter().any(|&(t, _)| t > fcc))
        };
        if left {
            return Err(Error::Io {
                op: "recovery invalidation",
                path: db.path.clone(),
                source: std::io::Error::other(format!(
                    "page {} still carries a version newer than FCC {fcc} after it was invalidated",
                    f.pgno
                )),
            });
        }
    }
    Ok(())
}

impl CountingJournal {
    /// Write the part of `page` that differs from what the file holds (module notes): the
    /// changed span if the page existed before the transaction, else the whole page.
    ///
    /// `direct`: whether this write may go through the `O_DIRECT` handle. A direct write
    /// returns only when the device has the data, so the commit uses it when it writes a
    /// single page before its sync (the common one-row transaction); several pages go
    /// through the page cache, whose writeback the sync issues together.
    fn write_changed(
        &self,
        pgno: Pgno,
        page: &[u8],
        span: std::ops::Range<usize>,
        direct: bool,
    ) -> Result<()> {
        let db = &self.ctx.db;
        let ps = db.page_size;
        let at = db.offset(pgno);
        let Some(direct) = self.direct.as_ref().filter(|_| direct) else {
            let end = at + span.end as u64;
            db.file
                .write_at(&page[span.clone()], at + span.start as u64)
                .map_err(Error::io("write", &db.path))?;
            db.saw_len(end);
            return Ok(());
        };
        let align = self.align;
        let (s, e) = (span.start / align * align, span.end.div_ceil(align) * align);
        let e = e.min(ps);
        let mut scratch = self.scratch.lock().unwrap_or_else(|p| p.into_inner());
        let off = aligned_into(&mut scratch, &page[s..e], align);
        direct
            .write_at(&scratch[off..off + (e - s)], at + s as u64)
            .map_err(Error::io("write", &db.path))?;
        db.saw_len(at + e as u64);
        Ok(())
    }
}

impl CountingJournal {
    /// The span of each page of the batch that `write_changed` writes, computed before
    /// anything is written. A page that existed and equals its committed image would be
    /// written as nothing while `txn_size` counts it, so recovery's vote could never see
    /// the transaction complete (it would be rolled back after being acknowledged): that
    /// batch is refused whole, with the file untouched.
    fn spans(&self, batch: &CommitBatch<'_>) -> Result<Vec<std::ops::Range<usize>>> {
        let ps = self.ctx.db.page_size;
        batch
            .pages
            .iter()
            .map(
                |(pgno, page)| match batch.originals.binary_search_by_key(pgno, |(p, _)| *p) {
                    Ok(i) => changed_span(&batch.originals[i].1, page, ps - PAGE_TRAILER)
                        .ok_or_else(|| {
                            Error::corrupt(
                                *pgno,
                                format!(
                                    "dirty page of transaction {} equals its committed image, \
                                     but txn_size {} counts it",
                                    batch.tid,
                                    batch.txn_size()
                                ),
                            )
                        }),
                    Err(_) => Ok(0..ps),
                },
            )
            .collect()
    }
}

/// The phases of `Journal::commit` (in order).
impl CountingJournal {
    /// Release-mode checks, before anything is written: a batch that lies about its tid
    /// or its size would be accepted by the next recovery's vote as complete (or complete
    /// another transaction's count), i.e. lose or mix committed data. Every page must
    /// carry `(tid, txn_size)` (page 0 in a header slot). Returns `txn_size`.
    fn check_stamps(&self, batch: &CommitBatch<'_>, last: u64) -> usize {
        assert_eq!(batch.tid, last + 1, "DHL commit tid must be the FCC + 1");
        let txn_size = batch.txn_size();
        let versions = page_versions(self.mode);
        for (pgno, page) in batch.pages {
            let stamped = if *pgno == 0 {
                (0..HEADER_SLOTS).any(|slot| {
                    decode_slot(page, slot)
                        .is_ok_and(|h| h.fcc == batch.tid && h.last_txn_size as usize == txn_size)
                })
            } else {
                versions.heads(page).is_some_and(|heads| {
                    heads
                        .iter()
                        .any(|&(t, n)| t == batch.tid && n as usize == txn_size)
                })
            };
            assert!(
                stamped,
                "page {pgno} of transaction {} does not carry (tid, txn_size {txn_size})",
                batch.tid
            );
        }
        txn_size
    }

    /// Account for every version the transaction spilled (`pending`), and invalidate,
    /// durably, those no longer part of it (`batch.discard`).
    ///
    /// What recovery votes with must be exactly this transaction's pages: a spilled
    /// version the batch neither restamps nor discards would stay valid with txn_size 0
    /// beside the stamped ones, and the vote would roll back the acknowledged commit after
    /// a crash (checked in release builds). The discarded ones go first and are synced:
    /// while one is in the file with the transaction's stamped pages, the vote sees mixed
    /// sizes and rolls the transaction back, and if recovery's invalidations were then cut
    /// short, losing all but that one's, the next recovery would count the stamped pages
    /// complete and bring back a transaction the first one rolled back. With none left, a
    /// spilled version beside stamped ones is one still to be restamped, which the count
    /// (`txn_size` includes it) already misses: partial invalidation can only keep a
    /// transaction incomplete. (Found by the torture.)
    fn settle_discarded(&self, batch: &CommitBatch<'_>, pending: &BTreeSet<Pgno>) -> Result<()> {
        if !pending.is_empty() {
            let named: BTreeSet<Pgno> = batch
                .pages
                .iter()
                .map(|(p, _)| *p)
                .chain(batch.restamp.iter().copied())
                .chain(batch.discard.iter().copied())
                .collect();
            assert!(
                pending.iter().all(|p| named.contains(p)),
                "commit of transaction {} leaves spilled pages {:?} unaccounted for",
                batch.tid,
                pending.difference(&named).collect::<Vec<_>>()
            );
        }
        if let Some(p) = batch
            .restamp
            .iter()
            .chain(batch.discard)
            .find(|p| !pending.contains(p))
        {
            return Err(Error::InvalidArgument(format!(
                "commit of transaction {} names page {p} as spilled, but no spill wrote it",
                batch.tid
            )));
        }
        if !batch.discard.is_empty() {
            self.invalidate_spilled(batch.tid, batch.discard)?;
            if self.ctx.config.mutant() != Mutant::SpillLeftover {
                self.ctx.db.sync()?;
            }
        }
        Ok(())
    }

    /// Whether a transaction of `txn_size` pages commits in order (module notes): one
    /// flush more than a counting commit, and a crash in it is recovered from page 0.
    fn commits_in_order(&self, txn_size: usize) -> bool {
        let threshold = self
            .ctx
            .config
            .ordered_commit_pages
            .unwrap_or(DEFAULT_ORDERED_PAGES) as usize;
        self.mode != JournalMode::DHL_TC && threshold > 0 && txn_size >= threshold
    }

    /// Page 0 as this commit writes it, if the batch has it, and the intent area its new
    /// slot carries.
    ///
    /// A commit that writes page 0 gives both slots the durable area (which, after the
    /// marking write, covers this commit's regions: a true claim for the new slot too),
    /// or, with none, its new slot `tid − 1` plus its own regions. The pager's image of
    /// page 0 may carry older areas, which must not be written back; sector 0 is written
    /// whole (`spans`).
    fn patch_page0(
        &self,
        batch: &CommitBatch<'_>,
        intent: Option<&Intent>,
        ordered: bool,
        written: &[Pgno],
        spans: &mut [std::ops::Range<usize>],
    ) -> Result<Option<(Vec<u8>, Intent)>> {
        let Some(i) = batch.pages.iter().position(|(p, _)| *p == 0) else {
            return Ok(None);
        };
        let mut img = batch.pages[i].1.to_vec();
        let new_slot = (0..HEADER_SLOTS)
            .find(|&s| decode_slot(&img, s).is_ok_and(|h| h.fcc == batch.tid))
            .expect("checked above: page 0 carries the new header");
        let kept = 1 - new_slot;
        // A clean-shutdown mark the pager's image of the kept slot may still carry must
        // not be written back: it would vouch for a file that has changed.
        if decode_slot(&img, kept).is_ok() && clean_mark(&img, kept) != 0 {
            void_mark(&mut img, kept, self.ctx.config.mutant());
        }
        let own = match intent {
            // Its slot reaches the disk only after every other page is durable, so once
            // it is there no version lies above its tid.
            Some(i) if ordered => {
                i.encode(&mut img, kept);
                settled(Some(i), batch.tid, self.min_shift())
            }
            Some(i) => {
                i.encode(&mut img, kept);
                i.clone()
            }
            None => {
                // Read page 0 only here: a direct write of page 0 drops it from the page
                // cache, so a read per commit would cost a device read.
                let disk = self.disk_page0()?;
                let r = intent::AREA_AT + kept * intent::AREA;
                img[r..r + intent::AREA].copy_from_slice(&disk[r..r + intent::AREA]);
                fresh_intent(batch.tid - 1, written, self.min_shift())
            }
        };
        own.encode(&mut img, new_slot);
        crate::page::stamp_crc(&mut img, 0);
        spans[i] = 0..spans[i].end.max(SECTOR);
        Ok(Some((img, own)))
    }

    /// Grow the file to the batch's page count. Growth a page at a time
    /// (`chunk_pages == 0`) sizes it explicitly, since a page allocated and freed within
    /// the transaction is never written; the commit's fdatasync makes the size durable
    /// with the pages.
    fn grow_for(&self, batch: &CommitBatch<'_>) -> Result<()> {
        let db = &self.ctx.db;
        db.ensure_capacity(batch.new_page_count)?;
        if db.chunk_pages == 0 {
            let need = batch.new_page_count as u64 * db.page_size as u64;
            if !db.len_at_least(need)? {
                db.set_len(need)?;
            }
        }
        Ok(())
    }

    /// Write a counting commit: every page (page 0 as patched), the spilled ones
    /// restamped, then one fdatasync.
    fn write_counted(
        &self,
        batch: &CommitBatch<'_>,
        spans: &[std::ops::Range<usize>],
        page0: Option<&[u8]>,
    ) -> Result<()> {
        let single = batch.pages.len() == 1 && batch.restamp.is_empty();
        for ((pgno, page), span) in batch.pages.iter().zip(spans) {
            self.write_changed(*pgno, pick(page0, *pgno, page), span.clone(), single)?;
        }
        self.settle_spilled(batch)?;
        if self.ctx.config.mutant() != Mutant::NoSyncAtCommit {
            self.ctx.db.sync()?;
        }
        Ok(())
    }

    /// Write an ordered commit (`dhl-tc`, or a large transaction): every page but page 0,
    /// the spilled ones restamped, fdatasync; then the mark — page 0 with its header slot,
    /// or, for an ordered transaction that leaves the header alone, the intent area
    /// rewritten to claim its tid — and fdatasync again.
    fn write_in_order(
        &self,
        batch: &CommitBatch<'_>,
        spans: &[std::ops::Range<usize>],
        page0: Option<&[u8]>,
        ordered: bool,
        intent: &mut Option<Intent>,
    ) -> Result<()> {
        let db = &self.ctx.db;
        let mutant = self.ctx.config.mutant();
        let header = batch.pages.iter().find(|(p, _)| *p == 0).map(|(_, h)| h);
        if header.is_none() && !ordered {
            return Err(Error::InvalidArgument(
                "dhl-tc commit without the header page (its commit mark)".into(),
            ));
        }
        let single = batch.pages.len() == 2;
        let mut header_span = None;
        for ((pgno, page), span) in batch.pages.iter().zip(spans) {
            if *pgno == 0 {
                header_span = Some(span.clone());
            } else {
                self.write_changed(*pgno, page, span.clone(), single)?;
            }
        }
        self.settle_spilled(batch)?;
        if mutant != Mutant::NoSyncBeforeMark {
            db.sync()?;
        }
        match header {
            Some(header) => {
                let header = pick(page0, 0, header);
                let span = header_span.unwrap_or(0..db.page_size);
                self.write_changed(0, header, span, true)?;
                if mutant != Mutant::NoSyncAtCommit {
                    db.sync()?;
                }
            }
            None => {
                // Every page of it is durable now, so no version lies above its tid.
                let own = settled(intent.as_ref(), batch.tid, self.min_shift());
                self.rewrite_page0(batch.tid - 1, Some(&own))?;
                *intent = Some(own);
            }
        }
        Ok(())
    }
}

/// Every page that holds or will hold a version of the transaction: the batch's pages
/// but page 0 (sorted and distinct) and the ones it spilled.
fn holders(batch: &CommitBatch<'_>, pending: &BTreeSet<Pgno>) -> Vec<Pgno> {
    let mut written: Vec<Pgno> = batch
        .pages
        .iter()
        .map(|(p, _)| *p)
        .filter(|&p| p != 0)
        .collect();
    if !pending.is_empty() {
        written.extend(pending.iter().copied());
        written.sort_unstable();
        written.dedup();
    }
    written
}

/// The image to write: page 0 as patched (`CountingJournal::patch_page0`), every other page
/// as given.
fn pick<'x>(page0: Option<&'x [u8]>, pgno: Pgno, page: &'x [u8]) -> &'x [u8] {
    match (page0, pgno) {
        (Some(img), 0) => img,
        _ => page,
    }
}

impl Journal for CountingJournal {
    fn settle_recovery(&self) -> Result<()> {
        self.sync_recovery()
    }

    fn read_page(&self, pgno: Pgno, buf: &mut [u8]) -> Result<()> {
        self.ctx.db.read_page(pgno, buf)?;
        // Checked after the read: the deferred invalidation clears the tid before any
        // version reusing it is written, so a read that still sees the tid set read the
        // file before that.
        let void = self.void_tid.load(Ordering::Acquire);
        if void != 0 && pgno != 0 {
            page_versions(self.mode).invalidate(buf, void);
        }
        Ok(())
    }

    /// A counting (or, for `dhl-tc` and large transactions, ordered) commit, in named
    /// phases: check what the pager built, pay the journal's debt, account for spilled
    /// versions, mark the regions the commit writes, patch page 0's intent areas, grow
    /// the file, write and sync, publish. Nothing is written before the checks pass.
    fn commit(&self, batch: &CommitBatch<'_>) -> Result<()> {
        let _w = self.lock_writer()?;
        check_batch(batch, self.ctx.db.page_size, true)?;
        let last = self.last_tid.load(Ordering::Acquire);
        let txn_size = self.check_stamps(batch, last);
        let mut spans = self.spans(batch)?;
        self.sync_recovery()?;
        let mut pending = lock_pending(&self.pending)?;
        self.settle_discarded(batch, &pending)?;
        let written = holders(batch, &pending);
        let mut intent = self.intent.lock().map_err(|_| {
            Error::Poisoned("a thread panicked while committing (DHL intent lock)".into())
        })?;
        let ordered = self.commits_in_order(txn_size);
        let coarse_ok = !pending.is_empty() || ordered;
        self.mark_intent(last, &mut intent, &written, coarse_ok, ordered)?;
        let page0 = self.patch_page0(batch, intent.as_ref(), ordered, &written, &mut spans)?;
        self.grow_for(batch)?;
        let page0_img = page0.as_ref().map(|(img, _)| img.as_slice());
        if self.mode == JournalMode::DHL_TC || ordered {
            self.write_in_order(batch, &spans, page0_img, ordered, &mut intent)?;
        } else {
            self.write_counted(batch, &spans, page0_img)?;
        }
        // Published: the area page 0 now carries, the spills settled, the tid.
        if let Some((_, own)) = page0 {
            *intent = Some(own);
        }
        pending.clear();
        if let Ok(mut recent) = self.recent.lock() {
            recent.extend(written.iter().copied());
            let excess = recent.len().saturating_sub(RECENT_PAGES);
            recent.drain(..excess);
        }
        self.last_tid.store(batch.tid, Ordering::Release);
        Ok(())
    }

    fn close(&self) -> Result<()> {
        self.close_with(None)
    }

    fn steal(&self) -> Option<&dyn Steal> {
        Some(self)
    }

    fn keeps_free(&self) -> Option<&dyn KeepsFree> {
        Some(self)
    }
}

impl Steal for CountingJournal {
    fn spill(
        &self,
        tid: u64,
        pages: &[(Pgno, PageRef)],
        originals: &[(Pgno, PageRef)],
    ) -> Result<()> {
        let _w = self.lock_writer()?;
        let db = &self.ctx.db;
        let last = self.last_tid.load(Ordering::Acquire);
        // Release-mode checks: a spilled version must never vote (txn_size 0 never
        // equals a count of pages), and it must belong to the transaction in flight.
        assert_eq!(tid, last + 1, "DHL spill tid must be the FCC + 1");
        let versions = page_versions(self.mode);
        for (pgno, page) in pages {
            assert!(
                *pgno != 0
                    && page.len() == db.page_size
                    && versions
                        .heads(page)
                        .is_some_and(|h| h.iter().any(|&(t, n)| t == tid && n == 0)),
                "spilled page {pgno} does not carry (tid {tid}, txn_size 0)"
            );
        }
        let usable = db.page_size - PAGE_TRAILER;
        let spans: Vec<std::ops::Range<usize>> = pages
            .iter()
            .map(
                |(pgno, page)| match originals.binary_search_by_key(pgno, |(p, _)| *p) {
                    Ok(i) => changed_span(&originals[i].1, page, usable).unwrap_or(0..0),
                    Err(_) => 0..db.page_size,
                },
            )
            .collect();
        self.sync_recovery()?;
        let mut pending = lock_pending(&self.pending)?;
        let written: Vec<Pgno> = pending
            .iter()
            .copied()
            .chain(pages.iter().map(|(p, _)| *p))
            .collect::<BTreeSet<Pgno>>()
            .into_iter()
            .collect();
        // A transaction that spills once spills again, mostly into pages it grows the
        // file by: when this spill must mark regions anyway, it marks room for the next
        // spills too (twice this one), so most of them need no marking write, nor its
        // sync. Marking pages never written keeps the claim true. The file itself grows
        // only to what this spill writes (in growth steps): room grown ahead would stay
        // in the file as zeros after the commit (a 100,000-row load left 2.5 times its
        // pages).
        let end = pages.iter().map(|(p, _)| *p + 1).max().unwrap_or(1);
        let room = end.saturating_add(2 * pages.len() as u32);
        {
            let mut intent = self.intent.lock().map_err(|_| {
                Error::Poisoned("a thread panicked while spilling (DHL intent lock)".into())
            })?;
            let covered = intent
                .as_ref()
                .is_some_and(|i| i.covers(written.iter().copied()));
            let written: Vec<Pgno> = if covered {
                written
            } else {
                written.into_iter().chain(end..room).collect()
            };
            if self.ctx.config.mutant() == Mutant::SpillOutsideIntent {
                // The bug: a fresh area for this spill's pages alone.
                let own: Vec<Pgno> = pages.iter().map(|(p, _)| *p).collect();
                let mut fresh = None;
                self.mark_intent(last, &mut fresh, &own, true, false)?;
                *intent = fresh;
            } else {
                self.mark_intent(last, &mut intent, &written, true, false)?;
            }
        }
        if !db.len_at_least(u64::from(end) * db.page_size as u64)? {
            db.ensure_capacity(end)?;
        }
        for ((pgno, page), span) in pages.iter().zip(spans) {
            if !span.is_empty() {
                self.write_changed(*pgno, page, span, false)?;
            }
            pending.insert(*pgno);
        }
        Ok(())
    }

    fn discard(&self, tid: u64, pages: &[Pgno]) -> Result<()> {
        let _w = self.lock_writer()?;
        let last = self.last_tid.load(Ordering::Acquire);
        assert_eq!(tid, last + 1, "DHL discard tid must be the FCC + 1");
        let mut pending = lock_pending(&self.pending)?;
        self.invalidate_spilled(tid, pages)?;
        for p in pages {
            pending.remove(p);
        }
        // The invalidations must be durable before the tid is reused and before a
        // marking write may drop their regions from the intent map: the next commit,
        // spill or clean close syncs them first (`sync_recovery`), exactly as recovery's.
        let mut debt = self.debt()?;
        self.transition(&mut debt, Debt::Unsynced);
        Ok(())
    }
}

impl KeepsFree for CountingJournal {
    fn close_keeping_free(&self, free: &BTreeSet<Pgno>) -> Result<()> {
        self.close_with(Some(free))
    }

    fn kept_free_pages(&self) -> Result<Option<BTreeSet<Pgno>>> {
        let stale = self.ctx.config.mutant() == Mutant::StaleFreeSnapshot;
        if !matches!(*self.debt()?, Debt::Marked) && !stale {
            return Ok(None);
        }
        let fcc = self.last_tid.load(Ordering::Acquire);
        let p0 = self.disk_page0()?;
        let Some((slot, h)) = visible_slot(&p0, fcc) else {
            return Ok(None);
        };
        if clean_mark(&p0, slot) != fcc && !stale {
            return Ok(None);
        }
        let Some(r) = free_snapshot_ref(&p0, slot) else {
            return Ok(None);
        };
        freesnap::read(&self.ctx.db, &r, fcc, h.page_count, !stale)
    }
}

impl CountingJournal {
    /// Before versions of transaction `last + 1` are written into `written` (every page
    /// that holds or will hold one, spilled pages included): void a clean-shutdown mark,
    /// and mark their regions in the visible slot's intent area (`intent`), durably.
    /// An area left large or coarse (a big transaction's header write marks all it
    /// touched) is also rewritten, so recovery's scan stays bounded by `CAP` regions or
    /// the scan budget (`intent_scan_mib`, default `SCAN_BUDGET_BYTES`) —
    /// except while a transaction spills (`coarse_ok`): its area is coarse by nature, and
    /// the first commit after it resets the area anyway.
    ///
    /// `ordered`: the area must say that transaction `last + 1` commits in order (base
    /// `last`, flag set); otherwise it must not say so, since a complete counting commit
    /// under such an area would be rolled back. Spills mark unordered: whether the
    /// transaction commits in order is decided at its commit, which marks again if so.
    fn mark_intent(
        &self,
        last: u64,
        intent: &mut Option<Intent>,
        written: &[Pgno],
        coarse_ok: bool,
        ordered: bool,
    ) -> Result<()> {
        let mutant = self.ctx.config.mutant();
        let min = self.min_shift();
        let ps = self.ctx.db.page_size as u64;
        let budget = self
            .ctx
            .config
            .intent_scan_mib
            .map_or(intent::SCAN_BUDGET_BYTES, |m| u64::from(m) << 20);
        let within_budget = |i: &Intent| ((i.marked() as u64) << i.shift) * ps <= budget;
        let fine = |i: &Intent| {
            coarse_ok
                || (i.marked() <= intent::CAP
                    && (i.shift <= min + intent::MAX_DOUBLINGS || within_budget(i)))
        };
        let covered = intent.as_ref().is_some_and(|i| {
            i.covers(written.iter().copied())
                && fine(i)
                && (i.ordered == ordered || mutant == Mutant::OrderedAreaKept)
                && (!ordered || i.base == last)
        });
        let grown = (!covered && mutant != Mutant::SkipIntent).then(|| {
            let mut n = intent
                .as_ref()
                .map(|i| i.with(written.iter().copied()).fit(intent::CAP))
                .filter(|n| fine(n))
                .unwrap_or_else(|| self.reset_intent(last, written));
            // Raising the base only narrows the claim: everything up to `last` is
            // committed and synced.
            if ordered {
                n.base = last;
            }
            n.ordered = ordered;
            n
        });
        let void = matches!(*self.debt()?, Debt::Marked) && mutant != Mutant::KeepCleanMark;
        if void || grown.is_some() {
            self.rewrite_page0(last, grown.as_ref())?;
            if grown.is_some() {
                *intent = grown;
            }
        }
        Ok(())
    }

    /// A fresh intent area at `last` for `written`, also marking the regions the last
    /// commits wrote (newest first) until it is two regions short of `CAP`, at the finest
    /// region size. Marking pages nobody writes keeps the area's claim true, and recovery
    /// still scans at most `CAP` regions. Measured (`BENCHMARKS.md`, "IPS"): keeping up to
    /// `CAP / 2` regions, then `3/4`, then `CAP − 2` took the marking writes of 3,000
    /// one-row updates from 778 to 611 to 440 (`ips`) and 479 / 312 / 226 (`dhl-cc`).
    fn reset_intent(&self, last: u64, written: &[Pgno]) -> Intent {
        let mut area = fresh_intent(last, written, self.min_shift());
        if let Ok(recent) = self.recent.lock() {
            for &p in recent.iter().rev() {
                if area.marked() >= intent::CAP - 2 {
                    break;
                }
                let more = area.with([p]);
                if more.shift != area.shift {
                    break;
                }
                area = more;
            }
        }
        area
    }

    /// The commit's part for spilled pages, before its sync: stamp each version in
    /// `batch.restamp` with the transaction's size (a rewrite of its descriptor, in
    /// sector 0, which a torn write can only leave invalid, i.e. counted missing). One
    /// page at a time: a stealing transaction's pages are never all in memory. (Those in
    /// `batch.discard` were invalidated, durably, before any page was written.)
    fn settle_spilled(&self, batch: &CommitBatch<'_>) -> Result<()> {
        if batch.restamp.is_empty() {
            // The common commit spilled nothing: no page buffer to allocate and zero.
            return Ok(());
        }
        let db = &self.ctx.db;
        let ps = db.page_size;
        let g = crate::page::Geometry {
            page_size: ps,
            usable: ps - PAGE_TRAILER,
        };
        let txn_size = batch.txn_size() as u32;
        let versions = page_versions(self.mode);
        let layout = self.mode.layout();
        let mut buf = vec![0u8; ps];
        for &pgno in batch.restamp {
            if self.ctx.config.mutant() == Mutant::SpillNotRestamped {
                break;
            }
            db.read_page(pgno, &mut buf)?;
            let spilled = PageRef::from(buf.clone());
            let stamp = Stamp::serial(batch.tid, txn_size);
            let stamped = layout.finalize(pgno, spilled.clone(), g, stamp)?;
            assert!(
                versions
                    .heads(&stamped)
                    .is_some_and(|h| h.iter().any(|&(t, n)| t == batch.tid && n == txn_size)),
                "restamped page {pgno} does not carry (tid {}, txn_size {txn_size})",
                batch.tid
            );
            let span = changed_span(&buf, &stamped, g.usable).ok_or_else(|| {
                Error::corrupt(pgno, "restamping a spilled version changed nothing")
            })?;
            self.write_changed(pgno, &stamped, span, false)?;
        }
        Ok(())
    }

    /// Zero the tid of `tid`'s versions in `pages` (sector 0 only; not synced).
    fn invalidate_spilled(&self, tid: u64, pages: &[Pgno]) -> Result<()> {
        if self.ctx.config.mutant() == Mutant::SpillLeftover {
            return Ok(());
        }
        let db = &self.ctx.db;
        let versions = page_versions(self.mode);
        let mut buf = vec![0u8; db.page_size];
        for &pgno in pages {
            db.read_page(pgno, &mut buf)?;
            if versions.invalidate(&mut buf, tid) {
                self.write_changed(pgno, &buf, 0..SECTOR.min(db.page_size), false)?;
            }
        }
        Ok(())
    }
}

impl CountingJournal {
    /// The journal's writer lock: one commit, spill, discard or close at a time.
    fn lock_writer(&self) -> Result<std::sync::MutexGuard<'_, ()>> {
        self.writer.lock().map_err(|_| {
            Error::Poisoned("a thread panicked while committing (DHL writer lock)".into())
        })
    }
}

fn lock_pending(m: &Mutex<BTreeSet<Pgno>>) -> Result<std::sync::MutexGuard<'_, BTreeSet<Pgno>>> {
    m.lock()
        .map_err(|_| Error::Poisoned("a thread panicked while committing (DHL spill lock)".into()))
}

impl CountingJournal {
    /// Clean shutdown: mark page 0 clean at the FCC, so the next open need not scan, and
    /// with `free` keep the free pages for the next session's first write (`freesnap`).
    /// No commit is in flight (the writer lock), and every commit so far was synced, so
    /// no version newer than the FCC is in the file; the snapshot pages are written
    /// first, then the mark and the snapshot's reference into the slot visible at the FCC
    /// (its fcc and txn_size, which recovery votes with, unchanged), inside sector 0, and
    /// one sync covers both (the snapshot's crc catches a chain the crash cut short).
    fn close_with(&self, free: Option<&BTreeSet<Pgno>>) -> Result<()> {
        let _w = self.lock_writer()?;
        self.sync_recovery()?;
        let db = &self.ctx.db;
        let fcc = self.last_tid.load(Ordering::Acquire);
        let mut p0 = self.disk_page0()?;
        let Some((slot, h)) = visible_slot(&p0, fcc) else {
            return Ok(()); // nothing to vouch for; the next open scans
        };
        if clean_mark(&p0, slot) == fcc
            && (free.is_none() || free_snapshot_ref(&p0, slot).is_some())
        {
            return Ok(()); // nothing written since the mark, which keeps its snapshot
        }
        // What a commit wrote must stay below the page count it committed: a free page
        // at or past it is a bug that a snapshot would turn into a lost page.
        let snapshot = match free {
            Some(f) => {
                assert!(
                    f.last().is_none_or(|&p| p < h.page_count) && !f.contains(&0),
                    "free set outside 1..{} at close",
                    h.page_count
                );
                Some(freesnap::write(db, f, fcc)?)
            }
            None => None,
        };
        set_clean_mark(&mut p0, slot, fcc, snapshot);
        // No version above the FCC exists now, so an empty intent area at base FCC is a
        // true claim: a crash in the next session's first commit (whose marking write
        // also voids the mark, so it costs nothing more) then scans only that commit's
        // regions, not the ones earlier sessions left marked.
        fresh_intent(fcc, &[], self.min_shift()).encode(&mut p0, slot);
        db.write_page(0, &p0)?;
        db.sync()?;
        *self.intent.lock().map_err(|_| {
            Error::Poisoned("a thread panicked while committing (DHL intent lock)".into())
        })? = Intent::decode(&p0, slot);
        let mut debt = self.debt()?;
        self.transition(&mut debt, Debt::Marked);
        Ok(())
    }
}

impl CountingJournal {
    /// Page 0 as the file holds it (the journal's own writes of sector 0 included, which
    /// the pager's cached image may lack).
    fn disk_page0(&self) -> Result<Vec<u8>> {
        let mut p0 = vec![0u8; self.ctx.db.page_size];
        self.ctx.db.read_page(0, &mut p0)?;
        Ok(p0)
    }

    /// Make recovery's invalidations durable, once, before anything depends on them:
    /// first those recovery deferred (an ordered transaction's versions, found by scanning
    /// the regions its area marks), then the sync.
    fn sync_recovery(&self) -> Result<()> {
        let mut debt = self.debt()?;
        if let Debt::Deferred(area) = &*debt {
            let db = &self.ctx.db;
            let pages = db.file_len()? / db.page_size as u64;
            let stale = scan_newer(db, page_versions(self.mode), self.fcc, &area.ranges(pages))?;
            let stale: Vec<&Found> = stale.iter().collect();
            if self.ctx.config.mutant() != Mutant::DeferredNotInvalidated {
                invalidate_stale(db, page_versions(self.mode), self.fcc, &stale)?;
            }
        }
        if matches!(*debt, Debt::Deferred(_) | Debt::Unsynced) {
            if self.ctx.config.mutant() != Mutant::UnsyncedRecovery {
                self.ctx.db.sync()?;
            }
            self.transition(&mut debt, Debt::Settled);
        }
        Ok(())
    }

    /// The debt, under its lock (only writers change it, under the writer lock too).
    fn debt(&self) -> Result<std::sync::MutexGuard<'_, Debt>> {
        self.debt.lock().map_err(|_| {
            Error::Poisoned("a thread panicked while recovering (DHL debt lock)".into())
        })
    }

    /// Move `debt` to `next`: an arrow of the `Debt` diagram (checked in debug builds),
    /// with `void_tid` published to match.
    fn transition(&self, debt: &mut Debt, next: Debt) {
        debug_assert!(
            debt.may_become(&next),
            "DHL debt {debt:?} cannot become {next:?}"
        );
        let void = match next {
            Debt::Deferred(_) => self.fcc + 1,
            _ => 0,
        };
        self.void_tid.store(void, Ordering::Release);
        *debt = next;
    }

    fn min_shift(&self) -> u8 {
        self.ctx
            .config
            .intent_region_pages
            .map_or(intent::DEFAULT_MIN_SHIFT, |n| n.trailing_zeros() as u8)
    }

    /// Rewrite page 0 in place before a commit writes anything, and sync: void the
    /// clean-shutdown mark (a crash during the commit must find no mark vouching for the
    /// old FCC) and, with `intent`, store it in the area of the slot visible at `fcc`.
    /// Only sector 0 changes, and it is written whole.
    fn rewrite_page0(&self, fcc: u64, intent: Option<&Intent>) -> Result<()> {
        let db = &self.ctx.db;
        let mut p0 = self.disk_page0()?;
        let keep = self.ctx.config.mutant() == Mutant::KeepCleanMark;
        for slot in (0..HEADER_SLOTS).filter(|_| !keep) {
            if decode_slot(&p0, slot).is_ok() && clean_mark(&p0, slot) != 0 {
                void_mark(&mut p0, slot, self.ctx.config.mutant());
            }
        }
        if let Some(i) = intent {
            let (slot, _) = visible_slot(&p0, fcc)
                .ok_or_else(|| Error::corrupt(0, format!("no header slot visible at FCC {fcc}")))?;
            i.encode(&mut p0, slot);
        }
        db.write_page(0, &p0)?;
        db.sync()?;
        let mut debt = self.debt()?;
        debug_assert!(
            matches!(*debt, Debt::Marked | Debt::Settled),
            "a marking write before sync_recovery paid {debt:?}"
        );
        self.transition(&mut debt, Debt::Settled);
        Ok(())
    }
}

/// Void the clean-shutdown mark of `slot` and the free-space snapshot that depends on it
/// (the `StaleFreeSnapshot` mutant leaves the snapshot's reference in place).
fn void_mark(page0: &mut [u8], slot: usize, mutant: Mutant) {
    let keep = match mutant {
        Mutant::StaleFreeSnapshot => free_snapshot_ref(page0, slot),
        _ => None,
    };
    set_clean_mark(page0, slot, 0, keep);
}

/// The area an ordered commit of `tid` leaves once its pages are durable: `base = tid`,
/// not ordered, still marking the regions its marking write marked (nothing lies above
/// `tid`, so any regions make a true claim; keeping them spares the next commits the
/// marking writes a counting commit's area would have spared them).
fn settled(marking: Option<&Intent>, tid: u64, min_shift: u8) -> Intent {
    let mut own = marking
        .cloned()
        .unwrap_or_else(|| Intent::empty(tid, min_shift));
    own.base = tid;
    own.ordered = false;
    own
}

/// An intent area claiming `base` and the regions of `pages`.
fn fresh_intent(base: u64, pages: &[Pgno], min_shift: u8) -> Intent {
    Intent::empty(base, min_shift).with(pages.iter().copied())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changed_span_is_sector_aligned_and_skips_the_trailer() {
        let old = vec![0u8; 4096];
        let usable = 4096 - PAGE_TRAILER;
        assert_eq!(changed_span(&old, &old, usable), None);
        let mut new = old.clone();
        new[4095] = 1; // trailer only
        assert_eq!(changed_span(&old, &new, usable), None);
        new[3] = 1;
        assert_eq!(changed_span(&old, &new, usable), Some(0..512));
        new[1500] = 1;
        assert_eq!(changed_span(&old, &new, usable), Some(0..1536));
        let mut new = old.clone();
        new[512] = 7;
        new[1023] = 7;
        assert_eq!(changed_span(&old, &new, usable), Some(512..1024));
        new[usable - 1] = 7;
        assert_eq!(changed_span(&old, &new, usable), Some(512..4096));
    }

    #[test]
    fn aligned_copies_are_aligned() {
        for align in [512, 4096] {
            for len in [0, 1, 512, 4096] {
                let bytes: Vec<u8> = (0..len).map(|i| i as u8).collect();
                let mut buf = Vec::new();
                for _ in 0..2 {
                    let off = aligned_into(&mut buf, &bytes, align);
                    assert_eq!(buf[off..].as_ptr() as usize % align, 0);
                    assert_eq!(&buf[off..off + len], &bytes[..]);
                }
            }
        }
    }
}
