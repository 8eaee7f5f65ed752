"""What ``kbatch simulate`` imports: a simulation loads neither the HTML report's
templating (jinja2), nor the flight recorder (a run that records nothing) or the
reader and writer of its segments (gzip), nor the operators' Kubernetes layers, which
only cost start-up time; ``--report`` still loads the report."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[3]
# Runs kbatch simulate in a fresh interpreter, then prints which of these it imported.
PROBE = """
import contextlib, io, json, sys
from kbatch.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    status = main.main(sys.argv[1:])
names = ("jinja2", "kubernetes", "kopf", "aiohttp", "prometheus_client", "kbatch.sim.report",
         "kbatch.record.store.recorder", "kbatch.record.store.hooks",
         "kbatch.record.store.segments", "gzip")
print(json.dumps([status, sorted(n for n in names if n in sys.modules)]))
"""


def _imported(tmp_path: Path, *extra: str) -> tuple[int, list[str]]:
    files = [str(ROOT / "examples" / "sim-cluster.yaml"), str(ROOT / "examples" / "gang-job.yaml")]
    done = subprocess.run(
        [sys.executable, "-c", PROBE, "simulate", *files, "--until", "2m", *extra],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    )
    status, names = json.loads(done.stdout)
    return status, names


def test_a_simulation_loads_no_outer_layer(tmp_path: Path) -> None:
    assert _imported(tmp_path) == (0, [])


def test_the_report_is_loaded_when_asked_for(tmp_path: Path) -> None:
    status, names = _imported(tmp_path, "--report", str(tmp_path / "r.html"))
    assert status == 0
    assert {"jinja2", "kbatch.sim.report"} <= set(names)
    assert (tmp_path / "r.html").is_file()
