//! A read-only view of another VFS with a private, in-memory layer for writes: what
//! `inpage check` / `inspect` (and `Config::read_only`) open a database through, so that
//! recovery can run to show what it *would* do without changing any file.
//!
//! Invariants, and why they hold:
//! - *The files underneath are never written.* Files of the inner VFS are opened only
//!   with `open_read_only` (O_RDONLY on real files), and no call of this VFS forwards a
//!   write, truncation, sync, delete, rename or lock to the inner one: all of them act on
//!   the overlay's own state. A write bug in the engine can at worst change that memory.
//! - *Reads see the writes made through the overlay, as one file.* Every path is opened
//!   at most once: the first `open` wraps the inner file in an `OverlayFile` that all
//!   later opens of that path share (and that a rename moves), so recovery's writes are
//!   visible to the pager that reads after it, as on a real file system.
//! - *An overlay file is the inner file's bytes below `base_len`, patched by `blocks`.*
//!   `base_len` starts at the inner file's length and only shrinks (a truncation hides
//!   the inner bytes past it for good, so growing again reads zeros there); a block in
//!   `blocks` holds the full current content of its `BLOCK` bytes and wins over the inner
//!   file. Blocks past `len` are dropped at truncation, so no stale byte reappears.

use super::*;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};

/// Granularity of the copy-on-write layer.
const BLOCK: u64 = 4096;

/// A VFS that reads through to `inner` and keeps every change in memory.
#[derive(Debug)]
pub struct OverlayVfs {
    inner: Arc<dyn Vfs>,
    /// Path → its file as seen through the overlay; `None` once deleted (or renamed away).
    files: Mutex<HashMap<PathBuf, Option<Arc<OverlayFile>>>>,
    /// Regions as seen through the overlay: a private copy of the inner region taken at
    /// first open (the inner one is never written), `None` once deleted.
    regions: Mutex<HashMap<PathBuf, Option<Arc<dyn Region>>>>,
}

impl OverlayVfs {
    /// A read-only view of `inner`.
    pub fn new(inner: Arc<dyn Vfs>) -> OverlayVfs {
        OverlayVfs {
            inner,
            files: Mutex::new(HashMap::new()),
            regions: Mutex::new(HashMap::new()),
        }
    }

    /// Paths whose content differs from the inner VFS (written, created, deleted or
    /// renamed through the overlay), sorted: what a read-write open would have changed.
    pub fn changed_paths(&self) -> Vec<PathBuf> {
        let files = self.lock();
        let mut v: Vec<PathBuf> = files
            .iter()
            .filter(|(_, f)| f.as_ref().is_none_or(|f| f.changed()))
            .map(|(p, _)| p.clone())
            .collect();
        v.sort();
        v
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<PathBuf, Option<Arc<OverlayFile>>>> {
        // The map is changed in single inserts; a panic elsewhere cannot leave it torn.
        self.files.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The overlay file at `path`: known, else the inner file wrapped, else `None`.
    fn lookup(
        &self,
        files: &mut HashMap<PathBuf, Option<Arc<OverlayFile>>>,
        path: &Path,
    ) -> io::Result<Option<Arc<OverlayFile>>> {
        if let Some(known) = files.get(path) {
            return Ok(known.clone());
        }
        if !self.inner.exists(path)? {
            return Ok(None);
        }
        let base = self.inner.open_read_only(path)?;
        let len = base.len()?;
        let f = Arc::new(OverlayFile {
            state: Mutex::new(OverlayState {
                base: Some(base),
                base_len: len,
                len,
                blocks: BTreeMap::new(),
                changed: false,
            }),
        });
        files.insert(path.to_path_buf(), Some(f.clone()));
        Ok(Some(f))
    }
}

fn not_found(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("{}: no such file", path.display()),
    )
}

impl Vfs for OverlayVfs {
    fn open(&self, path: &Path, opts: OpenOptions) -> io::Result<Arc<dyn File>> {
        if opts.direct {
            // Memory has no cache to bypass; callers fall back to buffered I/O.
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "O_DIRECT through a read-only overlay",
            ));
        }
        let mut files = self.lock();
        match self.lookup(&mut files, path)? {
            Some(_) if opts.create_new => Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{}: file exists", path.display()),
            )),
            Some(f) => Ok(f),
            None if opts.create || opts.create_new => {
                let f = Arc::new(OverlayFile::empty());
                files.insert(path.to_path_buf(), Some(f.clone()));
                Ok(f)
            }
            None => Err(not_found(path)),
        }
    }

    fn open_read_only(&self, path: &Path) -> io::Result<Arc<dyn File>> {
        self.open(path, OpenOptions::default())
    }

    fn delete(&self, path: &Path) -> io::Result<()> {
        let mut files = self.lock();
        match self.lookup(&mut files, path)? {
            Some(_) => {
                files.insert(path.to_path_buf(), None);
                Ok(())
            }
            None => Err(not_found(path)),
        }
    }

    fn exists(&self, path: &Path) -> io::Result<bool> {
        match self.lock().get(path) {
            Some(f) => Ok(f.is_some()),
            None => self.inner.exists(path),
        }
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut files = self.lock();
        let f = self
            .lookup(&mut files, from)?
            .ok_or_else(|| not_found(from))?;
        f.mark_changed();
        files.insert(from.to_path_buf(), None);
        files.insert(to.to_path_buf(), Some(f));
        Ok(())
    }

    fn sync_dir(&self, _dir: &Path) -> io::Result<()> {
        Ok(())
    }

    super::vfs_pass_through!(nonce, in_process_memory);

    fn read_through(&self) -> Option<Arc<dyn Vfs>> {
        Some(
            self.inner
                .read_through()
                .unwrap_or_else(|| self.inner.clone()),
        )
    }

    /// A private copy of the inner region (never written back), or a new one in memory.
    fn open_region(&self, path: &Path, create: Option<usize>) -> io::Result<Arc<dyn Region>> {
        let mut regions = self.regions.lock().unwrap_or_else(|e| e.into_inner());
        let known = match regions.get(path) {
            Some(r) => r.clone(),
            None => match self.inner.open_region(path, None) {
                Ok(inner) => {
                    let mut bytes = vec![0u8; inner.len()];
                    inner.read(0, &mut bytes)?;
                    Some(Arc::new(MemRegion::new(bytes)) as Arc<dyn Region>)
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => None,
                Err(e) => return Err(e),
            },
        };
        let r = match (known, create) {
            (Some(r), _) => r,
            (None, Some(len)) => Arc::new(MemRegion::new(vec![0u8; len])) as Arc<dyn Region>,
            (None, None) => return Err(not_found(path)),
        };
        regions.insert(path.to_path_buf(), Some(r.clone()));
        Ok(r)
    }

    fn delete_region(&self, path: &Path) -> io::Result<()> {
        self.open_region(path, None)?;
        let mut regions = self.regions.lock().unwrap_or_else(|e| e.into_inner());
        regions.insert(path.to_path_buf(), None);
        Ok(())
    }
}

