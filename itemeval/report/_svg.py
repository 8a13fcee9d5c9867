"""The report's plots, drawn as standalone inline SVG (no plotting library, nothing fetched).

Four kinds, each a pure function from numbers to SVG markup: an interval chart (estimates with
confidence whiskers), a heatmap, a labelled scatter plot and a stacked histogram. This module
lays a plot out (where each text, line, rectangle and circle goes, its numbers formatted);
`templates/plot.svg` draws the shapes, escaping text. Sizes are in CSS pixels and the SVG scales
down with its container.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from markupsafe import Markup

from itemeval.report._templates import render

PALETTE = (
    "#4e79a7",
    "#f28e2b",
    "#e15759",
    "#76b7b2",
    "#59a14f",
    "#edc948",
    "#b07aa1",
    "#ff9da7",
    "#9c755f",
    "#bab0ac",
)
FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, sans-serif"
INK = "#1f2937"
MUTED = "#6b7280"
GRID = "#e5e7eb"


def color(index: int) -> str:
    return PALETTE[index % len(PALETTE)]


def text_width(text: str, size: float = 12) -> float:
    """A width estimate for proportional sans-serif text (about 0.58 em a character)."""
    return len(text) * size * 0.58


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values covering [low, high] (steps of 1, 2, 2.5 or 5 times a power of 10)."""
    if not (math.isfinite(low) and math.isfinite(high)) or high <= low:
        return [low]
    raw = (high - low) / max(1, count)
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    value = math.floor(low / step) * step
    ticks = [round(value, 12)]
    while value < high - step * 1e-9:  # the last tick covers `high`
        value += step
        ticks.append(round(value, 12))
    return ticks


# -- shapes: what `templates/plot.svg` draws, numbers formatted as they are written ----------


@dataclass(frozen=True)
class Text:
    kind: ClassVar[str] = "text"
    x: str
    y: str
    text: str
    size: str
    anchor: str
    fill: str
    weight: str
    baseline: str


@dataclass(frozen=True)
class VerticalText:  # an axis's name up the left side
    kind: ClassVar[str] = "vertical"
    x: str
    y: str
    text: str
    size: str
    fill: str


@dataclass(frozen=True)
class Line:
    kind: ClassVar[str] = "line"
    x1: str
    y1: str
    x2: str
    y2: str
    stroke: str
    width: str


@dataclass(frozen=True)
class Rect:
    kind: ClassVar[str] = "rect"
    x: str
    y: str
    width: str
    height: str
    fill: str
    opacity: str | None = None
    rx: str | None = None


@dataclass(frozen=True)
class Circle:
    kind: ClassVar[str] = "circle"
    cx: str
    cy: str
    r: str
    fill: str
    opacity: str | None = None  # with a stroke: a scatter plot's point
    stroke: str | None = None
    stroke_width: str | None = None


Shape = Text | VerticalText | Line | Rect | Circle


def _svg(width: float, height: float, title: str, body: list[Shape]) -> Markup:
    w, h = round(width), round(height)
    return render("plot.svg", width=w, height=h, font=FONT, title=title, shapes=body)


def _text(
    x: float,
    y: float,
    text: str,
    *,
    size: float = 12,
    anchor: str = "start",
    fill: str = INK,
    weight: str = "normal",
    baseline: str = "middle",
) -> Text:
    return Text(f"{x:.1f}", f"{y:.1f}", text, f"{size}", anchor, fill, weight, baseline)


def _line(x1: float, y1: float, x2: float, y2: float, stroke: str, width: float = 1) -> Line:
    return Line(f"{x1:.1f}", f"{y1:.1f}", f"{x2:.1f}", f"{y2:.1f}", stroke, f"{width}")


def _fmt(value: float) -> str:
    return f"{value:g}" if abs(value) >= 0.01 or value == 0 else f"{value:.2g}"


@dataclass(frozen=True)
class IntervalRow:
    label: str
    value: float
    low: float
    high: float
    group: int = 0  # colour index


