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

/// What a server process printed up to its "listening on" line (every line joined with
/// `\n`); a process that exits first fails the test with its exit status.
pub(crate) fn said_until_listening(child: &mut Child) -> String {
    let mut lines = BufReader::new(child.stdout.take().expect("stdout piped")).lines();
    let mut said = String::new();
    while !said.contains("listening on") {
        let Some(line) = lines.next() else {
            panic!(
                "the server exited before it listened: {:?}\n{said}",
                child.wait()
            );
        };
        said.push_str(&line.expect("stdout is text"));
        said.push('\n');
    }
    said
}

/// The `host:port` a server said after `label` (`"listening on http://"`): servers bound
/// to port 0 say the port the system picked.
pub(crate) fn address_after(said: &str, label: &str) -> Option<String> {
    let at = said.split(label).nth(1)?.split(['/', ' ', '\n']).next()?;
    Some(at.to_owned())
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
        let said = said_until_listening(&mut child);
        let addr = address_after(&said, "listening on http://").expect("the address it listens on");
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
