//! The board classes a profile can be written for (`budget.board`), and what each profile's
//! models were measured to deliver there, so `sarcasmd validate` (and `run`, at start)
//! can warn when a profile's budget asks for more than its models can meet on that board.
//!
//! The facts live in one table, `firmware-config/boards/boards.toml`, compiled in here and
//! read by the scripts that emulate the boards. The figures come from emulated boards
//! (this project has no board): this CPU cut down by cgroup quotas to the board's published
//! whisper.cpp speed (core by core, `scripts/emulate-board.sh`), the profile's settings, an
//! espeak-ng meeting fed live at 1x real time (`scripts/board_emulation.py`; docs/boards.md
//! has the tables, the factor's source and what emulation cannot show).
//! A leaf module: it imports nothing of the crate.

use std::sync::OnceLock;

use serde::Deserialize;

/// The board table (`firmware-config/boards/boards.toml`), compiled in: the scripts that
/// emulate the boards read the same file.
const TABLE_TOML: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/firmware-config/boards/boards.toml"
));

/// The board table: the boards, and what profiles measured on them.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Table {
    pub board: Vec<Board>,
    pub measured: Vec<Measured>,
}

/// A board class a profile can be written for.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Board {
    /// What `budget.board` says.
    pub name: String,
    pub description: String,
    pub cores: u32,
    /// whisper.cpp's bench (tiny.en encoder pass, all cores), in ms: what the emulation
    /// scales this machine to. `None`: the board cannot be emulated.
    pub whisper_bench_encode_ms: Option<u32>,
    pub whisper_bench_source: Option<String>,
}

/// One profile's settings and what they delivered on one emulated board.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Measured {
    pub board: String,
    pub model: String,
    pub stream_step_ms: u32,
    pub threads: u32,
    /// `asr.final_threads` as measured (0 = `threads`).
    pub final_threads: u32,
    /// End of speech -> flag, p95 over the live meeting's events.
    pub latency_p95_ms: u32,
    /// Fed at 1x real time: no audio dropped and the backlog drained within seconds.
    pub kept_up: bool,
    /// Where and when (docs/boards.md).
    pub source: String,
}

/// The table, read once (its unit test reads it too, so a broken file fails the suite).
pub fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(|| {
        toml::from_str(TABLE_TOML)
            .unwrap_or_else(|e| panic!("firmware-config/boards/boards.toml: {e}"))
    })
}

/// Board classes `budget.board` accepts ("" = not stated: nothing is checked).
pub fn boards() -> Vec<&'static str> {
    table().board.iter().map(|b| b.name.as_str()).collect()
}

/// The settings of a profile that its board's figures depend on.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ProfileSettings<'a> {
    /// `budget.board` ("" = not stated).
    pub board: &'a str,
    /// `asr.model`.
    pub model: &'a str,
    /// `asr.stream_step_ms`.
    pub stream_step_ms: u32,
    /// `asr.threads` and `asr.final_threads` (0 = `threads`).
    pub threads: u32,
    pub final_threads: u32,
    /// `budget.event_latency_ms` (0 = no budget).
    pub event_latency_ms: u32,
    /// `segment.hangover_ms`: every event waits at least this after the end of speech.
    pub hangover_ms: u32,
}

impl ProfileSettings<'_> {
    fn final_threads(&self) -> u32 {
        if self.final_threads == 0 {
            self.threads
        } else {
            self.final_threads
        }
    }
}

impl Measured {
    fn final_threads(&self) -> u32 {
        if self.final_threads == 0 {
            self.threads
        } else {
            self.final_threads
        }
    }

    /// How far a profile's settings are from this row's: threads first (on a board's
    /// CPU quota a second decode thread changed the p95 several-fold, docs/boards.md),
    /// then the step interval in seconds.
    fn distance(&self, p: &ProfileSettings) -> u64 {
        let threads =
            self.threads.abs_diff(p.threads) + self.final_threads().abs_diff(p.final_threads());
        threads as u64 * 100_000 + self.stream_step_ms.abs_diff(p.stream_step_ms) as u64
    }

