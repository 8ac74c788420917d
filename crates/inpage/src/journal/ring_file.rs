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
//! - *A store writes only the sectors it covers* where the file system takes `O_DIRECT`
//!   (`Config::direct_writes`, `Auto` by default, as DHL's page writes): the device then
//!   receives the record's sectors, not the whole 4 KiB page the page cache would write
//!   back. The bytes of the first sector before the store are the file's: the region's
//!   first sector and the last sector a store wrote are kept in memory (each store
//!   updates them), any other is read from the file. The bytes of the last sector after
//!   the store are zeros unless that sector is one of the two kept (`write_granule`: the
//!   journal keeps a sector free after every record, so they are free ring space). A store
//!   reaching into the file's last, partial sector goes through the page cache instead,
//!   since a direct write there would extend the file; the kernel (and the simulated
//!   disk) keep the two coherent, and `persist`'s fdatasync covers both. After a failed
//!   store the kept sectors may not be what the file holds: every later store is refused.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::util::open_direct;
use super::{dir_of, DirectWrites};
use crate::vfs::{check_range, File, OpenOptions, Region, Vfs};

/// A ring stored in a file (module docs).
#[derive(Debug)]
pub(crate) struct FileRegion {
    file: Arc<dyn File>,
    len: usize,
    direct: Option<Direct>,
}

/// Stores through an `O_DIRECT` handle, in whole sectors (module docs).
#[derive(Debug)]
struct Direct {
    file: Arc<dyn File>,
    align: usize,
    sectors: Mutex<Sectors>,
}

/// What a direct store needs besides its data.
#[derive(Debug)]
struct Sectors {
    /// The region's first sector as the file holds it (header, watermark slots and the
    /// ring's first bytes).
    first: Vec<u8>,
    /// The offset of the last sector a store wrote, whose bytes `last` holds.
    last_at: Option<usize>,
    last: Vec<u8>,
    /// A store failed: `first` and `last` may not be the file's any more.
    failed: bool,
    /// The aligned buffer a store is assembled in.
    scratch: Vec<u8>,
}

impl Sectors {
    /// The bytes of the sector at `at`, if it is one of the two kept.
    fn kept(&self, at: usize) -> Option<&[u8]> {
        if at == 0 {
            Some(&self.first)
        } else if self.last_at == Some(at) {
            Some(&self.last)
        } else {
            None
        }
    }
}

impl FileRegion {
    /// A store of `data` at `offset` as whole sectors through the direct handle.
    fn write_direct(&self, d: &Direct, offset: usize, data: &[u8]) -> io::Result<()> {
        let a = d.align;
        let start = offset / a * a;
        let end = (offset + data.len()).div_ceil(a) * a;
        let mut guard = d.sectors.lock().unwrap_or_else(|e| e.into_inner());
        let s = &mut *guard;
        if s.failed {
            return Err(io::Error::other(
                "an earlier store to this ring failed: its sectors are unknown",
            ));
        }
        if end > self.len {
            // The file's last, partial sector (module docs); the kept sectors follow.
            if s.last_at.is_some_and(|at| at + a > start) {
                s.last_at = None;
            }
            self.file.write_at(data, offset as u64)?;
            if offset < a {
                let k = (a - offset).min(data.len());
                s.first[offset..offset + k].copy_from_slice(&data[..k]);
            }
            return Ok(());
        }
        let n = end - start;
        // Taken out while the store is assembled, so the kept sectors can be read beside it.
        let mut scratch = std::mem::take(&mut s.scratch);
        if scratch.len() < n + a {
            // Grown to the largest store so far: its address then stays put.
            scratch = vec![0u8; n + a];
        }
        let at = scratch.as_ptr().align_offset(a).min(a);
        let buf = &mut scratch[at..at + n];
        let r = (|| {
            // Before the store: the file's bytes.
            let head = offset - start;
            if head > 0 {
                match s.kept(start) {
                    Some(b) => buf[..head].copy_from_slice(&b[..head]),
                    None => self.file.read_exact_at(&mut buf[..head], start as u64)?,
                }
            }
            // After it: the kept sector's bytes, else zeros (free ring space).
            let data_end = offset + data.len();
            let (tail, from) = (end - a, data_end - start);
            match s.kept(tail) {
                Some(b) => buf[from..].copy_from_slice(&b[data_end - tail..]),
                None => buf[from..].fill(0),
            }
            buf[head..from].copy_from_slice(data);
            d.file
                .write_at(buf, start as u64)
                .inspect_err(|_| s.failed = true)?;
            if start == 0 {
                s.first.copy_from_slice(&buf[..a]);
            }
            s.last.copy_from_slice(&buf[n - a..]);
            s.last_at = Some(end - a);
            Ok(())
        })();
        s.scratch = scratch;
        r
    }
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
        match &self.direct {
            Some(d) if !data.is_empty() => self.write_direct(d, offset, data),
            _ => self.file.write_at(data, offset as u64),
        }
    }

    fn persist(&self, offset: usize, len: usize) -> io::Result<()> {
        check_range(self.len, offset, len)?;
        if len == 0 {
            return Ok(());
        }
        self.file.sync_data()
    }

    fn write_granule(&self) -> usize {
        self.direct.as_ref().map_or(1, |d| d.align)
    }
}

fn tmp_path(path: &Path) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push("-tmp");
    PathBuf::from(p)
}

/// Open the ring file at `path` (`NotFound` if there is none), or with `create` make a
/// new one of that many bytes, all zeros, in place of any ring there (module docs).
/// Stores go through `O_DIRECT` as `direct` says (at most `page_size` alignment).
pub(crate) fn open(
    vfs: &dyn Vfs,
    path: &Path,
    create: Option<usize>,
    direct: DirectWrites,
    page_size: usize,
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
    let direct = match open_direct(vfs, path, page_size, direct) {
        Ok(Some((f, align))) if len >= align => {
            let mut first = vec![0u8; align];
            file.read_exact_at(&mut first, 0)?;
            Some(Direct {
                file: f,
                align,
                sectors: Mutex::new(Sectors {
                    first,
                    last_at: None,
                    last: vec![0u8; align],
                    failed: false,
                    scratch: Vec::new(),
                }),
            })
        }
        Ok(_) => None,
        Err(e) => return Err(io::Error::other(e.to_string())),
    };
    Ok(Arc::new(FileRegion { file, len, direct }))
}

/// Delete the ring file at `path`, durably (its directory synced): a ring that came back
/// after a power cut would be replayed.
pub(crate) fn delete(vfs: &dyn Vfs, path: &Path) -> io::Result<()> {
    vfs.delete(path)?;
    vfs.sync_dir(&dir_of(path))
}
