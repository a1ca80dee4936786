//! The events file (`output.events = "/path"`): JSON lines appended to a file that may
//! fail under a running daemon (disk full, directory removed or not yet mounted).
//!
//! A failed write does not stop the daemon: the error is logged once per outage, the file
//! is reopened on the next event, and lines that could not be written wait in a bounded
//! backlog (`BACKLOG_LINES`; beyond it the oldest are dropped and counted) so an outage
//! shorter than the backlog loses nothing. A line is written with one `write_all` of the
//! whole line; if the process is killed in the middle, the next start finds a last line
//! without its newline and cuts it off before appending, so the file is always valid
//! JSON lines. A file that does not start like one (`{`) is neither cut nor appended to:
//! it is not an events file (a WAV named by mistake lost 55 KB to the repair once).
//!
//! Removed or replaced under the daemon: before each batch of lines the open file is
//! checked to still be the one its path names, and after each line that it was not
//! removed meanwhile. A removed file (or its directory) is reopened by path, like a
//! rotated one (`mv` by logrotate); while the directory is missing the lines wait in the
//! backlog, and a line that went into the removed file is written again to the new one.
//! Each reopening is logged and counted (`sarcasmd_events_file_reopens_total`). Lines
//! that never reached the file make the end of the run an error (exit 1): before, a
//! removed file swallowed every later event with exit 0.
//!
//! Lifetime: the daemon keeps one `EventsFile` across reloads while `output.events`
//! names the same path ([`EventsFile::attach`] hands it the new stream's counters), so
//! lines waiting at a reload are not lost and the lines lost over the whole run decide
//! the exit status ([`EventsFile::close`]).

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use serde::Serialize;

use crate::common::counters::Counters;
use crate::common::drops::DropReason;
use crate::sinks::event::{EventSink, PartialEvent, UtteranceEvent};

/// Lines held while the file cannot be written (about 1-2 MB of events).
pub const BACKLOG_LINES: usize = 1000;

pub struct EventsFile {
    path: PathBuf,
    file: Option<OpenFile>,
    backlog: VecDeque<Vec<u8>>,
    partials: bool,
    failing: bool,
    counters: Arc<Counters>,
    /// Lines dropped from the backlog over this file's whole life (all streams).
    lost: u64,
}

/// The open file and which file it is, to notice when its path names another or none.
struct OpenFile {
    file: File,
    dev: u64,
    ino: u64,
}

/// What happened to the open file's path.
#[derive(Debug, PartialEq)]
enum PathState {
    /// Still names the open file.
    Same,
    /// The file was removed (alone or with its directory).
    Removed,
    /// The path names another file now, or none while the open one still exists
    /// elsewhere (moved away, e.g. rotated).
    Replaced,
}

impl OpenFile {
    fn open(path: &Path) -> std::io::Result<Self> {
        let file = open_repaired(path)?;
        let m = file.metadata()?;
        Ok(Self {
            file,
            dev: m.dev(),
            ino: m.ino(),
        })
    }

    fn state(&self, path: &Path) -> PathState {
        // A file with no name left is gone whatever the path names now.
        if self.file.metadata().is_ok_and(|m| m.nlink() == 0) {
            return PathState::Removed;
        }
        match std::fs::metadata(path) {
            Ok(m) if m.dev() == self.dev && m.ino() == self.ino => PathState::Same,
            _ => PathState::Replaced,
        }
    }
}

/// Open for appending; cut a torn last line (no trailing newline) left by a crash.
/// A file that does not start as JSON lines do is refused, untouched.
fn open_repaired(path: &Path) -> std::io::Result<File> {
    let mut f = OpenOptions::new()
        .create(true)
        .read(true)
        .append(true)
        .open(path)?;
    let meta = f.metadata()?;
    let len = meta.len();
    if len == 0 || !meta.is_file() {
        return Ok(f);
    }
    let mut first = [0u8; 1];
    f.seek(SeekFrom::Start(0))?;
    f.read_exact(&mut first)?;
    if first[0] != b'{' {
        return Err(not_events_file());
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

fn not_events_file() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        "is not a sarcasmd events file (it does not start with `{`): not appending to it \
         or cutting its last line; name a new file in output.events",
    )
}

