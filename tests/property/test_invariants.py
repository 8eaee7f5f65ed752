"""The scheduler's promises, checked after every simulated session on random workloads:
gangs in weighted queues at two priorities, of random sizes, minimums, runtimes and
arrival times, and in half the examples nodes in zones and racks, some tainted, and
gangs asking for a zone (one no node is in), tolerating the taint, asking for a host
port or requiring one rack; under the default conf and with ``preempt`` added.

- no node ever holds more than it can (cpu, memory, pods), deleting pods counted;
- a gang is never partly bound: its pods running or done are none or at least its
  minMember, whatever was bound, evicted or finished in between;
- every pod evicted is told why (the DisruptionTarget condition) before it goes;
- no deadlock: with Jobs (whose evicted pods come back) and every gang able to run on
  the empty cluster, all the work is done in the end.

Run with more examples (``KBATCH_PROPERTY_EXAMPLES=1000``, and under random seeds) it
found two deadlocks, and its gangs over queue trees a third, each now a test of its
own: a gang whose pods never fit the nodes held its promised room for ever
(tests/unit/actions/test_enqueue.py, tests/scenarios/test_admission.py), in a queue tree
against the other subtrees' guarantees too (test_admission.py), and reserve kept room
a preemptor had been promised that session, two nominations that did not both fit then
waiting on each other (tests/unit/actions/test_reserve.py). With zones and taints it
found a fourth and a fifth: a gang for nodes the cluster lacks, and one of more pods
asking for one host port than there are nodes, held their room for ever too
(tests/unit/framework/test_node_fit.py, test_admission.py); with racks a sixth: room
reserve kept for a gang that requires one rack made its rack seem full to it
(tests/scenarios/test_topology.py).
"""

import os
from collections import Counter
from collections.abc import Iterable

from hypothesis import given, settings
from hypothesis import strategies as st
from property.gangs import GROUP_NAME, TOPOLOGY, Obj, Workload, workloads

from kbatch.cluster import quantity
from kbatch.cluster.podspec import pod_request
from kbatch.config import DEFAULT_CONF
from kbatch.operators.scheduler.core.runner import load_conf
from kbatch.sim import manifests, output, runner

# (KBATCH_PROPERTY_EXAMPLES, as for the other property tests, to look harder: the two
# bugs this found took hundreds of examples each)
SETTINGS = settings(
    max_examples=int(os.environ.get("KBATCH_PROPERTY_EXAMPLES", 40)),
    deadline=None,
    derandomize=True,
    database=None,
)
WITH_PREEMPT = DEFAULT_CONF.replace("reclaim, allocate", "reclaim, allocate, preempt")
# (the rack level for the gangs that require one rack: a conf without it refuses them)
# ("ahead": a group its own queue keeps out goes ahead of the room at once, not after
# the default's 30 s, which these short workloads seldom reach)
CONFS = {
    "default": DEFAULT_CONF + TOPOLOGY,
    "preempt": WITH_PREEMPT + TOPOLOGY,
    "ahead": DEFAULT_CONF + TOPOLOGY + "reserve: {starvingAfter: 0s}\n",
}
DISRUPTION = "DisruptionTarget"


class CheckedSimulation(runner.Simulation):
    """The simulator, its state checked after every tick (``violations``)."""

    def __init__(self, docs: list[Obj], conf: str, until: float) -> None:
        loaded = manifests.load_documents(docs)
        super().__init__(loaded, load_conf(conf, "<conf>"), runner.Options(until=until))
        self.violations: list[str] = []

    def tick(self, now: float) -> bool:
        changed = super().tick(now)
        pods = list(self.cluster.state.list("Pod"))
        self.violations += _overcommitted(now, self.cluster.state.list("Node"), pods)
        self.violations += _partly_bound(now, self.cluster.state.list("PodGroup"), pods)
        for pod in pods:
            if pod["metadata"].get("deletionTimestamp"):
                key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
                if not _has_condition(pod, DISRUPTION):
                    self.violations.append(f"at {now}: {key} deleted without {DISRUPTION}")
        return changed


def _holds_room(pod: Obj) -> bool:
    phase = (pod.get("status") or {}).get("phase")
    return bool(pod["spec"].get("nodeName")) and phase not in ("Succeeded", "Failed")


def _overcommitted(now: float, nodes: Iterable[Obj], pods: list[Obj]) -> list[str]:
    """The nodes whose pods holding room ask for more than their allocatable, in any
    resource it names (cpu, memory, pods), by Kubernetes' rule (``pod_request``)."""
    out = []
    for node in nodes:
        name = node["metadata"]["name"]
        used: Counter[str] = Counter()
        for pod in pods:
            if pod["spec"].get("nodeName") == name and _holds_room(pod):
                used.update(pod_request(pod["spec"]))
        for resource, text in node["status"]["allocatable"].items():
            if used[resource] > quantity.amount(resource, text) + 1e-9:
                out.append(f"at {now}: node {name} holds {dict(used)}, more {resource} than {text}")
    return out


def _partly_bound(now: float, groups: Iterable[Obj], pods: list[Obj]) -> list[str]:
    out = []
    for group in groups:
        meta = group["metadata"]
        members = [
            p
            for p in pods
            if p["metadata"]["namespace"] == meta["namespace"]
            and (p["metadata"].get("annotations") or {}).get(GROUP_NAME) == meta["name"]
        ]
        running = sum(
            1 for p in members if _holds_room(p) and not p["metadata"].get("deletionTimestamp")
        )
        done = sum(1 for p in members if (p.get("status") or {}).get("phase") == "Succeeded")
        minimum = group["spec"].get("minMember", 1)
        if 0 < running + done < minimum:
            out.append(
                f"at {now}: PodGroup {meta['name']} has {running} running and {done} done "
                f"of minMember {minimum}"
            )
    return out


def _has_condition(pod: Obj, kind: str) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)


@SETTINGS
@given(
    st.tuples(st.booleans(), st.booleans()).flatmap(
        lambda flags: workloads(placed=flags[0], deadlines=flags[1], slack=True)
    ),
    st.sampled_from(sorted(CONFS)),
)
def test_no_node_overcommitted_no_gang_partly_bound_every_eviction_told(
    workload: Workload, conf: str
) -> None:
    simulation = CheckedSimulation(workload.docs, CONFS[conf], until=900.0)
    simulation.run()
    assert simulation.violations == []


@SETTINGS
@given(
    st.booleans().flatmap(lambda placed: workloads(jobs=True, placed=placed)),
    st.sampled_from(sorted(CONFS)),
)
def test_every_gang_that_fits_the_empty_cluster_runs_to_the_end(
    workload: Workload, conf: str
) -> None:
    simulation = CheckedSimulation(workload.docs, CONFS[conf], until=6 * 3600.0)
    outcome = simulation.run()
    assert simulation.violations == []
    groups = {g["name"]: g for g in output.to_json(outcome)["podGroups"]}
    for g in range(len(workload.gangs)):
        if workload.fits_empty(g):
            assert groups[f"g{g}"]["phase"] == "Completed", (g, workload, groups)
    assert outcome.settled
