//! A point-in-time copy of the files a read-only open touches, for looking at a database
//! another process is writing (`inpage check`, `inspect`).
//!
//! Reading a live database page by page mixes states: a checker that reads the header
//! of one commit and a page of the next, or half of a page being rewritten, reports
//! damage that is not there. This VFS reads each file (and memory region) whole, into
//! memory, the first time the open asks for it, and serves every later read from that
//! copy; [`SnapshotVfs::unchanged`] then reads everything again and says whether any
//! byte (or a file's existence) differs.
//!
//! Invariants, and why they hold:
//! - *Nothing underneath is written.* Files are opened with `open_read_only` only, and
//!   every call that would change a file, a name or a region fails with
//!   `PermissionDenied`: the read-only open layers its private overlay
//!   (`vfs::OverlayVfs`) over this one and never writes through it.
//! - *A copy taken while nothing changed is one instant of the files.* Each path is
//!   copied once, at its first use, and remembered (also as absent). If a later
//!   [`unchanged`](SnapshotVfs::unchanged) finds every copy equal to the files, each file
//!   held the same bytes from the moment it was copied until that re-read, so all copies
//!   together are the files as they were at the re-read's start: a state a crash of the
//!   writer at that instant would have left, which recovery must handle. (A file that
//!   changed and changed back in between would pass; no journal rewrites a file with
//!   the bytes it held before a commit, since every commit advances a counter.)

use super::*;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;

/// A VFS that copies each file of `inner` whole at first use (module docs).
#[derive(Debug)]
pub struct SnapshotVfs {
    inner: Arc<dyn Vfs>,
    /// Path → its bytes when first used, `None` if it did not exist then.
    files: Mutex<Copies>,
    /// The same for memory regions.
    regions: Mutex<Copies>,
}

fn refused(what: &str, path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!(
            "{}: {what} refused: a snapshot is read-only",
            path.display()
        ),
    )
}

/// The whole content of `path` in `inner`, or `None` if it does not exist.
fn read_file(inner: &dyn Vfs, path: &Path) -> io::Result<Option<Vec<u8>>> {
    let f = match inner.open_read_only(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    // Read until a read comes back short, rather than trusting a length taken first: a
    // file growing meanwhile is caught by `unchanged`, never read past its end.
    let mut out = Vec::with_capacity(f.len()? as usize);
    let mut chunk = vec![0u8; 1 << 20];
    loop {
        let n = f.read_at(&mut chunk, out.len() as u64)?;
        out.extend_from_slice(&chunk[..n]);
        if n < chunk.len() {
            return Ok(Some(out));
        }
    }
}

/// The whole content of region `path` in `inner`, or `None` if there is none.
fn read_region(inner: &dyn Vfs, path: &Path) -> io::Result<Option<Vec<u8>>> {
    match inner.open_region(path, None) {
        Ok(r) => {
            let mut bytes = vec![0u8; r.len()];
            r.read(0, &mut bytes)?;
            Ok(Some(bytes))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

type Copies = BTreeMap<PathBuf, Option<Arc<Vec<u8>>>>;
/// Reads a whole file or region (`read_file`, `read_region`).
type Reader = fn(&dyn Vfs, &Path) -> io::Result<Option<Vec<u8>>>;

/// Whether every path of `copies` still reads (with `read`) as its copy.
fn all_unchanged(inner: &dyn Vfs, copies: &Copies, read: Reader) -> io::Result<bool> {
    for (path, copy) in copies {
        if read(inner, path)?.as_deref() != copy.as_deref().map(|v| &v[..]) {
            return Ok(false);
        }
    }
    Ok(true)
}

impl SnapshotVfs {
    /// A snapshot of `inner`, empty until the first open.
    pub fn new(inner: Arc<dyn Vfs>) -> SnapshotVfs {
        SnapshotVfs {
            inner,
            files: Mutex::new(BTreeMap::new()),
            regions: Mutex::new(BTreeMap::new()),
        }
    }

    fn file(&self, path: &Path) -> io::Result<Option<Arc<Vec<u8>>>> {
        let mut files = self.files.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(known) = files.get(path) {
            return Ok(known.clone());
        }
        let copy = read_file(&*self.inner, path)?.map(Arc::new);
        files.insert(path.to_path_buf(), copy.clone());
        Ok(copy)
    }

    /// Whether every file and region copied so far still holds the bytes copied (and
    /// every one found absent is still absent): then the copies are one instant of the
    /// files (module docs).
    pub fn unchanged(&self) -> io::Result<bool> {
        let files = self.files.lock().unwrap_or_else(|e| e.into_inner());
        let regions = self.regions.lock().unwrap_or_else(|e| e.into_inner());
        Ok(all_unchanged(&*self.inner, &files, read_file)?
            && all_unchanged(&*self.inner, &regions, read_region)?)
    }

    /// The paths copied so far: (files, regions), each sorted.
    pub fn paths(&self) -> (Vec<PathBuf>, Vec<PathBuf>) {
        let files = self.files.lock().unwrap_or_else(|e| e.into_inner());
        let regions = self.regions.lock().unwrap_or_else(|e| e.into_inner());
        (
            files.keys().cloned().collect(),
            regions.keys().cloned().collect(),
        )
    }

    /// Copy `files` and `regions` now, all at once, and read them again at once: true
    /// if nothing changed in between, so the copies are one instant of the files
    /// however long the open that then reads them takes (a later [`unchanged`] is
    /// needed only for paths the open copies itself, outside these). Each copy replaces
    /// any earlier one of the path.
    ///
    /// [`unchanged`]: SnapshotVfs::unchanged
    pub fn capture(&self, files: &[PathBuf], regions: &[PathBuf]) -> io::Result<bool> {
        let mut fm = self.files.lock().unwrap_or_else(|e| e.into_inner());
        let mut rm = self.regions.lock().unwrap_or_else(|e| e.into_inner());
        let mut now = (Copies::new(), Copies::new());
        for p in files {
            now.0
                .insert(p.clone(), read_file(&*self.inner, p)?.map(Arc::new));
        }
        for p in regions {
            now.1
                .insert(p.clone(), read_region(&*self.inner, p)?.map(Arc::new));
        }
        let steady = all_unchanged(&*self.inner, &now.0, read_file)?
            && all_unchanged(&*self.inner, &now.1, read_region)?;
        fm.extend(now.0);
        rm.extend(now.1);
        Ok(steady)
    }
}

impl Vfs for SnapshotVfs {
    fn open(&self, path: &Path, opts: OpenOptions) -> io::Result<Arc<dyn File>> {
        if opts.create || opts.create_new || opts.direct {
            return Err(refused("create", path));
        }
        self.open_read_only(path)
    }

    fn open_read_only(&self, path: &Path) -> io::Result<Arc<dyn File>> {
        match self.file(path)? {
            Some(bytes) => Ok(Arc::new(SnapshotFile {
                path: path.to_path_buf(),
                bytes,
            })),
            None => Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("{}: not found", path.display()),
            )),
        }
    }

    fn delete(&self, path: &Path) -> io::Result<()> {
        Err(refused("delete", path))
    }

    fn exists(&self, path: &Path) -> io::Result<bool> {
        Ok(self.file(path)?.is_some())
    }

    fn rename(&self, from: &Path, _to: &Path) -> io::Result<()> {
        Err(refused("rename", from))
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        Err(refused("sync_dir", dir))
    }

    super::vfs_pass_through!(nonce, in_process_memory);

    fn open_region(&self, path: &Path, create: Option<usize>) -> io::Result<Arc<dyn Region>> {
        if create.is_some() {
            return Err(refused("creating a region", path));
        }
        let mut regions = self.regions.lock().unwrap_or_else(|e| e.into_inner());
        let copy = match regions.get(path) {
            Some(known) => known.clone(),
            None => {
                let copy = read_region(&*self.inner, path)?.map(Arc::new);
                regions.insert(path.to_path_buf(), copy.clone());
                copy
            }
        };
        match copy {
            // The caller may write its handle (the overlay copies it first anyway): a
            // private copy, never the snapshot's bytes.
            Some(bytes) => Ok(Arc::new(MemRegion::new(bytes.to_vec()))),
            None => Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("{}: no region", path.display()),
            )),
        }
    }

    fn delete_region(&self, path: &Path) -> io::Result<()> {
        Err(refused("deleting a region", path))
    }
}

