"""The scheduler core's quantity parser (``kbatch.api.quantity.scheduler_amount``, pure)
gives what the cluster layer's (the kubernetes client's parser) gives, on every quantity
the API server's pattern accepts."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbatch.api.quantity import scheduler_amount
from kbatch.cluster.quantity import amount

# Exponents and digit runs kept small enough that both sides stay finite floats.
SMALL = (
    r"^(\+)?(([0-9]{1,6}(\.[0-9]{0,4})?)|(\.[0-9]{1,4}))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?[0-9]{1,2}))?$"
)


@settings(max_examples=600, deadline=None)
@given(st.sampled_from(["cpu", "memory", "nvidia.com/gpu"]), st.from_regex(SMALL, fullmatch=True))
def test_both_parsers_agree(resource: str, text: str) -> None:
    assert math.isclose(scheduler_amount(resource, text), amount(resource, text), rel_tol=1e-12)


@pytest.mark.parametrize(
    ("resource", "text", "expected"),
    [("cpu", "500m", 500.0), ("cpu", "2", 2000.0), ("memory", "1.5Gi", 1.5 * 2**30),
     ("memory", "1e3", 1000.0), ("memory", "4k", 4000.0), ("nvidia.com/gpu", 8, 8.0)],
)  # fmt: skip
def test_examples(resource: str, text: object, expected: float) -> None:
    assert scheduler_amount(resource, text) == expected


@pytest.mark.parametrize("bad", ["lots", "-1", "1Gb", "", True, None, "1e"])
def test_refused_with_the_reason(bad: object) -> None:
    with pytest.raises(ValueError, match=r"quantity|negative"):
        scheduler_amount("memory", bad)
