//! Process kills on real files: SIGKILL the `workload` child at deterministic random
//! moments (after a random number of `commit` lines plus a random sub-millisecond delay),
//! then `verify` with the last commit number read. A killed process keeps every write the
//! OS accepted, so every mode that promises atomicity must recover to commit I or I+1.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use inpage::JournalMode;
use inpage_torture::rng::Rng;
use inpage_torture::{verify, VerifyArgs};

const KILLS_PER_MODE: usize = 50;
const TXNS: usize = 40;
const BIN: &str = env!("CARGO_BIN_EXE_inpage-torture-dev");

fn kill_round(mode: &str, seed: u64, rng: &mut Rng) -> Result<(usize, bool), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let file = dir.path().join("kill.db");
    let mut child = Command::new(BIN)
        .args([
            "workload",
            "--mode",
            mode,
            "--txns",
            &TXNS.to_string(),
            "--seed",
        ])
        .arg(seed.to_string())
        .arg(&file)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| e.to_string())?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let mut lines = BufReader::new(stdout).lines();
    let wait_for = rng.below(TXNS as u64 * 3 / 4) as usize;
    let mut acked = 0usize;
    let parse = |l: &str| -> Result<usize, String> {
        l.strip_prefix("commit ")
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| format!("unexpected line {l:?}"))
    };
    while acked < wait_for {
        match lines.next() {
            Some(Ok(l)) => acked = parse(&l)?,
            _ => break,
        }
    }
    std::thread::sleep(Duration::from_micros(rng.below(1000)));
    // Child::kill sends SIGKILL; the child may already have exited, which is fine.
    let _ = child.kill();
    let status = child.wait().map_err(|e| e.to_string())?;
    // Lines written before the kill are acknowledged commits too.
    for l in lines.map_while(Result::ok) {
        acked = parse(&l)?;
    }
    if !file.exists() {
        // Killed before the database was created: nothing was acknowledged.
        if acked != 0 {
            return Err(format!("{mode}: commit {acked} acknowledged but no file"));
        }
        return Ok((0, false));
    }
    verify(&VerifyArgs {
        file: file.clone(),
        mode: mode.into(),
        seed,
        acked,
        ops_per_txn: 8,
        workload: "mixed".into(),
    })
    .map_err(|e| format!("{mode} seed {seed} acked {acked}: {e}"))?;
    Ok((acked, !status.success()))
}

/// What the kill rounds of one mode did.
#[derive(Default)]
struct Kills {
    rounds: usize,
    /// Rounds whose child was still running when killed.
    killed: usize,
    /// Commits acknowledged over all rounds.
    acked: usize,
}

impl Kills {
    fn round(&mut self, mode: &str, seed: u64, rng: &mut Rng, failures: &mut Vec<String>) {
        self.rounds += 1;
        match kill_round(mode, seed, rng) {
            Ok((acked, was_killed)) => {
                self.acked += acked;
                self.killed += usize::from(was_killed);
            }
            Err(e) => failures.push(e),
        }
    }
}

