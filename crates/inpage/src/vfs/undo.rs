//! Recording the undo of a commit, file by file: what makes a transaction across several
//! databases atomic whatever their journal modes (`txn::multi`).
//!
//! Every read-write database runs on an `UndoVfs` wrapped around its VFS. Normally it
//! forwards every call. While a recording is active (one commit of a transaction that
//! spans several databases), it keeps, in the database's undo file (`<db>-undo`), the
//! original bytes of everything that commit changes in any of the database's files, so
//! that recovery can put every file back as it was before the commit:
//!
//! - Writes, truncations and zero-fills are held back (pending) until the file is synced.
//!   At the sync, the original bytes of every range they would destroy — the first time
//!   a byte is touched; later touches need nothing — are appended to the undo file and
//!   the undo file is synced; only then are the held-back operations issued, in order,
//!   and the file synced. So no changed byte can reach the disk before its original is
//!   durable in the undo file, under any loss, reordering or tearing of unsynced writes.
//! - Reads and lengths see the held-back operations (all handles of a path share them),
//!   so the commit protocol above sees its own writes as on a plain file.
//! - A file created during the recording is logged (and the log synced) before its
//!   handle is returned: undo removes it. A file deleted during the recording has its
//!   whole original content logged first: undo recreates it. Renames are refused (no
//!   commit protocol renames).
//! - `finish` issues what is still held back (a mode that does not sync its commit) and
//!   syncs every file the commit changed, so the commit is durable in every mode before
//!   the transaction's decision is taken.
//!
//! Undo file: a header (magic, version, nonce, the super-journal's path, checksum) and
//! records (`CREATED`, `LEN`, `BYTES`, `DELETED`), each with a checksum seeded by the
//! nonce and its sequence number, so a torn tail ends the log and a record of an older
//! log at the same path never passes. Applying it (`apply`) is idempotent: each byte has
//! at most one original recorded, and lengths are set last.

use super::*;
use std::collections::HashMap;
use std::io;
use std::path::Path;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::sync::Mutex;

const MAGIC: [u8; 16] = *b"inpage-undo-log\0";
const VERSION: u32 = 1;

const CREATED: u8 = 1;
const LEN: u8 = 2;
const BYTES: u8 = 3;
const DELETED: u8 = 4;

/// Alignment of held-back write buffers: they may be issued through `O_DIRECT` handles.
const ALIGN: usize = 4096;

/// A byte buffer whose data starts at a 4 KiB boundary.
struct Aligned {
    backing: Vec<u8>,
    skip: usize,
    len: usize,
}

impl Aligned {
    fn copy_of(data: &[u8]) -> Aligned {
        let mut backing = vec![0u8; data.len() + ALIGN];
        let skip = backing.as_ptr().align_offset(ALIGN).min(ALIGN);
        backing[skip..skip + data.len()].copy_from_slice(data);
        Aligned {
            backing,
            skip,
            len: data.len(),
        }
    }
    fn bytes(&self) -> &[u8] {
        &self.backing[self.skip..self.skip + self.len]
    }
}

enum Op {
    Write(u64, Aligned),
    SetLen(u64),
    Allocate(u64, u64),
}

impl Op {
    /// The range of the file's original bytes this operation destroys (before `orig`).
    fn destroys(&self, orig: u64) -> Option<(u64, u64)> {
        let (a, b) = match self {
            Op::Write(off, d) => (*off, off.saturating_add(d.len as u64)),
            Op::SetLen(n) => (*n, orig),
            Op::Allocate(off, len) => (*off, off.saturating_add(*len)),
        };
        let b = b.min(orig);
        (a < b).then_some((a, b))
    }
}

/// Disjoint, merged byte ranges (start → end), for what the log already holds.
#[derive(Default, Debug, PartialEq, Eq)]
struct Ranges(std::collections::BTreeMap<u64, u64>);

impl Ranges {
    /// Sub-ranges of `[a, b)` not covered.
    fn missing(&self, a: u64, b: u64) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        let mut at = a;
        // The range starting at or before `a` may cover its start.
        let from = self.0.range(..=a).next_back().map_or(a, |(s, _)| *s);
        for (&s, &e) in self.0.range(from..b) {
            if e <= at {
                continue;
            }
            if s > at {
                out.push((at, s.min(b)));
            }
            at = at.max(e);
            if at >= b {
                break;
            }
        }
        if at < b {
            out.push((at, b));
        }
        out
    }

    /// Cover `[a, b)`, merging with touching or overlapping ranges.
    fn insert(&mut self, mut a: u64, mut b: u64) {
        if a >= b {
            return;
        }
        if let Some((&s, &e)) = self.0.range(..=a).next_back() {
            if e >= a {
                a = s;
                b = b.max(e);
            }
        }
        let inside: Vec<u64> = self.0.range(a..=b).map(|(s, _)| *s).collect();
        for s in inside {
            let e = self.0.remove(&s).expect("listed");
            b = b.max(e);
        }
        self.0.insert(a, b);
    }
}

