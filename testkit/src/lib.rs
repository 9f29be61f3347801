//! The harness the tests and benches share: `redis-server` processes (standalone, or a
//! three-master Cluster) that this process starts on free ports and kills on drop. It never
//! touches a server it did not start.

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
