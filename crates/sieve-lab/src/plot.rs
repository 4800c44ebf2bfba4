//! Plots for the lab's results: one small API, [`render`], that every experiment calls so all
//! figures look alike.
//!
//! Why a module of its own rather than plotters calls in each experiment: the lab's plots must
//! let a reader tell *our* measurements from the *thesis's* values and from *other tools* at a
//! glance, even printed in grayscale (issue 4: "thesis values distinguishable from ours"). That
//! is a property of the whole set of figures, so it lives in one place:
//!
//! | [`Style`] | line | marker | palette |
//! | --- | --- | --- | --- |
//! | [`Style::Ours`] | solid | filled circle / square / diamond | blues and purples |
//! | [`Style::Thesis`] | dashed | hollow circle / square / diamond | reds and oranges |
//! | [`Style::Peer`] | dotted | filled triangles | greens and greys |
//!
//! The i-th series of ours and the i-th of the thesis share a marker shape, so "our AES run" and
//! "the thesis's AES run" pair up visually while line pattern, fill and colour still tell them
//! apart.
//!
//! Layout is done here rather than by plotters' defaults, for reasons found by looking at the
//! output (plotters draws only the frame, grid, tick marks, lines and markers):
//! - the legend sits in its own column right of the plot, so it never hides data;
//! - categorical x labels (split algorithms, experiment ids) are wrapped, shrunk or staggered
//!   under their tick, so neighbours never overlap;
//! - all text is placed by [`Ink`]: in the PNG glyph by glyph, because plotters 0.3.7's glyph
//!   placement spaces letters unevenly (see [`GlyphMetrics`]); and without plotters' text
//!   measuring, which needs a registered font file, so the SVG can still be written on a
//!   machine without one.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use anyhow::{anyhow, Context};
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// Width of both the PNG and the SVG, in pixels.
pub const WIDTH: u32 = 1000;
/// Height of both the PNG and the SVG, in pixels.
pub const HEIGHT: u32 = 620;

/// How a series is drawn; see the module documentation for the full table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// Our own measurement on this machine: solid line, filled markers, cool palette.
    Ours,
    /// A value taken from the thesis: dashed line, hollow markers, warm palette.
    Thesis,
    /// Another tool measured in the same run (socat, scp, iperf3): dotted line, triangles.
    Peer,
}

/// One line of a figure.
#[derive(Debug, Clone)]
pub struct Series {
    /// Text shown in the legend.
    pub label: String,
    /// Ours, the thesis's, or a peer's.
    pub style: Style,
    /// (x, y) in data units. Points with a NaN or infinite coordinate (or y ≤ 0 on a log axis)
    /// are skipped and break the line, so a missing measurement shows as a gap, not as a
    /// straight line that pretends to know the value.
    pub points: Vec<(f64, f64)>,
    /// Per point, the absolute (low, high) of an interval drawn as an error bar (e.g. the 95 %
    /// interval of the median). Matched to `points` by index.
    pub err: Option<Vec<(f64, f64)>>,
}

/// A whole figure.
#[derive(Debug, Clone)]
pub struct Figure {
    /// Drawn centred above the plot.
    pub title: String,
    /// X axis title, drawn exactly as given: include the unit, e.g. "file size (MB)".
    pub x_label: String,
    /// Y axis title, drawn exactly as given: include the unit, e.g. "response time (ms)".
    pub y_label: String,
    /// Every series, in legend order.
    pub series: Vec<Series>,
    /// Logarithmic y axis (non-positive values are then skipped).
    pub log_y: bool,
    /// Names for the x positions 0, 1, ..., n−1, for categorical axes (split algorithms, N).
    /// Points then use x = index of their category.
    pub x_categories: Option<Vec<String>>,
}

/// Draws `fig` into `stem.png` (1000×620) and `stem.svg`, creating the parent folder.
///
/// The PNG needs a TrueType font (see [`font_path`]); without one the SVG is still written (it
/// names the font family and lets the viewer pick a face) and the error says how to install one.
pub fn render(fig: &Figure, stem: &Path) -> anyhow::Result<()> {
    if let Some(parent) = stem.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    let png = with_ext(stem, "png");
    let svg = with_ext(stem, "svg");
    let font = ensure_font();
    let svg_ink = Ink {
        glyphs: None,
        measure: font.is_ok(),
    };
    {
        let root = SVGBackend::new(&svg, (WIDTH, HEIGHT)).into_drawing_area();
        draw(fig, &root, svg_ink).with_context(|| format!("drawing {}", svg.display()))?;
        root.present()
            .map_err(|e| anyhow!("writing {}: {e:?}", svg.display()))?;
    }
    let glyphs =
        font.map_err(|e| anyhow!("wrote {} but not {}: {e}", svg.display(), png.display()))?;
    let png_ink = Ink {
        glyphs,
        measure: true,
    };
    let root = BitMapBackend::new(&png, (WIDTH, HEIGHT)).into_drawing_area();
    draw(fig, &root, png_ink).with_context(|| format!("drawing {}", png.display()))?;
    root.present()
        .map_err(|e| anyhow!("writing {}: {e:?}", png.display()))?;
    Ok(())
}

/// `stem` with `.ext` appended (not replacing: a stem like `F5.1` has no extension to replace).
fn with_ext(stem: &Path, ext: &str) -> PathBuf {
    let mut s = stem.as_os_str().to_owned();
    s.push(".");
    s.push(ext);
    PathBuf::from(s)
}

// ---------------------------------------------------------------------------------------------
// Fonts

/// Font files tried in order when `SIEVE_LAB_FONT` is not set: Debian/Ubuntu DejaVu, Liberation,
/// and Arch/Fedora's DejaVu location.
const FONT_CANDIDATES: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
];

/// The font file the PNG will use: `SIEVE_LAB_FONT` if set (and then only it, so a typo in the
/// override is reported rather than silently replaced), otherwise the first existing
/// [`FONT_CANDIDATES`].
pub fn font_path() -> anyhow::Result<PathBuf> {
    const HINT: &str = "install one with `apt-get install fonts-dejavu-core`, \
                        or set SIEVE_LAB_FONT to a .ttf file";
    if let Some(p) = std::env::var_os("SIEVE_LAB_FONT").filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        if p.is_file() {
            return Ok(p);
        }
        return Err(anyhow!(
            "SIEVE_LAB_FONT={} is not a file; {HINT}",
            p.display()
        ));
    }
    FONT_CANDIDATES
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
        .ok_or_else(|| {
            anyhow!(
                "no TrueType font for the PNG plots (looked for {}); {HINT}",
                FONT_CANDIDATES.join(", ")
            )
        })
}

/// Registers the font for "sans-serif" once per process and returns its glyph metrics (`None` if
/// the file is a font ab_glyph accepts but [`GlyphMetrics`] cannot read; text is then drawn the
/// plain plotters way). plotters' `ab_glyph` text renderer has no built-in font and wants
/// `'static` bytes, so the file is read once and leaked on purpose.
fn ensure_font() -> Result<Option<&'static GlyphMetrics>, String> {
    static FONT: OnceLock<Result<Option<GlyphMetrics>, String>> = OnceLock::new();
    FONT.get_or_init(|| {
        let path = font_path().map_err(|e| e.to_string())?;
        let bytes = std::fs::read(&path).map_err(|e| format!("reading {}: {e}", path.display()))?;
        let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
        plotters::style::register_font("sans-serif", FontStyle::Normal, bytes)
            .map_err(|_| format!("{} is not a usable TrueType font", path.display()))?;
        Ok(GlyphMetrics::parse(bytes))
    })
    .as_ref()
    .map(Option::as_ref)
    .map_err(Clone::clone)
}