    fn settings(&self) -> String {
        format!(
            "asr.threads = {}, asr.final_threads = {}, asr.stream_step_ms = {}",
            self.threads, self.final_threads, self.stream_step_ms
        )
    }
}

/// The measured row for `p`'s board and model nearest to its settings, and whether it
/// is an exact match. `None` when the model was never measured on that board.
pub fn nearest(p: &ProfileSettings) -> Option<(&'static Measured, bool)> {
    table()
        .measured
        .iter()
        .filter(|m| m.board == p.board && m.model == p.model)
        .min_by_key(|m| m.distance(p))
        .map(|m| (m, m.distance(p) == 0))
}

/// Warnings for a profile (empty: none). Without a board only the budget against the
/// hangover is checked; with one, the nearest measured row (model, threads, step
/// interval) speaks for the profile, and a combination never measured is said to be so.
pub fn budget_warnings(p: &ProfileSettings) -> Vec<String> {
    let mut out = vec![];
    let budget = p.event_latency_ms;
    if budget > 0 && budget <= p.hangover_ms {
        out.push(format!(
            "budget.event_latency_ms = {budget} is not above segment.hangover_ms = {}: every event comes at least the hangover after the end of speech (plus its decode), so every event would be over budget; raise the budget above {} ms or shorten the hangover",
            p.hangover_ms, p.hangover_ms
        ));
    }
    if p.board.is_empty() {
        return out;
    }
    let (board, model) = (p.board, p.model);
    let Some((m, exact)) = nearest(p) else {
        out.push(format!(
            "budget.board = \"{board}\": no emulated figures for asr.model \"{model}\" on this board (docs/boards.md), so the budgets are unchecked; measure them with scripts/board_emulation.py"
        ));
        return out;
    };
    let settings = if exact {
        String::new()
    } else {
        out.push(format!(
            "budget.board = \"{board}\": asr.model \"{model}\" with asr.threads = {}, asr.final_threads = {}, asr.stream_step_ms = {} was never measured on an emulated {board}; the nearest measured row ({}) stands in for it below. Measure this profile with scripts/board_emulation.py",
            p.threads, p.final_threads, p.stream_step_ms, m.settings()
        ));
        format!(" (nearest measured settings: {})", m.settings())
    };
    if !m.kept_up {
        out.push(format!(
            "asr.model \"{model}\" did not keep up with real time on an emulated {board}{settings} ({}): expect dropped audio; choose a smaller model, fewer threads or fewer decodes",
            m.source
        ));
    }
    if budget > 0 && budget < m.latency_p95_ms {
        out.push(format!(
            "budget.event_latency_ms = {budget} is below the end-of-speech -> flag p95 of {} ms measured for asr.model \"{model}\" on an emulated {board}{settings} ({}): expect budget violations and load shedding; raise it to at least {}",
            m.latency_p95_ms, m.source, m.latency_p95_ms
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile<'a>(
        board: &'a str,
        model: &'a str,
        step: u32,
        threads: u32,
        budget: u32,
    ) -> ProfileSettings<'a> {
        ProfileSettings {
            board,
            model,
            stream_step_ms: step,
            threads,
            final_threads: 0,
            event_latency_ms: budget,
            hangover_ms: 320,
        }
    }

    fn of(m: &'static Measured, budget: u32) -> ProfileSettings<'static> {
        ProfileSettings {
            board: &m.board,
            model: &m.model,
            stream_step_ms: m.stream_step_ms,
            threads: m.threads,
            final_threads: m.final_threads,
            event_latency_ms: budget,
            hangover_ms: 320,
        }
    }

    #[test]
    fn no_board_no_warnings() {
        assert!(budget_warnings(&profile("", "base-q8_0", 1000, 1, 1000)).is_empty());
        assert!(budget_warnings(&profile("", "base-q8_0", 1000, 1, 0)).is_empty());
    }

    #[test]
    fn a_budget_at_or_below_the_hangover_warns_on_every_board() {
        for board in ["", "rpi4", "rpi5", "jetson-orin-nano"] {
            for budget in [1, 50, 320] {
                let w = budget_warnings(&profile(board, "tiny.en-q8_0", 2000, 1, budget));
                assert!(
                    w.iter().any(|w| w.contains("segment.hangover_ms = 320")),
                    "{board} {budget}: {w:?}"
                );
            }
            let w = budget_warnings(&profile(board, "tiny.en-q8_0", 2000, 1, 321));
            assert!(!w.iter().any(|w| w.contains("hangover")), "{board}: {w:?}");
        }
    }

    #[test]
    fn an_unmeasured_model_is_said_to_be_unchecked() {
        let w = budget_warnings(&profile("rpi4", "no-such-model", 1000, 1, 3000));
        assert_eq!(w.len(), 1);
        assert!(w[0].contains("unchecked"), "{w:?}");
    }

    #[test]
    fn the_table_reads_and_every_measured_board_is_a_known_board() {
        let t = table();
        assert_eq!(boards(), ["rpi4", "rpi5", "jetson-orin-nano"]);
        for b in &t.board {
            assert!(b.cores > 0, "{b:?}");
            assert_eq!(
                b.whisper_bench_encode_ms.is_some(),
                b.whisper_bench_source.is_some(),
                "{b:?}"
            );
        }
        assert!(!t.measured.is_empty());
        for m in &t.measured {
            assert!(boards().contains(&m.board.as_str()), "{m:?}");
            assert!(m.latency_p95_ms > 0 && !m.source.is_empty(), "{m:?}");
        }
    }

    #[test]
    fn a_budget_below_the_measured_p95_warns_and_one_above_does_not() {
        for m in table().measured.iter().filter(|m| m.kept_up) {
            let below = budget_warnings(&of(m, m.latency_p95_ms - 1));
            assert_eq!(below.len(), 1, "{below:?}");
            assert!(below[0].contains("budget.event_latency_ms"), "{below:?}");
            let above = budget_warnings(&of(m, m.latency_p95_ms));
            assert!(above.is_empty(), "{above:?}");
        }
    }

    #[test]
    fn each_measured_row_is_its_own_nearest() {
        for m in &table().measured {
            let (n, exact) = nearest(&of(m, 0)).unwrap();
            assert!(exact && n == m, "{m:?} -> {n:?}");
        }
    }

    #[test]
    fn settings_never_measured_are_judged_by_the_nearest_row_and_said_to_be_unmeasured() {
        // More decode threads on a Pi 5 than measured: the nearest row is the 2-thread
        // one (p95 5 s), not the first row of the model (1 thread, within budget).
        for threads in [3, 4] {
            let p = profile("rpi5", "base-q8_0", 1000, threads, 2500);
            let (m, exact) = nearest(&p).unwrap();
            assert!(!exact);
            assert_eq!(m.threads, 2);
            let w = budget_warnings(&p);
            assert!(w.iter().any(|w| w.contains("never measured")), "{w:?}");
            assert!(
                w.iter().any(|w| w.contains("below the end-of-speech")),
                "{w:?}"
            );
        }
        // Two threads with the shipped 2 s step on a Pi 4: the 2-thread row (fell
        // behind) is nearer than the 1-thread row with the same step.
        let w = budget_warnings(&profile("rpi4", "tiny.en-q8_0", 2000, 2, 3000));
        assert!(w.iter().any(|w| w.contains("never measured")), "{w:?}");
        assert!(w.iter().any(|w| w.contains("did not keep up")), "{w:?}");
        // Only the step differs: still said to be unmeasured, and the nearest row (the
        // shipped profile per core) fell behind.
        let w = budget_warnings(&profile("rpi4", "tiny.en-q8_0", 1500, 1, 100_000));
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w[0].contains("never measured"), "{w:?}");
        assert!(w[1].contains("did not keep up"), "{w:?}");
    }
}
