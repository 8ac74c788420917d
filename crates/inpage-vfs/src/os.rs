//! Real files through the operating system.
//!
//! Invariants:
//! - I/O is positional (pread/pwrite), so a handle carries no cursor and can be shared by
//!   threads without locking; that is what lets `File` take `&self`.
//! - `write_at` either writes every byte or returns an error: a short pwrite is retried
//!   from where it stopped and EINTR is retried, because the trait promises write-all.
//! - `read_at` returns short only at end of file: a short pread (possible in principle
//!   after a signal) is continued until the buffer is full or pread returns 0.
//! - `direct: true` means O_DIRECT or an error. We never fall back to buffered I/O
//!   silently, because a caller measuring or relying on cache bypass would then get
//!   wrong results without knowing.
//! - `lock_range` is `fcntl(F_OFD_SETLK)`: the lock belongs to the open file description,
//!   so a second handle conflicts even inside the same process, and the kernel releases
//!   it when the handle is closed or the process dies (SIGKILL included). It is
//!   advisory: it keeps out other inpage handles, not other programs.
//! - Durability is exactly what the kernel gives for fdatasync/fsync; a failed sync is
//!   reported as is and never retried (a retry after EIO could falsely succeed, see the
//!   fsyncgate note in `vfs/mod.rs`). Only EINTR is retried, which loses nothing.

use super::*;
use std::fs;
use std::os::unix::fs::{FileExt, OpenOptionsExt};

/// Real files through the OS.
#[derive(Debug, Default, Clone)]
pub struct OsVfs;

impl OsVfs {
    /// A handle to the real file system.
    pub fn new() -> OsVfs {
        OsVfs
    }
}

#[cfg(any(target_os = "linux", target_os = "android"))]
fn direct_flag() -> io::Result<i32> {
    // O_DIRECT fits in an i32 flag word on every Linux ABI; the cast only changes type.
    Ok(rustix::fs::OFlags::DIRECT.bits() as i32)
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn direct_flag() -> io::Result<i32> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "O_DIRECT is not supported on this platform",
    ))
}

/// Retry a syscall wrapper while it fails with EINTR.
fn retry_eintr<T>(mut f: impl FnMut() -> io::Result<T>) -> io::Result<T> {
    loop {
        match f() {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            r => return r,
        }
    }
}

/// Directory path to fsync: an empty parent (a bare file name) means the current dir.
fn dir_or_dot(dir: &Path) -> &Path {
    if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    }
}

impl Vfs for OsVfs {
    fn open(&self, path: &Path, opts: OpenOptions) -> io::Result<Arc<dyn File>> {
        let mut o = fs::OpenOptions::new();
        o.read(true).write(true);
        if opts.create_new {
            o.create_new(true);
        } else if opts.create {
            o.create(true);
        }
        if opts.direct {
            o.custom_flags(direct_flag()?);
        }
        let file = retry_eintr(|| o.open(path))?;
        Ok(Arc::new(OsFile::new(file)))
    }

    fn delete(&self, path: &Path) -> io::Result<()> {
        fs::remove_file(path)
    }

    fn exists(&self, path: &Path) -> io::Result<bool> {
        match fs::metadata(path) {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::rename(from, to)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let d = retry_eintr(|| fs::File::open(dir_or_dot(dir)))?;
        retry_eintr(|| rustix::fs::fsync(&d).map_err(io::Error::from))
    }

    fn open_read_only(&self, path: &Path) -> io::Result<Arc<dyn File>> {
        let file = retry_eintr(|| fs::OpenOptions::new().read(true).open(path))?;
        Ok(Arc::new(OsFile::new(file)))
    }

    /// A file mapped into memory (`vfs::mapped`): it survives the process, and power loss
    /// only on a persistent-memory (DAX) mount.
    fn open_region(&self, path: &Path, create: Option<usize>) -> io::Result<Arc<dyn Region>> {
        super::mapped::MappedRegion::open(path, create)
    }

    fn delete_region(&self, path: &Path) -> io::Result<()> {
        fs::remove_file(path)
    }
}

/// An open OS file.
#[derive(Debug)]
pub struct OsFile {
    file: fs::File,
    /// The `vfs::fork` slot of this descriptor from its first lock attempt on (a child of
    /// `fork()` must let go of it), and the process generation that took the lock.
    lock_slot: std::sync::Mutex<Option<(usize, u64)>>,
}

impl OsFile {
    fn new(file: fs::File) -> OsFile {
        OsFile {
            file,
            lock_slot: std::sync::Mutex::new(None),
        }
    }
}

impl Drop for OsFile {
    fn drop(&mut self) {
        use std::os::fd::AsRawFd;
        let slot = self.lock_slot.get_mut().unwrap_or_else(|e| e.into_inner());
        if let Some((s, generation)) = slot.take() {
            // Unlock before the slot is given up: a child forked between here and the
            // close below then inherits an unlocked description, so the lock ends now,
            // not when that child exits. Only in the process that took the lock — an
            // inherited copy must never unlock its parent's description.
            if generation == super::fork::generation() {
                let _ = ofd_setlk(self.file.as_raw_fd(), libc::F_UNLCK, 0, 0);
            }
            super::fork::unregister_locked(s, self.file.as_raw_fd());
        }
    }
}

/// `fcntl(F_OFD_SETLK)`: an open-file-description lock of `l_type` on `[start,
/// start+len)` (`len` 0: to the end of any file), without waiting. Ok(false) when a
/// conflicting lock is held elsewhere.
#[allow(unsafe_code)]
fn ofd_setlk(
    fd: std::os::fd::RawFd,
    l_type: libc::c_int,
    start: i64,
    len: i64,
) -> io::Result<bool> {
    // SAFETY: all-zero is a valid `flock` (plain integers); `l_pid` must stay 0 for OFD
    // locks.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = l_type as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_start = start;
    fl.l_len = len;
    loop {
        // SAFETY: `fd` is an open descriptor owned by the caller for the call's duration,
        // and `fl` is a valid, initialised `flock` the kernel only reads.
        let r = unsafe { libc::fcntl(fd, libc::F_OFD_SETLK, &fl as *const libc::flock) };
        if r == 0 {
            return Ok(true);
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EAGAIN) | Some(libc::EACCES) => return Ok(false),
            _ => return Err(e),
        }
    }
}

