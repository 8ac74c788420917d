//! Group commit's one mechanism: flushes that several commits share.
//!
//! A *member* is a commit waiting to be made durable, numbered in the order commits are
//! made. A *flush* covers every member up to the number its leader names. One flush runs
//! at a time: the first waiting member that is not covered and finds no flush under way
//! leads the next one (after an optional pause that lets more members arrive); the others
//! wait for the flush that covers them. Two policies use it:
//! - `txn::group` (concurrent writers, `Concurrency::Occ` and `TwoVto`): a member is a
//!   group of validated transactions, numbered from 1; a flush commits one group as one
//!   physical transaction (one tid, one fdatasync).
//! - `waldio-gc`: a member is a commit whose frames are in the log, numbered by its tid; a
//!   flush is one fdatasync of the log, covering every commit written before it started.
//!
//! States (`Phase`) and the function behind each arrow:
//!
//! ```text
//!            wait: lead            flush Ok
//!   Idle ─────────────────▶ Flushing ─────────▶ Idle
//!                               │
//!                               │ flush Err or panic
//!                               ▼
//!                            Failed (final)
//! ```
//! `cover` (a flush made elsewhere, e.g. before a checkpoint) raises `covered` in any
//! phase.
//!
//! Invariants, and why they hold:
//! - **No member is acknowledged before a flush covering it returned Ok.** `wait` returns
//!   Ok only once `covered >= n`, and `covered` rises only when a flush returns Ok (or
//!   `cover` reports one made elsewhere). It never falls (checked on every transition in
//!   debug builds).
//! - **One flush at a time.** A leader is chosen under the lock, only in `Idle`, and the
//!   phase leaves `Flushing` only when its leader's flush has returned.
//! - **A failed flush fails every member it did not cover.** After it nothing past
//!   `covered` is known durable (the engine poisons the database after a failed flush);
//!   `Failed` is final and every later wait past `covered` returns `Poisoned`, while the
//!   leader returns the flush's own error. A panic in a flush is a failure too: the
//!   waiters fail and the leader's thread unwinds, so no one waits forever.

use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// Counters of group commit, for the bench and the tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GroupStats {
    /// Flushes (groups committed).
    pub groups: u64,
    /// Transactions committed in them.
    pub members: u64,
    /// The most transactions one group held.
    pub largest: u64,
}

/// Where the flushes stand (module diagram).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Phase {
    Idle,
    Flushing,
    /// A flush failed, for this reason; final.
    Failed(String),
}

#[derive(Debug)]
struct State {
    phase: Phase,
    /// Members up to this number are durable.
    covered: u64,
    stats: GroupStats,
}

impl State {
    /// Move to `to`, checking the arrow (module diagram) in debug builds.
    fn transition(&mut self, to: Phase) {
        debug_assert!(
            matches!(
                (&self.phase, &to),
                (Phase::Idle, Phase::Flushing)
                    | (Phase::Flushing, Phase::Idle)
                    | (Phase::Flushing, Phase::Failed(_))
            ),
            "group flush: no arrow from {:?} to {to:?}",
            self.phase
        );
        self.phase = to;
    }

    /// Raise `covered` to `n` (never lower it).
    fn cover(&mut self, n: u64) {
        self.covered = self.covered.max(n);
    }
}

/// What a leader's flush covered.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Led {
    /// Members up to this number are durable now.
    pub(crate) upto: u64,
    /// Transactions the flush committed, for the counters; None: the members it newly
    /// covered (`upto` minus what was covered before).
    pub(crate) members: Option<u64>,
}

/// How long a would-be leader waits for more members before it flushes: at most
/// `at_most`, less once `enough()` says they are there, a flush starts, or its member is
/// covered.
pub(crate) struct Pause<'a> {
    pub(crate) at_most: Duration,
    pub(crate) enough: &'a dyn Fn() -> bool,
}

