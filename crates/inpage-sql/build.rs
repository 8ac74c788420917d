//! Build the SQL layer's C side: the vendored SQLite 3.53.2 amalgamation with its storage
//! layer cut out and `csrc/glue.c` spliced in where `btree.c` was.
//!
//! Invariants, and why they hold:
//! - The amalgamation is exactly the pinned one: the SHA-256 of each vendored file is
//!   checked before anything else, so a changed file stops the build with a message.
//! - Sections are found by the amalgamation's own `Begin file X` / `End of X` markers, not
//!   by line numbers; a missing, unbalanced or nested section stops the build.
//! - Every source patch is a textual replacement that must match exactly once; zero or
//!   several matches stop the build (a patch never applies to the wrong place silently).
//! - The glue is `#include`d inside the amalgamation because `SQLITE_PRIVATE` is
//!   `static`: it must see every declaration `btree.c` saw, so it goes where `btree.c` was.

use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

/// SHA-256 of the vendored files (SQLite 3.53.2 as shipped in libsqlite3-sys 0.38.2).
const PINNED: &[(&str, &str)] = &[
    (
        "sqlite3.c",
        "0a409f1633283fa31a9126b11fbfd64a1991c5d30defad07e5745d4667f5e23d",
    ),
    (
        "sqlite3.h",
        "9e69a1353a4288450b0d5239ede11fc7f1f4c8e5eb07491fc8317eacb5b7de7e",
    ),
    (
        "sqlite3ext.h",
        "ac9645e5c9ff0cf176efdd6e75cb5e98f46295d38e02db5c4d208826a39ab4be",
    ),
];

/// Top-level sections replaced by the glue. Nested headers go with their parent
/// (`wal.h` is inside `pager.c`, `btreeInt.h` inside `btmutex.c`).
const CUT: &[&str] = &[
    "pager.c",
    "wal.c",
    "btmutex.c",
    "btree.c",
    "backup.c",
    "memdb.c",
];

