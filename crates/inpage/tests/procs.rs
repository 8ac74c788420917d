//! Several handles on one database file, as several processes would hold them (`procs`):
//! two `Database` handles of one path in this process lock each other out exactly as two
//! processes do (their locks belong to open file descriptions), so every mode of the
//! registry is checked here without forking; `tests/procs_kill.rs` uses real processes.

use std::time::Duration;

use inpage::{Config, Database, Error, JournalMode, KeyKind, ReadableTxn};

fn config(mode: JournalMode, wait: Duration) -> Config {
    Config::default().journal_mode(mode).busy_timeout(wait)
}

/// The modes whose journals take turns (acknowledged commits in files every process
/// finds): all but `nvlog` (a memory region named after the path) and `waldio-gs`
/// (commits acknowledged from process memory).
fn sharing_modes() -> impl Iterator<Item = JournalMode> {
    JournalMode::all().filter(|m| {
        let c = m.capabilities();
        c.survives_process_crash && !c.region_backed
    })
}

fn put(db: &Database, k: i64, v: &[u8]) -> inpage::Result<()> {
    let mut w = db.begin_write()?;
    let t = w.open_or_create_tree("t", KeyKind::Int)?;
    w.insert(&t, k, v)?;
    w.commit()
}

fn get(db: &Database, k: i64) -> inpage::Result<Option<Vec<u8>>> {
    let r = db.begin_read()?;
    let t = r.open_tree("t")?;
    r.get(&t, k)
}

/// Two handles take turns: each sees the other's commits at its next transaction, a
/// reader of one keeps the other's writer out (Busy after the timeout), and the last
/// one out leaves the database as one file.
#[test]
fn two_handles_take_turns_in_every_sharing_mode() {
    for mode in sharing_modes() {
        let name = mode.name();
        let dir = tempfile::tempdir().expect(name);
        let path = dir.path().join("t.db");
        let a = Database::open(&path, config(mode, Duration::from_secs(5))).expect(name);
        let b = Database::open(&path, config(mode, Duration::from_millis(50))).expect(name);
        put(&a, 1, b"one").expect(name);
        assert_eq!(
            get(&b, 1).expect(name).as_deref(),
            Some(&b"one"[..]),
            "{mode}"
        );
        put(&b, 2, b"two").expect(name);
        assert_eq!(
            get(&a, 2).expect(name).as_deref(),
            Some(&b"two"[..]),
            "{mode}"
        );
        for i in 0..50 {
            let (w, r) = if i % 2 == 0 { (&a, &b) } else { (&b, &a) };
            put(w, 100 + i, format!("v{i}").as_bytes()).expect(name);
            assert_eq!(
                get(r, 100 + i).expect(name),
                Some(format!("v{i}").into_bytes()),
                "{mode}: round {i}"
            );
        }
        // Both current (a handle that must open the file again needs the write turn).
        get(&a, 1).expect(name);
        get(&b, 1).expect(name);
        let appends = mode.capabilities().appends_beside_readers;
        // A reader of `a` keeps `b`'s writer out, unless its commits only append: then
        // the reader keeps its snapshot, and `a`'s next transaction sees the commit.
        let held = a.begin_read().expect(name);
        let t = held.open_tree("t").expect(name);
        if appends {
            put(&b, 3, b"three").expect(name);
            assert_eq!(held.get(&t, 3).expect(name), None, "{mode}: snapshot");
        } else {
            assert!(matches!(b.begin_write(), Err(Error::Busy)), "{mode}");
        }
        // Readers share.
        assert_eq!(
            get(&b, 1).expect(name).as_deref(),
            Some(&b"one"[..]),
            "{mode}"
        );
        drop(held);
        put(&b, 3, b"three").expect(name);
        // A writer of `a` keeps `b`'s readers out, unless it only appends.
        let w = a.begin_write().expect(name);
        match b.begin_read() {
            Ok(r) if appends => drop(r),
            Err(Error::Busy) if !appends => {}
            other => panic!("{mode}: a reader beside a writer: {:?}", other.map(|_| ())),
        }
        drop(w);
        assert_eq!(
            get(&a, 3).expect(name).as_deref(),
            Some(&b"three"[..]),
            "{mode}"
        );
        drop(a);
        assert_eq!(
            get(&b, 2).expect(name).as_deref(),
            Some(&b"two"[..]),
            "{mode}"
        );
        drop(b);
        let shm = inpage::internals::shm_path(&path);
        assert!(!shm.exists(), "{mode}: {} left behind", shm.display());
        let again = Database::open(&path, config(mode, Duration::ZERO)).expect(name);
        assert_eq!(
            get(&again, 149).expect(name).as_deref(),
            Some(&b"v49"[..]),
            "{mode}"
        );
    }
}

/// A journal that cannot share (`nvlog`: its region is named after the path as each
/// process spells it) keeps the file: a second handle waits for the busy timeout, then is refused.
#[test]
fn a_journal_that_cannot_share_keeps_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    let cfg = Config::default()
        .journal_mode(JournalMode::NVLOG)
        .busy_timeout(Duration::from_millis(30));
    let a = Database::open(&path, cfg.clone()).unwrap();
    put(&a, 1, b"one").unwrap();
    assert!(matches!(
        Database::open(&path, cfg.clone()),
        Err(Error::Locked { .. })
    ));
    drop(a);
    let b = Database::open(&path, cfg).unwrap();
    assert_eq!(get(&b, 1).unwrap().as_deref(), Some(&b"one"[..]));
}

