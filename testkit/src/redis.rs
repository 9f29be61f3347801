//! `redis-server` processes for tests: free ports, output to null, killed on drop (also
//! when a test panics). Never touches a server the tests did not start.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub use crate::net::free_port;

mod cluster;
mod latency;
mod sentinel;
pub mod versions;

pub use cluster::RedisCluster;
pub use latency::LatencyProxy;
pub use sentinel::{RedisSentinels, SENTINEL_MASTER};

/// One `redis-server` this test started.
#[derive(Debug)]
pub struct RedisServer {
    port: u16,
    dir: PathBuf,
    extra: Vec<String>,
    /// A config file to start from (a Sentinel's).
    config_file: Option<String>,
    /// The server binary (`redis-server` on the `PATH` unless set).
    binary: Option<versions::Binary>,
    /// The offset of the server's clock from this machine's (libfaketime's `FAKETIME`).
    clock: Option<String>,
    child: Option<Child>,
}

/// libfaketime, from Debian's `faketime` (scripts/servers.sh installs it).
const LIBFAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

impl RedisServer {
    /// Starts a standalone server on a free port.
    pub fn start() -> Self {
        Self::start_retrying(free_port(), |_| Vec::new())
    }

    /// Starts a server on `port` with the arguments `args(port)`; when the port was taken
    /// between choosing it and binding it (a client's ephemeral port, another test), on
    /// another free port, up to 5 times.
    fn start_retrying(port: u16, args: impl Fn(u16) -> Vec<String>) -> Self {
        Self::start_retrying_on(None, port, args)
    }

    /// [`start_retrying`](Self::start_retrying) with another server binary.
    fn start_retrying_on(
        binary: Option<&versions::Binary>,
        mut port: u16,
        args: impl Fn(u16) -> Vec<String>,
    ) -> Self {
        for _ in 0..5 {
            let extra = args(port);
            let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
            let mut s = Self::unstarted(port, &extra);
            s.binary = binary.cloned();
            if s.try_spawn() {
                return s;
            }
            port = free_port();
        }
        panic!("redis-server did not start on 5 ports (is it installed? .ci/run installs it)");
    }

    /// Starts a standalone server on a free port whose clock runs `offset` from this
    /// machine's (libfaketime's syntax: `+1h`, `-90s`), for instances whose clocks disagree
    /// with the server's. The matrix's Valkey 9.1: built with libc's allocator, where
    /// libfaketime cannot start a jemalloc build (its first `clock_gettime` recurses).
    ///
    /// # Panics
    ///
    /// If libfaketime or Valkey 9.1 is not installed (scripts/servers.sh installs both) or
    /// the server does not come up.
    pub fn start_with_clock_offset(offset: &str) -> Self {
        assert!(
            std::path::Path::new(LIBFAKETIME).exists(),
            "libfaketime is not installed (scripts/servers.sh installs it)"
        );
        let mut s = Self::unstarted(free_port(), &[]);
        s.binary = Some(versions::Matrix::Valkey9_1.require("a server with its own clock"));
        s.clock = Some(offset.to_owned());
        s.spawn();
        s
    }

    /// Starts a standalone server on a free port whose clock stands still at `at`
    /// (`2026-12-06 10:00:00`, UTC): every call sees one microsecond, as two calls can on
    /// a real server. Keys with a TTL never expire on it. Valkey 9.1, as
    /// [`start_with_clock_offset`](Self::start_with_clock_offset).
    ///
    /// # Panics
    ///
    /// As [`start_with_clock_offset`](Self::start_with_clock_offset).
    pub fn start_with_frozen_clock(at: &str) -> Self {
        assert!(
            at.starts_with(|c: char| c.is_ascii_digit()),
            "a date, not an offset: {at}"
        );
        Self::start_with_clock_offset(at)
    }

    /// Starts a standalone server on a free port, or `None` when `redis-server` is not
    /// installed or does not come up (a bench then leaves its Redis rows out).
    pub fn try_start() -> Option<Self> {
        let port = free_port();
        let mut s = Self::unstarted(port, &[]);
        s.try_spawn().then_some(s)
    }

