//! A thread's CPU time, read from `/proc` (Linux): what a server thread spent per request.

use std::path::PathBuf;
use std::sync::OnceLock;

/// One thread's `/proc/<pid>/task/<tid>/stat`.
#[derive(Clone, Debug)]
pub(crate) struct ThreadCpu(PathBuf);

impl ThreadCpu {
    /// The calling thread's; `None` off Linux.
    pub(crate) fn current() -> Option<Self> {
        let rel = std::fs::read_link("/proc/thread-self").ok()?;
        Some(Self(PathBuf::from("/proc").join(rel).join("stat")))
    }

    /// User and system seconds the thread has run.
    pub(crate) fn seconds(&self) -> Option<f64> {
        let stat = std::fs::read_to_string(&self.0).ok()?;
        // Fields after the command name (which may hold spaces): state is the first,
        // utime the 12th, stime the 13th (proc(5): fields 14 and 15).
        let rest = stat.get(stat.rfind(')')? + 2..)?;
        let mut fields = rest.split(' ').skip(11);
        let utime: f64 = fields.next()?.parse().ok()?;
        let stime: f64 = fields.next()?.parse().ok()?;
        Some((utime + stime) / ticks_per_second())
    }
}

/// `getconf CLK_TCK` (100 on Linux).
fn ticks_per_second() -> f64 {
    static TICKS: OnceLock<f64> = OnceLock::new();
    *TICKS.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(100.0)
    })
}
