//! SVG pictures of a report (`--plots DIR`), drawn with plotters' SVG backend, and the
//! `index.html` page that lays out the table and every picture (`bench all --out`).
//!
//! Invariants: plots are derived from the `Report` only (so they can be regenerated from
//! a saved JSON); they need no system fonts (SVG text is rendered by the viewer); a value
//! that is `null` in the report is left out of a picture, never drawn as zero. A bar that
//! is a median over rounds carries a whisker from the smallest to the largest round, so a
//! difference smaller than the whiskers reads as noise. Bars are coloured by family
//! (inpage modes, SQLite, other engines, floor), the same colour in every picture.
//!
//! Files: `throughput_<op>.svg` (ratio to the baseline per contender, one bar per
//! transaction size, whiskers = each round's tx/s ÷ the baseline's median),
//! `tps_<op>_k<k>.svg` (measured tx/s, min–max whiskers), `model_<op>_k<k>.svg` (modeled
//! tx/s for the report's device profile, min–max whiskers; only with device counters),
//! `io_<op>_k<k>.svg` (stacked data + journal KiB per transaction),
//! `latency_<op>_k<k>.svg` (stacked compute / write / sync µs per transaction, accounted
//! contenders), `recovery.svg` (recovery ms per contender, one bar per transaction size,
//! at the smallest table size), `recovery-size.svg` (open ms against table size, log-log,
//! crash and clean-close panels, cold solid / warm dashed, one line per contender; with
//! two or more sizes).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::report::{Report, ResultRow};

/// Contender families, for colours.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    Inpage,
    Sqlite,
    OtherEngine,
    Floor,
}

impl Family {
    pub const ALL: [Family; 4] = [
        Family::Inpage,
        Family::Sqlite,
        Family::OtherEngine,
        Family::Floor,
    ];

    /// The family of a contender name (`contender::all_contenders` naming).
    pub fn of(name: &str) -> Family {
        if name == "floor" {
            Family::Floor
        } else if name.starts_with("sqlite") {
            Family::Sqlite
        } else if name == "redb" || name == "lmdb" {
            Family::OtherEngine
        } else {
            Family::Inpage
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Family::Inpage => "inpage modes",
            Family::Sqlite => "SQLite",
            Family::OtherEngine => "other engines",
            Family::Floor => "floor",
        }
    }

    pub fn color(self) -> RGBColor {
        match self {
            Family::Inpage => RGBColor(31, 119, 180),
            Family::Sqlite => RGBColor(214, 39, 40),
            Family::OtherEngine => RGBColor(44, 160, 44),
            Family::Floor => RGBColor(90, 90, 90),
        }
    }
}

/// (min, max) over rounds per category; `None` where a bar has no rounds.
type Spread = Vec<Option<(f64, f64)>>;

/// A bar chart: one group per category, one bar (or stack segment) per series.
struct Bars {
    title: String,
    y_label: String,
    categories: Vec<String>,
    /// (series name, value per category).
    series: Vec<(String, Vec<Option<f64>>)>,
    /// Per series, per category: (min, max) over rounds (not for stacked charts).
    whiskers: Option<Vec<Spread>>,
    /// Colour bars by the category's family (series get lighter shades) instead of by
    /// series.
    by_family: bool,
    stacked: bool,
    /// A horizontal reference line (e.g. ratio 1.0).
    reference: Option<f64>,
}

fn pe<E: std::fmt::Debug>(e: E) -> String {
    format!("plot: {e:?}")
}

/// `c` mixed toward white by `t` (0 = unchanged).
fn lighter(c: RGBColor, t: f64) -> RGBColor {
    let m = |x: u8| (f64::from(x) + (255.0 - f64::from(x)) * t).round() as u8;
    RGBColor(m(c.0), m(c.1), m(c.2))
}

