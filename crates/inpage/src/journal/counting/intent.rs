//! The write-intent map of a DHL file: which regions of pages may hold versions newer
//! than a committed transaction, so crash recovery scans those regions instead of the
//! whole file (the md RAID write-intent bitmap, for versions instead of stripes).
//!
//! Each header slot `s` of page 0 owns an intent area of `AREA` bytes in sector 0, at
//! `AREA_AT + s·AREA`: `base` (u64, a committed tid), the region size as a shift (u8), a
//! sorted list of up to `ENTRIES` marked regions (u32 each; region `r` = pages
//! `[r << shift, (r + 1) << shift)`) and a crc32c of the area bound to the slot. A list
//! rather than a bitmap keeps regions small (4 pages by default) at any file size; a
//! transaction touching more regions than the list holds coarsens the shift until they
//! fit (a larger scan, never a missed version). The claim an area makes:
//!
//! > every version with a tid above `base` lies in a marked region.
//!
//! Why the newest valid slot's claim always holds (recovery trusts only that one):
//! - A commit first makes sure its pages' regions are marked in the area of the slot
//!   visible at the FCC — rewriting that area in place inside sector 0 and syncing —
//!   before it writes any page. Sector 0 is written whole, so the area and its crc are
//!   either old or new. The old claim stays true until that write (no version above
//!   `base` is written before it); the new one is true from then on.
//! - A commit that writes page 0 puts into its new slot `base = tid − 1` and the regions
//!   of its own pages: only this transaction writes versions above `tid − 1`. The journal
//!   also rewrites the kept slot's area with what is durable on disk (the pager's cached
//!   page 0 may hold an older area), so neither claim regresses.
//! - Recovery rolls back at most the newest transaction, zeroing its slot; the remaining
//!   slot's area covers that transaction's regions (they were marked in it before its
//!   pages were written), so its claim still holds.
//! - An area that fails its crc (a file written before areas existed, or damage) claims
//!   nothing: recovery scans the whole file.
//! - An *ordered* area (flag byte `ORDERED_AT`) adds a second claim: transaction
//!   `base + 1` commits in order, its header slot in page 0 written only after its other
//!   pages are synced. The marking write that sets it is synced before any page of that
//!   transaction, and the ordered commit gives its own new slot `base = tid` (no version
//!   lies above it once that slot is on disk). So while an ordered area belongs to the
//!   newest valid slot, no header slot carries `base + 1`, and that transaction did not
//!   commit: recovery rolls it back from page 0 alone, and the versions it left lie in
//!   the marked regions. (A build that predates the flag sees a nonzero reserved byte,
//!   takes the area as claiming nothing and scans the whole file: still correct, since
//!   the ordered commit is also a complete counting commit.)
//!
//! Cost: a flush when a commit touches a region not yet marked. Marks accumulate (no write
//! while a working set stays inside marked regions) up to `CAP` regions, coarsening once
//! (`MAX_DOUBLINGS`) or as far as the regions stay within the scan budget
//! (`Config::intent_scan_mib`, default `SCAN_BUDGET_BYTES`); past that — or when the area
//! marks more than `CAP` regions, as after a large transaction's header write — the next
//! commit resets the area to `base = tid − 1` and just its own regions, so recovery never
//! scans more than `CAP` fine regions, the scan budget, or the regions of the transaction
//! in flight.

use crate::error::Pgno;
use crate::le::{get_u32, get_u64, put_u32, put_u64};