def interval_chart(
    rows: Sequence[IntervalRow],
    *,
    title: str,
    axis_label: str,
    domain: tuple[float, float] = (0.0, 1.0),
    width: float = 900,
) -> Markup:
    """Horizontal bars with a dot at each estimate and whiskers over its interval."""
    top, row_h, right = _ROWS_TOP, 26, _ROWS_RIGHT
    label_w, plot_w, height, x = _row_layout(rows, row_h, width, domain)
    lo, hi = domain
    body: list[Shape] = [_text(label_w, 18, title, size=14, weight="600")]
    plot_bottom = top + row_h * len(rows)
    body += _value_axis(x, nice_ticks(lo, hi, 5), label_w, plot_w, plot_bottom, axis_label)
    for i, row in enumerate(rows):
        cy = top + row_h * i + row_h / 2
        fill = color(row.group)
        body.append(_text(label_w - 10, cy, row.label, anchor="end"))
        if not math.isfinite(row.value):
            body.append(_text(x(lo) + 4, cy, "n/a", size=11, fill=MUTED))
            continue
        width = max(0.0, x(row.value) - x(lo))
        body.append(Rect(f"{x(lo):.1f}", f"{cy - 8:.1f}", f"{width:.1f}", "16", fill, "0.22", "2"))
        body += _whisker(x, cy, row, fill)
        body.append(_text(x(hi) + 8, cy, f"{row.value:.3f}", size=11, fill=MUTED))
    return _svg(label_w + plot_w + right, height, title, body)


_ROWS_TOP, _ROWS_BOTTOM, _ROWS_RIGHT = 40, 44, 70


def _row_layout(
    rows: Sequence[IntervalRow], row_h: int, width: float, domain: tuple[float, float]
) -> tuple[float, float, float, Callable[[float], float]]:
    """A chart of labelled rows over one value axis: the label column's width, the plot's
    width, the chart's height and where a value stands (clamped to `domain`)."""
    label_w = max([text_width(r.label) for r in rows] + [60]) + 16
    plot_w = max(200.0, width - label_w - _ROWS_RIGHT)
    height = _ROWS_TOP + row_h * max(1, len(rows)) + _ROWS_BOTTOM
    lo, hi = domain
    span = (hi - lo) or 1.0

    def x(v: float) -> float:
        return label_w + (min(max(v, lo), hi) - lo) / span * plot_w

    return label_w, plot_w, height, x


def _value_axis(
    x: Callable[[float], float],
    ticks: Sequence[float],
    label_w: float,
    plot_w: float,
    plot_bottom: float,
    axis_label: str,
) -> list[Shape]:
    """Grid lines and labels at `ticks`, and the axis's name under them."""
    out: list[Shape] = []
    for tick in ticks:
        out.append(_line(x(tick), _ROWS_TOP - 6, x(tick), plot_bottom, GRID))
        out.append(
            _text(x(tick), plot_bottom + 14, _fmt(tick), size=11, anchor="middle", fill=MUTED)
        )
    out.append(
        _text(
            label_w + plot_w / 2, plot_bottom + 34, axis_label, size=12, anchor="middle", fill=MUTED
        )
    )
    return out


def _whisker(x: Callable[[float], float], cy: float, row: IntervalRow, fill: str) -> list[Shape]:
    """A row's interval as a whisker with end caps and a dot at its estimate."""
    out: list[Shape] = [_line(x(row.low), cy, x(row.high), cy, fill, 2)]
    for end in (row.low, row.high):
        out.append(_line(x(end), cy - 5, x(end), cy + 5, fill, 2))
    out.append(Circle(f"{x(row.value):.1f}", f"{cy:.1f}", "4.5", fill))
    return out


def heatmap(
    rows: Sequence[str],
    columns: Sequence[str],
    values: dict[tuple[str, str], float],
    *,
    title: str,
    domain: tuple[float, float] = (0.0, 1.0),
    digits: int = 3,
) -> Markup:
    """A grid of cells coloured by value (light to dark blue over `domain`), values printed."""
    label_w = max([text_width(r, 13.5) for r in rows] + [40]) + 22
    cell_w = max(90.0, max([text_width(c, 12) for c in columns] + [0]) + 20)
    cell_h, top = 36, 58
    width = label_w + cell_w * len(columns) + 20
    height = top + cell_h * len(rows) + 16
    lo, hi = domain
    body: list[Shape] = [_text(12, 18, title, size=14, weight="600")]
    for j, column in enumerate(columns):
        body.append(
            _text(label_w + cell_w * (j + 0.5), top - 12, column, anchor="middle", weight="600")
        )
    for i, row in enumerate(rows):
        y = top + cell_h * i
        body.append(_text(label_w - 10, y + cell_h / 2, row, anchor="end", weight="600"))
        for j, column in enumerate(columns):
            x = label_w + cell_w * j
            value = values.get((row, column))
            if value is None or not math.isfinite(value):
                fill, label, ink = "#f3f4f6", "n/a", MUTED
            else:
                t = 0.0 if hi == lo else min(1.0, max(0.0, (value - lo) / (hi - lo)))
                fill = _blue(t)
                label, ink = f"{value:.{digits}f}", ("#ffffff" if t > 0.55 else INK)
            body.append(
                Rect(
                    f"{x + 1:.1f}",
                    f"{y + 1:.1f}",
                    f"{cell_w - 2:.1f}",
                    f"{cell_h - 2}",
                    fill,
                    rx="3",
                )
            )
            body.append(_text(x + cell_w / 2, y + cell_h / 2, label, anchor="middle", fill=ink))
    return _svg(width, height, title, body)