/// What the recording knows of one path.
struct PathRec {
    /// Created during the recording: undo removes it, nothing else to keep.
    created: bool,
    /// The length before the recording (set at the first change).
    orig_len: Option<u64>,
    /// Ranges of the original bytes already in the log.
    saved: Ranges,
    /// Held-back operations, in order, with the handle each came through.
    pending: Vec<(Op, Arc<dyn File>)>,
    /// A handle whose writes were issued and not yet synced.
    unsynced: Option<Arc<dyn File>>,
    /// The `LEN` record is in the log.
    len_logged: bool,
}

impl PathRec {
    fn new(created: bool) -> PathRec {
        PathRec {
            created,
            orig_len: None,
            saved: Ranges::default(),
            pending: Vec::new(),
            unsynced: None,
            len_logged: false,
        }
    }
}

/// An active recording: the undo log being written and what it covers.
struct Recording {
    /// Mutant `UndoUnsynced` (torture only): the originals are not synced before the
    /// changes are issued.
    unsynced: bool,
    log: Arc<dyn File>,
    log_path: PathBuf,
    end: u64,
    nonce: u64,
    seq: u64,
    paths: HashMap<PathBuf, PathRec>,
    /// Directories whose entries the recording changed (files created or removed):
    /// synced by `finish`, so the commit is durable before its outcome is decided.
    dirs: Vec<PathBuf>,
}

fn record_checksum(nonce: u64, seq: u64, body: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64_with_seed(body, nonce ^ seq.wrapping_mul(0x9e37_79b9_7f4a_7c15))
}

impl Recording {
    fn append(&mut self, kind: u8, path: &Path, a: u64, data: &[u8]) -> io::Result<()> {
        use std::os::unix::ffi::OsStrExt;
        let p = path.as_os_str().as_bytes();
        let mut r = Vec::with_capacity(1 + 4 + p.len() + 8 + 4 + data.len() + 8);
        r.push(kind);
        r.extend_from_slice(&(p.len() as u32).to_le_bytes());
        r.extend_from_slice(p);
        r.extend_from_slice(&a.to_le_bytes());
        r.extend_from_slice(&(data.len() as u32).to_le_bytes());
        r.extend_from_slice(data);
        let sum = record_checksum(self.nonce, self.seq, &r);
        r.extend_from_slice(&sum.to_le_bytes());
        self.log.write_at(&r, self.end)?;
        self.end += r.len() as u64;
        self.seq += 1;
        Ok(())
    }

    fn sync_log(&self) -> io::Result<()> {
        self.log.sync_data()
    }

    /// Log the original bytes of `[s, e)` of `path`, read through `reader`, in records of
    /// at most 1 MiB (read one at a time: a commit that truncates a large file does not
    /// hold it in memory).
    fn log_originals(&mut self, reader: &dyn File, path: &Path, s: u64, e: u64) -> io::Result<()> {
        const CHUNK: u64 = 1 << 20;
        let mut buf = Vec::new();
        let mut at = s;
        while at < e {
            let n = (e - at).min(CHUNK) as usize;
            buf.resize(n, 0);
            reader.read_exact_at(&mut buf, at)?;
            self.append(BYTES, path, at, &buf)?;
            at += n as u64;
        }
        Ok(())
    }

