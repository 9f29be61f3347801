//! What a user copies compiles with the crate they depend on: a code example in one of our
//! crate's docs (its rustdoc, its guides in `docs/`, its README) names our other crates only
//! through that crate's re-exports (`ratekeeper_tower::core`, `ratekeeper_axum::core`,
//! `ratekeeper_axum::tower`). A user of `ratekeeper-axum` alone has no `ratekeeper_core`
//! to import, though the crate's own doctests, built with its dependencies, would compile.

use std::path::Path;

/// Each published crate's folder, and the crates of ours its examples must not name.
const CRATES: &[(&str, &[&str])] = &[
    ("rate-limit-core", &["ratekeeper_tower", "ratekeeper_axum"]),
    ("rate-limit-tower", &["ratekeeper_core", "ratekeeper_axum"]),
    ("rate-limit-axum", &["ratekeeper_core", "ratekeeper_tower"]),
];

/// The Rust lines of `text`'s code blocks: a fence with no language or a Rust one, in
/// Markdown, or in `//!` and `///` comments of a source file.
fn code_lines(text: &str, source: bool) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let (mut fenced, mut rust) = (false, false);
    for (i, line) in text.lines().enumerate() {
        let body = if source {
            let t = line.trim_start();
            match t.strip_prefix("//!").or_else(|| t.strip_prefix("///")) {
                Some(b) => b.strip_prefix(' ').unwrap_or(b),
                None => {
                    fenced = false;
                    continue;
                }
            }
        } else {
            line
        };
        let t = body.trim();
        if let Some(lang) = t.strip_prefix("```") {
            if fenced {
                fenced = false;
            } else {
                fenced = true;
                let lang = lang.trim();
                rust = lang.is_empty()
                    || lang.split(',').any(|w| {
                        ["rust", "no_run", "ignore", "should_panic", "compile_fail"]
                            .contains(&w.trim())
                    });
            }
            continue;
        }
        if fenced && rust {
            out.push((i + 1, body.to_owned()));
        }
    }
    out
}

fn visit(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            visit(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs" || e == "md") {
            out.push(path);
        }
    }
}

#[test]
fn examples_name_our_other_crates_only_through_the_crates_re_exports() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut found = Vec::new();
    let mut blocks = 0;
    for (folder, foreign) in CRATES {
        let mut paths = Vec::new();
        for sub in ["src", "docs"] {
            let dir = root.join(folder).join(sub);
            if dir.is_dir() {
                visit(&dir, &mut paths);
            }
        }
        paths.push(root.join(folder).join("README.md"));
        for path in paths {
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            let lines = code_lines(&text, path.extension().is_some_and(|e| e == "rs"));
            blocks += lines.len();
            for (n, line) in lines {
                if let Some(name) = foreign.iter().find(|f| line.contains(&format!("{f}::"))) {
                    let rel = path.strip_prefix(root).unwrap().display();
                    found.push(format!("{rel}:{n}: {name}: {}", line.trim()));
                }
            }
        }
    }
    assert!(
        blocks > 500,
        "only {blocks} lines of examples read: the reader is broken"
    );
    assert!(
        found.is_empty(),
        "examples naming a crate their reader lacks:\n{}",
        found.join("\n")
    );
}