/// Source patches: (why, unique text, replacement).
const PATCHES: &[(&str, &str, &str)] = &[
    (
        // vdbeCommit's simple case (the only one: aMJNeeded below is all zeros) commits
        // each database's b-tree on its own; inpage commits every database the
        // transaction wrote together, atomically (glue.c sqlite3GlueCommitPhaseOneAll,
        // the engine's super-journal: `inpage::commit_all`).
        "vdbeaux.c vdbeCommit phase one",
        "    if( needXcommit ){\n      for(i=0; rc==SQLITE_OK && i<db->nDb; i++){\n        Btree *pBt = db->aDb[i].pBt;\n        if( sqlite3BtreeTxnState(pBt)>=SQLITE_TXN_WRITE ){\n          rc = sqlite3BtreeCommitPhaseOne(pBt, 0);\n        }\n      }\n    }",
        "    if( needXcommit ){\n      rc = sqlite3GlueCommitPhaseOneAll(db, p); /* inpage: every database together */\n    }",
    ),
    (
        // vdbeCommit indexes a 6-entry table by journal mode; inpage's modes go beyond
        // SQLite's six. No mode takes part in a super-journal (each database commits
        // atomically on its own, as SQLite documents for WAL), so the table is all zeros,
        // sized for every code the glue may hand out (ffi.rs `MAX_MODE_CODES`).
        "vdbeaux.c aMJNeeded",
        "      static const u8 aMJNeeded[] = {\n        /* DELETE   */  1,\n        /* PERSIST   */ 1,\n        /* OFF       */ 0,\n        /* TRUNCATE  */ 1,\n        /* MEMORY    */ 0,\n        /* WAL       */ 0\n      };",
        "      static const u8 aMJNeeded[64] = { 0 }; /* inpage: no super-journal (ffi.rs MAX_MODE_CODES) */",
    ),
    (
        // VACUUM of a database in place, at its page size: the glue copies the
        // database's own committed trees into its write transaction (glue.c
        // sqlite3GlueVacuumInPlace), packed, instead of inserting every row into the
        // temporary vacuum_db first and copying that back (the rows were copied twice).
        // vacuum_db still gets the schema and the meta values, which the glue takes.
        "vacuum.c data copy",
        "  rc = execSqlF(db, pzErrMsg,\n      \"SELECT'INSERT INTO %s.'||quote(name)\"\n      \"||' SELECT*FROM\\\"%w\\\".'||quote(name)\"\n      \"FROM %s.sqlite_schema \"\n      \"WHERE type='table'AND coalesce(rootpage,1)>0\",\n      zDbVacuum, zDbMain, zDbVacuum\n  );",
        "  bInPlace = pOut==0 && sqlite3BtreeGetPageSize(pTemp)==sqlite3BtreeGetPageSize(pMain); /* inpage */\n  rc = bInPlace ? SQLITE_OK : execSqlF(db, pzErrMsg,\n      \"SELECT'INSERT INTO %s.'||quote(name)\"\n      \"||' SELECT*FROM\\\"%w\\\".'||quote(name)\"\n      \"FROM %s.sqlite_schema \"\n      \"WHERE type='table'AND coalesce(rootpage,1)>0\",\n      zDbVacuum, zDbMain, zDbVacuum\n  );",
    ),
    (
        "vacuum.c copy back",
        "    if( pOut==0 ){\n      rc = sqlite3BtreeCopyFile(pMain, pTemp);\n    }",
        "    if( pOut==0 ){\n      rc = bInPlace ? sqlite3GlueVacuumInPlace(pMain, pTemp) /* inpage */\n                    : sqlite3BtreeCopyFile(pMain, pTemp);\n    }",
    ),
    (
        "vacuum.c declaration",
        "  char zDbVacuum[42];     /* Name of the ATTACH-ed database used for vacuum */\n",
        "  char zDbVacuum[42];     /* Name of the ATTACH-ed database used for vacuum */\n  int bInPlace = 0;       /* inpage: copy the database's own trees (glue.c) */\n",
    ),
    (
        // PRAGMA journal_mode names: codes 0-5 keep SQLite's meaning, the others are
        // inpage's registry modes, named by the glue (ffi.rs `ipg_journal_mode_name`), so
        // a mode added to the registry is a PRAGMA name without a change here.
        "pragma.c sqlite3JournalModename",
        "  static char * const azModeName[] = {\n    \"delete\", \"persist\", \"off\", \"truncate\", \"memory\"\n#ifndef SQLITE_OMIT_WAL\n     , \"wal\"\n#endif\n  };\n  assert( PAGER_JOURNALMODE_DELETE==0 );\n  assert( PAGER_JOURNALMODE_PERSIST==1 );\n  assert( PAGER_JOURNALMODE_OFF==2 );\n  assert( PAGER_JOURNALMODE_TRUNCATE==3 );\n  assert( PAGER_JOURNALMODE_MEMORY==4 );\n  assert( PAGER_JOURNALMODE_WAL==5 );\n  assert( eMode>=0 && eMode<=ArraySize(azModeName) );\n\n  if( eMode==ArraySize(azModeName) ) return 0;\n  return azModeName[eMode];",
        "  extern const char *ipg_journal_mode_name(int); /* inpage: the registry's names */\n  return ipg_journal_mode_name(eMode);",
    ),
];

