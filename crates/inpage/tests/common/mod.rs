//! Helpers shared by the integration tests.
#![allow(dead_code)]

pub mod concurrency;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use inpage::check::check;
use inpage::{Config, Database, JournalMode, KeyKind, ReadableTxn};
use inpage_sim::SimVfs;

pub const DB: &str = "/db/test.db";

/// The registry's modes whose free space is a page list (those that can shrink the file).
pub fn page_list_modes() -> impl Iterator<Item = JournalMode> {
    JournalMode::all().filter(|m| m.keeps_free_list())
}

/// The length of the test database's file on `vfs`.
pub fn file_len(vfs: &SimVfs) -> u64 {
    use inpage::vfs::{OpenOptions, Vfs};
    vfs.open(Path::new(DB), OpenOptions::default())
        .unwrap()
        .len()
        .unwrap()
}

/// Config over a simulated disk with small settings so tests exercise growth,
/// checkpoints and eviction.
pub fn sim_config(vfs: &SimVfs, mode: JournalMode, page_size: u32) -> Config {
    Config::default()
        .vfs(Arc::new(vfs.clone()))
        .journal_mode(mode)
        .page_size(page_size)
        .cache_pages(32)
        .chunk_pages(8)
        .wal_autocheckpoint(40)
}

/// A value whose bytes depend on (key, version) so a stale or torn value is detected.
pub fn value_for(key: i64, version: u32, len: usize) -> Vec<u8> {
    let mut x = (key as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ version as u64;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Full dump of the tree "t" (created if the file is new).
pub fn dump(db: &Database) -> BTreeMap<i64, Vec<u8>> {
    rows_of(&db.begin_read().unwrap(), "t")
}

/// Every row of the integer-keyed tree `tree` as `txn` sees it (empty if there is no
/// such tree).
pub fn rows_of<T: ReadableTxn>(txn: &T, tree: &str) -> BTreeMap<i64, Vec<u8>> {
    let t = match txn.open_tree(tree) {
        Ok(t) => t,
        Err(inpage::Error::TreeNotFound(_)) => return BTreeMap::new(),
        Err(e) => panic!("open_tree: {e}"),
    };
    txn.iter(&t)
        .unwrap()
        .map(|kv| {
            let (k, v) = kv.unwrap();
            (k.as_int().unwrap(), v)
        })
        .collect()
}

/// Run the integrity check, panicking with its message on failure.
pub fn assert_checks(db: &Database) {
    let r = db.begin_read().unwrap();
    if let Err(e) = check(&r, &Default::default()) {
        panic!("integrity check failed: {e}");
    }
}

/// Apply one transaction of (key, Some(value) | None) to tree "t" and commit.
pub fn apply(db: &Database, ops: &[(i64, Option<Vec<u8>>)]) -> inpage::Result<()> {
    let mut w = db.begin_write()?;
    let t = w.open_or_create_tree("t", KeyKind::Int)?;
    for (k, v) in ops {
        match v {
            Some(v) => {
                w.insert(&t, *k, v)?;
            }
            None => {
                w.remove(&t, *k)?;
            }
        }
    }
    w.commit()
}

/// A transaction of the model tests: each key set to a value or removed.
pub type Txn = Vec<(i64, Option<Vec<u8>>)>;

/// The model after each prefix of `txns`: `states(txns)[k]` is the database after the
/// first `k` transactions.
pub fn states(txns: &[Txn]) -> Vec<BTreeMap<i64, Vec<u8>>> {
    let mut m = BTreeMap::new();
    let mut out = vec![m.clone()];
    for t in txns {
        apply_model(&mut m, t);
        out.push(m.clone());
    }
    out
}

pub fn apply_model(model: &mut BTreeMap<i64, Vec<u8>>, ops: &[(i64, Option<Vec<u8>>)]) {
    for (k, v) in ops {
        match v {
            Some(v) => {
                model.insert(*k, v.clone());
            }
            None => {
                model.remove(k);
            }
        }
    }
}

/// Deterministic transactions: `n` transactions of 1..=max_ops operations on keys below
/// `keyspace`, values up to `max_val` bytes.
pub fn gen_txns(
    seed: u64,
    n: usize,
    max_ops: usize,
    keyspace: i64,
    max_val: usize,
) -> Vec<Vec<(i64, Option<Vec<u8>>)>> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    (0..n)
        .map(|t| {
            let ops = 1 + (next() as usize) % max_ops;
            (0..ops)
                .map(|_| {
                    let k = (next() % keyspace as u64) as i64;
                    if next() % 4 == 0 {
                        (k, None)
                    } else {
                        let len = (next() as usize) % (max_val + 1);
                        (k, Some(value_for(k, t as u32, len)))
                    }
                })
                .collect()
        })
        .collect()
}

pub fn atomic_modes() -> Vec<JournalMode> {
    JournalMode::all()
        .filter(|m| m.promises_atomicity())
        .collect()
}

pub fn file_bytes(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap()
}
