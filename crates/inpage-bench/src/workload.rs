//! Workload generators: which keys each transaction touches, and the values written.
//!
//! Invariants:
//! - Everything here is a pure function of its arguments (a seed included), so every
//!   contender in every round sees exactly the same key sequence: differences between
//!   contenders are never differences in work.
//! - Keys are positive `i64` (1-based, as SQLite rowids are), so they map unchanged onto
//!   SQLite's `INTEGER PRIMARY KEY`, the engine's `KeyKind::Int` and, as big-endian `u64`,
//!   onto redb and LMDB keys in the same order.
//! - Mobibench's rules (shared/WORKLOADS.md): insert keys are sequential, or a permutation
//!   without replacement with `random`; update and delete first preload `max(n, 296)` rows
//!   (n = operations in the run); update keys are `rand() % rows + 1` from a generator
//!   seeded per transaction (so a run repeats exactly); delete keys are distinct existing
//!   rows. Every transaction's keys exist (update/delete) or do not yet exist (insert) when
//!   it runs, so each operation really changes the table; an update writes a value that
//!   carries its transaction number (`update_value`), so it changes the row's bytes too.

use std::collections::HashSet;
use std::fmt;

/// Mobibench preloads at least this many rows before update and delete runs.
pub const MOBIBENCH_MIN_ROWS: u64 = 296;

/// The 100-byte string Mobibench inserts.
const INSERT_PATTERN: &[u8; 100] = b"aaaaaaaaaabbbbbbbbbbccccccccccddddddddddeeeeeeeeeeffffffffffgggggggggghhhhhhhhhhiiiiiiiiiijjjjjjjjjj";
/// The 100-byte string Mobibench writes on update (same letters, rotated, so an update
/// really changes every byte of the value).
const UPDATE_PATTERN: &[u8; 100] = b"ffffffffffgggggggggghhhhhhhhhhiiiiiiiiiijjjjjjjjjjaaaaaaaaaabbbbbbbbbbccccccccccddddddddddeeeeeeeeee";

/// A Mobibench operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Op {
    Insert,
    Update,
    Delete,
}

impl Op {
    /// Every operation, in Mobibench's `-d` order.
    pub const ALL: [Op; 3] = [Op::Insert, Op::Update, Op::Delete];

