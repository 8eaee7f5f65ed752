"""The ``kbatch`` command: one function per subcommand, each thin over its package.

An input that cannot be read (a missing file, a file that is not YAML, a document
that is not a Kubernetes object, a bad config or duration) prints one line,
``kbatch: error: ...``, on stderr and exits 2 — never a traceback. An object the
API server would refuse is not such an error: ``kbatch simulate`` names it and its
field on stderr, simulates the rest and exits 0.
"""

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from kbatch.api import DEFAULT_SCHEDULER_NAMES, duration
from kbatch.cli import visibility
from kbatch.cluster.errors import ManifestError, ObjectError
from kbatch.config import ConfigError

EXIT_USAGE = 2
# Errors that are the user's input, not a bug: reported in one line.
INPUT_ERRORS = (ManifestError, ConfigError, duration.DurationError, ObjectError, OSError)

Command = Callable[[argparse.Namespace], int]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"kbatch: error: {message} (see {self.prog} --help)\n")


def simulate(args: argparse.Namespace) -> int:
    """``kbatch simulate``: run the scheduler against manifests, print the outcome."""
    from kbatch import sim
    from kbatch.sim import output, progress, report

    if not (args.files or args.workload or args.cluster):
        raise argparse.ArgumentTypeError(
            "the following arguments are required: FILE (or --workload, --cluster)"
        )
    bar = None
    if args.progress or sys.stderr.isatty():
        until = duration.parse_duration(args.until, "--until") if args.until else None
        bar = progress.ProgressBar(sys.stderr, until, forced=args.progress)
    try:
        outcome = sim.run(
            args.files,
            workload=args.workload,
            cluster=args.cluster,
            config=args.config,
            until=args.until,
            period=args.period,
            progress=bar,
        )
    finally:
        if bar is not None:
            bar.close()
    result = output.to_json(outcome)
    if args.report is not None:
        inputs = [*args.files, *(p for p in (args.workload, args.cluster) if p is not None)]
        report.write(args.report, outcome.timeline, result, title=_title(inputs))
    if args.output == "json":
        # One write: json.dump writes each of its hundreds of thousands of pieces.
        sys.stdout.write(json.dumps(result, indent=2) + "\n")
    else:
        sys.stdout.write(output.to_table(result))
    return 0


def _title(files: list[Path]) -> str:
    return "kbatch simulation: " + ", ".join(path.name for path in files)


def _add_simulate(commands: "argparse._SubParsersAction[_Parser]") -> None:
    parser = commands.add_parser(
        "simulate",
        help="run the scheduler against Kubernetes manifests in memory",
        description="Run the real scheduler against an in-memory cluster built from "
        "Kubernetes manifests (Nodes, Queues, PodGroups, Pods, Jobs, ...), and Armada's "
        "simulator files (--workload, --cluster).",
    )
    parser.add_argument("files", nargs="*", type=Path, metavar="FILE", help="YAML manifests")
    parser.add_argument(
        "--workload",
        type=Path,
        metavar="W.yaml",
        help="an Armada WorkloadSpec: queues and job templates (adds 'metrics' to the output)",
    )
    parser.add_argument(
        "--cluster",
        type=Path,
        metavar="C.yaml",
        help="an Armada ClusterSpec: clusters of node templates",
    )
    parser.add_argument("--config", type=Path, metavar="FILE", help="scheduler conf (YAML)")
    parser.add_argument(
        "--until", metavar="DURATION", help="stop at this simulated time (e.g. 10m)"
    )
    parser.add_argument(
        "--period", default="1s", metavar="DURATION", help="scheduling period (default 1s)"
    )
    parser.add_argument("--output", choices=("table", "json"), default="table")
    parser.add_argument("--report", type=Path, metavar="FILE.html", help="write plots here")
    parser.add_argument(
        "--progress", action="store_true", help="show a progress bar even when not on a terminal"
    )
    parser.set_defaults(command=simulate)


def bench(args: argparse.Namespace) -> int:
    """``kbatch bench``: synthetic clusters through one session, one JSON line per size."""
    from kbatch.bench import scheduling as benchmark

    if args.topology:
        return _bench_topology(args)
    sizes = [_size(text) for text in args.size] if args.size else None
    if args.trace:
        from kbatch.sim import trace

        try:
            spec = trace.TraceSpec(args.trace_nodes, args.trace_hours, args.trace_seed)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return benchmark.main(trace=spec)
    return benchmark.main(sizes, backlog=args.backlog)


