"""``kbatch bench``: synthetic clusters through the scheduler, one JSON line per size
(the benchmarks themselves are ``kbatch.bench``)."""

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kbatch.cli import run


def bench(args: argparse.Namespace) -> int:
    """``kbatch bench``: synthetic clusters through one session, one JSON line per size."""
    from kbatch.bench import scheduling as benchmark

    if args.live:
        return _bench_live(args)
    if args.kbatch_conf is not None and not (args.trace or args.armada_sim):
        raise argparse.ArgumentTypeError(
            "--kbatch-conf goes with --trace, --live or --armada-sim only (--size and "
            "--backlog run kube-batch's tiers with actions of their own)"
        )
    if args.eta:
        from kbatch.visibility import eta_bench  # (the CLI may know both halves)

        return eta_bench.main()
    if args.armada_sim:
        return _bench_armada(args)
    if args.topology:
        return _bench_topology(args)
    sizes = [_size(text) for text in args.size] if args.size else None
    if args.trace:
        from kbatch.sim import trace

        try:
            spec = trace.TraceSpec(args.trace_nodes, args.trace_hours, args.trace_seed)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        record = None if args.record is None else (args.record, args.record_max_bytes)
        return benchmark.main(trace=spec, record=record, trace_conf=args.kbatch_conf)
    if args.record is not None:
        raise argparse.ArgumentTypeError("--record goes with --trace only")
    return benchmark.main(sizes, backlog=args.backlog)


def _bench_topology(args: argparse.Namespace) -> int:
    """``kbatch bench --topology``: each size twice (gangs preferring a rack, and not),
    each run in a fresh process; one JSON line per size with both times and their ratio."""
    from kbatch.bench import topology as bench_topology

    if args.backlog or args.trace:
        raise argparse.ArgumentTypeError("--topology goes with neither --backlog nor --trace")
    sizes = [_size(text, bench_topology.check_size) for text in args.size] if args.size else None
    return bench_topology.main(sizes)


def _bench_live(args: argparse.Namespace) -> int:
    """``kbatch bench --live``: the schedulers side by side on one API server with KWOK's
    fake nodes; one JSON line per run, then the min/median/max table."""
    from kbatch.bench import live, live_schedulers, live_workload

    if args.trace or args.topology or args.size:
        raise argparse.ArgumentTypeError("--live goes with none of --size, --trace, --topology")
    names = tuple(n.strip() for n in args.schedulers.split(",") if n.strip())
    unknown = [n for n in names if n not in live_workload.SCHEDULERS]
    if unknown or not names or len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(
            f"--schedulers {args.schedulers!r}: a comma-separated list of distinct names "
            f"among {', '.join(live_workload.SCHEDULERS)}"
        )
    if args.kbatch_conf is not None and not args.kbatch_conf.is_file():
        raise argparse.ArgumentTypeError(f"--kbatch-conf {args.kbatch_conf}: no such file")
    try:
        live_schedulers.volcano_conf_text(args.volcano_conf)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if args.rounds < 1:
        raise argparse.ArgumentTypeError(f"--rounds {args.rounds}: must be at least 1")
    try:
        spec = live_workload.scenario(args.scenario, args.nodes, args.pods)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    options = live.Options(
        scenario=spec,
        rounds=args.rounds,
        schedulers=names,
        client_qps=args.client_qps,
        timeout=args.timeout,
        pod_seconds=args.pod_seconds,
        backlog=args.backlog,
        kbatch_conf=args.kbatch_conf,
        volcano_conf=args.volcano_conf,
    )
    return live.main(options)


def _bench_armada(args: argparse.Namespace) -> int:
    """``kbatch bench --armada-sim``: Armada's simulator and kbatch's on the same workload
    and cluster files; one JSON line per pair, then a markdown table."""
    from kbatch.bench import armada_sim

    if args.trace or args.topology or args.size or args.backlog:
        raise argparse.ArgumentTypeError(
            "--armada-sim goes with none of --size, --trace, --topology, --backlog"
        )
    testdata = args.armada_testdata or armada_sim.default_testdata()
    if testdata is None or not testdata.is_dir():
        raise argparse.ArgumentTypeError(
            f"--armada-testdata {testdata or '(not given)'}: no such folder (Armada's "
            f"simulator test data, e.g. ../shared/{armada_sim.TESTDATA_NAME})"
        )
    pairs = []
    for text in args.armada_pair or ():
        workload, sep, cluster = text.partition(":")
        pair = (testdata / workload, testdata / cluster)
        if not sep or not all(p.is_file() for p in pair):
            raise argparse.ArgumentTypeError(
                f"--armada-pair {text!r}: expected WORKLOAD:CLUSTER, two files under {testdata}"
            )
        pairs.append(pair)
    if args.kbatch_conf is not None and not args.kbatch_conf.is_file():
        raise argparse.ArgumentTypeError(f"--kbatch-conf {args.kbatch_conf}: no such file")
    if args.armada_rounds < 1 or args.armada_period < 1:
        raise argparse.ArgumentTypeError("--armada-rounds and --armada-period: at least 1")
    options = armada_sim.Options(
        testdata=testdata,
        armada_bin=args.armada_bin or armada_sim.default_armada_bin(),
        pairs=pairs,
        rounds=args.armada_rounds,
        period=args.armada_period,
        timeout=args.timeout,
        kbatch_conf=args.kbatch_conf,
    )
    return armada_sim.main(options)


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
        "--eta",
        action="store_true",
        help="time kbatch explain --eta instead, on 1,000 full nodes with 10,000 pending pods "
        "(1,000 gangs), for a job that starts within minutes and one behind half the "
        "backlog: one JSON line each (seconds, cpu_seconds, open_seconds, sessions, step, "
        "eta_seconds, confidence)",
    )
    _add_trace_options(parser)
    _add_live_options(parser)
    _add_armada_options(parser)
    parser.set_defaults(command=bench)


