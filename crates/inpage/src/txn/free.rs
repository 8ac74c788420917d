//! Free space: how a write transaction takes and gives back pages, under the policy the
//! store's layout chooses ([`FreeSpace`]).
//!
//! - `PageList` (stock): free pages form a chain from the header (`freelist_head`,
//!   `freelist_count`); each free-list page holds the next one's number. Taking or giving
//!   a page rewrites the chain head inside the transaction, so the chain is as atomic as
//!   the transaction (the journal protects it like any page).
//! - `TreeWalk` (DHL): no free list on disk — writing one would overwrite pages the
//!   committed trees still use, which a DHL transaction must never do before commit. The
//!   free pages are those no tree owns, found by walking every tree once per open before
//!   the first write transaction, and kept by the pager (`pager/free.rs`, whose module
//!   docs map where each part of free space lives). A page freed by a transaction joins
//!   the set only when it commits (until then the committed trees own it); a page it grew
//!   the file by and freed unwritten is given back at once if it is at the end.
//!
//! Invariant both keep: every page below `page_count` is in exactly one place, a tree or
//! the free space; `allocate` and `free` are the only ways pages move between them.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;

use super::{ReadTxn, ReadableTxn, Shared, WriteTxn};
use crate::error::{Error, Pgno, Result};
use crate::format::header::Header;
use crate::le::{get_u32, put_u32};
use crate::page::{page_type, FreeSpace, PageRead, PageWrite};
use crate::tree;

/// Where a free-list page keeps the next page's number.
const NEXT: usize = 4;

/// Image of a free-list page linking to `next` (0 ends the chain).
pub(crate) fn free_list_page(page_size: usize, next: Pgno) -> Vec<u8> {
    let mut page = vec![0u8; page_size];
    page[0] = page_type::FREE;
    put_u32(&mut page, NEXT, next);
    page
}

/// The next pointer of free-list page `pgno`; `Corrupt` if it is not one.
pub(crate) fn free_list_next(pgno: Pgno, page: &[u8]) -> Result<Pgno> {
    if page.len() < NEXT + 4 || page[0] != page_type::FREE {
        let t = page.first().copied().unwrap_or(0);
        return Err(Error::corrupt(
            pgno,
            format!("on the free list but has type {t} ({})", page_type::name(t)),
        ));
    }
    Ok(get_u32(page, NEXT))
}

/// Walk the free list of header `h` on `store`: each page once, as many as the header
/// says (`check` and tools; a transaction only ever touches the head).
pub(crate) fn walk_free_list(
    store: &dyn PageRead,
    h: &Header,
    visit: &mut dyn FnMut(Pgno) -> Result<()>,
) -> Result<()> {
    let mut next = h.freelist_head;
    let mut seen = 0u32;
    while next != 0 {
        if seen >= h.freelist_count {
            return Err(Error::corrupt(
                next,
                format!(
                    "free list is longer than the {} pages the header says (or has a cycle)",
                    h.freelist_count
                ),
            ));
        }
        visit(next)?;
        let page = store.read(next)?;
        seen += 1;
        next = free_list_next(next, &page)?;
    }
    if seen != h.freelist_count {
        return Err(Error::corrupt(
            0,
            format!(
                "header says {} free pages, the free list has {seen}",
                h.freelist_count
            ),
        ));
    }
    Ok(())
}

/// `TreeWalk`: make sure the pager knows the free set, walking every tree once per open.
/// Called with the writer flag held, so no other writer changes the trees meanwhile; an
/// open that only reads never pays for the walk.
pub(crate) fn ensure_known(shared: &std::sync::Arc<Shared>) -> Result<()> {
    if shared.pager.layout().free_space() != FreeSpace::TreeWalk
        || shared.free_known.load(Ordering::Acquire)
    {
        return Ok(());
    }
    // A clean close may have kept the free set (DHL's snapshot): then no walk at all.
    // (The integrity check proves a kept snapshot against the walk it replaces.)
    let free = match shared.pager.kept_free_pages()? {
        Some(kept) => kept,
        None => walk_free(shared)?,
    };
    shared.pager.set_free_pages(free);
    shared.free_known.store(true, Ordering::Release);
    Ok(())
}

/// The pages below the page count that no tree owns, by walking every tree.
fn walk_free(shared: &std::sync::Arc<Shared>) -> Result<BTreeSet<Pgno>> {
    let r = ReadTxn::new(shared.clone(), None)?;
    let h = r.snapshot_header().clone();
    let mut owned = BTreeSet::new();
    tree::for_each_page(&r, h.catalog_root, &mut |p| {
        owned.insert(p);
    })?;
    for info in r.list_trees()? {
        tree::for_each_page(&r, info.root, &mut |p| {
            owned.insert(p);
        })?;
    }
    Ok((1..h.page_count).filter(|p| !owned.contains(p)).collect())
}

