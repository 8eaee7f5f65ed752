"""The documentation site builds, its links hold, and its reference pages say what the code
accepts: every command and flag, every action, plugin, argument and switch, every API
field, every metric — no more, no fewer.

The site is built with ``mkdocs build --strict`` (mkdocs.yml makes a broken link, a
missing anchor or a page left out of the nav a warning, and strict mode fails on one).
The reference is written by hand; these tests hold it to the code, reading the code's
own lists: the ``--help`` of each ``kbatch`` command, the registries of actions and
plugins, each plugin's refusal of an unknown argument (which names the known ones), the
pydantic models, the metrics registry.
"""

import importlib.util
import itertools
import os
import re
import subprocess
import sys
import types
import typing
from pathlib import Path

import pytest
from pydantic import BaseModel

from kbatch.api.podgroup import PodGroup
from kbatch.api.queue import Queue
from kbatch.config import SWITCHES, ConfigError
from kbatch.metrics import SchedulerMetrics
from kbatch.operators.scheduler.core.actions import REGISTRY as ACTIONS
from kbatch.operators.scheduler.core.plugins import REGISTRY as PLUGINS
from kbatch.operators.scheduler.core.runner import load_conf

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
REFERENCE = DOCS / "reference"
KBATCH = Path(sys.executable).with_name("kbatch")  # this venv's console script


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    if importlib.util.find_spec("mkdocs") is None:
        pytest.skip("mkdocs is not installed: pip install -e '.[test]' brings it")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "reference" / "cli" / "index.html").is_file()


def test_the_readme_links_to_pages_that_exist() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", readme)
    local = [link for link in links if "://" not in link]
    assert any(link.startswith("docs/") for link in local), links
    missing = [link for link in local if not (ROOT / link).is_file()]
    assert not missing, missing


# ---------------------------------------------------------------- reading the reference
def sections(markdown: str, level: int) -> dict[str, str]:
    """Heading text -> the text under it, for the headings of ``level`` (2: ``##``)."""
    parts = re.split(rf"^{'#' * level} (.+)$", markdown, flags=re.MULTILINE)
    return {heading.strip(): body for heading, body in zip(parts[1::2], parts[2::2], strict=True)}


def first_cells(body: str) -> list[str]:
    """The first cell of each table row below its header."""
    cells = re.findall(r"^\| (.*?) \|", body, re.MULTILINE)
    return [c for c in cells if not set(c) <= set("-| ")][1:] if cells else []


def names_in_first_cells(body: str) -> set[str]:
    """Every code span's first word in the first cells (``--until DURATION`` -> ``--until``)."""
    return {
        span.split()[0] for cell in first_cells(body) for span in re.findall(r"`([^`]+)`", cell)
    }


def page(name: str) -> str:
    return (REFERENCE / name).read_text(encoding="utf-8")


def test_the_reference_readers_see_what_a_page_holds() -> None:
    """The helpers above fail on a page that misses a row (they are what the tests lean on)."""
    body = "| flag | default |\n|---|---|\n| `--a X` | 1 |\n| `-b`, `--bee` | |\n"
    assert names_in_first_cells(body) == {"--a", "-b", "--bee"}
    assert sections("## one\nx\n## two\ny\n", 2) == {"one": "\nx\n", "two": "\ny\n"}


# ------------------------------------------------------------------------------ the CLI
def kbatch_help(*args: str) -> str:
    done = subprocess.run(
        [str(KBATCH), *args, "--help"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "COLUMNS": "200"},  # one line per option
        timeout=60,
    )
    return done.stdout


def subcommands() -> list[str]:
    listed = kbatch_help().split("positional arguments:")[1].split("options:")[0]
    return re.findall(r"^ {4}(\w+)\s", listed, re.MULTILINE)


def flags_of(command: str) -> set[str]:
    """Every option string of ``kbatch COMMAND`` but -h/--help, from its --help."""
    options = kbatch_help(command).split("options:")[1]
    flags = {
        flag
        for line in re.findall(r"^  (-.*?)(?: {2,}|$)", options, re.MULTILINE)
        for flag in re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", line)
    }
    return flags - {"-h", "--help"}


