//! Giving free pages back to the file system (SQLite's `auto_vacuum`): the pages at the
//! end of the file move into free pages below, and the page count drops past them.
//!
//! How a move works, in one write transaction of a page-list layout (the stock layouts,
//! which overwrite pages in place; a layout that keeps committed versions in its pages
//! cannot move one before its commit and is refused):
//!
//! 1. The free list is read whole (once per transaction while nothing else writes:
//!    [`VacuumMemo`]). With `n` pages to give back, the new page count is
//!    `end = page_count − n`; every page in `end..page_count` that is not free moves to
//!    one of the lowest free pages below `end` (there are enough: `n` ≤ the free count).
//! 2. The holder of each moving page (the one page whose pointer reaches it: its parent
//!    node, the node owning the chain it starts, the chain page before it) comes from a
//!    walk of every tree (`tree::holders`). Leaves are read only when an overflow page
//!    moves: a leaf or interior page is always held by an interior page, so the usual
//!    walk reads the interior pages only. A tree's root is held by its catalog record
//!    (the catalog's own root by the header). A move that leaves free pages keeps every
//!    page's holder for the next (the memo); one that leaves none notes only its own.
//! 3. Catalog records of moving roots are rewritten first, while every page is still at
//!    its old number (the catalog is searched by descent); then every holder's pointers
//!    are rewritten where it lies (`PageLayout::repoint`); then each moving page's image,
//!    holders' edits included, is copied to its new number. A holder that moves itself
//!    is edited before it is copied, so the order is safe whatever holds what.
//! 4. The free list keeps the free pages below `end` not used as targets, in its order,
//!    rewriting only the pages whose next pointer changed; the page count drops to `end`
//!    and the pages past it leave the transaction's changes.
//!
//! The commit is an ordinary one: the journal protects every overwritten page as always,
//! and a commit that lowers the page count keeps the tail for older readers and cuts the
//! file once the file alone holds the new state (`GUARANTEES.md`, "Shrinking the file").
//!
//! Invariant kept: every page below the page count is in exactly one tree, chain or the
//! free list, before and after; the release checks below refuse (and change nothing the
//! transaction cannot roll back) where the file breaks it: a page in the tail that no tree
//! reaches, a holder that does not point at the page it holds.

use std::collections::BTreeSet;

use super::{lookup_tree, ReadableTxn, WriteTxn};
use crate::error::{Error, Pgno, Result};
use crate::format::header::AutoVacuum;
use crate::page::{page_type, FreeSpace, PageRead, PageWrite};
use crate::pager::PgnoMap;
use crate::seam::{planted, Plant};
use crate::tree;
use crate::txn::free::{free_list_page, walk_free_list};

/// What one [`WriteTxn::vacuum_free`] learned that the next can reuse while nothing else
/// changed the transaction's pages (`incremental_vacuum(N)` calls it once per page, so
/// each call costs what its own pages cost, not a walk of the free list and the trees):
/// the free list and who holds each page. Valid only while the transaction's write count
/// and the header's free list, page count and catalog root are what they were when it
/// was kept (any other write may reshape a tree or the list); savepoint rollbacks and
/// whole-database resets drop it (`bump_all_gens`).
#[derive(Debug, Default)]
pub(super) struct VacuumMemo {
    writes: u64,
    key: (u32, Pgno, u32, Pgno),
    chain: FreeChain,
    /// None until a move needed it.
    structure: Option<Structure>,
}

/// The free list as a doubly linked list plus its pages in number order, so taking out
/// any page, finding those past an end and the lowest ones costs O(log n) each.
#[derive(Debug, Default)]
struct FreeChain {
    head: Pgno,
    next: PgnoMap<Pgno>,
    prev: PgnoMap<Pgno>,
    sorted: BTreeSet<Pgno>,
}

impl FreeChain {
    fn from_order(order: &[Pgno]) -> FreeChain {
        let mut c = FreeChain {
            head: order.first().copied().unwrap_or(0),
            ..FreeChain::default()
        };
        for (i, &p) in order.iter().enumerate() {
            c.next.insert(p, order.get(i + 1).copied().unwrap_or(0));
            c.prev.insert(p, if i == 0 { 0 } else { order[i - 1] });
            c.sorted.insert(p);
        }
        c
    }

