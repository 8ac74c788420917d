//! The database file as an array of pages, with growth in zero-filled chunks.
//!
//! Invariant: when `chunk_pages > 0`, every growth is written as zeros and fdatasync'ed
//! *before* any page in it is written by a commit, and it is rounded up to a growth step
//! ([`grown_len`]): the chunk once the file is large, a smaller power of two pages (about
//! an eighth of the file, at least [`MIN_STEP_PAGES`]) before, so that a small database
//! stays small (an empty one is 16 KiB at 4 KiB pages, not a whole chunk) while growth
//! events stay logarithmic in number until the file reaches eight chunks. A commit into an already-allocated range then overwrites
//! existing blocks, which on ext4 changes no metadata and so causes no jbd2 transaction
//! (DESIGN §4). With `chunk_pages == 0` the file grows by plain writes, SQLite-style.
//! The one exception is a bulk of `nvlog`'s direct pages ([`DbFile::write_run`]): pages
//! no committed state holds yet, written past the end and fdatasync'ed before anything
//! links them in, so the sync that makes them durable makes the length durable too.
//!
//! `len_floor` is a lower bound of the file's length, raised by every write, growth and
//! stat that goes through `DbFile`. A commit asks "is the file at least this long?", and
//! the bound answers yes without a syscall. That matters beyond the syscall: on Linux with
//! multigrain timestamps (6.6+), a stat makes the next write stamp a fine-grained mtime,
//! and the commit's fdatasync then has the inode to write back too — on the lab a stat
//! before each one-page commit raised the fdatasync from ~230 to ~290 µs. The bound
//! is only ever trusted in the safe direction: a bound that is too low costs a stat, never
//! a zero-fill over live pages. Code that shrinks or writes the file behind `DbFile`'s back
//! (hot-journal recovery) calls `forget_len`.
//!
//! A file whose page count shrank (a `VACUUM`, `WriteTxn::clear_all`) is cut back by
//! [`DbFile::cut_tail`], which its journal calls once the database file alone holds the
//! smaller committed state (a log mode: after a checkpoint that copied and synced every
//! committed page). Readers of the longer state never read the pages past the new end
//! from the file: the shrinking commit kept their images for them (`Pager::commit`). A
//! cut needs no sync: if it is lost, the file is only longer than its page count, which
//! every open accepts.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::error::{Error, Pgno, Result};
use crate::vfs::File;

/// The smallest growth step, in pages.
pub const MIN_STEP_PAGES: u64 = 4;

/// The length a file growing in chunks of `chunk_pages` (0: no chunks) takes to hold
/// `need` bytes: `need` rounded up to the growth step for that size (module notes).
pub fn grown_len(page_size: u64, chunk_pages: u32, need: u64) -> u64 {
    if chunk_pages == 0 {
        return need;
    }
    let pages = need.div_ceil(page_size);
    let step = (pages / 8)
        .next_power_of_two()
        .max(MIN_STEP_PAGES)
        .min(u64::from(chunk_pages));
    pages.div_ceil(step) * step * page_size
}

/// The database file.
#[derive(Debug)]
pub struct DbFile {
    pub file: Arc<dyn File>,
    pub path: PathBuf,
    pub page_size: usize,
    pub chunk_pages: u32,
    /// A lower bound of the file's length in bytes (see the module comment).
    len_floor: AtomicU64,
}

impl DbFile {
    pub fn new(file: Arc<dyn File>, path: PathBuf, page_size: usize, chunk_pages: u32) -> Self {
        DbFile {
            file,
            path,
            page_size,
            chunk_pages,
            len_floor: AtomicU64::new(0),
        }
    }

    /// Cut the file back to `page_count` pages (not rounded up to a growth step: the
    /// smallest file is what a shrink is for, and the next growth allocates its step
    /// anew). The caller guarantees that the file alone holds the committed state of
    /// `page_count` pages (module comment). An error leaves the file at least as long
    /// as that state needs; it is the caller's error all the same (SQLite's commit fails
    /// with `SQLITE_IOERR_TRUNCATE`): an I/O error is never swallowed.
    pub fn cut_tail(&self, page_count: u32) -> Result<()> {
        let want = page_count as u64 * self.page_size as u64;
        if self.file_len()? > want {
            self.set_len(want)?;
        }
        Ok(())
    }

    /// Raise the known lower bound of the length (after a write that reached `len`).
    pub fn saw_len(&self, len: u64) {
        self.len_floor.fetch_max(len, Ordering::Relaxed);
    }

