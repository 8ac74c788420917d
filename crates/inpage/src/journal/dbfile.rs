//! The database file as an array of pages, with growth in zero-filled chunks.
//!
//! Invariant: when `chunk_pages > 0`, the file's length is always a multiple of the chunk
//! (or larger), and every growth is written as zeros and fdatasync'ed *before* any page in
//! it is written by a commit. A commit into an already-allocated range then overwrites
//! existing blocks, which on ext4 changes no metadata and so causes no jbd2 transaction
//! (DESIGN §4). With `chunk_pages == 0` the file grows by plain writes, SQLite-style.

use std::path::PathBuf;
use std::sync::Arc;

use crate::error::{Error, Pgno, Result};
use crate::vfs::File;

/// The database file.
#[derive(Debug)]
pub struct DbFile {
    pub file: Arc<dyn File>,
    pub path: PathBuf,
    pub page_size: usize,
    pub chunk_pages: u32,
}

impl DbFile {
    /// Byte offset of a page.
    pub fn offset(&self, pgno: Pgno) -> u64 {
        pgno as u64 * self.page_size as u64
    }

    /// Current file length in bytes.
    pub fn file_len(&self) -> Result<u64> {
        self.file.len().map_err(Error::io("stat", &self.path))
    }

    /// Read a page; a page past the end of the file is a `Corrupt` error.
    pub fn read_page(&self, pgno: Pgno, buf: &mut [u8]) -> Result<()> {
        debug_assert_eq!(buf.len(), self.page_size);
        match self.file.read_exact_at(buf, self.offset(pgno)) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Err(Error::corrupt(
                pgno,
                format!("page lies past the end of {}", self.path.display()),
            )),
            Err(e) => Err(Error::io("read", &self.path)(e)),
        }
    }

    /// Write a page in place.
    pub fn write_page(&self, pgno: Pgno, data: &[u8]) -> Result<()> {
        debug_assert_eq!(data.len(), self.page_size);
        self.file
            .write_at(data, self.offset(pgno))
            .map_err(Error::io("write", &self.path))
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
        let len = self.file_len()?;
        if len >= need {
            return Ok(false);
        }
        let chunk = self.chunk_pages as u64 * self.page_size as u64;
        let new_len = need.div_ceil(chunk) * chunk;
        self.file
            .allocate(len, new_len - len)
            .map_err(Error::io("allocate", &self.path))?;
        self.sync()?;
        Ok(true)
    }

    /// fdatasync the database file.
    pub fn sync(&self) -> Result<()> {
        self.file
            .sync_data()
            .map_err(Error::io("fdatasync", &self.path))
    }
}
