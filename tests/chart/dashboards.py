"""The chart's Grafana dashboards: their queries, and the metric names they read.

``queries()`` yields every PromQL expression of every panel (rows included)
and of every query variable. ``metric_names(expr)`` is a small PromQL
tokenizer: a ``__name__`` matcher names its metric (a regex or negative one is
returned as written, so that no check can pass it unread); then, after
dropping strings, label matchers ``{...}``, ranges ``[...]``, grouping clauses
(``by (...)``, ``on (...)``, ...) and Grafana variables, the identifiers left
that are not followed by ``(`` (functions, aggregations) and are not keywords
are metric names. ``range_functions(expr)`` pairs each function applied to a
range with the metric it reads.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chart.tools import CHART

DASHBOARDS = CHART / "dashboards"

# Grafana's built-in interval variables, and what the tests put in their place.
GRAFANA_INTERVALS = ("$__rate_interval", "$__interval", "$__range")
KEYWORDS = frozenset(
    {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset"}
    | {"and", "or", "unless", "atan2", "inf", "nan", "start", "end"}
)

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_MATCHERS = re.compile(r"\{[^{}]*\}")
_RANGE = re.compile(r"\[[^\[\]]*\]")
_GROUPING = re.compile(
    r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)", re.IGNORECASE
)
_VARIABLE = re.compile(r"\$\{[^}]*\}|\$\w+")
_DURATION = re.compile(r"(?<![\w:])(\d+(ms|s|m|h|d|w|y))+(?![\w:])")
_NUMBER = re.compile(r"(?<![\w:])(0x[0-9a-fA-F]+|\d+(\.\d*)?([eE][+-]?\d+)?|\.\d+([eE][+-]?\d+)?)")
_IDENTIFIER = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_NAME_MATCHER = re.compile(r"""__name__\s*(=~|!=|!~|=)\s*("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')""")
_RANGE_FUNCTION = re.compile(r"\b([a-z_]+)\s*\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\{[^{}]*\})?\s*\[")
_LABEL_VALUES = re.compile(r"label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)")


@dataclass(frozen=True)
class Query:
    dashboard: str
    panel: str
    ref: str
    expr: str


def load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def files() -> list[Path]:
    return sorted(DASHBOARDS.glob("*.json"))


def _panels(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for panel in panels:
        yield panel
        yield from _panels(panel.get("panels", []))


def queries() -> Iterator[Query]:
    for path in files():
        board = load(path)
        for panel in _panels(board.get("panels", [])):
            for target in panel.get("targets", []):
                yield Query(board["title"], panel["title"], target["refId"], target["expr"])


def variable_queries() -> Iterator[Query]:
    """Query variables (``label_values(metric, label)``)."""
    for path in files():
        board = load(path)
        for variable in board.get("templating", {}).get("list", []):
            if variable.get("type") != "query":
                continue
            query = variable["query"]
            text = query["query"] if isinstance(query, dict) else query
            yield Query(board["title"], f"${variable['name']}", "var", text)


def metric_names(expr: str) -> set[str]:
    """The metric names an expression reads (see the module docstring)."""
    names = set()
    for match in _NAME_MATCHER.finditer(expr):
        operator, quoted = match.groups()
        names.add(quoted[1:-1] if operator == "=" else f"__name__{operator}{quoted}")
    text = _STRING.sub(" ", expr)
    text = _MATCHERS.sub(" ", text)
    text = _RANGE.sub(" ", text)
    text = _VARIABLE.sub(" ", text)
    while True:  # grouping clauses hold label names, never metrics
        stripped = _GROUPING.sub(" ", text)
        if stripped == text:
            break
        text = stripped
    text = _DURATION.sub(" ", text)  # offset 5m
    text = _NUMBER.sub(" ", text)
    for match in _IDENTIFIER.finditer(text):
        rest = text[match.end() :].lstrip()
        if rest.startswith("("):  # a function or an aggregation
            continue
        if match.group().lower() in KEYWORDS:
            continue
        names.add(match.group())
    return names


def range_functions(expr: str) -> set[tuple[str, str]]:
    """(function, metric) for every function applied to a metric's range, e.g.
    ``("rate", "x_total")`` in ``sum(rate(x_total{a="b"}[5m]))``."""
    return {(m.group(1), m.group(2)) for m in _RANGE_FUNCTION.finditer(_STRING.sub('""', expr))}


def variable_metric(text: str) -> str | None:
    match = _LABEL_VALUES.search(text)
    return match.group(1) if match else None


def concrete(expr: str, interval: str = "1m") -> str:
    """The expression as Grafana would send it: variables filled in ("All" for a selector)."""
    for name in GRAFANA_INTERVALS:
        expr = expr.replace(name, interval)
    return _VARIABLE.sub(".*", expr)
