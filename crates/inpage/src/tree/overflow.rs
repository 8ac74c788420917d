//! Overflow chains: values too large to sit inline in a leaf cell, and the tails of long
//! keys (see `page::cell`), in the same page format.
//!
//! The layout owns the overflow page format (`PageLayout::overflow_image` and
//! `overflow_read`; docs/FORMAT.md has the bytes); this module owns the chain: each page
//! carries the next page's number, `next == 0` ends the chain, the leaf cell stores the
//! total length and the first page, and the whole value lives in the chain (no local
//! prefix).
//!
//! Invariants:
//! - A chain for a value of `len` bytes has exactly `ceil(len / per_page)` pages and its
//!   last page has `next == 0`. Readers walk exactly that many pages, so a corrupt chain
//!   (early end, extra pages, a cycle, a non-overflow page, in DHL a bad checksum or a
//!   page written after the reader's snapshot) is reported as `Corrupt` instead of
//!   looping or reading past the value.
//! - Chains are written once, on pages allocated for them, and never modified: a changed
//!   value gets a new chain and the old one is freed. The one exception is [`overwrite`]
//!   (incremental blob writes) under a layout that overwrites pages in place, where the
//!   journal keeps every page's committed image anyway: the pages a range touches are
//!   rewritten where they are. A long key's tail chain belongs to
//!   exactly one cell too: a separator made from a leaf key gets its own copy, so freeing
//!   a cell's chains never frees pages another cell still points at. So a DHL overflow page needs no
//!   second version: the committed chain is never touched by a later transaction.

use std::borrow::Cow;
use std::collections::HashSet;

use crate::error::{Error, Pgno, Result};
use crate::page::cell::{self, CellKey, Payload};
use crate::page::{PageRead, PageWrite};

use super::format::Format;

