//! `inpage bench`: the benchmark lab.
//!
//! Workloads: `mobibench` (insert/update/delete transactions of 1..N operations, as the
//! ESOS-Lab Mobibench drives SQLite), `recovery` (time open + first access of a table of
//! each `--records` size, cold and warm page cache, after an insert transaction was
//! interrupted in a killed child process and after a clean close), `floor` (the cheapest durable one-page
//! commit, and an appending one), `all` (a quick pass of the three into a results
//! folder), `pages` (records per leaf page, stock vs DHL layout; see `pages`) and `mvbt`
//! (the LS-MVBT paper's Fig. 6 workload and a space row; see `mvbt`). Contenders: every engine journal mode (+ variants), the floor, SQLite in its
//! journal modes, redb and LMDB (see `contender`).
//!
//! Where and how I/O is measured is `lab`; the method (rounds, medians, ratios) is
//! `runner`; output is `report` and `plots`. The entry point for the CLI is [`run`], which
//! returns a one-line error for the caller to print.
//!
//! Invariants: bad arguments are errors, never panics; every loop device and mount a run
//! creates is released before `run` returns (see `lab`); the hidden `recovery-child`
//! command is only ever spawned by this crate, with the argv `bench recovery-child ...`,
//! through `std::env::current_exe()`, so any binary that routes `bench <BenchCmd>` to
//! [`run`] works as its parent.

pub mod concurrent;
pub mod contender;
pub mod device;
pub mod emulate;
pub mod lab;
pub mod multiprocess;
pub mod mvbt;
pub mod nvlog;
pub mod pages;
pub mod plots;
pub mod program;
pub mod recovery;
pub mod report;
pub mod runner;
pub mod sql;
pub mod sqlite_stop;
pub mod store;
pub mod synth;
pub mod trace;
pub mod workload;

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand, ValueEnum};

use crate::contender::Contender;
use crate::lab::{Ext4Lab, Ext4Options, Lab};
use crate::recovery::ChildSpec;
use crate::report::Report;
use crate::runner::{MobiParams, RecoveryParams, Session};
use crate::workload::{parse_counts, Op};

/// Largest transaction size accepted (operations per transaction): enough for one
/// transaction many times the page cache (steal).
const MAX_OPS_PER_TXN: u32 = 100_000;

/// `inpage bench ...`
#[derive(Subcommand, Debug, Clone)]
pub enum BenchCmd {
    /// Mobibench: insert / update / delete transactions of 1..N operations each.
    Mobibench(MobibenchArgs),
    /// Mobibench through SQL: inpage's SQL front end on each journal mode (`sql-<mode>`)
    /// against stock SQLite (`sqlite-<mode>`), the same statements in the same run; then
    /// reads (point SELECT by rowid, by an indexed column, a 1,000-row range scan).
    MobibenchSql(MobibenchSqlArgs),
    /// Interrupt an insert transaction in a killed child; time reopen + first access.
    Recovery(RecoveryArgs),
    /// The cheapest durable one-page commit (4 KiB overwrite + fdatasync) and an append.
    Floor(FloorArgs),
    /// Quick pass: mobibench (all contenders, 3 ops, 1 op/txn) + floor + recovery,
    /// written as table.txt, results.json and plots/ into --out.
    All(AllArgs),
    /// Page utilization: records per leaf page, stock vs DHL, per record size and key
    /// order (in-memory; a record = 8-byte integer key + value).
    Pages(PagesArgs),
    /// Several threads on one database: the engine's concurrency settings (serial, occ,
    /// 2vto on IPS and DHL pages, 2vto without the forced sleep) against SQLite WAL with
    /// a connection per thread (the IPS + 2VTO paper's Fig. 8–11 grid).
    Concurrent(ConcurrentArgs),
    /// Several processes on one database: writers and readers, each its own process, in
    /// each `--layouts` layout, against stock SQLite WAL with the same processes; write
    /// and read transactions per second and p50/p99 latency per role.
    Multiprocess(MultiprocessArgs),
    /// The LS-MVBT paper's Fig. 6 workload (a 2,000-row table, 1,000 insert/delete
    /// transactions; WALs at each checkpoint interval, their checkpoints amortized in), or
    /// with --space the file size after 100,000 one-row updates.
    Mvbt(mvbt::MvbtArgs),
    /// The xLog paper's workloads: one-record commits of 100 B to 100 KiB back to back
    /// and random key-value puts; commit latency p50/p99, commits per second, write
    /// amplification (device bytes / record bytes), flushes per 1,000 commits.
    Nvlog(nvlog::NvlogArgs),
    /// Replay SQL traces (one statement per line; BEGIN…COMMIT groups; files named
    /// loading* run first, unmeasured) through the SQL contenders and stock SQLite:
    /// modeled and measured time, device bytes, requests, flushes, CPU and write-transaction
    /// latency per trace; every statement's outcome must match stock SQLite's.
    Trace(TraceArgs),
    /// Write a synthetic app-like trace (`loading-<profile>.sql`, `<profile>.sql`) to a
    /// directory, for `bench trace FILES` or another replayer.
    TraceGen(TraceGenArgs),
    /// An outside program (a client built against libsqlite3) run in the lab under each
    /// contender's environment (`LD_LIBRARY_PATH` picks the library), interleaved rounds,
    /// priced by the device counters plus its CPU.
    Program(program::ProgramArgs),
    /// List the contender names.
    List,
    /// Internal: the crashing child of `bench recovery`.
    #[command(hide = true)]
    RecoveryChild(ChildArgs),
    /// Internal: one process of `bench multiprocess`.
    #[command(hide = true)]
    MultiprocessWorker(multiprocess::WorkerArgs),
}

/// Which lab to run in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LabChoice {
    /// ext4 when root and loop devices are available, else none.
    Auto,
    /// Fresh ext4 on a loop device with its jbd2 journal on a second loop device.
    Ext4,
    /// A plain directory; syscall-level counts only.
    None,
    /// As ext4, with both loop devices backed by a FUSE file system that charges the
    /// `--device` profile's latencies on every write and flush (see `emulate`).
    #[value(name = "ext4-emulated")]
    Ext4Emulated,
}

