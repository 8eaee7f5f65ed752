"""``--report FILE.html``: one self-contained page of plots, drawn here as inline SVG and
laid out by a jinja2 template shipped with the package (``templates/report.html``).

No script, no stylesheet or font from elsewhere: the file opens offline. With
``--compare-config`` the page shows two runs side by side, after the comparison's tables
(``kbatch.sim.compare``) and with each queue's share against its fair share over time.
Plots: per-queue allocated vs deserved cpu over time, cluster utilisation
over time, and job wait times (submission → running), with a table of the
waits beside them (and, for PodGroups, their roles, surplus and topology domains at the
end of the run). Hovering a point shows its job (SVG ``<title>``).
"""

import html
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from kbatch.sim import group_view
from kbatch.sim.clock import format_duration
from kbatch.sim.timeline import Timeline, Wait

PALETTE = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
)  # fmt: skip
WIDTH, HEIGHT = 760, 300
LEFT, RIGHT, TOP, BOTTOM = 64, 190, 34, 46
MAX_TABLE_ROWS = 200


@dataclass(frozen=True, slots=True)
class Series:
    label: str
    points: list[tuple[float, float]]
    color: str
    dashed: bool = False
    markers: bool = False  # points only (a scatter), no line
    tips: tuple[str, ...] = ()  # a hover text per point


def nice_ticks(top: float, count: int = 5) -> list[float]:
    """Round tick values from 0 to at least ``top`` (steps of 1, 2 or 5 × 10^k)."""
    if top <= 0:
        return [0.0, 1.0]
    raw = top / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    return [i * step for i in range(math.ceil(top / step - 1e-9) + 1)]


# Tick steps for time axes, in seconds: round minutes and hours.
_TIME_STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200)


def time_ticks(top: float, count: int = 5) -> list[float]:
    """Round tick times from 0 to at least ``top`` seconds (1s, 5s, 30s, 1m, 5m, 1h, ...)."""
    if top < count:
        return nice_ticks(top, count)
    raw = top / count
    step = next((float(s) for s in _TIME_STEPS if s >= raw), 86400.0 * math.ceil(raw / 86400))
    return [i * step for i in range(math.ceil(top / step - 1e-9) + 1)]


def _number(value: float) -> str:
    return f"{value:g}"


def _percent(value: float) -> str:
    return f"{value:g}%"


def chart(
    title: str,
    x_label: str,
    y_label: str,
    series: Sequence[Series],
    x_max: float,
    y_max: float | None = None,
    y_format: Callable[[float], str] = _number,
) -> str:
    """An SVG line (or scatter) chart with axes, ticks, a title and a legend.

    The x axis is simulated time; ``y_format`` renders y tick values (time
    ticks are used when it is ``format_duration``).
    """
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    top = y_max if y_max is not None else max((y for s in series for _, y in s.points), default=0)
    y_ticks = time_ticks(top) if y_format is format_duration else nice_ticks(top)
    x_ticks = time_ticks(x_max)
    x_top, y_top = x_ticks[-1], y_ticks[-1]

    def sx(x: float) -> float:
        return LEFT + plot_w * x / x_top

    def sy(y: float) -> float:
        return TOP + plot_h * (1 - y / y_top)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{_e(title)}">',
        f'<text x="{WIDTH / 2 - RIGHT / 2:.0f}" y="20" class="title">{_e(title)}</text>',
    ]
    bottom, right = TOP + plot_h, LEFT + plot_w
    for y in y_ticks:
        parts.append(_line(LEFT, sy(y), right, sy(y), 'class="grid"'))
        parts.append(_text(LEFT - 6, sy(y) + 4, "ytick", y_format(y)))
    for x in x_ticks:
        parts.append(_line(sx(x), bottom, sx(x), bottom + 4, 'class="axis"'))
        parts.append(_text(sx(x), bottom + 17, "xtick", format_duration(x)))
    parts.append(_line(LEFT, bottom, right, bottom, 'class="axis"'))
    parts.append(_line(LEFT, TOP, LEFT, bottom, 'class="axis"'))
    parts.append(_text(LEFT + plot_w / 2, HEIGHT - 6, "label", x_label))
    parts.append(
        f'<text transform="translate(14 {TOP + plot_h / 2:.0f}) rotate(-90)" class="label">'
        f"{_e(y_label)}</text>"
    )
    for s in series:
        parts.extend(_draw(s, sx, sy))
    parts.extend(_legend(series, LEFT + plot_w + 14))
    parts.append("</svg>")
    return "\n".join(parts)


