//! `bench program`: an outside program (a client built against `libsqlite3`, such as the
//! ESOS-Lab Mobibench client) run in the lab once per contender and round, priced by the
//! same device counters and model as every other section.
//!
//! A contender here is a label plus environment assignments (`stock
//! LD_LIBRARY_PATH=/opt/stock/lib`, `inpage LD_LIBRARY_PATH=/opt/inpage/lib`): the same
//! program binary meets a different `libsqlite3` through the dynamic linker, which is how
//! an app swaps the library in.
//!
//! Invariants:
//! - Every run gets a new empty directory on the lab (`{dir}` in the program's arguments
//!   and in the contender's values names it), so no run sees another's files but what
//!   its own `--setup` command left there.
//! - The measured window is the program's whole life plus one `syncfs` of the lab after
//!   it exits: what it left dirty in the page cache is charged to it, and the window
//!   before it starts is made clean by a `syncfs` (the previous run's directory is
//!   removed before that), so no run pays for another's writeback.
//! - CPU is the child's own (`RUSAGE_CHILDREN`, user + system, its threads included),
//!   measured across the wait for it alone; the modeled time is the device model of the
//!   window's counters plus that CPU, as in `device::Profile::model_us`.
//! - A program that exits non-zero (or is killed) fails the whole run with its stderr:
//!   a contender that fails never reports a number.
//! - Rounds interleave the contenders and rotate their order (`runner::rotation`); the
//!   summary is medians per contender, ratios against the baseline's medians.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use clap::Args;
use serde::Serialize;

use crate::device::{self, DeviceCounters, Profile};
use crate::lab::{self, check_interrupted};
use crate::{check_positive, make_lab, LabArgs};

/// What `{dir}` is replaced with in arguments and environment values.
const DIR_TOKEN: &str = "{dir}";

#[derive(Args, Debug, Clone)]
pub struct ProgramArgs {
    #[command(flatten)]
    pub lab: LabArgs,
    /// A contender: its label, then `NAME=VALUE` environment assignments, separated by
    /// spaces (`--contender "stock LD_LIBRARY_PATH=/opt/stock"`). Repeat for each; at
    /// least one.
    #[arg(long = "contender", required = true)]
    pub contenders: Vec<String>,
    /// Label every ratio is relative to (default: the first contender).
    #[arg(long)]
    pub baseline: Option<String>,
    /// Rounds; contenders are interleaved within each round, results are medians.
    #[arg(long, default_value_t = 3)]
    pub rounds: u32,
    /// Units of work one run does (its transactions, say): per-unit columns divide by it.
    #[arg(long, default_value_t = 1)]
    pub per: u64,
    /// A command run first in each run's directory, under the contender's environment and
    /// outside the measured window (words split at spaces, `{dir}` substituted): the
    /// load an update or delete run needs.
    #[arg(long)]
    pub setup: Option<String>,
    /// Also count each contender's CPU exactly: one more run (after its setup, in a new
    /// directory, outside the measured rounds) under `valgrind --tool=callgrind`, whose
    /// instruction count (every thread) does not move with the machine's load.
    #[arg(long)]
    pub instructions: bool,
    /// Write the results (every run and the summary) as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// The program and its arguments, after `--`; `{dir}` is the run's directory.
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

/// One contender as parsed from `--contender`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ProgContender {
    pub label: String,
    pub env: Vec<(String, String)>,
}