#[derive(Debug)]
struct OverlayState {
    /// The inner file (read only), or None for a file created in the overlay.
    base: Option<Arc<dyn File>>,
    /// Bytes of `base` still visible (see module invariants).
    base_len: u64,
    len: u64,
    /// Block index → the block's whole current content.
    blocks: BTreeMap<u64, Vec<u8>>,
    changed: bool,
}

impl OverlayState {
    /// The current content of block `b` (zeros past the visible base).
    fn block(&self, b: u64) -> io::Result<Vec<u8>> {
        if let Some(data) = self.blocks.get(&b) {
            return Ok(data.clone());
        }
        let mut data = vec![0u8; BLOCK as usize];
        let start = b * BLOCK;
        if let Some(base) = &self.base {
            if start < self.base_len {
                let n = (self.base_len - start).min(BLOCK) as usize;
                let got = base.read_at(&mut data[..n], start)?;
                // The inner file shrank under us (someone else truncated it): what is
                // gone reads as zeros, as a fresh read of the file would show.
                data[got..n].fill(0);
            }
        }
        Ok(data)
    }
}

/// A file seen through the overlay.
#[derive(Debug)]
struct OverlayFile {
    state: Mutex<OverlayState>,
}

impl OverlayFile {
    fn empty() -> OverlayFile {
        OverlayFile {
            state: Mutex::new(OverlayState {
                base: None,
                base_len: 0,
                len: 0,
                blocks: BTreeMap::new(),
                changed: true,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, OverlayState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn changed(&self) -> bool {
        self.lock().changed
    }

    fn mark_changed(&self) {
        self.lock().changed = true;
    }
}

fn end_of(offset: u64, len: usize) -> io::Result<u64> {
    offset
        .checked_add(len as u64)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "offset + length overflows"))
}

impl File for OverlayFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        end_of(offset, buf.len())?;
        let st = self.lock();
        if offset >= st.len {
            return Ok(0);
        }
        let n = ((st.len - offset).min(buf.len() as u64)) as usize;
        let mut done = 0;
        while done < n {
            let pos = offset + done as u64;
            let (b, within) = (pos / BLOCK, (pos % BLOCK) as usize);
            let take = (BLOCK as usize - within).min(n - done);
            let data = st.block(b)?;
            buf[done..done + take].copy_from_slice(&data[within..within + take]);
            done += take;
        }
        Ok(n)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let end = end_of(offset, buf.len())?;
        let mut st = self.lock();
        let mut done = 0;
        while done < buf.len() {
            let pos = offset + done as u64;
            let (b, within) = (pos / BLOCK, (pos % BLOCK) as usize);
            let take = (BLOCK as usize - within).min(buf.len() - done);
            let mut data = st.block(b)?;
            data[within..within + take].copy_from_slice(&buf[done..done + take]);
            st.blocks.insert(b, data);
            done += take;
        }
        st.len = st.len.max(end);
        st.changed = true;
        Ok(())
    }

