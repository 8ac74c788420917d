//! The layer test: the modules of the engine (and of the bench and the fuzzer) depend on
//! each other in one stated order, with no cycle, in the code that ships.
//!
//! It parses every source file reachable from the crate root (`syn`), skipping items under
//! `#[cfg(test)]` (a test may reach across layers to set a state up), collects every path
//! that names something of the crate (`use` lines, `crate::`/`super::` paths in code, and
//! `crate::…` inside macro calls), resolves it to the module it lands in, and then checks:
//! - **ranks**: each top-level module has a rank (`docs/ARCHITECTURE.md` draws them); a
//!   module may use only modules of a lower rank, so siblings of one rank are independent
//!   and the next journal mode or layout cannot reopen a cycle through the core;
//! - **no cycle below**: inside each module, its submodules form no cycle either
//!   (a submodule using its parent — the trait it implements — is not an edge).
//!
//! A name the crate root re-exports (`crate::Result`) counts as the module it comes from.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// The engine's layers, bottom first. A module uses only modules of a lower rank.
const ENGINE: &[(&str, u32)] = &[
    ("error", 0),
    ("le", 0),
    ("seam", 0),
    ("group", 1),
    ("format", 1),
    ("vfs", 2),
    ("page", 2),
    ("tree", 3),
    ("journal", 3),
    ("config", 4),
    ("pager", 5),
    ("procs", 5),
    ("txn", 6),
    ("db", 7),
    ("check", 8),
    ("inspect", 8),
    ("internals", 8),
];

/// The bench: devices and the lab below the contenders, the method above them, each
/// workload's driver on top.
const BENCH: &[(&str, u32)] = &[
    ("report", 0),
    ("workload", 0),
    ("sqlite_stop", 0),
    ("plots", 1),
    ("device", 1),
    ("emulate", 2),
    ("lab", 3),
    ("store", 4),
    ("sql", 5),
    ("contender", 6),
    ("pages", 6),
    ("recovery", 7),
    ("concurrent", 7),
    ("multiprocess", 7),
    ("runner", 8),
    ("mvbt", 9),
    ("nvlog", 10),
    ("trace", 9),
    ("program", 9),
    ("synth", 10),
];

/// The fuzzer: a generator, the executor of a case, the corpus of cases, the mutator.
const FUZZ: &[(&str, u32)] = &[
    ("rng", 0),
    ("files", 0),
    ("exec", 1),
    ("corpus", 2),
    ("mutate", 3),
];

type ModPath = Vec<String>;

/// One module as parsed: where its items are, and which paths of the crate it uses.
#[derive(Default)]
struct Module {
    file: PathBuf,
    uses: Vec<(ModPath, String)>,
}

/// The whole crate: every module reachable from the root, and what the root re-exports.
struct Crate {
    modules: BTreeMap<ModPath, Module>,
    reexports: BTreeMap<String, ModPath>,
}

fn is_test_cfg(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg") && {
            let t = a.meta.require_list().map(|l| l.tokens.to_string());
            matches!(t.as_deref(), Ok("test")) || t.is_ok_and(|t| t.starts_with("all(test"))
        }
    })
}

/// Collects the paths one module's items use, skipping test-only items and nested
/// inline modules (parsed as modules of their own).
struct Uses {
    out: Vec<(ModPath, String)>,
}

impl Uses {
    fn push(&mut self, segments: Vec<String>, what: String) {
        let first = segments.first().map(String::as_str);
        if matches!(first, Some("crate" | "super" | "self")) {
            self.out.push((segments, what));
        } else if let Some(f) = first {
            // A path relative to this module: `wal::WAL` names a child module. Kept as
            // `self::…`; resolution drops it if no such module exists.
            let mut s = vec!["self".to_string(), f.to_string()];
            s.extend(segments.into_iter().skip(1));
            self.out.push((s, what));
        }
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, t: &syn::UseTree) {
        match t {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let mut s = prefix.clone();
                if n.ident != "self" {
                    s.push(n.ident.to_string());
                }
                self.push(s, "use".into());
            }
            syn::UseTree::Rename(r) => {
                let mut s = prefix.clone();
                if r.ident != "self" {
                    s.push(r.ident.to_string());
                }
                self.push(s, "use".into());
            }
            syn::UseTree::Glob(_) => self.push(prefix.clone(), "use *".into()),
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.use_tree(prefix, t);
                }
            }
        }
    }
}