    /// Log the originals the pending operations of `path` would destroy, sync the log
    /// (if anything was logged), issue the operations.
    fn flush(&mut self, inner: &Arc<dyn Vfs>, path: &Path) -> io::Result<()> {
        let Some(rec) = self.paths.get_mut(path) else {
            return Ok(());
        };
        if rec.pending.is_empty() {
            return Ok(());
        }
        let pending = std::mem::take(&mut rec.pending);
        if !rec.created {
            let orig = match rec.orig_len {
                Some(n) => n,
                None => {
                    let n = pending[0].1.len()?;
                    rec.orig_len = Some(n);
                    n
                }
            };
            let mut to_save = Vec::new();
            let mut covered = Ranges(rec.saved.0.clone());
            for (op, _) in &pending {
                if let Some((a, b)) = op.destroys(orig) {
                    for (s, e) in covered.missing(a, b) {
                        covered.insert(s, e);
                        to_save.push((s, e));
                    }
                }
            }
            let mut appended = false;
            if !rec.len_logged {
                self.append(LEN, path, orig, &[])?;
                appended = true;
            }
            if !to_save.is_empty() {
                // Originals are read through a buffered handle: an O_DIRECT one would
                // need aligned ranges.
                let reader = inner.open_read_only(path)?;
                for (s, e) in to_save {
                    self.log_originals(&*reader, path, s, e)?;
                }
                appended = true;
            }
            if appended && !self.unsynced {
                self.sync_log()?;
            }
            // Only now, with the originals durable, do they count as saved.
            let rec = self.paths.get_mut(path).expect("present");
            rec.len_logged = true;
            rec.saved = covered;
        }
        let rec = self.paths.get_mut(path).expect("present");
        for (op, via) in &pending {
            match op {
                Op::Write(off, d) => via.write_at(d.bytes(), *off)?,
                Op::SetLen(n) => via.set_len(*n)?,
                Op::Allocate(off, len) => via.allocate(*off, *len)?,
            }
        }
        rec.unsynced = pending.last().map(|(_, via)| via.clone());
        Ok(())
    }
}

/// The recording switch one database's files share.
#[derive(Default)]
pub(crate) struct UndoState {
    on: AtomicBool,
    rec: Mutex<Option<Recording>>,
}

impl std::fmt::Debug for UndoState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UndoState")
            .field("on", &self.on.load(Ordering::Relaxed))
            .finish()
    }
}

impl UndoState {
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Recording>> {
        self.rec.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A VFS that can record the undo of what is done through it (module docs).
#[derive(Debug)]
pub(crate) struct UndoVfs {
    inner: Arc<dyn Vfs>,
    state: Arc<UndoState>,
}

impl UndoVfs {
    pub(crate) fn new(inner: Arc<dyn Vfs>) -> UndoVfs {
        UndoVfs {
            inner,
            state: Arc::new(UndoState::default()),
        }
    }

    /// The VFS it wraps.
    pub(crate) fn inner(&self) -> &Arc<dyn Vfs> {
        &self.inner
    }

    /// Start recording into a new undo log at `log_path` whose header names
    /// `super_path` and `nonce`; the log and its directory entry are durable when this
    /// returns.
    /// `unsynced`: the mutant `UndoUnsynced` (never set outside the mutation tests).
    pub(crate) fn start(
        &self,
        log_path: &Path,
        super_path: &Path,
        nonce: u64,
        unsynced: bool,
    ) -> io::Result<()> {
        let log = self.inner.open(log_path, OpenOptions::CREATE)?;
        log.set_len(0)?;
        let header = encode_header(nonce, super_path);
        log.write_at(&header, 0)?;
        log.sync_data()?;
        self.inner.sync_dir(&dir_of(log_path))?;
        *self.state.lock() = Some(Recording {
            unsynced,
            log,
            log_path: log_path.to_path_buf(),
            end: header.len() as u64,
            nonce,
            seq: 0,
            paths: HashMap::new(),
            dirs: Vec::new(),
        });
        self.state.on.store(true, Ordering::Release);
        Ok(())
    }

    /// Issue what is still held back, sync every file the recording changed, and stop.
    /// The undo log stays (the caller removes it once the transaction is decided).
    pub(crate) fn finish(&self) -> io::Result<()> {
        let mut g = self.state.lock();
        let r = (|| {
            let Some(rec) = g.as_mut() else {
                return Ok(());
            };
            let paths: Vec<PathBuf> = rec.paths.keys().cloned().collect();
            for p in &paths {
                rec.flush(&self.inner, p)?;
            }
            for p in &paths {
                let pr = rec.paths.get_mut(p).expect("listed above");
                if let Some(h) = pr.unsynced.take() {
                    h.sync_data()?;
                }
            }
            rec.dirs.sort();
            rec.dirs.dedup();
            for d in &rec.dirs {
                self.inner.sync_dir(d)?;
            }
            Ok(())
        })();
        self.state.on.store(false, Ordering::Release);
        *g = None;
        r
    }

    /// Stop without issuing anything held back (the commit failed: what it did not
    /// write stays unwritten; recovery undoes what it did).
    pub(crate) fn abandon(&self) {
        let mut g = self.state.lock();
        self.state.on.store(false, Ordering::Release);
        *g = None;
    }

    fn recording(&self) -> bool {
        self.state.on.load(Ordering::Acquire)
    }
}

/// `path` made absolute against the current directory (files of the simulated and
/// in-memory file systems are absolute already).
pub(crate) fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

fn dir_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

fn unsupported(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        format!("{what} while recording a commit across databases"),
    )
}

impl Vfs for UndoVfs {
    fn open(&self, path: &Path, opts: OpenOptions) -> io::Result<Arc<dyn File>> {
        // The log names files by absolute path: recovery may run in another directory.
        let abs = absolute(path);
        if self.recording() && (opts.create || opts.create_new) && !self.inner.exists(path)? {
            let mut g = self.state.lock();
            if let Some(rec) = g.as_mut() {
                if rec.log_path != abs {
                    rec.append(CREATED, &abs, 0, &[])?;
                    rec.sync_log()?;
                    rec.paths.insert(abs.clone(), PathRec::new(true));
                    rec.dirs.push(dir_of(&abs));
                }
            }
        }
        let inner = self.inner.open(path, opts)?;
        Ok(Arc::new(UndoFile {
            inner,
            path: abs,
            vfs: self.inner.clone(),
            state: self.state.clone(),
        }))
    }