    /// Unlink `p`; returns the page whose next pointer changed (0: the head moved).
    fn remove(&mut self, p: Pgno) -> Pgno {
        let (Some(before), Some(after)) = (self.prev.remove(&p), self.next.remove(&p)) else {
            return 0;
        };
        self.sorted.remove(&p);
        if before == 0 {
            self.head = after;
        } else {
            self.next.insert(before, after);
        }
        if after != 0 {
            self.prev.insert(after, before);
        }
        before
    }
}

/// Every page's holder (`tree::holders`) and the reverse, and the roots, which catalog
/// records hold.
#[derive(Debug)]
struct Structure {
    holder: PgnoMap<Pgno>,
    held: PgnoMap<Vec<Pgno>>,
    /// Whether leaves were read (the holders of leaf values' chains are known).
    leaves: bool,
    /// Root page → its tree's name (None: the catalog's own root, held by the header).
    roots: PgnoMap<Option<String>>,
}

impl Structure {
    /// The same structure after the pages of `moved` took their new numbers, touching
    /// only their entries and their holders' (the order of the pairs does not matter: a
    /// holder renamed first has the page's entry renamed with it).
    fn renumber(&mut self, moved: &PgnoMap<Pgno>) {
        for (&from, &to) in moved {
            if let Some(h) = self.holder.remove(&from) {
                self.holder.insert(to, h);
                if let Some(x) = self
                    .held
                    .get_mut(&h)
                    .and_then(|v| v.iter_mut().find(|x| **x == from))
                {
                    *x = to;
                }
            }
            if let Some(kids) = self.held.remove(&from) {
                for &k in &kids {
                    self.holder.insert(k, to);
                }
                self.held.insert(to, kids);
            }
            if let Some(name) = self.roots.remove(&from) {
                self.roots.insert(to, name);
            }
        }
    }
}

fn memo_key(h: &crate::format::header::Header) -> (u32, Pgno, u32, Pgno) {
    (
        h.page_count,
        h.freelist_head,
        h.freelist_count,
        h.catalog_root,
    )
}

impl WriteTxn {
    /// Whether this transaction can give free pages back ([`WriteTxn::vacuum_free`]) and
    /// take an `auto_vacuum` setting other than `None`: a page-list layout whose pages
    /// hold no versions, one writer, nothing spilled, no page copy in progress.
    pub fn can_vacuum(&self) -> bool {
        self.layout_moves_pages()
            && self.occ.is_none()
            && self.vto.is_none()
            && self.st.spilled.is_empty()
            && self.st.copy.is_none()
    }

    /// Whether the layout lets a page change its number before its commit: free space
    /// in a page list, and no committed version kept inside the pages.
    fn layout_moves_pages(&self) -> bool {
        self.layout.free_space() == FreeSpace::PageList && self.layout.versions().is_none()
    }

    /// Set when free pages go back to the file system ([`AutoVacuum`]), stored in the
    /// header by this transaction's commit. `Full` and `Incremental` need a layout that can
    /// move pages ([`WriteTxn::can_vacuum`]): elsewhere `InvalidArgument`, nothing changed.
    pub fn set_auto_vacuum(&mut self, av: AutoVacuum) -> Result<()> {
        if av != AutoVacuum::None && !self.layout_moves_pages() {
            return Err(Error::InvalidArgument(format!(
                "auto_vacuum {av:?} needs a mode whose pages can move (mode {} keeps its free \
                 pages until VACUUM)",
                self.shared.pager.journal_mode()
            )));
        }
        self.st.header.auto_vacuum = av;
        Ok(())
    }

