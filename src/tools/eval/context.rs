//! The context condition: the last `context_s` seconds of an item's context turns
//! before its text, as the live text view sees earlier transcripts.

use crate::tools::manifest::ManifestItem;

/// Words per second of conversational English (about 150 per minute): how a manifest's
/// context turns, which carry no timing, are cut to the last `context_s` seconds.
pub const CONTEXT_WORDS_PER_S: f32 = 2.5;

/// The last `context_s` seconds of an item's context turns (whole turns, newest first
/// until the word budget is used; the turn that crosses it is kept, as the live context
/// keeps a turn that began before its window), oldest first, joined as the live text
/// view joins earlier transcripts.
pub fn context_text(item: &ManifestItem, context_s: f32) -> (String, usize) {
    let budget = (context_s * CONTEXT_WORDS_PER_S).round() as usize;
    let mut taken: Vec<&str> = Vec::new();
    let mut words = 0;
    for turn in item.context.iter().rev() {
        if words >= budget {
            break;
        }
        let t = turn.text().trim();
        if t.is_empty() {
            continue;
        }
        words += t.split_whitespace().count();
        taken.push(t);
    }
    taken.reverse();
    (taken.join(" "), words)
}

/// `text` after the item's last `context_s` seconds of context: the context condition's
/// input to the text view (also what `sarcasmd embed --context-s` embeds for training).
pub fn text_with_context(item: &ManifestItem, text: &str, context_s: f32) -> String {
    with_context(&context_text(item, context_s).0, text)
}

pub(super) fn with_context(context: &str, text: &str) -> String {
    if context.is_empty() {
        text.to_string()
    } else {
        format!("{context} {text}")
    }
}
