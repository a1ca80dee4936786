//! `sarcasmd feedback`: corrections made after the meeting (`--events --labels`), and the
//! room head's store (`--list`, `--forget N`, `--reset`). The daemon's store is the one
//! its config names (`room.store`); a running daemon applies what is written here at its
//! next reload (`systemctl reload sarcasmd`) or its next correction.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};

use sarcasmd::common::models::{self, ModelStore};
use sarcasmd::config::Config;
use sarcasmd::pipeline::EngineError;
use sarcasmd::views::room::store::{now_unix_ms, STORE_VERSION};
use sarcasmd::views::room::{Correction, CorrectionStore, Label};
use sarcasmd::views::text::TextEncoder;

use super::exit::{self, Coded};

/// Corrections of the room head (`[room]`): record labels for events after the
/// meeting (`--events EVENTS.jsonl --labels FILE`: `ID LABEL` per line, labels
/// `sarcastic` / `not_sarcastic`), or `--list`, `--forget N`, `--reset` the store. A
/// running daemon picks them up within 2 s.
#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("action").required(true).args(["events", "list", "forget", "reset"])))]
pub(crate) struct Args {
    /// The daemon's config (its `room.store`, models and text settings).
    #[arg(long)]
    config: Option<PathBuf>,
    /// The event stream the labels refer to (`output.events`).
    #[arg(long, requires = "labels")]
    events: Option<PathBuf>,
    #[arg(long, requires = "events")]
    labels: Option<PathBuf>,
    /// Print the corrections held.
    #[arg(long)]
    list: bool,
    /// With --list: JSON lines (without the vectors).
    #[arg(long, requires = "list")]
    json: bool,
    /// Take correction N back (its number from --list).
    #[arg(long)]
    forget: Option<u64>,
    /// Remove every correction.
    #[arg(long)]
    reset: bool,
}

impl Args {
    pub(crate) fn run(self) -> i32 {
        exit::status(self.feedback())
    }

    fn feedback(self) -> anyhow::Result<i32> {
        let cfg = match &self.config {
            Some(p) => Config::load(p).map_err(Coded::bad_input)?,
            None => Config::default(),
        };
        if !cfg.room.enabled {
            log::warn!("room.enabled is off in this config: the daemon will not apply these corrections until it is on");
        }
        let mut store = CorrectionStore::open(&cfg.room.store, cfg.room.max_corrections)?;
        match (&self.events, &self.labels, self.forget) {
            (Some(events), Some(labels), _) => {
                let n = record(&cfg, &mut store, events, labels)?;
                eprintln!(
                    "recorded {n} corrections in {} ({} held); a running daemon picks them up within 2 s",
                    store.path().display(),
                    store.corrections().len()
                );
            }
            (_, _, Some(seq)) => {
                let c = store.forget(seq)?;
                eprintln!(
                    "forgot correction {seq} (event {}, {})",
                    c.event_id, c.label
                );
            }
            _ if self.reset => {
                let n = store.reset()?;
                eprintln!("removed {n} corrections from {}", store.path().display());
            }
            _ => {
                debug_assert!(self.list);
                list(&store, self.json)?;
            }
        }
        Ok(0)
    }
}

/// The corrections held, one a line (or JSON lines without the vectors).
fn list(store: &CorrectionStore, json: bool) -> anyhow::Result<()> {
    for c in store.corrections() {
        if json {
            let mut c = c.clone();
            c.text_embedding.clear();
            c.prosody.clear();
            println!("{}", serde_json::to_string(&c)?);
        } else {
            println!(
                "{:>5}  event {:>6}  {:<13}  p {:.3} (threshold {:.3})  {:<4}  {}",
                c.seq,
                c.event_id,
                c.label.as_str(),
                c.p_shipped,
                c.threshold,
                c.source,
                c.transcript.as_deref().unwrap_or("(transcript not kept)")
            );
        }
    }
    eprintln!(
        "{} corrections in {}",
        store.corrections().len(),
        store.path().display()
    );
    Ok(())
}

/// `ID LABEL` per line (space, tab or comma between; `#` starts a comment), or JSON lines
/// `{"id": N, "label": "..."}`.
fn read_labels(path: &Path) -> anyhow::Result<Vec<(u64, Label)>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let at = || format!("{}:{}", path.display(), n + 1);
        let (id, label) = if line.starts_with('{') {
            let v: serde_json::Value = serde_json::from_str(line).with_context(at)?;
            (
                v["id"]
                    .as_u64()
                    .with_context(|| format!("{}: no numeric \"id\"", at()))?,
                v["label"].as_str().unwrap_or("").to_string(),
            )
        } else {
            let mut parts = line
                .split(|c: char| c == ',' || c.is_whitespace())
                .filter(|s| !s.is_empty());
            let id = parts.next().unwrap_or("");
            let id = id
                .parse()
                .with_context(|| format!("{}: event id {id:?} is not a number", at()))?;
            (id, parts.next().unwrap_or("").to_string())
        };
        out.push((id, label.parse::<Label>().with_context(at)?));
    }
    Ok(out)
}

