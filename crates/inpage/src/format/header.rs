//! The file header, kept in the first `HEADER_LEN` bytes of page 0.
//!
//! Invariants:
//! - The header fits in the first 512-byte sector and carries its own crc32c, so a torn
//!   write of page 0 leaves either the old or the new header readable (sector writes are
//!   atomic on every device we model), and a foreign or damaged file is rejected before
//!   any other byte of it is trusted.
//! - `fcc` is the id of the last committed write transaction; commit `fcc + 1` writes a
//!   header carrying it, except in modes with metadata embedding (`off-opt`, `dhl-cc`,
//!   `wal`), which leave the header page out of a commit that changes nothing but the
//!   counter (`dhl-cc` recovers the FCC from the pages, `wal` from its commit frames and
//!   writes it at checkpoint; `off-opt` never needs it on disk). A
//!   layout with two header slots (DHL) writes the slot not holding the committed header.
//! - Decoding never panics: every field is range-checked and reported by name.

use crate::error::Pgno;

/// Bytes of page 0 used by the header.
pub const HEADER_LEN: usize = 128;
/// Magic string at offset 0.
pub const MAGIC: &[u8; 16] = b"inpage format 1\0";
/// On-disk format version.
pub const FORMAT_VERSION: u32 = 2;
/// Number of user meta values.
pub const META_SLOTS: usize = 8;
/// Smallest and largest page sizes.
pub const MIN_PAGE_SIZE: u32 = 512;
pub const MAX_PAGE_SIZE: u32 = 65536;

const CRC_OFFSET: usize = HEADER_LEN - 4;

/// The largest transaction id (and FCC) a file may carry. Far beyond any real count (a
/// billion commits a second would take 146 years to reach it), it leaves room for
/// `fcc + 1` and the recovery arithmetic never to overflow: a header or page claiming
/// more is damage, reported as such.
pub const MAX_TID: u64 = 1 << 62;

/// The journal mode a file was written by, as its header stores it: the mode's permanent
/// code in the registry. The format only carries it; the pager resolves it to a mode
/// (`JournalMode::from_id`) and refuses a code no mode has.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ModeId(pub u8);

impl std::fmt::Display for ModeId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "journal mode code {}", self.0)
    }
}

/// Decoded header fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    pub page_size: u32,
    /// The mode that wrote the file.
    pub mode: ModeId,
    /// Pages in the database, including page 0.
    pub page_count: u32,
    /// File change counter: id of the last committed write transaction.
    pub fcc: u64,
    /// Pages written by the last committed transaction.
    pub last_txn_size: u32,
    pub freelist_head: Pgno,
    pub freelist_count: u32,
    pub catalog_root: Pgno,
    pub meta: [u32; META_SLOTS],
    /// Whether commits give free pages back to the file system (SQLite's `auto_vacuum`).
    pub auto_vacuum: AutoVacuum,
}

/// When free pages go back to the file system (SQLite's `PRAGMA auto_vacuum`), stored in
/// header byte 25. Files written before it existed hold 0 there, which is `None`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum AutoVacuum {
    /// Free pages stay in the file for reuse; `VACUUM` gives them back.
    #[default]
    None = 0,
    /// Every commit moves the pages at the end of the file into its free pages and cuts
    /// the file to what the data needs.
    Full = 1,
    /// Free pages stay until `WriteTxn::vacuum_free` (`PRAGMA incremental_vacuum`)
    /// gives some back.
    Incremental = 2,
}

impl AutoVacuum {
    /// The header's code for it (SQLite's numbering).
    pub fn code(self) -> u8 {
        self as u8
    }

    /// The setting a header code names, if any.
    pub fn from_code(code: u8) -> Option<AutoVacuum> {
        match code {
            0 => Some(AutoVacuum::None),
            1 => Some(AutoVacuum::Full),
            2 => Some(AutoVacuum::Incremental),
            _ => None,
        }
    }
}

/// Header byte holding [`AutoVacuum`].
const AUTO_VACUUM_OFFSET: usize = 25;

/// Whether `n` is a valid page size.
pub fn valid_page_size(n: u32) -> bool {
    n.is_power_of_two() && (MIN_PAGE_SIZE..=MAX_PAGE_SIZE).contains(&n)
}