/// Where slot 0's area starts (after both 128-byte header slots).
pub(super) const AREA_AT: usize = 256;
/// Bytes of one area; both fit below byte 508 (the trailer of a 512-byte page 0).
pub(super) const AREA: usize = 124;
const COUNT_AT: usize = 9;
/// The ordered flag (0 or 1); the byte after it is reserved (zero).
const ORDERED_AT: usize = 10;
const LIST_AT: usize = 12;
const CRC_AT: usize = AREA - 4;
/// Regions one area can list.
pub(super) const ENTRIES: usize = (CRC_AT - LIST_AT) / 4;
/// The smallest region by default: 4 pages (`Config::intent_region_pages`). Measured
/// against 16 (`docs/DHL-DESIGN.md`): crash recovery at 1,000,000 records reads 85 KiB
/// instead of 229, for 0.9 % more flushes on a growing table.
pub(super) const DEFAULT_MIN_SHIFT: u8 = 2;
/// Marked regions kept before a marking write resets the area.
pub(super) const CAP: usize = 24;
/// How far marks accumulating past `CAP` may coarsen the region size before the area is
/// reset: once. A working set of up to `2·CAP` fine regions that lie in pairs — all of a
/// small hot database — then stays marked, so its random updates stop paying a marking
/// flush each time they leave the `CAP` regions last marked; recovery still reads at most
/// `CAP` regions, each at most twice as large. A scattered working set does not merge
/// when coarsened and resets as before. Measured (`BENCHMARKS.md`, "IPS"): marking
/// writes of 3,000 one-row updates of a 3,000-row table, `ips` 440 → see there.
pub(super) const MAX_DOUBLINGS: u8 = 1;
/// An area however coarse is kept while its marked regions span at most this many
/// bytes (the default of `Config::intent_scan_mib`): recovery after a crash then reads
/// at most that much, and a working set inside it — every page of a database this small,
/// or the hot part of a larger one — stops paying a marking flush. Without it,
/// transactions of many scattered pages reset the area on nearly every commit.
/// 4 MiB (what SQLite's WAL recovery reads at its default checkpoint) halved the flushes
/// of 16-row updates; 16 MiB took the synthetic app traces' commits (three to nine
/// scattered pages over a 10 MiB file) from 1.90 to 1.04 flushes, for a crash recovery
/// that reads up to 16 MiB instead of 4 when the marks span that much (`BENCHMARKS.md`,
/// "App-like traces"; `docs/DHL-DESIGN.md`).
pub(super) const SCAN_BUDGET_BYTES: u64 = 16 << 20;

// Both areas lie in sector 0, below the trailer of a 512-byte page 0.
const _: () = assert!(AREA_AT + 2 * AREA <= 512 - 4);

/// One slot's intent area, decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Intent {
    /// Every version above this tid lies in a marked region.
    pub base: u64,
    pub shift: u8,
    /// Transaction `base + 1` commits in order (module notes).
    pub ordered: bool,
    /// Marked regions, sorted, without duplicates, at most `ENTRIES`.
    regions: Vec<u32>,
}

impl Intent {
    /// An area that claims `base` and marks no region, regions of `1 << shift` pages.
    pub fn empty(base: u64, shift: u8) -> Intent {
        Intent {
            base,
            shift,
            ordered: false,
            regions: Vec::new(),
        }
    }

    fn region(&self, pgno: Pgno) -> u32 {
        pgno >> self.shift
    }

    pub fn marked(&self) -> usize {
        self.regions.len()
    }

    /// Whether every page of `pgnos` lies in a marked region.
    pub fn covers(&self, pgnos: impl IntoIterator<Item = Pgno>) -> bool {
        pgnos
            .into_iter()
            .all(|p| self.regions.binary_search(&self.region(p)).is_ok())
    }

    /// This area plus the regions of `pgnos`. If they do not fit in the list, regions are
    /// doubled (the shift grows, each new region covering two old ones) until they do.
    pub fn with(&self, pgnos: impl IntoIterator<Item = Pgno>) -> Intent {
        let pages: Vec<Pgno> = pgnos.into_iter().collect();
        let mut n = self.clone();
        n.regions.extend(pages.iter().map(|&p| p >> n.shift));
        n.regions.sort_unstable();
        n.regions.dedup();
        n.fit(ENTRIES)
    }

    /// This area with regions doubled until at most `cap` are marked. Coarsening only
    /// widens what is marked, so the claim stays true.
    pub fn fit(mut self, cap: usize) -> Intent {
        while self.regions.len() > cap && self.shift < 31 {
            self.shift += 1;
            for r in &mut self.regions {
                *r >>= 1;
            }
            self.regions.dedup();
        }
        self
    }

    /// Page ranges `[start, end)` of the marked regions, clipped to `1..pages`.
    pub fn ranges(&self, pages: u64) -> Vec<(u64, u64)> {
        self.regions
            .iter()
            .map(|&r| (u64::from(r) << self.shift, (u64::from(r) + 1) << self.shift))
            .map(|(s, e)| (s.max(1), e.min(pages)))
            .filter(|(s, e)| s < e)
            .collect()
    }