/// Compile flags. What an application can observe is stock SQLite's: no `DEFAULT_*`
/// override, so every pragma default is upstream's (foreign keys off, recursive triggers
/// off, secure_delete off, auto_vacuum none, ...). Features switched on are the ones
/// common builds carry (Debian's and Android's `libsqlite3`, CPython's): FTS3/4/5, R*Tree,
/// JSON, math functions, column metadata, the pre-update hook and sessions, `sqlite_stmt`,
/// soundex, URI file names and loadable extensions. The storage layer the glue replaces
/// is cut out instead of omitted where the rest of SQLite still calls it (WAL pragmas,
/// auto_vacuum, serialize), so those APIs and pragmas answer as stock does. The
/// deliberate differences, with the reason for each, are listed in this crate's
/// README ("Compile options") and checked by `tests/defaults.rs`.
const DEFINES: &[(&str, Option<&str>)] = &[
    ("SQLITE_CORE", None),
    ("SQLITE_ENABLE_API_ARMOR", None),
    ("SQLITE_ENABLE_COLUMN_METADATA", None),
    ("SQLITE_ENABLE_FTS3", None),
    ("SQLITE_ENABLE_FTS3_PARENTHESIS", None),
    ("SQLITE_ENABLE_FTS4", None),
    ("SQLITE_ENABLE_FTS5", None),
    ("SQLITE_ENABLE_JSON1", None),
    ("SQLITE_ENABLE_LOAD_EXTENSION", Some("1")),
    ("SQLITE_ENABLE_MATH_FUNCTIONS", None),
    ("SQLITE_ENABLE_MEMORY_MANAGEMENT", None),
    ("SQLITE_ENABLE_PREUPDATE_HOOK", None),
    ("SQLITE_ENABLE_RTREE", None),
    ("SQLITE_ENABLE_SESSION", None),
    ("SQLITE_ENABLE_STMTVTAB", None),
    ("SQLITE_SOUNDEX", None),
    ("SQLITE_THREADSAFE", Some("1")),
    ("SQLITE_USE_URI", None),
    ("HAVE_USLEEP", Some("1")),
    ("HAVE_ISNAN", None),
    ("HAVE_LOCALTIME_R", None),
    ("_POSIX_THREAD_SAFE_FUNCTIONS", None),
    ("SQLITE_OMIT_SHARED_CACHE", None),
];

fn main() {
    let dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));
    let vendored = dir.join("sqlite");
    for (name, _) in PINNED {
        println!("cargo:rerun-if-changed=sqlite/{name}");
    }
    println!("cargo:rerun-if-changed=csrc/glue.c");
    println!("cargo:rerun-if-changed=build.rs");

    for (name, want) in PINNED {
        let bytes = read(&vendored.join(name));
        let got = hex(&sha256(&bytes));
        if got != *want {
            fail(&format!(
                "vendored sqlite/{name} is not the pinned SQLite 3.53.2 file: SHA-256 {got}, \
                 expected {want}. Re-vendor it (SQLPLAN §1) or update PINNED knowingly."
            ));
        }
    }

    let src = String::from_utf8(read(&vendored.join("sqlite3.c")))
        .unwrap_or_else(|_| fail("sqlite3.c is not UTF-8"));
    let mut text = src;
    for (why, from, to) in PATCHES {
        let n = text.matches(from).count();
        if n != 1 {
            fail(&format!(
                "patch `{why}` matched {n} times (must be exactly 1)"
            ));
        }
        text = text.replacen(from, to, 1);
    }
    let api = parse_api(&String::from_utf8_lossy(&read(&vendored.join("sqlite3.h"))));
    // Every wrappable API function is renamed on the C side (RENAME_PREFIX); the Rust
    // wrappers generated below define the public names.
    let mut cut = String::from(
        "/* inpage-sql: C definitions renamed; src/api.rs exports the public names */\n",
    );
    for f in &api {
        let _ = writeln!(cut, "#define {0} {RENAME_PREFIX}{0}", f.name);
    }
    // The API's data symbols too, so no global name of the archive clashes with stock
    // SQLite's (checked below); the cdylib does not export them (README).
    for d in API_DATA {
        let _ = writeln!(cut, "#define {d} {RENAME_PREFIX}{d}");
    }
    cut.push_str(&cut_amalgamation(&text));
    let cut_path = out.join("sqlite3_inpage.c");
    fs::write(&cut_path, cut).unwrap_or_else(|e| fail(&format!("write {cut_path:?}: {e}")));

    let mut b = cc::Build::new();
    b.file(&cut_path)
        .include(dir.join("csrc"))
        .include(&vendored)
        .warnings(false)
        .debug(false);
    // The VDBE is slow at -O0; keep at least -O1 whatever the profile.
    let opt: u32 = env::var("OPT_LEVEL")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    b.opt_level(opt.clamp(1, 3));
    for (k, v) in DEFINES {
        b.define(k, *v);
    }
    // The vendored amalgamation only: SQLite's own code trips these with -Wall.
    for w in [
        "-Wno-unused-function",
        "-Wno-unused-variable",
        "-Wno-misleading-indentation",
    ] {
        b.flag_if_supported(w);
    }
    b.compile("sqlite3_inpage");
    let defined = defined_symbols(&out.join("libsqlite3_inpage.a"));
    // SQLite's internal functions are `static` (SQLITE_PRIVATE): one the rest of SQLite
    // still calls but the cut-out storage layer defined, and the glue does not, would
    // only fail when the shared library is loaded (or, lazily, when first called).
    if let Some(missing) = undefined_symbols(&out.join("libsqlite3_inpage.a"))
        .iter()
        .find(|n| n.starts_with("sqlite3"))
    {
        fail(&format!(
            "`{missing}` is used but defined nowhere: the storage layer build.rs cuts out \
             defined it; add it to csrc/glue.c"
        ));
    }
    if let Some(bad) = defined
        .iter()
        .find(|n| n.starts_with("sqlite3") || n.starts_with("sqlite_"))
    {
        fail(&format!(
            "the archive defines `{bad}` unrenamed: it would clash with stock SQLite in a \
             binary that links both (add it to API_DATA or the renamed API)"
        ));
    }
    let rs = api_wrappers(&api, &defined);
    let api_rs = out.join("api.rs");
    fs::write(&api_rs, rs).unwrap_or_else(|e| fail(&format!("write api.rs: {e}")));
    // The forwarders are compiled by the crate that exports them (inpage-libsqlite3, the
    // cdylib), never by this rlib: with them, the rlib would clash with stock SQLite in a
    // binary that links both (the CLI and the bench do). `links` hands the path over.
    println!("cargo:api_rs={}", api_rs.display());
    println!("cargo:rustc-link-lib=m");
    println!("cargo:rustc-link-lib=dl");
    println!("cargo:rustc-link-lib=pthread");
}