impl ProgContender {
    /// Parse `LABEL [NAME=VALUE ...]`.
    pub fn parse(s: &str) -> Result<ProgContender, String> {
        let mut words = s.split_whitespace();
        let label = words
            .next()
            .ok_or_else(|| "--contender: empty (want LABEL [NAME=VALUE ...])".to_string())?;
        if label.contains('=') {
            return Err(format!(
                "--contender '{s}': the first word is the label, not an assignment"
            ));
        }
        let env = words
            .map(|w| match w.split_once('=') {
                Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
                _ => Err(format!(
                    "--contender '{s}': '{w}' is not a NAME=VALUE assignment"
                )),
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ProgContender {
            label: label.to_string(),
            env,
        })
    }
}

/// One run of the program.
#[derive(Clone, Debug, Serialize)]
pub struct ProgramRun {
    pub contender: String,
    pub round: u32,
    pub wall_ms: f64,
    pub cpu_ms: f64,
    /// The part of `cpu_ms` spent in the kernel (system time).
    pub sys_ms: f64,
    /// The run's totals (`DeviceCounters::from_lab` over one unit); None in lab
    /// `none` (no device counters).
    pub counters: Option<DeviceCounters>,
    /// Device model of `counters` plus `cpu_ms`, ms; None without counters.
    pub modeled_ms: Option<f64>,
    /// The last lines of the program's standard output (its own figures).
    pub stdout_tail: String,
}

/// Medians of one contender, per unit (`--per`).
#[derive(Clone, Debug, Serialize)]
pub struct ProgramSummary {
    pub contender: String,
    pub wall_us: f64,
    pub cpu_us: f64,
    /// The kernel's part of `cpu_us`.
    pub sys_us: f64,
    pub modeled_us: Option<f64>,
    pub write_reqs: Option<f64>,
    pub write_kib: Option<f64>,
    pub flushes: Option<f64>,
    /// Instructions per unit under callgrind (`--instructions`).
    pub instructions: Option<f64>,
    /// This row's instructions ÷ the baseline's.
    pub instructions_ratio: Option<f64>,
    /// Baseline's modeled time ÷ this one's (> 1: faster than the baseline); wall time
    /// without counters.
    pub speedup: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct ProgramReport {
    pub lab: String,
    pub device_profile: String,
    pub command: Vec<String>,
    pub per: u64,
    pub baseline: String,
    pub contenders: Vec<ProgContender>,
    pub runs: Vec<ProgramRun>,
    /// Callgrind's instruction count of one run per contender (`--instructions`).
    pub instructions: Vec<(String, u64)>,
    pub summary: Vec<ProgramSummary>,
}

/// `inpage bench program`.
pub fn run(a: &ProgramArgs) -> Result<(), String> {
    check_positive(u64::from(a.rounds), "--rounds")?;
    check_positive(a.per, "--per")?;
    let cs = a
        .contenders
        .iter()
        .map(|s| ProgContender::parse(s))
        .collect::<Result<Vec<_>, _>>()?;
    for (i, c) in cs.iter().enumerate() {
        if cs[..i].iter().any(|d| d.label == c.label) {
            return Err(format!("--contender: label '{}' given twice", c.label));
        }
    }
    let baseline = a.baseline.clone().unwrap_or_else(|| cs[0].label.clone());
    if !cs.iter().any(|c| c.label == baseline) {
        return Err(format!("--baseline {baseline} is not among the contenders"));
    }
    let profile = device::profile(&a.lab.device)?;
    lab::install_interrupt_handler();
    let lab = make_lab(&a.lab)?;
    let setup: Option<Vec<String>> = a
        .setup
        .as_ref()
        .map(|s| s.split_whitespace().map(str::to_string).collect());
    let mut runs = Vec::new();
    for round in 0..a.rounds {
        for i in crate::runner::rotation(cs.len(), round) {
            check_interrupted()?;
            let dir = lab
                .root()
                .join(format!("program-{}-{round}", sanitize(&cs[i].label)));
            let r = run_once(
                &lab,
                &profile,
                &cs[i],
                round,
                &dir,
                setup.as_deref(),
                &a.command,
            );
            let _ = std::fs::remove_dir_all(&dir);
            let r = r?;
            eprintln!(
                "round {} {}: {:.0} ms wall, {:.0} ms CPU{}",
                round + 1,
                r.contender,
                r.wall_ms,
                r.cpu_ms,
                r.modeled_ms
                    .map(|m| format!(", {m:.0} ms modeled"))
                    .unwrap_or_default()
            );
            runs.push(r);
        }
    }
    let mut instructions = Vec::new();
    if a.instructions {
        let mut cmd = vec![
            "valgrind".to_string(),
            "--tool=callgrind".into(),
            "--callgrind-out-file=/dev/null".into(),
        ];
        cmd.extend(a.command.iter().cloned());
        for c in &cs {
            check_interrupted()?;
            let dir = lab
                .root()
                .join(format!("program-{}-callgrind", sanitize(&c.label)));
            let r = (|| {
                fresh_dir(&dir)?;
                if let Some(setup) = &setup {
                    spawn(c, 0, &dir, setup)?;
                }
                let out = spawn(c, 0, &dir, &cmd)
                    .map_err(|e| format!("{e} (is valgrind installed? --instructions runs it)"))?;
                collected(&String::from_utf8_lossy(&out.stderr)).ok_or_else(|| {
                    format!("callgrind printed no instruction count for {}", c.label)
                })
            })();
            let _ = std::fs::remove_dir_all(&dir);
            let n = r?;
            eprintln!("{}: {n} instructions under callgrind", c.label);
            instructions.push((c.label.clone(), n));
        }
    }
    let mut summary = summarize(&cs, &runs, &baseline, a.per);
    let base_ins = instructions
        .iter()
        .find(|(l, _)| *l == baseline)
        .map(|(_, n)| *n);
    for x in &mut summary {
        if let Some((_, n)) = instructions.iter().find(|(l, _)| *l == x.contender) {
            x.instructions = Some(*n as f64 / a.per as f64);
            x.instructions_ratio = base_ins.map(|b| *n as f64 / b as f64);
        }
    }
    let report = ProgramReport {
        lab: lab.name().to_string(),
        device_profile: profile.name.to_string(),
        command: a.command.clone(),
        per: a.per,
        baseline,
        contenders: cs,
        runs,
        instructions,
        summary,
    };
    drop(lab);
    print!("{}", render(&report));
    if let Some(p) = &a.json {
        let text = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
        std::fs::write(p, text).map_err(|e| format!("{}: {e}", p.display()))?;
    }
    Ok(())
}

/// A label as a file-name piece.
fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn substitute(s: &str, dir: &Path) -> OsString {
    OsString::from(s.replace(DIR_TOKEN, &dir.to_string_lossy()))
}

/// User and system CPU of the waited-for children so far, ms.
fn children_cpu_ms() -> (f64, f64) {
    // SAFETY: getrusage writes one rusage into the zeroed struct we own.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru);
        ru
    };
    let ms = |t: libc::timeval| t.tv_sec as f64 * 1e3 + t.tv_usec as f64 / 1e3;
    (ms(ru.ru_utime), ms(ru.ru_stime))
}

fn syncfs(dir: &Path) -> Result<(), String> {
    let d = std::fs::File::open(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    rustix::fs::syncfs(&d).map_err(|e| format!("{}: syncfs: {e}", dir.display()))
}

/// `dir`, new and empty.
fn fresh_dir(dir: &Path) -> Result<(), String> {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))
}

