//! Contenders: every store the lab compares, behind one small `Store` trait.
//!
//! Invariants:
//! - Every contender does the same logical work per transaction: begin, the given point
//!   operations on one table keyed by a positive integer, one *durable* commit. Nobody gets
//!   a cheaper durability setting than the others (SQLite `synchronous=FULL`, redb
//!   `Durability::Immediate`, LMDB without `NOSYNC`, the engine's default `WalSync::Full`).
//! - The engine's contenders are derived from `inpage::JournalMode::ALL` plus the tweaked
//!   variants in `ENGINE_VARIANTS`, so a journal mode added to the engine shows up here
//!   without edits; a variant is one line.
//! - Each store lives in its own directory; opening it creates it. Nothing here shares a
//!   file between contenders or rounds (the runner hands out fresh directories).
//! - Engine and floor contenders do their I/O through `AccountingVfs`, so their syscall
//!   counts and time split (compute / write / sync) come from the same counters the engine
//!   reports; the peers' I/O is outside our control and is measured at the process or
//!   device level instead.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use inpage::vfs::{AccountingVfs, File, IoStats, OpenOptions, OsVfs, Vfs};
use inpage::{Config, Database, JournalMode, KeyKind, ReadableTxn};

pub(crate) use crate::store::{
    ascii, es, CREATION_DATE, LOAD_BATCH, SQL_DELETE, SQL_GET, SQL_INSERT, SQL_UPDATE,
};
pub use crate::store::{ReadKind, Store, WalCommit};
use crate::workload::Op;

/// The table (tree) every contender uses; Mobibench's name.
pub const TABLE: &str = "tblMyList";
/// Pages in the floor's zero-filled file (overwrites cycle through them).
pub const FLOOR_PAGES: u64 = 256;
/// Floor write size: one engine page.
pub const FLOOR_PAGE: usize = 4096;

/// A tweak applied to the engine's `Config` for a named variant.
pub type ConfigTweak = fn(Config) -> Config;

/// Engine variants beyond the plain journal modes: (name, mode, tweak). Add a line here
/// to benchmark another setting.
pub const ENGINE_VARIANTS: &[(&str, JournalMode, ConfigTweak)] = &[
    ("wal-opt", JournalMode::WAL, |c| c.wal_prealloc(true)),
    // The default DHL mode with its page writes through the page cache (whole blocks to
    // the device) instead of O_DIRECT spans: the bytes-versus-latency trade-off.
    ("dhl-cc-buffered", JournalMode::DHL_CC, |c| {
        c.direct_writes(inpage::DirectWrites::Off)
    }),
    // Steal, for transactions bigger than the cache (`--ops-per-txn 50000`): a 256-page
    // cache, with write transactions spilling past 256 changed pages or keeping them all.
    ("dhl-cc-c256", JournalMode::DHL_CC, |c| c.cache_pages(256)),
    ("dhl-cc-c256-nospill", JournalMode::DHL_CC, |c| {
        c.cache_pages(256).cache_spill(false)
    }),
    ("ips-c256", JournalMode::IPS, |c| c.cache_pages(256)),
    // nvlog's batch size: a flush starts when a quarter of the ring is filled (or 1,024
    // commits wait, or 20 ms passed); the default ring is 4 MiB.
    ("nvlog-ring64k", JournalMode::NVLOG, |c| {
        c.nvlog_ring_bytes(64 << 10)
    }),
    ("nvlog-ring512k", JournalMode::NVLOG, |c| {
        c.nvlog_ring_bytes(512 << 10)
    }),
    // nvlog's inner log preallocated (`wal_prealloc`): its appends then never grow the
    // file, so a flush's fdatasync journals no file-system metadata.
    ("nvlog-prealloc", JournalMode::NVLOG, |c| {
        c.wal_prealloc(true)
    }),
    // nvlog's database grown in 64-page zero-filled chunks, as the other modes' are (its
    // default grows it a page at a time: only checkpoints write it, so the zeros would be
    // a write of their own per page).
    ("nvlog-chunk64", JournalMode::NVLOG, |c| c.chunk_pages(64)),
    // nvlog's flush logging every page, also the new ones past the database's committed
    // end (which it otherwise writes once, in place): the ablation of the direct pages.
    ("nvlog-logged", JournalMode::NVLOG, |c| {
        c.nvlog_direct_pages(false)
    }),
    ("nvlog-ring64k-logged", JournalMode::NVLOG, |c| {
        c.nvlog_ring_bytes(64 << 10).nvlog_direct_pages(false)
    }),
    // redo's ring: 512 KiB (Android's WAL `journal_size_limit`) instead of 4 MiB; batches
    // of a quarter of it.
    ("redo-ring512k", JournalMode::REDO, |c| {
        c.nvlog_ring_bytes(512 << 10)
    }),
    ("ips-c256-nospill", JournalMode::IPS, |c| {
        c.cache_pages(256).cache_spill(false)
    }),
    // DHL's ordered commit of large transactions turned off: every transaction counts,
    // and a crash in a large one is recovered by reading its pages.
    ("dhl-cc-counting", JournalMode::DHL_CC, |c| {
        c.ordered_commit_pages(0)
    }),
    ("ls-mvbt-counting", JournalMode::LS_MVBT, |c| {
        c.ordered_commit_pages(0)
    }),
];

/// The test-only contender whose recovery crash child fails (feature `test-contenders`).
#[cfg(feature = "test-contenders")]
pub const BROKEN_CRASH: &str = "test-broken-crash";

/// Variants run only when named: settings for one experiment, not for every comparison.
pub const NAMED_ONLY: &[&str] = &[
    "dhl-cc-c256",
    "dhl-cc-c256-nospill",
    "ips-c256",
    "ips-c256-nospill",
    "dhl-cc-counting",
    "ls-mvbt-counting",
    "nvlog-prealloc",
    "nvlog-chunk64",
    "nvlog-logged",
    "nvlog-ring64k-logged",
    "redo-ring512k",
];

/// SQLite journal settings, as Mobibench and the apps use them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SqliteFlavor {
    Delete,
    Truncate,
    Persist,
    Wal,
    /// WAL as Android apps configure it: `journal_size_limit=524288`,
    /// `wal_autocheckpoint=100`.
    WalApps,
    Off,
    /// Android's platform build defaults applied at run time (the lab's SQLite is built
    /// with fdatasync like Android's; the rest of Android's compile-time defaults are
    /// set as PRAGMAs): `auto_vacuum=FULL` (before the table exists),
    /// `journal_size_limit=1048576`, `temp_store=MEMORY`. Extra contenders only: never
    /// the default peer or a baseline, so no ratio gains from a heavier peer.
    AndroidWal,
    AndroidDelete,
    AndroidTruncate,
}

