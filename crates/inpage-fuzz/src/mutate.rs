//! Mutations of a file set: bit flips, byte sets, interesting integers in header fields,
//! truncation, extension, page splices and swaps, zeroed sectors, dropped or foreign side
//! files.
//!
//! Invariants:
//! - A mutation is plain data with every parameter fixed when it is drawn, so applying
//!   a list is deterministic and any sub-list can be re-applied: that is what shrinking
//!   does (it drops mutations one by one and replays the rest).
//! - Applying never panics and never grows a file past [`MAX_LEN`]: offsets past the end
//!   of a (by then shorter) file are clamped or the mutation is skipped.
//! - Offsets are biased to where decoders look: the header page's first bytes, the start
//!   of each page (page header, slot headers), side-file headers and frame headers.

use crate::corpus::{Base, Files, Target};
use crate::rng::Rng;

/// Largest file a mutation produces (keeps a run's memory small).
pub const MAX_LEN: usize = 1 << 20;

/// One mutation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mutation {
    FlipBit {
        t: Target,
        off: usize,
        bit: u8,
    },
    SetByte {
        t: Target,
        off: usize,
        val: u8,
    },
    /// Write an integer of `width` bytes (1, 2, 4 or 8), little- or big-endian.
    SetInt {
        t: Target,
        off: usize,
        width: u8,
        val: u64,
        be: bool,
    },
    Truncate {
        t: Target,
        len: usize,
    },
    /// Append `len` bytes: zeros, or a pattern from `fill_seed`.
    Extend {
        t: Target,
        len: usize,
        fill_seed: Option<u64>,
    },
    /// Copy `len` bytes from another corpus file over this one at `dst`.
    Splice {
        t: Target,
        dst: usize,
        base: usize,
        src_t: Target,
        src: usize,
        len: usize,
    },
    /// Swap two equal-sized ranges (pages) of the same file.
    Swap {
        t: Target,
        a: usize,
        b: usize,
        len: usize,
    },
    /// Copy a range of the same file over another (a stale page where a new one belongs).
    CopyWithin {
        t: Target,
        src: usize,
        dst: usize,
        len: usize,
    },
    Zero {
        t: Target,
        off: usize,
        len: usize,
    },
    Remove {
        t: Target,
    },
    /// Replace a whole file with the same file of another corpus entry (a side file
    /// from another session, another mode or another page size).
    Replace {
        t: Target,
        base: usize,
        src_t: Target,
    },
}

const INTERESTING: [u64; 16] = [
    0,
    1,
    2,
    0x7F,
    0x80,
    0xFF,
    0x100,
    0x7FFF,
    0xFFFF,
    0x1_0000,
    0x7FFF_FFFF,
    0xFFFF_FFFF,
    0x1_0000_0000,
    0x7FFF_FFFF_FFFF_FFFF,
    u64::MAX,
    u64::MAX - 1,
];

/// An offset into a file of `len` bytes, biased to the places decoders read first.
fn pick_offset(r: &mut Rng, len: usize, page_size: usize) -> usize {
    if len == 0 {
        return 0;
    }
    let off = match r.below(10) {
        // File header / first page header.
        0..=2 => r.index(len.min(160)),
        // Near the start of some page (page header, DHL slot headers).
        3..=5 => {
            let pages = len.div_ceil(page_size).max(1);
            r.index(pages) * page_size + r.index(96)
        }
        // Near the end of some page (trailers, checksums).
        6 => {
            let pages = len.div_ceil(page_size).max(1);
            (r.index(pages) + 1) * page_size - 1 - r.index(16).min(page_size - 1)
        }
        // Frame / record headers of side files: just past a page-sized stride.
        7 => {
            let strides = (len / (page_size + 24)).max(1);
            r.index(strides + 1) * (page_size + 24) + r.index(48)
        }
        _ => r.index(len),
    };
    off.min(len - 1)
}