fn record(
    cfg: &Config,
    store: &mut CorrectionStore,
    events: &Path,
    labels: &Path,
) -> anyhow::Result<usize> {
    let labels = read_labels(labels)?;
    let text =
        std::fs::read_to_string(events).with_context(|| format!("reading {}", events.display()))?;
    // The newest event of each id (a replay appended to the same file wins), and which
    // early-ended events a revision replaced.
    let mut by_id: BTreeMap<u64, serde_json::Value> = BTreeMap::new();
    let mut revised: BTreeMap<u64, u64> = BTreeMap::new();
    for (n, line) in text.lines().enumerate() {
        let v: serde_json::Value = serde_json::from_str(line)
            .with_context(|| format!("{}:{}: not an event line", events.display(), n + 1))?;
        if v["type"] != "utterance" {
            continue;
        }
        let Some(id) = v["id"].as_u64() else { continue };
        if let Some(r) = v["revises"].as_u64() {
            revised.insert(r, id);
        }
        by_id.insert(id, v);
    }
    let ms = ModelStore::new(models::model_dir(cfg.models.dir.as_deref()), true)?;
    let (encoder, encoder_label) =
        TextEncoder::from_store(&ms, &cfg.text).map_err(|e| Coded::models(EngineError::from(e)))?;
    // Check every line first: a file with a mistake records nothing.
    let mut todo = Vec::new();
    for (id, label) in labels {
        let Some(ev) = by_id.get(&id) else {
            bail!(
                "event {id} is not in {} (as an utterance event)",
                events.display()
            );
        };
        if let Some(by) = revised.get(&id) {
            bail!("event {id} was replaced by event {by} (the speaker went on): label event {by}");
        }
        let Some(transcript) = ev["transcript"].as_str().filter(|s| !s.is_empty()) else {
            bail!("event {id} has no transcript in {} (output.include_transcript off, or nothing was heard): the room head learns from the text", events.display());
        };
        let input = if cfg.context.text_uses_context {
            // As the daemon built it: the transcripts that ended within the context before it.
            let start = ev["start_s"].as_f64().unwrap_or(0.0);
            let mut s: Vec<&str> = by_id
                .values()
                .filter(|o| {
                    let end = o["end_s"].as_f64().unwrap_or(f64::MAX);
                    end <= start
                        && end >= start - f64::from(cfg.context.seconds)
                        && o["id"] != ev["id"]
                })
                .filter_map(|o| o["transcript"].as_str())
                .collect();
            s.push(transcript);
            s.join(" ")
        } else {
            transcript.to_string()
        };
        todo.push((id, label, ev, transcript, input));
    }
    let mut n = 0;
    for (id, label, ev, transcript, input) in todo {
        let mut models: BTreeMap<String, String> =
            serde_json::from_value(ev["models"].clone()).unwrap_or_default();
        models.insert("text_encoder".into(), encoder_label.clone());
        let c = store.add(Correction {
            v: STORE_VERSION,
            seq: 0,
            at_unix_ms: now_unix_ms(),
            source: "cli".into(),
            event_id: id,
            label,
            p_shipped: ev["room"]["p_shipped"]
                .as_f64()
                .or(ev["p_sarcastic"].as_f64())
                .unwrap_or(f64::NAN) as f32,
            threshold: ev["threshold"].as_f64().unwrap_or(f64::NAN) as f32,
            text_embedding: encoder.embed(&input)?,
            prosody: Vec::new(),
            models,
            transcript: (cfg.room.keep_transcripts && cfg.output.include_transcript)
                .then(|| transcript.to_string()),
        })?;
        println!("{:>5}  event {id:>6}  {}", c.seq, label);
        n += 1;
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_read_as_pairs_or_json_and_a_bad_line_names_its_place() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("labels.txt");
        std::fs::write(&p, "# after the meeting\n3 not_sarcastic\n7,sarcastic\n{\"id\": 9, \"label\": \"not_sarcastic\"}\n\n").unwrap();
        assert_eq!(
            read_labels(&p).unwrap(),
            [
                (3, Label::NotSarcastic),
                (7, Label::Sarcastic),
                (9, Label::NotSarcastic)
            ]
        );
        std::fs::write(&p, "3 not_sarcastic\n4 maybe\n").unwrap();
        let e = format!("{:#}", read_labels(&p).unwrap_err());
        assert!(e.contains("labels.txt:2") && e.contains("bad label"), "{e}");
    }
}
