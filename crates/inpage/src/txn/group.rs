//! Group commit for concurrent writers (`Concurrency::Occ` and `TwoVto`): transactions
//! that finish validating while another group's flush is under way queue up, and the
//! next flush commits all of them as **one** physical transaction — one tid, one counting
//! commit, one fdatasync (design: `docs/CONCURRENCY-DESIGN.md` §11). This is the queue
//! and its validation; who flushes and who waits is `crate::group`, which `waldio-gc`'s
//! shared log syncs use too.
//!
//! Invariants, and why they hold:
//! - **A group is atomic on disk, and groups keep commit order.** The members' pages go
//!   to the pager as one batch under tid FCC + 1 (`Pager::commit`, each page re-tagged
//!   from its member's working tid), so recovery's vote keeps or drops the whole group,
//!   exactly as it does a single transaction; recovery needs no change. Members queue in
//!   their commit order (the order they validated in, under the commit turn), and
//!   groups flush one after another, so a crash keeps a prefix of the commit order.
//! - **No member is acknowledged before its group is durable.** `commit` returns only
//!   once the group's flush has returned (`GroupFlush::wait` with the group's number); a
//!   failed flush fails every member and every later group (and poisons the pager, as any
//!   failed commit does).
//! - **Members are serializable in queue order, and their pages are disjoint.** A
//!   transaction validates under the commit turn against the pager's commits since its
//!   snapshot *and* against every queued or flushing group (`conflicts_with`), and its
//!   header merges onto the newest queued header (`latest_header`). So a member never
//!   relied on a page an earlier member changed, and two members never write one page:
//!   the batch is their union, checked in release mode (a page written twice would lose
//!   one member's change silently).
//! - **2VTO's locks outlive the queue.** A member keeps its page locks until its group
//!   is durable and in the pager (`Vto::end` after `commit` returns), so no later
//!   transaction changes its pages on a stale base; it leaves the live set when it
//!   queues (`Vto::queued`), so younger transactions may queue behind it in the same
//!   group.

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use crate::error::{Pgno, Result};
use crate::format::header::Header;
use crate::group::{GroupFlush, GroupStats, Led, Pause};
use crate::page::PageRef;
use crate::pager::{AllocDelta, Pager, Spilled};

/// One validated transaction waiting for its group's flush.
pub(super) struct Member {
    /// The tag its versions carry until the commit re-tags them.
    pub(super) written: u64,
    pub(super) dirty: BTreeMap<Pgno, PageRef>,
    pub(super) alloc: AllocDelta,
    pub(super) catalog_changed: bool,
}

/// Transactions queued for one flush.
struct Group {
    /// Groups are numbered in flush order.
    number: u64,
    members: Vec<Member>,
    /// Pages the members wrote or freed (validation of later transactions).
    touched: BTreeSet<Pgno>,
    /// The header after the last member: each member's merged onto the one before.
    header: Header,
}

/// What validation needs of the group being flushed.
struct Flushing {
    touched: BTreeSet<Pgno>,
    header: Header,
}

#[derive(Default)]
struct State {
    pending: Option<Group>,
    flushing: Option<Flushing>,
    /// The number of the newest group (groups are numbered from 1, in flush order).
    last: u64,
}

/// The queue of one database's concurrent commits.
pub(crate) struct GroupCommit {
    state: Mutex<State>,
    /// The shared flushes; a member is a group's number.
    flushes: GroupFlush,
    /// How long a leader waits for more members before it flushes a group of one.
    delay: Duration,
    /// Off (`Config::group_commit(false)`): every commit flushes alone, holding the
    /// commit turn, as before group commit existed (the ablation).
    pub(super) enabled: bool,
    /// Test-only planted bugs, per database (the tests' threads share it).
    #[cfg(test)]
    pub(crate) plant: Plant,
}

/// Test-only planted bugs: a follower acknowledged as soon as it is queued (before its
/// group is durable), and validation that ignores queued and flushing groups.
#[cfg(test)]
#[derive(Default)]
pub(crate) struct Plant {
    pub(crate) early_ack: std::sync::atomic::AtomicBool,
    pub(crate) skip_group_validation: std::sync::atomic::AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A queued transaction's place: the group it joined.
pub(super) struct Ticket(u64);

/// Clears the flushing group when its flush ends, also by a panic.
struct EndFlush<'a>(&'a Mutex<State>);

impl Drop for EndFlush<'_> {
    fn drop(&mut self) {
        lock(self.0).flushing = None;
    }
}

impl GroupCommit {
    pub(crate) fn new(enabled: bool, delay: Duration) -> GroupCommit {
        GroupCommit {
            state: Mutex::new(State::default()),
            flushes: GroupFlush::new(),
            delay,
            enabled,
            #[cfg(test)]
            plant: Plant::default(),
        }
    }

