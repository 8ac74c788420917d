//! The `sql-<mode>` contenders: inpage's SQL front end (SQLite's parser, planner and VDBE
//! over inpage's trees, crate `inpage-sql`) on each engine journal mode, running the
//! very statements the `sqlite-*` contenders run; and the read queries both answer.
//!
//! Invariants:
//! - The names come from the engine's mode registry (`JournalMode::all()`), so a new
//!   mode gets its SQL row without an edit here.
//! - The SQL text, the schema and the transaction shape (`BEGIN; statements; COMMIT`)
//!   are the ones `SqliteStore` uses (`contender::SQL_*`); both sides prepare each
//!   statement once per connection and rebind it, as rusqlite's statement cache does.
//! - inpage-sql is linked with its C API renamed, so it shares this binary with the
//!   bundled stock SQLite (rusqlite) without either seeing the other's symbols.

use std::collections::HashMap;
use std::path::Path;

use inpage::JournalMode;
use inpage_sql::conn::CachedStatement;
use inpage_sql::{Connection, Value};

use crate::store::{
    ascii, es, Store, CREATION_DATE, LOAD_BATCH, SQL_DELETE, SQL_GET, SQL_INSERT, SQL_UPDATE,
};
pub use crate::store::{ReadKind, READ_INDEX, READ_RANGE, READ_ROWID};
use crate::workload::Op;

/// Prefix of the SQL contenders' names.
pub const PREFIX: &str = "sql-";

/// Contender name of the SQL front end on `mode`.
pub fn contender_name(mode: JournalMode) -> String {
    format!("{PREFIX}{}", mode.name())
}

/// The read table: rowid, an indexed name, a payload.
pub const READ_SCHEMA: &str = "CREATE TABLE IF NOT EXISTS tblRead \
    (id INTEGER PRIMARY KEY, name TEXT NOT NULL, Value TEXT NOT NULL); \
    CREATE INDEX IF NOT EXISTS tblRead_name ON tblRead(name);";
pub const READ_INSERT: &str = "INSERT INTO tblRead(id, name, Value) VALUES(?1, ?2, ?3)";
/// Rows a range scan returns.
pub const RANGE_ROWS: u64 = 1000;

/// The indexed name of row `id`: distinct per row, not in id order (a multiplicative
/// hash), so index order and rowid order differ as they do for real names.
pub fn read_name(id: i64) -> String {
    format!(
        "name-{:016x}",
        (id as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
    )
}

/// inpage's SQL on one journal mode.
pub struct SqlStore {
    conn: Connection,
    /// Prepared statements by SQL text: created lazily, reset after each use.
    cache: HashMap<&'static str, CachedStatement>,
}

impl SqlStore {
    /// Open `dir/test.db` (a new file gets `mode`) with the Mobibench table. A file that
    /// exists with another mode is an error, never silently used.
    pub fn open(dir: &Path, mode: JournalMode) -> Result<SqlStore, String> {
        SqlStore::open_inner(dir, mode, None)
    }

    /// As `open`, waiting up to `busy` for other processes from the first statement on
    /// (`PRAGMA busy_timeout` before any other), as a process that shares the file with
    /// others opens it (`bench multiprocess`).
    pub fn open_busy(
        dir: &Path,
        mode: JournalMode,
        busy: std::time::Duration,
    ) -> Result<SqlStore, String> {
        SqlStore::open_inner(dir, mode, Some(busy))
    }

    fn open_inner(
        dir: &Path,
        mode: JournalMode,
        busy: Option<std::time::Duration>,
    ) -> Result<SqlStore, String> {
        let conn = Connection::open_with_mode(dir.join("test.db"), mode.name()).map_err(es)?;
        if let Some(wait) = busy {
            conn.execute_batch(&format!("PRAGMA busy_timeout = {}", wait.as_millis()))
                .map_err(es)?;
        }
        let got = conn
            .query("PRAGMA journal_mode", &[])
            .map_err(es)?
            .into_iter()
            .next()
            .and_then(|r| r.into_iter().next());
        if got != Some(Value::Text(mode.name().to_string())) {
            return Err(format!("journal_mode is {got:?}, want {}", mode.name()));
        }
        // As SqliteStore: synchronous=FULL (inpage's commits are durable whatever it says;
        // the PRAGMA is accepted for the same statement stream).
        conn.execute_batch(
            "PRAGMA synchronous = FULL; \
             CREATE TABLE IF NOT EXISTS tblMyList \
             (id INTEGER PRIMARY KEY, Value TEXT NOT NULL, creation_date long);",
        )
        .map_err(es)?;
        Ok(SqlStore {
            conn,
            cache: HashMap::new(),
        })
    }

    fn run(&mut self, sql: &'static str, params: &[Value]) -> Result<u64, String> {
        let st = match self.cache.entry(sql) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(self.conn.prepare_cached(sql).map_err(es)?)
            }
        };
        st.run(params).map_err(es)
    }

    fn apply(&mut self, op: Op, keys: &[i64], value: &str) -> Result<(), String> {
        for &k in keys {
            match op {
                Op::Insert => self.run(
                    SQL_INSERT,
                    &[
                        Value::Integer(k),
                        Value::Text(value.to_string()),
                        Value::Integer(CREATION_DATE),
                    ],
                )?,
                Op::Update => {
                    self.run(SQL_UPDATE, &[Value::Integer(k), Value::Text(value.into())])?
                }
                Op::Delete => self.run(SQL_DELETE, &[Value::Integer(k)])?,
            };
        }
        Ok(())
    }
}

