//! Misplaced pages (issue 35): two pages of the same kind swapped, or one copied over the
//! other, must be reported as corrupt by `PRAGMA integrity_check` and by the engine's
//! check (what `inpage check` runs), and no query may return a wrong value — in every
//! mode of the registry.
//!
//! Such damage keeps every page internally valid: only a checksum bound to the page's
//! number can see it (`page::page_crc`, `page::versioned::page_seed`). Before the binding,
//! two overflow pages holding the tails of equal-length values could be swapped and both
//! values came back with each other's bytes, while both checks said ok.
//!
//! The database: a table with an index, some equal-length values spanning several overflow
//! pages, rows deleted so that the free list has pages (stock layouts; the others keep
//! none), closed cleanly on a simulated disk. The pages are grouped by what owns them
//! (the catalog, a table, an index, the free list; from the engine's check) and by page
//! kind (leaf, interior, overflow, free), and every pair within a group — in CI a sample
//! of up to `INPAGE_MISPLACED_PER_KIND` pages per group (default 6), with
//! `INPAGE_MISPLACED_PER_KIND=all` every pair — is swapped and copied both ways, each on
//! a fresh copy of the disk.
//!
//! Not `dash`: its database is two shadow files, and damage to the current one is what a
//! torn commit leaves, so the older shadow is opened (`tests/bad_input.rs` of the engine
//! holds `dash` to that rule).
//!
//! The base configuration of file databases is process-global
//! (`inpage_sql::set_file_config`), so the tests of this binary hold `SERIAL`.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::Path;
use std::sync::{Arc, Mutex};

use common::Db;
use inpage::check::PageOwner;
use inpage::{Config, Database, JournalMode, KeyKind};
use inpage_sim::{CrashModel, SimVfs};

const PATH: &str = "/misplaced/t.db";
const PS: usize = 1024;
static SERIAL: Mutex<()> = Mutex::new(());

fn config(disk: &SimVfs, mode: JournalMode) -> Config {
    Config::default()
        .vfs(Arc::new(disk.clone()))
        .journal_mode(mode)
        .page_size(PS as u32)
}

fn hex(b: &[u8]) -> String {
    let mut s = String::with_capacity(b.len() * 2);
    for x in b {
        let _ = write!(s, "{x:02X}");
    }
    s
}

/// Row `i`'s value: every tenth row 2,500 bytes (three overflow pages at 1 KiB, the same
/// length for each, different bytes), the others 40 bytes.
fn value(i: u64) -> Vec<u8> {
    let len = if i % 10 == 0 { 2500 } else { 40 };
    (0..len)
        .map(|k: u64| (k.wrapping_mul(31) ^ i.wrapping_mul(0x9E37)) as u8)
        .collect()
}

/// Build the database on `disk`; the rows it holds as `(id, a, hex(c))`.
fn build(disk: &SimVfs, mode: JournalMode) -> Vec<Vec<Option<String>>> {
    inpage_sql::set_file_config(Some(config(disk, mode)));
    let db = Db::open(PATH).unwrap();
    db.exec("CREATE TABLE t(id INTEGER PRIMARY KEY, a TEXT, c BLOB); CREATE INDEX t_a ON t(a);")
        .unwrap();
    db.exec("BEGIN").unwrap();
    for i in 0..200u64 {
        db.exec(&format!(
            "INSERT INTO t VALUES({i}, 'key {:05} {}', X'{}')",
            (i * 7919) % 1000,
            "k".repeat(40),
            hex(&value(i))
        ))
        .unwrap();
    }
    db.exec("COMMIT").unwrap();
    // Frees pages: whole chains (every twentieth row holds one) and emptied leaves.
    db.exec("DELETE FROM t WHERE id % 4 = 1 OR id % 20 = 0")
        .unwrap();
    assert_eq!(db.one("PRAGMA integrity_check").as_deref(), Some("ok"));
    let rows = db.query("SELECT id, a, hex(c) FROM t ORDER BY id").unwrap();
    drop(db);
    inpage_sql::set_file_config(None);
    rows
}

