//! What the bench asks of every contender: the [`Store`] trait, and the statements and
//! helpers the SQL contenders share.
//!
//! Invariants: this module names no contender (`contender` lists them, `sql` is one of
//! them), so both can use it without a cycle (`inpage/tests/layers.rs`).

use crate::workload::Op;

/// Rows written per transaction while preloading or warming a table (not measured).
pub(crate) const LOAD_BATCH: usize = 1000;

pub(crate) const SQL_INSERT: &str =
    "INSERT INTO tblMyList(id, Value, creation_date) VALUES(?1, ?2, ?3)";
pub(crate) const SQL_UPDATE: &str = "UPDATE tblMyList SET Value = ?2 WHERE id = ?1";
pub(crate) const SQL_DELETE: &str = "DELETE FROM tblMyList WHERE id = ?1";
pub(crate) const SQL_GET: &str = "SELECT 1 FROM tblMyList WHERE id = ?1";
/// A fixed creation date, so every row has the same size in every run.
pub(crate) const CREATION_DATE: i64 = 1_700_000_000;

/// Point SELECT by rowid.
pub const READ_ROWID: &str = "SELECT Value FROM tblRead WHERE id = ?1";
/// Point SELECT through the index.
pub const READ_INDEX: &str = "SELECT id, Value FROM tblRead WHERE name = ?1";
/// A range scan of `RANGE_ROWS` rows by rowid.
pub const READ_RANGE: &str = "SELECT id, Value FROM tblRead WHERE id >= ?1 AND id < ?1 + 1000";

/// Which read query.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadKind {
    Rowid,
    Index,
    Range,
}

impl ReadKind {
    pub const ALL: [ReadKind; 3] = [ReadKind::Rowid, ReadKind::Index, ReadKind::Range];
    pub fn name(self) -> &'static str {
        match self {
            ReadKind::Rowid => "select-rowid",
            ReadKind::Index => "select-index",
            ReadKind::Range => "scan-1000",
        }
    }
    pub fn parse(n: &str) -> Result<ReadKind, String> {
        ReadKind::ALL
            .into_iter()
            .find(|k| k.name().eq_ignore_ascii_case(n.trim()))
            .ok_or_else(|| {
                let names: Vec<_> = ReadKind::ALL.iter().map(|k| k.name()).collect();
                format!("unknown read query '{n}' (valid: {})", names.join(", "))
            })
    }
    pub fn sql(self) -> &'static str {
        match self {
            ReadKind::Rowid => READ_ROWID,
            ReadKind::Index => READ_INDEX,
            ReadKind::Range => READ_RANGE,
        }
    }
}

/// One open store.
pub trait Store: Send {
    /// Insert `keys` with `value` in transactions of up to `LOAD_BATCH` rows (setup; the
    /// floor zero-fills its file instead).
    fn preload(&mut self, keys: &[i64], value: &[u8]) -> Result<(), String>;
    /// One durable transaction applying `op` to every key in `keys`.
    fn txn(&mut self, op: Op, keys: &[i64], value: &[u8]) -> Result<(), String>;
    /// Point read; `Ok(true)` if the key exists (recovery's "first access").
    fn get(&mut self, key: i64) -> Result<bool, String>;
    /// Start a transaction inserting `keys` and leave it uncommitted, then call `stop`,
    /// which is expected not to return (the recovery child blocks there until killed).
    /// Engine stores do not use this: their child stops inside the commit's page writes.
    fn stage_crash(&mut self, keys: &[i64], value: &[u8], stop: &dyn Fn()) -> Result<(), String>;
    /// SQL stores: create and fill the read table (`sql::READ_SCHEMA`) with `rows` rows.
    fn reads_setup(&mut self, _rows: u64, _value: &[u8]) -> Result<(), String> {
        Err("not an SQL store: no read queries".into())
    }
    /// SQL stores: run read query `kind` for row `id` (autocommit), reading every column
    /// of every row; the number of rows.
    fn read(&mut self, _kind: ReadKind, _id: i64) -> Result<u64, String> {
        Err("not an SQL store: no read queries".into())
    }
    /// SQL stores: run one statement of a trace (`bench trace`), reading every column of
    /// every row it returns; the rows returned, and `sqlite3_changes()` after it.
    fn exec(&mut self, _sql: &str) -> Result<(u64, u64), String> {
        Err("not an SQL store: no SQL statements".into())
    }
    /// One durable transaction applying each `(op, key)` in order (`bench mvbt --pair`:
    /// an insert and a delete in one commit). Stores without it refuse a mixed list.
    fn txn_ops(&mut self, ops: &[(Op, i64)], value: &[u8]) -> Result<(), String> {
        match ops.first() {
            Some(&(op, _)) if ops.iter().all(|&(o, _)| o == op) => {
                let keys: Vec<i64> = ops.iter().map(|&(_, k)| k).collect();
                self.txn(op, &keys, value)
            }
            Some(_) => Err("this store has no mixed-operation transaction".into()),
            None => Ok(()),
        }
    }
    /// Frames in the write-ahead log (`None`: no log, or one this store cannot see).
    fn log_frames(&self) -> Option<u64> {
        None
    }
    /// What the last `txn` / `txn_ops` commit did to the write-ahead log (`None`: no log
    /// this store can see).
    fn last_commit(&self) -> Option<WalCommit> {
        None
    }
    /// Move a write-ahead log into the database file (no-op without one).
    fn checkpoint(&mut self) -> Result<(), String> {
        Ok(())
    }
    /// Close cleanly (WAL checkpoints etc. happen here, outside any measurement).
    fn close(self: Box<Self>) -> Result<(), String>;
}

/// One commit's effect on a write-ahead log (`bench mvbt`: frames per transaction and the
/// share of time the automatic checkpoints take).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WalCommit {
    /// Frames the commit appended (`None` when a checkpoint in the same commit reset the
    /// log, so the count is gone).
    pub frames: Option<u64>,
    /// Whether the commit ran an automatic checkpoint.
    pub checkpointed: bool,
    /// That checkpoint's own time, when the store could time it apart (SQLite's WAL
    /// hook); `None` leaves it to be estimated from the commit's excess time.
    pub checkpoint_nanos: Option<u64>,
}

pub(crate) fn es(e: impl std::fmt::Display) -> String {
    e.to_string()
}

pub(crate) fn ascii(value: &[u8]) -> Result<&str, String> {
    std::str::from_utf8(value).map_err(|_| "value is not ASCII".to_string())
}
