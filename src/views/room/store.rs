//! The corrections file: append-only JSON lines in the state directory, one record per
//! correction (or per correction forgotten), fsync'd before a correction is confirmed.
//!
//! Why this shape: a line is written with one `write` on a file opened for appending
//! and synced, so a power cut leaves at most the last line torn; a torn or unreadable
//! line is skipped with a warning (never a crash) and the next append starts on a fresh
//! line. Records carry a version (`v`) and unknown fields are ignored, so a later
//! version's file reads here and this one's reads there. The file is bounded: past
//! `room.max_corrections` it is rewritten with the newest ones (to a temporary file,
//! synced, renamed over it), and what it dropped is counted. The bound applies on read
//! too: a file holding more (replaced or edited by hand) is read a line at a time and
//! only the newest corrections are kept, so memory does not grow with the file. Writers
//! (the daemon, `sarcasmd feedback`) take an advisory lock on `<store>.lock` and read
//! what the other wrote before they write; an event holds at most one correction in
//! force, checked under that lock ([`CorrectionStore::add_once`]).

use std::collections::{BTreeMap, VecDeque};
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Write};
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

/// The longest line read: a correction is a few tens of KB at most (a 512-float
/// embedding, prosody, a transcript); a longer line is skipped without being held, so a
/// read keeps at most this much of the file in memory.
pub const MAX_LINE_BYTES: usize = 1 << 20;

/// Two corrections' embeddings at least this close name the same line: the daemon's
/// vector and the one `sarcasmd feedback` computes again from the transcript may differ
/// in the last bits.
const SAME_LINE_COSINE: f32 = 0.999;

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

impl Correction {
    /// Whether `other` corrects the same event: the same id, the same shipped score and
    /// threshold to the bit, and the same line. Ids start again with each run; the scores
    /// and the line tell one run's event 5 from another's (a repeat of the very line
    /// with the very score is the same line for the room head anyway).
    pub fn same_event(&self, other: &Correction) -> bool {
        self.event_id == other.event_id
            && self.p_shipped.to_bits() == other.p_shipped.to_bits()
            && self.threshold.to_bits() == other.threshold.to_bits()
            && same_line(&self.text_embedding, &other.text_embedding)
    }
}

fn same_line(a: &[f32], b: &[f32]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
    let (na, nb) = (norm(a), norm(b));
    if !(na > 0.0 && nb > 0.0 && na.is_finite() && nb.is_finite()) {
        // No direction to compare (zero or NaN): only the very same numbers.
        return a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits());
    }
    a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>() / (na * nb) >= SAME_LINE_COSINE
}

/// What [`CorrectionStore::add_once`] did.
#[derive(Debug, Clone, PartialEq)]
pub enum Added {
    /// Appended (its `seq` set).
    Recorded(Correction),
    /// The event already holds this label: the correction in force, nothing written.
    Unchanged(Correction),
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

/// What a store file holds: the corrections in force (oldest first, at most the bound
/// it was read with), the next record number, how many lines were skipped (unreadable,
/// from a newer version, numbered outside 1..=MAX_SEQ, or longer than
/// [`MAX_LINE_BYTES`]), and how many corrections past the bound were left out.
#[derive(Debug, Default)]
pub struct Parsed {
    pub live: Vec<Correction>,
    pub next_seq: u64,
    pub skipped_lines: u64,
    /// Left out past the bound and numbered above the `counted_through` the read was
    /// given (those at or below it were counted by an earlier read), and all left out.
    pub dropped: u64,
    pub dropped_all: u64,
    /// The highest record number left out past the bound (0: none).
    pub dropped_through: u64,
}

/// Reads a store file one line at a time, keeping at most `max` corrections in force:
/// past it the oldest is left out, as a writer compacting at each append would have
/// dropped it.
struct Reader<'a> {
    path: &'a Path,
    max: usize,
    counted_through: u64,
    live: VecDeque<Correction>,
    p: Parsed,
}

impl<'a> Reader<'a> {
    fn new(path: &'a Path, max: usize, counted_through: u64) -> Self {
        Reader {
            path,
            max,
            counted_through,
            live: VecDeque::new(),
            p: Parsed {
                next_seq: 1,
                ..Default::default()
            },
        }
    }