impl SqliteFlavor {
    const ALL: [(SqliteFlavor, &'static str); 9] = [
        (SqliteFlavor::Delete, "sqlite-delete"),
        (SqliteFlavor::Truncate, "sqlite-truncate"),
        (SqliteFlavor::Persist, "sqlite-persist"),
        (SqliteFlavor::Wal, "sqlite-wal"),
        (SqliteFlavor::WalApps, "sqlite-wal-r"),
        (SqliteFlavor::Off, "sqlite-off"),
        (SqliteFlavor::AndroidWal, "sqlite-android-wal"),
        (SqliteFlavor::AndroidDelete, "sqlite-android-delete"),
        (SqliteFlavor::AndroidTruncate, "sqlite-android-truncate"),
    ];

    fn journal_mode(self) -> &'static str {
        match self {
            SqliteFlavor::Delete | SqliteFlavor::AndroidDelete => "DELETE",
            SqliteFlavor::Truncate | SqliteFlavor::AndroidTruncate => "TRUNCATE",
            SqliteFlavor::Persist => "PERSIST",
            SqliteFlavor::Wal | SqliteFlavor::WalApps | SqliteFlavor::AndroidWal => "WAL",
            SqliteFlavor::Off => "OFF",
        }
    }

    fn android(self) -> bool {
        matches!(
            self,
            SqliteFlavor::AndroidWal | SqliteFlavor::AndroidDelete | SqliteFlavor::AndroidTruncate
        )
    }
}

/// The extra compiler flags the lab's SQLite was built with: `LIBSQLITE3_FLAGS` as the
/// project's build configuration (`.cargo/config.toml`) set it when this crate was
/// compiled; libsqlite3-sys's build script reads the same variable and reruns when it
/// changes, and cargo rebuilds this crate when it changes, so the two cannot disagree.
pub const SQLITE_BUILD_FLAGS: &str = match option_env!("LIBSQLITE3_FLAGS") {
    Some(f) => f,
    None => "",
};

/// Version, build flags and `PRAGMA compile_options` of the bundled SQLite.
pub fn sqlite_build() -> Result<crate::report::SqliteBuild, String> {
    let conn = rusqlite::Connection::open_in_memory().map_err(es)?;
    let mut st = conn.prepare("PRAGMA compile_options").map_err(es)?;
    let opts = st
        .query_map([], |r| r.get::<_, String>(0))
        .map_err(es)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(es)?;
    Ok(crate::report::SqliteBuild {
        version: rusqlite::version().to_string(),
        build_flags: SQLITE_BUILD_FLAGS.to_string(),
        compile_options: opts,
    })
}

/// What kind of store a contender is.
#[derive(Clone, Copy, Debug)]
pub enum Kind {
    Engine {
        mode: JournalMode,
        tweak: Option<ConfigTweak>,
    },
    Sqlite(SqliteFlavor),
    /// inpage's SQL front end (SQLite's VDBE on inpage) on an engine journal mode.
    Sql(JournalMode),
    Redb,
    Lmdb,
    Floor,
}

/// A named contender.
#[derive(Clone, Debug)]
pub struct Contender {
    pub name: String,
    pub kind: Kind,
}

impl PartialEq for Contender {
    fn eq(&self, o: &Self) -> bool {
        self.name == o.name
    }
}

/// Every contender, in report order: engine modes, engine variants, floor, SQLite, KV
/// stores.
pub fn all_contenders() -> Vec<Contender> {
    let mut v: Vec<Contender> = JournalMode::all()
        .map(|m| Contender {
            name: m.name().to_string(),
            kind: Kind::Engine {
                mode: m,
                tweak: None,
            },
        })
        .collect();
    for &(name, mode, tweak) in ENGINE_VARIANTS {
        v.push(Contender {
            name: name.to_string(),
            kind: Kind::Engine {
                mode,
                tweak: Some(tweak),
            },
        });
    }
    #[cfg(feature = "test-contenders")]
    v.push(Contender {
        name: BROKEN_CRASH.into(),
        kind: Kind::Engine {
            mode: JournalMode::DHL_CC,
            tweak: Some(|c| c),
        },
    });
    v.push(Contender {
        name: "floor".into(),
        kind: Kind::Floor,
    });
    for (f, name) in SqliteFlavor::ALL {
        v.push(Contender {
            name: name.into(),
            kind: Kind::Sqlite(f),
        });
    }
    for m in JournalMode::all() {
        v.push(Contender {
            name: crate::sql::contender_name(m),
            kind: Kind::Sql(m),
        });
    }
    v.push(Contender {
        name: "redb".into(),
        kind: Kind::Redb,
    });
    v.push(Contender {
        name: "lmdb".into(),
        kind: Kind::Lmdb,
    });
    v
}

/// Resolve names (default: all) in the order given; unknown names are an error that
/// lists the valid ones.
pub fn select(names: &[String]) -> Result<Vec<Contender>, String> {
    let all = all_contenders();
    // The default set: every contender except the SQL front end on the non-default modes
    // (the engine's own rows cover those; `mobibench-sql` runs them all) and the variants
    // run only when named.
    let sql_default = crate::sql::contender_name(inpage::DEFAULT_JOURNAL_MODE);
    let default_set = || {
        all.iter()
            .filter(|c| !matches!(c.kind, Kind::Sql(_)) || c.name == sql_default)
            .filter(|c| !NAMED_ONLY.contains(&c.name.as_str()) && !c.name.starts_with("test-"))
            .cloned()
            .collect::<Vec<_>>()
    };
    if names.is_empty() {
        return Ok(default_set());
    }
    let mut out: Vec<Contender> = Vec::new();
    for n in names {
        let n = n.trim();
        if n.is_empty() {
            continue;
        }
        if n.eq_ignore_ascii_case("default") {
            for c in default_set() {
                if !out.contains(&c) {
                    out.push(c);
                }
            }
            continue;
        }
        match all.iter().find(|c| c.name.eq_ignore_ascii_case(n)) {
            Some(c) if !out.contains(c) => out.push(c.clone()),
            Some(_) => {}
            None => {
                return Err(format!(
                    "unknown contender '{n}' (valid: {})",
                    valid_names().join(", ")
                ))
            }
        }
    }
    if out.is_empty() {
        return Err("no contenders selected".into());
    }
    Ok(out)
}

/// Every contender name.
pub fn valid_names() -> Vec<String> {
    all_contenders().into_iter().map(|c| c.name).collect()
}

/// The real files, counted into `stats` (what accounted contenders run over).
fn accounting(stats: &Arc<IoStats>) -> Arc<dyn Vfs> {
    Arc::new(AccountingVfs::with_stats(
        Arc::new(OsVfs::new()),
        stats.clone(),
    ))
}

impl Contender {
    /// Whether its I/O goes through `AccountingVfs` (syscall counts and latency split).
    pub fn accounted(&self) -> bool {
        matches!(self.kind, Kind::Engine { .. } | Kind::Floor)
    }

    /// Whether a crash mid-transaction can be staged for it (the floor has no transaction).
    pub fn recoverable(&self) -> bool {
        // The SQL contenders have no crash child yet (the recovery bench stops the
        // engine inside its commit and SQLite inside its writes; neither hook exists
        // through inpage's SQL layer).
        !matches!(self.kind, Kind::Floor | Kind::Sql(_))
    }

