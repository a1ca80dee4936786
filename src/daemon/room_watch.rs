//! The store watch: a running daemon picks up what another process (`sarcasmd feedback`
//! after a meeting, `--forget`, `--reset`) wrote to the corrections file, so it applies
//! to the next meeting without a reload.

use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::views::room::Room;

/// How often the store is looked at: one `stat` per look (a re-read only when its
/// length or inode changed); a correction made with the CLI applies within this.
pub const STORE_POLL: Duration = Duration::from_secs(2);

/// Owns the watching thread: dropping it stops the thread at once and joins it, so
/// nothing touches the store after the daemon that started it has ended.
pub struct StoreWatch {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl StoreWatch {
    pub fn start(room: Arc<Room>) -> std::io::Result<Self> {
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("room-store".into())
            .spawn(move || {
                // The sender is only ever dropped: a disconnect is the stop.
                while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(STORE_POLL) {
                    if let Err(e) = room.pick_up() {
                        log::warn!("room: {e}");
                    }
                }
            })?;
        Ok(Self {
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

impl Drop for StoreWatch {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::views::room::RoomConfig;

    #[test]
    fn a_dropped_watch_stops_at_once() {
        let d = tempfile::tempdir().unwrap();
        let cfg = RoomConfig {
            enabled: true,
            store: d.path().join("c.jsonl"),
            ..Default::default()
        };
        let room = Arc::new(Room::open(&cfg, false, None).unwrap());
        let w = StoreWatch::start(room.clone()).unwrap();
        let t0 = std::time::Instant::now();
        drop(w);
        assert!(t0.elapsed() < STORE_POLL, "{:?}", t0.elapsed());
        assert_eq!(Arc::strong_count(&room), 1);
    }
}
