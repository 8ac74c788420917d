//! `Concurrency::TwoVto`: two-version timestamp ordering with the AFUW rule (the IPS +
//! 2VTO paper, §4; design: `docs/CONCURRENCY-DESIGN.md` §3–4). Page allocation, the
//! snapshot and the re-tagging at commit are shared with `Occ` (`txn/occ.rs`); this
//! module adds the timestamps and the page locks.
//!
//! Invariants, and why they hold:
//! - **Commits happen in `ts` order.** Every write transaction draws `ts` from one
//!   counter when it begins (or when `Database::write` queues a replay) and is *live*
//!   until it ends; `commit` waits until its `ts` is the smallest live one. So the oldest
//!   live transaction is the only one that can commit.
//! - **A page is changed by at most one live transaction** (first updater wins): the
//!   first write or free of a page takes its lock, held to the end. A transaction that
//!   finds the lock held aborts with `Conflict` — unless it is the oldest live one, which
//!   *wounds* the holder (the holder's next lock request or commit fails) and takes the
//!   lock; the holder's changes are private copies, so nothing waits. A wounded
//!   transaction never commits: commit checks the flag under the same mutex, and the
//!   holder cannot be committing while an older transaction lives.
//! - **No change is based on a stale page.** After taking a lock, a transaction aborts
//!   if a commit after its snapshot changed the page (`Pager::touched_since`); locks keep
//!   any later commit off it. Reads are not validated: the isolation is snapshot
//!   isolation (write skew between transactions that read each other's pages and write
//!   disjoint ones is possible, as in the paper).
//! - **At most one abort per transaction** with the forced sleep: a replay draws a new
//!   `ts` at once and waits until it is the oldest live transaction, then takes its
//!   snapshot. Nothing can commit before it from then on, so its staleness checks cannot
//!   fail, and as the oldest it wins every lock.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use crate::error::{Error, Pgno, Result};

/// What the write transactions of one `TwoVto` database share.
pub(crate) struct Vto {
    state: Mutex<State>,
    /// Signalled when a live transaction ends.
    ended: Condvar,
    /// AFUW's forced sleep (off: the no-sleep ablation, plain first-updater-wins).
    pub(crate) forced_sleep: bool,
}

#[derive(Default)]
struct State {
    /// The next `ts` to hand out.
    next_ts: u64,
    /// Live transactions (and queued replays) by `ts`: who wounded them (0: nobody).
    live: BTreeMap<u64, Arc<AtomicU64>>,
    /// Page -> `ts` of the live or queued transaction holding its lock.
    locks: HashMap<Pgno, u64>,
    /// Transactions queued for a group flush (`txn/group.rs`): no longer live (younger
    /// ones may commit), still holding their locks until their group is durable.
    queued: usize,
}

