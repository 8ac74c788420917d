//! Creating a database: the first pages of a new or empty (0-byte) file, written in place
//! under the file's lock and guarded by a creation marker.
//!
//! A database file is created the way SQLite creates one: opened with `O_CREAT` (never
//! exclusively, never renamed into place), so every process that opens the path gets the
//! same inode, and the first to take the file's lock lays out the first pages while the
//! others wait or are refused (`Error::Locked`). An existing 0-byte file is an empty
//! database and is laid out the same way (Python's `dbm.sqlite3`, "create a temp file,
//! then connect" rely on it, as on stock SQLite).
//!
//! Invariants, and why they hold:
//! - *A half-written first layout is never mistaken for a corrupt database, nor a
//!   database for a half-written layout.* Before writing any byte of the database file,
//!   the creator writes the complete image it is about to write into `<db>-create` (the
//!   marker: magic, the pages, the length, a checksum), syncs it and the directory. The
//!   pages are then written and synced, and only then is the marker removed and the
//!   directory synced. An open that finds a valid marker checks that the file holds
//!   nothing but bytes of that image or zeros (a file that was empty before the layout
//!   can hold nothing else, torn or reordered); if so it writes the image again. A file
//!   with any other byte is not the one the marker was made for (it was replaced since):
//!   the marker is ignored and the file judged on its own.
//! - *No commit happens while a marker exists*: the open that lays out the file removes
//!   the marker durably before it returns, so redoing the layout never overwrites a
//!   commit.
//! - A torn marker (its checksum fails) was cut before its sync, so no byte of the layout
//!   reached the database file: it is removed, and an empty file is laid out afresh.
//! - *A new database starts without a journal.* Side files of its mode and its default
//!   nvlog region found when the file is laid out were left by an earlier database at
//!   this path (deleted without them): they are removed before the marker is written
//!   (`journal::stale_state`), so they are never replayed into the new file and never
//!   make it refuse to open. A layout happens only on an empty file under its lock, and
//!   no commit of that file can precede its layout, so nothing of this database is lost.
//! - Everything goes through the open's VFS: on a read-only open that is the in-memory
//!   overlay, so looking at an empty or half-created file changes nothing on disk.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use crate::config::{Config, DEFAULT_JOURNAL_MODE};
use crate::error::{Error, Pgno, Result};
use crate::journal::{dir_of, grown_len, side_path, DbFile};
use crate::le::{get_u32, get_u64};
use crate::page::{stamp_crc, PageRef, Stamp};
use crate::vfs::{File, OpenOptions, Vfs};

use super::{FirstPages, InitStore};
use crate::format::header::{Header, META_SLOTS};

/// The marker's suffix (`<db>-create`).
pub(crate) const MARKER_SUFFIX: &str = "create";
const MAGIC: [u8; 16] = *b"inpage-creating\0";
const VERSION: u32 = 1;
/// magic, version, page size, page count, max length, checksum.
const FIXED: usize = 16 + 4 + 4 + 4 + 8;

/// The first layout of a database: its pages and the length the file may reach while
/// they are written (the zero-filled growth chunk included).
#[derive(Debug, PartialEq, Eq)]
struct Image {
    page_size: u32,
    pages: Vec<(Pgno, Vec<u8>)>,
    page_count: u32,
    max_len: u64,
}

/// What a layout of a new file in `cfg`'s mode and page size writes.
fn build_image(cfg: &Config, first: FirstPages) -> Result<Image> {
    let page_size = cfg.new_file_page_size() as usize;
    let mode = cfg.journal_mode.unwrap_or(DEFAULT_JOURNAL_MODE);
    cfg.check_against(mode)?;
    let layout = mode.layout();
    let mut store = InitStore {
        page_size,
        layout,
        pages: BTreeMap::new(),
        next: 1,
    };
    let catalog_root = first(&mut store)?;
    // A layout whose pages carry tids is born as committed transaction `create_tid`
    // (header slot + catalog root, both tagged with it and txn_size 2), so
    // counting-commit recovery accepts it.
    let fcc = layout.create_tid();
    let txn_size = if fcc == 0 {
        0
    } else {
        store.pages.len() as u32 + 1
    };
    let header = Header {
        page_size: cfg.new_file_page_size(),
        mode: mode.id(),
        page_count: store.next,
        fcc,
        last_txn_size: txn_size,
        freelist_head: 0,
        freelist_count: 0,
        catalog_root,
        meta: [0; META_SLOTS],
        auto_vacuum: Default::default(),
    };
    let blank = vec![0u8; page_size];
    let mut pages = vec![(0, layout.header_image(&blank, 0, &header).to_vec())];
    let g = layout.geometry_for(page_size);
    for (pgno, img) in store.pages {
        let mut img = layout
            .finalize(pgno, PageRef::from(img), g, Stamp::serial(fcc, txn_size))?
            .to_vec();
        stamp_crc(&mut img, pgno);
        pages.push((pgno, img));
    }
    let bytes = header.page_count as u64 * page_size as u64;
    let max_len = grown_len(page_size as u64, cfg.chunk_pages_for(mode), bytes);
    Ok(Image {
        page_size: page_size as u32,
        pages,
        page_count: header.page_count,
        max_len,
    })
}