/// The API's global variables (sqlite3.h declares them `SQLITE_API` data).
const API_DATA: &[&str] = &[
    "sqlite3_version",
    "sqlite3_temp_directory",
    "sqlite3_data_directory",
];

/// The prefix of the C definitions of the public API (see `parse_api`).
const RENAME_PREFIX: &str = "inpage_c_";

/// One `SQLITE_API` function of sqlite3.h: name, Rust return type, Rust argument types.
struct ApiFn {
    name: String,
    ret: Option<&'static str>,
    args: Vec<&'static str>,
    /// `...` or `va_list`: exported through a naked jump, not a typed forwarder.
    variadic: bool,
}

/// Why the public names need Rust wrappers: a cdylib exports only the symbols rustc
/// lists in its version script (the crate's `#[no_mangle]` items); symbols of linked C
/// objects are hidden. So the C definitions are renamed and each non-variadic API
/// function gets a `#[no_mangle]` forwarder with the same C signature. The types are
/// mapped exactly (sizes and classes), and an unknown type stops the build. Variadic
/// and `va_list` functions cannot be defined with a signature in stable Rust: they get
/// a naked function whose only instruction is a tail jump to the C definition, which
/// leaves every argument register and the stack as the caller set them.
fn parse_api(header: &str) -> Vec<ApiFn> {
    let text = strip_comments(header);
    let mut out = Vec::new();
    let mut rest = text.as_str();
    while let Some(at) = rest.find("SQLITE_API") {
        rest = &rest[at + "SQLITE_API".len()..];
        let end = rest.find(';').unwrap_or(rest.len());
        let decl = &rest[..end];
        rest = &rest[end..];
        let Some(open) = decl.find('(') else {
            continue; // data (sqlite3_version, sqlite3_temp_directory)
        };
        let head = &decl[..open];
        let Some(name_at) = head.rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) else {
            continue;
        };
        let name = head[name_at + 1..].trim();
        // The core API and the session extension's (compiled in: DEFINES).
        const PREFIXES: [&str; 5] = [
            "sqlite3_",
            "sqlite3session_",
            "sqlite3changeset_",
            "sqlite3changegroup_",
            "sqlite3rebaser_",
        ];
        if !PREFIXES.iter().any(|p| name.starts_with(p)) {
            continue;
        }
        let ret_txt = &head[..=name_at];
        if ret_txt.contains('(') {
            fail(&format!("unsupported declaration: {decl}"));
        }
        let args_txt = decl[open + 1..].trim_end();
        let Some(args_txt) = args_txt.strip_suffix(')') else {
            fail(&format!("unsupported declaration: {decl}"));
        };
        let parts = split_top_level(args_txt);
        if parts
            .iter()
            .any(|p| p.trim() == "..." || p.contains("va_list"))
        {
            // No Rust signature can forward these: a naked tail jump does (api_wrappers).
            if !out.iter().any(|f: &ApiFn| f.name == name) {
                out.push(ApiFn {
                    name: name.to_string(),
                    ret: None,
                    args: Vec::new(),
                    variadic: true,
                });
            }
            continue;
        }
        let ret = if ret_txt.contains('*') {
            Some("*mut c_void")
        } else {
            match c_type(ret_txt) {
                Some("void") => None,
                Some(t) => Some(t),
                None => fail(&format!("unknown return type in: {decl}")),
            }
        };
        let mut args = Vec::new();
        if !(parts.len() == 1 && parts[0].split_whitespace().collect::<Vec<_>>() == ["void"]) {
            for p in &parts {
                let t = if p.contains('*') || p.contains('(') || p.contains('[') {
                    "*mut c_void"
                } else {
                    match c_type(p) {
                        Some("void") | None => {
                            fail(&format!("unknown argument type `{p}` in: {decl}"))
                        }
                        Some(t) => t,
                    }
                };
                args.push(t);
            }
        }
        if !out.iter().any(|f: &ApiFn| f.name == name) {
            out.push(ApiFn {
                name: name.to_string(),
                ret,
                args,
                variadic: false,
            });
        }
    }
    if out.len() < 200 {
        fail(&format!(
            "sqlite3.h: only {} API functions found",
            out.len()
        ));
    }
    out
}

