"""``kbatch bench``: synthetic clusters through the scheduler, one JSON line per size
(the benchmarks themselves are ``kbatch.bench``)."""

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kbatch.cli import bench_peers, run
from kbatch.cli.replay import add_eta_options, eta_settings

if TYPE_CHECKING:
    from kbatch.sim.trace import TraceSpec


def bench(args: argparse.Namespace) -> int:
    """``kbatch bench``: synthetic clusters through one session, one JSON line per size."""
    from kbatch.bench import scheduling as benchmark

    if args.table:
        return bench_peers.table(args)
    if args.brief:
        raise argparse.ArgumentTypeError("--brief goes with --table only")
    other = args.live or args.eta or args.armada_sim or args.topology or args.trace
    if other and (args.versus_flat or args.queues != "flat:10"):
        raise argparse.ArgumentTypeError(
            "--queues and --versus-flat go with none of --live, --eta, --armada-sim, "
            "--topology, --trace"
        )
    if args.live:
        return bench_peers.live(args)
    if args.kbatch_conf is not None and not (args.trace or args.armada_sim):
        raise argparse.ArgumentTypeError(
            "--kbatch-conf goes with --trace, --live or --armada-sim only (--size and "
            "--backlog run kube-batch's tiers with actions of their own)"
        )
    if args.eta:
        from kbatch.visibility import eta_bench  # (the CLI may know both halves)

        return eta_bench.main()
    if args.armada_sim:
        return bench_peers.armada(args)
    if args.topology:
        return _bench_topology(args)
    sizes = [_size(text) for text in args.size] if args.size else None
    if args.record_cost:
        return _bench_record_cost(args, sizes)
    if args.trace:
        from kbatch.sim import trace

        try:
            spec = trace.TraceSpec(
                args.trace_nodes, args.trace_hours, args.trace_seed, args.trace_declared_runtimes
            )
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        if args.eta_accuracy:
            return _trace_eta_accuracy(args, spec)
        record = None if args.record is None else (args.record, args.record_max_bytes)
        return benchmark.main(trace=spec, record=record, trace_conf=args.kbatch_conf)
    if args.record is not None:
        raise argparse.ArgumentTypeError("--record goes with --trace only")
    if args.eta_accuracy:
        raise argparse.ArgumentTypeError("--eta-accuracy goes with --trace only")
    return _bench_sizes(args, sizes)


def _bench_sizes(args: argparse.Namespace, sizes: list[tuple[int, int]] | None) -> int:
    """``kbatch bench [--size ...] [--backlog]``, with its queues laid out by ``--queues``;
    with ``--versus-flat``, each size as the tree and as flat queues side by side."""
    from kbatch.bench import scheduling as benchmark
    from kbatch.bench.queue_layout import QueueLayout

    try:
        layout = QueueLayout.parse(args.queues)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--queues {exc}") from None
    if args.versus_flat and layout.depth == 1:
        raise argparse.ArgumentTypeError(
            f"--versus-flat needs a tree to set beside flat queues: --queues tree:AxBxC, "
            f"not {layout}"
        )
    if args.versus_flat and args.rounds < 1:
        raise argparse.ArgumentTypeError(f"--rounds {args.rounds}: must be at least 1")
    rounds = args.rounds if args.versus_flat else None
    return benchmark.main(sizes, backlog=args.backlog, layout=layout, versus_flat_rounds=rounds)


def _bench_record_cost(args: argparse.Namespace, sizes: list[tuple[int, int]] | None) -> int:
    """``kbatch bench --record-cost``: sessions with the flight recorder off and on, in
    turns (``kbatch.bench.record_cost``); one JSON line per size."""
    from kbatch.bench import record_cost

    if args.trace or args.record is not None or args.rounds < 1:
        raise argparse.ArgumentTypeError(
            "--record-cost goes with neither --trace nor --record, and --rounds at least 1"
        )
    return record_cost.main(sizes, args.backlog, args.rounds)


def _trace_eta_accuracy(args: argparse.Namespace, spec: "TraceSpec") -> int:
    """``kbatch bench --trace --eta-accuracy``: the ETA backtested on the simulated day as
    it runs (``kbatch.record.eta_day``), printed as ``kbatch replay --eta-accuracy``
    prints it (``-o json``: one JSON object)."""
    from kbatch import json_codec
    from kbatch.record import eta_accuracy, eta_day

    if args.record is not None:
        raise argparse.ArgumentTypeError("--eta-accuracy goes without --record")
    shown = eta_day.backtest(spec, eta_settings(args))
    print(json_codec.dumps_indented(shown) if args.output == "json" else eta_accuracy.text(shown))
    return 0


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


