"""Scenarios of our own through both backends, the simulator and a real cluster,
with one check each: what the simulator promises, the cluster does."""

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kbatch.config import DEFAULT_CONF
from scenarios.runner import Outcome, run

pytestmark = pytest.mark.e2e

# A pod that finishes after 3s next to one that runs on: the queue's allocation
# and request shrink back to what still runs (no stale memory from the finished one).
FINISHING = """
apiVersion: v1
kind: Node
metadata: {name: node-1}
status:
  allocatable: {cpu: "4", memory: 8Gi, pods: "110"}
---
apiVersion: v1
kind: Pod
metadata:
  name: short
  annotations: {kbatch.io/sim-duration: "3s"}
spec:
  schedulerName: kbatch
  containers: [{name: main, image: busybox, resources: {requests: {cpu: "1", memory: 1Gi}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: long}
spec:
  schedulerName: kbatch
  containers: [{name: main, image: busybox, resources: {requests: {cpu: "2"}}}]
"""


def check_finishing(outcome: Outcome) -> None:
    assert outcome.pod("short")["phase"] == "Succeeded"
    assert outcome.pod("long")["phase"] == "Running"
    queue = outcome.queue("default")
    assert queue["allocated"] == {"cpu": "2"}, "what finished leaves the queue's allocation"
    assert queue["request"] == {"cpu": "2"}


# A gang that fits beside one that cannot: what the user reads of each must be the same
# whichever backend ran them (PodGroup phases and conditions, and the events).
GANGS = """
apiVersion: v1
kind: Node
metadata: {name: node-1}
status:
  allocatable: {cpu: "3", memory: 8Gi, pods: "110"}
---
apiVersion: scheduling.incubator.k8s.io/v1alpha1
kind: PodGroup
metadata: {name: fits}
spec: {minMember: 2}
---
apiVersion: scheduling.incubator.k8s.io/v1alpha1
kind: PodGroup
metadata: {name: too-big}
spec: {minMember: 2}
""" + "".join(
    f"""---
apiVersion: v1
kind: Pod
metadata:
  name: {group}-{i}
  annotations: {{scheduling.k8s.io/group-name: {group}}}
spec:
  schedulerName: kbatch
  containers: [{{name: main, image: busybox, resources: {{requests: {{cpu: "{cpu}"}}}}}}]
"""
    for group, cpu in (("fits", 1), ("too-big", 2))
    for i in range(2)
)


def check_gangs(outcome: Outcome) -> None:
    assert outcome.group("fits")["phase"] == "Running"
    assert outcome.group("too-big")["phase"] != "Running"
    assert outcome.bound(group="too-big") == []


def gang(name: str, members: int, spec: str = "") -> str:
    """A PodGroup of ``members`` and as many 1-cpu pods (``spec``: more of their spec,
    as YAML lines), as documents to follow others."""
    group = f"""---
apiVersion: scheduling.incubator.k8s.io/v1alpha1
kind: PodGroup
metadata: {{name: {name}}}
spec: {{minMember: {members}}}
"""
    return group + "".join(
        f"""---
apiVersion: v1
kind: Pod
metadata:
  name: {name}-{i}
  annotations: {{scheduling.k8s.io/group-name: {name}}}
spec:
  schedulerName: kbatch
{spec}  containers: [{{name: main, image: busybox, resources: {{requests: {{cpu: "1"}}}}}}]
"""
        for i in range(members)
    )


def check_never_admitted(outcome: Outcome, name: str, why: str) -> None:
    """The gang ``name`` stays Pending, unbound, its condition ending with ``why``."""
    group = outcome.group(name)
    assert group["phase"] == "Pending", "not admitted onto a cluster that cannot hold it"
    (waiting,) = [c for c in group["conditions"] if c["type"] == "Unschedulable"]
    assert waiting["message"].endswith(why), waiting["message"]
    assert outcome.bound(group=name) == []


