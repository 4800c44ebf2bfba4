//! Drawing one figure: the layout is computed first ([`Layout`]), then each part is drawn by a
//! function of its own: title, frame and grid, tick labels, axis titles, series, legend.

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::axis::{drawable, err_of, x_axis, y_axis, Axis};
use super::look::{draw_line, looks, plotting_failed, Look};
use super::text::{font, pieces, text_size, wrap, Ink};
use super::Figure;

const TICK_FONT: f64 = 15.0;
const DESC_FONT: f64 = 17.0;
const LEGEND_FONT: f64 = 15.0;
const TITLE_FONT: f64 = 22.0;
const MARGIN: u32 = 12;

const LEGEND_SAMPLE: i32 = 44;
const LEGEND_PAD: i32 = 10;
const LEGEND_LINE_H: i32 = 19;
const LEGEND_ROW_GAP: i32 = 7;
/// Widest legend text before a label wraps: the plot keeps at least two thirds of the width.
const LEGEND_TEXT_MAX: u32 = 230;
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

type Chart<'a, DB> = ChartContext<'a, DB, Cartesian2d<Axis, Axis>>;

/// Draws `fig` on `root`: white background, then every part in turn.
pub(super) fn draw<DB: DrawingBackend>(
    fig: &Figure,
    root: &DrawingArea<DB, Shift>,
    ink: Ink,
) -> anyhow::Result<()> {
    root.fill(&WHITE).map_err(plotting_failed)?;
    let layout = Layout::new(fig, root.dim_in_pixel(), ink.measure);
    draw_title(fig, root, ink, &layout)?;
    let (chart_area, legend_area) = {
        let below_title = root.clone().split_vertically(layout.title_h as u32).1;
        below_title.split_horizontally(layout.chart_w as u32)
    };
    let chart = draw_frame(&chart_area, &layout)?;
    draw_tick_labels(root, ink, &layout, &chart)?;
    draw_axis_titles(fig, root, ink, &layout, &chart)?;
    let looks = looks(&fig.series);
    draw_series(fig, root, ink, &layout, &chart, &looks)?;
    draw_legend(&legend_area, ink, &layout, &looks)
}

/// Categorical x labels: the largest font ≤ [`TICK_FONT`] at which every piece (see [`pieces`])
/// fits its slot, wrapped into lines so neighbours never overlap; if even the smallest font does
/// not fit, every other label drops to a second row, which doubles the room for each.
struct Categories {
    lines: Vec<Vec<String>>,
    font: f64,
    stagger: bool,
    line_h: i32,
    row_h: i32,
}

impl Categories {
    fn new(cats: &[String], slot: u32, measure: bool) -> Categories {
        let fits = |size: f64, room: u32| {
            cats.iter().all(|c| {
                pieces(c)
                    .iter()
                    .all(|(p, _)| text_size(p, size, measure).0 + 6 <= room)
            })
        };
        let mut font = TICK_FONT;
        while font > 10.0 && !fits(font, slot) {
            font -= 1.0;
        }
        let stagger = !fits(font, slot) && cats.len() > 1;
        let room = if stagger { 2 * slot } else { slot };
        let lines: Vec<Vec<String>> = cats
            .iter()
            .map(|c| wrap(c, room.saturating_sub(6), font, measure))
            .collect();
        let line_h = text_size("Ag", font, measure).1 as i32 + 3;
        let row_h = lines.iter().map(Vec::len).max().unwrap_or(1) as i32 * line_h;
        Categories {
            lines,
            font,
            stagger,
            line_h,
            row_h,
        }
    }

    /// Height of all label rows under the axis.
    fn block_h(&self) -> i32 {
        if self.stagger {
            2 * self.row_h + 4
        } else {
            self.row_h
        }
    }
}

/// Where everything goes, computed before anything is drawn.
struct Layout {
    title_h: i32,
    title_size: f64,
    /// The wrapped label lines of each series, in legend order.
    legend_rows: Vec<Vec<String>>,
    legend_w: i32,
    /// Width of the chart area: the whole figure left of the legend.
    chart_w: i32,
    x: Axis,
    y: Axis,
    cats: Option<Categories>,
    /// Room left of the plot for y tick labels and the y axis title.
    y_area: i32,
    /// Room under the plot for x tick labels and the x axis title.
    x_area: i32,
    /// Height of the x tick labels (all rows of them, for categories).
    x_tick_block: i32,
}