/// Write `value` into a fresh chain; returns its first page.
pub(crate) fn write(store: &mut dyn PageWrite, value: &[u8]) -> Result<Pgno> {
    debug_assert!(!value.is_empty());
    let f = Format::of(&*store);
    let per = f.overflow_data();
    let pages = value
        .chunks(per)
        .map(|_| store.allocate())
        .collect::<Result<Vec<Pgno>>>()?;
    let tid = store.tid();
    for (k, chunk) in value.chunks(per).enumerate() {
        let next = pages.get(k + 1).copied().unwrap_or(0);
        let buf = f
            .layout
            .overflow_image(pages[k], f.geometry, tid, next, chunk)?;
        store.write(pages[k], buf.into())?;
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
    // A one-page chain cannot loop within the walk: no set (the common long-key tail).
    let mut seen = HashSet::new();
    let track = n > 1;
    let (mut prev, mut pgno, mut left) = (owner, first, len as usize);
    for k in 0..n {
        if pgno == 0 {
            return Err(Error::corrupt(
                prev,
                format!("overflow chain ends after {k} of {n} pages"),
            ));
        }
        if track && !seen.insert(pgno) {
            return Err(Error::corrupt(
                prev,
                format!("overflow chain loops back to page {pgno}"),
            ));
        }
        let page = store.read(pgno)?;
        let take = left.min(per);
        let (data, next) =
            f.layout
                .overflow_read(owner, pgno, &page, f.geometry, f.visible_tid, take)?;
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

/// Extend `pages`, a prefix of the chain of a `len`-byte value from `first`, until it
/// holds the page with byte `upto - 1` (or the whole chain): each page read and checked
/// as [`walk`] reads it, for its link. Stock SQLite's overflow page cache grows the same
/// way, so a ranged access near the start of a large value reads only that far.
pub(crate) fn extend_chain<S: PageRead + ?Sized>(
    store: &S,
    owner: Pgno,
    (len, first): (u32, Pgno),
    pages: &mut Vec<Pgno>,
    upto: usize,
) -> Result<()> {
    let f = Format::of(store);
    let per = f.overflow_data();
    let n = (len as usize).div_ceil(per);
    let want = upto.min(len as usize).div_ceil(per).min(n);
    if pages.is_empty() && want > 0 {
        pages.push(first);
    }
    while pages.len() < want {
        let k = pages.len() - 1;
        let pgno = pages[k];
        let page = store.read(pgno)?;
        let take = (len as usize - k * per).min(per);
        let (_, next) =
            f.layout
                .overflow_read(owner, pgno, &page, f.geometry, f.visible_tid, take)?;
        if next == 0 || next == first || pages.len() >= n {
            return Err(Error::corrupt(
                pgno,
                format!("overflow chain ends or loops after {} of {n} pages", k + 1),
            ));
        }
        pages.push(next);
    }
    Ok(())
}

/// What [`visit_range`] calls per page: `(k, pgno, data, next)`.
type RangeVisit<'v> = dyn FnMut(usize, Pgno, &[u8], Pgno) -> Result<()> + 'v;

/// Visit pages `from / per ..= (upto - 1) / per` of a `len`-byte value whose chain is
/// `pages` (from [`pages`]), as `visit(k, pgno, data, next)`: page `k`'s share of the
/// value, read and checked as [`walk`] reads it, and its link. A chain page list kept
/// by the caller (while the tree is unchanged) makes a ranged access cost the pages it
/// touches.
fn visit_range<S: PageRead + ?Sized>(
    store: &S,
    owner: Pgno,
    len: u32,
    pages: &[Pgno],
    (from, upto): (usize, usize),
    visit: &mut RangeVisit<'_>,
) -> Result<()> {
    let f = Format::of(store);
    let per = f.overflow_data();
    if from >= upto || upto > len as usize {
        return Ok(());
    }
    for k in from / per..=(upto - 1) / per {
        let Some(&pgno) = pages.get(k) else {
            return Err(Error::corrupt(
                owner,
                format!("overflow chain has no page {k}"),
            ));
        };
        let page = store.read(pgno)?;
        let take = (len as usize - k * per).min(per);
        let (data, next) =
            f.layout
                .overflow_read(owner, pgno, &page, f.geometry, f.visible_tid, take)?;
        visit(k, pgno, data, next)?;
    }
    Ok(())
}

/// Copy bytes of a `len`-byte value (chain `pages`) from `offset` into `buf`, as many as
/// fit and the value has, reading only the pages that hold them. Returns the count.
pub(crate) fn read_range<S: PageRead + ?Sized>(
    store: &S,
    owner: Pgno,
    (len, pages): (u32, &[Pgno]),
    offset: usize,
    buf: &mut [u8],
) -> Result<usize> {
    let per = Format::of(store).overflow_data();
    let end = offset.saturating_add(buf.len()).min(len as usize);
    if offset >= end {
        return Ok(0);
    }
    visit_range(
        store,
        owner,
        len,
        pages,
        (offset, end),
        &mut |k, _, data, _| {
            let (lo, hi) = (offset.max(k * per), end.min(k * per + data.len()));
            if lo < hi {
                buf[lo - offset..hi - offset].copy_from_slice(&data[lo - k * per..hi - k * per]);
            }
            Ok(())
        },
    )?;
    Ok(end - offset)
}

/// Overwrite `bytes` at `offset` of a `len`-byte value (chain `pages`) in place: only the
/// pages the range touches are rewritten (same pages, same links). For layouts that
/// overwrite pages in place (`PageLayout::versions` is None: the journal keeps the
/// committed images); a layout that keeps versions never changes a chain (module
/// invariants), and the caller writes a new one instead. Errors: `InvalidArgument` for a
/// range past the value.
pub(crate) fn overwrite(
    store: &mut dyn PageWrite,
    owner: Pgno,
    (len, pages): (u32, &[Pgno]),
    offset: usize,
    bytes: &[u8],
) -> Result<()> {
    let f = Format::of(&*store);
    assert!(
        f.layout.versions().is_none(),
        "a chain of a layout that keeps versions is never changed in place"
    );
    let end = offset.saturating_add(bytes.len());
    if end > len as usize {
        return Err(Error::InvalidArgument(format!(
            "write of bytes [{offset}, {end}) into a value of {len} bytes"
        )));
    }
    let per = f.overflow_data();
    let mut touched = Vec::new();
    visit_range(
        &*store,
        owner,
        len,
        pages,
        (offset, end),
        &mut |k, pgno, data, next| {
            let mut chunk = data.to_vec();
            let (lo, hi) = (offset.max(k * per), end.min(k * per + data.len()));
            chunk[lo - k * per..hi - k * per].copy_from_slice(&bytes[lo - offset..hi - offset]);
            touched.push((pgno, next, chunk));
            Ok(())
        },
    )?;
    let tid = store.tid();
    for (pgno, next, chunk) in touched {
        let img = f
            .layout
            .overflow_image(pgno, f.geometry, tid, next, &chunk)?;
        store.write(pgno, img.into())?;
    }
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

/// The full bytes of a stored key: the key itself, or a long key's prefix followed by
/// its tail read from the chain (the only case that allocates).
pub(crate) fn full_key<'k, S: PageRead + ?Sized>(
    store: &S,
    owner: Pgno,
    key: CellKey<'k>,
) -> Result<Cow<'k, [u8]>> {
    match key {
        CellKey::Inline(k) => Ok(Cow::Borrowed(k)),
        CellKey::Long { len, prefix, first } => {
            // Room for the whole key when it is plausible; a corrupt huge length still
            // only grows the buffer as pages are actually read.
            let mut out = Vec::with_capacity((len as usize).min(64 << 10));
            out.extend_from_slice(prefix);
            walk(
                store,
                owner,
                len - prefix.len() as u32,
                first,
                &mut |_, data| {
                    out.extend_from_slice(data);
                    Ok(())
                },
            )?;
            Ok(Cow::Owned(out))
        }
    }
}

/// A reader of long keys whole for the searches of [`CellArray`]
/// (`crate::page::cells`), for a page `owner` of `store`.
pub(crate) fn whole<'s, 'k, S: PageRead + ?Sized>(
    store: &'s S,
    owner: Pgno,
) -> impl Fn(CellKey<'k>) -> Result<Vec<u8>> + 's {
    move |k| Ok(full_key(store, owner, k)?.into_owned())
}

/// Write the tail chain of `key` if it is long; returns its first page (0: inline key,
/// no chain).
pub(crate) fn write_key_tail(store: &mut dyn PageWrite, key: &[u8]) -> Result<Pgno> {
    let usable = store.usable_size();
    if cell::key_is_inline(usable, key.len()) {
        return Ok(0);
    }
    write(store, &key[cell::key_prefix_len(usable)..])
}

/// The chains a well-formed cell owns: a long key's tail, then (leaf) its value's.
pub(crate) fn cell_chains(leaf: bool, usable: usize, c: &[u8]) -> [Option<(u32, Pgno)>; 2] {
    let key = cell::cell_key(usable, c).tail();
    let value = match leaf.then(|| cell::cell_payload(usable, c)) {
        Some(Payload::Overflow { len, first }) => Some((len, first)),
        _ => None,
    };
    [key, value]
}

/// Free every chain a cell of page `owner` owns (the cell is going away).
pub(crate) fn free_cell_chains(
    store: &mut dyn PageWrite,
    owner: Pgno,
    leaf: bool,
    c: &[u8],
) -> Result<()> {
    let usable = store.usable_size();
    for (len, first) in cell_chains(leaf, usable, c).into_iter().flatten() {
        free(store, owner, len, first)?;
    }
    Ok(())
}
