"""``kbatch explain``, ``kbatch jobs`` and ``kbatch queues`` answered by ``kbatch run``'s
visibility API (``kbatch.visibility.api_server``, through the API server's aggregation):
one request, no listing, no scheduler loaded here. Printed as the commands print what
they compute themselves, from the same data (``-o json`` is the same document).

Asked first unless the user wants another conf or other scheduler names than the
scheduler's own (``--scheduler-conf``, ``--scheduler-name``) or ``--no-ask-scheduler``.
The command computes the answer itself when the API is not there (404: not installed,
or the scheduler does not hold the job yet), does not answer (a warning says why), or,
with ``--eta``, when an estimate is not published or is older than ``--eta-max-age``.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING, Any

from kbatch.api import duration
from kbatch.api.times import rfc3339_seconds

if TYPE_CHECKING:
    from kbatch.cli.visibility import Source

ROOT = "/apis/visibility.kbatch.io/v1alpha1"
# what reading an answer of another shape raises (another kbatch's, say)
UNREADABLE = (KeyError, TypeError, ValueError, AttributeError)
clock = time.time  # what "fresh" is measured by (a test's clock in tests)


def add_option(parser: argparse.ArgumentParser) -> None:
    """``--ask-scheduler`` / ``--no-ask-scheduler``."""
    parser.add_argument(
        "--ask-scheduler",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="ask kbatch run's visibility API first (one request; default on), and "
        "compute the answer here only when it does not answer",
    )


def may_ask(args: argparse.Namespace) -> bool:
    """Whether the scheduler's answer is the one asked for."""
    return bool(args.ask_scheduler) and not args.scheduler_conf and not args.scheduler_name


def explain(args: argparse.Namespace, source: Source, namespace: str, name: str) -> bool:
    """Print ``kbatch explain``'s answer from the scheduler: True if it was printed."""
    from kbatch.visibility import output as out
    from kbatch.visibility import rows

    data = _asked(args, source, f"{ROOT}/namespaces/{namespace}/podgroups/{name}/explanation")
    if data is None:
        return False
    try:
        eta = data.pop("eta", None)
        estimate = rows.estimate_of(eta) if args.eta and _fresh(args, eta) else None
        now = rfc3339_seconds(data["asOf"])
        story = rows.explanation_of(data)
    except UNREADABLE as exc:
        return _unreadable(exc)
    if args.eta and estimate is None:
        return False  # forecast here
    conf_source = str(data.get("schedulerConf") or "")
    if args.output == "table":
        answered = f"{conf_source}; answered by kbatch run, as of {_ago(now)}"
        out.show(sys.stdout, out.explanation(story, now, estimate, answered))
    else:
        out.print_data(
            sys.stdout, out.explanation_data(story, now, estimate, conf_source), args.output
        )
    return True


def jobs(args: argparse.Namespace, source: Source) -> bool:
    """Print ``kbatch jobs``' answer from the scheduler: True if it was printed."""
    from kbatch.visibility import output as out
    from kbatch.visibility import rows

    where = f"/namespaces/{args.namespace}" if args.namespace else ""
    data = _asked(args, source, f"{ROOT}{where}/waitingjobs")
    if data is None:
        return False
    try:
        listed = [job for job in data["jobs"] if args.queue in (None, job.get("queue"))]
        newer = _newer_than_the_estimates(args, listed) if args.eta else []
        if newer is None:
            return False  # forecast here
        now = rfc3339_seconds(data["asOf"])
        found = [(rows.job_row_of(job), rows.estimate_of(job.get("eta"))) for job in listed]
    except UNREADABLE as exc:
        return _unreadable(exc)
    if newer:
        print(_not_estimated_yet(args, newer), file=sys.stderr)
    if args.output == "table":
        estimates = {out.job_uid(row): e for row, e in found if e is not None} if args.eta else None
        out.show(sys.stdout, out.jobs_table([row for row, _ in found], now, estimates))
        if not found:
            print("no waiting jobs")
        return True
    shown = [out.job_data(row, estimate if args.eta else None, now) for row, estimate in found]
    listing = out.jobs_data(shown, data["asOf"], data.get("schedulerConf"))
    out.print_data(sys.stdout, listing, args.output)
    return True


def queues(args: argparse.Namespace, source: Source) -> bool:
    """Print ``kbatch queues``' answer from the scheduler: True if it was printed."""
    from kbatch.visibility import output as out
    from kbatch.visibility import rows

    data = _asked(args, source, f"{ROOT}/queuesummaries")
    if data is None:
        return False
    try:
        rfc3339_seconds(data["asOf"])  # (read, to refuse an answer of another shape)
        found = rows.queue_rows_of(data["queues"])
    except UNREADABLE as exc:
        return _unreadable(exc)
    conf_source = str(data.get("schedulerConf") or "")
    out.print_queues(sys.stdout, args.output, found, data["asOf"], conf_source)
    return True


def _asked(args: argparse.Namespace, source: Source, path: str) -> dict[str, Any] | None:
    if not may_ask(args):
        return None
    return source.served(path)


def _unreadable(exc: Exception) -> bool:
    """An answer this version cannot read (another kbatch's): said, and computed here."""
    from kbatch.cli.visibility import warn

    warn(f"kbatch run's answer cannot be read here ({exc!r}): computing here")
    return False


def _newer_than_the_estimates(
    args: argparse.Namespace, listed: list[dict[str, Any]]
) -> list[str] | None:
    """The jobs with no estimate yet, submitted within ``--eta-max-age`` (after kbatch
    run's last round of estimates: its next one will have them); None when the scheduler's
    estimates do not answer, and the forecast is made here: one is older than that, or an
    older job has none (kbatch run is not estimating)."""
    max_age = duration.parse_duration(args.eta_max_age, "--eta-max-age")
    newer = []
    for job in listed:
        if _fresh(args, job.get("eta")):
            continue
        if job.get("eta") is not None or clock() - rfc3339_seconds(job["created"]) > max_age:
            return None
        newer.append(f"{job['namespace']}/{job['name']}")
    return newer


def _not_estimated_yet(args: argparse.Namespace, newer: list[str]) -> str:
    named = ", ".join(newer[:3]) + (f" and {len(newer) - 3} more" if len(newer) > 3 else "")
    return (
        f"kbatch: {len(newer)} job(s) submitted in the last {args.eta_max_age} have no "
        f"estimate yet ({named}): kbatch run estimates every waiting job in its next round; "
        "`kbatch explain NAMESPACE/NAME --eta` forecasts one now"
    )


def _fresh(args: argparse.Namespace, eta: dict[str, Any] | None) -> bool:
    """Whether ``eta`` was published at most ``--eta-max-age`` ago."""
    if not eta or eta.get("publishedAt") is None:
        return False
    max_age = duration.parse_duration(args.eta_max_age, "--eta-max-age")
    return abs(clock() - float(eta["publishedAt"])) <= max_age


def _ago(then: float) -> str:
    from kbatch.visibility.rows import human

    return f"{human(max(clock() - then, 0.0))} ago"
