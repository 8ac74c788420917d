//! Timings for the SQL glue: owned-cursor scans (fast path, and with a write to the tree
//! between steps) vs the borrowed TreeCursor, and ephemeral in-memory databases.
//! Run: `cargo run --release -p inpage --example cursor_scan`.
use inpage::{Config, CursorOps, Database, KeyKind, ReadableTxn};
use std::time::Instant;

fn main() {
    let n: i64 = 200_000;
    let db = Database::open_memory(Config::default()).unwrap();
    let mut w = db.begin_write().unwrap();
    let t = w.create_tree("t", KeyKind::Int).unwrap();
    for k in 0..n {
        w.insert(&t, k, &[7u8; 40]).unwrap();
    }
    w.commit().unwrap();
    let mut w = db.begin_write().unwrap();
    for round in 0..3 {
        let s = Instant::now();
        let mut tc = w.cursor(&t).unwrap();
        let mut ok = tc.first().unwrap();
        let mut sum = 0usize;
        while ok {
            sum += tc.value().unwrap().unwrap().len();
            ok = tc.next().unwrap();
        }
        let a = s.elapsed();
        let s = Instant::now();
        let mut c = w.open_cursor(&t).unwrap();
        let mut ok = w.cursor_first(&mut c).unwrap();
        let mut sum2 = 0usize;
        while ok {
            sum2 += c.value_local().unwrap().unwrap().len();
            ok = w.cursor_next(&mut c).unwrap();
        }
        let b = s.elapsed();
        assert_eq!(sum, sum2);
        println!("round {round}: TreeCursor {a:?}, owned Cursor {b:?} ({n} rows)");
    }
    // Stale path: a write to the tree between every step forces a re-seek by key.
    let s = Instant::now();
    let mut c = w.open_cursor(&t).unwrap();
    let mut other = w.open_cursor(&t).unwrap();
    let mut ok = w.cursor_first(&mut c).unwrap();
    let mut rows = 0;
    while ok {
        let k = c.int_key().unwrap();
        w.cursor_insert(&mut other, n + k, b"x").unwrap();
        rows += 1;
        ok = w.cursor_next(&mut c).unwrap() && rows < n;
    }
    println!(
        "scan with one insert per step: {:?} ({rows} rows)",
        s.elapsed()
    );
    // Ephemeral databases: open, one tree, one row, drop.
    let s = Instant::now();
    for i in 0..1000i64 {
        let db = Database::open_memory(Config::default()).unwrap();
        let mut w = db.begin_write().unwrap();
        let t = w.create_tree("e", KeyKind::Int).unwrap();
        w.insert(&t, i, b"row").unwrap();
        w.commit().unwrap();
    }
    println!(
        "1000 x (open_memory, create tree, insert, commit, drop): {:?}",
        s.elapsed()
    );
}