# A gang the cluster cannot hold, its PodGroup without minResources (no webhook filled
# them: kbatch run here has none, the simulator has no Job to fill them from): enqueue
# reads its pods, which the node could never hold all at once, so it is never admitted.
FULL = """
apiVersion: v1
kind: Node
metadata: {name: node-1}
status:
  allocatable: {cpu: "2", memory: 8Gi, pods: "110"}
""" + gang("wide", 3)


def check_full(outcome: Outcome) -> None:
    why = "not admitted: 3 pods of cpu 1 never fit on the nodes, even empty: they hold 2 of them"
    check_never_admitted(outcome, "wide", why)


# A gang for nodes labelled gpu=yes, on a cluster without one: never admitted, saying
# which nodes its node selector rules out, on a real cluster as in the simulator.
ELSEWHERE = """
apiVersion: v1
kind: Node
metadata: {name: node-1, labels: {gpu: "no"}}
status:
  allocatable: {cpu: "8", memory: 8Gi, pods: "110"}
""" + gang("elsewhere", 2, spec='  nodeSelector: {gpu: "yes"}\n')


def check_elsewhere(outcome: Outcome) -> None:
    why = (
        "not admitted: 2 pods of cpu 1 never fit on the nodes, even empty: they hold 0 of "
        "them (1 node(s) didn't match node selector)"
    )
    check_never_admitted(outcome, "elsewhere", why)


def pod(
    name: str,
    cpu: int,
    lasts: int,
    at: int = 0,
    group: str | None = None,
    walltime: int | None = None,
) -> str:
    """A pod of ``cpu`` that runs ``lasts`` seconds, made at ``at``, in ``group`` if any,
    with ``walltime`` its activeDeadlineSeconds if given."""
    annotations = f'kbatch.io/sim-duration: "{lasts}s", kbatch.io/sim-submit-at: "{at}s"'
    if group is not None:
        annotations += f", scheduling.k8s.io/group-name: {group}"
    deadline = f"\n  activeDeadlineSeconds: {walltime}" if walltime is not None else ""
    return f"""---
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  annotations: {{{annotations}}}
spec:
  schedulerName: kbatch{deadline}
  containers: [{{name: main, image: busybox, resources: {{requests: {{cpu: "{cpu}"}}}}}}]
"""


def conf_map(conf: str) -> str:
    """The scheduler conf ``conf`` as the ConfigMap both backends read it from."""
    return """
apiVersion: v1
kind: ConfigMap
metadata:
  name: kbatch-conf
  annotations: {kbatch.io/sim-scheduler-conf: "true"}
data:
  conf.yaml: |
""" + "".join(f"    {line}\n" for line in conf.splitlines())


def two_nodes_and_a_gang_of_both() -> str:
    """Two 2-cpu nodes, and a gang made at 1 s of two pods of a whole node, 3 s each."""
    nodes = "".join(
        f"""---
apiVersion: v1
kind: Node
metadata: {{name: node-{n}}}
status:
  allocatable: {{cpu: "2", memory: 8Gi, pods: "110"}}
"""
        for n in (1, 2)
    )
    group = """---
apiVersion: scheduling.incubator.k8s.io/v1alpha1
kind: PodGroup
metadata:
  name: big
  annotations: {kbatch.io/sim-submit-at: "1s"}
spec: {minMember: 2}
"""
    return nodes + group + "".join(pod(f"big-{i}", 2, 3, at=1, group="big") for i in range(2))


# Two 2-cpu nodes, full, a core freeing each second from 3 s; at 1 s a gang of two whole
# nodes; from 2 s to 19 s a 1-cpu, 4-s pod each second in the same queue, which takes
# each core as it frees (without the rule, the gang waits for the flood to end). The gang,
# refused for idle room, goes ahead of it once it has waited reserve.starvingAfter (2 s
# here) and reserve keeps nodes for it: it runs long before the flood ends.
FLOOD = (
    conf_map(DEFAULT_CONF + "reserve: {starvingAfter: 2s}")
    + two_nodes_and_a_gang_of_both()
    + "".join(pod(f"busy-{i}", 1, 3 + i) for i in range(4))
    + "".join(pod(f"flood-{t}", 1, 4, at=t) for t in range(2, 20))
)


