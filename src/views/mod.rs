//! The views: what one utterance is turned into, stage by stage. Segmentation first
//! ([`vad`]: Silero VAD and the endpointer), then per utterance the transcript ([`asr`],
//! with [`asr::streaming`] decoding while it is spoken), the audio view's features
//! ([`prosody`]), the sentence embedding ([`text`]), faces ([`vision`]), the small
//! trained heads that score each view ([`heads`]), their late [`fusion`], and the
//! optional MUStARD++ labels ([`extras`]). The [`room`] head comes last: what the
//! people in the room corrected, applied on top of fusion. Views import sources and leaves, never the
//! pipeline that runs them.

pub mod asr;
pub mod extras;
pub mod fusion;
pub mod heads;
pub mod prosody;
pub mod room;
pub mod text;
pub mod vad;
pub mod vision;