    /// Drop what is known of the length: the file was changed behind `DbFile`'s back.
    pub fn forget_len(&self) {
        self.len_floor.store(0, Ordering::Relaxed);
    }

    /// Whether the file is at least `need` bytes long; stats only when the known lower
    /// bound is not enough to say yes.
    pub fn len_at_least(&self, need: u64) -> Result<bool> {
        if self.len_floor.load(Ordering::Relaxed) >= need {
            return Ok(true);
        }
        Ok(self.file_len()? >= need)
    }

    /// Set the file's length (growth a page at a time).
    pub fn set_len(&self, len: u64) -> Result<()> {
        self.file
            .set_len(len)
            .map_err(Error::io("set_len", &self.path))?;
        self.len_floor.store(len, Ordering::Relaxed);
        Ok(())
    }

    /// Byte offset of a page.
    pub fn offset(&self, pgno: Pgno) -> u64 {
        pgno as u64 * self.page_size as u64
    }

    /// Current file length in bytes.
    pub fn file_len(&self) -> Result<u64> {
        let len = self.file.len().map_err(Error::io("stat", &self.path))?;
        self.len_floor.store(len, Ordering::Relaxed);
        Ok(len)
    }

    /// Read a page; a page past the end of the file is a `Corrupt` error.
    pub fn read_page(&self, pgno: Pgno, buf: &mut [u8]) -> Result<()> {
        debug_assert_eq!(buf.len(), self.page_size);
        self.read_pages(pgno, buf)
    }

