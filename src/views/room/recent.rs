//! The events of this stream a correction can still name: bounded, oldest out first.

use std::collections::{BTreeMap, VecDeque};

/// What the daemon keeps of one event until it is corrected or falls out.
#[derive(Debug, Clone, PartialEq)]
pub struct Seen {
    pub id: u64,
    /// The early-ended event this one replaces.
    pub revises: Option<u64>,
    /// Score from the shipped heads, the score served (after the room head) and the threshold.
    pub p_shipped: f32,
    pub p: f32,
    pub threshold: f32,
    pub embedding: Option<Vec<f32>>,
    pub prosody: Vec<f32>,
    pub models: BTreeMap<String, String>,
    pub transcript: Option<String>,
}

#[derive(Debug)]
pub(super) struct Held {
    pub(super) seen: Seen,
    pub(super) revised_by: Option<u64>,
    /// The correction this daemon made of it (its `seq`). Whether it is still in force
    /// is the store's to say: it may have been forgotten or reset since.
    pub(super) corrected: Option<u64>,
}

#[derive(Debug)]
pub(super) struct RecentEvents {
    cap: usize,
    q: VecDeque<Held>,
    /// Counts the streams: ids start again with each, so a correction that began in one
    /// must not mark the next one's event of the same id.
    stream: u64,
}

impl RecentEvents {
    pub(super) fn new(cap: usize) -> Self {
        Self {
            cap,
            q: VecDeque::new(),
            stream: 0,
        }
    }

    pub(super) fn cap(&self) -> usize {
        self.cap
    }

    pub(super) fn clear(&mut self) {
        self.q.clear();
        self.stream += 1;
    }

    pub(super) fn stream(&self) -> u64 {
        self.stream
    }

    pub(super) fn push(&mut self, seen: Seen) {
        if let Some(old) = seen.revises.and_then(|r| self.get_mut(r)) {
            old.revised_by = Some(seen.id);
        }
        self.q.push_back(Held {
            seen,
            revised_by: None,
            corrected: None,
        });
        while self.q.len() > self.cap {
            self.q.pop_front();
        }
    }

    pub(super) fn get_mut(&mut self, id: u64) -> Option<&mut Held> {
        self.q.iter_mut().rev().find(|h| h.seen.id == id)
    }

    /// The newest event served as sarcastic (not replaced by a revision).
    pub(super) fn last_flagged(&self) -> Option<u64> {
        self.q
            .iter()
            .rev()
            .find(|h| h.revised_by.is_none() && h.seen.p >= h.seen.threshold)
            .map(|h| h.seen.id)
    }

    /// "ids 12-1011" or "none yet", for a refusal.
    pub(super) fn held(&self) -> String {
        match (self.q.front(), self.q.back()) {
            (Some(a), Some(b)) => format!("ids {}-{}", a.seen.id, b.seen.id),
            _ => "none yet".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(id: u64, p: f32, revises: Option<u64>) -> Seen {
        Seen {
            id,
            revises,
            p_shipped: p,
            p,
            threshold: 0.5,
            embedding: None,
            prosody: vec![],
            models: BTreeMap::new(),
            transcript: None,
        }
    }

    #[test]
    fn bounded_revisions_marked_and_the_last_flag_found() {
        let mut r = RecentEvents::new(3);
        r.push(seen(1, 0.9, None));
        r.push(seen(2, 0.2, None));
        r.push(seen(3, 0.8, None));
        r.push(seen(4, 0.1, Some(3)));
        assert!(r.get_mut(1).is_none(), "the oldest fell out");
        assert_eq!(r.get_mut(3).unwrap().revised_by, Some(4));
        assert_eq!(r.last_flagged(), None, "3 was revised, 2 and 4 are plain");
        assert_eq!(r.held(), "ids 2-4");
    }
}
