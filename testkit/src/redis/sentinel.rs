//! A primary, a replica and three Sentinels that a test started.

use super::*;

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
        Self::start_inner(None, None)
    }

    /// The same, every server and Sentinel started from `binary` (a server of the
    /// compatibility matrix).
    pub fn start_on(binary: &versions::Binary) -> Self {
        Self::start_inner(Some(binary), None)
    }

    /// The same over TLS with `certs`: the primary, the replica (`--tls-replication yes`)
    /// and the Sentinels serve TLS on second ports, and the Sentinels watch the servers' TLS
    /// ports, so that is the address they name. [`tls_urls`](Self::tls_urls) reach the
    /// Sentinels over TLS; the plain ports stay for `redis-cli`.
    pub fn start_tls(certs: &crate::tls::TestCerts) -> Self {
        Self::start_inner(None, Some(certs))
    }

    fn start_inner(binary: Option<&versions::Binary>, tls: Option<&crate::tls::TestCerts>) -> Self {
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
            RedisServer::start_retrying_on(binary, free_port(), |_| args.clone())
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
            s.binary = binary.cloned();
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