impl<'ast> Visit<'ast> for Uses {
    fn visit_item(&mut self, i: &'ast syn::Item) {
        let attrs = match i {
            syn::Item::Mod(_) => return, // a module of its own
            syn::Item::Use(u) => {
                if !is_test_cfg(&u.attrs) {
                    self.use_tree(&mut Vec::new(), &u.tree);
                }
                return;
            }
            syn::Item::Fn(x) => &x.attrs,
            syn::Item::Impl(x) => &x.attrs,
            syn::Item::Struct(x) => &x.attrs,
            syn::Item::Enum(x) => &x.attrs,
            syn::Item::Const(x) => &x.attrs,
            syn::Item::Static(x) => &x.attrs,
            syn::Item::Trait(x) => &x.attrs,
            syn::Item::Type(x) => &x.attrs,
            syn::Item::Macro(x) => &x.attrs,
            _ => &Vec::new(),
        };
        if !is_test_cfg(attrs) {
            syn::visit::visit_item(self, i);
        }
    }

    fn visit_impl_item(&mut self, i: &'ast syn::ImplItem) {
        let attrs = match i {
            syn::ImplItem::Fn(x) => &x.attrs,
            syn::ImplItem::Const(x) => &x.attrs,
            syn::ImplItem::Type(x) => &x.attrs,
            _ => return,
        };
        if !is_test_cfg(attrs) {
            syn::visit::visit_impl_item(self, i);
        }
    }

    fn visit_field(&mut self, f: &'ast syn::Field) {
        if !is_test_cfg(&f.attrs) {
            syn::visit::visit_field(self, f);
        }
    }

    fn visit_field_value(&mut self, f: &'ast syn::FieldValue) {
        if !is_test_cfg(&f.attrs) {
            syn::visit::visit_field_value(self, f);
        }
    }

    fn visit_stmt(&mut self, s: &'ast syn::Stmt) {
        if let syn::Stmt::Local(l) = s {
            if is_test_cfg(&l.attrs) {
                return;
            }
        }
        if let syn::Stmt::Expr(e, _) = s {
            if expr_is_test(e) {
                return;
            }
        }
        syn::visit::visit_stmt(self, s);
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        // Only qualified paths name modules; a bare identifier is a local or an import.
        if p.segments.len() > 1 {
            let s: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
            // `crate::`/`super::`/`self::`, or a lowercase first segment (a module, maybe
            // a child of this one); `Type::method` is not a module path.
            if s[0].chars().next().is_some_and(|c| c.is_ascii_lowercase()) {
                self.push(s, "path".into());
            }
        }
        syn::visit::visit_path(self, p);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        // Macro bodies are tokens: find `crate :: a :: b` runs in them.
        let toks: Vec<String> = m.tokens.clone().into_iter().flat_map(flatten).collect();
        let mut i = 0;
        while i < toks.len() {
            if toks[i] == "crate" {
                let mut s = vec!["crate".to_string()];
                let mut j = i + 1;
                while j + 2 < toks.len() + 1
                    && toks.get(j).map(String::as_str) == Some(":")
                    && toks.get(j + 1).map(String::as_str) == Some(":")
                    && toks.get(j + 2).is_some()
                {
                    s.push(toks[j + 2].clone());
                    j += 3;
                }
                if s.len() > 1 {
                    self.push(s, "macro".into());
                }
                i = j;
            } else {
                i += 1;
            }
        }
        syn::visit::visit_macro(self, m);
    }
}

