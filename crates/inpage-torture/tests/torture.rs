//! The CI budget: for every mode, 2,000 crash sequences of depth 3 (6,000 simulated power
//! cuts, each recovered, judged and continued) under the full crash model (lose +
//! reorder + tear, no atomic pages) and 200 I/O-error cases, with zero violations in
//! every mode that promises atomicity and torn writes in a good share of the cases; the
//! harness catching each deliberately broken engine variant (`tests/mutants.rs`);
//! replay specs reproducing bit for bit; and clear errors for bad arguments.
//!
//! The modes come from the registry (`Mode::all()`), in two shards that run in parallel;
//! a failure names its mode.

use inpage::{JournalMode, Mutant};
use inpage_torture::mode::Mode;
use inpage_torture::oracle::run_case_disk;
use inpage_torture::{run_torture, Case, Report, TortureArgs};

const SEQUENCES: u64 = 2000;
const DEPTH: usize = 3;
const IO_ERRORS: u64 = 200;

fn run(mode: &str, crashes: u64, io_errors: bool, seed: u64) -> (Report, String) {
    let args = TortureArgs {
        mode: mode.into(),
        crashes,
        depth: if io_errors { 1 } else { DEPTH },
        seed,
        io_errors,
        ..TortureArgs::default()
    };
    let mut out = Vec::new();
    let report = run_torture(&args, &mut out, false).expect("valid arguments");
    (report, String::from_utf8_lossy(&out).into_owned())
}

/// Power cuts and I/O errors for one mode; atomic modes must have no violation.
fn mode_budget(mode: &str) {
    let (cuts, out1) = run(mode, SEQUENCES, false, 1);
    let (io, out2) = run(mode, IO_ERRORS, true, 2);
    assert_eq!(cuts.crashes(), SEQUENCES);
    // Aimed cuts and tears: a good share of the sequences must really tear a write
    // (a simulator that stopped tearing, or cuts that never land inside a write, fail).
    assert!(
        cuts.torn() >= SEQUENCES / 5,
        "{mode}: only {} of {SEQUENCES} sequences tore a write",
        cuts.torn()
    );
    assert_eq!(io.crashes(), IO_ERRORS);
    // Most I/O-error cases must really inject their fault (some ENOSPC budgets or
    // fault indices land past the workload's last operation).
    let fired: u64 = io.modes.iter().map(|m| m.faults_fired).sum();
    assert!(
        fired >= IO_ERRORS * 3 / 4,
        "{mode}: only {fired} faults fired"
    );
    eprintln!(
        "{mode}: {} crash sequences of depth {DEPTH} ({} tore a write), {} violations; {} I/O-error cases ({fired} faults fired), {} violations",
        cuts.crashes(),
        cuts.torn(),
        cuts.violations(),
        io.crashes(),
        io.violations()
    );
    let promises = cuts.modes[0].mode.promises_atomicity();
    if promises {
        assert!(
            cuts.passed() && io.passed(),
            "{mode}: {} power-cut and {} I/O-error violations:\n{out1}{out2}",
            cuts.violations(),
            io.violations()
        );
    }
}