#[derive(Args, Debug, Clone)]
pub struct LabArgs {
    /// Where to run: ext4 (device-level counters; needs root) or none (a plain directory).
    #[arg(long, value_enum, default_value_t = LabChoice::Auto)]
    pub lab: LabChoice,
    /// Lab `none`: directory for the databases (default: a temp dir under /var/tmp).
    /// Lab `ext4`: where the image files and mount point go (default /var/tmp).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Lab `ext4`: size of the data device in MiB.
    #[arg(long, default_value_t = 256)]
    pub lab_mib: u64,
    /// Device profile for the modeled columns and for `--lab ext4-emulated`
    /// (emmc, ufs, nvme, virtio; see `device`).
    #[arg(long, default_value = "emmc")]
    pub device: String,
}

#[derive(Args, Debug, Clone)]
pub struct MethodArgs {
    /// Contenders, comma-separated (default: all; see `bench list`).
    #[arg(long, value_delimiter = ',')]
    pub contenders: Vec<String>,
    /// Rounds; contenders are interleaved within each round, results are medians.
    #[arg(long, default_value_t = 5)]
    pub rounds: u32,
    /// Contender every ratio is relative to (must be among the selected ones).
    #[arg(long, default_value = "sqlite-wal")]
    pub baseline: String,
}

#[derive(Args, Debug, Clone)]
pub struct OutputArgs {
    /// Write the results as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write SVG plots into this directory.
    #[arg(long)]
    pub plots: Option<PathBuf>,
}

#[derive(Args, Debug, Clone)]
pub struct ConcurrentArgs {
    #[command(flatten)]
    pub lab: LabArgs,
    /// Contenders, comma-separated (default: serial, occ, 2vto, 2vto-dhl, 2vto-nosleep,
    /// sqlite-wal-r).
    #[arg(long, value_delimiter = ',')]
    pub contenders: Vec<String>,
    /// Rounds; contenders are interleaved within each round, results are medians.
    #[arg(long, default_value_t = 3)]
    pub rounds: u32,
    /// Contender every ratio is relative to.
    #[arg(long, default_value = "sqlite-wal-r")]
    pub baseline: String,
    /// Threads, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4")]
    pub threads: Vec<usize>,
    /// Percent of statements that are UPDATEs (one-statement transactions), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "20")]
    pub write_ratio: Vec<u32>,
    /// Zipfian skew of the keys (0 = uniform), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "0")]
    pub zipf: Vec<f64>,
    /// Statements per transaction, comma-separated (above 1: 85 % reads, the paper's
    /// transaction-size runs).
    #[arg(long, value_delimiter = ',', default_value = "1")]
    pub stmts: Vec<usize>,
    /// Rows loaded before the run (the paper: 5,000).
    #[arg(long, default_value_t = 5000)]
    pub records: i64,
    /// Statements per thread per round (the paper: 5,000).
    #[arg(long, default_value_t = 2000)]
    pub queries: usize,
    /// Seed of the statement generators.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Write the results as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

#[derive(Args, Debug, Clone)]
pub struct MultiprocessArgs {
    #[command(flatten)]
    pub lab: LabArgs,
    /// Contenders, comma-separated (any of `bench list`).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "sql-redo,sql-wal,sqlite-wal-r"
    )]
    pub contenders: Vec<String>,
    /// Rounds; contenders are interleaved within each round, results are medians.
    #[arg(long, default_value_t = 3)]
    pub rounds: u32,
    /// Contender every ratio is relative to.
    #[arg(long, default_value = "sqlite-wal-r")]
    pub baseline: String,
    /// Layouts of processes, comma-separated: `<n>w<m>r` (n writers, m readers).
    #[arg(long, value_delimiter = ',', default_value = "1w,1w1r,1w3r,2w2r")]
    pub layouts: Vec<String>,
    /// Seconds every process of a trial runs transactions.
    #[arg(long, default_value_t = 2.0)]
    pub seconds: f64,
    /// Rows loaded before each trial.
    #[arg(long, default_value_t = 5000)]
    pub records: i64,
    /// Seed of the workers' key choices.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Write the results as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

#[derive(Args, Debug, Clone)]
pub struct MobibenchArgs {
    #[command(flatten)]
    pub method: MethodArgs,
    #[command(flatten)]
    pub lab: LabArgs,
    #[command(flatten)]
    pub out: OutputArgs,
    /// Operations, comma-separated: insert, update, delete (default: all three).
    #[arg(long, value_delimiter = ',')]
    pub op: Vec<String>,
    /// Operations per transaction, comma-separated (e.g. 1,2,4,8,16).
    #[arg(long, value_delimiter = ',', default_value = "1")]
    pub ops_per_txn: Vec<u32>,
    /// Transactions per round (per thread).
    #[arg(long, default_value_t = 1000)]
    pub txns: u64,
    /// Value size in bytes (100 = Mobibench; 128 for the DHL paper's runs).
    #[arg(long, default_value_t = 100)]
    pub value_size: usize,
    /// Insert keys in random order (without replacement) instead of sequentially.
    #[arg(long)]
    pub random: bool,
    /// Threads, each with its own database (as Mobibench does).
    #[arg(long, default_value_t = 1)]
    pub threads: u32,
    /// Seed of the key generators.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Updates write Mobibench's one fixed string (an update of a row that already holds
    /// it changes nothing, and SQLite and the engine then skip the write) instead of a
    /// value carrying the transaction number.
    #[arg(long)]
    pub fixed_update_value: bool,
    /// Transactions of the same workload run before the measured window opens (not
    /// measured), so side files are in their steady state — e.g. a WAL past its first
    /// checkpoint and reused, as in an app's database that is in use (the default: peers
    /// are measured as apps run them). 0 = Mobibench's cold start, reported as its own
    /// workload, `mobibench-cold`.
    #[arg(long, default_value_t = 200)]
    pub warmup: u64,
    /// Open loop: transactions arrive at this rate (per second, per thread) whatever
    /// the engine does, and each one's latency counts from its due time, so a stall (a
    /// checkpoint inside a commit) delays the ones queued behind it, as it delays an
    /// app's. Reported as workload `mobibench-open-<rate>tps`. Default: closed loop
    /// (each transaction starts when the one before ends).
    #[arg(long)]
    pub rate: Option<f64>,
}