fn draw(path: &Path, b: &Bars) -> Result<(), String> {
    let n = b.categories.len();
    if n == 0 || b.series.is_empty() {
        return Ok(());
    }
    let top_whisker = b
        .whiskers
        .iter()
        .flatten()
        .flatten()
        .flatten()
        .map(|w| w.1)
        .fold(0.0, f64::max);
    let ymax = if b.stacked {
        (0..n)
            .map(|i| b.series.iter().filter_map(|(_, v)| v[i]).sum::<f64>())
            .fold(0.0, f64::max)
    } else {
        b.series
            .iter()
            .flat_map(|(_, v)| v.iter().flatten().copied())
            .fold(0.0, f64::max)
    }
    .max(top_whisker)
    .max(b.reference.unwrap_or(0.0));
    // Headroom above the tallest bar or whisker for the legend box (upper right), so it
    // does not hide the last bars.
    let ymax = if ymax > 0.0 { ymax * 1.45 } else { 1.0 };
    let width = (200 + n * 60).max(640) as u32;
    let root = SVGBackend::new(path, (width, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(pe)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(&b.title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(140)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..n as f64, 0f64..ymax)
        .map_err(pe)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .x_label_formatter(&|_| String::new())
        .y_desc(b.y_label.as_str())
        .draw()
        .map_err(pe)?;
    let groups = if b.stacked { 1 } else { b.series.len() };
    let slot = 0.8 / groups as f64;
    let nseries = b.series.len();
    let mut base = vec![0.0f64; n];
    for (si, (name, vals)) in b.series.iter().enumerate() {
        let series_color = Palette99::pick(si).to_rgba();
        let shade = if nseries > 1 {
            0.55 * si as f64 / (nseries - 1) as f64
        } else {
            0.0
        };
        let rects: Vec<Rectangle<(f64, f64)>> = vals
            .iter()
            .enumerate()
            .filter_map(|(i, v)| {
                let v = (*v)?;
                let (x0, y0) = if b.stacked {
                    (i as f64 + 0.1, base[i])
                } else {
                    (i as f64 + 0.1 + slot * si as f64, 0.0)
                };
                let style = if b.by_family {
                    lighter(Family::of(&b.categories[i]).color(), shade).filled()
                } else {
                    series_color.filled()
                };
                Some(Rectangle::new([(x0, y0), (x0 + slot, y0 + v)], style))
            })
            .collect();
        if b.stacked {
            for (i, v) in vals.iter().enumerate() {
                base[i] += v.unwrap_or(0.0);
            }
        }
        let drawn = chart.draw_series(rects).map_err(pe)?;
        if !b.by_family {
            drawn.label(name.as_str()).legend(move |(x, y)| {
                Rectangle::new([(x, y - 5), (x + 10, y + 5)], series_color.filled())
            });
        } else if nseries > 1 {
            // Shades stand for the series: label each with a grey of its shade.
            let c = lighter(RGBColor(60, 60, 60), shade);
            drawn
                .label(format!("{name} (shade)"))
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], c.filled()));
        }
        if let Some(w) = b.whiskers.as_ref().and_then(|w| w.get(si)) {
            let mut lines: Vec<PathElement<(f64, f64)>> = Vec::new();
            for (i, lohi) in w.iter().enumerate() {
                let Some((lo, hi)) = *lohi else { continue };
                if vals[i].is_none() {
                    continue;
                }
                let xc = i as f64 + 0.1 + slot * (si as f64 + 0.5);
                let cap = slot * 0.25;
                let st = BLACK.stroke_width(1);
                lines.push(PathElement::new(vec![(xc, lo), (xc, hi)], st));
                lines.push(PathElement::new(vec![(xc - cap, lo), (xc + cap, lo)], st));
                lines.push(PathElement::new(vec![(xc - cap, hi), (xc + cap, hi)], st));
            }
            chart.draw_series(lines).map_err(pe)?;
        }
    }
    if b.by_family {
        for fam in Family::ALL {
            if !b.categories.iter().any(|c| Family::of(c) == fam) {
                continue;
            }
            let c = fam.color();
            chart
                .draw_series(std::iter::empty::<Rectangle<(f64, f64)>>())
                .map_err(pe)?
                .label(fam.label())
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], c.filled()));
        }
    }
    if let Some(r) = b.reference {
        chart
            .draw_series(LineSeries::new(
                [(0.0, r), (n as f64, r)],
                BLACK.stroke_width(1),
            ))
            .map_err(pe)?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(pe)?;
    // Category names, rotated, under each group.
    let style = TextStyle::from(("sans-serif", 13).into_font())
        .transform(FontTransform::Rotate90)
        .pos(Pos::new(HPos::Left, VPos::Center));
    for (i, c) in b.categories.iter().enumerate() {
        let (px, py) = chart.backend_coord(&(i as f64 + 0.5, 0.0));
        root.draw(&Text::new(c.clone(), (px, py + 6), style.clone()))
            .map_err(pe)?;
    }
    root.present().map_err(pe)
}

/// (min, max) of `v`; `None` when empty.
fn min_max(v: &[f64]) -> Option<(f64, f64)> {
    let mut it = v.iter().copied().filter(|x| x.is_finite());
    let first = it.next()?;
    Some(it.fold((first, first), |(lo, hi), x| (lo.min(x), hi.max(x))))
}

