"""``kbatch replay``: the scheduler run again over a flight recording (``kbatch run
--record``, ``kbatch bench --trace --record``), its decisions compared with the recorded
ones (``kbatch.record.replay``)."""

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kbatch import json_codec
from kbatch.api import duration

if TYPE_CHECKING:
    from kbatch.record.eta_accuracy import Settings

EXIT_DIFFERS = 1


def replay(args: argparse.Namespace) -> int:
    from kbatch.record import replay as replaying
    from kbatch.record import replay_split

    if args.config is not None:
        return _play_forward(args)
    if args.report is not None:
        raise argparse.ArgumentTypeError("--report goes with --config")
    start = None if args.start is None else duration.parse_duration(args.start, "--from")
    end = None if args.end is None else duration.parse_duration(args.end, "--to")
    if args.eta_accuracy:
        return _eta_accuracy(args, start, end)
    if args.jobs is None:
        result = replay_split.replay_auto(args.recording, start, end, warn=_warn)
    elif args.jobs > 1:
        result = replay_split.replay_split(args.recording, start, end, args.jobs, warn=_warn)
    else:
        result = replaying.replay(args.recording, start, end, warn=_warn)
    shown = result.as_json()
    if args.output == "json":
        print(json_codec.dumps_indented(shown))
    else:
        print(_text(shown))
    if args.fail_on_difference and shown["decisions"]["differing"]:
        return EXIT_DIFFERS
    return 0


def _play_forward(args: argparse.Namespace) -> int:
    """``--config CONF``: the recorded traffic under the recorded conf and under CONF,
    compared (``kbatch.record.playforward``)."""
    from kbatch.record import playforward

    if args.fail_on_difference:
        raise argparse.ArgumentTypeError("--fail-on-difference goes without --config")
    if args.jobs is not None and args.jobs > 1:
        raise argparse.ArgumentTypeError("--jobs goes without --config")
    start = None if args.start is None else duration.parse_duration(args.start, "--from")
    end = None if args.end is None else duration.parse_duration(args.end, "--to")
    played = playforward.play(args.recording, args.config, start, end, warn=_warn)
    if args.report is not None:
        playforward.write_report(played, args.report)
    shown = played.as_json()
    if args.output == "json":
        sys.stdout.write(json_codec.dumps_indented(shown) + "\n")
    else:
        sys.stdout.write(playforward.to_text(shown, played.comparison().to_table()))
    return 0


def _eta_accuracy(args: argparse.Namespace, start: float | None, end: float | None) -> int:
    """``--eta-accuracy``: the ETA's estimates made while jobs waited, against when they
    really started (``kbatch.record.eta_accuracy``)."""
    from kbatch.record import eta_accuracy

    if args.jobs is not None and args.jobs > 1:
        raise argparse.ArgumentTypeError("--jobs goes without --eta-accuracy")
    settings = eta_settings(args)
    shown = eta_accuracy.backtest(args.recording, settings, start, end, warn=_warn)
    if args.output == "json":
        print(json_codec.dumps_indented(shown))
    else:
        print(eta_accuracy.text(shown))
    return 0


def eta_settings(args: argparse.Namespace) -> "Settings":
    """The backtest's settings from ``--eta-every``, ``--eta-sample``, ``--eta-seed``,
    ``--eta-keep-finished`` (also ``kbatch bench --trace --eta-accuracy``'s)."""
    from kbatch.record import eta_accuracy

    try:
        return eta_accuracy.Settings(
            duration.parse_duration(args.eta_every, "--eta-every"),
            args.eta_sample,
            args.eta_seed,
            args.eta_keep_finished,
        )
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_eta_options(parser: argparse.ArgumentParser, also: str = "") -> None:
    """The ETA backtest's options (``kbatch replay`` and ``kbatch bench --trace``)."""
    parser.add_argument(
        "--eta-accuracy",
        action="store_true",
        help="backtest the ETA: every --eta-every, forecast the waiting jobs and score "
        "each estimate against when the job really started (median and p90 of "
        f"|error| / wait, by confidence and wait){also}",
    )
    parser.add_argument(
        "--eta-every",
        default="5m",
        metavar="DURATION",
        help="with --eta-accuracy: the time between two forecasts (default 5m)",
    )
    parser.add_argument(
        "--eta-sample",
        type=int,
        default=50,
        metavar="N",
        help="with --eta-accuracy: at most N waiting jobs asked about at each forecast, a "
        "seeded sample when more wait (default 50)",
    )
    parser.add_argument(
        "--eta-seed", type=int, default=0, metavar="SEED", help="the sample's seed (default 0)"
    )
    parser.add_argument(
        "--eta-keep-finished",
        type=int,
        default=0,
        metavar="N",
        help="with --eta-accuracy: keep the last N finished PodGroups with their pods for "
        "the forecast to learn runtimes from, when the recorded cluster deleted them "
        "(default 0: as recorded)",
    )