impl Layout {
    fn new(fig: &Figure, (w, h): (u32, u32), measure: bool) -> Layout {
        // Title band; a long title shrinks rather than running off the image.
        let title_h = if fig.title.trim().is_empty() { 8 } else { 40 };
        let mut title_size = TITLE_FONT;
        while title_size > 13.0 && text_size(&fig.title, title_size, measure).0 + 20 > w {
            title_size -= 1.0;
        }

        // Legend column: as wide as the longest label needs, up to LEGEND_TEXT_MAX of text.
        let legend_rows: Vec<Vec<String>> = fig
            .series
            .iter()
            .map(|s| wrap(&s.label, LEGEND_TEXT_MAX, LEGEND_FONT, measure))
            .collect();
        let text_w = legend_rows
            .iter()
            .flatten()
            .map(|l| text_size(l, LEGEND_FONT, measure).0)
            .max()
            .unwrap_or(0);
        let legend_w = if legend_rows.is_empty() {
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

        let cats = fig.x_categories.as_ref().map(|c| {
            let slot = (plot_w / (x.hi - x.lo)).max(10.0) as u32;
            Categories::new(c, slot, measure)
        });
        let x_tick_block = cats.as_ref().map_or(tick_h, Categories::block_h);
        let x_area = TICK_GAP + x_tick_block + DESC_GAP + desc_h + 6;
        Layout {
            title_h,
            title_size,
            legend_rows,
            legend_w,
            chart_w,
            x,
            y,
            cats,
            y_area,
            x_area,
            x_tick_block,
        }
    }
}

fn black() -> RGBAColor {
    BLACK.mix(1.0)
}

fn draw_title<DB: DrawingBackend>(
    fig: &Figure,
    root: &DrawingArea<DB, Shift>,
    ink: Ink,
    layout: &Layout,
) -> anyhow::Result<()> {
    if layout.title_h <= 8 {
        return Ok(());
    }
    let w = root.dim_in_pixel().0;
    ink.text(
        root,
        &fig.title,
        layout.title_size,
        black(),
        Pos::new(HPos::Center, VPos::Center),
        false,
        (w as i32 / 2, layout.title_h / 2 + 4),
    )
}

/// The frame, grid and tick marks, drawn by plotters. Tick labels and axis titles are drawn by
/// `ink` instead, so the PNG gets correctly spaced glyphs (plotters' own label text is made
/// transparent, which also keeps empty `<text>` elements out of the SVG).
fn draw_frame<'a, DB: DrawingBackend>(
    area: &'a DrawingArea<DB, Shift>,
    layout: &Layout,
) -> anyhow::Result<Chart<'a, DB>> {
    let mut chart = ChartBuilder::on(area)
        .margin(MARGIN)
        .margin_right(MARGIN as i32 + RIGHT_EXTRA)
        .x_label_area_size(layout.x_area as u32)
        .y_label_area_size(layout.y_area as u32)
        .build_cartesian_2d(layout.x.clone(), layout.y.clone())
        .map_err(plotting_failed)?;
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
        .map_err(plotting_failed)?;
    Ok(chart)
}

/// Pixel edges of the plot: (left, right, top, bottom).
fn plot_edges<DB: DrawingBackend>(layout: &Layout, chart: &Chart<'_, DB>) -> (i32, i32, i32, i32) {
    let (x, y) = (&layout.x, &layout.y);
    let (left, bottom) = chart.backend_coord(&(x.lo, y.lo));
    let (right, top) = chart.backend_coord(&(x.hi, y.hi));
    (left, right, top, bottom)
}

