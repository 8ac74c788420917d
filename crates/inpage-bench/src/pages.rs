//! `inpage bench pages`: page utilization, records per leaf page, per page layout (stock,
//! DHL, IPS, ...), after loading and optionally after a run of one-row updates.
//!
//! The DHL paper reports that its doubleheader pages hold fewer records than stock
//! slotted pages (340 vs 291 at 8 bytes). This measures the same thing on this engine
//! rather than computing it from a layout formula: for each record size, journal mode
//! and key order it builds a fresh database with the real engine, inserts the records
//! one per auto-commit transaction (as Mobibench does; DHL's in-place page versions
//! depend on transaction boundaries, so batching would change the answer), runs the
//! engine's full integrity check and reads the tree statistics that check computed while
//! walking every page. Records per leaf page is `entries / leaf_pages` of that walk.
//!
//! With `--updates N`, N one-row update transactions follow the load (row `k` of a seeded
//! permutation of the keys, cycled; each writes bytes no row holds yet, same length), and
//! the measurement is taken after them: layouts that keep old record copies in the page
//! (IPS appends an update and tombstones the old copy) show their internal fragmentation
//! there, not after a pure load.
//!
//! A record of S bytes is an 8-byte integer key (`KeyKind::Int`) plus a value of S − 8
//! bytes (S = 8: an empty value); per-cell overhead (cell header, slot pointer) is the
//! engine's and is what the measurement is about, so it is not counted in S.
//!
//! Runs go to the engine's in-memory simulated file system (`SimVfs`), so no disk or root
//! is needed and the numbers do not depend on the host file system: page layout is the
//! same whatever the VFS, only timing would differ, and nothing here is timed.
//!
//! Invariants: bad arguments are errors, never panics; a row is reported only if the
//! check passed, it counted exactly the records inserted and no value overflowed (an
//! overflowing value would make records-per-leaf compare different things).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use inpage::{Config, Database, JournalMode, KeyKind, ReadableTxn};
use inpage_sim::SimVfs;

use crate::workload::{mobibench_value, permutation, update_value};

/// Bytes of the integer key every record carries.
pub const KEY_BYTES: usize = 8;
/// Default record sizes (the list).
pub const DEFAULT_SIZES: [usize; 5] = [8, 16, 32, 64, 128];
/// Default modes: one per layout, stock first so the ratio is DHL / stock.
pub const DEFAULT_MODES: [&str; 2] = ["off", "dhl-cc"];
/// Most records per run: everything lives in memory (twice, in the simulated disk).
pub const MAX_RECORDS: u64 = 1_000_000;
/// Most update transactions per database.
pub const MAX_UPDATES: u64 = 10_000_000;

/// Order the keys are inserted in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KeyOrder {
    /// 1, 2, 3, ...: every insert goes to the rightmost leaf.
    Sequential,
    /// A seeded permutation of 1..=N (without replacement): inserts land anywhere.
    Random,
}

impl KeyOrder {
    pub const ALL: [KeyOrder; 2] = [KeyOrder::Sequential, KeyOrder::Random];

    pub fn name(self) -> &'static str {
        match self {
            KeyOrder::Sequential => "sequential",
            KeyOrder::Random => "random",
        }
    }

    fn short(self) -> &'static str {
        match self {
            KeyOrder::Sequential => "seq",
            KeyOrder::Random => "rand",
        }
    }

    /// Parse a name or its short form (case-insensitive).
    pub fn parse(s: &str) -> Result<KeyOrder, String> {
        let t = s.trim();
        KeyOrder::ALL
            .into_iter()
            .find(|o| o.name().eq_ignore_ascii_case(t) || o.short().eq_ignore_ascii_case(t))
            .ok_or_else(|| format!("unknown key order '{s}' (valid: sequential, random)"))
    }
}

/// What to measure; build with [`PagesParams::new`], which validates everything.
#[derive(Clone, Debug, PartialEq)]
pub struct PagesParams {
    /// Record sizes in bytes (key included).
    pub sizes: Vec<usize>,
    pub modes: Vec<JournalMode>,
    pub orders: Vec<KeyOrder>,
    pub records: u64,
    /// One-row update transactions after the load (0: none).
    pub updates: u64,
    pub page_size: u32,
    pub seed: u64,
}

