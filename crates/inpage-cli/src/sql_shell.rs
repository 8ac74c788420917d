//! `inpage sql FILE`: a small shell over inpage's SQL front end (SQLite's own parser,
//! planner and VDBE on inpage's trees, crate `inpage-sql`).
//!
//! SQL comes from the arguments (each one run in turn) or, without any, from stdin,
//! statement by statement (`sqlite3_complete` decides where one ends, so a `;` inside a
//! string or a trigger body does not split it). Output is the `sqlite3` shell's default
//! list mode: columns joined by `|`, NULL as an empty string, values as SQLite's own
//! text conversion renders them. Dot commands: `.tables`, `.schema [TABLE]`, `.dump`,
//! `.quit`.
//!
//! Invariants: `.dump` writes SQL that rebuilds the same schema and rows on stock SQLite
//! or on inpage (`sqlite3 app.db .dump | inpage sql new.db` migrates, and back): every
//! value goes through SQLite's `quote()`, tables are created before their rows, indexes,
//! triggers and views after all rows (as the sqlite3 shell orders them), all inside one
//! transaction. An error in one statement is reported with its text and the shell goes
//! on (as sqlite3 does), but the exit code is 1 if any statement failed. A statement
//! waits up to 5 s while another process has its turn on the file (`.timeout 5000`).

use std::io::{BufRead, Write};
use std::path::Path;

use inpage_sql::{Connection, SqlError, Value};

/// How long a statement waits for another process's turn on the file.
const BUSY_TIMEOUT_MS: i32 = 5000;

/// Run the shell; Ok(true) if every statement succeeded.
pub fn run(
    file: &Path,
    journal_mode: Option<&str>,
    args: &[String],
    out: &mut dyn Write,
) -> Result<bool, String> {
    let conn = open(file, journal_mode)?;
    let mut ok = true;
    if args.is_empty() {
        let stdin = std::io::stdin();
        let mut buf = String::new();
        for line in stdin.lock().lines() {
            let line = line.map_err(|e| format!("stdin: {e}"))?;
            if buf.trim().is_empty() && line.trim_start().starts_with('.') {
                buf.clear();
                match dot(&conn, line.trim(), out)? {
                    Dot::Quit => return Ok(ok),
                    Dot::Done(r) => ok &= r,
                }
                continue;
            }
            buf.push_str(&line);
            buf.push('\n');
            if inpage_sql::conn::is_complete(&buf) {
                ok &= report(exec(&conn, &buf, out));
                buf.clear();
                // A reader on a pipe (a script driving the shell) sees each answer now.
                out.flush().map_err(|e| format!("stdout: {e}"))?;
            }
        }
        if !buf.trim().is_empty() {
            ok &= report(exec(&conn, &buf, out));
        }
    } else {
        for a in args {
            if a.trim_start().starts_with('.') {
                match dot(&conn, a.trim(), out)? {
                    Dot::Quit => break,
                    Dot::Done(r) => ok &= r,
                }
            } else {
                ok &= report(exec(&conn, a, out));
            }
        }
    }
    out.flush().map_err(|e| format!("stdout: {e}"))?;
    Ok(ok)
}

fn open(file: &Path, journal_mode: Option<&str>) -> Result<Connection, String> {
    let conn = match journal_mode {
        Some(m) => Connection::open_with_mode(file, m),
        None => Connection::open(file),
    }
    .map_err(|e| format!("{}: {}", file.display(), e.message))?;
    // Another process may have its turn on the file (a writer between statements): wait
    // for it as the sqlite3 shell does after `.timeout 5000`, instead of failing at once.
    conn.busy_timeout(BUSY_TIMEOUT_MS)
        .map_err(|e| format!("{}: {}", file.display(), e.message))?;
    // Opening is lazy in SQLite: read the schema now, so a foreign or damaged file is
    // reported before any statement runs (and nothing is written to it).
    conn.query("SELECT count(*) FROM sqlite_schema", &[])
        .map_err(|e| format!("{}: {}", file.display(), e.message))?;
    Ok(conn)
}

/// Print an error, keep going; true if there was none.
fn report(r: Result<(), SqlError>) -> bool {
    match r {
        Ok(()) => true,
        Err(e) => {
            eprintln!("Error: {}", e.message);
            false
        }
    }
}

/// Run every statement of `sql`, printing rows in list mode.
fn exec(conn: &Connection, sql: &str, out: &mut dyn Write) -> Result<(), SqlError> {
    conn.for_each_statement(sql, |st| {
        while st.step()? {
            let line: Vec<String> = (0..st.column_count())
                .map(|i| st.text(i).unwrap_or_default())
                .collect();
            writeln!(out, "{}", line.join("|")).map_err(io_err)?;
        }
        Ok(())
    })
}

fn io_err(e: std::io::Error) -> SqlError {
    SqlError {
        code: 1,
        message: format!("stdout: {e}"),
    }
}

enum Dot {
    Quit,
    Done(bool),
}

fn dot(conn: &Connection, line: &str, out: &mut dyn Write) -> Result<Dot, String> {
    let mut words = line.split_whitespace();
    let cmd = words.next().unwrap_or("");
    let arg = words.next();
    let r = match cmd {
        ".quit" | ".exit" => return Ok(Dot::Quit),
        ".tables" => tables(conn, out),
        ".schema" => schema(conn, arg, out),
        ".dump" => dump(conn, out),
        _ => {
            eprintln!("Error: unknown command {cmd:?} (.tables, .schema [TABLE], .dump, .quit)");
            return Ok(Dot::Done(false));
        }
    };
    Ok(Dot::Done(report(r)))
}

