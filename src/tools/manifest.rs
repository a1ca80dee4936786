//! Dataset manifests: one JSON object per line, one line per item (utterance).
//!
//! The same format feeds `sarcasmd features`, `sarcasmd embed` and the training code, so
//! a manifest written by a corpus converter is read here once, checked, and every later
//! step can trust it. The format is documented in `docs/manifest.md`.
//!
//! Unknown keys are ignored, so a manifest written by a newer converter still loads;
//! everything that is present is checked, and an error names the file, line and column.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use thiserror::Error;

/// A line longer than this is not a manifest item (a transcript plus 15 s of context is a
/// few kB); refusing it keeps a corrupt or binary file from being parsed as one huge line.
pub const MAX_LINE_BYTES: usize = 1 << 20;

#[derive(Debug, Error)]
pub enum ManifestError {
    #[error("{path}: cannot read the manifest: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}:{line}:{column}: not a manifest item: {reason} (one JSON object per line; see docs/manifest.md)")]
    Syntax {
        path: PathBuf,
        line: usize,
        column: usize,
        reason: String,
    },
    #[error("{path}:{line}: field `{field}`: {reason}")]
    Field {
        path: PathBuf,
        line: usize,
        field: &'static str,
        reason: String,
    },
    #[error("{path}:{line}: id {id:?} was already used on line {first_line}; ids must be unique")]
    DuplicateId {
        path: PathBuf,
        line: usize,
        first_line: usize,
        id: String,
    },
    #[error("{path}:{line}: line is {bytes} bytes long, more than the {MAX_LINE_BYTES} a manifest item may have")]
    LineTooLong {
        path: PathBuf,
        line: usize,
        bytes: usize,
    },
}

/// A 0/1 label. Converters write integers; MUStARD's own JSON has booleans; both load.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
enum RawLabel {
    Bool(bool),
    Int(i64),
}

/// One turn of conversational context, oldest first. A bare string is a turn without a
/// speaker.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum ContextTurn {
    Text(String),
    Turn {
        #[serde(default)]
        speaker: Option<String>,
        text: String,
    },
}

impl ContextTurn {
    pub fn text(&self) -> &str {
        match self {
            ContextTurn::Text(t) => t,
            ContextTurn::Turn { text, .. } => text,
        }
    }
}

#[derive(Debug, Deserialize)]
struct RawLabels {
    text: Option<RawLabel>,
    audio: Option<RawLabel>,
    video: Option<RawLabel>,
}

#[derive(Debug, Deserialize)]
struct RawItem {
    id: String,
    #[serde(alias = "transcript")]
    text: Option<String>,
    audio: Option<PathBuf>,
    video: Option<PathBuf>,
    #[serde(default)]
    context: Vec<ContextTurn>,
    label: Option<RawLabel>,
    labels: Option<RawLabels>,
    #[serde(default)]
    annotators: Vec<RawLabel>,
    speaker: Option<String>,
    source: Option<String>,
    group: Option<String>,
    split: Option<String>,
    emotion_implicit: Option<String>,
    emotion_explicit: Option<String>,
    valence: Option<f64>,
    arousal: Option<f64>,
    sarcasm_type: Option<String>,
}

/// Per-modality labels (SarcNet, MuSAG): whether the item is sarcastic judged from that
/// modality alone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModalityLabels {
    pub text: Option<bool>,
    pub audio: Option<bool>,
    pub video: Option<bool>,
}

/// One checked manifest item. Paths are resolved against the manifest's directory.
#[derive(Debug, Clone, PartialEq)]
pub struct ManifestItem {
    /// 1-based line in the manifest, for messages.
    pub line: usize,
    pub id: String,
    /// Gold transcript.
    pub text: Option<String>,
    pub audio: Option<PathBuf>,
    pub video: Option<PathBuf>,
    pub context: Vec<ContextTurn>,
    /// Overall label: sarcastic or not.
    pub label: Option<bool>,
    pub modality_labels: ModalityLabels,
    /// One label per annotator, when the corpus publishes them (agreement, kappa).
    pub annotators: Vec<bool>,
    pub speaker: Option<String>,
    /// Corpus the item came from.
    pub source: Option<String>,
    /// Items sharing a group (scene, show) must stay on one side of every split.
    pub group: Option<String>,
    pub split: Option<String>,
    pub emotion_implicit: Option<String>,
    pub emotion_explicit: Option<String>,
    pub valence: Option<f64>,
    pub arousal: Option<f64>,
    pub sarcasm_type: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Manifest {
    pub path: PathBuf,
    pub items: Vec<ManifestItem>,
}

/// The largest corpus manifest we convert is a few MB; this bounds a wrong path.
const MAX_MANIFEST_BYTES: u64 = 1 << 30;

impl Manifest {
    pub fn load(path: &Path) -> Result<Self, ManifestError> {
        let text =
            crate::common::file_kind::read_text(path, MAX_MANIFEST_BYTES).map_err(|source| {
                ManifestError::Io {
                    path: path.to_path_buf(),
                    source,
                }
            })?;
        Self::parse(&text, path)
    }