    fn unstarted(port: u16, extra: &[&str]) -> Self {
        let dir =
            std::env::temp_dir().join(format!("rate-limit-redis-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a scratch directory");
        Self {
            port,
            dir,
            extra: extra.iter().map(|s| (*s).to_owned()).collect(),
            config_file: None,
            binary: None,
            clock: None,
            child: None,
        }
    }

    /// Starts a server on `port` with extra arguments (e.g. `--cluster-enabled yes`).
    ///
    /// # Panics
    ///
    /// If `redis-server` is not installed or does not come up within 10 s.
    pub fn start_with(port: u16, extra: &[&str]) -> Self {
        let mut s = Self::unstarted(port, extra);
        s.spawn();
        s
    }

    fn spawn(&mut self) {
        assert!(
            self.try_spawn(),
            "redis-server on port {} did not start (is it installed? .ci/run installs it)",
            self.port
        );
    }

    /// Spawns the process and waits until it answers `PING`.
    fn try_spawn(&mut self) -> bool {
        let mut cmd = self
            .binary
            .as_ref()
            .map_or_else(|| Command::new("redis-server"), versions::Binary::command);
        if let Some(conf) = &self.config_file {
            cmd.arg(conf);
        }
        cmd.args(&self.extra)
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"]);
        if let Some(offset) = &self.clock {
            cmd.env("LD_PRELOAD", LIBFAKETIME).env("FAKETIME", offset);
            if offset.starts_with(['+', '-']) {
                // The wall clock only: Redis's timers run on the monotonic one. (A date
                // stops both: TIME then answers one microsecond.)
                cmd.env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
            }
        }
        if self.config_file.is_none() {
            cmd.args(["--save", "", "--appendonly", "no"]);
        }
        let child = cmd
            .arg("--dir")
            .arg(&self.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        let Ok(child) = child else {
            return false;
        };
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        let ours = self.pid().map(|pid| format!("process_id:{pid}"));
        while Instant::now() < deadline {
            // Ours, not another test's server that took the port first (it would answer
            // PING while ours fails to bind; two tests sharing a server see each other's keys,
            // and one's drop stops the other's server).
            if let (Some(info), Some(ours)) = (self.try_command(&["INFO", "server"]), &ours)
                && info.lines().any(|l| l.trim() == ours.as_str())
            {
                return true;
            }
            // Exited (its port was taken): no use waiting.
            if let Some(c) = &mut self.child
                && c.try_wait().ok().flatten().is_some()
            {
                self.child = None;
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.kill();
        false
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The CPU time the process has used (user + system, from `/proc/PID/stat`, in clock
    /// ticks of 10 ms), as a duration.
    pub fn cpu_time(&self) -> Duration {
        let ticks = self
            .pid()
            .and_then(|pid| std::fs::read_to_string(format!("/proc/{pid}/stat")).ok())
            .and_then(|stat| {
                // Fields after the command's closing parenthesis: utime is the 12th, stime the 13th.
                let rest = stat.rsplit_once(')')?.1;
                let f: Vec<&str> = rest.split_whitespace().collect();
                Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
            })
            .unwrap_or(0);
        Duration::from_millis(ticks * 10)
    }

    /// `redis://127.0.0.1:PORT/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Starts a standalone server that also serves TLS with `certs` on a second port
    /// ([`tls_url`](Self::tls_url)); the plain port stays for `redis-cli`.
    pub fn start_tls(certs: &crate::tls::TestCerts, auth_clients: bool) -> Self {
        let args = Self::tls_args(certs, auth_clients);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        Self::start_with(free_port(), &args)
    }

    /// [`start_tls`](Self::start_tls) from another server binary (one built with TLS).
    pub fn start_tls_on(
        binary: &versions::Binary,
        certs: &crate::tls::TestCerts,
        auth_clients: bool,
    ) -> Self {
        let args = Self::tls_args(certs, auth_clients);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        Self::start_binary_with(binary, &args)
    }

    fn tls_args(certs: &crate::tls::TestCerts, auth_clients: bool) -> Vec<String> {
        let mut args = vec!["--tls-port".to_owned(), free_port().to_string()];
        args.extend(certs.server_args(auth_clients));
        args
    }

    /// `rediss://127.0.0.1:TLS_PORT/`, for a server started with
    /// [`start_tls`](Self::start_tls).
    ///
    /// # Panics
    ///
    /// If the server serves no TLS.
    pub fn tls_url(&self) -> String {
        format!("rediss://127.0.0.1:{}/", self.tls_port())
    }

    /// The TLS port, from `--tls-port`.
    pub fn tls_port(&self) -> u16 {
        self.extra
            .iter()
            .position(|a| a == "--tls-port")
            .and_then(|i| self.extra.get(i + 1)?.parse().ok())
            .expect("a server started with --tls-port")
    }

    /// Freezes the server (SIGSTOP): it keeps its connections and answers nothing.
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    /// Lets a frozen server run again (SIGCONT).
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, sig: &str) {
        if let Some(c) = &self.child {
            let _ = Command::new("kill")
                .args([sig, &c.id().to_string()])
                .status();
        }
    }

    /// Kills the server (SIGKILL) and waits for it.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts it again on the same port (after [`kill`](Self::kill)).
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }

    /// Sends one command in RESP and returns the raw reply, or `None` if unreachable.
    pub fn try_command(&self, args: &[&str]) -> Option<String> {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        let mut req = format!("*{}\r\n", args.len());
        for a in args {
            req.push_str(&format!("${}\r\n{a}\r\n", a.len()));
        }
        s.write_all(req.as_bytes()).ok()?;
        let mut out = Vec::new();
        let mut buf = [0u8; 65_536];
        // Read until the reply is complete enough for tests: a short pause ends it.
        s.set_read_timeout(Some(Duration::from_millis(200))).ok()?;
        loop {
            match s.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => out.extend_from_slice(&buf[..n]),
                Err(_) if !out.is_empty() => break,
                Err(_) => return None,
            }
        }
        Some(String::from_utf8_lossy(&out).into_owned())
    }

    /// Runs `redis-cli -p PORT args…` and returns its output.
    pub fn cli(&self, args: &[&str]) -> String {
        String::from_utf8_lossy(&self.cli_bytes(args)).into_owned()
    }

    /// [`cli`](Self::cli)'s output as bytes (a binary reply, raw, as `redis-cli` writes it
    /// to a pipe, then a newline).
    pub fn cli_bytes(&self, args: &[&str]) -> Vec<u8> {
        Command::new("redis-cli")
            .args(["-p", &self.port.to_string()])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("redis-cli is installed")
            .stdout
    }
}

impl RedisServer {
    /// `redis-cli -x`: `args`, then `last` (binary-safe, through stdin) as the last
    /// argument; the reply as [`cli_bytes`](Self::cli_bytes) gives it.
    pub fn cli_with_last(&self, args: &[&str], last: &[u8]) -> Vec<u8> {
        use std::io::Write;
        let mut child = Command::new("redis-cli")
            .args(["-p", &self.port.to_string(), "-x"])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("redis-cli is installed");
        if let Some(mut stdin) = child.stdin.take() {
            stdin.write_all(last).expect("redis-cli reads its stdin");
        }
        child.wait_with_output().expect("redis-cli runs").stdout
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A Redis store pointed at a port nobody listens on: Redis "down".
pub fn down_store() -> ratekeeper_core::AnyStore {
    // Port 1 (tcpmux), which nothing here listens on: a port that is merely free now can be
    // taken a moment later by a server another test starts, and the store is then up.
    let url = "redis://127.0.0.1:1/";
    ratekeeper_core::AnyStore::Redis(
        ratekeeper_core::RedisStore::builder(url)
            .build()
            .expect("a valid URL"),
    )
}

impl RedisServer {
    /// `INFO commandstats` as (command, calls) pairs, e.g. `("evalsha", 50)`. Redis also
    /// counts the commands a script runs inside (`get`, `set`, `time`), which are not
    /// round trips.
    pub fn command_stats(&self) -> Vec<(String, u64)> {
        self.cli(&["INFO", "commandstats"])
            .lines()
            .filter_map(|l| l.strip_prefix("cmdstat_"))
            .filter_map(|l| {
                let (name, rest) = l.split_once(':')?;
                let calls = rest.split(',').find_map(|f| f.strip_prefix("calls="))?;
                Some((name.to_owned(), calls.parse().ok()?))
            })
            .collect()
    }

    /// How many times clients sent `command` since the last `CONFIG RESETSTAT`.
    pub fn command_calls(&self, command: &str) -> u64 {
        self.command_stats()
            .iter()
            .find(|(c, _)| c == command)
            .map_or(0, |(_, k)| *k)
    }

    /// A store counting in this server.
    pub fn store(&self) -> ratekeeper_core::AnyStore {
        ratekeeper_core::AnyStore::Redis(
            ratekeeper_core::RedisStore::builder(self.url())
                .build()
                .expect("a valid URL"),
        )
    }
}

/// The Cluster hash slot of every key of a principal (its rendering is the key's hash tag).
pub fn principal_slot(principal: &str) -> u16 {
    let mut crc: u16 = 0;
    for &b in principal.as_bytes() {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc % 16_384
}
