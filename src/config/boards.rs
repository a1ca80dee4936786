//! The board classes a profile can be written for (`budget.board`), and what each profile's
//! models were measured to deliver there, so `sarcasmd validate` (and `run`, at start)
//! can warn when a profile's budget asks for more than its models can meet on that board.
//!
//! The figures come from emulated boards (this project has no board): this CPU cut down by
//! cgroup quotas to the board's published whisper.cpp speed (since issue 36 core by core,
//! `scripts/emulate-board.sh`), the profile's settings, an espeak-ng meeting fed live at 1x
//! real time (`scripts/board_emulation.py`; docs/boards.md has the tables, the factor's
//! source and what emulation cannot show).
//! A leaf module: it imports nothing of the crate.

/// Board classes `budget.board` accepts ("" = not stated: nothing is checked).
pub const BOARDS: &[&str] = &["rpi4", "rpi5", "jetson-orin-nano"];

/// One profile's settings and what they delivered on one emulated board.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Measured {
    pub board: &'static str,
    pub model: &'static str,
    pub stream_step_ms: u32,
    pub threads: u32,
    /// `asr.final_threads` as measured (0 = `threads`).
    pub final_threads: u32,
    /// End of speech -> flag, p95 over the live meeting's events.
    pub latency_p95_ms: u32,
    /// Fed at 1x real time: no audio dropped and the backlog drained within seconds.
    pub kept_up: bool,
    /// Where and when (docs/boards.md).
    pub source: &'static str,
}

pub const MEASURED: &[Measured] = &[
    // firmware-config/rpi5.toml as shipped (base-q8_0, 1 thread, interim captions every
    // 1.5 s, camera configured but absent), on the per-core emulation (issue 36: each of
    // the board's 4 cores a cgroup of 0.454 CPUs on a 2-core Zen 4, so the one decode
    // thread runs at a Pi 5 core's speed; throttled in 16,102 of 16,962 periods on the
    // decode thread's core): 310 events, p50 3048 ms, max 11.6 s, 216 over the 2.5 s
    // budget, 0 drops, drained 2.6 s after the input ended. The earlier rows of this
    // profile (p95 1722-2304 ms) let the one decode thread use a whole host core under a
    // single quota, so they were faster than a Pi 5 core (docs/boards.md).
    Measured {
        board: "rpi5",
        model: "base-q8_0",
        stream_step_ms: 1000,
        threads: 1,
        final_threads: 0,
        latency_p95_ms: 5923,
        kept_up: true,
        source: "emulated Pi 5, per-core, 30-min live meeting, 2026-11-27, docs/boards.md",
    },
    // The same profile with 2 threads (3-min live meeting, the single quota of before issue
    // 36, not re-measured per core): p95 5014 ms, 26 of 32 events over 2500 ms, 0.78 CPU-s
    // per audio-s; it kept up, but late.
    Measured {
        board: "rpi5",
        model: "base-q8_0",
        stream_step_ms: 1000,
        threads: 2,
        final_threads: 0,
        latency_p95_ms: 5014,
        kept_up: true,
        source: "emulated Pi 5, 3-min live meeting, 2026-11-24, docs/boards.md",
    },
    // firmware-config/rpi4.toml as shipped (tiny.en-q8_0, 1 thread, a streaming step every
    // 2 s, no camera), on the per-core emulation (issue 36: 4 cores of 0.054 CPUs on a
    // 2-core Zen 4; the decode thread's core throttled in 6,548 of 6,560 periods), 10-min
    // live meeting: the one-thread decode took p50 7.3 s, the daemon fell behind (p50 38 s,
    // drained 62 s after the input, 3 utterances dropped from a full queue, 0 ring drops).
    // The earlier rows (p95 1726-2234 ms, kept up) gave the decode thread the whole
    // single quota, 4x a Pi 4 core (docs/boards.md).
    Measured {
        board: "rpi4",
        model: "tiny.en-q8_0",
        stream_step_ms: 2000,
        threads: 1,
        final_threads: 0,
        latency_p95_ms: 73_349,
        kept_up: false,
        source: "emulated Pi 4, per-core, 10-min live meeting, 2026-11-27, docs/boards.md",
    },
    // The Pi 4 profile as it was (2 threads, a step every 1 s), camera off, the single
    // quota of before issue 36: the daemon fell behind at once (bench over a 3-min meeting
    // at 1x: p95 40.8 s).
    Measured {
        board: "rpi4",
        model: "tiny.en-q8_0",
        stream_step_ms: 1000,
        threads: 2,
        final_threads: 0,
        latency_p95_ms: 40_800,
        kept_up: false,
        source: "emulated Pi 4, 3-min bench, 2026-11-24, docs/boards.md",
    },
];

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
    MEASURED
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

    fn of(m: &Measured, budget: u32) -> ProfileSettings<'static> {
        ProfileSettings {
            board: m.board,
            model: m.model,
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
    fn every_measured_board_is_a_known_board() {
        for m in MEASURED {
            assert!(BOARDS.contains(&m.board), "{m:?}");
            assert!(m.latency_p95_ms > 0 && !m.source.is_empty(), "{m:?}");
        }
    }

    #[test]
    fn a_budget_below_the_measured_p95_warns_and_one_above_does_not() {
        for m in MEASURED.iter().filter(|m| m.kept_up) {
            let below = budget_warnings(&of(m, m.latency_p95_ms - 1));
            assert_eq!(below.len(), 1, "{below:?}");
            assert!(below[0].contains("budget.event_latency_ms"), "{below:?}");
            let above = budget_warnings(&of(m, m.latency_p95_ms));
            assert!(above.is_empty(), "{above:?}");
        }
    }

    #[test]
    fn each_measured_row_is_its_own_nearest() {
        for m in MEASURED {
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
