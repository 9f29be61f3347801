//! What the benches against the release `quiz-night` share: the server, started on a free
//! port behind a trusted proxy range (127.0.0.0/8) on the in-memory store, and a runtime.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use ratekeeper_testkit::redis::free_port;

/// Starts `quiz-night` (under `ulimit -n` of `open_files`, if given); the child and its port.
pub(crate) fn start(open_files: Option<u32>) -> (Child, u16) {
    let port = free_port();
    let bin = ratekeeper_testkit::example_bin("quiz-night");
    let mut cmd = match open_files {
        Some(n) => {
            let mut c = Command::new("sh");
            c.args(["-c", &format!("ulimit -n {n} && exec {}", bin.display())]);
            c
        }
        None => Command::new(&bin),
    };
    let server = cmd
        .env("QUIZ_BIND", format!("127.0.0.1:{port}"))
        .env("QUIZ_TRUSTED_PROXIES", "127.0.0.0/8")
        .env_remove("REDIS_URL")
        .env_remove("REDIS_CLUSTER")
        .env_remove("REDIS_SENTINEL")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("quiz-night runs");
    std::thread::sleep(Duration::from_millis(500));
    (server, port)
}

/// The client's runtime: one worker thread, the other core left to the server.
pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}
