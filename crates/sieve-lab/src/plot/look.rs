//! How series look: colour, marker shape and line pattern by [`Style`].

use anyhow::anyhow;
use plotters::coord::CoordTranslate;
use plotters::element::DashedPathElement;
use plotters::prelude::*;

use super::{Series, Style};

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
pub(super) struct Look {
    style: Style,
    pub(super) color: RGBColor,
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

pub(super) fn looks(series: &[Series]) -> Vec<Look> {
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
    pub(super) fn marker<'a, DB: DrawingBackend + 'a, C: Clone + 'a>(
        &self,
        at: C,
    ) -> DynElement<'a, DB, C> {
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

/// Draws one polyline in the series' pattern: solid (ours) or dotted (peers). The thesis's
/// values get none: its text gives isolated points, and a line between them would invent the
/// curve in between.
pub(super) fn draw_line<DB, CT>(
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
        Style::Thesis => return Ok(()),
        Style::Peer => area.draw(&DashedPathElement::new(pts, 2, 5, style)),
    };
    res.map_err(plotting_failed)
}

/// A plotters error as an anyhow error (plotters' errors are generic over the backend, so only
/// their `Debug` form is common to all).
pub(super) fn plotting_failed<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow!("plotting failed: {e:?}")
}
