//! Every file path and mode name the project's Markdown cites exists.
//!
//! Docs go stale silently when code moves: a cited `journal/dhl.rs` after the file was
//! split, a mode name after a rename. This reads every tracked `*.md` of the repository
//! (outside `target/` and `bench-results/`, whose files are records of past runs) and
//! checks each code span (`` `…` ``):
//! - a span that looks like a path of the repository (it names a file with an extension
//!   this project keeps, or a directory ending in `/`) must exist: relative to the
//!   repository root, to the Markdown file's folder, or to a crate's `src/` (docs say
//!   `journal/wal.rs` for `crates/inpage/src/journal/wal.rs`); a `*` in it must match;
//! - a span that looks like a journal mode (a family's name, optionally with `-` parts)
//!   must be a registry mode, a bench contender, a torture configuration, a planted bug
//!   (`Mutant`) or the SQL alias `dhl`.

use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn markdown_files(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            let name = e.file_name().to_string_lossy().to_string();
            if p.is_dir() {
                if !matches!(
                    name.as_str(),
                    "target" | ".git" | "bench-results" | "vendor" | "node_modules"
                ) && !name.starts_with('.')
                {
                    stack.push(p);
                }
            } else if name.ends_with(".md") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// The code spans of a Markdown text, with their line numbers (fenced blocks skipped:
/// they hold commands and output, not citations).
fn code_spans(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut fenced = false;
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let mut parts = line.split('`');
        parts.next();
        while let (Some(span), Some(_)) = (parts.next(), parts.next()) {
            out.push((i + 1, span.to_string()));
        }
    }
    out
}

const EXTENSIONS: &[&str] = &[
    ".rs", ".md", ".sh", ".toml", ".c", ".h", ".py", ".json", ".txt", ".svg", ".yml",
];

/// The repository path a span cites, if it looks like one.
fn as_path(span: &str) -> Option<&str> {
    let s = span.trim();
    let s = s.split_once(':').map_or(s, |(p, _)| p); // `file.rs:120`
    let s = s.split_once(" (").map_or(s, |(p, _)| p);
    if s.is_empty()
        || s.contains(char::is_whitespace)
        || s.contains("://")
        || s.starts_with('/')
        || s.starts_with('-')
        || s.starts_with('<')
        || s.contains('<')
        || s.contains('{')
        || s.contains("::")
        || s.starts_with('~')
        || s.starts_with('$')
        // What a run writes (the main job's `results/`, the build's `target/`).
        || s.starts_with("results/")
        || s.starts_with("target/")
    {
        return None;
    }
    let file = EXTENSIONS.iter().any(|e| s.ends_with(e)) && s.contains('/');
    let dir = s.ends_with('/') && s.len() > 1 && !s.starts_with('.');
    (file || dir).then_some(s)
}

/// Whether `cited` names something outside the repository: it climbs out of the folder
/// it is read from (`../`) into a folder the repository does not have at its top, such
/// as `../shared/papers/…` (the workplace's files, absent from a clone elsewhere). A
/// `../` path into one of the repository's own folders (`../crates/…`) is checked.
fn outside_repo(root: &Path, cited: &str) -> bool {
    let rest = cited.trim_start_matches("../");
    if rest.len() == cited.len() {
        return false;
    }
    let top = rest.split('/').next().unwrap_or("");
    !root.join(top).exists()
}

fn exists(root: &Path, md_dir: &Path, cited: &str) -> bool {
    let mut bases = vec![root.to_path_buf(), md_dir.to_path_buf()];
    for c in std::fs::read_dir(root.join("crates")).unwrap().flatten() {
        bases.push(c.path().join("src"));
        bases.push(c.path());
    }
    bases.iter().any(|b| {
        if cited.contains('*') {
            glob_matches(b, cited)
        } else {
            b.join(cited).exists()
        }
    })
}

