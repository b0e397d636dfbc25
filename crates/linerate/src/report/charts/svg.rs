//! The SVG writer under the charts: elements with their coordinates rounded to 0.1, text
//! escaped, and text measured before it is placed, so a layout can keep labels apart.
//!
//! Text is set in DejaVu Sans (Verdana, its metric twin, elsewhere) and measured with
//! DejaVu's advance widths; a viewer falling back to a narrower sans-serif only gains room.
//! Plotted values are `mark`s: an element with a `<title>` child, the exact figure a browser
//! shows on hover. Must not decide what a chart shows (`charts::*` does).

use std::fmt::Write as _;

use crate::report::words::html_escape;

/// Width of every chart in SVG units; the page scales it to its own width.
pub const WIDTH: f64 = 1000.0;
/// Space around a chart's content.
pub const PAD: f64 = 16.0;
/// The font stack of every text.
const FAMILY: &str = "'DejaVu Sans', Verdana, sans-serif";
/// A text box's height, in font sizes (DejaVu's ascent plus descent).
pub const BOX: f64 = 1.17;
/// Distance between the baselines of wrapped lines, in font sizes.
pub const LEADING: f64 = 1.3;
/// DejaVu's ascent, in font sizes: from a box's top to its baseline.
const ASCENT: f64 = 0.93;

/// Colour-blind-safe colours (Okabe & Ito, 2008), most distinct first; yellow last, as it is
/// faint on white.
pub const PALETTE: [&str; 8] =
    ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000", "#F0E442"];
/// Dark grey for text and axes.
pub const INK: &str = "#222222";
/// Grey for secondary text.
pub const MUTED: &str = "#444444";
/// Light grey for grid lines.
pub const GRID: &str = "#DDDDDD";

/// The colour of series `i`.
pub fn colour(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}

/// The dash pattern of series `i`: solid for the first round of colours, then dashed, then
/// dotted, so series that share a colour still differ.
pub fn dash(i: usize) -> Option<&'static str> {
    match (i / PALETTE.len()) % 3 {
        0 => None,
        1 => Some("9 5"),
        _ => Some("2 4"),
    }
}

/// Size and weight of a text.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Font {
    /// Size in SVG units.
    pub size: f64,
    /// Bold.
    pub bold: bool,
}

impl Font {
    /// A regular font of `size`.
    pub const fn regular(size: f64) -> Font {
        Font { size, bold: false }
    }

    /// A bold font of `size`.
    pub const fn bold(size: f64) -> Font {
        Font { size, bold: true }
    }

    /// Height of one line of text.
    pub fn line(self) -> f64 {
        self.size * LEADING
    }
}

/// DejaVu Sans advance widths of ASCII 32..=126, in thousandths of the font size.
const REGULAR: [u16; 95] = [
    318, 401, 460, 838, 636, 950, 780, 275, 390, 390, 500, 838, 318, 361, 318, 337, 636, 636, 636,
    636, 636, 636, 636, 636, 636, 636, 337, 337, 838, 838, 838, 531, 1000, 684, 686, 698, 770, 632,
    575, 775, 752, 295, 295, 656, 557, 863, 748, 787, 603, 787, 695, 635, 611, 732, 684, 989, 685,
    611, 685, 390, 337, 390, 838, 500, 500, 613, 635, 550, 635, 615, 352, 635, 634, 278, 278, 579,
    278, 974, 634, 612, 635, 635, 411, 521, 392, 634, 592, 818, 592, 592, 525, 636, 337, 636, 838,
];
/// The same for DejaVu Sans Bold.
const BOLD: [u16; 95] = [
    348, 456, 521, 838, 696, 1002, 872, 306, 457, 457, 523, 838, 380, 415, 380, 365, 696, 696, 696,
    696, 696, 696, 696, 696, 696, 696, 400, 400, 838, 838, 838, 580, 1000, 774, 762, 734, 830, 683,
    683, 821, 837, 372, 372, 775, 637, 995, 837, 850, 733, 850, 770, 720, 682, 812, 774, 1103, 771,
    724, 725, 457, 365, 457, 838, 500, 500, 675, 716, 593, 716, 678, 435, 716, 712, 343, 343, 665,
    343, 1042, 712, 687, 716, 716, 493, 595, 478, 712, 652, 924, 645, 652, 582, 712, 365, 712, 838,
];

/// The width of `s` set in `font`, with 3 % to spare for hinting and rounding.
pub fn width(s: &str, font: Font) -> f64 {
    let table = if font.bold { &BOLD } else { &REGULAR };
    let em: u32 = s
        .chars()
        .map(|c| match c {
            ' '..='~' => u32::from(table[c as usize - 32]),
            '–' | '°' => 500,
            '·' => 380,
            '×' | '≥' | '≤' | '±' | '→' | 'µ' => 838,
            _ => 1000,
        })
        .sum();
    f64::from(em) / 1000.0 * font.size * 1.03
}