fn draw_tick_labels<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    ink: Ink,
    layout: &Layout,
    chart: &Chart<'_, DB>,
) -> anyhow::Result<()> {
    let (x, y) = (&layout.x, &layout.y);
    let (left, _, _, bottom) = plot_edges(layout, chart);
    if let Some(cats) = &layout.cats {
        for (i, lines) in cats.lines.iter().enumerate() {
            let (px, _) = chart.backend_coord(&(i as f64, y.lo));
            let row = if cats.stagger && i % 2 == 1 {
                cats.row_h + 4
            } else {
                0
            };
            for (k, line) in lines.iter().enumerate() {
                ink.text(
                    root,
                    line,
                    cats.font,
                    black(),
                    Pos::new(HPos::Center, VPos::Top),
                    false,
                    (px, bottom + TICK_GAP + row + k as i32 * cats.line_h),
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
                black(),
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
            black(),
            Pos::new(HPos::Right, VPos::Center),
            false,
            (left - TICK_GAP, py),
        )?;
    }
    Ok(())
}

/// Axis titles, exactly as given.
fn draw_axis_titles<DB: DrawingBackend>(
    fig: &Figure,
    root: &DrawingArea<DB, Shift>,
    ink: Ink,
    layout: &Layout,
    chart: &Chart<'_, DB>,
) -> anyhow::Result<()> {
    let (left, right, top, bottom) = plot_edges(layout, chart);
    ink.text(
        root,
        &fig.x_label,
        DESC_FONT,
        black(),
        Pos::new(HPos::Center, VPos::Top),
        false,
        (
            (left + right) / 2,
            bottom + TICK_GAP + layout.x_tick_block + DESC_GAP,
        ),
    )?;
    ink.text(
        root,
        &fig.y_label,
        DESC_FONT,
        black(),
        Pos::new(HPos::Center, VPos::Top),
        true,
        (left - layout.y_area + Y_DESC_INSET, (top + bottom) / 2),
    )
}

/// Every series: error bars first, then lines, then markers on top; "no data" when nothing at
/// all can be drawn.
fn draw_series<DB: DrawingBackend>(
    fig: &Figure,
    root: &DrawingArea<DB, Shift>,
    ink: Ink,
    layout: &Layout,
    chart: &Chart<'_, DB>,
    looks: &[Look],
) -> anyhow::Result<()> {
    let plot = chart.plotting_area();
    let visible: Vec<bool> = fig
        .series
        .iter()
        .map(|s| s.points.iter().any(|&(x, y)| drawable(x, y, fig.log_y)))
        .collect();
    let n_visible = visible.iter().filter(|v| **v).count();
    // On a categorical axis several series share each x; a small horizontal dodge keeps their
    // error bars and markers from sitting on top of each other.
    let dodge_step = if layout.cats.is_some() && n_visible > 1 {
        (0.36 / (n_visible - 1) as f64).min(0.1)
    } else {
        0.0
    };
    let shown = fig
        .series
        .iter()
        .zip(looks)
        .zip(&visible)
        .filter(|(_, v)| **v);
    for (visible_index, ((s, look), _)) in shown.enumerate() {
        let dx = dodge_step * (visible_index as f64 - (n_visible - 1) as f64 / 2.0);
        for (i, &(px, py)) in s.points.iter().enumerate() {
            if let (true, Some((l, h))) = (drawable(px, py, fig.log_y), err_of(s, i)) {
                let l = if fig.log_y && l <= 0.0 {
                    layout.y.lo
                } else {
                    l
                };
                plot.draw(&ErrorBar::new_vertical(
                    px + dx,
                    l,
                    py,
                    h,
                    look.color.stroke_width(2),
                    10,
                ))
                .map_err(plotting_failed)?;
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
                plot.draw(&look.marker((px + dx, py)))
                    .map_err(plotting_failed)?;
            }
        }
    }
    if n_visible == 0 {
        let (left, right, top, bottom) = plot_edges(layout, chart);
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
    Ok(())
}

/// Legend box, top-aligned with the plot, listing every series (also empty ones, so a missing
/// peer is visibly missing rather than silently absent).
fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    ink: Ink,
    layout: &Layout,
    looks: &[Look],
) -> anyhow::Result<()> {
    let rows = &layout.legend_rows;
    if rows.is_empty() {
        return Ok(());
    }
    let top = MARGIN as i32;
    let height: i32 = rows
        .iter()
        .map(|r| r.len() as i32 * LEGEND_LINE_H + LEGEND_ROW_GAP)
        .sum::<i32>()
        + 2 * LEGEND_PAD
        - LEGEND_ROW_GAP;
    let (x0, x1) = (0, layout.legend_w - 14);
    let corners = [(x0, top), (x1, top + height)];
    area.draw(&Rectangle::new(corners, WHITE.filled()))
        .map_err(plotting_failed)?;
    area.draw(&Rectangle::new(corners, BLACK.mix(0.45).stroke_width(1)))
        .map_err(plotting_failed)?;
    let mut cy = top + LEGEND_PAD;
    for (lines, look) in rows.iter().zip(looks) {
        let mid = cy + LEGEND_LINE_H / 2;
        let (sx0, sx1) = (x0 + LEGEND_PAD, x0 + LEGEND_PAD + LEGEND_SAMPLE);
        draw_line(area, look, vec![(sx0, mid), (sx1, mid)])?;
        area.draw(&look.marker(((sx0 + sx1) / 2, mid)))
            .map_err(plotting_failed)?;
        for (k, line) in lines.iter().enumerate() {
            ink.text(
                area,
                line,
                LEGEND_FONT,
                black(),
                Pos::new(HPos::Left, VPos::Center),
                false,
                (sx1 + LEGEND_PAD, mid + k as i32 * LEGEND_LINE_H),
            )?;
        }
        cy += lines.len() as i32 * LEGEND_LINE_H + LEGEND_ROW_GAP;
    }
    Ok(())
}