def _draw(s: Series, sx: Any, sy: Any) -> list[str]:
    if s.markers:
        out = []
        for i, (x, y) in enumerate(s.points):
            tip = f"<title>{_e(s.tips[i])}</title>" if i < len(s.tips) else ""
            out.append(
                f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="3.5" fill="{s.color}">{tip}</circle>'
            )
        return out
    if not s.points:
        return []
    coords = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in s.points)
    return [f'<polyline points="{coords}" fill="none" {_stroke(s)}/>']


def _stroke(s: Series) -> str:
    """Solid lines are 2px; dashed ones are drawn wide and pale too, to show under a solid
    line of the same values."""
    if s.dashed:
        return f'stroke="{s.color}" stroke-width="5" stroke-opacity="0.45" stroke-dasharray="8 4"'
    return f'stroke="{s.color}" stroke-width="2"'


def _legend(series: Sequence[Series], x: float) -> list[str]:
    out = []
    for i, s in enumerate(series[:14]):
        y = TOP + 8 + 18 * i
        if s.markers:
            out.append(f'<circle cx="{x + 11}" cy="{y}" r="3.5" fill="{s.color}"/>')
        else:
            out.append(_line(x, y, x + 22, y, _stroke(s)))
        out.append(f'<text x="{x + 28}" y="{y + 4}" class="legend">{_e(s.label)}</text>')
    if len(series) > 14:
        out.append(
            f'<text x="{x}" y="{TOP + 8 + 18 * 14}" class="legend">… {len(series) - 14} more</text>'
        )
    return out


def steps(points: list[tuple[float, float]], end: float) -> list[tuple[float, float]]:
    """A step line through ``points`` (each value holds until the next), drawn to ``end``."""
    out: list[tuple[float, float]] = []
    for i, (x, y) in enumerate(points):
        if i:
            out.append((x, out[-1][1]))
        out.append((x, y))
    if out and end > out[-1][0]:
        out.append((end, out[-1][1]))
    return out


def queue_chart(timeline: Timeline) -> str:
    names = sorted(
        {name for s in timeline.samples for name, values in s.queues.items() if any(values)}
    )
    series = []
    for i, name in enumerate(names):
        color = PALETTE[i % len(PALETTE)]
        allocated = [(s.time, s.queues[name][0]) for s in timeline.samples if name in s.queues]
        deserved = [(s.time, s.queues[name][1]) for s in timeline.samples if name in s.queues]
        series.append(Series(f"{name} allocated", steps(allocated, timeline.end), color))
        series.append(Series(f"{name} deserved", steps(deserved, timeline.end), color, dashed=True))
    return chart(
        "Queues: allocated vs deserved cpu", "simulated time", "cpu (cores)", series, timeline.end
    )


def utilisation_chart(timeline: Timeline) -> str:
    cpu = [(s.time, 100 * s.cpu) for s in timeline.samples]
    memory = [(s.time, 100 * s.memory) for s in timeline.samples]
    series = [
        Series("cpu", steps(cpu, timeline.end), PALETTE[0]),
        Series("memory", steps(memory, timeline.end), PALETTE[1], dashed=True),
    ]
    return chart(
        "Cluster utilisation (requests on nodes)", "simulated time", "used", series,
        timeline.end, y_max=100, y_format=_percent,
    )  # fmt: skip


def wait_chart(waits: list[Wait], end: float) -> str:
    """Each job that ran, at its submission time, coloured by queue."""
    started = [w for w in waits if w.seconds is not None]
    series = []
    for i, queue in enumerate(sorted({w.queue for w in started})):
        mine = [w for w in started if w.queue == queue]
        tips = tuple(
            f"{w.kind} {w.namespace}/{w.name}: {format_duration(w.seconds or 0)}" for w in mine
        )
        points = [(w.submitted, w.seconds or 0.0) for w in mine]
        color = PALETTE[i % len(PALETTE)]
        series.append(Series(f"queue {queue}", points, color, markers=True, tips=tips))
    return chart(
        "Job wait: submitted → running (hover a point for its job)", "submitted at", "wait",
        series, end, y_format=format_duration,
    )  # fmt: skip


@dataclass(frozen=True, slots=True)
class Side:
    """One run of a comparison: its name, timeline and JSON result."""

    name: str
    timeline: Timeline
    result: dict[str, Any]


