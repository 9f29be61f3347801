//! The house's shape, checked on every run (docs/ARCHITECTURE.md, "core's layers"): each module
//! of `src/` imports only from the modules below it, the Redis tree only from the protocol,
//! the vocabulary and base, and the limiter names no remote backend (circles, in every
//! crate: `circles.rs`).
//!
//! It reads the source: a `crate::x` path, a `crate::{..}` group, a `super::` path that
//! climbs to the crate root, and a name the root re-exports count as an import of the
//! module that defines them. Comments and `#[cfg(test)]` modules are left out.

mod house;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use house::{crate_paths, files, module_path, strip, super_paths, test_files};

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

/// Backend names the services that share state (the fleet, the shared pacer) must not
/// mention: they hold a store by the contract (`Store` + `SharedState`), whichever it is.
const SERVICES_MUST_NOT_NAME: &[&str] = &[
    "RedisStore",
    "BoxStore",
    "MemoryStore",
    "store::redis",
    "AnyStore::Memory",
    "AnyStore::Redis",
];

/// Names the limiter must not mention: it runs over any store, and falls back to the
/// in-process memory store (the one backend it names, by design: `AnyStore::Memory` of its
/// fallback is allowed).
const LIMITER_MUST_NOT_NAME: &[&str] =
    &["RedisStore", "BoxStore", "store::redis", "AnyStore::Redis"];

/// Where each list holds: a file, or every file under a folder.
const MUST_NOT_NAME: &[(&str, &[&str])] = &[
    ("limiter/", LIMITER_MUST_NOT_NAME),
    ("fleet/", SERVICES_MUST_NOT_NAME),
    ("pacer.rs", SERVICES_MUST_NOT_NAME),
];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
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
        files(&src(), &src(), &mut all);
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

/// Each file that names a backend its place forbids, and the name.
fn backends_named(files: &BTreeMap<String, String>) -> Vec<String> {
    let mut named = Vec::new();
    for (path, text) in files {
        for (place, names) in MUST_NOT_NAME {
            let here = if place.ends_with('/') {
                path.starts_with(place)
            } else {
                path == place
            };
            for name in names.iter().filter(|n| here && text.contains(*n)) {
                named.push(format!("{path} names {name}"));
            }
        }
    }
    named
}

#[test]
fn the_limiter_and_the_shared_services_name_no_backend() {
    let house = House::read();
    let named = backends_named(&house.files);
    assert!(named.is_empty(), "{}", named.join("\n"));
}

#[test]
fn a_backend_named_in_a_service_is_caught() {
    let planted = |path: &str, text: &str| {
        let files = BTreeMap::from([(path.to_owned(), text.to_owned())]);
        backends_named(&files)
    };
    assert_eq!(
        planted("fleet/run.rs", "if let AnyStore::Redis(s) = &self.store {}"),
        ["fleet/run.rs names AnyStore::Redis"]
    );
    assert_eq!(
        planted("pacer.rs", "use crate::store::redis::RedisStore;").len(),
        2
    );
    assert!(
        planted(
            "limiter/slot.rs",
            "AnyStore::Memory(self.fallback().clone())"
        )
        .is_empty()
    );
    assert!(
        planted("budget.rs", "RedisStore").is_empty(),
        "not a place with a list"
    );
}

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