fn end_offset(offset: u64, len: u64) -> io::Result<u64> {
    offset
        .checked_add(len)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "offset + length overflows"))
}

impl File for OsFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        end_offset(offset, buf.len() as u64)?;
        let mut done = 0;
        while done < buf.len() {
            match self.file.read_at(&mut buf[done..], offset + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(done)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        end_offset(offset, buf.len() as u64)?;
        let mut done = 0;
        while done < buf.len() {
            match self.file.write_at(&buf[done..], offset + done as u64) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::WriteZero,
                        "pwrite wrote 0 bytes",
                    ))
                }
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn sync_data(&self) -> io::Result<()> {
        retry_eintr(|| rustix::fs::fdatasync(&self.file).map_err(io::Error::from))
    }

    fn sync_all(&self) -> io::Result<()> {
        retry_eintr(|| rustix::fs::fsync(&self.file).map_err(io::Error::from))
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        retry_eintr(|| self.file.set_len(len))
    }

    fn lock_range(&self, start: u64, len: u64, kind: Option<LockKind>) -> io::Result<bool> {
        use std::os::fd::AsRawFd;
        let (Ok(l_start), Ok(l_len)) = (i64::try_from(start), i64::try_from(len)) else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "lock range past the largest file offset",
            ));
        };
        // Registered before the lock exists (`vfs::fork`): a child forked at any moment
        // after the lock below lets go of the description.
        if kind.is_some() {
            let mut slot = self.lock_slot.lock().unwrap_or_else(|e| e.into_inner());
            if slot.is_none() {
                *slot = super::fork::register_locked(self.file.as_raw_fd())
                    .map(|s| (s, super::fork::generation()));
            }
        }
        let l_type = match kind {
            Some(LockKind::Shared) => libc::F_RDLCK,
            Some(LockKind::Exclusive) => libc::F_WRLCK,
            None => libc::F_UNLCK,
        };
        ofd_setlk(self.file.as_raw_fd(), l_type, l_start, l_len)
    }

    fn allocate(&self, offset: u64, len: u64) -> io::Result<()> {
        super::write_zeros(self, offset, len)
    }

    fn direct_alignment(&self) -> Option<usize> {
        // STATX_DIOALIGN (Linux 6.1+) answers from the inode: no device read. Older
        // kernels and file systems that do not fill it in leave the bit clear.
        use rustix::fs::{statx, AtFlags, StatxFlags};
        let st = statx(&self.file, "", AtFlags::EMPTY_PATH, StatxFlags::DIOALIGN).ok()?;
        if st.stx_mask & StatxFlags::DIOALIGN.bits() == 0 {
            return None;
        }
        if st.stx_dio_offset_align == 0 {
            return Some(0);
        }
        Some(st.stx_dio_offset_align.max(st.stx_dio_mem_align) as usize)
    }

    fn prefetch(&self, offset: u64, len: u64) {
        // POSIX_FADV_WILLNEED queues the reads without waiting for them. A failure (a
        // file system without readahead) only loses the hint.
        if let Some(len) = std::num::NonZeroU64::new(len) {
            let _ =
                rustix::fs::fadvise(&self.file, offset, Some(len), rustix::fs::Advice::WillNeed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_read_len_set_len() {
        let dir = tempfile::tempdir().unwrap();
        let vfs = OsVfs::new();
        let p = dir.path().join("a.db");
        let f = vfs.open(&p, OpenOptions::CREATE).unwrap();
        assert_eq!(f.len().unwrap(), 0);
        f.write_at(b"hello", 10).unwrap();
        assert_eq!(f.len().unwrap(), 15);
        let mut buf = [0xffu8; 20];
        // Short only at EOF.
        assert_eq!(f.read_at(&mut buf, 0).unwrap(), 15);
        assert_eq!(&buf[..10], &[0u8; 10]);
        assert_eq!(&buf[10..15], b"hello");
        assert_eq!(f.read_at(&mut buf, 100).unwrap(), 0);
        let mut exact = [0u8; 5];
        f.read_exact_at(&mut exact, 10).unwrap();
        assert_eq!(&exact, b"hello");
        let e = f.read_exact_at(&mut [0u8; 10], 10).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);

        f.set_len(12).unwrap();
        assert_eq!(f.len().unwrap(), 12);
        f.set_len(20).unwrap();
        let mut buf = [0xffu8; 10];
        f.read_exact_at(&mut buf, 10).unwrap();
        assert_eq!(&buf, b"he\0\0\0\0\0\0\0\0");
        f.sync_data().unwrap();
        f.sync_all().unwrap();
    }

    #[test]
    fn allocate_writes_zeros() {
        let dir = tempfile::tempdir().unwrap();
        let vfs = OsVfs::new();
        let p = dir.path().join("z");
        let f = vfs.open(&p, OpenOptions::CREATE).unwrap();
        f.write_at(&[7u8; 200_000], 0).unwrap();
        f.allocate(100, 150_000).unwrap();
        let mut buf = vec![1u8; 200_000];
        f.read_exact_at(&mut buf, 0).unwrap();
        assert!(buf[..100].iter().all(|&b| b == 7));
        assert!(buf[100..150_100].iter().all(|&b| b == 0));
        assert!(buf[150_100..].iter().all(|&b| b == 7));
        f.allocate(200_000, 4096).unwrap();
        assert_eq!(f.len().unwrap(), 204_096);
        f.allocate(0, 0).unwrap();
        assert_eq!(f.len().unwrap(), 204_096);
    }

    #[test]
    fn namespace_ops() {
        let dir = tempfile::tempdir().unwrap();
        let vfs = OsVfs::new();
        let a = dir.path().join("a");
        let b = dir.path().join("b");
        assert!(!vfs.exists(&a).unwrap());
        let e = vfs.open(&a, OpenOptions::default()).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        let f = vfs.open(&a, OpenOptions::CREATE).unwrap();
        f.write_at(b"x", 0).unwrap();
        assert!(vfs.exists(&a).unwrap());
        let e = vfs
            .open(
                &a,
                OpenOptions {
                    create: true,
                    create_new: true,
                    direct: false,
                },
            )
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        vfs.rename(&a, &b).unwrap();
        assert!(!vfs.exists(&a).unwrap());
        assert!(vfs.exists(&b).unwrap());
        vfs.sync_dir(dir.path()).unwrap();
        let g = vfs.open(&b, OpenOptions::default()).unwrap();
        let mut one = [0u8; 1];
        g.read_exact_at(&mut one, 0).unwrap();
        assert_eq!(&one, b"x");
        vfs.delete(&b).unwrap();
        assert!(!vfs.exists(&b).unwrap());
        assert_eq!(vfs.delete(&b).unwrap_err().kind(), io::ErrorKind::NotFound);
        vfs.sync_dir(dir.path()).unwrap();
    }

    #[test]
    fn o_direct_aligned_write() {
        let dir = tempfile::tempdir().unwrap();
        let vfs = OsVfs::new();
        let p = dir.path().join("direct.db");
        let opts = OpenOptions {
            create: true,
            create_new: false,
            direct: true,
        };
        let f = match vfs.open(&p, opts) {
            Ok(f) => f,
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::INVAL.raw_os_error()) => {
                eprintln!("skipping O_DIRECT test: file system refuses O_DIRECT ({e})");
                return;
            }
            Err(e) => panic!("open O_DIRECT: {e}"),
        };
        let mut backing = vec![0u8; 8192];
        let skip = backing.as_ptr().align_offset(4096);
        let buf = &mut backing[skip..skip + 4096];
        for (i, b) in buf.iter_mut().enumerate() {
            *b = (i % 251) as u8;
        }
        f.write_at(buf, 4096).unwrap();
        f.sync_data().unwrap();
        f.allocate(8192, 4096).unwrap();
        assert_eq!(f.len().unwrap(), 12288);

        let mut rback = vec![0u8; 8192];
        let rskip = rback.as_ptr().align_offset(4096);
        let rbuf = &mut rback[rskip..rskip + 4096];
        f.read_exact_at(rbuf, 4096).unwrap();
        assert!(rbuf.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8));
    }
}
