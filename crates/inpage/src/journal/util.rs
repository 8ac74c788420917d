//! Helpers every journal mode uses, so that the mode files never import each other (a
//! mode is its own file plus its registration; see the module notes of `journal`).
//!
//! Invariant: nothing here knows one mode's on-disk format; these are checks on what the
//! pager hands a journal, plain file reading, `O_DIRECT` probing, reading or stamping
//! the stock header in page 0 (the database file's format, shared by the log modes). The
//! write-ahead logs' shared format and scan are `frame_log`.

use std::io;

use super::{CommitBatch, JournalCtx};
use crate::error::{Error, Result};
use crate::format::header::Header;
use crate::page::layout::PageLayout;
use crate::page::stock::STOCK;
use crate::vfs::File;

/// The sector size of the torn-write model: the smallest `O_DIRECT` alignment tried.
const SECTOR: usize = 512;

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

/// The smallest alignment (512, else 4096 if the page is that large) at which `f` accepts
/// an `O_DIRECT` read; a write has the same requirements, and a read changes nothing.
pub(crate) fn probe_alignment(f: &dyn File, page_size: usize) -> std::io::Result<usize> {
    // Asking the OS costs no I/O (the read below goes to the device on every open).
    match f.direct_alignment() {
        Some(0) => {
            return Err(std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                "the file system does not do O_DIRECT on this file",
            ))
        }
        Some(a) if a.is_power_of_two() && a.max(SECTOR) <= page_size => return Ok(a.max(SECTOR)),
        Some(a) => {
            return Err(std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                format!("O_DIRECT needs {a}-byte alignment, pages are {page_size} bytes"),
            ))
        }
        None => {}
    }
    let mut last = None;
    for align in [SECTOR, 4096] {
        if align > page_size {
            break;
        }
        let mut buf = Vec::new();
        let off = aligned_into(&mut buf, &vec![0u8; align], align);
        match f.read_at(&mut buf[off..off + align], 0) {
            Ok(_) => return Ok(align),
            Err(e) if refuses_direct(&e) => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            "pages are smaller than the device's direct-I/O block",
        )
    }))
}

/// Whether an error says O_DIRECT (or its alignment) is not accepted here: EINVAL, or
/// unsupported on this platform. Not an I/O failure.
pub(crate) fn refuses_direct(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::Unsupported
        || e.raw_os_error() == Some(rustix::io::Errno::INVAL.raw_os_error())
}

/// `bytes` copied to a buffer starting at an `align`-aligned address (for `O_DIRECT`),
/// as (buffer, offset of the copy in it).
pub(crate) fn aligned_into(buf: &mut Vec<u8>, bytes: &[u8], align: usize) -> usize {
    if buf.len() < bytes.len() + align {
        // Grown once to the largest span (a page): the address then stays put.
        *buf = vec![0u8; bytes.len() + align];
    }
    let off = buf.as_ptr().align_offset(align).min(align);
    buf[off..off + bytes.len()].copy_from_slice(bytes);
    off
}

/// Salts are never zero, so a zero-filled (preallocated) frame never matches.
pub(crate) fn nonzero(x: u32) -> u32 {
    x.max(1)
}

pub(crate) fn fresh_salt(vfs: &dyn crate::vfs::Vfs) -> u32 {
    nonzero(vfs.nonce(0x5a17) as u32)
}

/// The FCC in the database file's header, if page 0 holds a valid stock header (the
/// pager has checked it already; the journal's own unit tests use bare page images). A
/// failed read is an error, never "no header": skipping the generation check on an EIO
/// would replay frames of an older generation over newer pages.
pub(crate) fn db_fcc(ctx: &JournalCtx) -> Result<Option<u64>> {
    let mut p0 = vec![0u8; ctx.db.page_size];
    match ctx.db.read_page(0, &mut p0) {
        Ok(()) => Ok(Header::decode(&p0).ok().map(|h| h.fcc)),
        // A file shorter than one page has no header to compare with.
        Err(Error::Corrupt { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Refuse a database file shorter than its header's page count (`Error::Truncated`).
pub(crate) fn check_db_length(ctx: &JournalCtx) -> Result<()> {
    let mut p0 = vec![0u8; ctx.db.page_size];
    let h = match ctx.db.read_page(0, &mut p0) {
        Ok(()) => Header::decode(&p0).ok(),
        Err(Error::Corrupt { .. }) => None,
        Err(e) => return Err(e),
    };
    let Some(h) = h else {
        return Ok(()); // no header to measure against (the journal's own tests)
    };
    let need = h.page_count as u64 * ctx.db.page_size as u64;
    let len = ctx.db.file_len()?;
    if len < need {
        return Err(Error::Truncated {
            path: ctx.db_path.clone(),
            expected: need,
            actual: len,
        });
    }
    Ok(())
}

/// Set the FCC in a page 0 holding a stock header; `false` (nothing changed) if it names
/// that FCC already or holds no header (the journal's own tests use bare page images).
pub(crate) fn stamp_fcc(page0: &mut [u8], fcc: u64) -> bool {
    let Ok(mut h) = Header::decode(page0) else {
        return false;
    };
    if h.fcc == fcc || h.page_size as usize != page0.len() {
        return false;
    }
    h.fcc = fcc;
    page0.copy_from_slice(&STOCK.header_image(page0, 0, &h));
    true
}

/// A second handle on `path` opened with `O_DIRECT`, and the alignment its writes need;
/// None where the file system refuses `O_DIRECT` (or its alignment) and `want` is `Auto`.
/// Errors: `Config` where `want` is `On` and it is refused; any other failure as I/O.
pub(crate) fn open_direct(
    vfs: &dyn crate::vfs::Vfs,
    path: &std::path::Path,
    page_size: usize,
    want: super::DirectWrites,
) -> Result<Option<(std::sync::Arc<dyn File>, usize)>> {
    if want == super::DirectWrites::Off {
        return Ok(None);
    }
    let opts = crate::vfs::OpenOptions {
        direct: true,
        ..crate::vfs::OpenOptions::default()
    };
    match vfs
        .open(path, opts)
        .and_then(|f| probe_alignment(&*f, page_size).map(|a| (f, a)))
    {
        Ok(fa) => Ok(Some(fa)),
        // Refusals of O_DIRECT itself (or of its alignment); any other error is an I/O
        // failure and is reported as such.
        Err(e) if !refuses_direct(&e) => Err(Error::io("open O_DIRECT", path)(e)),
        Err(e) if want == super::DirectWrites::On => Err(Error::Config(format!(
            "direct_writes = On, but {} cannot be written with O_DIRECT: {e}",
            path.display()
        ))),
        Err(_) => Ok(None),
    }
}