/// Just enough of a TrueType file to place glyphs by hand.
///
/// Why: plotters 0.3.7's `ab_glyph` renderer draws each glyph's bitmap at the pen position but
/// drops the glyph's left side bearing, so letters with a wide bearing sit too far left and
/// text in the PNG looks unevenly spaced ("b ytes encryp ted", seen when looking at the first
/// plots). The PNG therefore draws text one glyph at a time at pen + bearing, with advances and
/// bearings read here from the `hhea`, `hmtx` and `cmap` tables. The SVG is unaffected (the
/// viewer lays its text out) and keeps whole strings.
struct GlyphMetrics {
    data: &'static [u8],
    cmap: Cmap,
    hmtx: usize,
    num_h: usize,
    /// Ascender − descender in font units: ab_glyph scales this height to the font size.
    height: f64,
}

/// Offset of the Unicode character map subtable in use.
#[derive(Debug, Clone, Copy)]
enum Cmap {
    /// Segment mapping (BMP only).
    Format4(usize),
    /// Segmented coverage (full Unicode).
    Format12(usize),
}

fn u16_at(d: &[u8], o: usize) -> Option<u16> {
    d.get(o..o.checked_add(2)?)
        .map(|b| u16::from_be_bytes([b[0], b[1]]))
}

fn i16_at(d: &[u8], o: usize) -> Option<i16> {
    u16_at(d, o).map(|v| v as i16)
}

fn u32_at(d: &[u8], o: usize) -> Option<u32> {
    d.get(o..o.checked_add(4)?)
        .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

impl GlyphMetrics {
    fn parse(data: &'static [u8]) -> Option<Self> {
        let n = usize::from(u16_at(data, 4)?);
        let table = |tag: &[u8; 4]| {
            (0..n).find_map(|i| {
                let r = 12 + 16 * i;
                if data.get(r..r + 4)? == tag {
                    u32_at(data, r + 8).map(|o| o as usize)
                } else {
                    None
                }
            })
        };
        let hhea = table(b"hhea")?;
        let height = f64::from(i16_at(data, hhea + 4)?) - f64::from(i16_at(data, hhea + 6)?);
        let num_h = usize::from(u16_at(data, hhea + 34)?);
        let hmtx = table(b"hmtx")?;
        let cmap_at = table(b"cmap")?;
        let (mut f4, mut f12) = (None, None);
        for i in 0..usize::from(u16_at(data, cmap_at + 2)?) {
            let r = cmap_at + 4 + 8 * i;
            let (platform, encoding) = (u16_at(data, r)?, u16_at(data, r + 2)?);
            if !(platform == 0 || (platform == 3 && (encoding == 1 || encoding == 10))) {
                continue;
            }
            let sub = cmap_at + u32_at(data, r + 4)? as usize;
            match u16_at(data, sub)? {
                4 => f4 = f4.or(Some(sub)),
                12 => f12 = f12.or(Some(sub)),
                _ => {}
            }
        }
        let cmap = f12.map(Cmap::Format12).or(f4.map(Cmap::Format4))?;
        (height > 0.0 && num_h > 0).then_some(Self {
            data,
            cmap,
            hmtx,
            num_h,
            height,
        })
    }

    /// Glyph index of `c`, if the font has it.
    fn glyph(&self, c: char) -> Option<usize> {
        let (d, c) = (self.data, u32::from(c));
        match self.cmap {
            Cmap::Format12(t) => {
                let groups = u32_at(d, t + 12)? as usize;
                (0..groups).find_map(|i| {
                    let g = t + 16 + 12 * i;
                    let (first, last) = (u32_at(d, g)?, u32_at(d, g + 4)?);
                    (first..=last)
                        .contains(&c)
                        .then(|| u32_at(d, g + 8).map(|id| (id + c - first) as usize))
                        .flatten()
                })
            }
            Cmap::Format4(t) => {
                let seg2 = usize::from(u16_at(d, t + 6)?);
                let ends = t + 14;
                let starts = ends + seg2 + 2;
                let deltas = starts + seg2;
                let offsets = deltas + seg2;
                for i in (0..seg2).step_by(2) {
                    if u32::from(u16_at(d, ends + i)?) < c {
                        continue;
                    }
                    let start = u32::from(u16_at(d, starts + i)?);
                    if start > c {
                        return None;
                    }
                    let delta = u32::from(u16_at(d, deltas + i)?);
                    let offset = usize::from(u16_at(d, offsets + i)?);
                    if offset == 0 {
                        return Some(((c + delta) & 0xFFFF) as usize);
                    }
                    let g = u32::from(u16_at(d, offsets + i + offset + 2 * (c - start) as usize)?);
                    return (g != 0).then_some(((g + delta) & 0xFFFF) as usize);
                }
                None
            }
        }
    }

    /// (advance width, left side bearing) of `c` in pixels at font size `size`.
    fn h_metrics(&self, c: char, size: f64) -> (f64, f64) {
        let g = self.glyph(c).unwrap_or(0);
        let d = self.data;
        let adv = u16_at(d, self.hmtx + 4 * g.min(self.num_h - 1)).unwrap_or(0);
        let lsb = if g < self.num_h {
            i16_at(d, self.hmtx + 4 * g + 2)
        } else {
            i16_at(d, self.hmtx + 4 * self.num_h + 2 * (g - self.num_h))
        }
        .unwrap_or(0);
        let scale = size / self.height;
        (f64::from(adv) * scale, f64::from(lsb) * scale)
    }
}

/// How text is put on a backend: whole strings (SVG, or no metrics), or glyph by glyph with
/// bearings (PNG); see [`GlyphMetrics`].
#[derive(Clone, Copy)]
struct Ink {
    glyphs: Option<&'static GlyphMetrics>,
    /// Whether plotters can measure text (a font is registered); else sizes are estimated.
    measure: bool,
}

impl Ink {
    /// Draws `text` at `at`, anchored by `anchor`; `rotate` turns it to read bottom to top (with
    /// its top towards the left), for the y axis title.
    // One call per piece of text with everything spelled out reads better here than a builder.
    #[allow(clippy::too_many_arguments)]
    fn text<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
        text: &str,
        size: f64,
        color: RGBAColor,
        anchor: Pos,
        rotate: bool,
        at: (i32, i32),
    ) -> anyhow::Result<()> {
        let trans = if rotate {
            FontTransform::Rotate270
        } else {
            FontTransform::None
        };
        let style = font(size).color(&color).transform(trans.clone());
        let Some(m) = self.glyphs else {
            return area.draw_text(text, &style.pos(anchor), at).map_err(de);
        };
        let mut pen = 0.0;
        let glyphs: Vec<(char, f64, f64)> = text
            .chars()
            .map(|c| {
                let (adv, lsb) = m.h_metrics(c, size);
                let g = (c, pen, lsb);
                pen += adv;
                g
            })
            .collect();
        // plotters' layout box is `size / 1.24` high; keep its vertical anchoring.
        let (width, height) = (pen, size / 1.24);
        let dx = match anchor.h_pos {
            HPos::Left => 0.0,
            HPos::Center => -width / 2.0,
            HPos::Right => -width,
        };
        let dy = match anchor.v_pos {
            VPos::Top => 0.0,
            VPos::Center => -height / 2.0,
            VPos::Bottom => -height,
        };
        let style = style.pos(Pos::new(HPos::Left, VPos::Top));
        let mut buf = [0u8; 4];
        for (c, pen, lsb) in glyphs {
            if c.is_whitespace() {
                continue;
            }
            // ab_glyph places the glyph's pixel box, which starts at floor(bearing).
            let lx = (dx + pen).round() as i32 + lsb.floor() as i32;
            let (ox, oy) = trans.transform(lx, dy.round() as i32);
            area.draw_text(c.encode_utf8(&mut buf), &style, (at.0 + ox, at.1 + oy))
                .map_err(de)?;
        }
        Ok(())
    }
}

