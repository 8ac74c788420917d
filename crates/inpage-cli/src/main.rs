//! The `inpage` command line.
//!
//! Every subcommand opens the database with `create` off, so a mistyped path is an error
//! rather than a new empty database, and reports problems as one clear line on stderr
//! with a non-zero exit code.
//!
//! `inspect` and `check` never write: they open the database read-only
//! (`Database::open_read_only`: O_RDONLY, no lock, recovery run on an in-memory copy), so
//! they may look at a damaged database, or one in use, and report what recovery *would*
//! do without doing it. A database in use is looked at through a copy of one instant of
//! its files (`look`), and damage seen only in reads that mixed two commits is never
//! reported. Their output goes through `Out`, which turns a closed pipe
//! (`inpage inspect | head`) into a quiet exit instead of a panic.

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

mod sql_shell;

use clap::{Parser, Subcommand};
use inpage::check::{census, check};
use inpage::{Config, Database, ReadableTxn};

#[derive(Parser)]
#[command(
    name = "inpage",
    version,
    about = "inpage: an embedded transactional database engine for flash storage",
    after_help = modes_help()
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Show the header, trees and page usage of a database file.
    Inspect {
        /// Database file.
        file: PathBuf,
        /// Show one page instead: its type and, for DHL pages, both slot headers
        /// (descriptors) with their tid, txn_size and validity.
        #[arg(long)]
        page: Option<u32>,
    },
    /// Full integrity check; exits 1 with a precise message on the first problem. May be
    /// run beside a process writing the database: it checks copies of its files and
    /// reports damage only if copies of one instant show it, never a torn read.
    Check {
        /// Database file.
        file: PathBuf,
    },
    /// The lab: Mobibench, recovery and floor workloads against SQLite, redb and LMDB.
    Bench {
        #[command(subcommand)]
        cmd: inpage_bench::BenchCmd,
    },
    /// Simulated power cuts and I/O errors checked against a model; exits 1 on a violation
    /// in a mode that promises atomicity.
    Torture(inpage_torture::TortureArgs),
    /// Deterministic workload on a real file, printing `commit <i>` after each ack (for
    /// process-kill tests and external checkers).
    Workload(inpage_torture::WorkloadArgs),
    /// SQL on a database file through SQLite's own front end on inpage: statements from
    /// the arguments or stdin, `.tables`, `.schema [TABLE]`, `.dump` (so
    /// `sqlite3 app.db .dump | inpage sql new.db` migrates a stock database, and
    /// `inpage sql new.db .dump | sqlite3 back.db` goes back). Creates FILE if missing.
    Sql {
        /// Database file (`:memory:` for a private in-memory one).
        file: PathBuf,
        /// SQL statements or dot commands, run in order; none: read stdin.
        sql: Vec<String>,
        /// Journal mode of a new file (an inpage mode such as dhl-cc, wal, delete);
        /// an existing file keeps its own. Default: dhl-cc.
        #[arg(long)]
        journal_mode: Option<String>,
    },
    /// Exit 0 only if FILE passes the integrity check and holds the state after commit
    /// `--acked` or the next one of the same workload.
    Verify(inpage_torture::VerifyArgs),
}

/// Why a command stopped: an error to report, or stdout closed by its reader.
enum Stop {
    Error(String),
    /// Writing to stdout failed with EPIPE: the reader (e.g. `head`) has all it wants.
    ClosedPipe,
}

impl From<String> for Stop {
    fn from(e: String) -> Stop {
        Stop::Error(e)
    }
}

/// Standard output for `inspect` and `check`: write errors become `Stop`, never a panic.
struct Out(std::io::StdoutLock<'static>);

impl Out {
    fn new() -> Out {
        Out(std::io::stdout().lock())
    }

    fn line(&mut self, args: std::fmt::Arguments<'_>) -> Result<(), Stop> {
        writeln!(self.0, "{args}").map_err(write_error)
    }

    fn flush(&mut self) -> Result<(), Stop> {
        self.0.flush().map_err(write_error)
    }
}

fn write_error(e: std::io::Error) -> Stop {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        Stop::ClosedPipe
    } else {
        Stop::Error(format!("writing to stdout: {e}"))
    }
}

/// `out!(o, "fmt", args..)`: one line to `Out`, `?` on a closed pipe.
macro_rules! out {
    ($o:expr, $($arg:tt)*) => {
        $o.line(format_args!($($arg)*))?
    };
}