#[derive(Args, Debug, Clone)]
pub struct MobibenchSqlArgs {
    /// As `mobibench`; the default contenders are every `sql-<mode>` and the stock
    /// `sqlite-<mode>` flavors (not the Android-defaults ones).
    #[command(flatten)]
    pub mobi: MobibenchArgs,
    /// Rows in the read table (id, an indexed name, a value of --value-size bytes).
    #[arg(long, default_value_t = 10_000)]
    pub read_rows: u64,
    /// Queries per read trial (each in its own autocommit statement, warm cache: the
    /// same queries run once unmeasured first). 0 = no reads.
    #[arg(long, default_value_t = 2_000)]
    pub reads: u64,
    /// Read queries, comma-separated: select-rowid, select-index, scan-1000 (default: all).
    #[arg(long, value_delimiter = ',')]
    pub read_kinds: Vec<String>,
}

#[derive(Args, Debug, Clone)]
pub struct TraceArgs {
    #[command(flatten)]
    pub lab: LabArgs,
    #[command(flatten)]
    pub out: OutputArgs,
    /// Trace files (`.sql`); those named loading* are set up before each measured one.
    pub files: Vec<PathBuf>,
    /// Synthetic app-like traces to run, by profile (app-small, app-wide), comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub synthetic: Vec<String>,
    /// Seed of the synthetic traces.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Write transactions of each synthetic trace (reads come on top, ~10 per write
    /// statement).
    #[arg(long, default_value_t = 1000)]
    pub txns: u64,
    /// Rows the synthetic traces load before the measured part (default: the profile's,
    /// 20,000).
    #[arg(long)]
    pub rows: Option<u64>,
    /// Write transactions of each measured trace run unmeasured first, with the reads
    /// among them (at most half of its write transactions), so a WAL peer is in its
    /// steady state. Per-transaction columns count the measured write transactions.
    #[arg(long, default_value_t = 200)]
    pub warmup: u64,
    /// Contenders, comma-separated: SQL ones only (default: sql-<default mode>, sql-wal,
    /// sqlite-wal-r, sqlite-wal).
    #[arg(long, value_delimiter = ',')]
    pub contenders: Vec<String>,
    /// Rounds; contenders are interleaved within each round, results are medians.
    #[arg(long, default_value_t = 3)]
    pub rounds: u32,
    /// Contender every ratio is relative to.
    #[arg(long, default_value = "sqlite-wal-r")]
    pub baseline: String,
}

#[derive(Args, Debug, Clone)]
pub struct TraceGenArgs {
    /// App profile: app-small (4 tables, 8 indexes) or app-wide (39 tables, 21 indexes).
    #[arg(long, default_value = "app-small")]
    pub profile: String,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Write transactions.
    #[arg(long, default_value_t = 1000)]
    pub txns: u64,
    /// Rows loaded by `loading-<profile>.sql` (default: the profile's, 20,000).
    #[arg(long)]
    pub rows: Option<u64>,
    /// Directory to write `loading-<profile>.sql` and `<profile>.sql` into (created if
    /// needed).
    #[arg(long)]
    pub out: PathBuf,
}

#[derive(Args, Debug, Clone)]
pub struct RecoveryArgs {
    #[command(flatten)]
    pub method: MethodArgs,
    #[command(flatten)]
    pub lab: LabArgs,
    #[command(flatten)]
    pub out: OutputArgs,
    /// Records in the interrupted insert transaction, comma-separated (crash rows).
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,16")]
    pub ops_per_txn: Vec<u32>,
    /// Records in the table before the crash or clean close, comma-separated: the size
    /// axis (1,200 records of 128 bytes ≈ 250 KiB; 1,000,000 ≈ 200 MiB). Built in
    /// transactions of 10,000 rows; the build time is reported apart, never measured.
    #[arg(
        long,
        visible_alias = "warm",
        value_delimiter = ',',
        default_value = "1200"
    )]
    pub records: Vec<u64>,
    /// Value size in bytes.
    #[arg(long, default_value_t = 128)]
    pub value_size: usize,
    /// Engine: stop at this write call of the commit (default: half of its writes).
    #[arg(long)]
    pub stop_at_write: Option<u64>,
    /// Page cache when the open is timed, comma-separated: cold (synced and dropped, as
    /// after a reboot; needs root) and/or warm (every page of the database's files
    /// resident, as when an app restarts soon after it was killed or closed).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "cold")]
    pub cache: Vec<CacheState>,
    /// Crash rows: one-row updates the child commits (spread over the table) before the
    /// insert it is killed in, so a WAL holds committed frames recovery must read, as
    /// after a crash in steady use (0: the WAL is empty when SQLite's child stops).
    #[arg(long, default_value_t = 0)]
    pub updates_before_crash: u32,
    /// What precedes the timed open, comma-separated: crash (a child killed mid-commit)
    /// and/or reopen (a clean close).
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "crash,reopen"
    )]
    pub kind: Vec<OpenKind>,
    /// Copies of every contender's table, each set built in another contender order
    /// (copy j starts with the j-th contender, as rounds rotate); round r opens copy
    /// r mod N. Where a table lies in the file system sways a cold open: with two
    /// contenders, the one built first opened up to 1.5x faster on the ext4 lab
    /// (`bench-results/ips-recovery-fig7*.txt`). 1 builds one set, in the order given.
    #[arg(long, default_value_t = 1)]
    pub build_orders: u32,
    /// Run every trial on a fresh copy of the table as built (removed after it), so each
    /// trial recovers the same file: without it trials share the table, and the update
    /// of row 1 each trial ends with (the first-write time) ages it — in IPS it moves
    /// row 1's leaf around the file, which cold opens then pay for. Copies cost a write
    /// of the table per trial: meant for small tables (the paper's Fig. 7 workload).
    #[arg(long)]
    pub fresh_copy: bool,
}