/// Width and height of `text` in pixels at `size`: measured with the registered font when there
/// is one, otherwise estimated (DejaVu Sans averages about 0.55 em per character), which is
/// good enough for layout of an SVG that the viewer renders with its own font anyway.
fn text_size(text: &str, size: f64, measure: bool) -> (u32, u32) {
    if measure {
        if let Ok(wh) = FontDesc::new(FontFamily::SansSerif, size, FontStyle::Normal).box_size(text)
        {
            return wh;
        }
    }
    (
        (text.chars().count() as f64 * size * 0.55).ceil() as u32,
        size.ceil() as u32,
    )
}

/// The unbreakable pieces of `text`, each with whether a space precedes it: words, further split
/// after '-' and '/', so identifiers like "F5.10-5.11" or "T5.3/F5.17" can wrap too.
fn pieces(text: &str) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    for word in text.split_whitespace() {
        let mut first = true;
        let mut cur = String::new();
        let chars: Vec<char> = word.chars().collect();
        for (i, &c) in chars.iter().enumerate() {
            cur.push(c);
            let breakable = (c == '-' || c == '/') && i + 1 < chars.len() && cur.len() > 1;
            if breakable {
                out.push((std::mem::take(&mut cur), first));
                first = false;
            }
        }
        if !cur.is_empty() {
            out.push((cur, first));
        }
    }
    out
}

/// Greedy wrap of `text` into lines no wider than `max_w` pixels, breaking at spaces and after
/// '-' or '/' (a single piece longer than that stays on its own line).
fn wrap(text: &str, max_w: u32, size: f64, measure: bool) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut cur = String::new();
    for (piece, space) in pieces(text) {
        let sep = if space && !cur.is_empty() { " " } else { "" };
        let candidate = format!("{cur}{sep}{piece}");
        if cur.is_empty() || text_size(&candidate, size, measure).0 <= max_w {
            cur = candidate;
        } else {
            lines.push(std::mem::replace(&mut cur, piece));
        }
    }
    if !cur.is_empty() || lines.is_empty() {
        lines.push(cur);
    }
    lines
}

// ---------------------------------------------------------------------------------------------
// Axes

/// One axis: its range, and the tick positions computed here (plotters' own tick choice for f64
/// cannot label categories or pick 1-2-5 ticks on a log axis, and its `WithKeyPoints` wrapper
/// loses the f64 label formatter).
#[derive(Debug, Clone)]
struct Axis {
    lo: f64,
    hi: f64,
    log: bool,
    /// Labelled ticks with a bold grid line.
    ticks: Vec<f64>,
    /// Unlabelled light grid lines.
    minor: Vec<f64>,
    /// Decimal places for tick labels on a linear axis.
    decimals: usize,
}

impl Axis {
    /// Position of `v` along the axis, 0 at `lo` and 1 at `hi`.
    fn frac(&self, v: f64) -> f64 {
        let (v, lo, hi) = if self.log {
            if v <= 0.0 {
                return -1.0;
            }
            (v.log10(), self.lo.log10(), self.hi.log10())
        } else {
            (v, self.lo, self.hi)
        };
        if hi == lo {
            0.5
        } else {
            (v - lo) / (hi - lo)
        }
    }

    fn label(&self, v: f64) -> String {
        if self.log {
            format_log_tick(v)
        } else {
            format_number(v, self.decimals)
        }
    }
}

impl Ranged for Axis {
    type ValueType = f64;
    type FormatOption = DefaultFormatting;

    fn map(&self, v: &f64, limit: (i32, i32)) -> i32 {
        // Clamped so that a stray value cannot overflow the pixel arithmetic.
        let t = self.frac(*v).clamp(-1.0, 2.0);
        limit.0 + (t * f64::from(limit.1 - limit.0)).round() as i32
    }

    fn key_points<H: KeyPointHint>(&self, hint: H) -> Vec<f64> {
        if hint.max_num_points() == 0 {
            Vec::new()
        } else if hint.weight().allow_light_points() {
            self.minor.clone()
        } else {
            self.ticks.clone()
        }
    }

    fn range(&self) -> Range<f64> {
        self.lo..self.hi
    }
}

/// A "nice" step (1, 2, 2.5 or 5 times a power of ten) giving about `target` steps over `span`.
fn nice_step(span: f64, target: f64) -> f64 {
    let raw = span / target.max(1.0);
    let mag = 10f64.powf(raw.log10().floor());
    let norm = raw / mag;
    let nice = if norm <= 1.0 {
        1.0
    } else if norm <= 2.0 {
        2.0
    } else if norm <= 2.5 {
        2.5
    } else if norm <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * mag
}

/// Multiples of `step` within `[lo, hi]`, snapped so that 0.1 + 0.2 prints as 0.3.
fn multiples(lo: f64, hi: f64, step: f64) -> Vec<f64> {
    let first = (lo / step - 1e-9).ceil() as i64;
    let last = (hi / step + 1e-9).floor() as i64;
    if last < first || last - first > 1000 {
        return Vec::new();
    }
    (first..=last)
        .map(|k| {
            let v = k as f64 * step;
            if v == 0.0 {
                0.0 // no "-0"
            } else {
                v
            }
        })
        .collect()
}

/// Decimal places needed to print multiples of `step` exactly.
fn decimals_for(step: f64) -> usize {
    let e = step.log10().floor();
    let lead = step / 10f64.powf(e);
    let mut d = (-e).max(0.0) as usize;
    if (lead - 2.5).abs() < 1e-6 {
        d += 1;
    }
    d
}

/// `v` with `decimals` places; scientific notation for very large or tiny magnitudes.
fn format_number(v: f64, decimals: usize) -> String {
    let a = v.abs();
    if a != 0.0 && !(1e-4..1e6).contains(&a) {
        return format!("{v:e}");
    }
    let s = format!("{v:.decimals$}");
    if s.trim_start_matches('-')
        .chars()
        .all(|c| c == '0' || c == '.')
    {
        s.trim_start_matches('-').to_string()
    } else {
        s
    }
}

/// A 1-2-5 tick on a log axis, with just the decimals it needs (0.002, 50, 1e6).
fn format_log_tick(v: f64) -> String {
    let decimals = (-(v.log10() + 1e-9).floor()).max(0.0) as usize;
    format_number(v, decimals)
}

/// A linear axis over the data range `[lo, hi]` (already padded), with about `target` ticks.
fn linear_axis(lo: f64, hi: f64, target: f64) -> Axis {
    let step = nice_step(hi - lo, target);
    let ticks = multiples(lo, hi, step);
    let minor = multiples(lo, hi, step / 2.0)
        .into_iter()
        .filter(|m| !ticks.iter().any(|t| (t - m).abs() < step * 1e-6))
        .collect();
    Axis {
        lo,
        hi,
        log: false,
        ticks,
        minor,
        decimals: decimals_for(step),
    }
}