def add_command(commands: "argparse._SubParsersAction[Any]") -> None:
    parser = commands.add_parser(
        "bench",
        help="time one scheduling session on synthetic clusters",
        description="Run synthetic clusters (gangs of 10 tasks of 1 cpu / 2Gi, nodes of "
        "32 cpu / 128Gi, 10 queues or --queues') through one session, each size in a "
        "fresh process; print one JSON line per size: nodes, pods, queues, binds, seconds, "
        "snapshot_seconds, peak_rss_mib (that process's peak, interpreter included).",
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
        "--eta",
        action="store_true",
        help="time kbatch explain --eta instead, on 1,000 full nodes with 10,000 pending pods "
        "(1,000 gangs), for a job that starts within minutes and one behind half the "
        "backlog: one JSON line each (seconds, cpu_seconds, open_seconds, sessions, step, "
        "eta_seconds, confidence)",
    )
    _add_queue_options(parser)
    _add_trace_options(parser)
    bench_peers.add_live_options(parser)
    bench_peers.add_armada_options(parser)
    parser.set_defaults(command=bench)


def _add_queue_options(parser: argparse.ArgumentParser) -> None:
    """The options that lay out the queues of ``kbatch bench [--size] [--backlog]``."""
    parser.add_argument(
        "--queues",
        default="flat:10",
        metavar="LAYOUT",
        help="the queues the jobs go to: flat:N, N top-level queues, or tree:AxBxC, a "
        "three-level tree (A top-level queues of B children of C leaves each) with jobs in "
        "the leaves only; leaf i weighs i %% 10 + 1 and an inner queue what its leaves "
        "weigh together, so a leaf's share is the same as in flat:A*B*C (default flat:10)",
    )
    parser.add_argument(
        "--versus-flat",
        action="store_true",
        help="with --queues tree:AxBxC: run each size with the tree and with its leaves as "
        "flat queues (the same jobs and weights), --rounds R times each, alternating, each "
        "in a fresh process; one JSON line per size with both runs' binds, "
        "min/median/max seconds and ratio (median tree / median flat). "
        "The issue's comparison: --size 5000x50000 --queues tree:4x5x5 --versus-flat",
    )


def _add_trace_options(parser: argparse.ArgumentParser) -> None:
    """The options of ``kbatch bench --trace``: the simulated day, and its recording; and
    what recording costs a session."""
    parser.add_argument(
        "--trace",
        action="store_true",
        help="simulate one day of a mixed workload instead (1,000 nodes, 100,000 gangs of "
        "1 to 64 pods, 8 queues, a daily curve of submissions; seeded) under the default "
        "scheduler conf (--kbatch-conf FILE: another) and print one JSON line: simulated "
        "seconds per wall second, sessions, binds, wall seconds, the conf",
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
    parser.add_argument(
        "--trace-declared-runtimes",
        type=float,
        default=0.0,
        metavar="FRACTION",
        help="that share of the jobs (0 to 1, seeded) declare their runtime as "
        "activeDeadlineSeconds on their pods, rounded up to the next minute; the pods still "
        "end at their runtime (default 0: none does)",
    )
    parser.add_argument(
        "--record",
        type=Path,
        metavar="DIR",
        help="with --trace: keep a flight recording of the simulated day in DIR (empty or "
        "new), for kbatch replay",
    )
    parser.add_argument(
        "--record-cost",
        action="store_true",
        help="time a session with the flight recorder off and on instead, hooked as kbatch "
        "run --record hooks it, in turns for --rounds rounds in this process (default size "
        "1000x10000; with --backlog the next session on 1000x50000): one JSON line with "
        "seconds_off, seconds_on, ratio, min/median/max of each, the writer thread's CPU "
        "seconds and the recording's bytes",
    )
    parser.add_argument(
        "--record-max-bytes",
        type=run.byte_size,
        default="1G",
        metavar="SIZE",
        help="the recording's bound on disk (default 1G)",
    )
    add_eta_options(parser, also=" (with --trace: on the simulated day as it runs)")
    parser.add_argument(
        "-o",
        "--output",
        choices=("text", "json"),
        default="text",
        help="with --eta-accuracy: the table, or one JSON object",
    )