/// The page cache a recovery trial reopens with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum CacheState {
    /// Synced and dropped (root; elsewhere it stays warm and the run says so).
    Cold,
    /// Synced, and the database's files read through once so all their pages are cached.
    Warm,
}

/// What happened to the database before the timed open.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OpenKind {
    /// A child process was killed in the middle of an insert's commit.
    Crash,
    /// The database was closed cleanly.
    Reopen,
}

#[derive(Args, Debug, Clone)]
pub struct FloorArgs {
    #[command(flatten)]
    pub lab: LabArgs,
    #[command(flatten)]
    pub out: OutputArgs,
    /// Commits per round.
    #[arg(long, default_value_t = 1000)]
    pub txns: u64,
    /// Rounds.
    #[arg(long, default_value_t = 5)]
    pub rounds: u32,
}

#[derive(Args, Debug, Clone)]
pub struct AllArgs {
    #[command(flatten)]
    pub method: MethodArgs,
    #[command(flatten)]
    pub lab: LabArgs,
    /// Results folder (table.txt, results.json, plots/, index.html).
    #[arg(long, default_value = "results")]
    pub out: PathBuf,
    /// Transactions per round for mobibench and the floor.
    #[arg(long, default_value_t = 300)]
    pub txns: u64,
    /// Recovery: records in the interrupted transaction, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,16")]
    pub recovery_records: Vec<u32>,
    /// Mobibench: unmeasured transactions first, so every contender is in steady state
    /// (SQLite's WAL as apps configure it has checkpointed and reuses its file) when the
    /// measured ones start; 0 measures the cold start.
    #[arg(long, default_value_t = 200)]
    pub warmup: u64,
    /// Synthetic app-like SQL traces replayed by the SQL contenders (`bench trace
    /// --synthetic`), comma-separated; `none` for no trace section.
    #[arg(long, value_delimiter = ',', default_value = "app-small,app-wide")]
    pub traces: Vec<String>,
    /// Write transactions of each synthetic trace.
    #[arg(long, default_value_t = 1000)]
    pub trace_txns: u64,
    /// Rows each synthetic trace loads first (default: the profile's, 20,000).
    #[arg(long)]
    pub trace_rows: Option<u64>,
}

