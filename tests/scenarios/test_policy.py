"""Scheduling policy through the simulator: each file's header says what must happen."""

from collections import defaultdict
from collections.abc import Callable

from scenarios.runner import Outcome, run


def scheduled_at(outcome: Outcome, job: str) -> list[float]:
    return sorted(
        e["time"] for e in outcome.events("Scheduled") if e["name"].rpartition("-")[0] == job
    )


def test_gangs_that_do_not_both_fit_never_deadlock() -> None:
    outcome = run("policy/gangs-compete.yaml")
    assert len(outcome.running(job="first")) == 6
    assert outcome.bound(job="second") == []
    waiting = outcome.condition("second", "Unschedulable")
    assert waiting is not None and waiting["status"] == "True"
    assert waiting["message"].startswith("6/6 tasks in gang unschedulable: ")
    assert "Insufficient cpu" in waiting["message"]


def test_a_waiting_gang_runs_whole_once_room_is_free() -> None:
    outcome = run("policy/gang-waits-then-runs.yaml")
    early, late = scheduled_at(outcome, "early"), scheduled_at(outcome, "late")
    assert len(early) == 4 and len(late) == 4
    assert len(set(late)) == 1, "the late gang was bound in one session"
    assert late[0] >= 20.0, "the late gang waited for the early one to finish"
    assert outcome.summary["evictions"] == 0
    assert outcome.group("late")["phase"] == "Completed"


def test_each_predicate_accepts_and_rejects() -> None:
    outcome = run("policy/predicates.yaml")
    node = {p["name"]: p["node"] for p in outcome.pods()}
    assert node["selector"] == "plain-a"
    assert node["tolerating"] == "gpu-node"
    assert node["intolerant-selector"] is None
    assert node["affinity-zone-b"] == "plain-b"
    assert node["gt"] == "plain-b"
    assert node["spread-0"] != node["spread-1"] and None not in (node["spread-0"], node["spread-1"])
    assert sorted(n is None for n in (node["port-0"], node["port-1"])) == [False, True]
    assert not {"cordoned", "not-ready"} & set(node.values())
    why = [
        e["message"]
        for e in outcome.events("FailedScheduling")
        if e["name"] == "intolerant-selector"
    ]
    assert why and "had taints that the pod didn't tolerate" in why[-1]


def test_capability_caps_allocation() -> None:
    outcome = run("policy/capability.yaml")
    assert len(outcome.bound(job="work")) == 3
    assert outcome.queue("capped")["deserved"]["cpu"] == "3"


def test_best_effort_pods_are_backfilled() -> None:
    outcome = run("policy/backfill.yaml")
    assert [p["node"] for p in outcome.pods(job="be")] == ["n1", "n1", "n1"]


def test_a_high_priority_gang_preempts_within_its_queue() -> None:
    outcome = run("policy/preempt-priority.yaml")
    assert len(outcome.running(job="high")) == 2
    assert outcome.evictions(job="low") == 2
    assert len(outcome.running(job="low")) == 2
    assert outcome.summary["evictions"] == 2, "evicted pods' replacements do not evict back"


def test_no_preemption_across_queues() -> None:
    outcome = run("policy/preempt-not-across-queues.yaml")
    assert outcome.summary["evictions"] == 0
    assert outcome.bound(job="high") == []


def test_preemption_neither_breaks_nor_wastes_a_gang() -> None:
    outcome = run("policy/preempt-keeps-gangs.yaml", until="2m")
    assert outcome.summary["evictions"] == 0
    assert outcome.group("gang")["phase"] == "Completed"
    assert len(outcome.bound(job="solo")) == 1
    assert scheduled_at(outcome, "solo")[0] >= 60.0, "solo waited for the gang to finish"


def test_critical_and_kube_system_pods_are_never_victims() -> None:
    outcome = run("policy/never-victims.yaml")
    assert outcome.summary["evictions"] == 0
    assert outcome.pod("dns", ns="kube-system")["phase"] == "Running"
    assert outcome.pod("agent")["phase"] == "Running"
    assert outcome.bound(job="wants") == []


