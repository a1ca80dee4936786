//! The pipeline's error type: any stage's error, a sink that cannot write, a panic.

use thiserror::Error;

use crate::sources::audio::AudioError;
use crate::views::asr::AsrError;
use crate::views::fusion::HeadError;
use crate::views::prosody::ProsodyError;
use crate::views::text::TextError;
use crate::views::vad::VadError;

#[derive(Debug, Error)]
pub enum PipelineError {
    #[error(transparent)]
    Audio(#[from] AudioError),
    #[error(transparent)]
    Vad(#[from] VadError),
    #[error(transparent)]
    Asr(#[from] AsrError),
    #[error(transparent)]
    Text(#[from] TextError),
    #[error(transparent)]
    Head(#[from] HeadError),
    #[error(transparent)]
    Prosody(#[from] ProsodyError),
    #[error("cannot write events: {0}")]
    Sink(std::io::Error),
    #[error("pipeline thread `{0}` panicked")]
    Panic(&'static str),
}
