//! Learning from the room: corrections from the people in it ("not sarcastic" on a
//! flagged line), kept on the device and applied on top of the shipped heads.
//!
//! Flow: fusion -> [`Room::apply`] (the [`head::RoomHead`] may lower the score, and the
//! event is remembered) -> sinks. A correction arrives by HTTP, MQTT or the CLI and
//! names an event by its `id` ([`Room::correct`]); it is appended to the
//! [`store::CorrectionStore`] (synced before it is confirmed), and a new head is built
//! from the store and swapped in. The pipeline never waits for that: it reads the
//! current head under a read lock, and the file is written on the caller's thread.
//!
//! The HTTP and MQTT routes and `/metrics` reach it through
//! [`crate::common::feedback::Feedback`], which [`Room`] implements; the labels and
//! answers they exchange are defined there too.
//!
//! Files: `config.rs` the `[room]` section; `error.rs` the refusals; `store.rs` the
//! file; `head.rs` what a correction does to later scores; `recent.rs` the events a
//! correction may name.

pub mod config;
pub mod error;
pub mod head;
pub mod recent;
pub mod store;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use crate::common::feedback::{Feedback, Refusal};
use crate::common::lock::LockOrRecover;

pub use crate::common::feedback::{Label, Listed, Recorded, RoomStats};
pub use config::RoomConfig;
pub use error::RoomError;
pub use head::{Adjusted, RoomHead};
pub use recent::Seen;
pub use store::{Added, Correction, CorrectionStore};

use recent::RecentEvents;

/// The room head's name in each event's `models` (with its count of corrections).
pub const ROOM_HEAD_NAME: &str = "room-mute-v1";

/// The room head's name with its count of corrections, for an event's `models`.
pub fn head_label(corrections: usize) -> String {
    format!("{ROOM_HEAD_NAME} ({corrections} corrections)")
}

impl From<&Correction> for Listed {
    fn from(c: &Correction) -> Self {
        Listed {
            correction: c.seq,
            event: c.event_id,
            label: c.label,
            source: c.source.clone(),
            at_unix_ms: c.at_unix_ms,
            p_shipped: c.p_shipped,
            transcript: c.transcript.clone(),
        }
    }
}

/// Counts for `/metrics` (they outlive a stream, as the room does).
#[derive(Debug, Default)]
pub struct RoomCounts {
    pub sarcastic: AtomicU64,
    pub not_sarcastic: AtomicU64,
    pub refits: AtomicU64,
    pub muted: AtomicU64,
    pub refused: Mutex<BTreeMap<&'static str, u64>>,
}

pub struct Room {
    cfg: RoomConfig,
    /// Keep transcripts in the store (`room.keep_transcripts` and transcripts on).
    keep_transcripts: bool,
    /// Which text encoder the engine runs (`models.text_encoder`).
    text_encoder: Mutex<Option<String>>,
    store: Mutex<CorrectionStore>,
    head: RwLock<Arc<RoomHead>>,
    recent: Mutex<RecentEvents>,
    counts: RoomCounts,
}

/// The room as the feedback routes and `/metrics` see it; refusals keep their status,
/// reason and message.
impl Feedback for Room {
    fn correct(&self, id: Option<u64>, label: Label, source: &str) -> Result<Recorded, Refusal> {
        Room::correct(self, id, label, source).map_err(Refusal::from)
    }
    fn forget(&self, seq: u64) -> Result<Listed, Refusal> {
        Room::forget(self, seq).map_err(Refusal::from)
    }
    fn list(&self) -> Vec<Listed> {
        Room::list(self)
    }
    fn count_refused(&self, reason: &'static str) {
        Room::count_refused(self, reason)
    }
    fn stats(&self) -> RoomStats {
        Room::stats(self)
    }
}

impl std::fmt::Debug for Room {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Room")
            .field("store", &self.cfg.store)
            .finish()
    }
}