/// A log axis over `[lo, hi]` (both > 0): decades, plus 2 and 5 when fewer than three decades
/// are visible, plus linear ticks when even that gives fewer than two labels.
fn log_axis(lo: f64, hi: f64) -> Axis {
    let (a, b) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
    let decades: Vec<f64> = (a..=b).map(|e| 10f64.powi(e)).collect();
    let inside = |v: &f64| *v >= lo * (1.0 - 1e-9) && *v <= hi * (1.0 + 1e-9);
    let mut ticks: Vec<f64> = decades.iter().copied().filter(inside).collect();
    if ticks.len() < 3 {
        ticks = decades
            .iter()
            .flat_map(|d| [*d, 2.0 * d, 5.0 * d])
            .filter(inside)
            .collect();
    }
    if ticks.len() < 2 {
        ticks = linear_axis(lo, hi, 5.0)
            .ticks
            .into_iter()
            .filter(|t| *t > 0.0)
            .collect();
    }
    // If there are very many decades, label every k-th so the labels stay readable.
    let every = ticks.len().div_ceil(12).max(1);
    let ticks: Vec<f64> = ticks.into_iter().step_by(every).collect();
    let minor = if b - a <= 12 {
        decades
            .iter()
            .flat_map(|d| (1..10).map(move |k| f64::from(k) * d))
            .filter(inside)
            .filter(|m| !ticks.iter().any(|t| ((t - m) / m).abs() < 1e-9))
            .collect()
    } else {
        Vec::new()
    };
    Axis {
        lo,
        hi,
        log: true,
        ticks,
        minor,
        decimals: 0,
    }
}

/// True if a point can be drawn on this figure's axes.
fn drawable(x: f64, y: f64, log_y: bool) -> bool {
    x.is_finite() && y.is_finite() && !(log_y && y <= 0.0)
}

/// Finite error-bar bounds of point `i` of `s`, ordered (low, high).
fn err_of(s: &Series, i: usize) -> Option<(f64, f64)> {
    let (l, h) = *s.err.as_ref()?.get(i)?;
    (l.is_finite() && h.is_finite()).then(|| (l.min(h), l.max(h)))
}

/// The x axis: categories at 0..n with half a slot either side, else the data range padded 5 %.
fn x_axis(fig: &Figure, plot_w: f64) -> Axis {
    let xs: Vec<f64> = fig
        .series
        .iter()
        .flat_map(|s| s.points.iter())
        .filter(|(x, y)| drawable(*x, *y, fig.log_y))
        .map(|p| p.0)
        .collect();
    let (dlo, dhi) = min_max(&xs);
    if let Some(cats) = &fig.x_categories {
        let n = cats.len() as f64;
        let lo = dlo.map_or(0.0, |v| v.min(0.0)) - 0.5;
        let hi = dhi.map_or(n - 1.0, |v| v.max(n - 1.0)).max(0.0) + 0.5;
        let ticks: Vec<f64> = (0..cats.len()).map(|i| i as f64).collect();
        return Axis {
            lo,
            hi,
            log: false,
            ticks,
            minor: Vec::new(),
            decimals: 0,
        };
    }
    let (lo, hi) = match (dlo, dhi) {
        (Some(lo), Some(hi)) if hi > lo => {
            let pad = 0.05 * (hi - lo);
            (lo - pad, hi + pad)
        }
        (Some(v), _) => {
            let d = if v == 0.0 { 1.0 } else { 0.1 * v.abs() };
            (v - d, v + d)
        }
        _ => (0.0, 1.0),
    };
    linear_axis(lo, hi, (plot_w / 90.0).clamp(3.0, 12.0))
}

/// The y axis: every drawable value and error bound; on a linear axis also 0, then 5 % padding
/// on each side that is not pinned at 0 (an axis starting at −5 under positive times looks like
/// a bug); on a log axis 5 % padding in log space.
fn y_axis(fig: &Figure, plot_h: f64) -> Axis {
    let mut ys = Vec::new();
    for s in &fig.series {
        for (i, &(x, y)) in s.points.iter().enumerate() {
            if !drawable(x, y, fig.log_y) {
                continue;
            }
            ys.push(y);
            if let Some((l, h)) = err_of(s, i) {
                ys.push(h);
                if !fig.log_y || l > 0.0 {
                    ys.push(l);
                }
            }
        }
    }
    let (dlo, dhi) = min_max(&ys);
    let target = (plot_h / 55.0).clamp(3.0, 10.0);
    if fig.log_y {
        let (lo, hi) = match (dlo, dhi) {
            (Some(lo), Some(hi)) if hi > lo => (lo, hi),
            (Some(v), _) => (v / 2.0, v * 2.0),
            _ => (1.0, 10.0),
        };
        let (l, h) = (lo.log10(), hi.log10());
        let pad = 0.05 * (h - l);
        return log_axis(10f64.powf(l - pad), 10f64.powf(h + pad));
    }
    let lo = dlo.unwrap_or(0.0).min(0.0);
    let hi = dhi.unwrap_or(0.0).max(0.0);
    if hi == lo {
        return linear_axis(0.0, 1.0, target);
    }
    let pad = 0.05 * (hi - lo);
    let lo = if lo < 0.0 { lo - pad } else { lo };
    let hi = if hi > 0.0 { hi + pad } else { hi };
    linear_axis(lo, hi, target)
}

fn min_max(v: &[f64]) -> (Option<f64>, Option<f64>) {
    let lo = v.iter().copied().reduce(f64::min);
    let hi = v.iter().copied().reduce(f64::max);
    (lo, hi)
}

// ---------------------------------------------------------------------------------------------
// Looks

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    Circle,
    Square,
    Diamond,
    TriangleUp,
    TriangleDown,
}

/// How one series looks: derived from its [`Style`] and its index among series of that style.
#[derive(Debug, Clone, Copy)]
struct Look {
    style: Style,
    color: RGBColor,
    shape: Shape,
}

/// Dark blues and purples: ours.
const OURS: [RGBColor; 5] = [
    RGBColor(0x1f, 0x4e, 0xa8),
    RGBColor(0x6a, 0x3d, 0x9a),
    RGBColor(0x0b, 0x7f, 0xa6),
    RGBColor(0x1a, 0x1a, 0x5e),
    RGBColor(0x8e, 0x6b, 0xc9),
];
/// Reds, oranges and browns: the thesis's.
const THESIS: [RGBColor; 5] = [
    RGBColor(0xd6, 0x45, 0x1b),
    RGBColor(0xe0, 0x8e, 0x0b),
    RGBColor(0xa5, 0x1c, 0x30),
    RGBColor(0x8c, 0x51, 0x0a),
    RGBColor(0xd9, 0x4f, 0x8a),
];
/// Greens and greys: other tools.
const PEERS: [RGBColor; 4] = [
    RGBColor(0x2e, 0x7d, 0x32),
    RGBColor(0x61, 0x61, 0x61),
    RGBColor(0x7c, 0x8c, 0x00),
    RGBColor(0x00, 0x69, 0x5c),
];

