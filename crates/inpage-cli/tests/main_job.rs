//! The main job (`scripts/main.sh`, the README's first command) in its short form: the
//! same script, the same `inpage bench all` code path and default contender list, few
//! transactions and one round, with the binary this test build made. It must exit 0 and
//! leave table.txt, results.json, plots/, index.html and headline.txt, with rows (or an
//! "n/a" with its reason) for every registry mode and every peer in every section — so a
//! new mode that breaks the main job turns CI red. A deliberately broken contender (a
//! test-only one whose recovery crash child never reaches its stop point) must turn this
//! check red too.
//!
//! Runs on the ext4 lab when the machine offers it (root, loop devices), else on a plain
//! directory; the report says which.

use std::path::Path;
use std::process::Command;

use inpage::JournalMode;

const BIN: &str = env!("CARGO_BIN_EXE_inpage");

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .and_then(Path::parent)
        .expect("crates/inpage-cli sits two levels below the repository")
}

/// Run the short main job into `out`; its exit status and stderr.
fn main_job(out: &Path, contenders: Option<&str>) -> (bool, String) {
    let mut cmd = Command::new("bash");
    cmd.arg(repo().join("scripts/main.sh"))
        .arg(out)
        .env("INPAGE_MAIN_SHORT", "1")
        .env("INPAGE_BIN", BIN)
        .env("INPAGE_SETUP_DONE", "1");
    match contenders {
        Some(c) => cmd.env("INPAGE_MAIN_CONTENDERS", c),
        None => cmd.env_remove("INPAGE_MAIN_CONTENDERS"),
    };
    let o = cmd.output().expect("bash runs scripts/main.sh");
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stderr).into_owned() + &String::from_utf8_lossy(&o.stdout),
    )
}

/// What the main job's outputs show, or why they fail the check.
fn check_outputs(out: &Path) -> Result<(), String> {
    for f in ["table.txt", "results.json", "index.html", "headline.txt"] {
        let p = out.join(f);
        let len = std::fs::metadata(&p)
            .map_err(|e| format!("{}: {e}", p.display()))?
            .len();
        if len == 0 {
            return Err(format!("{} is empty", p.display()));
        }
    }
    let plots = std::fs::read_dir(out.join("plots"))
        .map_err(|e| format!("plots/: {e}"))?
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "svg"))
        })
        .count();
    if plots == 0 {
        return Err("plots/ holds no SVG".into());
    }
    let json: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("results.json")).map_err(|e| e.to_string())?,
    )
    .map_err(|e| format!("results.json: {e}"))?;
    let rows = json["results"]
        .as_array()
        .ok_or("results.json: no results")?;
    let na = json["not_applicable"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let has_row = |c: &str, workload: &str| {
        rows.iter().any(|r| {
            r["contender"] == c
                && r["workload"]
                    .as_str()
                    .is_some_and(|w| w.starts_with(workload))
        })
    };
    let is_na = |c: &str, workload: &str| {
        na.iter().any(|n| {
            n["contender"] == c
                && n["workload"]
                    .as_str()
                    .is_some_and(|w| w.starts_with(workload))
                && n["reason"].as_str().is_some_and(|r| !r.is_empty())
        })
    };
    let mut missing = Vec::new();
    // SQL on the default mode, the one SQL contender the main job runs.
    let sql_default = format!("sql-{}", inpage::DEFAULT_JOURNAL_MODE.name());
    let peers = [
        "sqlite-delete",
        "sqlite-wal",
        "sqlite-wal-r",
        "sqlite-off",
        sql_default.as_str(),
        "redb",
        "lmdb",
        "floor",
    ];
    let names: Vec<String> = JournalMode::all()
        .map(|m| m.name().to_string())
        .chain(peers.iter().map(|p| p.to_string()))
        .collect();
    for c in &names {
        if !has_row(c, "mobibench") {
            missing.push(format!("{c}: no mobibench row"));
        }
        if !has_row(c, "recovery") && !is_na(c, "recovery") {
            missing.push(format!(
                "{c}: neither a recovery row nor an n/a with its reason"
            ));
        }
        if !has_row(c, "trace") && !is_na(c, "trace") {
            missing.push(format!(
                "{c}: neither a trace row nor an n/a with its reason"
            ));
        }
    }
    for c in [sql_default.as_str(), "sqlite-wal-r"] {
        if !has_row(c, "trace") {
            missing.push(format!("{c}: no app-like trace row"));
        }
    }
    if !rows.iter().any(|r| {
        r["workload"]
            .as_str()
            .is_some_and(|w| w.starts_with("floor"))
    }) {
        missing.push("no floor-workload row".into());
    }
    if !missing.is_empty() {
        return Err(missing.join("; "));
    }
    let head = std::fs::read_to_string(out.join("headline.txt")).map_err(|e| e.to_string())?;
    if !head.contains(inpage::DEFAULT_JOURNAL_MODE.name())
        || !head.contains("index.html")
        || !head.contains("App-like SQL traces")
    {
        return Err(format!(
            "headline.txt does not name the default mode and the report: {head}"
        ));
    }
    Ok(())
}

