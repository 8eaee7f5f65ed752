"""The ``kbatch`` command: its parser, and one line for an input it cannot read. Each
subcommand is a module beside this one, thin over the package that does the work.

An input that cannot be read (a missing file, a file that is not YAML, a document
that is not a Kubernetes object, a bad config or duration) prints one line,
``kbatch: error: ...``, on stderr and exits 2 — never a traceback. An object the
API server would refuse is not such an error: ``kbatch simulate`` names it and its
field on stderr, simulates the rest and exits 0.
"""

import argparse
import os
import sys
from collections.abc import Callable
from typing import NoReturn

from kbatch.api import duration
from kbatch.cli import bench, replay, run, simulate, visibility
from kbatch.cluster.errors import ManifestError, ObjectError
from kbatch.config_base import ConfigError
from kbatch.record.store.errors import RecordingError

EXIT_USAGE = 2
# Errors that are the user's input, not a bug: reported in one line.
INPUT_ERRORS = (
    ManifestError,
    ConfigError,
    duration.DurationError,
    ObjectError,
    OSError,
    RecordingError,
)

Command = Callable[[argparse.Namespace], int]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"kbatch: error: {message} (see {self.prog} --help)\n")


def parser() -> argparse.ArgumentParser:
    root = _Parser(prog="kbatch", description="A batch scheduler for Kubernetes")
    commands = root.add_subparsers(dest="subcommand", required=True, metavar="COMMAND")
    simulate.add_command(commands)
    bench.add_command(commands)
    run.add_command(commands)
    replay.add_command(commands)
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
