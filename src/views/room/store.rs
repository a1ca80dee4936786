//! The corrections file: append-only JSON lines in the state directory, one record per
//! correction (or per correction forgotten), fsync'd before a correction is confirmed.
//!
//! Why this shape: a line is written with one `write` on a file opened for appending
//! and synced, so a power cut leaves at most the last line torn; a torn or unreadable
//! line is skipped with a warning (never a crash) and the next append starts on a fresh
//! line. Records carry a version (`v`) and unknown fields are ignored, so a later
//! version's file reads here and this one's reads there. The file is bounded: past
//! `room.max_corrections` it is rewritten with the newest ones (to a temporary file,
//! synced, renamed over it), and what it dropped is counted. Writers (the daemon,
//! `sarcasmd feedback`) take an advisory lock on `<store>.lock` and read what the other
//! wrote before they write.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::error::RoomError;
use crate::common::feedback::Label;

/// The record format this version writes (and the newest it reads).
pub const STORE_VERSION: u32 = 1;

/// Record numbers run from 1; a larger one than this (2^53, the largest integer a JSON
/// number carries exactly) is an edited or damaged line, skipped: counting on from it
/// would leave no room, and at `u64::MAX` the next number overflows.
pub const MAX_SEQ: u64 = 1 << 53;

/// A float written as `null` (serde_json writes a NaN so) reads back as NaN: a record
/// this version wrote always reads back.
mod nan_as_null {
    use serde::{Deserialize, Deserializer};

    pub fn one<'de, D: Deserializer<'de>>(d: D) -> Result<f32, D::Error> {
        Ok(Option::<f32>::deserialize(d)?.unwrap_or(f32::NAN))
    }

    pub fn many<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<f32>, D::Error> {
        Ok(Vec::<Option<f32>>::deserialize(d)?
            .into_iter()
            .map(|x| x.unwrap_or(f32::NAN))
            .collect())
    }
}

/// One correction, with what adaptation needs from its event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Correction {
    pub v: u32,
    /// Numbers every record of the file, in order; `--forget` names a correction by it.
    pub seq: u64,
    pub at_unix_ms: u64,
    /// `http`, `mqtt` or `cli`.
    pub source: String,
    /// The event's `id` in the stream it came from.
    pub event_id: u64,
    pub label: Label,
    /// The event's score from the shipped heads (before any room head) and threshold.
    #[serde(deserialize_with = "nan_as_null::one")]
    pub p_shipped: f32,
    #[serde(deserialize_with = "nan_as_null::one")]
    pub threshold: f32,
    /// The text view's sentence embedding of the line (what the room head compares).
    #[serde(deserialize_with = "nan_as_null::many")]
    pub text_embedding: Vec<f32>,
    /// Prosody functionals of the line (empty when the correction came without audio).
    #[serde(default, deserialize_with = "nan_as_null::many")]
    pub prosody: Vec<f32>,
    /// The event's `models` (which encoder made the embedding).
    #[serde(default)]
    pub models: BTreeMap<String, String>,
    /// Only with `room.keep_transcripts`.
    #[serde(default)]
    pub transcript: Option<String>,
}

/// A correction taken back (`sarcasmd feedback --forget SEQ`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Forget {
    pub v: u32,
    pub seq: u64,
    pub at_unix_ms: u64,
    pub forgets: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Record {
    Correction(Correction),
    Forget(Forget),
}

impl Record {
    fn seq(&self) -> u64 {
        match self {
            Record::Correction(c) => c.seq,
            Record::Forget(f) => f.seq,
        }
    }
}

/// What a store file holds: the corrections in force (oldest first), the next record
/// number, and how many lines were skipped (unreadable, from a newer version, or
/// numbered outside 1..=MAX_SEQ).
#[derive(Debug, Default)]
pub struct Parsed {
    pub live: Vec<Correction>,
    pub next_seq: u64,
    pub skipped_lines: u64,
}