fn encode(img: &Image) -> Vec<u8> {
    let mut b = Vec::with_capacity(FIXED + img.pages.len() * (4 + img.page_size as usize) + 8);
    b.extend_from_slice(&MAGIC);
    b.extend_from_slice(&VERSION.to_le_bytes());
    b.extend_from_slice(&img.page_size.to_le_bytes());
    b.extend_from_slice(&(img.pages.len() as u32).to_le_bytes());
    b.extend_from_slice(&img.max_len.to_le_bytes());
    for (pgno, page) in &img.pages {
        b.extend_from_slice(&pgno.to_le_bytes());
        b.extend_from_slice(page);
    }
    let sum = xxhash_rust::xxh3::xxh3_64(&b);
    b.extend_from_slice(&sum.to_le_bytes());
    b
}

/// What a marker file holds: not ours (no magic), ours but torn, or the image.
enum Marker {
    Foreign,
    Torn,
    Valid(Image),
}

fn decode(b: &[u8]) -> Marker {
    // What a cut leaves of our own marker before its sync: nothing written yet (empty),
    // a prefix of it, or sectors still zero.
    let head = &b[..b.len().min(16)];
    if MAGIC.starts_with(head) || head.iter().all(|&x| x == 0) {
        if b.len() < 16 {
            return Marker::Torn;
        }
    } else {
        return Marker::Foreign;
    }
    if b[..16] != MAGIC {
        return Marker::Torn;
    }
    if b.len() < FIXED + 8 {
        return Marker::Torn;
    }
    let (body, sum) = b.split_at(b.len() - 8);
    if xxhash_rust::xxh3::xxh3_64(body) != get_u64(sum, 0) || get_u32(body, 16) != VERSION {
        return Marker::Torn;
    }
    let page_size = get_u32(body, 20);
    let n = get_u32(body, 24) as usize;
    let max_len = get_u64(body, 28);
    let per = 4 + page_size as usize;
    if page_size == 0 || body.len() != FIXED + n * per {
        return Marker::Torn;
    }
    let pages: Vec<(Pgno, Vec<u8>)> = (0..n)
        .map(|i| {
            let at = FIXED + i * per;
            (get_u32(body, at), body[at + 4..at + per].to_vec())
        })
        .collect();
    let page_count = pages.iter().map(|(p, _)| p + 1).max().unwrap_or(0);
    Marker::Valid(Image {
        page_size,
        pages,
        page_count,
        max_len,
    })
}

/// Whether every byte of `file` is a byte of `img` at that offset or zero: the file
/// holds nothing but (part of) this layout.
fn holds_only(file: &dyn File, path: &Path, img: &Image) -> Result<bool> {
    let len = file.len().map_err(Error::io("stat", path))?;
    if len > img.max_len {
        return Ok(false);
    }
    let ps = img.page_size as u64;
    let by_page: BTreeMap<Pgno, &Vec<u8>> = img.pages.iter().map(|(p, d)| (*p, d)).collect();
    let mut buf = vec![0u8; ps as usize];
    let mut off = 0u64;
    while off < len {
        let n = (len - off).min(ps) as usize;
        file.read_exact_at(&mut buf[..n], off)
            .map_err(Error::io("read", path))?;
        let pgno = (off / ps) as Pgno;
        let ok = match by_page.get(&pgno) {
            Some(want) => buf[..n]
                .iter()
                .zip(want.iter())
                .all(|(a, b)| a == b || *a == 0),
            None => buf[..n].iter().all(|&a| a == 0),
        };
        if !ok {
            return Ok(false);
        }
        off += n as u64;
    }
    Ok(true)
}

/// Write the layout into the (locked) database file and make it durable.
fn write_image(db_path: &Path, file: &Arc<dyn File>, img: &Image, chunk_pages: u32) -> Result<()> {
    let db = DbFile::new(
        file.clone(),
        db_path.to_path_buf(),
        img.page_size as usize,
        chunk_pages,
    );
    for (pgno, page) in &img.pages {
        db.write_page(*pgno, page)?;
    }
    db.ensure_capacity(img.page_count)?;
    db.sync()
}

fn remove_marker(vfs: &Arc<dyn Vfs>, marker: &Path, dir: &Path) -> Result<()> {
    match vfs.delete(marker) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::io("remove", marker)(e)),
    }
    vfs.sync_dir(dir).map_err(Error::io("sync directory", dir))
}

