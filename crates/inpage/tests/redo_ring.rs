//! The `redo` mode's ring file (`<db>-redo`) across crashes, built byte by byte from its
//! documented format (`docs/FORMAT.md`, "nvlog region" and "redo ring file").
//!
//! `an_interrupted_record_never_comes_back`: the torture found (2 in 100,000 sequences,
//! seed 101) that a record a crash interrupted could return one crash later. Recovery
//! stops at the torn record and the next session writes its own first record over it,
//! with the same seq; a torn store of that new record which lands only its seq bytes
//! leaves the old record whole again, and the crash after it replays a commit that the
//! first recovery rolled back. The open now clears the stale header durably before the
//! session writes anything. This test builds the case directly: the old record is made
//! invalid by one byte of its seq, a session opens and crashes without committing, and
//! the byte comes back (what the torn store would bring back).

mod common;

use std::path::Path;

use common::{apply, dump, sim_config};
use inpage::vfs::{OpenOptions, Vfs};
use inpage::{Database, JournalMode, NvlogFlush};
use inpage_sim::SimVfs;

const DB: &str = "/t/ring.db";
const RING_FILE: &str = "/t/ring.db-redo";
/// Where the ring starts in the file, the watermark slots, a record header's length.
const RING_AT: u64 = 128;
const SLOTS: [usize; 2] = [64, 96];
const REC_HDR: u64 = 16;

fn le64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// The file offsets of every record from the newest watermark slot's head on, with
/// their seqs (the ring here never wraps).
fn records(vfs: &SimVfs) -> Vec<(u64, u64)> {
    let f = vfs.read_file(Path::new(RING_FILE)).expect("a ring file");
    let (_, head) = SLOTS
        .iter()
        .map(|&at| (le64(&f, at + 16), le64(&f, at + 8)))
        .max()
        .unwrap();
    let (mut pos, mut out) = (RING_AT + head, Vec::new());
    loop {
        let at = pos as usize;
        let (seq, len) = (
            le64(&f, at),
            u32::from_le_bytes(f[at + 8..at + 12].try_into().unwrap()),
        );
        if seq == 0 || len == 0 {
            return out;
        }
        out.push((pos, seq));
        pos += REC_HDR + len as u64;
    }
}

fn poke(vfs: &SimVfs, offset: u64, byte: u8) {
    let f = vfs
        .open(Path::new(RING_FILE), OpenOptions::default())
        .unwrap();
    f.write_at(&[byte], offset).unwrap();
    f.sync_data().unwrap();
}

fn open(vfs: &SimVfs) -> Database {
    let c = sim_config(vfs, JournalMode::REDO, 4096)
        .nvlog_flush(NvlogFlush::Inline)
        .nvlog_ring_bytes(256 << 10);
    Database::open(DB, c).unwrap()
}

fn rows(db: &Database) -> Vec<i64> {
    dump(db).into_keys().collect()
}

#[test]
fn an_interrupted_record_never_comes_back() {
    let vfs = SimVfs::new();
    let db = open(&vfs);
    for k in 1..=3i64 {
        apply(&db, &[(k, Some(vec![k as u8; 40]))]).unwrap();
    }
    // A process crash keeps everything stored: all three commits are in the ring.
    let crashed = vfs.process_crash();
    drop(db);
    let recs = records(&crashed);
    let &(last_at, last_seq) = recs.last().expect("records in the ring");
    // The last commit "was interrupted": one byte of its seq is wrong.
    let good = (last_seq & 0xff) as u8;
    poke(&crashed, last_at, good ^ 0x5a);

    let db = open(&crashed);
    assert_eq!(rows(&db), [1, 2], "the interrupted commit is rolled back");
    // This session crashes before it commits anything ...
    let again = crashed.process_crash();
    drop(db);
    // ... and a torn store of its first record brought back only that record's seq,
    // which is the interrupted one's.
    poke(&again, last_at, good);
    let db = open(&again);
    assert_eq!(
        rows(&db),
        [1, 2],
        "a commit the last recovery rolled back came back"
    );
    drop(db);
}