impl PagesParams {
    /// Validate the command-line values. Empty `modes` / `orders` mean the defaults.
    pub fn new(
        sizes: &[usize],
        modes: &[String],
        orders: &[String],
        records: u64,
        updates: u64,
        page_size: u32,
        seed: u64,
    ) -> Result<PagesParams, String> {
        Config::default()
            .page_size(page_size)
            .validate()
            .map_err(|e| format!("--page-size: {e}"))?;
        if records == 0 || records > MAX_RECORDS {
            return Err(format!("--records must be in 1..={MAX_RECORDS}"));
        }
        if updates > MAX_UPDATES {
            return Err(format!("--updates must be at most {MAX_UPDATES}"));
        }
        if updates > 0 && sizes.contains(&KEY_BYTES) {
            return Err(format!(
                "--updates: a {KEY_BYTES}-byte record has no value to update; give sizes                  above {KEY_BYTES}"
            ));
        }
        let max = max_record_bytes(page_size);
        if sizes.is_empty() {
            return Err("--sizes: give at least one size".into());
        }
        let mut sz = Vec::new();
        for &s in sizes {
            if s < KEY_BYTES || s > max {
                return Err(format!(
                    "--sizes: {s} is out of range {KEY_BYTES}..={max} (a record is an \
                     {KEY_BYTES}-byte key plus its value, and must fit inline in a \
                     {page_size}-byte page)"
                ));
            }
            if !sz.contains(&s) {
                sz.push(s);
            }
        }
        let mut ms = Vec::new();
        let names: Vec<String> = if modes.is_empty() {
            DEFAULT_MODES.iter().map(|s| s.to_string()).collect()
        } else {
            modes.to_vec()
        };
        for n in &names {
            let m = JournalMode::from_name(n.trim()).ok_or_else(|| {
                format!(
                    "unknown mode '{n}' (valid: {})",
                    JournalMode::all()
                        .map(JournalMode::name)
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            })?;
            if !ms.contains(&m) {
                ms.push(m);
            }
        }
        let mut os = Vec::new();
        if orders.is_empty() {
            os = KeyOrder::ALL.to_vec();
        } else {
            for o in orders {
                let o = KeyOrder::parse(o)?;
                if !os.contains(&o) {
                    os.push(o);
                }
            }
        }
        Ok(PagesParams {
            sizes: sz,
            modes: ms,
            orders: os,
            records,
            updates,
            page_size,
            seed,
        })
    }

    /// Databases one run builds.
    pub fn runs(&self) -> u64 {
        (self.sizes.len() * self.modes.len() * self.orders.len()) as u64
    }
}

/// Largest record (key + value) whose value the engine keeps inline in a leaf of
/// `page_size`-byte pages. Asked of the engine rather than hard-coded, so it follows any
/// change to the cell format.
pub fn max_record_bytes(page_size: u32) -> usize {
    KEY_BYTES + inpage::inspect::max_inline_value(page_size, KEY_BYTES).unwrap_or(0)
}

/// The whole `--json` output.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PagesReport {
    /// Always "pages".
    pub workload: String,
    pub page_size: u32,
    /// Records inserted into each database, one per transaction.
    pub records: u64,
    /// One-row update transactions after the load; the measurement follows them.
    #[serde(default)]
    pub updates: u64,
    pub seed: u64,
    /// Bytes of the integer key in every record.
    pub key_bytes: usize,
    /// Mode names in column order.
    pub modes: Vec<String>,
    pub rows: Vec<PagesRow>,
}

/// One record size and key order, measured in every mode.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PagesRow {
    /// Key + value bytes.
    pub record_bytes: usize,
    pub value_bytes: usize,
    pub order: KeyOrder,
    /// One per mode, in `PagesReport::modes` order.
    pub results: Vec<ModeResult>,
    /// Records per leaf of each mode after the first over the first's.
    pub ratios_to_first: Vec<f64>,
}

/// What the integrity check found in one database.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModeResult {
    pub mode: String,
    /// The mode's page layout ("stock", "dhl", ...).
    pub layout: String,
    pub entries: u64,
    pub depth: u32,
    pub leaf_pages: u64,
    pub interior_pages: u64,
    pub overflow_pages: u64,
    /// `page_count` from the header: every page of the file, header and catalog included.
    pub total_pages: u32,
    /// Pages owned by no tree (the free list; for DHL, the unowned pages).
    pub free_pages: u32,
    pub records_per_leaf: f64,
    /// Record bytes over leaf-page bytes.
    pub leaf_fill: f64,
    /// Record bytes over the bytes of all `total_pages` pages: the file's fill.
    pub file_fill: f64,
}

