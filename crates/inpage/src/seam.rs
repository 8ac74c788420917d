//! The one seam for planted bugs: every deliberately broken variant of the engine is
//! declared here, and the product code asks only this module whether one is in force.
//! The test suites plant each to show they catch it; a build that stores data cannot
//! reach any of them.
//!
//! Two kinds, because they are chosen at two scopes:
//! - [`Mutant`]: a broken commit, recovery or snapshot protocol, chosen per database
//!   (`Config::mutant`), so the torture harness can run each beside the correct engine in
//!   one process. Settable only with the `mutants` cargo feature; without it
//!   `JournalConfig::mutant()` is the constant `Mutant::None` and every broken branch
//!   folds away.
//! - [`Plant`]: a broken page checksum or concurrency-control step, planted per thread by
//!   the engine's own unit tests ([`plant`]), where the code that would break has no
//!   database to ask. Compiled only into that test build: elsewhere [`planted`] is the
//!   constant `false`.
//!
//! Invariant: a switch is a one-line `if` at the place it breaks, so the correct path is
//! the code read everywhere else, and nothing outside this module decides whether a bug
//! is planted.

/// A deliberately broken commit or recovery variant (a mutant), for the torture harness's
/// mutation test: each must be caught, or the harness proves nothing. Every switch is a
/// one-line `if` at the place it breaks, so the correct path is the code read everywhere
/// else. `None` is the engine.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Mutant {
    /// The engine as written.
    #[default]
    None,
    /// No sync before the commit mark: rollback modes overwrite the database while the
    /// journal is volatile; `dhl-tc`, and the ordered commit of the counting modes, write
    /// the header slot before the other pages are durable.
    NoSyncBeforeMark,
    /// No sync at commit: `dhl-cc`/`dhl-cc-header`/`dhl-tc`, `wal` (FULL) and `waldio` acknowledge
    /// with the commit's writes still volatile.
    NoSyncAtCommit,
    /// Checksums not verified: DHL recovery takes a torn version as valid; the WAL and
    /// WALDIO scans take a frame whose chain checksum fails.
    SkipChecksum,
    /// DHL recovery's invalidation writes are not synced.
    UnsyncedRecovery,
    /// The counting vote accepts a transaction with one page missing.
    VoteOffByOne,
    /// WAL and WALDIO recovery replay the frames after the last commit frame.
    WalPastCommit,
    /// DHL: the clean-shutdown mark is not voided before the first commit after a
    /// reopen, so a crash in that commit is opened as clean at the old FCC. DASH: the
    /// mark keeps vouching for the older file that commit half rewrote.
    KeepCleanMark,
    /// DHL: a commit writes into regions its intent area does not mark, so recovery's
    /// bounded scan misses its versions.
    SkipIntent,
    /// DHL: the free-space snapshot of a clean close is trusted after the file changed:
    /// voiding the mark leaves it in place, and loading it checks neither the mark nor
    /// the FCC it was written at.
    StaleFreeSnapshot,
    /// Steal: a spill resets the intent area to its own pages, dropping the regions of
    /// the pages earlier spills of the transaction wrote from recovery's scan.
    SpillOutsideIntent,
    /// Steal: the commit counts its spilled pages in `txn_size` but does not stamp them,
    /// so recovery's vote never sees the transaction complete.
    SpillNotRestamped,
    /// Steal: versions spilled by a transaction that rolled back (or by pages it freed)
    /// are left valid, to be confused with the next transaction reusing the tid.
    SpillLeftover,
    /// DASH: a commit leaves out the pages the previous transaction wrote, so the older
    /// file it turns current still holds their images from two commits ago.
    ShadowSkipPrevious,
    /// WALDIO: the checkpoint starts the next log generation (a header with new salts,
    /// synced) without syncing the pages it copied into the database, so a power cut
    /// loses them with the log that held them.
    UnsyncedCheckpoint,
    /// NVLOG: the flusher advances the region's durable watermark before the fdatasync
    /// that makes the flushed commits durable in the file, so a power cut between the
    /// two loses commits the region no longer holds.
    WatermarkBeforeSync,
    /// NVLOG: recovery replays region records past one whose checksum fails (a torn
    /// record of an unacknowledged commit), applying garbage.
    ReplayPastBadChecksum,
    /// DHL: an ordered intent area counts as covering a counting commit (after recovery
    /// rolled back an ordered transaction from page 0 it also stays the in-memory area), so
    /// that commit writes no marking write and the area keeps saying its tid never
    /// committed.
    OrderedAreaKept,
    /// DHL: the versions of an ordered transaction recovery rolled back from page 0 are
    /// never invalidated on disk, to be confused with the next transaction reusing the
    /// tid.
    DeferredNotInvalidated,
    /// NVLOG: a flush's single WAL transaction is named by its last commit alone, not
    /// the range of commits it stands for, so after a checkpoint the next open's window
    /// check refuses the log (or, cut short, keeps the file behind the watermark).
    BatchPerCommitTids,
    /// NVLOG: a flush writes the pages past the file's committed end in place but does
    /// not fdatasync the database before the WAL transaction that links them in, so a
    /// power cut can keep the transaction and lose the pages.
    DirectPagesUnsynced,
    /// REDO: the ring a session's first commit creates gets no watermark slot before its
    /// first record, so a recovery finds no slot, replays nothing, and loses every
    /// acknowledged commit still in the ring.
    RingUnmarked,
    /// REDO: a record is accepted with less than a store unit (a sector, with `O_DIRECT`)
    /// free after it, so its store zeroes the start of a live record that shares its last
    /// sector (the ring's oldest, not yet flushed).
    RingNoSlack,
    /// REDO/NVLOG: a flush writes the newest images of its batch as commits handed them,
    /// unstamped (`Journal::stamps_trailers`), so the file's copies fail their trailer
    /// checks once the overlay no longer serves them: committed pages read as corrupt.
    FlushUnstamped,
    /// A transaction across databases (`txn::multi`): the undo log's records of a
    /// database's originals are not synced before the changes they undo are issued, so a
    /// power cut can keep a change whose original is lost.
    UndoUnsynced,
    /// Pager: a reader whose snapshot is older than a commit is not given the pre-image
    /// that commit kept of a page it replaced, but the current image: an old reader
    /// reads rows of a later commit (or a tree it cannot walk).
    StaleReaderGetsNewest,
    /// Pager: the pre-images commits kept are pruned up to the newest commit, ignoring
    /// the readers still registered at older snapshots, so such a reader falls back to
    /// the file's (newer) image: wrong rows, or `Corrupt` where the layout finds no
    /// version old enough.
    PruneUnderReaders,
    /// Pager: a commit that shrinks the page count keeps no images of the pages past its
    /// new end for the readers of the longer state, so they read those pages from a
    /// file that is cut back, or grown over by later commits, under them.
    ShrinkDropsTail,
    /// Several processes (`procs`): a handle taking the write turn does not bump the
    /// change counter, so the other handles keep their pictures of the file and work
    /// from them after its commits: they miss them, and their own commits write over
    /// them.
    SkipWriteAnnounce,
    /// Several processes (`procs`), a mode whose commits append beside readers: a handle
    /// does not read the commits other handles appended since its picture's
    /// (`Reload::catch_up`): its readers miss them, and its next commit is written where
    /// their records are, under a tid they used.
    SkipCatchUp,
}

