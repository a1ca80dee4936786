//! How the outputs are listed: `sinks/mod.rs` names each output once in an [`outputs!`]
//! entry (the field and its section's type, beside the folder's `mod` line), and this
//! macro makes of the list [`OutputsConfig`](super::OutputsConfig): a field per output (a
//! top-level table of the config file of the same name), the sections' names, the
//! sections as [`OutputKind`](crate::sinks::output::OutputKind)s in the list's order,
//! and the reading of a section by its name. Nothing else in the daemon names a
//! particular output. (The folders' `mod` lines stay outside the macro: rustfmt does not
//! see modules a macro declares.)

/// `outputs! { /// doc  name: name::Section, ... }`: see the module documentation.
macro_rules! outputs {
    ($($(#[$doc:meta])* $name:ident: $section:ty,)+) => {
        /// Every output's section of the config file.
        #[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
        pub struct OutputsConfig {
            $($(#[$doc])* pub $name: $section,)+
        }

        impl OutputsConfig {
            /// The sections' names, as the config file writes them.
            pub const SECTIONS: &'static [&'static str] = &[$(stringify!($name)),+];

            /// Every output's section, in the order each event reaches them.
            pub fn kinds(&self) -> Vec<&dyn crate::sinks::output::OutputKind> {
                vec![$(&self.$name),+]
            }

            /// Every problem of every output's section, in that order.
            pub fn check(
                &self,
                output: &crate::sinks::event::OutputConfig,
                problems: &mut crate::common::validate::Problems,
            ) {
                for k in self.kinds() {
                    k.check_section(output, problems);
                }
            }

            /// Reads the next value of `map` as the section `key`; `Ok(false)` when
            /// `key` is no output's section (nothing is read then).
            pub fn read_section<'de, A: serde::de::MapAccess<'de>>(
                &mut self,
                key: &str,
                map: &mut A,
            ) -> Result<bool, A::Error> {
                match key {
                    $(stringify!($name) => self.$name = map.next_value()?,)+
                    _ => return Ok(false),
                }
                Ok(true)
            }
        }
    };
}

pub(crate) use outputs;
