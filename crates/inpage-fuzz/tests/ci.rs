//! The bounded fuzz run of CI, and the properties the fuzzer's results rest on.
//!
//! Invariants:
//! - Fixed seeds: a failure here is replayed with `inpage-fuzz input --seed S --index I`.
//! - Each test asserts the harness still reaches the engine's deep paths (opens that
//!   check, commits), so a fuzzer that silently stopped exercising anything fails.

use std::sync::OnceLock;
use std::time::Duration;

use inpage::JournalMode;
use inpage_fuzz::corpus::{self, Base};
use inpage_fuzz::exec::{self, FindingKind};
use inpage_fuzz::{generate, RunConfig};

fn corpus() -> &'static [Base] {
    static C: OnceLock<Vec<Base>> = OnceLock::new();
    C.get_or_init(|| {
        exec::install_panic_hook();
        corpus::build()
    })
}

/// Inputs of the CI run: about 30 s in the test profile on the CI machine (longer runs:
/// `inpage-fuzz run`).
const CI_INPUTS: u64 = 12_000;

#[test]
fn bounded_run_has_no_findings() {
    let corpus = corpus();
    let report = inpage_fuzz::run(
        corpus,
        &RunConfig {
            seed: 0xC1,
            start: 0,
            inputs: CI_INPUTS,
            max_time: None,
            limit: Duration::from_secs(60),
            out: None,
            wal_oracle: false,
            before_input: None,
        },
    );
    let found: Vec<String> = report
        .findings
        .iter()
        .map(|f| {
            format!(
                "seed {} index {}: {} ({:?})",
                f.seed,
                f.input.index,
                f.finding.signature(),
                f.input.mutations
            )
        })
        .collect();
    assert!(
        found.is_empty() && report.repeats == 0,
        "findings: {found:#?}"
    );
    assert_eq!(report.inputs, CI_INPUTS);
    // The mutated inputs still reach the engine: some open, some pass the check and
    // take the commit probe; and many are refused (the mutations do damage).
    let opens = CI_INPUTS * (1 + JournalMode::ALL.len() as u64);
    assert!(report.opened > CI_INPUTS / 4, "opened {}", report.opened);
    assert!(
        report.opened < opens,
        "every open succeeded: mutations do nothing"
    );
    assert!(
        report.checked_ok > CI_INPUTS / 10,
        "checked_ok {}",
        report.checked_ok
    );
    assert!(
        report.committed > CI_INPUTS / 50,
        "committed {}",
        report.committed
    );
}

#[test]
fn corpus_covers_every_mode_and_reads_a_committed_state() {
    let corpus = corpus();
    for mode in JournalMode::all() {
        let entries: Vec<&Base> = corpus.iter().filter(|b| b.mode == mode).collect();
        assert!(
            entries.iter().any(|b| b.name.ends_with("/clean")),
            "{}: no clean entry",
            mode.name()
        );
        assert!(
            entries.iter().filter(|b| b.name.contains("/cut@")).count() >= 10,
            "{}: too few crash-left entries",
            mode.name()
        );
        if mode == JournalMode::WAL {
            assert!(
                entries.iter().any(|b| b.files.wal.is_some()),
                "wal: no entry with a WAL file"
            );
        }
    }
    for b in corpus {
        // Undamaged, every entry runs without a finding; an entry of a mode that
        // promises atomicity checks and reads one of its workload's committed states.
        let states = b.mode.promises_atomicity().then_some(&b.states[..]);
        let out = exec::run(&b.files, true, states);
        assert_eq!(out.finding, None, "{}", b.name);
        // A mode without atomicity may leave a crash-cut file that fails the check.
        if b.mode.promises_atomicity() || b.name.ends_with("/clean") {
            assert!(out.checked_ok > 0, "{}: no open passes the check", b.name);
        }
    }
}

#[test]
fn the_state_oracle_refuses_a_state_no_commit_left() {
    let corpus = corpus();
    let b = corpus
        .iter()
        .find(|b| b.name.ends_with("/clean") && b.mode.promises_atomicity())
        .expect("a clean entry of an atomic mode");
    // Only the states before the last commit: the clean file's state is not among them.
    let earlier = &b.states[..b.states.len() - 1];
    let out = exec::run(&b.files, false, Some(earlier));
    let f = out.finding.expect("the oracle must flag the final state");
    assert_eq!(f.kind, FindingKind::NoSuchCommit, "{}", f.detail);
}

#[test]
fn inputs_are_a_function_of_seed_and_index_and_damage_the_files() {
    let corpus = corpus();
    let mut changed = 0;
    for index in 0..200 {
        let a = generate(corpus, 7, index, true);
        let b = generate(corpus, 7, index, true);
        assert_eq!(a.base, b.base);
        assert_eq!(a.mutations, b.mutations);
        let files = a.files(corpus);
        assert_eq!(files, b.files(corpus));
        changed += (files != corpus[a.base].files) as u32;
    }
    // A mutation can be a no-op (a byte set to its own value), but rarely.
    assert!(
        changed > 150,
        "only {changed} of 200 inputs differ from their base"
    );
    let other: Vec<_> = (0..50)
        .map(|i| generate(corpus, 8, i, true).mutations)
        .collect();
    let same: Vec<_> = (0..50)
        .map(|i| generate(corpus, 7, i, true).mutations)
        .collect();
    assert_ne!(other, same, "the seed does not change the inputs");
}