/// The matrix: every torture mode (`Mode::all()`, built from the engine's registry plus
/// the WAL variants), split into two shards so they run in parallel on two cores. A
/// failure names its mode; every mode of the shard runs before the shard fails.
fn shard(k: usize, of: usize) {
    let modes: Vec<String> = Mode::all()
        .iter()
        .enumerate()
        .filter(|(i, _)| i % of == k)
        .map(|(_, m)| m.name())
        .collect();
    let failed: Vec<String> = modes
        .iter()
        .filter_map(|m| {
            std::panic::catch_unwind(|| mode_budget(m)).err().map(|e| {
                match e.downcast_ref::<String>() {
                    Some(s) => s.clone(),
                    None => format!("{m}: failed"),
                }
            })
        })
        .collect();
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

#[test]
fn torture_every_mode_shard_0() {
    shard(0, 2);
}

#[test]
fn torture_every_mode_shard_1() {
    shard(1, 2);
}

/// Two handles taking turns on the simulated disk, as two processes, in every mode that
/// shares a file between processes (`--handles 2`, `all` = those modes): no violation
/// where atomicity is promised, and cuts really tear writes.
#[test]
fn torture_two_handles_every_sharing_mode() {
    let args = TortureArgs {
        mode: "all".into(),
        crashes: 60,
        depth: DEPTH,
        seed: 3,
        handles: 2,
        ..TortureArgs::default()
    };
    let mut out = Vec::new();
    let report = run_torture(&args, &mut out, false).expect("valid arguments");
    let sharing = Mode::all()
        .iter()
        .filter(|m| m.shares_between_processes())
        .count();
    assert_eq!(report.modes.len(), sharing);
    assert!(
        report.torn() >= report.crashes() / 5,
        "{} torn",
        report.torn()
    );
    for m in &report.modes {
        if m.mode.promises_atomicity() {
            assert!(
                m.violations.is_empty(),
                "{}: {} violations with two handles:\n{}",
                m.mode.name(),
                m.violations.len(),
                String::from_utf8_lossy(&out)
            );
        }
    }
}

/// The long-keys workload (byte keys up to ~3x the inline limit: tail chains in leaves and
/// separators) under power cuts, briefly, in every mode: no violation where atomicity is
/// promised, and cuts really tear writes.
#[test]
fn long_keys_survive_power_cuts() {
    let mut torn = 0;
    for mode in Mode::all() {
        let args = TortureArgs {
            mode: mode.name(),
            crashes: 60,
            depth: DEPTH,
            seed: 17,
            workload: "long-keys".into(),
            ..TortureArgs::default()
        };
        let mut out = Vec::new();
        let report = run_torture(&args, &mut out, false).expect("valid arguments");
        assert_eq!(report.crashes(), 60);
        torn += report.torn();
        eprintln!(
            "{}: 60 long-key sequences, {} tore a write, {} violations",
            mode.name(),
            report.torn(),
            report.violations()
        );
        if mode.promises_atomicity() {
            assert!(
                report.passed(),
                "{}: {} violations:\n{}",
                mode.name(),
                report.violations(),
                String::from_utf8_lossy(&out)
            );
        }
    }
    assert!(torn > 0, "no cut tore a write");
}

/// A mode in the engine's registry missing from the torture matrix would land untested.
#[test]
fn the_matrix_covers_the_registry() {
    let tortured: Vec<JournalMode> = Mode::all().iter().map(|m| m.journal).collect();
    for mode in JournalMode::all() {
        assert!(tortured.contains(&mode), "{mode} is not tortured");
    }
}

/// The harness can fail: skipping the journal sync in delete mode is caught, shrunk (to
/// fewer stages and steps), and the shrunk spec reproduces the violation.
#[test]
fn broken_journal_sync_is_caught_and_replays() {
    let args = TortureArgs {
        mode: "delete".into(),
        crashes: 100,
        seed: 1,
        broken_journal_sync: true,
        shrink: 1,
        ..TortureArgs::default()
    };
    let mut out = Vec::new();
    let report = run_torture(&args, &mut out, false).unwrap();
    assert!(report.violations() >= 1, "broken commit not caught");
    assert!(!report.passed());
    let v = &report.modes[0].violations[0];
    let shrunk = v.shrunk.clone().expect("first violation is shrunk");
    assert!(shrunk.steps <= v.case.steps);
    assert!(shrunk.depth() <= v.case.depth());
    assert_eq!(shrunk.mutant, Mutant::NoSyncBeforeMark);
    let text = String::from_utf8_lossy(&out);
    assert!(text.contains(&shrunk.spec()), "spec printed: {text}");

    // The printed spec parses back to the same case and violates again.
    let spec = shrunk.spec();
    assert_eq!(Case::parse(&spec).unwrap(), shrunk);
    let replay = TortureArgs {
        replay: Some(spec),
        ..TortureArgs::default()
    };
    let mut out = Vec::new();
    let r = run_torture(&replay, &mut out, false).unwrap();
    assert_eq!((r.crashes(), r.violations()), (1, 1));
    assert!(!r.passed());
}

/// A replay is bit-exact: the same case twice leaves byte-identical files on the final
/// disk (nonces and salts come from the case's seed), in every mode, for sequences.
#[test]
fn replays_leave_identical_disks() {
    for mode in [
        "delete",
        "persist",
        "wal",
        "wal-prealloc",
        "dhl-cc",
        "dhl-tc",
    ] {
        let spec = format!(
            "mode={mode};wl=mixed;k=8;txns=24;wseed=77;ps=512;chunk=0;ckpt=12;steps=40;cut=60,30,10;crash=power:1,power:2,power:3;model=lose+reorder+tear;rcut=-,3,-;aim=t,u,t;fault=-;mutant=none"
        );
        let case = Case::parse(&spec).unwrap();
        let (r1, d1) = run_case_disk(&case);
        let (r2, d2) = run_case_disk(&case);
        assert!(!r1.violated(), "{mode}: {:?}", r1.violations);
        assert_eq!(r1.stages, r2.stages, "{mode}");
        assert!(!d1.is_empty());
        let names = |d: &[(std::path::PathBuf, Vec<u8>)]| {
            d.iter().map(|(p, _)| p.clone()).collect::<Vec<_>>()
        };
        assert_eq!(names(&d1), names(&d2), "{mode}: different files");
        for ((path, a), (_, b)) in d1.iter().zip(&d2) {
            let first_diff = a.iter().zip(b).position(|(x, y)| x != y);
            assert!(
                a.len() == b.len() && first_diff.is_none(),
                "{mode}: two replays left different bytes in {} (lengths {} and {}, first difference at {first_diff:?})",
                path.display(),
                a.len(),
                b.len()
            );
        }
    }
}

/// Same seed, same result; and the job count does not change it.
#[test]
fn runs_are_deterministic() {
    let mk = |jobs| TortureArgs {
        mode: "delete".into(),
        crashes: 100,
        seed: 9,
        broken_journal_sync: true,
        shrink: 0,
        jobs,
        ..TortureArgs::default()
    };
    let mut a = Vec::new();
    let mut b = Vec::new();
    run_torture(&mk(1), &mut a, false).unwrap();
    run_torture(&mk(2), &mut b, false).unwrap();
    assert_eq!(String::from_utf8_lossy(&a), String::from_utf8_lossy(&b));
    assert!(!a.is_empty());
}

#[test]
fn bad_arguments_are_clear_errors() {
    let err = |a: TortureArgs| {
        let mut out = Vec::new();
        run_torture(&a, &mut out, false).unwrap_err()
    };
    let e = err(TortureArgs {
        mode: "wall".into(),
        ..TortureArgs::default()
    });
    assert!(
        e.contains("unknown mode") && e.contains("wal-normal"),
        "{e}"
    );
    let e = err(TortureArgs {
        workload: "scan".into(),
        ..TortureArgs::default()
    });
    assert!(e.contains("mixed, insert, update, delete"), "{e}");
    let e = err(TortureArgs {
        model: "lose,melt".into(),
        ..TortureArgs::default()
    });
    assert!(e.contains("lose, reorder, tear"), "{e}");
    let e = err(TortureArgs {
        ops_per_txn: 0,
        ..TortureArgs::default()
    });
    assert!(e.contains("--ops-per-txn"), "{e}");
    let e = err(TortureArgs {
        depth: 0,
        ..TortureArgs::default()
    });
    assert!(e.contains("--depth"), "{e}");
    let e = err(TortureArgs {
        handles: 3,
        ..TortureArgs::default()
    });
    assert!(e.contains("--handles 3"), "{e}");
    let e = err(TortureArgs {
        mode: "nvlog".into(),
        handles: 2,
        ..TortureArgs::default()
    });
    assert!(e.contains("nvlog") && e.contains("one process"), "{e}");
    for (spec, want) in [
        ("", "missing field"),
        ("mode=delete", "missing field"),
        ("garbage", "not key=value"),
        ("mode=delete;bogus=1", "unknown field"),
        (
            "mode=delete;wl=mixed;k=8;txns=8;wseed=1;ps=1000;chunk=0;ckpt=0;steps=1;cut=1;crash=power:1;model=lose",
            "power of two",
        ),
        (
            "mode=delete;wl=mixed;k=8;txns=8;wseed=1;ps=512;chunk=0;ckpt=0;steps=1;cut=x;crash=power:1;model=lose",
            "not a number",
        ),
        (
            "mode=delete;wl=mixed;k=8;txns=8;wseed=1;ps=512;chunk=0;ckpt=0;steps=1;cut=1;crash=boom;model=lose",
            "power:<seed>",
        ),
        (
            "mode=delete;wl=mixed;k=8;txns=8;wseed=1;ps=512;chunk=0;ckpt=0;steps=1;cut=-;crash=process;model=none;fault=eio@",
            "bad fault",
        ),
        (
            "mode=delete;wl=mixed;k=8;txns=8;wseed=1;ps=512;chunk=0;ckpt=0;steps=1;cut=1,2;crash=power:1;model=lose",
            "crash has 1 entries, cut has 2",
        ),
        (
            "mode=delete;wl=mixed;k=8;txns=9;wseed=1;ps=512;chunk=0;ckpt=0;steps=1;cut=1,2;crash=power:1,power:2;model=lose",
            "multiple of it",
        ),
        (
            "mode=delete;wl=mixed;k=8;txns=8;wseed=1;ps=512;chunk=0;ckpt=0;steps=1;cut=1;crash=power:1;model=lose;mutant=melt",
            "unknown mutant",
        ),
        (
            "mode=delete;wl=mixed;k=8;txns=8;wseed=1;ps=512;chunk=0;ckpt=0;handles=4;steps=1;cut=1;crash=power:1;model=lose",
            "handles=\"4\" must be 1 or 2",
        ),
    ] {
        let e = err(TortureArgs {
            replay: Some(spec.into()),
            ..TortureArgs::default()
        });
        assert!(e.contains(want), "{spec:?}: {e}");
    }
}

/// DHL page writes go through O_DIRECT on the simulated disk too (it accepts aligned
/// direct I/O as Linux does), so the torture exercises the direct path: the one-page
/// commits of a DHL database on a `SimVfs` are direct writes.
#[test]
fn dhl_uses_direct_writes_on_the_simulated_disk() {
    use inpage::{Config, Database, DirectWrites};
    use inpage_sim::SimVfs;
    let disk = SimVfs::with_seed(1);
    let cfg = Config::default()
        .vfs(std::sync::Arc::new(disk.clone()))
        .journal_mode(JournalMode::DHL_CC)
        .page_size(4096)
        .direct_writes(DirectWrites::On);
    let db = Database::open("/d/db", cfg).unwrap();
    assert!(db.direct_writes());
    for i in 0..5i64 {
        let mut w = db.begin_write().unwrap();
        let t = w.open_or_create_tree("t", inpage::KeyKind::Int).unwrap();
        w.insert(&t, i, b"v").unwrap();
        w.commit().unwrap();
    }
    assert!(disk.direct_writes() >= 3, "{}", disk.direct_writes());
}
