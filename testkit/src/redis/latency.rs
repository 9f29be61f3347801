//! [`LatencyProxy`]: a slow network in front of a server.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};

use std::time::{Duration, Instant};

/// A TCP proxy in front of a server that delays every byte by a fixed time each way: a
/// slow network, or a slow Redis, without slowing Redis itself. Stops on drop.
#[derive(Debug)]
pub struct LatencyProxy {
    port: u16,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl LatencyProxy {
    /// Listens on a free port and forwards to `127.0.0.1:target`, adding `delay` to each
    /// direction (bytes keep their order; throughput is not limited).
    pub fn start(target: u16, delay: Duration) -> Self {
        use std::sync::atomic::{AtomicBool, Ordering};
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        let port = listener.local_addr().expect("local addr").port();
        listener.set_nonblocking(true).expect("nonblocking accept");
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        std::thread::spawn(move || {
            while !stopped.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((client, _)) => {
                        let _ = client.set_nonblocking(false);
                        if let Ok(server) = TcpStream::connect(("127.0.0.1", target)) {
                            pipe(&client, &server, delay);
                            pipe(&server, &client, delay);
                        }
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Self { port, stop }
    }

    /// `redis://127.0.0.1:PORT/` through the proxy.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }
}

impl Drop for LatencyProxy {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Copies `from` → `to`, each chunk sent `delay` after it was read.
fn pipe(from: &TcpStream, to: &TcpStream, delay: Duration) {
    let (Ok(mut from), Ok(mut to)) = (from.try_clone(), to.try_clone()) else {
        return;
    };
    let (tx, rx) = std::sync::mpsc::channel::<(Instant, Vec<u8>)>();
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 65_536];
        while let Ok(n) = from.read(&mut buf) {
            if n == 0 || tx.send((Instant::now(), buf[..n].to_vec())).is_err() {
                break;
            }
        }
    });
    std::thread::spawn(move || {
        for (at, bytes) in rx {
            let due = at + delay;
            let now = Instant::now();
            if due > now {
                std::thread::sleep(due - now);
            }
            if to.write_all(&bytes).is_err() {
                break;
            }
        }
        let _ = to.shutdown(std::net::Shutdown::Both);
    });
}
