//! Storage interface: the narrow trait every layer above talks to.
//!
//! Invariants:
//! - `write_at` writes the whole buffer or fails; `read_at` returns how many bytes were
//!   read, short only at end of file. `read_exact_at` turns a short read into
//!   `UnexpectedEof`.
//! - Nothing written is promised durable until `sync_data`/`sync_all` on that file returns
//!   Ok. Creating, deleting or renaming a file is durable only after `sync_dir` on its
//!   directory. A failed sync promises nothing about any write since the last good sync
//!   (fsyncgate): callers must treat it as a lost commit.
//! - `allocate(off, len)` makes `[off, off+len)` exist and read as zeros, by *writing*
//!   zeros, so that later overwrites of that range are non-allocating (on ext4 an
//!   unwritten extent would still cost a metadata change on first write).
//! - Files are `Send + Sync` and take `&self`: positional I/O needs no cursor, so one
//!   handle can be shared between the writer and readers.
//! - `open_read_only` never yields a handle that can change the file (O_RDONLY on real
//!   files), so code holding only such handles cannot write the database even by mistake;
//!   `OverlayVfs` builds read-only inspection on it.
//! - `lock_range` is advisory and tied to the open file: the kernel drops it when the
//!   handle is closed or the process dies, so a crash never leaves a database locked.

#![deny(unsafe_code)]

use std::fmt;
use std::io;
use std::path::Path;
use std::sync::Arc;

mod accounting;
#[doc(hidden)]
pub mod fork;
mod mapped;
mod mem;
mod os;
mod overlay;
mod region;
mod snapshot;

pub use accounting::{AccountingVfs, IoKind, IoStats, IoStatsSnapshot, KindStats};
pub use fork::generation as fork_generation;
pub use mem::{MemFile, MemVfs};
pub use os::OsVfs;
pub use overlay::OverlayVfs;
#[doc(hidden)]
pub use region::check_range;
pub use region::{MemRegion, Region};
pub use snapshot::SnapshotVfs;

/// How to open a file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpenOptions {
    /// Create the file if it does not exist.
    pub create: bool,
    /// Fail if the file exists (with `create`).
    pub create_new: bool,
    /// Bypass the page cache (O_DIRECT). Buffers, offsets and lengths must then be
    /// multiples of the logical block size; the OS reports EINVAL otherwise.
    pub direct: bool,
}

impl OpenOptions {
    /// Open the file, creating it if it does not exist: what most opens want.
    pub const CREATE: OpenOptions = OpenOptions {
        create: true,
        create_new: false,
        direct: false,
    };
}

/// The methods of [`Vfs`] a wrapper that counts, faults or records file I/O passes to its
/// `inner` VFS unchanged: the nonce, whether files live in process memory, and memory
/// regions (not file I/O: neither counted, faulted nor recorded). Expands inside an
/// `impl Vfs for` block whose type has an `inner: Arc<dyn Vfs>` field.
#[macro_export]
#[doc(hidden)]
macro_rules! vfs_pass_through {
    (nonce, in_process_memory $(, $regions:ident)?) => {
        fn nonce(&self, salt: u64) -> u64 {
            self.inner.nonce(salt)
        }

        fn in_process_memory(&self) -> bool {
            self.inner.in_process_memory()
        }

        fn handles_take_turns(&self) -> bool {
            self.inner.handles_take_turns()
        }

        $($crate::vfs_pass_through!(@$regions);)?
    };
    (@regions) => {
        fn open_region(
            &self,
            path: &std::path::Path,
            create: Option<usize>,
        ) -> std::io::Result<std::sync::Arc<dyn $crate::Region>> {
            self.inner.open_region(path, create)
        }

        fn delete_region(&self, path: &std::path::Path) -> std::io::Result<()> {
            self.inner.delete_region(path)
        }
    };
}

