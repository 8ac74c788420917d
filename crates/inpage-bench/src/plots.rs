//! SVG pictures of a report (`--plots DIR`), drawn with plotters' SVG backend.
//!
//! Invariants: plots are derived from the `Report` only (so they can be regenerated from
//! a saved JSON); they need no system fonts (SVG text is rendered by the viewer); a value
//! that is `null` in the report is left out of a picture, never drawn as zero.
//!
//! Files: `throughput_<op>.svg` (ratio to the baseline per contender, one bar per
//! transaction size), `io_<op>_k<k>.svg` (stacked data + journal KiB per transaction),
//! `latency_<op>_k<k>.svg` (stacked compute / write / sync µs per transaction, accounted
//! contenders), `recovery.svg` (recovery ms per contender, one bar per transaction size).

use std::path::Path;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::report::{Report, ResultRow};

/// A bar chart: one group per category, one bar (or stack segment) per series.
struct Bars {
    title: String,
    y_label: String,
    categories: Vec<String>,
    /// (series name, value per category).
    series: Vec<(String, Vec<Option<f64>>)>,
    stacked: bool,
    /// A horizontal reference line (e.g. ratio 1.0).
    reference: Option<f64>,
}

fn pe<E: std::fmt::Debug>(e: E) -> String {
    format!("plot: {e:?}")
}

fn draw(path: &Path, b: &Bars) -> Result<(), String> {
    let n = b.categories.len();
    if n == 0 || b.series.is_empty() {
        return Ok(());
    }
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
    .max(b.reference.unwrap_or(0.0));
    let ymax = if ymax > 0.0 { ymax * 1.15 } else { 1.0 };
    let width = (200 + n * 60).max(640) as u32;
    let root = SVGBackend::new(path, (width, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(pe)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(&b.title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(120)
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
    let mut base = vec![0.0f64; n];
    for (si, (name, vals)) in b.series.iter().enumerate() {
        let color = Palette99::pick(si).to_rgba();
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
                Some(Rectangle::new(
                    [(x0, y0), (x0 + slot, y0 + v)],
                    color.filled(),
                ))
            })
            .collect();
        if b.stacked {
            for (i, v) in vals.iter().enumerate() {
                base[i] += v.unwrap_or(0.0);
            }
        }
        chart
            .draw_series(rects)
            .map_err(pe)?
            .label(name.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], color.filled()));
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

/// Write every picture the report has data for into `dir`.
pub fn write_all(r: &Report, dir: &Path) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mobi: Vec<&ResultRow> = r
        .results
        .iter()
        .filter(|x| x.workload == "mobibench")
        .collect();
    for op in distinct(mobi.iter().map(|x| x.op.clone())) {
        let rows: Vec<&ResultRow> = mobi.iter().copied().filter(|x| x.op == op).collect();
        let cats = distinct(rows.iter().map(|x| x.contender.clone()));
        let ks = distinct(rows.iter().map(|x| x.ops_per_txn));
        draw(
            &dir.join(format!("throughput_{op}.svg")),
            &Bars {
                title: format!("Mobibench {op}: throughput relative to {}", r.baseline),
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
                stacked: false,
                reference: Some(1.0),
            },
        )?;
        for &k in &ks {
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
                draw(
                    &dir.join(format!("io_{op}_k{k}.svg")),
                    &Bars {
                        title: format!(
                            "Mobibench {op}, {k} op/txn: KiB written per transaction ({} lab)",
                            r.lab
                        ),
                        y_label: "KiB / transaction".into(),
                        categories: cats.clone(),
                        series: io_series,
                        stacked: true,
                        reference: None,
                    },
                )?;
            }
            let lat: Vec<&ResultRow> = rows
                .iter()
                .copied()
                .filter(|x| x.ops_per_txn == k && x.latency_us.is_some())
                .collect();
            if !lat.is_empty() {
                let part = |f: fn(&crate::report::Latency) -> f64| -> Vec<Option<f64>> {
                    lat.iter().map(|x| x.latency_us.as_ref().map(f)).collect()
                };
                draw(
                    &dir.join(format!("latency_{op}_k{k}.svg")),
                    &Bars {
                        title: format!("Mobibench {op}, {k} op/txn: time per transaction"),
                        y_label: "µs / transaction".into(),
                        categories: lat.iter().map(|x| x.contender.clone()).collect(),
                        series: vec![
                            ("compute".into(), part(|l| l.compute)),
                            ("write".into(), part(|l| l.write)),
                            ("sync".into(), part(|l| l.sync)),
                        ],
                        stacked: true,
                        reference: None,
                    },
                )?;
            }
        }
    }
    let rec: Vec<&ResultRow> = r
        .results
        .iter()
        .filter(|x| x.workload == "recovery")
        .collect();
    if !rec.is_empty() {
        let cats = distinct(rec.iter().map(|x| x.contender.clone()));
        let ks = distinct(rec.iter().map(|x| x.ops_per_txn));
        draw(
            &dir.join("recovery.svg"),
            &Bars {
                title: "Recovery: reopen + first access after a crash mid-insert".into(),
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
                stacked: false,
                reference: None,
            },
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{Latency, ResultRow};

    fn row(c: &str, w: &str, op: &str, k: u32) -> ResultRow {
        ResultRow {
            contender: c.into(),
            workload: w.into(),
            op: op.into(),
            ops_per_txn: k,
            txns: 10,
            tx_per_s_median: 100.0,
            tx_per_s_rounds: vec![100.0],
            ratio_to_baseline: Some(1.5),
            data_kib_per_txn: Some(8.0),
            journal_kib_per_txn: None,
            flushes_per_txn: None,
            write_calls_per_txn: None,
            sync_calls_per_txn: None,
            latency_us: Some(Latency {
                compute: 1.0,
                write: 2.0,
                sync: 3.0,
            }),
            recovery_ms_median: Some(4.0),
        }
    }

    #[test]
    fn writes_svgs() {
        let dir = tempfile::tempdir().unwrap();
        let r = Report {
            lab: "none".into(),
            rounds: 1,
            baseline: "b".into(),
            results: vec![
                row("a", "mobibench", "insert", 1),
                row("b", "mobibench", "insert", 1),
                row("a", "mobibench", "insert", 4),
                row("a", "recovery", "insert", 1),
            ],
        };
        write_all(&r, dir.path()).unwrap();
        for f in [
            "throughput_insert.svg",
            "io_insert_k1.svg",
            "latency_insert_k4.svg",
            "recovery.svg",
        ] {
            let s = std::fs::read_to_string(dir.path().join(f)).unwrap();
            assert!(s.starts_with("<svg") && s.contains("<rect"), "{f}");
        }
    }
}