/// One `TwoVto` transaction's part.
pub(super) struct TxnVto {
    pub(super) ts: u64,
    wounded: Arc<AtomicU64>,
    pub(super) locked: Vec<Pgno>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Vto {
    pub(crate) fn new(forced_sleep: bool) -> Vto {
        Vto {
            state: Mutex::new(State {
                next_ts: 1,
                ..State::default()
            }),
            ended: Condvar::new(),
            forced_sleep,
        }
    }

    /// Draw the next `ts` and make it live (a beginning transaction, or a replay queued
    /// by `Database::write`).
    pub(crate) fn draw(&self) -> u64 {
        let mut st = lock(&self.state);
        let ts = st.next_ts;
        st.next_ts += 1;
        st.live.insert(ts, Arc::new(AtomicU64::new(0)));
        ts
    }

    /// The transaction part for a drawn `ts`.
    pub(super) fn txn(&self, ts: u64) -> TxnVto {
        let st = lock(&self.state);
        let wounded = st.live.get(&ts).cloned().expect("a drawn ts is live");
        TxnVto {
            ts,
            wounded,
            locked: Vec::new(),
        }
    }

    /// Block until `ts` is the oldest live transaction (a commit's turn). Fails with
    /// `Conflict` if the transaction is wounded meanwhile.
    pub(crate) fn wait_oldest(&self, ts: u64) -> Result<()> {
        self.wait_until_oldest(ts, false)
    }

    /// AFUW's forced sleep: block until `ts` is the oldest live transaction and no
    /// queued one still holds locks (its group not yet durable), so a snapshot taken now
    /// sees every commit that can come before `ts`, and no lock it asks for is held.
    pub(crate) fn wait_oldest_drained(&self, ts: u64) -> Result<()> {
        self.wait_until_oldest(ts, true)
    }

    fn wait_until_oldest(&self, ts: u64, drained: bool) -> Result<()> {
        let mut st = lock(&self.state);
        loop {
            if let Some(w) = st.live.get(&ts) {
                wounded(w)?;
            }
            if st.live.keys().next().is_none_or(|&o| o >= ts) && (!drained || st.queued == 0) {
                return Ok(());
            }
            st = self.ended.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Whether `ts` is the oldest live transaction now (may commit without waiting).
    pub(crate) fn is_oldest(&self, ts: u64) -> bool {
        lock(&self.state).live.keys().next() == Some(&ts)
    }

    /// Take the lock on `pgno` for `t`: free or already its own, or stolen by the
    /// oldest live transaction (wounding the holder). Else `Conflict`.
    pub(super) fn lock_page(&self, t: &mut TxnVto, pgno: Pgno, snapshot: u64) -> Result<()> {
        let mut st = lock(&self.state);
        wounded(&t.wounded)?;
        match st.locks.get(&pgno).copied() {
            Some(h) if h == t.ts => return Ok(()),
            Some(holder) => {
                let oldest = st.live.keys().next() == Some(&t.ts);
                // A queued holder has committed, durably or about to: it cannot be
                // wounded, and the page's base is stale for everyone who began before.
                if !oldest || !st.live.contains_key(&holder) {
                    return Err(Error::Conflict {
                        page: pgno,
                        by: holder,
                        snapshot,
                    });
                }
                if let Some(w) = st.live.get(&holder) {
                    w.store(t.ts, Ordering::Release);
                }
            }
            None => {}
        }
        st.locks.insert(pgno, t.ts);
        t.locked.push(pgno);
        Ok(())
    }

    /// Whether `t` was wounded (its commit must fail).
    pub(super) fn check_not_wounded(&self, t: &TxnVto) -> Result<()> {
        let _st = lock(&self.state);
        wounded(&t.wounded)
    }

    /// `t` validated and queued for a group flush: it is no longer live (a younger
    /// transaction may commit, into the same group), and keeps its locks until `end`.
    pub(super) fn queued(&self, t: &TxnVto) {
        let mut st = lock(&self.state);
        st.live.remove(&t.ts);
        st.queued += 1;
        drop(st);
        self.ended.notify_all();
    }

    /// `t` ended (committed or not): its locks go (those still its own) and it is no
    /// longer live (nor queued).
    pub(super) fn end(&self, t: &TxnVto) {
        let mut st = lock(&self.state);
        for p in &t.locked {
            if st.locks.get(p) == Some(&t.ts) {
                st.locks.remove(p);
            }
        }
        if st.live.remove(&t.ts).is_none() {
            st.queued -= 1;
        }
        drop(st);
        self.ended.notify_all();
    }

    /// A queued replay that will not run after all (its closure failed otherwise).
    pub(crate) fn forget(&self, ts: u64) {
        lock(&self.state).live.remove(&ts);
        self.ended.notify_all();
    }
}

/// `Conflict` if the oldest transaction took a lock of this one's.
fn wounded(flag: &AtomicU64) -> Result<()> {
    match flag.load(Ordering::Acquire) {
        0 => Ok(()),
        by => Err(Error::Conflict {
            page: 0,
            by,
            snapshot: 0,
        }),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::vfs::SimVfs;
    use crate::{Concurrency, Config, Database, Error, JournalMode, KeyKind, ReadableTxn};

    /// Two read-modify-writes of one counter, the younger writing first; the counter
    /// afterwards and how many of the two failed.
    fn race(mode: JournalMode) -> (i64, usize) {
        let cfg = Config::default()
            .vfs(Arc::new(SimVfs::new()))
            .journal_mode(mode)
            .concurrency(Concurrency::TwoVto { forced_sleep: true });
        let db = Database::open("/db/t.db", cfg).unwrap();
        let mut w = db.begin_write().unwrap();
        let t = w.create_tree("t", KeyKind::Int).unwrap();
        w.insert(&t, 1, b"0").unwrap();
        w.commit().unwrap();
        let bump = |w: &mut crate::WriteTxn| -> crate::Result<()> {
            let t = w.open_tree("t")?;
            let v: i64 = std::str::from_utf8(&w.get(&t, 1)?.unwrap())
                .unwrap()
                .parse()
                .unwrap();
            w.insert(&t, 1, (v + 1).to_string().as_bytes()).map(|_| ())
        };
        let mut a = db.begin_write().unwrap();
        let mut b = db.begin_write().unwrap();
        let mut failed = 0;
        let rb = bump(&mut b);
        let ra = bump(&mut a);
        for (r, txn) in [(ra, a), (rb, b)] {
            match r.and_then(|()| txn.commit()) {
                Ok(()) => {}
                Err(Error::Conflict { .. }) => failed += 1,
                Err(e) => panic!("{e}"),
            }
        }
        let v = db.get("t", 1).unwrap().unwrap();
        (std::str::from_utf8(&v).unwrap().parse().unwrap(), failed)
    }

    #[test]
    fn the_lost_update_test_catches_writes_without_locks() {
        for mode in [JournalMode::DHL_CC, JournalMode::IPS] {
            // The oldest (a) takes the lock b took first; b fails.
            assert_eq!(race(mode), (1, 1), "{mode}");
            crate::seam::plant(crate::seam::Plant::VtoSkipsLocks, true);
            let planted = race(mode);
            crate::seam::plant(crate::seam::Plant::VtoSkipsLocks, false);
            assert_eq!(planted, (1, 0), "{mode}: the planted bug went unnoticed");
        }
    }
}
