//! The modes the harness tortures: every engine journal mode, plus the WAL variants whose
//! promises differ (`wal-normal`) or whose I/O pattern differs (`wal-prealloc`).
//!
//! The list is derived from `JournalMode::ALL`, so a journal mode added to the engine is
//! tortured without touching this crate. What a mode promises decides which oracle rule
//! applies to it (see `oracle`):
//! - `promises_atomicity()` false (`off`): violations are counted and printed, never fatal.
//! - `durable_at_ack()` false (`wal-normal`, `waldio-ns`): an acknowledged commit may be lost by a power
//!   cut, but only together with every later one (the survivors are a prefix).
//! - Region-backed modes (`nvlog`) run twice: on a simulated disk whose memory regions
//!   are persistent memory (a cut keeps them: `durable_at_ack()` true, every acknowledged
//!   commit must survive), and as `<mode>-region-lost`, where a cut drops the region
//!   (`/dev/shm` after a power loss): the file alone must hold a prefix of whole commits.

use std::sync::Arc;

use inpage::vfs::Vfs;
use inpage::{Config, JournalMode, JournalOption, Mutant, NvlogFlush, WalSync};

/// Journal-mode variants with different promises or I/O patterns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Variant {
    /// The engine's defaults for the mode.
    Plain,
    /// WAL pre-sized and zero-filled (`wal_prealloc`).
    Prealloc,
    /// WAL without a sync at commit (`WalSync::Normal`).
    Normal,
    /// A region-backed mode on a disk whose power cuts drop the memory regions.
    RegionLost,
}

/// A mode under test.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Mode {
    pub journal: JournalMode,
    pub variant: Variant,
}

/// Database parameters that are not the mode: chosen per workload so the runs cover small
/// pages (deep trees, many overflow pages), one-page growth and frequent checkpoints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DbParams {
    pub page_size: u32,
    pub chunk_pages: u32,
    pub wal_autocheckpoint: u32,
    /// DHL modes: the smallest write-intent region in pages (small, so the torture's
    /// small databases span many regions and the bounded recovery scan is exercised).
    pub intent_region: u32,
    /// Modes that steal: the spill limit in pages (small, so most multi-page transactions
    /// spill and cuts land inside stealing transactions); None: spilling off.
    pub spill: Option<u32>,
    /// DHL modes: the ordered-commit threshold in pages (small, so transactions that
    /// write page 0 often commit in order and cuts land in them); None: the engine's
    /// default, which the torture's transactions rarely reach.
    pub ordered: Option<u32>,
    /// Handles on the database, each standing for a process (`SimVfs::take_turns`):
    /// 1, or 2 taking turns, the workload's transactions alternating between them.
    pub handles: u32,
}

impl Mode {
    /// Every mode, in a stable order: the engine's modes, then the WAL variants.
    pub fn all() -> Vec<Mode> {
        let mut v: Vec<Mode> = JournalMode::all()
            .map(|journal| Mode {
                journal,
                variant: Variant::Plain,
            })
            .collect();
        for variant in [Variant::Prealloc, Variant::Normal] {
            v.push(Mode {
                journal: JournalMode::WAL,
                variant,
            });
        }
        for journal in JournalMode::all().filter(|j| j.capabilities().region_backed) {
            v.push(Mode {
                journal,
                variant: Variant::RegionLost,
            });
        }
        v
    }

    /// The name used on the command line and in replay specs.
    pub fn name(&self) -> String {
        match self.variant {
            Variant::Plain => self.journal.name().to_string(),
            Variant::Prealloc => format!("{}-prealloc", self.journal.name()),
            Variant::Normal => format!("{}-normal", self.journal.name()),
            Variant::RegionLost => format!("{}-region-lost", self.journal.name()),
        }
    }

    /// Parse one mode name (case-insensitive); the error lists the valid names.
    pub fn parse(s: &str) -> Result<Mode, String> {
        let s = s.trim();
        Mode::all()
            .into_iter()
            .find(|m| m.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                format!(
                    "unknown mode {s:?}; valid modes: {}, or all",
                    Mode::all()
                        .iter()
                        .map(|m| m.name())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            })
    }

    /// Help text for a `--mode` argument: `prefix` followed by every mode name, from
    /// `Mode::all()` (so from `JournalMode::ALL`): the one place mode lists come from.
    pub fn help_list(prefix: &str) -> String {
        let names: Vec<String> = Mode::all()
            .iter()
            .map(|m| {
                if m.promises_atomicity() {
                    m.name()
                } else {
                    format!("{} (no atomicity)", m.name())
                }
            })
            .collect();
        format!("{prefix} {}", names.join(", "))
    }

    /// Parse `all` or a comma-separated list of modes.
    pub fn parse_list(s: &str) -> Result<Vec<Mode>, String> {
        if s.trim().eq_ignore_ascii_case("all") {
            return Ok(Mode::all());
        }
        let mut out = Vec::new();
        for part in s.split(',').filter(|p| !p.trim().is_empty()) {
            let m = Mode::parse(part)?;
            if !out.contains(&m) {
                out.push(m);
            }
        }
        if out.is_empty() {
            return Err(Mode::parse("").unwrap_err());
        }
        Ok(out)
    }