/// Reads a store file's bytes (a torn last line is the caller's to cut off first;
/// here it is one more unreadable line). Never fails: what cannot be read is skipped
/// with a warning naming `path` and the line.
pub fn parse(bytes: &[u8], path: &Path) -> Parsed {
    let mut p = Parsed {
        next_seq: 1,
        ..Default::default()
    };
    for (n, line) in bytes.split(|&b| b == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let why = match serde_json::from_slice::<Record>(line) {
            Ok(r) if record_version(&r) > STORE_VERSION => format!(
                "record version {} is newer than this sarcasmd reads ({STORE_VERSION})",
                record_version(&r)
            ),
            Ok(r) if !(1..=MAX_SEQ).contains(&r.seq()) => {
                format!("record number {} is outside 1..={MAX_SEQ}", r.seq())
            }
            Ok(r) => {
                apply(&mut p.live, &mut p.next_seq, r);
                continue;
            }
            Err(e) => format!("unreadable: {e}"),
        };
        log::warn!("room: {}:{}: {why}; line skipped", path.display(), n + 1);
        p.skipped_lines += 1;
    }
    p
}

fn apply(live: &mut Vec<Correction>, next_seq: &mut u64, r: Record) {
    *next_seq = (*next_seq).max(r.seq() + 1);
    match r {
        Record::Correction(c) => {
            live.retain(|o| o.seq != c.seq);
            live.push(c);
        }
        Record::Forget(f) => live.retain(|c| c.seq != f.forgets),
    }
}

pub fn now_unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

pub struct CorrectionStore {
    path: PathBuf,
    max: usize,
    live: Vec<Correction>,
    next_seq: u64,
    /// The file's (length, inode) after this process last read or wrote it: another
    /// writer (`sarcasmd feedback` while the daemon runs) appends (length) or rewrites
    /// (a new inode), and either is noticed.
    seen: (u64, u64),
    /// Lines skipped as torn or unreadable, and corrections dropped by compaction.
    pub skipped_lines: u64,
    pub dropped: u64,
}