    /// Parse manifest text; `path` is where it came from (for messages and for resolving
    /// relative media paths). Blank lines and lines starting with `//` are skipped.
    pub fn parse(text: &str, path: &Path) -> Result<Self, ManifestError> {
        let base = path.parent().unwrap_or(Path::new(""));
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let mut items = Vec::new();
        let mut first_line_of: HashMap<String, usize> = HashMap::new();
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            if raw.len() > MAX_LINE_BYTES {
                return Err(ManifestError::LineTooLong {
                    path: path.to_path_buf(),
                    line,
                    bytes: raw.len(),
                });
            }
            let trimmed = raw.trim();
            if trimmed.is_empty() || trimmed.starts_with("//") {
                continue;
            }
            let item: RawItem =
                serde_json::from_str(trimmed).map_err(|e| ManifestError::Syntax {
                    path: path.to_path_buf(),
                    line,
                    // serde_json counts within the trimmed text; point into the raw line.
                    column: e.column() + (raw.len() - raw.trim_start().len()),
                    reason: strip_position(&e.to_string()),
                })?;
            let item = check(item, line, base).map_err(|(field, reason)| ManifestError::Field {
                path: path.to_path_buf(),
                line,
                field,
                reason,
            })?;
            if let Some(&first_line) = first_line_of.get(&item.id) {
                return Err(ManifestError::DuplicateId {
                    path: path.to_path_buf(),
                    line,
                    first_line,
                    id: item.id,
                });
            }
            first_line_of.insert(item.id.clone(), line);
            items.push(item);
        }
        Ok(Self {
            path: path.to_path_buf(),
            items,
        })
    }
}

/// serde_json appends " at line L column C", which is wrong for us (it counts within
/// one manifest line); the caller reports its own position.
fn strip_position(msg: &str) -> String {
    match msg.rfind(" at line ") {
        Some(k) => msg[..k].to_string(),
        None => msg.to_string(),
    }
}

fn label(v: RawLabel, field: &'static str) -> Result<bool, (&'static str, String)> {
    match v {
        RawLabel::Bool(b) => Ok(b),
        RawLabel::Int(0) => Ok(false),
        RawLabel::Int(1) => Ok(true),
        RawLabel::Int(n) => Err((field, format!("{n} is not a label (0, 1, false or true)"))),
    }
}

fn media_path(
    p: Option<PathBuf>,
    base: &Path,
    field: &'static str,
) -> Result<Option<PathBuf>, (&'static str, String)> {
    match p {
        None => Ok(None),
        Some(p) if p.as_os_str().is_empty() => Err((field, "empty path".into())),
        Some(p) if p.is_absolute() => Ok(Some(p)),
        Some(p) => Ok(Some(base.join(p))),
    }
}

fn non_empty(
    s: Option<String>,
    field: &'static str,
) -> Result<Option<String>, (&'static str, String)> {
    match s {
        Some(s) if s.trim().is_empty() => Err((field, "empty; leave the key out instead".into())),
        other => Ok(other),
    }
}

