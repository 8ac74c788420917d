//! The page layout as the tree sees it: how to read a node, how much a node may hold, and
//! how to build a node's new page image.
//!
//! Both layouts keep cells in the same encoding and expose a node as a [`CellArray`], so
//! the tree's logic is layout-blind; only three things differ:
//! - **Reading.** Stock: the slotted page ([`slotted::Page::open`]). DHL: the version a
//!   reader at the store's `visible_tid` sees ([`dhl::visible`]).
//! - **Accounting.** Stock: `slotted::capacity` with one pointer per cell. DHL:
//!   `dhl::capacity` (which reserves room for one more cell of up to
//!   `dhl::reserve_cell` bytes next to a full version; a larger change that does not fit
//!   relocates the node) with two pointers per cell. In both a node within capacity always
//!   fits a fresh page, and a maximal cell costs at most about a third of the capacity
//!   (27 % at 4 KiB, 31 % at 512 B), which is what the split bound in `btree` needs.
//! - **Writing.** Stock: always fits. DHL: the new version must fit next to the page's
//!   committed version (kept bit for bit so that a crash or abort leaves it readable);
//!   [`Format::image`] returns None when it does not, and the tree relocates the node.

use crate::error::{Error, Pgno, Result};
use crate::page::cells::CellArray;
use crate::page::dhl::{self, Version};
use crate::page::slotted::{self, PTR_SIZE};
use crate::page::{Layout, PageRead, PageWrite};

/// Layout and geometry of one store, captured once per operation.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Format {
    pub layout: Layout,
    pub page_size: usize,
    pub usable: usize,
    /// DHL: the snapshot this store's reads see.
    pub visible_tid: u64,
}

impl Format {
    pub fn of<S: PageRead + ?Sized>(store: &S) -> Format {
        Format {
            layout: store.layout(),
            page_size: store.page_size(),
            usable: store.usable_size(),
            visible_tid: store.visible_tid(),
        }
    }

    pub fn is_dhl(&self) -> bool {
        self.layout == Layout::Dhl
    }

    /// The node stored in `buf`. Stock pages are checked lazily by the accessors; a DHL
    /// version is validated as a whole before it is returned.
    pub fn open<'a>(&self, pgno: Pgno, buf: &'a [u8]) -> Result<CellArray<'a>> {
        match self.layout {
            Layout::Stock => Ok(*slotted::Page::open(pgno, buf, self.usable)?),
            Layout::Dhl => Ok(*dhl::visible(pgno, buf, self.usable, self.visible_tid)?),
        }
    }

    /// [`Format::open`] plus the full structural check of the page (for `check`).
    pub fn open_checked<'a>(&self, pgno: Pgno, buf: &'a [u8]) -> Result<CellArray<'a>> {
        match self.layout {
            Layout::Stock => {
                let p = slotted::Page::open(pgno, buf, self.usable)?;
                p.validate()?;
                Ok(*p)
            }
            Layout::Dhl => self.open(pgno, buf),
        }
    }

    /// Capacity of a node: the most `Σ cost(cell)` a written node may have.
    pub fn capacity(&self) -> usize {
        match self.layout {
            Layout::Stock => slotted::capacity(self.usable),
            Layout::Dhl => dhl::capacity(self.usable),
        }
    }

    /// What a cell of `len` bytes costs against [`Format::capacity`].
    pub fn cost(&self, len: usize) -> usize {
        match self.layout {
            Layout::Stock => len + PTR_SIZE,
            Layout::Dhl => dhl::cell_cost(len),
        }
    }

    /// Capacity used by a page's cells.
    pub fn used(&self, p: &CellArray<'_>) -> Result<usize> {
        (0..p.ncells()).try_fold(0, |sum, i| Ok(sum + self.cost(p.cell_range(i)?.1)))
    }

    pub fn underfull(&self, used: usize) -> bool {
        used * 3 < self.capacity()
    }

    /// Value bytes per overflow page.
    pub fn overflow_data(&self) -> usize {
        match self.layout {
            Layout::Stock => slotted::overflow_data(self.usable),
            Layout::Dhl => dhl::overflow_data(self.usable),
        }
    }

    /// Image of page `pgno` holding a node, or None (DHL only) if it does not fit next to
    /// the page's committed version. A DHL page allocated by this transaction has no
    /// committed version and is laid out compactly, so a node within capacity always fits
    /// there.
    pub fn image(
        &self,
        store: &dyn PageWrite,
        pgno: Pgno,
        leaf: bool,
        cells: &[Vec<u8>],
        right: Pgno,
    ) -> Result<Option<Vec<u8>>> {
        match self.layout {
            Layout::Stock => Ok(Some(slotted::build(
                self.page_size,
                self.usable,
                leaf,
                cells,
                right,
            ))),
            Layout::Dhl => {
                let tid = store.tid();
                if tid == 0 {
                    return Err(Error::InvalidArgument(
                        "DHL tree write outside a transaction (tid 0)".into(),
                    ));
                }
                // The current image holds the committed version (tid <= tid - 1), which
                // build keeps, and possibly this transaction's earlier version, which it
                // replaces.
                let base = if store.is_fresh(pgno) {
                    None
                } else {
                    Some(store.read(pgno)?)
                };
                let version = Version {
                    tid,
                    txn_size: 0,
                    leaf,
                    right,
                    cells,
                };
                dhl::build(
                    pgno,
                    self.page_size,
                    self.usable,
                    base.as_deref(),
                    tid - 1,
                    &version,
                )
            }
        }
    }
}