impl CorrectionStore {
    /// Opens (creating the file and its directory) and reads every record.
    pub fn open(path: &Path, max: usize) -> Result<Self, RoomError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(RoomError::store("create the directory of", path))?;
        }
        let mut s = Self {
            path: path.to_path_buf(),
            max,
            live: Vec::new(),
            next_seq: 1,
            seen: (0, 0),
            skipped_lines: 0,
            dropped: 0,
        };
        s.read()?;
        Ok(s)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The corrections in force, oldest first.
    pub fn corrections(&self) -> &[Correction] {
        &self.live
    }

    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    fn read(&mut self) -> Result<(), RoomError> {
        let mut bytes = match std::fs::read(&self.path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(RoomError::store("read", &self.path)(e)),
        };
        if !bytes.is_empty() && !bytes.ends_with(b"\n") {
            // A write cut short (power loss): drop the partial line so the next append
            // does not continue it.
            let keep = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
            log::warn!(
                "room: {}: the last line is torn ({} bytes, a write cut short); skipped",
                self.path.display(),
                bytes.len() - keep
            );
            self.skipped_lines += 1;
            let f = OpenOptions::new()
                .write(true)
                .open(&self.path)
                .map_err(RoomError::store("repair", &self.path))?;
            f.set_len(keep as u64)
                .and_then(|()| f.sync_all())
                .map_err(RoomError::store("repair", &self.path))?;
            bytes.truncate(keep);
        }
        self.seen = self.identity();
        let parsed = parse(&bytes, &self.path);
        self.live = parsed.live;
        self.next_seq = parsed.next_seq;
        self.skipped_lines += parsed.skipped_lines;
        Ok(())
    }

    fn identity(&self) -> (u64, u64) {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(&self.path).map_or((0, 0), |m| (m.len(), m.ino()))
    }

    /// Reads the file again if another process wrote to it since.
    pub fn refresh(&mut self) -> Result<bool, RoomError> {
        if self.identity() == self.seen {
            return Ok(false);
        }
        self.read()?;
        Ok(true)
    }

    /// Reads the file again, under the writers' lock, if another process wrote to it
    /// since (the lock: a read racing an append could see a half-written last line and
    /// cut it off as torn).
    pub fn refresh_locked(&mut self) -> Result<bool, RoomError> {
        let _lock = self.lock()?;
        self.refresh()
    }

    /// An exclusive advisory lock on `<store>.lock` while it is held: the daemon and
    /// `sarcasmd feedback` may write at once, and a rewrite (rename) racing an append
    /// would lose the append. The lock file is never renamed, so both lock the same inode.
    fn lock(&self) -> Result<File, RoomError> {
        use std::os::fd::AsRawFd;
        let path = self.path.with_extension("jsonl.lock");
        let f = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(RoomError::store("lock", &path))?;
        // SAFETY: flock on a descriptor we own; released when `f` is closed.
        if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(RoomError::store("lock", &path)(
                std::io::Error::last_os_error(),
            ));
        }
        Ok(f)
    }

    /// Appends a correction (its `seq` is set here), synced before it returns.
    pub fn add(&mut self, mut c: Correction) -> Result<Correction, RoomError> {
        let _lock = self.lock()?;
        self.refresh()?;
        c.v = STORE_VERSION;
        c.seq = self.next_seq;
        self.append(Record::Correction(c.clone()))?;
        if self.live.len() > self.max {
            self.compact()?;
        }
        Ok(c)
    }

    /// Takes correction `seq` back (an appended `forget` record).
    pub fn forget(&mut self, seq: u64) -> Result<Correction, RoomError> {
        let _lock = self.lock()?;
        self.refresh()?;
        let Some(c) = self.live.iter().find(|c| c.seq == seq).cloned() else {
            return Err(RoomError::UnknownCorrection(seq));
        };
        self.append(Record::Forget(Forget {
            v: STORE_VERSION,
            seq: self.next_seq,
            at_unix_ms: now_unix_ms(),
            forgets: seq,
        }))?;
        Ok(c)
    }

    /// Removes every correction; returns how many there were.
    pub fn reset(&mut self) -> Result<usize, RoomError> {
        let _lock = self.lock()?;
        self.refresh()?;
        let n = self.live.len();
        self.rewrite(&[])?;
        self.live.clear();
        Ok(n)
    }

    fn append(&mut self, r: Record) -> Result<(), RoomError> {
        if r.seq() > MAX_SEQ {
            // Only after a hand-edited line numbered near MAX_SEQ: what this wrote would be
            // skipped when read back.
            return Err(RoomError::store("number a record in", &self.path)(
                std::io::Error::other(
                    "record numbers are used up (a line is numbered near 2^53): `sarcasmd feedback --reset`",
                ),
            ));
        }
        let mut line = serde_json::to_vec(&r).expect("a record serialises");
        line.push(b'\n');
        let mut f = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .map_err(RoomError::store("open", &self.path))?;
        // One write of the whole line, then sync: confirmed means on disk.
        f.write_all(&line)
            .and_then(|()| f.sync_data())
            .map_err(RoomError::store("append to", &self.path))?;
        self.seen = self.identity();
        apply(&mut self.live, &mut self.next_seq, r);
        Ok(())
    }

    /// Keeps the newest `max` corrections.
    fn compact(&mut self) -> Result<(), RoomError> {
        let over = self.live.len().saturating_sub(self.max);
        let keep: Vec<Correction> = self.live[over..].to_vec();
        self.rewrite(&keep)?;
        log::warn!(
            "room: {} holds more than room.max_corrections ({}): the {over} oldest dropped",
            self.path.display(),
            self.max
        );
        self.dropped += over as u64;
        self.live = keep;
        Ok(())
    }

    /// Replaces the file with `keep`, atomically: a temporary file, synced, renamed.
    fn rewrite(&mut self, keep: &[Correction]) -> Result<(), RoomError> {
        let tmp = self.path.with_extension("jsonl.tmp");
        let mut body = Vec::new();
        for c in keep {
            serde_json::to_writer(&mut body, &Record::Correction(c.clone()))
                .expect("a record serialises");
            body.push(b'\n');
        }
        let mut f = File::create(&tmp).map_err(RoomError::store("create", &tmp))?;
        f.write_all(&body)
            .and_then(|()| f.sync_all())
            .map_err(RoomError::store("write", &tmp))?;
        std::fs::rename(&tmp, &self.path).map_err(RoomError::store("replace", &self.path))?;
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            // The rename itself must reach the disk.
            let _ = File::open(dir).and_then(|d| d.sync_all());
        }
        self.seen = self.identity();
        Ok(())
    }
}

