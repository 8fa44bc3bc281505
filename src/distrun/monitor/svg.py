"""Small inline-SVG charts for the HTML report: no scripts, no network."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf")
W, H, LEFT, RIGHT, TOP, BOTTOM = 760, 260, 64, 130, 28, 40

Series = Mapping[str, Sequence[tuple[float, float]]]


def _ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    if hi <= lo:
        return [lo]
    step = (hi - lo) / (n - 1)
    return [lo + i * step for i in range(n)]


def _bounds(series: Series) -> tuple[float, float, float, float]:
    xs = [x for pts in series.values() for x, _ in pts]
    ys = [y for pts in series.values() for _, y in pts]
    if not xs:
        return 0.0, 1.0, 0.0, 1.0
    y_lo, y_hi = min(0.0, *ys), max(ys)
    return min(xs), max(xs) if max(xs) > min(xs) else min(xs) + 1, y_lo, (
        y_hi if y_hi > y_lo else y_lo + 1)


def line_chart(title: str, series: Series, x_label: str, y_label: str, chart_id: str) -> str:
    x0, x1, y0, y1 = _bounds(series)
    pw, ph = W - LEFT - RIGHT, H - TOP - BOTTOM

    def px(x: float) -> float:
        return LEFT + (x - x0) / (x1 - x0) * pw

    def py(y: float) -> float:
        return TOP + ph - (y - y0) / (y1 - y0) * ph

    out = [f'<svg id="{chart_id}" class="chart" xmlns="http://www.w3.org/2000/svg" '
           f'width="{W}" height="{H}" viewBox="0 0 {W} {H}" role="img">',
           f'<title>{escape(title)}</title>',
           f'<text x="{LEFT}" y="16" font-weight="bold">{escape(title)}</text>',
           f'<rect x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}" fill="none" stroke="#999"/>']
    for t in _ticks(y0, y1):
        out.append(f'<line x1="{LEFT}" x2="{LEFT + pw}" y1="{py(t):.1f}" y2="{py(t):.1f}" '
                   f'stroke="#eee"/><text x="{LEFT - 6}" y="{py(t) + 4:.1f}" '
                   f'text-anchor="end" font-size="11">{t:.3g}</text>')
    for t in _ticks(x0, x1):
        out.append(f'<text x="{px(t):.1f}" y="{TOP + ph + 16}" text-anchor="middle" '
                   f'font-size="11">{t:.3g}</text>')
    out.append(f'<text x="{LEFT + pw / 2}" y="{H - 6}" text-anchor="middle" '
               f'font-size="12">{escape(x_label)}</text>')
    out.append(f'<text x="14" y="{TOP + ph / 2}" font-size="12" text-anchor="middle" '
               f'transform="rotate(-90 14 {TOP + ph / 2})">{escape(y_label)}</text>')
    for i, (name, pts) in enumerate(series.items()):
        color = PALETTE[i % len(PALETTE)]
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pts)
        if len(pts) > 1:
            out.append(f'<polyline class="series" fill="none" stroke="{color}" '
                       f'stroke-width="1.6" points="{path}"><title>{escape(name)}</title>'
                       '</polyline>')
        else:
            out += [f'<circle class="series" cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" '
                    f'fill="{color}"/>' for x, y in pts]
        ly = TOP + 14 * (i + 1)
        out.append(f'<rect x="{W - RIGHT + 10}" y="{ly - 9}" width="10" height="10" '
                   f'fill="{color}"/><text x="{W - RIGHT + 24}" y="{ly}" font-size="11">'
                   f'{escape(name)}</text>')
    if not series:
        out.append(f'<text x="{LEFT + pw / 2}" y="{TOP + ph / 2}" text-anchor="middle" '
                   'fill="#888">no data recorded</text>')
    out.append("</svg>")
    return "\n".join(out)


def timeline(title: str, events: Sequence[tuple[float, str, str]], x_max: float,
             chart_id: str) -> str:
    """Events as marks on a time axis: (seconds, label, css colour)."""
    pw = W - LEFT - RIGHT
    rows = max(1, min(len(events), 12))
    height = TOP + 18 * rows + BOTTOM
    span = x_max if x_max > 0 else 1.0
    out = [f'<svg id="{chart_id}" class="chart" xmlns="http://www.w3.org/2000/svg" '
           f'width="{W}" height="{height}" viewBox="0 0 {W} {height}" role="img">',
           f'<title>{escape(title)}</title>',
           f'<text x="{LEFT}" y="16" font-weight="bold">{escape(title)}</text>',
           f'<line x1="{LEFT}" x2="{LEFT + pw}" y1="{height - BOTTOM}" y2="{height - BOTTOM}" '
           'stroke="#999"/>']
    for t in _ticks(0, span):
        x = LEFT + t / span * pw
        out.append(f'<text x="{x:.1f}" y="{height - BOTTOM + 16}" text-anchor="middle" '
                   f'font-size="11">{t:.0f} s</text>')
    for i, (t, label, color) in enumerate(events):
        x = LEFT + min(max(t, 0), span) / span * pw
        y = TOP + 18 * (i % rows) + 10
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{y:.1f}" y2="{height - BOTTOM}" '
                   f'stroke="{color}" stroke-dasharray="2,2"/><circle class="event" '
                   f'cx="{x:.1f}" cy="{y:.1f}" r="4" fill="{color}"/><text x="{x + 7:.1f}" '
                   f'y="{y + 4:.1f}" font-size="11">{escape(label)}</text>')
    out.append("</svg>")
    return "\n".join(out)
