//! Live caption files: WebVTT (`text/vtt`) and SRT, one cue per Whisper segment, written
//! as soon as the utterance's event is final.
//!
//! Cue times come from Whisper's segment timestamps (stream seconds), clamped into the
//! utterance's speech span so a trimmed-encoder timestamp can never point outside it, and
//! made non-overlapping because many players (and SRT) cannot show overlapping cues.
//! Sarcastic cues are wrapped in `<c.sarcasm>` (WebVTT) so a player or overlay can style
//! them with `::cue(.sarcasm)`, and every utterance is preceded by a `NOTE` carrying its
//! score. SRT has neither classes nor comments: sarcastic lines get a `<font>` colour,
//! which most SRT players honour. Each utterance's cues are written with one `write_all`
//! and flushed, so a reader tailing the file never sees half a cue block.
//!
//! Files: `writer.rs` the cues and the writer; `config.rs` the `[captions]` section and
//! its checks; `output.rs` the output the daemon holds (the files are opened when a
//! stream starts).

mod config;
mod output;
mod writer;

pub use config::{CaptionsConfig, MAX_ROTATE_MB};
pub use writer::{cues_for, srt_block, vtt_block, CaptionWriter, CaptionsError, Cue};