# Two 2-cpu nodes, each half held to 14 s by a pod whose walltime says so; at 1 s a gang
# of two whole nodes, for which reserve keeps both; from 2 s to 5 s a 1-cpu, 3-s pod each
# second, with a 5-s walltime: each is gone before the gang could start, so it runs at
# once in the kept room, and the gang starts as the held pods end.
LEND = (
    conf_map(DEFAULT_CONF + "reserve: {starvingAfter: 0s}")
    + two_nodes_and_a_gang_of_both()
    + "".join(pod(f"held-{i}", 1, 14, walltime=14) for i in range(2))
    + "".join(pod(f"small-{t}", 1, 3, at=t, walltime=5) for t in range(2, 6))
)


def deadline_job(name: str, lasts: int, deadline: int, at: int = 0) -> str:
    """A Job made at ``at`` of one 1-cpu pod that runs ``lasts`` seconds, with its own
    activeDeadlineSeconds ``deadline`` (its pod has none)."""
    return f"""---
apiVersion: batch/v1
kind: Job
metadata:
  name: {name}
  annotations: {{kbatch.io/sim-submit-at: "{at}s"}}
spec:
  activeDeadlineSeconds: {deadline}
  template:
    metadata:
      annotations: {{kbatch.io/sim-duration: "{lasts}s"}}
    spec:
      schedulerName: kbatch
      restartPolicy: Never
      containers: [{{name: main, image: busybox, resources: {{requests: {{cpu: "1"}}}}}}]
"""


# LEND with the deadlines on batch/v1 Jobs, not on their pods (as Jobs mostly carry
# them): the job controller ends the pods by then, and the scheduler, which watches the
# Jobs, lends the kept room as before.
LEND_JOBS = (
    conf_map(DEFAULT_CONF + "reserve: {starvingAfter: 0s}")
    + two_nodes_and_a_gang_of_both()
    + "".join(deadline_job(f"held-{i}", 14, 14) for i in range(2))
    + "".join(deadline_job(f"small-{t}", 3, 5, at=t) for t in range(2, 6))
)


# One node of 2 cpu.
ONE_NODE = """---
apiVersion: v1
kind: Node
metadata: {name: node-1}
status:
  allocatable: {cpu: "2", memory: 8Gi, pods: "110"}
"""


# One 2-cpu node: a 1-cpu pod that would run 30 s stopped by its 3-s walltime, and at
# 1 s a 2-cpu pod, which runs once the first is stopped.
DEADLINE = ONE_NODE + pod("late", 1, 30, walltime=3) + pod("next", 2, 2, at=1)


def check_deadline(outcome: Outcome) -> None:
    phases = {p["name"]: p["phase"] for p in outcome.json["pods"]}
    assert phases == {"late": "Failed", "next": "Succeeded"}, phases
    scheduled = {e["name"]: e["time"] for e in outcome.events(reason="Scheduled")}
    assert 3.0 <= scheduled["next"] <= 8.0, scheduled


def failing_job(name: str, pod_walltime: int | None = None, **spec: int) -> str:
    """A Job of one 1-cpu pod that would run 30 s, with ``spec`` (backoffLimit,
    activeDeadlineSeconds) and its pod's walltime."""
    deadline = f"\n      activeDeadlineSeconds: {pod_walltime}" if pod_walltime else ""
    limits = "".join(f"\n  {key}: {value}" for key, value in spec.items())
    return f"""---
apiVersion: batch/v1
kind: Job
metadata:
  name: {name}
spec:{limits}
  template:
    metadata:
      annotations: {{kbatch.io/sim-duration: "30s"}}
    spec:
      schedulerName: kbatch
      restartPolicy: Never{deadline}
      containers: [{{name: main, image: busybox, resources: {{requests: {{cpu: "1"}}}}}}]
"""


# One 2-cpu node. "retried": its pod stopped at 2 s by its walltime, replaced once after
# the job controller's 10-s backoff, stopped again: past backoffLimit 1, the Job fails.
# "capped": active past its own activeDeadlineSeconds (4 s): failed, its pod deleted.
JOB_FAILURES = (
    ONE_NODE
    + failing_job("retried", pod_walltime=2, backoffLimit=1)
    + failing_job("capped", activeDeadlineSeconds=4)
)


