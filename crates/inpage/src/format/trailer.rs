//! The page trailer: the last [`PAGE_TRAILER`] bytes of every page hold a crc32c of the
//! page's number and the bytes before them.
//!
//! Invariants:
//! - A trailer verifies only at the page number it was stamped for (see [`page_crc`]), so
//!   a page written to the wrong place reads as damage, never as another page's rows.
//! - Layouts use the bytes before the trailer only (`page::PageRead::usable_size`); a
//!   layout that verifies its own versions may leave the trailer unstamped and says so
//!   (`PageLayout::trailer_checked`).

use crate::error::Pgno;

/// Bytes at the end of every page reserved for the pager's crc32c.
pub const PAGE_TRAILER: usize = 4;

/// The trailer checksum of page `pgno`: crc32c over the page number (u32, little-endian)
/// and then the page's bytes before the trailer.
///
/// The page number is part of it so that a page image is valid only where it belongs: a
/// page written to the wrong place, or two pages swapped or copied over each other (a
/// misdirected write, a bug), fail their checksums when read, instead of handing out
/// another page's rows. CRC detects every error confined to 32 consecutive bits, and two
/// page numbers differ only in the first 32 bits of the stream, so the check can never
/// miss such a move.
pub fn page_crc(page: &[u8], pgno: Pgno) -> u32 {
    let seed = crc32c::crc32c(&pgno.to_le_bytes());
    crc32c::crc32c_append(seed, &page[..page.len() - PAGE_TRAILER])
}

/// Stamp the trailer crc of page `pgno` into `page`.
pub fn stamp_crc(page: &mut [u8], pgno: Pgno) {
    let n = page.len();
    let crc = page_crc(page, pgno);
    crate::le::put_u32(page, n - PAGE_TRAILER, crc);
}

/// Whether the trailer crc matches page `pgno`.
pub fn crc_ok(page: &[u8], pgno: Pgno) -> bool {
    let n = page.len();
    let stored = crate::le::get_u32(page, n - PAGE_TRAILER);
    stored == page_crc(page, pgno)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trailer_verifies_only_at_its_own_page_number() {
        let mut page = vec![0u8; 4096];
        for (i, b) in page.iter_mut().enumerate() {
            *b = (i * 31 % 251) as u8;
        }
        for pgno in [0, 1, 2, 3, 255, 256, 65_537, u32::MAX] {
            let mut p = page.clone();
            stamp_crc(&mut p, pgno);
            assert!(crc_ok(&p, pgno));
            for other in [0, 1, 2, 3, 255, 256, 65_537, u32::MAX] {
                assert_eq!(crc_ok(&p, other), other == pgno, "{pgno} read as {other}");
            }
        }
    }
}