    /// Give up to `max` free pages back to the file system: the pages at the end of the
    /// file move into free pages below (module docs) and the page count drops by as many
    /// pages as were given back, which this returns (0 with no free page). Once that
    /// commits, the journal cuts the file. Every cursor of the transaction re-seeks
    /// afterwards, as after a rollback. `InvalidArgument` where
    /// [`WriteTxn::can_vacuum`] does not hold, and nothing changes.
    pub fn vacuum_free(&mut self, max: u32) -> Result<u32> {
        if !self.can_vacuum() {
            return Err(Error::InvalidArgument(format!(
                "giving free pages back needs a page-list layout and a single writer with \
                 nothing spilled (mode {})",
                self.shared.pager.journal_mode()
            )));
        }
        let h = self.st.header.clone();
        let n = max.min(h.freelist_count);
        if n == 0 {
            return Ok(0);
        }
        let end = h.page_count - n;
        // Release check: page 0 and the catalog's root always stay (the header decodes
        // only with a free count below the page count, so this holds on a sound file).
        if end < 2 {
            return Err(Error::corrupt(
                0,
                format!("{n} free pages of {} leave no catalog", h.page_count),
            ));
        }
        let mut memo = match self.vacuum_memo.take() {
            Some(m)
                if (m.writes == self.writes || planted(Plant::VacuumMemoIgnoresWrites))
                    && m.key == memo_key(&h) =>
            {
                m
            }
            _ => {
                let mut order = Vec::with_capacity(h.freelist_count as usize);
                walk_free_list(self, &h, &mut |p| {
                    order.push(p);
                    Ok(())
                })?;
                Box::new(VacuumMemo {
                    chain: FreeChain::from_order(&order),
                    ..VacuumMemo::default()
                })
            }
        };
        let chain = &mut memo.chain;
        let tail_free: Vec<Pgno> = chain.sorted.range(end..).copied().collect();
        let movers: Vec<Pgno> = (end..h.page_count)
            .filter(|p| tail_free.binary_search(p).is_err())
            .collect();
        let targets: Vec<Pgno> = chain
            .sorted
            .range(..end)
            .copied()
            .take(movers.len())
            .collect();
        // Release check: a move with nowhere to go would leave a used page past the end.
        if targets.len() != movers.len() {
            return Err(Error::corrupt(
                0,
                format!(
                    "{} used pages past page {end} but {} free pages below it",
                    movers.len(),
                    targets.len()
                ),
            ));
        }
        // The free list without the pages now used or past the end, in its order; only
        // the pages whose next pointer changed are rewritten.
        let mut relinked = BTreeSet::new();
        for &p in tail_free.iter().chain(&targets) {
            relinked.insert(chain.remove(p));
        }
        let relinked: Vec<(Pgno, Pgno)> = relinked
            .into_iter()
            .filter_map(|p| chain.next.get(&p).map(|&nx| (p, nx)))
            .collect();
        let (head, count) = (chain.head, chain.sorted.len() as u32);
        let moved: PgnoMap<Pgno> = movers
            .iter()
            .copied()
            .zip(targets.iter().copied())
            .collect();
        if !moved.is_empty() {
            // Pages left free after this move: later steps may reuse what it learned.
            let keep = count > 0;
            self.move_pages(&moved, &mut memo.structure, keep)?;
            if !keep {
                memo.structure = None;
            }
        }
        let ps = self.page_size();
        for (p, next) in relinked {
            self.write(p, free_list_page(ps, next).into())?;
        }
        // Pages past the end stop being the transaction's to write; the targets were
        // taken from the free list, as `allocate` takes a page.
        self.st.dirty.retain(|&p, _| p < end);
        self.st.fresh.retain(|&p| p < end);
        self.st.fresh.extend(targets.iter().copied());
        let hm = &mut self.st.header;
        hm.page_count = end;
        hm.freelist_head = head;
        hm.freelist_count = count;
        // Release check: the list the header now names is the one kept (a wrong count
        // would make the next open refuse the file, or lose pages).
        if (head == 0) != (count == 0) || count != h.freelist_count - n {
            return Err(Error::corrupt(
                0,
                "free list miscounted while giving pages back",
            ));
        }
        self.catalog_changed = true;
        self.bump_all_gens();
        memo.key = memo_key(&self.st.header);
        memo.writes = self.writes;
        self.vacuum_memo = Some(memo);
        Ok(n)
    }