def render(timeline: Timeline, result: dict[str, Any], title: str = "kbatch simulation") -> str:
    """The whole page."""
    return _template().render(title=title, runs=[_run("", timeline, result)], comparison=None)


def write(
    path: Path, timeline: Timeline, result: dict[str, Any], title: str = "kbatch simulation"
) -> None:
    path.write_text(render(timeline, result, title), encoding="utf-8")


def render_comparison(
    sides: Sequence[Side], comparison: dict[str, Any], title: str = "kbatch simulation"
) -> str:
    """The page of two runs compared (``kbatch.sim.compare``'s JSON): the comparison's
    tables, then each run's plots side by side, with each queue's share against its fair
    share over time."""
    runs = [
        _run(side.name, side.timeline, side.result, over)
        for side, over in zip(sides, comparison["overTime"], strict=True)
    ]
    return _template().render(
        title=title, runs=runs, comparison=comparison, max_rows=MAX_TABLE_ROWS
    )


def write_comparison(
    path: Path, sides: Sequence[Side], comparison: dict[str, Any], title: str = "kbatch simulation"
) -> None:
    path.write_text(render_comparison(sides, comparison, title), encoding="utf-8")


def fairness_chart(over_time: dict[str, Any], end: float) -> str:
    """Each queue's dominant share (solid) against its fair share (dashed), per window."""
    window = over_time.get("window") or 0
    series = []
    for i, queue in enumerate(sorted(over_time.get("share", {}))):
        color = PALETTE[i % len(PALETTE)]
        for key, dashed, word in (("share", False, "share"), ("fairShare", True, "fair share")):
            values = over_time.get(key, {}).get(queue, [])
            points = [(float(k * window), 100.0 * v) for k, v in enumerate(values)]
            series.append(Series(f"{queue} {word}", steps(points, end), color, dashed=dashed))
    return chart(
        "Queues: share vs fair share", "simulated time", "share of the cluster", series, end,
        y_max=100, y_format=_percent,
    )  # fmt: skip


def _run(
    name: str, timeline: Timeline, result: dict[str, Any], over_time: dict[str, Any] | None = None
) -> dict[str, Any]:
    """What the template shows of one run."""
    waits = sorted(timeline.waits.values(), key=lambda w: (w.submitted, w.namespace, w.name))
    summary = result["summary"]
    never = sum(1 for w in waits if w.started is None)
    facts = (
        f"simulated {format_duration(result['time'])} in {summary['sessions']} sessions · "
        f"{summary['binds']} binds · {summary['evictions']} evictions · {len(waits)} jobs"
        + (f" ({never} never ran)" if never else "")
    )
    fairness = None
    if over_time is not None and over_time.get("window"):
        fairness = Markup(fairness_chart(over_time, timeline.end))
    return {
        "name": name,
        "facts": facts,
        "queue_chart": Markup(queue_chart(timeline)),
        "utilisation_chart": Markup(utilisation_chart(timeline)),
        "wait_chart": Markup(wait_chart(waits, timeline.end)),
        "fairness": fairness,
        "waits": waits[:MAX_TABLE_ROWS],
        "more": len(waits) - MAX_TABLE_ROWS,
        "pods_column": group_view.summaries(result),
    }


def _template() -> jinja2.Template:
    """The page's template, shipped beside this module (``templates/report.html``)."""
    text = (resources.files("kbatch.sim") / "templates" / "report.html").read_text("utf-8")
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    env.filters["pair"] = _pair
    env.globals.update(seconds=format_duration, percent=_share, string=str, signed=_signed)
    return env.from_string(text)


def _pair(values: Sequence[Any], show: Callable[[Any], str]) -> str:
    """Two runs' values as "base → other" ("-" for a missing one)."""
    return " → ".join("-" if v is None else show(v) for v in values)


def _share(value: float) -> str:
    return f"{100 * value:.1f}%"


def _signed(value: float) -> str:
    return ("−" if value < 0 else "+") + format_duration(abs(value))


def _line(x1: float, y1: float, x2: float, y2: float, attributes: str) -> str:
    return f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" {attributes}/>'


def _text(x: float, y: float, css_class: str, text: str) -> str:
    return f'<text x="{x:.1f}" y="{y:.1f}" class="{css_class}">{_e(text)}</text>'


def _e(text: str) -> str:
    return html.escape(text, quote=True)
