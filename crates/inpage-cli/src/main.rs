//! The `inpage` command line.
//!
//! Every subcommand opens the database with `create` off, so a mistyped path is an error
//! rather than a new empty database, and reports problems as one clear line on stderr
//! with a non-zero exit code.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use inpage::check::{census, check};
use inpage::{Config, Database, ReadableTxn};

#[derive(Parser)]
#[command(
    name = "inpage",
    version,
    about = "inpage: an embedded transactional database engine for flash storage"
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
    /// Full integrity check; exits 1 with a precise message on the first problem.
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
    /// Exit 0 only if FILE passes the integrity check and holds the state after commit
    /// `--acked` or the next one of the same workload.
    Verify(inpage_torture::VerifyArgs),
}

fn open(file: &PathBuf) -> Result<Database, String> {
    Database::open(file, Config::default().create(false)).map_err(|e| e.to_string())
}

fn inspect(file: &PathBuf) -> Result<(), String> {
    let db = open(file)?;
    let h = db.header();
    let rec = db.recovery_report();
    println!("file            {}", file.display());
    println!("journal mode    {}", h.journal_mode);
    println!("page size       {}", h.page_size);
    println!("fcc             {}", h.fcc);
    println!("last txn pages  {}", h.last_txn_size);
    println!("page count      {}", h.page_count);
    println!(
        "free pages      {} (head {})",
        h.freelist_count, h.freelist_head
    );
    println!("catalog root    {}", h.catalog_root);
    println!("meta            {:?}", h.meta);
    println!("log frames      {}", db.log_frames());
    println!(
        "page writes     {}",
        if db.direct_writes() {
            "O_DIRECT (changed sectors)"
        } else {
            "through the page cache"
        }
    );
    if *rec != inpage::RecoveryReport::default() {
        println!("recovery        {rec:?}");
    }
    let r = db.begin_read().map_err(|e| e.to_string())?;
    let trees = r.list_trees().map_err(|e| e.to_string())?;
    println!("trees           {}", trees.len());
    for t in &trees {
        let entries = if t.custom_comparator {
            "? (custom comparator)".to_string()
        } else {
            match r.open_tree(&t.name).and_then(|tr| r.count(&tr)) {
                Ok(n) => n.to_string(),
                Err(e) => format!("error: {e}"),
            }
        };
        println!(
            "  {:<20} {:<8} root {:<6} entries {entries}",
            t.name,
            t.kind.name(),
            t.root
        );
    }
    let c = census(&r);
    println!("pages by type");
    for (ty, n) in &c.by_type {
        println!("  {ty:<10} {n}");
    }
    for (pgno, why) in &c.unreadable {
        println!("  unreadable page {pgno}: {why}");
    }
    Ok(())
}

fn inspect_page(file: &PathBuf, pgno: u32) -> Result<(), String> {
    use std::os::unix::fs::FileExt;
    let db = open(file)?;
    let h = db.header();
    if pgno >= h.page_count {
        return Err(format!(
            "page {pgno} is past the end of the database ({} pages)",
            h.page_count
        ));
    }
    let ps = h.page_size as usize;
    let mut buf = vec![0u8; ps];
    std::fs::File::open(file)
        .and_then(|f| f.read_exact_at(&mut buf, pgno as u64 * ps as u64))
        .map_err(|e| format!("{}: {e}", file.display()))?;
    let usable = ps - inpage::page::PAGE_TRAILER;
    println!(
        "page {pgno} of {} ({} mode, FCC {})",
        file.display(),
        h.journal_mode,
        h.fcc
    );
    let dhl = h.journal_mode.layout() == inpage::page::Layout::Dhl;
    if pgno == 0 {
        let slots = if dhl {
            inpage::pager::header::DHL_SLOTS
        } else {
            1
        };
        for slot in 0..slots {
            match inpage::pager::header::decode_slot(&buf, slot) {
                Ok(s) => println!(
                    "  header slot {slot}: fcc {} txn_size {} pages {} catalog root {}",
                    s.fcc, s.last_txn_size, s.page_count, s.catalog_root
                ),
                Err(e) => println!("  header slot {slot}: invalid ({e})"),
            }
        }
        return Ok(());
    }
    if !dhl {
        println!(
            "  type {} ({})",
            buf[0],
            inpage::page::page_type::name(buf[0])
        );
        return Ok(());
    }
    for (slot, d) in inpage::page::dhl::page_versions(&buf, usable)
        .iter()
        .enumerate()
    {
        match d {
            None => println!("  slot header {slot}: empty (tid 0)"),
            Some(d) => println!(
                "  slot header {slot}: tid {} txn_size {} {}{}",
                d.tid,
                d.txn_size,
                if d.valid { "valid" } else { "INVALID" },
                if d.valid && d.tid <= h.fcc {
                    ", committed"
                } else {
                    ""
                }
            ),
        }
    }
    match inpage::page::dhl::visible(pgno, &buf, usable, h.fcc) {
        Ok(v) => println!(
            "  visible: slot {} tid {} {} with {} cells",
            v.slot(),
            v.tid(),
            if v.is_leaf() { "leaf" } else { "interior" },
            v.ncells()
        ),
        Err(e) => match inpage::page::dhl::open_overflow(pgno, &buf, usable) {
            Ok(o) => println!("  overflow page: tid {} next {} ", o.tid, o.next),
            Err(_) => println!("  no visible version: {e}"),
        },
    }
    Ok(())
}

fn run_check(file: &PathBuf) -> Result<(), String> {
    let db = open(file)?;
    let r = db.begin_read().map_err(|e| e.to_string())?;
    let rep = check(&r, &HashMap::new()).map_err(|e| e.to_string())?;
    let entries: u64 = rep.trees.iter().map(|(_, s)| s.entries).sum();
    println!(
        "ok: {} pages, {} free, {} trees, {} entries, fcc {}",
        rep.page_count,
        rep.free_pages,
        rep.trees.len(),
        entries,
        rep.fcc
    );
    Ok(())
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
        Cmd::Bench { cmd } => inpage_bench::run(cmd),
        Cmd::Torture(args) => match inpage_torture::torture(&args) {
            Ok(true) => Ok(()),
            Ok(false) => return ExitCode::FAILURE,
            Err(e) => Err(e),
        },
        Cmd::Workload(args) => inpage_torture::workload(&args),
        Cmd::Verify(args) => inpage_torture::verify(&args),
    };
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("inpage: {e}");
            ExitCode::FAILURE
        }
    }
}
