//! A Redis Cluster of three masters (and replicas on request) that a test started.

use super::*;

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
        Self::start_nodes(None, replicas, extra, None)
    }

    /// Three masters with `replicas` replicas each, every node started from `binary` (a
    /// server of the compatibility matrix).
    pub fn start_on(binary: &versions::Binary, replicas: usize, extra: &[&str]) -> Self {
        Self::start_nodes(Some(binary), replicas, extra, None)
    }

    /// Three masters that also serve TLS with `certs` (`--tls-cluster yes`: the bus too),
    /// each on a second port; `CLUSTER SLOTS` asked over TLS names those ports.
    pub fn start_tls(certs: &crate::tls::TestCerts) -> Self {
        Self::start_nodes(None, 0, &[], Some(certs))
    }

    /// The nodes' `rediss://` URLs (a Cluster from [`start_tls`](Self::start_tls)).
    pub fn tls_urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::tls_url).collect()
    }

    fn start_nodes(
        binary: Option<&versions::Binary>,
        replicas: usize,
        extra: &[&str],
        tls: Option<&crate::tls::TestCerts>,
    ) -> Self {
        // `redis-cli --cluster create` waits for ever for a node that went away (a port
        // or bus port another test took): bounded, and tried again on fresh ports.
        for attempt in 1..=3 {
            if let Some(c) = Self::try_start_nodes(binary, replicas, extra, tls) {
                return c;
            }
            eprintln!("testkit: the cluster did not form (attempt {attempt}); new nodes");
        }
        panic!("the cluster did not form in three attempts");
    }

    fn try_start_nodes(
        binary: Option<&versions::Binary>,
        replicas: usize,
        extra: &[&str],
        tls: Option<&crate::tls::TestCerts>,
    ) -> Option<Self> {
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
                RedisServer::start_retrying_on(binary, p, |p| {
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
        let deadline = Instant::now() + Duration::from_secs(30);
        create(&addrs, replicas, deadline)?;
        loop {
            let ok = nodes
                .iter()
                .all(|n| n.cli(&["CLUSTER", "INFO"]).contains("cluster_state:ok"));
            if ok {
                break;
            }
            if Instant::now() > deadline + Duration::from_secs(20) {
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Some(Self { nodes })
    }

    /// The nodes' URLs.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }

    /// A store counting in this Cluster.
    pub fn store(&self) -> ratekeeper_core::AnyStore {
        ratekeeper_core::AnyStore::Redis(
            ratekeeper_core::RedisStore::cluster_builder(self.urls())
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

/// `redis-cli --cluster create` on `addrs`, given until `deadline` (it waits for ever for
/// a node that went away); `None` when it ran out of time.
fn create(addrs: &[String], replicas: usize, deadline: Instant) -> Option<()> {
    let mut cli = Command::new("redis-cli")
        .arg("--cluster")
        .arg("create")
        .args(addrs)
        .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-cli is installed");
    let status = loop {
        if let Some(status) = cli.try_wait().expect("redis-cli runs") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = cli.kill();
            let _ = cli.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut said = String::new();
    if let Some(mut out) = cli.stdout.take() {
        let _ = std::io::Read::read_to_string(&mut out, &mut said);
    }
    assert!(status.success(), "cluster create failed: {said}");
    Some(())
}
