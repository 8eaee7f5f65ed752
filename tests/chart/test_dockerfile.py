"""The Dockerfile's invariants (there is no Docker engine here to build it):
a pinned base, a non-root user, the `kbatch run` entrypoint, and the chart's
default image is the one the Dockerfile says it builds."""

from __future__ import annotations

import json
import re

import yaml

from chart.tools import CHART, ROOT

DOCKERFILE = ROOT / "Dockerfile"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments), continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def final_stage() -> list[tuple[str, str]]:
    steps = instructions()
    last_from = max(i for i, (word, _) in enumerate(steps) if word == "FROM")
    return steps[last_from:]


def test_every_base_image_is_pinned() -> None:
    froms = [args.split() for word, args in instructions() if word == "FROM"]
    stages = {parts[-1] for parts in froms if len(parts) == 3 and parts[1].upper() == "AS"}
    bases = [parts[0] for parts in froms if parts[0] not in stages]
    assert bases
    for base in bases:
        pinned_digest = re.fullmatch(r"[\w./-]+(:[\w.-]+)?@sha256:[0-9a-f]{64}", base)
        pinned_tag = re.fullmatch(r"python:\d+\.\d+\.\d+-slim-[a-z]+", base)
        assert pinned_digest or pinned_tag, f"{base}: pin an exact version or a digest"


def test_the_image_runs_as_a_non_root_user() -> None:
    users = [args for word, args in final_stage() if word == "USER"]
    assert users, "the final stage must set USER"
    user = users[-1].split(":")[0]
    assert user not in {"root", "0"}
    assert user.isdigit(), "a numeric uid lets Kubernetes check runAsNonRoot"
    pod = yaml.safe_load((CHART / "values.yaml").read_text())["podSecurityContext"]
    assert pod["runAsUser"] == int(user)


def test_the_entrypoint_is_kbatch_run() -> None:
    entrypoints = [args for word, args in final_stage() if word == "ENTRYPOINT"]
    assert entrypoints
    assert json.loads(entrypoints[-1]) == ["kbatch", "run"]  # exec form: signals reach kbatch


def test_the_charts_default_image_is_what_the_dockerfile_builds() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    (built,) = re.findall(r"docker build -t (\S+) \.", DOCKERFILE.read_text())
    repository, _, tag = built.rpartition(":")
    assert values["image"]["repository"] == repository
    assert values["image"]["tag"] in ("", tag)
    assert chart["appVersion"] == tag
    labels = dict(re.findall(r'([\w.]+)="([^"]*)"', dict(final_stage())["LABEL"]))
    assert labels["org.opencontainers.image.version"] == tag
    from kbatch import __version__

    assert __version__ == tag


def test_the_build_context_holds_what_pip_install_needs() -> None:
    ignored = (ROOT / ".dockerignore").read_text().splitlines()
    allowed = {line[1:].rstrip("/") for line in ignored if line.startswith("!")}
    copied = set()
    for word, args in instructions():
        if word == "COPY" and not args.startswith("--from"):
            copied.update(args.split()[:-1])
    assert copied <= allowed
    assert {"pyproject.toml", "setup.py", "kbatch", "operators", "webhooks"} <= copied
    assert all((ROOT / path).exists() for path in copied)