    /// Step 2 and 3 of the module docs: every page of `moved` to its new number, its
    /// holder pointing there.
    fn move_pages(
        &mut self,
        moved: &PgnoMap<Pgno>,
        known: &mut Option<Structure>,
        keep: bool,
    ) -> Result<()> {
        let mut overflow = false;
        for &p in moved.keys() {
            overflow |= self.read(p)?.first() == Some(&page_type::OVERFLOW);
        }
        let catalog_root = self.st.header.catalog_root;
        if known.as_ref().is_none_or(|s| overflow && !s.leaves) {
            // Every page's holder when later moves may reuse them; only the moving
            // pages' when this move is the transaction's last (it gives every free page
            // back: `Full`'s commit, or all at once), which spares a map of the whole file
            // per commit.
            let all = keep;
            let mut holder = PgnoMap::default();
            let mut note = |p: Pgno, hp: Pgno| -> Result<()> {
                if (all || moved.contains_key(&p)) && holder.insert(p, hp).is_some() {
                    return Err(Error::corrupt(p, "page is referenced twice"));
                }
                Ok(())
            };
            tree::holders(self, catalog_root, overflow, &mut note)?;
            let mut roots = PgnoMap::default();
            roots.insert(catalog_root, None);
            for t in self.list_trees()? {
                tree::holders(self, t.root, overflow, &mut note)?;
                roots.insert(t.root, Some(t.name));
            }
            let mut held: PgnoMap<Vec<Pgno>> = PgnoMap::default();
            for (&p, &hp) in &holder {
                held.entry(hp).or_default().push(p);
            }
            *known = Some(Structure {
                holder,
                held,
                leaves: overflow,
                roots,
            });
        }
        let st = known.as_mut().expect("structure computed above");
        // Catalog records first, while the catalog's pages are all where they were.
        let before = (self.st.header.freelist_head, self.st.header.freelist_count);
        for (&root, name) in &st.roots {
            let (Some(name), Some(&to)) = (name, moved.get(&root)) else {
                continue;
            };
            let mut info = lookup_tree(self, catalog_root, name)?;
            info.root = to;
            self.put_catalog_record(&info)?;
        }
        // Release check: a record of the same size is replaced where it lies; had the
        // catalog taken a free page, the targets chosen above could be in use.
        if (self.st.header.freelist_head, self.st.header.freelist_count) != before {
            return Err(Error::corrupt(
                catalog_root,
                "rewriting a root's catalog record took a free page",
            ));
        }
        let mut holders = BTreeSet::new();
        for &p in moved.keys() {
            if st.roots.contains_key(&p) {
                continue;
            }
            match st.holder.get(&p) {
                Some(&hp) => {
                    holders.insert(hp);
                }
                None => {
                    return Err(Error::corrupt(
                        p,
                        "page past the new end is neither free nor in any tree",
                    ))
                }
            }
        }
        let g = self.geometry();
        let layout = self.layout;
        let lookup = |p: Pgno| moved.get(&p).copied();
        for hp in holders {
            let mut image = self.read(hp)?.to_vec();
            // Release check: the walk said this page points at a moving page.
            if !layout.repoint(hp, &mut image, g, &lookup)? {
                return Err(Error::corrupt(
                    hp,
                    "holds no pointer to the page the tree walk says it holds",
                ));
            }
            self.write(hp, image.into())?;
        }
        for (&from, &to) in moved {
            let image = self.read(from)?;
            self.write(to, image)?;
        }
        if let Some(&to) = moved.get(&catalog_root) {
            self.st.header.catalog_root = to;
        }
        st.renumber(moved);
        Ok(())
    }