def _add_trace_options(parser: argparse.ArgumentParser) -> None:
    """The options of ``kbatch bench --trace``: the simulated day, and its recording."""
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
        "--record",
        type=Path,
        metavar="DIR",
        help="with --trace: keep a flight recording of the simulated day in DIR (empty or "
        "new), for kbatch replay",
    )
    parser.add_argument(
        "--record-max-bytes",
        type=run.byte_size,
        default="1G",
        metavar="SIZE",
        help="the recording's bound on disk (default 1G)",
    )


def _add_live_options(parser: argparse.ArgumentParser) -> None:
    """The options of ``kbatch bench --live``, in a group of their own."""
    live = parser.add_argument_group(
        "live",
        "--live: kbatch, kube-scheduler and Volcano's scheduler side by side on one local "
        "API server with KWOK's fake nodes (binaries from the control-plane cache and "
        "scripts/provision-bench-peers.sh); one JSON line per run, then a min/median/max "
        "table. A benchmark, not a test: run it on a quiet machine.",
    )
    live.add_argument(
        "--live",
        action="store_true",
        help="run the live side-by-side benchmark (with --backlog: the pods are all created "
        "before each scheduler starts, and the time to all bound counts from its start)",
    )
    live.add_argument(
        "--scenario",
        default="a",
        choices=("a", "b", "c", "d"),
        help="a: 10,000 single-pod jobs on 1,000 nodes; b: 1,000 gangs of 10 on 1,000 nodes; "
        "c: 50,000 pods in gangs of 10 to 100 over 10 weighted queues on 5,000 nodes; d: "
        "restart, 20,000 pods in gangs of 10 created while the scheduler is down on 5,000 "
        "nodes, timed from a new one's start (default a)",
    )
    live.add_argument(
        "--nodes",
        type=int,
        metavar="N",
        help="fake nodes (default: the scenario's); the pods scale with them unless --pods",
    )
    live.add_argument("--pods", type=int, metavar="N", help="pods (default: the scenario's)")
    live.add_argument("--rounds", type=int, default=3, metavar="R", help="rounds (default 3)")
    live.add_argument(
        "--schedulers",
        default="kbatch,kube-scheduler,volcano",
        metavar="LIST",
        help="which to run, comma-separated (default kbatch,kube-scheduler,volcano)",
    )
    live.add_argument(
        "--client-qps",
        type=float,
        metavar="QPS",
        help="give the peers' clients this QPS and burst (kbatch's client has no limit); "
        "default: each peer's own defaults",
    )
    live.add_argument(
        "--kbatch-conf",
        type=Path,
        metavar="FILE",
        help="kbatch's scheduler conf (e.g. the chart's), here and with --armada-sim or "
        "--trace; default: its default conf",
    )
    live.add_argument(
        "--volcano-conf",
        default="default",
        metavar="CONF",
        help="Volcano's scheduler conf: default (its built-in conf), kbatch (kbatch's default "
        "conf: the same plugins but Volcano's overcommit), or a FILE",
    )
    live.add_argument(
        "--timeout", type=float, default=900.0, metavar="S", help="a run's limit (default 900)"
    )
    live.add_argument(
        "--pod-seconds",
        type=float,
        default=3600.0,
        metavar="S",
        help="how long a fake pod runs before it succeeds (default 3600)",
    )


def _add_armada_options(parser: argparse.ArgumentParser) -> None:
    """The options of ``kbatch bench --armada-sim``, in a group of their own."""
    armada = parser.add_argument_group(
        "armada",
        "--armada-sim: Armada's own simulator (scripts/provision-armada-sim.sh builds it) "
        "and kbatch's on the same workload x cluster files, with the same scheduling "
        "cycle; one JSON line per pair (each one's wall seconds and decisions), then a "
        "markdown table on stderr. --timeout limits each run; --kbatch-conf gives kbatch's "
        "scheduler conf.",
    )
    armada.add_argument(
        "--armada-sim", action="store_true", help="run Armada's simulator beside kbatch's"
    )
    armada.add_argument(
        "--armada-bin", type=Path, metavar="FILE", help="Armada's simulator (default: the cache's)"
    )
    armada.add_argument(
        "--armada-testdata",
        type=Path,
        metavar="DIR",
        help="the workloads/ and clusters/ folder (default: ../shared/armada-simulator-testdata)",
    )
    armada.add_argument(
        "--armada-pair",
        action="append",
        metavar="WORKLOAD:CLUSTER",
        help="one pair, paths under the test data (repeatable; default: every workload with "
        "every cluster)",
    )
    armada.add_argument(
        "--armada-rounds",
        type=int,
        default=1,
        metavar="R",
        help="run each simulator R times in turn; the fastest wall time counts (default 1)",
    )
    armada.add_argument(
        "--armada-period",
        type=int,
        default=10,
        metavar="S",
        help="the scheduling cycle of both, in seconds (default 10, Armada's default)",
    )
