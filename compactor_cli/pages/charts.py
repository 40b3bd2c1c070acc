"""The dataset page's charts, drawn by pygal as inline SVG: nothing is fetched (pygal's
tooltip script is left out, so the page works offline and from file://), the numbers are
printed on the bars, and a chart's size does not grow with the number of conversations."""

from __future__ import annotations

from typing import Any

from .digest import FRACTION_BINS

_COLOURS = ("#3b6ea5", "#d9822b", "#5a9e4b", "#b8474a", "#7d5ba6", "#8c6d46", "#c774b1", "#7f7f7f")


def _style() -> Any:
    from pygal.style import Style

    return Style(background="white", plot_background="white", foreground="#333", foreground_strong="#111",
                 foreground_subtle="#ddd", colors=_COLOURS, font_family="system-ui, sans-serif",
                 label_font_size=12, major_label_font_size=12, value_font_size=11, title_font_size=15,
                 legend_font_size=12)


def _config(**extra: Any) -> dict[str, Any]:
    config: dict[str, Any] = dict(style=_style(), js=[], disable_xml_declaration=True, width=760, height=340,
                                  explicit_size=False, show_legend=False, print_values=False, margin=16)
    config.update(extra)
    return config


def _render(chart: Any, chart_id: str) -> str:
    chart.uuid = chart_id  # a fixed id: the same page for the same report
    svg: str = chart.render(is_unicode=True)
    return svg


def _count_ticks(top: int) -> list[int]:
    """Whole-number ticks from 0 to at least ``top`` (counts of conversations have no fractions)."""
    step = 1
    while top / step > 8:
        step *= 5 if str(step)[0] == "2" else 2
    return list(range(0, top + step, step))


def fraction_histogram(bins: list[int]) -> str:
    """How many conversations reclaimed how much of their length, in 5% bins."""
    import pygal

    width = 100 // FRACTION_BINS
    chart: Any = pygal.Bar(**_config(title="Conversations by reclaimed fraction", x_title="reclaimed",
                                y_title="conversations", print_values=True, print_zeroes=False,
                                x_label_rotation=0, show_minor_x_labels=False, y_labels=_count_ticks(max(bins))))
    chart.x_labels = [f"{i * width}%" for i in range(FRACTION_BINS)]
    chart.x_labels_major = [f"{i * width}%" for i in range(0, FRACTION_BINS, 2)]
    chart.add("conversations", bins)
    return _render(chart, "fraction")


def status_bars(statuses: dict[str, int]) -> str:
    """Conversations per status."""
    import pygal

    rows = sorted(statuses.items(), key=lambda kv: (kv[1], kv[0]))  # pygal draws the first row at the bottom
    chart: Any = pygal.HorizontalBar(**_config(title="Conversations by status", print_values=True,
                                          height=max(180, 80 + 36 * len(statuses)),
                                          y_labels=_count_ticks(max(statuses.values()))))
    chart.x_labels = [status.lower().replace("_", " ") for status, _ in rows]
    chart.add("conversations", [{"value": n, "color": _colour(status)} for status, n in rows])
    return _render(chart, "statuses")


def _colour(status: str) -> str:
    from .digest import FAILED_STATUSES

    return "#b8474a" if status in FAILED_STATUSES else ("#7f7f7f" if status in _UNCHANGED else "#3b6ea5")


#: Statuses of conversations written as they were read.
_UNCHANGED = frozenset({"NOTHING_TO_CONDENSE", "UNDER_THRESHOLD", "NOTHING_TO_RESTORE", "VALID"})


