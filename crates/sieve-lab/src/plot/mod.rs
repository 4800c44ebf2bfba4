//! Plots for the lab's results: one small API, [`render`], that every experiment calls so all
//! figures look alike.
//!
//! Why a module of its own rather than plotters calls in each experiment: the lab's plots must
//! let a reader tell *our* measurements from the *thesis's* values and from *other tools* at a
//! glance, even printed in grayscale. That is a property of the whole set of figures, so it lives
//! in one place:
//!
//! | [`Style`] | line | marker | palette |
//! | --- | --- | --- | --- |
//! | [`Style::Ours`] | solid | filled circle / square / diamond | blues and purples |
//! | [`Style::Thesis`] | none | hollow circle / square / diamond | reds and oranges |
//! | [`Style::Peer`] | dotted | filled triangles | greens and greys |
//!
//! The thesis's values are drawn as markers only, at the points its text gives: a line between
//! two of them would invent the thesis's curve in between. The i-th series of ours and the i-th
//! of the thesis share a marker shape, so "our AES run" and "the thesis's AES run" pair up
//! visually while fill and colour still tell them apart.
//!
//! Layout is done here rather than by plotters' defaults, for reasons found by looking at the
//! output (plotters draws only the frame, grid, tick marks, lines and markers):
//! - the legend sits in its own column right of the plot, so it never hides data;
//! - categorical x labels (split algorithms, experiment ids) are wrapped, shrunk or staggered
//!   under their tick, so neighbours never overlap;
//! - all text is placed by [`text::Ink`]: in the PNG glyph by glyph, because plotters 0.3.7's
//!   glyph placement drops each glyph's left side bearing; and without plotters' text
//!   measuring, which needs a registered font file, so the SVG can still be written on a
//!   machine without one.

mod axis;
mod draw;
mod look;
mod text;

use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context};
use plotters::prelude::*;

use draw::draw;
use text::{ensure_font, Ink};

/// Width of both the PNG and the SVG, in pixels.
pub(crate) const WIDTH: u32 = 1000;
/// Height of both the PNG and the SVG, in pixels.
pub(crate) const HEIGHT: u32 = 620;

/// How a series is drawn; see the module documentation for the full table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Style {
    /// Our own measurement on this machine: solid line, filled markers, cool palette.
    Ours,
    /// A value taken from the thesis: hollow markers at the thesis's points, no line, warm palette.
    Thesis,
    /// Another tool measured in the same run (socat, scp, iperf3): dotted line, triangles.
    Peer,
}

/// One line of a figure.
#[derive(Debug, Clone)]
pub(crate) struct Series {
    /// Text shown in the legend.
    pub(crate) label: String,
    /// Ours, the thesis's, or a peer's.
    pub(crate) style: Style,
    /// (x, y) in data units. Points with a NaN or infinite coordinate (or y ≤ 0 on a log axis)
    /// are skipped and break the line, so a missing measurement shows as a gap, not as a
    /// straight line that pretends to know the value.
    pub(crate) points: Vec<(f64, f64)>,
    /// Per point, the absolute (low, high) of an interval drawn as an error bar (e.g. the 95 %
    /// interval of the median). Matched to `points` by index.
    pub(crate) err: Option<Vec<(f64, f64)>>,
}

/// A whole figure.
#[derive(Debug, Clone)]
pub(crate) struct Figure {
    /// Drawn centred above the plot.
    pub(crate) title: String,
    /// X axis title, drawn exactly as given: include the unit, e.g. "file size (MB)".
    pub(crate) x_label: String,
    /// Y axis title, drawn exactly as given: include the unit, e.g. "response time (ms)".
    pub(crate) y_label: String,
    /// Every series, in legend order.
    pub(crate) series: Vec<Series>,
    /// Logarithmic y axis (non-positive values are then skipped).
    pub(crate) log_y: bool,
    /// Names for the x positions 0, 1, ..., n−1, for categorical axes (split algorithms, N).
    /// Points then use x = index of their category.
    pub(crate) x_categories: Option<Vec<String>>,
}

/// Draws `fig` into `stem.png` (1000×620) and `stem.svg`, creating the parent folder.
///
/// The PNG needs a TrueType font (see [`text::font_path`]); without one the SVG is still written (it
/// names the font family and lets the viewer pick a face) and the error says how to install one.
pub(crate) fn render(fig: &Figure, stem: &Path) -> anyhow::Result<()> {
    if let Some(parent) = stem.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    let png = with_ext(stem, "png");
    let svg = with_ext(stem, "svg");
    let font = ensure_font();
    let svg_ink = Ink {
        font: None,
        measure: font.is_ok(),
    };
    {
        let root = SVGBackend::new(&svg, (WIDTH, HEIGHT)).into_drawing_area();
        draw(fig, &root, svg_ink).with_context(|| format!("drawing {}", svg.display()))?;
        root.present()
            .map_err(|e| anyhow!("writing {}: {e:?}", svg.display()))?;
    }
    let font =
        font.map_err(|e| anyhow!("wrote {} but not {}: {e}", svg.display(), png.display()))?;
    let png_ink = Ink {
        font: Some(font),
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

#[cfg(test)]
mod tests;
