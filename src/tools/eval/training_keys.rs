//! Which items a head was trained on (its `item_text_sha8` list), so eval can say where a
//! view's figure is in-sample and score the rest out of fold.

use std::collections::{BTreeMap, HashSet};

use sha2::{Digest, Sha256};

use super::configs::SERVED;
use super::item::ItemResult;

/// The key under which heads record the items they were trained on: the first 8 hex
/// digits of SHA-256 over the gold text lowercased, stripped of everything but letters,
/// digits, `_` and whitespace, whitespace collapsed (`text_keys` in
/// models/recipe/lib/heads.py, which uses Python's `\w`). Matching on text rather than ids
/// also catches the same utterance under another corpus's id (688 MUStARD items are
/// MUStARD++ items).
pub fn text_key(text: &str) -> Option<String> {
    let kept: String = text
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == '_' || c.is_whitespace())
        .collect();
    let norm = kept.split_whitespace().collect::<Vec<_>>().join(" ");
    if norm.is_empty() {
        return None;
    }
    let digest = Sha256::digest(norm.as_bytes());
    Some(digest[..4].iter().map(|b| format!("{b:02x}")).collect())
}

/// What each head was trained on (from its metadata), by view.
#[derive(Debug, Default)]
pub struct TrainingKeys {
    /// "text", "audio", "video", "fusion" -> keys; a head without the record is absent.
    pub by_head: BTreeMap<&'static str, HashSet<String>>,
}

impl TrainingKeys {
    fn heads_of(views: &str) -> Vec<&'static str> {
        let mut h: Vec<&'static str> = views
            .split('+')
            .map(|v| match v {
                "T" => "text",
                "A" => "audio",
                _ => "video",
            })
            .collect();
        if h.len() > 1 {
            h.push("fusion");
        }
        h
    }

    /// Items of a row that a head scoring them was trained on (for "served", the heads
    /// of the views each item has); `None` when no head records its training items
    /// (heads from before the record existed).
    pub(super) fn seen(&self, views: &str, items: &[&ItemResult]) -> Option<usize> {
        if self.by_head.is_empty() {
            return None;
        }
        let row_heads = (views != SERVED).then(|| Self::heads_of(views));
        Some(
            items
                .iter()
                .filter(|r| {
                    let Some(k) = &r.gold_key else { return false };
                    let heads = match &row_heads {
                        Some(h) => h.clone(),
                        None => {
                            let present: Vec<&str> = ["T", "A", "V"]
                                .into_iter()
                                .filter(|v| r.p.contains_key(*v))
                                .collect();
                            if present.is_empty() {
                                Vec::new()
                            } else {
                                Self::heads_of(&present.join("+"))
                            }
                        }
                    };
                    heads
                        .iter()
                        .filter_map(|h| self.by_head.get(h))
                        .any(|set| set.contains(k))
                })
                .count(),
        )
    }
}