#[test]
fn sigkill_then_verify_in_every_atomic_mode() {
    let mut failures = Vec::new();
    // Every mode that promises atomicity, from the registry (a new mode is killed too).
    // (`-region-lost` variants differ only on the simulated disk.)
    let modes: Vec<String> = inpage_torture::Mode::all()
        .into_iter()
        .filter(|m| m.journal.capabilities().atomic && m.regions_persistent())
        .map(|m| m.name())
        .collect();
    assert!(modes.len() >= 9, "atomic modes: {modes:?}");
    for (mi, mode) in modes.iter().map(String::as_str).enumerate() {
        let mut rng = Rng::new(0x4B11 + mi as u64);
        let mut k = Kills::default();
        for round in 0..KILLS_PER_MODE {
            k.round(
                mode,
                1000 * mi as u64 + round as u64,
                &mut rng,
                &mut failures,
            );
        }
        let Kills { killed, acked, .. } = k;
        eprintln!(
            "{mode}: {KILLS_PER_MODE} rounds, {killed} killed mid-run, {acked} commits acknowledged"
        );
        assert!(
            killed >= KILLS_PER_MODE / 2,
            "{mode}: most rounds should kill a running child"
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Issue 18's bar: at least 200 SIGKILLs of the workload in each region-backed mode
/// (`nvlog`: commits acknowledged from the region, flushed by a background thread), every
/// one verified.
#[test]
fn sigkill_region_backed_modes_200_times() {
    const KILLS: usize = 200;
    let modes: Vec<String> = JournalMode::all()
        .filter(|m| m.capabilities().region_backed)
        .map(|m| m.name().to_string())
        .collect();
    assert!(!modes.is_empty());
    let mut failures = Vec::new();
    for (mi, mode) in modes.iter().enumerate() {
        let mut rng = Rng::new(0x4E56_4C47 + mi as u64);
        let mut k = Kills::default();
        // Until 200 rounds killed a running child (a child may finish first).
        while k.killed < KILLS && k.rounds < KILLS * 2 {
            let seed = 500_000 + 1000 * mi as u64 + k.rounds as u64;
            k.round(mode, seed, &mut rng, &mut failures);
        }
        let Kills {
            rounds,
            killed,
            acked,
        } = k;
        eprintln!(
            "{mode}: {rounds} rounds, {killed} killed mid-run and verified, {acked} commits acknowledged"
        );
        assert!(
            killed >= KILLS,
            "{mode}: only {killed} of {rounds} rounds killed a running child"
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The dev binary's CLI surface: final line, exit codes, replay exit 1.
#[test]
fn dev_binary_cli() {
    let out = Command::new(BIN)
        .args([
            "torture",
            "--mode",
            "delete",
            "--crashes",
            "40",
            "--seed",
            "3",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("crashes=40 torn=") && last.ends_with(" violations=0"),
        "{last}"
    );

    // A mode without atomicity says so on the final line.
    let out = Command::new(BIN)
        .args([
            "torture",
            "--mode",
            "off",
            "--crashes",
            "20",
            "--depth",
            "1",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    assert!(
        last.ends_with("(not promised: off has no atomicity)"),
        "{last}"
    );

    // Every mode is listed in the help of torture, workload and verify (one list).
    for cmd in ["torture", "workload", "verify"] {
        let out = Command::new(BIN).args([cmd, "--help"]).output().unwrap();
        let help = String::from_utf8_lossy(&out.stdout).replace('\n', " ");
        for m in inpage_torture::Mode::all() {
            assert!(
                help.contains(&m.name()),
                "{cmd} --help lacks {}: {help}",
                m.name()
            );
        }
    }

    let out = Command::new(BIN)
        .args(["torture", "--mode", "nope"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("valid modes"));

    // A broken commit found, printed, and replayed with exit 1.
    let out = Command::new(BIN)
        .args([
            "torture",
            "--mode",
            "delete",
            "--crashes",
            "400",
            "--broken-journal-sync",
            "--shrink",
            "1",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let spec = stdout
        .lines()
        .find_map(|l| l.split("--replay '").nth(1))
        .and_then(|s| s.strip_suffix('\''))
        .expect("a replay spec is printed");
    let out = Command::new(BIN)
        .args(["torture", "--replay", spec])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("crashes=1 torn=") && last.ends_with(" violations=1"),
        "{last}"
    );

    // verify rejects a wrong commit number.
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("v.db");
    let out = Command::new(BIN)
        .args(["workload", "--mode", "wal", "--txns", "6", "--seed", "5"])
        .arg(&f)
        .output()
        .unwrap();
    assert!(out.status.success());
    let n = String::from_utf8_lossy(&out.stdout).lines().count();
    assert!(n >= 2);
    let verify = |acked: usize| {
        Command::new(BIN)
            .args(["verify", "--mode", "wal", "--seed", "5", "--acked"])
            .arg(acked.to_string())
            .arg(&f)
            .status()
            .unwrap()
            .success()
    };
    assert!(verify(n));
    assert!(verify(n - 1));
    assert!(!verify(n - 2) || n < 3);
}