fn expr_is_test(e: &syn::Expr) -> bool {
    let attrs = match e {
        syn::Expr::Block(b) => &b.attrs,
        syn::Expr::Call(c) => &c.attrs,
        syn::Expr::MethodCall(c) => &c.attrs,
        syn::Expr::If(c) => &c.attrs,
        syn::Expr::Macro(c) => &c.attrs,
        _ => return false,
    };
    is_test_cfg(attrs)
}

fn flatten(t: proc_macro2::TokenTree) -> Vec<String> {
    match t {
        proc_macro2::TokenTree::Group(g) => g.stream().into_iter().flat_map(flatten).collect(),
        proc_macro2::TokenTree::Ident(i) => vec![i.to_string()],
        proc_macro2::TokenTree::Punct(p) => vec![p.as_char().to_string()],
        proc_macro2::TokenTree::Literal(_) => vec![String::new()],
    }
}

impl Crate {
    fn parse(src: &Path) -> Crate {
        let mut c = Crate {
            modules: BTreeMap::new(),
            reexports: BTreeMap::new(),
        };
        let root = src.join("lib.rs");
        let file = parse_file(&root);
        c.module(Vec::new(), &root, src, &file.items);
        // `pub use a::b::Name;` at the root: `crate::Name` is module `a`'s.
        for item in &file.items {
            if let syn::Item::Use(u) = item {
                let mut found = Vec::new();
                collect_names(&mut Vec::new(), &u.tree, &mut found);
                for (path, name) in found {
                    c.reexports.insert(name, path);
                }
            }
        }
        c
    }

    /// Module `here`, whose items are `items` (from `file`); `dir` is where its child
    /// modules' files are.
    fn module(&mut self, here: ModPath, file: &Path, dir: &Path, items: &[syn::Item]) {
        let mut v = Uses { out: Vec::new() };
        for i in items {
            v.visit_item(i);
        }
        let uses = v.out;
        self.modules.insert(
            here.clone(),
            Module {
                file: file.to_path_buf(),
                uses,
            },
        );
        for i in items {
            let syn::Item::Mod(m) = i else { continue };
            if is_test_cfg(&m.attrs) {
                continue;
            }
            let name = m.ident.to_string();
            let mut child = here.clone();
            child.push(name.clone());
            if let Some((_, inline)) = &m.content {
                self.module(child, file, &dir.join(&name), inline);
                continue;
            }
            let explicit = m.attrs.iter().find_map(|a| {
                if !a.path().is_ident("path") {
                    return None;
                }
                match &a.meta {
                    syn::Meta::NameValue(nv) => match &nv.value {
                        syn::Expr::Lit(syn::ExprLit {
                            lit: syn::Lit::Str(s),
                            ..
                        }) => Some(dir.join(s.value())),
                        _ => None,
                    },
                    _ => None,
                }
            });
            let (path, child_dir) = match explicit {
                Some(p) => {
                    let d = p.parent().unwrap().to_path_buf();
                    (p, d)
                }
                None => {
                    let flat = dir.join(format!("{name}.rs"));
                    if flat.exists() {
                        (flat, dir.join(&name))
                    } else {
                        (dir.join(&name).join("mod.rs"), dir.join(&name))
                    }
                }
            };
            let f = parse_file(&path);
            self.module(child, &path, &child_dir, &f.items);
        }
    }

    /// The module a path used in `here` lands in (the longest prefix that is a module),
    /// or None for a path outside the crate.
    fn resolve(&self, here: &ModPath, path: &ModPath) -> Option<ModPath> {
        let mut abs: ModPath = match path[0].as_str() {
            "crate" => Vec::new(),
            "self" => here.clone(),
            "super" => {
                let mut b = here.clone();
                let mut rest = path.iter().peekable();
                while rest.peek().map(|s| s.as_str()) == Some("super") {
                    b.pop();
                    rest.next();
                }
                b.extend(rest.cloned());
                return self.longest(&b);
            }
            _ => return None,
        };
        abs.extend(path[1..].iter().cloned());
        if path[0] == "crate" {
            if let Some(name) = abs.first() {
                if !self.modules.contains_key(&vec![name.clone()]) {
                    // `crate::Name` re-exported at the root.
                    return self.reexports.get(name).cloned();
                }
            }
        }
        self.longest(&abs)
    }

