//! splitmix64: tiny, fast, and a pure function of its seed, which is all the harness
//! needs. Every random choice in a run flows from the run's seed through this, so a seed
//! (or a replay spec) reproduces a run bit for bit on any machine.

/// Deterministic PRNG.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (0 when `n == 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }

    /// Uniform in `lo..=hi` (`lo` when `hi < lo`).
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi.saturating_sub(lo).saturating_add(1))
    }

    /// Uniform index into a non-empty length (0 for an empty one).
    pub fn index(&mut self, len: usize) -> usize {
        self.below(len as u64) as usize
    }

    /// True with probability `pct` percent.
    pub fn pct(&mut self, pct: u64) -> bool {
        self.below(100) < pct
    }
}

/// Mix several values into one seed (order matters), for deriving per-case seeds.
pub fn mix(parts: &[u64]) -> u64 {
    let mut r = Rng::new(0x1234_5678_9ABC_DEF0);
    let mut acc = 0u64;
    for &p in parts {
        r = Rng::new(r.next_u64() ^ p);
        acc = r.next_u64();
    }
    acc
}