/// A file system.
pub trait Vfs: Send + Sync + fmt::Debug {
    /// Open (or create) a file.
    fn open(&self, path: &Path, opts: OpenOptions) -> io::Result<Arc<dyn File>>;
    /// Remove a file. `NotFound` if it does not exist.
    fn delete(&self, path: &Path) -> io::Result<()>;
    /// Whether a file exists.
    fn exists(&self, path: &Path) -> io::Result<bool>;
    /// Atomically rename `from` to `to`, replacing `to`.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Make the directory's entries (creations, deletions, renames) durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// Open an existing file for reading only. Real files are opened `O_RDONLY`; the
    /// default (for simulated disks, which live in memory and have no such mode) opens it
    /// as `open` does, and the caller (`OverlayVfs`) never writes through it.
    fn open_read_only(&self, path: &Path) -> io::Result<Arc<dyn File>> {
        self.open(path, OpenOptions::default())
    }

    /// A value that is, for practical purposes, never repeated (journal nonces, WAL
    /// salts: a repeat would let stale records pass as current). `salt` is mixed in. A
    /// simulated disk draws it from its seed instead, so a replayed run writes the same
    /// bytes; wrappers forward to the disk they wrap.
    fn nonce(&self, salt: u64) -> u64 {
        system_nonce(salt)
    }

    /// Whether the files live in this process's memory (`MemVfs`, `SimVfs`): a child of
    /// `fork()` then gets its own copy of them, so a handle on them stays usable there.
    /// False for real files, which parent and child share (`vfs::fork`); wrappers
    /// forward to the VFS they wrap.
    fn in_process_memory(&self) -> bool {
        false
    }

    /// Whether handles on these files take turns with byte-range locks (`File::lock_range`)
    /// and a side region, as handles in different processes must: true for files every
    /// process sees, false where each handle's files are its own anyway (`MemVfs`); the
    /// simulated disk says yes when asked to (`SimVfs::take_turns`), so two handles on it
    /// stand for two processes. Wrappers forward to the VFS they wrap.
    fn handles_take_turns(&self) -> bool {
        !self.in_process_memory()
    }

    /// The files as other processes see them, for reading what they append after this
    /// view was taken (`redo`'s ring, read by a picture that follows another process's
    /// commits): `OverlayVfs`'s inner VFS, since its private layer holds this process's
    /// writes and a copy of what it read first, not theirs. `None`: this VFS itself.
    fn read_through(&self) -> Option<Arc<dyn Vfs>> {
        None
    }

    /// Open the memory region at `path` (`vfs::Region`): an existing one at its own size;
    /// else, with `create: Some(len)`, a new zero-filled one of `len` bytes; else
    /// `NotFound`. Regions live beside the files, not in them: on real files a region is
    /// a file mapped into memory, on the simulated disk an object a power cut keeps or
    /// loses. The default is `Unsupported`: a VFS that cannot say what its memory
    /// survives has none to offer (wrappers forward to the VFS they wrap).
    fn open_region(&self, path: &Path, create: Option<usize>) -> io::Result<Arc<dyn Region>> {
        let _ = create;
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!(
                "{}: this file system offers no memory regions",
                path.display()
            ),
        ))
    }

    /// Remove the region at `path`; `NotFound` if there is none.
    fn delete_region(&self, path: &Path) -> io::Result<()> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!(
                "{}: this file system offers no memory regions",
                path.display()
            ),
        ))
    }
}

/// The default `Vfs::nonce`: the std hasher's per-process random keys, a process-wide
/// counter and the clock, mixed with `salt`.
pub fn system_nonce(salt: u64) -> u64 {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(salt);
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    h.write_u128(nanos);
    h.finish()
}

/// Alignment of the zero buffer of `write_zeros`, so that it also works on O_DIRECT
/// handles (logical block sizes are at most 4096 on the devices we target).
const ZERO_ALIGN: usize = 4096;
/// Bytes of zeros written per call by `write_zeros`.
const ZERO_CHUNK: usize = 64 * 1024;

