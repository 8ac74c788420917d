//! Looking at a database file from outside the engine: what `inpage inspect`, the bench
//! and the torture harness's traces use, so they never need the engine's internal modules.
//!
//! Everything here reads bytes the caller hands over and changes nothing. The answers come
//! from the journal mode's page layout (through the mode registry), so a new layout is
//! described without touching the tools.

use crate::error::Pgno;
use crate::journal::JournalMode;
use crate::page::{cell, Geometry, PAGE_TRAILER};

/// Lines describing page `pgno` of a file in `mode`, as stored (`page` is the raw image,
/// `page_size` bytes; `fcc` the committed transaction a reader would see): header slots
/// for page 0, the page type or the versions and which one is visible otherwise.
pub fn describe_page(mode: JournalMode, pgno: Pgno, page: &[u8], fcc: u64) -> Vec<String> {
    let Some(g) = geometry(mode, page.len()) else {
        return vec![format!("{} bytes is not a page size", page.len())];
    };
    mode.layout().describe(pgno, page, g, fcc)
}

/// What kind of page this is (`leaf`, `interior`, `overflow`, `free`, `unused`,
/// `unknown`) for a reader at `fcc`, read from page `pgno` (checksums are bound to it).
pub fn classify_page(mode: JournalMode, pgno: Pgno, page: &[u8], fcc: u64) -> &'static str {
    match geometry(mode, page.len()) {
        Some(g) => mode.layout().classify(pgno, page, g, fcc),
        None => "unknown",
    }
}

/// The longest value stored inline (in the leaf, not an overflow chain) next to a key of
/// `key_len` bytes, with pages of `page_size` bytes; None if even an empty value is not.
pub fn max_inline_value(page_size: u32, key_len: usize) -> Option<usize> {
    let usable = (page_size as usize).checked_sub(PAGE_TRAILER)?;
    if !cell::value_is_inline(usable, key_len, 0) {
        return None;
    }
    // The rule is monotone in the value length: binary search its last inline length.
    let (mut lo, mut hi) = (0usize, usable);
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if cell::value_is_inline(usable, key_len, mid) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    Some(lo)
}

fn geometry(mode: JournalMode, page_size: usize) -> Option<Geometry> {
    let layout = mode.layout();
    (page_size > PAGE_TRAILER + layout.reserved_tail() && page_size.is_power_of_two())
        .then(|| layout.geometry_for(page_size))
}

/// As [`max_inline_value`], for the pages of `mode`, whose layout may reserve a tail of
/// each page for its journal (the `waldio` modes), leaving less room for cells.
pub fn max_inline_value_in(mode: JournalMode, page_size: u32, key_len: usize) -> Option<usize> {
    let tail = mode.layout().reserved_tail() as u32;
    max_inline_value(page_size.checked_sub(tail)?, key_len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_inline_value_is_the_boundary() {
        for ps in [512u32, 4096, 65536] {
            let usable = ps as usize - PAGE_TRAILER;
            for klen in [0, 8, 100, 5000] {
                let v = max_inline_value(ps, klen).unwrap();
                assert!(cell::value_is_inline(usable, klen, v));
                assert!(!cell::value_is_inline(usable, klen, v + 1));
            }
        }
        // Past the inline key limit a key takes a fixed prefix in the cell, so the room
        // left for the value no longer depends on its length.
        let long = max_inline_value(4096, 100_000);
        assert_eq!(long, max_inline_value(4096, 2000));
        assert!(long.unwrap() > 0);
    }
}