impl WriteTxn {
    /// Take a page from the free space, else grow the file.
    pub(super) fn take_page(&mut self) -> Result<Pgno> {
        let pgno = match self.layout.free_space() {
            FreeSpace::PageList => self.take_from_list()?,
            FreeSpace::TreeWalk if self.occ.is_some() => self.take_page_occ()?,
            FreeSpace::TreeWalk => match self.shared.pager.pick_free(&self.st.taken) {
                Some(p) => {
                    self.st.taken.insert(p);
                    p
                }
                None => self.grow()?,
            },
        };
        self.st.fresh.insert(pgno);
        Ok(pgno)
    }

    /// Give a page back to the free space.
    pub(super) fn give_page(&mut self, pgno: Pgno) -> Result<()> {
        match self.layout.free_space() {
            FreeSpace::PageList => {
                let page = free_list_page(self.page_size(), self.st.header.freelist_head);
                self.write(pgno, page.into())?;
                let h = &mut self.st.header;
                h.freelist_head = pgno;
                h.freelist_count += 1;
                Ok(())
            }
            FreeSpace::TreeWalk => {
                // TwoVto: freeing a page changes it as much as writing it does.
                self.lock_page(pgno)?;
                // Never written: the committed trees may still use the page, and this
                // transaction may abort. A page this transaction allocated has no
                // committed user, but its image is dropped too so it is not written.
                self.st.dirty.remove(&pgno);
                // A spilled version of it is invalidated at commit (`CommitBatch::discard`).
                self.st.spilled.remove(&pgno);
                if self.st.fresh.remove(&pgno) {
                    if self.st.taken.remove(&pgno) {
                        return Ok(()); // back to the free set, as if never taken
                    }
                    // Grown by this transaction and never to be written: if it is at the
                    // end, give it back so the file never has to be longer than what the
                    // transaction writes (a lost size change must not leave the header
                    // claiming unwritten pages).
                    self.st.grown_freed.insert(pgno);
                    if self.occ.is_some() {
                        // Other writers may have grown past it: the count stays.
                        return Ok(());
                    }
                    let h = &mut self.st.header;
                    while h.page_count > 1 && self.st.grown_freed.remove(&(h.page_count - 1)) {
                        h.page_count -= 1;
                    }
                    return Ok(());
                }
                self.st.freed.push(pgno);
                Ok(())
            }
        }
    }

    /// `Concurrency::Occ`: a free page no live transaction holds, else a page number
    /// growth hands out (`txn/occ.rs`).
    fn take_page_occ(&mut self) -> Result<Pgno> {
        let occ = self.shared.occ.as_ref().expect("Occ state");
        let t = self.occ.as_mut().expect("Occ state");
        if let Some(p) = occ.take_free(&self.shared.pager, self.base.fcc) {
            // Release-mode check: a page this transaction's snapshot uses, taken as free,
            // would be overwritten by a new node and its changes lost.
            if self.st.dirty.contains_key(&p) || t.read_set.borrow().contains(&p) {
                return Err(Error::corrupt(
                    p,
                    "free page handed to a transaction whose snapshot still uses it",
                ));
            }
            t.ever_taken.insert(p);
            self.st.taken.insert(p);
            // A page a transaction abandoned joins the free set once a commit made it
            // part of the file, which may be past this snapshot's end.
            let h = &mut self.st.header;
            h.page_count = h.page_count.max(p + 1);
            return Ok(p);
        }
        let p = occ.grow(&self.shared.pager)?;
        t.ever_grown.insert(p);
        let h = &mut self.st.header;
        h.page_count = h.page_count.max(p + 1);
        Ok(p)
    }

    fn grow(&mut self) -> Result<Pgno> {
        let h = &mut self.st.header;
        if h.page_count == u32::MAX {
            return Err(Error::Full);
        }
        h.page_count += 1;
        Ok(h.page_count - 1)
    }

    /// `PageList`: unlink the chain's head.
    fn take_from_list(&mut self) -> Result<Pgno> {
        let h = &self.st.header;
        if h.freelist_head == 0 {
            return self.grow();
        }
        let pgno = h.freelist_head;
        let next = free_list_next(pgno, &self.read(pgno)?)?;
        let h = &mut self.st.header;
        if next >= h.page_count || (next == 0) != (h.freelist_count == 1) {
            return Err(Error::corrupt(
                pgno,
                format!("free-list link to page {next} is inconsistent"),
            ));
        }
        h.freelist_head = next;
        h.freelist_count -= 1;
        Ok(pgno)
    }
}
