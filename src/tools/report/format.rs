//! How the page writes values: text escaped for HTML, a score as a colour and as two
//! decimals, stream seconds as a clock. The page and the moments section both use them.

/// Text as HTML text or attribute value: nothing in it can open a tag, end an
/// attribute or start an entity.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// p -> colour: blue (not sarcastic) through light grey (0.5) to red (sarcastic).
pub fn score_colour(p: Option<f64>) -> String {
    let Some(p) = p.filter(|p| p.is_finite()) else {
        return "#d9d9d9".into();
    };
    let p = p.clamp(0.0, 1.0);
    let (a, b, t) = if p < 0.5 {
        ((49, 104, 176), (236, 236, 236), p / 0.5)
    } else {
        ((236, 236, 236), (200, 36, 36), (p - 0.5) / 0.5)
    };
    let mix = |x: i32, y: i32| (x as f64 + (y - x) as f64 * t).round() as i32;
    format!(
        "#{:02x}{:02x}{:02x}",
        mix(a.0, b.0),
        mix(a.1, b.1),
        mix(a.2, b.2)
    )
}

/// m:ss.s (h:mm:ss.s past an hour).
pub fn clock(s: f64) -> String {
    let s = s.max(0.0);
    let h = (s / 3600.0).floor();
    let m = ((s - h * 3600.0) / 60.0).floor();
    let sec = s - h * 3600.0 - m * 60.0;
    if h > 0.0 {
        format!("{h:.0}:{m:02.0}:{sec:04.1}")
    } else {
        format!("{m:.0}:{sec:04.1}")
    }
}

pub fn score(p: Option<f64>) -> String {
    p.map_or_else(|| "-".into(), |p| format!("{p:.2}"))
}
