//! What a process inherits through `fork()`, and how the engine keeps a child from using it.
//!
//! A child of `fork()` gets a copy of its parent's memory — every open `Database`, its
//! cache, its idea of the committed state — and shares its parent's open file
//! descriptions. Used from the child, that copy would write the parent's files from a
//! stale picture of them (the parent's next commit then overwrites the child's, or the
//! reverse), and the shared file descriptions would keep the parent's locks alive in
//! the child after the parent has closed the database. SQLite's rule is the same ("do
//! not carry an open connection across a fork"), but an app that opens a *new* handle in
//! the child must get one that is fully its own.
//!
//! Invariants, and why they hold:
//! - *Every handle knows the process generation it was opened in* ([`generation`]): a
//!   `pthread_atfork` child handler, installed before the first lock is taken, bumps the
//!   generation in every child. A handle whose generation differs refuses all work with
//!   `Error::Forked` (the pager checks it wherever it checks for poisoning, and before
//!   every read from the file), and its drop does no I/O: no checkpoint, no clean-close
//!   mark, no removal of side files, no join of a flusher thread that only the parent has.
//! - *A child holds none of its parent's locks.* Every descriptor that holds an advisory
//!   lock is registered here ([`register_locked`]); the child handler points each of
//!   them at `/dev/null` (`dup3`), which drops the child's reference to the parent's open
//!   file description, so the lock lives exactly as long as the parent keeps it. The
//!   descriptor number stays valid (the inherited handle closes `/dev/null` later, not a
//!   number something else may have reused), and the fork check above keeps the child
//!   from reading or writing through it. Registration uses a fixed table of atomics
//!   because a fork handler may not take locks (another thread may have held one at the
//!   moment of the fork).
//! - *No fork leaves a lock in a child, whichever thread forks when.* A descriptor is
//!   registered before its first lock attempt (so no fork falls between taking the lock
//!   and registering it), and at close the parent unlocks the description before it
//!   unregisters and closes the descriptor (so a fork between those steps hands the child
//!   an unlocked description). An inherited copy never unlocks: in a child the
//!   description is the parent's. The only gap left is a full table (more than [`SLOTS`]
//!   locked files open): then a child keeps the parent's reference for as long as it
//!   lives, the situation without this module.
#![allow(unsafe_code)]

use std::ffi::{c_char, c_int};
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::Once;

/// How many locked descriptors the child handler can release.
pub(crate) const SLOTS: usize = 1024;

static GENERATION: AtomicU64 = AtomicU64::new(0);
static LOCKED: [AtomicI32; SLOTS] = [const { AtomicI32::new(-1) }; SLOTS];
static INSTALL: Once = Once::new();

extern "C" {
    fn pthread_atfork(
        prepare: Option<extern "C" fn()>,
        parent: Option<extern "C" fn()>,
        child: Option<extern "C" fn()>,
    ) -> c_int;
    fn open(path: *const c_char, flags: c_int, ...) -> c_int;
    fn dup3(old: c_int, new: c_int, flags: c_int) -> c_int;
    fn close(fd: c_int) -> c_int;
}

/// The child side of `fork()`: runs in the child before `fork` returns there. Only
/// async-signal-safe calls (`open`, `dup3`, `close`) and atomics.
extern "C" fn in_child() {
    GENERATION.fetch_add(1, Ordering::SeqCst);
    const O_RDWR: c_int = 2;
    const O_CLOEXEC: c_int = 0o2_000_000;
    // SAFETY: a NUL-terminated literal; open(2) with two flag arguments needs no mode.
    let null = unsafe { open(c"/dev/null".as_ptr(), O_RDWR | O_CLOEXEC) };
    if null < 0 {
        return;
    }
    for slot in &LOCKED {
        let fd = slot.load(Ordering::SeqCst);
        if fd >= 0 {
            // SAFETY: `fd` is a descriptor this process had open at the fork (registered
            // while open, unregistered before close); dup3 replaces what it refers to,
            // keeps the number valid and keeps it close-on-exec.
            unsafe { dup3(null, fd, O_CLOEXEC) };
            slot.store(-1, Ordering::SeqCst);
        }
    }
    // SAFETY: `null` was opened above and nothing else refers to it.
    unsafe { close(null) };
}

/// Install the fork handler (once per process). Called before any lock is taken.
pub(crate) fn install() {
    INSTALL.call_once(|| {
        // SAFETY: registers a handler that only touches atomics and makes
        // async-signal-safe calls (`in_child`); it is never unregistered, and the
        // function it names lives for the whole program.
        let rc = unsafe { pthread_atfork(None, None, Some(in_child)) };
        debug_assert_eq!(rc, 0, "pthread_atfork failed");
    });
}

/// This process's generation: 0 in the process that loaded the library, bumped in each
/// child of `fork()`. A handle opened in one generation must not be used in another.
pub fn generation() -> u64 {
    GENERATION.load(Ordering::Acquire)
}

/// Remember `fd`, which is about to take (or holds) an advisory lock, so a child of
/// `fork()` lets go of it.
/// Returns the slot to pass to [`unregister_locked`], or None if the table is full.
pub(crate) fn register_locked(fd: c_int) -> Option<usize> {
    install();
    LOCKED.iter().position(|slot| {
        slot.compare_exchange(-1, fd, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    })
}

/// Forget the lock registered in `slot` (before its descriptor is closed).
pub(crate) fn unregister_locked(slot: usize, fd: c_int) {
    // In a child the handler already cleared the slot (and a later registration may
    // have reused it): only clear it if it is still ours.
    let _ = LOCKED[slot].compare_exchange(fd, -1, Ordering::SeqCst, Ordering::SeqCst);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_register_and_unregister() {
        let a = register_locked(1000).unwrap();
        let b = register_locked(1001).unwrap();
        assert_ne!(a, b);
        assert_eq!(LOCKED[a].load(Ordering::SeqCst), 1000);
        unregister_locked(a, 1000);
        assert_eq!(LOCKED[a].load(Ordering::SeqCst), -1);
        // A slot reused by another descriptor is left alone.
        LOCKED[b].store(77, Ordering::SeqCst);
        unregister_locked(b, 1001);
        assert_eq!(LOCKED[b].load(Ordering::SeqCst), 77);
        LOCKED[b].store(-1, Ordering::SeqCst);
    }
}