    /// Whether a crash in the middle of a transaction leaves a database that opens to a
    /// committed state (the journal mode promises atomicity). The recovery bench times a
    /// crash open only for these: SQLite with `journal_mode=OFF`, and the engine's `off`
    /// modes, may be left corrupt by the interrupted writes (and then fail the next
    /// open), which is what they promise.
    pub fn crash_safe(&self) -> bool {
        match self.kind {
            Kind::Engine { mode, .. } => mode.capabilities().atomic,
            Kind::Sqlite(f) => f != SqliteFlavor::Off,
            Kind::Redb | Kind::Lmdb => true,
            Kind::Floor | Kind::Sql(_) => false,
        }
    }

    /// As `open`, waiting up to `busy` for other processes holding the file, from the
    /// open on (`bench multiprocess`: every process of a trial opens at once). Stores
    /// that cannot share a file between processes refuse (`shares_between_processes`).
    pub fn open_busy(
        &self,
        dir: &Path,
        stats: &Arc<IoStats>,
        busy: std::time::Duration,
    ) -> Result<Box<dyn Store>, String> {
        let vfs = accounting(stats);
        let r: Result<Box<dyn Store>, String> = match self.kind {
            _ if !self.shares_between_processes() => {
                Err("several processes cannot open it at once".into())
            }
            Kind::Engine { mode, tweak } => EngineStore::open_config(
                dir,
                EngineStore::config(mode, tweak, vfs).busy_timeout(busy),
            )
            .map(|s| Box::new(s) as _),
            Kind::Sqlite(f) => SqliteStore::open_busy(dir, f, busy).map(|s| Box::new(s) as _),
            Kind::Sql(m) => crate::sql::SqlStore::open_busy(dir, m, busy).map(|s| Box::new(s) as _),
            Kind::Redb | Kind::Lmdb | Kind::Floor => Err("not a shared store".into()),
        };
        r.map_err(|e| format!("{}: open: {e}", self.name))
    }

    /// Whether several processes can have its database open at once (`bench
    /// multiprocess`): the engine's modes that take turns, inpage's SQL on them, and
    /// stock SQLite in any journal mode.
    pub fn shares_between_processes(&self) -> bool {
        match self.kind {
            Kind::Engine { mode, .. } | Kind::Sql(mode) => mode.shares_between_processes(),
            Kind::Sqlite(_) => true,
            Kind::Redb | Kind::Lmdb | Kind::Floor => false,
        }
    }

    /// Why the recovery bench cannot time an open after a crash in the middle of one of
    /// its transactions (None: it can): shown as "n/a" with this reason.
    pub fn crash_na(&self) -> Option<&'static str> {
        match self.kind {
            Kind::Floor => Some("no transaction to interrupt"),
            Kind::Sql(_) => Some(
                "no crash child through the SQL layer (the stop hooks sit below it, in the \
                 engine's VFS)",
            ),
            Kind::Engine { mode, .. } => {
                let c = mode.capabilities();
                if !c.atomic {
                    Some("no atomicity promised: an interrupted commit may leave a corrupt file")
                } else if c.region_backed {
                    Some(
                        "a commit goes to a memory-mapped region, not through file writes: no \
                         write to stop it at",
                    )
                } else if !c.survives_process_crash {
                    Some(
                        "a commit is buffered in process memory and written by a later one: no \
                         write to stop it at",
                    )
                } else {
                    None
                }
            }
            Kind::Sqlite(SqliteFlavor::Off) => Some("journal_mode=OFF promises no atomicity"),
            Kind::Sqlite(_) | Kind::Redb | Kind::Lmdb => None,
        }
    }

    /// Why the recovery bench cannot time a reopen after a clean close (None: it can).
    pub fn reopen_na(&self) -> Option<&'static str> {
        match self.kind {
            Kind::Floor => Some("no database to reopen"),
            Kind::Sql(_) => Some("no reopen trial through the SQL layer yet"),
            _ => None,
        }
    }

    /// Whether it answers SQL (the read queries of `mobibench-sql`).
    pub fn speaks_sql(&self) -> bool {
        matches!(self.kind, Kind::Sqlite(_) | Kind::Sql(_))
    }

    /// Open (creating if needed) this contender's store in `dir`. `stats` receives the
    /// I/O of accounted contenders.
    pub fn open(&self, dir: &Path, stats: &Arc<IoStats>) -> Result<Box<dyn Store>, String> {
        self.open_with_vfs(dir, accounting(stats))
    }

    /// As `open`, with the engine (or floor) running over `vfs`; the recovery child passes
    /// a stopping wrapper here. Peers ignore `vfs`.
    pub fn open_with_vfs(&self, dir: &Path, vfs: Arc<dyn Vfs>) -> Result<Box<dyn Store>, String> {
        let r: Result<Box<dyn Store>, String> = match self.kind {
            Kind::Engine { mode, tweak } => {
                EngineStore::open(dir, mode, tweak, vfs).map(|s| Box::new(s) as _)
            }
            Kind::Floor => {
                FloorStore::open(dir, FloorMode::Overwrite, vfs).map(|s| Box::new(s) as _)
            }
            Kind::Sqlite(f) => SqliteStore::open(dir, f).map(|s| Box::new(s) as _),
            Kind::Sql(m) => crate::sql::SqlStore::open(dir, m).map(|s| Box::new(s) as _),
            Kind::Redb => RedbStore::open(dir).map(|s| Box::new(s) as _),
            Kind::Lmdb => LmdbStore::open(dir).map(|s| Box::new(s) as _),
        };
        r.map_err(|e| format!("{}: open: {e}", self.name))
    }
}

// ---------------------------------------------------------------------------- engine

/// The engine: one `KeyKind::Int` tree, value = the Mobibench string.
pub struct EngineStore {
    db: Database,
    tree: inpage::Tree,
    /// WAL mode only: the last commit's effect on the log.
    last: Option<WalCommit>,
}

impl EngineStore {
    pub fn config(mode: JournalMode, tweak: Option<ConfigTweak>, vfs: Arc<dyn Vfs>) -> Config {
        // The engine's own defaults otherwise (its growth chunk among them, which depends
        // on the mode: `Config::chunk_pages_for`), as a user gets them.
        let c = Config::default()
            .vfs(vfs)
            .journal_mode(mode)
            .page_size(4096);
        match tweak {
            Some(t) => t(c),
            None => c,
        }
    }

    pub fn open(
        dir: &Path,
        mode: JournalMode,
        tweak: Option<ConfigTweak>,
        vfs: Arc<dyn Vfs>,
    ) -> Result<EngineStore, String> {
        Self::open_config(dir, Self::config(mode, tweak, vfs))
    }

