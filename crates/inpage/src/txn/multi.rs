//! A transaction across several databases, committed atomically whatever their journal
//! modes: SQLite's super-journal, built on an undo log per database (`vfs::undo`).
//!
//! Protocol (`commit_all`), for two or more databases whose transactions change
//! something:
//! 0. Each database's undo log `<db>-undo` is started: a header naming the super-journal
//!    to come, synced with its directory. (Before the super-journal exists, so that no
//!    crash can leave a super-journal no undo log refers to: recovery removes the
//!    super-journal when it removes the last log that names it.)
//! 1. The *super-journal* `<first db>-super-<nonce>` is written (the databases taking
//!    part), synced, and its directory synced. From here until step 3, a crash leaves
//!    the transaction uncommitted: its existence is the outcome.
//! 2. Each database in turn: its transaction commits by its own journal mode's protocol
//!    while the database's VFS records the original of every byte that commit changes
//!    before the change can reach the disk, and every file it changed is synced. The
//!    database's writer flag stays held, so nothing else writes it before the outcome
//!    is decided.
//! 3. The super-journal is removed and its directory synced: the commit point.
//! 4. The undo logs are removed (no sync: a log whose super-journal is gone is stale and
//!    removed by the next open), and the writer flags released.
//!
//! Recovery (`vfs::undo::recover`, at every open): a database whose undo log names a
//! super-journal that still exists undoes its part from the log; the last database to do
//! so removes the super-journal. Every database of the transaction therefore ends up
//! with its part or without it, together, after a process kill or a power cut at any
//! point: a database's part reaches its files only after the originals are durable, and
//! no part is undone once the super-journal is gone.
//!
//! Databases that cannot take part are refused before anything is written
//! (`Error::AcrossDatabases`): a mode whose commits live outside the files until a later
//! flush (`nvlog`'s region, `waldio-gs`'s buffer), concurrent writers (`Concurrency::Occ`,
//! `TwoVto`: other transactions' commits would be recorded too), read-only handles. In-
//! memory databases (`Database::open_memory`) commit after the others: they have nothing
//! to make durable.
//!
//! A database whose journal flushes on a thread of its own (`redo`: `DeferredFlush`) has
//! that flusher paused from before step 0 until the transaction ends: a flush after its
//! part was recorded (step 2) and before the commit point would change its files
//! unrecorded, and a crash there could not undo it. A journal that creates files lazily
//! (`redo`'s ring, at a session's first commit) creates them before that too
//! (`Journal::prepare_recorded_commit`): the recording refuses renames.
//!
//! In memory, a database whose part committed is poisoned if a later step fails (its
//! files will be undone by recovery): reopen it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::vfs::undo::{encode_super, log_path};
use crate::vfs::{OpenOptions, Vfs};

use super::{Shared, WriteTxn};

/// Whether a database can take part; the reason if not.
fn refusal(shared: &Shared) -> Option<String> {
    let mode = shared.pager.journal_mode();
    let caps = mode.capabilities();
    if shared.config.read_only {
        return Some("it is open read-only".into());
    }
    if caps.region_backed {
        return Some(format!(
            "journal mode {mode} keeps commits in a memory region until a later flush"
        ));
    }
    if !caps.survives_process_crash {
        return Some(format!(
            "journal mode {mode} keeps commits in process memory until a later flush"
        ));
    }
    if shared.occ.is_some() {
        return Some("it runs concurrent writers (Concurrency::Occ/TwoVto)".into());
    }
    if shared.undo.is_none() {
        return Some("it has no undo recorder".into());
    }
    None
}

use crate::vfs::undo::absolute;

/// Databases whose flusher this transaction paused; resumed when it ends, however.
struct Paused(Vec<Arc<Shared>>);

impl Drop for Paused {
    fn drop(&mut self) {
        for s in &self.0 {
            s.pager.resume_flushes();
        }
    }
}

fn dir_of(p: &Path) -> PathBuf {
    crate::journal::dir_of(p)
}