/// The Rust type of a non-pointer C type (tokens; a parameter name may follow).
fn c_type(t: &str) -> Option<&'static str> {
    let toks: Vec<&str> = t
        .split_whitespace()
        .filter(|x| !x.starts_with("SQLITE_") && *x != "const")
        .collect();
    let has = |w: &str| toks.contains(&w);
    Some(if has("double") {
        "f64"
    } else if has("sqlite3_int64") || has("sqlite_int64") {
        "i64"
    } else if has("sqlite3_uint64") || has("sqlite_uint64") {
        "u64"
    } else if has("sqlite3_filename") {
        "*mut c_void"
    } else if has("unsigned") && has("char") {
        "u8"
    } else if has("unsigned") && has("long") {
        "std::ffi::c_ulong"
    } else if has("unsigned") {
        "u32"
    } else if has("char") {
        "std::ffi::c_char"
    } else if has("int") {
        "c_int"
    } else if toks == ["void"] {
        "void"
    } else {
        return None;
    })
}

fn split_top_level(s: &str) -> Vec<String> {
    let (mut parts, mut cur, mut depth) = (Vec::new(), String::new(), 0i32);
    for ch in s.chars() {
        match ch {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(ch);
    }
    parts.push(cur);
    parts
}

fn strip_comments(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    loop {
        let block = rest.find("/*");
        let line = rest.find("//");
        match (block, line) {
            (Some(b), l) if l.is_none_or(|l| b < l) => {
                out.push_str(&rest[..b]);
                let end = rest[b + 2..]
                    .find("*/")
                    .map_or(rest.len(), |e| b + 2 + e + 2);
                out.push(' ');
                rest = &rest[end..];
            }
            (_, Some(l)) => {
                out.push_str(&rest[..l]);
                rest = &rest[l..];
                rest = rest.find('\n').map_or("", |e| &rest[e..]);
            }
            _ => {
                out.push_str(rest);
                return out;
            }
        }
    }
}

/// Global symbols the compiled archive defines (`nm`): the renamed API and the glue.
fn defined_symbols(archive: &Path) -> Vec<String> {
    nm_symbols(archive, "--defined-only")
}

/// The symbols the archive uses but does not define.
fn undefined_symbols(archive: &Path) -> Vec<String> {
    nm_symbols(archive, "--undefined-only")
}

fn nm_symbols(archive: &Path, which: &str) -> Vec<String> {
    let nm = env::var("NM").unwrap_or_else(|_| "nm".into());
    let o = std::process::Command::new(&nm)
        .arg(which)
        .arg(archive)
        .output()
        .unwrap_or_else(|e| fail(&format!("run {nm} (binutils) on {archive:?}: {e}")));
    if !o.status.success() {
        fail(&format!(
            "{nm} {archive:?} failed: {}",
            String::from_utf8_lossy(&o.stderr)
        ));
    }
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            // `addr kind name` for definitions, `kind name` for undefined symbols.
            let (kind, name) = match w.as_slice() {
                [_, k, n] | [k, n] => (*k, *n),
                _ => return None,
            };
            // Upper-case kinds are global (T text, R read-only, B bss, D data, U undefined).
            (kind.len() == 1 && kind.chars().all(|c| c.is_ascii_uppercase()))
                .then(|| name.to_string())
        })
        .collect()
}