    /// `AutoVacuum::Full`: before a commit, every free page goes back (SQLite's
    /// `autoVacuumCommit`). A transaction that cannot move pages (it spilled) commits
    /// with its free pages kept; the next commit that can gives them back.
    pub(super) fn vacuum_before_commit(&mut self) -> Result<()> {
        if self.st.header.auto_vacuum == AutoVacuum::Full
            && self.st.header.freelist_count > 0
            && self.can_vacuum()
        {
            self.vacuum_free(u32::MAX)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use crate::seam::{plant, Plant};
    use crate::vfs::SimVfs;
    use crate::{AutoVacuum, Config, Database, JournalMode, KeyKind, ReadableTxn, WriteTxn};

    fn open(vfs: &SimVfs) -> Database {
        let cfg = Config::default()
            .vfs(Arc::new(vfs.clone()))
            .journal_mode(JournalMode::WAL)
            .page_size(1024);
        Database::open("/db/v.db", cfg).unwrap()
    }

    /// A value of `len` bytes naming its key (values past a page go to chains).
    fn value(k: i64, len: usize) -> Vec<u8> {
        let mut v = format!("{k:08}:").into_bytes();
        v.resize(len, b'a' + (k % 26) as u8);
        v
    }

    fn rows<T: ReadableTxn>(t: &T) -> BTreeMap<i64, Vec<u8>> {
        let tree = t.open_tree("t").unwrap();
        let mut c = t.cursor(&tree).unwrap();
        let mut out = BTreeMap::new();
        let mut ok = c.first().unwrap();
        while ok {
            let k = c.key().unwrap().unwrap().as_int().unwrap();
            out.insert(k, c.value().unwrap().unwrap());
            ok = c.next().unwrap();
        }
        out
    }

    /// One page at a time, with rows written and removed between the moves (chains
    /// moving between leaves as their cells do), the way `incremental_vacuum` interleaves
    /// with a transaction's statements: the rows are the model's and the check passes.
    /// Returns the first failure, if any.
    fn interleaved(seed: u64) -> Result<(), String> {
        let vfs = SimVfs::new();
        let db = open(&vfs);
        let mut model = BTreeMap::new();
        let mut w = db.begin_write().unwrap();
        w.set_auto_vacuum(AutoVacuum::Incremental).unwrap();
        let t = w.create_tree("t", KeyKind::Int).unwrap();
        for k in 0..400i64 {
            let v = value(k, if k % 3 == 0 { 1500 } else { 120 });
            w.insert(&t, k, &v).unwrap();
            model.insert(k, v);
        }
        w.commit().unwrap();
        let mut w = db.begin_write().unwrap();
        for k in (0..400i64).filter(|k| k % 4 != 1) {
            w.remove(&t, k).unwrap();
            model.remove(&k);
        }
        w.commit().unwrap();
        let mut x = seed;
        let mut rnd = |n: u64| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) % n
        };
        let mut w: WriteTxn = db.begin_write().unwrap();
        for _ in 0..200 {
            match w.vacuum_free(1) {
                Ok(_) => {}
                Err(e) => return Err(format!("seed {seed}: vacuum_free: {e}")),
            }
            let k = rnd(600) as i64;
            let r = if rnd(3) == 0 {
                model.remove(&k);
                w.remove(&t, k).map(|_| ())
            } else {
                let v = value(
                    k,
                    if rnd(2) == 0 {
                        1500
                    } else {
                        60 + rnd(200) as usize
                    },
                );
                model.insert(k, v.clone());
                w.insert(&t, k, &v).map(|_| ())
            };
            if let Err(e) = r {
                return Err(format!("seed {seed}: write: {e}"));
            }
        }
        if rows(&w) != model {
            return Err(format!("seed {seed}: rows differ from the model"));
        }
        w.commit()
            .map_err(|e| format!("seed {seed}: commit: {e}"))?;
        let r = db.begin_read().unwrap();
        crate::check::check(&r, &Default::default())
            .map(|_| ())
            .map_err(|e| format!("seed {seed}: check: {e}"))?;
        if rows(&r) != model {
            return Err(format!("seed {seed}: committed rows differ from the model"));
        }
        Ok(())
    }

    #[test]
    fn moves_interleaved_with_writes_keep_every_row() {
        for seed in 0..6 {
            interleaved(seed).unwrap();
        }
    }

    #[test]
    fn the_interleaved_test_catches_a_memo_reused_after_writes() {
        plant(Plant::VacuumMemoIgnoresWrites, true);
        let caught = (0..6).filter_map(|s| interleaved(s).err()).next();
        plant(Plant::VacuumMemoIgnoresWrites, false);
        assert!(caught.is_some(), "a stale memo went unnoticed");
    }

    #[test]
    fn the_interleaved_test_catches_a_chain_link_left_pointing_at_a_moved_page() {
        plant(Plant::VacuumSkipsChainLink, true);
        let caught = (0..6).filter_map(|s| interleaved(s).err()).next();
        plant(Plant::VacuumSkipsChainLink, false);
        assert!(
            caught.is_some(),
            "a chain left pointing at a moved page went unnoticed"
        );
    }
}