    /// The area of `slot` in `page0`, or None if it fails its checks (claims nothing).
    pub fn decode(page0: &[u8], slot: usize) -> Option<Intent> {
        let a = &page0[AREA_AT + slot * AREA..AREA_AT + (slot + 1) * AREA];
        if get_u32(a, CRC_AT) != area_crc(a, slot) {
            return None;
        }
        let (shift, count) = (a[8], a[COUNT_AT] as usize);
        if shift > 31 || count > ENTRIES || a[ORDERED_AT] > 1 || a[ORDERED_AT + 1] != 0 {
            return None;
        }
        let regions: Vec<u32> = (0..count).map(|i| get_u32(a, LIST_AT + 4 * i)).collect();
        if regions.windows(2).any(|w| w[0] >= w[1]) {
            return None;
        }
        Some(Intent {
            base: get_u64(a, 0),
            shift,
            ordered: a[ORDERED_AT] == 1,
            regions,
        })
    }

    /// Write this area into `slot` of `page0`.
    pub fn encode(&self, page0: &mut [u8], slot: usize) {
        debug_assert!(self.regions.len() <= ENTRIES);
        let a = &mut page0[AREA_AT + slot * AREA..AREA_AT + (slot + 1) * AREA];
        a.fill(0);
        put_u64(a, 0, self.base);
        a[8] = self.shift;
        a[COUNT_AT] = self.regions.len() as u8;
        a[ORDERED_AT] = u8::from(self.ordered);
        for (i, &r) in self.regions.iter().enumerate() {
            put_u32(a, LIST_AT + 4 * i, r);
        }
        let crc = area_crc(a, slot);
        put_u32(a, CRC_AT, crc);
    }
}

/// crc32c of an area, bound to its slot (an area copied to the other slot is invalid).
fn area_crc(a: &[u8], slot: usize) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&[slot as u8]), &a[..CRC_AT])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_damage() {
        let mut p = vec![0u8; 512];
        assert_eq!(Intent::decode(&p, 0), None, "zeros claim nothing");
        let i = Intent::empty(41, DEFAULT_MIN_SHIFT).with([1, 17, 9_000_000]);
        assert!(i.covers([1, 2, 17, 9_000_001]) && !i.covers([40 << i.shift]));
        i.encode(&mut p, 1);
        assert_eq!(Intent::decode(&p, 1), Some(i.clone()));
        assert_eq!(Intent::decode(&p, 0), None);
        let o = Intent {
            ordered: true,
            ..i.clone()
        };
        let mut q = p.clone();
        o.encode(&mut q, 1);
        assert_eq!(Intent::decode(&q, 1), Some(o));
        assert_ne!(q, p, "the flag is stored");
        for byte in AREA_AT + AREA..AREA_AT + 2 * AREA {
            let mut q = p.clone();
            q[byte] ^= 0x10;
            assert_ne!(Intent::decode(&q, 1), Some(i.clone()), "flip at {byte}");
        }
    }

    #[test]
    fn too_many_regions_coarsen_and_still_cover() {
        let pages: Vec<Pgno> = (0..200).map(|k| k * 1000).collect();
        let i = Intent::empty(0, DEFAULT_MIN_SHIFT).with(pages.iter().copied());
        assert!(i.marked() <= ENTRIES && i.shift > DEFAULT_MIN_SHIFT);
        assert!(i.covers(pages.iter().copied()));
        let j = Intent::empty(0, 4).with([0, 99]);
        // A compact set of more than CAP regions (pages 0..4·(CAP + 2)) fits CAP after
        // one doubling; a scattered one needs more (and the journal then resets the area).
        let n = CAP as u32 + 2;
        let compact = Intent::empty(0, DEFAULT_MIN_SHIFT).with((0..4 * n).step_by(4));
        assert_eq!(
            (compact.marked(), compact.shift),
            (n as usize, DEFAULT_MIN_SHIFT)
        );
        let fitted = compact.clone().fit(CAP);
        assert_eq!(
            (fitted.marked(), fitted.shift),
            (n as usize / 2, DEFAULT_MIN_SHIFT + 1)
        );
        assert!(fitted.covers(0..4 * n));
        let scattered = Intent::empty(0, DEFAULT_MIN_SHIFT)
            .with((0..CAP as u32 + 2).map(|k| k * 64))
            .fit(CAP);
        assert!(scattered.marked() <= CAP && scattered.shift > DEFAULT_MIN_SHIFT + 1);
        assert_eq!(j.ranges(100), vec![(1, 16), (96, 100)]);
    }
}