    /// Read consecutive pages starting at `first` into `buf` (a whole number of pages) with
    /// one call; any page past the end of the file is a `Corrupt` error.
    pub fn read_pages(&self, first: Pgno, buf: &mut [u8]) -> Result<()> {
        debug_assert_eq!(buf.len() % self.page_size, 0);
        match self.file.read_exact_at(buf, self.offset(first)) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Err(Error::corrupt(
                first,
                format!("page lies past the end of {}", self.path.display()),
            )),
            Err(e) => Err(Error::io("read", &self.path)(e)),
        }
    }

    /// Hint that pages `[first, end)` will be read soon (see [`File::prefetch`]).
    pub fn prefetch(&self, first: Pgno, end: u64) {
        let start = self.offset(first);
        let stop = end.saturating_mul(self.page_size as u64);
        self.file.prefetch(start, stop.saturating_sub(start));
    }

    /// Write a page in place.
    pub fn write_page(&self, pgno: Pgno, data: &[u8]) -> Result<()> {
        debug_assert_eq!(data.len(), self.page_size);
        self.write_run(pgno, data)
    }

    /// Write consecutive pages from `first` in one call (`data`: a whole number of
    /// pages; no sync). Unlike a commit's writes it may grow the file past its chunks:
    /// `nvlog`'s direct pages, synced right after, need no zeros before them.
    pub fn write_run(&self, first: Pgno, data: &[u8]) -> Result<()> {
        debug_assert_eq!(data.len() % self.page_size, 0);
        let off = self.offset(first);
        self.file
            .write_at(data, off)
            .map_err(Error::io("write", &self.path))?;
        self.saw_len(off + data.len() as u64);
        Ok(())
    }

    /// Write several pages in place (no sync).
    pub fn write_pages<'a>(
        &self,
        pages: impl IntoIterator<Item = &'a (Pgno, crate::page::PageRef)>,
    ) -> Result<()> {
        for (pgno, page) in pages {
            self.write_page(*pgno, page)?;
        }
        Ok(())
    }

    /// Make sure the file can hold `page_count` pages without allocating in a commit:
    /// grow by whole chunks of zeros and fdatasync once. Returns whether it grew.
    pub fn ensure_capacity(&self, page_count: u32) -> Result<bool> {
        if self.chunk_pages == 0 {
            return Ok(false);
        }
        let need = page_count as u64 * self.page_size as u64;
        if self.len_floor.load(Ordering::Relaxed) >= need {
            return Ok(false);
        }
        let len = self.file_len()?;
        if len >= need {
            return Ok(false);
        }
        let new_len = grown_len(self.page_size as u64, self.chunk_pages, need);
        self.file
            .allocate(len, new_len - len)
            .map_err(Error::io("allocate", &self.path))?;
        self.sync()?;
        self.saw_len(new_len);
        Ok(true)
    }

    /// fdatasync the database file.
    pub fn sync(&self) -> Result<()> {
        self.file
            .sync_data()
            .map_err(Error::io("fdatasync", &self.path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vfs::{OpenOptions, SimVfs, Vfs};
    use std::io;
    use std::path::Path;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn growth_steps_grow_with_the_file_up_to_the_chunk() {
        let ps = 4096u64;
        // No chunks: the file grows exactly to what is needed.
        assert_eq!(grown_len(ps, 0, 3 * ps), 3 * ps);
        // A small file grows by the smallest step; a large one by whole chunks.
        assert_eq!(grown_len(ps, 64, 3 * ps), 4 * ps);
        assert_eq!(grown_len(ps, 64, 100 * ps), 112 * ps);
        assert_eq!(grown_len(ps, 64, 1000 * ps), 1024 * ps);
        // A chunk smaller than the smallest step is the step.
        assert_eq!(grown_len(ps, 1, 5 * ps), 5 * ps);
        for chunk in [1u32, 4, 8, 64, 256] {
            let mut last = 0;
            for pages in 1..5000u64 {
                let len = grown_len(ps, chunk, pages * ps);
                assert!(len >= pages * ps && len % ps == 0);
                assert!(len - pages * ps < u64::from(chunk) * ps, "{chunk} {pages}");
                assert!(len >= last, "monotonic");
                last = len;
            }
        }
    }

    /// A file that counts `len` calls (stats) and passes everything else through.
    #[derive(Debug)]
    struct StatCounter {
        inner: Arc<dyn File>,
        stats: AtomicUsize,
    }

    impl File for StatCounter {
        fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
            self.inner.read_at(buf, offset)
        }
        fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
            self.inner.write_at(buf, offset)
        }
        fn sync_data(&self) -> io::Result<()> {
            self.inner.sync_data()
        }
        fn sync_all(&self) -> io::Result<()> {
            self.inner.sync_all()
        }
        fn len(&self) -> io::Result<u64> {
            self.stats.fetch_add(1, Ordering::Relaxed);
            self.inner.len()
        }
        fn set_len(&self, len: u64) -> io::Result<()> {
            self.inner.set_len(len)
        }
        fn allocate(&self, offset: u64, len: u64) -> io::Result<()> {
            self.inner.allocate(offset, len)
        }
    }

    fn setup(chunk: u32) -> (Arc<StatCounter>, DbFile) {
        let vfs = SimVfs::new();
        let path = Path::new("/db/x");
        let opts = OpenOptions::CREATE;
        let f = Arc::new(StatCounter {
            inner: vfs.open(path, opts).unwrap(),
            stats: AtomicUsize::new(0),
        });
        let db = DbFile::new(f.clone(), path.to_path_buf(), 512, chunk);
        (f, db)
    }

    #[test]
    fn commits_inside_the_allocated_range_do_not_stat() {
        let (f, db) = setup(4);
        assert!(db.ensure_capacity(3).unwrap());
        assert_eq!(db.file_len().unwrap(), 4 * 512);
        let stats = f.stats.load(Ordering::Relaxed);
        for pgno in 0..4 {
            db.write_page(pgno, &[7u8; 512]).unwrap();
            assert!(!db.ensure_capacity(4).unwrap());
            assert!(db.len_at_least(4 * 512).unwrap());
        }
        assert_eq!(f.stats.load(Ordering::Relaxed), stats, "no stat per commit");
        // Past the bound: one stat, then a grow by a whole chunk.
        assert!(db.ensure_capacity(5).unwrap());
        assert_eq!(f.inner.len().unwrap(), 8 * 512);
        assert_eq!(f.stats.load(Ordering::Relaxed), stats + 1);
    }

    #[test]
    fn a_forgotten_bound_never_zero_fills_live_pages() {
        let (f, db) = setup(4);
        db.ensure_capacity(4).unwrap();
        db.write_page(3, &[9u8; 512]).unwrap();
        // Someone else (hot-journal recovery) shrinks and regrows the file.
        f.inner.set_len(512).unwrap();
        f.inner.write_at(&[5u8; 512], 3 * 512).unwrap();
        db.forget_len();
        assert!(!db.ensure_capacity(4).unwrap(), "the file is long enough");
        let mut buf = [0u8; 512];
        db.read_page(3, &mut buf).unwrap();
        assert_eq!(buf, [5u8; 512], "page 3 kept");
        // A stale-low bound only costs a stat: it is raised, never trusted downwards.
        assert!(db.len_at_least(4 * 512).unwrap());
        assert!(!db.len_at_least(5 * 512).unwrap());
    }
}
