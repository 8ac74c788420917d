//! A byte-occupancy bitmap over one page: which bytes the version being validated (or
//! placed) references. Shared by the layouts that validate versions cell by cell (DHL,
//! IPS): marking reports overlaps, which a valid version never has, and the unmarked runs
//! are where a new version may go.
//!
//! Invariant: `clear` sizes the map for the page before any `mark`; every range asked
//! about lies inside it (callers bounds-check offsets first), so nothing here can panic on
//! page bytes.

/// One bit per page byte.
#[derive(Default, Clone)]
pub(crate) struct Occupancy {
    words: Vec<u64>,
}

impl Occupancy {
    /// Clear the map for a page of `usable` bytes.
    pub(crate) fn clear(&mut self, usable: usize) {
        self.words.clear();
        self.words.resize(usable.div_ceil(64), 0);
    }

    /// Mark bytes `[s, e)` (non-empty, `e <= usable`); false if one of them already was.
    pub(crate) fn mark(&mut self, s: usize, e: usize) -> bool {
        let lo = !0u64 << (s % 64);
        let hi = !0u64 >> (63 - (e - 1) % 64);
        let words = &mut self.words[s / 64..=(e - 1) / 64];
        let clash = match words {
            [w] => {
                let clash = *w & lo & hi;
                *w |= lo & hi;
                clash
            }
            [first, middle @ .., last] => {
                let mut clash = (*first & lo) | (*last & hi);
                *first |= lo;
                *last |= hi;
                for w in middle {
                    clash |= *w;
                    *w = !0;
                }
                clash
            }
            [] => 0,
        };
        clash == 0
    }

    /// Whether byte `at` (inside the map) is marked.
    pub(crate) fn marked(&self, at: usize) -> bool {
        self.words[at / 64] >> (at % 64) & 1 == 1
    }

    /// First byte in `[from, end)` whose mark is `set`, or `end`.
    fn next(&self, from: usize, end: usize, set: bool) -> usize {
        let word = |w: usize| if set { self.words[w] } else { !self.words[w] };
        let mut w = from / 64;
        let mut bits = word(w) & (!0u64 << (from % 64));
        loop {
            if bits != 0 {
                return (w * 64 + bits.trailing_zeros() as usize).min(end);
            }
            w += 1;
            if w * 64 >= end {
                return end;
            }
            bits = word(w);
        }
    }

    /// Maximal runs of unmarked bytes in `[start, end)`, in address order.
    pub(crate) fn holes(&self, start: usize, end: usize) -> Vec<(usize, usize)> {
        let mut holes = Vec::new();
        let mut at = start;
        while at < end {
            let s = self.next(at, end, false);
            if s == end {
                break;
            }
            at = self.next(s, end, true);
            holes.push((s, at));
        }
        holes
    }
}