/// Distinct values in first-seen order.
fn distinct<T: PartialEq + Clone>(it: impl Iterator<Item = T>) -> Vec<T> {
    let mut v = Vec::new();
    for x in it {
        if !v.contains(&x) {
            v.push(x);
        }
    }
    v
}

fn find<'a>(rows: &[&'a ResultRow], c: &str, k: u32) -> Option<&'a ResultRow> {
    rows.iter()
        .copied()
        .find(|r| r.contender == c && r.ops_per_txn == k)
}

/// One picture written: its title and file name (relative to the plots directory).
pub type Written = (String, String);

fn emit(dir: &Path, file: String, b: Bars, out: &mut Vec<Written>) -> Result<(), String> {
    if b.categories.is_empty() || b.series.is_empty() {
        return Ok(());
    }
    draw(&dir.join(&file), &b)?;
    out.push((b.title, file));
    Ok(())
}

/// Write every picture the report has data for into `dir`; returns what was written, in
/// order, for `write_index`.
pub fn write_all(r: &Report, dir: &Path) -> Result<Vec<Written>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut out = Vec::new();
    let mobi: Vec<&ResultRow> = r
        .results
        .iter()
        .filter(|x| x.workload == "mobibench")
        .collect();
    for op in distinct(mobi.iter().map(|x| x.op.clone())) {
        let rows: Vec<&ResultRow> = mobi.iter().copied().filter(|x| x.op == op).collect();
        let cats = distinct(rows.iter().map(|x| x.contender.clone()));
        let ks = distinct(rows.iter().map(|x| x.ops_per_txn));
        let base = |k: u32| find(&rows, &r.baseline, k).map(|x| x.tx_per_s_median);
        emit(
            dir,
            format!("throughput_{op}.svg"),
            Bars {
                title: format!(
                    "Mobibench {op}: measured throughput relative to {} (whiskers: rounds)",
                    r.baseline
                ),
                y_label: format!("tx/s ÷ {} tx/s", r.baseline),
                categories: cats.clone(),
                series: ks
                    .iter()
                    .map(|&k| {
                        (
                            format!("{k} op/txn"),
                            cats.iter()
                                .map(|c| find(&rows, c, k).and_then(|x| x.ratio_to_baseline))
                                .collect(),
                        )
                    })
                    .collect(),
                whiskers: Some(
                    ks.iter()
                        .map(|&k| {
                            cats.iter()
                                .map(|c| {
                                    let b = base(k).filter(|b| *b > 0.0)?;
                                    let x = find(&rows, c, k)?;
                                    min_max(&x.tx_per_s_rounds).map(|(lo, hi)| (lo / b, hi / b))
                                })
                                .collect()
                        })
                        .collect(),
                ),
                by_family: true,
                stacked: false,
                reference: Some(1.0),
            },
            &mut out,
        )?;
        for &k in &ks {
            let krows: Vec<&ResultRow> = rows
                .iter()
                .copied()
                .filter(|x| x.ops_per_txn == k)
                .collect();
            let kcats: Vec<String> = krows.iter().map(|x| x.contender.clone()).collect();
            emit(
                dir,
                format!("tps_{op}_k{k}.svg"),
                Bars {
                    title: format!(
                        "Mobibench {op}, {k} op/txn: MEASURED tx/s ({} lab; median, whiskers min-max of {} rounds)",
                        r.lab, r.rounds
                    ),
                    y_label: "transactions / s (measured)".into(),
                    categories: kcats.clone(),
                    series: vec![(
                        "tx/s".into(),
                        krows.iter().map(|x| Some(x.tx_per_s_median)).collect(),
                    )],
                    whiskers: Some(vec![krows
                        .iter()
                        .map(|x| min_max(&x.tx_per_s_rounds))
                        .collect()]),
                    by_family: true,
                    stacked: false,
                    reference: None,
                },
                &mut out,
            )?;
            if krows.iter().any(|x| x.model_tx_per_s.is_some()) {
                emit(
                    dir,
                    format!("model_{op}_k{k}.svg"),
                    Bars {
                        title: format!(
                            "Mobibench {op}, {k} op/txn: MODELED tx/s on '{}' (device counters + CPU; whiskers: rounds)",
                            r.device_profile
                        ),
                        y_label: format!("transactions / s (modeled, {})", r.device_profile),
                        categories: kcats.clone(),
                        series: vec![(
                            "modeled tx/s".into(),
                            krows.iter().map(|x| x.model_tx_per_s).collect(),
                        )],
                        whiskers: Some(vec![krows
                            .iter()
                            .map(|x| min_max(&x.model_tx_per_s_rounds))
                            .collect()]),
                        by_family: true,
                        stacked: false,
                        reference: None,
                    },
                    &mut out,
                )?;
            }
            let io_series = vec![
                (
                    "data KiB".to_string(),
                    cats.iter()
                        .map(|c| find(&rows, c, k).and_then(|x| x.data_kib_per_txn))
                        .collect::<Vec<_>>(),
                ),
                (
                    "journal KiB".to_string(),
                    cats.iter()
                        .map(|c| find(&rows, c, k).and_then(|x| x.journal_kib_per_txn))
                        .collect::<Vec<_>>(),
                ),
            ];
            if io_series.iter().any(|(_, v)| v.iter().any(Option::is_some)) {
                emit(
                    dir,
                    format!("io_{op}_k{k}.svg"),
                    Bars {
                        title: format!(
                            "Mobibench {op}, {k} op/txn: KiB written per transaction ({} lab)",
                            r.lab
                        ),
                        y_label: "KiB / transaction".into(),
                        categories: cats.clone(),
                        series: io_series,
                        whiskers: None,
                        by_family: false,
                        stacked: true,
                        reference: None,
                    },
                    &mut out,
                )?;
            }
            let lat: Vec<&ResultRow> = krows
                .iter()
                .copied()
                .filter(|x| x.latency_us.is_some())
                .collect();
            if !lat.is_empty() {
                let part = |f: fn(&crate::report::Latency) -> f64| -> Vec<Option<f64>> {
                    lat.iter().map(|x| x.latency_us.as_ref().map(f)).collect()
                };
                emit(
                    dir,
                    format!("latency_{op}_k{k}.svg"),
                    Bars {
                        title: format!("Mobibench {op}, {k} op/txn: time per transaction"),
                        y_label: "µs / transaction".into(),
                        categories: lat.iter().map(|x| x.contender.clone()).collect(),
                        series: vec![
                            ("compute".into(), part(|l| l.compute)),
                            ("write".into(), part(|l| l.write)),
                            ("sync".into(), part(|l| l.sync)),
                        ],
                        whiskers: None,
                        by_family: false,
                        stacked: true,
                        reference: None,
                    },
                    &mut out,
                )?;
            }
        }
    }
    // The bar chart compares interrupted-transaction sizes at one table size (the
    // smallest); the size axis has its own picture, `recovery-size.svg`.
    let smallest = r
        .results
        .iter()
        .filter(|x| x.workload == "recovery")
        .filter_map(|x| x.records)
        .min();
    let rec: Vec<&ResultRow> = r
        .results
        .iter()
        .filter(|x| x.workload == "recovery" && x.records == smallest)
        .collect();
    if !rec.is_empty() {
        let cats = distinct(rec.iter().map(|x| x.contender.clone()));
        let ks = distinct(rec.iter().map(|x| x.ops_per_txn));
        let ms_rounds = |x: &ResultRow| -> Vec<f64> {
            x.tx_per_s_rounds
                .iter()
                .filter(|t| **t > 0.0)
                .map(|t| 1000.0 / t)
                .collect()
        };
        emit(
            dir,
            "recovery.svg".into(),
            Bars {
                title:
                    "Recovery: reopen + first access after a crash mid-insert (whiskers: rounds)"
                        .into(),
                y_label: "ms".into(),
                categories: cats.clone(),
                series: ks
                    .iter()
                    .map(|&k| {
                        (
                            format!("{k} records"),
                            cats.iter()
                                .map(|c| find(&rec, c, k).and_then(|x| x.recovery_ms_median))
                                .collect(),
                        )
                    })
                    .collect(),
                whiskers: Some(
                    ks.iter()
                        .map(|&k| {
                            cats.iter()
                                .map(|c| find(&rec, c, k).and_then(|x| min_max(&ms_rounds(x))))
                                .collect()
                        })
                        .collect(),
                ),
                by_family: true,
                stacked: false,
                reference: None,
            },
            &mut out,
        )?;
    }
    let sized = size_lines(r);
    if sized.iter().map(|l| l.points.len()).max().unwrap_or(0) >= 2 {
        let file = "recovery-size.svg".to_string();
        let title = draw_size_plot(&dir.join(&file), &sized)?;
        out.push((title, file));
    }
    Ok(out)
}

