//! `redis-server` processes for tests: free ports, output to null, killed on drop (also
//! when a test panics). Never touches a server the tests did not start.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A port that is free now, whose cluster bus port (+10000) is free too.
pub fn free_port() -> u16 {
    loop {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
        let port = l.local_addr().expect("local addr").port();
        if port < 55_000 && TcpListener::bind(("127.0.0.1", port + 10_000)).is_ok() {
            return port;
        }
    }
}

mod latency;
pub mod versions;

pub use latency::LatencyProxy;

/// One `redis-server` this test started.
#[derive(Debug)]
pub struct RedisServer {
    port: u16,
    dir: PathBuf,
    extra: Vec<String>,
    /// A config file to start from (a Sentinel's).
    config_file: Option<String>,
    /// The server binary (`redis-server` on the `PATH` unless set).
    binary: Option<PathBuf>,
    child: Option<Child>,
}

impl RedisServer {
    /// Starts a standalone server on a free port.
    pub fn start() -> Self {
        Self::start_retrying(free_port(), |_| Vec::new())
    }

    /// Starts a server on `port` with the arguments `args(port)`; when the port was taken
    /// between choosing it and binding it (a client's ephemeral port, another test), on
    /// another free port, up to 5 times.
    fn start_retrying(mut port: u16, args: impl Fn(u16) -> Vec<String>) -> Self {
        for _ in 0..5 {
            let extra = args(port);
            let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
            let mut s = Self::unstarted(port, &extra);
            if s.try_spawn() {
                return s;
            }
            port = free_port();
        }
        panic!("redis-server did not start on 5 ports (is it installed? .ci/run installs it)");
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
        let mut cmd = Command::new(self.binary.as_deref().unwrap_or("redis-server".as_ref()));
        if let Some(conf) = &self.config_file {
            cmd.arg(conf);
        }
        cmd.args(&self.extra)
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"]);
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
        while Instant::now() < deadline {
            if self
                .try_command(&["PING"])
                .is_some_and(|r| r.contains("PONG"))
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
        let tls_port = free_port();
        let mut args = vec!["--tls-port".to_owned(), tls_port.to_string()];
        args.extend(certs.server_args(auth_clients));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        Self::start_with(free_port(), &args)
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
        let out = Command::new("redis-cli")
            .args(["-p", &self.port.to_string()])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("redis-cli is installed");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Three masters of a Redis Cluster this test started.
#[derive(Debug)]
pub struct RedisCluster {
    nodes: Vec<RedisServer>,
}

impl RedisCluster {
    /// Starts three cluster-enabled servers and joins them (`redis-cli --cluster create`).
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// The same, with extra arguments for every node (e.g.
    /// `--cluster-require-full-coverage no`).
    pub fn start_with(extra: &[&str]) -> Self {
        Self::start_shaped(0, extra)
    }

    /// Three masters with `replicas` replicas each (3 × (1 + replicas) processes); the
    /// masters are the first three nodes.
    pub fn start_shaped(replicas: usize, extra: &[&str]) -> Self {
        Self::start_nodes(replicas, extra, None)
    }

    /// Three masters that also serve TLS with `certs` (`--tls-cluster yes`: the bus too),
    /// each on a second port; `CLUSTER SLOTS` asked over TLS names those ports.
    pub fn start_tls(certs: &crate::tls::TestCerts) -> Self {
        Self::start_nodes(0, &[], Some(certs))
    }

    /// The nodes' `rediss://` URLs (a Cluster from [`start_tls`](Self::start_tls)).
    pub fn tls_urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::tls_url).collect()
    }

    fn start_nodes(replicas: usize, extra: &[&str], tls: Option<&crate::tls::TestCerts>) -> Self {
        let mut ports = Vec::new();
        while ports.len() < 3 * (1 + replicas) {
            let p = free_port();
            if !ports.contains(&p) {
                ports.push(p);
            }
        }
        let nodes: Vec<RedisServer> = ports
            .iter()
            .map(|&p| {
                RedisServer::start_retrying(p, |p| {
                    let conf = format!("nodes-{p}.conf");
                    let mut args = vec![
                        "--cluster-enabled",
                        "yes",
                        "--cluster-config-file",
                        &conf,
                        "--cluster-node-timeout",
                        "2000",
                    ];
                    args.extend_from_slice(extra);
                    let tls_args: Vec<String> = tls
                        .map(|certs| {
                            let mut a = vec![
                                "--tls-port".to_owned(),
                                free_port().to_string(),
                                "--tls-cluster".to_owned(),
                                "yes".to_owned(),
                            ];
                            a.extend(certs.server_args(false));
                            a
                        })
                        .unwrap_or_default();
                    args.extend(tls_args.iter().map(String::as_str));
                    args.iter().map(|a| (*a).to_owned()).collect()
                })
            })
            .collect();
        let addrs: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        let out = Command::new("redis-cli")
            .arg("--cluster")
            .arg("create")
            .args(&addrs)
            .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .expect("redis-cli is installed");
        assert!(
            out.status.success(),
            "cluster create failed: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let ok = nodes
                .iter()
                .all(|n| n.cli(&["CLUSTER", "INFO"]).contains("cluster_state:ok"));
            if ok {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the cluster did not become ready"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Self { nodes }
    }

    /// The nodes' URLs.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }

    /// A store counting in this Cluster.
    pub fn store(&self) -> rate_limit_core::AnyStore {
        rate_limit_core::AnyStore::Redis(
            rate_limit_core::RedisStore::cluster_builder(self.urls())
                .build()
                .expect("valid URLs"),
        )
    }

    /// The nodes.
    pub fn nodes(&self) -> &[RedisServer] {
        &self.nodes
    }

    /// The nodes, to kill or restart one.
    pub fn nodes_mut(&mut self) -> &mut [RedisServer] {
        &mut self.nodes
    }

    /// Moves `slots` slots from node `from` to node `to` with `redis-cli --cluster reshard`
    /// (keys migrated one `MIGRATE` per key while clients run, so a slot is half moved for a
    /// while); blocks until done. Returns
    /// redis-cli's output; panics if it failed.
    pub fn reshard(&self, from: usize, to: usize, slots: u32) -> String {
        let id = |i: usize| self.nodes[i].cli(&["CLUSTER", "MYID"]).trim().to_owned();
        let out = Command::new("redis-cli")
            .arg("--cluster")
            .arg("reshard")
            .arg(format!("127.0.0.1:{}", self.nodes[from].port()))
            .args(["--cluster-from", &id(from), "--cluster-to", &id(to)])
            .args(["--cluster-slots", &slots.to_string(), "--cluster-yes"])
            .args(["--cluster-pipeline", "1"])
            .stdin(Stdio::null())
            .output()
            .expect("redis-cli is installed");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "reshard failed: {text}");
        text
    }

    /// How many replies of an error code (`MOVED`, `ASK`, `TRYAGAIN`…) the nodes sent, from
    /// `INFO errorstats`.
    pub fn errors_sent(&self, code: &str) -> u64 {
        let needle = format!("errorstat_{code}:count=");
        self.nodes
            .iter()
            .filter_map(|n| n.try_command(&["INFO", "errorstats"]))
            .flat_map(|info| {
                info.lines()
                    .filter_map(|l| l.strip_prefix(needle.as_str())?.trim().parse::<u64>().ok())
                    .collect::<Vec<_>>()
            })
            .sum()
    }

    /// The slot ranges each master owns, by port, as `CLUSTER NODES` on `asked` reports.
    pub fn slot_owners(&self, asked: usize) -> Vec<(u16, Vec<(u16, u16)>)> {
        self.nodes[asked]
            .cli(&["CLUSTER", "NODES"])
            .lines()
            .filter(|l| l.contains("master"))
            .filter_map(|l| {
                let fields: Vec<&str> = l.split_whitespace().collect();
                let port = fields.get(1)?.split(['@', ':']).nth(1)?.parse().ok()?;
                let ranges = fields
                    .iter()
                    .skip(8)
                    .filter_map(|r| {
                        let (a, b) = r.split_once('-').unwrap_or((r, r));
                        Some((a.parse().ok()?, b.parse().ok()?))
                    })
                    .collect();
                Some((port, ranges))
            })
            .collect()
    }
}

/// A Redis store pointed at a port nobody listens on: Redis "down".
pub fn down_store() -> rate_limit_core::AnyStore {
    let url = format!("redis://127.0.0.1:{}/", free_port());
    rate_limit_core::AnyStore::Redis(
        rate_limit_core::RedisStore::builder(url)
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
    pub fn store(&self) -> rate_limit_core::AnyStore {
        rate_limit_core::AnyStore::Redis(
            rate_limit_core::RedisStore::builder(self.url())
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

/// A primary, one replica and three Sentinels watching them as `mymaster` (quorum 2),
/// with short timeouts: a failover takes a few seconds.
#[derive(Debug)]
pub struct RedisSentinels {
    /// The primary at start, then the replica.
    pub servers: Vec<RedisServer>,
    /// The Sentinels.
    pub sentinels: Vec<RedisServer>,
}

/// The name the Sentinels know the primary by.
pub const SENTINEL_MASTER: &str = "mymaster";

impl RedisSentinels {
    /// Starts them and waits until every Sentinel sees the replica.
    pub fn start() -> Self {
        Self::start_inner(None)
    }

    /// The same over TLS with `certs`: the primary, the replica (`--tls-replication yes`)
    /// and the Sentinels serve TLS on second ports, and the Sentinels watch the servers' TLS
    /// ports, so that is the address they name. [`tls_urls`](Self::tls_urls) reach the
    /// Sentinels over TLS; the plain ports stay for `redis-cli`.
    pub fn start_tls(certs: &crate::tls::TestCerts) -> Self {
        Self::start_inner(Some(certs))
    }

    fn start_inner(tls: Option<&crate::tls::TestCerts>) -> Self {
        let tls_args = |extra: &[&str]| -> Vec<String> {
            let mut a: Vec<String> = extra.iter().map(|s| (*s).to_owned()).collect();
            if let Some(certs) = tls {
                a.extend(["--tls-port".to_owned(), free_port().to_string()]);
                a.extend(["--tls-replication".to_owned(), "yes".to_owned()]);
                a.extend(certs.server_args(false));
            }
            a
        };
        let start = |extra: &[&str]| {
            let args = tls_args(extra);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            RedisServer::start_with(free_port(), &args)
        };
        let primary = start(&[]);
        let watched = |s: &RedisServer| {
            if tls.is_some() {
                s.tls_port()
            } else {
                s.port()
            }
        };
        let replica = start(&["--replicaof", "127.0.0.1", &watched(&primary).to_string()]);
        let mut sentinels = Vec::new();
        for _ in 0..3 {
            let port = free_port();
            let dir = std::env::temp_dir()
                .join(format!("rate-limit-sentinel-{}-{port}", std::process::id()));
            std::fs::create_dir_all(&dir).expect("a scratch directory");
            let conf = dir.join("sentinel.conf");
            std::fs::write(
                &conf,
                format!(
                    "sentinel monitor {SENTINEL_MASTER} 127.0.0.1 {p} 2\n\
                     sentinel down-after-milliseconds {SENTINEL_MASTER} 1000\n\
                     sentinel failover-timeout {SENTINEL_MASTER} 4000\n\
                     sentinel parallel-syncs {SENTINEL_MASTER} 1\n",
                    p = watched(&primary)
                ),
            )
            .expect("a sentinel config");
            let conf = conf.to_string_lossy().into_owned();
            // redis-server CONFIG_FILE --sentinel: the config must come first.
            let mut s = RedisServer::unstarted(port, &[]);
            s.config_file = Some(conf);
            s.extra = tls_args(&["--sentinel"]);
            s.spawn();
            sentinels.push(s);
        }
        let replica_port = watched(&replica).to_string();
        let me = Self {
            servers: vec![primary, replica],
            sentinels,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while me.sentinels.iter().any(|s| {
            !s.cli(&["SENTINEL", "REPLICAS", SENTINEL_MASTER])
                .contains(&replica_port)
        }) {
            assert!(
                Instant::now() < deadline,
                "the Sentinels never saw the replica"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        me
    }

    /// The Sentinels' URLs.
    pub fn urls(&self) -> Vec<String> {
        self.sentinels.iter().map(RedisServer::url).collect()
    }

    /// The Sentinels' `rediss://` URLs (Sentinels from [`start_tls`](Self::start_tls)).
    pub fn tls_urls(&self) -> Vec<String> {
        self.sentinels.iter().map(RedisServer::tls_url).collect()
    }

    /// The port of the primary the Sentinels name now.
    pub fn primary_port(&self) -> Option<u16> {
        let out = self.sentinels[0].cli(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", SENTINEL_MASTER]);
        out.lines().nth(1)?.trim().parse().ok()
    }
}
