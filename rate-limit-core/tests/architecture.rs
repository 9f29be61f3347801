//! The house's shape, checked on every run (docs/ARCHITECTURE.md, "core's layers"): each module
//! of `src/` imports only from the modules below it, the Redis tree only from the protocol,
//! the vocabulary and base, the limiter names no remote backend, and the files of one
//! folder import each other without a circle.
//!
//! It reads the source: a `crate::x` path, a `crate::{..}` group, a `super::` path that
//! climbs to the crate root, and a name the root re-exports count as an import of the
//! module that defines them. Comments and `#[cfg(test)]` modules are left out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Core's modules, lowest first. A module may import only those listed before it.
const LAYERS: &[(&str, &[&str])] = &[
    ("base", &["error", "name", "clock", "net", "digest"]),
    ("vocabulary", &["principal", "top", "limit", "key", "chain"]),
    ("protocol", &["protocol"]),
    ("algorithms", &["algorithm"]),
    ("stores", &["store"]),
    ("limiter", &["limiter"]),
    (
        "services",
        &["adaptive", "pacer", "budget", "config", "fleet"],
    ),
    ("test utilities", &["testing"]),
    ("guides", &["guide"]),
];

/// The layers the Redis tree may import from (so it can become a crate of its own).
const REDIS_MAY_USE: &[&str] = &["base", "vocabulary", "protocol"];

/// Names the limiter must not mention: it runs over any store, and falls back to the
/// in-process memory store (the one backend it names, by design).
const LIMITER_MUST_NOT_NAME: &[&str] = &["RedisStore", "BoxStore", "store::redis"];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file under `dir`, by path relative to `src/`, with its text.
fn files(dir: &Path, out: &mut BTreeMap<String, String>) {
    for entry in std::fs::read_dir(dir).expect("src/ is readable") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let rel = path.strip_prefix(src()).expect("under src/");
            let text = std::fs::read_to_string(&path).expect("a readable file");
            out.insert(rel.to_string_lossy().replace('\\', "/"), text);
        }
    }
}

/// The text without comments and without `#[cfg(test)]` modules written inline.
fn strip(text: &str) -> String {
    let mut out: String = text
        .lines()
        .map(|l| {
            if l.trim_start().starts_with("//") {
                ""
            } else {
                l
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    while let Some(at) = out.find("#[cfg(test)]") {
        let after = &out[at..];
        let end = match (after.find('{'), after.find(';')) {
            (Some(b), Some(s)) if s < b => at + s + 1,
            (Some(b), _) if after[..b].contains("mod ") => {
                let mut depth = 0;
                let mut end = out.len();
                for (i, c) in out[at + b..].char_indices() {
                    depth += match c {
                        '{' => 1,
                        '}' => -1,
                        _ => 0,
                    };
                    if depth == 0 {
                        end = at + b + i + 1;
                        break;
                    }
                }
                end
            }
            _ => at + "#[cfg(test)]".len(),
        };
        out.replace_range(at..end, "");
    }
    out
}

/// Files declared as `#[cfg(test)] mod x;` (and what lies under them).
fn test_files(all: &BTreeMap<String, String>) -> BTreeSet<String> {
    let mut tests = BTreeSet::new();
    for (path, text) in all {
        let mut rest = text.as_str();
        while let Some(at) = rest.find("#[cfg(test)]") {
            rest = &rest[at + "#[cfg(test)]".len()..];
            let decl = rest.trim_start();
            let Some(decl) = decl.strip_prefix("mod ") else {
                continue;
            };
            let Some(end) = decl.find(';') else { continue };
            let name = decl[..end].trim();
            if name.contains(char::is_whitespace) || name.contains('{') {
                continue;
            }
            let dir = match path.strip_suffix("mod.rs").or(path.strip_suffix("lib.rs")) {
                Some(d) => d.to_owned(),
                None => format!("{}/", path.trim_end_matches(".rs")),
            };
            for p in all.keys() {
                if *p == format!("{dir}{name}.rs") || p.starts_with(&format!("{dir}{name}/")) {
                    tests.insert(p.clone());
                }
            }
        }
    }
    tests
}

/// The first path segment after each `crate::` (inside a `crate::{..}` group: each item's).
fn crate_paths(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().next_back();
        rest = &rest[at + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue; // `$crate::` or a longer identifier
        }
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 1;
            let mut item_start = true;
            let mut word = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 1 => item_start = true,
                    _ => {}
                }
                if depth == 0 {
                    if item_start && !word.is_empty() {
                        out.push(std::mem::take(&mut word));
                    }
                    break;
                }
                if depth == 1 && (c.is_alphanumeric() || c == '_') {
                    word.push(c);
                } else if !word.is_empty() {
                    if item_start {
                        out.push(std::mem::take(&mut word));
                        item_start = false;
                    }
                    word.clear();
                }
            }
        } else {
            let word: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            out.push(word);
        }
    }
    out
}

