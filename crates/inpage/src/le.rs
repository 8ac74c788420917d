//! Little-endian field access for the on-disk formats (pages, headers, journals), once.
//!
//! Invariant: every caller has bounds-checked `at` against the buffer before it reads
//! (page offsets are validated against the usable size, journal records against their
//! length), so an out-of-range `at` is a bug in the caller and panics on the slice index,
//! exactly as the open-coded reads these replace did; bytes from disk never reach these
//! functions unchecked. Writes of a u16 field take a `usize` because every u16 field is an
//! offset or a count computed in `usize`; that it fits is checked in debug builds, and the
//! layouts bound their offsets by a usable size of at most 65 535 bytes.

/// The u16 at `b[at..at + 2]`, widened: every u16 field is an offset or a count.
#[inline]
pub(crate) fn get_u16(b: &[u8], at: usize) -> usize {
    u16::from_le_bytes([b[at], b[at + 1]]) as usize
}

/// The u32 at `b[at..at + 4]`.
#[inline]
pub(crate) fn get_u32(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}

/// The u64 at `b[at..at + 8]`.
pub(crate) fn get_u64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

/// Store `v` (at most `u16::MAX`) as the u16 at `b[at..at + 2]`.
pub(crate) fn put_u16(b: &mut [u8], at: usize, v: usize) {
    debug_assert!(v <= u16::MAX as usize, "u16 field value {v}");
    b[at..at + 2].copy_from_slice(&(v as u16).to_le_bytes());
}

/// Store `v` as the u32 at `b[at..at + 4]`.
pub(crate) fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

/// Store `v` as the u64 at `b[at..at + 8]`.
pub(crate) fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip_little_endian_at_any_offset() {
        let mut b = [0u8; 16];
        put_u16(&mut b, 1, 0xBEEF);
        put_u32(&mut b, 3, 0x0102_0304);
        put_u64(&mut b, 7, 0x1122_3344_5566_7788);
        assert_eq!(b[1..3], [0xEF, 0xBE]);
        assert_eq!(b[3..7], [4, 3, 2, 1]);
        assert_eq!(b[7..15], [0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11]);
        assert_eq!(get_u16(&b, 1), 0xBEEF);
        assert_eq!(get_u32(&b, 3), 0x0102_0304);
        assert_eq!(get_u64(&b, 7), 0x1122_3344_5566_7788);
        assert_eq!((b[0], b[15]), (0, 0));
    }
}