/// Open for `inspect` / `check`: read-only, nothing is ever written (module docs).
/// The journal modes, for `--help`: from `JournalMode::ALL`, so a new mode is listed
/// without editing this file.
fn modes_help() -> String {
    let names: Vec<&str> = inpage::JournalMode::ALL.iter().map(|m| m.name()).collect();
    let no_atomicity: Vec<&str> = inpage::JournalMode::ALL
        .iter()
        .filter(|m| !m.promises_atomicity())
        .map(|m| m.name())
        .collect();
    format!(
        "Journal modes: {} (default {}; {} promise no atomicity).",
        names.join(", "),
        inpage::DEFAULT_JOURNAL_MODE,
        no_atomicity.join(" and ")
    )
}

fn open_read_only(file: &PathBuf) -> Result<Database, String> {
    Database::open_read_only(file, Config::default()).map_err(|e| e.to_string())
}

/// Files up to this size (the database) are looked at through copies in memory.
const SNAPSHOT_MAX_BYTES: u64 = 1 << 30;
/// How long `look` keeps copying a database whose copies fail while it changes.
const SNAPSHOT_PATIENCE: std::time::Duration = std::time::Duration::from_secs(10);
/// How many copies of one instant must fail before `look` reports the failure: a mode
/// without atomicity (`off`) may show a half-written commit even then, and a commit in
/// progress does not stay in progress, while a damaged file fails every time.
const FAILED_INSTANTS: u32 = 3;

/// One copy of the database's files, opened (`copy_once`).
struct Copied {
    opened: inpage::Result<Database>,
    /// Whether the copy is one instant of the files (else it may mix two commits).
    one_instant: bool,
    /// The paths the open read: (files, regions).
    paths: (Vec<PathBuf>, Vec<PathBuf>),
}

/// Copy the database's files into memory (`vfs::SnapshotVfs`) and open the copy
/// read-only. `known` (the paths an earlier copy's open read) are copied up front, all at
/// once, and read again at once, so the copy is one instant however long the open takes;
/// paths the open reads beyond them are checked with a second read afterwards.
fn copy_once(file: &PathBuf, known: &(Vec<PathBuf>, Vec<PathBuf>)) -> Result<Copied, String> {
    let io = |e: std::io::Error| format!("{}: {e}", file.display());
    let base = Config::default();
    let snap = std::sync::Arc::new(inpage::vfs::SnapshotVfs::new(base.vfs.clone()));
    let steady = snap.capture(&known.0, &known.1).map_err(io)?;
    let opened = Database::open_read_only(file, base.vfs(snap.clone()));
    let paths = snap.paths();
    let one_instant = steady && (paths == *known || snap.unchanged().map_err(io)?);
    Ok(Copied {
        opened,
        one_instant,
        paths,
    })
}

/// Open the database read-only and run `look_at` on it, beside a process that may be
/// writing it, never reporting damage that a torn read made up (`check`, `inspect`).
///
/// Each attempt reads a copy of the files (`copy_once`). A copy that opens and passes
/// `look_at` is the answer: what it shows is a consistent database. A failure counts
/// only on a copy of one instant, a state a crash of the writer at that instant would
/// leave, which recovery must handle, and only once `FAILED_INSTANTS` such copies
/// failed; a failure on a copy taken while the files changed may be the copy's own
/// making (a header of one commit, a page of the next) and is thrown away. If nothing
/// conclusive turns up within `SNAPSHOT_PATIENCE`, that is the error, and it says so.
/// Returns the handle, `look_at`'s value and how many copies were thrown away.
///
/// A database over `SNAPSHOT_MAX_BYTES` is read in place (a copy would need as much
/// memory): then the result is only trustworthy while no process writes it.
fn look<T>(
    file: &PathBuf,
    look_at: impl Fn(&Database) -> Result<T, String>,
) -> Result<(Database, T, u32), Stop> {
    let len = std::fs::metadata(file).map(|m| m.len()).unwrap_or(0);
    if len > SNAPSHOT_MAX_BYTES {
        let db = open_read_only(file)?;
        let t = look_at(&db)?;
        return Ok((db, t, 0));
    }
    let started = std::time::Instant::now();
    let mut known = Default::default();
    let (mut torn, mut failed) = (0u32, 0u32);
    loop {
        let c = copy_once(file, &known)?;
        known = c.paths;
        let err = match c.opened {
            Ok(db) => match look_at(&db) {
                Ok(t) => return Ok((db, t, torn)),
                Err(e) => e,
            },
            Err(e) => e.to_string(),
        };
        if c.one_instant {
            failed += 1;
            if failed >= FAILED_INSTANTS {
                return Err(Stop::Error(err));
            }
        } else {
            torn += 1;
            if started.elapsed() >= SNAPSHOT_PATIENCE {
                return Err(Stop::Error(format!(
                    "{}: nothing conclusive: another process kept writing the database, and \
                     each of {torn} copies taken while it changed failed (the last: {err}); \
                     run the check again, or when the writer is idle",
                    file.display()
                )));
            }
        }
        // Back off a little, so that a writer's quiet moment is met.
        std::thread::sleep(std::time::Duration::from_millis(if c.one_instant {
            20
        } else {
            u64::from(torn.min(5))
        }));
    }
}

