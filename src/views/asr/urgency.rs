//! Who waits on a decode ([`Urgency`]), which sets its thread count.

/// Who waits on a decode; sets its thread count (`asr.threads` / `asr.final_threads`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Urgency {
    /// Only captions: streaming steps during speech, interim text.
    Captions,
    /// An utterance event: its final transcript, or the speculative decode at a pause.
    Event,
}
