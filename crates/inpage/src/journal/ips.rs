//! The in-page shadowing modes: DHL's counting commit (`journal::counting`) over IPS pages
//! (`page::ips`). The commit protocol needs nothing of a layout but its side-by-side
//! versions (`PageLayout::versions`), so these modes are registry entries only.
//!
//! - `ips`: counting commit with metadata embedding (the FCC travels in the pages'
//!   `(tid, txn_size)`; the header page is written only when another header field
//!   changes): one fdatasync per transaction.
//! - `ips-header`: the paper's protocol, which writes the FCC to the header page in every
//!   commit (the ablation of metadata embedding); still one fdatasync.

use super::counting::counting_spec;
use super::ModeSpec;
use crate::page::ips::IPS as IPS_LAYOUT;

/// Registry entry of `ips`.
pub(crate) static IPS: ModeSpec = counting_spec(
    "ips",
    10,
    10,
    "in-page shadowing: append-only pages (records never move), counting commit with metadata embedding",
    true,
    &IPS_LAYOUT,
);

/// Registry entry of `ips-header`.
pub(crate) static IPS_HEADER: ModeSpec = counting_spec(
    "ips-header",
    11,
    10,
    "in-page shadowing, the FCC in the header page with every commit (no metadata embedding)",
    false,
    &IPS_LAYOUT,
);