    fn delete(&self, path: &Path) -> io::Result<()> {
        if self.recording() {
            let original = path;
            let path = &absolute(original);
            let mut g = self.state.lock();
            if let Some(rec) = g.as_mut() {
                let known_created = rec.paths.get(path).is_some_and(|p| p.created);
                if !known_created && self.inner.exists(path)? {
                    // Keep the whole original content: undo recreates the file.
                    let f = self.inner.open_read_only(path)?;
                    let pr = rec
                        .paths
                        .entry(path.to_path_buf())
                        .or_insert_with(|| PathRec::new(false));
                    let orig = match pr.orig_len {
                        Some(n) => n,
                        None => {
                            let n = f.len()?;
                            pr.orig_len = Some(n);
                            n
                        }
                    };
                    let missing = pr.saved.missing(0, orig);
                    pr.pending.clear();
                    pr.unsynced = None;
                    if !pr.len_logged {
                        pr.len_logged = true;
                        rec.append(LEN, path, orig, &[])?;
                    }
                    for (s, e) in missing {
                        rec.log_originals(&*f, path, s, e)?;
                    }
                    rec.append(DELETED, path, 0, &[])?;
                    rec.sync_log()?;
                    rec.dirs.push(dir_of(path));
                    if let Some(pr) = rec.paths.get_mut(path) {
                        pr.saved.insert(0, orig);
                    }
                } else if let Some(pr) = rec.paths.get_mut(path) {
                    pr.pending.clear();
                    pr.unsynced = None;
                    rec.dirs.push(dir_of(path));
                }
            }
            drop(g);
            return self.inner.delete(original);
        }
        self.inner.delete(path)
    }

    fn exists(&self, path: &Path) -> io::Result<bool> {
        self.inner.exists(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        if self.recording() {
            return Err(unsupported("rename"));
        }
        self.inner.rename(from, to)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.inner.sync_dir(dir)
    }

    fn open_read_only(&self, path: &Path) -> io::Result<Arc<dyn File>> {
        self.inner.open_read_only(path)
    }

    inpage_vfs::vfs_pass_through!(nonce, in_process_memory, regions);
}

/// A file of an `UndoVfs`.
#[derive(Debug)]
struct UndoFile {
    inner: Arc<dyn File>,
    path: PathBuf,
    vfs: Arc<dyn Vfs>,
    state: Arc<UndoState>,
}

impl UndoFile {
    fn recording(&self) -> bool {
        self.state.on.load(Ordering::Acquire)
    }

    /// Hold `op` back (Ok(true)), or Ok(false) if no recording is active.
    fn hold(&self, op: Op) -> io::Result<Option<Op>> {
        let mut g = self.state.lock();
        let Some(rec) = g.as_mut() else {
            return Ok(Some(op));
        };
        let inner: Arc<dyn File> = self.inner.clone();
        let pr = rec
            .paths
            .entry(self.path.clone())
            .or_insert_with(|| PathRec::new(false));
        if pr.orig_len.is_none() && !pr.created {
            pr.orig_len = Some(inner.len()?);
        }
        pr.pending.push((op, inner));
        Ok(None)
    }