impl Mutant {
    /// Every mutant (not `None`), in a stable order.
    pub const ALL: [Mutant; 29] = [
        Mutant::NoSyncBeforeMark,
        Mutant::NoSyncAtCommit,
        Mutant::SkipChecksum,
        Mutant::UnsyncedRecovery,
        Mutant::VoteOffByOne,
        Mutant::WalPastCommit,
        Mutant::KeepCleanMark,
        Mutant::SkipIntent,
        Mutant::StaleFreeSnapshot,
        Mutant::SpillOutsideIntent,
        Mutant::SpillNotRestamped,
        Mutant::SpillLeftover,
        Mutant::ShadowSkipPrevious,
        Mutant::UnsyncedCheckpoint,
        Mutant::WatermarkBeforeSync,
        Mutant::ReplayPastBadChecksum,
        Mutant::OrderedAreaKept,
        Mutant::DeferredNotInvalidated,
        Mutant::BatchPerCommitTids,
        Mutant::DirectPagesUnsynced,
        Mutant::RingUnmarked,
        Mutant::RingNoSlack,
        Mutant::FlushUnstamped,
        Mutant::UndoUnsynced,
        Mutant::StaleReaderGetsNewest,
        Mutant::PruneUnderReaders,
        Mutant::ShrinkDropsTail,
        Mutant::SkipWriteAnnounce,
        Mutant::SkipCatchUp,
    ];

