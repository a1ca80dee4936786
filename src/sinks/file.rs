//! The events file (`output.events = "/path"`): JSON lines appended to a file that may
//! fail under a running daemon (disk full, directory removed or not yet mounted).
//!
//! A failed write does not stop the daemon: the error is logged once per outage, the file
//! is reopened on the next event, and lines that could not be written wait in a bounded
//! backlog (`BACKLOG_LINES`; beyond it the oldest are dropped and counted) so an outage
//! shorter than the backlog loses nothing. A line is written with one `write_all` of the
//! whole line; if the process is killed in the middle, the next start finds a last line
//! without its newline and cuts it off before appending, so the file is always valid
//! JSON lines.

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use serde::Serialize;

use crate::counters::Counters;
use crate::drops::DropReason;
use crate::event::{EventSink, PartialEvent, UtteranceEvent};

/// Lines held while the file cannot be written (about 1-2 MB of events).
pub const BACKLOG_LINES: usize = 1000;

pub struct EventsFile {
    path: PathBuf,
    file: Option<File>,
    backlog: VecDeque<Vec<u8>>,
    partials: bool,
    failing: bool,
    counters: Arc<Counters>,
}

/// Open for appending; cut a torn last line (no trailing newline) left by a crash.
fn open_repaired(path: &Path) -> std::io::Result<File> {
    let mut f = OpenOptions::new()
        .create(true)
        .read(true)
        .append(true)
        .open(path)?;
    let len = f.metadata()?.len();
    if len == 0 {
        return Ok(f);
    }
    let mut last = [0u8; 1];
    f.seek(SeekFrom::Start(len - 1))?;
    f.read_exact(&mut last)?;
    if last[0] == b'\n' {
        return Ok(f);
    }
    // Find the end of the last whole line, reading backwards in blocks.
    let mut end = len;
    let mut keep = 0u64;
    let mut buf = vec![0u8; 64 * 1024];
    while end > 0 {
        let start = end.saturating_sub(buf.len() as u64);
        let n = (end - start) as usize;
        f.seek(SeekFrom::Start(start))?;
        f.read_exact(&mut buf[..n])?;
        if let Some(i) = buf[..n].iter().rposition(|&b| b == b'\n') {
            keep = start + i as u64 + 1;
            break;
        }
        end = start;
    }
    f.set_len(keep)?;
    log::warn!(
        "{}: removed a torn last line ({} bytes) left by an earlier crash",
        path.display(),
        len - keep
    );
    Ok(f)
}

impl EventsFile {
    /// Opens (or creates) the file now when possible; if not, the daemon still starts
    /// and the file is retried with every event.
    pub fn open(path: &Path, partials: bool, counters: Arc<Counters>) -> Self {
        let mut s = Self {
            path: path.to_path_buf(),
            file: None,
            backlog: VecDeque::new(),
            partials,
            failing: false,
            counters,
        };
        match open_repaired(path) {
            Ok(f) => s.file = Some(f),
            Err(e) => s.fail(&e),
        }
        s
    }

    fn fail(&mut self, e: &std::io::Error) {
        self.file = None;
        self.counters
            .events_file_errors
            .fetch_add(1, Ordering::Relaxed);
        if !self.failing {
            self.failing = true;
            log::error!(
                "{}: cannot write events: {e}; holding up to {BACKLOG_LINES} lines and retrying with every event (other outputs continue)",
                self.path.display()
            );
        }
    }

    fn push<T: Serialize>(&mut self, v: &T) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(v)?;
        line.push(b'\n');
        if self.backlog.len() >= BACKLOG_LINES {
            self.backlog.pop_front();
            self.counters
                .drops
                .add(DropReason::EventsFileBacklogFull, 1);
        }
        self.backlog.push_back(line);
        self.drain();
        Ok(())
    }

    /// Write the backlog in order; stop at the first failure.
    fn drain(&mut self) {
        if self.file.is_none() {
            match open_repaired(&self.path) {
                Ok(f) => self.file = Some(f),
                Err(e) => return self.fail(&e),
            }
        }
        while let Some(line) = self.backlog.front() {
            let f = self.file.as_mut().expect("opened above");
            if let Err(e) = f.write_all(line) {
                // A partial write leaves a torn line: cut it on reopen.
                return self.fail(&e);
            }
            self.backlog.pop_front();
        }
        if self.failing {
            self.failing = false;
            log::info!("{}: writing events again", self.path.display());
        }
    }

    /// Lines still waiting for the file.
    pub fn backlog(&self) -> usize {
        self.backlog.len()
    }
}