    fn sync_data(&self) -> io::Result<()> {
        Ok(())
    }

    fn sync_all(&self) -> io::Result<()> {
        Ok(())
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.lock().len)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        let mut st = self.lock();
        if len < st.len {
            // Keep the surviving head of the cut block, zero its tail, drop the rest.
            let b = len / BLOCK;
            let within = (len % BLOCK) as usize;
            if within > 0 {
                let mut data = st.block(b)?;
                data[within..].fill(0);
                st.blocks.insert(b, data);
                st.blocks.split_off(&(b + 1));
            } else {
                st.blocks.split_off(&b);
            }
            st.base_len = st.base_len.min(len);
        }
        st.len = len;
        st.changed = true;
        Ok(())
    }

    fn allocate(&self, offset: u64, len: u64) -> io::Result<()> {
        super::write_zeros(self, offset, len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(f: &dyn File) -> Vec<u8> {
        let mut v = vec![0u8; f.len().unwrap() as usize];
        f.read_exact_at(&mut v, 0).unwrap();
        v
    }

    #[test]
    fn writes_stay_in_memory_and_are_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let os: Arc<dyn Vfs> = Arc::new(OsVfs::new());
        let p = dir.path().join("a.db");
        let orig: Vec<u8> = (0..10_000u32).map(|i| (i % 253) as u8).collect();
        std::fs::write(&p, &orig).unwrap();

        let ov = OverlayVfs::new(os.clone());
        assert!(ov.changed_paths().is_empty());
        let f = ov.open(&p, OpenOptions::default()).unwrap();
        assert_eq!(read_all(&*f), orig);
        f.write_at(b"XYZ", 4094).unwrap(); // across a block boundary
        f.write_at(b"tail", 12_000).unwrap(); // past the end: a hole of zeros
        f.sync_data().unwrap();
        let mut want = orig.clone();
        want[4094..4097].copy_from_slice(b"XYZ");
        want.resize(12_000, 0);
        want.extend_from_slice(b"tail");
        // A second open of the same path sees the same overlay file.
        let g = ov.open(&p, OpenOptions::default()).unwrap();
        assert_eq!(read_all(&*g), want);
        assert_eq!(
            std::fs::read(&p).unwrap(),
            orig,
            "the real file is untouched"
        );
        assert_eq!(ov.changed_paths(), vec![p.clone()]);

        // Truncation hides the base for good; growing again reads zeros.
        f.set_len(5000).unwrap();
        f.set_len(9000).unwrap();
        let got = read_all(&*f);
        assert_eq!(&got[..4094], &orig[..4094]);
        assert_eq!(&got[4094..4097], b"XYZ");
        assert_eq!(&got[4097..5000], &orig[4097..5000]);
        assert!(got[5000..].iter().all(|&b| b == 0));
        assert_eq!(std::fs::read(&p).unwrap(), orig);
    }

    #[test]
    fn namespace_changes_are_private() {
        let dir = tempfile::tempdir().unwrap();
        let os: Arc<dyn Vfs> = Arc::new(OsVfs::new());
        let a = dir.path().join("a");
        let b = dir.path().join("b");
        std::fs::write(&a, b"hello").unwrap();
        let ov = OverlayVfs::new(os);
        let e = ov.open(&b, OpenOptions::default()).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        let nb = ov.open(&b, OpenOptions::CREATE).unwrap();
        nb.write_at(b"new", 0).unwrap();
        assert!(ov.exists(&b).unwrap());
        assert!(!b.exists(), "created only in memory");
        ov.rename(&b, &a).unwrap();
        assert!(!ov.exists(&b).unwrap());
        assert_eq!(
            read_all(&*ov.open(&a, OpenOptions::default()).unwrap()),
            b"new"
        );
        ov.delete(&a).unwrap();
        assert!(!ov.exists(&a).unwrap());
        assert_eq!(ov.delete(&a).unwrap_err().kind(), io::ErrorKind::NotFound);
        assert_eq!(std::fs::read(&a).unwrap(), b"hello");
        assert!(ov
            .open(
                &a,
                OpenOptions {
                    direct: true,
                    ..OpenOptions::CREATE
                }
            )
            .is_err());
        assert_eq!(ov.changed_paths(), vec![a, b]);
    }
}
