//! The `nvlog` journal mode (xLog): what each of its promises means on the simulated
//! disk. Acknowledged commits live in the memory region until a flush: a process crash
//! keeps them (the region survives), a power cut keeps them only when the region is
//! persistent memory, and without the region the file alone holds a prefix of whole
//! commits reaching at least the durable watermark (`Database::durable_tid`).

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use common::*;
use inpage::vfs::Vfs;
use inpage::{Config, Database, Error, JournalMode, NvlogFlush};
use inpage_sim::{CrashModel, SimVfs};

const REGION: &str = "/shm/test-region";

fn cfg(vfs: &SimVfs, ring: u32, flush: NvlogFlush) -> Config {
    sim_config(vfs, JournalMode::NVLOG, 1024)
        .nvlog_region(REGION)
        .nvlog_ring_bytes(ring)
        .nvlog_flush(flush)
}

type Model = BTreeMap<i64, Vec<u8>>;

/// `n` one- or two-row transactions; returns the model after each (index 0: empty) and
/// the durable watermark and FCC after each commit.
fn run(db: &Database, n: usize, len: usize) -> (Vec<Model>, Vec<(u64, u64)>) {
    let mut m = Model::new();
    let mut states = vec![m.clone()];
    let mut marks = vec![(0, 0)];
    for i in 0..n as i64 {
        let ops: Vec<(i64, Option<Vec<u8>>)> = (0..1 + i % 2)
            .map(|j| ((i * 7 + j) % 50, Some(value_for(i, j as u32, len))))
            .collect();
        apply(db, &ops).unwrap();
        apply_model(&mut m, &ops);
        states.push(m.clone());
        marks.push((
            db.durable_tid().expect("nvlog reports a watermark"),
            db.fcc(),
        ));
    }
    (states, marks)
}

/// If the last commit of a run filled the ring and was flushed, one more that only the
/// region holds (a record far below the fill threshold): the tests need commits past the
/// durable watermark, wherever the record sizes put the flushes.
fn end_unflushed(db: &Database, states: &mut Vec<Model>, marks: &mut Vec<(u64, u64)>) {
    if marks.last().is_some_and(|(w, fcc)| w == fcc) {
        let ops = [(1, Some(b"unflushed".to_vec()))];
        apply(db, &ops).unwrap();
        let mut m = states.last().unwrap().clone();
        apply_model(&mut m, &ops);
        states.push(m);
        marks.push((db.durable_tid().unwrap(), db.fcc()));
    }
}

#[test]
fn a_process_crash_keeps_every_commit_through_the_region() {
    let vfs = SimVfs::new();
    let db = Database::open(DB, cfg(&vfs, 64 << 10, NvlogFlush::Inline)).unwrap();
    let (mut states, mut marks) = run(&db, 45, 200);
    end_unflushed(&db, &mut states, &mut marks);
    let (w, fcc) = *marks.last().unwrap();
    assert!(
        w < fcc,
        "the last commits must still be only in the region: {marks:?}"
    );
    assert!(w > 0, "the ring's fill threshold must have flushed some");
    let crashed = vfs.process_crash();
    drop(db);
    let db = Database::open(DB, cfg(&crashed, 64 << 10, NvlogFlush::Inline)).unwrap();
    assert_eq!(dump(&db), *states.last().unwrap());
    assert_eq!(db.recovery_report().region_records, fcc - w);
    assert_eq!(db.fcc(), fcc);
    assert_checks(&db);
    // The replayed commits are in the file now: another crash replays nothing.
    apply(&db, &[(1000, Some(b"after".to_vec()))]).unwrap();
    let again = crashed.process_crash();
    drop(db);
    let db = Database::open(DB, cfg(&again, 64 << 10, NvlogFlush::Inline)).unwrap();
    assert_eq!(db.recovery_report().region_records, 1);
    assert_eq!(dump(&db).get(&1000).map(Vec::as_slice), Some(&b"after"[..]));
}

