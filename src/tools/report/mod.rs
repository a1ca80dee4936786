//! `sarcasmd report EVENTS.jsonl -o meeting.html`: one recorded meeting on one page.
//!
//! The page is a single self-contained HTML file (inline SVG, CSS and a few lines of
//! JavaScript; no fonts, images or scripts from anywhere else), so it opens offline and
//! can be mailed. It shows a timeline of the utterances coloured by `p_sarcastic` with
//! a lane per view, the transcript with flagged lines marked, the intervals the source
//! lost (`gap` events), the utterances that never reached the stream, and the run's
//! latency summary.
//!
//! Everything that came from the events (transcripts, reasons, model names) is escaped
//! before it is written: a transcript is text, never markup. A Content-Security-Policy
//! that allows only this page's own script and style (by hash) backs that up: markup
//! that slipped through could still not run a script or load anything.
//!
//! Bounds: everything the page allocates is bounded by its input, and the input is
//! bounded: the events file is read with a size limit ([`MAX_EVENTS_BYTES`], at most
//! [`MAX_EVENTS`] lines of events), times must be finite stream seconds within
//! [`MAX_STREAM_S`], the timeline has at most [`html::MAX_TIMELINE_ROWS`] rows with at
//! most a dozen ticks each, and missing ids are counted, not listed, beyond
//! [`MAX_MISSING_LISTED`]. One line with `"id": 10000000` or `"end_s": 1e308` once made
//! this command allocate gigabytes or loop without end.

mod error;
mod events;
mod format;
mod html;
mod limits;
mod meeting;
mod moments;

pub use error::ReportError;
pub use events::{Gap, RunStats, Utterance, Views};
pub use format::{clock, escape, score_colour};
pub use html::render_html;
pub use limits::{MAX_EVENTS, MAX_EVENTS_BYTES, MAX_MISSING_LISTED, MAX_STATS_BYTES, MAX_STREAM_S};
pub use meeting::Meeting;
pub use moments::{top_moments, TOP_MOMENTS};

use std::path::Path;

