//! `sarcasmd devices`: the audio inputs (cpal/ALSA) and cameras (V4L2) this machine
//! has, numbered the way `source.device` and the camera options take them.

use std::fmt::Write as _;

use cpal::traits::{DeviceTrait, HostTrait};
use serde::Serialize;

use crate::sources::audio::mic::{self, is_convertible, summarize_ranges};
use crate::sources::video::camera;

#[derive(Debug, Clone, Serialize)]
pub struct DeviceList {
    /// The audio host (ALSA on Linux).
    pub audio_host: String,
    pub audio_inputs: Vec<AudioInput>,
    /// The system default input (`source.device` unset), and whether it can capture.
    pub default_input: DefaultInput,
    /// Listing audio devices failed (the list above is then empty).
    pub audio_error: Option<String>,
    pub cameras: Vec<CameraEntry>,
    /// Listing cameras failed (the list above is then empty).
    pub camera_error: Option<String>,
}

/// What probing a device gave: `{"ok": "..."}` or `{"error": "..."}` in JSON.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Probe {
    Ok(String),
    Error(String),
}

impl<E: std::fmt::Display> From<Result<String, E>> for Probe {
    fn from(r: Result<String, E>) -> Self {
        match r {
            Ok(v) => Probe::Ok(v),
            Err(e) => Probe::Error(e.to_string()),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct AudioInput {
    pub index: usize,
    pub id: String,
    pub name: String,
    pub description: Vec<String>,
    /// ALSA's `null` device: endless silence, not a microphone.
    #[serde(rename = "virtual")]
    pub is_virtual: bool,
    /// What capture would use (its default input config), or why there is none.
    pub default_config: Probe,
    /// Formats, channel counts and rates it offers (summarized per format).
    pub supported: Probe,
}

#[derive(Debug, Clone, Serialize)]
pub struct DefaultInput {
    pub id: Option<String>,
    pub name: Option<String>,
    pub default_config: Probe,
}

#[derive(Debug, Clone, Serialize)]
pub struct CameraEntry {
    pub index: String,
    pub name: String,
    pub description: String,
}

fn config_desc(c: &cpal::SupportedStreamConfig) -> String {
    let note = if is_convertible(c.sample_format()) {
        ""
    } else {
        " (not PCM: unusable)"
    };
    format!(
        "{} {} ch {} Hz{note}",
        c.sample_format(),
        c.channels(),
        c.sample_rate()
    )
}

/// Everything there is, without opening a stream.
pub fn list() -> DeviceList {
    let host = cpal::default_host();
    let (audio_inputs, audio_error) = match mic::input_devices(&host) {
        Ok(devs) => (
            devs.into_iter()
                .map(|d| AudioInput {
                    is_virtual: d.id == "alsa:null",
                    default_config: d
                        .device
                        .default_input_config()
                        .map(|c| config_desc(&c))
                        .into(),
                    supported: d
                        .device
                        .supported_input_configs()
                        .map(|r| summarize_ranges(&r.collect::<Vec<_>>()))
                        .into(),
                    index: d.index,
                    id: d.id,
                    name: d.name,
                    description: d.extended,
                })
                .collect(),
            None,
        ),
        Err(e) => (Vec::new(), Some(e.to_string())),
    };
    let default_input = match host.default_input_device() {
        Some(d) => DefaultInput {
            id: d.id().ok().map(|i| i.to_string()),
            name: d.description().ok().map(|x| x.name().to_string()),
            default_config: d.default_input_config().map(|c| config_desc(&c)).into(),
        },
        None => DefaultInput {
            id: None,
            name: None,
            default_config: Probe::Error("the host has no default input device".into()),
        },
    };
    let (cameras, camera_error) = match camera::list_cameras() {
        Ok(cams) => (
            cams.iter()
                .map(|c| CameraEntry {
                    index: c.index().to_string(),
                    name: c.human_name(),
                    description: c.description().to_string(),
                })
                .collect(),
            None,
        ),
        Err(e) => (Vec::new(), Some(e.to_string())),
    };
    DeviceList {
        audio_host: format!("{:?}", host.id()),
        audio_inputs,
        default_input,
        audio_error,
        cameras,
        camera_error,
    }
}

impl DeviceList {
    /// Inputs that can be a microphone (everything but ALSA's `null`).
    pub fn microphones(&self) -> usize {
        self.audio_inputs.iter().filter(|d| !d.is_virtual).count()
    }

    /// The human-readable listing `sarcasmd devices` prints.
    pub fn render(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "Audio inputs ({}):", self.audio_host);
        if let Some(e) = &self.audio_error {
            let _ = writeln!(s, "  cannot list them: {e}");
        }
        for d in &self.audio_inputs {
            let virt = if d.is_virtual {
                "  [virtual: endless silence, not a microphone]"
            } else {
                ""
            };
            let _ = writeln!(s, "  {}: {} - {}{virt}", d.index, d.id, d.name);
            for line in d.description.iter().filter(|l| **l != d.name) {
                let _ = writeln!(s, "       {line}");
            }
            match &d.default_config {
                Probe::Ok(c) => {
                    let _ = writeln!(s, "       default: {c}");
                }
                Probe::Error(e) => {
                    let _ = writeln!(s, "       default: none ({e})");
                }
            }
            match &d.supported {
                Probe::Ok(c) => {
                    let _ = writeln!(s, "       offers:  {c}");
                }
                Probe::Error(e) => {
                    let _ = writeln!(s, "       offers:  unknown ({e})");
                }
            }
        }
        if self.microphones() == 0 {
            let _ = writeln!(
                s,
                "  No microphone found{}. Plug one in; `arecord -l` lists the sound cards ALSA sees.",
                if self.audio_inputs.is_empty() {
                    ""
                } else {
                    " (only virtual devices)"
                }
            );
        }
        let di = &self.default_input;
        let name = match (&di.id, &di.name) {
            (Some(i), Some(n)) => format!("{i} ({n})"),
            (Some(i), None) => i.clone(),
            _ => "none".into(),
        };
        match &di.default_config {
            Probe::Ok(c) => {
                let _ = writeln!(s, "  System default input: {name}: {c}");
            }
            Probe::Error(e) => {
                let _ = writeln!(s, "  System default input: {name}: cannot capture ({e})");
            }
        }
        let _ = writeln!(s, "\nCameras (V4L2):");
        if let Some(e) = &self.camera_error {
            let _ = writeln!(s, "  cannot list them: {e}");
        } else if self.cameras.is_empty() {
            let _ = writeln!(
                s,
                "  No camera found (no V4L2 capture device under /dev/video*)."
            );
        }
        for c in &self.cameras {
            let _ = writeln!(s, "  {}: {} - {}", c.index, c.name, c.description);
        }
        let _ = writeln!(
            s,
            "\nSelect a microphone with `source.device` (an index or part of an id/name above)."
        );
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listing_never_fails_and_says_when_there_is_nothing() {
        let l = list();
        let text = l.render();
        assert!(text.contains("Audio inputs"), "{text}");
        assert!(text.contains("Cameras (V4L2):"), "{text}");
        if l.microphones() == 0 {
            assert!(text.contains("No microphone found"), "{text}");
        }
        if l.cameras.is_empty() && l.camera_error.is_none() {
            assert!(text.contains("No camera found"), "{text}");
        }
        let json = serde_json::to_value(&l).unwrap();
        assert!(json["audio_inputs"].is_array() && json["cameras"].is_array());
    }
}
