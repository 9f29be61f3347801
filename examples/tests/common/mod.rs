//! What the tests of quiz-night as a real process share: the process, and a WebSocket
//! client written on a plain socket (it reads only when a test says so: the client that
//! does not read is one of the cases).

#![allow(dead_code)] // each test file uses its own part

pub(crate) mod ws;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};

use ratekeeper_testkit::rss_kib;

const TOKEN: &str = "uploads-admin-token-0123456789abcdef-0123456789";

/// quiz-night on a free port, in process memory (no Redis), its admin on; killed on drop.
pub(crate) struct Quiz {
    child: Child,
    pub(crate) addr: String,
}

impl Quiz {
    pub(crate) fn start() -> Self {
        // Port 0: the system picks a free port at the bind and the server says which. (A
        // port picked free beforehand could be taken by another test's server before this
        // one binds it, and the process exited before saying where it listens.)
        let mut child = Command::new(env!("CARGO_BIN_EXE_quiz-night"))
            .env("QUIZ_BIND", "127.0.0.1:0")
            .env("QUIZ_ADMIN_TOKEN", TOKEN)
            .env_remove("REDIS_URL")
            .env_remove("REDIS_CLUSTER")
            .env_remove("REDIS_SENTINEL")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("quiz-night starts");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let addr = loop {
            let Some(line) = lines.next() else {
                panic!("quiz-night exited before it listened: {:?}", child.wait());
            };
            let line = line.unwrap();
            if let Some(at) = line.split("listening on http://").nth(1) {
                let at = at.split_whitespace().next().unwrap_or_default();
                break at.trim_end_matches('/').to_owned();
            }
        };
        Self { child, addr }
    }

    pub(crate) fn rss_mib(&self) -> f64 {
        rss_kib(self.child.id()) as f64 / 1024.0
    }

    pub(crate) fn healthz(&self) -> bool {
        let Ok(mut s) = TcpStream::connect(&self.addr) else {
            return false;
        };
        let req = format!(
            "GET /healthz HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            self.addr
        );
        let mut resp = String::new();
        s.write_all(req.as_bytes()).is_ok()
            && s.read_to_string(&mut resp).is_ok()
            && resp.starts_with("HTTP/1.1 200")
    }
}

impl Drop for Quiz {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