/// Build one database and measure it.
pub fn measure_one(
    mode: JournalMode,
    record_bytes: usize,
    order: KeyOrder,
    p: &PagesParams,
) -> Result<ModeResult, String> {
    let ctx = |e: inpage::Error| {
        format!(
            "mode {}, {record_bytes}-byte records, {}: {e}",
            mode.name(),
            order.name()
        )
    };
    let cfg = Config::default()
        .vfs(Arc::new(SimVfs::new()))
        .journal_mode(mode)
        .page_size(p.page_size);
    let db = Database::open("/pages.db", cfg).map_err(ctx)?;
    // The tree is created in its own transaction, as the Mobibench contender does, so
    // every measured transaction is exactly one insert.
    let tree = {
        let mut w = db.begin_write().map_err(ctx)?;
        let t = w.open_or_create_tree("t", KeyKind::Int).map_err(ctx)?;
        w.commit().map_err(ctx)?;
        t
    };
    let keys: Vec<i64> = match order {
        KeyOrder::Sequential => (1..=p.records as i64).collect(),
        KeyOrder::Random => permutation(p.records, p.seed),
    };
    let value = mobibench_value(record_bytes - KEY_BYTES, false);
    for &k in &keys {
        let mut w = db.begin_write().map_err(ctx)?;
        w.insert(&tree, k, &value).map_err(ctx)?;
        w.commit().map_err(ctx)?;
    }
    let targets = permutation(p.records, p.seed.wrapping_add(1));
    let mut last = HashMap::new();
    for u in 0..p.updates {
        let k = targets[(u % p.records) as usize];
        let mut w = db.begin_write().map_err(ctx)?;
        w.insert(&tree, k, &update_value(record_bytes - KEY_BYTES, u))
            .map_err(ctx)?;
        w.commit().map_err(ctx)?;
        last.insert(k, u);
    }
    {
        // Every updated row holds its last update: the run measured what it claims.
        let r = db.begin_read().map_err(ctx)?;
        for (&k, &u) in &last {
            let want = update_value(record_bytes - KEY_BYTES, u);
            if r.get(&tree, k).map_err(ctx)?.as_deref() != Some(&want[..]) {
                return Err(format!(
                    "mode {}, {record_bytes}-byte records: row {k} lost update {u}",
                    mode.name()
                ));
            }
        }
    }
    let r = db.begin_read().map_err(ctx)?;
    let rep = inpage::check::check(&r, &HashMap::new()).map_err(ctx)?;
    let fail = |why: String| {
        Err(format!(
            "mode {}, {record_bytes}-byte records, {}: {why}",
            mode.name(),
            order.name()
        ))
    };
    let Some((_, s)) = rep.trees.iter().find(|(i, _)| i.name == "t") else {
        return fail("the check did not list the tree".into());
    };
    if s.entries != p.records {
        return fail(format!(
            "the check counted {} entries, {} were inserted",
            s.entries, p.records
        ));
    }
    if s.overflow_pages != 0 || s.leaf_pages == 0 {
        return fail(format!(
            "{} overflow pages, {} leaf pages: values are not all inline",
            s.overflow_pages, s.leaf_pages
        ));
    }
    let ps = f64::from(p.page_size);
    let bytes = (s.entries as f64) * record_bytes as f64;
    Ok(ModeResult {
        mode: mode.name().to_string(),
        layout: mode.layout_name().to_string(),
        entries: s.entries,
        depth: s.depth,
        leaf_pages: s.leaf_pages,
        interior_pages: s.interior_pages,
        overflow_pages: s.overflow_pages,
        total_pages: rep.page_count,
        free_pages: rep.free_pages,
        records_per_leaf: s.entries as f64 / s.leaf_pages as f64,
        leaf_fill: bytes / (s.leaf_pages as f64 * ps),
        file_fill: bytes / (f64::from(rep.page_count) * ps),
    })
}