#[derive(Args, Debug, Clone)]
pub struct PagesArgs {
    /// Record sizes in bytes, comma-separated: an 8-byte integer key plus size - 8 value
    /// bytes (8 = key only).
    #[arg(long, value_delimiter = ',', default_value = "8,16,32,64,128")]
    pub sizes: Vec<usize>,
    /// Journal modes, comma-separated (default: off,dhl-cc: stock vs DHL pages). The table
    /// adds the ratio of each later mode's records per leaf to the first's.
    #[arg(long, value_delimiter = ',')]
    pub modes: Vec<String>,
    /// Key orders, comma-separated: sequential, random (default: both).
    #[arg(long, value_delimiter = ',')]
    pub orders: Vec<String>,
    /// Records inserted into each database, one per transaction.
    #[arg(long, default_value_t = 5000)]
    pub records: u64,
    /// One-row update transactions after the load (random rows, new bytes, same length);
    /// the measurement is taken after them (internal fragmentation).
    #[arg(long, default_value_t = 0)]
    pub updates: u64,
    /// Page size of the databases.
    #[arg(long, default_value_t = 4096)]
    pub page_size: u32,
    /// Seed of the random key order.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Write the results as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

#[derive(Args, Debug, Clone)]
pub struct ChildArgs {
    #[arg(long)]
    pub contender: String,
    #[arg(long)]
    pub dir: PathBuf,
    #[arg(long)]
    pub first_key: i64,
    #[arg(long)]
    pub records: u32,
    #[arg(long)]
    pub value_size: usize,
    #[arg(long, default_value_t = 0)]
    pub stop_at_write: u64,
    #[arg(long, default_value_t = 0)]
    pub stop_keep: u64,
    #[arg(long, default_value_t = 0)]
    pub pre_updates: u32,
    #[arg(long, default_value_t = 0)]
    pub table_records: u64,
    #[arg(long, default_value_t = 0)]
    pub update_seed: u64,
}

impl ChildArgs {
    pub fn spec(&self) -> ChildSpec {
        ChildSpec {
            contender: self.contender.clone(),
            dir: self.dir.clone(),
            first_key: self.first_key,
            records: self.records,
            value_size: self.value_size,
            stop_at_write: self.stop_at_write,
            stop_keep: self.stop_keep,
            pre_updates: self.pre_updates,
            table_records: self.table_records,
            update_seed: self.update_seed,
        }
    }
}

/// Run a bench command. `Err` is a one-line message for the user (exit status 1).
pub fn run(cmd: BenchCmd) -> Result<(), String> {
    match cmd {
        BenchCmd::RecoveryChild(a) => recovery::child_main(&a.spec()),
        BenchCmd::Concurrent(a) => run_concurrent(&a),
        BenchCmd::Multiprocess(a) => run_multiprocess(&a),
        BenchCmd::MultiprocessWorker(a) => multiprocess::worker_main(&a),
        BenchCmd::List => {
            for c in contender::all_contenders() {
                println!("{}", c.name);
            }
            Ok(())
        }
        BenchCmd::Mobibench(a) => {
            let (cs, params) = mobibench_setup(&a)?;
            let trials = params.trials(cs.len(), a.method.rounds);
            lab::install_interrupt_handler();
            let mut s = session(&a.lab, a.method.rounds, trials)?;
            runner::run_mobibench(&mut s, &cs, &params)?;
            output(s, &a.method.baseline, &a.out)
        }
        BenchCmd::MobibenchSql(a) => {
            let mut m = a.mobi.clone();
            if m.method.contenders.is_empty() {
                m.method.contenders = contender::all_contenders()
                    .into_iter()
                    .filter(|c| c.speaks_sql() && !c.name.starts_with("sqlite-android"))
                    .map(|c| c.name)
                    .collect();
            }
            let (cs, params) = mobibench_setup(&m)?;
            // Other contenders (the engine's own modes, for reference) run the writes;
            // the reads are SQL queries, for the contenders that answer SQL.
            let readers: Vec<_> = cs.iter().filter(|c| c.speaks_sql()).cloned().collect();
            let kinds = if a.read_kinds.is_empty() {
                sql::ReadKind::ALL.to_vec()
            } else {
                a.read_kinds
                    .iter()
                    .map(|n| sql::ReadKind::parse(n))
                    .collect::<Result<Vec<_>, _>>()?
            };
            let reads = runner::ReadParams {
                kinds,
                rows: a.read_rows,
                queries: a.reads,
                value_size: params.value_size,
                seed: params.seed,
            };
            if a.reads > 0 && a.read_rows < sql::RANGE_ROWS {
                return Err(format!(
                    "--read-rows must be at least {} (the range scan's length)",
                    sql::RANGE_ROWS
                ));
            }
            let n_read = if a.reads > 0 { readers.len() } else { 0 };
            let trials = params.trials(cs.len(), m.method.rounds)
                + (n_read * reads.kinds.len()) as u64 * u64::from(m.method.rounds);
            lab::install_interrupt_handler();
            let mut s = session(&m.lab, m.method.rounds, trials)?;
            runner::run_mobibench(&mut s, &cs, &params)?;
            if a.reads > 0 {
                runner::run_reads(&mut s, &readers, &reads)?;
            }
            output(s, &m.method.baseline, &m.out)
        }
        BenchCmd::Recovery(a) => {
            let cs = method_setup(&a.method)?;
            let mut params =
                recovery_params(&a.ops_per_txn, &a.records, a.value_size, a.stop_at_write)?;
            params.cold = dedup(a.cache.iter().map(|c| *c == CacheState::Cold));
            params.crash = a.kind.contains(&OpenKind::Crash);
            params.reopen = a.kind.contains(&OpenKind::Reopen);
            params.pre_updates = a.updates_before_crash;
            let n_rec = cs.iter().filter(|c| c.recoverable()).count();
            if a.build_orders == 0 || a.build_orders as usize > n_rec.max(1) {
                return Err(format!(
                    "--build-orders must be in 1..={} (one per contender)",
                    n_rec.max(1)
                ));
            }
            params.build_orders = a.build_orders;
            params.fresh_copy = a.fresh_copy;
            let trials = params.trials(n_rec, a.method.rounds);
            let mut lab_args = a.lab.clone();
            // The lab holds every contender's table of the largest size at once, plus the
            // engine calibration's copy of one.
            let need = params.lab_mib(n_rec);
            if need > lab_args.lab_mib && lab_args.lab != LabChoice::None {
                eprintln!("note: ext4 lab data device grown to {need} MiB for the tables");
                lab_args.lab_mib = need;
            }
            lab::install_interrupt_handler();
            let mut s = session(&lab_args, a.method.rounds, trials)?;
            runner::run_recovery(&mut s, &cs, &params)?;
            output(s, &a.method.baseline, &a.out)
        }
        BenchCmd::Floor(a) => {
            check_positive(a.txns, "--txns")?;
            check_positive(u64::from(a.rounds), "--rounds")?;
            lab::install_interrupt_handler();
            let mut s = session(&a.lab, a.rounds, 2 * u64::from(a.rounds))?;
            runner::run_floor(&mut s, a.txns)?;
            output(s, "floor", &a.out)
        }
        BenchCmd::Trace(a) => run_trace(&a),
        BenchCmd::Program(a) => program::run(&a),
        BenchCmd::TraceGen(a) => {
            let p = synth::profile(&a.profile)?.with_rows(a.rows)?;
            check_positive(a.txns, "--txns")?;
            let (load, bench) = synth::generate(&p, a.seed, a.txns);
            std::fs::create_dir_all(&a.out).map_err(|e| format!("{}: {e}", a.out.display()))?;
            for (name, text) in [
                (format!("loading-{}.sql", p.name), load),
                (format!("{}.sql", p.name), bench),
            ] {
                let f = a.out.join(name);
                std::fs::write(&f, text).map_err(|e| format!("{}: {e}", f.display()))?;
                println!("{}", f.display());
            }
            Ok(())
        }
        BenchCmd::All(a) => run_all(&a),
        BenchCmd::Mvbt(a) => mvbt::run(&a),
        BenchCmd::Nvlog(a) => nvlog::run(&a),
        BenchCmd::Pages(a) => run_pages(&a),
    }
}

fn run_trace(a: &TraceArgs) -> Result<(), String> {
    check_positive(u64::from(a.rounds), "--rounds")?;
    let mut sets = Vec::new();
    if !a.files.is_empty() {
        sets.push(trace::TraceSet::from_files(&a.files)?);
    }
    if !a.synthetic.is_empty() {
        check_positive(a.txns, "--txns")?;
        sets.extend(synth::trace_sets(&a.synthetic, a.seed, a.txns, a.rows)?);
    }
    if sets.is_empty() {
        return Err("no traces: give trace files or --synthetic PROFILE".into());
    }
    let names = if a.contenders.is_empty() {
        let sql_default = sql::contender_name(inpage::DEFAULT_JOURNAL_MODE);
        dedup(
            [
                sql_default,
                "sql-wal".into(),
                "sqlite-wal-r".into(),
                "sqlite-wal".into(),
            ]
            .into_iter(),
        )
    } else {
        a.contenders.clone()
    };
    let cs = contender::select(&names)?;
    if !cs.iter().any(|c| c.name == a.baseline) {
        return Err(format!(
            "baseline '{}' is not among the contenders",
            a.baseline
        ));
    }
    let trials = trace::trials(&sets, cs.len()) * u64::from(a.rounds);
    lab::install_interrupt_handler();
    let mut s = session(&a.lab, a.rounds, trials)?;
    trace::run_traces(&mut s, &cs, &sets, trace::TraceParams { warmup: a.warmup })?;
    output(s, &a.baseline, &a.out)
}

pub(crate) fn check_positive(v: u64, what: &str) -> Result<(), String> {
    if v == 0 {
        Err(format!("{what} must be at least 1"))
    } else {
        Ok(())
    }
}

fn method_setup(m: &MethodArgs) -> Result<Vec<Contender>, String> {
    check_positive(u64::from(m.rounds), "--rounds")?;
    let cs = contender::select(&m.contenders)?;
    if !cs.iter().any(|c| c.name == m.baseline) {
        return Err(format!(
            "baseline '{}' is not among the selected contenders ({})",
            m.baseline,
            cs.iter()
                .map(|c| c.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    Ok(cs)
}

fn mobibench_setup(a: &MobibenchArgs) -> Result<(Vec<Contender>, MobiParams), String> {
    let cs = method_setup(&a.method)?;
    let ops = if a.op.is_empty() {
        Op::ALL.to_vec()
    } else {
        let mut v = Vec::new();
        for s in &a.op {
            let o = Op::parse(s)?;
            if !v.contains(&o) {
                v.push(o);
            }
        }
        v
    };
    check_positive(a.txns, "--txns")?;
    if a.value_size == 0 || a.value_size > 1 << 20 {
        return Err("--value-size must be in 1..=1048576".into());
    }
    if a.threads == 0 || a.threads > 64 {
        return Err("--threads must be in 1..=64".into());
    }
    if let Some(r) = a.rate.filter(|r| !(r.is_finite() && *r > 0.0 && *r <= 1e6)) {
        return Err(format!(
            "--rate {r} must be a rate in (0, 1000000] per second"
        ));
    }
    Ok((
        cs,
        MobiParams {
            ops,
            ops_per_txn: parse_counts(&a.ops_per_txn, "--ops-per-txn", MAX_OPS_PER_TXN)?,
            txns: a.txns,
            value_size: a.value_size,
            random: a.random,
            threads: a.threads,
            seed: a.seed,
            fixed_update_value: a.fixed_update_value,
            warmup: a.warmup,
            rate: a.rate,
        },
    ))
}

/// Distinct values in first-seen order.
fn dedup<T: PartialEq>(it: impl Iterator<Item = T>) -> Vec<T> {
    let mut v = Vec::new();
    for x in it {
        if !v.contains(&x) {
            v.push(x);
        }
    }
    v
}

/// Largest table size accepted (records).
const MAX_TABLE_RECORDS: u64 = 100_000_000;

fn recovery_params(
    txn_records: &[u32],
    sizes: &[u64],
    value_size: usize,
    stop_at_write: Option<u64>,
) -> Result<RecoveryParams, String> {
    if sizes.is_empty() {
        return Err("--records needs at least one table size".into());
    }
    let mut sizes = dedup(sizes.iter().copied());
    if let Some(bad) = sizes.iter().find(|&&n| n == 0 || n > MAX_TABLE_RECORDS) {
        return Err(format!(
            "--records: {bad} is not in 1..={MAX_TABLE_RECORDS}"
        ));
    }
    sizes.sort_unstable();
    if value_size == 0 || value_size > 1 << 20 {
        return Err("--value-size must be in 1..=1048576".into());
    }
    if stop_at_write == Some(0) {
        return Err("--stop-at-write counts from 1".into());
    }
    Ok(RecoveryParams {
        records: parse_counts(txn_records, "--ops-per-txn", MAX_OPS_PER_TXN)?,
        sizes,
        value_size,
        stop_at_write,
        cold: vec![true],
        crash: true,
        reopen: false,
        pre_updates: 0,
        build_orders: 1,
        fresh_copy: false,
    })
}

/// Build the lab the arguments ask for.
pub fn make_lab(a: &LabArgs) -> Result<Lab, String> {
    let ext4 = |a: &LabArgs| {
        let o = Ext4Options {
            data_mib: a.lab_mib,
            base: a.dir.clone().unwrap_or_else(|| PathBuf::from("/var/tmp")),
            ..Ext4Options::default()
        };
        Ext4Lab::create(&o).map(Lab::Ext4)
    };
    match a.lab {
        LabChoice::Ext4 => ext4(a).map_err(|e| format!("ext4 lab: {e}")),
        LabChoice::None => Lab::dir(a.dir.as_deref()),
        LabChoice::Ext4Emulated => {
            let profile = device::profile(&a.device)?;
            lab::ext4_available()
                .and_then(|()| emulate::fuse_available())
                .map_err(|e| format!("ext4-emulated lab: {e}"))?;
            let o = Ext4Options {
                data_mib: a.lab_mib,
                base: a.dir.clone().unwrap_or_else(|| PathBuf::from("/var/tmp")),
                emulate: Some(emulate::EmuOptions::new(profile)),
                ..Ext4Options::default()
            };
            Ext4Lab::create(&o)
                .map(Lab::Ext4)
                .map_err(|e| format!("ext4-emulated lab: {e}"))
        }
        LabChoice::Auto => match lab::ext4_available() {
            Ok(()) => ext4(a).or_else(|e| {
                eprintln!("note: ext4 lab unavailable ({e}); using --lab none");
                Lab::dir(None)
            }),
            Err(why) => {
                eprintln!("note: ext4 lab unavailable ({why}); using --lab none");
                Lab::dir(a.dir.as_deref())
            }
        },
    }
}

pub(crate) fn session(l: &LabArgs, rounds: u32, trials: u64) -> Result<Session, String> {
    let exe = std::env::current_exe().map_err(|e| format!("current executable: {e}"))?;
    // Checked before a lab is built, so a bad name costs no loop devices.
    let profile = device::profile(&l.device)?;
    let lab = make_lab(l)?;
    if lab.name() == "none" {
        eprintln!(
            "note: lab 'none': no device counters; KiB and call counts are syscall-level \
             (engine: AccountingVfs, peers: /proc/self/io)"
        );
    }
    Ok(Session::new(lab, rounds, trials, exe).with_profile(profile))
}

/// Build the report of a finished session.
pub fn finish(s: Session, baseline: &str) -> (Report, Vec<Option<f64>>) {
    s.finish_progress();
    let (results, dev) = s.collector.finish(baseline);
    let sqlite = contender::sqlite_build().unwrap_or_else(|e| {
        eprintln!("note: cannot read SQLite's compile options: {e}");
        report::SqliteBuild::default()
    });
    (
        Report {
            lab: s.lab.name().to_string(),
            rounds: s.rounds,
            baseline: baseline.to_string(),
            device_profile: s.profile.name.to_string(),
            model_note: report::model_note(s.profile.name),
            sqlite,
            results,
            not_applicable: s.collector.not_applicable.clone(),
            notes: s.collector.notes.clone(),
        },
        dev,
    )
}

fn run_multiprocess(a: &MultiprocessArgs) -> Result<(), String> {
    let cs = contender::select(&a.contenders)?;
    if !cs.iter().any(|c| c.name == a.baseline) {
        return Err(format!(
            "--baseline {} is not among the contenders",
            a.baseline
        ));
    }
    if let Some(c) = cs.iter().find(|c| !c.shares_between_processes()) {
        return Err(format!(
            "{}: not a contender several processes can open at once",
            c.name
        ));
    }
    check_positive(a.rounds as u64, "--rounds")?;
    if a.records < 1 {
        return Err("--records must be at least 1".into());
    }
    if !(a.seconds > 0.0 && a.seconds <= 3600.0) {
        return Err(format!("--seconds {} out of (0, 3600]", a.seconds));
    }
    let layouts = a
        .layouts
        .iter()
        .map(|s| multiprocess::Layout::parse(s))
        .collect::<Result<Vec<_>, _>>()?;
    let params = multiprocess::Params {
        seconds: a.seconds,
        records: a.records,
        rounds: a.rounds,
        seed: a.seed,
    };
    lab::install_interrupt_handler();
    let lab = make_lab(&a.lab)?;
    let rows = multiprocess::run(&lab, &cs, &layouts, &params, &a.baseline);
    let lab_name = lab.name();
    drop(lab);
    let rows = rows?;
    println!(
        "lab: {lab_name}  rounds: {}  baseline: {}  records: {}  seconds per trial: {}",
        a.rounds, a.baseline, a.records, a.seconds
    );
    println!(
        "one process per writer and reader; writer: one-row UPDATE per durable transaction; reader: one-row SELECT per transaction; busy timeout {} s everywhere; sqlite-wal-r: WAL, synchronous=FULL, wal_autocheckpoint=100, journal_size_limit=524288",
        multiprocess::BUSY.as_secs()
    );
    let sqlite = contender::sqlite_build().unwrap_or_default();
    if !sqlite.version.is_empty() {
        println!(
            "sqlite {} built with LIBSQLITE3_FLAGS='{}'",
            sqlite.version, sqlite.build_flags
        );
    }
    print!("{}", multiprocess::table(&rows));
    if let Some(p) = &a.json {
        #[derive(serde::Serialize)]
        struct Doc<'a> {
            lab: &'a str,
            rounds: u32,
            seconds: f64,
            records: i64,
            baseline: &'a str,
            sqlite: report::SqliteBuild,
            results: &'a [multiprocess::MpRow],
        }
        write_json(
            &Doc {
                lab: lab_name,
                rounds: a.rounds,
                seconds: a.seconds,
                records: a.records,
                baseline: &a.baseline,
                sqlite,
                results: &rows,
            },
            p,
        )?;
    }
    Ok(())
}

fn run_concurrent(a: &ConcurrentArgs) -> Result<(), String> {
    let cs = concurrent::ConcContender::parse(&a.contenders)?;
    if !cs.iter().any(|c| c.name() == a.baseline) {
        return Err(format!(
            "--baseline {} is not among the contenders",
            a.baseline
        ));
    }
    check_positive(a.rounds as u64, "--rounds")?;
    check_positive(a.queries as u64, "--queries")?;
    if a.records < 1 {
        return Err("--records must be at least 1".into());
    }
    let mut points = Vec::new();
    for &threads in &a.threads {
        check_positive(threads as u64, "--threads")?;
        for &stmts in &a.stmts {
            check_positive(stmts as u64, "--stmts")?;
            // Transactions of several statements use the paper's fixed 85 % reads.
            let ratios: &[u32] = if stmts > 1 { &[15] } else { &a.write_ratio };
            for &write_ratio in ratios {
                if write_ratio > 100 {
                    return Err(format!("--write-ratio {write_ratio} is not a percentage"));
                }
                for &zipf_theta in &a.zipf {
                    if !(0.0..=10.0).contains(&zipf_theta) {
                        return Err(format!("--zipf {zipf_theta} out of 0..=10"));
                    }
                    points.push(concurrent::Point {
                        threads,
                        write_ratio,
                        zipf_theta,
                        stmts,
                    });
                }
            }
        }
    }
    let params = concurrent::Params {
        records: a.records,
        queries: a.queries,
        rounds: a.rounds,
        seed: a.seed,
    };
    lab::install_interrupt_handler();
    let lab = make_lab(&a.lab)?;
    let rows = concurrent::run(&lab, &cs, &points, &params, &a.baseline);
    let lab_name = lab.name();
    drop(lab);
    let rows = rows?;
    println!(
        "lab: {lab_name}  rounds: {}  baseline: {}  records: {}  statements per thread: {}",
        a.rounds, a.baseline, a.records, a.queries
    );
    println!(
        "engine contenders: ips pages (2vto-dhl: dhl-cc), Config::default() otherwise; sqlite-wal-r: WAL, synchronous=FULL, wal_autocheckpoint=100, journal_size_limit=524288, one connection per thread, busy_timeout 10 s, BEGIN IMMEDIATE for write transactions"
    );
    let sqlite = contender::sqlite_build().unwrap_or_default();
    if cs.contains(&concurrent::ConcContender::SqliteWalApps) && !sqlite.version.is_empty() {
        println!(
            "sqlite {} built with LIBSQLITE3_FLAGS='{}'",
            sqlite.version, sqlite.build_flags
        );
    }
    print!("{}", concurrent::table(&rows));
    if let Some(p) = &a.json {
        #[derive(serde::Serialize)]
        struct Doc<'a> {
            lab: &'a str,
            rounds: u32,
            baseline: &'a str,
            sqlite: report::SqliteBuild,
            results: &'a [concurrent::ConcRow],
        }
        write_json(
            &Doc {
                lab: lab_name,
                rounds: a.rounds,
                baseline: &a.baseline,
                sqlite,
                results: &rows,
            },
            p,
        )?;
    }
    Ok(())
}

pub(crate) fn write_json<T: serde::Serialize>(r: &T, path: &Path) -> Result<(), String> {
    let s = serde_json::to_string_pretty(r).map_err(|e| format!("json: {e}"))?;
    if let Some(p) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(p).map_err(|e| format!("{}: {e}", p.display()))?;
    }
    std::fs::write(path, s + "\n").map_err(|e| format!("{}: {e}", path.display()))
}

fn output(s: Session, baseline: &str, o: &OutputArgs) -> Result<(), String> {
    // The lab is released (inside `finish`'s drop of the session) before files are
    // written elsewhere, so a failing write cannot leave devices behind either way.
    let (r, dev) = finish(s, baseline);
    print!("{}", report::table(&r, &dev));
    print!("{}", report::size_table(&r));
    if let Some(p) = &o.json {
        write_json(&r, p)?;
    }
    if let Some(d) = &o.plots {
        plots::write_all(&r, d)?;
    }
    Ok(())
}

fn run_all(a: &AllArgs) -> Result<(), String> {
    let cs = method_setup(&a.method)?;
    check_positive(a.txns, "--txns")?;
    let mobi = MobiParams {
        ops: Op::ALL.to_vec(),
        ops_per_txn: vec![1],
        txns: a.txns,
        value_size: 100,
        random: false,
        threads: 1,
        seed: 1,
        fixed_update_value: false,
        warmup: a.warmup,
        rate: None,
    };
    let rec = recovery_params(&a.recovery_records, &[1200], 128, None)?;
    let rounds = a.method.rounds;
    let n_rec = cs.iter().filter(|c| c.recoverable()).count();
    let sets = if a.traces.iter().any(|t| t.eq_ignore_ascii_case("none")) {
        Vec::new()
    } else {
        check_positive(a.trace_txns, "--trace-txns")?;
        synth::trace_sets(&a.traces, 1, a.trace_txns, a.trace_rows)?
    };
    let speakers: Vec<Contender> = cs.iter().filter(|c| c.speaks_sql()).cloned().collect();
    let trials = mobi.trials(cs.len(), rounds)
        + 2 * u64::from(rounds)
        + rec.trials(n_rec, rounds)
        + trace::trials(&sets, speakers.len()) * u64::from(rounds);
    std::fs::create_dir_all(&a.out).map_err(|e| format!("{}: {e}", a.out.display()))?;
    lab::install_interrupt_handler();
    let mut s = session(&a.lab, rounds, trials)?;
    runner::run_mobibench(&mut s, &cs, &mobi)?;
    runner::run_floor(&mut s, a.txns)?;
    runner::run_recovery(&mut s, &cs, &rec)?;
    if !sets.is_empty() && !speakers.is_empty() {
        for c in cs.iter().filter(|c| !c.speaks_sql()) {
            s.collector.add_na(
                "trace",
                &c.name,
                "speaks no SQL (the traces are SQL statements)",
            );
        }
        trace::run_traces(&mut s, &speakers, &sets, trace::TraceParams { warmup: 200 })?;
    }
    let (r, dev) = finish(s, &a.method.baseline);
    let t = report::table(&r, &dev);
    print!("{t}");
    std::fs::write(a.out.join("table.txt"), &t).map_err(|e| format!("{}: {e}", a.out.display()))?;
    write_json(&r, &a.out.join("results.json"))?;
    let files = plots::write_all(&r, &a.out.join("plots"))?;
    plots::write_index(&r, &t, &files, &a.out)?;
    let h = report::headline(&r, inpage::DEFAULT_JOURNAL_MODE.name(), &a.out);
    std::fs::write(a.out.join("headline.txt"), &h)
        .map_err(|e| format!("{}: {e}", a.out.display()))?;
    print!("\n{h}");
    eprintln!("wrote {}", a.out.display());
    Ok(())
}

fn run_pages(a: &PagesArgs) -> Result<(), String> {
    let p = pages::PagesParams::new(
        &a.sizes,
        &a.modes,
        &a.orders,
        a.records,
        a.updates,
        a.page_size,
        a.seed,
    )?;
    // indicatif hides the bar by itself when stderr is not a terminal.
    let pb = indicatif::ProgressBar::new(p.runs());
    let r = pages::measure(&p, || pb.inc(1));
    pb.finish_and_clear();
    let r = r?;
    print!("{}", pages::table(&r));
    if let Some(path) = &a.json {
        write_json(&r, path)?;
    }
    Ok(())
}