def test_a_failing_job_ends_the_same_on_both(backend: Any, tmp_path: Path) -> None:
    """The simulator's job controller fails a Job as Kubernetes' does: past its
    backoffLimit (after a backoff before each new pod) or its activeDeadlineSeconds."""
    path = tmp_path / "job-failures.yaml"
    path.write_text(JOB_FAILURES, encoding="utf-8")
    outcome = run(path, until="30s") if backend is None else run(path, backend=backend, until="30s")
    pods = {p["name"]: p["phase"] for p in outcome.json["pods"]}
    retried = sorted(name for name in pods if name.startswith("retried-"))
    assert len(retried) == 2 and {pods[name] for name in pods} == {"Failed"}, pods
    scheduled = sorted(
        e["time"] for e in outcome.events(reason="Scheduled") if "retried" in e["name"]
    )
    assert len(scheduled) == 2 and 9.0 <= scheduled[1] - scheduled[0] <= 16.0, scheduled
    failed = {(e["name"], e["reason"], e["message"]) for e in outcome.events(kind="Job")}
    assert (
        "retried",
        "BackoffLimitExceeded",
        "Job has reached the specified backoff limit",
    ) in failed
    assert ("capped", "DeadlineExceeded", "Job was active longer than specified deadline") in failed


PREEMPT_CONF = """actions: "enqueue, allocate, preempt, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: drf}, {name: predicates}, {name: proportion}, {name: nodeorder}]
"""


def priority_class(name: str, value: int) -> str:
    return f"""---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {{name: {name}}}
value: {value}
"""


# One 2-cpu node, preempt on. "victim", a Job's pod of the whole node (no podFailurePolicy),
# runs from the start; at 2 s "urgent", of higher priority, evicts it and runs 5 s. The job
# controller counts the evicted pod as failed and makes the next one after its 10-s
# backoff, not as soon as the node is free again.
EVICTED_JOB = (
    conf_map(PREEMPT_CONF)  # (first: the map is a document without its "---")
    + ONE_NODE
    + priority_class("e2e-low", 10)
    + priority_class("e2e-high", 1000)
    + """---
apiVersion: batch/v1
kind: Job
metadata:
  name: victim
spec:
  template:
    metadata:
      annotations: {kbatch.io/sim-duration: "60s"}
    spec:
      schedulerName: kbatch
      priorityClassName: e2e-low
      restartPolicy: Never
      containers: [{name: main, image: busybox, resources: {requests: {cpu: "2"}}}]
---
apiVersion: v1
kind: Pod
metadata:
  name: urgent
  annotations: {kbatch.io/sim-duration: "5s", kbatch.io/sim-submit-at: "2s"}
spec:
  schedulerName: kbatch
  priorityClassName: e2e-high
  containers: [{name: main, image: busybox, resources: {requests: {cpu: "2"}}}]
"""
)


def test_an_evicted_job_pod_is_replaced_after_the_backoff_on_both(
    backend: Any, tmp_path: Path
) -> None:
    path = tmp_path / "evicted-job.yaml"
    path.write_text(EVICTED_JOB, encoding="utf-8")
    outcome = run(path, until="25s") if backend is None else run(path, backend=backend, until="25s")
    (evicted,) = [e["time"] for e in outcome.events(reason="Evict", kind="Pod")]
    scheduled = sorted(
        (e["time"], e["name"]) for e in outcome.events(reason="Scheduled") if "victim" in e["name"]
    )
    assert len(scheduled) == 2, scheduled
    assert 9.0 <= scheduled[1][0] - evicted <= 16.0, (evicted, scheduled)