/// Run `command` in `dir` under `c`'s environment to its end; its output, or an error
/// with its stderr's last lines if it did not exit 0.
fn spawn(
    c: &ProgContender,
    round: u32,
    dir: &Path,
    command: &[String],
) -> Result<std::process::Output, String> {
    let (prog, args) = command
        .split_first()
        .ok_or_else(|| "no program given".to_string())?;
    let mut cmd = Command::new(substitute(prog, dir));
    cmd.args(args.iter().map(|a| substitute(a, dir)))
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in &c.env {
        cmd.env(k, substitute(v, dir));
    }
    let out = cmd
        .output()
        .map_err(|e| format!("{prog} ({}): {e}", c.label))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = err.lines().rev().take(5).collect();
        return Err(format!(
            "{prog} under contender {} (round {}): {}; stderr: {}",
            c.label,
            round + 1,
            out.status,
            tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
        ));
    }
    Ok(out)
}

fn run_once(
    lab: &lab::Lab,
    profile: &Profile,
    c: &ProgContender,
    round: u32,
    dir: &Path,
    setup: Option<&[String]>,
    command: &[String],
) -> Result<ProgramRun, String> {
    fresh_dir(dir)?;
    if let Some(setup) = setup {
        spawn(c, round, dir, setup)?;
    }
    syncfs(lab.root())?;
    let before = lab.dev_stats()?;
    let cpu0 = children_cpu_ms();
    let t0 = Instant::now();
    let out = spawn(c, round, dir, command)?;
    let cpu1 = children_cpu_ms();
    let (user_ms, sys_ms) = (cpu1.0 - cpu0.0, cpu1.1 - cpu0.1);
    let cpu_ms = user_ms + sys_ms;
    syncfs(lab.root())?;
    let wall_ms = t0.elapsed().as_secs_f64() * 1e3;
    let after = lab.dev_stats()?;
    let counters = match (before, after) {
        (Some((d0, j0)), Some((d1, j1))) => {
            let c = DeviceCounters::from_lab(&d1.delta(&d0), &j1.delta(&j0), 1.0)
                .ok_or_else(|| "the kernel has no flush counters (pre-5.5)".to_string())?;
            Some(c)
        }
        _ => None,
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().filter(|l| !l.trim().is_empty()).collect();
    let stdout_tail = lines[lines.len().saturating_sub(5)..].join("\n");
    Ok(ProgramRun {
        contender: c.label.clone(),
        round,
        wall_ms,
        cpu_ms,
        sys_ms,
        modeled_ms: counters.map(|k| profile.model_us(&k, cpu_ms * 1e3) / 1e3),
        counters,
        stdout_tail,
    })
}

/// The total of callgrind's `Collected : N` line (its last, if several processes ran).
fn collected(stderr: &str) -> Option<u64> {
    stderr
        .lines()
        .rev()
        .filter_map(|l| l.split_once("Collected :").map(|(_, n)| n.trim()))
        .find_map(|n| n.replace(',', "").parse().ok())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Medians per contender, per unit, in contender order.
pub fn summarize(
    cs: &[ProgContender],
    runs: &[ProgramRun],
    baseline: &str,
    per: u64,
) -> Vec<ProgramSummary> {
    let per = per as f64;
    let med = |label: &str, f: &dyn Fn(&ProgramRun) -> Option<f64>| -> Option<f64> {
        let v: Vec<f64> = runs
            .iter()
            .filter(|r| r.contender == label)
            .filter_map(f)
            .collect();
        (!v.is_empty()).then(|| median(v) * 1e3 / per)
    };
    let cost =
        |label: &str| med(label, &|r| r.modeled_ms).or_else(|| med(label, &|r| Some(r.wall_ms)));
    let base = cost(baseline);
    cs.iter()
        .map(|c| {
            let l = c.label.as_str();
            let counter = |f: fn(&DeviceCounters) -> f64| {
                med(l, &|r| r.counters.as_ref().map(|k| f(k) / 1e3))
            };
            ProgramSummary {
                contender: c.label.clone(),
                wall_us: med(l, &|r| Some(r.wall_ms)).unwrap_or(f64::NAN),
                cpu_us: med(l, &|r| Some(r.cpu_ms)).unwrap_or(f64::NAN),
                sys_us: med(l, &|r| Some(r.sys_ms)).unwrap_or(f64::NAN),
                modeled_us: med(l, &|r| r.modeled_ms),
                write_reqs: counter(|k| k.write_reqs),
                write_kib: counter(|k| k.write_kib),
                flushes: counter(|k| k.flushes),
                instructions: None,
                instructions_ratio: None,
                speedup: match (base, cost(l)) {
                    (Some(b), Some(x)) if x > 0.0 => b / x,
                    _ => f64::NAN,
                },
            }
        })
        .collect()
}

/// The summary table, one row per contender.
pub fn render(r: &ProgramReport) -> String {
    let mut s = format!(
        "bench program: `{}`, lab {}, device {}, {} run(s) per contender, medians per unit \
         (÷ {}); speedup = {}'s {} time ÷ the row's\n",
        r.command.join(" "),
        r.lab,
        r.device_profile,
        r.runs.len() / r.contenders.len().max(1),
        r.per,
        r.baseline,
        if r.summary.iter().any(|x| x.modeled_us.is_some()) {
            "modeled"
        } else {
            "wall"
        }
    );
    s.push_str(&format!(
        "{:<16} {:>11} {:>10} {:>13} {:>10} {:>10} {:>8} {:>8} {:>13}\n",
        "contender",
        "modeled µs",
        "wall µs",
        "CPU (sys) µs",
        "writes",
        "KiB",
        "flushes",
        "speedup",
        "instructions"
    ));
    let opt = |v: Option<f64>, p: usize| v.map_or("-".to_string(), |x| format!("{x:.p$}"));
    for x in &r.summary {
        let ins = match (x.instructions, x.instructions_ratio) {
            (Some(n), Some(q)) => format!("{n:.0} ({q:.2}×)"),
            (Some(n), None) => format!("{n:.0}"),
            _ => "-".into(),
        };
        s.push_str(&format!(
            "{:<16} {:>11} {:>10.0} {:>13} {:>10} {:>10} {:>8} {:>8.2} {:>13}\n",
            x.contender,
            opt(x.modeled_us, 0),
            x.wall_us,
            format!("{:.0} ({:.0})", x.cpu_us, x.sys_us),
            opt(x.write_reqs, 2),
            opt(x.write_kib, 1),
            opt(x.flushes, 2),
            x.speedup,
            ins
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contender_parsing() {
        let c = ProgContender::parse("stock LD_LIBRARY_PATH=/a/b X=1=2").unwrap();
        assert_eq!(c.label, "stock");
        assert_eq!(
            c.env,
            vec![
                ("LD_LIBRARY_PATH".to_string(), "/a/b".to_string()),
                ("X".to_string(), "1=2".to_string())
            ]
        );
        assert_eq!(ProgContender::parse("bare").unwrap().env, vec![]);
        assert!(ProgContender::parse("  ").is_err());
        assert!(ProgContender::parse("A=1").is_err());
        assert!(ProgContender::parse("x novalue").is_err());
        assert!(ProgContender::parse("x =v").is_err());
    }

    #[test]
    fn callgrind_totals_are_read() {
        let err = "==1== Callgrind\n==1== Events    : Ir\n==1== Collected : 72,004,798\n";
        assert_eq!(collected(err), Some(72_004_798));
        assert_eq!(
            collected("==1== Collected : 5\n==2== Collected : 7\n"),
            Some(7)
        );
        assert_eq!(collected("no count"), None);
    }

    #[test]
    fn summary_medians_and_speedup() {
        let cs = vec![
            ProgContender::parse("a").unwrap(),
            ProgContender::parse("b").unwrap(),
        ];
        let run = |c: &str, modeled: f64, kib: f64| ProgramRun {
            contender: c.into(),
            round: 0,
            wall_ms: 1.0,
            cpu_ms: 0.5,
            sys_ms: 0.2,
            counters: Some(DeviceCounters {
                write_kib: kib,
                ..DeviceCounters::default()
            }),
            modeled_ms: Some(modeled),
            stdout_tail: String::new(),
        };
        let runs = vec![
            run("a", 100.0, 10.0),
            run("b", 50.0, 4.0),
            run("a", 300.0, 30.0),
            run("b", 40.0, 2.0),
            run("a", 200.0, 20.0),
            run("b", 60.0, 6.0),
        ];
        let s = summarize(&cs, &runs, "a", 10);
        assert_eq!(s[0].modeled_us, Some(20_000.0));
        assert_eq!(s[1].modeled_us, Some(5_000.0));
        assert_eq!(s[1].write_kib, Some(0.4));
        assert!((s[0].speedup - 1.0).abs() < 1e-12);
        assert!((s[1].speedup - 4.0).abs() < 1e-12);
    }
}