    pub(crate) fn stats(&self) -> GroupStats {
        self.flushes.stats()
    }

    /// The header a validating transaction merges onto: the last queued member's, else
    /// the flushing group's, else the committed one. Call under the commit turn.
    pub(super) fn latest_header(&self, pager: &Pager) -> Header {
        let st = lock(&self.state);
        match (&st.pending, &st.flushing) {
            (Some(g), _) => g.header.clone(),
            (None, Some(f)) => f.header.clone(),
            (None, None) => pager.header(),
        }
    }

    /// The first of `pages` a queued or flushing group wrote or freed, with the tid that
    /// group will commit as (for `Error::Conflict::by`). Call under the commit turn.
    pub(super) fn conflicts_with(&self, pager: &Pager, pages: &[Pgno]) -> Option<(u64, Pgno)> {
        #[cfg(test)]
        if self
            .plant
            .skip_group_validation
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            return None;
        }
        let st = lock(&self.state);
        let fcc = pager.header().fcc;
        let flushing = st.flushing.as_ref().map(|f| (&f.touched, fcc + 1));
        let pending = st
            .pending
            .as_ref()
            .map(|g| (&g.touched, fcc + 1 + u64::from(st.flushing.is_some())));
        for (touched, by) in flushing.into_iter().chain(pending) {
            if let Some(&p) = pages.iter().find(|p| touched.contains(p)) {
                return Some((by, p));
            }
        }
        None
    }

    /// Queue a validated transaction whose merged header is `header`. Call under the
    /// commit turn, so members queue in commit order.
    pub(super) fn queue(&self, header: Header, member: Member) -> Ticket {
        let mut st = lock(&self.state);
        let touched_by_member = member
            .dirty
            .keys()
            .chain(&member.alloc.freed)
            .copied()
            .collect::<Vec<_>>();
        if st.pending.is_none() {
            st.last += 1;
            st.pending = Some(Group {
                number: st.last,
                members: Vec::new(),
                touched: BTreeSet::new(),
                header: header.clone(),
            });
        }
        let g = st.pending.as_mut().expect("a pending group");
        g.touched.extend(touched_by_member);
        g.header = header;
        g.members.push(member);
        Ticket(g.number)
    }

    /// Wait until every group queued or flushing now has finished: a transaction that
    /// conflicted with one would only conflict again if it ran before then.
    pub(crate) fn wait_flushed(&self) {
        let last = lock(&self.state).last;
        // The planted early acknowledgement can leave a group whose members all returned
        // without flushing it: nobody would ever finish it.
        #[cfg(test)]
        if self
            .plant
            .early_ack
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            return self
                .flushes
                .wait_covered(last, Some(Duration::from_millis(100)));
        }
        self.flushes.wait_covered(last, None);
    }

    /// Wait until the ticket's group is durable, flushing it (and whoever joined) if no
    /// flush is under way. The group's result.
    pub(super) fn wait(&self, pager: &Pager, ticket: Ticket) -> Result<()> {
        #[cfg(test)]
        if self
            .plant
            .early_ack
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            let st = lock(&self.state);
            if st.flushing.is_some() || st.pending.as_ref().is_some_and(|g| g.members.len() > 1) {
                // Someone else flushes: pretend the commit is durable already.
                return Ok(());
            }
        }
        // Give others the chance to join before the flush (commit_delay).
        let never = || false;
        let pause = (!self.delay.is_zero()).then_some(Pause {
            at_most: self.delay,
            enough: &never,
        });
        self.flushes.wait(ticket.0, pause, || {
            let mut st = lock(&self.state);
            // Groups flush in order, so the one not covered yet is the pending one.
            let Group {
                number,
                members,
                touched,
                header,
            } = st.pending.take().expect("an unflushed group is pending");
            debug_assert_eq!(number, ticket.0);
            st.flushing = Some(Flushing {
                touched,
                header: header.clone(),
            });
            let _end = EndFlush(&self.state);
            drop(st);
            let count = members.len() as u64;
            flush(pager, members, header).map(|()| Led {
                upto: number,
                members: Some(count),
            })
        })
    }
}