    /// The name used in replay specs and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Mutant::None => "none",
            Mutant::NoSyncBeforeMark => "no-sync-before-mark",
            Mutant::NoSyncAtCommit => "no-sync-at-commit",
            Mutant::SkipChecksum => "skip-checksum",
            Mutant::UnsyncedRecovery => "unsynced-recovery",
            Mutant::VoteOffByOne => "vote-off-by-one",
            Mutant::WalPastCommit => "wal-past-commit",
            Mutant::KeepCleanMark => "keep-clean-mark",
            Mutant::SkipIntent => "skip-intent",
            Mutant::StaleFreeSnapshot => "stale-free-snapshot",
            Mutant::SpillOutsideIntent => "spill-outside-intent",
            Mutant::SpillNotRestamped => "spill-not-restamped",
            Mutant::SpillLeftover => "spill-leftover",
            Mutant::ShadowSkipPrevious => "shadow-skip-previous",
            Mutant::UnsyncedCheckpoint => "unsynced-checkpoint",
            Mutant::WatermarkBeforeSync => "watermark-before-sync",
            Mutant::ReplayPastBadChecksum => "replay-past-bad-checksum",
            Mutant::OrderedAreaKept => "ordered-area-kept",
            Mutant::DeferredNotInvalidated => "deferred-not-invalidated",
            Mutant::BatchPerCommitTids => "batch-per-commit-tids",
            Mutant::DirectPagesUnsynced => "direct-pages-unsynced",
            Mutant::RingUnmarked => "ring-unmarked",
            Mutant::RingNoSlack => "ring-no-slack",
            Mutant::FlushUnstamped => "flush-unstamped",
            Mutant::UndoUnsynced => "undo-unsynced",
            Mutant::StaleReaderGetsNewest => "stale-reader-gets-newest",
            Mutant::PruneUnderReaders => "prune-under-readers",
            Mutant::ShrinkDropsTail => "shrink-drops-tail",
            Mutant::SkipWriteAnnounce => "skip-write-announce",
            Mutant::SkipCatchUp => "skip-catch-up",
        }
    }

    /// Parse a name (`none` included).
    pub fn from_name(s: &str) -> Option<Mutant> {
        std::iter::once(Mutant::None)
            .chain(Mutant::ALL)
            .find(|m| m.name().eq_ignore_ascii_case(s.trim()))
    }
}

/// A bug the engine's unit tests plant per thread (`plant`), in code that has no
/// database configuration to ask: page checksums and placement, concurrency control.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Plant {
    /// MVBT: a version's checksum hashes each entry's `end` as stored instead of
    /// normalized, so a later close of the entry invalidates the committed version.
    MvbtRawEnd,
    /// MVBT: a new version finds its free bytes from the version it replaces instead of
    /// the protected one, so it can overwrite bytes the committed version needs.
    MvbtWrongHoles,
    /// DHL: the first edit of a leaf places its cell and array without marking the
    /// committed version's bytes, so it can overwrite them.
    DhlFirstEditWrongHoles,
    /// IPS: the version checksum skips the version's slot entries (its pred links).
    IpsCrcSkipsSlots,
    /// IPS: the version checksum skips the tombstone bitmap.
    IpsCrcSkipsTombstones,
    /// OCC: commit without validating (every page counts as untouched).
    OccSkipsValidation,
    /// VTO: write without locking the page or checking it for staleness (and without
    /// the commit's re-check of the pages written).
    VtoSkipsLocks,
    /// Tree: a parent patched in place (`tree::btree` `patch_parent`) has the child
    /// pointer of a split set by the index it had before the new separator went in, so
    /// the separator points at the right half and the left half is lost.
    ParentPatchChildBeforeCell,
    /// Page moves (`txn/vacuum.rs`): the memo of the last move is reused after other
    /// writes of the transaction, so a chain whose cell moved to another leaf is looked
    /// for in the leaf that held it before.
    VacuumMemoIgnoresWrites,
    /// Page moves: an overflow page's next pointer is not repointed when the page after
    /// it moves, so the chain runs into a page that now holds something else.
    VacuumSkipsChainLink,
}

#[cfg(test)]
thread_local! {
    /// The plants in force on this thread (bit `Plant as u8`), so a test planting one
    /// does not disturb the others running beside it.
    static PLANTED: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Whether `p` is planted on this thread: always `false` outside the engine's unit tests.
#[inline]
pub(crate) fn planted(p: Plant) -> bool {
    #[cfg(test)]
    {
        PLANTED.with(|c| c.get() & (1 << p as u32) != 0)
    }
    #[cfg(not(test))]
    {
        let _ = p;
        false
    }
}

/// Plant (or remove) `p` on this thread.
#[cfg(test)]
pub(crate) fn plant(p: Plant, on: bool) {
    PLANTED.with(|c| {
        let bit = 1 << p as u32;
        c.set(if on { c.get() | bit } else { c.get() & !bit })
    })
}