def _warn(message: str) -> None:
    print(f"kbatch: {message}", file=sys.stderr)


def _text(shown: dict[str, Any]) -> str:
    decisions = shown["decisions"]
    lines = [
        f"recording {shown['recording']} (kbatch {shown['version']['recorded']}): "
        f"{shown['sessions']} sessions replayed in {shown['wall_seconds']} s",
        f"decisions: {decisions['recorded']} recorded, {decisions['replayed']} replayed, "
        f"{decisions['differing']} differing",
    ]
    for kind, counts in shown["by_kind"].items():
        lines.append(
            f"  {kind:<12} {counts['recorded']:>8} {counts['replayed']:>8} {counts['differing']:>8}"
        )
    for number, share in enumerate(shown.get("shares") or (), start=1):
        lines.append(
            f"process {number}: {share['sessions']} sessions from segment "
            f"{share['fromSegment']} in {share['wall_seconds']} s ({share['cpu_seconds']} s CPU)"
        )
    for difference in shown["differences"]:
        lines.append(
            f"session {difference['session']} at {difference['at']} s: {difference['kind']} "
            f"{difference['object']}: recorded {json.dumps(difference['recorded'])}, "
            f"replayed {json.dumps(difference['replayed'])}"
        )
    if shown["stopped"] is not None:
        stop = shown["stopped"]
        lines.append(
            f"stopped early: {stop['file']}: offset {stop['offset']}: {stop['object']}: "
            f"{stop['why']}"
        )
    return "\n".join(lines)


def add_command(commands: "argparse._SubParsersAction[Any]") -> None:
    parser = commands.add_parser(
        "replay",
        help="run the scheduler again over a flight recording and compare its decisions",
        description="Replay a recording of kbatch run --record (or kbatch bench --trace "
        "--record): the recorded changes arrive in their recorded order and times, the "
        "sessions run where they ran, with the recorded conf, and each session's binds, "
        "evictions, nominations and statuses are compared with the recorded ones.",
    )
    parser.add_argument("recording", type=Path, metavar="DIR", help="the recording's directory")
    parser.add_argument(
        "--from",
        dest="start",
        metavar="DURATION",
        help="replay the sessions from this long after the recording's start",
    )
    parser.add_argument(
        "--to", dest="end", metavar="DURATION", help="stop this long after the recording's start"
    )
    parser.add_argument("-o", "--output", choices=("text", "json"), default="text")
    parser.add_argument(
        "--fail-on-difference",
        action="store_true",
        help=f"exit {EXIT_DIFFERS} when a replayed decision differs from the recorded one",
    )
    parser.add_argument(
        "--jobs",
        type=_positive,
        default=None,
        metavar="N",
        help="replay in N processes, each a run of consecutive sessions (each holds a "
        "cluster state of its own); the bind-for-bind replay only. Default: one per core, "
        "but at most one per 64 MB of the window's lines and one more than the "
        "checkpoints in it (1 for a recording of one segment, which has none)",
    )
    _config_options(parser)
    add_eta_options(parser)
    parser.set_defaults(command=replay)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of 1 or more")
    return value


def _config_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        type=Path,
        metavar="CONF",
        help="play the recorded traffic forward in the simulator under the recorded conf "
        "and under CONF, and compare the two (per-queue waits, utilisation, fairness, "
        "evictions, jobs started earlier or later), with how close the recorded conf's "
        "run comes to the recording",
    )
    parser.add_argument(
        "--report",
        type=Path,
        metavar="FILE.html",
        help="with --config: both runs side by side in one HTML file",
    )
