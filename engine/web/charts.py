"""Hand-built SVG charts (no JavaScript): a value over time, one dot per run."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from html import escape

from markupsafe import Markup

from engine.read import views

WIDTH, HEIGHT = 640, 170
LEFT, RIGHT, TOP, BOTTOM = 72, 12, 14, 28  # room for the longest tick label (``1234.5 d``)




def series_svg(points: Sequence[tuple[datetime, float, str]], title: str) -> Markup:
    """An SVG line-and-dots chart of (instant, seconds, label) points; labels become tooltips.

    Every text that reaches the markup is escaped.
    """
    head = (f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
            f'aria-label="{escape(title)}" xmlns="http://www.w3.org/2000/svg">')
    if not points:
        return Markup(head + f'<text x="{WIDTH / 2}" y="{HEIGHT / 2}" text-anchor="middle" class="empty">'
                      f'no runs have started yet</text></svg>')
    times = [p[0].timestamp() for p in points]
    values = [max(0.0, p[1]) for p in points]
    t0, t1 = min(times), max(times)
    top = max(values) or 1.0
    span = (t1 - t0) or 1.0
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(t: float) -> float:
        return LEFT + (plot_w * (t - t0) / span if t1 > t0 else plot_w / 2)

    def y(v: float) -> float:
        return TOP + plot_h - plot_h * v / top

    parts = [head,
             f'<line class="axis" x1="{LEFT}" y1="{TOP + plot_h}" x2="{WIDTH - RIGHT}" y2="{TOP + plot_h}"/>',
             f'<line class="axis" x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{TOP + plot_h}"/>',
             f'<line class="grid" x1="{LEFT}" y1="{y(top / 2):.1f}" x2="{WIDTH - RIGHT}" y2="{y(top / 2):.1f}"/>',
             f'<text class="tick" x="{LEFT - 6}" y="{TOP + 4}" text-anchor="end">{escape(views.human_seconds(top))}</text>',
             f'<text class="tick" x="{LEFT - 6}" y="{y(top / 2) + 4:.1f}" text-anchor="end">'
             f'{escape(views.human_seconds(top / 2))}</text>',
             f'<text class="tick" x="{LEFT - 6}" y="{TOP + plot_h + 4}" text-anchor="end">0</text>',
             f'<text class="tick" x="{LEFT}" y="{HEIGHT - 8}">{escape(points[0][0].strftime("%Y-%m-%d"))}</text>',
             f'<text class="tick" x="{WIDTH - RIGHT}" y="{HEIGHT - 8}" text-anchor="end">'
             f'{escape(points[-1][0].strftime("%Y-%m-%d"))}</text>']
    coords = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in zip(times, values, strict=True))
    parts.append(f'<polyline class="line" points="{coords}"/>')
    for (_, value, label), t, v in zip(points, times, values, strict=True):
        parts.append(f'<circle class="dot" cx="{x(t):.1f}" cy="{y(v):.1f}" r="3">'
                     f'<title>{escape(label)}: {escape(views.human_seconds(value))}</title></circle>')
    parts.append("</svg>")
    return Markup("".join(parts))
