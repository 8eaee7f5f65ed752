"""``kbatch queues``, ``kbatch jobs``, ``kbatch explain``: where work stands, read from a cluster.

They read, with the user's own kubeconfig (``--kubeconfig``, else ``$KUBECONFIG``,
``~/.kube/config`` or in-cluster credentials), what kbatch schedules and publishes —
nodes, pods, PodGroups, Queues, PriorityClasses, ResourceQuotas, the claims, volumes
and StorageClasses pods' volumes name, CSINodes (where the user may list them); the Jobs
kbatch holds and the events, when asked — and compute the rest with the scheduler's own code
(``kbatch.visibility.standing`` for the line, ``kbatch.visibility.eta`` for when). They
write nothing. The scheduler conf is ``--scheduler-conf FILE``, else the one in the
chart's ConfigMap (label ``app.kubernetes.io/name=kbatch``, key ``scheduler.conf``) when
the user may read ConfigMaps, else the default; the output says which.

The same main is the kubectl plugin ``kubectl-kbatch`` (``kubectl kbatch jobs``).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from kbatch import kubeapi
from kbatch.api import DEFAULT_SCHEDULER_NAMES, duration
from kbatch.cli import visibility_served
from kbatch.cli.visibility_paths import COLLECTIONS, JOBSETS, OPTIONAL
from kbatch.config_base import ETA_BUDGET_SECONDS, ETA_FRESH_SECONDS, ConfigError

# The commands load the scheduler and the simulator when they run, not when ``kbatch``
# builds its parser: ``kbatch run`` starts its lists before loading them (see
# ``kbatch.cli.run``), and these took 0.15-0.3 s of that on a 2-core machine.
if TYPE_CHECKING:
    from kbatch.config import SchedulerConf
    from kbatch.operators.scheduler.core.framework.session import Session
    from kbatch.visibility import eta, standing

EXIT_FAILED = 1
EXIT_USAGE = 2
CHART_CONF_SELECTOR = "app.kubernetes.io/name=kbatch"
CHART_CONF_KEY = "scheduler.conf"


class Source(Protocol):
    """Where the commands read a cluster from (the API server; a test's objects)."""

    def objects(self, *, events_in: str | None) -> standing.ClusterObjects:
        """Everything the commands read but the batch/v1 Jobs (``held_jobs``), and the
        events of namespace ``events_in`` (None: none)."""
        ...

    def held_jobs(self) -> list[dict[str, Any]]:
        """The batch/v1 Jobs kbatch may hold (a JobSet's as held while kbatch holds the
        JobSet), listed on their own: a forecast needs them, a published estimate does
        not."""
        ...

    def conf(self) -> tuple[SchedulerConf, str]: ...

    def served(self, path: str) -> dict[str, Any] | None:
        """What ``kbatch run``'s visibility API answers at ``path`` (None: it does not
        answer, and the command computes the answer itself)."""
        ...


@dataclass
class LiveSource:
    """The API server of a kubeconfig, read through ``kbatch.kubeapi``: the scheduler's
    answer with one GET of the standard library's (``kubeapi.once``), the lists with the
    kubernetes client, made when first needed (``api``)."""

    kubeconfig: str | None
    conf_file: Path | None
    warn: Callable[[str], None]
    client: Any = None  # the kubernetes client, once made (a test's stand-in)

    @property
    def api(self) -> Any:
        if self.client is None:
            try:
                self.client = kubeapi.api_client(self.kubeconfig)
            except Exception as exc:  # the client's ConfigException, or a file's error
                raise KubeconfigError(f"no cluster to read: {exc}") from exc
        return self.client

    def objects(self, *, events_in: str | None) -> standing.ClusterObjects:
        from kbatch.visibility import standing

        read = {
            kind: self._list(kind, OPTIONAL.get(kind, "")) for kind in COLLECTIONS if kind != "Job"
        }
        events = []
        if events_in is not None:
            path = f"/api/v1/namespaces/{events_in}/events"
            events = self._items(path, "Event", optional="no events shown")
        return standing.ClusterObjects(
            now=time.time(),
            nodes=read["Node"],
            pods=read["Pod"],
            pod_groups=read["PodGroup"],
            queues=read["Queue"],
            priority_classes=read["PriorityClass"],
            quotas=read["ResourceQuota"],
            events=events,
            claims=read["PersistentVolumeClaim"],
            volumes=read["PersistentVolume"],
            storage_classes=read["StorageClass"],
            csi_nodes=read["CSINode"],
        )

    def held_jobs(self) -> list[dict[str, Any]]:
        from kbatch.visibility import eta_input

        jobs = self._list("Job", optional="held Jobs' pods are not foreseen")
        # (404: JobSet is not installed, nothing to say)
        why = "held JobSets' pods are not foreseen"
        jobsets = self._items(JOBSETS, "JobSet", optional=why, quiet_missing=True)
        return eta_input.held_with_jobsets(jobs, jobsets)

    def _list(self, kind: str, optional: str = "") -> list[dict[str, Any]]:
        return self._items(COLLECTIONS[kind], kind, optional)

    def _items(
        self, path: str, kind: str, optional: str = "", quiet_missing: bool = False
    ) -> list[dict[str, Any]]:
        """The items listed at ``path``; when ``optional``, none (and a warning saying so)
        where the server refuses or does not serve them (``quiet_missing``: no warning
        where it does not serve them)."""
        try:
            items = kubeapi.list_items(self.api, path)
        except kubeapi.ApiError as exc:
            if not optional or exc.status not in (403, 404):
                raise
            if not (quiet_missing and exc.status == 404):
                self.warn(f"cannot list {kind}s ({exc}): {optional}")
            return []
        for item in items:
            item["kind"] = kind  # a list's items do not say
        return items

    def served(self, path: str) -> dict[str, Any] | None:
        from kbatch.kubeapi import once  # (http.client and ssl: only when asking)

        credentials = once.credentials(self.kubeconfig) if self.client is None else None
        try:
            if credentials is not None:
                answer = once.get(credentials, path)
            else:  # credentials only the kubernetes client reads (an exec plugin, say)
                answer = kubeapi.request(self.api, "GET", path)
        except kubeapi.Unreachable:
            raise
        except kubeapi.ApiError as exc:
            # 404: no visibility API here (or the scheduler does not hold the job yet)
            if exc.status != 404:
                self.warn(f"kbatch's visibility API did not answer ({exc}): computing here")
            return None
        return answer

    def conf(self) -> tuple[SchedulerConf, str]:
        from kbatch.operators.scheduler.core import runner

        if self.conf_file is not None:
            return runner.load_conf_file(self.conf_file), str(self.conf_file)
        try:
            maps = kubeapi.list_items(
                self.api, "/api/v1/configmaps", {"labelSelector": CHART_CONF_SELECTOR}
            )
        except kubeapi.ApiError as exc:
            if exc.status not in (403, 404):
                raise
            return runner.default_conf(), f"the default (cannot read ConfigMaps: {exc})"
        for config_map in maps:
            text = (config_map.get("data") or {}).get(CHART_CONF_KEY)
            if text is None:
                continue
            meta = config_map["metadata"]
            where = f"ConfigMap {meta.get('namespace')}/{meta['name']}"
            try:
                return runner.load_conf(text, where), where
            except ConfigError as exc:
                self.warn(f"{exc}; using the default conf")
        return runner.default_conf(), "the default (no kbatch ConfigMap found)"


class KubeconfigError(ValueError):
    """No usable kubeconfig or in-cluster credentials."""


def warn(message: str) -> None:
    print(f"kbatch: warning: {message}", file=sys.stderr)


def source_for(args: argparse.Namespace) -> Source:
    """The cluster of ``args.kubeconfig`` (tests replace this function)."""
    return LiveSource(args.kubeconfig, args.scheduler_conf, warn)


def _names(args: argparse.Namespace) -> frozenset[str]:
    return frozenset(args.scheduler_name or DEFAULT_SCHEDULER_NAMES)


# ----------------------------------------------------------------------------- commands
def queues(args: argparse.Namespace) -> int:
    """``kbatch queues``: each queue's weight, shares and PodGroups, in queue order."""
    source = source_for(args)
    if visibility_served.queues(args, source):
        return 0
    from kbatch.visibility import output as out  # rich: only when printing
    from kbatch.visibility import standing

    conf, conf_source = source.conf()
    objects = source.objects(events_in=None)
    line = standing.line(objects, conf, _names(args))
    _warn_all(line.warnings)
    as_of = out.micro_time(objects.now)
    out.print_queues(sys.stdout, args.output, line.queues, as_of, conf_source)
    return 0


def jobs(args: argparse.Namespace) -> int:
    """``kbatch jobs``: the waiting jobs in the order kbatch considers them."""
    source = source_for(args)
    if visibility_served.jobs(args, source):
        return 0
    # (loaded only now: the scheduler's answer needs no scheduler here)
    from kbatch.visibility import output as out  # rich: only when printing
    from kbatch.visibility import standing

    conf, conf_source = source.conf()
    objects = source.objects(events_in=None)
    session, warnings = standing.open_session(objects, conf, _names(args))
    line = standing.line_of(session, warnings)
    _warn_all(line.warnings)
    rows = [
        row
        for row in line.jobs
        if (args.queue is None or row.queue == args.queue)
        and (args.namespace is None or row.namespace == args.namespace)
    ]
    estimates = None
    if args.eta:
        targets = [out.job_uid(row) for row in rows]
        estimates = _estimates(args, source, session, objects, conf, targets)
    if args.output == "table":
        out.show(sys.stdout, out.jobs_table(rows, objects.now, estimates))
        if not rows:
            print("no waiting jobs")
    else:
        data = [
            out.job_data(r, estimates.get(out.job_uid(r)) if estimates else None, objects.now)
            for r in rows
        ]
        listing = out.jobs_data(data, out.micro_time(objects.now), conf_source)
        out.print_data(sys.stdout, listing, args.output)
    return 0


def explain(args: argparse.Namespace) -> int:
    """``kbatch explain PODGROUP``: the full story of one job."""
    namespace, _, name = args.podgroup.rpartition("/")
    namespace = namespace or args.namespace
    source = source_for(args)
    if visibility_served.explain(args, source, namespace, name):
        return 0
    from kbatch.visibility import output as out  # rich: only when printing
    from kbatch.visibility import standing

    conf, conf_source = source.conf()
    objects = source.objects(events_in=namespace)
    session, warnings = standing.open_session(objects, conf, _names(args))
    line = standing.line_of(session, warnings)
    _warn_all(line.warnings)
    story = standing.explain(session, line, objects, namespace, name)
    if story is None:  # (a pod held by its scheduling gates is in no job)
        if gates := standing.gates_of(objects, namespace, name):
            out.print_gated_pod(sys.stdout, namespace, name, gates, args.output)
            return 0
        print(f"kbatch: error: no PodGroup or pod {namespace}/{name}", file=sys.stderr)
        return EXIT_FAILED
    estimate = None
    if args.eta:
        uid = out.job_uid(story.job)
        estimate = _estimates(args, source, session, objects, conf, [uid]).get(uid)
    if args.output == "table":
        out.show(sys.stdout, out.explanation(story, objects.now, estimate, conf_source))
    else:
        data = out.explanation_data(story, objects.now, estimate, conf_source)
        out.print_data(sys.stdout, data, args.output)
    return 0


def _estimates(
    args: argparse.Namespace,
    source: Source,
    session: Session,
    objects: standing.ClusterObjects,
    conf: SchedulerConf,
    targets: list[str],
) -> dict[str, eta.Estimate]:
    """The estimates of ``targets``: those the scheduler published on the PodGroups, when
    at most ``--eta-max-age`` old (``kbatch.visibility.published``), the rest forecast
    (the Jobs kbatch holds listed for it then: a held Job's pods are foreseen)."""
    import dataclasses

    from kbatch.visibility import published

    max_age = duration.parse_duration(args.eta_max_age, "--eta-max-age")
    groups = {f"{g['metadata'].get('namespace') or 'default'}/{g['metadata']['name']}": g
              for g in objects.pod_groups}  # fmt: skip
    found = {}
    for uid in targets:
        group = groups.get(uid)
        read = (
            None if group is None or max_age <= 0 else published.read(group, objects.now, max_age)
        )
        if read is not None:
            found[uid] = read.estimate
    rest = [uid for uid in targets if uid not in found]
    if rest:
        objects = dataclasses.replace(objects, jobs=source.held_jobs())
        found.update(_forecast(args, session, objects, conf, rest).estimates)
    return found


def _forecast(
    args: argparse.Namespace,
    session: Session,
    objects: standing.ClusterObjects,
    conf: SchedulerConf,
    targets: list[str],
) -> eta.Forecast:
    from kbatch.visibility import eta

    period = duration.parse_duration(args.period, "--period")
    budget = duration.parse_duration(args.eta_budget, "--eta-budget")
    if period <= 0:
        raise duration.DurationError("--period: must be more than 0")
    return eta.forecast(
        session, objects, conf, targets, period=period, budget=budget, scheduler_names=_names(args)
    )


def _warn_all(warnings: list[str]) -> None:
    for message in warnings:
        warn(message)


def guarded(command: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """``command``, with an API server's refusal or absence as one line and exit 1."""

    def run(args: argparse.Namespace) -> int:
        try:
            return command(args)
        except kubeapi.ApiError as exc:
            print(f"kbatch: error: cannot read the cluster: {exc}", file=sys.stderr)
            return EXIT_FAILED
        except KubeconfigError as exc:
            print(f"kbatch: error: {exc}", file=sys.stderr)
            return EXIT_USAGE

    return run


# ----------------------------------------------------------------------------- parsers
def add_commands(commands: argparse._SubParsersAction[Any]) -> None:
    """Add ``queues``, ``jobs`` and ``explain`` to ``kbatch``'s subcommands."""
    parser = commands.add_parser(
        "queues",
        help="queues in kbatch's order: weight, deserved, allocated, share, PodGroups",
        description="Each Queue as kbatch sees it now, in the order it serves them.",
    )
    _common(parser)
    visibility_served.add_option(parser)
    parser.set_defaults(command=guarded(queues))

    parser = commands.add_parser(
        "jobs",
        help="waiting jobs in the order kbatch considers them, with their reasons",
        description="The PodGroups (and pods of their own) that have not started, in the "
        "order kbatch considers them: position in the cluster and in their queue, phase, "
        "and why they wait.",
    )
    _common(parser)
    parser.add_argument("-q", "--queue", metavar="QUEUE", help="only the jobs of this queue")
    parser.add_argument("-n", "--namespace", metavar="NS", help="only the jobs of this namespace")
    _eta_options(parser, "add an ETA column: the simulator run forward from now")
    visibility_served.add_option(parser)
    parser.set_defaults(command=guarded(jobs))

    parser = commands.add_parser(
        "explain",
        help="the full story of one PodGroup: conditions, reasons, what is ahead, events",
        description="Why a PodGroup (or a pod of its own) waits: its conditions, its "
        "place in line, the jobs ahead of it, its last events; with --eta, when it starts.",
    )
    parser.add_argument("podgroup", metavar="PODGROUP", help="NAME or NAMESPACE/NAME")
    parser.add_argument("-n", "--namespace", default="default", metavar="NS")
    _common(parser)
    _eta_options(parser, "estimate when it starts: the simulator run forward from now")
    visibility_served.add_option(parser)
    parser.set_defaults(command=guarded(explain))


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--kubeconfig", metavar="FILE", help="default: $KUBECONFIG, ~/.kube/config or in-cluster"
    )
    parser.add_argument(
        "--scheduler-conf",
        type=Path,
        metavar="FILE",
        help="the scheduler conf (default: the chart's ConfigMap, else kbatch's default)",
    )
    parser.add_argument(
        "--scheduler-name",
        action="append",
        metavar="NAME",
        help="a schedulerName kbatch serves (repeatable; default kbatch and kube-batch)",
    )
    parser.add_argument("-o", "--output", choices=("table", "json", "yaml"), default="table")


def _eta_options(parser: argparse.ArgumentParser, help_text: str) -> None:
    parser.add_argument("--eta", action="store_true", help=help_text)
    parser.add_argument(
        "--period",
        default="1s",
        metavar="DURATION",
        help="the scheduler's --schedule-period (default 1s)",
    )
    parser.add_argument(
        "--eta-budget",
        default=f"{ETA_BUDGET_SECONDS:g}s",
        metavar="DURATION",
        help="stop simulating after this long; what has not started is 'later than' "
        f"(default {ETA_BUDGET_SECONDS:g}s)",
    )
    parser.add_argument(
        "--eta-max-age",
        default=f"{ETA_FRESH_SECONDS:g}s",
        metavar="DURATION",
        help="read the estimate kbatch run published on a PodGroup when it is at most this "
        f"old, else compute it (default {ETA_FRESH_SECONDS:g}s; 0: always compute)",
    )
