//! The board classes a profile can be written for (`budget.board`), and what each profile's
//! models were measured to deliver there, so `sarcasmd validate` (and `run`, at start)
//! can warn when a profile's budget asks for more than its models can meet on that board.
//!
//! The figures come from emulated boards (this project has no board): this CPU cut down by
//! a cgroup quota to the board's published whisper.cpp speed, the profile's settings, an
//! espeak-ng meeting fed live at 1x real time for 30 minutes (`scripts/board_emulation.py`,
//! docs/boards.md has the tables, the factor's source and what emulation cannot show).
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
    /// End of speech -> flag, p95 over the live meeting's events.
    pub latency_p95_ms: u32,
    /// Fed at 1x real time: no audio dropped and the backlog drained within seconds.
    pub kept_up: bool,
    /// Where and when (docs/boards.md).
    pub source: &'static str,
}

pub const MEASURED: &[Measured] = &[
    // firmware-config/rpi5.toml as shipped (base-q8_0, 1 thread, interim captions every
    // 1.5 s, camera configured but absent): 310 events, p50 812 ms, max 2347 ms, none over
    // the budget, 0 audio drops, drained 0.7 s after the input ended, 0.50 CPU-s per
    // audio-s of the 0.99-CPU quota, peak RSS 406 MB. Re-run on 5f3bc81 on an Intel Xeon
    // host (slower cores, 1.63-CPU quota): p95 2304 ms, 11 over, 0 drops; the larger p95
    // is kept.
    Measured {
        board: "rpi5",
        model: "base-q8_0",
        stream_step_ms: 1000,
        threads: 1,
        latency_p95_ms: 2304,
        kept_up: true,
        source: "emulated Pi 5, 30-min live meeting, 2026-11-25 (the larger p95 of two hosts), docs/boards.md",
    },
    // The same profile with 2 threads (3-min live meeting): p95 5014 ms, 26 of 32 events
    // over 2500 ms, 0.78 CPU-s per audio-s; it kept up, but late.
    Measured {
        board: "rpi5",
        model: "base-q8_0",
        stream_step_ms: 1000,
        threads: 2,
        latency_p95_ms: 5014,
        kept_up: true,
        source: "emulated Pi 5, 3-min live meeting, 2026-11-24, docs/boards.md",
    },
    // firmware-config/rpi4.toml as shipped (tiny.en-q8_0, 1 thread, a streaming step every
    // 2 s, no camera): 237 events, p50 1122 ms, max 4623 ms, 0 audio drops, drained 2.0 s
    // after the input ended, 0.07 CPU-s per audio-s of the 0.16-CPU quota, peak RSS 257 MB.
    // Re-run on 5f3bc81 on an Intel Xeon host: p95 2234 ms, 0 drops; the larger p95 is kept.
    Measured {
        board: "rpi4",
        model: "tiny.en-q8_0",
        stream_step_ms: 2000,
        threads: 1,
        latency_p95_ms: 2234,
        kept_up: true,
        source: "emulated Pi 4, 30-min live meeting, 2026-11-25 (the larger p95 of two hosts), docs/boards.md",
    },
    // The Pi 4 profile as it was (2 threads, a step every 1 s), camera off: the daemon
    // fell behind at once (bench over a 3-min meeting at 1x: p95 40.8 s).
    Measured {
        board: "rpi4",
        model: "tiny.en-q8_0",
        stream_step_ms: 1000,
        threads: 2,
        latency_p95_ms: 40_800,
        kept_up: false,
        source: "emulated Pi 4, 3-min bench, 2026-11-24, docs/boards.md",
    },
];

/// Warnings for a profile written for `board` (empty: none). `stream_step_ms` and
/// `threads` are the profile's `asr` settings; `event_latency_ms` its budget (0 = none).
pub fn budget_warnings(
    board: &str,
    model: &str,
    stream_step_ms: u32,
    threads: u32,
    event_latency_ms: u32,
) -> Vec<String> {
    if board.is_empty() {
        return vec![];
    }
    let same_model = MEASURED
        .iter()
        .filter(|m| m.board == board && m.model == model);
    let exact = same_model
        .clone()
        .find(|m| m.stream_step_ms == stream_step_ms && m.threads == threads);
    let Some(m) = exact.or_else(|| same_model.clone().next()) else {
        return vec![format!(
            "budget.board = \"{board}\": no emulated figures for asr.model \"{model}\" on this board (docs/boards.md), so the budgets are unchecked; measure them with scripts/board_emulation.py"
        )];
    };
    let settings = if exact.is_some() {
        String::new()
    } else {
        format!(
            " (measured with asr.stream_step_ms = {}, asr.threads = {}; this profile has {stream_step_ms}, {threads})",
            m.stream_step_ms, m.threads
        )
    };
    let mut out = vec![];
    if !m.kept_up {
        out.push(format!(
            "asr.model \"{model}\" did not keep up with real time on an emulated {board}{settings} ({}): expect dropped audio; choose a smaller model or fewer decodes",
            m.source
        ));
    }
    if event_latency_ms > 0 && event_latency_ms < m.latency_p95_ms {
        out.push(format!(
            "budget.event_latency_ms = {event_latency_ms} is below the end-of-speech -> flag p95 of {} ms measured for asr.model \"{model}\" on an emulated {board}{settings} ({}): expect budget violations and load shedding; raise it to at least {}",
            m.latency_p95_ms, m.source, m.latency_p95_ms
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_board_no_warnings() {
        assert!(budget_warnings("", "base-q8_0", 1000, 1, 1).is_empty());
    }

    #[test]
    fn an_unmeasured_model_is_said_to_be_unchecked() {
        let w = budget_warnings("rpi4", "no-such-model", 1000, 1, 3000);
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
            let below = budget_warnings(
                m.board,
                m.model,
                m.stream_step_ms,
                m.threads,
                m.latency_p95_ms - 1,
            );
            assert_eq!(below.len(), 1, "{below:?}");
            assert!(below[0].contains("budget.event_latency_ms"), "{below:?}");
            let above = budget_warnings(
                m.board,
                m.model,
                m.stream_step_ms,
                m.threads,
                m.latency_p95_ms,
            );
            assert!(above.is_empty(), "{above:?}");
        }
    }
}
