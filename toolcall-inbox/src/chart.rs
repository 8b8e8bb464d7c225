//! Charts as inline SVG: no script, no external file. Every label is
//! escaped with [`esc`]; colours are attributes (the page's content
//! security policy allows no inline style).

use std::fmt::Write as _;

use crate::html::{esc, shown};

/// Colours for series, in order (colour-blind-safe, Okabe and Ito).
const PALETTE: [&str; 8] = [
    "#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000",
];

/// A colour for the `i`-th series.
pub fn color(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}

/// Horizontal bars, one a row: `label`, value, colour.
pub fn bars(title: &str, rows: &[(String, u64, &str)]) -> String {
    if rows.is_empty() {
        return empty(title);
    }
    // Room for the longest label (13 px text, about 7.5 px a character).
    let longest = rows.iter().map(|r| r.0.chars().count()).max().unwrap_or(0);
    let label_width = (longest as f64 * 7.5 + 16.0).clamp(120.0, 320.0);
    let width = 640.0;
    let row_height = 26.0;
    let top = 8.0;
    let height = top * 2.0 + row_height * rows.len() as f64;
    let max = rows.iter().map(|r| r.1).max().unwrap_or(1).max(1) as f64;
    let span = width - label_width - 60.0;
    let mut svg = open(title, width, height);
    for (i, (label, value, fill)) in rows.iter().enumerate() {
        let y = top + row_height * i as f64;
        let w = (*value as f64 / max * span).max(1.0);
        let _ = write!(
            svg,
            r##"<g><title>{label}: {value}</title><text x="{lx}" y="{ty}" text-anchor="end" font-size="13" fill="#222">{label}</text><rect x="{label_width}" y="{ry}" width="{w:.1}" height="{h}" fill="{fill}" rx="2"/><text x="{vx:.1}" y="{ty}" font-size="13" fill="#222">{value}</text></g>"##,
            label = shown(label),
            lx = label_width - 8.0,
            ty = y + row_height * 0.65,
            ry = y + 4.0,
            h = row_height - 8.0,
            fill = esc(fill),
            vx = label_width + w + 6.0,
        );
    }
    svg.push_str("</svg>");
    svg
}

/// Stacked columns: one column per bucket (labelled below, every so many
/// buckets when the labels would not fit side by side; each column's
/// tooltip names its bucket), one colour per series, with a legend.
pub fn stacked(title: &str, buckets: &[String], series: &[(String, Vec<u64>)]) -> String {
    let totals: Vec<u64> = (0..buckets.len())
        .map(|b| {
            series
                .iter()
                .map(|(_, v)| v.get(b).copied().unwrap_or(0))
                .sum()
        })
        .collect();
    if buckets.is_empty() || series.is_empty() || totals.iter().all(|&t| t == 0) {
        return empty(title);
    }
    let width = 640.0;
    let plot_top = 12.0;
    let plot_height = 180.0;
    let left = 40.0;
    let legend_rows = series.len().div_ceil(3);
    let height = plot_top + plot_height + 40.0 + 20.0 * legend_rows as f64;
    let max = totals.iter().copied().max().unwrap_or(1).max(1) as f64;
    let slot = (width - left - 10.0) / buckets.len() as f64;
    let column = (slot * 0.7).max(2.0);
    // Room for the longest label (11 px text, about 6.5 px a character).
    let longest = buckets.iter().map(|b| b.chars().count()).max().unwrap_or(0);
    let every = ((longest as f64 * 6.5 + 8.0) / slot).ceil().max(1.0) as usize;
    let mut svg = open(title, width, height);
    let _ = write!(
        svg,
        r##"<line x1="{left}" y1="{base}" x2="{right}" y2="{base}" stroke="#999"/><text x="{tx}" y="{ty}" text-anchor="end" font-size="12" fill="#555">{max}</text><text x="{tx}" y="{base}" text-anchor="end" font-size="12" fill="#555">0</text>"##,
        base = plot_top + plot_height,
        right = width - 10.0,
        tx = left - 6.0,
        ty = plot_top + 10.0,
        max = max as u64,
    );
    for (b, bucket) in buckets.iter().enumerate() {
        let x = left + slot * b as f64 + (slot - column) / 2.0;
        let mut y = plot_top + plot_height;
        for (s, (name, values)) in series.iter().enumerate() {
            let value = values.get(b).copied().unwrap_or(0);
            if value == 0 {
                continue;
            }
            let h = value as f64 / max * plot_height;
            y -= h;
            let _ = write!(
                svg,
                r#"<rect x="{x:.1}" y="{y:.1}" width="{column:.1}" height="{h:.1}" fill="{fill}"><title>{name}, {bucket}: {value}</title></rect>"#,
                fill = color(s),
                name = shown(name),
                bucket = shown(bucket),
            );
        }
        if b % every != 0 {
            continue;
        }
        let _ = write!(
            svg,
            r##"<text x="{cx:.1}" y="{ly}" text-anchor="middle" font-size="11" fill="#555">{label}</text>"##,
            cx = x + column / 2.0,
            ly = plot_top + plot_height + 16.0,
            label = shown(bucket),
        );
    }
    for (s, (name, _)) in series.iter().enumerate() {
        let x = left + (s % 3) as f64 * 200.0;
        let y = plot_top + plot_height + 34.0 + 20.0 * (s / 3) as f64;
        let _ = write!(
            svg,
            r##"<rect x="{x}" y="{ry}" width="12" height="12" fill="{fill}"/><text x="{tx}" y="{ty}" font-size="12" fill="#222">{name}</text>"##,
            ry = y - 10.0,
            fill = color(s),
            tx = x + 18.0,
            ty = y,
            name = shown(name),
        );
    }
    svg.push_str("</svg>");
    svg
}

fn open(title: &str, width: f64, height: f64) -> String {
    format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" role="img" viewBox="0 0 {width} {height}" width="{width}" height="{height}" aria-label="{title}"><title>{title}</title>"#,
        title = shown(title)
    )
}

fn empty(title: &str) -> String {
    format!(
        r##"{}<text x="10" y="24" font-size="13" fill="#555">nothing to show yet</text></svg>"##,
        open(title, 640.0, 40.0)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_escaped() {
        let svg = bars("t<", &[("<script>".into(), 3, "#000")]);
        assert!(svg.contains("&lt;script&gt;"));
        assert!(!svg.contains("<script>"));
        let svg = stacked("t", &["a&b".into()], &[("<x>".into(), vec![2])]);
        assert!(svg.contains("a&amp;b") && svg.contains("&lt;x&gt;"));
        assert!(!svg.contains("<x>"));
    }

    #[test]
    fn crowded_labels_are_thinned_but_every_column_keeps_its_name() {
        let labels: Vec<String> = (0..24).map(|h| format!("{h:02}:00")).collect();
        let svg = stacked("t", &labels, &[("pay".into(), vec![1; 24])]);
        assert!(svg.contains(">00:00</text>") && svg.contains(">02:00</text>"));
        assert!(!svg.contains(">01:00</text>"), "every other label: {svg}");
        assert!(svg.contains("<title>pay, 01:00: 1</title>"));
        let few: Vec<String> = labels[..4].to_vec();
        let svg = stacked("t", &few, &[("pay".into(), vec![1; 4])]);
        assert!(few.iter().all(|l| svg.contains(&format!(">{l}</text>"))));
    }
}
