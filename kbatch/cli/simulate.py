"""``kbatch simulate``: the scheduler run against manifests (and Armada's simulator
files) in an in-memory cluster; the outcome as a table or JSON, and plots on request."""

import argparse
import sys
from pathlib import Path
from typing import Any

from kbatch import json_codec
from kbatch.api import duration


def simulate(args: argparse.Namespace) -> int:
    """``kbatch simulate``: run the scheduler against manifests, print the outcome."""
    from kbatch import sim
    from kbatch.sim import output, progress

    if args.from_cluster:
        from kbatch.cli import whatif

        return whatif.command(args)
    if not (args.files or args.workload or args.cluster):
        raise argparse.ArgumentTypeError(
            "the following arguments are required: FILE (or --workload, --cluster)"
        )
    bar = None
    if args.progress or sys.stderr.isatty():
        until = duration.parse_duration(args.until, "--until") if args.until else None
        bar = progress.ProgressBar(sys.stderr, until, forced=args.progress)
    inputs = [*args.files, *(p for p in (args.workload, args.cluster) if p is not None)]
    if args.compare_config is not None:
        return _compare(args, bar, inputs)
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
        from kbatch.sim import report  # (jinja2: only for the report)

        report.write(args.report, outcome.timeline, result, title=_title(inputs))
    if args.output == "json":
        # One write, made by orjson: json's pure-Python encoder (``indent`` turns its C one
        # off) took 3 to 5% of a large run.
        sys.stdout.write(json_codec.dumps_indented(result) + "\n")
    else:
        sys.stdout.write(output.to_table(result))
    return 0


def _compare(args: argparse.Namespace, bar: Any, inputs: list[Path]) -> int:
    """``--compare-config``: the same inputs under the base conf (``--config``, else the
    default) and under the other, compared (``kbatch.sim.compare``)."""
    from kbatch import sim
    from kbatch.sim import compare, output, report

    runs, results = [], []
    try:
        for config, name in ((args.config, "base"), (args.compare_config, "other")):
            outcome = sim.run(
                args.files,
                workload=args.workload,
                cluster=args.cluster,
                config=config,
                until=args.until,
                period=args.period,
                progress=bar,
                measure=True,
            )
            runs.append(compare.figures(outcome, _run_name(config, name)))
            results.append((outcome, output.to_json(outcome)))
    finally:
        if bar is not None:
            bar.close()
    comparison = compare.compare(runs[0], runs[1])
    if args.report is not None:
        sides = [
            report.Side(r.name, o.timeline, j) for r, (o, j) in zip(runs, results, strict=True)
        ]
        report.write_comparison(args.report, sides, comparison.to_json(), title=_title(inputs))
    if args.output == "json":
        sys.stdout.write(json_codec.dumps_indented(comparison.to_json()) + "\n")
    else:
        sys.stdout.write(comparison.to_table())
    return 0


def _run_name(config: Path | None, fallback: str) -> str:
    """A run's name in the comparison: its conf file's name (``default``: none given)."""
    if config is None:
        return "default" if fallback == "base" else fallback
    return config.name


def _title(files: list[Path]) -> str:
    return "kbatch simulation: " + ", ".join(path.name for path in files)


def add_command(commands: "argparse._SubParsersAction[Any]") -> None:
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
        "--compare-config",
        type=Path,
        metavar="CONF",
        help="also run the same inputs under this conf and compare the two runs (per-queue "
        "waits, utilisation, fairness, evictions, jobs started earlier or later)",
    )
    parser.add_argument(
        "--until", metavar="DURATION", help="stop at this simulated time (e.g. 10m)"
    )
    parser.add_argument(
        "--period", default="1s", metavar="DURATION", help="scheduling period (default 1s)"
    )
    parser.add_argument("-o", "--output", choices=("table", "json"), default="table")
    parser.add_argument("--report", type=Path, metavar="FILE.html", help="write plots here")
    parser.add_argument(
        "--progress", action="store_true", help="show a progress bar even when not on a terminal"
    )
    _what_if_options(parser)
    parser.set_defaults(command=simulate)


def _what_if_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--from-cluster",
        action="store_true",
        help="add the FILEs' objects to the live cluster, as if submitted now: whether each "
        "group is admitted, where and when it starts (reads the cluster, writes nothing)",
    )
    parser.add_argument(
        "--kubeconfig",
        metavar="FILE",
        help="with --from-cluster: default $KUBECONFIG, ~/.kube/config or in-cluster",
    )
    parser.add_argument(
        "--eta-budget",
        default="30s",
        metavar="DURATION",
        help="with --from-cluster: stop simulating after this long (default 30s)",
    )