/// Write zeros over `[offset, offset + len)` through `file.write_at`, in 64 KiB calls from
/// a 4 KiB-aligned buffer, so O_DIRECT handles accept it (the caller still owes aligned
/// offsets and lengths there). The one `allocate` of every real or overlaid file.
pub fn write_zeros(file: &dyn File, offset: u64, len: u64) -> io::Result<()> {
    let end = offset
        .checked_add(len)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "offset + length overflows"))?;
    // Slicing an over-sized Vec gives the alignment without unsafe.
    let backing = vec![0u8; ZERO_CHUNK + ZERO_ALIGN];
    let skip = backing.as_ptr().align_offset(ZERO_ALIGN).min(ZERO_ALIGN);
    let zeros = &backing[skip..skip + ZERO_CHUNK];
    let mut off = offset;
    while off < end {
        let n = (end - off).min(ZERO_CHUNK as u64) as usize;
        file.write_at(&zeros[..n], off)?;
        off += n as u64;
    }
    Ok(())
}

/// An advisory lock on an open file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockKind {
    /// Several holders may share it; excludes `Exclusive`.
    Shared,
    /// One holder; excludes every other lock.
    Exclusive,
}

/// An open file.
// `len` is a fallible I/O call, not a container size; an `is_empty` would only invite
// a second syscall where callers want the length anyway.
#[allow(clippy::len_without_is_empty)]
pub trait File: Send + Sync + fmt::Debug {
    /// Read into `buf` at `offset`; returns the number of bytes read (short only at EOF).
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;
    /// Write all of `buf` at `offset`, growing the file if needed.
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;
    /// fdatasync: make this file's data (and the size it needs) durable.
    fn sync_data(&self) -> io::Result<()>;
    /// fsync: make data and all metadata durable.
    fn sync_all(&self) -> io::Result<()>;
    /// Current length in bytes.
    fn len(&self) -> io::Result<u64>;
    /// Truncate or extend (extension reads as zeros).
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// Make `[offset, offset+len)` exist as zeros by writing zeros (see module docs).
    fn allocate(&self, offset: u64, len: u64) -> io::Result<()>;
    /// Take, change or release (`kind` None) an advisory lock on the bytes `[start,
    /// start+len)` without waiting: `Ok(true)` if done, `Ok(false)` if another open handle
    /// (this process's or another's) holds a conflicting lock on part of the range. The
    /// lock belongs to this handle (an open file description: Linux OFD locks), so two
    /// handles of one file conflict even inside one process; it ends when the handle is
    /// closed or its process dies. Changing the kind of a held lock is atomic: a refused
    /// upgrade keeps the shared lock. Bytes past the end of the file may be locked, and a
    /// lock never changes what reads and writes do. The default takes nothing and says
    /// yes: simulated files live inside one process, whose `Database` handles are what
    /// the lock is about.
    fn lock_range(&self, start: u64, len: u64, kind: Option<LockKind>) -> io::Result<bool> {
        let _ = (start, len, kind);
        Ok(true)
    }

    /// A hint that `[offset, offset+len)` will be read soon: the OS may start reading it
    /// in the background, so several ranges hinted together are fetched concurrently
    /// instead of one after another. Only a hint: it never fails and changes nothing a
    /// read returns. The default does nothing (memory-backed files have nothing to fetch).
    fn prefetch(&self, offset: u64, len: u64) {
        let _ = (offset, len);
    }

    /// The alignment `O_DIRECT` I/O on this file needs (of offsets, lengths and memory),
    /// if the OS can say without doing any I/O: `Some(0)` if it cannot be done on this
    /// file at all, `None` if unknown (callers then probe with a read). The default
    /// says nothing.
    fn direct_alignment(&self) -> Option<usize> {
        None
    }

    /// Read exactly `buf.len()` bytes or fail with `UnexpectedEof`.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let mut done = 0;
        while done < buf.len() {
            let n = self.read_at(&mut buf[done..], offset + done as u64)?;
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("short read at offset {}", offset + done as u64),
                ));
            }
            done += n;
        }
        Ok(())
    }
}