    /// As `open`, with a `Config` the caller built (e.g. `bench mvbt`'s checkpoint
    /// intervals, which a `ConfigTweak` cannot carry).
    pub fn open_config(dir: &Path, config: Config) -> Result<EngineStore, String> {
        let db = Database::open(dir.join("test.db"), config).map_err(es)?;
        // Reopening must not write (recovery timing would include a commit): look the
        // tree up read-only and create it only in a fresh file.
        let existing = db.begin_read().and_then(|r| r.open_tree(TABLE));
        let tree = match existing {
            Ok(t) => t,
            Err(inpage::Error::TreeNotFound(_)) => {
                let mut w = db.begin_write().map_err(es)?;
                let t = w.open_or_create_tree(TABLE, KeyKind::Int).map_err(es)?;
                w.commit().map_err(es)?;
                t
            }
            Err(e) => return Err(es(e)),
        };
        Ok(EngineStore {
            db,
            tree,
            last: None,
        })
    }

    /// The open database (tests: what configuration reached it).
    pub fn database(&self) -> &Database {
        &self.db
    }

    /// Begin a write, apply `keys`, return the open transaction (for the recovery child,
    /// which arms its stop point before committing).
    pub fn begin_insert(&self, keys: &[i64], value: &[u8]) -> Result<inpage::WriteTxn, String> {
        let mut w = self.db.begin_write().map_err(es)?;
        for &k in keys {
            w.insert(&self.tree, k, value).map_err(es)?;
        }
        Ok(w)
    }
}

impl Store for EngineStore {
    fn preload(&mut self, keys: &[i64], value: &[u8]) -> Result<(), String> {
        for chunk in keys.chunks(LOAD_BATCH) {
            self.txn(Op::Insert, chunk, value)?;
        }
        Ok(())
    }

    fn txn(&mut self, op: Op, keys: &[i64], value: &[u8]) -> Result<(), String> {
        let ops: Vec<(Op, i64)> = keys.iter().map(|&k| (op, k)).collect();
        self.txn_ops(&ops, value)
    }

    fn txn_ops(&mut self, ops: &[(Op, i64)], value: &[u8]) -> Result<(), String> {
        let before = self.log_frames();
        let mut w = self.db.begin_write().map_err(es)?;
        for &(op, k) in ops {
            match op {
                Op::Insert | Op::Update => {
                    w.insert(&self.tree, k, value).map_err(es)?;
                }
                Op::Delete => {
                    w.remove(&self.tree, k).map_err(es)?;
                }
            }
        }
        w.commit().map_err(es)?;
        // The automatic checkpoint runs inside the commit and resets the log to 0
        // frames, and a commit that changed something appends at least one frame: so
        // the count not growing means this commit checkpointed.
        self.last = match (before, self.log_frames()) {
            (Some(f0), Some(f1)) => Some(WalCommit {
                frames: (f1 > f0).then(|| f1 - f0),
                checkpointed: f1 <= f0,
                checkpoint_nanos: None,
            }),
            _ => None,
        };
        Ok(())
    }

    fn log_frames(&self) -> Option<u64> {
        (self.db.journal_mode() == JournalMode::WAL).then(|| self.db.log_frames())
    }

    fn last_commit(&self) -> Option<WalCommit> {
        self.last
    }

    fn checkpoint(&mut self) -> Result<(), String> {
        self.db.checkpoint().map_err(es)
    }

    fn get(&mut self, key: i64) -> Result<bool, String> {
        let r = self.db.begin_read().map_err(es)?;
        Ok(r.get(&self.tree, key).map_err(es)?.is_some())
    }

    fn stage_crash(&mut self, keys: &[i64], value: &[u8], stop: &dyn Fn()) -> Result<(), String> {
        let w = self.begin_insert(keys, value)?;
        stop();
        w.rollback().map_err(es)
    }

    fn close(self: Box<Self>) -> Result<(), String> {
        self.db.close().map_err(es)
    }
}

// ----------------------------------------------------------------------------- floor

/// Which floor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FloorMode {
    /// 4 KiB overwrite of an allocated, zero-filled, synced block + fdatasync: the
    /// cheapest durable one-page commit.
    Overwrite,
    /// 4 KiB appended + fdatasync: every commit changes the file size and block map.
    Append,
}

impl FloorMode {
    pub fn name(self) -> &'static str {
        match self {
            FloorMode::Overwrite => "overwrite",
            FloorMode::Append => "append",
        }
    }
}

/// The floor: no database at all, just the commit's minimum I/O.
pub struct FloorStore {
    vfs: Arc<dyn Vfs>,
    dir: PathBuf,
    file: Arc<dyn File>,
    mode: FloorMode,
    next: u64,
    page: Vec<u8>,
}

impl FloorStore {
    pub fn open(dir: &Path, mode: FloorMode, vfs: Arc<dyn Vfs>) -> Result<FloorStore, String> {
        let opts = OpenOptions::CREATE;
        let file = vfs.open(&dir.join("floor.dat"), opts).map_err(es)?;
        Ok(FloorStore {
            vfs,
            dir: dir.to_path_buf(),
            file,
            mode,
            next: 0,
            // Not zeros: a write of zeros over zeros could be optimised away somewhere.
            page: vec![0xA5; FLOOR_PAGE],
        })
    }
}

impl Store for FloorStore {
    fn preload(&mut self, _keys: &[i64], _value: &[u8]) -> Result<(), String> {
        if self.mode == FloorMode::Overwrite {
            // Written zeros, not fallocate: the first write into an unwritten extent is a
            // metadata change on ext4, which is exactly what the floor must not pay.
            self.file
                .allocate(0, FLOOR_PAGES * FLOOR_PAGE as u64)
                .map_err(es)?;
        }
        self.file.sync_all().map_err(es)?;
        self.vfs.sync_dir(&self.dir).map_err(es)
    }

    fn txn(&mut self, _op: Op, _keys: &[i64], _value: &[u8]) -> Result<(), String> {
        let off = match self.mode {
            FloorMode::Overwrite => (self.next % FLOOR_PAGES) * FLOOR_PAGE as u64,
            FloorMode::Append => self.next * FLOOR_PAGE as u64,
        };
        self.next += 1;
        self.file.write_at(&self.page, off).map_err(es)?;
        self.file.sync_data().map_err(es)
    }

    fn get(&mut self, _key: i64) -> Result<bool, String> {
        Ok(true)
    }

    fn stage_crash(&mut self, _: &[i64], _: &[u8], _: &dyn Fn()) -> Result<(), String> {
        Err("the floor has no transaction to interrupt".into())
    }

    fn close(self: Box<Self>) -> Result<(), String> {
        Ok(())
    }
}

// ---------------------------------------------------------------------------- sqlite

/// SQLite through rusqlite's bundled build, with Mobibench's schema and PRAGMAs.
pub struct SqliteStore {
    conn: rusqlite::Connection,
    /// Opened by `open_checkpointed`: WAL frames after the previous commit and whether
    /// that commit checkpointed (a checkpointed log restarts at the next commit).
    wal: Option<(u64, bool)>,
    /// The last commit's effect on the log (checkpointed stores only).
    last: Option<WalCommit>,
    /// `open_checkpointed`: the interval SQLite accepted (its pragma reads 0 once the
    /// timed hook has replaced the default one, so it is kept here).
    interval: Option<u32>,
}

