//! IPS overflow pages.
//!
//! Recovery trusts whatever parses as a descriptor head, so no page of an IPS file carries
//! user bytes in its first 64 bytes. An overflow page has a descriptor in slot 0 and its
//! data after both slots:
//!
//! ```text
//! slot 0:  tid u64 | txn_size u32 | len u16 (the tree's nslots field) | 6 zero bytes |
//!          type OVERFLOW u8 (at 20, as a tree descriptor's) | flags 0 | 2 zero bytes |
//!          next u32 (the tree's right field) | crc u32
//! slot 1:  zero (INV)
//! 64..64+len   data; the rest of the page is zero
//! ```
//!
//! The crc is xxh3 (folded, as for tree versions) over descriptor bytes 0..28 and the
//! data. Overflow pages are written once, by the transaction that allocated them, and
//! never changed (a changed value gets a new chain), so one version is all they need; a
//! torn write shows it whole or fails its crc, and recovery counts it in `txn_size`.

use super::*;
use crate::le::{put_u16, put_u64};

/// Value bytes one IPS overflow page carries.
pub fn overflow_data(usable: usize) -> usize {
    usable.saturating_sub(VERSION_HEADS)
}

/// One decoded overflow page.
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
    h.update(&buf[VERSION_HEADS..VERSION_HEADS + len]);
    fold(h.digest())
}

/// Image of an overflow page of transaction `tid` (txn_size 0 until commit) holding
/// `data`. Errors: `InvalidArgument` for a bad geometry, tid 0 or too much data.
pub fn overflow_page(
    page_size: usize,
    usable: usize,
    tid: u64,
    next: Pgno,
    data: &[u8],
) -> Result<Vec<u8>> {
    if !geometry_ok(usable, page_size) || tid == 0 || data.len() > overflow_data(usable) {
        return Err(Error::InvalidArgument(format!(
            "IPS overflow page: page size {page_size}, usable {usable}, tid {tid}, {} data bytes",
            data.len()
        )));
    }
    let mut out = vec![0u8; page_size];
    put_u64(&mut out, D_TID, tid);
    put_u16(&mut out, D_NSLOTS, data.len());
    out[D_TYPE] = page_type::OVERFLOW;
    put_u32(&mut out, D_RIGHT, next);
    out[VERSION_HEADS..VERSION_HEADS + data.len()].copy_from_slice(data);
    let crc = overflow_crc(&out, data.len());
    put_u32(&mut out, D_CRC, crc);
    Ok(out)
}

/// Decode and verify an overflow page. Errors: `Corrupt` if slot 0 is not a valid
/// overflow descriptor (INV, another type, a length past the page, a bad crc).
pub fn open_overflow(pgno: Pgno, buf: &[u8], usable: usize) -> Result<Overflow<'_>> {
    let bad = |why: String| Err(Error::corrupt(pgno, why));
    if !geometry_ok(usable, buf.len()) {
        return bad(format!(
            "page buffer of {} bytes cannot hold an IPS page of usable size {usable}",
            buf.len()
        ));
    }
    let tid = get_u64(buf, D_TID);
    let t = buf[D_TYPE];
    if tid == 0 || t != page_type::OVERFLOW {
        return bad(format!(
            "expected an IPS overflow page, found tid {tid}, type {t} ({})",
            page_type::name(t)
        ));
    }
    let len = get_u16(buf, D_NSLOTS);
    if len > overflow_data(usable) {
        return bad(format!(
            "overflow page claims {len} data bytes, more than the {} it holds",
            overflow_data(usable)
        ));
    }
    if overflow_crc(buf, len) != get_u32(buf, D_CRC) {
        return bad(format!("overflow page (tid {tid}) fails its crc"));
    }
    Ok(Overflow {
        tid,
        txn_size: get_u32(buf, D_TXN_SIZE),
        next: get_u32(buf, D_RIGHT),
        data: &buf[VERSION_HEADS..VERSION_HEADS + len],
    })
}