/// "recovery would ..." lines for a read-only handle, with the files it would change.
fn recovery_lines(db: &Database) -> Vec<String> {
    let actions = db.recovery_report().actions();
    if actions.is_empty() {
        return Vec::new();
    }
    let mut v: Vec<String> = actions
        .iter()
        .map(|a| format!("recovery would {a}"))
        .collect();
    let files: Vec<String> = db
        .changed_by_recovery()
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    if !files.is_empty() {
        v.push(format!(
            "  (not done: this command is read-only; opening the database for writing would change {})",
            files.join(", ")
        ));
    }
    v
}

fn inspect(file: &PathBuf) -> Result<(), Stop> {
    let (db, (), _) = look(file, |_| Ok(()))?;
    let mut o = Out::new();
    let h = db.header();
    let mode = db.journal_mode();
    out!(o, "file            {}", file.display());
    out!(o, "journal mode    {}", mode);
    out!(o, "  (what it is)  {}", mode.summary());
    let caps = mode.capabilities();
    out!(
        o,
        "  (promises)    {}",
        match (caps.atomic, caps.durable_at_ack, caps.survives_process_crash) {
            _ if caps.region_backed =>
                "atomic; an acknowledged commit survives a process kill always (it is in the memory-mapped region), and a power cut only if the region is on persistent memory (a DAX mount); the default region under /dev/shm is lost with the machine, and then a prefix of the commits survives, through the last flush",
            (false, _, _) => "no atomicity: a crash may leave a half-written transaction",
            (true, true, _) => "atomic; an acknowledged commit survives a process kill and a power cut",
            (true, false, true) =>
                "atomic; an acknowledged commit survives a process kill, but a power cut may lose the newest ones (a prefix survives)",
            (true, false, false) =>
                "atomic; even a process kill may lose the newest acknowledged commits (they wait in memory; a prefix survives)",
        }
    );
    if caps.region_backed {
        let region = db.config().journal.nvlog_region_for(file);
        out!(
            o,
            "nvlog region    {} ({}; survives a process crash, and power loss only on persistent memory)",
            region.display(),
            if region.starts_with("/dev/shm") {
                "the default, under /dev/shm: lost at power loss or reboot"
            } else {
                "named by the user"
            }
        );
        if let Some(t) = db.durable_tid() {
            out!(o, "durable tid     {t} (in the file without the region)");
        }
    }
    out!(o, "page size       {}", h.page_size);
    out!(o, "fcc             {}", h.fcc);
    out!(o, "last txn pages  {}", h.last_txn_size);
    out!(o, "page count      {}", h.page_count);
    out!(
        o,
        "free pages      {} (head {})",
        h.freelist_count,
        h.freelist_head
    );
    out!(o, "catalog root    {}", h.catalog_root);
    out!(
        o,
        "auto_vacuum     {}",
        match h.auto_vacuum {
            inpage::AutoVacuum::None => "none (free pages stay in the file until VACUUM)",
            inpage::AutoVacuum::Full => "full (every commit gives free pages back)",
            inpage::AutoVacuum::Incremental =>
                "incremental (free pages go back when asked: PRAGMA incremental_vacuum)",
        }
    );
    out!(o, "meta            {:?}", h.meta);
    out!(o, "log frames      {}", db.log_frames());
    // A read-only open never uses O_DIRECT; say what a read-write open of this mode does.
    out!(
        o,
        "page writes     {}",
        if mode.capabilities().direct_writes {
            "O_DIRECT where the file system accepts it, else through the page cache (the same format either way)"
        } else {
            "through the page cache"
        }
    );
    let tail = mode.reserved_tail();
    if tail > 0 {
        out!(
            o,
            "reserved tail   {tail} bytes before each page's trailer (zero in the file; the log's frame header)"
        );
    }
    for line in recovery_lines(&db) {
        out!(o, "{line}");
    }
    let r = db.begin_read().map_err(|e| e.to_string())?;
    let trees = r.list_trees().map_err(|e| e.to_string())?;
    out!(o, "trees           {}", trees.len());
    for t in &trees {
        let entries = if t.custom_comparator {
            "? (custom comparator)".to_string()
        } else if t.external_order {
            "? (probe-ordered)".to_string()
        } else {
            match r.open_tree(&t.name).and_then(|tr| r.count(&tr)) {
                Ok(n) => n.to_string(),
                Err(e) => format!("error: {e}"),
            }
        };
        out!(
            o,
            "  {:<20} {:<8} root {:<6} entries {entries}",
            t.name,
            t.kind.name(),
            t.root
        );
    }
    let c = census(&r);
    out!(o, "pages by type");
    for (ty, n) in &c.by_type {
        out!(o, "  {ty:<10} {n}");
    }
    for (pgno, why) in &c.unreadable {
        out!(o, "  unreadable page {pgno}: {why}");
    }
    o.flush()
}