/// `SqliteStore::open_checkpointed`'s view of its connection's WAL hook. SQLite's WAL
/// hook takes a plain function, so the state lives per thread: a checkpointed store
/// resets it when it opens, and only one is open per thread at a time (the `bench mvbt`
/// trial closes its preload connection before it opens the measured one).
#[derive(Clone, Copy, Debug, Default)]
struct WalHookState {
    /// Checkpoint once the log holds this many frames (`PRAGMA wal_autocheckpoint`).
    interval: u32,
    /// Frames in the log after the last commit.
    pages: u64,
    /// The last commit ran a checkpoint, which took `nanos`.
    checkpointed: bool,
    nanos: u64,
    /// Checkpoints that returned an error (SQLite's own hook ignores them; the bench
    /// fails the run instead).
    errors: u64,
}

thread_local! {
    static WAL_HOOK: std::cell::Cell<WalHookState> =
        std::cell::Cell::new(WalHookState::default());
}

/// SQLite's default WAL hook (`sqlite3WalDefaultHook`: a PASSIVE checkpoint through
/// `sqlite3_wal_checkpoint` once the log holds `wal_autocheckpoint` frames), timed.
fn timed_wal_hook(wal: &rusqlite::hooks::Wal, pages: std::ffi::c_int) -> rusqlite::Result<()> {
    let mut s = WAL_HOOK.with(|h| h.get());
    s.pages = u64::try_from(pages).unwrap_or(0);
    s.checkpointed = false;
    s.nanos = 0;
    if s.interval > 0 && s.pages >= u64::from(s.interval) {
        let t = std::time::Instant::now();
        let r = wal.checkpoint();
        s.nanos = u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX);
        s.checkpointed = true;
        if r.is_err() {
            s.errors += 1;
        }
    }
    WAL_HOOK.with(|h| h.set(s));
    Ok(())
}

impl SqliteStore {
    /// Open with the flavor's PRAGMAs.
    pub fn open(dir: &Path, flavor: SqliteFlavor) -> Result<SqliteStore, String> {
        SqliteStore::open_with_vfs(dir, flavor, None)
    }

    /// As `open`, through the named SQLite VFS (`None`: the default); the recovery bench
    /// passes its stopping VFS here.
    pub fn open_with_vfs(
        dir: &Path,
        flavor: SqliteFlavor,
        vfs: Option<&str>,
    ) -> Result<SqliteStore, String> {
        SqliteStore::open_inner(dir, flavor, vfs, None)
    }

    /// As `open`, waiting up to `busy` for other processes from the first statement on
    /// (`sqlite3_busy_timeout` before the flavor's PRAGMAs), as a process that shares
    /// the file with others opens it (`bench multiprocess`).
    pub fn open_busy(
        dir: &Path,
        flavor: SqliteFlavor,
        busy: std::time::Duration,
    ) -> Result<SqliteStore, String> {
        SqliteStore::open_inner(dir, flavor, None, Some(busy))
    }

    fn open_inner(
        dir: &Path,
        flavor: SqliteFlavor,
        vfs: Option<&str>,
        busy: Option<std::time::Duration>,
    ) -> Result<SqliteStore, String> {
        let path = dir.join("test.db");
        let conn = match vfs {
            None => rusqlite::Connection::open(path),
            Some(name) => rusqlite::Connection::open_with_flags_and_vfs(
                path,
                rusqlite::OpenFlags::default(),
                name,
            ),
        }
        .map_err(es)?;
        if let Some(wait) = busy {
            conn.busy_timeout(wait).map_err(es)?;
        }
        // page_size must precede the first table; journal_mode answers with a row.
        conn.execute_batch("PRAGMA page_size = 4096;").map_err(es)?;
        if flavor.android() {
            // auto_vacuum only takes effect before the first table is created (it is
            // stored in the header, so like page_size it goes first); SQLite ignores it silently later, so check it.
            conn.execute_batch("PRAGMA auto_vacuum = FULL; PRAGMA temp_store = MEMORY;")
                .map_err(es)?;
            let _: i64 = conn
                .query_row("PRAGMA journal_size_limit = 1048576", [], |r| r.get(0))
                .map_err(es)?;
        }
        let want = flavor.journal_mode();
        let got: String = conn
            .query_row(&format!("PRAGMA journal_mode = {want}"), [], |r| r.get(0))
            .map_err(es)?;
        if !got.eq_ignore_ascii_case(want) {
            return Err(format!("journal_mode {want} refused (got {got})"));
        }
        conn.execute_batch("PRAGMA synchronous = FULL;")
            .map_err(es)?;

        if flavor == SqliteFlavor::WalApps {
            let _: i64 = conn
                .query_row("PRAGMA journal_size_limit = 524288", [], |r| r.get(0))
                .map_err(es)?;
            let _: i64 = conn
                .query_row("PRAGMA wal_autocheckpoint = 100", [], |r| r.get(0))
                .map_err(es)?;
        }
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS tblMyList \
             (id INTEGER PRIMARY KEY, Value TEXT NOT NULL, creation_date long);",
        )
        .map_err(es)?;
        if flavor.android() {
            let av: i64 = conn
                .query_row("PRAGMA auto_vacuum", [], |r| r.get(0))
                .map_err(es)?;
            if av != 1 {
                return Err(format!("auto_vacuum is {av}, want 1 (FULL)"));
            }
        }
        Ok(SqliteStore {
            conn,
            wal: None,
            last: None,
            interval: None,
        })
    }

    /// A WAL flavor with `PRAGMA wal_autocheckpoint = interval` (`bench mvbt`'s
    /// checkpoint rows), its automatic checkpoints timed: the pragma's value is read back
    /// and a hook doing what SQLite's default one does at that interval replaces it.
    pub fn open_checkpointed(
        dir: &Path,
        flavor: SqliteFlavor,
        interval: u32,
    ) -> Result<SqliteStore, String> {
        if flavor.journal_mode() != "WAL" {
            return Err(format!("{flavor:?} has no WAL to checkpoint"));
        }
        if interval == 0 {
            return Err("a checkpoint interval counts from 1 page".into());
        }
        let mut s = SqliteStore::open(dir, flavor)?;
        let set: i64 = s
            .conn
            .query_row(
                &format!("PRAGMA wal_autocheckpoint = {interval}"),
                [],
                |r| r.get(0),
            )
            .map_err(es)?;
        let interval = u32::try_from(set)
            .ok()
            .filter(|&n| n == interval)
            .ok_or_else(|| format!("wal_autocheckpoint = {interval} answered {set}"))?;
        WAL_HOOK.with(|h| {
            h.set(WalHookState {
                interval,
                ..WalHookState::default()
            })
        });
        s.conn.wal_hook(Some(timed_wal_hook));
        s.wal = Some((0, false));
        s.interval = Some(interval);
        Ok(s)
    }

    /// The checkpoint interval `open_checkpointed` set (`None`: SQLite's default hook).
    pub fn checkpoint_interval(&self) -> Option<u32> {
        self.interval
    }

    /// After a commit of a checkpointed store: what it did to the log.
    fn note_commit(&mut self) -> Result<(), String> {
        let Some((prev, prev_cp)) = self.wal else {
            return Ok(());
        };
        let h = WAL_HOOK.with(|h| h.get());
        if h.errors > 0 {
            return Err("an automatic WAL checkpoint failed".into());
        }
        // After a complete checkpoint the next commit restarts the log at frame 0.
        let base = if prev_cp || h.pages < prev { 0 } else { prev };
        self.last = Some(WalCommit {
            frames: Some(h.pages - base),
            checkpointed: h.checkpointed,
            checkpoint_nanos: h.checkpointed.then_some(h.nanos),
        });
        self.wal = Some((h.pages, h.checkpointed));
        Ok(())
    }

    pub fn connection(&self) -> &rusqlite::Connection {
        &self.conn
    }

    fn apply_ops(&self, ops: &[(Op, i64)], value: &str) -> rusqlite::Result<()> {
        for &(op, k) in ops {
            self.apply(op, &[k], value)?;
        }
        Ok(())
    }

    fn apply(&self, op: Op, keys: &[i64], value: &str) -> rusqlite::Result<()> {
        match op {
            Op::Insert => {
                let mut st = self.conn.prepare_cached(SQL_INSERT)?;
                for &k in keys {
                    st.execute(rusqlite::params![k, value, CREATION_DATE])?;
                }
            }
            Op::Update => {
                let mut st = self.conn.prepare_cached(SQL_UPDATE)?;
                for &k in keys {
                    st.execute(rusqlite::params![k, value])?;
                }
            }
            Op::Delete => {
                let mut st = self.conn.prepare_cached(SQL_DELETE)?;
                for &k in keys {
                    st.execute(rusqlite::params![k])?;
                }
            }
        }
        Ok(())
    }
}

