"""``kbatch bench --armada-sim``: Armada's own simulator beside kbatch's, on the same
workload and cluster files (Armada's ``internal/scheduler/simulator/testdata``, a copy of
which lives in ``../shared/armada-simulator-testdata``).

For each workload × cluster pair, each simulator runs in a process of its own, in turn
(Armada's first, then kbatch's, repeated ``rounds`` times; the fastest wall and cpu
times of each are kept): Armada's ``simulator --workloads W --clusters C --outputDir D``
with its built-in scheduling config, and ``kbatch simulate --output json --workload W
--cluster C`` with kbatch's default conf (or ``--kbatch-conf``), both with the same
scheduling cycle (Armada's default, 10 s). Their decisions are read into one shape
(``kbatch.bench.armada_decisions``) and printed as one JSON line per pair; the end
prints a markdown table.

Before the first pair, kbatch's simulator runs once untimed on it, free to write the
compiled bytecode of the modules it imports (``warm_up``): Armada's time counts no Go
build either, and an installed package carries its bytecode, while a checkout run with
``PYTHONDONTWRITEBYTECODE`` set would otherwise compile every module from source in
every timed run.

Armada's simulator comes from ``scripts/provision-armada-sim.sh`` (its cache folder);
``--armada-bin`` names another.
"""

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kbatch.api.duration import parse_duration
from kbatch.bench import armada_decisions as decisions
from kbatch.bench import parquet

ARMADA_VERSION = "v0.22.7"  # as scripts/provision-armada-sim.sh pins it
DEFAULT_PERIOD = 10  # seconds: Armada's simulator's default schedulerCyclePeriodSeconds
TESTDATA_NAME = "armada-simulator-testdata"
# The WorkloadSpec's durations (field names lowercased, as Armada's decoder matches them)
DURATIONS = frozenset(
    ("minimum", "tailmean", "earliestsubmittime", "earliestsubmittimefromdependencycompletion")
)
Json = dict[str, Any]


@dataclass(frozen=True)
class Options:
    testdata: Path
    armada_bin: Path
    pairs: Sequence[tuple[Path, Path]] = ()  # (workload, cluster); empty: every pair
    rounds: int = 1
    period: int = DEFAULT_PERIOD
    timeout: float = 900.0
    workdir: Path | None = None
    kbatch_conf: Path | None = None  # kbatch's scheduler conf (None: its default)
    python: Sequence[str] = field(default_factory=lambda: (sys.executable,))


def default_armada_bin() -> Path:
    cache = Path(os.environ.get("KBATCH_CACHE") or Path.home() / ".cache" / "kbatch")
    return cache / "armada" / ARMADA_VERSION / "bin" / "simulator"


def default_testdata() -> Path | None:
    """``shared/armada-simulator-testdata`` beside the checkout (or beside its folder)."""
    checkout = Path(__file__).resolve().parents[2]
    for root in (checkout.parent, checkout.parent.parent):
        candidate = root / "shared" / TESTDATA_NAME
        if candidate.is_dir():
            return candidate
    return None


def all_pairs(testdata: Path) -> list[tuple[Path, Path]]:
    """Every workload (``workloads/**/*.yaml``) with every cluster (``clusters/*.yaml``)."""
    workloads = sorted((testdata / "workloads").rglob("*.yaml"))
    clusters = sorted((testdata / "clusters").glob("*.yaml"))
    return [(w, c) for w in workloads for c in clusters]


def armada_workload(workload: Path, dest: Path) -> Path:
    """The WorkloadSpec as Armada's simulator decodes it: the same file with each
    duration (``"6m"``) written as the ``{seconds, nanos}`` map of its protobuf Duration
    (v0.22.7's decoder has no hook from a string, so its own test data fails there)."""
    document = yaml.safe_load(workload.read_text(encoding="utf-8"))

    def rewrite(value: Any, where: str) -> Any:
        if isinstance(value, dict):
            if "numTimes" in value or "numtimes" in value:  # repeat: {numTimes, period}
                value = {
                    k: _duration(v, f"{where}.{k}") if str(k).lower() == "period" else v
                    for k, v in value.items()
                }
            return {
                k: _duration(v, f"{where}.{k}")
                if str(k).lower() in DURATIONS
                else rewrite(v, f"{where}.{k}")
                for k, v in value.items()
            }
        if isinstance(value, list):
            return [rewrite(v, f"{where}[{i}]") for i, v in enumerate(value)]
        return value

    dest.write_text(yaml.safe_dump(rewrite(document, str(workload))), encoding="utf-8")
    return dest


