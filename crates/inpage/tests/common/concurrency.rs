//! Helpers shared by the concurrent-writer tests (`occ.rs`, `vto.rs`,
//! `concurrent_crash.rs`): which modes accept a concurrency setting, opening, a table of
//! numbered rows, and a seeded generator.
#![allow(dead_code)]

use inpage::{Concurrency, Database, Error, JournalMode, KeyKind, ReadableTxn, WriteTxn};
use inpage_sim::SimVfs;

use super::{sim_config, DB};

/// The registry modes that accept `c`; every other mode must refuse it with a `Config`
/// error naming the setting (no silent fallback to one writer).
pub fn modes_accepting(c: Concurrency) -> Vec<JournalMode> {
    let mut ok = Vec::new();
    for mode in JournalMode::all() {
        let vfs = SimVfs::new();
        match Database::open(DB, sim_config(&vfs, mode, 1024).concurrency(c)) {
            Ok(_) => ok.push(mode),
            Err(Error::Config(msg)) => assert!(msg.contains("concurrency"), "{mode}: {msg}"),
            Err(e) => panic!("{mode}: unexpected error {e}"),
        }
    }
    ok
}

/// The database on `vfs` with 1 KiB pages (many leaves) and concurrency `c`.
pub fn open_with(vfs: &SimVfs, mode: JournalMode, c: Concurrency) -> Database {
    Database::open(DB, sim_config(vfs, mode, 1024).concurrency(c)).unwrap()
}

/// A tree "t" of keys `0..n`, each holding its decimal digits.
pub fn seed_numbered(db: &Database, n: i64) {
    let mut w = db.begin_write().unwrap();
    let t = w.create_tree("t", KeyKind::Int).unwrap();
    for k in 0..n {
        w.insert(&t, k, k.to_string().as_bytes()).unwrap();
    }
    w.commit().unwrap();
}

/// Key `k` of tree "t" as `w` sees it.
pub fn get_in(w: &WriteTxn, k: i64) -> Option<Vec<u8>> {
    let t = w.open_tree("t").unwrap();
    w.get(&t, k).unwrap()
}

/// Write key `k` of tree "t" (a conflict is returned, not a panic).
pub fn put_in(w: &mut WriteTxn, k: i64, v: &[u8]) -> inpage::Result<()> {
    let t = w.open_tree("t")?;
    w.insert(&t, k, v).map(|_| ())
}

/// A value written by `seed_numbered` or an increment of it, as a number.
pub fn number(v: Option<Vec<u8>>) -> i64 {
    String::from_utf8(v.unwrap()).unwrap().parse().unwrap()
}

/// How many schedules or cuts a long run asks for in `var`, else `default`.
pub fn env_count(var: &str, default: u64) -> u64 {
    std::env::var(var)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// A tiny deterministic generator (xorshift).
pub struct XorShift(pub u64);
impl XorShift {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}
