//! One torture case, and its replay spec: a single-line, self-contained text form that
//! `--replay` turns back into exactly the same case.
//!
//! A case is a *crash sequence* of one or more stages. Stage 1 creates the database and
//! runs the first segment of the workload; every stage ends in a crash; the crashed disk
//! is (optionally cut again inside the reopen, then) recovered and judged, and the next
//! stage continues the workload on the recovered database with its next segment. The
//! workload's transactions are split into `depth` equal segments (`txns` is a multiple
//! of the depth), so a shorter sequence is a prefix of a longer one.
//!
//! Spec grammar: `key=value` pairs separated by `;`, in any order; per-stage fields
//! (`cut`, `crash`, `rcut`, `aim`) are comma-separated lists, one entry per stage, and
//! their length is the depth:
//!
//! ```text
//! mode=dhl-cc;wl=mixed;k=8;txns=24;wseed=17;ps=512;chunk=8;ckpt=40;region=2;spill=3;
//! ordered=4;steps=27;cut=123,40,9;crash=power:991,power:5,power:77;model=lose+reorder+tear;
//! rcut=-,7,-;aim=u,t,u;fault=-;mutant=none
//! ```
//!
//! - `spill`: the spill limit of modes that steal (`-`, or absent in older specs: off).
//! - `ordered`: the DHL ordered-commit threshold in pages (`-`, or absent in older specs:
//!   the engine's default).
//! - `steps`: how many workload steps run in all (a prefix of the generated list).
//! - `cut`: power-cut op index (`-` = none: the stage runs to its end, e.g. fault
//!   cases). Stage 1 counts from the creating open; later stages from the end of the
//!   recovery that judged the previous stage.
//! - `crash`: `power:<seed>` (the disk a power cut leaves, under `model`) or `process`
//!   (everything written survives).
//! - `rcut`: a second power cut this many ops into the reopen (recovery), then another
//!   crash and reopen. Optional (default none).
//! - `aim`: `u` (each pending write as the model says) or `t` (the newest multi-sector
//!   write of each file torn: its first sector kept, a later one dropped; see
//!   `inpage_sim::Aim`). Optional (default `u`).
//! - `fault` (stage 1 only): `-`, `eio@N` (the Nth counted VFS op fails once), `eio@N!`
//!   (and every later op), `sync@N` / `write@N` (the Nth sync_data / write_at),
//!   `enospc@BYTES`.
//! - `handles`: handles on the database, each standing for a process (`1`, or `2`
//!   taking turns on the simulated disk, transactions alternating; absent in older
//!   specs: 1).
//! - `mutant`: `none` or a deliberately broken engine variant (`inpage::Mutant`);
//!   `broken=1` (older specs) means `no-sync-before-mark`.

use inpage::Mutant;
use inpage_sim::{Aim, CrashModel};

use crate::mode::{DbParams, Mode};
use crate::workload::{WorkloadKind, WorkloadSpec};

/// An injected I/O fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// EIO on the Nth counted operation of the fault layer; persistent = every later too.
    Eio { op: u64, persistent: bool },
    /// EIO on the Nth `sync_data`.
    Sync { nth: u64 },
    /// EIO on the Nth `write_at`.
    Write { nth: u64 },
    /// ENOSPC once growth since open exceeds this many bytes.
    Enospc { bytes: u64 },
}

/// What happens to the disk after the workload stops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Crash {
    /// A power cut: durable state plus what `model` lets survive, chosen by the seed.
    Power(u64),
    /// A process crash: every write the OS accepted survives.
    Process,
}

/// One stage of a crash sequence: how it is cut and crashed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stage {
    pub cut: Option<u64>,
    pub crash: Crash,
    pub rcut: Option<u64>,
    pub aim: Aim,
}

/// A fully specified case; running it is deterministic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Case {
    pub mode: Mode,
    pub workload: WorkloadSpec,
    pub params: DbParams,
    pub steps: usize,
    /// At least one.
    pub stages: Vec<Stage>,
    pub model: CrashModel,
    pub fault: Option<Fault>,
    pub mutant: Mutant,
}

/// `lose+reorder+tear`, `atomic-pages` (full model, page-atomic device), `none`.
pub fn model_name(m: &CrashModel) -> String {
    if m.atomic_pages.is_some_and(|p| p > 0) && m.lose && m.reorder && m.tear {
        return "atomic-pages".into();
    }
    let parts: Vec<&str> = [("lose", m.lose), ("reorder", m.reorder), ("tear", m.tear)]
        .into_iter()
        .filter(|(_, on)| *on)
        .map(|(n, _)| n)
        .collect();
    if parts.is_empty() {
        "none".into()
    } else {
        parts.join("+")
    }
}

