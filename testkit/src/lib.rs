//! The harness the tests and benches share: `redis-server` processes (standalone, or a
//! three-master Cluster) that this process starts on free ports and kills on drop. It never
//! touches a server it did not start.

pub mod net;
pub mod redis;
pub mod tls;

/// A process's resident set size in KiB, from `/proc/PID/status` (0 where unreadable).
pub fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// The release build of one of the examples' binaries (`quiz-night`, `bench-server`), built
/// first if needed: the benches live in a package of their own, so cargo does not hand them
/// the examples' binaries (`CARGO_BIN_EXE_*` is for a package's own).
pub fn example_bin(name: &str) -> std::path::PathBuf {
    let status = std::process::Command::new(env!("CARGO"))
        .args([
            "build",
            "--release",
            "-q",
            "-p",
            "ratekeeper-examples",
            "--bin",
            name,
        ])
        .status()
        .expect("cargo runs");
    assert!(status.success(), "cargo build of {name} failed");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
    target.join("release").join(name)
}
