"""kube-batch's own action tests on a real cluster, checked by the very table that checks
the simulator (tests/scenarios/test_kube_batch.py): one scenario runner, two backends.

A case whose answer differs here from the simulator's fails here: the row says what
kbatch decides, and the simulator and ``kbatch run`` run the same scheduler core (full
ties in task order fall to the pod's name, not its uid, which a cluster makes random).
"""

from typing import Any

import pytest

from scenarios.runner import run
from scenarios.test_kube_batch import CASES, UNTIL, check, params, path_of

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("name", params())
def test_kube_batch_case_on_a_cluster(name: str, cluster_backend: Any) -> None:
    check(CASES[name], run(path_of(name), backend=cluster_backend, until=UNTIL))