fn record_version(r: &Record) -> u32 {
    match r {
        Record::Correction(c) => c.v,
        Record::Forget(f) => f.v,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn correction(id: u64, label: Label, e: &[f32]) -> Correction {
        Correction {
            v: STORE_VERSION,
            seq: 0,
            at_unix_ms: 1,
            source: "test".into(),
            event_id: id,
            label,
            p_shipped: 0.7,
            threshold: 0.5,
            text_embedding: e.to_vec(),
            prosody: vec![1.0, 2.0],
            models: BTreeMap::new(),
            transcript: None,
        }
    }

    fn tmp() -> (tempfile::TempDir, PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("room").join("corrections.jsonl");
        (d, p)
    }

    #[test]
    fn corrections_survive_a_reopen_in_order_with_their_numbers() {
        let (_d, p) = tmp();
        let mut s = CorrectionStore::open(&p, 10).unwrap();
        s.add(correction(3, Label::NotSarcastic, &[1.0, 0.0]))
            .unwrap();
        s.add(correction(7, Label::Sarcastic, &[0.0, 1.0])).unwrap();
        let s2 = CorrectionStore::open(&p, 10).unwrap();
        let got: Vec<(u64, u64, Label)> = s2
            .corrections()
            .iter()
            .map(|c| (c.seq, c.event_id, c.label))
            .collect();
        assert_eq!(got, [(1, 3, Label::NotSarcastic), (2, 7, Label::Sarcastic)]);
        assert_eq!(s2.next_seq(), 3);
        assert_eq!(s2.corrections()[0].prosody, [1.0, 2.0]);
    }

    #[test]
    fn a_correction_with_a_missing_score_reads_back() {
        // The CLI stores NaN when an event carried no score; serde_json writes it as null.
        let (_d, p) = tmp();
        let mut s = CorrectionStore::open(&p, 10).unwrap();
        let mut c = correction(3, Label::NotSarcastic, &[1.0, f32::NAN]);
        c.p_shipped = f32::NAN;
        s.add(c).unwrap();
        let s = CorrectionStore::open(&p, 10).unwrap();
        assert_eq!((s.corrections().len(), s.skipped_lines), (1, 0));
        assert!(s.corrections()[0].p_shipped.is_nan());
        assert!(s.corrections()[0].text_embedding[1].is_nan());
    }

    #[test]
    fn a_record_numbered_outside_its_range_is_skipped_and_numbering_goes_on() {
        let line = |seq: u64| {
            let mut c = correction(seq, Label::NotSarcastic, &[1.0]);
            c.seq = seq;
            serde_json::to_string(&Record::Correction(c)).unwrap()
        };
        let text = format!("{}\n{}\n{}\n", line(4), line(0), line(u64::MAX));
        let parsed = parse(text.as_bytes(), Path::new("x"));
        assert_eq!(
            (parsed.live.len(), parsed.skipped_lines, parsed.next_seq),
            (1, 2, 5)
        );
        // At the top of the range a store refuses to number past it rather than wrap.
        let (_d, p) = tmp();
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, format!("{}\n", line(MAX_SEQ))).unwrap();
        let mut s = CorrectionStore::open(&p, 10).unwrap();
        let e = s.add(correction(9, Label::Sarcastic, &[1.0])).unwrap_err();
        assert!(e.to_string().contains("--reset"), "{e}");
        assert_eq!(
            CorrectionStore::open(&p, 10).unwrap().corrections().len(),
            1
        );
    }

    #[test]
    fn a_torn_last_line_is_skipped_and_the_next_append_starts_a_fresh_line() {
        let (_d, p) = tmp();
        let mut s = CorrectionStore::open(&p, 10).unwrap();
        s.add(correction(1, Label::NotSarcastic, &[1.0])).unwrap();
        let mut f = OpenOptions::new().append(true).open(&p).unwrap();
        f.write_all(br#"{"kind":"correction","v":1,"seq":2,"at_un"#)
            .unwrap();
        drop(f);
        let mut s = CorrectionStore::open(&p, 10).unwrap();
        assert_eq!((s.corrections().len(), s.skipped_lines), (1, 1));
        s.add(correction(2, Label::Sarcastic, &[1.0])).unwrap();
        let s = CorrectionStore::open(&p, 10).unwrap();
        assert_eq!((s.corrections().len(), s.skipped_lines), (2, 0));
    }

    #[test]
    fn unreadable_and_newer_lines_are_skipped_and_unknown_fields_ignored() {
        let (_d, p) = tmp();
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        let good = r#"{"kind":"correction","v":1,"seq":4,"at_unix_ms":1,"source":"http","event_id":9,"label":"not_sarcastic","p_shipped":0.8,"threshold":0.5,"text_embedding":[1.0],"added_later":true}"#;
        let newer = r#"{"kind":"correction","v":2,"seq":5,"at_unix_ms":1,"source":"http","event_id":9,"label":"not_sarcastic","p_shipped":0.8,"threshold":0.5,"text_embedding":[1.0]}"#;
        std::fs::write(
            &p,
            format!("not json\n{good}\n{newer}\n{{\"kind\":\"mystery\",\"v\":1}}\n"),
        )
        .unwrap();
        let s = CorrectionStore::open(&p, 10).unwrap();
        assert_eq!(s.corrections().len(), 1);
        assert_eq!(s.corrections()[0].event_id, 9);
        assert_eq!(s.skipped_lines, 3);
        assert_eq!(s.next_seq(), 5);
    }

    #[test]
    fn forget_reset_and_the_bound() {
        let (_d, p) = tmp();
        let mut s = CorrectionStore::open(&p, 3).unwrap();
        for i in 0..5 {
            s.add(correction(i, Label::NotSarcastic, &[1.0])).unwrap();
        }
        assert_eq!(s.dropped, 2);
        let ids: Vec<u64> = s.corrections().iter().map(|c| c.event_id).collect();
        assert_eq!(ids, [2, 3, 4]);
        assert_eq!(std::fs::read_to_string(&p).unwrap().lines().count(), 3);
        s.forget(4).unwrap();
        assert!(matches!(s.forget(4), Err(RoomError::UnknownCorrection(4))));
        let s2 = CorrectionStore::open(&p, 3).unwrap();
        let ids: Vec<u64> = s2.corrections().iter().map(|c| c.event_id).collect();
        assert_eq!(ids, [2, 4]);
        assert_eq!(s.reset().unwrap(), 2);
        assert!(CorrectionStore::open(&p, 3)
            .unwrap()
            .corrections()
            .is_empty());
    }

    #[test]
    fn another_writer_is_seen_before_the_next_append() {
        let (_d, p) = tmp();
        let mut daemon = CorrectionStore::open(&p, 10).unwrap();
        let mut cli = CorrectionStore::open(&p, 10).unwrap();
        daemon
            .add(correction(1, Label::NotSarcastic, &[1.0]))
            .unwrap();
        let c = cli.add(correction(2, Label::NotSarcastic, &[1.0])).unwrap();
        assert_eq!(c.seq, 2, "the second writer numbers after the first");
        let c = daemon
            .add(correction(3, Label::NotSarcastic, &[1.0]))
            .unwrap();
        assert_eq!(c.seq, 3);
        assert_eq!(daemon.corrections().len(), 3);
        // A reset by the other writer (a new file) is seen too.
        assert_eq!(cli.reset().unwrap(), 3);
        daemon.add(correction(4, Label::Sarcastic, &[1.0])).unwrap();
        let ids: Vec<u64> = daemon.corrections().iter().map(|c| c.event_id).collect();
        assert_eq!(ids, [4]);
        assert!(p.with_extension("jsonl.lock").exists());
    }
}