def test_reclaim_converges_to_weighted_shares() -> None:
    outcome = run("policy/reclaim-weights.yaml", until="5m")
    assert [len(outcome.running(job=j)) for j in ("j1", "j2", "j3")] == [2, 4, 6]
    assert [outcome.queue(q)["deserved"]["cpu"] for q in ("w1", "w2", "w3")] == ["2", "4", "6"]
    # j1 gives 8 when w2 comes and 2 more when w3 comes; w2 gives back up to 4: never more
    assert outcome.summary["evictions"] <= 14
    evicted = [e["name"] for e in outcome.events("Evict", kind="Pod")]
    assert len(evicted) == len(set(evicted)), "no pod is evicted twice"


def long_run_documents() -> list[dict]:
    """Three queues, 36 jobs of mixed size, priority and duration arriving over 6 minutes."""
    docs: list[dict] = [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": f"n{i}"},
            "status": {
                "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }
        for i in range(3)
    ]
    docs.append(
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "high"},
            "value": 100,
        }
    )
    for q, weight in (("a", 1), ("b", 2), ("c", 3)):
        docs.append(
            {
                "apiVersion": "scheduling.incubator.k8s.io/v1alpha1",
                "kind": "Queue",
                "metadata": {"name": q},
                "spec": {"weight": weight},
            }
        )
    for j in range(36):
        queue, size = "abc"[j % 3], 1 + (j * 7) % 6
        name, at, duration = f"job{j:02d}", f"{j * 10}s", f"{30 + (j * 13) % 90}s"
        annotations = {"kbatch.io/sim-submit-at": at}
        spec: dict = {"minMember": size, "queue": queue}
        template_spec: dict = {
            "schedulerName": "kbatch",
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "m",
                    "image": "x",
                    "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
                }
            ],
        }
        if j % 5 == 0:
            spec["priorityClassName"] = template_spec["priorityClassName"] = "high"
        docs.append(
            {
                "apiVersion": "scheduling.incubator.k8s.io/v1alpha1",
                "kind": "PodGroup",
                "metadata": {"name": name, "annotations": annotations},
                "spec": spec,
            }
        )
        docs.append(
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"name": name, "annotations": annotations},
                "spec": {
                    "parallelism": size,
                    "completions": size,
                    "template": {
                        "metadata": {
                            "annotations": {
                                "scheduling.k8s.io/group-name": name,
                                "kbatch.io/sim-duration": duration,
                            }
                        },
                        "spec": template_spec,
                    },
                },
            }
        )
    docs.append(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "conf", "annotations": {"kbatch.io/sim-scheduler-conf": "true"}},
            "data": {
                "conf.yaml": 'actions: "enqueue, reclaim, allocate, backfill, preempt"\n'
                "tiers:\n- plugins:\n  - name: priority\n  - name: gang\n  - name: conformance\n"
                "- plugins:\n  - name: drf\n  - name: predicates\n  - name: proportion\n  - name: nodeorder\n"
            },
        }
    )
    return docs


def test_long_run_has_no_ping_pong_and_no_starvation(
    record_property: Callable[[str, object], None],
) -> None:
    outcome = run(documents=long_run_documents(), until="30m")
    groups = outcome.json["podGroups"]
    assert [g["name"] for g in groups if g["phase"] != "Completed"] == [], (
        "every job ran to the end"
    )
    assert outcome.summary["sessions"] >= 100
    per_pod = defaultdict(int)
    for event in outcome.events("Evict", kind="Pod"):
        per_pod[event["name"]] += 1
    assert max(per_pod.values(), default=0) <= 1, "no pod is evicted twice"
    assert outcome.summary["evictions"] <= 36, "evictions stay bounded"
    first_bind: dict[str, float] = {}
    for event in outcome.events("Scheduled"):
        first_bind.setdefault(event["name"].rpartition("-")[0], event["time"])
    waits = {f"job{j:02d}": first_bind[f"job{j:02d}"] - j * 10 for j in range(36)}
    record_property("job_wait_seconds", waits)
    assert max(waits.values()) < 600, waits