/// `#[no_mangle]` forwarders for the API functions the C side defines.
fn api_wrappers(api: &[ApiFn], defined: &[String]) -> String {
    let mut s = String::from(
        "// Generated by build.rs (parse_api): one forwarder per SQLite API function.\n",
    );
    let mut n = 0;
    for f in api {
        let c_name = format!("{RENAME_PREFIX}{}", f.name);
        if !defined.contains(&c_name) {
            continue; // declared in sqlite3.h, compiled out by our flags
        }
        n += 1;
        if f.variadic {
            let _ = writeln!(
                s,
                "#[cfg(any(target_arch = \"x86_64\", target_arch = \"aarch64\"))]\nextern \"C\" {{ fn {c_name}(); }}\n/// Jumps to SQLite's `{0}` (variadic or `va_list`: no Rust signature).\n///\n/// # Safety\n/// As for `{0}` in sqlite3.h.\n#[cfg(any(target_arch = \"x86_64\", target_arch = \"aarch64\"))]\n#[unsafe(naked)]\n#[no_mangle]\npub unsafe extern \"C\" fn {0}() {{\n    // A tail jump: argument registers, the vararg count (x86-64 %al) and the stack\n    // reach the C definition untouched, and it returns straight to our caller.\n    #[cfg(target_arch = \"x86_64\")]\n    core::arch::naked_asm!(\"jmp {{0}}\", sym {c_name});\n    #[cfg(target_arch = \"aarch64\")]\n    core::arch::naked_asm!(\"b {{0}}\", sym {c_name});\n}}",
                f.name
            );
            continue;
        }
        let params: Vec<String> = f
            .args
            .iter()
            .enumerate()
            .map(|(i, t)| format!("a{i}: {t}"))
            .collect();
        let names: Vec<String> = (0..f.args.len()).map(|i| format!("a{i}")).collect();
        let ret = f.ret.map(|r| format!(" -> {r}")).unwrap_or_default();
        let _ = writeln!(
            s,
            "extern \"C\" {{ fn {c_name}({}){ret}; }}",
            params.join(", ")
        );
        let _ = writeln!(
            s,
            "/// Forwards to SQLite's `{0}`.\n///\n/// # Safety\n/// As for `{0}` in sqlite3.h.\n#[no_mangle]\npub unsafe extern \"C\" fn {0}({1}){ret} {{\n    // SAFETY: same C signature as the definition; the caller upholds its contract.\n    unsafe {{ {c_name}({2}) }}\n}}",
            f.name,
            params.join(", "),
            names.join(", ")
        );
    }
    if n < 200 {
        fail(&format!(
            "only {n} API functions defined in the compiled amalgamation"
        ));
    }
    s
}

fn fail(msg: &str) -> ! {
    panic!("inpage-sql build: {msg}");
}

fn read(p: &Path) -> Vec<u8> {
    fs::read(p).unwrap_or_else(|e| fail(&format!("read {p:?}: {e}")))
}