impl Store for SqliteStore {
    fn preload(&mut self, keys: &[i64], value: &[u8]) -> Result<(), String> {
        for chunk in keys.chunks(LOAD_BATCH) {
            self.txn(Op::Insert, chunk, value)?;
        }
        Ok(())
    }

    fn txn(&mut self, op: Op, keys: &[i64], value: &[u8]) -> Result<(), String> {
        let v = ascii(value)?;
        // Mobibench: BEGIN; statements; COMMIT. (With one statement this is the same I/O
        // as an auto-commit statement.)
        self.conn.execute_batch("BEGIN").map_err(es)?;
        if let Err(e) = self.apply(op, keys, v) {
            let _ = self.conn.execute_batch("ROLLBACK");
            return Err(es(e));
        }
        self.conn.execute_batch("COMMIT").map_err(es)?;
        self.note_commit()
    }

    fn txn_ops(&mut self, ops: &[(Op, i64)], value: &[u8]) -> Result<(), String> {
        let v = ascii(value)?;
        self.conn.execute_batch("BEGIN").map_err(es)?;
        if let Err(e) = self.apply_ops(ops, v) {
            let _ = self.conn.execute_batch("ROLLBACK");
            return Err(es(e));
        }
        self.conn.execute_batch("COMMIT").map_err(es)?;
        self.note_commit()
    }

    fn log_frames(&self) -> Option<u64> {
        self.wal.map(|(pages, _)| pages)
    }

    fn last_commit(&self) -> Option<WalCommit> {
        self.last
    }

    fn checkpoint(&mut self) -> Result<(), String> {
        // TRUNCATE: every frame copied back and the log emptied, as a close leaves it.
        let (busy, _, _): (i64, i64, i64) = self
            .conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })
            .map_err(es)?;
        if busy != 0 {
            return Err("wal_checkpoint(TRUNCATE) was blocked".into());
        }
        Ok(())
    }

    fn get(&mut self, key: i64) -> Result<bool, String> {
        let mut st = self.conn.prepare_cached(SQL_GET).map_err(es)?;
        st.exists([key]).map_err(es)
    }

    fn stage_crash(&mut self, keys: &[i64], value: &[u8], stop: &dyn Fn()) -> Result<(), String> {
        // The recovery child stops SQLite inside its writes instead (`sqlite_stop`); this
        // stop point, after the statements with the journal hot, serves other callers.
        let v = ascii(value)?;
        self.conn.execute_batch("BEGIN").map_err(es)?;
        self.apply(Op::Insert, keys, v).map_err(es)?;
        stop();
        Ok(())
    }

    fn reads_setup(&mut self, rows: u64, value: &[u8]) -> Result<(), String> {
        use crate::sql::{read_name, READ_INSERT, READ_SCHEMA};
        let v = ascii(value)?;
        self.conn.execute_batch(READ_SCHEMA).map_err(es)?;
        let ids: Vec<i64> = (1..=rows as i64).collect();
        for chunk in ids.chunks(LOAD_BATCH) {
            let tx = self.conn.transaction().map_err(es)?;
            {
                let mut st = tx.prepare_cached(READ_INSERT).map_err(es)?;
                for &id in chunk {
                    st.execute(rusqlite::params![id, read_name(id), v])
                        .map_err(es)?;
                }
            }
            tx.commit().map_err(es)?;
        }
        Ok(())
    }

    fn read(&mut self, kind: ReadKind, id: i64) -> Result<u64, String> {
        let mut st = self.conn.prepare_cached(kind.sql()).map_err(es)?;
        let arg: rusqlite::types::Value = match kind {
            ReadKind::Index => crate::sql::read_name(id).into(),
            _ => id.into(),
        };
        let n = read_rows(st.query([arg]).map_err(es)?);
        n
    }

    fn exec(&mut self, sql: &str) -> Result<(u64, u64), String> {
        // Prepared, run and finalized, as the SQL contenders do.
        let mut st = self.conn.prepare(sql).map_err(es)?;
        let rows = read_rows(st.raw_query());
        Ok((rows?, self.conn.changes()))
    }

    fn close(self: Box<Self>) -> Result<(), String> {
        self.conn.close().map_err(|(_, e)| es(e))
    }
}

/// Step `rows` to the end reading every column of every row, as inpage-sql's
/// `CachedStatement::run` does; the number of rows.
fn read_rows(mut rows: rusqlite::Rows<'_>) -> Result<u64, String> {
    use rusqlite::types::ValueRef;
    let (mut n, mut bytes) = (0u64, 0usize);
    while let Some(r) = rows.next().map_err(es)? {
        n += 1;
        for c in 0..r.as_ref().column_count() {
            match r.get_ref(c).map_err(es)? {
                ValueRef::Text(t) | ValueRef::Blob(t) => bytes += t.len(),
                v => {
                    std::hint::black_box(v);
                }
            }
        }
    }
    std::hint::black_box(bytes);
    Ok(n)
}

// ------------------------------------------------------------------------------ redb

const REDB_TABLE: redb::TableDefinition<u64, &[u8]> = redb::TableDefinition::new(TABLE);

/// redb with its default (immediate, durable) commits.
pub struct RedbStore {
    db: redb::Database,
}