#[test]
fn a_power_cut_keeps_every_commit_on_a_persistent_region() {
    for seed in 0..20 {
        let vfs = SimVfs::new();
        vfs.set_regions_persistent(true);
        let db = Database::open(DB, cfg(&vfs, 64 << 10, NvlogFlush::Inline)).unwrap();
        let (states, _) = run(&db, 25, 300);
        let crashed = vfs.crash(seed, CrashModel::full());
        drop(db);
        let db = Database::open(DB, cfg(&crashed, 64 << 10, NvlogFlush::Inline)).unwrap();
        assert_eq!(dump(&db), *states.last().unwrap(), "seed {seed}");
        assert_checks(&db);
    }
}

#[test]
fn without_the_region_a_power_cut_keeps_a_prefix_through_the_watermark() {
    let mut lost_some = false;
    for seed in 0..30 {
        let vfs = SimVfs::new();
        let db = Database::open(DB, cfg(&vfs, 16 << 10, NvlogFlush::Inline)).unwrap();
        let (mut states, mut marks) = run(&db, 30, 400);
        end_unflushed(&db, &mut states, &mut marks);
        let (w, fcc) = *marks.last().unwrap();
        assert!(
            w < fcc,
            "seed {seed}: the last commit must be only in the region"
        );
        let crashed = vfs.crash(seed, CrashModel::full());
        assert!(crashed.region_names().is_empty(), "a cut drops /dev/shm");
        drop(db);
        let db = Database::open(DB, cfg(&crashed, 16 << 10, NvlogFlush::Inline)).unwrap();
        let got = dump(&db);
        let i = states
            .iter()
            .position(|s| *s == got)
            .unwrap_or_else(|| panic!("seed {seed}: not a prefix of the commits"));
        assert!(
            marks[i].1 >= w,
            "seed {seed}: recovered commit {} is below the durable watermark {w}",
            marks[i].1
        );
        lost_some |= i + 1 < states.len();
        assert_checks(&db);
    }
    assert!(
        lost_some,
        "some cut must have lost the commits after the watermark"
    );
}

/// The database file's length in pages (of 1 KiB, `cfg`'s).
fn db_pages(vfs: &SimVfs) -> u64 {
    use inpage::vfs::{OpenOptions, Vfs};
    let f = vfs
        .open(std::path::Path::new(DB), OpenOptions::default())
        .unwrap();
    f.len().unwrap() / 1024
}

/// How many growth steps take the file from `from` pages to `to` (`sim_config`'s chunk
/// of 8 pages; the steps of `dbfile::grown_len`: a power of two pages about an eighth
/// of the file, at least 4).
fn grown_steps(from: u64, to: u64) -> usize {
    let (mut len, mut steps) = (from, 0);
    while len < to {
        len += (len / 8).next_power_of_two().clamp(4, 8);
        steps += 1;
    }
    steps
}

#[test]
fn a_flush_syncs_at_most_twice_for_many_commits() {
    let vfs = SimVfs::new();
    let c = cfg(&vfs, 64 << 10, NvlogFlush::Inline).wal_autocheckpoint(0);
    let db = Database::open(DB, c).unwrap();
    let syncs_before = vfs.sync_points().len();
    let pages_before = db_pages(&vfs);
    let (_, marks) = run(&db, 200, 100);
    let flushes = marks.windows(2).filter(|w| w[1].0 != w[0].0).count();
    let syncs = vfs.sync_points().len() - syncs_before;
    assert!(flushes >= 2, "{flushes} flushes");
    assert!(flushes <= 200 / 10, "{flushes} flushes for 200 commits");
    // One fdatasync of the log per flush, one of the database for a flush that wrote
    // pages past its end, plus the log's generation header once; and one per step the
    // file grew by (its zero-filled growth is synced before pages land in it), at most
    // one per flush.
    let steps = grown_steps(pages_before, db_pages(&vfs));
    assert!(
        steps <= flushes,
        "{steps} growth steps for {flushes} flushes"
    );
    assert!(
        syncs <= 2 * flushes + 1 + steps,
        "{syncs} syncs for {flushes} flushes and {steps} growth steps"
    );
}