/// Parse a crash model: `atomic-pages`, `none`, or a list of lose/reorder/tear joined by
/// `,` or `+`. `page_size` sets the atomic unit for `atomic-pages`.
pub fn parse_model(s: &str, page_size: u32) -> Result<CrashModel, String> {
    let s = s.trim();
    if s.eq_ignore_ascii_case("atomic-pages") {
        return Ok(CrashModel::atomic_pages(page_size as usize));
    }
    let mut m = CrashModel::none();
    if s.eq_ignore_ascii_case("none") {
        return Ok(m);
    }
    for part in s.split([',', '+']) {
        match part.trim().to_ascii_lowercase().as_str() {
            "lose" => m.lose = true,
            "reorder" => m.reorder = true,
            "tear" => m.tear = true,
            other => {
                return Err(format!(
                    "unknown crash model part {other:?}; use a list of lose, reorder, tear \
                     (e.g. lose,reorder,tear), or atomic-pages, or none"
                ))
            }
        }
    }
    Ok(m)
}

fn opt(v: Option<u64>) -> String {
    v.map_or("-".into(), |x| x.to_string())
}

impl Fault {
    fn spec(&self) -> String {
        match *self {
            Fault::Eio { op, persistent } => {
                format!("eio@{op}{}", if persistent { "!" } else { "" })
            }
            Fault::Sync { nth } => format!("sync@{nth}"),
            Fault::Write { nth } => format!("write@{nth}"),
            Fault::Enospc { bytes } => format!("enospc@{bytes}"),
        }
    }

    fn parse(s: &str) -> Result<Option<Fault>, String> {
        if s == "-" {
            return Ok(None);
        }
        let bad =
            || format!("bad fault {s:?}: use -, eio@N, eio@N!, sync@N, write@N, enospc@BYTES");
        let (kind, n) = s.split_once('@').ok_or_else(bad)?;
        let (n, persistent) = match n.strip_suffix('!') {
            Some(n) => (n, true),
            None => (n, false),
        };
        let n: u64 = n.parse().map_err(|_| bad())?;
        Ok(Some(match (kind, persistent) {
            ("eio", p) => Fault::Eio {
                op: n,
                persistent: p,
            },
            ("sync", false) => Fault::Sync { nth: n },
            ("write", false) => Fault::Write { nth: n },
            ("enospc", false) => Fault::Enospc { bytes: n },
            _ => return Err(bad()),
        }))
    }
}

fn list<T>(items: &[T], f: impl Fn(&T) -> String) -> String {
    items.iter().map(f).collect::<Vec<_>>().join(",")
}

impl Case {
    pub fn depth(&self) -> usize {
        self.stages.len()
    }

    /// The replay spec (see module docs).
    pub fn spec(&self) -> String {
        let w = &self.workload;
        format!(
            "mode={};wl={};k={};txns={};wseed={};ps={};chunk={};ckpt={};region={};spill={};ordered={};handles={};steps={};cut={};crash={};model={};rcut={};aim={};fault={};mutant={}",
            self.mode.name(),
            w.kind.name(),
            w.ops_per_txn,
            w.txns,
            w.seed,
            self.params.page_size,
            self.params.chunk_pages,
            self.params.wal_autocheckpoint,
            self.params.intent_region,
            opt(self.params.spill.map(u64::from)),
            opt(self.params.ordered.map(u64::from)),
            self.params.handles,
            self.steps,
            list(&self.stages, |s| opt(s.cut)),
            list(&self.stages, |s| match s.crash {
                Crash::Power(x) => format!("power:{x}"),
                Crash::Process => "process".into(),
            }),
            model_name(&self.model),
            list(&self.stages, |s| opt(s.rcut)),
            list(&self.stages, |s| match s.aim {
                Aim::Uniform => "u".into(),
                Aim::TearNewest => "t".into(),
            }),
            self.fault.map_or("-".into(), |f| f.spec()),
            self.mutant.name(),
        )
    }

