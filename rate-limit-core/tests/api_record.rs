//! The API record's reader (`scripts/api-record.py`, which `scripts/api.sh --check` runs in
//! CI) on rustdoc's JSON of a crate made here: an item public at two paths is flagged at
//! both and counted once, so CI fails on it (docs/RELEASING.md).

use std::path::Path;
use std::process::Command;

/// What `command` printed; the test fails with its errors if it failed.
fn run(command: &mut Command) -> String {
    let out = command.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// rustdoc's JSON of a one-file crate named `tiny`, in a folder of its own.
fn rustdoc_json(source: &str, dir: &Path) -> std::path::PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let lib = dir.join("lib.rs");
    std::fs::write(&lib, source).unwrap();
    let rustdoc = std::env::var("RUSTDOC").unwrap_or_else(|_| "rustdoc".into());
    run(Command::new(rustdoc)
        // The JSON output is unstable in rustdoc, as scripts/api.sh says.
        .env("RUSTC_BOOTSTRAP", "1")
        .args(["--edition=2024", "--crate-type=lib", "--crate-name=tiny"])
        .args(["-Z", "unstable-options", "--output-format", "json", "-o"])
        .arg(dir)
        .arg(&lib));
    dir.join("tiny.json")
}

/// The record `scripts/api-record.py` writes from rustdoc's JSON at `json`.
fn record(json: &Path) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/api-record.py");
    run(Command::new("python3").arg(script).arg(json))
}

#[test]
fn an_item_at_two_paths_is_flagged_at_both_and_counted_once() {
    let dir = std::env::temp_dir().join(format!("api-record-{}", std::process::id()));
    let one_path = record(&rustdoc_json(
        "//! Tiny.\n/// Things.\npub mod m {\n    /// A thing.\n    pub struct Thing;\n}\n",
        &dir.join("one"),
    ));
    let two_paths = record(&rustdoc_json(
        "//! Tiny.\n/// Things.\npub mod m {\n    /// A thing.\n    pub struct Thing;\n}\npub use m::Thing;\n",
        &dir.join("two"),
    ));
    std::fs::remove_dir_all(&dir).unwrap();
    let first = |r: &str| r.lines().next().unwrap().to_owned();
    assert!(
        first(&one_path).ends_with("1 public types and traits, 0 public functions and methods, 0 items at more than one path"),
        "{one_path}"
    );
    assert!(
        first(&two_paths).ends_with("1 public types and traits, 0 public functions and methods, 1 items at more than one path"),
        "{two_paths}"
    );
    let flagged: Vec<&str> = two_paths
        .lines()
        .filter(|l| l.contains("(also at"))
        .collect();
    assert_eq!(flagged.len(), 2, "{two_paths}");
    assert!(
        flagged.iter().any(|l| l.starts_with("struct tiny::Thing ")),
        "{two_paths}"
    );
    assert!(
        flagged
            .iter()
            .any(|l| l.starts_with("struct tiny::m::Thing ")),
        "{two_paths}"
    );
}
