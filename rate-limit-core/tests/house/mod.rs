//! Reading a crate's source for its imports, shared by the architecture tests: which
//! modules a file names (`crate::` paths and groups, `super::` climbs), with comments and
//! `#[cfg(test)]` code left out.

#![allow(dead_code)] // each test file uses its own part

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Every `.rs` file under `dir`, by path relative to `root` (a crate's `src/`), with its
/// text.
pub(crate) fn files(root: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
    for entry in std::fs::read_dir(dir).expect("src/ is readable") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            files(root, &path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let rel = path.strip_prefix(root).expect("under src/");
            let text = std::fs::read_to_string(&path).expect("a readable file");
            out.insert(rel.to_string_lossy().replace('\\', "/"), text);
        }
    }
}

/// The text without comments and without `#[cfg(test)]` modules written inline.
pub(crate) fn strip(text: &str) -> String {
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
pub(crate) fn test_files(all: &BTreeMap<String, String>) -> BTreeSet<String> {
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
pub(crate) fn crate_paths(text: &str) -> Vec<String> {
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
pub(crate) fn super_paths(text: &str) -> Vec<(usize, String)> {
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
pub(crate) fn module_path(path: &str) -> Vec<String> {
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
