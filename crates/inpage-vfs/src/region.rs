//! Memory regions: byte arrays that outlive the process that wrote them (the `nvlog`
//! journal's ring, `journal/nvlog.rs`).
//!
//! Invariants, and why they hold:
//! - *A region is addressed like memory, not like a file:* `write` stores bytes and
//!   returns, with no system call on a real mapping; `persist` is the point after which
//!   the stored bytes survive whatever the region survives (on a DAX mount `msync`
//!   flushes the CPU caches to the persistent medium; under `/dev/shm` it costs little and
//!   promises nothing more than the mapping already did).
//! - *What a region survives is a property of where it lives, never of the code:* a
//!   `MAP_SHARED` mapping of a file survives the process (the kernel owns the pages), and
//!   survives power loss only if the file is on persistent memory. The simulated disk
//!   (`SimVfs::set_regions_persistent`) models both outcomes so the torture can check the
//!   promise of each.
//! - *Every access is bounds-checked* and fails with `InvalidInput` instead of
//!   panicking: offsets come from a region that may have been damaged.
//! - *Accesses are atomic with respect to each other* (one mutex per region): the
//!   journal's reader (recovery) and writer never run at once anyway, and the mutex makes
//!   the `&self` interface sound without reasoning about concurrent mapping access.

use std::fmt;
use std::io;
use std::sync::Mutex;

/// A memory region (see the module docs).
// `len` is the mapping's size, fixed at open; `is_empty` would be meaningless.
#[allow(clippy::len_without_is_empty)]
pub trait Region: Send + Sync + fmt::Debug {
    /// Size in bytes, fixed for the life of the handle.
    fn len(&self) -> usize;
    /// Copy `buf.len()` bytes at `offset` into `buf`.
    fn read(&self, offset: usize, buf: &mut [u8]) -> io::Result<()>;
    /// Store `data` at `offset`. Not promised to survive anything until `persist`.
    fn write(&self, offset: usize, data: &[u8]) -> io::Result<()>;
    /// Make `[offset, offset + len)` as durable as the region is (see the module docs).
    fn persist(&self, offset: usize, len: usize) -> io::Result<()>;
    /// The unit a store is written in. A store may set the bytes after its end, up to the
    /// next multiple of this, to zeros (never those of the first unit, which stores keep
    /// as they are), so a caller keeps that many bytes free after what it stores. 1 (the
    /// default): a store writes exactly the bytes given.
    fn write_granule(&self) -> usize {
        1
    }
    /// Another process may have stored into the region since this handle last did: forget
    /// any of its bytes this handle keeps in memory (a store reads them again). Nothing to
    /// forget by default: a memory region is read where it lies.
    fn refresh(&self) -> io::Result<()> {
        Ok(())
    }
    /// Whether other processes read the region while this handle writes it: a store
    /// that bypasses the page cache (`O_DIRECT`) then goes through it instead, where
    /// their reads find it. Nothing to change by default.
    fn others_read(&self, yes: bool) {
        let _ = yes;
    }
}

/// `[offset, offset + len)` inside a region of `size` bytes, or `InvalidInput`.
pub fn check_range(size: usize, offset: usize, len: usize) -> io::Result<()> {
    match offset.checked_add(len) {
        Some(end) if end <= size => Ok(()),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("region access [{offset}, +{len}) past its {size} bytes"),
        )),
    }
}

/// A region in process memory: what `MemVfs` and `OverlayVfs` hand out (they have no
/// crash model; the data lives as long as the VFS).
#[derive(Debug)]
pub struct MemRegion {
    bytes: Mutex<Vec<u8>>,
}

impl MemRegion {
    /// A region holding `bytes`.
    pub fn new(bytes: Vec<u8>) -> MemRegion {
        MemRegion {
            bytes: Mutex::new(bytes),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<u8>> {
        // Every mutation is one copy into the vector: a panic cannot leave it torn.
        self.bytes.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Region for MemRegion {
    fn len(&self) -> usize {
        self.lock().len()
    }

    fn read(&self, offset: usize, buf: &mut [u8]) -> io::Result<()> {
        let b = self.lock();
        check_range(b.len(), offset, buf.len())?;
        buf.copy_from_slice(&b[offset..offset + buf.len()]);
        Ok(())
    }

    fn write(&self, offset: usize, data: &[u8]) -> io::Result<()> {
        let mut b = self.lock();
        check_range(b.len(), offset, data.len())?;
        b[offset..offset + data.len()].copy_from_slice(data);
        Ok(())
    }

    fn persist(&self, offset: usize, len: usize) -> io::Result<()> {
        check_range(self.len(), offset, len)
    }
}
