//! Every random choice of a fuzz run flows from the run seed through the torture
//! harness's splitmix64 (`inpage_torture::rng`), so (seed, input index) names an input on
//! any machine.

pub use inpage_torture::rng::Rng;

/// The seed of input `index` of a run seeded `seed`.
pub fn input_seed(seed: u64, index: u64) -> u64 {
    let mut r = Rng::new(seed ^ index.wrapping_mul(0xA24B_AED4_963E_E407));
    r.next_u64() ^ Rng::new(index).next_u64()
}