    /// Line `n` (1-based), without its newline.
    fn line(&mut self, n: u64, line: &[u8]) {
        if line.iter().all(u8::is_ascii_whitespace) {
            return;
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
                self.apply(r);
                return;
            }
            Err(e) => format!("unreadable: {e}"),
        };
        self.skip(n, &why);
    }

    fn skip(&mut self, n: u64, why: &str) {
        log::warn!("room: {}:{n}: {why}; line skipped", self.path.display());
        self.p.skipped_lines += 1;
    }

    fn apply(&mut self, r: Record) {
        // Records are numbered upwards: one above every number so far replaces nothing
        // (the search is only for an edited file, and keeps a long file's read linear).
        let new = r.seq() >= self.p.next_seq;
        self.p.next_seq = self.p.next_seq.max(r.seq() + 1);
        match r {
            Record::Correction(c) => {
                if !new {
                    self.live.retain(|o| o.seq != c.seq);
                }
                self.live.push_back(c);
                while self.live.len() > self.max {
                    let old = self.live.pop_front().expect("over the bound");
                    self.p.dropped_all += 1;
                    if old.seq > self.counted_through {
                        self.p.dropped += 1;
                    }
                    self.p.dropped_through = self.p.dropped_through.max(old.seq);
                }
            }
            Record::Forget(f) => self.live.retain(|c| c.seq != f.forgets),
        }
    }

    fn done(mut self) -> Parsed {
        self.p.live = self.live.into();
        self.p
    }
}

/// Reads a store file's bytes (a torn last line is the caller's to cut off first;
/// here it is one more unreadable line), without a bound. Never fails: what cannot be
/// read is skipped with a warning naming `path` and the line.
pub fn parse(bytes: &[u8], path: &Path) -> Parsed {
    let mut r = Reader::new(path, usize::MAX, 0);
    for (n, line) in bytes.split(|&b| b == b'\n').enumerate() {
        r.line(n as u64 + 1, line);
    }
    r.done()
}

/// Reads `from` a line at a time with the bound `max` (see [`Reader`]); a line longer
/// than [`MAX_LINE_BYTES`] is skipped without being held. Also the length up to the end
/// of the last whole line: bytes after it are a torn line (a write cut short).
fn read_bounded(
    from: impl Read,
    path: &Path,
    max: usize,
    counted_through: u64,
) -> std::io::Result<(Parsed, u64)> {
    let mut from = BufReader::with_capacity(64 * 1024, from);
    let mut r = Reader::new(path, max, counted_through);
    let (mut line, mut n, mut at, mut whole) = (Vec::new(), 0u64, 0u64, 0u64);
    loop {
        line.clear();
        let got = (&mut from)
            .take(MAX_LINE_BYTES as u64 + 1)
            .read_until(b'\n', &mut line)?;
        if got == 0 {
            break;
        }
        at += got as u64;
        if line.last() == Some(&b'\n') {
            n += 1;
            whole = at;
            r.line(n, &line[..line.len() - 1]);
        } else if line.len() > MAX_LINE_BYTES {
            // Over-long: pass over the rest of it without keeping it.
            let (skipped, ended) = skip_line(&mut from)?;
            at += skipped;
            if ended {
                n += 1;
                whole = at;
                r.skip(n, &format!("longer than {MAX_LINE_BYTES} bytes"));
            }
        }
        // Else the end of the file without a newline: the torn line, left to the caller.
    }
    Ok((r.done(), whole))
}