def _blue(t: float) -> str:
    """A sequential blue scale: t = 0 very light, t = 1 dark."""
    start, end = (239, 246, 255), (30, 64, 175)
    r, g, b = (round(s + (e - s) * t) for s, e in zip(start, end, strict=True))
    return f"#{r:02x}{g:02x}{b:02x}"


@dataclass(frozen=True)
class Point:
    label: str
    x: float
    y: float
    group: int = 0


def scatter(
    points: Sequence[Point],
    *,
    title: str,
    x_label: str,
    y_label: str,
    legend: Sequence[str] = (),
    width: float = 760,
    height: float = 420,
    y_domain: tuple[float, float] | None = (0.0, 1.0),
) -> Markup:
    """Labelled points on linear axes (x from 0), one colour per group, with a legend."""
    left, right, top, bottom = 64, 170 if legend else 30, 40, 52
    plot_w, plot_h = width - left - right, height - top - bottom
    xs = [p.x for p in points if math.isfinite(p.x)] or [0.0, 1.0]
    ys = [p.y for p in points if math.isfinite(p.y)] or [0.0, 1.0]
    x_ticks = nice_ticks(0.0, max(xs) * 1.12 or 1.0, 5)
    y_lo, y_hi = y_domain or (min(ys), max(ys))
    y_ticks = nice_ticks(y_lo, y_hi, 5)
    x_hi, y_lo, y_hi = x_ticks[-1] or 1.0, y_ticks[0], y_ticks[-1]

    def px(v: float) -> float:
        return left + v / x_hi * plot_w

    def py(v: float) -> float:
        return top + plot_h - (v - y_lo) / ((y_hi - y_lo) or 1.0) * plot_h

    body: list[Shape] = [_text(left, 18, title, size=14, weight="600")]
    for tick in x_ticks:
        body.append(_line(px(tick), top, px(tick), top + plot_h, GRID))
        body.append(
            _text(px(tick), top + plot_h + 14, _fmt(tick), size=11, anchor="middle", fill=MUTED)
        )
    for tick in y_ticks:
        body.append(_line(left, py(tick), left + plot_w, py(tick), GRID))
        body.append(_text(left - 8, py(tick), _fmt(tick), size=11, anchor="end", fill=MUTED))
    body.append(_text(left + plot_w / 2, height - 12, x_label, anchor="middle", fill=MUTED))
    body.append(VerticalText("16", f"{top + plot_h / 2:.1f}", y_label, "12", MUTED))
    placed: list[tuple[float, float, float, float]] = []
    shown = [p for p in points if math.isfinite(p.x) and math.isfinite(p.y)]
    for p in shown:
        body.append(
            Circle(
                f"{px(p.x):.1f}", f"{py(p.y):.1f}", "6", color(p.group), "0.85", "#ffffff", "1.5"
            )
        )
    bounds = (left, top, left + plot_w, top + plot_h)
    dots = [(px(p.x), py(p.y)) for p in shown]
    for p in sorted(shown, key=lambda p: (p.x, -p.y)):
        x, y, anchor = _place_label(px(p.x), py(p.y), p.label, placed, dots, bounds)
        body.append(_text(x, y, p.label, size=10.5, anchor=anchor, fill=INK))
    for i, name in enumerate(legend):
        y = top + 8 + i * 20
        x = left + plot_w + 24
        body.append(Circle(f"{x:.1f}", f"{y:.1f}", "5", color(i)))
        body.append(_text(x + 12, y, name, size=12))
    return _svg(width, height, title, body)


def _place_label(
    x: float,
    y: float,
    label: str,
    placed: list[tuple[float, float, float, float]],
    dots: list[tuple[float, float]],
    bounds: tuple[float, float, float, float],
) -> tuple[float, float, str]:
    """A spot next to a point for its label that overlaps no earlier label and no other point
    and stays inside the plot, trying right/left and up/down at growing distances (falls back to
    up-right)."""
    w, h = text_width(label, 10.5), 13.0
    for distance in (9, 16, 24, 32):
        for dx, dy, anchor in (
            (distance, -distance, "start"),
            (distance, distance, "start"),
            (-distance, -distance, "end"),
            (-distance, distance, "end"),
        ):
            lx = x + dx if anchor == "start" else x + dx - w
            box = (lx, y + dy - h / 2, lx + w, y + dy + h / 2)
            inside = (
                box[0] >= bounds[0] - 4
                and box[2] <= bounds[2] + 4
                and box[1] >= bounds[1] - 12
                and box[3] <= bounds[3]
            )
            clear = all(_disjoint(box, other) for other in placed) and not any(
                box[0] - 6 <= dx_ <= box[2] + 6 and box[1] - 6 <= dy_ <= box[3] + 6
                for dx_, dy_ in dots
            )
            if inside and clear:
                placed.append(box)
                return x + dx, y + dy, anchor
    placed.append((x + 9, y - 15, x + 9 + w, y - 3))
    return x + 9, y - 9, "start"


