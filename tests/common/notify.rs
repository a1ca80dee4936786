//! The systemd notify socket, read the way systemd reads it: a unix datagram socket in a
//! temp dir whose path goes into the daemon binary's `NOTIFY_SOCKET`. Binary-level tests
//! wait for `READY=1` (models loaded, stream running) here instead of for log text.
#![allow(dead_code)]

use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub struct Notify {
    sock: UnixDatagram,
    path: PathBuf,
    pub seen: Vec<String>,
}

impl Notify {
    /// A socket at `dir/notify.sock`.
    pub fn bind(dir: &Path) -> Notify {
        let path = dir.join("notify.sock");
        let sock = UnixDatagram::bind(&path).unwrap();
        sock.set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        Notify {
            sock,
            path,
            seen: vec![],
        }
    }

    /// The value for the child's `NOTIFY_SOCKET`.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Wait for a datagram containing `needle` (each datagram is `KEY=value` lines).
    pub fn wait_for(&mut self, needle: &str, timeout: Duration) -> String {
        self.wait_for_since(0, needle, timeout)
    }

    /// Wait for a datagram containing `needle` among those received from index `since`
    /// of [`Notify::seen`] on (e.g. the outcome of a reload signalled after `since`).
    /// Datagrams are read one at a time, so none after the match is taken early.
    pub fn wait_for_since(&mut self, since: usize, needle: &str, timeout: Duration) -> String {
        let t0 = Instant::now();
        let mut buf = [0u8; 4096];
        loop {
            if let Some(m) = self.seen[since..].iter().find(|m| m.contains(needle)) {
                return m.clone();
            }
            assert!(
                t0.elapsed() < timeout,
                "no `{needle}` from the daemon within {timeout:?}; got {:?}",
                self.seen
            );
            // Blocks up to the socket's 100 ms read timeout: no busy loop.
            if let Ok(n) = self.sock.recv(&mut buf) {
                self.seen
                    .push(String::from_utf8_lossy(&buf[..n]).into_owned());
            }
        }
    }

    /// Read every datagram already sent.
    pub fn drain(&mut self) {
        let mut buf = [0u8; 4096];
        while let Ok(n) = self.sock.recv(&mut buf) {
            self.seen
                .push(String::from_utf8_lossy(&buf[..n]).into_owned());
        }
    }
}
