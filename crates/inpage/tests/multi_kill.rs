//! Process kills during transactions across two databases (`inpage::commit_all`) on real
//! files: a child process commits one row into each of two databases per transaction,
//! printing `commit <i>` after each acknowledgement, and is SIGKILLed at a random moment.
//! Reopened, both databases hold rows 1..=n for the same n, which is the last commit
//! acknowledged or the one in flight: never one database without the other. 50 kills for
//! every mode that can take part, paired with a mode of another family.
//!
//! The child is this test binary run again (`child_loop`, which does nothing unless
//! `INPAGE_MULTI_KILL` names its databases).

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use inpage::{Config, Database, JournalMode, KeyKind, ReadableTxn};

const KILLS_PER_MODE: u64 = 50;
const CHILD_ENV: &str = "INPAGE_MULTI_KILL";

fn config(mode: JournalMode, dir: &Path) -> Config {
    let mut c = Config::default().journal_mode(mode);
    if mode.capabilities().region_backed {
        c = c.nvlog_region(dir.join("region"));
    } else if mode
        .options()
        .contains(&inpage::JournalOption::NvlogRingBytes)
    {
        // `redo`: a small ring, so its background flusher runs often and the pause that
        // keeps it out of a transaction across databases is exercised.
        c = c.nvlog_ring_bytes(16 << 10);
    }
    c
}

/// The child: `INPAGE_MULTI_KILL=<dir>|<mode one>|<mode two>`; commits until killed.
#[test]
fn child_loop() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let parts: Vec<&str> = spec.split('|').collect();
    let dir = Path::new(parts[0]);
    let m1 = JournalMode::from_name(parts[1]).unwrap();
    let m2 = JournalMode::from_name(parts[2]).unwrap();
    let a = Database::open(dir.join("one.db"), config(m1, dir)).unwrap();
    let b = Database::open(dir.join("two.db"), config(m2, dir)).unwrap();
    let out = std::io::stdout();
    for i in 1i64.. {
        let mut wa = a.begin_write().unwrap();
        let mut wb = b.begin_write().unwrap();
        let ta = wa.open_or_create_tree("t", KeyKind::Int).unwrap();
        let tb = wb.open_or_create_tree("t", KeyKind::Int).unwrap();
        let v = vec![(i % 251) as u8; 100 + (i as usize * 37) % 3000];
        wa.insert(&ta, i, &v).unwrap();
        wb.insert(&tb, i, &v).unwrap();
        inpage::commit_all(vec![wa, wb]).unwrap();
        let mut o = out.lock();
        writeln!(o, "commit {i}").unwrap();
        o.flush().unwrap();
    }
}

/// Rows 1..=n of tree "t", or an error naming what is wrong.
fn rows(db: &Database) -> Result<i64, String> {
    let r = db.begin_read().map_err(|e| e.to_string())?;
    let t = match r.open_tree("t") {
        Ok(t) => t,
        Err(inpage::Error::TreeNotFound(_)) => return Ok(0),
        Err(e) => return Err(e.to_string()),
    };
    let mut n = 0i64;
    for kv in r.iter(&t).map_err(|e| e.to_string())? {
        let (k, v) = kv.map_err(|e| e.to_string())?;
        n += 1;
        let k = k.as_int().ok_or("not an int key")?;
        if k != n || v.len() != 100 + (k as usize * 37) % 3000 {
            return Err(format!("row {n} is key {k} with {} bytes", v.len()));
        }
    }
    inpage::check::check(&r, &Default::default()).map_err(|e| e.to_string())?;
    Ok(n)
}

fn kill_round(m1: JournalMode, m2: JournalMode, seed: u64) -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut child = Command::new(exe)
        .args(["--exact", "child_loop", "--nocapture", "--test-threads=1"])
        .env(
            CHILD_ENV,
            format!("{}|{}|{}", dir.path().display(), m1.name(), m2.name()),
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| e.to_string())?;
    let mut lines = BufReader::new(child.stdout.take().ok_or("no stdout")?).lines();
    // Deterministic per seed: wait for 0..30 commits, then up to 2 ms more.
    let mix = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(17);
    let wait_for = mix % 30;
    let mut acked = 0i64;
    let parse = |l: &str| {
        l.strip_prefix("commit ")
            .and_then(|n| n.parse::<i64>().ok())
    };
    while (acked as u64) < wait_for {
        match lines.next() {
            Some(Ok(l)) => {
                if let Some(n) = parse(&l) {
                    acked = n;
                }
            }
            _ => break,
        }
    }
    std::thread::sleep(Duration::from_micros((mix >> 20) % 2000));
    let _ = child.kill();
    let _ = child.wait();
    for l in lines.map_while(Result::ok) {
        if let Some(n) = parse(&l) {
            acked = n;
        }
    }
    let what = format!("{m1}+{m2} seed {seed} acked {acked}");
    let a = Database::open(dir.path().join("one.db"), config(m1, dir.path()))
        .map_err(|e| format!("{what}: reopen one: {e}"))?;
    let b = Database::open(dir.path().join("two.db"), config(m2, dir.path()))
        .map_err(|e| format!("{what}: reopen two: {e}"))?;
    let (na, nb) = (
        rows(&a).map_err(|e| format!("{what}: one: {e}"))?,
        rows(&b).map_err(|e| format!("{what}: two: {e}"))?,
    );
    if na != nb {
        return Err(format!("{what}: torn: one has {na} rows, two {nb}"));
    }
    if na < acked || na > acked + 1 {
        return Err(format!("{what}: {na} rows"));
    }
    Ok(())
}

#[test]
fn sigkill_during_commits_across_databases() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let rounds: Vec<(JournalMode, JournalMode, u64)> = JournalMode::all()
        .filter(|m| {
            let c = m.capabilities();
            !c.region_backed && c.survives_process_crash && m.promises_atomicity()
        })
        .flat_map(|m1| {
            let m2 = if m1 == JournalMode::WAL {
                JournalMode::DHL_CC
            } else {
                JournalMode::WAL
            };
            (0..KILLS_PER_MODE).map(move |k| (m1, m2, k * 7919 + m1.code() as u64))
        })
        .collect();
    // Two rounds at a time (each its own child and directory): the child mostly waits
    // on its commits' syncs, so the machine's cores are not the limit.
    let failures: Vec<String> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..2)
            .map(|w| {
                let rounds = &rounds;
                s.spawn(move || {
                    rounds
                        .iter()
                        .skip(w)
                        .step_by(2)
                        .filter_map(|&(m1, m2, seed)| kill_round(m1, m2, seed).err())
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|h| h.join().expect("kill worker panicked"))
            .collect()
    });
    let rounds = rounds.len();
    assert!(
        failures.is_empty(),
        "{} of {rounds} kills: {failures:#?}",
        failures.len()
    );
    println!("{rounds} kills, 0 torn");
}