fn check(raw: RawItem, line: usize, base: &Path) -> Result<ManifestItem, (&'static str, String)> {
    if raw.id.trim().is_empty() {
        return Err(("id", "empty".into()));
    }
    if raw.id.chars().any(char::is_control) {
        return Err(("id", "contains control characters".into()));
    }
    if raw.text.is_none() && raw.audio.is_none() && raw.video.is_none() {
        return Err((
            "text",
            "the item has no text, audio or video: nothing to score".into(),
        ));
    }
    for (v, field) in [(raw.valence, "valence"), (raw.arousal, "arousal")] {
        if let Some(x) = v {
            if !x.is_finite() {
                return Err((field, format!("{x} is not a finite number")));
            }
        }
    }
    let modality_labels = match raw.labels {
        None => ModalityLabels::default(),
        Some(l) => ModalityLabels {
            text: l.text.map(|v| label(v, "labels.text")).transpose()?,
            audio: l.audio.map(|v| label(v, "labels.audio")).transpose()?,
            video: l.video.map(|v| label(v, "labels.video")).transpose()?,
        },
    };
    let annotators = raw
        .annotators
        .into_iter()
        .map(|v| label(v, "annotators"))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(ManifestItem {
        line,
        id: raw.id,
        text: raw.text,
        audio: media_path(raw.audio, base, "audio")?,
        video: media_path(raw.video, base, "video")?,
        context: raw.context,
        label: raw.label.map(|v| label(v, "label")).transpose()?,
        modality_labels,
        annotators,
        speaker: raw.speaker,
        source: raw.source,
        group: raw.group,
        split: non_empty(raw.split, "split")?,
        emotion_implicit: non_empty(raw.emotion_implicit, "emotion_implicit")?,
        emotion_explicit: non_empty(raw.emotion_explicit, "emotion_explicit")?,
        valence: raw.valence,
        arousal: raw.arousal,
        sarcasm_type: non_empty(raw.sarcasm_type, "sarcasm_type")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Manifest, ManifestError> {
        Manifest::parse(text, Path::new("/data/set/m.jsonl"))
    }

    #[test]
    fn full_item_loads_with_paths_resolved_against_the_manifest() {
        let m = parse(concat!(
            "\u{feff}// MUStARD++ excerpt\n",
            r#"{"id":"1_60","text":"Oh, great.","audio":"a/1_60.wav","video":"/v/1_60.mp4","#,
            r#""context":["Hi.",{"speaker":"SHELDON","text":"We lost."}],"label":true,"#,
            r#""labels":{"text":0,"audio":1},"annotators":[1,1,0],"speaker":"LEONARD","#,
            r#""group":"scene-1","split":"train","valence":-0.5,"arousal":0.4,"#,
            r#""sarcasm_type":"propositional","new_key_from_a_newer_converter":7}"#,
            "\r\n\n",
            r#"{"id":"2","transcript":"Sure.","label":0}"#,
        ))
        .unwrap();
        assert_eq!(m.items.len(), 2);
        let a = &m.items[0];
        assert_eq!(a.line, 2);
        assert_eq!(a.audio.as_deref(), Some(Path::new("/data/set/a/1_60.wav")));
        assert_eq!(a.video.as_deref(), Some(Path::new("/v/1_60.mp4")));
        assert_eq!(a.context[1].text(), "We lost.");
        assert_eq!(a.label, Some(true));
        assert_eq!(
            a.modality_labels,
            ModalityLabels {
                text: Some(false),
                audio: Some(true),
                video: None
            }
        );
        assert_eq!(a.annotators, vec![true, true, false]);
        assert_eq!(m.items[1].text.as_deref(), Some("Sure."));
        assert_eq!(m.items[1].label, Some(false));
        assert_eq!(m.items[1].line, 4);
    }

    #[test]
    fn errors_name_line_column_and_field() {
        let e = parse("{\"id\":\"a\",\"text\":\"x\"}\n  {\"id\": 5}").unwrap_err();
        match &e {
            ManifestError::Syntax { line, column, .. } => {
                assert_eq!((*line, *column), (2, 10), "{e}")
            }
            other => panic!("{other}"),
        }
        assert!(e.to_string().starts_with("/data/set/m.jsonl:2:10: "), "{e}");

        let e = parse(r#"{"id":"a","text":"x","label":2}"#).unwrap_err();
        assert!(
            e.to_string()
                .contains(":1: field `label`: 2 is not a label"),
            "{e}"
        );
        let e = parse(r#"{"id":"a"}"#).unwrap_err();
        assert!(e.to_string().contains("nothing to score"), "{e}");
        let e = parse(r#"{"id":" ","text":"x"}"#).unwrap_err();
        assert!(e.to_string().contains("field `id`: empty"), "{e}");
        let e = parse(r#"{"id":"a","audio":""}"#).unwrap_err();
        assert!(e.to_string().contains("field `audio`: empty path"), "{e}");
        let e = parse(r#"{"id":"a","text":"x","annotators":[1,3]}"#).unwrap_err();
        assert!(e.to_string().contains("field `annotators`"), "{e}");
    }

    #[test]
    fn duplicate_ids_are_refused_with_both_lines() {
        let e =
            parse("{\"id\":\"a\",\"text\":\"x\"}\n\n{\"id\":\"a\",\"text\":\"y\"}").unwrap_err();
        assert!(
            e.to_string()
                .ends_with(":3: id \"a\" was already used on line 1; ids must be unique"),
            "{e}"
        );
    }

    #[test]
    fn an_over_long_line_is_refused_before_parsing() {
        let long = format!(r#"{{"id":"a","text":"{}"}}"#, "x".repeat(MAX_LINE_BYTES));
        assert!(matches!(
            parse(&long),
            Err(ManifestError::LineTooLong { line: 1, .. })
        ));
    }
}
