//! Helpers every journal mode uses, so that the mode files never import each other (a
//! mode is its own file plus its registration; see the module notes of `journal`).
//!
//! Invariant: nothing here knows a mode's on-disk format; these are checks on what the
//! pager hands a journal and plain file reading.

use std::io;

use super::CommitBatch;
use crate::error::{Error, Result};
use crate::vfs::File;

/// Check that every page image in a batch has the database's page size, so a pager bug
/// surfaces as an error instead of a misplaced write.
///
/// `steals`: whether the journal takes spilled pages (`restamp`, `discard`); one that does
/// not refuses a batch naming any, rather than commit without them.
pub(crate) fn check_batch(batch: &CommitBatch<'_>, page_size: usize, steals: bool) -> Result<()> {
    let names_spilled = !batch.restamp.is_empty() || !batch.discard.is_empty();
    if names_spilled && !steals {
        return Err(Error::InvalidArgument(
            "commit batch names spilled pages, but this journal mode does not steal".into(),
        ));
    }
    let pages = batch.pages.iter().map(|p| (p, batch.new_page_count));
    let originals = batch.originals.iter().map(|p| (p, batch.old_page_count));
    for ((pgno, page), limit) in pages.chain(originals) {
        if page.len() != page_size {
            return Err(Error::InvalidArgument(format!(
                "page {pgno} image has {} bytes, page size is {page_size}",
                page.len()
            )));
        }
        if *pgno >= limit {
            return Err(Error::InvalidArgument(format!(
                "page {pgno} is past the database size {limit}"
            )));
        }
    }
    // A stealing transaction whose pages are all spilled commits by restamping them.
    if batch.pages.is_empty() && batch.restamp.is_empty() {
        return Err(Error::InvalidArgument("commit batch has no pages".into()));
    }
    Ok(())
}

/// Read as much of `buf` as the file has at `offset`.
pub(crate) fn read_up_to(file: &dyn File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        let n = file.read_at(&mut buf[done..], offset + done as u64)?;
        if n == 0 {
            break;
        }
        done += n;
    }
    Ok(done)
}
