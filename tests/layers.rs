//! The module layers of `src/` (ARCHITECTURE.md's import rule): each top-level module may import
//! only modules of lower layers, so the crate has no import cycle across top-level modules.
//! This test reads every `crate::<module>` path outside `#[cfg(test)]` code and fails on any
//! edge that points upward or sideways, naming the file and line.
//!
//! `cargo test --test layers -- --nocapture` also prints the edge counts between modules.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Lowest first. A module may use modules of earlier rows only (and itself).
const LAYERS: &[&[&str]] = &[
    // Helpers with no knowledge of the server.
    &["util", "glob"],
    &["resp", "alloc", "log"],
    // Values and the keyspace.
    &["types"],
    &["db"],
    // What a command is (flags, arguments, errors, docs), apart from what it does.
    &["spec"],
    &["config"],
    // Services that own one piece of state and know nothing of the executor.
    &["stats", "slowlog", "latency", "proctitle", "daemon", "pubsub", "acl", "functions", "cluster", "watchdog"],
    // Persistence formats.
    &["rdb", "aof"],
    // The single owner of the state: dispatch, clients, scripts, propagation, snapshots.
    &["executor"],
    &["info"],
    // The command families (handlers and their table rows).
    &["commands"],
    // Listeners and connection tasks: nothing imports them.
    &["server"],
];

/// Items of the crate root that are constants, not modules.
const ROOT_ITEMS: &[&str] = &["REDIS_VERSION", "FERRODIS_VERSION"];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|row| row.contains(&module))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file belongs to (`src/executor/call.rs` → `executor`); None for the
/// crate root and the binaries, which sit above every layer.
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).ok()?;
    let mut parts = rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned());
    let first = parts.next()?;
    if rel.components().count() == 1 {
        let name = first.strip_suffix(".rs")?.to_string();
        return (name != "lib" && name != "main").then_some(name);
    }
    (first != "bin").then_some(first)
}

/// `crate::<name>` references in `text`, with line numbers, up to the first `#[cfg(test)]`
/// (unit tests may reach anything).
fn crate_references(text: &str) -> Vec<(usize, String)> {
    let code = text.split("#[cfg(test)]").next().unwrap_or("");
    let mut out = Vec::new();
    for (n, line) in code.lines().enumerate() {
        let line = line.split("//").next().unwrap_or("");
        let mut rest = line;
        while let Some(at) = rest.find("crate::") {
            let preceded_by_ident =
                rest[..at].chars().next_back().is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$');
            rest = &rest[at + "crate::".len()..];
            if preceded_by_ident {
                continue;
            }
            let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            if rest.starts_with('{') {
                // `use crate::{a, b}` would hide its targets from this check: write one path each.
                out.push((n + 1, "{grouped import}".to_string()));
            } else if !name.is_empty() {
                out.push((n + 1, name));
            }
        }
    }
    out
}

#[test]
fn no_module_imports_a_higher_layer() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    assert!(files.len() > 50, "expected the crate's sources under {}", src.display());

    let mut edges: BTreeMap<(String, String), usize> = BTreeMap::new();
    let mut violations = Vec::new();
    for file in &files {
        let Some(module) = module_of(&src, file) else { continue };
        let Some(own) = layer_of(&module) else {
            violations.push(format!("{}: module `{module}` is in no layer of tests/layers.rs", file.display()));
            continue;
        };
        let text = std::fs::read_to_string(file).expect("readable source");
        for (line, target) in crate_references(&text) {
            if target == module || ROOT_ITEMS.contains(&target.as_str()) {
                continue;
            }
            *edges.entry((module.clone(), target.clone())).or_default() += 1;
            match layer_of(&target) {
                Some(t) if t < own => {}
                Some(_) => violations.push(format!(
                    "{}:{line}: `{module}` imports `crate::{target}`, which is not below it",
                    file.display()
                )),
                None => violations.push(format!("{}:{line}: `crate::{target}` is in no layer", file.display())),
            }
        }
    }
    for ((from, to), n) in &edges {
        println!("{from} -> {to}: {n}");
    }
    assert!(violations.is_empty(), "layering violations:\n{}", violations.join("\n"));
}

#[test]
fn references_are_found_in_code_but_not_in_comments_or_tests() {
    let text = "use crate::db::Db;\nlet x = crate::util::clock::unix_ms(); // crate::server\n\
                $crate::resp is a macro path\n#[cfg(test)]\nmod tests { use crate::server; }\n";
    let found = crate_references(text);
    assert_eq!(found, vec![(1, "db".to_string()), (2, "util".to_string())]);
}