/// `s` cut to fit `max` wide, ending in "…" when cut.
pub fn truncate(s: &str, font: Font, max: f64) -> String {
    if width(s, font) <= max {
        return s.to_string();
    }
    let mut out: String = s.to_string();
    while !out.is_empty() && width(&format!("{out}…"), font) > max {
        out.pop();
    }
    format!("{}…", out.trim_end())
}

/// `s` broken at spaces into lines at most `max` wide (a word wider than a line is cut).
pub fn wrap(s: &str, font: Font, max: f64) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in s.split(' ').filter(|w| !w.is_empty()) {
        let candidate = if line.is_empty() { word.to_string() } else { format!("{line} {word}") };
        if width(&candidate, font) <= max || line.is_empty() {
            line = candidate;
        } else {
            lines.push(std::mem::take(&mut line));
            line = word.to_string();
        }
    }
    lines.push(line);
    lines.into_iter().map(|l| truncate(&l, font, max)).collect()
}

/// Where a text's x lies on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Anchor {
    /// x is the left edge.
    Start,
    /// x is the middle.
    Middle,
    /// x is the right edge.
    End,
}

/// A stroke: colour, width and dash pattern.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stroke<'a> {
    /// Colour.
    pub colour: &'a str,
    /// Width.
    pub width: f64,
    /// Dash pattern, solid when None.
    pub dash: Option<&'a str>,
}

impl<'a> Stroke<'a> {
    /// A solid stroke.
    pub const fn solid(colour: &'a str, width: f64) -> Stroke<'a> {
        Stroke { colour, width, dash: None }
    }

    fn attributes(self) -> String {
        let dash = self.dash.map_or(String::new(), |d| format!(" stroke-dasharray=\"{d}\""));
        format!("stroke=\"{}\" stroke-width=\"{}\"{dash}", self.colour, n(self.width))
    }
}

/// A number as an SVG coordinate: at most one decimal.
fn n(v: f64) -> String {
    let r = (v * 10.0).round() / 10.0;
    if r == r.trunc() { format!("{}", r as i64) } else { format!("{r:.1}") }
}

/// An SVG document being written.
#[derive(Debug, Default)]
pub struct Svg {
    body: String,
}

impl Svg {
    /// One line of text whose box's top is `top`.
    pub fn text(&mut self, (x, top): (f64, f64), font: Font, anchor: Anchor, fill: &str, s: &str) {
        let anchor = match anchor {
            Anchor::Start => "",
            Anchor::Middle => " text-anchor=\"middle\"",
            Anchor::End => " text-anchor=\"end\"",
        };
        let weight = if font.bold { " font-weight=\"bold\"" } else { "" };
        let _ = writeln!(
            self.body,
            "<text x=\"{}\" y=\"{}\" font-size=\"{}\"{weight}{anchor} fill=\"{fill}\">{}</text>",
            n(x),
            n(top + ASCENT * font.size),
            n(font.size),
            html_escape(s)
        );
    }

    /// Lines of text, the first box's top at `top`; returns the height they take.
    pub fn lines(
        &mut self,
        (x, top): (f64, f64),
        font: Font,
        anchor: Anchor,
        fill: &str,
        lines: &[String],
    ) -> f64 {
        for (i, l) in lines.iter().enumerate() {
            self.text((x, top + i as f64 * font.line()), font, anchor, fill, l);
        }
        block(lines.len(), font)
    }

    /// A straight line.
    pub fn line(&mut self, from: (f64, f64), to: (f64, f64), stroke: Stroke<'_>) {
        self.shape(&segment(from, to, stroke));
    }

    /// A filled rectangle; `class` names what it is (`plot` for a plot area).
    pub fn rect(&mut self, (x, y): (f64, f64), (w, h): (f64, f64), fill: &str, class: &str) {
        let class = if class.is_empty() { String::new() } else { format!(" class=\"{class}\"") };
        let _ = writeln!(
            self.body,
            "<rect{class} x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{fill}\"/>",
            n(x),
            n(y),
            n(w.max(0.0)),
            n(h.max(0.0))
        );
    }

    /// A line through `points`.
    pub fn polyline(&mut self, points: &[(f64, f64)], stroke: Stroke<'_>) {
        let pts: Vec<String> = points.iter().map(|(x, y)| format!("{},{}", n(*x), n(*y))).collect();
        let _ = writeln!(
            self.body,
            "<polyline points=\"{}\" fill=\"none\" {} stroke-linejoin=\"round\"/>",
            pts.join(" "),
            stroke.attributes()
        );
    }