#[test]
fn the_main_job_runs_every_contender() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("results");
    let (ok, log) = main_job(&out, None);
    assert!(ok, "scripts/main.sh (short form) failed:\n{log}");
    check_outputs(&out).unwrap_or_else(|e| panic!("{e}\n{log}"));
    assert!(
        log.contains("Headline:"),
        "the run ends with the headline:\n{log}"
    );
}

/// The check can fail: a contender whose crash child never reaches its stop point makes
/// the main job exit non-zero, naming it.
#[test]
fn a_broken_contender_turns_the_main_job_red() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("results");
    let (ok, log) = main_job(&out, Some("default,test-broken-crash"));
    assert!(!ok, "the main job passed with a broken contender:\n{log}");
    assert!(log.contains("test-broken-crash"), "{log}");
}

/// `cargo tree --offline --locked <args> -p <pkg>` over the workspace: its output.
fn cargo_tree(pkg: &str, args: &[&str]) -> String {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let o = Command::new(&cargo)
        .current_dir(repo())
        .args(["tree", "--offline", "--locked"])
        .args(args)
        .args(["-p", pkg])
        .output()
        .expect("cargo tree runs");
    assert!(
        o.status.success(),
        "cargo tree -p {pkg}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The product carries no planted bugs: the engine's `mutants` feature is reachable only
/// from test builds (dev-dependencies) and the torture development binary, never through
/// the normal dependencies of the `inpage` CLI or of the drop-in `libsqlite3.so`.
#[test]
fn the_product_builds_carry_no_planted_bugs() {
    for pkg in ["inpage-cli", "inpage-libsqlite3", "inpage-sql"] {
        let tree = cargo_tree(pkg, &["-e", "features,normal", "-i", "inpage"]);
        assert!(
            tree.contains("inpage feature"),
            "{pkg}: unexpected tree:\n{tree}"
        );
        assert!(
            !tree.contains("mutants"),
            "{pkg} enables the engine's planted bugs:\n{tree}"
        );
    }
}

/// The simulated disk is test tooling: the builds that store data (the engine, the SQL
/// layer, the drop-in `libsqlite3.so`) do not link `inpage-sim` through their normal
/// dependencies; only tests, the torture harness, the fuzzer and the bench do.
#[test]
fn the_storing_builds_do_not_link_the_simulator() {
    for pkg in ["inpage", "inpage-sql", "inpage-libsqlite3"] {
        let tree = cargo_tree(pkg, &["-e", "normal"]);
        assert!(
            tree.contains("inpage-vfs"),
            "{pkg}: unexpected tree:\n{tree}"
        );
        assert!(
            !tree.contains("inpage-sim"),
            "{pkg} links the simulated disk:\n{tree}"
        );
    }
    // And the check can fail: the torture harness does link it.
    assert!(cargo_tree("inpage-torture", &["-e", "normal"]).contains("inpage-sim"));
}