/// Commit a group's members as one transaction whose header is `header` (the last
/// member's, merged onto those before).
fn flush(pager: &Pager, members: Vec<Member>, mut header: Header) -> Result<()> {
    let mut dirty = BTreeMap::new();
    let mut written = BTreeMap::new();
    let mut alloc = AllocDelta::default();
    let mut catalog_changed = false;
    for m in members {
        for (pgno, img) in m.dirty {
            // Release-mode check: validation keeps members' pages disjoint; a page in two
            // members would keep only one member's change.
            assert!(
                dirty.insert(pgno, img).is_none(),
                "page {pgno} written by two members of one commit group"
            );
            written.insert(pgno, m.written);
        }
        alloc.taken.extend(m.alloc.taken);
        alloc.freed.extend(m.alloc.freed);
        catalog_changed |= m.catalog_changed;
    }
    header.fcc = pager.header().fcc + 1;
    header.last_txn_size = dirty.len() as u32 + 1;
    pager.commit(
        &header,
        &|p| written[&p],
        dirty,
        &alloc,
        catalog_changed,
        &Spilled::default(),
    )?;
    pager.wait_durable(header.fcc, 0)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use crate::vfs::{CrashModel, SimVfs};
    use crate::{
        Concurrency, Config, Database, Error, JournalMode, KeyKind, ReadableTxn, WriteTxn,
    };

    const PROTOCOLS: [Concurrency; 3] = [
        Concurrency::Occ,
        Concurrency::TwoVto { forced_sleep: true },
        Concurrency::TwoVto {
            forced_sleep: false,
        },
    ];

    fn config(vfs: &SimVfs, mode: JournalMode, c: Concurrency, delay_us: u64) -> Config {
        Config::default()
            .vfs(Arc::new(vfs.clone()))
            .journal_mode(mode)
            .page_size(1024)
            .chunk_pages(8)
            .concurrency(c)
            .group_commit_delay(Duration::from_micros(delay_us))
    }

    /// The registry modes that accept concurrent writers (the others refuse them).
    fn modes() -> Vec<JournalMode> {
        JournalMode::all()
            .filter(|&m| {
                Database::open(
                    "/db/probe.db",
                    config(&SimVfs::new(), m, Concurrency::Occ, 0),
                )
                .is_ok()
            })
            .collect()
    }

    fn number(v: Option<Vec<u8>>) -> i64 {
        String::from_utf8(v.expect("present"))
            .unwrap()
            .parse()
            .unwrap()
    }

    fn bump(w: &mut WriteTxn, k: i64) -> crate::Result<()> {
        let t = w.open_tree("c")?;
        let v = number(w.get(&t, k)?) + 1;
        // Wide values: a few counters per 1 KiB leaf, so threads often write apart.
        w.insert(&t, k, format!("{v:0200}").as_bytes()).map(|_| ())
    }

    #[test]
    fn a_setting_that_cannot_group_is_refused() {
        let vfs = SimVfs::new();
        let open = |c: Config| Database::open("/db/g.db", c.vfs(Arc::new(vfs.clone())));
        let serial = Config::default().journal_mode(JournalMode::DHL_CC);
        assert!(
            matches!(open(serial.clone().group_commit(true)), Err(Error::Config(m)) if m.contains("group_commit"))
        );
        let delayed = serial.group_commit_delay(Duration::from_micros(5));
        assert!(
            matches!(open(delayed.clone()), Err(Error::Config(m)) if m.contains("group_commit_delay"))
        );
        let ungrouped = delayed.concurrency(Concurrency::Occ).group_commit(false);
        assert!(
            matches!(open(ungrouped), Err(Error::Config(m)) if m.contains("group_commit_delay"))
        );
    }

    /// Threads increment random counters through `Database::write`; with a commit delay
    /// groups form. No increment may be lost, in memory or after reopening, and the
    /// groups must really have held several transactions.
    fn increments(mode: JournalMode, c: Concurrency, seed: u64) -> (i64, i64, u64) {
        let vfs = SimVfs::new();
        let db = Database::open("/db/g.db", config(&vfs, mode, c, 300)).unwrap();
        let keys = 24;
        db.write(|w| {
            let t = w.create_tree("c", KeyKind::Int)?;
            for k in 0..keys {
                w.insert(&t, k * 37, b"0")?;
            }
            Ok(())
        })
        .unwrap();
        let done = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for th in 0..4u64 {
                let (db, done) = (&db, &done);
                s.spawn(move || {
                    let mut x = (seed + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ th;
                    for _ in 0..40 {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        let k = (x % keys as u64) as i64 * 37;
                        db.write(|w| bump(w, k)).unwrap();
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                });
            }
        });
        let sum = |db: &Database| -> i64 {
            let r = db.begin_read().unwrap();
            let t = r.open_tree("c").unwrap();
            r.iter(&t)
                .unwrap()
                .map(|kv| number(Some(kv.unwrap().1)))
                .sum()
        };
        let stats = db.group_stats();
        // The loading transaction was a group of one.
        assert_eq!(stats.members as usize, 1 + done.load(Ordering::Relaxed));
        let in_memory = sum(&db);
        drop(db);
        let db = Database::open(
            "/db/g.db",
            config(&vfs.crash(seed, CrashModel::full()), mode, c, 0),
        )
        .unwrap();
        crate::check::check(&db.begin_read().unwrap(), &Default::default()).unwrap();
        (in_memory, sum(&db), stats.largest)
    }

    #[test]
    fn grouped_commits_lose_no_increment_and_survive_a_crash() {
        let mut largest = 0;
        for mode in modes() {
            for c in PROTOCOLS {
                let (mem, disk, l) = increments(mode, c, 7);
                assert_eq!((mem, disk), (160, 160), "{mode} {c:?}");
                largest = largest.max(l);
            }
        }
        assert!(largest >= 2, "no group held two transactions");
    }

    /// Two transactions from one snapshot: `a` reads x and writes y, `b` reads y and writes
    /// x (write skew). `a` waits in its group (a long commit delay) when `b` commits:
    /// `b` must see `a` queued and fail under `Occ` — and, with the planted bug that
    /// skips validation against queued groups, both commit.
    fn skew(mode: JournalMode, plant: bool) -> (usize, crate::GroupStats) {
        let vfs = SimVfs::new();
        let db = Database::open("/db/s.db", config(&vfs, mode, Concurrency::Occ, 200_000)).unwrap();
        let (x, y) = (0, 10_000);
        db.write(|w| {
            let t = w.create_tree("c", KeyKind::Int)?;
            // Far apart keys with long values: x and y on different leaves.
            for k in (0..=y).step_by(100) {
                w.insert(&t, k, b"0")?;
            }
            Ok(())
        })
        .unwrap();
        db.shared()
            .group
            .as_ref()
            .unwrap()
            .plant
            .skip_group_validation
            .store(plant, Ordering::Relaxed);
        let before = db.group_stats();
        let mut a = db.begin_write().unwrap();
        let mut b = db.begin_write().unwrap();
        let copy = |w: &mut WriteTxn, from: i64, to: i64| -> crate::Result<()> {
            let t = w.open_tree("c")?;
            let v = number(w.get(&t, from)?) + 1;
            w.insert(&t, to, v.to_string().as_bytes()).map(|_| ())
        };
        copy(&mut a, x, y).unwrap();
        copy(&mut b, y, x).unwrap();
        let failed = Mutex::new(0);
        std::thread::scope(|s| {
            s.spawn(|| {
                if let Err(e) = a.commit() {
                    panic!("a: {e}");
                }
            });
            // `a` is queued and waiting for its delay well before this.
            std::thread::sleep(Duration::from_millis(50));
            match b.commit() {
                Ok(()) => {}
                Err(Error::Conflict { .. }) => *failed.lock().unwrap() += 1,
                Err(e) => panic!("b: {e}"),
            }
        });
        let after = db.group_stats();
        let stats = crate::GroupStats {
            groups: after.groups - before.groups,
            members: after.members - before.members,
            largest: after.largest,
        };
        (failed.into_inner().unwrap(), stats)
    }

    #[test]
    fn validation_sees_queued_groups_and_the_planted_bug_is_caught() {
        for mode in modes() {
            let (failed, _) = skew(mode, false);
            assert_eq!(failed, 1, "{mode}: b read what a queued commit wrote");
            let (failed, stats) = skew(mode, true);
            assert_eq!(failed, 0, "{mode}: the planted bug went unnoticed");
            assert_eq!(
                (stats.groups, stats.largest),
                (1, 2),
                "{mode}: one group of two"
            );
        }
    }

    /// Threads commit under power cuts: every acknowledged transaction is on disk after
    /// the crash, and each transaction is all there or not at all (its row in its
    /// thread's tree and in the shared one). With the planted early acknowledgement,
    /// some cut must lose an acknowledged commit.
    fn cuts(mode: JournalMode, c: Concurrency, seeds: std::ops::Range<u64>, plant: bool) -> u64 {
        let mut lost = 0;
        for seed in seeds {
            let (l, _) = crate::journal::testutil::threads_until_power_cut(
                &|v| Database::open("/db/x.db", config(v, mode, c, 100)).unwrap(),
                &|db| {
                    let shared = db.shared();
                    let g = shared.group.as_ref().unwrap();
                    g.plant.early_ack.store(plant, Ordering::Relaxed);
                },
                &|v| Database::open("/db/x.db", config(v, mode, c, 0)).unwrap(),
                20 + seed * 7 % 150,
                seed,
                &format!("{mode} {c:?}"),
            );
            lost += l;
        }
        lost
    }

    #[test]
    fn power_cuts_during_grouped_commits_lose_no_acknowledged_transaction() {
        let n: u64 = std::env::var("INPAGE_GROUP_CUTS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(20);
        for mode in modes() {
            for c in PROTOCOLS {
                assert_eq!(cuts(mode, c, 0..n, false), 0, "{mode} {c:?}");
            }
        }
        // The planted bug: acknowledged while its group waits behind another flush.
        let found = modes()
            .into_iter()
            .any(|m| cuts(m, Concurrency::Occ, 0..40, true) > 0);
        assert!(found, "the early acknowledgement went unnoticed");
    }
}
