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
    /// zero-filled file of `len` bytes. An existing empty file is an empty region (a
    /// region of 0 bytes, which holds nothing and cannot be mapped).
    ///
    /// Creation is atomic: the file is made and sized under a temporary name of this
    /// process and then linked into place without replacing anything
    /// (`renameat2(RENAME_NOREPLACE)`, or `link` where that is not supported). So a kill
    /// at any point leaves either no region or one of its full size, never an empty or
    /// short one at `path` (a temporary file it leaves is removed by the next creation);
    /// and if another process created the region meanwhile, that one is opened.
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
                match create_sized(path, len)? {
                    Some(f) => f,
                    // Someone else's creation won: use theirs.
                    None => fs::OpenOptions::new().read(true).write(true).open(path)?,
                }
            }
            Err(e) => return Err(e),
        };
        let len = usize::try_from(file.metadata()?.len())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "region too large"))?;
        if len == 0 {
            return Ok(Arc::new(super::region::MemRegion::new(Vec::new())));
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

/// Create `path` as a zero-filled file of `len` bytes, atomically (see
/// [`MappedRegion::open`]); None if a file appeared at `path` meanwhile.
fn create_sized(path: &Path, len: usize) -> io::Result<Option<fs::File>> {
    let name = path.file_name().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "a region path needs a file name",
        )
    })?;
    remove_abandoned(path, name);
    let mut tmp_name = name.to_os_string();
    tmp_name.push(format!(
        ".{}-{:x}{CREATING}",
        std::process::id(),
        super::system_nonce(0x5245_4749)
    ));
    let tmp = path.with_file_name(tmp_name);
    let f = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&tmp)?;
    let placed = f
        .set_len(len as u64)
        .and_then(|()| link_into_place(&tmp, path));
    // The temporary name goes in every case (after a rename there is nothing to remove).
    let _ = fs::remove_file(&tmp);
    match placed {
        Ok(()) => Ok(Some(f)),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(None),
        Err(e) => Err(e),
    }
}

/// Suffix of a region being created under its temporary name.
const CREATING: &str = ".creating";

/// Remove temporary files of earlier creations of the region `name` in `path`'s
/// directory: a creator killed before it linked its file into place leaves one. Only
/// the process holding the database's lock creates its region, and that is the caller,
/// so every such file is abandoned. Best effort: one that cannot be removed is left.
fn remove_abandoned(path: &Path, name: &std::ffi::OsStr) {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let prefix = name.as_encoded_bytes();
    for e in entries.flatten() {
        let n = e.file_name();
        let b = n.as_encoded_bytes();
        if b.len() > prefix.len() + 1
            && b.starts_with(prefix)
            && b[prefix.len()] == b'.'
            && b.ends_with(CREATING.as_bytes())
        {
            let _ = fs::remove_file(e.path());
        }
    }
}

/// Give the file at `tmp` the name `path` unless `path` exists (`AlreadyExists` then).
fn link_into_place(tmp: &Path, path: &Path) -> io::Result<()> {
    use rustix::fs::{renameat_with, RenameFlags, CWD};
    match renameat_with(CWD, tmp, CWD, path, RenameFlags::NOREPLACE) {
        Ok(()) => Ok(()),
        // A file system without RENAME_NOREPLACE: a hard link also refuses to replace.
        Err(e) if e == rustix::io::Errno::INVAL || e == rustix::io::Errno::NOSYS => {
            fs::hard_link(tmp, path)
        }
        Err(e) => Err(e.into()),
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