def test_the_cli_reference_has_every_command_and_flag() -> None:
    documented = sections(page("cli.md"), 2)
    commands = subcommands()
    assert {"simulate", "run", "bench", "queues", "jobs", "explain"} <= set(commands)
    assert set(documented) == {f"kbatch {c}" for c in commands}
    for command in commands:
        flags = names_in_first_cells(documented[f"kbatch {command}"])
        assert flags == flags_of(command), command


# ---------------------------------------------------------------- the scheduler conf
def known_arguments(plugin: str) -> set[str] | None:
    """The arguments ``plugin`` accepts (from its refusal of one it does not), or None
    when it reads none and so refuses nothing."""
    conf = f"actions: allocate\ntiers:\n- plugins:\n  - name: {plugin}\n    arguments: {{zz-not-one: 1}}\n"
    try:
        load_conf(conf)
    except ConfigError as exc:
        (known,) = re.findall(r"\(known: ([^)]*)\)", str(exc))
        return set(known.split(", "))
    return None


def test_the_conf_reference_has_every_action_plugin_argument_and_switch() -> None:
    documented = sections(page("scheduler-conf.md"), 2)
    assert set(sections(documented["Actions"], 3)) == set(ACTIONS)
    plugins = sections(documented["Plugins"], 3)
    assert set(plugins) == set(PLUGINS)
    for name, body in plugins.items():
        known = known_arguments(name)
        if known is None:
            assert "No arguments (any given are ignored)." in body, name
            continue
        # binpack.resources.<name>: a family, which the refusal does not list
        listed = {a for a in names_in_first_cells(body) if "<" not in a}
        assert listed == known, name
    switches = documented["Switches"]
    for switch in SWITCHES:
        assert f"`{switch}`" in switches, switch
    assert set(re.findall(r"`([A-Z]\w+)`", switches.split("How tiers")[0])) == set(SWITCHES)


def test_known_arguments_reads_a_plugin_s_refusal() -> None:
    assert known_arguments("flow") == {"halfLife", "resourceWeights"}
    assert known_arguments("gang") is None


# ------------------------------------------------------------------------------ the API
def field_paths(model: type[BaseModel], prefix: str = "") -> set[str]:
    """Every field of ``model`` as the API spells it (``spec.minMember``); a list of
    models as ``conditions[].type``."""
    paths: set[str] = set()
    for name, info in model.model_fields.items():
        path = prefix + (info.alias or name)
        inner = nested_model(info.annotation)
        if inner is None:
            paths.add(path)
        else:
            suffix = "[]." if inner[1] else "."
            paths |= field_paths(inner[0], path + suffix)
    return paths


def nested_model(annotation: object) -> tuple[type[BaseModel], bool] | None:
    """(the model, whether it is a list of it) inside ``annotation``, or None."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, False
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is tuple and args and isinstance(args[0], type) and issubclass(args[0], BaseModel):
        return args[0], True
    if origin in (typing.Union, types.UnionType):
        found = [nested_model(a) for a in args]
        return next((f for f in found if f is not None), None)
    return None


@pytest.mark.parametrize("model", [PodGroup, Queue], ids=lambda m: m.__name__)
def test_the_api_reference_has_every_field(model: type[BaseModel]) -> None:
    documented = sections(page("api.md"), 2)[model.__name__]
    expected = field_paths(model.model_fields["spec"].annotation, "spec.")  # type: ignore[arg-type]
    expected |= field_paths(model.model_fields["status"].annotation, "status.")  # type: ignore[arg-type]
    assert "spec.minMember" in expected or "spec.weight" in expected
    assert names_in_first_cells(documented) == expected


# -------------------------------------------------------------------------- the metrics
def expand(name: str) -> list[str]:
    """``a_{b,c}_d`` -> ``a_b_d``, ``a_c_d`` (every brace group)."""
    parts = re.split(r"\{([^}]*)\}", name)
    choices = [[p] if i % 2 == 0 else p.split(",") for i, p in enumerate(parts)]
    return ["".join(pick) for pick in itertools.product(*choices)]


def test_the_metrics_page_lists_every_metric() -> None:
    text = (DOCS / "running" / "metrics.md").read_text(encoding="utf-8")
    listed = {n for cell in names_in_first_cells(text) for n in expand(cell)}
    exported = {
        family.name + ("_total" if family.type == "counter" else "")
        for family in SchedulerMetrics().registry.collect()
    }
    assert "kbatch_schedule_attempts_total" in exported
    assert listed == exported
