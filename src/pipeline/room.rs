//! The room step, the last before the outputs: each event is scored through the room
//! head (`[room]`: corrections from the people in the room, `crate::views::room`) and
//! remembered so that a correction can name it. Its score is then final: every output
//! gets the event this step returns, so the overlay, MQTT, captions, `/metrics` and the
//! events file agree. Runs on the sink stage's thread, right before the event is written.

use crate::sinks::event::{RoomNote, UtteranceEvent};
use crate::views::room::{head_label, Room, Seen};

/// `ev` as the room head scores it: `p_sarcastic` and `sarcastic` after the head, the
/// shipped score in `room`, and the head's name with its count of corrections in `models`.
pub(super) fn scored(room: &Room, mut ev: UtteranceEvent) -> UtteranceEvent {
    let features = ev.features.as_ref();
    let (a, corrections) = room.apply(Seen {
        id: ev.id,
        revises: ev.revises,
        p_shipped: ev.p_sarcastic,
        p: ev.p_sarcastic,
        threshold: ev.threshold,
        embedding: features.and_then(|f| f.text_embedding.clone()),
        prosody: features.map(|f| f.prosody.clone()).unwrap_or_default(),
        models: ev.models.clone(),
        transcript: ev.transcript.clone(),
    });
    ev.room = Some(RoomNote {
        p_shipped: ev.p_sarcastic,
        muted_by: a.muted_by,
        corrections,
    });
    ev.p_sarcastic = a.p;
    ev.sarcastic = a.p >= ev.threshold;
    ev.models
        .insert("room_head".into(), head_label(corrections));
    ev
}