/// Appends: the pages a flush adds past the database's committed end are written once,
/// in place, and never logged; every other page still goes through the log. Both
/// ways leave the same database, and a power cut on a persistent region loses nothing.
#[test]
fn pages_past_the_end_are_written_in_place_not_logged() {
    let mut frames = Vec::new();
    for direct in [true, false] {
        let vfs = SimVfs::new();
        vfs.set_regions_persistent(true);
        let c = cfg(&vfs, 64 << 10, NvlogFlush::Inline)
            .wal_autocheckpoint(0)
            .nvlog_direct_pages(direct);
        let db = Database::open(DB, c).unwrap();
        let mut model = Model::new();
        for k in 0..400i64 {
            let ops = vec![(k, Some(value_for(k, 0, 100)))];
            apply(&db, &ops).unwrap();
            apply_model(&mut model, &ops);
        }
        // The ring's fill flushed most of them (at the same points both ways); the rest
        // wait in the region.
        frames.push((db.log_frames(), db.header().page_count));
        let crashed = vfs.crash(7, CrashModel::full());
        drop(db);
        let db = Database::open(DB, cfg(&crashed, 64 << 10, NvlogFlush::Inline)).unwrap();
        assert_eq!(dump(&db), model, "direct {direct}");
        assert!(
            db.recovery_report().region_records > 0,
            "some commits were replayed"
        );
        assert_checks(&db);
    }
    let [(direct, pages), (logged, pages_logged)] = frames[..] else {
        unreachable!()
    };
    assert_eq!(pages, pages_logged);
    assert!(
        logged >= u64::from(pages) / 2,
        "logging every page logs each one: {logged} frames for {pages} pages"
    );
    assert!(
        direct * 4 < logged,
        "appends log the pages they change, not the ones they add: {direct} frames against {logged}"
    );
}

#[test]
fn a_full_ring_waits_for_the_flusher_and_big_commits_bypass_it() {
    let vfs = SimVfs::new();
    let db = Database::open(DB, cfg(&vfs, 16 << 10, NvlogFlush::Inline)).unwrap();
    let (states, _) = run(&db, 60, 1500);
    let mut model = states.last().unwrap().clone();
    // A record larger than the whole ring (overflow pages of a 40 KB value).
    let big = vec![(7777, Some(value_for(7777, 1, 40_000)))];
    apply(&db, &big).unwrap();
    apply_model(&mut model, &big);
    assert_eq!(
        db.durable_tid(),
        Some(db.fcc()),
        "a bypassing commit is synced"
    );
    let small = vec![(7778, Some(b"tail".to_vec()))];
    apply(&db, &small).unwrap();
    apply_model(&mut model, &small);
    let crashed = vfs.process_crash();
    drop(db);
    let db = Database::open(DB, cfg(&crashed, 16 << 10, NvlogFlush::Inline)).unwrap();
    assert_eq!(dump(&db), model);
    assert_checks(&db);
}

/// The ring bytes of the region (after its 128-byte header).
fn region_bytes(vfs: &SimVfs) -> (Arc<dyn inpage::vfs::Region>, Vec<u8>) {
    let r = vfs.open_region(Path::new(REGION), None).unwrap();
    let mut b = vec![0u8; r.len()];
    r.read(0, &mut b).unwrap();
    (r, b)
}

#[test]
fn replay_stops_at_a_record_whose_checksum_fails() {
    let vfs = SimVfs::new();
    let db = Database::open(DB, cfg(&vfs, 64 << 10, NvlogFlush::Inline)).unwrap();
    let (states, marks) = run(&db, 5, 100);
    assert_eq!(marks.last().unwrap().0, 0, "nothing flushed yet");
    let crashed = vfs.process_crash();
    drop(db);
    // Damage the last byte of the newest record: its checksum fails, the four before it
    // replay, and nothing after it may.
    let (r, b) = region_bytes(&crashed);
    let last = b.iter().rposition(|&x| x != 0).unwrap();
    r.write(last, &[b[last] ^ 0x5A]).unwrap();
    let db = Database::open(DB, cfg(&crashed, 64 << 10, NvlogFlush::Inline)).unwrap();
    assert_eq!(db.recovery_report().region_records, 4);
    assert_eq!(dump(&db), states[4]);
    assert_checks(&db);
}

#[test]
fn a_region_of_another_database_is_refused() {
    let vfs = SimVfs::new();
    let db = Database::open(DB, cfg(&vfs, 64 << 10, NvlogFlush::Inline)).unwrap();
    run(&db, 3, 100);
    let crashed = vfs.process_crash();
    drop(db);
    let other = "/db/other.db";
    let c = cfg(&crashed, 64 << 10, NvlogFlush::Inline);
    match Database::open(other, c.clone()) {
        Err(Error::ForeignRegion { region, .. }) => assert_eq!(region, Path::new(REGION)),
        other => panic!("expected ForeignRegion, got {:?}", other.map(|_| ())),
    }
    // The region was left alone: its own database still replays it.
    let db = Database::open(DB, c).unwrap();
    assert_eq!(db.recovery_report().region_records, 3);
}

