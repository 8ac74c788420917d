//! The multi-version B-tree modes: DHL's counting commit (`journal::counting`) over MVBT pages
//! (`page::mvbt`), whose records carry life spans. The commit protocol needs nothing of a
//! layout but its side-by-side versions (`PageLayout::versions`), so these modes are
//! registry entries only (design: `docs/LS-MVBT-DESIGN.md`).
//!
//! - `mvbt`: the plain multi-version B-tree: version splits (both halves to fresh
//!   pages), dead entries kept until a node is copied, no reserved space, eager merges.
//! - `ls-mvbt`: LS-MVBT, every optimization on: lazy split, reserved buffer space,
//!   metadata embedding (the FCC travels in the pages), no sibling redistribution
//!   (merges deferred to the next copy), lazy garbage collection.
//! - `ls-mvbt-no-split`, `ls-mvbt-no-reserve`, `ls-mvbt-no-gc`, `ls-mvbt-header`: the
//!   ablation, one optimization off in each (`-header`: the FCC written to the header
//!   page with every commit).
//!
//! Every mode commits with one fdatasync.

use super::counting::counting_spec;
use super::ModeSpec;
use crate::page::mvbt as layouts;

/// Registry entry of `mvbt`.
pub(crate) static MVBT: ModeSpec = counting_spec(
    "mvbt",
    12,
    12,
    "multi-version B-tree: records with life spans, version splits, dead entries kept until a node is copied, FCC in the header page",
    false,
    &layouts::MVBT,
);

/// Registry entry of `ls-mvbt`.
pub(crate) static LS_MVBT: ModeSpec = counting_spec(
    "ls-mvbt",
    13,
    13,
    "lazy-split multi-version B-tree: lazy split, reserved space, FCC embedded, deferred merges, lazy garbage collection",
    true,
    &layouts::LS_MVBT,
);

/// Registry entry of `ls-mvbt-no-split`.
pub(crate) static LS_MVBT_NO_SPLIT: ModeSpec = counting_spec(
    "ls-mvbt-no-split",
    14,
    13,
    "ls-mvbt with version splits instead of lazy splits (ablation)",
    true,
    &layouts::LS_MVBT_NO_SPLIT,
);

/// Registry entry of `ls-mvbt-no-reserve`.
pub(crate) static LS_MVBT_NO_RESERVE: ModeSpec = counting_spec(
    "ls-mvbt-no-reserve",
    15,
    12,
    "ls-mvbt without reserved buffer space in nodes (ablation)",
    true,
    &layouts::LS_MVBT_NO_RESERVE,
);

/// Registry entry of `ls-mvbt-no-gc`.
pub(crate) static LS_MVBT_NO_GC: ModeSpec = counting_spec(
    "ls-mvbt-no-gc",
    16,
    13,
    "ls-mvbt keeping dead entries until a node is copied, no lazy garbage collection (ablation)",
    true,
    &layouts::LS_MVBT_NO_GC,
);

/// Registry entry of `ls-mvbt-header`.
pub(crate) static LS_MVBT_HEADER: ModeSpec = counting_spec(
    "ls-mvbt-header",
    17,
    13,
    "ls-mvbt with the FCC in the header page with every commit, no metadata embedding (ablation)",
    false,
    &layouts::LS_MVBT,
);
