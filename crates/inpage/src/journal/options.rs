//! Journal options, each owned by the modes that read it.
//!
//! Invariants, and why they hold:
//! - A journal is opened only with options its mode reads. Each registry entry lists the
//!   options its code reads (`ModeSpec::options`), and [`check`] refuses a configuration
//!   that asks something of an option the mode does not list. An option ignored in
//!   silence would let a user believe in a property no code gives (`O_DIRECT` writes, a
//!   region on persistent memory, a preallocated log).
//! - An option's value is checked by the mode that reads it (`ModeSpec::check_options`),
//!   with the same rule for every mode of a format since they share the reading code.
//! - Both checks run in `Config::check_against`, before the database or any side file is
//!   opened or created: a bad option changes nothing on disk.
//! - The general options (`wal_sync`, `wal_autocheckpoint`, `journal_size_limit`) are not
//!   here: SQLite accepts their pragmas in every journal mode, and so does inpage.

use super::{DirectWrites, JournalConfig, JournalMode, NvlogFlush};
use crate::error::{Error, Result};

/// An option of `Config` that only some journal modes read
/// ([`JournalMode::options`] lists a mode's).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum JournalOption {
    /// `Config::wal_prealloc`: the write-ahead log is pre-sized and zero-filled.
    WalPrealloc,
    /// `Config::direct_writes(DirectWrites::On)`: page writes bypass the page cache or
    /// the open fails.
    DirectWrites,
    /// `Config::intent_region_pages`: the smallest region of the write-intent map.
    IntentRegionPages,
    /// `Config::intent_scan_mib`: how much a crash recovery may scan, which bounds how
    /// far the write-intent map coarsens before a marking write narrows it.
    IntentScanMib,
    /// `Config::ordered_commit_pages`: the size from which a counting commit commits in
    /// order.
    OrderedCommitPages,
    /// `Config::nvlog_region`: the file of the memory-mapped record region.
    NvlogRegion,
    /// `Config::nvlog_ring_bytes`: the size of the region's record ring.
    NvlogRingBytes,
    /// `Config::nvlog_flush`: who moves the region's records into the database.
    NvlogFlush,
    /// `Config::nvlog_direct_pages(false)`: a flush logs every page.
    NvlogDirectPages,
}

impl JournalOption {
    /// Every option, in the order errors and docs name them.
    pub const ALL: [JournalOption; 9] = [
        JournalOption::WalPrealloc,
        JournalOption::DirectWrites,
        JournalOption::IntentRegionPages,
        JournalOption::IntentScanMib,
        JournalOption::OrderedCommitPages,
        JournalOption::NvlogRegion,
        JournalOption::NvlogRingBytes,
        JournalOption::NvlogFlush,
        JournalOption::NvlogDirectPages,
    ];

    /// The name of the `Config` method that sets it.
    pub fn name(self) -> &'static str {
        match self {
            JournalOption::WalPrealloc => "wal_prealloc",
            JournalOption::DirectWrites => "direct_writes",
            JournalOption::IntentRegionPages => "intent_region_pages",
            JournalOption::IntentScanMib => "intent_scan_mib",
            JournalOption::OrderedCommitPages => "ordered_commit_pages",
            JournalOption::NvlogRegion => "nvlog_region",
            JournalOption::NvlogRingBytes => "nvlog_ring_bytes",
            JournalOption::NvlogFlush => "nvlog_flush",
            JournalOption::NvlogDirectPages => "nvlog_direct_pages",
        }
    }

    /// Whether `c` asks something of this option that only a mode reading it can give.
    /// `direct_writes` asks only when `On`: `Auto` and `Off` hold in every mode (a mode
    /// without direct writes writes through the page cache).
    pub fn asked(self, c: &JournalConfig) -> bool {
        let d = JournalConfig::default();
        match self {
            JournalOption::WalPrealloc => c.wal_prealloc,
            JournalOption::DirectWrites => c.direct_writes == DirectWrites::On,
            JournalOption::IntentRegionPages => c.intent_region_pages.is_some(),
            JournalOption::IntentScanMib => c.intent_scan_mib.is_some(),
            JournalOption::OrderedCommitPages => c.ordered_commit_pages.is_some(),
            JournalOption::NvlogRegion => c.nvlog_region.is_some(),
            JournalOption::NvlogRingBytes => c.nvlog_ring_bytes.is_some(),
            JournalOption::NvlogFlush => c.nvlog_flush != NvlogFlush::default(),
            JournalOption::NvlogDirectPages => c.nvlog_direct_pages != d.nvlog_direct_pages,
        }
    }
}

impl std::fmt::Display for JournalOption {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Refuse options `mode` does not read, then let the mode check the values of those it
/// does (module invariants).
pub(crate) fn check(mode: JournalMode, c: &JournalConfig) -> Result<()> {
    if let Some(o) = JournalOption::ALL
        .into_iter()
        .find(|o| o.asked(c) && !mode.options().contains(o))
    {
        let readers: Vec<&str> = JournalMode::all()
            .filter(|m| m.options().contains(&o))
            .map(JournalMode::name)
            .collect();
        return Err(Error::Config(format!(
            "{o} is set, but journal mode {mode} does not read it (the modes that do: {})",
            readers.join(", ")
        )));
    }
    (mode.0.check_options)(c)
}

/// `ModeSpec::check_options` of a mode whose options take any value.
pub(crate) fn any_value(_: &JournalConfig) -> Result<()> {
    Ok(())
}
