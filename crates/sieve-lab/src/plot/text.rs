//! Text in the figures: the font, placing glyphs, measuring and wrapping labels.

use std::path::PathBuf;
use std::sync::OnceLock;

use ab_glyph::{Font, FontRef, ScaleFont};
use anyhow::anyhow;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::look::plotting_failed;

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
pub(super) fn font_path() -> anyhow::Result<PathBuf> {
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

/// Registers the font for "sans-serif" once per process and returns it for glyph placement.
/// plotters' `ab_glyph` text renderer has no built-in font and wants `'static` bytes, so the
/// file is read once and leaked on purpose.
pub(super) fn ensure_font() -> Result<&'static FontRef<'static>, String> {
    static FONT: OnceLock<Result<FontRef<'static>, String>> = OnceLock::new();
    FONT.get_or_init(|| {
        let path = font_path().map_err(|e| e.to_string())?;
        let bytes = std::fs::read(&path).map_err(|e| format!("reading {}: {e}", path.display()))?;
        let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
        let unusable = || format!("{} is not a usable TrueType font", path.display());
        plotters::style::register_font("sans-serif", FontStyle::Normal, bytes)
            .map_err(|_| unusable())?;
        FontRef::try_from_slice(bytes).map_err(|_| unusable())
    })
    .as_ref()
    .map_err(Clone::clone)
}

/// The figures' one typeface at `size` pixels, black.
pub(super) fn font(size: f64) -> TextStyle<'static> {
    TextStyle::from(FontDesc::new(
        FontFamily::SansSerif,
        size,
        FontStyle::Normal,
    ))
    .color(&BLACK)
}

/// (advance width, left side bearing) of `c` in pixels at font size `size`, scaled as plotters'
/// renderer scales the font (`size` is the pixel height of ascent − descent), so that our
/// placement and plotters' measuring agree.
fn h_metrics(font: &FontRef<'static>, c: char, size: f64) -> (f64, f64) {
    let scaled = font.as_scaled(size as f32);
    let id = scaled.glyph_id(c);
    (
        f64::from(scaled.h_advance(id)),
        f64::from(scaled.h_side_bearing(id)),
    )
}

/// How text is put on a backend: whole strings (SVG, or no font), or glyph by glyph at pen +
/// left side bearing (PNG).
///
/// Why glyph by glyph: plotters 0.3.7's `ab_glyph` renderer draws each glyph's bitmap at the pen
/// position but drops the glyph's left side bearing, so letters with a wide bearing sit too far
/// left and text in the PNG looks unevenly spaced ("b ytes encryp ted", seen when looking at the
/// first plots). The SVG is unaffected (the viewer lays its text out) and keeps whole strings.
#[derive(Clone, Copy)]
pub(super) struct Ink {
    pub(super) font: Option<&'static FontRef<'static>>,
    /// Whether plotters can measure text (a font is registered); else sizes are estimated.
    pub(super) measure: bool,
}

impl Ink {
    /// Draws `text` at `at`, anchored by `anchor`; `rotate` turns it to read bottom to top (with
    /// its top towards the left), for the y axis title.
    // One call per piece of text with everything spelled out reads better here than a builder.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn text<DB: DrawingBackend>(
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
        let Some(f) = self.font else {
            return area
                .draw_text(text, &style.pos(anchor), at)
                .map_err(plotting_failed);
        };
        let mut pen = 0.0;
        let glyphs: Vec<(char, f64, f64)> = text
            .chars()
            .map(|c| {
                let (adv, lsb) = h_metrics(f, c, size);
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
                .map_err(plotting_failed)?;
        }
        Ok(())
    }
}

/// Width and height of `text` in pixels at `size`: measured with the registered font when there
/// is one, otherwise estimated (DejaVu Sans averages about 0.55 em per character), which is
/// good enough for layout of an SVG that the viewer renders with its own font anyway.
pub(super) fn text_size(text: &str, size: f64, measure: bool) -> (u32, u32) {
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
pub(super) fn pieces(text: &str) -> Vec<(String, bool)> {
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
pub(super) fn wrap(text: &str, max_w: u32, size: f64, measure: bool) -> Vec<String> {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// ab_glyph's metrics agree with what plotters measures (same advances, so anchoring matches
    /// plotters' measuring), and the bearings differ between letters (the reason for placing
    /// glyphs one by one).
    #[test]
    fn glyph_metrics_agree_with_plotters() {
        let Ok(f) = ensure_font() else {
            eprintln!("no font here; skipped");
            return;
        };
        let text = "P (share of bytes encrypted) 0.123 µs";
        let ours: f64 = text.chars().map(|c| h_metrics(f, c, 30.0).0).sum();
        let theirs = text_size(text, 30.0, true).0 as f64;
        assert!((ours - theirs).abs() <= 3.0, "{ours} vs {theirs}");
        assert_ne!(f.glyph_id('A').0, 0);
        assert_ne!(f.glyph_id('µ').0, 0);
        let lsb = |c| h_metrics(f, c, 30.0).1;
        assert!(lsb('b') > lsb('y') + 0.5, "{} {}", lsb('b'), lsb('y'));
    }
}