/// Names `super::` paths reach after climbing `ups` levels, for each climb in `text`.
fn super_paths(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("super::") {
        let before = rest[..at].chars().next_back();
        let mut tail = &rest[at..];
        let mut ups = 0;
        while let Some(t) = tail.strip_prefix("super::") {
            ups += 1;
            tail = t;
        }
        rest = tail;
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        let word: String = tail
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        out.push((ups, word));
    }
    out
}

/// The module a path of `src/` belongs to, as folders: `store/redis/conn.rs` is
/// `[store, redis, conn]`; a `mod.rs` is its folder's module.
fn module_path(path: &str) -> Vec<String> {
    let mut parts: Vec<String> = path
        .trim_end_matches(".rs")
        .split('/')
        .map(str::to_owned)
        .collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
        parts.pop();
    }
    parts
}

struct House {
    /// Source files (tests left out), stripped.
    files: BTreeMap<String, String>,
    /// Top-level module → its rank (index in the flattened `LAYERS`) and layer.
    rank: BTreeMap<&'static str, (usize, &'static str)>,
    /// Names the crate root re-exports → the module that defines them.
    root_names: BTreeMap<String, String>,
}

impl House {
    fn read() -> Self {
        let mut all = BTreeMap::new();
        files(&src(), &mut all);
        let tests = test_files(&all);
        let files: BTreeMap<_, _> = all
            .iter()
            .filter(|(p, _)| !tests.contains(*p))
            .map(|(p, t)| (p.clone(), strip(t)))
            .collect();
        let rank = LAYERS
            .iter()
            .flat_map(|(layer, mods)| mods.iter().map(move |m| (*m, *layer)))
            .enumerate()
            .map(|(i, (m, layer))| (m, (i, layer)))
            .collect();
        let mut root_names = BTreeMap::new();
        let lib = &files["lib.rs"];
        let mut rest = lib.as_str();
        while let Some(at) = rest.find("pub use ") {
            rest = &rest[at + "pub use ".len()..];
            let end = rest.find(';').unwrap_or(rest.len());
            let stmt = &rest[..end];
            let module: String = stmt
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            for name in stmt.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
                if name.chars().next().is_some_and(char::is_uppercase) {
                    root_names.entry(name.to_owned()).or_insert(module.clone());
                }
            }
        }
        Self {
            files,
            rank,
            root_names,
        }
    }

    /// Top-level modules a file names (itself excluded), with the paths that name them.
    fn imports(&self, path: &str) -> BTreeSet<String> {
        let text = &self.files[path];
        let me = module_path(path);
        let resolve = |word: &str| -> Option<String> {
            if self.rank.contains_key(word) {
                Some(word.to_owned())
            } else {
                self.root_names.get(word).cloned()
            }
        };
        let mut out = BTreeSet::new();
        for word in crate_paths(text) {
            out.extend(resolve(&word));
        }
        // `super::` from a file of module depth d climbs to the root after d levels.
        for (ups, word) in super_paths(text) {
            if ups >= me.len() {
                out.extend(resolve(&word));
            }
        }
        out.retain(|m| me.first() != Some(m));
        out
    }
}

#[test]
fn every_core_module_has_a_place_in_the_layers() {
    let house = House::read();
    let mut missing = Vec::new();
    for path in house.files.keys() {
        let Some(top) = module_path(path).first().cloned() else {
            continue;
        };
        if !house.rank.contains_key(top.as_str()) {
            missing.push(top);
        }
    }
    missing.sort();
    missing.dedup();
    assert!(
        missing.is_empty(),
        "modules without a layer (add them to LAYERS in tests/architecture.rs): {missing:?}"
    );
}

#[test]
fn no_core_module_imports_one_above_it() {
    let house = House::read();
    let mut upward = Vec::new();
    for path in house.files.keys() {
        let Some(me) = module_path(path).first().cloned() else {
            continue;
        };
        let Some(&(my_rank, my_layer)) = house.rank.get(me.as_str()) else {
            continue;
        };
        for them in house.imports(path) {
            let (their_rank, their_layer) = house.rank[them.as_str()];
            if their_rank > my_rank {
                upward.push(format!(
                    "{path} ({me}, {my_layer}) imports {them} ({their_layer}), which sits above it"
                ));
            }
        }
    }
    assert!(upward.is_empty(), "upward imports:\n{}", upward.join("\n"));
}