fn looks(series: &[Series]) -> Vec<Look> {
    let mut count = [0usize; 3];
    series
        .iter()
        .map(|s| {
            let k = match s.style {
                Style::Ours => 0,
                Style::Thesis => 1,
                Style::Peer => 2,
            };
            let i = count[k];
            count[k] += 1;
            const PAIRED: [Shape; 3] = [Shape::Circle, Shape::Square, Shape::Diamond];
            let (color, shape) = match s.style {
                Style::Ours => (OURS[i % OURS.len()], PAIRED[i % 3]),
                Style::Thesis => (THESIS[i % THESIS.len()], PAIRED[i % 3]),
                Style::Peer => (
                    PEERS[i % PEERS.len()],
                    [Shape::TriangleUp, Shape::TriangleDown][i % 2],
                ),
            };
            Look {
                style: s.style,
                color,
                shape,
            }
        })
        .collect()
}

const LINE_WIDTH: u32 = 2;
const MARKER_R: i32 = 5;

impl Look {
    fn line_style(&self) -> ShapeStyle {
        self.color.stroke_width(LINE_WIDTH)
    }

    /// Filled for ours and peers; hollow (white inside, coloured outline) for the thesis, white
    /// so the line under a hollow marker does not show through it.
    fn marker<'a, DB: DrawingBackend + 'a, C: Clone + 'a>(&self, at: C) -> DynElement<'a, DB, C> {
        let r = MARKER_R;
        let hollow = self.style == Style::Thesis;
        let fill = if hollow {
            WHITE.filled()
        } else {
            self.color.filled()
        };
        let edge = self.color.stroke_width(2);
        let poly: Vec<(i32, i32)> = match self.shape {
            Shape::Circle => {
                return (EmptyElement::at(at)
                    + Circle::new((0, 0), r, fill)
                    + Circle::new((0, 0), r, edge))
                .into_dyn();
            }
            Shape::Square => {
                let q = r - 1;
                vec![(-q, -q), (q, -q), (q, q), (-q, q)]
            }
            Shape::Diamond => vec![(0, -r - 1), (r + 1, 0), (0, r + 1), (-r - 1, 0)],
            Shape::TriangleUp => vec![(0, -r - 1), (r + 1, r), (-r - 1, r)],
            Shape::TriangleDown => vec![(0, r + 1), (r + 1, -r), (-r - 1, -r)],
        };
        let mut outline = poly.clone();
        outline.push(poly[0]);
        (EmptyElement::at(at) + Polygon::new(poly, fill) + PathElement::new(outline, edge))
            .into_dyn()
    }
}

/// Draws one polyline in the series' pattern: solid, dashed (thesis) or dotted (peers).
fn draw_line<DB, CT>(
    area: &DrawingArea<DB, CT>,
    look: &Look,
    pts: Vec<CT::From>,
) -> anyhow::Result<()>
where
    DB: DrawingBackend,
    CT: CoordTranslate,
    CT::From: Clone + 'static,
{
    if pts.len() < 2 {
        return Ok(());
    }
    let style = look.line_style();
    let res = match look.style {
        Style::Ours => area.draw(&PathElement::new(pts, style)),
        Style::Thesis => area.draw(&DashedPathElement::new(pts, 9, 5, style)),
        Style::Peer => area.draw(&DashedPathElement::new(pts, 2, 5, style)),
    };
    res.map_err(de)
}

fn de<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow!("plotting failed: {e:?}")
}

// ---------------------------------------------------------------------------------------------
// Drawing

const TICK_FONT: f64 = 15.0;
const DESC_FONT: f64 = 17.0;
const LEGEND_FONT: f64 = 15.0;
const TITLE_FONT: f64 = 22.0;
const MARGIN: u32 = 12;

fn font(size: f64) -> TextStyle<'static> {
    TextStyle::from(FontDesc::new(
        FontFamily::SansSerif,
        size,
        FontStyle::Normal,
    ))
    .color(&BLACK)
}

/// The legend's rows: the wrapped label lines of each series.
fn legend_rows(fig: &Figure, max_text_w: u32, measure: bool) -> Vec<Vec<String>> {
    fig.series
        .iter()
        .map(|s| wrap(&s.label, max_text_w, LEGEND_FONT, measure))
        .collect()
}

const LEGEND_SAMPLE: i32 = 44;
const LEGEND_PAD: i32 = 10;
const LEGEND_LINE_H: i32 = 19;
const LEGEND_ROW_GAP: i32 = 7;
/// Tick mark length, outward from the axis.
const TICK_MARK: i32 = 4;
/// Axis to tick label distance.
const TICK_GAP: i32 = TICK_MARK + 5;
/// Tick labels to axis title distance.
const DESC_GAP: i32 = 9;
/// Left edge of the chart area to the rotated y axis title.
const Y_DESC_INSET: i32 = 4;
/// Extra room right of the plot so the last x tick label is not clipped.
const RIGHT_EXTRA: i32 = 10;

