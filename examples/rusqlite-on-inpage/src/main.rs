//! An unmodified rusqlite program: opens the database named on the command line, writes
//! in a transaction with a savepoint, reads back through an index, and prints what
//! SQLite reports. Run on inpage's libsqlite3.so it prints `journal_mode=dhl-cc`.
use rusqlite::{params, Connection};

fn main() -> rusqlite::Result<()> {
    let path = std::env::args().nth(1).expect("usage: rusqlite-on-inpage DB");
    let mut conn = Connection::open(path)?;
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS kv(k INTEGER PRIMARY KEY, v TEXT NOT NULL);
         CREATE INDEX IF NOT EXISTS kv_v ON kv(v);",
    )?;
    let mut tx = conn.transaction()?;
    for k in 1..=100i64 {
        tx.execute("INSERT OR REPLACE INTO kv VALUES(?1, ?2)", params![k, format!("v{k:03}")])?;
    }
    {
        let mut sp = tx.savepoint()?;
        sp.execute("DELETE FROM kv WHERE k > 50", [])?;
        sp.rollback()?; // the 50 rows stay
    }
    tx.commit()?;
    let n: i64 = conn.query_row("SELECT count(*) FROM kv", [], |r| r.get(0))?;
    let v: String = conn.query_row("SELECT v FROM kv WHERE v = 'v042'", [], |r| r.get(0))?;
    let mode: String = conn.query_row("PRAGMA journal_mode", [], |r| r.get(0))?;
    let check: String = conn.query_row("PRAGMA integrity_check", [], |r| r.get(0))?;
    println!("rows={n} found={v} journal_mode={mode} integrity={check} sqlite={}", rusqlite::version());
    Ok(())
}