impl Header {
    /// Serialize into the first `HEADER_LEN` bytes of `buf`.
    pub fn encode(&self, buf: &mut [u8]) {
        let b = &mut buf[..HEADER_LEN];
        b.fill(0);
        b[0..16].copy_from_slice(MAGIC);
        b[16..20].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        b[20..24].copy_from_slice(&self.page_size.to_le_bytes());
        b[24] = self.mode.0;
        b[AUTO_VACUUM_OFFSET] = self.auto_vacuum.code();
        b[28..32].copy_from_slice(&self.page_count.to_le_bytes());
        b[32..40].copy_from_slice(&self.fcc.to_le_bytes());
        b[40..44].copy_from_slice(&self.last_txn_size.to_le_bytes());
        b[44..48].copy_from_slice(&self.freelist_head.to_le_bytes());
        b[48..52].copy_from_slice(&self.freelist_count.to_le_bytes());
        b[52..56].copy_from_slice(&self.catalog_root.to_le_bytes());
        for (i, m) in self.meta.iter().enumerate() {
            b[56 + 4 * i..60 + 4 * i].copy_from_slice(&m.to_le_bytes());
        }
        let crc = crc32c::crc32c(&b[..CRC_OFFSET]);
        b[CRC_OFFSET..HEADER_LEN].copy_from_slice(&crc.to_le_bytes());
    }

    /// Parse and validate; `Err(reason)` says what is wrong in words.
    pub fn decode(buf: &[u8]) -> Result<Header, String> {
        if buf.len() < HEADER_LEN {
            return Err(format!(
                "file is too short for a header ({} bytes, need {HEADER_LEN})",
                buf.len()
            ));
        }
        let b = &buf[..HEADER_LEN];
        if &b[0..16] != MAGIC {
            if b.iter().all(|&x| x == 0) {
                return Err("header is all zeros".into());
            }
            return Err("bad magic (not an inpage file)".into());
        }
        let u32_at = |o: usize| crate::le::get_u32(b, o);
        let version = u32_at(16);
        if version != FORMAT_VERSION {
            return Err(if version < FORMAT_VERSION {
                format!(
                    "format version {version}, written by an older inpage (this build reads \
                     version {FORMAT_VERSION}, whose page checksums are bound to page numbers); \
                     copy the data out with the build that wrote it"
                )
            } else {
                format!(
                    "format version {version}, written by a newer inpage (this build reads \
                     version {FORMAT_VERSION})"
                )
            });
        }
        let stored = u32_at(CRC_OFFSET);
        if stored != crc32c::crc32c(&b[..CRC_OFFSET]) {
            return Err("header checksum mismatch".into());
        }
        let page_size = u32_at(20);
        if !valid_page_size(page_size) {
            return Err(format!("invalid page size {page_size}"));
        }
        let mode = ModeId(b[24]);
        let auto_vacuum = AutoVacuum::from_code(b[AUTO_VACUUM_OFFSET])
            .ok_or_else(|| format!("unknown auto_vacuum code {}", b[AUTO_VACUUM_OFFSET]))?;
        let page_count = u32_at(28);
        let freelist_head = u32_at(44);
        let freelist_count = u32_at(48);
        let catalog_root = u32_at(52);
        if page_count < 2 {
            return Err(format!("page count {page_count} is below the minimum of 2"));
        }
        if catalog_root == 0 || catalog_root >= page_count {
            return Err(format!(
                "catalog root {catalog_root} outside 1..{page_count}"
            ));
        }
        if freelist_head >= page_count || (freelist_head == 0) != (freelist_count == 0) {
            return Err(format!(
                "free list (head {freelist_head}, count {freelist_count}) inconsistent with {page_count} pages"
            ));
        }
        if freelist_count >= page_count {
            return Err(format!(
                "free-list count {freelist_count} exceeds page count {page_count}"
            ));
        }
        let fcc = crate::le::get_u64(b, 32);
        if fcc > MAX_TID {
            return Err(format!(
                "fcc {fcc} is beyond the largest transaction id {MAX_TID}"
            ));
        }
        let mut meta = [0u32; META_SLOTS];
        for (i, m) in meta.iter_mut().enumerate() {
            *m = u32_at(56 + 4 * i);
        }
        Ok(Header {
            page_size,
            mode,
            page_count,
            fcc,
            last_txn_size: u32_at(40),
            freelist_head,
            freelist_count,
            catalog_root,
            meta,
            auto_vacuum,
        })
    }
}