/// Whether an existing file at `path` could be an events file: empty, not a regular
/// file (a pipe, `/dev/null`), or starting with `{`. For `crate::daemon::preflight`.
pub fn looks_like_events(path: &Path) -> std::io::Result<()> {
    let meta = std::fs::metadata(path)?;
    if !meta.is_file() || meta.len() == 0 {
        return Ok(());
    }
    let mut first = [0u8; 1];
    File::open(path)?.read_exact(&mut first)?;
    if first[0] == b'{' {
        Ok(())
    } else {
        Err(not_events_file())
    }
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
            lost: 0,
        };
        match OpenFile::open(path) {
            Ok(f) => s.file = Some(f),
            Err(e) => s.fail(&e),
        }
        s
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The next stream after a reload writes here too: count in its counters, and
    /// write partials as its config says.
    pub fn attach(&mut self, partials: bool, counters: Arc<Counters>) {
        self.partials = partials;
        self.counters = counters;
    }

    /// The end of the daemon's use of the file: write what waits, then say whether
    /// every line reached it. Lines still waiting or dropped during an outage, over
    /// every stream the file served, make this an error (the run exits 1).
    pub fn close(&mut self) -> std::io::Result<()> {
        if !self.backlog.is_empty() {
            self.drain();
        }
        if !self.backlog.is_empty() || self.lost > 0 {
            return Err(std::io::Error::other(format!(
                "{}: {} events could not be written ({} still waiting at the end, {} dropped \
                 from the backlog during the outage); check that the directory exists, is \
                 writable by the daemon's user and has space",
                self.path.display(),
                self.backlog.len() as u64 + self.lost,
                self.backlog.len(),
                self.lost
            )));
        }
        Ok(())
    }

    /// The open file's path no longer names it: close it, say so, count it. The next
    /// write opens the path again (creating the file, or waiting for its directory).
    fn lost_file(&mut self, state: PathState) {
        self.file = None;
        self.counters
            .events_file_reopens
            .fetch_add(1, Ordering::Relaxed);
        match state {
            PathState::Removed => log::warn!(
                "{}: the events file was removed while the daemon wrote it; reopening it by \
                 path (lines written after the removal are written again; while its directory \
                 is missing up to {BACKLOG_LINES} lines wait)",
                self.path.display()
            ),
            _ => log::info!(
                "{}: the path names another file now (moved away, e.g. rotated); continuing \
                 in a file opened by path",
                self.path.display()
            ),
        }
    }

    fn fail(&mut self, e: &std::io::Error) {
        self.file = None;
        self.counters
            .events_file_errors
            .fetch_add(1, Ordering::Relaxed);
        if !self.failing {
            self.failing = true;
            self.counters
                .events_file_failing
                .store(true, Ordering::Relaxed);
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
            self.lost += 1;
            self.counters
                .drops
                .add(DropReason::EventsFileBacklogFull, 1);
        }
        self.backlog.push_back(line);
        self.drain();
        Ok(())
    }

    /// Write the backlog in order; stop at the first failure. A file whose path names
    /// another one (or none) is given up and the path opened again first; a line that
    /// went into a file removed meanwhile stays in the backlog for the new one.
    fn drain(&mut self) {
        if let Some(state) = self.file.as_ref().map(|f| f.state(&self.path)) {
            if state != PathState::Same {
                self.lost_file(state);
            }
        }
        if self.file.is_none() {
            match OpenFile::open(&self.path) {
                Ok(f) => self.file = Some(f),
                Err(e) => return self.fail(&e),
            }
        }
        while let Some(line) = self.backlog.front() {
            let f = self.file.as_mut().expect("opened above");
            if let Err(e) = f.file.write_all(line) {
                // A partial write leaves a torn line: cut it on reopen.
                return self.fail(&e);
            }
            // Removed between the check above and this write: the line is in no file
            // anyone can read. Keep it, reopen, and write it again.
            if f.state(&self.path) == PathState::Removed {
                self.lost_file(PathState::Removed);
                return self.drain();
            }
            self.backlog.pop_front();
        }
        if self.failing {
            self.failing = false;
            self.counters
                .events_file_failing
                .store(false, Ordering::Relaxed);
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

    fn gap(&mut self, g: &crate::sinks::event::GapEvent) -> std::io::Result<()> {
        self.push(g)
    }

    /// The end of a stream. The events stream is the primary output: events that never
    /// reached the file (still in the backlog, or dropped from it during an outage) make
    /// this an error, so the run exits 1 as it does when stdout fails. (A daemon that
    /// keeps the file across reloads calls [`EventsFile::close`] at its end instead.)
    fn flush(&mut self) -> std::io::Result<()> {
        self.close()
    }
}

/// The events file as one stream's primary sink while the daemon keeps it for the
/// next: a stream's end writes what waits but leaves the verdict to
/// [`EventsFile::close`] at the daemon's end, so lines held at a reload go on waiting.
pub struct SharedEventsFile(pub Arc<std::sync::Mutex<EventsFile>>);

impl SharedEventsFile {
    fn with<T>(&self, f: impl FnOnce(&mut EventsFile) -> T) -> T {
        f(&mut self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

impl EventSink for SharedEventsFile {
    fn write(&mut self, ev: &UtteranceEvent) -> std::io::Result<()> {
        self.with(|f| f.write(ev))
    }
    fn partial(&mut self, p: &PartialEvent) -> std::io::Result<()> {
        self.with(|f| f.partial(p))
    }
    fn gap(&mut self, g: &crate::sinks::event::GapEvent) -> std::io::Result<()> {
        self.with(|f| f.gap(g))
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.with(|f| {
            if !f.backlog.is_empty() {
                f.drain();
            }
        });
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

    fn ids(p: &Path) -> Vec<u64> {
        std::fs::read_to_string(p)
            .unwrap()
            .lines()
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap()["id"]
                    .as_u64()
                    .unwrap()
            })
            .collect()
    }

    #[test]
    fn a_removed_file_or_directory_is_reopened_by_path_and_nothing_goes_into_the_old_inode() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("e");
        std::fs::create_dir(&dir).unwrap();
        let p = dir.join("ev.jsonl");
        let c = Arc::new(Counters::default());
        let mut f = EventsFile::open(&p, false, c.clone());
        f.push(&serde_json::json!({ "id": 0 })).unwrap();
        // The file alone: the next line goes to a new file at the same path.
        std::fs::remove_file(&p).unwrap();
        f.push(&serde_json::json!({ "id": 1 })).unwrap();
        assert_eq!(ids(&p), [1]);
        // Moved away (rotated): the same.
        std::fs::rename(&p, dir.join("ev.jsonl.1")).unwrap();
        f.push(&serde_json::json!({ "id": 2 })).unwrap();
        assert_eq!(ids(&p), [2]);
        // The directory: lines wait, nothing is lost, and they arrive when it is back.
        std::fs::remove_dir_all(&dir).unwrap();
        for i in 3..6 {
            f.push(&serde_json::json!({ "id": i })).unwrap();
        }
        assert_eq!(f.backlog(), 3);
        std::fs::create_dir(&dir).unwrap();
        f.push(&serde_json::json!({ "id": 6 })).unwrap();
        assert_eq!(ids(&p), [3, 4, 5, 6]);
        assert_eq!(c.events_file_reopens.load(Ordering::Relaxed), 3);
        assert!(f.close().is_ok());
        // Gone for good: the end is an error that says how many.
        std::fs::remove_dir_all(&dir).unwrap();
        f.push(&serde_json::json!({ "id": 7 })).unwrap();
        let e = f.close().unwrap_err().to_string();
        assert!(e.contains("1 events could not be written"), "{e}");
    }

    #[test]
    fn a_file_that_is_not_json_lines_is_neither_cut_nor_appended_to() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("in.wav");
        let wav = b"RIFF\x24\x00\x00\x00WAVE\nfmt data without a final newline".to_vec();
        std::fs::write(&p, &wav).unwrap();
        let e = open_repaired(&p).unwrap_err();
        assert!(e.to_string().contains("not a sarcasmd events file"), "{e}");
        assert!(looks_like_events(&p).is_err());
        let mut f = EventsFile::open(&p, false, Arc::new(Counters::default()));
        f.push(&serde_json::json!({ "id": 0 })).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), wav);
        assert!(f.close().is_err());
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