/// Commit `txns`, one write transaction per database, atomically: after a crash at any
/// point every database has its transaction or none has (module docs). With fewer than
/// two databases that change something it is a plain commit of each. On an error the
/// transactions not yet committed are rolled back; a database whose part committed is
/// poisoned, and its part undone when it is reopened.
pub fn commit_all(txns: Vec<WriteTxn>) -> Result<()> {
    let (mut files, mut rest): (Vec<WriteTxn>, Vec<WriteTxn>) = txns
        .into_iter()
        .partition(|t| !t.shared().ephemeral && t.has_changes());
    if files.len() < 2 {
        for t in files.into_iter().chain(rest) {
            t.commit()?;
        }
        return Ok(());
    }
    for t in &files {
        if let Some(why) = refusal(t.shared()) {
            return Err(Error::AcrossDatabases {
                path: t.shared().pager.path().to_path_buf(),
                reason: why,
            });
        }
    }
    for (i, a) in files.iter().enumerate() {
        if files[..i]
            .iter()
            .any(|b| Arc::ptr_eq(a.shared(), b.shared()))
        {
            return Err(Error::InvalidArgument(
                "two transactions of one database in one commit".into(),
            ));
        }
    }
    let participants: Vec<PathBuf> = files
        .iter()
        .map(|t| absolute(t.shared().pager.path()))
        .collect();
    let first = files[0].shared().clone();
    let vfs: Arc<dyn Vfs> = first.undo.as_ref().expect("checked").inner().clone();
    let nonce = vfs.nonce(0x5e9e_4a11);
    let super_path = {
        let mut s = participants[0].as_os_str().to_owned();
        s.push(format!("-super-{nonce:016x}"));
        PathBuf::from(s)
    };
    // Files a journal creates lazily, created before anything is recorded.
    for t in &files {
        t.shared().pager.prepare_recorded_commit()?;
    }
    // Background flushers paused until the end (module docs); resumed on every return.
    let mut paused = Paused(Vec::new());
    for t in &files {
        if t.shared().pager.pause_flushes()? {
            paused.0.push(t.shared().clone());
        }
    }
    // 0. Every undo log, before the super-journal.
    let mut started: Vec<Arc<Shared>> = Vec::with_capacity(files.len());
    let mut failure = None;
    for t in &files {
        let shared = t.shared().clone();
        let log = log_path(&absolute(shared.pager.path()));
        let mutant = shared.config.journal.mutant() == crate::journal::Mutant::UndoUnsynced;
        match shared
            .undo
            .as_ref()
            .expect("checked")
            .start(&log, &super_path, nonce, mutant)
        {
            Ok(()) => started.push(shared),
            Err(e) => {
                failure = Some(Error::io("start the undo log", &log)(e));
                break;
            }
        }
    }
    // 1. The super-journal.
    if failure.is_none() {
        if let Err(e) = write_super(&vfs, &super_path, nonce, &participants) {
            failure = Some(e);
        }
    }
    if let Some(e) = failure {
        // Nothing was written to any database: the logs are stale without a
        // super-journal; remove what can be removed.
        for s in &started {
            let undo = s.undo.as_ref().expect("checked");
            undo.abandon();
            let _ = undo.inner().delete(&log_path(&absolute(s.pager.path())));
        }
        let _ = vfs.delete(&super_path);
        return Err(e);
    }
    // 2. Each database's part.
    let mut holds = Vec::with_capacity(files.len());
    let mut committed: Vec<Arc<Shared>> = Vec::with_capacity(files.len());
    for t in files.drain(..) {
        let shared = t.shared().clone();
        let undo = shared.undo.clone().expect("checked");
        // From here on the database's files may hold part of this transaction.
        committed.push(shared.clone());
        match t.commit_holding_writer() {
            Ok(h) => holds.push(h),
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
        if let Err(e) = undo.finish() {
            failure = Some(Error::io("sync", shared.pager.path())(e));
            break;
        }
    }
    for s in &started {
        // Recordings of databases never reached (after a failure): nothing to issue.
        s.undo.as_ref().expect("checked").abandon();
    }
    // The transactions never reached (after a failure) roll back when `files` drops.
    drop(files);
    let mut undecided = false;
    if failure.is_none() {
        // The commit point.
        let dir = dir_of(&super_path);
        let r = vfs
            .delete(&super_path)
            .and_then(|()| vfs.sync_dir(&dir))
            .map_err(Error::io("remove the super-journal", &super_path));
        if let Err(e) = r {
            // The removal may or may not be durable: the outcome is whatever the next
            // open finds.
            undecided = true;
            failure = Some(e);
        }
    }
    if let Some(e) = failure {
        for s in &committed {
            s.pager.poison(if undecided {
                format!(
                    "a transaction across databases could not record its outcome ({e}): \
                     reopen the databases to find it (all of it committed, or none)"
                )
            } else {
                format!(
                    "a transaction across databases failed after this database committed \
                     its part ({e}); reopen it to undo that part"
                )
            });
        }
        drop(holds);
        return Err(e);
    }
    // 4. The logs are stale now that the super-journal is gone; one that cannot be
    // removed is removed by the next open.
    for s in &committed {
        let log = log_path(&absolute(s.pager.path()));
        let _ = s.undo.as_ref().expect("checked").inner().delete(&log);
    }
    drop(holds);
    for t in rest.drain(..) {
        t.commit()?;
    }
    Ok(())
}

fn write_super(
    vfs: &Arc<dyn Vfs>,
    path: &Path,
    nonce: u64,
    participants: &[PathBuf],
) -> Result<()> {
    let io = |op| Error::io(op, path);
    let f = vfs
        .open(
            path,
            OpenOptions {
                create: true,
                create_new: true,
                ..Default::default()
            },
        )
        .map_err(io("create the super-journal"))?;
    f.write_at(&encode_super(nonce, participants), 0)
        .map_err(io("write the super-journal"))?;
    f.sync_data().map_err(io("sync the super-journal"))?;
    let dir = dir_of(path);
    vfs.sync_dir(&dir)
        .map_err(Error::io("sync directory", &dir))
}