/// DHL modes keep two header slots in page 0, `[0, 128)` and `[128, 256)`, both inside
/// the first 512-byte sector: a commit writes the new header into the slot that does not
/// hold the committed one, so a torn or unfinished write leaves the committed header
/// intact (the page-0 counterpart of a DHL page's two descriptors).
pub const HEADER_SLOTS: usize = 2;

/// Offset, inside a header slot, of the clean-shutdown mark (DHL): a u64 FCC, 0 for
/// none. `Header::encode` writes 0 there, so every header a commit writes carries no mark.
///
/// A mark `C` in a valid slot, with `C` at least the fcc of every valid slot, says: the
/// database was closed cleanly at FCC `C` and nothing was written since — no version newer
/// than `C` exists and every version up to `C` is committed — so an open may take `C` as
/// the FCC without scanning the file. The journal keeps that true by voiding the mark,
/// durably, before the first page of the next write transaction reaches the file, and the
/// journal clears it from the kept slot of every page-0 image a commit writes.
pub const CLEAN_MARK: usize = 88;

/// Offset, inside a header slot, of the free-space snapshot reference (DHL), 16 bytes:
/// the first chain page (u32), the number of chain pages (u32), the number of free pages
/// plus one (u32; 0 = no snapshot) and the crc32c that binds the chain's content to the
/// FCC of the mark (u32). A clean close writes it together with the mark, and it means
/// something only while that mark is trusted: voiding the mark zeroes it too, and
/// `Header::encode` writes zeros there.
pub const FREE_SNAPSHOT: usize = 96;

/// Where a clean close left the list of free pages (DHL; see `FREE_SNAPSHOT`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FreeSnapshotRef {
    pub head: Pgno,
    pub chain_pages: u32,
    pub count: u32,
    pub crc: u32,
}

/// The clean-shutdown mark of a slot that decoded (0: none).
pub fn clean_mark(page0: &[u8], slot: usize) -> u64 {
    crate::le::get_u64(page0, slot * HEADER_LEN + CLEAN_MARK)
}

/// The free-space snapshot reference of a slot that decoded, if it has one.
pub fn free_snapshot_ref(page0: &[u8], slot: usize) -> Option<FreeSnapshotRef> {
    let at = slot * HEADER_LEN + FREE_SNAPSHOT;
    let u = |o: usize| crate::le::get_u32(page0, at + o);
    let count = u(8).checked_sub(1)?;
    Some(FreeSnapshotRef {
        head: u(0),
        chain_pages: u(4),
        count,
        crc: u(12),
    })
}

/// Set the clean-shutdown mark of `slot` in `page0` and the free-space snapshot that
/// goes with it (`fcc` 0 and `None` void both), and restamp the slot's crc, so the slot
/// stays a valid header with every other byte unchanged.
pub fn set_clean_mark(page0: &mut [u8], slot: usize, fcc: u64, free: Option<FreeSnapshotRef>) {
    let at = slot * HEADER_LEN;
    crate::le::put_u64(page0, at + CLEAN_MARK, fcc);
    let f = at + FREE_SNAPSHOT;
    let (head, chain, count1, crc) = free.map_or((0, 0, 0, 0), |r| {
        (r.head, r.chain_pages, r.count + 1, r.crc)
    });
    crate::le::put_u32(page0, f, head);
    crate::le::put_u32(page0, f + 4, chain);
    crate::le::put_u32(page0, f + 8, count1);
    crate::le::put_u32(page0, f + 12, crc);
    let crc = crc32c::crc32c(&page0[at..at + CRC_OFFSET]);
    crate::le::put_u32(page0, at + CRC_OFFSET, crc);
}

/// Decode header slot `slot` of a DHL page 0.
pub fn decode_slot(page0: &[u8], slot: usize) -> Result<Header, String> {
    let at = slot * HEADER_LEN;
    if page0.len() < at + HEADER_LEN {
        return Err(format!("page too short for header slot {slot}"));
    }
    Header::decode(&page0[at..at + HEADER_LEN])
}

/// The slot a reader at `max_fcc` sees: the valid one with the largest `fcc <= max_fcc`.
pub fn visible_slot(page0: &[u8], max_fcc: u64) -> Option<(usize, Header)> {
    (0..HEADER_SLOTS)
        .filter_map(|slot| decode_slot(page0, slot).ok().map(|h| (slot, h)))
        .filter(|(_, h)| h.fcc <= max_fcc)
        .max_by_key(|(_, h)| h.fcc)
}