/// One line of the size plot: a contender in one panel (crash or reopen) and cache
/// state, with (records, median ms, min ms, max ms) per table size.
struct SizeLine {
    contender: String,
    crash: bool,
    cold: bool,
    /// Records in the interrupted transaction (crash lines; 0 for reopen).
    k: u32,
    points: Vec<(f64, f64, f64, f64)>,
}

/// The size plot's lines: recovery/reopen rows with a table size, one line per
/// (panel, cache, contender, interrupted size), points in ascending size.
fn size_lines(r: &Report) -> Vec<SizeLine> {
    let mut lines: Vec<SizeLine> = Vec::new();
    for x in &r.results {
        let (crash, cold) = match x.workload.as_str() {
            "recovery" => (true, true),
            "recovery-warm" => (true, false),
            "reopen" => (false, true),
            "reopen-warm" => (false, false),
            _ => continue,
        };
        let (Some(n), Some(ms)) = (x.records, x.recovery_ms_median) else {
            continue;
        };
        let rounds: Vec<f64> = x
            .tx_per_s_rounds
            .iter()
            .filter(|t| **t > 0.0)
            .map(|t| 1000.0 / t)
            .collect();
        let (lo, hi) = min_max(&rounds).unwrap_or((ms, ms));
        let pt = (n as f64, ms, lo, hi);
        match lines.iter_mut().find(|l| {
            l.contender == x.contender && l.crash == crash && l.cold == cold && l.k == x.ops_per_txn
        }) {
            Some(l) => l.points.push(pt),
            None => lines.push(SizeLine {
                contender: x.contender.clone(),
                crash,
                cold,
                k: x.ops_per_txn,
                points: vec![pt],
            }),
        }
    }
    for l in &mut lines {
        l.points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    lines
}

/// 1200 -> "1.2k", 1000000 -> "1M": short axis labels for record counts.
fn si_count(x: f64) -> String {
    let (v, unit) = if x >= 1e6 {
        (x / 1e6, "M")
    } else if x >= 1e3 {
        (x / 1e3, "k")
    } else {
        (x, "")
    };
    let s = format!("{v:.1}");
    format!("{}{unit}", s.trim_end_matches(".0"))
}

/// A colour per contender: its family's colour, shaded by its rank within the family
/// (so `dhl-cc`, `dhl-tc` and `wal` stay apart while all reading as inpage).
fn contender_color(names: &[String], c: &str) -> RGBColor {
    let fam = Family::of(c);
    let same: Vec<&String> = names.iter().filter(|n| Family::of(n) == fam).collect();
    let i = same.iter().position(|n| *n == c).unwrap_or(0);
    let darker = |x: RGBColor, t: f64| {
        let m = |v: u8| (f64::from(v) * (1.0 - t)).round() as u8;
        RGBColor(m(x.0), m(x.1), m(x.2))
    };
    match i % 3 {
        0 => fam.color(),
        1 => darker(fam.color(), 0.45),
        _ => lighter(fam.color(), 0.5),
    }
}

/// Log-log time against table size: left panel opens after a crash, right panel after a
/// clean close; solid lines with filled dots = cold cache, dashed with open dots = warm;
/// whiskers span the rounds. Returns the title.
fn draw_size_plot(path: &Path, lines: &[SizeLine]) -> Result<String, String> {
    let title = "Open time against table size (log-log; median over rounds, whiskers: rounds)";
    let names = distinct(lines.iter().map(|l| l.contender.clone()));
    let xs = lines.iter().flat_map(|l| l.points.iter().map(|p| p.0));
    let ys = lines
        .iter()
        .flat_map(|l| l.points.iter().flat_map(|p| [p.2, p.3]))
        .filter(|y| *y > 0.0);
    let (xmin, xmax) = xs.fold((f64::MAX, 0f64), |(a, b), x| (a.min(x), b.max(x)));
    let (ymin, ymax) = ys.fold((f64::MAX, 0f64), |(a, b), y| (a.min(y), b.max(y)));
    if xmax <= 0.0 || ymax <= 0.0 {
        return Ok(title.into());
    }
    let xr = (xmin / 1.5)..(xmax * 1.5);
    let yr = (ymin / 2.0)..(ymax * 4.0);
    let root = SVGBackend::new(path, (1280, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(pe)?;
    let root = root.titled(title, ("sans-serif", 18)).map_err(pe)?;
    let panels = root.split_evenly((1, 2));
    let ks = distinct(lines.iter().filter(|l| l.crash).map(|l| l.k));
    for (pi, crash) in [true, false].into_iter().enumerate() {
        let caption = if crash {
            "after a crash (child killed mid-commit): open + first read".to_string()
        } else {
            "after a clean close (reopen): open + first read".to_string()
        };
        let mut chart = ChartBuilder::on(&panels[pi])
            .caption(caption, ("sans-serif", 15))
            .margin(10)
            .x_label_area_size(45)
            .y_label_area_size(60)
            .build_cartesian_2d(xr.clone().log_scale(), yr.clone().log_scale())
            .map_err(pe)?;
        chart
            .configure_mesh()
            .x_desc("records in the table")
            .y_desc("ms")
            .x_labels(6)
            .y_labels(6)
            .light_line_style(WHITE)
            .x_label_formatter(&|x| si_count(*x))
            .y_label_formatter(&|y| format!("{y}"))
            .draw()
            .map_err(pe)?;
        for l in lines.iter().filter(|l| l.crash == crash) {
            let color = contender_color(&names, &l.contender);
            let width = if l.cold { 2 } else { 1 };
            let pts: Vec<(f64, f64)> = l.points.iter().map(|p| (p.0, p.1)).collect();
            let label = format!(
                "{} {}{}",
                l.contender,
                if l.cold { "cold" } else { "warm" },
                if crash && ks.len() > 1 {
                    format!(" k={}", l.k)
                } else {
                    String::new()
                }
            );
            let drawn = if l.cold {
                chart
                    .draw_series(LineSeries::new(pts.clone(), color.stroke_width(width)))
                    .map_err(pe)?
            } else {
                chart
                    .draw_series(DashedLineSeries::new(
                        pts.clone(),
                        6,
                        4,
                        color.stroke_width(width),
                    ))
                    .map_err(pe)?
            };
            let cold = l.cold;
            drawn.label(label).legend(move |(x, y)| {
                let st = if cold {
                    color.stroke_width(2)
                } else {
                    color.stroke_width(1)
                };
                PathElement::new(vec![(x, y), (x + 16, y)], st)
            });
            let dots = pts.iter().map(|&p| {
                let st = if l.cold {
                    color.filled()
                } else {
                    color.stroke_width(1)
                };
                Circle::new(p, 3, st)
            });
            chart.draw_series(dots).map_err(pe)?;
            let whiskers = l
                .points
                .iter()
                .filter(|p| p.3 > p.2)
                .map(|p| PathElement::new(vec![(p.0, p.2), (p.0, p.3)], color.stroke_width(1)));
            chart.draw_series(whiskers).map_err(pe)?;
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .label_font(("sans-serif", 11))
            .position(SeriesLabelPosition::UpperLeft)
            .draw()
            .map_err(pe)?;
    }
    root.present().map_err(pe)?;
    Ok(title.into())
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// `dir/index.html`: the table (as printed, preformatted), a legend of what is modeled,
/// then every picture in `files` (paths relative to `dir/plots`). Self-contained: no
/// script, no external resources, so any browser (or a headless one) renders it.
pub fn write_index(r: &Report, table: &str, files: &[Written], dir: &Path) -> Result<(), String> {
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>inpage bench results</title>\n<style>\n\
         body {{ font-family: sans-serif; margin: 1.5em; }}\n\
         pre {{ font-size: 12px; overflow-x: auto; background: #f6f6f6; padding: 0.8em; }}\n\
         .plots {{ display: flex; flex-wrap: wrap; gap: 1em; }}\n\
         figure {{ margin: 0; border: 1px solid #ddd; padding: 0.4em; }}\n\
         figure img {{ max-width: 100%; height: auto; }}\n\
         .fam span {{ display: inline-block; width: 0.9em; height: 0.9em; margin: 0 0.3em 0 1em; }}\n\
         </style>\n</head>\n<body>\n<h1>inpage bench results</h1>\n"
    );
    let _ = writeln!(
        h,
        "<p>lab <b>{}</b>, {} rounds, baseline <b>{}</b>, device profile <b>{}</b>. \
         Medians over rounds; whiskers span the smallest to the largest round.</p>",
        html_escape(&r.lab),
        r.rounds,
        html_escape(&r.baseline),
        html_escape(&r.device_profile)
    );
    if !r.model_note.is_empty() {
        let _ = writeln!(h, "<p><i>{}</i></p>", html_escape(&r.model_note));
    }
    let _ = write!(h, "<p class=\"fam\">colours:");
    for f in Family::ALL {
        let c = f.color();
        let _ = write!(
            h,
            "<span style=\"background: rgb({},{},{})\"></span>{}",
            c.0,
            c.1,
            c.2,
            f.label()
        );
    }
    let _ = writeln!(h, "</p>");
    let _ = writeln!(h, "<h2>Table</h2>\n<pre>{}</pre>", html_escape(table));
    let _ = writeln!(h, "<h2>Plots</h2>\n<div class=\"plots\">");
    for (title, file) in files {
        let rel: PathBuf = Path::new("plots").join(file);
        let _ = writeln!(
            h,
            "<figure><img src=\"{}\" alt=\"{}\"><figcaption>{}</figcaption></figure>",
            html_escape(&rel.to_string_lossy()),
            html_escape(title),
            html_escape(title)
        );
    }
    let _ = writeln!(h, "</div>\n</body>\n</html>");
    let p = dir.join("index.html");
    std::fs::write(&p, h).map_err(|e| format!("{}: {e}", p.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{Latency, ResultRow, SqliteBuild};

    fn row(c: &str, w: &str, op: &str, k: u32) -> ResultRow {
        ResultRow {
            contender: c.into(),
            workload: w.into(),
            op: op.into(),
            ops_per_txn: k,
            txns: 10,
            tx_per_s_median: 100.0,
            tx_per_s_rounds: vec![90.0, 100.0, 130.0],
            ratio_to_baseline: Some(1.5),
            data_kib_per_txn: Some(8.0),
            journal_kib_per_txn: None,
            flushes_per_txn: None,
            write_calls_per_txn: None,
            unaligned_writes_per_txn: None,
            sync_calls_per_txn: None,
            latency_us: Some(Latency {
                compute: 1.0,
                write: 2.0,
                sync: 3.0,
            }),
            commit_latency_us: None,
            recovery_ms_median: Some(4.0),
            write_reqs_per_txn: None,
            read_reqs_per_txn: None,
            read_kib_per_txn: None,
            cpu_us_per_txn: Some(10.0),
            user_us_per_txn: None,
            sys_us_per_txn: None,
            model_us_per_txn: Some(2000.0),
            model_tx_per_s: Some(500.0),
            model_tx_per_s_rounds: vec![498.0, 500.0, 503.0],
            model_ratio_to_baseline: Some(1.0),
            records: None,
            build_ms: None,
            read_call_kib_per_txn: None,
            open_ms_median: None,
            first_write_ms_median: None,
            checkpoint: None,
            checkpoint_share: None,
            pages_dirtied_per_txn: None,
        }
    }

    /// A recovery/reopen row of a table of `n` records whose rounds took `ms` each.
    fn sized(c: &str, w: &str, n: u64, ms: &[f64]) -> ResultRow {
        let mut x = row(c, w, "insert", if w.starts_with("reopen") { 0 } else { 16 });
        x.records = Some(n);
        x.tx_per_s_rounds = ms.iter().map(|m| 1000.0 / m).collect();
        x.recovery_ms_median = crate::report::median(ms);
        x
    }

    #[test]
    fn size_plot_has_a_line_per_contender_panel_and_cache() {
        let dir = tempfile::tempdir().unwrap();
        let mut rows = Vec::new();
        for (n, scale) in [(1200u64, 1.0), (1_000_000, 50.0)] {
            rows.push(sized(
                "dhl-cc",
                "recovery",
                n,
                &[1.0 * scale, 2.0 * scale, 4.0 * scale],
            ));
            rows.push(sized("dhl-cc", "reopen-warm", n, &[0.5, 0.5, 0.5]));
            rows.push(sized("sqlite-wal", "recovery", n, &[1.5, 1.0, 1.2]));
        }
        // A size with only one point for a contender still draws its dot.
        rows.push(sized("wal", "reopen", 1200, &[0.8]));
        let lines = size_lines(&report(rows.clone()));
        assert_eq!(lines.len(), 4);
        let dhl = lines
            .iter()
            .find(|l| l.contender == "dhl-cc" && l.crash && l.cold)
            .unwrap();
        assert_eq!(
            dhl.points,
            vec![(1200.0, 2.0, 1.0, 4.0), (1e6, 100.0, 50.0, 200.0)],
            "median and round spread per size, ascending"
        );
        let warm = lines.iter().find(|l| !l.crash && !l.cold).unwrap();
        assert_eq!((warm.contender.as_str(), warm.k), ("dhl-cc", 0));
        let files = write_all(&report(rows), dir.path()).unwrap();
        assert!(
            files.iter().any(|(_, f)| f == "recovery-size.svg"),
            "{files:?}"
        );
        let svg = std::fs::read_to_string(dir.path().join("recovery-size.svg")).unwrap();
        for s in [
            "dhl-cc cold",
            "dhl-cc warm",
            "sqlite-wal cold",
            "wal cold",
            "1M",
            "10k",
        ] {
            assert!(svg.contains(s), "{s} in the size plot");
        }
        // The bar chart keeps one table size: the smallest.
        let bars = std::fs::read_to_string(dir.path().join("recovery.svg")).unwrap();
        assert!(bars.contains("<rect"));
        // One size only: no size plot.
        let one = dir.path().join("one");
        let files = write_all(
            &report(vec![sized("dhl-cc", "recovery", 1200, &[1.0])]),
            &one,
        )
        .unwrap();
        assert!(files.iter().all(|(_, f)| f != "recovery-size.svg"));
        assert_eq!(si_count(1200.0), "1.2k");
        assert_eq!(si_count(100_000.0), "100k");
        assert_eq!(si_count(1e6), "1M");
        assert_eq!(si_count(200.0), "200");
    }

    fn report(rows: Vec<ResultRow>) -> Report {
        Report {
            lab: "ext4".into(),
            rounds: 3,
            baseline: "sqlite-wal".into(),
            device_profile: "emmc".into(),
            model_note: crate::report::model_note("emmc"),
            sqlite: SqliteBuild::default(),
            results: rows,
            not_applicable: Vec::new(),
            notes: Vec::new(),
        }
    }

    #[test]
    fn writes_svgs_with_whiskers_and_family_colours() {
        let dir = tempfile::tempdir().unwrap();
        let r = report(vec![
            row("dhl-cc", "mobibench", "insert", 1),
            row("sqlite-wal", "mobibench", "insert", 1),
            row("floor", "mobibench", "insert", 1),
            row("dhl-cc", "mobibench", "insert", 4),
            row("dhl-cc", "recovery", "insert", 1),
        ]);
        let files = write_all(&r, dir.path()).unwrap();
        let names: Vec<&str> = files.iter().map(|(_, f)| f.as_str()).collect();
        for f in [
            "throughput_insert.svg",
            "tps_insert_k1.svg",
            "model_insert_k1.svg",
            "io_insert_k1.svg",
            "latency_insert_k4.svg",
            "recovery.svg",
        ] {
            assert!(names.contains(&f), "{f} listed in {names:?}");
            let s = std::fs::read_to_string(dir.path().join(f)).unwrap();
            assert!(s.starts_with("<svg") && s.contains("<rect"), "{f}");
        }
        let tps = std::fs::read_to_string(dir.path().join("tps_insert_k1.svg")).unwrap();
        // Family colours: inpage blue, SQLite red, floor grey, each bar filled with its own.
        for c in [Family::Inpage, Family::Sqlite, Family::Floor] {
            let RGBColor(r, g, b) = c.color();
            let hex = format!("#{r:02X}{g:02X}{b:02X}");
            assert!(tps.contains(&hex), "{hex} in tps plot");
        }
        // Whiskers: a vertical line per bar (3 bars x 3 segments).
        assert!(tps.matches("<polyline").count() >= 9, "{tps}");
        assert!(tps.contains("MEASURED"));
        let model = std::fs::read_to_string(dir.path().join("model_insert_k1.svg")).unwrap();
        assert!(model.contains("MODELED") && model.contains("emmc"));
    }

    #[test]
    fn no_model_plot_without_device_counters() {
        let dir = tempfile::tempdir().unwrap();
        let mut a = row("a", "mobibench", "update", 1);
        a.model_tx_per_s = None;
        a.model_tx_per_s_rounds.clear();
        let files = write_all(&report(vec![a]), dir.path()).unwrap();
        assert!(
            files.iter().all(|(_, f)| !f.starts_with("model_")),
            "{files:?}"
        );
        assert!(!dir.path().join("model_update_k1.svg").exists());
    }

    #[test]
    fn index_lays_out_table_and_every_plot() {
        let dir = tempfile::tempdir().unwrap();
        let r = report(vec![
            row("dhl-cc", "mobibench", "insert", 1),
            row("sqlite-wal", "mobibench", "insert", 1),
        ]);
        let files = write_all(&r, &dir.path().join("plots")).unwrap();
        write_index(&r, "workload  op <table>\n", &files, dir.path()).unwrap();
        let h = std::fs::read_to_string(dir.path().join("index.html")).unwrap();
        assert!(h.starts_with("<!DOCTYPE html>") && h.trim_end().ends_with("</html>"));
        assert!(
            h.contains("<pre>workload  op &lt;table&gt;"),
            "table escaped"
        );
        for (_, f) in &files {
            assert!(h.contains(&format!("src=\"plots/{f}\"")), "{f}");
            assert!(dir.path().join("plots").join(f).exists());
        }
        assert!(h.contains("device profile <b>emmc</b>") && h.contains("MODELED"));
    }

    #[test]
    fn families() {
        assert_eq!(Family::of("floor"), Family::Floor);
        assert_eq!(Family::of("sqlite-android-wal"), Family::Sqlite);
        assert_eq!(Family::of("lmdb"), Family::OtherEngine);
        assert_eq!(Family::of("dhl-cc"), Family::Inpage);
        assert_eq!(min_max(&[3.0, 1.0, 2.0]), Some((1.0, 3.0)));
        assert_eq!(min_max(&[]), None);
    }
}
