//! No two files of one folder import each other, in any crate of the workspace (its
//! libraries, the testkit, the examples and the tests' shared code), the crate's top level
//! included: a circle means neither file can be read, moved or split without the other.
//!
//! It reads the source as `architecture.rs` does (`house`): a `crate::x` path or group, a
//! `super::` climb, and a name the crate root re-exports count as an import of the module
//! that defines it; comments and `#[cfg(test)]` code are left out.

mod house;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use house::{crate_paths, files, module_path, strip, super_paths, test_files};

/// Every crate's `src/`, from the workspace root.
const CRATES: &[&str] = &[
    "rate-limit-core/src",
    "rate-limit-tower/src",
    "rate-limit-axum/src",
    "rate-limit-admin/src",
    "testkit/src",
    "examples/src",
    "examples/grpc/src",
    "tests/src",
];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the crate sits in the workspace")
        .to_path_buf()
}

/// Folder → file → the sibling files it imports, for one crate's `src/`.
type Graph = BTreeMap<Vec<String>, BTreeMap<String, BTreeSet<String>>>;

fn graph(root: &Path) -> Graph {
    let mut all = BTreeMap::new();
    files(root, root, &mut all);
    assert!(!all.is_empty(), "{} holds no source", root.display());
    let tests = test_files(&all);
    let files: BTreeMap<String, String> = all
        .iter()
        .filter(|(p, _)| !tests.contains(*p))
        .map(|(p, t)| (p.clone(), strip(t)))
        .collect();
    let modules: Vec<Vec<String>> = files.keys().map(|p| module_path(p)).collect();
    let siblings = |folder: &[String]| -> BTreeSet<String> {
        modules
            .iter()
            .filter(|m| m.len() == folder.len() + 1 && m.starts_with(folder))
            .map(|m| m[folder.len()].clone())
            .collect()
    };
    let root_names = root_names(&files);
    let top = siblings(&[]);
    let resolve = |word: &str| -> Option<String> {
        if top.contains(word) {
            Some(word.to_owned())
        } else {
            root_names.get(word).cloned()
        }
    };
    let mut edges = Graph::new();
    for (path, text) in &files {
        let me = module_path(path);
        for cut in 0..me.len() {
            let (folder, mine) = (&me[..cut], &me[cut]);
            let mut named = BTreeSet::new();
            for (ups, word) in super_paths(text) {
                if ups == me.len() - cut {
                    named.extend(if folder.is_empty() {
                        resolve(&word)
                    } else {
                        Some(word)
                    });
                }
            }
            if folder.is_empty() {
                named.extend(crate_paths(text).iter().filter_map(|w| resolve(w)));
            } else {
                let prefix = format!("crate::{}::", folder.join("::"));
                let mut rest = text.as_str();
                while let Some(at) = rest.find(&prefix) {
                    rest = &rest[at + prefix.len()..];
                    named.insert(
                        rest.chars()
                            .take_while(|c| c.is_alphanumeric() || *c == '_')
                            .collect(),
                    );
                }
            }
            let known = siblings(folder);
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
    edges
}

/// Names the crate root re-exports → the top-level module that defines them.
fn root_names(files: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let mut root_names = BTreeMap::new();
    for root_file in ["lib.rs", "main.rs"] {
        let Some(text) = files.get(root_file) else {
            continue;
        };
        let mut rest = text.as_str();
        while let Some(at) = rest.find("pub use ") {
            rest = &rest[at + "pub use ".len()..];
            let stmt = &rest[..rest.find(';').unwrap_or(rest.len())];
            let stmt = stmt.strip_prefix("crate::").unwrap_or(stmt);
            let module: String = stmt
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            for name in stmt.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
                if !name.is_empty() && name != module {
                    root_names.entry(name.to_owned()).or_insert(module.clone());
                }
            }
        }
    }
    root_names
}

/// Each circle, as `folder: a -> b -> a`.
fn circles(edges: &Graph) -> Vec<String> {
    let mut found = Vec::new();
    for (folder, graph) in edges {
        for start in graph.keys() {
            let mut stack = vec![(start.clone(), vec![start.clone()])];
            let mut seen = BTreeSet::new();
            while let Some((at, trail)) = stack.pop() {
                for next in graph.get(&at).into_iter().flatten() {
                    if next == start {
                        found.push(format!(
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
    found.sort();
    found.dedup();
    found
}

#[test]
fn the_files_of_one_folder_import_each_other_without_a_circle() {
    let mut all = Vec::new();
    for krate in CRATES {
        let edges = graph(&workspace().join(krate));
        all.extend(circles(&edges).into_iter().map(|c| format!("{krate}: {c}")));
    }
    assert!(
        all.is_empty(),
        "circles among sibling files:\n{}",
        all.join("\n")
    );
}

/// The check finds what it looks for: two files of a scratch crate that import each other,
/// one through a root re-export and one through `super::`, and a third that only imports.
#[test]
fn a_circle_through_a_re_export_and_super_is_found() {
    let dir = std::env::temp_dir().join(format!("circles-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("a")).unwrap();
    let write = |p: &str, t: &str| std::fs::write(dir.join(p), t).unwrap();
    write("lib.rs", "mod a;\nmod b;\nmod c;\npub use b::Thing;\n");
    write("a/mod.rs", "mod x;\nmod y;\nuse crate::Thing;\n");
    write("a/x.rs", "use super::y::Y;\npub struct X;\n");
    write("a/y.rs", "use super::x::X;\npub struct Y;\n");
    write("b.rs", "use super::a;\npub struct Thing;\n");
    write("c.rs", "use crate::a;\n");
    let found = circles(&graph(&dir));
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(
        found,
        [
            ": a -> b -> a",
            ": b -> a -> b",
            "a: x -> y -> x",
            "a: y -> x -> y"
        ],
        "{found:?}"
    );
}
