//! Reading the file's top-level tables into [`Config`]: the stages' sections by name,
//! and every output's section through the outputs' own list
//! ([`OutputsConfig::read_section`]), so that a new output needs no line here.
//!
//! Why by hand: `#[serde(flatten)]` cannot be combined with `deny_unknown_fields`, and
//! it reads through a buffer that loses the line and column of an error. Here each
//! section is read straight from the TOML deserializer, and an unknown table is refused
//! at its key, as the derived code does.

use std::fmt;
use std::sync::OnceLock;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, Visitor};
use serde::Deserialize;

use super::Config;
use crate::sinks::OutputsConfig;

/// The stages' sections before the outputs' and after them (the order of the file's
/// documentation, and of the names an unknown table is told about).
const BEFORE_OUTPUTS: &[&str] = &[
    "models", "source", "buffers", "segment", "asr", "prosody", "text", "fusion", "context",
    "output",
];
const AFTER_OUTPUTS: &[&str] = &["budget", "vision", "room"];

/// Every top-level table the file may hold.
fn sections() -> &'static [&'static str] {
    static ALL: OnceLock<Vec<&'static str>> = OnceLock::new();
    ALL.get_or_init(|| {
        // The outputs by name (their list is in the order events reach them).
        let mut outputs = OutputsConfig::SECTIONS.to_vec();
        outputs.sort_unstable();
        [BEFORE_OUTPUTS, &outputs, AFTER_OUTPUTS].concat()
    })
}

/// A table's name, refused at the key when no section has it.
struct SectionName;

impl<'de> DeserializeSeed<'de> for SectionName {
    type Value = String;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<String, D::Error> {
        let name = String::deserialize(d)?;
        if sections().contains(&name.as_str()) {
            Ok(name)
        } else {
            Err(de::Error::unknown_field(&name, sections()))
        }
    }
}

struct ConfigVisitor;

impl<'de> Visitor<'de> for ConfigVisitor {
    type Value = Config;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("struct Config")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Config, A::Error> {
        // A missing section keeps its defaults.
        let mut c = Config::default();
        while let Some(key) = map.next_key_seed(SectionName)? {
            match key.as_str() {
                "models" => c.models = map.next_value()?,
                "source" => c.source = map.next_value()?,
                "buffers" => c.buffers = map.next_value()?,
                "segment" => c.segment = map.next_value()?,
                "asr" => c.asr = map.next_value()?,
                "prosody" => c.prosody = map.next_value()?,
                "text" => c.text = map.next_value()?,
                "fusion" => c.fusion = map.next_value()?,
                "context" => c.context = map.next_value()?,
                "output" => c.output = map.next_value()?,
                "budget" => c.budget = map.next_value()?,
                "vision" => c.vision = map.next_value()?,
                "room" => c.room = map.next_value()?,
                other => {
                    if !c.outputs.read_section(other, &mut map)? {
                        unreachable!("SectionName admits only the sections listed above");
                    }
                }
            }
        }
        Ok(c)
    }
}

impl<'de> Deserialize<'de> for Config {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_struct("Config", sections(), ConfigVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn every_section_the_file_may_hold_is_read_and_no_other() {
        let all = sections();
        assert_eq!(all.len(), BEFORE_OUTPUTS.len() + 3 + AFTER_OUTPUTS.len());
        for name in ["http", "mqtt", "captions", "output", "room"] {
            assert!(all.contains(&name), "{name}");
        }
        let c = Config::parse(
            "[http]\nenabled = true\n[captions]\nmax_cue_ms = 5000\n[room]\nenabled = true\n",
            Path::new("a.toml"),
        )
        .unwrap();
        assert!(c.outputs.http.enabled && c.room.enabled);
        assert_eq!(c.outputs.captions.max_cue_ms, 5000);
        // An unknown table is refused at its line, with the tables there are.
        let e = Config::parse("[asr]\n\n[caption]\nvtt = \"x\"\n", Path::new("a.toml"))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("a.toml:3:"), "{e}");
        assert!(e.contains("caption") && e.contains("`captions`"), "{e}");
        // Read back from what it writes.
        let text = toml::to_string(&c).unwrap();
        assert_eq!(Config::parse(&text, Path::new("b.toml")).unwrap(), c);
    }
}