    fn flush(&self) -> io::Result<()> {
        let mut g = self.state.lock();
        if let Some(rec) = g.as_mut() {
            rec.flush(&self.vfs, &self.path)?;
            if let Some(pr) = rec.paths.get_mut(&self.path) {
                pr.unsynced = None;
            }
        }
        Ok(())
    }

    /// The length and content as the held-back operations leave them, over `buf` read
    /// at `offset` from the file (`got` bytes were there). Returns the visible count.
    fn overlay(&self, buf: &mut [u8], offset: u64, got: usize) -> io::Result<usize> {
        let g = self.state.lock();
        let Some(rec) = g.as_ref() else {
            return Ok(got);
        };
        let Some(pr) = rec.paths.get(&self.path) else {
            return Ok(got);
        };
        if pr.pending.is_empty() {
            return Ok(got);
        }
        let mut len = self.inner.len()?;
        let end = offset + buf.len() as u64;
        // Bytes past the file's end read as zeros until an operation says otherwise.
        buf[got..].fill(0);
        for (op, _) in &pr.pending {
            match op {
                Op::Write(off, d) => {
                    let (a, b) = (*off, off + d.len as u64);
                    let (s, e) = (a.max(offset), b.min(end));
                    if s < e {
                        buf[(s - offset) as usize..(e - offset) as usize]
                            .copy_from_slice(&d.bytes()[(s - a) as usize..(e - a) as usize]);
                    }
                    len = len.max(b);
                }
                Op::SetLen(n) => {
                    if *n < end && *n < len {
                        let s = (*n).max(offset);
                        buf[(s - offset) as usize..].fill(0);
                    }
                    len = *n;
                }
                Op::Allocate(off, l) => {
                    let (a, b) = (*off, off + l);
                    let (s, e) = (a.max(offset), b.min(end));
                    if s < e {
                        buf[(s - offset) as usize..(e - offset) as usize].fill(0);
                    }
                    len = len.max(b);
                }
            }
        }
        Ok(len.saturating_sub(offset).min(buf.len() as u64) as usize)
    }

    fn pending_len(&self, base: u64) -> u64 {
        let g = self.state.lock();
        let Some(pr) = g.as_ref().and_then(|r| r.paths.get(&self.path)) else {
            return base;
        };
        let mut len = base;
        for (op, _) in &pr.pending {
            match op {
                Op::Write(off, d) => len = len.max(off + d.len as u64),
                Op::SetLen(n) => len = *n,
                Op::Allocate(off, l) => len = len.max(off + l),
            }
        }
        len
    }
}

impl File for UndoFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let got = self.inner.read_at(buf, offset)?;
        if !self.recording() {
            return Ok(got);
        }
        self.overlay(buf, offset, got)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        if self.recording() {
            if let Some(Op::Write(off, d)) = self.hold(Op::Write(offset, Aligned::copy_of(buf)))? {
                return self.inner.write_at(d.bytes(), off);
            }
            return Ok(());
        }
        self.inner.write_at(buf, offset)
    }

    fn sync_data(&self) -> io::Result<()> {
        if self.recording() {
            self.flush()?;
        }
        self.inner.sync_data()
    }

    fn sync_all(&self) -> io::Result<()> {
        if self.recording() {
            self.flush()?;
        }
        self.inner.sync_all()
    }

    fn len(&self) -> io::Result<u64> {
        let n = self.inner.len()?;
        if !self.recording() {
            return Ok(n);
        }
        Ok(self.pending_len(n))
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        if self.recording() && self.hold(Op::SetLen(len))?.is_none() {
            return Ok(());
        }
        self.inner.set_len(len)
    }

    fn allocate(&self, offset: u64, len: u64) -> io::Result<()> {
        if self.recording() && self.hold(Op::Allocate(offset, len))?.is_none() {
            return Ok(());
        }
        self.inner.allocate(offset, len)
    }

    fn lock_range(&self, start: u64, len: u64, kind: Option<LockKind>) -> io::Result<bool> {
        self.inner.lock_range(start, len, kind)
    }

    fn prefetch(&self, offset: u64, len: u64) {
        self.inner.prefetch(offset, len)
    }

    fn direct_alignment(&self) -> Option<usize> {
        self.inner.direct_alignment()
    }
}