/// One file's copy.
#[derive(Debug)]
struct SnapshotFile {
    path: PathBuf,
    bytes: Arc<Vec<u8>>,
}

impl File for SnapshotFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let len = self.bytes.len() as u64;
        if offset >= len {
            return Ok(0);
        }
        let at = offset as usize;
        let n = buf.len().min(self.bytes.len() - at);
        buf[..n].copy_from_slice(&self.bytes[at..at + n]);
        Ok(n)
    }

    fn write_at(&self, _buf: &[u8], _offset: u64) -> io::Result<()> {
        Err(refused("write", &self.path))
    }

    fn sync_data(&self) -> io::Result<()> {
        Err(refused("fdatasync", &self.path))
    }

    fn sync_all(&self) -> io::Result<()> {
        Err(refused("fsync", &self.path))
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.bytes.len() as u64)
    }

    fn set_len(&self, _len: u64) -> io::Result<()> {
        Err(refused("truncate", &self.path))
    }

    fn allocate(&self, _offset: u64, _len: u64) -> io::Result<()> {
        Err(refused("allocate", &self.path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_are_taken_once_and_compared_with_the_files() {
        let mem: Arc<dyn Vfs> = Arc::new(MemVfs::new());
        let f = mem.open(Path::new("/a"), OpenOptions::CREATE).unwrap();
        f.write_at(b"first", 0).unwrap();
        let snap = SnapshotVfs::new(mem.clone());
        let s = snap.open_read_only(Path::new("/a")).unwrap();
        assert!(!snap.exists(Path::new("/b")).unwrap());
        assert!(snap.unchanged().unwrap());
        // The writer goes on: the snapshot keeps its copy and notices.
        f.write_at(b"later", 0).unwrap();
        let mut buf = [0u8; 5];
        s.read_exact_at(&mut buf, 0).unwrap();
        assert_eq!(&buf, b"first");
        assert!(!snap.unchanged().unwrap());
        f.write_at(b"first", 0).unwrap();
        assert!(snap.unchanged().unwrap());
        // A file that appears where there was none is a change too.
        mem.open(Path::new("/b"), OpenOptions::CREATE).unwrap();
        assert!(!snap.unchanged().unwrap());
        // Nothing is written through it.
        assert!(s.write_at(b"x", 0).is_err());
        assert!(snap.delete(Path::new("/a")).is_err());
        assert!(snap.open(Path::new("/c"), OpenOptions::CREATE).is_err());
    }
}
