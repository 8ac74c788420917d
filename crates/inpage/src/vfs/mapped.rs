//! A region that is a file mapped into memory (`MAP_SHARED`): the `OsVfs` region.
//!
//! Invariants, and why they hold:
//! - *The mapping is exactly the file's length, fixed for the handle's life.* It is made
//!   once at open, the file is never resized while mapped (only `OsVfs::open_region`
//!   sizes it, before mapping), and it is unmapped only in `Drop`, when no borrow of it
//!   can remain (every access goes through `&self` methods that copy under the mutex).
//!   So the slice built over it stays valid for every access: no SIGBUS from a shrunk
//!   file, no use after unmap.
//! - *Stores reach the kernel's page cache at once* (a shared file mapping), so they
//!   survive the process; `persist` (`msync(MS_SYNC)`) is what makes them durable on a
//!   DAX mount. Under `/dev/shm` (tmpfs) the file is memory and survives neither a reboot
//!   nor a power cut, whatever is called.
//! - This is the crate's only `unsafe` code (`lib.rs` denies it elsewhere).
#![allow(unsafe_code)]

use std::fs;
use std::io;
use std::path::Path;
use std::sync::{Arc, Mutex};

use super::region::{check_range, Region};

/// A file mapped read-write and shared.
pub(crate) struct MappedRegion {
    /// The mapping; the mutex serializes accesses (module docs).
    bytes: Mutex<&'static mut [u8]>,
    len: usize,
    /// Kept open for the life of the mapping (not required by POSIX, but it keeps the
    /// file's identity tied to the handle for debugging tools such as `lsof`).
    _file: fs::File,
    /// The `vfs::fork` generation it was mapped in: a child of `fork()` shares the
    /// parent's mapping (`MAP_SHARED`) and must not write its parent's records.
    fork_gen: u64,
}

impl std::fmt::Debug for MappedRegion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MappedRegion")
            .field("len", &self.len)
            .finish()
    }
}

impl MappedRegion {
    /// Map `path`: an existing file at its length; else, with `create: Some(len)`, a new
    /// zero-filled file of `len` bytes.
    pub(crate) fn open(path: &Path, create: Option<usize>) -> io::Result<Arc<dyn Region>> {
        let file = match fs::OpenOptions::new().read(true).write(true).open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let Some(len) = create else { return Err(e) };
                if len == 0 {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        "a region needs at least one byte",
                    ));
                }
                let f = fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create(true)
                    .truncate(false)
                    .open(path)?;
                f.set_len(len as u64)?;
                f
            }
            Err(e) => return Err(e),
        };
        let len = usize::try_from(file.metadata()?.len())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "region too large"))?;
        if len == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: region file is empty", path.display()),
            ));
        }
        use rustix::mm::{mmap, MapFlags, ProtFlags};
        // SAFETY: a fresh mapping (null hint, no MAP_FIXED) cannot alias any memory Rust
        // owns. It covers exactly `len` bytes of a file that is `len` bytes long and is
        // never resized while mapped (module invariants), so every byte of the slice is
        // backed for as long as the slice lives; the slice lives inside `self` and the
        // mapping is removed only in `Drop`. Concurrent writers in *other* processes
        // would break Rust's aliasing rules for this slice; the database's file lock
        // keeps a second read-write opener of the same database away.
        let bytes: &'static mut [u8] = unsafe {
            let p = mmap(
                std::ptr::null_mut(),
                len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED,
                &file,
                0,
            )?;
            std::slice::from_raw_parts_mut(p.cast::<u8>(), len)
        };
        Ok(Arc::new(MappedRegion {
            bytes: Mutex::new(bytes),
            len,
            _file: file,
            fork_gen: super::fork::generation(),
        }))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, &'static mut [u8]> {
        // Every mutation is one copy: a panic cannot leave the slice half-updated in a
        // way the next access could not read.
        self.bytes.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Region for MappedRegion {
    fn len(&self) -> usize {
        self.len
    }

    fn read(&self, offset: usize, buf: &mut [u8]) -> io::Result<()> {
        check_range(self.len, offset, buf.len())?;
        let b = self.lock();
        buf.copy_from_slice(&b[offset..offset + buf.len()]);
        Ok(())
    }

    fn write(&self, offset: usize, data: &[u8]) -> io::Result<()> {
        check_range(self.len, offset, data.len())?;
        if super::fork::generation() != self.fork_gen {
            return Err(io::Error::other(
                "region mapped by the parent process before fork(): refused in the child",
            ));
        }
        let mut b = self.lock();
        b[offset..offset + data.len()].copy_from_slice(data);
        Ok(())
    }

    fn persist(&self, offset: usize, len: usize) -> io::Result<()> {
        check_range(self.len, offset, len)?;
        if len == 0 {
            return Ok(());
        }
        let page = rustix::param::page_size();
        let start = offset / page * page;
        let end = offset + len;
        let b = self.lock();
        // SAFETY: `[start, end)` lies inside the mapping (checked above; `start` only
        // rounds down to its page-aligned beginning, which msync requires), and msync
        // neither reads nor writes the memory from Rust's point of view.
        unsafe {
            rustix::mm::msync(
                b.as_ptr().add(start) as *mut std::ffi::c_void,
                end - start,
                rustix::mm::MsyncFlags::SYNC,
            )?;
        }
        Ok(())
    }
}

impl Drop for MappedRegion {
    fn drop(&mut self) {
        let b = self.bytes.get_mut().unwrap_or_else(|e| e.into_inner());
        let (p, len) = (b.as_mut_ptr(), b.len());
        // SAFETY: the mapping was made in `open` with exactly this address and length,
        // and `&mut self` proves no access to it is in flight; the slice is not used
        // again (the struct is being dropped).
        unsafe {
            let _ = rustix::mm::munmap(p.cast(), len);
        }
    }
}
