//! A redo ring kept in an ordinary file beside the database (`<db>-redo`), for the
//! `redo` mode: the same `Region` interface the `nvlog` journal uses for a memory-mapped
//! ring, but each store is a `pwrite` through the VFS and each persist an fdatasync, so
//! the file system and the simulated disk treat the ring like any other file.
//!
//! Invariants, and why they hold:
//! - *A store is durable exactly when a later `persist` returned.* `write` is a plain
//!   positional write (the page cache may keep it, lose it in a power cut, reorder it
//!   with others or tear it at sector boundaries); `persist` is `sync_data` on the whole
//!   file, which covers every store before it. The journal's record checksums and
//!   two-slot watermark are what make lost, reordered and torn stores harmless; this
//!   module only promises the fdatasync point.
//! - *Stores never allocate.* The file is created at its full size with zeros written
//!   (not a sparse `set_len`), so a commit's pwrite overwrites blocks the file system has
//!   already allocated: no metadata journaling on the commit path (the
//!   journaling-of-journal cost the mode exists to avoid).
//! - *A ring file exists only whole.* It is filled and synced under a temporary name,
//!   then renamed into place and the directory synced. A cut before the rename leaves
//!   only the temporary file, which the next creation deletes; so an existing `<db>-redo`
//!   always has its full, zero-initialized length (the `nvlog` open still checks the
//!   header it finds there).
//! - *Every access is bounds-checked* (`inpage_vfs::check_range`), as a memory region's
//!   is: offsets come from a ring that may have been damaged.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::dir_of;
use crate::vfs::{check_range, File, OpenOptions, Region, Vfs};

/// A ring stored in a file (module docs).
#[derive(Debug)]
pub(crate) struct FileRegion {
    file: Arc<dyn File>,
    len: usize,
}

impl Region for FileRegion {
    fn len(&self) -> usize {
        self.len
    }

    fn read(&self, offset: usize, buf: &mut [u8]) -> io::Result<()> {
        check_range(self.len, offset, buf.len())?;
        self.file.read_exact_at(buf, offset as u64)
    }

    fn write(&self, offset: usize, data: &[u8]) -> io::Result<()> {
        check_range(self.len, offset, data.len())?;
        self.file.write_at(data, offset as u64)
    }

    fn persist(&self, offset: usize, len: usize) -> io::Result<()> {
        check_range(self.len, offset, len)?;
        if len == 0 {
            return Ok(());
        }
        self.file.sync_data()
    }
}

fn tmp_path(path: &Path) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push("-tmp");
    PathBuf::from(p)
}

/// Open the ring file at `path` (`NotFound` if there is none), or with `create` make a
/// new one of that many bytes, all zeros, in place of any ring there (module docs).
pub(crate) fn open(
    vfs: &dyn Vfs,
    path: &Path,
    create: Option<usize>,
) -> io::Result<Arc<dyn Region>> {
    if let Some(len) = create {
        let tmp = tmp_path(path);
        if vfs.exists(&tmp)? {
            vfs.delete(&tmp)?;
        }
        {
            let f = vfs.open(&tmp, OpenOptions::CREATE)?;
            crate::vfs::write_zeros(&*f, 0, len as u64)?;
            f.sync_data()?;
        }
        vfs.rename(&tmp, path)?;
        vfs.sync_dir(&dir_of(path))?;
    } else if !vfs.exists(path)? {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("no redo ring at {}", path.display()),
        ));
    }
    let file = vfs.open(path, OpenOptions::default())?;
    let len = usize::try_from(file.len()?)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "redo ring too large"))?;
    Ok(Arc::new(FileRegion { file, len }))
}

/// Delete the ring file at `path`, durably (its directory synced): a ring that came back
/// after a power cut would be replayed.
pub(crate) fn delete(vfs: &dyn Vfs, path: &Path) -> io::Result<()> {
    vfs.delete(path)?;
    vfs.sync_dir(&dir_of(path))
}