    fn longest(&self, abs: &ModPath) -> Option<ModPath> {
        (1..=abs.len())
            .rev()
            .map(|k| abs[..k].to_vec())
            .find(|m| self.modules.contains_key(m))
    }

    /// Every edge `from → to` between two different modules, with the first place seen.
    fn edges(&self) -> BTreeMap<(ModPath, ModPath), String> {
        let mut out = BTreeMap::new();
        for (here, m) in &self.modules {
            for (path, what) in &m.uses {
                let Some(to) = self.resolve(here, path) else {
                    continue;
                };
                if &to == here {
                    continue;
                }
                out.entry((here.clone(), to)).or_insert_with(|| {
                    format!("{} ({what} {})", m.file.display(), path.join("::"))
                });
            }
        }
        out
    }
}

/// Names `use a::b::{C, d::E}` brings in, with the top-level module each comes from.
fn collect_names(prefix: &mut Vec<String>, t: &syn::UseTree, out: &mut Vec<(ModPath, String)>) {
    match t {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            collect_names(prefix, &p.tree, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => {
            if let Some(first) = prefix.first() {
                out.push((vec![first.clone()], n.ident.to_string()));
            }
        }
        syn::UseTree::Rename(r) => {
            if let Some(first) = prefix.first() {
                out.push((vec![first.clone()], r.rename.to_string()));
            }
        }
        syn::UseTree::Glob(_) => {}
        syn::UseTree::Group(g) => {
            for t in &g.items {
                collect_names(prefix, t, out);
            }
        }
    }
}

fn parse_file(path: &Path) -> syn::File {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    syn::parse_file(&text).unwrap_or_else(|e| panic!("parsing {}: {e}", path.display()))
}

/// Ranks broken in `krate` (an edge to a module of the same or a higher rank, or to a
/// top-level module missing from `ranks`), then cycles among submodules.
fn violations(krate: &Crate, ranks: &[(&str, u32)]) -> Vec<String> {
    let rank: BTreeMap<&str, u32> = ranks.iter().copied().collect();
    let mut bad = Vec::new();
    for top in krate.modules.keys().filter(|m| m.len() == 1) {
        if !rank.contains_key(top[0].as_str()) {
            bad.push(format!(
                "module `{}` has no rank: add it to the stated order",
                top[0]
            ));
        }
    }
    let edges = krate.edges();
    for ((from, to), at) in &edges {
        if from.is_empty() || to.is_empty() || from[0] == to[0] {
            continue;
        }
        let (Some(a), Some(b)) = (rank.get(from[0].as_str()), rank.get(to[0].as_str())) else {
            continue;
        };
        if a <= b {
            bad.push(format!(
                "`{}` (rank {a}) uses `{}` (rank {b}): {at}",
                from.join("::"),
                to.join("::")
            ));
        }
    }
    // Below the top: per parent, the graph among its children (an edge between two
    // modules counts between their ancestors that are siblings).
    let mut sib: BTreeMap<ModPath, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    let mut why: BTreeMap<(ModPath, String, String), String> = BTreeMap::new();
    for ((from, to), at) in &edges {
        let common = from.iter().zip(to).take_while(|(a, b)| a == b).count();
        if common == 0 || common >= from.len() || common >= to.len() {
            continue; // top level (ranked above), or a module using its own ancestor
        }
        let parent = from[..common].to_vec();
        let (a, b) = (from[common].clone(), to[common].clone());
        why.entry((parent.clone(), a.clone(), b.clone()))
            .or_insert_with(|| at.clone());
        sib.entry(parent)
            .or_default()
            .entry(a)
            .or_default()
            .insert(b);
    }
    for (parent, g) in &sib {
        if let Some(cycle) = find_cycle(g) {
            let steps: Vec<String> = cycle
                .windows(2)
                .map(|w| {
                    format!(
                        "{} -> {}: {}",
                        w[0],
                        w[1],
                        why[&(parent.clone(), w[0].clone(), w[1].clone())]
                    )
                })
                .collect();
            bad.push(format!(
                "cycle among the submodules of `{}`:\n    {}",
                parent.join("::"),
                steps.join("\n    ")
            ));
        }
    }
    bad
}

fn find_cycle(g: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn dfs(
        v: &str,
        g: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(v.to_string(), 1);
        stack.push(v.to_string());
        for w in g.get(v).into_iter().flatten() {
            match state.get(w.as_str()).copied().unwrap_or(0) {
                1 => {
                    let at = stack.iter().position(|s| s == w).unwrap();
                    let mut c = stack[at..].to_vec();
                    c.push(w.clone());
                    return Some(c);
                }
                0 => {
                    if let Some(c) = dfs(w, g, state, stack) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(v.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for v in g.keys() {
        if !state.contains_key(v) {
            if let Some(c) = dfs(v, g, &mut state, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

fn crate_src(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(name)
        .join("src")
}

fn assert_layered(name: &str, ranks: &[(&str, u32)]) {
    let krate = Crate::parse(&crate_src(name));
    assert!(
        krate.modules.len() > ranks.len(),
        "{name}: parsed only {} modules",
        krate.modules.len()
    );
    let bad = violations(&krate, ranks);
    assert!(
        bad.is_empty(),
        "{name}: {} layer violation(s):\n  {}",
        bad.len(),
        bad.join("\n  ")
    );
}

#[test]
fn the_engine_is_layered() {
    assert_layered("inpage", ENGINE);
}

#[test]
fn the_bench_is_layered() {
    assert_layered("inpage-bench", BENCH);
}

#[test]
fn the_fuzzer_is_layered() {
    assert_layered("inpage-fuzz", FUZZ);
}

/// The checker finds what it must: an upward edge and a cycle below the top, planted in
/// a crate written here.
#[test]
fn the_checker_sees_an_upward_edge_and_a_cycle() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::write(
        src.join("lib.rs"),
        "mod low;\nmod high;\npub use high::Thing;\n",
    )
    .unwrap();
    std::fs::create_dir(src.join("low")).unwrap();
    std::fs::write(
        src.join("low/mod.rs"),
        "mod a;\nmod b;\nfn f() -> crate::Thing { todo!() }\n#[cfg(test)]\nmod t { use crate::high::x; }\n",
    )
    .unwrap();
    std::fs::write(src.join("low/a.rs"), "use super::b::B;\npub struct A;\n").unwrap();
    std::fs::write(
        src.join("low/b.rs"),
        "pub struct B;\nfn g() { let _ = format!(\"{:?}\", crate::low::a::A); }\n",
    )
    .unwrap();
    std::fs::write(src.join("high.rs"), "pub struct Thing;\nuse crate::low;\n").unwrap();
    let krate = Crate::parse(src);
    let bad = violations(&krate, &[("low", 0), ("high", 1)]);
    assert_eq!(bad.len(), 2, "{bad:#?}");
    assert!(
        bad[0].contains("`low` (rank 0) uses `high` (rank 1)"),
        "{bad:#?}"
    );
    assert!(
        bad[1].contains("cycle among the submodules of `low`"),
        "{bad:#?}"
    );
    // Stated the other way round, the ranks hold, and only the cycle is left.
    let bad = violations(&krate, &[("low", 1), ("high", 0)]);
    assert_eq!(bad.len(), 2, "high uses low too: {bad:#?}");
}