impl RedbStore {
    pub fn open(dir: &Path) -> Result<RedbStore, String> {
        let db = redb::Database::create(dir.join("test.redb")).map_err(es)?;
        // As for the engine: a reopen (recovery timing) must not commit anything.
        let exists = {
            let r = db.begin_read().map_err(es)?;
            match r.open_table(REDB_TABLE) {
                Ok(_) => true,
                Err(redb::TableError::TableDoesNotExist(_)) => false,
                Err(e) => return Err(es(e)),
            }
        };
        if !exists {
            let w = db.begin_write().map_err(es)?;
            w.open_table(REDB_TABLE).map_err(es)?;
            w.commit().map_err(es)?;
        }
        Ok(RedbStore { db })
    }
}

fn ukey(k: i64) -> u64 {
    // Keys are positive by construction (workload.rs); the cast keeps their order.
    k as u64
}

impl Store for RedbStore {
    fn preload(&mut self, keys: &[i64], value: &[u8]) -> Result<(), String> {
        for chunk in keys.chunks(LOAD_BATCH) {
            self.txn(Op::Insert, chunk, value)?;
        }
        Ok(())
    }

    fn txn(&mut self, op: Op, keys: &[i64], value: &[u8]) -> Result<(), String> {
        let w = self.db.begin_write().map_err(es)?;
        {
            let mut t = w.open_table(REDB_TABLE).map_err(es)?;
            for &k in keys {
                match op {
                    Op::Insert | Op::Update => {
                        t.insert(ukey(k), value).map_err(es)?;
                    }
                    Op::Delete => {
                        t.remove(ukey(k)).map_err(es)?;
                    }
                }
            }
        }
        w.commit().map_err(es)
    }

    fn get(&mut self, key: i64) -> Result<bool, String> {
        let r = self.db.begin_read().map_err(es)?;
        let t = r.open_table(REDB_TABLE).map_err(es)?;
        let found = t.get(ukey(key)).map_err(es)?.is_some();
        Ok(found)
    }

    fn stage_crash(&mut self, keys: &[i64], value: &[u8], stop: &dyn Fn()) -> Result<(), String> {
        let w = self.db.begin_write().map_err(es)?;
        {
            let mut t = w.open_table(REDB_TABLE).map_err(es)?;
            for &k in keys {
                t.insert(ukey(k), value).map_err(es)?;
            }
        }
        stop();
        w.abort().map_err(es)
    }

    fn close(self: Box<Self>) -> Result<(), String> {
        drop(self.db);
        Ok(())
    }
}

// ------------------------------------------------------------------------------ lmdb

type LmdbKey = heed::types::U64<heed::byteorder::BigEndian>;
type LmdbDb = heed::Database<LmdbKey, heed::types::Bytes>;

/// LMDB through heed, with its default durable commits (no NOSYNC / NOMETASYNC).
pub struct LmdbStore {
    env: heed::Env,
    db: LmdbDb,
}

impl LmdbStore {
    pub fn open(dir: &Path) -> Result<LmdbStore, String> {
        let mut opts = heed::EnvOpenOptions::new();
        // The map is address space, not disk: LMDB without WRITEMAP does not pre-size
        // the file, so a generous map costs nothing on the small lab file system.
        opts.map_size(1 << 30).max_dbs(1);
        // SAFETY: heed marks `open` unsafe because LMDB memory-maps the file and the
        // process must not open the same environment twice or let another process
        // truncate it. Each directory here is opened by one store at a time (the runner
        // hands out fresh directories and closes stores before reopening), and only the
        // recovery child, a separate process, shares it, which LMDB's lock file handles.
        let env = unsafe { opts.open(dir) }.map_err(es)?;
        // As for the engine: a reopen (recovery timing) must not commit anything.
        let found: Option<LmdbDb> = {
            let r = env.read_txn().map_err(es)?;
            let d = env.open_database(&r, Some(TABLE)).map_err(es)?;
            r.commit().map_err(es)?;
            d
        };
        let db = match found {
            Some(d) => d,
            None => {
                let mut w = env.write_txn().map_err(es)?;
                let d: LmdbDb = env.create_database(&mut w, Some(TABLE)).map_err(es)?;
                w.commit().map_err(es)?;
                d
            }
        };
        Ok(LmdbStore { env, db })
    }
}

impl Store for LmdbStore {
    fn preload(&mut self, keys: &[i64], value: &[u8]) -> Result<(), String> {
        for chunk in keys.chunks(LOAD_BATCH) {
            self.txn(Op::Insert, chunk, value)?;
        }
        Ok(())
    }

    fn txn(&mut self, op: Op, keys: &[i64], value: &[u8]) -> Result<(), String> {
        let mut w = self.env.write_txn().map_err(es)?;
        for &k in keys {
            match op {
                Op::Insert | Op::Update => self.db.put(&mut w, &ukey(k), value).map_err(es)?,
                Op::Delete => {
                    self.db.delete(&mut w, &ukey(k)).map_err(es)?;
                }
            }
        }
        w.commit().map_err(es)
    }

    fn get(&mut self, key: i64) -> Result<bool, String> {
        let r = self.env.read_txn().map_err(es)?;
        Ok(self.db.get(&r, &ukey(key)).map_err(es)?.is_some())
    }

    fn stage_crash(&mut self, keys: &[i64], value: &[u8], stop: &dyn Fn()) -> Result<(), String> {
        let mut w = self.env.write_txn().map_err(es)?;
        for &k in keys {
            self.db.put(&mut w, &ukey(k), value).map_err(es)?;
        }
        stop();
        w.abort();
        Ok(())
    }