fn pick_len(r: &mut Rng, page_size: usize) -> usize {
    match r.below(4) {
        0 => 1 + r.index(16),
        1 => 512,
        2 => page_size,
        _ => 1 + r.index(page_size * 2),
    }
}

fn pick_target(r: &mut Rng, files: &Files) -> Target {
    let present: Vec<Target> = Target::ALL
        .into_iter()
        .filter(|t| files.get(*t).is_some())
        .collect();
    // Mostly the database; side files whenever there are some.
    if present.len() > 1 && r.pct(45) {
        present[1 + r.index(present.len() - 1)]
    } else if present.is_empty() {
        Target::Db
    } else {
        present[0]
    }
}

/// Draw one mutation for `files` (the current, already mutated state).
pub fn draw(r: &mut Rng, files: &Files, page_size: u32, corpus: &[Base]) -> Mutation {
    let ps = page_size as usize;
    let t = pick_target(r, files);
    let len = files.get(t).map_or(0, Vec::len);
    match r.below(100) {
        0..=19 => Mutation::FlipBit {
            t,
            off: pick_offset(r, len, ps),
            bit: r.below(8) as u8,
        },
        20..=29 => Mutation::SetByte {
            t,
            off: pick_offset(r, len, ps),
            val: r.next_u64() as u8,
        },
        30..=49 => {
            let width = [1u8, 2, 4, 8][r.index(4)];
            let val = if r.pct(80) {
                INTERESTING[r.index(INTERESTING.len())]
            } else {
                // Plausible sizes and page numbers.
                [ps as u64, (len / ps.max(1)) as u64, r.below(64)][r.index(3)]
            };
            Mutation::SetInt {
                t,
                off: pick_offset(r, len, ps),
                width,
                val,
                be: r.pct(70),
            }
        }
        50..=57 => {
            let new_len = match r.below(4) {
                0 => 0,
                1 => (len / ps.max(1)).saturating_sub(r.index(3)) * ps,
                2 => r.index(len.max(1)),
                _ => (r.index(len / 512 + 1)) * 512,
            };
            Mutation::Truncate { t, len: new_len }
        }
        58..=62 => Mutation::Extend {
            t,
            len: pick_len(r, ps),
            fill_seed: r.pct(50).then(|| r.next_u64()),
        },
        63..=72 => {
            let base = r.index(corpus.len());
            let src_files = &corpus[base].files;
            let src_t = if r.pct(70) {
                t
            } else {
                Target::DRAWN[r.index(3)]
            };
            let src_len = src_files.get(src_t).map_or(0, Vec::len);
            let splice_len = if r.pct(60) { ps } else { pick_len(r, ps) };
            let aligned = r.pct(70);
            let src = if aligned {
                r.index(src_len / ps + 1) * ps
            } else {
                r.index(src_len.max(1))
            };
            let dst = if aligned {
                r.index(len / ps + 1) * ps
            } else {
                r.index(len.max(1))
            };
            Mutation::Splice {
                t,
                dst,
                base,
                src_t,
                src,
                len: splice_len,
            }
        }
        73..=79 => {
            let pages = len / ps.max(1);
            Mutation::Swap {
                t,
                a: r.index(pages.max(1)) * ps,
                b: r.index(pages.max(1)) * ps,
                len: ps,
            }
        }
        80..=84 => {
            let pages = len / ps.max(1);
            Mutation::CopyWithin {
                t,
                src: r.index(pages.max(1)) * ps,
                dst: r.index(pages.max(1)) * ps,
                len: ps,
            }
        }
        85..=91 => {
            let sectors = len / 512;
            Mutation::Zero {
                t,
                off: r.index(sectors.max(1)) * 512,
                len: 512 * (1 + r.index(2)),
            }
        }
        92..=95 => Mutation::Remove {
            t: Target::DRAWN[r.index(3)],
        },
        _ => Mutation::Replace {
            t: Target::DRAWN[r.index(3)],
            base: r.index(corpus.len()),
            src_t: Target::DRAWN[r.index(3)],
        },
    }
}