def _bench_topology(args: argparse.Namespace) -> int:
    """``kbatch bench --topology``: each size twice (gangs preferring a rack, and not),
    each run in a fresh process; one JSON line per size with both times and their ratio."""
    from kbatch.bench import topology as bench_topology

    if args.backlog or args.trace:
        raise argparse.ArgumentTypeError("--topology goes with neither --backlog nor --trace")
    sizes = [_size(text, bench_topology.check_size) for text in args.size] if args.size else None
    return bench_topology.main(sizes)


def _size(text: str, check: Callable[[int, int], None] | None = None) -> tuple[int, int]:
    """NODESxPODS, checked by ``check`` (default: ``kbatch.bench.scheduling``'s sizes)."""
    from kbatch.bench import scheduling as benchmark

    nodes, _, pods = text.partition("x")
    try:
        size = int(nodes), int(pods)
        (check or benchmark.check_size)(*size)
    except ValueError as exc:
        why = "expected NODESxPODS, e.g. 100x1000" if "invalid literal" in str(exc) else exc
        raise argparse.ArgumentTypeError(f"--size {text!r}: {why}") from None
    return size


def _add_bench(commands: "argparse._SubParsersAction[_Parser]") -> None:
    parser = commands.add_parser(
        "bench",
        help="time one scheduling session on synthetic clusters",
        description="Run synthetic clusters (gangs of 10 tasks of 1 cpu / 2Gi, nodes of "
        "32 cpu / 128Gi, 10 queues) through one session, each size in a fresh process; "
        "print one JSON line per size: nodes, pods, binds, seconds, snapshot_seconds, "
        "peak_rss_mib (that process's peak, interpreter included).",
    )
    parser.add_argument(
        "--size",
        action="append",
        metavar="NODESxPODS",
        help="a size to run (repeatable; positive, PODS a multiple of 10 but with "
        "--topology); default 100x1000, 1000x10000, 5000x50000, 10000x100000 (with --backlog: "
        "100x5000, 1000x50000; with --topology: 5000x50000)",
    )
    parser.add_argument(
        "--backlog",
        action="store_true",
        help="time the next session instead, on a full cluster with gangs waiting, under "
        "the actions enqueue, reclaim, allocate, backfill, preempt (adds running, waiting, "
        "evictions); then kbatch run's loop once nothing can move: settled_sessions in "
        "settled_periods periods, settled_seconds_per_period",
    )
    parser.add_argument(
        "--topology",
        action="store_true",
        help="time topology-aware placement instead: racks of 20 nodes in blocks and zones, "
        "gangs of 8 to 64 pods each preferring one rack, and the same cluster with no gang "
        "asking, each in a fresh process; one JSON line per size adds gangs, "
        "gangs_in_one_rack, plain_seconds, plain_gangs_in_one_rack and ratio (seconds / "
        "plain_seconds)",
    )
    parser.add_argument(
        "--trace",
        action="store_true",
        help="simulate one day of a mixed workload instead (1,000 nodes, 100,000 gangs of "
        "1 to 64 pods, 8 queues, a daily curve of submissions; seeded) and print one JSON "
        "line: simulated seconds per wall second, sessions, binds, wall seconds",
    )
    parser.add_argument(
        "--trace-hours",
        type=float,
        default=24.0,
        metavar="H",
        help="simulate only the first H hours of the day (default 24)",
    )
    parser.add_argument(
        "--trace-nodes",
        type=int,
        default=1000,
        metavar="N",
        help="N nodes, and the jobs scaled with them (100 a day per node; default 1000)",
    )
    parser.add_argument(
        "--trace-seed", type=int, default=0, metavar="SEED", help="the workload's seed"
    )
    parser.set_defaults(command=bench)


