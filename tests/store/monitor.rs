//! What a server executes, as `MONITOR` streams it, and the stream read back as commands.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// Everything Redis executes, as `MONITOR` streams it (scripts' inner commands included).
pub(crate) struct Monitor {
    seen: Arc<Mutex<Vec<u8>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Monitor {
    pub(crate) fn start(port: u16) -> Self {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.write_all(b"MONITOR\r\n").unwrap();
        s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (seen2, stop2) = (Arc::clone(&seen), Arc::clone(&stop));
        let thread = std::thread::spawn(move || {
            let mut buf = [0u8; 65_536];
            while !stop2.load(Ordering::Relaxed) {
                if let Ok(n) = s.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    seen2.lock().unwrap().extend_from_slice(&buf[..n]);
                }
            }
        });
        // MONITOR answers +OK before it streams.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while !seen.lock().unwrap().starts_with(b"+OK") {
            assert!(
                std::time::Instant::now() < deadline,
                "MONITOR did not start"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        Self {
            seen,
            stop,
            thread: Some(thread),
        }
    }

    pub(crate) fn finish(mut self) -> String {
        // Let the last commands arrive.
        std::thread::sleep(Duration::from_millis(200));
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
        String::from_utf8_lossy(&self.seen.lock().unwrap()).into_owned()
    }
}

/// One command of a `MONITOR` stream: run by a script (`[db lua]`) or by a client, and its
/// arguments as bytes (the stream's quoting undone).
#[derive(Debug)]
pub(crate) struct Seen {
    pub(crate) by_script: bool,
    pub(crate) args: Vec<Vec<u8>>,
}

/// The commands of a `MONITOR` stream, in order. A line it cannot read fails the test.
pub(crate) fn commands(stream: &str) -> Vec<Seen> {
    stream
        .lines()
        .map(|l| l.trim_start_matches('+').trim_end_matches('\r'))
        .filter(|l| !l.is_empty() && *l != "OK")
        .map(|line| {
            let open = line.find(" [").expect(line);
            let close = line[open..].find("] ").expect(line) + open;
            Seen {
                by_script: line[open + 2..close].ends_with(" lua"),
                args: quoted(&line[close + 2..]).unwrap_or_else(|| panic!("unreadable: {line}")),
            }
        })
        .collect()
}

/// `"a" "b\"c" "\x01"` as its arguments.
fn quoted(line: &str) -> Option<Vec<Vec<u8>>> {
    let b = line.as_bytes();
    let mut args = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b' ' {
            i += 1;
            continue;
        }
        (b[i] == b'"').then_some(())?;
        i += 1;
        let mut arg = Vec::new();
        loop {
            let c = *b.get(i)?;
            i += 1;
            match c {
                b'"' => break,
                b'\\' => {
                    let e = *b.get(i)?;
                    i += 1;
                    match e {
                        b'n' => arg.push(b'\n'),
                        b'r' => arg.push(b'\r'),
                        b't' => arg.push(b'\t'),
                        b'a' => arg.push(7),
                        b'b' => arg.push(8),
                        b'x' => {
                            let hex = std::str::from_utf8(b.get(i..i + 2)?).ok()?;
                            arg.push(u8::from_str_radix(hex, 16).ok()?);
                            i += 2;
                        }
                        other => arg.push(other),
                    }
                }
                c => arg.push(c),
            }
        }
        args.push(arg);
    }
    Some(args)
}