    /// Parse a replay spec; errors name the offending field.
    pub fn parse(spec: &str) -> Result<Case, String> {
        let mut fields = std::collections::BTreeMap::new();
        for part in spec.trim().split(';').filter(|p| !p.trim().is_empty()) {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| format!("replay spec: {part:?} is not key=value"))?;
            if fields.insert(k.trim(), v.trim()).is_some() {
                return Err(format!("replay spec: {k:?} given twice"));
            }
        }
        const KNOWN: [&str; 21] = [
            "mode", "wl", "k", "txns", "wseed", "ps", "chunk", "ckpt", "region", "spill",
            "ordered", "handles", "steps", "cut", "crash", "model", "rcut", "aim", "fault",
            "mutant", "broken",
        ];
        if let Some(k) = fields.keys().find(|k| !KNOWN.contains(k)) {
            return Err(format!(
                "replay spec: unknown field {k:?}; fields are {}",
                KNOWN.join(", ")
            ));
        }
        let get = |k: &str| -> Result<&str, String> {
            fields
                .get(k)
                .copied()
                .ok_or_else(|| format!("replay spec: missing field {k:?}"))
        };
        let num_of = |k: &str, v: &str| -> Result<u64, String> {
            v.parse()
                .map_err(|_| format!("replay spec: {k}={v:?} is not a number"))
        };
        let num = |k: &str| -> Result<u64, String> { num_of(k, get(k)?) };
        let mode = Mode::parse(get("mode")?)?;
        if fields.get("handles").is_some_and(|h| *h != "1") && !mode.shares_between_processes() {
            return Err(format!(
                "replay spec: handles={} with mode {}, which keeps its file to one process",
                fields["handles"],
                mode.name()
            ));
        }
        let kind = WorkloadKind::parse(get("wl")?)?;
        let page_size = u32::try_from(num("ps")?).map_err(|_| "replay spec: ps too large")?;
        if !(512..=65536).contains(&page_size) || !page_size.is_power_of_two() {
            return Err(format!(
                "replay spec: ps={page_size} must be a power of two in 512..=65536"
            ));
        }
        let ops_per_txn = num("k")? as usize;
        let txns = num("txns")? as usize;
        if ops_per_txn == 0 || ops_per_txn > 100_000 || txns > 1_000_000 {
            return Err("replay spec: k must be 1..=100000 and txns at most 1000000".into());
        }
        let cuts: Vec<Option<u64>> = get("cut")?
            .split(',')
            .map(|c| match c.trim() {
                "-" => Ok(None),
                c => num_of("cut", c).map(Some),
            })
            .collect::<Result<_, _>>()?;
        let depth = cuts.len();
        if depth > 64 || txns % depth != 0 {
            return Err(format!(
                "replay spec: {depth} stages (entries of cut); at most 64, and txns={txns} must be a multiple of it"
            ));
        }
        let per_stage = |k: &str, default: Option<&str>| -> Result<Vec<String>, String> {
            let v: Vec<String> = match (fields.get(k), default) {
                (Some(v), _) => v.split(',').map(|x| x.trim().to_string()).collect(),
                (None, Some(d)) => vec![d.to_string(); depth],
                (None, None) => return Err(format!("replay spec: missing field {k:?}")),
            };
            if v.len() != depth {
                return Err(format!(
                    "replay spec: {k} has {} entries, cut has {depth}",
                    v.len()
                ));
            }
            Ok(v)
        };
        let crashes = per_stage("crash", None)?;
        let rcuts = per_stage("rcut", Some("-"))?;
        let aims = per_stage("aim", Some("u"))?;
        let mut stages = Vec::with_capacity(depth);
        for i in 0..depth {
            let crash = match crashes[i].as_str() {
                "process" => Crash::Process,
                c => match c.strip_prefix("power:").map(str::parse) {
                    Some(Ok(s)) => Crash::Power(s),
                    _ => {
                        return Err(format!(
                            "replay spec: crash={c:?} must be power:<seed> or process"
                        ))
                    }
                },
            };
            let rcut = match rcuts[i].as_str() {
                "-" => None,
                r => Some(num_of("rcut", r)?),
            };
            let aim = match aims[i].as_str() {
                "u" => Aim::Uniform,
                "t" => Aim::TearNewest,
                a => return Err(format!("replay spec: aim={a:?} must be u or t")),
            };
            stages.push(Stage {
                cut: cuts[i],
                crash,
                rcut,
                aim,
            });
        }
        let mutant = match (fields.get("mutant"), fields.get("broken").copied()) {
            (Some(m), _) => Mutant::from_name(m).ok_or_else(|| {
                format!(
                    "replay spec: unknown mutant {m:?}; valid: none, {}",
                    Mutant::ALL.map(|m| m.name()).join(", ")
                )
            })?,
            (None, None | Some("0")) => Mutant::None,
            (None, Some("1")) => Mutant::NoSyncBeforeMark,
            (None, Some(b)) => return Err(format!("replay spec: broken={b:?} must be 0 or 1")),
        };
        let mutant = crate::planted(mutant)?;
        let small = |k: &str| -> Result<u32, String> {
            u32::try_from(num(k)?).map_err(|_| format!("replay spec: {k} too large"))
        };
        Ok(Case {
            mode,
            workload: WorkloadSpec {
                kind,
                ops_per_txn,
                txns,
                seed: num("wseed")?,
                page_size,
            },
            params: DbParams {
                page_size,
                chunk_pages: small("chunk")?.min(1 << 20),
                wal_autocheckpoint: small("ckpt")?,
                // Specs from before the field replay with the default region.
                intent_region: match fields.get("region") {
                    Some(_) => small("region")?,
                    None => 16,
                },
                // Specs from before steal replay without it.
                spill: match fields.get("spill").copied() {
                    None | Some("-") => None,
                    Some("0") => return Err("replay spec: spill must be at least 1, or -".into()),
                    Some(_) => Some(small("spill")?),
                },
                // Specs from before the field replay with the engine's default.
                ordered: match fields.get("ordered").copied() {
                    None | Some("-") => None,
                    Some(_) => Some(small("ordered")?),
                },
                // Specs from before the field replay with one handle.
                handles: match fields.get("handles").copied() {
                    None | Some("1") => 1,
                    Some("2") => 2,
                    Some(h) => return Err(format!("replay spec: handles={h:?} must be 1 or 2")),
                },
            },
            steps: num("steps")? as usize,
            stages,
            model: parse_model(get("model")?, page_size)?,
            fault: Fault::parse(fields.get("fault").copied().unwrap_or("-"))?,
            mutant,
        })
    }
}