def _duration(value: Any, where: str) -> Any:
    if isinstance(value, dict) or value is None:  # already a map (or absent)
        return value
    seconds = parse_duration(value, where)
    whole = int(seconds)
    return {"seconds": whole, "nanos": round((seconds - whole) * 1e9)}


def run_armada(options: Options, workload: Path, cluster: Path, workdir: Path) -> Json:
    out = workdir / "armada-out"
    try:
        decodable = armada_workload(workload, workdir / "armada-workload.yaml")
    except (OSError, ValueError, yaml.YAMLError) as exc:
        return {"wall_seconds": 0.0, "cpu_seconds": 0.0, "error": f"{workload}: {exc}"}
    command = [
        str(options.armada_bin),
        *("--workloads", str(decodable), "--clusters", str(cluster)),
        *("--outputDir", str(out), "--overwriteOutputDir"),
        *("--schedulerCyclePeriodSeconds", str(options.period)),
    ]
    seconds, error = _timed(command, workdir / "armada.log", options.timeout)
    timed = {"wall_seconds": seconds[0], "cpu_seconds": seconds[1]}
    if error:
        return {**timed, "error": error}
    try:
        runs = decisions.armada_runs(out / "jobs.parquet")
    except parquet.ParquetError as exc:
        return {**timed, "error": str(exc)}
    big = decisions.big_job(workload)
    found = decisions.armada_decisions(runs, big, decisions.cluster_cpu(cluster))
    return {**timed, **found}


def run_kbatch(options: Options, workload: Path, cluster: Path, workdir: Path) -> Json:
    output = workdir / "kbatch.json"
    seconds, error = _timed(
        kbatch_command(options, workload, cluster), workdir / "kbatch.log", options.timeout, output
    )
    timed = {"wall_seconds": seconds[0], "cpu_seconds": seconds[1]}
    if error:
        return {**timed, "error": error}
    try:
        result = json.loads(output.read_text(encoding="utf-8"))
        found = decisions.kbatch_decisions(result, decisions.big_job(workload))
    except (ValueError, KeyError, TypeError) as exc:
        return {**timed, "error": f"kbatch's output: {exc}"}
    return {**timed, **found}


