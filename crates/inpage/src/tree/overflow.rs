//! Overflow chains: values too large to sit inline in a leaf cell.
//!
//! Page layout: `type u8 (OVERFLOW) | 3 reserved zero bytes | next u32 | data`, with
//! `usable - 8` data bytes per page; `next == 0` ends the chain. The leaf cell stores the
//! total length and the first page, and the whole value lives in the chain (no local
//! prefix).
//!
//! Invariant: a chain for a value of `len` bytes has exactly `ceil(len / (usable - 8))`
//! pages and its last page has `next == 0`. Readers walk exactly that many pages, so a
//! corrupt chain (early end, extra pages, a cycle, a non-overflow page) is reported as
//! `Corrupt` instead of looping or reading past the value.

use std::collections::HashSet;

use crate::error::{Error, Pgno, Result};
use crate::page::{page_type, slotted, PageRead, PageWrite};

const OFF_NEXT: usize = 4;

/// Number of pages a value of `len` bytes occupies.
pub(crate) fn pages_for(usable: usize, len: u32) -> usize {
    (len as usize).div_ceil(slotted::overflow_data(usable))
}

/// Write `value` into a fresh chain; returns its first page.
pub(crate) fn write(store: &mut dyn PageWrite, value: &[u8]) -> Result<Pgno> {
    debug_assert!(!value.is_empty());
    let (page_size, usable) = (store.page_size(), store.usable_size());
    let per = slotted::overflow_data(usable);
    let pages = value
        .chunks(per)
        .map(|_| store.allocate())
        .collect::<Result<Vec<Pgno>>>()?;
    for (k, chunk) in value.chunks(per).enumerate() {
        let mut buf = vec![0u8; page_size];
        buf[0] = page_type::OVERFLOW;
        let next = pages.get(k + 1).copied().unwrap_or(0);
        buf[OFF_NEXT..OFF_NEXT + 4].copy_from_slice(&next.to_le_bytes());
        buf[slotted::OVFL_HEADER..slotted::OVFL_HEADER + chunk.len()].copy_from_slice(chunk);
        store.write(pages[k], buf)?;
    }
    Ok(pages[0])
}

/// Walk the chain of a `len`-byte value starting at `first` (referenced from page
/// `owner`), calling `f(pgno, data)` for each page with that page's share of the value.
pub(crate) fn walk<S: PageRead + ?Sized>(
    store: &S,
    owner: Pgno,
    len: u32,
    first: Pgno,
    f: &mut dyn FnMut(Pgno, &[u8]) -> Result<()>,
) -> Result<()> {
    let usable = store.usable_size();
    let per = slotted::overflow_data(usable);
    let n = pages_for(usable, len);
    let mut seen = HashSet::new();
    let (mut prev, mut pgno, mut left) = (owner, first, len as usize);
    for k in 0..n {
        if pgno == 0 {
            return Err(Error::corrupt(
                prev,
                format!("overflow chain ends after {k} of {n} pages"),
            ));
        }
        if !seen.insert(pgno) {
            return Err(Error::corrupt(
                prev,
                format!("overflow chain loops back to page {pgno}"),
            ));
        }
        let page = store.read(pgno)?;
        if page.len() < usable || page[0] != page_type::OVERFLOW {
            let t = page.first().copied().unwrap_or(0);
            return Err(Error::corrupt(
                pgno,
                format!(
                    "expected an overflow page (chain from page {owner}), found type {t} ({})",
                    page_type::name(t)
                ),
            ));
        }
        let next = u32::from_le_bytes([
            page[OFF_NEXT],
            page[OFF_NEXT + 1],
            page[OFF_NEXT + 2],
            page[OFF_NEXT + 3],
        ]);
        let take = left.min(per);
        f(
            pgno,
            &page[slotted::OVFL_HEADER..slotted::OVFL_HEADER + take],
        )?;
        left -= take;
        if k + 1 == n && next != 0 {
            return Err(Error::corrupt(
                pgno,
                format!("overflow chain continues to page {next} past the value's {n} pages"),
            ));
        }
        (prev, pgno) = (pgno, next);
    }
    debug_assert_eq!(left, 0);
    Ok(())
}

/// Read a whole value. Memory grows with pages actually read, so a corrupt huge length
/// fails at the first bad page instead of allocating gigabytes up front.
pub(crate) fn read<S: PageRead + ?Sized>(
    store: &S,
    owner: Pgno,
    len: u32,
    first: Pgno,
) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    walk(store, owner, len, first, &mut |_, data| {
        out.extend_from_slice(data);
        Ok(())
    })?;
    Ok(out)
}

/// Page numbers of a chain (read before anything is freed, so no freed page is read).
pub(crate) fn pages<S: PageRead + ?Sized>(
    store: &S,
    owner: Pgno,
    len: u32,
    first: Pgno,
) -> Result<Vec<Pgno>> {
    let mut out = Vec::new();
    walk(store, owner, len, first, &mut |pgno, _| {
        out.push(pgno);
        Ok(())
    })?;
    Ok(out)
}

/// Free a whole chain.
pub(crate) fn free(store: &mut dyn PageWrite, owner: Pgno, len: u32, first: Pgno) -> Result<()> {
    for pgno in pages(store, owner, len, first)? {
        store.free(pgno)?;
    }
    Ok(())
}