fn encode_header(nonce: u64, super_path: &Path) -> Vec<u8> {
    use std::os::unix::ffi::OsStrExt;
    let p = super_path.as_os_str().as_bytes();
    let mut h = Vec::with_capacity(16 + 4 + 8 + 4 + p.len() + 8);
    h.extend_from_slice(&MAGIC);
    h.extend_from_slice(&VERSION.to_le_bytes());
    h.extend_from_slice(&nonce.to_le_bytes());
    h.extend_from_slice(&(p.len() as u32).to_le_bytes());
    h.extend_from_slice(p);
    let sum = xxhash_rust::xxh3::xxh3_64(&h);
    h.extend_from_slice(&sum.to_le_bytes());
    h
}

/// One undo record: kind, path, `a` (length or offset), data.
type Record = (u8, PathBuf, u64, Vec<u8>);

/// A decoded undo log.
#[derive(Debug)]
pub(crate) struct UndoLog {
    pub nonce: u64,
    pub super_path: PathBuf,
    records: Vec<Record>,
}

fn le_u32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}
fn le_u64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// Decode an undo log: None if its header is not whole (it was cut before its sync, so
/// the commit it belongs to changed nothing yet). Records stop at the first that fails
/// its checksum.
pub(crate) fn decode(b: &[u8]) -> Option<UndoLog> {
    use std::os::unix::ffi::OsStrExt;
    if b.get(..16)? != MAGIC || le_u32(b, 16)? != VERSION {
        return None;
    }
    let nonce = le_u64(b, 20)?;
    let plen = le_u32(b, 28)? as usize;
    let hend = 32 + plen;
    if le_u64(b, hend)? != xxhash_rust::xxh3::xxh3_64(b.get(..hend)?) {
        return None;
    }
    let super_path = PathBuf::from(std::ffi::OsStr::from_bytes(&b[32..hend]));
    let mut at = hend + 8;
    let mut records = Vec::new();
    let mut seq = 0u64;
    let next = |at: usize| -> Option<(Record, usize, u64)> {
        let kind = *b.get(at)?;
        let plen = le_u32(b, at + 1)? as usize;
        let p = b.get(at + 5..at + 5 + plen)?;
        let a = le_u64(b, at + 5 + plen)?;
        let dlen = le_u32(b, at + 13 + plen)? as usize;
        let d = b.get(at + 17 + plen..at + 17 + plen + dlen)?;
        let end = at + 17 + plen + dlen;
        let sum = le_u64(b, end)?;
        Some((
            (
                kind,
                PathBuf::from(std::ffi::OsStr::from_bytes(p)),
                a,
                d.to_vec(),
            ),
            end + 8,
            sum,
        ))
    };
    while let Some((rec, after, sum)) = next(at) {
        if record_checksum(nonce, seq, &b[at..after - 8]) != sum {
            break;
        }
        records.push(rec);
        at = after;
        seq += 1;
    }
    Some(UndoLog {
        nonce,
        super_path,
        records,
    })
}

impl UndoLog {
    /// Put every file the logged commit changed back as it was: remove the files it
    /// created, recreate the ones it deleted, write back the original bytes, restore the
    /// lengths, and sync each file and its directory. Idempotent.
    pub(crate) fn apply(&self, vfs: &Arc<dyn Vfs>) -> io::Result<()> {
        let mut created: Vec<&Path> = Vec::new();
        let mut lens: HashMap<&Path, u64> = HashMap::new();
        let mut bytes: Vec<(&Path, u64, &[u8])> = Vec::new();
        for (kind, p, a, d) in &self.records {
            match *kind {
                CREATED => created.push(p),
                LEN => {
                    lens.entry(p).or_insert(*a);
                }
                BYTES => bytes.push((p, *a, d)),
                _ => {}
            }
        }
        let mut dirs: Vec<PathBuf> = Vec::new();
        for p in created {
            match vfs.delete(p) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
            dirs.push(dir_of(p));
        }
        let mut files: HashMap<&Path, Arc<dyn File>> = HashMap::new();
        for (p, len) in &lens {
            let f = vfs.open(p, OpenOptions::CREATE)?;
            files.insert(p, f);
            let _ = len;
            dirs.push(dir_of(p));
        }
        for (p, off, d) in bytes {
            if let Some(f) = files.get(p) {
                f.write_at(d, off)?;
            }
        }
        for (p, len) in &lens {
            let f = &files[p];
            f.set_len(*len)?;
            f.sync_data()?;
        }
        dirs.sort();
        dirs.dedup();
        for d in dirs {
            vfs.sync_dir(&d)?;
        }
        Ok(())
    }
}

/// The undo log of database `db` (`<db>-undo`).
pub(crate) fn log_path(db: &Path) -> PathBuf {
    let mut s = db.as_os_str().to_owned();
    s.push("-undo");
    PathBuf::from(s)
}

