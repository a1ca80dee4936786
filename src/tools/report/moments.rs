//! The meeting's most likely moments: its highest-scored lines, flagged or not. A room
//! where sarcasm is rare runs a strict operating point that may flag nothing all
//! meeting; the page still shows where the detector came closest, with the scores.

use std::fmt::Write as _;

use super::events::Utterance;
use super::format::{clock, escape, score, score_colour};
use super::meeting::Meeting;

/// How many lines the section lists.
pub const TOP_MOMENTS: usize = 5;

/// The `k` scored utterances with the highest `p_sarcastic`, highest first (ties: the
/// earlier line first).
pub fn top_moments(m: &Meeting, k: usize) -> Vec<&Utterance> {
    let mut scored: Vec<&Utterance> = m
        .utterances
        .iter()
        .filter(|u| u.p_sarcastic.is_some_and(f64::is_finite))
        .collect();
    scored.sort_by(|a, b| {
        b.p_sarcastic
            .unwrap()
            .total_cmp(&a.p_sarcastic.unwrap())
            .then(a.start_s.total_cmp(&b.start_s))
    });
    scored.truncate(k);
    scored
}

pub(super) fn moments_section(m: &Meeting) -> String {
    let top = top_moments(m, TOP_MOMENTS);
    let mut s = String::from("<section id=\"moments\"><h2>Most likely moments</h2>\n");
    if top.is_empty() {
        s.push_str("<p class=\"note\">No utterance has a score.</p></section>\n");
        return s;
    }
    let _ = writeln!(
        s,
        "<p class=\"legend\">The {} highest-scored lines, flagged or not: where the detector came \
         closest, even when the room's threshold flagged nothing.</p>",
        top.len()
    );
    s.push_str("<table><tr><th>rank</th><th>time</th><th>p</th><th>flagged</th><th>what was said</th></tr>\n");
    for (rank, u) in top.iter().enumerate() {
        let text = match &u.transcript {
            None => "<span class=\"note\">(transcripts off)</span>".to_string(),
            Some(t) => escape(t),
        };
        let _ = writeln!(
            s,
            "<tr class=\"moment{cls}\" data-id=\"{id}\"><td class=\"num\">{rank}</td><td class=\"num\"><a href=\"#u-{id}\">{at}</a></td><td class=\"num\"><span class=\"chip\" style=\"background:{colour}\"></span>{p}</td><td>{flag}</td><td class=\"text\">{text}</td></tr>",
            cls = if u.sarcastic { " flagged" } else { "" },
            id = u.id,
            rank = rank + 1,
            at = clock(u.start_s),
            colour = score_colour(u.p_sarcastic),
            p = score(u.p_sarcastic),
            flag = if u.sarcastic { "yes" } else { "no" },
        );
    }
    s.push_str("</table></section>\n");
    s
}