impl EventSink for EventsFile {
    fn write(&mut self, ev: &UtteranceEvent) -> std::io::Result<()> {
        self.push(ev)
    }

    fn partial(&mut self, p: &PartialEvent) -> std::io::Result<()> {
        if self.partials {
            self.push(p)?;
        }
        Ok(())
    }

    fn gap(&mut self, g: &crate::event::GapEvent) -> std::io::Result<()> {
        self.push(g)
    }

    /// The end of a stream. The events stream is the primary output: events that never
    /// reached the file (still in the backlog, or dropped from it during an outage) make
    /// this an error, so the run exits 1 as it does when stdout fails.
    fn flush(&mut self) -> std::io::Result<()> {
        if !self.backlog.is_empty() {
            self.drain();
        }
        let dropped = self.counters.drops.get(DropReason::EventsFileBacklogFull);
        if !self.backlog.is_empty() || dropped > 0 {
            return Err(std::io::Error::other(format!(
                "{}: {} events could not be written ({} still waiting at the end, {} dropped \
                 from the backlog during the outage); check that the directory exists, is \
                 writable by the daemon's user and has space",
                self.path.display(),
                self.backlog.len() as u64 + dropped,
                self.backlog.len(),
                dropped
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_torn_last_line_is_cut_and_whole_lines_kept() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("e.jsonl");
        std::fs::write(&p, "{\"id\":0}\n{\"id\":1}\n{\"id\":2,\"tra").unwrap();
        drop(open_repaired(&p).unwrap());
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            "{\"id\":0}\n{\"id\":1}\n"
        );
        // No newline at all: nothing whole to keep.
        std::fs::write(&p, "{\"id\":0,").unwrap();
        drop(open_repaired(&p).unwrap());
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "");
        // A long torn tail spanning several read blocks.
        let tail = "x".repeat(200_000);
        std::fs::write(&p, format!("{{\"id\":0}}\n{tail}")).unwrap();
        drop(open_repaired(&p).unwrap());
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "{\"id\":0}\n");
    }

    #[test]
    fn lines_wait_while_the_directory_is_missing_and_arrive_in_order() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("later");
        let p = dir.join("e.jsonl");
        let c = Arc::new(Counters::default());
        let mut f = EventsFile::open(&p, false, c.clone());
        for i in 0..3 {
            f.push(&serde_json::json!({ "id": i })).unwrap();
        }
        assert_eq!(f.backlog(), 3);
        assert!(c.events_file_errors.load(Ordering::Relaxed) >= 1);
        std::fs::create_dir(&dir).unwrap();
        f.push(&serde_json::json!({ "id": 3 })).unwrap();
        assert_eq!(f.backlog(), 0);
        let ids: Vec<u64> = std::fs::read_to_string(&p)
            .unwrap()
            .lines()
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap()["id"]
                    .as_u64()
                    .unwrap()
            })
            .collect();
        assert_eq!(ids, [0, 1, 2, 3]);
    }

    #[test]
    fn a_full_disk_drops_the_oldest_beyond_the_backlog_and_counts_them() {
        let c = Arc::new(Counters::default());
        let mut f = EventsFile::open(Path::new("/dev/full"), false, c.clone());
        for i in 0..(BACKLOG_LINES + 5) {
            f.push(&serde_json::json!({ "id": i })).unwrap();
        }
        assert_eq!(f.backlog(), BACKLOG_LINES);
        assert_eq!(c.drops.get(DropReason::EventsFileBacklogFull), 5);
        assert!(c.events_file_errors.load(Ordering::Relaxed) > 0);
    }
}