/// Measure every (size, order, mode); `tick` is called after each database.
pub fn measure(p: &PagesParams, mut tick: impl FnMut()) -> Result<PagesReport, String> {
    let mut rows = Vec::new();
    for &size in &p.sizes {
        for &order in &p.orders {
            let mut results = Vec::new();
            for &m in &p.modes {
                results.push(measure_one(m, size, order, p)?);
                tick();
            }
            let ratios = results
                .iter()
                .skip(1)
                .map(|b| b.records_per_leaf / results[0].records_per_leaf)
                .collect();
            rows.push(PagesRow {
                record_bytes: size,
                value_bytes: size - KEY_BYTES,
                order,
                results,
                ratios_to_first: ratios,
            });
        }
    }
    Ok(PagesReport {
        workload: "pages".into(),
        page_size: p.page_size,
        records: p.records,
        updates: p.updates,
        seed: p.seed,
        key_bytes: KEY_BYTES,
        modes: p.modes.iter().map(|m| m.name().to_string()).collect(),
        rows,
    })
}

/// The text table printed on stdout.
pub fn table(r: &PagesReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "page utilization (measured): {} records per database, one per auto-commit \
         transaction{}; {}-byte pages; random order seed {}",
        r.records,
        match r.updates {
            0 => String::new(),
            n => format!(", then {n} one-row update transactions"),
        },
        r.page_size,
        r.seed
    );
    let _ = writeln!(
        out,
        "size = record bytes: an {}-byte integer key + (size - {}) value bytes",
        r.key_bytes, r.key_bytes
    );
    let _ = writeln!(
        out,
        "rec/leaf = entries / leaf pages (an average over all leaves), inner = interior \
         pages, from the engine's integrity check;"
    );
    let _ = writeln!(
        out,
        "pages = header page_count; fill = record bytes / (pages x page size)\n"
    );
    const PER_MODE: [&str; 5] = ["rec/leaf", "leaves", "inner", "pages", "fill"];
    let mut head = vec!["size".to_string(), "order".to_string()];
    for _ in &r.modes {
        head.extend(PER_MODE.iter().map(|c| c.to_string()));
    }
    let nratio = r.modes.len().saturating_sub(1);
    head.extend((0..nratio).map(|_| "rec/leaf".to_string()));
    let mut cells = vec![head];
    for row in &r.rows {
        let mut c = vec![row.record_bytes.to_string(), row.order.name().to_string()];
        for x in &row.results {
            c.push(format!("{:.1}", x.records_per_leaf));
            c.push(x.leaf_pages.to_string());
            c.push(x.interior_pages.to_string());
            c.push(x.total_pages.to_string());
            c.push(format!("{:.1}%", 100.0 * x.file_fill));
        }
        c.extend(row.ratios_to_first.iter().map(|v| format!("{v:.3}")));
        cells.push(c);
    }
    let ncol = cells[0].len();
    let mut w: Vec<usize> = (0..ncol)
        .map(|c| cells.iter().map(|r| r[c].len()).max().unwrap_or(0))
        .collect();
    // A group line names the mode over its columns (and each ratio over its own), so
    // the column names stay short enough for a terminal.
    let mut groups: Vec<(usize, usize, String)> = r
        .modes
        .iter()
        .enumerate()
        .map(|(i, m)| (2 + i * PER_MODE.len(), PER_MODE.len(), m.clone()))
        .collect();
    for (j, m) in r.modes.iter().skip(1).enumerate() {
        groups.push((ncol - nratio + j, 1, format!("{m}/{}", r.modes[0])));
    }
    for (start, n, name) in &groups {
        let span: usize = w[*start..start + n].iter().sum::<usize>() + 2 * (n - 1);
        if name.len() > span {
            w[start + n - 1] += name.len() - span;
        }
    }
    let mut group_line = format!("{:w$}", "", w = w[0] + 2 + w[1]);
    for (start, n, name) in &groups {
        let span: usize = w[*start..start + n].iter().sum::<usize>() + 2 * (n - 1);
        let _ = write!(group_line, "  {name:<span$}");
    }
    let _ = writeln!(out, "{}", group_line.trim_end());
    for row in &cells {
        let _ = writeln!(out, "{}", crate::report::table_line(row, &w, 2));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(sizes: &[usize], modes: &[&str]) -> Result<PagesParams, String> {
        let m: Vec<String> = modes.iter().map(|s| s.to_string()).collect();
        PagesParams::new(sizes, &m, &[], 300, 0, 4096, 1)
    }

    #[test]
    fn arguments_are_validated() {
        let p = params(&[8, 8, 128], &[]).unwrap();
        assert_eq!(p.sizes, vec![8, 128]);
        assert_eq!(p.modes, vec![JournalMode::OFF, JournalMode::DHL_CC]);
        assert_eq!(p.orders, KeyOrder::ALL.to_vec());
        for bad in [0, 7, max_record_bytes(4096) + 1] {
            let e = params(&[bad], &[]).unwrap_err();
            assert!(e.contains("out of range"), "{e}");
        }
        assert!(params(&[max_record_bytes(4096)], &[]).is_ok());
        let e = params(&[8], &["off", "nope"]).unwrap_err();
        assert!(
            e.contains("unknown mode 'nope'") && e.contains("dhl-cc"),
            "{e}"
        );
        let e = PagesParams::new(&[8], &[], &[], 300, 0, 1000, 1).unwrap_err();
        assert!(e.contains("--page-size"), "{e}");
        let e = PagesParams::new(&[8], &[], &[], 0, 0, 4096, 1).unwrap_err();
        assert!(e.contains("--records"), "{e}");
        let e = PagesParams::new(&[8, 16], &[], &[], 10, 5, 4096, 1).unwrap_err();
        assert!(e.contains("--updates") && e.contains("no value"), "{e}");
        let e = PagesParams::new(&[16], &[], &[], 10, MAX_UPDATES + 1, 4096, 1).unwrap_err();
        assert!(e.contains("--updates"), "{e}");
        let e = PagesParams::new(&[8], &[], &["sideways".into()], 10, 0, 4096, 1).unwrap_err();
        assert!(e.contains("unknown key order"), "{e}");
        // A bigger page holds bigger inline records; a smaller one, smaller.
        assert!(max_record_bytes(512) < 128 && max_record_bytes(4096) > 1000);
    }

    #[test]
    fn largest_accepted_record_does_not_overflow() {
        for ps in [512, 4096] {
            let size = max_record_bytes(ps);
            let p = PagesParams::new(&[size], &[], &["seq".into()], 20, 0, ps, 1).unwrap();
            let r = measure(&p, || {}).unwrap();
            for x in &r.rows[0].results {
                assert_eq!(x.overflow_pages, 0);
                assert_eq!(x.entries, 20);
            }
        }
    }

    #[test]
    fn table_has_a_ratio_column_per_mode_after_the_first() {
        let two = measure(&params(&[16], &[]).unwrap(), || {}).unwrap();
        let t = table(&two);
        assert!(t.contains("dhl-cc/off") && t.contains("rec/leaf"), "{t}");
        assert!(two.rows.iter().all(|r| r.ratios_to_first.len() == 1));
        let three = measure(&params(&[16], &["off", "wal", "dhl-tc"]).unwrap(), || {}).unwrap();
        let t3 = table(&three);
        assert!(t3.contains("wal/off") && t3.contains("dhl-tc/off"), "{t3}");
        // Stock modes share one layout, so they must agree exactly.
        for row in &three.rows {
            assert_eq!(row.results[0].leaf_pages, row.results[1].leaf_pages);
            assert_eq!(row.ratios_to_first[0], 1.0);
        }
        let s = serde_json::to_string(&two).unwrap();
        assert_eq!(serde_json::from_str::<PagesReport>(&s).unwrap(), two);
    }

    /// Updates change what the pages hold, not how many records there are; the report
    /// says how many ran.
    #[test]
    fn updates_run_before_the_measurement() {
        let m: Vec<String> = ["off", "dhl-cc"].iter().map(|s| s.to_string()).collect();
        let p = PagesParams::new(&[64], &m, &["random".into()], 300, 900, 4096, 3).unwrap();
        let r = measure(&p, || {}).unwrap();
        assert_eq!(r.updates, 900);
        assert!(table(&r).contains("then 900 one-row update transactions"));
        for x in &r.rows[0].results {
            // measure_one also read every updated row back (its last update).
            assert_eq!(x.entries, 300, "{}", x.mode);
        }
    }
}
