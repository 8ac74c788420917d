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
//! - *The kept sectors are never older than the file* where other processes write the
//!   ring too (`procs`' append turns): a store through the page cache, or another
//!   process's records read in (`Region::refresh`), drop them, and the next direct store
//!   reads the first sector again. While other processes read the ring
//!   (`Region::others_read`) stores go through the page cache, where those reads find
//!   them: direct stores beside a process reading the ring made each commit's fdatasync
//!   take hundreds of microseconds instead of a few (BENCHMARKS.md, "Several
//!   processes").

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
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
    /// Other processes read the ring (`Region::others_read`): stores go through the
    /// page cache, where their reads find them, instead of around it.
    through_cache: AtomicBool,
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
    /// A store went through the page cache since `first` was read (`others_read`).
    first_stale: bool,
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
        if s.first_stale && !s.failed {
            self.reread_first(d, s)?;
        }
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
                    // Aligned: the store's own buffer, read straight from the device.
                    None => d.file.read_exact_at(&mut buf[..a], start as u64)?,
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

impl FileRegion {
    /// Forget the kept sectors, reading the first one again from the file.
    fn reread_first(&self, d: &Direct, s: &mut Sectors) -> io::Result<()> {
        let mut first = std::mem::take(&mut s.first);
        let r = self.read_direct(d, 0, &mut first);
        s.first = first;
        s.last_at = None;
        s.first_stale = r.is_err();
        if r.is_err() {
            s.failed = true;
        }
        r
    }

    /// A read through the direct handle, in whole sectors (the file's last, partial
    /// sector through the page cache): what a direct store reads of the file, so the
    /// store path never brings the ring's pages into the page cache.
    fn read_direct(&self, d: &Direct, offset: usize, buf: &mut [u8]) -> io::Result<()> {
        let a = d.align;
        let start = offset / a * a;
        let whole_end = self.len / a * a;
        let end = ((offset + buf.len()).div_ceil(a) * a).min(whole_end);
        let mut done = 0;
        if end > start {
            let n = end - start;
            let mut space = vec![0u8; n + a];
            let at = space.as_ptr().align_offset(a).min(a);
            let aligned = &mut space[at..at + n];
            d.file.read_exact_at(aligned, start as u64)?;
            let from = offset - start;
            done = (n - from).min(buf.len());
            buf[..done].copy_from_slice(&aligned[from..from + done]);
        }
        if done < buf.len() {
            // Past the last whole sector (or the read starts there).
            let at = offset + done;
            self.file.read_exact_at(&mut buf[done..], at as u64)?;
        }
        Ok(())
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
            Some(d) if !data.is_empty() && !self.through_cache.load(Ordering::Relaxed) => {
                self.write_direct(d, offset, data)
            }
            Some(d) => {
                // Through the page cache: the kept sectors no longer say what the file
                // holds (a direct store re-reads them first).
                let mut s = d.sectors.lock().unwrap_or_else(|e| e.into_inner());
                s.last_at = None;
                s.first_stale = true;
                self.file.write_at(data, offset as u64)
            }
            None => self.file.write_at(data, offset as u64),
        }
    }

    fn others_read(&self, yes: bool) {
        self.through_cache.store(yes, Ordering::Relaxed);
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

    /// Another process appended records (`procs`' append turns): the kept sectors may
    /// hold bytes from before its stores, which a store here would write back over them.
    fn refresh(&self) -> io::Result<()> {
        let Some(d) = &self.direct else {
            return Ok(());
        };
        let mut s = d.sectors.lock().unwrap_or_else(|e| e.into_inner());
        self.reread_first(d, &mut s)
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
            // Read by `refresh` below, through the direct handle.
            let first = vec![0u8; align];
            Some(Direct {
                file: f,
                align,
                sectors: Mutex::new(Sectors {
                    first,
                    last_at: None,
                    first_stale: false,
                    last: vec![0u8; align],
                    failed: false,
                    scratch: Vec::new(),
                }),
            })
        }
        Ok(_) => None,
        Err(e) => return Err(io::Error::other(e.to_string())),
    };
    let region = FileRegion {
        file,
        len,
        direct,
        through_cache: AtomicBool::new(false),
    };
    region.refresh()?;
    Ok(Arc::new(region))
}

/// Delete the ring file at `path`, durably (its directory synced): a ring that came back
/// after a power cut would be replayed.
pub(crate) fn delete(vfs: &dyn Vfs, path: &Path) -> io::Result<()> {
    vfs.delete(path)?;
    vfs.sync_dir(&dir_of(path))
}