impl Room {
    /// Opens the store (creating it) and builds the head from what it holds.
    pub fn open(
        cfg: &RoomConfig,
        keep_transcripts: bool,
        text_encoder: Option<String>,
    ) -> Result<Self, RoomError> {
        let store = CorrectionStore::open(&cfg.store, cfg.max_corrections)?;
        let head = RoomHead::fit(store.corrections(), cfg, text_encoder.as_deref());
        if head.stale > 0 {
            log::warn!(
                "room: {} corrections were made with another text encoder and are not applied",
                head.stale
            );
        }
        log::info!(
            "room: {} corrections from {} ({} applied)",
            store.corrections().len(),
            cfg.store.display(),
            head.len()
        );
        Ok(Self {
            cfg: cfg.clone(),
            keep_transcripts: keep_transcripts && cfg.keep_transcripts,
            text_encoder: Mutex::new(text_encoder),
            store: Mutex::new(store),
            head: RwLock::new(Arc::new(head)),
            recent: Mutex::new(RecentEvents::new(cfg.recent_events)),
            counts: RoomCounts::default(),
        })
    }

    pub fn config(&self) -> &RoomConfig {
        &self.cfg
    }

    /// The engine's text encoder, once it is loaded: the head is rebuilt without the
    /// corrections another encoder made.
    pub fn set_text_encoder(&self, name: Option<String>) {
        let mut now = self.text_encoder.lock_or_recover();
        if *now != name {
            *now = name;
            drop(now);
            let store = self.store.lock_or_recover();
            self.refit(&store);
        }
    }

    /// A new stream starts: its event ids start again, so the old ones cannot be named.
    pub fn new_stream(&self) {
        self.recent.lock_or_recover().clear();
    }