fn inspect_page(file: &PathBuf, pgno: u32) -> Result<(), Stop> {
    use std::os::unix::fs::FileExt;
    let db = open_read_only(file)?;
    let mut o = Out::new();
    let h = db.header();
    let mode = db.journal_mode();
    if pgno >= h.page_count {
        return Err(Stop::Error(format!(
            "page {pgno} is past the end of the database ({} pages)",
            h.page_count
        )));
    }
    let ps = h.page_size as usize;
    let mut buf = vec![0u8; ps];
    std::fs::File::open(file)
        .and_then(|f| f.read_exact_at(&mut buf, pgno as u64 * ps as u64))
        .map_err(|e| format!("{}: {e}", file.display()))?;
    out!(
        o,
        "page {pgno} of {} ({} mode, {} layout, FCC {})",
        file.display(),
        mode,
        mode.layout_name(),
        h.fcc
    );
    for line in inpage::inspect::describe_page(mode, pgno, &buf, h.fcc) {
        out!(o, "  {line}");
    }
    o.flush()
}

fn run_check(file: &PathBuf) -> Result<(), Stop> {
    let (db, rep, discarded) = look(file, |db| {
        let r = db.begin_read().map_err(|e| e.to_string())?;
        check(&r, &HashMap::new()).map_err(|e| e.to_string())
    })?;
    let mut o = Out::new();
    let entries: u64 = rep.trees.iter().map(|(_, s)| s.entries).sum();
    out!(
        o,
        "ok: {} pages, {} free, {} trees, {} entries, fcc {}",
        rep.page_count,
        rep.free_pages,
        rep.trees.len(),
        entries,
        rep.fcc
    );
    for line in recovery_lines(&db) {
        out!(o, "{line}");
    }
    if discarded > 0 {
        out!(
            o,
            "(another process was writing: {discarded} copies of the files taken while they changed were set aside)"
        );
    }
    o.flush()
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let res = match cli.cmd {
        Cmd::Inspect { file, page: None } => inspect(&file),
        Cmd::Inspect {
            file,
            page: Some(p),
        } => inspect_page(&file, p),
        Cmd::Check { file } => run_check(&file),
        other => match run_other(other) {
            Ok(true) => Ok(()),
            // The report already names the violations: exit 1 without another line.
            Ok(false) => return ExitCode::FAILURE,
            Err(e) => Err(Stop::Error(e)),
        },
    };
    match res {
        Ok(()) => ExitCode::SUCCESS,
        // The reader stopped reading: nothing left to say, and no one to say it to.
        Err(Stop::ClosedPipe) => ExitCode::SUCCESS,
        Err(Stop::Error(e)) => {
            eprintln!("inpage: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The subcommands whose output their own crates print; `Ok(false)`: failed, and the
/// command has said why.
fn run_other(cmd: Cmd) -> Result<bool, String> {
    let done = |r: Result<(), String>| r.map(|()| true);
    match cmd {
        Cmd::Inspect { .. } | Cmd::Check { .. } => {
            Err("internal: inspect/check are run by main".into())
        }
        Cmd::Bench { cmd } => done(inpage_bench::run(cmd)),
        Cmd::Torture(args) => inpage_torture::torture(&args),
        Cmd::Workload(args) => done(inpage_torture::workload(&args)),
        Cmd::Verify(args) => done(inpage_torture::verify(&args)),
        Cmd::Sql {
            file,
            sql,
            journal_mode,
        } => {
            let stdout = std::io::stdout();
            let mut out = std::io::BufWriter::new(stdout.lock());
            sql_shell::run(&file, journal_mode.as_deref(), &sql, &mut out)
        }
    }
}