fn text_rows(conn: &Connection, sql: &str, params: &[Value]) -> Result<Vec<String>, SqlError> {
    let mut st = conn.prepare(sql)?;
    st.bind_all(params)?;
    let mut v = Vec::new();
    while st.step()? {
        v.push(st.text(0).unwrap_or_default());
    }
    Ok(v)
}

fn tables(conn: &Connection, out: &mut dyn Write) -> Result<(), SqlError> {
    let names = text_rows(
        conn,
        "SELECT name FROM sqlite_schema WHERE type IN ('table','view') \
         AND name NOT LIKE 'sqlite_%' ORDER BY 1",
        &[],
    )?;
    if !names.is_empty() {
        writeln!(out, "{}", names.join("  ")).map_err(io_err)?;
    }
    Ok(())
}

fn schema(conn: &Connection, table: Option<&str>, out: &mut dyn Write) -> Result<(), SqlError> {
    let rows = match table {
        Some(t) => text_rows(
            conn,
            "SELECT sql || ';' FROM sqlite_schema WHERE sql NOT NULL AND tbl_name LIKE ?1 \
             ORDER BY type DESC, name",
            &[Value::Text(t.to_string())],
        )?,
        None => text_rows(
            conn,
            "SELECT sql || ';' FROM sqlite_schema WHERE sql NOT NULL \
             AND name NOT LIKE 'sqlite_%' ORDER BY tbl_name, type DESC, name",
            &[],
        )?,
    };
    for r in rows {
        writeln!(out, "{r}").map_err(io_err)?;
    }
    Ok(())
}

/// An identifier as SQL, always double-quoted (a bare word could be a keyword).
fn ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

fn dump(conn: &Connection, out: &mut dyn Write) -> Result<(), SqlError> {
    let w = |out: &mut dyn Write, s: &str| writeln!(out, "{s}").map_err(io_err);
    // One snapshot for the whole dump.
    conn.execute_batch("BEGIN")?;
    let r = (|| {
        w(out, "PRAGMA foreign_keys=OFF;")?;
        w(out, "BEGIN TRANSACTION;")?;
        let mut st = conn.prepare(
            "SELECT name, sql FROM sqlite_schema WHERE type = 'table' AND sql NOT NULL \
             ORDER BY rowid",
        )?;
        let mut tables = Vec::new();
        while st.step()? {
            tables.push((
                st.text(0).unwrap_or_default(),
                st.text(1).unwrap_or_default(),
            ));
        }
        drop(st);
        for (name, sql) in &tables {
            if name == "sqlite_sequence" {
                w(out, "DELETE FROM sqlite_sequence;")?;
            } else if name.starts_with("sqlite_stat") {
                w(out, "ANALYZE sqlite_schema;")?;
            } else if name.starts_with("sqlite_") {
                continue;
            } else if sql.to_ascii_uppercase().starts_with("CREATE VIRTUAL TABLE") {
                // As the sqlite3 shell: the module recreates its shadow tables.
                w(out, "PRAGMA writable_schema=ON;")?;
                w(
                    out,
                    &format!(
                        "INSERT INTO sqlite_schema(type,name,tbl_name,rootpage,sql) \
                         VALUES('table',{q},{q},0,{s});",
                        q = quote_text(name),
                        s = quote_text(sql)
                    ),
                )?;
                w(out, "PRAGMA writable_schema=OFF;")?;
                continue;
            } else {
                w(out, &format!("{sql};"))?;
            }
            if name.starts_with("sqlite_stat") {
                continue;
            }
            let cols = text_rows(
                conn,
                "SELECT name FROM pragma_table_info(?1) ORDER BY cid",
                &[Value::Text(name.clone())],
            )?;
            if cols.is_empty() {
                continue;
            }
            let select = format!(
                "SELECT {} FROM {}",
                cols.iter()
                    .map(|c| format!("quote({})", ident(c)))
                    .collect::<Vec<_>>()
                    .join(" || ',' || "),
                ident(name)
            );
            let mut rows = conn.prepare(&select)?;
            while rows.step()? {
                w(
                    out,
                    &format!(
                        "INSERT INTO {} VALUES({});",
                        ident(name),
                        rows.text(0).unwrap_or_default()
                    ),
                )?;
            }
        }
        for sql in text_rows(
            conn,
            "SELECT sql FROM sqlite_schema WHERE sql NOT NULL \
             AND type IN ('index','trigger','view') ORDER BY rowid",
            &[],
        )? {
            w(out, &format!("{sql};"))?;
        }
        w(out, "COMMIT;")
    })();
    let end = conn.execute_batch("COMMIT");
    r.and(end)
}

/// A text value as an SQL string literal.
fn quote_text(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_are_always_quoted_and_escaped() {
        assert_eq!(ident("tblMyList"), "\"tblMyList\"");
        assert_eq!(ident("order"), "\"order\"");
        assert_eq!(ident("a\"b"), "\"a\"\"b\"");
        assert_eq!(quote_text("it's"), "'it''s'");
    }
}