/// The shared flushes of one database (module docs).
#[derive(Debug)]
pub(crate) struct GroupFlush {
    state: Mutex<State>,
    /// Signalled when a flush ends, when `cover` raises `covered`, and by `nudge`.
    changed: Condvar,
}

impl Default for GroupFlush {
    fn default() -> Self {
        GroupFlush::new()
    }
}

impl GroupFlush {
    pub(crate) fn new() -> GroupFlush {
        GroupFlush::covering(0)
    }

    /// Flushes whose members up to `n` are durable already (commits made before).
    pub(crate) fn covering(n: u64) -> GroupFlush {
        GroupFlush {
            state: Mutex::new(State {
                phase: Phase::Idle,
                covered: n,
                stats: GroupStats::default(),
            }),
            changed: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn stats(&self) -> GroupStats {
        self.lock().stats
    }

    /// A flush made elsewhere covered members up to `n`.
    pub(crate) fn cover(&self, n: u64) {
        self.lock().cover(n);
        self.changed.notify_all();
    }

    /// Wake a pausing leader: what its `Pause::enough` looks at may have changed.
    pub(crate) fn nudge(&self) {
        let _st = self.lock();
        self.changed.notify_all();
    }

    /// Return once member `n` is covered, leading a flush (`lead`, after `pause`) when
    /// none is under way. Errors: the flush's own error for its leader, `Poisoned` for
    /// every member a failed flush left uncovered.
    pub(crate) fn wait(
        &self,
        n: u64,
        pause: Option<Pause<'_>>,
        lead: impl FnOnce() -> Result<Led>,
    ) -> Result<()> {
        let mut st = self.lock();
        if let Some(p) = pause.filter(|_| st.phase == Phase::Idle && st.covered < n) {
            let until = Instant::now() + p.at_most;
            while st.phase == Phase::Idle && st.covered < n && !(p.enough)() {
                let left = until.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                st = self
                    .changed
                    .wait_timeout(st, left)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
        }
        let mut lead = Some(lead);
        loop {
            if st.covered >= n {
                return Ok(());
            }
            match &st.phase {
                Phase::Failed(why) => return Err(Error::Poisoned(why.clone())),
                Phase::Flushing => {
                    st = self.changed.wait(st).unwrap_or_else(|e| e.into_inner());
                }
                Phase::Idle => {
                    st.transition(Phase::Flushing);
                    let before = st.covered;
                    drop(st);
                    let lead = lead.take().expect("a member leads at most one flush");
                    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(lead));
                    let mut st = self.lock();
                    match &r {
                        Ok(Ok(led)) => {
                            debug_assert!(led.upto >= n, "a flush led by {n} covers it");
                            let count = led.members.unwrap_or(led.upto.saturating_sub(before));
                            st.cover(led.upto);
                            st.stats.groups += 1;
                            st.stats.members += count;
                            st.stats.largest = st.stats.largest.max(count);
                            st.transition(Phase::Idle);
                        }
                        Ok(Err(e)) => st.transition(Phase::Failed(e.to_string())),
                        Err(_) => st.transition(Phase::Failed("a group's flush panicked".into())),
                    }
                    drop(st);
                    self.changed.notify_all();
                    return match r {
                        Ok(r) => r.map(|_| ()),
                        Err(panic) => std::panic::resume_unwind(panic),
                    };
                }
            }
        }
    }

    /// Wait, without leading, until member `n` is covered or a flush failed; None: as
    /// long as that takes; Some(t): at most t between two changes.
    pub(crate) fn wait_covered(&self, n: u64, patience: Option<Duration>) {
        let mut st = self.lock();
        while st.covered < n && !matches!(st.phase, Phase::Failed(_)) {
            st = match patience {
                None => self.changed.wait(st).unwrap_or_else(|e| e.into_inner()),
                Some(t) => {
                    let (g, r) = self
                        .changed
                        .wait_timeout(st, t)
                        .unwrap_or_else(|e| e.into_inner());
                    if r.timed_out() {
                        return;
                    }
                    g
                }
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    /// Threads commit members 1..=N and wait for them; each flush covers what was
    /// "written" when it started. Every wait returns only once covered, and the flushes
    /// number fewer than the members when they overlap.
    #[test]
    fn a_flush_covers_every_member_written_before_it() {
        let g = Arc::new(GroupFlush::new());
        let written = Arc::new(AtomicU64::new(0));
        let durable = Arc::new(AtomicU64::new(0));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (g, written, durable) = (g.clone(), written.clone(), durable.clone());
                std::thread::spawn(move || {
                    for _ in 0..50 {
                        let n = written.fetch_add(1, Ordering::SeqCst) + 1;
                        g.wait(n, None, || {
                            let upto = written.load(Ordering::SeqCst);
                            std::thread::sleep(Duration::from_micros(200));
                            durable.fetch_max(upto, Ordering::SeqCst);
                            Ok(Led {
                                upto,
                                members: None,
                            })
                        })
                        .unwrap();
                        assert!(durable.load(Ordering::SeqCst) >= n, "acknowledged early");
                    }
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        let s = g.stats();
        assert_eq!(s.members, 200);
        assert!(s.groups < 200 && s.largest > 1, "{s:?}");
    }

    /// A failed flush fails its leader with its error and every member it did not cover
    /// as poisoned, now and later; a covered member still returns Ok.
    #[test]
    fn a_failed_flush_fails_what_it_did_not_cover() {
        let g = GroupFlush::new();
        g.wait(1, None, || {
            Ok(Led {
                upto: 1,
                members: None,
            })
        })
        .unwrap();
        let e = g
            .wait(2, None, || Err(Error::Config("disk gone".into())))
            .unwrap_err();
        assert!(matches!(e, Error::Config(_)), "{e:?}");
        let e = g.wait(3, None, || unreachable!()).unwrap_err();
        assert!(
            matches!(&e, Error::Poisoned(w) if w.contains("disk gone")),
            "{e:?}"
        );
        g.wait(1, None, || unreachable!()).unwrap();
        g.wait_covered(5, None);
    }

    /// A panic in a flush fails the waiters instead of leaving them waiting.
    #[test]
    fn a_panicking_flush_fails_the_others() {
        let g = Arc::new(GroupFlush::new());
        let g2 = g.clone();
        let leader = std::thread::spawn(move || {
            g2.wait(1, None, || -> Result<Led> {
                std::thread::sleep(Duration::from_millis(20));
                panic!("planted")
            })
        });
        std::thread::sleep(Duration::from_millis(5));
        let e = g.wait(1, None, || unreachable!());
        assert!(leader.join().is_err());
        assert!(matches!(e, Err(Error::Poisoned(_))), "{e:?}");
    }

    /// A pause ends as soon as `enough` holds (nudged), and a member covered meanwhile by
    /// `cover` needs no flush.
    #[test]
    fn a_pause_ends_when_enough_members_arrived() {
        let g = Arc::new(GroupFlush::new());
        let arrived = Arc::new(AtomicU64::new(0));
        let (g2, a2) = (g.clone(), arrived.clone());
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(10));
            a2.store(1, Ordering::SeqCst);
            g2.nudge();
        });
        let started = Instant::now();
        let enough = || arrived.load(Ordering::SeqCst) > 0;
        let pause = Pause {
            at_most: Duration::from_secs(30),
            enough: &enough,
        };
        g.wait(1, Some(pause), || {
            Ok(Led {
                upto: 1,
                members: None,
            })
        })
        .unwrap();
        assert!(started.elapsed() < Duration::from_secs(30));
        t.join().unwrap();
        g.cover(7);
        g.wait(7, None, || unreachable!()).unwrap();
        assert_eq!(g.stats().groups, 1);
    }
}
