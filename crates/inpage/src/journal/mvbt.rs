//! The multi-version B-tree modes: DHL's counting commit (`journal::dhl`) over MVBT pages
//! (`page::mvbt`), whose records carry life spans. The commit protocol needs nothing of a
//! layout but its side-by-side versions (`PageLayout::versions`), so these modes are
//! registry entries only (design: `docs/LS-MVBT-DESIGN.md`).
//!
//! - `mvbt`: the plain multi-version B-tree (dead entries stay in a node until it is
//!   copied, no reserved space, eager merges), FCC embedded in the pages.
//! - `ls-mvbt`: LS-MVBT with its optimizations on (lazy split as the tree's in-place
//!   split, reserved buffer space, metadata embedding, no sibling redistribution, lazy
//!   garbage collection): one fdatasync per transaction.

use super::dhl::dhl_spec;
use super::ModeSpec;
use crate::page::mvbt::{LS_MVBT as LS_MVBT_LAYOUT, MVBT as MVBT_LAYOUT};

/// Registry entry of `mvbt`.
pub(crate) static MVBT: ModeSpec = dhl_spec(
    "mvbt",
    12,
    "multi-version B-tree: records with life spans, dead entries kept until a node is copied, counting commit",
    true,
    &MVBT_LAYOUT,
);

/// Registry entry of `ls-mvbt`.
pub(crate) static LS_MVBT: ModeSpec = dhl_spec(
    "ls-mvbt",
    13,
    "lazy-split multi-version B-tree: reserved space, lazy garbage collection, deferred merges, counting commit with metadata embedding",
    true,
    &LS_MVBT_LAYOUT,
);
