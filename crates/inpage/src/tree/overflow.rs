//! Overflow chains: values too large to sit inline in a leaf cell.
//!
//! Page layout, stock: `type u8 (OVERFLOW) | 3 reserved zero bytes | next u32 | data`, with
//! `usable - 8` data bytes per page. DHL: a descriptor in slot 0 (tid, type OVERFLOW, next,
//! data length, checksum over the data; see `page::dhl::overflow_page`), slot 1 zero, data
//! from byte 64, `usable - 64` bytes per page, because in a DHL file no page may carry
//! user bytes where recovery looks for descriptors. `next == 0` ends the chain. The leaf
//! cell stores the total length and the first page, and the whole value lives in the
//! chain (no local prefix).
//!
//! Invariants:
//! - A chain for a value of `len` bytes has exactly `ceil(len / per_page)` pages and its
//!   last page has `next == 0`. Readers walk exactly that many pages, so a corrupt chain
//!   (early end, extra pages, a cycle, a non-overflow page, in DHL a bad checksum or a
//!   page written after the reader's snapshot) is reported as `Corrupt` instead of
//!   looping or reading past the value.
//! - Chains are written once, on pages allocated for them, and never modified: a changed
//!   value gets a new chain and the old one is freed. So a DHL overflow page needs no
//!   second version: the committed chain is never touched by a later transaction.

use std::collections::HashSet;

use crate::error::{Error, Pgno, Result};
use crate::le::get_u32;
use crate::page::{dhl, page_type, slotted, PageRead, PageWrite};

use super::format::Format;

const OFF_NEXT: usize = 4;

/// Write `value` into a fresh chain; returns its first page.
pub(crate) fn write(store: &mut dyn PageWrite, value: &[u8]) -> Result<Pgno> {
    debug_assert!(!value.is_empty());
    let f = Format::of(&*store);
    let (page_size, usable) = (f.page_size, f.usable);
    let per = f.overflow_data();
    let pages = value
        .chunks(per)
        .map(|_| store.allocate())
        .collect::<Result<Vec<Pgno>>>()?;
    for (k, chunk) in value.chunks(per).enumerate() {
        let next = pages.get(k + 1).copied().unwrap_or(0);
        let buf = if f.is_dhl() {
            dhl::overflow_page(page_size, usable, store.tid(), next, chunk)?
        } else {
            let mut buf = vec![0u8; page_size];
            buf[0] = page_type::OVERFLOW;
            buf[OFF_NEXT..OFF_NEXT + 4].copy_from_slice(&next.to_le_bytes());
            buf[slotted::OVFL_HEADER..slotted::OVFL_HEADER + chunk.len()].copy_from_slice(chunk);
            buf
        };
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
    visit: &mut dyn FnMut(Pgno, &[u8]) -> Result<()>,
) -> Result<()> {
    let f = Format::of(store);
    let per = f.overflow_data();
    let n = (len as usize).div_ceil(per);
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
        let take = left.min(per);
        let (data, next) = if f.is_dhl() {
            dhl_page(&f, owner, pgno, &page, take)?
        } else {
            stock_page(&f, owner, pgno, &page, take)?
        };
        visit(pgno, data)?;
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

/// Data (`take` bytes) and next pointer of a stock overflow page.
fn stock_page<'p>(
    f: &Format,
    owner: Pgno,
    pgno: Pgno,
    page: &'p [u8],
    take: usize,
) -> Result<(&'p [u8], Pgno)> {
    if page.len() < f.usable || page[0] != page_type::OVERFLOW {
        let t = page.first().copied().unwrap_or(0);
        return Err(Error::corrupt(
            pgno,
            format!(
                "expected an overflow page (chain from page {owner}), found type {t} ({})",
                page_type::name(t)
            ),
        ));
    }
    let next = get_u32(page, OFF_NEXT);
    Ok((
        &page[slotted::OVFL_HEADER..slotted::OVFL_HEADER + take],
        next,
    ))
}

/// Data and next pointer of a DHL overflow page, verified by its descriptor, which must
/// hold exactly `take` bytes and be visible to this reader.
fn dhl_page<'p>(
    f: &Format,
    owner: Pgno,
    pgno: Pgno,
    page: &'p [u8],
    take: usize,
) -> Result<(&'p [u8], Pgno)> {
    let o = dhl::open_overflow(pgno, page, f.usable)?;
    if o.tid > f.visible_tid {
        return Err(Error::corrupt(
            pgno,
            format!(
                "overflow page written by transaction {} after this snapshot ({}), chain from page {owner}",
                o.tid, f.visible_tid
            ),
        ));
    }
    if o.data.len() != take {
        return Err(Error::corrupt(
            pgno,
            format!(
                "overflow page holds {} bytes where the value needs {take}",
                o.data.len()
            ),
        ));
    }
    Ok((o.data, o.next))
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
