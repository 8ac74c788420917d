//! Integrity check and page census, for `inpage check` / `inpage inspect` and the tests.
//!
//! The check proves, on one snapshot: every tree is structurally valid (the tree layer's
//! `check`: checksums, cell bounds, key order, parent/child bounds, equal leaf depth,
//! overflow chains); the free list is a chain of free pages of the length the header
//! says, without cycles; and every page `1..page_count` is owned exactly once, by a tree
//! or by the free list. Layouts that keep no free list (`FreeSpace::TreeWalk`, DHL): there,
//! every page is owned at most once and the unowned ones are the free pages. The first
//! violation is returned as `Error::Corrupt` naming the page and what is wrong.

use std::collections::{BTreeMap, HashMap};

use crate::error::{Error, Pgno, Result};
use crate::page::FreeSpace;
use crate::tree::{self, TreeStats};
use crate::txn::catalog::TreeInfo;
use crate::txn::key::{memcmp, Comparator, KeyKind};
use crate::txn::{free, ReadableTxn};

/// What a successful check found.
#[derive(Clone, Debug, Default)]
pub struct CheckReport {
    pub fcc: u64,
    pub page_count: u32,
    pub free_pages: u32,
    /// The catalog tree's own statistics.
    pub catalog: TreeStats,
    pub trees: Vec<(TreeInfo, TreeStats)>,
    /// Who owns each page `0..page_count` (indexed by page number).
    pub owners: Vec<PageOwner>,
}

/// What a page belongs to, as the check found it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PageOwner {
    /// Page 0.
    Header,
    /// The catalog tree (names and roots of the other trees).
    Catalog,
    /// Tree `i` of [`CheckReport::trees`] (its nodes and overflow chains).
    Tree(usize),
    /// A page of the free list (a chain: every free page holds the next one's number,
    /// and the check reads each).
    FreeList,
    /// A free page of a layout without a free list (`FreeSpace::TreeWalk`): owned by no
    /// tree, read by nothing.
    Free,
}

impl std::fmt::Display for PageOwner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PageOwner::Header => "the header",
            PageOwner::Catalog => "catalog",
            PageOwner::Tree(_) => "a tree",
            PageOwner::FreeList => "the free list",
            PageOwner::Free => "free space",
        })
    }
}

/// Run the full check on a snapshot. Trees with a custom comparator need it in
/// `comparators` (by tree name); probe-ordered trees are checked for structure and page
/// ownership but not key order.
pub fn check<T: ReadableTxn>(
    txn: &T,
    comparators: &HashMap<String, Comparator>,
) -> Result<CheckReport> {
    let h = txn.snapshot_header().clone();
    let mut owner: Vec<Option<PageOwner>> = vec![None; h.page_count as usize];
    owner[0] = Some(PageOwner::Header);
    let mut claim = |pgno: Pgno, what: PageOwner| -> Result<()> {
        match owner.get_mut(pgno as usize) {
            None => Err(Error::corrupt(
                pgno,
                format!(
                    "{what} refers to page past the end ({} pages)",
                    h.page_count
                ),
            )),
            Some(Some(prev)) => Err(Error::corrupt(
                pgno,
                format!("page is owned twice: by {prev} and by {what}"),
            )),
            Some(slot) => {
                *slot = Some(what);
                Ok(())
            }
        }
    };

    let catalog = tree::check(txn, h.catalog_root, &memcmp, &mut |p| {
        claim(p, PageOwner::Catalog)
    })?;
    let mut trees = Vec::new();
    for info in txn.list_trees()? {
        let cmp: &tree::CmpFn = if info.external_order {
            // Probe-ordered: structure and ownership only (the order is the caller's).
            let me = PageOwner::Tree(trees.len());
            let stats = tree::check_unordered(txn, info.root, &mut |p| claim(p, me)).map_err(
                |e| match e {
                    Error::Corrupt { pgno, reason } => Error::Corrupt {
                        pgno,
                        reason: format!("in tree {:?}: {reason}", info.name),
                    },
                    other => other,
                },
            )?;
            trees.push((info, stats));
            continue;
        } else if info.custom_comparator {
            match comparators.get(&info.name) {
                Some(c) => c.as_ref(),
                None => {
                    return Err(Error::InvalidArgument(format!(
                        "tree {:?} uses a custom comparator; pass it to check",
                        info.name
                    )))
                }
            }
        } else {
            &memcmp
        };
        let me = PageOwner::Tree(trees.len());
        let stats =
            tree::check(txn, info.root, cmp, &mut |p| claim(p, me)).map_err(|e| match e {
                Error::Corrupt { pgno, reason } => Error::Corrupt {
                    pgno,
                    reason: format!("in tree {:?}: {reason}", info.name),
                },
                other => other,
            })?;
        if info.kind == KeyKind::Int {
            check_int_keys(txn, &info, cmp)?;
        }
        trees.push((info, stats));
    }

    let free_pages = if txn.layout().free_space() == FreeSpace::TreeWalk {
        // No free list: every page no tree owns is free (see `txn::free`).
        if h.freelist_head != 0 || h.freelist_count != 0 {
            return Err(Error::corrupt(
                0,
                format!(
                    "header names a free list, which {} databases do not keep",
                    txn.layout().name()
                ),
            ));
        }
        // A free-space snapshot kept by a clean close (the next write's free pages)
        // must name exactly the pages no tree owns.
        if let Some(kept) = txn.kept_free_pages()? {
            let walked: Vec<Pgno> = (1..h.page_count)
                .filter(|&p| owner[p as usize].is_none())
                .collect();
            if let Some(p) = kept
                .symmetric_difference(&walked.iter().copied().collect())
                .next()
            {
                return Err(Error::corrupt(
                    *p,
                    format!(
                        "the free-space snapshot kept at the clean close {} this page, the \
                         trees say otherwise",
                        if kept.contains(p) { "lists" } else { "omits" }
                    ),
                ));
            }
        }
        owner.iter().filter(|o| o.is_none()).count() as u32
    } else {
        free::walk_free_list(txn, &h, &mut |p| claim(p, PageOwner::FreeList))?;
        if let Some(p) = owner.iter().position(|o| o.is_none()) {
            return Err(Error::corrupt(
                p as Pgno,
                "page is neither in a tree nor on the free list (leaked)",
            ));
        }
        h.freelist_count
    };
    Ok(CheckReport {
        fcc: h.fcc,
        page_count: h.page_count,
        free_pages,
        catalog,
        trees,
        owners: owner
            .into_iter()
            .map(|o| o.unwrap_or(PageOwner::Free))
            .collect(),
    })
}