fn fill(len: usize, seed: Option<u64>) -> Vec<u8> {
    match seed {
        None => vec![0; len],
        Some(s) => {
            let mut r = Rng::new(s);
            (0..len).map(|_| r.next_u64() as u8).collect()
        }
    }
}

/// Apply one mutation in place.
pub fn apply(files: &mut Files, m: &Mutation, corpus: &[Base]) {
    match m {
        Mutation::FlipBit { t, off, bit } => {
            if let Some(b) = files.slot(*t).as_mut().and_then(|f| f.get_mut(*off)) {
                *b ^= 1 << (bit & 7);
            }
        }
        Mutation::SetByte { t, off, val } => {
            if let Some(b) = files.slot(*t).as_mut().and_then(|f| f.get_mut(*off)) {
                *b = *val;
            }
        }
        Mutation::SetInt {
            t,
            off,
            width,
            val,
            be,
        } => {
            if let Some(f) = files.slot(*t).as_mut() {
                let w = (*width as usize).clamp(1, 8);
                let bytes = if *be {
                    val.to_be_bytes()[8 - w..].to_vec()
                } else {
                    val.to_le_bytes()[..w].to_vec()
                };
                let end = (*off + w).min(f.len());
                if *off < end {
                    f[*off..end].copy_from_slice(&bytes[..end - *off]);
                }
            }
        }
        Mutation::Truncate { t, len } => {
            if let Some(f) = files.slot(*t).as_mut() {
                f.truncate(*len);
            }
        }
        Mutation::Extend { t, len, fill_seed } => {
            let f = files.slot(*t).get_or_insert_with(Vec::new);
            let add = (*len).min(MAX_LEN.saturating_sub(f.len()));
            f.extend_from_slice(&fill(add, *fill_seed));
        }
        Mutation::Splice {
            t,
            dst,
            base,
            src_t,
            src,
            len,
        } => {
            let Some(src_file) = corpus.get(*base).and_then(|b| b.files.get(*src_t)) else {
                return;
            };
            if *src >= src_file.len() {
                return;
            }
            let n = (*len).min(src_file.len() - *src);
            let chunk = src_file[*src..*src + n].to_vec();
            if let Some(f) = files.slot(*t).as_mut() {
                let end = (*dst + n).min(MAX_LEN);
                if *dst >= end {
                    return;
                }
                if f.len() < end {
                    f.resize(end, 0);
                }
                f[*dst..end].copy_from_slice(&chunk[..end - *dst]);
            }
        }
        Mutation::Swap { t, a, b, len } => {
            if let Some(f) = files.slot(*t).as_mut() {
                let (lo, hi) = if a <= b { (*a, *b) } else { (*b, *a) };
                if lo == hi || hi + len > f.len() || lo + len > hi {
                    return;
                }
                let (x, y) = f.split_at_mut(hi);
                x[lo..lo + len].swap_with_slice(&mut y[..*len]);
            }
        }
        Mutation::CopyWithin { t, src, dst, len } => {
            if let Some(f) = files.slot(*t).as_mut() {
                if *src + len <= f.len() && *dst + len <= f.len() {
                    f.copy_within(*src..*src + len, *dst);
                }
            }
        }
        Mutation::Zero { t, off, len } => {
            if let Some(f) = files.slot(*t).as_mut() {
                let end = (*off + len).min(f.len());
                if *off < end {
                    f[*off..end].fill(0);
                }
            }
        }
        Mutation::Remove { t } => {
            *files.slot(*t) = None;
        }
        Mutation::Replace { t, base, src_t } => {
            let src = corpus.get(*base).and_then(|b| b.files.get(*src_t)).cloned();
            *files.slot(*t) = src;
        }
    }
}

/// Apply a list of mutations to a copy of `base`.
pub fn apply_all(base: &Files, muts: &[Mutation], corpus: &[Base]) -> Files {
    let mut f = base.clone();
    for m in muts {
        apply(&mut f, m, corpus);
    }
    f
}
