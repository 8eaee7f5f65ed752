"""The helm and prometheus binaries the chart and dashboard tests use.

Found through ``KBATCH_HELM`` / ``KBATCH_PROMETHEUS`` (paths to the binaries),
else in the folder scripts/install-tools.sh fills
(``${KBATCH_CACHE:-~/.cache/kbatch}/tools/bin``), else on PATH. A test that
needs one and finds none skips with one line saying how to get it.
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "kbatch"
INSTALL_SCRIPT = "scripts/install-tools.sh"


def cache_bin_dir() -> Path:
    base = os.environ.get("KBATCH_CACHE") or str(Path.home() / ".cache" / "kbatch")
    return Path(base) / "tools" / "bin"


def find_tool(name: str) -> Path | None:
    explicit = os.environ.get(f"KBATCH_{name.upper()}")
    if explicit:
        path = Path(explicit).expanduser()
        return path if path.is_file() and os.access(path, os.X_OK) else None
    cached = cache_bin_dir() / name
    if cached.is_file() and os.access(cached, os.X_OK):
        return cached
    found = shutil.which(name)
    return Path(found) if found else None


def require_tool(name: str, module: bool = False) -> Path:
    """The tool, or a skip saying how to get it (``module=True``: skip the whole
    module, one line in the report, when called at import)."""
    path = find_tool(name)
    if path is None:
        pytest.skip(
            f"{name} not found: run {INSTALL_SCRIPT} or set KBATCH_{name.upper()} to the binary",
            allow_module_level=module,
        )
    return path


def require_control_plane() -> None:
    """Skip the calling module, in one line, when the e2e suite has no cluster to use."""
    from e2e.controlplane import Unavailable, discover

    try:
        discover()
    except Unavailable as why:
        pytest.skip(f"e2e: no control plane: {why}", allow_module_level=True)


@functools.cache
def _helm_home() -> Path:
    home = Path(tempfile.mkdtemp(prefix="kbatch-helm-home-"))
    atexit.register(shutil.rmtree, home, ignore_errors=True)
    return home


def helm(
    *args: str, check: bool = True, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run helm with a throwaway home (none of the user's repositories, plugins or cache)."""
    binary = require_tool("helm")
    home = _helm_home()
    helm_env = {
        **os.environ,
        "HELM_CONFIG_HOME": str(home / "config"),
        "HELM_CACHE_HOME": str(home / "cache"),
        "HELM_DATA_HOME": str(home / "data"),
        **(env or {}),
    }
    result = subprocess.run(
        [str(binary), *args], capture_output=True, text=True, env=helm_env, timeout=300
    )
    if check and result.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
    return result


def template(
    *values: str, namespace: str = "kbatch-system", release: str = "kbatch"
) -> list[dict[str, Any]]:
    """``helm template`` of the chart; ``values`` are --set/--values style arguments."""
    result = helm("template", release, str(CHART), "--namespace", namespace, *values)
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def by_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def one(objects: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = [o for o in by_kind(objects, kind) if name is None or o["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]