/// An integer tree's keys are all 8 bytes. The structural check cannot see this (a
/// well-formed byte-key tree under an integer tree's catalog entry, e.g. after two root
/// pages were swapped, passes it), and every read of such a key fails: found by fuzzing.
fn check_int_keys<T: ReadableTxn>(txn: &T, info: &TreeInfo, cmp: &tree::CmpFn) -> Result<()> {
    let mut c = tree::Cursor::new(txn, info.root, cmp);
    let mut ok = c.first()?;
    while ok {
        if c.key().len() != 8 {
            return Err(Error::corrupt(
                info.root,
                format!(
                    "in tree {:?}: integer tree holds a key of {} bytes",
                    info.name,
                    c.key().len()
                ),
            ));
        }
        ok = c.next()?;
    }
    Ok(())
}

/// Pages by type, read on one snapshot; pages that fail to read are listed with why.
#[derive(Clone, Debug, Default)]
pub struct PageCensus {
    pub by_type: BTreeMap<&'static str, u64>,
    pub unreadable: Vec<(Pgno, String)>,
}

/// Classify every page of the snapshot.
pub fn census<T: ReadableTxn>(txn: &T) -> PageCensus {
    let h = txn.snapshot_header();
    let mut c = PageCensus::default();
    c.by_type.insert("header", 1);
    let (layout, g) = (txn.layout(), txn.geometry());
    for pgno in 1..h.page_count {
        match txn.read(pgno) {
            Ok(p) => {
                *c.by_type
                    .entry(layout.classify(pgno, &p, g, txn.visible_tid()))
                    .or_insert(0) += 1
            }
            Err(e) => c.unreadable.push((pgno, e.to_string())),
        }
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vfs::SimVfs;
    use crate::{Config, Database, JournalMode};
    use std::sync::Arc;

    /// The first fuzz finding, in every layout: an integer tree's catalog record points
    /// at a well-formed byte-key tree (and the byte-key tree's at the integer tree, so no
    /// page is referenced twice). The structure is sound; only the key widths betray it,
    /// and the check must refuse it rather than let every read of the tree fail later.
    #[test]
    fn an_integer_tree_over_byte_keys_fails_the_check() {
        for mode in JournalMode::all() {
            let vfs = Arc::new(SimVfs::new());
            let db = Database::open("/swapped.db", Config::default().vfs(vfs).journal_mode(mode))
                .unwrap();
            let mut w = db.begin_write().unwrap();
            let ints = w.create_tree("ints", KeyKind::Int).unwrap();
            let bytes = w.create_tree("bytes", KeyKind::Bytes).unwrap();
            for k in 0..50i64 {
                w.insert(&ints, k, b"int row").unwrap();
                w.insert(&bytes, format!("key {k}").as_bytes(), b"byte row")
                    .unwrap();
            }
            w.commit().unwrap();
            check(&db.begin_read().unwrap(), &HashMap::new())
                .unwrap_or_else(|e| panic!("{mode}: sound file fails the check: {e}"));
            let mut w = db.begin_write().unwrap();
            w.swap_catalog_roots("ints", "bytes").unwrap();
            w.commit().unwrap();
            let err = check(&db.begin_read().unwrap(), &HashMap::new())
                .expect_err(&format!("{mode}: swapped roots pass the check"));
            assert!(
                err.to_string().contains("integer tree holds a key of"),
                "{mode}: {err}"
            );
        }
    }
}
