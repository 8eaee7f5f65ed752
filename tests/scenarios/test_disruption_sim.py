"""In the simulator, a victim's pod carries the DisruptionTarget condition kbatch gives it
on a live cluster, naming who took its room, from the moment it is deleted (through
its grace period). The JSON contract shows no pod conditions: it is unchanged."""

from typing import Any

from kbatch.sim import runner
from kbatch.sim.manifests import load_documents
from scenarios.objects import at, conf_map, node, pod, pod_group

PREEMPT = """
actions: "enqueue, allocate, preempt, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: drf}, {name: predicates}, {name: proportion}, {name: nodeorder}]
"""


def conditions(simulation: runner.Simulation, name: str) -> dict[str, dict[str, Any]]:
    found = simulation.cluster.state.get("Pod", "default", name)
    assert found is not None, f"pod {name} is still there (its grace period)"
    return {c["type"]: c for c in found["status"].get("conditions") or []}


def test_a_preempted_pod_carries_the_condition_through_its_grace_period() -> None:
    high_class = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "high"},
        "value": 1000,
    }
    low = pod("low", cpu="1", terminationGracePeriodSeconds=30)
    high = pod("high", cpu="1", group="high", priorityClassName="high")
    later = [at(pod_group("high"), "5s"), at(high, "5s")]
    loaded = load_documents([conf_map(PREEMPT), high_class, node(cpu="1"), low, *later])
    simulation = runner.Simulation(loaded, runner.resolve_conf(None, loaded))
    for second in range(5):
        simulation.tick(float(second))
    assert set(conditions(simulation, "low")) == {"PodScheduled"}
    for second in range(5, 10):
        simulation.tick(float(second))
    low_pod = simulation.cluster.state.get("Pod", "default", "low")
    assert low_pod is not None and low_pod["metadata"].get("deletionTimestamp")
    marked = conditions(simulation, "low")
    assert marked["PodScheduled"]["status"] == "True", "the others kept"
    disruption = marked["DisruptionTarget"]
    assert disruption.pop("lastTransitionTime")
    assert disruption == {
        "type": "DisruptionTarget",
        "status": "True",
        "reason": "PreemptionByScheduler",
        "message": "kbatch: preempting to accommodate pod default/high of PodGroup default/high",
    }
