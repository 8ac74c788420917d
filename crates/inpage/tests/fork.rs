//! `fork()` with databases open: a child's new handles are its own, an inherited handle
//! refuses all work with `Error::Forked` and closes without I/O, and a child holds none
//! of its parent's locks (module `vfs::fork`). Every registry mode, with the parent
//! holding a reader, an uncommitted writer and committed data across the fork.
//!
//! The child does as little as it can (no allocation-heavy work, `_exit`): it runs in a
//! copy of a multi-threaded test process.

use std::path::Path;

use inpage::{Config, Database, Error, JournalMode, KeyKind, ReadableTxn};

/// Fork; in the child run `f` and `_exit` with its code; in the parent return the
/// child's exit code.
fn in_child(f: impl FnOnce() -> i32) -> i32 {
    // SAFETY: the child only runs `f`, then `_exit`s without unwinding or running
    // destructors of the parent's state.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or(99);
        // SAFETY: ends the child at once.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: waits for the child just forked.
    let r = unsafe { libc::waitpid(pid, &mut status, 0) };
    assert_eq!(r, pid);
    assert!(libc::WIFEXITED(status), "child did not exit normally");
    libc::WEXITSTATUS(status)
}

fn config(mode: JournalMode, dir: &Path) -> Config {
    let mut c = Config::default().journal_mode(mode);
    if mode.capabilities().region_backed {
        c = c.nvlog_region(dir.join("region"));
    }
    c
}

#[test]
fn a_child_cannot_use_what_it_inherited_and_its_own_opens_are_independent() {
    for mode in JournalMode::all() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.db");
        let db = Database::open(&path, config(mode, dir.path())).unwrap();
        let mut w = db.begin_write().unwrap();
        let t = w.create_tree("t", KeyKind::Int).unwrap();
        for k in 0..50 {
            w.insert(&t, k, b"before fork").unwrap();
        }
        w.commit().unwrap();
        // Across the fork: a reader on the committed state and an uncommitted writer.
        let r = db.begin_read().unwrap();
        let mut w = db.begin_write().unwrap();
        w.insert(&t, 1000, b"parent, uncommitted at the fork")
            .unwrap();

        let code = in_child(|| {
            // The inherited handle refuses, with the typed error.
            if !matches!(db.begin_read(), Err(Error::Forked { .. })) {
                return 1;
            }
            if !matches!(db.try_begin_write(), Err(Error::Forked { .. })) {
                return 2;
            }
            // A new handle is the child's own: the parent's write turn keeps it out
            // (past a short busy timeout), and says so.
            let brief = config(mode, dir.path()).busy_timeout(std::time::Duration::from_millis(20));
            match Database::open(&path, brief) {
                Err(Error::Locked { .. }) => {}
                _ => return 3,
            }
            // Drop the inherited handles, as a child that lets go of them does: no
            // checkpoint, clean-close mark or removal of side files may reach the
            // parent's files (the parent's checks below would see it).
            // SAFETY: bitwise copies in the child's own memory; the originals are never
            // used or dropped in the child (it `_exit`s right after).
            unsafe {
                drop(std::ptr::read(&w));
                drop(std::ptr::read(&r));
                drop(std::ptr::read(&db));
            }
            0
        });
        assert_eq!(code, 0, "{mode}: child check {code} failed");
        // The inherited copies in the child went without touching the files: the
        // parent's transactions go on as if there had been no fork.
        w.commit().unwrap();
        assert_eq!(r.get(&t, 1000).unwrap(), None, "{mode}: snapshot moved");
        drop(r);
        let mut w = db.begin_write().unwrap();
        w.insert(&t, 1001, b"parent, after the fork").unwrap();
        w.commit().unwrap();
        db.close().unwrap();
        let db = Database::open(&path, config(mode, dir.path())).unwrap();
        let r = db.begin_read().unwrap();
        let t = r.open_tree("t").unwrap();
        assert_eq!(r.iter(&t).unwrap().count(), 52, "{mode}");
        assert!(r.get(&t, 1001).unwrap().is_some(), "{mode}");
        inpage::check::check(&r, &Default::default()).unwrap();
    }
}