def check_lend(outcome: Outcome) -> None:
    scheduled = {
        # (a Job's pod by its Job's name: the job controller names it with a suffix)
        e["name"].rpartition("-")[0] if e["name"].count("-") == 2 else e["name"]: e["time"]
        for e in outcome.events(reason="Scheduled")
    }
    small = [scheduled.get(f"small-{t}") for t in range(2, 6)]
    assert all(at is not None and at < 12.0 for at in small), scheduled
    big = [scheduled.get("big-0"), scheduled.get("big-1")]
    assert all(at is not None and 13.0 <= at <= 18.0 for at in big), scheduled
    assert outcome.summary["evictions"] == 0


def check_flood(outcome: Outcome) -> None:
    started = [
        e["time"] for e in outcome.events(reason="Scheduled") if e["name"].startswith("big-")
    ]
    assert len(started) == 2 and max(started) - min(started) <= 1.0, started
    last_flood = max(e["time"] for e in outcome.events(reason="Scheduled") if "flood" in e["name"])
    assert max(started) < 16.0 < last_flood, (started, last_flood)
    assert outcome.summary["evictions"] == 0


SCENARIOS: dict[str, tuple[str, Callable[[Outcome], None]]] = {
    "finishing": (FINISHING, check_finishing),
    "gangs": (GANGS, check_gangs),
    "full": (FULL, check_full),
    "elsewhere": (ELSEWHERE, check_elsewhere),
    "flood": (FLOOD, check_flood),
    "lend": (LEND, check_lend),
    "lend-jobs": (LEND_JOBS, check_lend),
    "deadline": (DEADLINE, check_deadline),
}


def what_the_user_sees(outcome: Outcome) -> dict[str, Any]:
    """Everything a user reads, without the times: pods' nodes and phases, PodGroup
    phases, counts and conditions, and each object's events (reason and message)."""
    return {
        "pods": sorted((p["name"], p["node"], p["phase"]) for p in outcome.json["pods"]),
        "podGroups": sorted(
            (
                g["name"],
                g["phase"],
                g["running"],
                tuple(
                    (c["type"], c["status"], c.get("reason", ""), c.get("message", ""))
                    for c in g["conditions"]
                ),
            )
            for g in outcome.json["podGroups"]
        ),
        "events": sorted(
            {(e["kind"], e["name"], e["type"], e["reason"], e["message"]) for e in outcome.events()}
        ),
    }


def test_both_backends_tell_the_user_the_same(cluster_backend: Any, tmp_path: Path) -> None:
    """One scenario, the simulator and a real cluster: the same phases, conditions, event
    reasons and messages (phase changes included), with the same de-duplication."""
    path = tmp_path / "gangs.yaml"
    path.write_text(GANGS, encoding="utf-8")
    simulated = what_the_user_sees(run(path, until="10s"))
    live = what_the_user_sees(run(path, backend=cluster_backend, until="10s"))
    assert live == simulated


@pytest.fixture(params=["simulator", "cluster"])
def backend(request: pytest.FixtureRequest) -> Any:
    if request.param == "simulator":
        return None
    return request.getfixturevalue("cluster_backend")


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenario(name: str, backend: Any, tmp_path: Path) -> None:
    text, check = SCENARIOS[name]
    path = tmp_path / f"{name}.yaml"
    path.write_text(text, encoding="utf-8")
    check(run(path) if backend is None else run(path, backend=backend))


def test_a_scenario_again_on_the_same_cluster(cluster_backend: Any, tmp_path: Path) -> None:
    """The clean-up between scenarios leaves nothing that changes the next run: the same
    pods, on the same nodes, with the same events (a pod made again under the same name
    is scheduled again, and says so)."""
    path = tmp_path / "finishing.yaml"
    path.write_text(FINISHING, encoding="utf-8")
    first, second = (run(path, backend=cluster_backend) for _ in range(2))
    for outcome in (first, second):
        check_finishing(outcome)
    assert first.json["pods"] == second.json["pods"]
    assert first.json["queues"] == second.json["queues"]

    def scheduled(outcome: Outcome) -> list[str]:
        return sorted(e["name"] for e in outcome.events(reason="Scheduled", kind="Pod"))

    assert scheduled(first) == scheduled(second) == ["long", "short"]
    assert first.summary["binds"] == second.summary["binds"] == 2