fn draw<DB: DrawingBackend>(
    fig: &Figure,
    root: &DrawingArea<DB, Shift>,
    ink: Ink,
) -> anyhow::Result<()> {
    let measure = ink.measure;
    let black = BLACK.mix(1.0);
    root.fill(&WHITE).map_err(de)?;
    let (w, h) = root.dim_in_pixel();

    // Title band; a long title shrinks rather than running off the image.
    let title_h = if fig.title.trim().is_empty() { 8 } else { 40 };
    let mut title_size = TITLE_FONT;
    while title_size > 13.0 && text_size(&fig.title, title_size, measure).0 + 20 > w {
        title_size -= 1.0;
    }
    if title_h > 8 {
        ink.text(
            root,
            &fig.title,
            title_size,
            black,
            Pos::new(HPos::Center, VPos::Center),
            false,
            (w as i32 / 2, title_h / 2 + 4),
        )?;
    }

    // Legend column: as wide as the longest label needs, up to 230 px of text (longer labels
    // wrap), so the plot keeps at least two thirds of the width.
    let max_text_w = 230;
    let rows = legend_rows(fig, max_text_w, measure);
    let text_w = rows
        .iter()
        .flatten()
        .map(|l| text_size(l, LEGEND_FONT, measure).0)
        .max()
        .unwrap_or(0);
    let legend_w = if rows.is_empty() {
        0
    } else {
        text_w as i32 + LEGEND_SAMPLE + 3 * LEGEND_PAD + 14
    };

    // Plot geometry: the chart area is left of the legend and below the title.
    let chart_w = w as i32 - legend_w;
    let chart_h = h as i32 - title_h;
    let tick_h = text_size("0123456789", TICK_FONT, measure).1 as i32;
    let desc_h = text_size("Ag", DESC_FONT, measure).1 as i32;

    // The y ticks depend on the plot height, which depends on the x label area, which for
    // categories depends on the plot width, which depends on the y tick labels: estimate the
    // height with one line of x labels; it only chooses how many y ticks there are.
    let y = y_axis(
        fig,
        f64::from(chart_h - 2 * MARGIN as i32 - TICK_GAP - tick_h - DESC_GAP - desc_h),
    );
    let y_tick_w = y
        .ticks
        .iter()
        .map(|t| text_size(&y.label(*t), TICK_FONT, measure).0 as i32)
        .max()
        .unwrap_or(0);
    let y_area = Y_DESC_INSET + desc_h + DESC_GAP + y_tick_w + TICK_GAP;
    let plot_w = f64::from(chart_w - 2 * MARGIN as i32 - RIGHT_EXTRA - y_area);
    let x = x_axis(fig, plot_w);

    // Categorical labels: the largest font ≤ TICK_FONT at which every piece (see `pieces`) fits
    // its slot, wrapped into lines so neighbours never overlap; if even the smallest font does
    // not fit, every other label drops to a second row, which doubles the room for each.
    let mut cat_lines: Vec<Vec<String>> = Vec::new();
    let mut cat_font = TICK_FONT;
    let mut stagger = false;
    if let Some(cats) = &fig.x_categories {
        let slot = (plot_w / (x.hi - x.lo)).max(10.0) as u32;
        let fits = |size: f64, room: u32| {
            cats.iter().all(|c| {
                pieces(c)
                    .iter()
                    .all(|(p, _)| text_size(p, size, measure).0 + 6 <= room)
            })
        };
        while cat_font > 10.0 && !fits(cat_font, slot) {
            cat_font -= 1.0;
        }
        stagger = !fits(cat_font, slot) && cats.len() > 1;
        let room = if stagger { 2 * slot } else { slot };
        cat_lines = cats
            .iter()
            .map(|c| wrap(c, room.saturating_sub(6), cat_font, measure))
            .collect();
    }
    let cats = fig.x_categories.is_some();
    let cat_line_h = text_size("Ag", cat_font, measure).1 as i32 + 3;
    let cat_row_h = cat_lines.iter().map(Vec::len).max().unwrap_or(1) as i32 * cat_line_h;
    let x_tick_block = if !cats {
        tick_h
    } else if stagger {
        2 * cat_row_h + 4
    } else {
        cat_row_h
    };
    let x_area = TICK_GAP + x_tick_block + DESC_GAP + desc_h + 6;

    let (chart_area, legend_area) = {
        let below_title = root.clone().split_vertically(title_h as u32).1;
        below_title.split_horizontally(chart_w as u32)
    };

    // plotters draws the frame, grid and tick marks; tick labels and axis titles are drawn
    // below by `ink`, so the PNG gets correctly spaced glyphs (plotters' own label text is
    // made transparent, which also keeps empty <text> elements out of the SVG).
    let mut chart = ChartBuilder::on(&chart_area)
        .margin(MARGIN)
        .margin_right(MARGIN as i32 + RIGHT_EXTRA)
        .x_label_area_size(x_area as u32)
        .y_label_area_size(y_area as u32)
        .build_cartesian_2d(x.clone(), y.clone())
        .map_err(de)?;
    chart
        .configure_mesh()
        .label_style(font(TICK_FONT).color(&TRANSPARENT))
        .x_label_formatter(&|_| String::new())
        .y_label_formatter(&|_| String::new())
        .set_all_tick_mark_size(TICK_MARK)
        .bold_line_style(BLACK.mix(0.15))
        .light_line_style(BLACK.mix(0.06))
        .axis_style(BLACK.stroke_width(1))
        .draw()
        .map_err(de)?;

    let (left, bottom) = chart.backend_coord(&(x.lo, y.lo));
    let (right, top) = chart.backend_coord(&(x.hi, y.hi));

    // Tick labels.
    if cats {
        for (i, lines) in cat_lines.iter().enumerate() {
            let (px, _) = chart.backend_coord(&(i as f64, y.lo));
            let row = if stagger && i % 2 == 1 {
                cat_row_h + 4
            } else {
                0
            };
            for (k, line) in lines.iter().enumerate() {
                ink.text(
                    root,
                    line,
                    cat_font,
                    black,
                    Pos::new(HPos::Center, VPos::Top),
                    false,
                    (px, bottom + TICK_GAP + row + k as i32 * cat_line_h),
                )?;
            }
        }
    } else {
        for &t in &x.ticks {
            let (px, _) = chart.backend_coord(&(t, y.lo));
            ink.text(
                root,
                &x.label(t),
                TICK_FONT,
                black,
                Pos::new(HPos::Center, VPos::Top),
                false,
                (px, bottom + TICK_GAP),
            )?;
        }
    }
    for &t in &y.ticks {
        let (_, py) = chart.backend_coord(&(x.lo, t));
        ink.text(
            root,
            &y.label(t),
            TICK_FONT,
            black,
            Pos::new(HPos::Right, VPos::Center),
            false,
            (left - TICK_GAP, py),
        )?;
    }
    // Axis titles, exactly as given.
    ink.text(
        root,
        &fig.x_label,
        DESC_FONT,
        black,
        Pos::new(HPos::Center, VPos::Top),
        false,
        (
            (left + right) / 2,
            bottom + TICK_GAP + x_tick_block + DESC_GAP,
        ),
    )?;
    ink.text(
        root,
        &fig.y_label,
        DESC_FONT,
        black,
        Pos::new(HPos::Center, VPos::Top),
        true,
        (left - y_area + Y_DESC_INSET, (top + bottom) / 2),
    )?;

    // Series: error bars first, then lines, then markers on top.
    let looks = looks(&fig.series);
    let plot = chart.plotting_area();
    let visible: Vec<bool> = fig
        .series
        .iter()
        .map(|s| s.points.iter().any(|&(x, y)| drawable(x, y, fig.log_y)))
        .collect();
    let n_visible = visible.iter().filter(|v| **v).count();
    // On a categorical axis several series share each x; a small horizontal dodge keeps their
    // error bars and markers from sitting on top of each other.
    let dodge_step = if cats && n_visible > 1 {
        (0.36 / (n_visible - 1) as f64).min(0.1)
    } else {
        0.0
    };
    for (visible_index, ((s, look), _)) in fig
        .series
        .iter()
        .zip(&looks)
        .zip(&visible)
        .filter(|(_, v)| **v)
        .enumerate()
    {
        let dx = dodge_step * (visible_index as f64 - (n_visible - 1) as f64 / 2.0);

        for (i, &(px, py)) in s.points.iter().enumerate() {
            if let (true, Some((l, h))) = (drawable(px, py, fig.log_y), err_of(s, i)) {
                let l = if fig.log_y && l <= 0.0 { y.lo } else { l };
                plot.draw(&ErrorBar::new_vertical(
                    px + dx,
                    l,
                    py,
                    h,
                    look.color.stroke_width(2),
                    10,
                ))
                .map_err(de)?;
            }
        }
        let mut segment: Vec<(f64, f64)> = Vec::new();
        for &(px, py) in &s.points {
            if drawable(px, py, fig.log_y) {
                segment.push((px + dx, py));
            } else {
                draw_line(plot, look, std::mem::take(&mut segment))?;
            }
        }
        draw_line(plot, look, segment)?;
        for &(px, py) in &s.points {
            if drawable(px, py, fig.log_y) {
                plot.draw(&look.marker((px + dx, py))).map_err(de)?;
            }
        }
    }
    if n_visible == 0 {
        ink.text(
            root,
            "no data",
            DESC_FONT,
            BLACK.mix(0.5),
            Pos::new(HPos::Center, VPos::Center),
            false,
            ((left + right) / 2, (top + bottom) / 2),
        )?;
    }

    // Legend box, top-aligned with the plot, listing every series (also empty ones, so a
    // missing peer is visibly missing rather than silently absent).
    if !rows.is_empty() {
        let top = MARGIN as i32;
        let height: i32 = rows
            .iter()
            .map(|r| r.len() as i32 * LEGEND_LINE_H + LEGEND_ROW_GAP)
            .sum::<i32>()
            + 2 * LEGEND_PAD
            - LEGEND_ROW_GAP;
        let (x0, x1) = (0, legend_w - 14);
        let corners = [(x0, top), (x1, top + height)];
        legend_area
            .draw(&Rectangle::new(corners, WHITE.filled()))
            .map_err(de)?;
        legend_area
            .draw(&Rectangle::new(corners, BLACK.mix(0.45).stroke_width(1)))
            .map_err(de)?;
        let mut cy = top + LEGEND_PAD;
        for (lines, look) in rows.iter().zip(&looks) {
            let mid = cy + LEGEND_LINE_H / 2;
            let (sx0, sx1) = (x0 + LEGEND_PAD, x0 + LEGEND_PAD + LEGEND_SAMPLE);
            draw_line(&legend_area, look, vec![(sx0, mid), (sx1, mid)])?;
            legend_area
                .draw(&look.marker(((sx0 + sx1) / 2, mid)))
                .map_err(de)?;
            for (k, line) in lines.iter().enumerate() {
                ink.text(
                    &legend_area,
                    line,
                    LEGEND_FONT,
                    black,
                    Pos::new(HPos::Left, VPos::Center),
                    false,
                    (sx1 + LEGEND_PAD, mid + k as i32 * LEGEND_LINE_H),
                )?;
            }
            cy += lines.len() as i32 * LEGEND_LINE_H + LEGEND_ROW_GAP;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(label: &str, style: Style, points: Vec<(f64, f64)>) -> Series {
        Series {
            label: label.into(),
            style,
            points,
            err: None,
        }
    }

    /// Ours, the thesis's and a peer's series on a categorical axis, with error bars and a gap.
    fn example() -> Figure {
        let ours_err = vec![
            (11.0, 14.0),
            (20.0, 26.0),
            (35.0, 41.0),
            (50.0, 58.0),
            (61.0, 70.0),
        ];
        Figure {
            title: "F5.3 – response time by split algorithm (loopback, 10 MB, P = 0.5)".into(),
            x_label: "split algorithm".into(),
            y_label: "response time (ms)".into(),
            series: vec![
                Series {
                    err: Some(ours_err),
                    ..s(
                        "ours: sieve, AES-128-GCM",
                        Style::Ours,
                        vec![
                            (0.0, 12.5),
                            (1.0, 23.0),
                            (2.0, 38.0),
                            (3.0, 54.0),
                            (4.0, 66.0),
                        ],
                    )
                },
                s(
                    "ours: secure-only, AES-128-GCM",
                    Style::Ours,
                    vec![
                        (0.0, 30.0),
                        (1.0, f64::NAN),
                        (2.0, 52.0),
                        (3.0, 71.0),
                        (4.0, 80.0),
                    ],
                ),
                Series {
                    err: Some(vec![(40.0, 48.0), (70.0, 85.0), (90.0, 104.0)]),
                    ..s(
                        "thesis: sieve, 3DES-EDE-CBC-SHA (2011 laptop)",
                        Style::Thesis,
                        vec![
                            (0.0, 44.0),
                            (1.0, 77.0),
                            (2.0, 97.0),
                            (3.0, 120.0),
                            (4.0, 140.0),
                        ],
                    )
                },
                s(
                    "thesis: secure-only",
                    Style::Thesis,
                    vec![(0.0, 90.0), (2.0, 150.0), (4.0, 171.0)],
                ),
                s(
                    "peer: socat + OpenSSL TLS",
                    Style::Peer,
                    vec![
                        (0.0, 25.0),
                        (1.0, 29.0),
                        (2.0, 47.0),
                        (3.0, 63.0),
                        (4.0, 75.0),
                    ],
                ),
                s("peer: scp (not installed)", Style::Peer, vec![]),
            ],
            log_y: false,
            x_categories: Some(vec![
                "fixed 4 KiB blocks".into(),
                "content-defined (Rabin)".into(),
                "per line".into(),
                "per field (CSV)".into(),
                "whole file".into(),
            ]),
        }
    }

    /// Plots are checked by eye too (issue 4): with `SIEVE_LAB_PLOT_EXAMPLES=DIR` the tests copy
    /// what they drew into DIR.
    fn keep_for_viewing(stem: &Path) {
        if let Some(dir) = std::env::var_os("SIEVE_LAB_PLOT_EXAMPLES") {
            let dir = PathBuf::from(dir);
            std::fs::create_dir_all(&dir).unwrap();
            for ext in ["png", "svg"] {
                let from = with_ext(stem, ext);
                let to = dir.join(from.file_name().unwrap());
                std::fs::copy(&from, to).unwrap();
            }
        }
    }

    fn check_outputs(stem: &Path, fig: &Figure) {
        let png = std::fs::read(with_ext(stem, "png")).unwrap();
        assert!(png.len() > 10_000, "PNG only {} bytes", png.len());
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        let svg = std::fs::read_to_string(with_ext(stem, "svg")).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..50.min(svg.len())]);
        assert!(svg.len() > 2_000);
        assert!(svg.contains(&fig.x_label), "x label missing from SVG");
        assert!(svg.contains(&fig.y_label), "y label missing from SVG");
        for s in &fig.series {
            // Legend text may be wrapped; every unbreakable piece must be there.
            for (piece, _) in pieces(&s.label) {
                let piece = piece.replace('&', "&amp;");
                assert!(
                    svg.contains(&piece),
                    "legend text {piece:?} missing from SVG"
                );
            }
        }
    }

    #[test]
    fn renders_ours_thesis_peers_with_error_bars_on_categories() {
        let dir = tempfile::tempdir().unwrap();
        let fig = example();
        let stem = dir.path().join("nested").join("F5.3");
        render(&fig, &stem).unwrap();
        check_outputs(&stem, &fig);
        let svg = std::fs::read_to_string(with_ext(&stem, "svg")).unwrap();
        assert!(svg.contains("(Rabin)"), "category label missing");
        keep_for_viewing(&stem);
    }

    #[test]
    fn renders_log_axis_single_points_empty_and_non_finite() {
        let dir = tempfile::tempdir().unwrap();
        let fig = Figure {
            title: "CPU seconds per GB vs P".into(),
            x_label: "P (share of bytes encrypted)".into(),
            y_label: "CPU time (s/GB)".into(),
            series: vec![
                s(
                    "ours",
                    Style::Ours,
                    vec![
                        (0.0, 0.0),
                        (0.1, 0.05),
                        (0.5, 0.4),
                        (0.9, 0.7),
                        (1.0, f64::INFINITY),
                    ],
                ),
                s("thesis", Style::Thesis, vec![(0.5, 30.0)]),
                Series {
                    err: Some(vec![(-1.0, 2.0)]),
                    ..s("iperf3", Style::Peer, vec![(0.5, 1.5)])
                },
                s("empty", Style::Ours, vec![]),
                s(
                    "all NaN",
                    Style::Thesis,
                    vec![(f64::NAN, 1.0), (1.0, f64::NAN)],
                ),
            ],
            log_y: true,
            x_categories: None,
        };
        let stem = dir.path().join("log");
        render(&fig, &stem).unwrap();
        check_outputs(&stem, &fig);
        keep_for_viewing(&stem);

        // Nothing at all to draw, and a single point on a linear axis.
        for (name, series) in [
            ("none", vec![]),
            (
                "single",
                vec![s("one point", Style::Ours, vec![(3.0, 7.0)])],
            ),
            (
                "zero",
                vec![s("zeros", Style::Peer, vec![(0.0, 0.0), (0.0, 0.0)])],
            ),
        ] {
            let fig = Figure {
                title: String::new(),
                x_label: "N (files)".into(),
                y_label: "throughput (MB/s)".into(),
                series,
                log_y: false,
                x_categories: None,
            };
            let stem = dir.path().join(name);
            render(&fig, &stem).unwrap();
            check_outputs(&stem, &fig);
            keep_for_viewing(&stem);
        }
    }

    /// Many categories, many series, long labels and large numbers: still no overlapping text.
    #[test]
    fn renders_crowded_figure() {
        let dir = tempfile::tempdir().unwrap();
        let cats: Vec<String> = [
            "F5.1",
            "F5.2",
            "F5.3-5.4",
            "F5.5-5.6",
            "F5.7",
            "F5.8-5.9",
            "F5.10-5.11",
            "F5.12/T5.2",
            "F5.13",
            "F5.14-5.16",
            "TB.1-3",
            "T5.3/F5.17-5.18",
            "ICPE-F7",
        ]
        .iter()
        .map(|c| c.to_string())
        .collect();
        let series = (0..9)
            .map(|k| {
                let style = [Style::Ours, Style::Thesis, Style::Peer][k % 3];
                let points = (0..cats.len())
                    .map(|i| (i as f64, 1.0e6 * (1.0 + k as f64) * (1.0 + 0.3 * i as f64)))
                    .collect();
                s(
                    &format!("series {k}: a rather long legend label that has to wrap somewhere"),
                    style,
                    points,
                )
            })
            .collect();
        let fig = Figure {
            title: "A very long title that goes on and on to check that it shrinks instead of \
                    running off both edges of the image"
                .into(),
            x_label: "experiment".into(),
            y_label: "bytes encrypted per second (B/s)".into(),
            series,
            log_y: false,
            x_categories: Some(cats),
        };
        let stem = dir.path().join("crowded");
        render(&fig, &stem).unwrap();
        check_outputs(&stem, &fig);
        keep_for_viewing(&stem);
    }

    #[test]
    fn y_axis_includes_zero_and_pads_five_percent() {
        let fig = Figure {
            title: String::new(),
            x_label: String::new(),
            y_label: String::new(),
            series: vec![Series {
                err: Some(vec![(90.0, 110.0), (f64::NAN, 1.0)]),
                ..s("a", Style::Ours, vec![(0.0, 100.0), (1.0, 50.0)])
            }],
            log_y: false,
            x_categories: None,
        };
        let y = y_axis(&fig, 400.0);
        assert_eq!(y.lo, 0.0);
        assert!((y.hi - 115.5).abs() < 1e-9, "{}", y.hi);
        assert_eq!(y.ticks.first(), Some(&0.0));
        let x = x_axis(&fig, 600.0);
        assert!((x.lo + 0.05).abs() < 1e-9 && (x.hi - 1.05).abs() < 1e-9);

        let neg = Figure {
            series: vec![s("b", Style::Ours, vec![(0.0, -10.0), (1.0, 30.0)])],
            ..fig.clone()
        };
        let y = y_axis(&neg, 400.0);
        assert!((y.lo + 12.0).abs() < 1e-9 && (y.hi - 32.0).abs() < 1e-9);
    }

    #[test]
    fn ticks_and_labels() {
        assert_eq!(nice_step(10.0, 5.0), 2.0);
        assert_eq!(nice_step(1.0, 4.0), 0.25);
        let a = linear_axis(0.0, 1.0, 10.0);
        assert_eq!(
            a.ticks.iter().map(|t| a.label(*t)).collect::<Vec<_>>(),
            ["0.0", "0.1", "0.2", "0.3", "0.4", "0.5", "0.6", "0.7", "0.8", "0.9", "1.0"]
        );
        let l = log_axis(0.004, 3000.0);
        assert_eq!(
            l.ticks.iter().map(|t| l.label(*t)).collect::<Vec<_>>(),
            ["0.01", "0.1", "1", "10", "100", "1000"]
        );
        let l = log_axis(15.0, 80.0);
        assert_eq!(
            l.ticks.iter().map(|t| l.label(*t)).collect::<Vec<_>>(),
            ["20", "50"]
        );
        assert_eq!(format_number(2.5e9, 0), "2.5e9");
        assert_eq!(format_number(-0.00001, 1), "-1e-5");
        assert_eq!(format_number(-0.01, 1), "0.0");
    }

    #[test]
    fn names_and_wrapping() {
        assert_eq!(
            with_ext(Path::new("results/F5.1/fig"), "png"),
            PathBuf::from("results/F5.1/fig.png")
        );
        assert_eq!(
            with_ext(Path::new("F5.12"), "svg"),
            PathBuf::from("F5.12.svg")
        );
        let lines = wrap("content-defined chunking (Rabin)", 90, 15.0, false);
        assert!(lines.len() >= 2, "{lines:?}");
        assert_eq!(wrap("F5.10-5.11", 30, 15.0, false), ["F5.10-", "5.11"]);
        assert_eq!(wrap("a -b c/", 1000, 15.0, false), ["a -b c/"]);
        assert_eq!(
            wrap("T5.3/F5.17-5.18", 60, 15.0, false),
            ["T5.3/", "F5.17-", "5.18"]
        );
        assert_eq!(wrap("", 90, 15.0, false), vec![String::new()]);
    }

    /// The hand-read metrics agree with the font plotters renders with: same advances (so
    /// anchoring matches plotters' measuring), and the bearings differ between letters (the
    /// reason for reading them).
    #[test]
    fn glyph_metrics_agree_with_plotters() {
        let Ok(Some(m)) = ensure_font() else {
            eprintln!("no font with readable metrics here; skipped");
            return;
        };
        let text = "P (share of bytes encrypted) 0.123 µs";
        let ours: f64 = text.chars().map(|c| m.h_metrics(c, 30.0).0).sum();
        let theirs = text_size(text, 30.0, true).0 as f64;
        assert!((ours - theirs).abs() <= 3.0, "{ours} vs {theirs}");
        assert!(m.glyph('A').is_some_and(|g| g != 0));
        assert!(m.glyph('µ').is_some_and(|g| g != 0));
        let lsb = |c| m.h_metrics(c, 30.0).1;
        assert!(lsb('b') > lsb('y') + 0.5, "{} {}", lsb('b'), lsb('y'));
    }

    /// Without a font the SVG is still written and the error names the package to install. Runs
    /// the check in a child process because the font registry is per process.
    #[test]
    fn without_font_svg_is_written_and_error_says_what_to_install() {
        if let Some(dir) = std::env::var_os("SIEVE_LAB_PLOT_NO_FONT_CHILD") {
            let stem = PathBuf::from(dir).join("nofont");
            let err = render(&example(), &stem).unwrap_err().to_string();
            assert!(err.contains("apt-get install fonts-dejavu-core"), "{err}");
            assert!(with_ext(&stem, "svg").is_file());
            assert!(!with_ext(&stem, "png").exists());
            let svg = std::fs::read_to_string(with_ext(&stem, "svg")).unwrap();
            assert!(svg.contains("response time (ms)"));
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "plot::tests::without_font_svg_is_written_and_error_says_what_to_install",
                "--nocapture",
            ])
            .env("SIEVE_LAB_PLOT_NO_FONT_CHILD", dir.path())
            .env("SIEVE_LAB_FONT", dir.path().join("missing.ttf"))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(text.contains("1 passed"), "child ran no test: {text}");
        assert!(dir.path().join("nofont.svg").is_file());
    }
}