impl Store for SqlStore {
    fn preload(&mut self, keys: &[i64], value: &[u8]) -> Result<(), String> {
        for chunk in keys.chunks(LOAD_BATCH) {
            self.txn(Op::Insert, chunk, value)?;
        }
        Ok(())
    }

    fn txn(&mut self, op: Op, keys: &[i64], value: &[u8]) -> Result<(), String> {
        let v = ascii(value)?;
        self.conn.execute_batch("BEGIN").map_err(es)?;
        if let Err(e) = self.apply(op, keys, v) {
            let _ = self.conn.execute_batch("ROLLBACK");
            return Err(e);
        }
        self.conn.execute_batch("COMMIT").map_err(es)
    }

    fn get(&mut self, key: i64) -> Result<bool, String> {
        Ok(self.run(SQL_GET, &[Value::Integer(key)])? > 0)
    }

    fn stage_crash(&mut self, keys: &[i64], value: &[u8], stop: &dyn Fn()) -> Result<(), String> {
        let v = ascii(value)?;
        self.conn.execute_batch("BEGIN").map_err(es)?;
        self.apply(Op::Insert, keys, v)?;
        stop();
        Ok(())
    }

    fn reads_setup(&mut self, rows: u64, value: &[u8]) -> Result<(), String> {
        let v = ascii(value)?;
        self.conn.execute_batch(READ_SCHEMA).map_err(es)?;
        let ids: Vec<i64> = (1..=rows as i64).collect();
        for chunk in ids.chunks(LOAD_BATCH) {
            self.conn.execute_batch("BEGIN").map_err(es)?;
            for &id in chunk {
                self.run(
                    READ_INSERT,
                    &[
                        Value::Integer(id),
                        Value::Text(read_name(id)),
                        Value::Text(v.to_string()),
                    ],
                )?;
            }
            self.conn.execute_batch("COMMIT").map_err(es)?;
        }
        Ok(())
    }

    fn read(&mut self, kind: ReadKind, id: i64) -> Result<u64, String> {
        let arg = match kind {
            ReadKind::Index => Value::Text(read_name(id)),
            ReadKind::Rowid | ReadKind::Range => Value::Integer(id),
        };
        self.run(kind.sql(), &[arg])
    }

    fn exec(&mut self, sql: &str) -> Result<(u64, u64), String> {
        // Prepared, run and finalized: a trace's statements carry their values as text.
        let rows = self
            .conn
            .prepare_cached(sql)
            .map_err(es)?
            .run(&[])
            .map_err(es)?;
        Ok((rows, self.conn.changes().max(0) as u64))
    }

    fn close(mut self: Box<Self>) -> Result<(), String> {
        self.cache.clear(); // finalize before the connection closes
        Ok(())
    }
}
