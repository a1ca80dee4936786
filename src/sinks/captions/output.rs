//! Captions as one of the daemon's outputs: `[captions]` checked with the event stream's
//! section, its files for the preflight, and the writer of each stream.

use std::path::Path;

use super::config::CaptionsConfig;
use super::writer::CaptionWriter;
use crate::common::validate::Problems;
use crate::sinks::event::{OutputConfig, UtteranceEvent};
use crate::sinks::output::{
    End, Files, Lasting, Outgoing, Output, OutputError, OutputKind, Start, StartError, State,
};

impl OutputKind for CaptionsConfig {
    fn name(&self) -> &'static str {
        "captions"
    }

    fn enabled(&self) -> bool {
        CaptionsConfig::enabled(self)
    }

    fn check_section(&self, output: &OutputConfig, problems: &mut Problems) {
        CaptionsConfig::check(self, output.include_transcript, problems);
        if output.events != "-" {
            let events = Path::new(&output.events);
            for (field, p) in [("captions.vtt", &self.vtt), ("captions.srt", &self.srt)] {
                if p.as_deref() == Some(events) {
                    problems.push(
                        field,
                        "is the same file as output.events: the JSON lines and the captions would interleave",
                    );
                }
            }
        }
    }

    fn files(&self) -> Files<'_> {
        let writes = [("captions.vtt", &self.vtt), ("captions.srt", &self.srt)]
            .into_iter()
            .filter_map(|(field, p)| p.as_deref().map(|p| (field, p)))
            .collect();
        Files {
            writes,
            reads: Vec::new(),
        }
    }

    fn start(&self, _s: Start<'_>) -> Result<Box<dyn Output>, StartError> {
        Ok(Box::new(CaptionsOutput {
            cfg: self.clone(),
            writer: None,
        }))
    }
}

/// The caption files of one stream: created (truncated) when the stream runs, after the
/// models loaded, so a start that fails leaves the previous files as they were.
pub struct CaptionsOutput {
    cfg: CaptionsConfig,
    writer: Option<CaptionWriter>,
}

impl CaptionsOutput {
    fn writer(&mut self) -> &mut CaptionWriter {
        self.writer
            .get_or_insert_with(|| CaptionWriter::create_or_retry(&self.cfg))
    }
}

impl Output for CaptionsOutput {
    fn name(&self) -> &'static str {
        "captions"
    }

    fn state(&mut self, state: State) {
        if state == State::Running {
            self.writer();
        }
    }

    fn utterance(&mut self, ev: &Outgoing<'_, UtteranceEvent>) -> Result<(), OutputError> {
        Ok(self.writer().write(ev.event)?)
    }

    fn finish(self: Box<Self>, _end: &End<'_>) -> Option<Box<dyn Lasting>> {
        None
    }
}