def run(args: argparse.Namespace) -> int:
    """``kbatch run``: the operators against a cluster, until interrupted."""
    import logging

    from kbatch import kubeapi
    from kbatch.operators.scheduler.runtime.informer import Watches

    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    period = duration.parse_duration(args.schedule_period, "--schedule-period")
    lease = duration.parse_duration(args.lease_duration, "--lease-duration")
    names = frozenset(args.scheduler_name or DEFAULT_SCHEDULER_NAMES)
    # The lists start before kopf and the scheduler load (about a second): the API
    # server prepares them meanwhile (10,000 pods take it seconds).
    watches = Watches(kubeapi.api_client(args.kubeconfig), names)
    watches.start()
    from kbatch.operators import process

    settings = process.RunSettings(
        kubeconfig=args.kubeconfig,
        scheduler_conf=args.scheduler_conf,
        period=period,
        scheduler_names=names,
        metrics_address=args.metrics_address or None,
        health_address=args.health_address or None,
        leader_elect=args.leader_elect,
        lock_namespace=args.lock_namespace,
        lease_seconds=int(lease),
        webhook_address=args.webhook_address,
        webhook_cert_dir=args.webhook_cert_dir,
        webhook_host=args.webhook_host,
        manage_webhooks=args.manage_webhooks,
    )
    process.run(settings, watches)
    return 0


def _add_run(commands: "argparse._SubParsersAction[_Parser]") -> None:
    parser = commands.add_parser(
        "run",
        help="run the scheduler and its operators against a cluster",
        description="Run the scheduler, PodGroup and Queue operators (kopf) against the "
        "cluster of the usual kubeconfig, or in-cluster config.",
    )
    parser.add_argument(
        "--kubeconfig", metavar="FILE", help="default: $KUBECONFIG, ~/.kube/config or in-cluster"
    )
    parser.add_argument(
        "--scheduler-conf",
        type=Path,
        metavar="FILE",
        help="scheduler conf (YAML), reloaded when it changes",
    )
    parser.add_argument(
        "--schedule-period",
        default="1s",
        metavar="DURATION",
        help="time between sessions (default 1s)",
    )
    parser.add_argument(
        "--scheduler-name",
        action="append",
        metavar="NAME",
        help="a schedulerName to serve (repeatable; default kbatch and kube-batch)",
    )
    parser.add_argument(
        "--metrics-address",
        default="0.0.0.0:8080",
        metavar="HOST:PORT",
        help="serve /metrics here ('' to turn off)",
    )
    parser.add_argument(
        "--health-address",
        default="0.0.0.0:8081",
        metavar="HOST:PORT",
        help="serve /healthz here ('' to turn off)",
    )
    parser.add_argument(
        "--leader-elect",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="elect one active replica with a Lease (default on)",
    )
    parser.add_argument(
        "--lock-namespace",
        default=os.environ.get("POD_NAMESPACE", "kube-system"),
        metavar="NS",
        help="namespace of the leader Lease",
    )
    parser.add_argument(
        "--lease-duration",
        default="15s",
        metavar="DURATION",
        help="how long a silent leader keeps the lead",
    )
    parser.add_argument(
        "--webhook-address",
        default="",
        metavar="HOST:PORT",
        help="serve the admission webhooks here over HTTPS (default '': no webhooks)",
    )
    parser.add_argument(
        "--webhook-cert-dir",
        type=Path,
        metavar="DIR",
        help="tls.crt and tls.key (and ca.crt) for the webhooks; default: self-signed",
    )
    parser.add_argument(
        "--webhook-host",
        metavar="HOST",
        help="the host the API server calls, in managed webhook configurations",
    )
    parser.add_argument(
        "--manage-webhooks",
        action="store_true",
        help="create the webhook configurations at start and remove them at exit "
        "(local runs; the Helm chart manages its own)",
    )
    parser.add_argument(
        "--log-level", default="info", choices=("debug", "info", "warning", "error")
    )
    parser.set_defaults(command=run)


def parser() -> argparse.ArgumentParser:
    root = _Parser(prog="kbatch", description="A batch scheduler for Kubernetes")
    commands = root.add_subparsers(dest="subcommand", required=True, metavar="COMMAND")
    _add_simulate(commands)
    _add_bench(commands)
    _add_run(commands)
    visibility.add_commands(commands)  # queues, jobs, explain
    return root


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    command: Command = args.command
    try:
        return command(args)
    except argparse.ArgumentTypeError as exc:
        print(f"kbatch: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        # The reader went away (``kbatch simulate ... | head``): not an error of ours.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except INPUT_ERRORS as exc:
        print(f"kbatch: error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_USAGE


def _one_line(exc: Exception) -> str:
    if isinstance(exc, OSError) and exc.filename is not None:
        return f"{exc.filename}: {exc.strerror or exc}"
    return " ".join(str(exc).split())


if __name__ == "__main__":
    sys.exit(main())
