"""The seed scenarios on a real cluster, checked by the very functions that check the
simulator's outcome (tests/scenarios/test_seeds.py): one scenario runner, two backends."""

from typing import Any

import pytest

from scenarios.runner import run
from scenarios.test_seeds import CHECKS

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("seed", sorted(CHECKS))
def test_seed_on_a_cluster(seed: str, cluster_backend: Any) -> None:
    CHECKS[seed](run(seed, backend=cluster_backend))