/// Handles in threads as processes in a race: two writers and a reader, each its own
/// handle, with a small ring so that `redo`'s background flusher runs between them. Every
/// acknowledged commit is there at the end, and every reader sees a prefix of each
/// writer's commits that never shrinks (reads are monotonic and committed).
#[test]
fn racing_handles_lose_nothing_and_read_monotonically() {
    const WRITERS: i64 = 2;
    const COMMITS: i64 = 60;
    for mode in sharing_modes() {
        let name = mode.name();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let cfg = |mode: JournalMode| {
            let c = config(mode, Duration::from_secs(20));
            if mode
                .options()
                .contains(&inpage::JournalOption::NvlogRingBytes)
            {
                c.nvlog_ring_bytes(64 * 1024)
            } else {
                c
            }
        };
        {
            let db = Database::open(&path, cfg(mode)).expect(name);
            put(&db, -1, b"seed").expect(name);
        }
        let done = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            let writers: Vec<_> = (0..WRITERS)
                .map(|w| {
                    let path = &path;
                    s.spawn(move || {
                        let db = Database::open(path, cfg(mode)).expect(name);
                        for i in 0..COMMITS {
                            // Each commit also updates the writer's high-water mark.
                            let mut t = db.begin_write().expect(name);
                            let tree = t.open_tree("t").expect(name);
                            t.insert(&tree, w * 1_000_000 + i, &[7u8; 300]).expect(name);
                            t.insert(&tree, 1_000_000_000 + w, &i.to_le_bytes())
                                .expect(name);
                            t.commit().expect(name);
                        }
                    })
                })
                .collect();
            let reader = s.spawn(|| {
                let db = Database::open(&path, cfg(mode)).expect(name);
                let mut last = [-1i64; WRITERS as usize];
                let mut reads = 0;
                while !done.load(std::sync::atomic::Ordering::SeqCst) || reads < 5 {
                    let r = db.begin_read().expect(name);
                    let t = r.open_tree("t").expect(name);
                    for w in 0..WRITERS {
                        let mark = r
                            .get(&t, 1_000_000_000 + w)
                            .expect(name)
                            .map_or(-1, |v| i64::from_le_bytes(v.try_into().unwrap()));
                        assert!(mark >= last[w as usize], "{mode}: writer {w} went back");
                        last[w as usize] = mark;
                        // Everything up to the mark is there (one commit wrote both).
                        if mark >= 0 {
                            assert!(r.get(&t, w * 1_000_000 + mark).unwrap().is_some());
                        }
                    }
                    reads += 1;
                }
                reads
            });
            for w in writers {
                w.join().unwrap();
            }
            done.store(true, std::sync::atomic::Ordering::SeqCst);
            assert!(reader.join().unwrap() >= 5);
        });
        assert!(
            !inpage::internals::shm_path(&path).exists(),
            "{mode}: side file left"
        );
        let db = Database::open(&path, cfg(mode)).expect(name);
        let r = db.begin_read().unwrap();
        let t = r.open_tree("t").unwrap();
        for w in 0..WRITERS {
            for i in 0..COMMITS {
                assert!(
                    r.get(&t, w * 1_000_000 + i).unwrap().is_some(),
                    "{mode}: writer {w}'s commit {i} lost"
                );
            }
        }
    }
}

/// The bug this protocol must never have, planted (`Mutant::SkipWriteAnnounce`: a writer
/// does not tell the other handles to look again): two handles taking turns find it in
/// every mode that shares (a commit missed, or written over).
#[cfg(feature = "mutants")]
#[test]
fn mutant_skip_write_announce_is_found() {
    for mode in sharing_modes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let cfg = config(mode, Duration::from_secs(5)).mutant(inpage::Mutant::SkipWriteAnnounce);
        let a = Database::open(&path, cfg.clone()).unwrap();
        let b = Database::open(&path, cfg).unwrap();
        let found = (|| -> inpage::Result<bool> {
            put(&a, 1, b"one")?;
            put(&b, 2, b"two")?;
            put(&a, 3, b"three")?;
            Ok(get(&b, 1)?.is_none() || get(&a, 2)?.is_none() || get(&b, 3)?.is_none())
        })();
        assert!(
            !matches!(found, Ok(false)),
            "{mode}: skip-write-announce not found"
        );
    }
}

/// A thread waiting for another handle's readers to leave (its write turn) does not hold
/// up the other threads of its handle: one of them ends its read transaction, and starts
/// another, while the writer still waits.
#[test]
fn a_waiting_writer_does_not_hold_up_its_handles_readers() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    let a = Database::open(&path, config(JournalMode::WAL, Duration::from_secs(10))).unwrap();
    let b = Database::open(&path, config(JournalMode::WAL, Duration::from_secs(10))).unwrap();
    put(&a, 1, b"one").unwrap();
    let a_reader = a.begin_read().unwrap();
    let b_reader = b.begin_read().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::scope(|s| {
        let writer = s.spawn(|| put(&a, 2, b"two"));
        // The writer is waiting for `b`'s reader (it took `RESERVED` and `PENDING`).
        std::thread::sleep(Duration::from_millis(100));
        let a2 = &a;
        s.spawn(move || {
            drop(a_reader);
            // A new reader of `a` starts beside its waiting writer.
            let again = get(a2, 1).unwrap();
            tx.send(again).unwrap();
        });
        let got = rx.recv_timeout(Duration::from_secs(3));
        assert_eq!(
            got.ok().flatten().as_deref(),
            Some(&b"one"[..]),
            "a reader of the waiting writer's handle was held up"
        );
        drop(b_reader);
        writer.join().unwrap().unwrap();
    });
    assert_eq!(get(&b, 2).unwrap().as_deref(), Some(&b"two"[..]));
}