/// Under the database file's lock (or in a read-only open's overlay): finish a layout an
/// earlier open was cut in, then lay out the file if it is empty. Afterwards the file is
/// either a laid-out database or a non-empty file for the open to judge.
pub(super) fn settle(
    db_path: &Path,
    file: &Arc<dyn File>,
    cfg: &Config,
    first: FirstPages,
) -> Result<()> {
    let vfs = &cfg.vfs;
    let marker = side_path(db_path, MARKER_SUFFIX);
    let dir = dir_of(db_path);
    let mode = cfg.journal_mode.unwrap_or(DEFAULT_JOURNAL_MODE);
    if vfs.exists(&marker).map_err(Error::io("stat", &marker))? {
        let m = vfs
            .open(&marker, OpenOptions::default())
            .map_err(Error::io("open", &marker))?;
        let len = m.len().map_err(Error::io("stat", &marker))?;
        let mut bytes = vec![0u8; len as usize];
        m.read_exact_at(&mut bytes, 0)
            .map_err(Error::io("read", &marker))?;
        drop(m);
        match decode(&bytes) {
            // Someone else's file that happens to have this name: never overwritten. An
            // empty database cannot be laid out beside it (the layout needs the name).
            Marker::Foreign => {
                if file.len().map_err(Error::io("stat", db_path))? == 0 {
                    return Err(Error::NotADatabase {
                        path: db_path.to_path_buf(),
                        reason: format!(
                            "the file is empty and {} (not inpage's) is in the way of \
                             laying it out",
                            marker.display()
                        ),
                    });
                }
            }
            // Cut before its sync: the database file got no byte of the layout.
            Marker::Torn => remove_marker(vfs, &marker, &dir)?,
            Marker::Valid(img) => {
                if holds_only(&**file, db_path, &img)? {
                    // The layout was cut (or its marker's removal was): write it again.
                    let chunk = cfg.chunk_pages_for(mode);
                    write_image(db_path, file, &img, chunk)?;
                    return remove_marker(vfs, &marker, &dir);
                }
                // The file is not the one this marker was made for: judge it alone.
            }
        }
    }
    if file.len().map_err(Error::io("stat", db_path))? != 0 {
        return Ok(());
    }
    let img = build_image(cfg, first)?;
    // A new database has no journal yet: whatever sits at its side files' names (and
    // its default region) was left by an earlier database at this path, and would be
    // replayed into this one or make it refuse to open. Removed before the marker, whose
    // directory sync below makes the removals durable before any byte of the layout.
    let (stale, region) = crate::journal::stale_state(mode, db_path, &cfg.journal);
    for f in stale {
        match vfs.delete(&f) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(Error::io("delete stale", &f)(e))
            }
            _ => {}
        }
    }
    if let Some(r) = region {
        match vfs.delete_region(&r) {
            Err(e)
                if !matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::Unsupported
                ) =>
            {
                return Err(Error::io("delete stale region", &r)(e))
            }
            _ => {}
        }
    }
    let m = vfs
        .open(&marker, OpenOptions::CREATE)
        .map_err(Error::io("create", &marker))?;
    m.set_len(0).map_err(Error::io("truncate", &marker))?;
    m.write_at(&encode(&img), 0)
        .map_err(Error::io("write", &marker))?;
    m.sync_data().map_err(Error::io("fdatasync", &marker))?;
    drop(m);
    // The marker's name (and the new database file's) must be durable before any byte
    // of the layout can reach the database file.
    vfs.sync_dir(&dir)
        .map_err(Error::io("sync directory", &dir))?;
    write_image(db_path, file, &img, cfg.chunk_pages_for(mode))?;
    remove_marker(vfs, &marker, &dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marker_round_trips_and_detects_tears() {
        let img = build_image(&Config::default(), crate::tree::create).unwrap();
        let b = encode(&img);
        match decode(&b) {
            Marker::Valid(back) => assert_eq!(back, img),
            _ => panic!("a whole marker decodes"),
        }
        // Cut anywhere before its sync: ours, torn (an empty file included).
        for cut in [0, 10, 16, 40, b.len() / 2, b.len() - 1] {
            assert!(matches!(decode(&b[..cut]), Marker::Torn), "cut at {cut}");
        }
        let mut zeroed = b.clone();
        zeroed[..512].fill(0);
        assert!(matches!(decode(&zeroed), Marker::Torn));
        let mut flipped = b.clone();
        flipped[FIXED + 100] ^= 1;
        assert!(matches!(decode(&flipped), Marker::Torn));
        assert!(matches!(decode(b"SQLite format 3\0"), Marker::Foreign));
    }
}
