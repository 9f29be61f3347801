//! A WebSocket client on a plain `TcpStream` (RFC 6455): the handshake, masked frames out,
//! frames in. It answers nothing by itself (no pong, no close reply) and reads only when
//! asked.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

pub(crate) const TEXT: u8 = 0x1;
pub(crate) const CLOSE: u8 = 0x8;
pub(crate) const PING: u8 = 0x9;
pub(crate) const PONG: u8 = 0xA;

pub(crate) struct RawWs {
    pub(crate) stream: TcpStream,
}

impl RawWs {
    /// Opens `path` on `addr` with `headers` (lines ending `\r\n`); `Err` with the status
    /// when the server does not switch protocols (0 when it sent none).
    pub(crate) fn connect(addr: &str, path: &str, headers: &str) -> Result<Self, u16> {
        let mut stream = TcpStream::connect(addr).map_err(|_| 0u16)?;
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        let req = format!(
            "GET {path} HTTP/1.1\r\nHost: {addr}\r\nUpgrade: websocket\r\n\
             Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
             Sec-WebSocket-Version: 13\r\n{headers}\r\n"
        );
        stream.write_all(req.as_bytes()).map_err(|_| 0u16)?;
        // The response's head, byte by byte: no frame after it is read here.
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            match stream.read(&mut byte) {
                Ok(1) => head.push(byte[0]),
                _ => return Err(0),
            }
        }
        let status = std::str::from_utf8(&head[9..12])
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        if status == 101 {
            Ok(Self { stream })
        } else {
            Err(status)
        }
    }

    /// One frame, final, masked (as a client must).
    pub(crate) fn frame_bytes(opcode: u8, payload: &[u8]) -> Vec<u8> {
        let mask = [0x12, 0x34, 0x56, 0x78];
        let mut f = vec![0x80 | opcode];
        match payload.len() {
            n @ 0..=125 => f.push(0x80 | n as u8),
            n @ 126..=65535 => {
                f.push(0x80 | 126);
                f.extend_from_slice(&(n as u16).to_be_bytes());
            }
            n => {
                f.push(0x80 | 127);
                f.extend_from_slice(&(n as u64).to_be_bytes());
            }
        }
        f.extend_from_slice(&mask);
        f.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
        f
    }

    pub(crate) fn send(&mut self, opcode: u8, payload: &[u8]) -> io::Result<()> {
        self.stream.write_all(&Self::frame_bytes(opcode, payload))
    }

    /// The next frame from the server: its opcode and payload.
    pub(crate) fn frame(&mut self) -> io::Result<(u8, Vec<u8>)> {
        let mut h = [0u8; 2];
        self.stream.read_exact(&mut h)?;
        let len = match h[1] & 0x7F {
            126 => {
                let mut l = [0u8; 2];
                self.stream.read_exact(&mut l)?;
                u64::from(u16::from_be_bytes(l))
            }
            127 => {
                let mut l = [0u8; 8];
                self.stream.read_exact(&mut l)?;
                u64::from_be_bytes(l)
            }
            n => u64::from(n),
        };
        let mut payload = vec![0u8; usize::try_from(len).unwrap()];
        self.stream.read_exact(&mut payload)?;
        Ok((h[0] & 0x0F, payload))
    }

    /// The next text frame's text, skipping control frames other than close.
    pub(crate) fn text(&mut self) -> io::Result<String> {
        loop {
            match self.frame()? {
                (TEXT, p) => return Ok(String::from_utf8_lossy(&p).into_owned()),
                (CLOSE, p) => {
                    return Err(io::Error::other(format!("closed: {:?}", close_code(&p))));
                }
                _ => {}
            }
        }
    }

    /// Reads frames until the server's close frame: its code (`Err` when the connection
    /// ends first: a reset, or no close frame).
    pub(crate) fn close_code(&mut self) -> io::Result<Option<u16>> {
        loop {
            if let (CLOSE, p) = self.frame()? {
                return Ok(close_code(&p));
            }
        }
    }
}

fn close_code(payload: &[u8]) -> Option<u16> {
    (payload.len() >= 2).then(|| u16::from_be_bytes([payload[0], payload[1]]))
}