/// Where the file system takes `O_DIRECT` (the simulated disk does), a commit's record
/// goes down as the sectors it covers: each commit is a direct write, the records still
/// chain from the watermark slot (the sector before a record kept, the rest of its last
/// sector zeroed), and with `DirectWrites::Off` nothing is written direct.
#[test]
fn records_are_written_as_their_sectors_where_o_direct_is_taken() {
    for (setting, direct) in [
        (inpage::DirectWrites::Auto, true),
        (inpage::DirectWrites::Off, false),
    ] {
        let vfs = SimVfs::new();
        let c = sim_config(&vfs, JournalMode::REDO, 4096)
            .nvlog_flush(NvlogFlush::Inline)
            .nvlog_ring_bytes(256 << 10)
            .direct_writes(setting);
        let db = Database::open(DB, c).unwrap();
        apply(&db, &[(0, Some(vec![7; 40]))]).unwrap();
        let before = vfs.direct_writes();
        for k in 1..=5i64 {
            apply(&db, &[(k, Some(vec![k as u8; 40]))]).unwrap();
        }
        let written = vfs.direct_writes() - before;
        if direct {
            assert!(
                written >= 5,
                "{setting:?}: {written} direct writes for 5 commits"
            );
        } else {
            assert_eq!(written, 0, "{setting:?}");
        }
        let seqs: Vec<u64> = records(&vfs).into_iter().map(|(_, s)| s).collect();
        assert_eq!(seqs.len(), 6, "{setting:?}: {seqs:?}");
        assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
        drop(db);
    }
}

/// A small ring wrapped many times (records split across its end, stores into the file's
/// last, partial sector, which go through the page cache), then a power cut: every
/// acknowledged commit is there.
#[test]
fn a_wrapping_ring_keeps_every_commit_across_a_power_cut() {
    let vfs = SimVfs::new();
    let c = || {
        sim_config(&vfs, JournalMode::REDO, 4096)
            .nvlog_flush(NvlogFlush::Inline)
            .nvlog_ring_bytes(16 << 10)
    };
    let db = Database::open(DB, c()).unwrap();
    for k in 0..400i64 {
        apply(
            &db,
            &[(k, Some(vec![(k % 251) as u8; 90 + (k % 7) as usize * 13]))],
        )
        .unwrap();
    }
    let want = dump(&db);
    let crashed = vfs.crash(0x5eed, inpage_sim::CrashModel::full());
    drop(db);
    let c = sim_config(&crashed, JournalMode::REDO, 4096)
        .nvlog_flush(NvlogFlush::Inline)
        .nvlog_ring_bytes(16 << 10);
    let db = Database::open(DB, c).unwrap();
    assert_eq!(dump(&db), want);
}

/// On a real file system that takes `O_DIRECT` (this machine's /var/tmp is ext4), a new
/// database with `DirectWrites::On` opens (the setting is checked at open, before the
/// first commit creates the ring) and its commits read back after a reopen.
#[test]
fn direct_ring_writes_on_a_real_file_system() {
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let path = dir.path().join("d.db");
    let cfg = || {
        inpage::Config::default()
            .journal_mode(JournalMode::REDO)
            .direct_writes(inpage::DirectWrites::On)
    };
    {
        let db = Database::open(&path, cfg()).unwrap();
        for k in 0..200i64 {
            apply(&db, &[(k, Some(format!("row {k}").into_bytes()))]).unwrap();
        }
    }
    assert!(dir.path().join("d.db-redo").exists());
    let db = Database::open(&path, cfg()).unwrap();
    let got = dump(&db);
    assert_eq!(got.len(), 200);
    assert_eq!(got[&7], b"row 7".to_vec());
}