/// The pages worth misplacing, grouped by (owner, kind), from the engine's check of the
/// closed file.
fn groups(disk: &SimVfs, mode: JournalMode) -> BTreeMap<(String, &'static str), Vec<u32>> {
    let db = Database::open(PATH, config(disk, mode)).unwrap();
    let r = db.begin_read().unwrap();
    let rep = inpage::check::check(&r, &HashMap::new()).unwrap();
    let fcc = rep.fcc;
    drop(r);
    drop(db);
    let bytes = disk.read_file(Path::new(PATH)).unwrap();
    let mut g: BTreeMap<(String, &'static str), Vec<u32>> = BTreeMap::new();
    for (pgno, owner) in rep.owners.iter().enumerate().skip(1) {
        let who = match owner {
            PageOwner::Header | PageOwner::Free => continue,
            PageOwner::Catalog => "catalog".to_string(),
            PageOwner::FreeList => "free list".to_string(),
            PageOwner::Tree(i) => match rep.trees[*i].0.kind {
                KeyKind::Int => "table".to_string(),
                KeyKind::Bytes => "index".to_string(),
            },
        };
        let page = &bytes[pgno * PS..(pgno + 1) * PS];
        let kind = inpage::inspect::classify_page(mode, pgno as u32, page, fcc);
        g.entry((who, kind)).or_default().push(pgno as u32);
    }
    g
}

/// Up to `n` pages of `pages`, spread evenly.
fn sample(pages: &[u32], n: Option<usize>) -> Vec<u32> {
    match n {
        Some(n) if pages.len() > n => (0..n).map(|k| pages[k * pages.len() / n]).collect(),
        _ => pages.to_vec(),
    }
}

#[derive(Clone, Copy, Debug)]
enum Damage {
    Swap,
    /// Page `a`'s bytes over page `b`.
    Copy,
}

fn damaged(bytes: &[u8], d: Damage, a: u32, b: u32) -> Vec<u8> {
    let mut out = bytes.to_vec();
    let (a, b) = (a as usize * PS, b as usize * PS);
    match d {
        Damage::Swap => {
            out[a..a + PS].copy_from_slice(&bytes[b..b + PS]);
            out[b..b + PS].copy_from_slice(&bytes[a..a + PS]);
        }
        Damage::Copy => out[b..b + PS].copy_from_slice(&bytes[a..a + PS]),
    }
    out
}

/// What one damaged copy gave; a string naming the failure, if any.
fn judge(disk: &SimVfs, mode: JournalMode, want: &[Vec<Option<String>>]) -> Result<(), String> {
    // The engine's check, as `inpage check` runs it (read-only: it changes nothing).
    let engine = Database::open(PATH, config(disk, mode).read_only(true)).and_then(|db| {
        let r = db.begin_read()?;
        inpage::check::check(&r, &HashMap::new()).map(|_| ())
    });
    if engine.is_ok() {
        return Err("the engine's check says ok".into());
    }
    inpage_sql::set_file_config(Some(config(disk, mode)));
    let Ok(db) = Db::open(PATH) else {
        return Ok(()); // refused at open: reported
    };
    let ok = match db.query("PRAGMA integrity_check") {
        Ok(rows) => rows == vec![vec![Some("ok".to_string())]],
        Err(_) => false,
    };
    if ok {
        return Err("PRAGMA integrity_check says ok".into());
    }
    // Never a wrong value: whatever a query returns is what was stored, in the table's
    // order and through the index; a query that ends without an error returned it all.
    let by_id: HashMap<&Option<String>, &Vec<Option<String>>> =
        want.iter().map(|r| (&r[0], r)).collect();
    for sql in [
        "SELECT id, a, hex(c) FROM t ORDER BY id",
        "SELECT id, a, hex(c) FROM t INDEXED BY t_a WHERE a > '' ORDER BY a",
    ] {
        // A page the schema needs may be among the damaged: then not even that.
        let Ok(mut st) = db.prepare(sql) else {
            continue;
        };
        let mut n = 0;
        loop {
            match st.next_row() {
                Ok(Some(row)) => {
                    n += 1;
                    if by_id.get(&row[0]) != Some(&&row) {
                        return Err(format!("{sql}: wrong row {:?}", &row[..2]));
                    }
                }
                Ok(None) => {
                    if n != want.len() {
                        return Err(format!(
                            "{sql}: {n} rows of {} without an error",
                            want.len()
                        ));
                    }
                    break;
                }
                Err(_) => break,
            }
        }
    }
    Ok(())
}

fn per_kind() -> Option<usize> {
    match std::env::var("INPAGE_MISPLACED_PER_KIND") {
        Ok(v) if v == "all" => None,
        Ok(v) => Some(
            v.parse()
                .expect("INPAGE_MISPLACED_PER_KIND: a number or `all`"),
        ),
        Err(_) => Some(6),
    }
}

#[test]
fn swapped_and_copied_pages_are_reported_in_every_mode() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let n = per_kind();
    let mut total = 0u64;
    let mut failures = Vec::new();
    let mut kinds_seen: BTreeMap<String, u64> = BTreeMap::new();
    for mode in JournalMode::all() {
        if mode == JournalMode::DASH {
            continue;
        }
        let base = SimVfs::new();
        let want = build(&base, mode);
        let bytes = base.read_file(Path::new(PATH)).unwrap();
        for ((who, kind), pages) in groups(&base, mode) {
            let pages = sample(&pages, n);
            *kinds_seen.entry(format!("{who} {kind}")).or_default() += 1;
            for (i, &a) in pages.iter().enumerate() {
                for &b in &pages[i + 1..] {
                    for (d, x, y) in [
                        (Damage::Swap, a, b),
                        (Damage::Copy, a, b),
                        (Damage::Copy, b, a),
                    ] {
                        let disk = base.crash(0, CrashModel::none());
                        disk.write_file(Path::new(PATH), &damaged(&bytes, d, x, y));
                        total += 1;
                        if let Err(why) = judge(&disk, mode, &want) {
                            failures.push(format!("{mode}: {who} {kind} {d:?} {x} -> {y}: {why}"));
                        }
                        inpage_sql::set_file_config(None);
                    }
                }
            }
        }
    }
    eprintln!(
        "misplaced pages: {total} damaged copies; groups (modes having them): {kinds_seen:?}"
    );
    for k in [
        "table leaf",
        "table overflow",
        "index leaf",
        "table interior",
    ] {
        assert!(kinds_seen.contains_key(k), "no {k} pages: {kinds_seen:?}");
    }
    assert!(
        kinds_seen.contains_key("free list free"),
        "no free-list pages: {kinds_seen:?}"
    );
    assert!(
        failures.is_empty(),
        "{} of {total} damaged copies not reported or read wrong:\n{}",
        failures.len(),
        failures[..failures.len().min(40)].join("\n")
    );
}
