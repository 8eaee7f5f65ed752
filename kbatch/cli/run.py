"""``kbatch run``: the scheduler, its controllers and the admission webhooks in one kopf
process against a cluster (``kbatch.operators.process``), until interrupted."""

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kbatch.api import DEFAULT_SCHEDULER_NAMES, duration
from kbatch.cli import run_workers

if TYPE_CHECKING:
    from kbatch.record.store.recorder import Recorder

EXIT_NO_CLUSTER = 1  # no kubeconfig or in-cluster credentials to schedule with


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
    try:
        api = kubeapi.api_client(args.kubeconfig)
    except Exception as exc:  # the client's ConfigException, or a kubeconfig file's error
        where = f" (--kubeconfig {args.kubeconfig})" if args.kubeconfig else ""
        print(f"kbatch: error: no cluster to schedule{where}: {exc}", file=sys.stderr)
        return EXIT_NO_CLUSTER
    recorder = _recorder(args, names)  # (a recording refused before anything starts)
    # The lists start before kopf and the scheduler load (about a second): the API
    # server prepares them meanwhile (10,000 pods take it seconds).
    watches = Watches(api, names)
    if recorder is not None:
        watches.state.observer = recorder  # before the first list: every object recorded
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
    process.run(settings, watches, recorder, run_workers.Workers(args, period, names).makers())
    return 0


def _recorder(args: argparse.Namespace, names: frozenset[str]) -> "Recorder | None":
    """The flight recorder ``--record`` asks for, on the monotonic clock the cluster
    state assumes binds by."""
    if args.record is None:
        return None
    import time

    from kbatch.cluster.assumed import ASSUMED_TTL
    from kbatch.record.store import recorder

    header = recorder.state_header(names, False, ASSUMED_TTL, "monotonic")
    return recorder.Recorder(
        args.record,
        args.record_max_bytes,
        time.monotonic,
        header,
        checkpoint_bytes=args.record_checkpoint_every,
    )


def byte_size(text: str) -> int:
    """A size in bytes: a number, or one with K, M or G (powers of 1024)."""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    number, unit = (text[:-1], units[text[-1].upper()]) if text[-1:].upper() in units else (text, 1)
    try:
        return int(float(number) * unit)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 256M)") from None


def add_command(commands: "argparse._SubParsersAction[Any]") -> None:
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
    _add_webhook_options(parser)
    _add_record_and_eta_options(parser)
    run_workers.add_options(parser)
    parser.add_argument(
        "--log-level", default="info", choices=("debug", "info", "warning", "error")
    )
    parser.set_defaults(command=run)


def _add_record_and_eta_options(parser: argparse.ArgumentParser) -> None:
    """The flight recording (``--record``) and the published ETA (``--eta-*``)."""
    parser.add_argument(
        "--record",
        type=Path,
        metavar="DIR",
        help="keep a flight recording in DIR (empty or new): what the scheduler reads "
        "and decides, for kbatch replay",
    )
    parser.add_argument(
        "--record-max-bytes",
        type=byte_size,
        default="256M",
        metavar="SIZE",
        help="the recording's bound on disk; the oldest segments go first (default 256M)",
    )
    parser.add_argument(
        "--record-checkpoint-every",
        type=byte_size,
        default="16M",
        metavar="SIZE",
        help="start a new segment from a checkpoint (the state then) at least every SIZE "
        "of compressed records, so that kbatch replay --from or --jobs reads from the "
        "last one before it (default 16M)",
    )
    parser.add_argument(
        "--eta-interval",
        default="30s",
        metavar="DURATION",
        help="publish each waiting PodGroup's estimated start (a condition and a metric) "
        "at most this often (default 30s; 0 to turn off)",
    )
    parser.add_argument(
        "--eta-budget",
        default="10s",
        metavar="DURATION",
        help="stop each ETA forecast after this long (default 10s)",
    )


def _add_webhook_options(parser: argparse.ArgumentParser) -> None:
    """Where and how the process serves the admission webhooks (off by default)."""
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
