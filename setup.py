"""Package discovery for the one importable root, ``kbatch``.

The design card keeps ``operators/`` and ``webhooks/`` as top-level folders;
they install as ``kbatch.operators`` and ``kbatch.webhooks`` (never as
top-level packages of their own). Everything else is in pyproject.toml.
"""

from setuptools import find_packages, setup


def mapped(folder: str, prefix: str) -> list[str]:
    return [prefix] + [f"{prefix}.{name}" for name in find_packages(folder)]


setup(
    packages=find_packages(include=["kbatch", "kbatch.*"])
    + mapped("operators", "kbatch.operators")
    + mapped("webhooks", "kbatch.webhooks"),
    package_dir={
        "kbatch": "kbatch",
        "kbatch.operators": "operators",
        "kbatch.webhooks": "webhooks",
    },
)
