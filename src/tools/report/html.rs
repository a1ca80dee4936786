//! The page itself: escaping, the timeline SVG, the latency, drops and transcript
//! sections, and the inline style and script with their CSP hashes.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use sha2::{Digest, Sha256};

use super::events::{Gap, Utterance};
use super::format::{clock, escape, score, score_colour};
use super::meeting::Meeting;

pub(super) fn base64(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for c in bytes.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for k in 0..4 {
            if k <= c.len() {
                out.push(A[(n >> (18 - 6 * k)) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

pub(super) fn csp_hash(source: &str) -> String {
    format!("'sha256-{}'", base64(&Sha256::digest(source.as_bytes())))
}

pub(super) const STYLE: &str = r#"
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0 auto;max-width:1100px;padding:16px 20px;color:#222;background:#fff}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:22px 0 8px;border-bottom:1px solid #ddd;padding-bottom:3px}
.meta{color:#555;margin:0 0 10px}
.cards{display:flex;flex-wrap:wrap;gap:10px}
.card{border:1px solid #ddd;border-radius:6px;padding:6px 12px;min-width:120px}
.card b{display:block;font-size:20px}
.card span{color:#555;font-size:12px}
svg.timeline{width:100%;height:auto;display:block}
svg text{font:11px sans-serif;fill:#444}
.utt:hover,.view:hover{stroke:#000;stroke-width:1.5}
table{border-collapse:collapse;width:100%}
th,td{text-align:left;padding:3px 6px;border-bottom:1px solid #eee;vertical-align:top}
th{font-weight:600;background:#f6f6f6}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
tr.flagged td{background:#fdecec}
tr.flagged td.text{font-weight:600}
.badge{display:inline-block;font-size:11px;font-weight:700;color:#fff;background:#c82424;border-radius:3px;padding:0 4px;margin-right:4px}
.note{color:#777;font-size:12px}
.warn{background:#fff4e5;border-left:4px solid #e08a00;padding:4px 8px}
tr.event td{color:#555;font-style:italic;background:#f7f7f7}
tr:target td{outline:2px solid #333}
.chip{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:4px;vertical-align:-1px;border:1px solid #999}
#tip{position:fixed;z-index:10;max-width:420px;background:#222;color:#fff;font-size:12px;padding:5px 8px;border-radius:4px;pointer-events:none;white-space:pre-line}
.legend{color:#555;font-size:12px;margin:4px 0}
"#;

/// Shows an element's `data-tip` beside the pointer. The text goes in as
/// `textContent`, never as markup.
pub(super) const SCRIPT: &str = r#"
(function () {
  var tip = document.getElementById('tip');
  document.addEventListener('mousemove', function (e) {
    var t = e.target && e.target.closest ? e.target.closest('[data-tip]') : null;
    if (!t) { tip.hidden = true; return; }
    tip.textContent = t.getAttribute('data-tip');
    tip.hidden = false;
    var x = Math.min(e.clientX + 14, window.innerWidth - tip.offsetWidth - 8);
    var y = e.clientY + 16;
    if (y + tip.offsetHeight > window.innerHeight) { y = e.clientY - tip.offsetHeight - 10; }
    tip.style.left = Math.max(4, x) + 'px';
    tip.style.top = Math.max(4, y) + 'px';
  });
})();
"#;

/// Seconds per timeline row: one row up to 5 minutes, 5-minute rows after that, so a
/// long meeting stays readable instead of shrinking into one line.
pub(super) const ROW_MAX_S: f64 = 300.0;
/// Rows at most: past 10 hours of stream the rows get longer instead of more.
pub const MAX_TIMELINE_ROWS: usize = 120;
/// Tick labels per row at most.
const MAX_TICKS_PER_ROW: f64 = 12.0;
pub(super) const SVG_W: f64 = 1000.0;
pub(super) const LANE_LABEL_W: f64 = 58.0;
pub(super) const PLOT_W: f64 = SVG_W - LANE_LABEL_W - 8.0;
/// (name, height): the fused score, then one thin lane per view.
pub(super) const LANES: [(&str, f64); 4] = [
    ("fused", 26.0),
    ("text", 10.0),
    ("audio", 10.0),
    ("video", 10.0),
];
pub(super) const LANE_GAP: f64 = 3.0;
pub(super) const AXIS_H: f64 = 16.0;
pub(super) const ROW_GAP: f64 = 14.0;

/// The step between ticks: a clock-friendly one giving at most a dozen per row, however
/// long the row.
pub(super) fn tick_step_s(row_s: f64) -> f64 {
    const STEPS: [f64; 16] = [
        5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1800.0, 3600.0, 7200.0, 10800.0,
        21600.0, 43200.0, 86400.0,
    ];
    STEPS
        .into_iter()
        .find(|&t| row_s / t <= MAX_TICKS_PER_ROW)
        .unwrap_or_else(|| (row_s / MAX_TICKS_PER_ROW / 86400.0).ceil() * 86400.0)
}

/// Seconds per row for a stream of `span` seconds: the whole span (rounded up to ten
/// seconds) up to [`ROW_MAX_S`], then 5-minute rows, then longer rows of whole 5-minute
/// multiples so that there are never more than [`MAX_TIMELINE_ROWS`].
pub(super) fn row_seconds(span: f64) -> f64 {
    if span <= ROW_MAX_S {
        (span / 10.0).ceil() * 10.0
    } else {
        (span / MAX_TIMELINE_ROWS as f64 / ROW_MAX_S)
            .ceil()
            .max(1.0)
            * ROW_MAX_S
    }
}

pub(super) fn utterance_tip(u: &Utterance) -> String {
    let mut s = format!(
        "#{} {}-{}  p_sarcastic {}{}\ntext {} / audio {} / video {}",
        u.id,
        clock(u.start_s),
        clock(u.end_s),
        score(u.p_sarcastic),
        if u.sarcastic { " (flagged)" } else { "" },
        score(u.views.text),
        score(u.views.audio),
        score(u.views.video),
    );
    if let Some(t) = u.latency_ms.get("total") {
        let _ = write!(s, "\nlatency {t:.0} ms");
    }
    if let Some(t) = u.transcript.as_deref().filter(|t| !t.is_empty()) {
        let _ = write!(s, "\n\u{201c}{t}\u{201d}");
    }
    s
}

/// Where things go in the timeline: rows of `row_s` seconds, each with the lanes of
/// [`LANES`] and an axis below them.
struct Layout {
    row_s: f64,
    rows: usize,
    lanes_h: f64,
    row_h: f64,
    height: f64,
}

impl Layout {
    fn of(m: &Meeting) -> Self {
        let span = m.span_s().max(1.0);
        let row_s = row_seconds(span);
        let rows = ((span / row_s).ceil().max(1.0) as usize).min(MAX_TIMELINE_ROWS);
        let lanes_h: f64 = LANES.iter().map(|l| l.1 + LANE_GAP).sum();
        let row_h = lanes_h + AXIS_H + ROW_GAP;
        Self {
            row_s,
            rows,
            lanes_h,
            row_h,
            height: rows as f64 * row_h,
        }
    }

    fn x_of(&self, t: f64, row: usize) -> f64 {
        LANE_LABEL_W + (t - row as f64 * self.row_s) / self.row_s * PLOT_W
    }

    /// Pieces of [a, b] per row it touches.
    fn pieces(&self, a: f64, b: f64) -> Vec<(usize, f64, f64)> {
        let first = (a / self.row_s).floor().max(0.0) as usize;
        let last = ((b / self.row_s).ceil() as usize)
            .min(self.rows)
            .max(first + 1);
        (first..last)
            .filter_map(|r| {
                let (r0, r1) = (r as f64 * self.row_s, (r + 1) as f64 * self.row_s);
                let (x0, x1) = (a.max(r0), b.min(r1));
                (x1 > x0 || (a == b && x0 == x1)).then_some((r, self.x_of(x0, r), self.x_of(x1, r)))
            })
            .collect()
    }

    fn lane_y(&self, row: usize, lane: usize) -> f64 {
        row as f64 * self.row_h + LANES[..lane].iter().map(|l| l.1 + LANE_GAP).sum::<f64>()
    }
}

pub(super) fn timeline_svg(m: &Meeting) -> String {
    let l = Layout::of(m);
    let mut s = String::new();
    let _ = write!(
        s,
        r##"<svg class="timeline" viewBox="0 0 {SVG_W} {:.0}" role="img" aria-label="timeline of utterances">
<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="#f1f1f1"/><line x1="0" y1="0" x2="0" y2="6" stroke="#9a9a9a" stroke-width="2"/></pattern></defs>
"##,
        l.height
    );
    timeline_rows(&mut s, &l);
    timeline_gaps(&mut s, &l, m);
    timeline_utterances(&mut s, &l, m);
    timeline_drops(&mut s, &l, m);
    s.push_str("</svg>\n");
    s
}

/// Each row's lane labels and backgrounds, and its time axis.
fn timeline_rows(s: &mut String, l: &Layout) {
    for row in 0..l.rows {
        for (k, (name, h)) in LANES.iter().enumerate() {
            let y = l.lane_y(row, k);
            let _ = writeln!(
                s,
                r##"<text x="{:.0}" y="{:.1}" text-anchor="end">{name}</text><rect x="{LANE_LABEL_W}" y="{y:.1}" width="{PLOT_W}" height="{h}" fill="#fafafa"/>"##,
                LANE_LABEL_W - 6.0,
                y + h / 2.0 + 4.0,
            );
        }
        let axis_y = l.lane_y(row, LANES.len());
        let step = tick_step_s(l.row_s);
        let mut t = 0.0;
        while t <= l.row_s + 1e-9 {
            let at = row as f64 * l.row_s + t;
            let x = l.x_of(at, row);
            // The last label would be cut by the picture's edge if centred.
            let anchor = if t + step > l.row_s + 1e-9 {
                "end"
            } else {
                "middle"
            };
            let _ = writeln!(
                s,
                r##"<line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{:.1}" stroke="#bbb"/><text x="{x:.1}" y="{:.1}" text-anchor="{anchor}">{}</text>"##,
                axis_y - 2.0,
                axis_y + 2.0,
                axis_y + 12.0,
                clock(at).trim_end_matches(".0")
            );
            t += step;
        }
    }
}

/// The intervals a live source lost, hatched across every lane.
fn timeline_gaps(s: &mut String, l: &Layout, m: &Meeting) {
    for g in &m.gaps {
        let tip = escape(&format!(
            "{} lost {}-{} ({:.1} s): {}",
            g.source,
            clock(g.start_s),
            clock(g.end_s),
            g.end_s - g.start_s,
            g.reason
        ));
        for (row, x0, x1) in l.pieces(g.start_s, g.end_s) {
            let y = l.lane_y(row, 0);
            let _ = writeln!(
                s,
                r##"<rect class="gap" x="{x0:.1}" y="{y:.1}" width="{:.1}" height="{:.1}" fill="url(#hatch)" data-tip="{tip}"><title>{tip}</title></rect>"##,
                (x1 - x0).max(2.0),
                l.lanes_h - LANE_GAP,
            );
        }
    }
}

/// Each utterance: its fused score in the first lane, each view's below it.
fn timeline_utterances(s: &mut String, l: &Layout, m: &Meeting) {
    for u in &m.utterances {
        let tip = escape(&utterance_tip(u));
        let flagged = if u.sarcastic { " flagged" } else { "" };
        for (row, x0, x1) in l.pieces(u.start_s, u.end_s) {
            let w = (x1 - x0).max(1.5);
            let (y, h) = (l.lane_y(row, 0), LANES[0].1);
            let stroke = if u.sarcastic {
                r##" stroke="#7a0000" stroke-width="1.5""##
            } else {
                ""
            };
            let _ = writeln!(
                s,
                r##"<a href="#u-{id}"><rect class="utt{flagged}" data-id="{id}" x="{x0:.1}" y="{y:.1}" width="{w:.1}" height="{h}" fill="{fill}"{stroke} data-tip="{tip}"><title>{tip}</title></rect></a>"##,
                id = u.id,
                fill = score_colour(u.p_sarcastic),
            );
            for (k, p) in [(1, u.views.text), (2, u.views.audio), (3, u.views.video)] {
                let (y, h) = (l.lane_y(row, k), LANES[k].1);
                let (fill, extra) = match p {
                    Some(_) => (score_colour(p), String::new()),
                    None => (
                        "none".to_string(),
                        r##" stroke="#ccc" stroke-dasharray="2 2""##.to_string(),
                    ),
                };
                let _ = writeln!(
                    s,
                    r##"<rect class="view" data-view="{}" x="{x0:.1}" y="{y:.1}" width="{w:.1}" height="{h}" fill="{fill}"{extra} data-tip="{tip}"/>"##,
                    LANES[k].0,
                );
            }
        }
    }
}

/// A mark where an utterance never reached the stream (dropped from a full queue).
fn timeline_drops(s: &mut String, l: &Layout, m: &Meeting) {
    for &id in &m.missing_ids {
        let (a, b) = m.missing_between(id);
        let tip = escape(&format!(
            "utterance {id} never reached the stream (dropped: analysis queue full); its speech was between {} and {}",
            clock(a),
            clock(b)
        ));
        let mid = (a + b) / 2.0;
        for (row, x, _) in l.pieces(mid, mid).into_iter().take(1) {
            let y = l.lane_y(row, 0);
            let _ = writeln!(
                s,
                r##"<g class="drop" data-id="{id}" data-tip="{tip}"><title>{tip}</title><path d="M{:.1} {:.1} l6 -9 h-12 z" fill="#000"/><line x1="{x:.1}" y1="{y:.1}" x2="{x:.1}" y2="{:.1}" stroke="#000" stroke-width="1.5" stroke-dasharray="3 2"/></g>"##,
                x,
                y + 9.0,
                y + LANES[0].1,
            );
        }
    }
}

pub(super) fn latency_section(m: &Meeting) -> String {
    let mut s = String::from("<section id=\"latency\"><h2>Latency: end of speech to event</h2>\n");
    let total = m.latency("total");
    if total.n == 0 {
        s.push_str("<p>No utterance event, so no latency.</p></section>\n");
        return s;
    }
    s.push_str(&pace_note(m));
    let _ = writeln!(
        s,
        "<p id=\"latency-total\">p50 <b>{:.0} ms</b>, p95 <b>{:.0} ms</b>, max <b>{:.0} ms</b> over {} utterances (the events' <code>latency_ms.total</code>: the endpointer's hangover plus every stage).</p>",
        total.p50, total.p95, total.max, total.n
    );
    s.push_str("<table class=\"stages\"><tr><th>stage</th><th>p50 ms</th><th>p95 ms</th><th>max ms</th></tr>\n");
    let mut stages: Vec<String> = [
        "endpoint", "queue", "audio", "video", "asr", "text", "fusion",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for u in &m.utterances {
        for k in u.latency_ms.keys() {
            if !stages.contains(k) && k != "total" {
                stages.push(k.clone());
            }
        }
    }
    stages.push("total".into());
    for st in stages {
        let p = m.latency(&st);
        if p.n == 0 {
            continue;
        }
        let _ = writeln!(
            s,
            "<tr><td>{}</td><td class=\"num\">{:.1}</td><td class=\"num\">{:.1}</td><td class=\"num\">{:.1}</td></tr>",
            escape(&st),
            p.p50,
            p.p95,
            p.max
        );
    }
    s.push_str("</table></section>\n");
    s
}

/// Whether the latencies mean anything. A file replayed as fast as possible (`replay
/// FILE` without `--realtime`) hands the analyser utterances faster than it can take them,
/// so `queue` grows through the run: its latencies say how far behind a batch job was,
/// not how late a flag comes in a room. The run summary tells: a paced run (live, or
/// `--realtime`) takes at least the audio's length in wall time.
fn faster_than_real_time(m: &Meeting) -> bool {
    m.stats
        .as_ref()
        .is_some_and(|st| st.wall_s < 0.9 * st.audio_s)
}

pub(super) fn pace_note(m: &Meeting) -> String {
    match &m.stats {
        Some(st) if faster_than_real_time(m) => format!(
            "<p id=\"latency-not-realtime\" class=\"warn\"><b>Not meaningful:</b> this run processed {:.1} s of audio in {:.1} s of wall time, faster than real time (<code>replay FILE</code> without <code>--realtime</code>). Utterances waited in the queue for the analyser, so the latencies below measure a batch job's backlog, not how late a flag comes in a room. Measure latency with <code>sarcasmd replay FILE --realtime</code>, a live source, or <code>sarcasmd bench</code>.</p>\n",
            st.audio_s, st.wall_s
        ),
        Some(_) => String::new(),
        None => "<p id=\"latency-pace-unknown\" class=\"note\">Whether this run was paced like a microphone is not in the event stream: if it came from <code>replay FILE</code> without <code>--realtime</code>, these latencies mean nothing (the queue grows through a run faster than real time). Give <code>--stats</code> the run summary to tell.</p>\n".to_string(),
    }
}

pub(super) fn drops_section(m: &Meeting) -> String {
    let mut s = String::from("<section id=\"drops\"><h2>Drops and gaps</h2>\n<ul>\n");
    if m.gaps.is_empty() {
        s.push_str("<li>No interval lost by the source (no <code>gap</code> event).</li>\n");
    }
    for g in &m.gaps {
        let _ = writeln!(
            s,
            "<li class=\"gap-item\">{} lost {}&#8211;{} ({:.1} s): {}</li>",
            escape(&g.source),
            clock(g.start_s),
            clock(g.end_s),
            g.end_s - g.start_s,
            escape(&g.reason)
        );
    }
    if m.missing_ids.is_empty() {
        s.push_str("<li>No utterance id missing from the stream.</li>\n");
    } else {
        let ids: Vec<String> = m.missing_ids.iter().map(u64::to_string).collect();
        let more = m.missing_total - m.missing_ids.len() as u64;
        let _ = writeln!(
            s,
            "<li class=\"drop-item\">{} utterance(s) cut but never reported (ids {}{}): dropped because the analysis queue was full.</li>",
            m.missing_total,
            ids.join(", "),
            if more > 0 { format!(" and {more} more") } else { String::new() }
        );
    }
    let shed = m.utterances.iter().filter(|u| u.text_shed).count();
    if shed > 0 {
        let _ = writeln!(
            s,
            "<li>{shed} utterance(s) scored without transcript or text view (load shedding: the analyser was behind).</li>"
        );
    }
    if m.revised > 0 {
        let _ = writeln!(
            s,
            "<li>{} early-ended event(s) were revised by a later one (the speaker went on); the page shows the revising event.</li>",
            m.revised
        );
    }
    match &m.stats {
        Some(st) => {
            let total: u64 = st.dropped.values().sum();
            // The summary lists every registered drop, zeros included; name the ones
            // that happened.
            let by: Vec<String> = st
                .dropped
                .iter()
                .filter(|(_, v)| **v > 0)
                .map(|(k, v)| format!("{} {v}", escape(k)))
                .collect();
            let _ = writeln!(
                s,
                "<li id=\"stats-drops\">Run summary: {:.1} s of audio in {:.1} s; drops {total} ({}); {} source gap(s), {:.1} s; {} event(s) over the latency budget.</li>",
                st.audio_s,
                st.wall_s,
                if by.is_empty() { "none counted".to_string() } else { by.join(", ") },
                st.source_gaps,
                st.source_gap_s,
                st.budget_violations
            );
        }
        None => s.push_str(
            "<li class=\"note\">Drop counters by reason (ring samples, partials) are not in the event stream: give <code>--stats</code> the file <code>sarcasmd replay --stats</code> wrote to show them.</li>\n",
        ),
    }
    for (k, n) in &m.other_types {
        let _ = writeln!(
            s,
            "<li class=\"note\">{n} line(s) of type <code>{}</code> not shown.</li>",
            escape(k)
        );
    }
    s.push_str("</ul></section>\n");
    s
}

/// Transcript rows, gaps and missing utterances in time order.
pub(super) fn transcript_section(m: &Meeting) -> String {
    enum Row<'a> {
        Utt(&'a Utterance),
        Gap(&'a Gap),
        Missing(u64, f64),
    }
    let mut rows: Vec<(f64, Row)> = m
        .utterances
        .iter()
        .map(|u| (u.start_s, Row::Utt(u)))
        .collect();
    rows.extend(m.gaps.iter().map(|g| (g.start_s, Row::Gap(g))));
    rows.extend(m.missing_ids.iter().map(|&id| {
        let (a, b) = m.missing_between(id);
        (a, Row::Missing(id, b))
    }));
    rows.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut s = String::from(
        "<section id=\"transcript\"><h2>Transcript</h2>\n<p class=\"note\">A line flagged wrongly, or missed: write its # and <code>not_sarcastic</code> or <code>sarcastic</code> per line in a file and run <code>sarcasmd feedback --config CONFIG --events EVENTS.jsonl --labels FILE</code>; the device then mutes later lines like the ones marked not sarcastic (docs/outputs.md, corrections from the room).</p>\n<table><tr><th>#</th><th>time</th><th>p</th><th>text / audio / video</th><th>what was said</th></tr>\n",
    );
    for (at, row) in rows {
        match row {
            Row::Utt(u) => {
                let mut notes = Vec::new();
                if u.text_shed {
                    notes.push("text shed");
                }
                if u.forced_split {
                    notes.push("cut at max length");
                }
                if u.revises.is_some() {
                    notes.push("revised an early end");
                }
                let text = match &u.transcript {
                    None => "<span class=\"note\">(transcripts off)</span>".to_string(),
                    Some(t) if t.is_empty() => {
                        "<span class=\"note\">(nothing recognised)</span>".to_string()
                    }
                    Some(t) => format!("<span class=\"said\">{}</span>", escape(t)),
                };
                let _ = writeln!(
                    s,
                    "<tr id=\"u-{id}\" class=\"utt-row{cls}\"><td class=\"num\">{id}</td><td class=\"num\">{start}</td><td class=\"num\"><span class=\"chip\" style=\"background:{colour}\"></span>{p}</td><td class=\"num\">{t} / {a} / {v}</td><td class=\"text\">{badge}{text}{notes}</td></tr>",
                    id = u.id,
                    cls = if u.sarcastic { " flagged" } else { "" },
                    start = clock(u.start_s),
                    colour = score_colour(u.p_sarcastic),
                    p = score(u.p_sarcastic),
                    t = score(u.views.text),
                    a = score(u.views.audio),
                    v = score(u.views.video),
                    badge = if u.sarcastic { "<span class=\"badge\">flagged</span>" } else { "" },
                    notes = if notes.is_empty() {
                        String::new()
                    } else {
                        format!(" <span class=\"note\">({})</span>", notes.join(", "))
                    },
                );
            }
            Row::Gap(g) => {
                let _ = writeln!(
                    s,
                    "<tr class=\"event gap-row\"><td></td><td class=\"num\">{}</td><td colspan=\"3\">{} lost for {:.1} s: {}</td></tr>",
                    clock(at),
                    escape(&g.source),
                    g.end_s - g.start_s,
                    escape(&g.reason)
                );
            }
            Row::Missing(id, until) => {
                let _ = writeln!(
                    s,
                    "<tr class=\"event drop-row\"><td class=\"num\">{id}</td><td class=\"num\">{}</td><td colspan=\"3\">utterance dropped before analysis (somewhere up to {})</td></tr>",
                    clock(at),
                    clock(until)
                );
            }
        }
    }
    s.push_str("</table></section>\n");
    s
}

/// The whole page.
pub fn render_html(m: &Meeting) -> String {
    let threshold = m.utterances.first().map(|u| u.threshold);
    let flagged = m.flagged();
    let total = m.latency("total");
    let mut body = String::new();
    let _ = writeln!(
        body,
        "<header><h1>Meeting report</h1><p class=\"meta\">{} &#183; {} of stream &#183; made by sarcasmd {}</p></header>",
        escape(&m.name),
        clock(m.span_s()),
        env!("CARGO_PKG_VERSION"),
    );
    let card = |value: String, what: &str, id: &str| {
        format!("<div class=\"card\" id=\"card-{id}\"><b>{value}</b><span>{what}</span></div>")
    };
    let _ = writeln!(
        body,
        "<section class=\"cards\">{}{}{}{}{}</section>",
        card(m.utterances.len().to_string(), "utterances", "utterances"),
        card(
            flagged.to_string(),
            &match threshold {
                Some(t) => format!("flagged (p &#8805; {t:.2})"),
                None => "flagged".into(),
            },
            "flagged"
        ),
        card(
            if total.n > 0 {
                format!("{:.0} / {:.0} ms", total.p50, total.p95)
            } else {
                "-".into()
            },
            if faster_than_real_time(m) {
                "latency p50 / p95: not meaningful (faster than real time)"
            } else {
                "latency p50 / p95"
            },
            "latency"
        ),
        card(m.gaps.len().to_string(), "source gaps", "gaps"),
        card(
            match &m.stats {
                Some(st) => st.dropped.values().sum::<u64>().to_string(),
                None => m.missing_total.to_string(),
            },
            if m.stats.is_some() {
                "drops (run summary)"
            } else {
                "utterances dropped"
            },
            "drops"
        ),
    );
    body.push_str(&super::moments::moments_section(m));
    body.push_str("<section id=\"timeline\"><h2>Timeline</h2>\n");
    body.push_str(
        "<p class=\"legend\">Each box is an utterance, coloured by <code>p_sarcastic</code> \
         (<span class=\"chip\" style=\"background:#3168b0\"></span>0 &#8211; \
         <span class=\"chip\" style=\"background:#ececec\"></span>0.5 &#8211; \
         <span class=\"chip\" style=\"background:#c82424\"></span>1; \
         grey: no score); flagged ones have a dark outline. The thin lanes are each view's own \
         score (dashed outline: that view had none). Hatched: the source lost the interval; \
         &#9660;: an utterance dropped before analysis. Hover for the scores; click to jump to the line.</p>\n",
    );
    if m.utterances.is_empty() && m.gaps.is_empty() {
        body.push_str("<p>No utterance in this file.</p>\n");
    } else {
        body.push_str(&timeline_svg(m));
    }
    body.push_str("</section>\n");
    body.push_str(&latency_section(m));
    body.push_str(&drops_section(m));
    body.push_str(&transcript_section(m));
    body.push_str("<div id=\"tip\" role=\"tooltip\" hidden></div>\n");
    let csp = format!(
        "default-src 'none'; style-src {} 'unsafe-hashes' {}; script-src {}",
        csp_hash(STYLE),
        // The colour chips' inline style attributes: hashes of each distinct value
        // would be long, so these few are allowed by listing the attribute hashes.
        chip_style_hashes(&body),
        csp_hash(SCRIPT),
    );
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"{csp}\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>sarcasmd meeting report: {}</title>\n<style>{STYLE}</style></head>\n<body>\n{body}<script>{SCRIPT}</script>\n</body></html>\n",
        escape(&m.name)
    )
}

/// CSP hashes of every distinct `style="..."` attribute value in `body` (the colour
/// chips), so the policy needs no `'unsafe-inline'`.
pub(super) fn chip_style_hashes(body: &str) -> String {
    let mut seen = BTreeSet::new();
    let mut rest = body;
    while let Some(i) = rest.find("style=\"") {
        let after = &rest[i + 7..];
        let Some(j) = after.find('"') else { break };
        seen.insert(&after[..j]);
        rest = &after[j..];
    }
    seen.into_iter().map(csp_hash).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod pace_tests {
    use super::super::events::RunStats;
    use super::super::meeting::Meeting;
    use super::pace_note;

    fn with_stats(audio_s: f64, wall_s: f64) -> Meeting {
        Meeting {
            stats: Some(RunStats {
                audio_s,
                wall_s,
                dropped: Default::default(),
                source_gaps: 0,
                source_gap_s: 0.0,
                budget_violations: 0,
            }),
            ..Default::default()
        }
    }

    #[test]
    fn latencies_of_a_run_faster_than_real_time_are_flagged_as_not_meaningful() {
        // `replay FILE`: 180 s of audio in 25 s.
        let n = pace_note(&with_stats(180.0, 25.0));
        assert!(
            n.contains("latency-not-realtime") && n.contains("Not meaningful"),
            "{n}"
        );
        // A paced run takes at least the audio's length.
        assert!(pace_note(&with_stats(180.0, 181.2)).is_empty());
        // Without the summary the page cannot tell, and says so.
        assert!(pace_note(&Meeting::default()).contains("latency-pace-unknown"));
    }
}