def warm_up(options: Options, workload: Path, cluster: Path, workdir: Path) -> str | None:
    """kbatch's simulator once on the pair, untimed, with Python free to write the
    bytecode of what it imports (``PYTHONDONTWRITEBYTECODE`` left out of its
    environment): the timed runs then load it as an installed package's. Why it failed,
    or None (a failure here shows again in the timed runs)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    try:
        done = subprocess.run(
            kbatch_command(options, workload, cluster),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            timeout=options.timeout,
            check=False,
            cwd=workdir,  # not a checkout, whose kbatch/ would shadow the installed
            env=env,
        )
    except (subprocess.TimeoutExpired, OSError) as exc:
        return str(exc)
    if done.returncode != 0:
        return done.stderr.decode(errors="replace").strip()[-300:] or f"exit {done.returncode}"
    return None


def kbatch_command(options: Options, workload: Path, cluster: Path) -> list[str]:
    """``kbatch simulate`` on the pair, its JSON on stdout."""
    return [
        *options.python,
        *("-m", "kbatch.cli.main", "simulate", "--output", "json"),
        *("--workload", str(workload), "--cluster", str(cluster)),
        *("--period", f"{options.period}s"),
        *(("--config", str(options.kbatch_conf.resolve())) if options.kbatch_conf else ()),
    ]


def _timed(
    command: list[str], log: Path, timeout: float, stdout: Path | None = None
) -> tuple[tuple[float, float], str | None]:
    """Run ``command`` (its output to ``log``, or stdout to ``stdout``): its wall and cpu
    (user + system) seconds and, when it failed, why (the log's last line). The cpu
    seconds are the child's own, which other work on the machine barely changes."""
    before = _children_cpu()
    started = time.perf_counter()
    with log.open("wb") as err:
        out = stdout.open("wb") if stdout is not None else None
        try:
            done = subprocess.run(
                command,
                stdout=out or err,
                stderr=err,
                timeout=timeout,
                check=False,
                cwd=log.parent,  # not a checkout, whose kbatch/ would shadow the installed
            )
            error = None
        except subprocess.TimeoutExpired:
            error = f"still running after {timeout:g} s"
        except OSError as exc:
            error = f"{command[0]}: {exc.strerror or exc}"
        finally:
            if out is not None:
                out.close()
    seconds = (time.perf_counter() - started, _children_cpu() - before)
    if error is None and done.returncode != 0:
        lines = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()
        last = lines[-1] if lines else "(no output)"
        error = f"exit status {done.returncode}: {last[-300:]}"
    return seconds, error


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def compare_pair(options: Options, workload: Path, cluster: Path, workdir: Path) -> Json:
    """One pair: each simulator ``rounds`` times in turn; the fastest wall time of each,
    the decisions of its last run (a seeded workload repeats them; without a randomSeed
    Armada's simulator seeds from the clock)."""
    results: dict[str, Json] = {}
    runners: dict[str, Callable[[Options, Path, Path, Path], Json]] = {
        "armada": run_armada,
        "kbatch": run_kbatch,
    }
    for _ in range(options.rounds):
        for name, runner in runners.items():
            result = runner(options, workload, cluster, workdir)
            best = results.get(name)
            if best is not None and "error" not in result:
                for key in ("wall_seconds", "cpu_seconds"):
                    result[key] = min(result[key], best[key])
            results[name] = result
    line: Json = {
        "workload": _relative(workload, options.testdata),
        "cluster": _relative(cluster, options.testdata),
        "period_seconds": options.period,
        "rounds": options.rounds,
        "kbatch_conf": str(options.kbatch_conf) if options.kbatch_conf else "default",
        **results,
    }
    armada, kbatch = results["armada"], results["kbatch"]
    if "error" not in armada and "error" not in kbatch and kbatch["wall_seconds"] > 0:
        line["kbatch_speedup"] = armada["wall_seconds"] / kbatch["wall_seconds"]
        if kbatch["cpu_seconds"] > 0:
            line["kbatch_cpu_speedup"] = armada["cpu_seconds"] / kbatch["cpu_seconds"]
    return line


def _relative(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def main(options: Options, out: Callable[[str], None] = print) -> int:
    if not options.armada_bin.is_file():
        print(
            f"kbatch bench --armada-sim: no Armada simulator at {options.armada_bin}: "
            "run scripts/provision-armada-sim.sh (or give --armada-bin)",
            file=sys.stderr,
        )
        return 2
    pairs = list(options.pairs) or all_pairs(options.testdata)
    if not pairs:
        print(f"kbatch bench --armada-sim: no pairs in {options.testdata}", file=sys.stderr)
        return 2
    lines = []
    with tempfile.TemporaryDirectory(prefix="kbatch-bench-armada-") as temporary:
        workdir = options.workdir or Path(temporary)
        failed = warm_up(options, *pairs[0], workdir)
        if failed is not None:
            print(f"kbatch bench --armada-sim: warming up: {failed}", file=sys.stderr)
        for workload, cluster in pairs:
            line = compare_pair(options, workload, cluster, workdir)
            out(json.dumps(line, sort_keys=True))
            lines.append(line)
    print(table(lines), file=sys.stderr)
    return 1 if any("error" in line[s] for line in lines for s in ("armada", "kbatch")) else 0


# --------------------------------------------------------------------------- the table
def table(lines: Sequence[Json]) -> str:
    """A markdown table: per pair, each figure as ``Armada / kbatch``."""
    head = (
        "| workload | cluster | wall s (Armada / kbatch) | cpu s | first big job's wait s "
        "| p50 / p99 wait s per queue | cpu while work waits |"
    )
    rows = [head, "|" + " --- |" * 7]
    for line in lines:
        a, k = line["armada"], line["kbatch"]
        queues = sorted({*a.get("queues", {}), *k.get("queues", {})})
        waits = "; ".join(f"{q}: {_wait(a, q)} / {_wait(k, q)}" for q in queues) or _error(a, k)
        rows.append(
            f"| {line['workload']} | {line['cluster']} "
            f"| {_number(a['wall_seconds'], 2)} / {_number(k['wall_seconds'], 2)} "
            f"| {_number(a.get('cpu_seconds'), 2)} / {_number(k.get('cpu_seconds'), 2)} "
            f"| {_number(a.get('first_big_job_wait'))} / {_number(k.get('first_big_job_wait'))} "
            f"| {waits} "
            f"| {_percent(a.get('cpu_while_waiting'))} / {_percent(k.get('cpu_while_waiting'))} |"
        )
    return "\n".join(rows)


def _wait(result: Json, queue: str) -> str:
    q = result.get("queues", {}).get(queue)
    if q is None:
        return "–"
    return f"{_number(q['p50'])}, {_number(q['p99'])}"


def _error(armada: Json, kbatch: Json) -> str:
    return "; ".join(
        f"{n}: {r['error']}" for n, r in (("Armada", armada), ("kbatch", kbatch)) if "error" in r
    )


def _number(value: float | None, digits: int = 0) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _percent(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.0f}%"