#[test]
fn a_file_that_is_no_region_is_refused_not_overwritten() {
    for (len, junk_at) in [(128 + (64 << 10), Some(4000)), (100, None)] {
        let vfs = SimVfs::new();
        let r = vfs.open_region(Path::new(REGION), Some(len)).unwrap();
        if let Some(at) = junk_at {
            r.write(at, b"someone else's data").unwrap();
        }
        let before = region_bytes(&vfs).1;
        match Database::open(DB, cfg(&vfs, 64 << 10, NvlogFlush::Inline)) {
            Err(Error::ForeignRegion { reason, .. }) => {
                assert!(reason.contains("not an nvlog region"), "{reason}")
            }
            other => panic!("expected ForeignRegion, got {:?}", other.map(|_| ())),
        }
        assert_eq!(region_bytes(&vfs).1, before, "the region was written");
    }
    // A blank one (created, then cut before its header) is taken over.
    let vfs = SimVfs::new();
    vfs.open_region(Path::new(REGION), Some(128 + (64 << 10)))
        .unwrap();
    let db = Database::open(DB, cfg(&vfs, 64 << 10, NvlogFlush::Inline)).unwrap();
    run(&db, 2, 10);
}

#[test]
fn the_background_flusher_flushes_and_close_removes_the_region() {
    let vfs = SimVfs::new();
    let db = Database::open(DB, cfg(&vfs, 64 << 10, NvlogFlush::Background)).unwrap();
    let (states, _) = run(&db, 5, 100);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while db.durable_tid() != Some(db.fcc()) {
        assert!(
            std::time::Instant::now() < deadline,
            "the flusher never ran"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    // Flushed: even a power cut that drops the region keeps every commit.
    let crashed = vfs.crash(3, CrashModel::full());
    assert!(crashed.region_names().is_empty());
    let c = cfg(&crashed, 64 << 10, NvlogFlush::Background);
    let db2 = Database::open(DB, c).unwrap();
    assert_eq!(dump(&db2), *states.last().unwrap());
    db2.close().unwrap();
    assert!(crashed.region_names().is_empty());
    assert_eq!(vfs.region_names().len(), 1);
    db.close().unwrap();
    assert!(
        vfs.region_names().is_empty(),
        "a clean close removes the region"
    );
}

#[test]
fn replay_after_a_checkpoint_rebuilds_page_0() {
    // The checkpoint stamps the FCC into the file's page 0, which then differs from the
    // pager's committed image: the records after it must still rebuild page 0 exactly.
    let vfs = SimVfs::new();
    let db = Database::open(DB, cfg(&vfs, 64 << 10, NvlogFlush::Inline)).unwrap();
    run(&db, 10, 200);
    db.checkpoint().unwrap();
    let mut model = dump(&db);
    for i in 0..20 {
        // Growing values: new pages, so the header's page count changes.
        let ops = vec![(5000 + i, Some(value_for(5000 + i, 0, 700)))];
        apply(&db, &ops).unwrap();
        apply_model(&mut model, &ops);
    }
    let crashed = vfs.process_crash();
    drop(db);
    let db = Database::open(DB, cfg(&crashed, 64 << 10, NvlogFlush::Inline)).unwrap();
    assert!(db.recovery_report().region_records > 0);
    assert_eq!(dump(&db), model);
    assert_checks(&db);
}

#[test]
fn nvlog_options_are_refused_for_other_modes() {
    let vfs = SimVfs::new();
    let c = sim_config(&vfs, JournalMode::WAL, 1024).nvlog_region(REGION);
    assert!(matches!(Database::open(DB, c), Err(Error::Config(m)) if m.contains("nvlog")));
    let c = cfg(&vfs, 1024, NvlogFlush::Inline);
    assert!(
        matches!(Database::open(DB, c), Err(Error::Config(m)) if m.contains("nvlog_ring_bytes"))
    );
}
