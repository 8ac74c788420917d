//! A plain in-memory file system: what `Database::open_memory` runs on (SQLite's temp
//! databases, `:memory:` and ephemeral tables).
//!
//! Invariants, and why they hold:
//! - *A file is one growable byte vector behind a mutex*; every call locks it for its
//!   whole duration, so reads and writes are atomic with respect to each other and a read
//!   sees every write that returned before it.
//! - *No crash model and no durability*: syncs do nothing and cost nothing, because the
//!   data dies with the process anyway. Unlike `SimVfs` (a crash simulator that keeps
//!   every unsynced write to replay), nothing but the current bytes is stored.
//! - *Each `MemVfs` is its own namespace*: two instances never see each other's files,
//!   and dropping the last handle on the VFS and its files frees the memory.

use super::*;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;

/// An in-memory file system without crash simulation (see the module notes).
#[derive(Debug, Default)]
pub struct MemVfs {
    files: Mutex<HashMap<PathBuf, Arc<MemFile>>>,
    /// Memory regions by path: they live as long as the VFS, like its files.
    regions: Mutex<HashMap<PathBuf, Arc<MemRegion>>>,
}

impl MemVfs {
    pub fn new() -> MemVfs {
        MemVfs::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<PathBuf, Arc<MemFile>>> {
        // Each change to the map is a single insert or remove: a panic elsewhere cannot
        // leave it torn.
        self.files.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn not_found(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!(
            "{}: no such file in the in-memory file system",
            path.display()
        ),
    )
}

impl Vfs for MemVfs {
    fn in_process_memory(&self) -> bool {
        true
    }

    fn open(&self, path: &Path, opts: OpenOptions) -> io::Result<Arc<dyn File>> {
        let mut files = self.lock();
        if let Some(f) = files.get(path) {
            if opts.create_new {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!("{}: file exists", path.display()),
                ));
            }
            return Ok(f.clone());
        }
        if !opts.create {
            return Err(not_found(path));
        }
        let f = Arc::new(MemFile::default());
        files.insert(path.to_path_buf(), f.clone());
        Ok(f)
    }

    fn delete(&self, path: &Path) -> io::Result<()> {
        match self.lock().remove(path) {
            Some(_) => Ok(()),
            None => Err(not_found(path)),
        }
    }

    fn exists(&self, path: &Path) -> io::Result<bool> {
        Ok(self.lock().contains_key(path))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut files = self.lock();
        let f = files.remove(from).ok_or_else(|| not_found(from))?;
        files.insert(to.to_path_buf(), f);
        Ok(())
    }

    fn sync_dir(&self, _dir: &Path) -> io::Result<()> {
        Ok(())
    }

    fn open_region(&self, path: &Path, create: Option<usize>) -> io::Result<Arc<dyn Region>> {
        let mut regions = self.regions.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(r) = regions.get(path) {
            return Ok(r.clone());
        }
        let len = create.ok_or_else(|| not_found(path))?;
        let r = Arc::new(MemRegion::new(vec![0u8; len]));
        regions.insert(path.to_path_buf(), r.clone());
        Ok(r)
    }

    fn delete_region(&self, path: &Path) -> io::Result<()> {
        let mut regions = self.regions.lock().unwrap_or_else(|e| e.into_inner());
        regions
            .remove(path)
            .map(drop)
            .ok_or_else(|| not_found(path))
    }
}

/// One in-memory file.
#[derive(Debug, Default)]
pub struct MemFile {
    data: Mutex<Vec<u8>>,
}

impl MemFile {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<u8>> {
        // Every write leaves the vector whole (resize then copy): no torn state to fear.
        self.data.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn offset_usize(offset: u64) -> io::Result<usize> {
    usize::try_from(offset).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("offset {offset} is out of range for an in-memory file"),
        )
    })
}

impl File for MemFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let data = self.lock();
        let Ok(off) = usize::try_from(offset) else {
            return Ok(0);
        };
        if off >= data.len() {
            return Ok(0);
        }
        let n = buf.len().min(data.len() - off);
        buf[..n].copy_from_slice(&data[off..off + n]);
        Ok(n)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let off = offset_usize(offset)?;
        let end = off.checked_add(buf.len()).ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, "offset + length overflows")
        })?;
        let mut data = self.lock();
        if data.len() < end {
            data.resize(end, 0);
        }
        data[off..end].copy_from_slice(buf);
        Ok(())
    }

    fn sync_data(&self) -> io::Result<()> {
        Ok(())
    }

    fn sync_all(&self) -> io::Result<()> {
        Ok(())
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.lock().len() as u64)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        let len = offset_usize(len)?;
        self.lock().resize(len, 0);
        Ok(())
    }

    fn allocate(&self, offset: u64, len: u64) -> io::Result<()> {
        let end = offset_usize(offset.checked_add(len).ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, "offset + length overflows")
        })?)?;
        let mut data = self.lock();
        if data.len() < end {
            data.resize(end, 0);
        }
        // Existing bytes in the range become zeros, as the trait promises.
        let off = offset_usize(offset)?;
        data[off..end].fill(0);
        Ok(())
    }
}
