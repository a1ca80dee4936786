//! Which capture device and stream format: listing devices as `sarcasmd devices` numbers
//! them, choosing one by index or name, and a config the converter can take to 16 kHz mono.

use cpal::traits::{DeviceTrait, HostTrait};
use cpal::{ErrorKind, SampleFormat, SupportedStreamConfig, SupportedStreamConfigRange};

use super::error::MicError;
use crate::sources::audio::rate::validate_rate;

/// An input device as `sarcasmd devices` numbers it.
pub struct InputDevice {
    pub index: usize,
    /// cpal's id, e.g. `alsa:hw:CARD=Device,DEV=0`.
    pub id: String,
    /// First line of the description, e.g. `USB PnP Sound Device, USB Audio`.
    pub name: String,
    /// The rest of the description.
    pub extended: Vec<String>,
    pub device: cpal::Device,
}

/// Every input-capable device of the default host, in a stable order (cpal's).
pub fn input_devices(host: &cpal::Host) -> Result<Vec<InputDevice>, MicError> {
    let devices = host
        .input_devices()
        .map_err(|e| MicError::Enumerate { source: e.into() })?;
    Ok(devices
        .enumerate()
        .map(|(index, device)| {
            let id = device
                .id()
                .map(|i| i.to_string())
                .unwrap_or_else(|e| format!("<no id: {e}>"));
            let (name, extended) = match device.description() {
                Ok(d) => (
                    d.name().to_string(),
                    d.extended().map(str::to_string).collect(),
                ),
                Err(_) => (id.clone(), Vec::new()),
            };
            InputDevice {
                index,
                id,
                name,
                extended,
                device,
            }
        })
        .collect())
}

/// Pick the device `wanted` names: an index, an exact id (with or without the `alsa:`
/// host prefix), else the first device whose id or description contains it.
pub(super) fn select_device(
    devices: Vec<InputDevice>,
    wanted: &str,
) -> Result<(cpal::Device, String), MicError> {
    let available = || {
        if devices.is_empty() {
            "there are none".to_string()
        } else {
            let list: Vec<String> = devices
                .iter()
                .map(|d| format!("{}: {} ({})", d.index, d.id, d.name))
                .collect();
            format!("available: {}", list.join("; "))
        }
    };
    let wanted_t = wanted.trim();
    let pos = if let Ok(i) = wanted_t.parse::<usize>() {
        devices.iter().position(|d| d.index == i)
    } else {
        let lower = wanted_t.to_lowercase();
        devices
            .iter()
            .position(|d| {
                d.id == wanted_t
                    || d.id
                        .split_once(':')
                        .is_some_and(|(_, rest)| rest == wanted_t)
            })
            .or_else(|| {
                devices.iter().position(|d| {
                    d.id.to_lowercase().contains(&lower)
                        || d.name.to_lowercase().contains(&lower)
                        || d.extended.iter().any(|l| l.to_lowercase().contains(&lower))
                })
            })
    };
    match pos {
        Some(p) => {
            let d = devices.into_iter().nth(p).expect("position is in range");
            Ok((d.device, format!("{} ({})", d.id, d.name)))
        }
        None => Err(MicError::NotFound {
            wanted: wanted.to_string(),
            available: available(),
        }),
    }
}

/// Formats [`FrameConverter`] decodes (DSD is a bitstream, not PCM).
pub fn is_convertible(f: SampleFormat) -> bool {
    matches!(
        f,
        SampleFormat::I8
            | SampleFormat::I16
            | SampleFormat::I24
            | SampleFormat::I32
            | SampleFormat::I64
            | SampleFormat::U8
            | SampleFormat::U16
            | SampleFormat::U24
            | SampleFormat::U32
            | SampleFormat::U64
            | SampleFormat::F32
            | SampleFormat::F64
    )
}

/// "f32 1-64 ch 1-384000 Hz, i16 ..." for error messages and `sarcasmd devices`.
pub fn summarize_ranges(ranges: &[SupportedStreamConfigRange]) -> String {
    let mut by_format: Vec<(SampleFormat, u16, u16, u32, u32)> = Vec::new();
    for r in ranges {
        let f = r.sample_format();
        match by_format.iter_mut().find(|e| e.0 == f) {
            Some(e) => {
                e.1 = e.1.min(r.channels());
                e.2 = e.2.max(r.channels());
                e.3 = e.3.min(r.min_sample_rate());
                e.4 = e.4.max(r.max_sample_rate());
            }
            None => by_format.push((
                f,
                r.channels(),
                r.channels(),
                r.min_sample_rate(),
                r.max_sample_rate(),
            )),
        }
    }
    if by_format.is_empty() {
        return "no configurations".into();
    }
    by_format
        .iter()
        .map(|(f, c0, c1, r0, r1)| {
            let ch = if c0 == c1 {
                format!("{c0} ch")
            } else {
                format!("{c0}-{c1} ch")
            };
            let hz = if r0 == r1 {
                format!("{r0} Hz")
            } else {
                format!("{r0}-{r1} Hz")
            };
            format!("{f} {ch} {hz}")
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The device's default input config when it is one we can use, else the best of what
/// it lists: a float or integer format, the fewest channels, 16 kHz or a common rate.
pub(super) fn choose_config(
    device: &cpal::Device,
    name: &str,
) -> Result<(SupportedStreamConfig, String), MicError> {
    let default_err = match device.default_input_config() {
        Ok(c) if is_convertible(c.sample_format()) && validate_rate(c.sample_rate()).is_ok() => {
            let offered = device
                .supported_input_configs()
                .map(|r| summarize_ranges(&r.collect::<Vec<_>>()))
                .unwrap_or_else(|e| format!("unknown: {e}"));
            return Ok((c, offered));
        }
        Ok(c) => format!(
            "its default ({} {} ch {} Hz) is unusable",
            c.sample_format(),
            c.channels(),
            c.sample_rate()
        ),
        Err(e) if e.kind() == ErrorKind::DeviceNotAvailable => {
            return Err(MicError::Unavailable {
                device: name.to_string(),
                source: e.into(),
            })
        }
        Err(e) => e.to_string(),
    };
    let ranges: Vec<SupportedStreamConfigRange> = match device.supported_input_configs() {
        Ok(r) => r.collect(),
        Err(e) if e.kind() == ErrorKind::DeviceNotAvailable => {
            return Err(MicError::Unavailable {
                device: name.to_string(),
                source: e.into(),
            })
        }
        Err(e) => {
            return Err(MicError::NoUsableFormat {
                device: name.to_string(),
                offered: format!("unknown ({default_err}; listing configs failed: {e})"),
            })
        }
    };
    let offered = summarize_ranges(&ranges);
    let rank = |f: SampleFormat| match f {
        SampleFormat::F32 => 0,
        SampleFormat::I16 => 1,
        SampleFormat::I32 => 2,
        SampleFormat::I24 => 3,
        _ => 4,
    };
    let best = ranges
        .iter()
        .filter(|r| is_convertible(r.sample_format()))
        .filter_map(|r| {
            let rate = [16_000, 48_000, 44_100, 32_000, 96_000, 22_050, 8_000]
                .into_iter()
                .find(|&hz| r.contains_rate(hz))?;
            Some((rank(r.sample_format()), r.channels(), rate, r))
        })
        .min_by_key(|(rank, ch, rate, _)| (*rank, *ch, *rate != 16_000));
    match best {
        Some((_, _, rate, r)) => Ok(((*r).with_sample_rate(rate), offered)),
        None => Err(MicError::NoUsableFormat {
            device: name.to_string(),
            offered,
        }),
    }
}
