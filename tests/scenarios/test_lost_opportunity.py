"""binpack's lostOpportunity (DESIGN §12): a task goes where it strands the least room,
so that a big job finds a whole node."""

from typing import Any

import pytest

from kbatch.sim import simulate
from scenarios.objects import at, conf_map, node, pod
from scenarios.runner import Outcome

CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins:
  - {name: predicates}
  - {name: proportion}
  - name: binpack
    arguments: {binpack.resources: nvidia.com/gpu%s}
"""


def gpu_node(name: str) -> dict[str, Any]:
    obj = node(name, cpu="8")
    obj["status"]["allocatable"]["nvidia.com/gpu"] = "4"
    return obj


def run(lost_opportunity: bool) -> Outcome:
    """A cpu-only job of 8 cpu, then (at 10 s) a training job of 8 cpu and 4 GPUs, on a
    GPU node (first by name) and a cpu node."""
    arguments = ", binpack.lostOpportunity: true" if lost_opportunity else ""
    training = at(pod("training", cpu="8"), "10s")
    training["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "4"
    docs = [conf_map(CONF % arguments), gpu_node("a-gpu"), node("b-cpu", cpu="8")]
    return Outcome(simulate(documents=[*docs, pod("batch", cpu="8"), training], until="1m"))


@pytest.mark.parametrize(("lost_opportunity", "batch_on", "training"), [
    (False, "a-gpu", "Pending"),  # both nodes fill 8/8 cpus: the tie goes by name
    (True, "b-cpu", "Running"),  # on the GPU node it would strand 4 GPUs
])  # fmt: skip
def test_the_cpu_job_does_not_strand_the_gpus(
    lost_opportunity: bool, batch_on: str, training: str
) -> None:
    outcome = run(lost_opportunity)
    assert outcome.pod("batch")["node"] == batch_on
    assert outcome.pod("training")["phase"] == training


def test_lost_opportunity_must_be_a_boolean() -> None:
    with pytest.raises(ValueError, match=r"binpack\.lostOpportunity must be true or false"):
        simulate(documents=[conf_map(CONF % ", binpack.lostOpportunity: sometimes")])
