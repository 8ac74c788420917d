//! DHL overflow pages.
//!
//! Recovery trusts whatever parses as a descriptor, so in a DHL file no page may carry user
//! bytes in its first `RECORD_START` bytes (docs/DHL-DESIGN.md, "Every page starts with
//! descriptors"). An overflow page therefore has a descriptor in slot 0 and its data after
//! both slots:
//!
//! ```text
//! slot 0:  tid u64 | txn_size u32 | len u16 (the tree's ncells field) | type OVERFLOW u8 |
//!          flags u8 | next u32 (the tree's right field) | 6 zero bytes | checksum u32
//! slot 1:  zero (INV)
//! 64..64+len   data; the rest of the page is zero
//! ```
//!
//! The checksum is xxh3 (as for tree versions) over descriptor bytes 0..28 and the data.
//! Overflow pages are written once, by the transaction that allocated them, and never
//! changed (a changed value gets a new chain), so one version is all they need.

use super::*;

/// Value bytes one DHL overflow page carries.
pub fn overflow_data(usable: usize) -> usize {
    usable.saturating_sub(RECORD_START)
}

/// One decoded DHL overflow page.
#[derive(Clone, Copy, Debug)]
pub struct Overflow<'a> {
    pub tid: u64,
    pub txn_size: u32,
    /// Next page of the chain; 0 ends it.
    pub next: Pgno,
    pub data: &'a [u8],
}

pub(super) fn overflow_crc(buf: &[u8], len: usize) -> u32 {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    h.update(&buf[..D_CRC]);
    h.update(&buf[RECORD_START..RECORD_START + len]);
    let x = h.digest();
    (x ^ (x >> 32)) as u32
}

/// Image of an overflow page written by transaction `tid` (txn_size 0, for [`restamp`] to
/// set at commit) holding `data`.
/// Errors: `InvalidArgument` for a bad geometry, tid 0 or more data than a page carries.
pub fn overflow_page(
    page_size: usize,
    usable: usize,
    tid: u64,
    next: Pgno,
    data: &[u8],
) -> Result<Vec<u8>> {
    if !geometry_ok(usable, page_size) || tid == 0 || data.len() > overflow_data(usable) {
        return Err(Error::InvalidArgument(format!(
            "DHL overflow page: page size {page_size}, usable {usable}, tid {tid}, {} data bytes",
            data.len()
        )));
    }
    let mut out = vec![0u8; page_size];
    put_u64(&mut out, D_TID, tid);
    put_u16(&mut out, D_NCELLS, data.len());
    out[D_TYPE] = page_type::OVERFLOW;
    put_u32(&mut out, D_RIGHT, next);
    out[RECORD_START..RECORD_START + data.len()].copy_from_slice(data);
    let crc = overflow_crc(&out, data.len());
    put_u32(&mut out, D_CRC, crc);
    Ok(out)
}

/// Decode and verify an overflow page. Errors: `Corrupt` if slot 0 is not a valid
/// overflow descriptor (INV, another type, a length past the page, a bad checksum).
pub fn open_overflow(pgno: Pgno, buf: &[u8], usable: usize) -> Result<Overflow<'_>> {
    let bad = |why: String| Err(Error::corrupt(pgno, why));
    if !geometry_ok(usable, buf.len()) {
        return bad(format!(
            "page buffer of {} bytes cannot hold a DHL page of usable size {usable}",
            buf.len()
        ));
    }
    let tid = get_u64(buf, D_TID);
    let t = buf[D_TYPE];
    if tid == 0 || t != page_type::OVERFLOW {
        return bad(format!(
            "expected a DHL overflow page, found tid {tid}, type {t} ({})",
            page_type::name(t)
        ));
    }
    let len = get_u16(buf, D_NCELLS);
    if len > overflow_data(usable) {
        return bad(format!(
            "overflow page claims {len} data bytes, more than the {} it holds",
            overflow_data(usable)
        ));
    }
    if overflow_crc(buf, len) != get_u32(buf, D_CRC) {
        return bad(format!("overflow page (tid {tid}) fails its checksum"));
    }
    Ok(Overflow {
        tid,
        txn_size: get_u32(buf, D_TXN_SIZE),
        next: get_u32(buf, D_RIGHT),
        data: &buf[RECORD_START..RECORD_START + len],
    })
}