def _disjoint(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    return a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1]


def histogram(
    series: Mapping[str, Sequence[float] | np.ndarray],
    *,
    title: str,
    x_label: str,
    bins: int = 10,
    domain: tuple[float, float] = (0.0, 1.0),
    width: float = 760,
    height: float = 340,
) -> Markup:
    """Counts of values per bin over `domain`, stacked by series (one colour each)."""
    left, right, top, bottom = 56, 170, 40, 52
    plot_w, plot_h = width - left - right, height - top - bottom
    lo, hi = domain
    edges = [lo + (hi - lo) * i / bins for i in range(bins + 1)]
    counts: list[list[int]] = []
    for values in series.values():
        array = np.asarray(values, dtype=np.float64)
        array = array[np.isfinite(array)]
        index = np.clip(((array - lo) / (hi - lo) * bins).astype(np.int64), 0, bins - 1)
        counts.append(np.bincount(index, minlength=bins).tolist())
    totals = [sum(c[i] for c in counts) for i in range(bins)]
    y_ticks = nice_ticks(0, max([*totals, 1]), 4)
    y_hi = y_ticks[-1] or 1
    bar_w = plot_w / bins

    def py(v: float) -> float:
        return top + plot_h - v / y_hi * plot_h

    body: list[Shape] = [_text(left, 18, title, size=14, weight="600")]
    for tick in y_ticks:
        body.append(_line(left, py(tick), left + plot_w, py(tick), GRID))
        body.append(_text(left - 8, py(tick), _fmt(tick), size=11, anchor="end", fill=MUTED))
    for i in range(bins):
        base = 0
        for s, row in enumerate(counts):
            if row[i]:
                y_top = py(base + row[i])
                bar_x, bar_h = left + i * bar_w + 2, py(base) - y_top
                bar = (f"{bar_x:.1f}", f"{y_top:.1f}", f"{bar_w - 4:.1f}", f"{bar_h:.1f}")
                body.append(Rect(*bar, color(s)))
                base += row[i]
    for i, edge in enumerate(edges):
        if i % max(1, bins // 5) == 0:
            body.append(
                _text(
                    left + i * bar_w,
                    top + plot_h + 14,
                    _fmt(edge),
                    size=11,
                    anchor="middle",
                    fill=MUTED,
                )
            )
    body.append(_line(left, top + plot_h, left + plot_w, top + plot_h, MUTED))
    body.append(_text(left + plot_w / 2, height - 12, x_label, anchor="middle", fill=MUTED))
    for s, name in enumerate(series):
        y = top + 8 + s * 20
        x = left + plot_w + 24
        body.append(Rect(f"{x - 5:.1f}", f"{y - 5:.1f}", "10", "10", color(s)))
        body.append(_text(x + 12, y, name, size=12))
    return _svg(width, height, title, body)


def difference_chart(
    rows: Sequence[IntervalRow],
    *,
    title: str,
    axis_label: str,
    domain: tuple[float, float],
    width: float = 900,
) -> Markup:
    """Differences as dots with interval whiskers around a zero line (no bars): a whisker that
    crosses zero is a difference the data cannot tell from none."""
    top, row_h, right = _ROWS_TOP, 24, _ROWS_RIGHT
    label_w, plot_w, height, x = _row_layout(rows, row_h, width, domain)
    lo, hi = domain
    body: list[Shape] = [_text(12, 18, title, size=14, weight="600")]
    plot_bottom = top + row_h * len(rows)
    ticks = [t for t in nice_ticks(lo, hi, 6) if lo - 1e-12 <= t <= hi + 1e-12]
    axis = _value_axis(x, ticks, label_w, plot_w, plot_bottom, axis_label)
    # the zero line stands over the grid, before the axis's name
    body += [*axis[:-1], _line(x(0.0), top - 6, x(0.0), plot_bottom, INK, 1.5), axis[-1]]
    for i, row in enumerate(rows):
        cy = top + row_h * i + row_h / 2
        fill = color(row.group)
        body.append(_text(label_w - 10, cy, row.label, anchor="end"))
        body += _whisker(x, cy, row, fill)
        body.append(_text(x(hi) + 8, cy, f"{row.value:+.3f}", size=11, fill=MUTED))
    return _svg(label_w + plot_w + right, height, title, body)