    fn current(&self) -> Arc<RoomHead> {
        self.head.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// `room-mute-v1 (N corrections)`, for the event's `models`.
    pub fn label(&self) -> String {
        head_label(self.current().len())
    }

    /// Scores one event through the room head and remembers it (`seen.p` is the shipped
    /// score on the way in); also how many corrections the head that scored it held.
    pub fn apply(&self, mut seen: Seen) -> (Adjusted, usize) {
        let head = self.current();
        let a = match &seen.embedding {
            Some(e) => head.adjust(e, seen.p_shipped, seen.threshold),
            None => Adjusted {
                p: seen.p_shipped,
                muted_by: None,
            },
        };
        if a.muted_by.is_some() {
            self.counts.muted.fetch_add(1, Ordering::Relaxed);
        }
        seen.p = a.p;
        if !self.keep_transcripts {
            seen.transcript = None;
        }
        self.recent.lock_or_recover().push(seen);
        (a, head.len())
    }

    /// A correction of event `id` (`None`: the newest flagged one) from `source`.
    pub fn correct(
        &self,
        id: Option<u64>,
        label: Label,
        source: &str,
    ) -> Result<Recorded, RoomError> {
        let r = self.correct_inner(id, label, source);
        if let Err(e) = &r {
            self.count_refused(e.reason());
        }
        r
    }

    /// A correction refused before it reached [`Room::correct`] (bad input, no token).
    pub fn count_refused(&self, reason: &'static str) {
        *self
            .counts
            .refused
            .lock_or_recover()
            .entry(reason)
            .or_default() += 1;
    }

    fn correct_inner(
        &self,
        id: Option<u64>,
        label: Label,
        source: &str,
    ) -> Result<Recorded, RoomError> {
        // One correction at a time, from the check that the event is free to the mark
        // that it is not: two at once each found it free and both were stored (issue 49
        // #2). The pipeline never waits on this lock; `recent`, which it takes, is held
        // here only to look and to mark.
        let mut store = self.store.lock_or_recover();
        let (id, c, held, stream) = {
            let mut recent = self.recent.lock_or_recover();
            let id = match id {
                Some(id) => id,
                None => recent.last_flagged().ok_or(RoomError::NothingFlagged)?,
            };
            let (kept, held, stream) = (recent.cap(), recent.held(), recent.stream());
            let h = recent
                .get_mut(id)
                .ok_or(RoomError::UnknownEvent { id, kept, held })?;
            if let Some(by) = h.revised_by {
                return Err(RoomError::Revised { id, by });
            }
            let e = h
                .seen
                .embedding
                .clone()
                .ok_or(RoomError::NoEmbedding { id })?;
            let c = Correction {
                v: store::STORE_VERSION,
                seq: 0,
                at_unix_ms: store::now_unix_ms(),
                source: source.to_string(),
                event_id: id,
                label,
                p_shipped: h.seen.p_shipped,
                threshold: h.seen.threshold,
                text_embedding: e,
                prosody: h.seen.prosody.clone(),
                models: h.seen.models.clone(),
                transcript: h.seen.transcript.clone(),
            };
            (id, c, h.corrected, stream)
        };
        // The event is taken only while the store holds the correction this daemon made
        // of it: a forget or a reset, here or by `sarcasmd feedback`, frees it (issue 49
        // #3), and a number used again after a reset names another event.
        let probe = c.clone();
        let added = store.add_once(c, |o| held == Some(o.seq) && o.same_event(&probe))?;
        let c = match added {
            Added::Unchanged(c) => {
                return Ok(Recorded {
                    status: "unchanged",
                    correction: c.seq,
                    event: id,
                    label,
                    corrections: self.current().len(),
                })
            }
            Added::Recorded(c) => c,
        };
        self.refit_changed(&store);
        let (seq, corrections) = (c.seq, store.corrections().len());
        {
            let mut recent = self.recent.lock_or_recover();
            // Unless a new stream began meanwhile: its event of this id is another.
            if recent.stream() == stream {
                if let Some(h) = recent.get_mut(id) {
                    h.corrected = Some(seq);
                }
            }
        }
        drop(store);
        match label {
            Label::Sarcastic => &self.counts.sarcastic,
            Label::NotSarcastic => &self.counts.not_sarcastic,
        }
        .fetch_add(1, Ordering::Relaxed);
        log::info!("room: event {id} corrected as {label} by {source} (correction {seq}, {corrections} held)");
        Ok(Recorded {
            status: "recorded",
            correction: seq,
            event: id,
            label,
            corrections,
        })
    }

    /// The corrections held, oldest first, without their vectors (what a UI lists).
    pub fn list(&self) -> Vec<Listed> {
        let store = self.store.lock_or_recover();
        store.corrections().iter().map(Listed::from).collect()
    }

    /// Takes correction `seq` back (a mute the room did not mean) and swaps in the head
    /// without it.
    pub fn forget(&self, seq: u64) -> Result<Listed, RoomError> {
        let r = (|| -> Result<Correction, RoomError> {
            let mut store = self.store.lock_or_recover();
            let c = store.forget(seq)?;
            self.refit_changed(&store);
            Ok(c)
        })();
        match r {
            Ok(c) => {
                log::info!(
                    "room: correction {seq} (event {}, {}) forgotten",
                    c.event_id,
                    c.label
                );
                Ok(Listed::from(&c))
            }
            Err(e) => {
                self.count_refused(e.reason());
                Err(e)
            }
        }
    }

    /// Takes in what another process (`sarcasmd feedback` while the daemon runs) wrote
    /// to the store, and swaps in a head built with it. `true` when there was something.
    pub fn pick_up(&self) -> Result<bool, RoomError> {
        let mut store = self.store.lock_or_recover();
        if !store.refresh_locked()? {
            return Ok(false);
        }
        self.refit_changed(&store);
        log::info!(
            "room: {} changed on disk (another writer): {} corrections held",
            self.cfg.store.display(),
            store.corrections().len()
        );
        Ok(true)
    }

    /// [`Self::refit`] after the store changed, counted in `refits` (a new encoder's
    /// refit is not: the corrections did not change).
    fn refit_changed(&self, store: &CorrectionStore) {
        self.refit(store);
        self.counts.refits.fetch_add(1, Ordering::Relaxed);
    }

    /// Builds the head from the store and swaps it in (readers keep the old one until
    /// they next ask).
    fn refit(&self, store: &CorrectionStore) {
        let encoder = self.text_encoder.lock_or_recover().clone();
        let head = RoomHead::fit(store.corrections(), &self.cfg, encoder.as_deref());
        if head.stale > 0 {
            log::warn!(
                "room: {} corrections were made with another text encoder and are not applied",
                head.stale
            );
        }
        *self.head.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(head);
    }

    pub fn stats(&self) -> RoomStats {
        let (held, dropped, skipped) = {
            let s = self.store.lock_or_recover();
            (s.corrections().len() as u64, s.dropped, s.skipped_lines)
        };
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        RoomStats {
            corrections_held: held,
            sarcastic: get(&self.counts.sarcastic),
            not_sarcastic: get(&self.counts.not_sarcastic),
            refused: self.counts.refused.lock_or_recover().clone(),
            refits: get(&self.counts.refits),
            muted: get(&self.counts.muted),
            dropped,
            lines_skipped: skipped,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn room(dir: &std::path::Path) -> Room {
        let cfg = RoomConfig {
            enabled: true,
            store: dir.join("c.jsonl"),
            recent_events: 4,
            keep_transcripts: true,
            ..Default::default()
        };
        Room::open(&cfg, true, Some("enc".into())).unwrap()
    }

    fn seen(id: u64, e: &[f32], p: f32) -> Seen {
        Seen {
            id,
            revises: None,
            p_shipped: p,
            p,
            threshold: 0.5,
            embedding: Some(e.to_vec()),
            prosody: vec![0.5],
            models: BTreeMap::from([("text_encoder".to_string(), "enc".to_string())]),
            transcript: Some("Great.".into()),
        }
    }

    #[test]
    fn a_rejected_line_mutes_its_repeat_across_a_reopen_and_refusals_say_why() {
        let d = tempfile::tempdir().unwrap();
        let r = room(d.path());
        assert_eq!(r.apply(seen(1, &[1.0, 0.0], 0.8)).0.p, 0.8);
        let got = r.correct(Some(1), Label::NotSarcastic, "test").unwrap();
        assert_eq!(
            (got.status, got.correction, got.corrections),
            ("recorded", 1, 1)
        );
        assert_eq!(
            r.correct(Some(1), Label::NotSarcastic, "test")
                .unwrap()
                .status,
            "unchanged"
        );
        assert!(matches!(
            r.correct(Some(1), Label::Sarcastic, "test"),
            Err(RoomError::AlreadyCorrected { seq: 1, .. })
        ));
        let (a, n) = r.apply(seen(2, &[1.0, 0.01], 0.8));
        assert_eq!(n, 1);
        assert!(a.p < 0.5 && a.muted_by == Some(1), "{a:?}");
        let e = r.correct(Some(99), Label::Sarcastic, "test").unwrap_err();
        assert_eq!((e.status(), e.reason()), (404, "unknown_event"));
        assert!(e.to_string().contains("ids 1-2"), "{e}");
        let mut none = seen(3, &[1.0], 0.8);
        none.embedding = None;
        r.apply(none);
        assert_eq!(
            r.correct(Some(3), Label::Sarcastic, "t")
                .unwrap_err()
                .status(),
            409
        );
        assert_eq!(r.stats().refused.get("unknown_event"), Some(&1));
        assert_eq!(r.stats().muted, 1);
        assert_eq!(r.list()[0].transcript.as_deref(), Some("Great."));

        // A restart keeps it.
        let r2 = room(d.path());
        assert!(r2.apply(seen(1, &[1.0, 0.0], 0.9)).0.p < 0.5);
        assert_eq!(r2.label(), "room-mute-v1 (1 corrections)");
        let store = r2.store.lock_or_recover();
        let c = &store.corrections()[0];
        assert_eq!(
            (c.prosody.as_slice(), c.transcript.as_deref()),
            (&[0.5f32][..], Some("Great."))
        );
    }

    #[test]
    fn corrections_another_process_writes_are_picked_up() {
        let d = tempfile::tempdir().unwrap();
        let (daemon, cli) = (room(d.path()), room(d.path()));
        assert!(!daemon.pick_up().unwrap());
        daemon.apply(seen(1, &[1.0, 0.0], 0.9));
        cli.apply(seen(1, &[1.0, 0.0], 0.9));
        cli.correct(Some(1), Label::NotSarcastic, "cli").unwrap();
        assert!(daemon.pick_up().unwrap());
        assert!(!daemon.pick_up().unwrap());
        let (a, n) = daemon.apply(seen(2, &[1.0, 0.0], 0.9));
        assert_eq!((a.muted_by, n), (Some(1), 1));
    }

    #[test]
    fn a_forgotten_correction_no_longer_mutes() {
        let d = tempfile::tempdir().unwrap();
        let r = room(d.path());
        r.apply(seen(1, &[1.0, 0.0], 0.8));
        r.correct(Some(1), Label::NotSarcastic, "test").unwrap();
        assert!(r.apply(seen(2, &[1.0, 0.0], 0.8)).0.muted_by.is_some());
        assert_eq!(r.forget(1).unwrap().event, 1);
        assert_eq!(r.forget(1).unwrap_err().status(), 404);
        let (a, n) = r.apply(seen(3, &[1.0, 0.0], 0.8));
        assert_eq!((a.muted_by, a.p, n), (None, 0.8, 0));
        assert!(r.list().is_empty());
    }

    /// Issue 49 #2: the check that an event is not yet corrected and the append were
    /// two steps, so simultaneous corrections of one event each passed the check.
    #[test]
    fn simultaneous_corrections_of_one_event_record_one() {
        let d = tempfile::tempdir().unwrap();
        let r = Arc::new(room(d.path()));
        r.apply(seen(5, &[1.0, 0.0], 0.8));
        r.apply(seen(6, &[0.0, 1.0], 0.8));
        let go = Arc::new(std::sync::Barrier::new(32));
        let threads: Vec<_> = (0..32)
            .map(|i| {
                let (r, go) = (r.clone(), go.clone());
                std::thread::spawn(move || {
                    // 16 on event 5, all "not sarcastic"; 16 on event 6, mixed labels.
                    let (id, label) = match i % 4 {
                        0 | 1 => (5, Label::NotSarcastic),
                        2 => (6, Label::Sarcastic),
                        _ => (6, Label::NotSarcastic),
                    };
                    go.wait();
                    (id, label, r.correct(Some(id), label, "http"))
                })
            })
            .collect();
        let got: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        for id in [5, 6] {
            let recorded: Vec<Label> = got
                .iter()
                .filter(|(i, _, r)| *i == id && r.as_ref().is_ok_and(|r| r.status == "recorded"))
                .map(|(_, l, _)| *l)
                .collect();
            assert_eq!(recorded.len(), 1, "event {id}: {got:?}");
            for (_, label, r) in got.iter().filter(|(i, _, _)| *i == id) {
                match r {
                    Ok(r) => assert_eq!(*label, recorded[0], "{r:?}"),
                    Err(e) => assert_eq!(
                        (*label != recorded[0], e.reason()),
                        (true, "already_corrected")
                    ),
                }
            }
        }
        // the threads race, so either event may be stored first
        let mut held: Vec<u64> = r.list().iter().map(|c| c.event).collect();
        held.sort_unstable();
        assert_eq!(held, [5, 6], "one correction per event in the store");
        assert_eq!(r.stats().refused.get("already_corrected"), Some(&8));
    }

    /// Issue 49 #3: a forgotten correction, or the store reset by `sarcasmd feedback
    /// --reset` while the daemon runs, left the event marked as corrected.
    #[test]
    fn a_forgotten_or_reset_correction_lets_its_event_be_corrected_again() {
        let d = tempfile::tempdir().unwrap();
        let r = room(d.path());
        r.apply(seen(1, &[1.0, 0.0], 0.8));
        r.apply(seen(2, &[0.0, 1.0], 0.8));
        assert_eq!(
            r.correct(Some(1), Label::NotSarcastic, "http")
                .unwrap()
                .correction,
            1
        );
        r.forget(1).unwrap();
        // The other label too: the event holds no correction now.
        let again = r.correct(Some(1), Label::Sarcastic, "http").unwrap();
        assert_eq!((again.status, again.correction), ("recorded", 3));

        // Another writer resets the store (the CLI while the daemon runs).
        let mut cli = CorrectionStore::open(&d.path().join("c.jsonl"), 10).unwrap();
        assert_eq!(cli.reset().unwrap(), 1);
        let again = r.correct(Some(1), Label::Sarcastic, "http").unwrap();
        assert_eq!(again.status, "recorded", "{again:?}");
        // ... or forgets this one; the daemon has not picked it up yet.
        cli.forget(again.correction).unwrap();
        let again = r.correct(Some(1), Label::NotSarcastic, "http").unwrap();
        assert_eq!(again.status, "recorded", "{again:?}");
        // And the one in force still decides.
        assert_eq!(
            r.correct(Some(1), Label::NotSarcastic, "http")
                .unwrap()
                .status,
            "unchanged"
        );
        let e = r.correct(Some(1), Label::Sarcastic, "http").unwrap_err();
        assert!(
            matches!(e, RoomError::AlreadyCorrected { seq, .. } if seq == again.correction),
            "{e}"
        );
        assert_eq!(r.list().len(), 1);
    }

    #[test]
    fn the_last_flagged_event_is_the_default_target() {
        let d = tempfile::tempdir().unwrap();
        let r = room(d.path());
        assert!(matches!(
            r.correct(None, Label::NotSarcastic, "mqtt"),
            Err(RoomError::NothingFlagged)
        ));
        r.apply(seen(1, &[1.0, 0.0], 0.8));
        r.apply(seen(2, &[0.0, 1.0], 0.2));
        assert_eq!(
            r.correct(None, Label::NotSarcastic, "mqtt").unwrap().event,
            1
        );
    }
}