    pub fn name(self) -> &'static str {
        match self {
            Op::Insert => "insert",
            Op::Update => "update",
            Op::Delete => "delete",
        }
    }

    /// Parse a name (case-insensitive); the error lists the valid names.
    pub fn parse(s: &str) -> Result<Op, String> {
        Op::ALL
            .into_iter()
            .find(|o| o.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| {
                format!(
                    "unknown op '{s}' (valid: {})",
                    Op::ALL.map(Op::name).join(", ")
                )
            })
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Rows preloaded before a run of `total_ops` operations (Mobibench: none for insert,
/// `max(n, 296)` for update and delete).
pub fn preload_rows(op: Op, total_ops: u64) -> u64 {
    match op {
        Op::Insert => 0,
        Op::Update | Op::Delete => total_ops.max(MOBIBENCH_MIN_ROWS),
    }
}

/// A small, fast, well-mixed PRNG (SplitMix64). Chosen over a crate because the key
/// sequences must stay identical across dependency upgrades for runs to be comparable.
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (n > 0); the modulo bias is below 2^-40 for the sizes used here.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// `1..=n` in an order drawn by a Fisher–Yates shuffle seeded with `seed`.
pub fn permutation(n: u64, seed: u64) -> Vec<i64> {
    let mut v: Vec<i64> = (1..=n as i64).collect();
    let mut rng = SplitMix64::new(seed);
    for i in (1..v.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        v.swap(i, j);
    }
    v
}

/// What one Mobibench run does, per database (each thread repeats it on its own file).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    pub op: Op,
    /// Keys inserted before the measured phase (in this order).
    pub preload: Vec<i64>,
    /// The transactions: the keys each one touches, in order. The first `warmup` run
    /// before the measured window opens.
    pub txns: Vec<Vec<i64>>,
    /// Leading transactions that run unmeasured (`--warmup`): they bring side files to
    /// their steady state (a WAL past its first checkpoint, a grown file) the way a
    /// database in use already is.
    pub warmup: usize,
}

impl Plan {
    pub fn total_ops(&self) -> u64 {
        self.txns.iter().map(|t| t.len() as u64).sum()
    }

    /// The transactions of the measured window.
    pub fn measured(&self) -> &[Vec<i64>] {
        &self.txns[self.warmup.min(self.txns.len())..]
    }

    /// `warmup` + `measured` transactions of one continuous workload: the measured
    /// window is what would follow the warm-up, so it keeps Mobibench's key rules (inserts
    /// continue the sequence, deletes take rows not yet deleted, the preload covers both).
    pub fn with_warmup(
        op: Op,
        warmup: u64,
        measured: u64,
        ops_per_txn: u32,
        random: bool,
        seed: u64,
    ) -> Plan {
        let mut p = mobibench_plan(op, warmup + measured, ops_per_txn, random, seed);
        p.warmup = warmup as usize;
        p
    }
}

/// Build a Mobibench run: `txns` transactions of `ops_per_txn` operations each.
/// `random` only affects insert (Mobibench `-R`); update and delete are random anyway.
pub fn mobibench_plan(op: Op, txns: u64, ops_per_txn: u32, random: bool, seed: u64) -> Plan {
    let k = u64::from(ops_per_txn.max(1));
    let n = txns * k;
    let rows = preload_rows(op, n);
    let preload: Vec<i64> = (1..=rows as i64).collect();
    let flat: Vec<i64> = match op {
        Op::Insert if random => permutation(n, seed),
        Op::Insert => (1..=n as i64).collect(),
        Op::Update => {
            // One generator per transaction, seeded by its index (Mobibench's srand(i)),
            // so transaction i touches the same rows whatever ran before it.
            let mut out = Vec::with_capacity(n as usize);
            for t in 0..txns {
                let mut rng = SplitMix64::new(seed ^ t.wrapping_mul(0xA24B_AED4_963E_E407));
                for _ in 0..k {
                    out.push(rng.below(rows) as i64 + 1);
                }
            }
            out
        }
        Op::Delete => {
            let mut p = permutation(rows, seed);
            p.truncate(n as usize);
            p
        }
    };
    let txns = flat.chunks(k as usize).map(<[i64]>::to_vec).collect();
    Plan {
        op,
        preload,
        txns,
        warmup: 0,
    }
}

/// A value of `size` bytes in Mobibench's style: its 100-byte ASCII string repeated or
/// cut. `update` picks the update string. ASCII, so SQLite can store it as TEXT.
pub fn mobibench_value(size: usize, update: bool) -> Vec<u8> {
    let pat: &[u8] = if update {
        UPDATE_PATTERN
    } else {
        INSERT_PATTERN
    };
    pat.iter().copied().cycle().take(size).collect()
}

/// The value measured update number `txn` writes: Mobibench's update string of `size`
/// bytes with the transaction number (decimal, zero-padded) over its first bytes, so
/// every update transaction writes bytes no row holds yet and must really write, while
/// its length (and so every row's size) stays Mobibench's. Wraps only after 10^20 - 1.
pub fn update_value(size: usize, txn: u64) -> Vec<u8> {
    let mut v = mobibench_value(size, true);
    let digits = format!("{txn:020}");
    let n = size.min(digits.len());
    // The low-order digits when the value is shorter than the number.
    v[..n].copy_from_slice(&digits.as_bytes()[digits.len() - n..]);
    v
}

/// Parse a comma list of positive integers ("1,2,4,8,16").
pub fn parse_counts(v: &[u32], what: &str, max: u32) -> Result<Vec<u32>, String> {
    if v.is_empty() {
        return Err(format!("{what}: give at least one value"));
    }
    let mut out = Vec::new();
    for &x in v {
        if x == 0 || x > max {
            return Err(format!("{what}: {x} is out of range 1..={max}"));
        }
        if !out.contains(&x) {
            out.push(x);
        }
    }
    Ok(out)
}

/// Distinct positive random keys (the full 63-bit range: an 8-byte key).
pub(crate) struct KeyGen {
    pub(crate) rng: SplitMix64,
    used: HashSet<i64>,
}

impl KeyGen {
    pub(crate) fn new(seed: u64) -> KeyGen {
        KeyGen::with_rng(SplitMix64::new(seed ^ 0x6d76_6274_f16e_0006))
    }

    /// Keys drawn from `rng` (which the caller may go on using through `rng`).
    pub(crate) fn with_rng(rng: SplitMix64) -> KeyGen {
        KeyGen {
            rng,
            used: HashSet::new(),
        }
    }

    pub(crate) fn fresh(&mut self) -> i64 {
        loop {
            let k = (self.rng.next_u64() >> 1) as i64;
            if k > 0 && self.used.insert(k) {
                return k;
            }
        }
    }

    /// Take a random element out of `live`.
    pub(crate) fn take(&mut self, live: &mut Vec<i64>) -> i64 {
        let i = self.rng.below(live.len() as u64) as usize;
        live.swap_remove(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warmup_precedes_the_measured_window_of_one_workload() {
        for op in Op::ALL {
            let p = Plan::with_warmup(op, 30, 100, 2, false, 5);
            assert_eq!(p.txns.len(), 130);
            assert_eq!(p.measured().len(), 100);
            assert_eq!(p.measured(), &p.txns[30..]);
            // The same workload as one run of 130 transactions: keys stay distinct for
            // insert and delete, and the preload covers every operation.
            assert_eq!(p.txns, mobibench_plan(op, 130, 2, false, 5).txns);
            if op == Op::Delete {
                assert!(p.preload.len() >= 260);
            }
        }
        assert_eq!(
            Plan::with_warmup(Op::Insert, 0, 10, 1, false, 1)
                .measured()
                .len(),
            10
        );
    }
    use std::collections::HashSet;

    #[test]
    fn preload_rule_is_max_n_296() {
        assert_eq!(preload_rows(Op::Insert, 1000), 0);
        assert_eq!(preload_rows(Op::Update, 10), 296);
        assert_eq!(preload_rows(Op::Update, 296), 296);
        assert_eq!(preload_rows(Op::Delete, 1000), 1000);
        let p = mobibench_plan(Op::Delete, 100, 4, false, 1);
        assert_eq!(p.preload.len(), 400);
        let p = mobibench_plan(Op::Update, 10, 1, false, 1);
        assert_eq!(p.preload, (1..=296).collect::<Vec<_>>());
    }

    #[test]
    fn insert_keys_sequential_or_permuted() {
        let p = mobibench_plan(Op::Insert, 5, 2, false, 7);
        assert!(p.preload.is_empty());
        assert_eq!(
            p.txns,
            vec![vec![1, 2], vec![3, 4], vec![5, 6], vec![7, 8], vec![9, 10]]
        );
        let r = mobibench_plan(Op::Insert, 50, 2, true, 7);
        let mut all: Vec<i64> = r.txns.concat();
        assert_ne!(all, (1..=100).collect::<Vec<_>>(), "random order expected");
        all.sort_unstable();
        assert_eq!(all, (1..=100).collect::<Vec<_>>(), "without replacement");
        assert_eq!(r, mobibench_plan(Op::Insert, 50, 2, true, 7), "seeded");
    }

    #[test]
    fn update_keys_repeatable_and_in_range() {
        let a = mobibench_plan(Op::Update, 200, 3, false, 42);
        let b = mobibench_plan(Op::Update, 200, 3, false, 42);
        assert_eq!(a, b);
        assert_eq!(a.txns.len(), 200);
        assert!(a.txns.iter().all(|t| t.len() == 3));
        let rows = a.preload.len() as i64;
        assert_eq!(rows, 600);
        assert!(a.txns.concat().iter().all(|&k| (1..=rows).contains(&k)));
        // Seeded per transaction: a shorter run is a prefix of a longer one's keys only
        // where the row count is the same (both at the 296 floor here).
        let short = mobibench_plan(Op::Update, 10, 1, false, 42);
        let long = mobibench_plan(Op::Update, 20, 1, false, 42);
        assert_eq!(short.txns[..], long.txns[..10]);
        assert_ne!(a, mobibench_plan(Op::Update, 200, 3, false, 43));
    }

    #[test]
    fn delete_keys_distinct_existing() {
        let p = mobibench_plan(Op::Delete, 100, 2, false, 3);
        let all = p.txns.concat();
        assert_eq!(all.len(), 200);
        let set: HashSet<i64> = all.iter().copied().collect();
        assert_eq!(set.len(), 200, "no key deleted twice");
        assert!(all.iter().all(|&k| (1..=296).contains(&k)));
    }

    #[test]
    fn values() {
        let v = mobibench_value(100, false);
        assert_eq!(&v[..], &INSERT_PATTERN[..]);
        assert_eq!(mobibench_value(128, false).len(), 128);
        assert_eq!(&mobibench_value(128, true)[100..], &UPDATE_PATTERN[..28]);
        assert!(mobibench_value(300, true).is_ascii());
    }

    #[test]
    fn update_values_change_every_transaction() {
        let load = mobibench_value(100, false);
        let mut seen = HashSet::new();
        for t in 0..2000 {
            let v = update_value(100, t);
            assert_eq!(v.len(), 100);
            assert!(v.is_ascii());
            assert_ne!(v, load, "an update changes the preloaded row");
            assert!(seen.insert(v), "txn {t}: value repeated");
        }
        assert_eq!(&update_value(100, 42)[..20], b"00000000000000000042");
        assert_eq!(&update_value(100, 42)[20..], &UPDATE_PATTERN[20..]);
        // Short values keep the low-order digits, so neighbours still differ.
        assert_ne!(update_value(4, 7), update_value(4, 8));
        assert_eq!(update_value(4, 12345), b"2345");
        assert_eq!(update_value(1, 9), b"9");
    }

    #[test]
    fn ops_parse() {
        assert_eq!(Op::parse("UPDATE").unwrap(), Op::Update);
        let e = Op::parse("upsert").unwrap_err();
        assert!(e.contains("insert, update, delete"), "{e}");
        assert!(parse_counts(&[0], "x", 16).is_err());
        assert_eq!(parse_counts(&[1, 2, 2], "x", 16).unwrap(), vec![1, 2]);
    }
}