/// Reads up to and including the next newline, holding nothing: the bytes passed over,
/// and whether a newline ended them.
fn skip_line(from: &mut impl BufRead) -> std::io::Result<(u64, bool)> {
    let mut passed = 0u64;
    loop {
        let buf = from.fill_buf()?;
        if buf.is_empty() {
            return Ok((passed, false));
        }
        match buf.iter().position(|&b| b == b'\n') {
            Some(i) => {
                from.consume(i + 1);
                return Ok((passed + i as u64 + 1, true));
            }
            None => {
                let k = buf.len();
                from.consume(k);
                passed += k as u64;
            }
        }
    }
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
    /// Lines skipped as torn or unreadable, and corrections dropped past the bound (by
    /// compaction, or left out on read), each counted once.
    pub skipped_lines: u64,
    pub dropped: u64,
    /// The highest record number dropped so far: a later read of the same file does not
    /// count those again.
    dropped_through: u64,
    /// The file holds more corrections than the bound (the last read left some out): the
    /// next append compacts it.
    oversized: bool,
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
            dropped_through: 0,
            oversized: false,
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

    /// Reads the file a line at a time with the bound (never the whole file at once: a
    /// replaced store may be far larger than the bound keeps).
    fn read(&mut self) -> Result<(), RoomError> {
        let (parsed, whole, len) = match File::open(&self.path) {
            Ok(f) => {
                let len = f.metadata().map_or(0, |m| m.len());
                let (parsed, whole) = read_bounded(&f, &self.path, self.max, self.dropped_through)
                    .map_err(RoomError::store("read", &self.path))?;
                (parsed, whole, len)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                (Reader::new(&self.path, self.max, 0).done(), 0, 0)
            }
            Err(e) => return Err(RoomError::store("read", &self.path)(e)),
        };
        if len > whole {
            // A write cut short (power loss): drop the partial line so the next append
            // does not continue it.
            log::warn!(
                "room: {}: the last line is torn ({} bytes, a write cut short); skipped",
                self.path.display(),
                len - whole
            );
            self.skipped_lines += 1;
            let f = OpenOptions::new()
                .write(true)
                .open(&self.path)
                .map_err(RoomError::store("repair", &self.path))?;
            f.set_len(whole)
                .and_then(|()| f.sync_all())
                .map_err(RoomError::store("repair", &self.path))?;
        }
        self.seen = self.identity();
        if parsed.dropped_through > 0 {
            log::warn!(
                "room: {} holds more corrections than room.max_corrections ({}): the oldest are \
                 not applied ({} newly left out, counted in sarcasmd_room_corrections_dropped_total); \
                 the next correction rewrites the file with the newest",
                self.path.display(),
                self.max,
                parsed.dropped
            );
        }
        self.oversized = parsed.dropped_through > 0;
        if parsed.next_seq <= self.dropped_through {
            // Numbered again from below what was counted (the file was reset): nothing
            // left out now was counted before.
            self.dropped += parsed.dropped_all;
            self.dropped_through = parsed.dropped_through;
        } else {
            self.dropped += parsed.dropped;
            self.dropped_through = self.dropped_through.max(parsed.dropped_through);
        }
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
    pub fn add(&mut self, c: Correction) -> Result<Correction, RoomError> {
        let _lock = self.lock()?;
        self.refresh()?;
        self.append_correction(c)
    }

    /// Appends `c` unless the store already holds a correction of its event, which
    /// `held` picks out of those in force: the same label is [`Added::Unchanged`], the
    /// other refused ([`RoomError::AlreadyCorrected`]). Checked and appended under the
    /// writers' lock, after reading what another writer wrote (a forget or a reset
    /// there frees the event), so two writers cannot both find the event free.
    pub fn add_once(
        &mut self,
        c: Correction,
        held: impl Fn(&Correction) -> bool,
    ) -> Result<Added, RoomError> {
        let _lock = self.lock()?;
        self.refresh()?;
        match self.find(held) {
            Some(o) if o.label == c.label => Ok(Added::Unchanged(o.clone())),
            Some(o) => Err(RoomError::AlreadyCorrected {
                id: c.event_id,
                label: o.label.as_str(),
                seq: o.seq,
            }),
            None => self.append_correction(c).map(Added::Recorded),
        }
    }

    /// The correction in force that `held` picks out (the newest), if any.
    pub fn find(&self, held: impl Fn(&Correction) -> bool) -> Option<&Correction> {
        self.live.iter().rev().find(|o| held(o))
    }

    fn append_correction(&mut self, mut c: Correction) -> Result<Correction, RoomError> {
        c.v = STORE_VERSION;
        c.seq = self.next_seq;
        self.append(Record::Correction(c.clone()))?;
        if self.live.len() > self.max || self.oversized {
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
        self.oversized = false;
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

    /// Keeps the newest `max` corrections (and writes a file that held more than the
    /// bound, of which a read kept only the newest, down to them).
    fn compact(&mut self) -> Result<(), RoomError> {
        let over = self.live.len().saturating_sub(self.max);
        let keep: Vec<Correction> = self.live[over..].to_vec();
        self.rewrite(&keep)?;
        if over > 0 {
            log::warn!(
                "room: {} holds more than room.max_corrections ({}): the {over} oldest dropped",
                self.path.display(),
                self.max
            );
        }
        if let Some(last) = self.live[..over].last() {
            self.dropped_through = self.dropped_through.max(last.seq);
        }
        self.dropped += over as u64;
        self.oversized = false;
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

    /// Issue 49 #12 (and #2, #3 beneath them): one correction per event in force,
    /// checked against what another writer wrote, and freed when it is forgotten.
    #[test]
    fn add_once_keeps_one_correction_per_event() {
        let (_d, p) = tmp();
        let mut daemon = CorrectionStore::open(&p, 10).unwrap();
        let mut cli = CorrectionStore::open(&p, 10).unwrap();
        let c = correction(5, Label::NotSarcastic, &[1.0, 0.0]);
        let same = |c: &Correction| {
            let c = c.clone();
            move |o: &Correction| o.same_event(&c)
        };
        let first = match cli.add_once(c.clone(), same(&c)).unwrap() {
            Added::Recorded(c) => c,
            other => panic!("{other:?}"),
        };
        // The daemon has not read the file since; the check reads it first.
        assert_eq!(
            daemon.add_once(c.clone(), same(&c)).unwrap(),
            Added::Unchanged(first.clone())
        );
        let mut other = c.clone();
        other.label = Label::Sarcastic;
        assert!(matches!(
            daemon.add_once(other.clone(), same(&other)),
            Err(RoomError::AlreadyCorrected { id: 5, seq: 1, .. })
        ));
        // The same id from another run (another score, another line) is another event.
        let mut later = other.clone();
        later.p_shipped = 0.71;
        later.text_embedding = vec![0.0, 1.0];
        assert!(matches!(
            daemon.add_once(later.clone(), same(&later)).unwrap(),
            Added::Recorded(_)
        ));
        // The CLI's vector may differ from the daemon's in the last bits.
        let mut near = c.clone();
        near.text_embedding = vec![1.0, 1e-4];
        assert!(c.same_event(&near));
        cli.forget(first.seq).unwrap();
        assert!(matches!(
            daemon.add_once(other.clone(), same(&other)).unwrap(),
            Added::Recorded(_)
        ));
        assert_eq!(
            CorrectionStore::open(&p, 10).unwrap().corrections().len(),
            2
        );
    }

    /// Issue 49 #13: a store replaced with far more corrections than
    /// `room.max_corrections` was held whole (and read whole into memory).
    #[test]
    fn the_bound_applies_on_read_and_each_drop_is_counted_once() {
        let (_d, p) = tmp();
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        let mut text = String::new();
        for seq in 1..=2_000 {
            let mut c = correction(seq, Label::NotSarcastic, &[1.0, 0.5]);
            c.seq = seq;
            text.push_str(&serde_json::to_string(&Record::Correction(c)).unwrap());
            text.push('\n');
        }
        std::fs::write(&p, &text).unwrap();
        let mut s = CorrectionStore::open(&p, 50).unwrap();
        let ids: Vec<u64> = s.corrections().iter().map(|c| c.event_id).collect();
        assert_eq!(ids, (1_951..=2_000).collect::<Vec<u64>>(), "the newest 50");
        assert_eq!((s.dropped, s.next_seq()), (1_950, 2_001));
        // Another writer forgets one: the file is read again, the same drops not counted again.
        let mut cli = CorrectionStore::open(&p, 50).unwrap();
        cli.forget(2_000).unwrap();
        assert!(s.refresh().unwrap());
        assert_eq!((s.corrections().len(), s.dropped), (49, 1_950));
        // The next correction writes the bound to the file.
        s.add(correction(7, Label::Sarcastic, &[1.0])).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap().lines().count(), 50);
        assert_eq!(s.dropped, 1_950);
    }

    /// A line longer than any correction (no newline in sight) is skipped without being
    /// held: what a read keeps in memory does not grow with the file.
    #[test]
    fn an_overlong_line_is_skipped_without_being_held() {
        let (_d, p) = tmp();
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        let mut c = correction(1, Label::NotSarcastic, &[1.0]);
        c.seq = 1;
        let good = serde_json::to_string(&Record::Correction(c)).unwrap();
        let long = format!(
            "{{\"kind\":\"correction\",\"x\":\"{}\"}}",
            "a".repeat(3 << 20)
        );
        std::fs::write(&p, format!("{long}\n{good}\n")).unwrap();
        let s = CorrectionStore::open(&p, 10).unwrap();
        assert_eq!((s.corrections().len(), s.skipped_lines), (1, 1));
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
