//! The page layout as the tree sees it, captured once per operation: the store's layout
//! ([`PageLayout`]), its geometry and the snapshot its reads see.
//!
//! The tree's logic is layout-blind: it reads every node as a [`CellArray`] and builds
//! every node image through the layout. What differs between layouts (how a node is
//! read, what a cell costs against the capacity, whether a new version fits next to the
//! committed one) is the layout's business; see `page::layout` for the invariants a
//! layout guarantees the tree (a node within capacity fits a fresh page; a maximal cell
//! costs well under half the capacity, which the split bound in `btree` needs).

use crate::error::{Pgno, Result};
use crate::page::cells::{CellArray, Detached};
use crate::page::{Geometry, Layout, PageRead, PageRef, PageWrite, TreePolicy};

/// Layout and geometry of one store, captured once per operation.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Format {
    pub layout: Layout,
    pub geometry: Geometry,
    /// The snapshot this store's reads see (layouts with versioned pages).
    pub visible_tid: u64,
}

impl Format {
    pub fn of<S: PageRead + ?Sized>(store: &S) -> Format {
        Format {
            layout: store.layout(),
            geometry: store.geometry(),
            visible_tid: store.visible_tid(),
        }
    }

    /// The node stored in `buf`, as this store's snapshot sees it (`attach` it to `buf`).
    pub fn open(&self, pgno: Pgno, buf: &[u8]) -> Result<Detached> {
        self.layout.open(pgno, buf, self.geometry, self.visible_tid)
    }

    /// [`Format::open`] of a shared page image (see [`PageLayout::open_page`]).
    ///
    /// [`PageLayout::open_page`]: crate::page::PageLayout::open_page
    pub fn open_page(&self, pgno: Pgno, page: &PageRef) -> Result<Detached> {
        self.layout
            .open_page(pgno, page, self.geometry, self.visible_tid)
    }

    /// [`Format::open`] plus the full structural check of the page (for `check`).
    pub fn open_checked(&self, pgno: Pgno, buf: &[u8]) -> Result<Detached> {
        self.layout
            .open_checked(pgno, buf, self.geometry, self.visible_tid)
    }

    /// Capacity of a node: the most `Σ cost(cell)` a written node may have.
    pub fn capacity(&self) -> usize {
        self.layout.capacity(self.geometry)
    }

    /// What a cell of `len` bytes costs against [`Format::capacity`].
    pub fn cost(&self, len: usize) -> usize {
        self.layout.cell_cost(len)
    }

    /// Capacity used by a page's cells.
    pub fn used(&self, p: &CellArray<'_>) -> Result<usize> {
        (0..p.ncells()).try_fold(0, |sum, i| Ok(sum + self.cost(p.cell_range(i)?.1)))
    }

    pub fn underfull(&self, used: usize) -> bool {
        used * 3 < self.capacity()
    }

    /// How the layout wants its nodes balanced.
    pub fn policy(&self) -> TreePolicy {
        self.layout.tree_policy()
    }

    /// Whether the layout overwrites a page in place (no committed version kept beside
    /// the new one: the stock layouts).
    pub fn overwrites_in_place(&self) -> bool {
        self.layout.versions().is_none()
    }

    /// Value bytes per overflow page.
    pub fn overflow_data(&self) -> usize {
        self.layout.overflow_data(self.geometry)
    }

    /// Image of page `pgno` holding a node, or None if the layout cannot write it there
    /// (see [`PageLayout::node_image`](crate::page::PageLayout::node_image)).
    pub fn image(
        &self,
        store: &dyn PageWrite,
        pgno: Pgno,
        leaf: bool,
        cells: &[Vec<u8>],
        right: Pgno,
    ) -> Result<Option<PageRef>> {
        self.layout.node_image(store, pgno, leaf, cells, right)
    }
}
