"""``kbatch bench --live`` and ``--armada-sim``: kbatch beside its peers (kube-scheduler and
Volcano's scheduler on one API server, Armada's simulator on its testdata)."""

import argparse
from pathlib import Path


def live(args: argparse.Namespace) -> int:
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


def table(args: argparse.Namespace) -> int:
    """``kbatch bench --table FILE...``: the live benchmark's min/median/max table, in
    markdown, from the JSON lines its runs printed (kept in files)."""
    from kbatch.bench import live_figures

    if args.live or args.armada_sim or args.trace or args.topology or args.size:
        raise argparse.ArgumentTypeError(
            "--table goes with none of --live, --armada-sim, --trace, --topology, --size"
        )
    missing = [str(p) for p in args.table if not p.is_file()]
    if missing:
        raise argparse.ArgumentTypeError(f"--table {', '.join(missing)}: no such file")
    try:
        lines = live_figures.read_lines(args.table)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--table {exc}") from None
    print(live_figures.table(live_figures.summary(lines), brief=args.brief))
    return 0


def armada(args: argparse.Namespace) -> int:
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


def add_live_options(parser: argparse.ArgumentParser) -> None:
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
    live.add_argument(
        "--rounds", type=int, default=3, metavar="R", help="rounds (default 3; also --versus-flat)"
    )
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

    _add_table_options(live)


def _add_table_options(live: argparse._ArgumentGroup) -> None:
    """``--table``: the live runs' table, rendered from their kept JSON lines."""
    live.add_argument(
        "--table",
        nargs="+",
        type=Path,
        metavar="FILE",
        help="instead of a run: print the min/median/max table, in markdown, of the JSON "
        "lines that runs of --live printed, kept in these files",
    )
    live.add_argument(
        "--brief",
        action="store_true",
        help="with --table: only the scheduler, client, times, binds/s, p99, memory, CPU "
        "and most pods partly bound",
    )


def add_armada_options(parser: argparse.ArgumentParser) -> None:
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