/// Whether `pattern` (with `*` in its last component) matches a file under `base`.
fn glob_matches(base: &Path, pattern: &str) -> bool {
    let (dir, last) = pattern.rsplit_once('/').unwrap_or(("", pattern));
    if dir.contains('*') {
        return false;
    }
    let Ok(rd) = std::fs::read_dir(base.join(dir)) else {
        return false;
    };
    let parts: Vec<&str> = last.split('*').collect();
    rd.flatten().any(|e| {
        let name = e.file_name().to_string_lossy().to_string();
        let mut rest = name.as_str();
        for (i, p) in parts.iter().enumerate() {
            if i == 0 {
                let Some(r) = rest.strip_prefix(p) else {
                    return false;
                };
                rest = r;
            } else if i == parts.len() - 1 {
                return rest.ends_with(p);
            } else {
                let Some(at) = rest.find(p) else { return false };
                rest = &rest[at + p.len()..];
            }
        }
        rest.is_empty()
    })
}

/// The families whose names start a mode's name.
const FAMILIES: &[&str] = &[
    "dhl", "ips", "mvbt", "ls-mvbt", "waldio", "wal", "nvlog", "dash", "rollback",
];

fn looks_like_mode(span: &str) -> bool {
    let s = span.trim();
    FAMILIES.iter().any(|f| {
        s.strip_prefix(f)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('-'))
    }) && s
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

fn known_names() -> Vec<String> {
    let mut names: Vec<String> = inpage::JournalMode::all()
        .map(|m| m.name().to_string())
        .collect();
    names.extend(inpage_torture::mode::Mode::all().iter().map(|m| m.name()));
    names.extend(inpage::Mutant::ALL.iter().map(|m| m.name().to_string()));
    // `PRAGMA journal_mode=dhl`: SQL's unquoted name of `dhl-cc`.
    names.push("dhl".into());
    for c in inpage_bench::contender::all_contenders() {
        names.push(c.name.clone());
        if let Some(rest) = c.name.strip_prefix("sql-") {
            names.push(rest.to_string());
        }
    }
    names
}

#[test]
fn every_cited_path_and_mode_exists() {
    let root = repo();
    let known = known_names();
    let mut bad = Vec::new();
    let files = markdown_files(&root);
    assert!(files.len() > 5, "found only {} Markdown files", files.len());
    let mut checked = (0, 0);
    for md in &files {
        let text = std::fs::read_to_string(md).unwrap();
        let rel = md.strip_prefix(&root).unwrap_or(md).display().to_string();
        for (line, span) in code_spans(&text) {
            if let Some(p) = as_path(&span) {
                if outside_repo(&root, p) {
                    continue;
                }
                checked.0 += 1;
                if !exists(&root, md.parent().unwrap(), p) {
                    bad.push(format!("{rel}:{line}: no such path `{p}`"));
                }
            } else if looks_like_mode(&span) {
                checked.1 += 1;
                if !known.iter().any(|k| k == span.trim()) {
                    bad.push(format!("{rel}:{line}: no such mode `{}`", span.trim()));
                }
            }
        }
    }
    assert!(checked.0 > 50 && checked.1 > 50, "checked only {checked:?}");
    assert!(
        bad.is_empty(),
        "{} stale citation(s):\n  {}",
        bad.len(),
        bad.join("\n  ")
    );
}

#[test]
fn the_checker_sees_a_stale_path_and_a_stale_mode() {
    let root = repo();
    let dir = root.join("docs");
    assert!(exists(&root, &dir, "journal/wal.rs"));
    assert!(!exists(&root, &dir, "journal/dhl.rs"));
    assert!(exists(&root, &dir, "crates/inpage/tests/*.rs"));
    assert!(outside_repo(&root, "../shared/papers/x.txt"));
    assert!(outside_repo(&root, "../../shared/papers/x.txt"));
    assert!(!outside_repo(&root, "../crates/inpage/src/lib.rs"));
    assert!(as_path("crates/inpage/src/journal/dhl/mod.rs:120").is_some());
    assert!(as_path("Config::dhl_direct").is_none());
    assert!(looks_like_mode("dhl-cc") && looks_like_mode("waldio-gc"));
    assert!(!looks_like_mode("dhl_direct") && !looks_like_mode("walking"));
    let known = known_names();
    assert!(known.iter().any(|k| k == "dhl-cc"));
    assert!(!known.iter().any(|k| k == "dhl-cc-nonsense"));
}