    /// Whether handles in several processes can have its file open at once.
    pub fn shares_between_processes(&self) -> bool {
        self.journal.shares_between_processes()
    }

    /// Whether a crash may never leave a half-applied transaction.
    pub fn promises_atomicity(&self) -> bool {
        self.journal.promises_atomicity()
    }

    /// Whether an acknowledged commit survives a power cut (false for `wal-normal`, whose
    /// commits become durable at the next checkpoint or clean close, and for modes that
    /// say so in their capabilities, such as `waldio-ns`).
    /// A region-backed mode is durable at acknowledgement on a disk whose regions
    /// survive power cuts (`regions_persistent`).
    pub fn durable_at_ack(&self) -> bool {
        let caps = self.journal.capabilities();
        match self.variant {
            Variant::Normal | Variant::RegionLost => false,
            Variant::Plain | Variant::Prealloc => caps.durable_at_ack || caps.region_backed,
        }
    }

    /// Whether a power cut loses commits that only a memory region held: a
    /// region-backed mode whose regions do not survive power (`-region-lost`).
    pub fn power_cut_drops_region(&self) -> bool {
        self.journal.capabilities().region_backed && !self.regions_persistent()
    }

    /// Whether the simulated disk's memory regions survive a power cut (persistent
    /// memory) for this mode: all but the `-region-lost` variants.
    pub fn regions_persistent(&self) -> bool {
        self.variant != Variant::RegionLost
    }

    /// Whether an acknowledged commit survives a process kill (false for `waldio-gs`,
    /// which acknowledges commits from a buffer in process memory).
    pub fn survives_process_crash(&self) -> bool {
        self.journal.capabilities().survives_process_crash
    }

    /// The engine configuration for this mode.
    pub fn config(&self, vfs: Arc<dyn Vfs>, p: DbParams, mutant: Mutant) -> Config {
        let mut c = Config::default()
            .vfs(vfs)
            .journal_mode(self.journal)
            .page_size(p.page_size)
            // Small cache: evictions and re-reads happen inside one transaction.
            .cache_pages(32)
            .chunk_pages(p.chunk_pages)
            .wal_autocheckpoint(p.wal_autocheckpoint);
        if p.handles > 1 {
            // A handle kept out of its turn on a healthy disk is a violation, found in
            // half a second rather than the default five.
            c = c.busy_timeout(std::time::Duration::from_millis(500));
        }
        let reads = |o| self.journal.options().contains(&o);
        if reads(JournalOption::IntentRegionPages) {
            c = c.intent_region_pages(p.intent_region);
        }
        if let Some(n) = p
            .ordered
            .filter(|_| reads(JournalOption::OrderedCommitPages))
        {
            c = c.ordered_commit_pages(n);
        }
        if reads(JournalOption::NvlogFlush) {
            // Flushes at the fill threshold on the committing thread, so a replayed case
            // does the same I/O; a small ring makes flushes, wrap-around and full-ring
            // waits frequent (and some transactions bigger than the ring).
            c = c.nvlog_flush(NvlogFlush::Inline).nvlog_ring_bytes(16 << 10);
        }
        c = match p.spill {
            Some(n) => c.spill_pages(n as usize),
            None => c.cache_spill(false),
        };
        match self.variant {
            Variant::Plain => {}
            Variant::Prealloc => c = c.wal_prealloc(true),
            Variant::Normal => c = c.wal_sync(WalSync::Normal),
            Variant::RegionLost => {}
        }
        // Checked at parse time (`crate::planted`): a build without the planted bugs
        // never gets here with one.
        #[cfg(feature = "mutants")]
        let c = c.mutant(mutant);
        #[cfg(not(feature = "mutants"))]
        debug_assert_eq!(
            mutant,
            inpage::Mutant::None,
            "no planted bugs in this build"
        );
        c
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name())
    }
}

impl DbParams {
    /// Parameters derived from a workload seed (deterministic).
    pub fn from_seed(seed: u64) -> DbParams {
        let mut r = crate::rng::Rng::new(seed ^ 0xD80A_2A11);
        DbParams {
            page_size: [512, 1024, 4096][r.below(3) as usize],
            chunk_pages: [0, 1, 8][r.below(3) as usize],
            wal_autocheckpoint: [0, 12, 40][r.below(3) as usize],
            intent_region: [1, 2, 4][r.below(3) as usize],
            // Drawn last, so the parameters above stay what they were for each seed.
            spill: [None, Some(1), Some(3), Some(8)][r.below(4) as usize],
            // Drawn after `spill`, for the same reason.
            ordered: [None, Some(2), Some(4)][r.below(3) as usize],
            // Not drawn: `--handles` sets it for a whole run.
            handles: 1,
        }
    }
}
