"""scripts/run.sh prints kbatch's output and nothing else: what venv, pip and
setuptools say while it sets up .venv (setuptools' "Please be careful with folders
... same name as your package" among it) goes to .venv/install.log, shown only when
the install fails.

Run in a copy of the script's folder with a stand-in ``python3`` first on PATH (it
makes a venv whose pip talks and whose ``kbatch`` echoes its arguments): the
repository's own .venv is never touched, and no package index is asked.
"""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
WARNING = "Please be careful with folders in your working directory with the same name"

# The stand-in python3: `python3 -m venv DIR` makes DIR/bin/python, a copy of itself;
# that one's `-m pip install ...` talks on both streams as pip and setuptools do (and
# fails when FAKE_PIP_FAILS is set), and `pip install -e ROOT` makes DIR/bin/kbatch.
FAKE_PYTHON = f"""#!/usr/bin/env bash
echo "$0 $*" >>"$FAKE_CALLS"
if [ "$1 $2" = "-m venv" ]; then
  mkdir -p "$3/bin" && cp "$0" "$3/bin/python" && exit 0
fi
if [ "$1 $2 $3" = "-m pip install" ]; then
  echo "Collecting setuptools"
  echo "{WARNING} as your package." >&2
  if [ -n "${{FAKE_PIP_FAILS:-}}" ]; then echo "ERROR: no such package" >&2; exit 1; fi
  if [[ " $* " == *" -e "* ]]; then
    printf '#!/bin/sh\\necho "kbatch $*"\\n' >"$(dirname "$0")/kbatch"
    chmod +x "$(dirname "$0")/kbatch"
  fi
  exit 0
fi
echo "unexpected: $*" >&2
exit 3
"""


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A copy of what run.sh reads: itself, pyproject.toml and setup.py."""
    root = tmp_path / "kbatch"
    (root / "scripts").mkdir(parents=True)
    shutil.copy2(ROOT / "scripts" / "run.sh", root / "scripts" / "run.sh")
    for name in ("pyproject.toml", "setup.py"):
        if (ROOT / name).exists():
            shutil.copy2(ROOT / name, root / name)
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    (fake_bin / "python3").write_text(FAKE_PYTHON)
    (fake_bin / "python3").chmod(0o755)
    return root


def run_sh(root: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    path = f"{root.parent / 'bin'}{os.pathsep}{os.environ['PATH']}"
    return subprocess.run(
        [str(root / "scripts" / "run.sh"), *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        env={**os.environ, "PATH": path, "FAKE_CALLS": str(root.parent / "calls"), **env},
    )


def test_the_output_is_kbatchs_and_the_install_talk_is_in_the_log(checkout: Path) -> None:
    done = run_sh(checkout, "--help")
    assert (done.returncode, done.stdout, done.stderr) == (0, "kbatch --help\n", "")
    log = (checkout / ".venv" / "install.log").read_text()
    assert WARNING in log and "Collecting setuptools" in log


def test_a_set_up_venv_is_not_installed_again(checkout: Path) -> None:
    run_sh(checkout, "--help")
    calls = (checkout.parent / "calls").read_text()
    done = run_sh(checkout, "simulate", "x.yaml")
    assert (done.returncode, done.stdout, done.stderr) == (0, "kbatch simulate x.yaml\n", "")
    assert (checkout.parent / "calls").read_text() == calls


def test_a_failed_install_shows_its_log_and_runs_nothing(checkout: Path) -> None:
    done = run_sh(checkout, "--help", FAKE_PIP_FAILS="1")
    assert done.returncode == 1
    assert done.stdout == ""
    assert "ERROR: no such package" in done.stderr and WARNING in done.stderr
    assert f"setting up {checkout / '.venv'} failed" in done.stderr
    assert not (checkout / ".venv" / ".kbatch-install-stamp").exists()