const SUPER_MAGIC: [u8; 16] = *b"inpage-super-jnl";

/// The super-journal of a transaction across databases: its existence is the
/// transaction's outcome (present: not committed), its content the databases that took
/// part (so the last of them to recover can remove it).
pub(crate) fn encode_super(nonce: u64, participants: &[PathBuf]) -> Vec<u8> {
    use std::os::unix::ffi::OsStrExt;
    let mut b = Vec::new();
    b.extend_from_slice(&SUPER_MAGIC);
    b.extend_from_slice(&VERSION.to_le_bytes());
    b.extend_from_slice(&nonce.to_le_bytes());
    b.extend_from_slice(&(participants.len() as u32).to_le_bytes());
    for p in participants {
        let p = p.as_os_str().as_bytes();
        b.extend_from_slice(&(p.len() as u32).to_le_bytes());
        b.extend_from_slice(p);
    }
    let sum = xxhash_rust::xxh3::xxh3_64(&b);
    b.extend_from_slice(&sum.to_le_bytes());
    b
}

fn decode_super(b: &[u8]) -> Option<(u64, Vec<PathBuf>)> {
    use std::os::unix::ffi::OsStrExt;
    if b.get(..16)? != SUPER_MAGIC || le_u32(b, 16)? != VERSION || b.len() < 8 {
        return None;
    }
    let body = &b[..b.len() - 8];
    if le_u64(b, b.len() - 8)? != xxhash_rust::xxh3::xxh3_64(body) {
        return None;
    }
    let nonce = le_u64(body, 20)?;
    let n = le_u32(body, 28)? as usize;
    let mut at = 32;
    let mut out = Vec::with_capacity(n.min(1024));
    for _ in 0..n {
        let l = le_u32(body, at)? as usize;
        out.push(PathBuf::from(std::ffi::OsStr::from_bytes(
            body.get(at + 4..at + 4 + l)?,
        )));
        at += 4 + l;
    }
    Some((nonce, out))
}

/// The nonce in the header of the undo log at `path`, if it has a whole one (only the
/// header is read).
fn log_nonce(vfs: &Arc<dyn Vfs>, path: &Path) -> io::Result<Option<u64>> {
    let f = match vfs.open(path, OpenOptions::default()) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut head = vec![0u8; 32];
    let n = f.read_at(&mut head, 0)?;
    let Some(plen) = le_u32(&head[..n], 28) else {
        return Ok(None);
    };
    let mut h = vec![0u8; 32 + plen as usize + 8];
    let n = f.read_at(&mut h, 0)?;
    h.truncate(n);
    Ok(decode(&h).map(|l| l.nonce))
}

fn read_all(vfs: &Arc<dyn Vfs>, path: &Path) -> io::Result<Option<Vec<u8>>> {
    let f = match vfs.open(path, OpenOptions::default()) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let n = f.len()?;
    let mut b = vec![0u8; n as usize];
    f.read_exact_at(&mut b, 0)?;
    Ok(Some(b))
}

/// What recovery did with a database's undo log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Undone {
    /// There was none, or it belonged to a transaction that committed (or never wrote).
    Nothing,
    /// Its transaction across databases had not committed: this database's part was
    /// undone.
    RolledBack,
}

