"""Water-filling by weight, resource by resource: claimants met in order of limit/weight,
the rest sharing what is left by weight."""

import numpy as np
import pytest

from kbatch.operators.scheduler.core.framework.water_fill import weighted_fill

CASES = [
    # (name, total, weights, limits (one column per resource), expected)
    ("all met, the rest left over", [10.0], [1, 1], [[2.0], [3.0]], [[2.0], [3.0]]),
    ("nobody met: by weight", [12.0], [1, 2], [[20.0], [20.0]], [[4.0], [8.0]]),
    ("met one after another, then shared", [8.0], [1, 1, 2], [[1.0], [2.0], [20.0]],
     [[1.0], [2.0], [5.0]]),
    ("each resource on its own", [10.0, 10.0], [1, 1], [[1.0, 100.0], [100.0, 1.0]],
     [[1.0, 9.0], [9.0, 1.0]]),
    ("no limit", [6.0], [1, 2], [[np.inf], [np.inf]], [[2.0], [4.0]]),
    ("a negative total is nothing", [-3.0], [1, 1], [[2.0], [2.0]], [[0.0], [0.0]]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("total", "weights", "limits", "expected"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_weighted_fill(
    total: list[float], weights: list[int], limits: list[list[float]], expected: list[list[float]]
) -> None:
    got = weighted_fill(np.array(total), np.array(weights), np.array(limits))
    np.testing.assert_allclose(got, np.array(expected))


def test_no_claimants_nothing_filled() -> None:
    assert weighted_fill(np.array([5.0, 1.0]), np.array([]), np.zeros((0, 2))).shape == (0, 2)