/// Cut the storage-layer sections and write `#include "glue.c"` where `btree.c` began.
fn cut_amalgamation(text: &str) -> String {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    // name -> (first line, last line, depth), 0-based inclusive.
    let mut sections: Vec<(String, usize, usize, usize)> = Vec::new();
    let mut stack: Vec<(String, usize)> = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let l = line.trim_end();
        if let Some(name) = marker(l, "Begin file ") {
            stack.push((name.to_string(), i));
        } else if let Some(name) = marker(l, "End of ") {
            if stack.is_empty() && name == "sqlite3.c" {
                continue; // the amalgamation's own trailer
            }
            match stack.pop() {
                Some((open, start)) if open == name => {
                    sections.push((open, start, i, stack.len()));
                }
                _ => fail(&format!(
                    "unbalanced marker at line {}: End of {name}",
                    i + 1
                )),
            }
        }
    }
    if !stack.is_empty() {
        fail(&format!("unterminated sections: {stack:?}"));
    }
    let mut drop = vec![false; lines.len()];
    let mut glue_at = None;
    for name in CUT {
        let Some((_, s, e, depth)) = sections.iter().find(|s| s.0 == *name) else {
            fail(&format!("section {name} not found"));
        };
        if *depth != 0 {
            fail(&format!("section {name} is nested (depth {depth})"));
        }
        drop[*s..=*e].iter_mut().for_each(|d| *d = true);
        if *name == "btree.c" {
            glue_at = Some(*s);
        }
    }
    let glue_at = glue_at.unwrap_or_else(|| fail("no btree.c section"));
    let mut out = String::with_capacity(text.len());
    for (i, line) in lines.iter().enumerate() {
        if i == glue_at {
            let _ = writeln!(
                out,
                "/****** inpage: storage layer replaced; cut: {} ******/",
                CUT.join(", ")
            );
            out.push_str("#include \"glue.c\"\n");
        }
        if !drop[i] {
            out.push_str(line);
        }
    }
    out
}

/// `/****** Begin file X ******/` -> Some("X") for prefix "Begin file ".
fn marker<'a>(line: &'a str, prefix: &str) -> Option<&'a str> {
    let body = line.strip_prefix("/*")?.strip_suffix("*/")?;
    let body = body.trim_matches('*').trim();
    let name = body.strip_prefix(prefix)?;
    (!name.is_empty() && !name.contains(' ')).then_some(name)
}

fn hex(b: &[u8]) -> String {
    b.iter().fold(String::new(), |mut s, x| {
        let _ = write!(s, "{x:02x}");
        s
    })
}

/// SHA-256 (FIPS 180-4); checked against `sha256sum` on the vendored files (PINNED).
fn sha256(data: &[u8]) -> [u8; 32] {
    const K: [u32; 64] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
        0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
        0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
        0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
        0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
        0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
        0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
        0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2,
    ];
    let mut h: [u32; 8] = [
        0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab,
        0x5be0cd19,
    ];
    let mut msg = data.to_vec();
    let bits = (data.len() as u64).wrapping_mul(8);
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&bits.to_be_bytes());
    let mut w = [0u32; 64];
    for block in msg.chunks_exact(64) {
        for (i, word) in block.chunks_exact(4).enumerate() {
            w[i] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        }
        for i in 16..64 {
            let s0 = w[i - 15].rotate_right(7) ^ w[i - 15].rotate_right(18) ^ (w[i - 15] >> 3);
            let s1 = w[i - 2].rotate_right(17) ^ w[i - 2].rotate_right(19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16]
                .wrapping_add(s0)
                .wrapping_add(w[i - 7])
                .wrapping_add(s1);
        }
        let [mut a, mut b, mut c, mut d, mut e, mut f, mut g, mut hh] = h;
        for i in 0..64 {
            let s1 = e.rotate_right(6) ^ e.rotate_right(11) ^ e.rotate_right(25);
            let ch = (e & f) ^ (!e & g);
            let t1 = hh
                .wrapping_add(s1)
                .wrapping_add(ch)
                .wrapping_add(K[i])
                .wrapping_add(w[i]);
            let s0 = a.rotate_right(2) ^ a.rotate_right(13) ^ a.rotate_right(22);
            let maj = (a & b) ^ (a & c) ^ (b & c);
            let t2 = s0.wrapping_add(maj);
            hh = g;
            g = f;
            f = e;
            e = d.wrapping_add(t1);
            d = c;
            c = b;
            b = a;
            a = t1.wrapping_add(t2);
        }
        for (x, y) in h.iter_mut().zip([a, b, c, d, e, f, g, hh]) {
            *x = x.wrapping_add(y);
        }
    }
    let mut out = [0u8; 32];
    for (i, x) in h.iter().enumerate() {
        out[i * 4..i * 4 + 4].copy_from_slice(&x.to_be_bytes());
    }
    out
}