    /// A plotted value: `shapes` (SVG elements) grouped under the figure `title` shows on
    /// hover.
    pub fn mark(&mut self, title: &str, shapes: &[String]) {
        let _ = writeln!(
            self.body,
            "<g class=\"mark\"><title>{}</title>{}</g>",
            html_escape(title),
            shapes.concat()
        );
    }

    /// An element made by [`circle`], [`bar`] or [`segment`], drawn as it is (no hover).
    pub fn shape(&mut self, element: &str) {
        self.body.push_str(element);
        self.body.push('\n');
    }

    /// The document, `height` high, described by `label` for screen readers.
    pub fn finish(self, height: f64, label: &str) -> String {
        format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {} {}\" width=\"100%\" \
             role=\"img\" aria-label=\"{}\" font-family=\"{}\">\n\
             <rect width=\"100%\" height=\"100%\" fill=\"#FFFFFF\"/>\n{}</svg>",
            n(WIDTH),
            n(height.ceil()),
            html_escape(label),
            html_escape(FAMILY),
            self.body
        )
    }
}

/// The height `lines` lines of `font` take.
pub fn block(lines: usize, font: Font) -> f64 {
    if lines == 0 { 0.0 } else { (lines - 1) as f64 * font.line() + BOX * font.size }
}

/// A circle element (for [`Svg::mark`]); `fill` None draws a ring.
pub fn circle((x, y): (f64, f64), r: f64, colour: &str, fill: bool) -> String {
    let paint = if fill {
        format!("fill=\"{colour}\" stroke=\"#FFFFFF\" stroke-width=\"1\"")
    } else {
        format!("fill=\"#FFFFFF\" fill-opacity=\"0.6\" stroke=\"{colour}\" stroke-width=\"1.6\"")
    };
    format!("<circle cx=\"{}\" cy=\"{}\" r=\"{}\" {paint}/>", n(x), n(y), n(r))
}

/// An invisible circle that still catches the pointer (a hover target on a dense line).
pub fn target((x, y): (f64, f64), r: f64) -> String {
    format!(
        "<circle cx=\"{}\" cy=\"{}\" r=\"{}\" fill=\"#FFFFFF\" fill-opacity=\"0\"/>",
        n(x),
        n(y),
        n(r)
    )
}

/// A rectangle element (for [`Svg::mark`]).
pub fn bar((x, y): (f64, f64), (w, h): (f64, f64), colour: &str) -> String {
    format!(
        "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{colour}\"/>",
        n(x),
        n(y),
        n(w.max(0.0)),
        n(h.max(0.0))
    )
}

/// A line element (for [`Svg::mark`]).
pub fn segment((x1, y1): (f64, f64), (x2, y2): (f64, f64), stroke: Stroke<'_>) -> String {
    format!(
        "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" {}/>",
        n(x1),
        n(y1),
        n(x2),
        n(y2),
        stroke.attributes()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_measured_with_dejavu_widths() {
        // "10" in DejaVu Sans is 2 × 0.636 em.
        let w = width("10", Font::regular(10.0));
        assert!((w - 12.72 * 1.03).abs() < 1e-9, "{w}");
        assert!(width("W", Font::bold(10.0)) > width("W", Font::regular(10.0)));
    }

    #[test]
    fn wrapping_keeps_every_line_within_its_width() {
        let font = Font::regular(14.0);
        let text = "127.0.0.1:5201 (linerate 0.1.0); varied: P=1,P=2 x w=default,w=256K; fixed: TCP upload";
        let lines = wrap(text, font, 200.0);
        assert!(lines.len() > 2, "{lines:?}");
        assert!(lines.iter().all(|l| width(l, font) <= 200.0), "{lines:?}");
        assert_eq!(lines.join(" "), text, "nothing lost when every word fits");
        let cut = wrap("averyveryverylongwordwithoutanyspace", font, 60.0);
        assert!(cut[0].ends_with('…') && width(&cut[0], font) <= 60.0, "{cut:?}");
    }

    #[test]
    fn coordinates_keep_one_decimal_and_text_is_escaped() {
        let mut svg = Svg::default();
        svg.text((1.25, 2.0), Font::regular(10.0), Anchor::Start, INK, "a<b & 'c'");
        let out = svg.finish(10.0, "x");
        assert!(out.contains("x=\"1.3\" y=\"11.3\""), "{out}");
        assert!(out.contains("a&lt;b &amp; &#39;c&#39;"), "{out}");
    }
}