pub fn write(m: &Meeting, out: &Path) -> Result<(), ReportError> {
    std::fs::write(out, render_html(m)).map_err(|source| ReportError::Write {
        path: out.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::html::*;
    use super::meeting::missing_ids;
    use super::*;
    use std::collections::BTreeSet;

    fn utt(id: u64, start: f64, end: f64, text: &str, p: f64) -> String {
        serde_json::json!({
            "type": "utterance", "id": id, "start_s": start, "end_s": end,
            "transcript": text, "language": "en", "p_sarcastic": p, "sarcastic": p >= 0.5,
            "threshold": 0.5, "views": {"text": p, "audio": 0.4, "video": null},
            "latency_ms": {"endpoint": 256.0, "queue": 0.0, "asr": 3.0, "text": 2.0,
                           "audio": 0.3, "video": 0.0, "fusion": 0.01, "total": 260.0 + id as f64},
            "ready_ms": {"audio": 256.5, "text": 260.0, "video": null, "fused": 260.0},
            "text_shed": false, "models": {}, "forced_split": false, "early_end": false,
            "revises": null, "asr_segments": [], "asr_guards": [], "extras": null,
        })
        .to_string()
    }

    fn stream() -> String {
        [
            utt(0, 1.0, 3.0, "Good morning everyone.", 0.2),
            utt(1, 4.0, 6.5, "Oh <script>alert('x')</script> great & \"fine\"", 0.8),
            r#"{"type":"partial","id":2,"start_s":7.0,"end_s":7.5,"text":"the","language":"en","decode_ms":3.0}"#.to_string(),
            // id 2 never arrives: dropped.
            r#"{"type":"gap","source":"audio","start_s":9.0,"end_s":11.5,"reason":"device <gone> & back"}"#.to_string(),
            utt(3, 12.0, 13.0, "", 0.1),
            String::new(),
        ]
        .join("\n")
    }

    #[test]
    fn the_stream_is_read_with_gaps_partials_and_missing_ids() {
        let m = Meeting::parse("m.jsonl", Path::new("m.jsonl"), &stream()).unwrap();
        assert_eq!(m.utterances.len(), 3);
        assert_eq!(m.flagged(), 1);
        assert_eq!(m.gaps.len(), 1);
        assert_eq!(m.partials, 1);
        assert_eq!(m.missing_ids, vec![2]);
        assert_eq!(m.missing_between(2), (6.5, 12.0));
        assert_eq!(m.latency("total").max, 263.0);
        assert_eq!(m.span_s(), 13.0);
    }

    #[test]
    fn the_most_likely_moments_are_the_top_scores_flagged_or_not() {
        let text = [
            utt(0, 1.0, 2.0, "Good morning.", 0.10),
            utt(1, 3.0, 4.0, "Lovely, the projector died.", 0.45),
            utt(2, 5.0, 6.0, "Next item.", 0.05),
            utt(3, 7.0, 8.0, "Great, another meeting.", 0.62),
            utt(4, 9.0, 10.0, "Thanks.", 0.45),
        ]
        .join("\n");
        let m = Meeting::parse("m", Path::new("m"), &text).unwrap();
        let top: Vec<u64> = top_moments(&m, 3).iter().map(|u| u.id).collect();
        // Ties keep the earlier line first; unflagged lines (p < 0.5) still count.
        assert_eq!(top, vec![3, 1, 4]);
        let page = render_html(&m);
        let section = &page[page.find("id=\"moments\"").unwrap()..];
        let section = &section[..section.find("</section>").unwrap()];
        assert_eq!(section.matches("<tr class=\"moment").count(), 5);
        assert!(section.contains("href=\"#u-3\""), "{section}");
        assert!(section.find("u-3").unwrap() < section.find("u-1").unwrap());
    }

    #[test]
    fn a_revised_early_end_is_replaced_by_its_revision() {
        let mut first: serde_json::Value =
            serde_json::from_str(&utt(0, 1.0, 2.0, "Oh great.", 0.7)).unwrap();
        first["early_end"] = true.into();
        let mut second: serde_json::Value =
            serde_json::from_str(&utt(1, 1.0, 4.0, "Oh great, the demo works.", 0.3)).unwrap();
        second["revises"] = 0.into();
        let text = format!("{first}\n{second}\n");
        let m = Meeting::parse("m", Path::new("m"), &text).unwrap();
        assert_eq!(m.revised, 1);
        assert_eq!(m.utterances.len(), 1);
        assert_eq!(m.utterances[0].id, 1);
        assert!(m.missing_ids.is_empty());
    }

    #[test]
    fn text_from_events_is_escaped_everywhere() {
        let m = Meeting::parse("<b>m</b>.jsonl", Path::new("m"), &stream()).unwrap();
        let html = render_html(&m);
        assert!(
            !html.contains("<script>alert"),
            "raw transcript markup in the page"
        );
        assert!(!html.contains("<gone>") && !html.contains("<b>m</b>"));
        assert!(html.contains(
            "Oh &lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; great &amp; &quot;fine&quot;"
        ));
        assert!(html.contains("device &lt;gone&gt; &amp; back"));
        // Only the page's own script element.
        assert_eq!(html.matches("<script>").count(), 1);
    }

    #[test]
    fn the_page_loads_nothing_from_elsewhere() {
        let m = Meeting::parse("m", Path::new("m"), &stream()).unwrap();
        let html = render_html(&m);
        for bad in ["http:", "https:", " src=", "@import", "url(h", "//"] {
            // `//` would start a protocol-relative URL; the script has no comments.
            assert!(!html.contains(bad), "page contains {bad:?}");
        }
        assert!(html.contains("default-src 'none'"));
        assert!(html.contains(&csp_hash(SCRIPT)));
    }

    #[test]
    fn malformed_lines_are_named_by_line() {
        let e =
            Meeting::parse("m", Path::new("ev.jsonl"), "\n{\"type\":\"utterance\"}\n").unwrap_err();
        assert!(
            e.to_string().starts_with("ev.jsonl:2: a `utterance` event"),
            "{e}"
        );
        let e = Meeting::parse("m", Path::new("ev.jsonl"), "not json").unwrap_err();
        assert!(
            e.to_string().starts_with("ev.jsonl:1: not a JSON event"),
            "{e}"
        );
    }

    #[test]
    fn huge_ids_and_times_are_bounded_not_allocated() {
        // One event with id 10^7: ten million missing ids, counted, a thousand listed.
        let one = utt(10_000_000, 1.0, 2.0, "x", 0.2);
        let m = Meeting::parse("m", Path::new("m"), &one).unwrap();
        assert_eq!(m.missing_total, 10_000_000);
        assert_eq!(m.missing_ids.len(), MAX_MISSING_LISTED);
        let html = render_html(&m);
        assert!(html.len() < 2_000_000, "{} bytes", html.len());
        assert!(
            html.contains("10000000 utterance(s)"),
            "missing count not shown"
        );
        // The highest id there is: no overflow.
        let m = Meeting::parse("m", Path::new("m"), &utt(u64::MAX, 1.0, 2.0, "x", 0.2)).unwrap();
        assert_eq!(m.missing_total, u64::MAX);
        // Times that are not stream times are refused with their line.
        for (end, field) in [(1e308, "end_s"), (1e12, "end_s"), (0.5, "end_s")] {
            let text = format!("\n{}", utt(0, 1.0, end, "x", 0.2));
            let e = Meeting::parse("m", Path::new("ev.jsonl"), &text).unwrap_err();
            assert!(
                e.to_string().starts_with(&format!("ev.jsonl:2: `{field}`")),
                "{e}"
            );
        }
        // The longest stream allowed draws a bounded timeline.
        let m = Meeting::parse("m", Path::new("m"), &utt(0, 1.0, MAX_STREAM_S, "x", 0.2)).unwrap();
        let svg = timeline_svg(&m);
        assert!(svg.len() < 1_000_000, "{} bytes", svg.len());
    }

    #[test]
    fn missing_ids_are_counted_from_the_gaps() {
        let seen: BTreeSet<u64> = [1, 2, 5, 2000].into_iter().collect();
        let (listed, total) = missing_ids(&seen);
        assert_eq!(total, 1 + 2 + 1994);
        assert_eq!(listed.len(), MAX_MISSING_LISTED);
        assert_eq!(&listed[..4], &[0, 3, 4, 6]);
        assert_eq!(missing_ids(&BTreeSet::new()), (vec![], 0));
    }

    #[test]
    fn colours_clock_and_base64() {
        assert_eq!(score_colour(Some(0.0)), "#3168b0");
        assert_eq!(score_colour(Some(0.5)), "#ececec");
        assert_eq!(score_colour(Some(1.0)), "#c82424");
        assert_eq!(score_colour(None), "#d9d9d9");
        assert_eq!(clock(75.25), "1:15.2");
        assert_eq!(clock(3725.0), "1:02:05.0");
        assert_eq!(base64(b"Man"), "TWFu");
        assert_eq!(base64(b"Ma"), "TWE=");
        assert_eq!(base64(b"M"), "TQ==");
        assert_eq!(base64(b""), "");
    }

    #[test]
    fn long_meetings_wrap_into_rows_and_pieces_stay_inside() {
        let lines: Vec<String> = (0..40)
            .map(|i| utt(i, i as f64 * 17.0, i as f64 * 17.0 + 15.0, "x", 0.3))
            .collect();
        let m = Meeting::parse("m", Path::new("m"), &lines.join("\n")).unwrap();
        let svg = timeline_svg(&m);
        // 678 s -> three 5-minute rows; utterance 17 (289-304 s) spans two rows.
        assert_eq!(svg.matches(r#"text-anchor="end">fused<"#).count(), 3);
        assert_eq!(svg.matches(r#"data-id="17""#).count(), 2, "{svg}");
        // Utterance 35 (595-610 s) spans rows 2 and 3 too: 40 utterances, 42 boxes.
        assert_eq!(svg.matches(r#"data-id="35""#).count(), 2);
        assert_eq!(svg.matches("class=\"utt").count(), 42);
    }
}