/// A child that still holds the descriptors it inherited does not keep its parent's
/// lock alive: the parent closes the database and opens it again while the child lives,
/// and the child, once the parent has closed, opens it itself.
#[test]
fn a_child_holds_none_of_its_parents_locks() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l.db");
    let db = Database::open(&path, Config::default()).unwrap();
    db.write(|w| {
        let t = w.create_tree("t", KeyKind::Int)?;
        w.insert(&t, 1, b"x").map(|_| ())
    })
    .unwrap();
    let (from_parent, mut to_child) = std::io::pipe().unwrap();
    let (from_child, mut to_parent) = std::io::pipe().unwrap();
    // SAFETY: as in `in_child`; the child waits on a pipe, opens, reports, `_exit`s.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        use std::io::{Read, Write};
        let mut from_parent = from_parent;
        // Running: the fork handler has let go of the inherited locks (it runs in the
        // child before `fork` returns here).
        let _ = to_parent.write_all(&[9]);
        let mut b = [0u8; 1];
        let _ = from_parent.read_exact(&mut b); // the parent has closed and reopened
        let _ = from_parent.read_exact(&mut b); // the parent has closed for good
        let ok = match Database::open(&path, Config::default()) {
            Ok(mine) => mine.get("t", 1).ok().flatten().as_deref() == Some(&b"x"[..]),
            Err(_) => false,
        };
        let _ = to_parent.write_all(&[ok as u8]);
        // SAFETY: ends the child.
        unsafe { libc::_exit(0) };
    }
    use std::io::{Read, Write};
    // A failing assertion below must not leave the child waiting on its pipe (it holds
    // the test's output open): kill it on the way out.
    struct Reap(libc::pid_t);
    impl Drop for Reap {
        fn drop(&mut self) {
            // SAFETY: signals and reaps the child forked above (harmless if it is gone).
            unsafe {
                libc::kill(self.0, libc::SIGKILL);
                libc::waitpid(self.0, std::ptr::null_mut(), 0);
            }
        }
    }
    let reap = Reap(pid);
    let mut from_child = from_child;
    let mut b = [0u8; 1];
    // Until the child runs, its copy of the locked descriptor is the parent's (the fork
    // handler runs in the child, when the scheduler first runs it), so the parent waits
    // for it; on a loaded machine the reopen below otherwise raced the child's start.
    from_child.read_exact(&mut b).unwrap();
    assert_eq!(b[0], 9);
    db.close().unwrap();
    let again = Database::open(&path, Config::default())
        .expect("the child's inherited descriptor kept the lock");
    to_child.write_all(&[1]).unwrap();
    again.close().unwrap();
    to_child.write_all(&[2]).unwrap();
    from_child.read_exact(&mut b).unwrap();
    drop(reap);
    assert_eq!(
        b[0], 1,
        "the child could not open the database after its parent closed it"
    );
}

/// Another thread forking at any moment — while this one opens, commits and closes —
/// never leaves the lock in a child: every reopen right after a close succeeds. (A fork
/// between taking the lock and registering it, or between unregistering and closing,
/// once let a short-lived child hold the lock past the parent's close.)
#[test]
fn forks_from_another_thread_never_keep_a_closed_databases_lock() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.db");
    let stop = Arc::new(AtomicBool::new(false));
    let forker = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut children = 0;
            while !stop.load(Ordering::Relaxed) {
                // SAFETY: the child only sleeps and `_exit`s.
                let pid = unsafe { libc::fork() };
                assert!(pid >= 0, "fork failed");
                if pid == 0 {
                    // SAFETY: async-signal-safe calls only, then the child ends.
                    unsafe {
                        libc::usleep(20_000);
                        libc::_exit(0);
                    }
                }
                // SAFETY: reaps the child just forked.
                unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) };
                children += 1;
            }
            children
        })
    };
    // The forks land at random points of the loop; 300 rounds cover the lock's take and
    // release windows many times over.
    for round in 0..300 {
        let db = Database::open(&path, Config::default())
            .unwrap_or_else(|e| panic!("round {round}: reopen after close refused: {e}"));
        db.write(|w| {
            let t = match w.open_tree("t") {
                Ok(t) => t,
                Err(_) => w.create_tree("t", KeyKind::Int)?,
            };
            w.insert(&t, round, b"r").map(|_| ())
        })
        .unwrap();
        db.close().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    let children = forker.join().unwrap();
    assert!(children > 0, "no fork happened during the rounds");
    let db = Database::open(&path, Config::default()).unwrap();
    let r = db.begin_read().unwrap();
    let t = r.open_tree("t").unwrap();
    assert_eq!(r.iter(&t).unwrap().count(), 300);
}