/// At open, under the database's lock (or in a read-only open's overlay): settle a
/// transaction across databases this database took part in. If its undo log names a
/// super-journal that still exists, the transaction did not commit and this database's
/// part is undone; the log is then removed, and the super-journal too once no other
/// database's log refers to it.
pub(crate) fn recover(vfs: &Arc<dyn Vfs>, db: &Path) -> io::Result<Undone> {
    let path = log_path(&absolute(db));
    let Some(bytes) = read_all(vfs, &path)? else {
        return Ok(Undone::Nothing);
    };
    let dir = dir_of(&path);
    let Some(log) = decode(&bytes) else {
        // Cut before its header was synced: nothing of the commit was issued yet.
        vfs.delete(&path)?;
        vfs.sync_dir(&dir)?;
        return Ok(Undone::Nothing);
    };
    let live = vfs.exists(&log.super_path)?;
    if !live {
        vfs.delete(&path)?;
        vfs.sync_dir(&dir)?;
        return Ok(Undone::Nothing);
    }
    log.apply(vfs)?;
    // The super-journal goes once no other database still has to undo its part — before
    // this log, so that a cut in between leaves a stale log (removed by the next open)
    // rather than a super-journal no log refers to. (Two databases of one transaction
    // recovering at once in two processes can each see the other's log and both keep it:
    // a leftover file, harmless since a nonce is never reused.)
    if let Some(sb) = read_all(vfs, &log.super_path)? {
        let others_pending = match decode_super(&sb) {
            Some((nonce, parts)) if nonce == log.nonce => {
                let mut pending = false;
                for p in parts.iter().filter(|p| log_path(p) != path) {
                    if log_nonce(vfs, &log_path(p))? == Some(log.nonce) {
                        pending = true;
                    }
                }
                pending
            }
            // Not readable: keep it (it only costs a file).
            _ => true,
        };
        if !others_pending {
            vfs.delete(&log.super_path)?;
            vfs.sync_dir(&dir_of(&log.super_path))?;
        }
    }
    vfs.delete(&path)?;
    vfs.sync_dir(&dir)?;
    Ok(Undone::RolledBack)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_cover_and_merge() {
        let mut p = Ranges::default();
        assert_eq!(p.missing(0, 10), vec![(0, 10)]);
        p.insert(2, 4);
        p.insert(6, 8);
        assert_eq!(p.missing(0, 10), vec![(0, 2), (4, 6), (8, 10)]);
        assert_eq!(p.missing(3, 7), vec![(4, 6)]);
        p.insert(4, 6);
        assert_eq!(
            p.0.iter().map(|(a, b)| (*a, *b)).collect::<Vec<_>>(),
            vec![(2, 8)]
        );
        assert_eq!(p.missing(2, 8), Vec::<(u64, u64)>::new());
        p.insert(0, 1);
        p.insert(9, 12);
        p.insert(1, 9);
        assert_eq!(
            p.0.iter().map(|(a, b)| (*a, *b)).collect::<Vec<_>>(),
            vec![(0, 12)]
        );
        assert_eq!(p.missing(5, 20), vec![(12, 20)]);
    }

    /// Record a few writes, truncations and a created file on the simulated disk; cut
    /// the power before the recording finishes, at every operation; applying the log
    /// of what survived gives back the original files exactly.
    #[test]
    fn undo_restores_the_originals_after_a_cut_anywhere() {
        let base = SimVfs::new();
        let a = Path::new("/d/a");
        let f = base.open(a, OpenOptions::CREATE).unwrap();
        let orig: Vec<u8> = (0..10_000u32).map(|i| (i * 7) as u8).collect();
        f.write_at(&orig, 0).unwrap();
        f.sync_data().unwrap();
        base.sync_dir(Path::new("/d")).unwrap();
        drop(f);
        let script = |vfs: &UndoVfs| -> io::Result<()> {
            vfs.start(Path::new("/d/a-undo"), Path::new("/d/super"), 7, false)?;
            let f = vfs.open(a, OpenOptions::default())?;
            f.write_at(&[1u8; 3000], 500)?;
            f.write_at(&[2u8; 100], 9_950)?;
            f.sync_data()?;
            f.set_len(4000)?;
            f.write_at(&[3u8; 10], 3_995)?;
            let g = vfs.open(Path::new("/d/new"), OpenOptions::CREATE)?;
            g.write_at(b"fresh", 0)?;
            g.sync_data()?;
            vfs.sync_dir(Path::new("/d"))?;
            f.sync_data()?;
            vfs.finish()
        };
        let total = {
            let sim = base.crash(0, CrashModel::none());
            let vfs = UndoVfs::new(Arc::new(sim.clone()));
            let before = sim.op_count();
            script(&vfs).unwrap();
            sim.op_count() - before
        };
        for cut in 0..total {
            for seed in 0..4 {
                let sim = base.crash(0, CrashModel::none());
                let vfs = UndoVfs::new(Arc::new(sim.clone()));
                sim.set_power_cut_after(cut);
                let _ = script(&vfs);
                let crashed = sim.crash(seed, CrashModel::full());
                let v: Arc<dyn Vfs> = Arc::new(crashed.clone());
                if let Some(bytes) = crashed.read_file(Path::new("/d/a-undo")) {
                    if let Some(log) = decode(&bytes) {
                        log.apply(&v).unwrap();
                    }
                }
                assert_eq!(
                    crashed.read_file(a).as_deref(),
                    Some(&orig[..]),
                    "cut {cut}/{total} seed {seed}"
                );
                assert_eq!(crashed.read_file(Path::new("/d/new")), None, "cut {cut}");
            }
        }
    }
}