    fn close(self: Box<Self>) -> Result<(), String> {
        let LmdbStore { env, .. } = *self;
        // heed keeps a process-wide registry of open environments and refuses to open a
        // path twice; wait until this one is really closed so the path can be reopened.
        env.prepare_for_closing().wait();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::mobibench_value;

    #[test]
    fn names_and_selection() {
        let names = valid_names();
        for m in JournalMode::all() {
            assert!(names.contains(&m.name().to_string()), "{m}");
        }
        for n in [
            "wal-opt",
            "floor",
            "sqlite-delete",
            "sqlite-truncate",
            "sqlite-persist",
            "sqlite-wal",
            "sqlite-wal-r",
            "sqlite-off",
            "sqlite-android-wal",
            "sqlite-android-delete",
            "sqlite-android-truncate",
            "redb",
            "lmdb",
        ] {
            assert!(names.contains(&n.to_string()), "{n}");
        }
        let uniq: std::collections::HashSet<_> = names.iter().collect();
        assert_eq!(uniq.len(), names.len(), "names unique");
        let s = select(&["lmdb".into(), "sqlite-wal".into(), "lmdb".into()]).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].name, "lmdb");
        let e = select(&["nope".into()]).unwrap_err();
        assert!(
            e.contains("unknown contender 'nope'") && e.contains("sqlite-wal-r"),
            "{e}"
        );
        // The default set: all but the SQL front end on the non-default modes and the
        // named-only variants (which select by name).
        let default = select(&[]).unwrap();
        let sql: Vec<_> = names
            .iter()
            .filter(|n| n.starts_with(crate::sql::PREFIX))
            .collect();
        assert_eq!(
            sql.len(),
            JournalMode::all().count(),
            "one sql-<mode> per mode"
        );
        // Test-only contenders (feature `test-contenders`) are named-only too.
        let test_only = names.iter().filter(|n| n.starts_with("test-")).count();
        assert_eq!(
            default.len(),
            names.len() - sql.len() + 1 - NAMED_ONLY.len() - test_only
        );
        // `default` in a list stands for that set.
        let with = select(&["default".into(), "dhl-cc-counting".into()]).unwrap();
        assert_eq!(with.len(), default.len() + 1);
        assert!(default
            .iter()
            .all(|c| !NAMED_ONLY.contains(&c.name.as_str())));
        for n in NAMED_ONLY {
            assert_eq!(select(&[n.to_string()]).unwrap()[0].name, *n);
        }
        let sql_default = format!("sql-{}", inpage::DEFAULT_JOURNAL_MODE.name());
        assert!(default.iter().any(|c| c.name == sql_default));
        assert!(!default.iter().any(|c| c.name == "sql-wal"));
        assert!(!default.iter().any(|c| c.name == "sql-dhl-cc"));
    }

    /// Crash rows are timed only where the mode promises a committed state after a crash
    /// (SQLite's OFF is left corrupt by an interrupted commit, and its next open fails).
    #[test]
    fn crash_rows_only_for_atomic_modes() {
        let c = |n: &str| select(&[n.to_string()]).unwrap().remove(0);
        for n in [
            "dhl-cc",
            "wal",
            "delete",
            "sqlite-wal",
            "sqlite-wal-r",
            "sqlite-delete",
            "redb",
            "lmdb",
        ] {
            assert!(c(n).crash_safe(), "{n}");
        }
        for n in ["off", "off-opt", "sqlite-off", "floor", "sql-dhl-cc"] {
            assert!(!c(n).crash_safe(), "{n}");
        }
    }

    /// Every contender that answers SQL answers the read queries alike (rows per query)
    /// and refuses them if it does not.
    #[test]
    fn sql_contenders_answer_the_read_queries() {
        use crate::sql::{ReadKind, RANGE_ROWS};
        let v = mobibench_value(100, false);
        for c in all_contenders() {
            let dir = tempfile::tempdir().unwrap();
            let stats = Arc::new(IoStats::new());
            let mut s = c.open(dir.path(), &stats).unwrap();
            if !c.speaks_sql() {
                assert!(s.reads_setup(10, &v).is_err(), "{}", c.name);
                continue;
            }
            s.reads_setup(RANGE_ROWS + 20, &v).unwrap();
            for (kind, id, want) in [
                (ReadKind::Rowid, 7, 1),
                (ReadKind::Rowid, 5000, 0),
                (ReadKind::Index, 1020, 1),
                (ReadKind::Index, 0, 0),
                (ReadKind::Range, 1, RANGE_ROWS),
                (ReadKind::Range, 21, RANGE_ROWS),
                (ReadKind::Range, 22, RANGE_ROWS - 1),
            ] {
                assert_eq!(s.read(kind, id).unwrap(), want, "{} {kind:?} {id}", c.name);
            }
            s.close().unwrap();
        }
    }

    /// Every peer does the three operations and persists them across a reopen.
    #[test]
    fn peers_round_trip() {
        let v = mobibench_value(100, false);
        for c in all_contenders() {
            if matches!(c.kind, Kind::Engine { .. } | Kind::Floor) {
                continue;
            }
            let dir = tempfile::tempdir().unwrap();
            let stats = Arc::new(IoStats::new());
            let mut s = c.open(dir.path(), &stats).unwrap();
            s.preload(&[1, 2, 3, 4], &v).unwrap();
            s.txn(Op::Insert, &[5, 6], &v).unwrap();
            s.txn(Op::Update, &[1], &mobibench_value(100, true))
                .unwrap();
            s.txn(Op::Delete, &[2, 3], &v).unwrap();
            s.close().unwrap();
            let mut s = c.open(dir.path(), &stats).unwrap();
            for (k, want) in [(1, true), (2, false), (3, false), (4, true), (6, true)] {
                assert_eq!(s.get(k).unwrap(), want, "{} key {k}", c.name);
            }
            s.close().unwrap();
        }
    }

    /// The peer is built with fdatasync (`.cargo/config.toml`); the flags are reported.
    #[test]
    fn sqlite_is_built_with_fdatasync() {
        let b = sqlite_build().unwrap();
        assert!(
            b.build_flags
                .split_whitespace()
                .any(|f| f == "-DHAVE_FDATASYNC=1"),
            "LIBSQLITE3_FLAGS = '{}'",
            b.build_flags
        );
        assert!(!b.version.is_empty());
        assert!(
            b.compile_options
                .iter()
                .any(|o| o.starts_with("THREADSAFE")),
            "{b:?}"
        );
    }

    /// The Android flavors really run with auto_vacuum FULL (set before the table).
    #[test]
    fn android_flavors_apply_their_pragmas() {
        let dir = tempfile::tempdir().unwrap();
        let s = SqliteStore::open(dir.path(), SqliteFlavor::AndroidWal).unwrap();
        let c = s.connection();
        let q = |sql: &str| -> i64 { c.query_row(sql, [], |r| r.get(0)).unwrap() };
        assert_eq!(q("PRAGMA auto_vacuum"), 1);
        assert_eq!(q("PRAGMA journal_size_limit"), 1_048_576);
        assert_eq!(q("PRAGMA temp_store"), 2);
        let mode: String = c
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
        let dir = tempfile::tempdir().unwrap();
        let plain = SqliteStore::open(dir.path(), SqliteFlavor::Wal).unwrap();
        let av: i64 = plain
            .connection()
            .query_row("PRAGMA auto_vacuum", [], |r| r.get(0))
            .unwrap();
        assert_eq!(av, 0, "the default peer keeps SQLite's defaults");
    }

    #[test]
    fn floor_counts_one_write_one_sync() {
        let dir = tempfile::tempdir().unwrap();
        let stats = Arc::new(IoStats::new());
        let vfs: Arc<dyn Vfs> = Arc::new(AccountingVfs::with_stats(
            Arc::new(OsVfs::new()),
            stats.clone(),
        ));
        for mode in [FloorMode::Overwrite, FloorMode::Append] {
            let mut f = FloorStore::open(dir.path(), mode, vfs.clone()).unwrap();
            f.preload(&[], &[]).unwrap();
            let before = stats.snapshot();
            for _ in 0..10 {
                f.txn(Op::Insert, &[], &[]).unwrap();
            }
            let d = stats.snapshot().delta(&before);
            assert_eq!(d.get(inpage::vfs::IoKind::Write).calls, 10);
            assert_eq!(d.get(inpage::vfs::IoKind::Sync).calls, 10);
            assert_eq!(d.total().calls, 20);
            std::fs::remove_file(dir.path().join("floor.dat")).unwrap();
        }
    }
}