#[test]
fn the_redis_tree_imports_only_the_protocol_the_vocabulary_and_base() {
    let house = House::read();
    let mut wrong = Vec::new();
    for (path, text) in &house.files {
        if !path.starts_with("store/redis/") {
            continue;
        }
        for them in house.imports(path) {
            let (_, layer) = house.rank[them.as_str()];
            if !REDIS_MAY_USE.contains(&layer) {
                wrong.push(format!("{path} imports {them} ({layer})"));
            }
        }
        // Nothing else of the stores: not the memory store, not `AnyStore`.
        for line in text.lines().filter(|l| l.contains("crate::store::")) {
            if !line.contains("crate::store::redis") {
                wrong.push(format!("{path}: {}", line.trim()));
            }
        }
        let depth = module_path(path).len();
        for (ups, word) in super_paths(text) {
            if ups == depth - 1 && word != "redis" {
                wrong.push(format!(
                    "{path} climbs out of the Redis tree to store::{word}"
                ));
            }
        }
    }
    wrong.sort();
    wrong.dedup();
    assert!(
        wrong.is_empty(),
        "the Redis tree reaches out:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_limiter_names_no_remote_backend() {
    let house = House::read();
    let mut named = Vec::new();
    for (path, text) in &house.files {
        if !path.starts_with("limiter/") {
            continue;
        }
        for name in LIMITER_MUST_NOT_NAME {
            if text.contains(name) {
                named.push(format!("{path} names {name}"));
            }
        }
    }
    assert!(named.is_empty(), "{}", named.join("\n"));
}

#[test]
fn the_files_of_one_folder_import_each_other_without_a_circle() {
    let house = House::read();
    // Folder → sibling → siblings it imports.
    let mut edges: BTreeMap<Vec<String>, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    let siblings = |folder: &[String]| -> BTreeSet<String> {
        house
            .files
            .keys()
            .map(|p| module_path(p))
            .filter(|m| m.len() == folder.len() + 1 && m.starts_with(folder))
            .map(|m| m[folder.len()].clone())
            .collect()
    };
    for (path, text) in &house.files {
        let me = module_path(path);
        // Each enclosing folder of this file: the sibling it sits in, and what it imports.
        for cut in 0..me.len() {
            let folder = &me[..cut];
            let mine = &me[cut];
            let known = siblings(folder);
            let mut named = BTreeSet::new();
            for (ups, word) in super_paths(text) {
                if ups == me.len() - cut {
                    named.insert(word);
                }
            }
            let prefix = format!("crate::{}", folder.join("::"));
            let mut rest = text.as_str();
            while !folder.is_empty() {
                let Some(at) = rest.find(&format!("{prefix}::")) else {
                    break;
                };
                rest = &rest[at + prefix.len() + 2..];
                let word: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                named.insert(word);
            }
            if folder.is_empty() {
                continue; // top-level modules: the layers test
            }
            for word in named {
                if known.contains(&word) && word != *mine {
                    edges
                        .entry(folder.to_vec())
                        .or_default()
                        .entry(mine.clone())
                        .or_default()
                        .insert(word);
                }
            }
        }
    }
    let mut circles = Vec::new();
    for (folder, graph) in &edges {
        for start in graph.keys() {
            // A path from `start` back to itself.
            let mut stack = vec![(start.clone(), vec![start.clone()])];
            let mut seen = BTreeSet::new();
            while let Some((at, trail)) = stack.pop() {
                for next in graph.get(&at).into_iter().flatten() {
                    if next == start {
                        circles.push(format!(
                            "{}: {} -> {next}",
                            folder.join("/"),
                            trail.join(" -> ")
                        ));
                    } else if seen.insert(next.clone()) {
                        let mut t = trail.clone();
                        t.push(next.clone());
                        stack.push((next.clone(), t));
                    }
                }
            }
        }
    }
    circles.sort();
    circles.dedup();
    assert!(
        circles.is_empty(),
        "circles among sibling files:\n{}",
        circles.join("\n")
    );
}

/// docs/ARCHITECTURE.md's table of layers, as (layer, modules), top layer first.
fn documented_layers() -> Vec<(String, Vec<String>)> {
    let dir = env!("CARGO_MANIFEST_DIR");
    let text = std::fs::read_to_string(format!("{dir}/../docs/ARCHITECTURE.md")).unwrap();
    text.lines()
        .skip_while(|l| !l.starts_with("| layer |"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|row| {
            let cells: Vec<&str> = row.split('|').map(str::trim).collect();
            let modules = cells[2]
                .split(',')
                .map(|m| m.trim().trim_matches('`').to_owned());
            (cells[1].to_owned(), modules.collect())
        })
        .collect()
}

#[test]
fn the_architecture_document_names_the_layers_the_test_enforces() {
    let enforced: Vec<(String, Vec<String>)> = LAYERS
        .iter()
        .rev()
        .map(|(layer, modules)| {
            let modules = modules.iter().map(|m| (*m).to_owned()).collect();
            ((*layer).to_owned(), modules)
        })
        .collect();
    assert_eq!(
        documented_layers(),
        enforced,
        "docs/ARCHITECTURE.md against LAYERS"
    );
}