def before_after(points: list[tuple[int, int, str]], unit: str, shown: int, total: int) -> str:
    """Each sampled conversation's size before (x) against after (y); the diagonal is "unchanged"."""
    import pygal

    title = f"{unit.capitalize()} before and after, per conversation"
    if shown < total:
        title += f" ({shown:,} of {total:,} drawn)"
    chart: Any = pygal.XY(**_config(title=title, x_title=f"{unit} before", y_title=f"{unit} after",
                               stroke=False, dots_size=3.5, show_legend=True, legend_at_bottom=True))
    top = max([max(b, a) for b, a, _ in points] or [1])
    chart.add("unchanged (after = before)", [(0, 0), (top, top)], stroke=True, show_dots=False)
    by_status: dict[str, list[tuple[int, int]]] = {}
    for before, after, status in points:
        by_status.setdefault(status, []).append((before, after))
    for status, values in sorted(by_status.items()):
        chart.add(status.lower().replace("_", " "), values)
    return _render(chart, "sizes")


def largest_bars(largest: list[dict[str, Any]], unit: str) -> str:
    """The largest conversations, before and after."""
    import pygal

    chart: Any = pygal.HorizontalBar(**_config(title=f"Largest conversations ({unit})", show_legend=True,
                                          legend_at_bottom=True, height=max(200, 80 + 22 * len(largest))))
    rows = list(reversed(largest))  # pygal draws the first label at the bottom
    chart.x_labels = [_short(r["where"]) for r in rows]
    chart.add("before", [r["before"] for r in rows])
    chart.add("after", [r["after"] for r in rows])
    return _render(chart, "largest")


def _short(where: str, limit: int = 48) -> str:
    return where if len(where) <= limit else "…" + where[-(limit - 1):]


def retention_bars(kinds: list[str], settings: list[tuple[str, list[float | None]]]) -> str:
    """The eval page: per kind of probe, the share each setting kept (percent, printed on the bars)."""
    import pygal

    chart: Any = pygal.Bar(**_config(title="Probes kept, by kind", y_title="kept", range=(0, 100), width=1000,
                                     show_legend=True, legend_at_bottom=True, print_values=True,
                                     print_zeroes=True, value_formatter=lambda v: f"{v:.0f}%",
                                     y_labels=list(range(0, 101, 20)), height=380))
    chart.x_labels = [k.replace("_", " ") for k in kinds]
    for name, values in settings:
        chart.add(name, values)
    return _render(chart, "retention")


def pareto(points: list[tuple[str, int, float]], front: list[str], tokens_before: int | None) -> str:
    """The eval page: each setting's tokens after (x) against its essential retention (y, percent),
    each point labelled with its setting and figures; the Pareto front (no other setting keeps
    more for fewer tokens) joined by a line; the uncompacted records at 100% for scale."""
    import pygal

    top = max([t for _, t, _ in points] + [tokens_before or 0, 1])
    chart: Any = pygal.XY(**_config(title="Tokens after against essential retention, per setting", width=1000,
                                    x_title="tokens after (all records)", y_title="essential probes kept",
                                    stroke=False, dots_size=6, show_legend=True, legend_at_bottom=True,
                                    print_labels=True, range=(0, 100), xrange=(0, top * 1.3),
                                    y_labels=list(range(0, 101, 20)), height=420,
                                    value_formatter=lambda v: f"{v:.1f}%",
                                    x_value_formatter=lambda v: f"{v:,.0f}"))
    for name, tokens, pct in points:  # first, in the colours of the retention chart
        mark = " (on the front)" if name in front else ""
        chart.add(f"{name}{mark}", [{"value": (tokens, pct), "label": f"{name}: {pct:.1f}%, {tokens:,} tokens"}])
    if tokens_before:
        chart.add("uncompacted", [{"value": (tokens_before, 100), "label": f"uncompacted: {tokens_before:,} tokens"}],
                  dots_size=4)
    by_name = {name: (tokens, pct) for name, tokens, pct in points}
    line = sorted(by_name[n] for n in front)
    if len(line) > 1:
        chart.add("Pareto front", line, stroke=True, show_dots=False, stroke_style={"width": 2, "dasharray": "6,4"})
    return _render(chart, "pareto")