/// The committed header of a two-slot page 0 (DHL and IPS files) as a reader at `fcc`
/// sees it: the valid slot with the largest fcc not above it, its fcc set to `fcc` (under
/// counting commit the pages, not the header, carry the newest FCC). Each slot has its
/// own crc; the page trailer is not maintained by recovery and is not read.
pub(crate) fn read_two_slot(page0: &[u8], fcc: u64) -> std::result::Result<Header, String> {
    let (_, mut h) = visible_slot(page0, fcc)
        .ok_or_else(|| format!("no valid header slot at or below FCC {fcc}"))?;
    h.fcc = fcc;
    Ok(h)
}

/// Page 0 of a two-slot file for a commit writing `h`: the slot holding the header
/// visible at the committed FCC stays byte for byte (a torn write of page 0 can then only
/// damage the new slot), the other gets `h`.
pub(crate) fn two_slot_image(committed: &[u8], committed_fcc: u64, h: &Header) -> Vec<u8> {
    let keep = visible_slot(committed, committed_fcc).map(|(slot, _)| slot);
    let slot = match keep {
        Some(0) => 1,
        _ => 0,
    };
    let mut p = committed.to_vec();
    h.encode(&mut p[slot * HEADER_LEN..]);
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Header {
        Header {
            page_size: 4096,
            mode: ModeId(3),
            page_count: 10,
            fcc: 77,
            last_txn_size: 3,
            freelist_head: 4,
            freelist_count: 2,
            catalog_root: 1,
            meta: [1, 2, 3, 4, 5, 6, 7, 8],
            auto_vacuum: AutoVacuum::Incremental,
        }
    }

    #[test]
    fn round_trip() {
        let mut buf = vec![0u8; 4096];
        sample().encode(&mut buf);
        assert_eq!(Header::decode(&buf).unwrap(), sample());
    }

    #[test]
    fn every_flipped_bit_is_rejected() {
        let mut buf = vec![0u8; HEADER_LEN];
        sample().encode(&mut buf);
        for byte in 0..HEADER_LEN {
            for bit in 0..8 {
                let mut b = buf.clone();
                b[byte] ^= 1 << bit;
                assert!(Header::decode(&b).is_err(), "flip at {byte}.{bit} accepted");
            }
        }
    }

    #[test]
    fn rejects_an_fcc_that_would_overflow() {
        let mut buf = vec![0u8; HEADER_LEN];
        for (fcc, ok) in [(MAX_TID, true), (MAX_TID + 1, false), (u64::MAX, false)] {
            Header { fcc, ..sample() }.encode(&mut buf);
            match Header::decode(&buf) {
                Ok(h) => assert!(ok && h.fcc == fcc, "fcc {fcc} accepted"),
                Err(e) => assert!(!ok && e.contains("largest transaction id"), "{e}"),
            }
        }
    }

    #[test]
    fn auto_vacuum_round_trips_and_unknown_codes_are_refused() {
        let mut buf = vec![0u8; HEADER_LEN];
        for av in [AutoVacuum::None, AutoVacuum::Full, AutoVacuum::Incremental] {
            Header {
                auto_vacuum: av,
                ..sample()
            }
            .encode(&mut buf);
            assert_eq!(Header::decode(&buf).unwrap().auto_vacuum, av);
        }
        // A code no setting has, sealed with a valid crc: refused by name.
        buf[AUTO_VACUUM_OFFSET] = 3;
        let crc = crc32c::crc32c(&buf[..CRC_OFFSET]);
        buf[CRC_OFFSET..HEADER_LEN].copy_from_slice(&crc.to_le_bytes());
        assert!(Header::decode(&buf).unwrap_err().contains("auto_vacuum"));
    }

    #[test]
    fn rejects_short_and_zero() {
        assert!(Header::decode(&[]).unwrap_err().contains("too short"));
        assert!(Header::decode(&[0u8; 200]).unwrap_err().contains("zeros"));
        let sqlite: Vec<u8> = b"SQLite format 3\0"
            .iter()
            .copied()
            .cycle()
            .take(200)
            .collect();
        assert!(Header::decode(&sqlite).unwrap_err().contains("magic"));
    }
}
