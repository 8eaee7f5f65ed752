"""The simulator's own behaviour: what it plays (API server, kubelet, controllers) and its loop."""

import json
from pathlib import Path

from kbatch.sim import runner, simulate
from kbatch.sim.manifests import load_documents
from scenarios.objects import at, job, node, pod, pod_group, queue
from scenarios.runner import Outcome, run

EXAMPLES = Path(__file__).parents[2] / "examples"


def sim(*docs: object, **options: object) -> Outcome:
    return Outcome(simulate(documents=list(docs), **options))  # type: ignore[arg-type]


def test_same_input_gives_identical_json() -> None:
    files = [EXAMPLES / "sim-cluster.yaml", EXAMPLES / "two-queues.yaml"]
    first = simulate(files)
    second = simulate(files)
    assert json.dumps(first) == json.dumps(second)


def test_json_contract_shape() -> None:
    outcome = sim(
        node(),
        queue("q1", weight=2),
        pod_group("pg", min_member=1, queue="q1"),
        pod("b-grouped", group="pg"),
        pod("a-plain"),
        pod("too-big", cpu="64"),
        pod("z", namespace="team"),
    )
    result = outcome.json
    assert list(result) == ["time", "pods", "podGroups", "queues", "events", "warnings", "summary"]
    assert isinstance(result["time"], float)
    pod_keys = ["namespace", "name", "node", "phase", "podGroup", "evictions"]
    assert all(list(p) == pod_keys for p in result["pods"])
    names = [(p["namespace"], p["name"]) for p in result["pods"]]
    assert (
        names == sorted(names) and names[0] == ("default", "a-plain") and names[-1] == ("team", "z")
    )
    assert outcome.pod("too-big")["node"] is None
    assert outcome.pod("a-plain")["podGroup"] is None
    assert outcome.pod("b-grouped")["podGroup"] == "pg"
    group_keys = [
        "namespace",
        "name",
        "queue",
        "phase",
        "minMember",
        "running",
        "succeeded",
        "failed",
        "conditions",
    ]
    assert list(outcome.group("pg")) == group_keys
    assert all(
        list(c) == ["type", "status", "reason", "message"]
        for g in result["podGroups"]
        for c in g["conditions"]
    )
    assert [q["name"] for q in result["queues"]] == ["default", "q1"]
    q1 = outcome.queue("q1")
    assert list(q1) == ["name", "weight", "deserved", "allocated", "request"] and q1["weight"] == 2
    assert q1["allocated"]["cpu"] == "1" and all(isinstance(v, str) for v in q1["request"].values())
    event_keys = ["time", "kind", "namespace", "name", "type", "reason", "message"]
    assert result["events"] and all(list(e) == event_keys for e in result["events"])
    times = [e["time"] for e in result["events"]]
    assert times == sorted(times)
    assert result["summary"] == {
        "sessions": result["summary"]["sessions"],
        "binds": 3,
        "evictions": 0,
    }


def test_default_queue_and_implicit_namespace() -> None:
    outcome = sim(node(), pod("p", namespace="team-a"))
    assert outcome.queue("default")["weight"] == 1
    assert outcome.pod("p", ns="team-a")["node"] == "node-1"


def test_pods_of_another_scheduler_are_left_alone_but_take_room() -> None:
    outcome = sim(
        node(cpu="4"),
        pod("foreign-pending", scheduler=None),
        pod("foreign-bound", cpu="3", scheduler="default-scheduler", nodeName="node-1"),
        pod("ours", cpu="2"),
    )
    assert outcome.pod("foreign-pending")["node"] is None
    assert outcome.pod("foreign-pending")["phase"] == "Pending"
    assert outcome.pod("ours")["node"] is None, "only 1 cpu is left beside the foreign pod"


def test_a_pod_with_node_name_is_bound_and_running_from_the_start() -> None:
    outcome = sim(node(cpu="2"), pod("already", cpu="2", nodeName="node-1"), pod("later", cpu="1"))
    assert outcome.pod("already") == {
        "namespace": "default",
        "name": "already",
        "node": "node-1",
        "phase": "Running",
        "podGroup": None,
        "evictions": 0,
    }
    assert outcome.pod("later")["node"] is None
    assert outcome.summary["binds"] == 0


def test_job_makes_parallelism_pods_named_by_index() -> None:
    outcome = sim(node(cpu="8"), job("work", parallelism=3, completions=5))
    assert [p["name"] for p in outcome.pods(job="work")] == ["work-0", "work-1", "work-2"]
    assert len(outcome.running(job="work")) == 3


def test_job_suspend_is_honoured_and_resumed_by_a_later_apply() -> None:
    outcome = sim(
        node(),
        job("held", parallelism=2, suspend=True),
        at(job("held", parallelism=2, suspend=False), "30s"),
    )
    assert len(outcome.running(job="held")) == 2
    scheduled = {e["time"] for e in outcome.events(reason="Scheduled")}
    assert scheduled == {30.0}


def test_suspending_a_running_job_deletes_its_pods() -> None:
    outcome = sim(
        node(),
        job("stop", parallelism=2),
        at(job("stop", parallelism=2, suspend=True), "10s"),
    )
    assert outcome.running(job="stop") == []
    assert {p["phase"] for p in outcome.pods(job="stop")} == {"Failed"}
    assert len(outcome.events(reason="SuccessfulDelete")) == 2


def test_evicted_job_pods_are_removed_and_replaced() -> None:
    loaded = load_documents([node(cpu="2"), job("victim", parallelism=2)])
    simulation = runner.Simulation(loaded, runner.resolve_conf(None, loaded))
    simulation.tick(0.0)
    task = next(
        t
        for j in simulation.cluster.snapshot().jobs.values()
        for t in j.tasks.values()
        if t.name == "victim-0"
    )
    simulation.cluster.evict(task, "test", "kbatch: test")
    assert simulation.cluster.state.get("Pod", "default", "victim-0")["metadata"][
        "deletionTimestamp"
    ]
    simulation.tick(1.0)
    assert simulation.cluster.state.get("Pod", "default", "victim-0") is None
    # counted as failed (the Job has no podFailurePolicy): replaced after the job
    # controller's 10-s backoff
    simulation.tick(10.0)
    assert simulation.cluster.state.get("Pod", "default", "victim-2") is None
    simulation.tick(11.0)
    assert simulation.cluster.state.get("Pod", "default", "victim-2") is not None
    simulation.tick(12.0)
    replacement = simulation.cluster.state.get("Pod", "default", "victim-2")
    assert replacement["spec"].get("nodeName") == "node-1"
    assert simulation.jobs.jobs[("default", "victim")].obj["status"]["failed"] == 1
    pods = {(p["namespace"], p["name"]): p for p in _pods_json(simulation)}
    assert pods[("default", "victim-0")]["evictions"] == 1
    assert pods[("default", "victim-0")]["phase"] == "Failed"
    assert pods[("default", "victim-0")]["node"] is None


def _pods_json(simulation: runner.Simulation) -> list[dict[str, object]]:
    from kbatch.sim import output

    outcome = runner.Outcome(
        0.0, simulation.cluster, simulation.jobs, simulation.totals, simulation.timeline
    )
    return output.pods(outcome)


def test_grace_period_keeps_an_evicted_pod_releasing() -> None:
    loaded = load_documents([node(cpu="2"), pod("slow", terminationGracePeriodSeconds=5)])
    simulation = runner.Simulation(loaded, runner.resolve_conf(None, loaded))
    simulation.tick(0.0)
    task = next(t for j in simulation.cluster.snapshot().jobs.values() for t in j.tasks.values())
    simulation.cluster.evict(task, "test", "kbatch: test")
    simulation.tick(1.0)
    assert simulation.cluster.state.get("Pod", "default", "slow") is not None
    assert simulation.cluster.next_event() == 5.0
    simulation.tick(5.0)
    assert simulation.cluster.state.get("Pod", "default", "slow") is None


def test_sim_duration_finishes_pods_and_completes_the_group_and_job() -> None:
    loaded = load_documents(
        [node(), pod_group("g", min_member=2), job("j", parallelism=2, group="g", duration="30s")]
    )
    outcome = runner.Simulation(loaded, runner.resolve_conf(None, loaded)).run()
    # Delayed pod creation: the Job is held until g is Inqueue (0s), its pods are made
    # and bound at 1s, so the run ends one tick later than the pods' 30s alone.
    assert outcome.time == 32.0
    assert outcome.totals.sessions < 10, "the quiet ticks between 1s and 30s are jumped over"
    job_status = outcome.jobs.jobs[("default", "j")].obj["status"]
    assert job_status["succeeded"] == 2 and job_status["conditions"][0]["type"] == "Complete"
    from kbatch.sim import output

    result = output.to_json(outcome)
    assert {p["phase"] for p in result["pods"]} == {"Succeeded"}
    group = result["podGroups"][0]
    assert (group["phase"], group["succeeded"], group["running"]) == ("Completed", 2, 0)


def test_job_duration_annotation_reaches_its_pods_and_replacements_continue() -> None:
    outcome = sim(
        node(cpu="1"),
        {
            **job("seq", parallelism=1, completions=3),
            "metadata": {"name": "seq", "annotations": {"kbatch.io/sim-duration": "10s"}},
        },
    )
    assert [p["phase"] for p in outcome.pods(job="seq")] == ["Succeeded"] * 3
    assert outcome.json["time"] == 31.0


def test_until_stops_the_run() -> None:
    outcome = sim(node(), pod("long", duration="1h"), until="10s")
    assert outcome.json["time"] == 10.0
    assert outcome.pod("long")["phase"] == "Running"


def test_the_clock_jumps_to_the_next_event() -> None:
    outcome = sim(node(), pod("long", duration="1h"))
    assert outcome.json["time"] == 3601.0
    assert outcome.pod("long")["phase"] == "Succeeded"
    assert outcome.summary["sessions"] < 10


def test_submissions_snap_to_the_period_grid() -> None:
    outcome = sim(node(), at(pod("p"), "1200ms"), period="500ms")
    assert outcome.events(reason="Scheduled")[0]["time"] == 1.5


def test_identical_events_are_not_repeated() -> None:
    """The runtime's rule (``outcome.EventFilter``): an event identical to one told for
    the same object within five minutes is dropped, on simulated time."""
    from kbatch.operators.scheduler.core.framework.interface import ObjectRef

    loaded = load_documents([node()])
    simulation = runner.Simulation(loaded, runner.resolve_conf(None, loaded))
    ref = ObjectRef("Pod", "default", "p")
    for reason in ("A", "A", "B", "A"):
        simulation.cluster.record(ref, "Warning", reason, "why")
    other = ObjectRef("Pod", "default", "q")
    simulation.cluster.record(other, "Warning", "A", "why")
    simulation.clock.now = 300.0
    simulation.cluster.record(ref, "Warning", "A", "why")
    assert [(e.name, e.reason, e.time) for e in simulation.cluster.event_log] == [
        ("p", "A", 0.0),
        ("p", "B", 0.0),
        ("q", "A", 0.0),
        ("p", "A", 300.0),
    ]


def test_a_pod_waiting_for_a_missing_pod_group_is_told_so_once() -> None:
    """Nothing waits in silence: one event while it waits (not one a session), and the
    pod is scheduled once its PodGroup comes."""
    ticks = [at(pod(f"tick-{i}", duration="1s"), f"{10 * i}s") for i in range(1, 11)]
    late = at(pod_group("later"), "4m")
    outcome = sim(node(), pod("p", group="later"), *ticks, late, until="5m")
    assert outcome.summary["sessions"] > 10  # sessions ran while it waited
    told = [(e["time"], e["type"], e["message"]) for e in outcome.events("FailedScheduling")]
    message = (
        "PodGroup default/later does not exist: the pod waits until it is created "
        "(annotation scheduling.k8s.io/group-name)"
    )
    assert told == [(0.0, "Warning", message)]
    assert outcome.pod("p")["phase"] == "Running"


def test_scheduler_conf_from_an_annotated_config_map() -> None:
    from scenarios.objects import conf_map

    text = (
        'actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: gang\n  - name: predicates\n'
    )
    loaded = load_documents([node(), conf_map(text)])
    conf = runner.resolve_conf(None, loaded)
    assert conf.actions == ("enqueue", "allocate")


# --------------------------------------------------------------------------- creation
def priority_class(name: str, value: int = 100) -> dict:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
    }


def test_objects_due_together_are_created_in_dependency_order() -> None:
    # Listed backwards: each names what comes after it in the input.
    notes: list[str] = []
    outcome = sim(
        pod("p", group="pg", priorityClassName="high"),
        job("j", group="pg"),
        pod_group("pg", queue="q1"),
        node(),
        queue("q1"),
        priority_class("high"),
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}},
        warn=notes.append,
    )
    assert notes == []
    assert outcome.events(reason="AdmissionRejected") == []
    assert {p["name"] for p in outcome.running()} == {"p", "j-0"}
    assert outcome.group("pg")["queue"] == "q1"


def test_a_refused_object_is_named_on_the_warning_channel() -> None:
    notes: list[str] = []
    outcome = sim(node(), pod_group("pg", queue="nope"), warn=notes.append)
    assert len(notes) == 1
    assert notes[0].startswith("PodGroup default/pg refused: spec.queue: ")
    (event,) = outcome.events(reason="AdmissionRejected")
    assert (event["type"], event["name"]) == ("Warning", "pg")
    assert notes[0].endswith(event["message"])


def test_a_pod_naming_a_missing_priority_class_is_refused() -> None:
    notes: list[str] = []
    outcome = sim(node(), pod("p", priorityClassName="nosuch"), warn=notes.append)
    assert notes == [
        "Pod default/p refused: spec.priorityClassName: no PriorityClass named 'nosuch'"
    ]
    assert outcome.json["pods"] == []


def test_system_priority_classes_exist() -> None:
    outcome = sim(node(), pod("p", priorityClassName="system-node-critical"))
    assert outcome.pod("p")["phase"] == "Running"


def test_a_job_whose_pods_name_a_missing_priority_class_creates_them_once_it_exists() -> None:
    template = job("j")
    template["spec"]["template"]["spec"]["priorityClassName"] = "late"
    outcome = sim(node(), template, at(priority_class("late"), "30s"))
    (failed,) = outcome.events(reason="FailedCreate")
    assert failed["time"] == 0.0 and "no PriorityClass named 'late'" in failed["message"]
    assert [e["time"] for e in outcome.events(reason="Scheduled")] == [30.0]


def test_a_pod_bound_to_a_missing_node_is_kept_with_a_warning() -> None:
    notes: list[str] = []
    outcome = sim(node(), pod("p", nodeName="ghost"), warn=notes.append)
    assert notes == [
        "Pod default/p: spec.nodeName: no Node named 'ghost'; "
        "the pod is taken as bound to it, as the API server would"
    ]
    assert outcome.pod("p")["node"] == "ghost"


def test_a_later_manifest_updates_a_pod_and_its_request() -> None:
    # A node of 4 cpu: the 3-cpu update of "big" leaves room for only one more cpu.
    outcome = sim(
        node(cpu="4"),
        pod("big", cpu="1", nodeName="node-1"),
        at(pod("big", cpu="3", nodeName="node-1"), "10s"),
        at(pod("a", cpu="1"), "20s"),
        at(pod("b", cpu="1"), "20s"),
    )
    assert {p["name"] for p in outcome.running()} == {"big", "a"}
    assert outcome.pod("b")["node"] is None


def test_gangs_submitted_together_that_do_not_both_fit_never_deadlock() -> None:
    outcome = run("policy/gangs-compete-same-time.yaml")
    running = {job: len(outcome.running(job=job)) for job in ("first", "second")}
    assert sorted(running.values()) == [0, 6], running
    loser = min(running, key=running.__getitem__)
    assert outcome.bound(job=loser) == []
    waiting = outcome.condition(loser, "Unschedulable")
    assert waiting is not None and waiting["status"] == "True"
    assert "not admitted" in waiting["message"] and "cpu 6 > 2 free" in waiting["message"]
    assert outcome.summary["evictions"] == 0


def test_gangs_of_bare_pods_that_do_not_both_fit_never_deadlock() -> None:
    """No Job, so no minResources: enqueue takes the gang's minimum from its pods, as the
    webhook would (6 × 1 cpu), so the second gang is not admitted onto the room the first
    holds; neither is half placed."""
    gangs = [pod_group(name, min_member=6) for name in ("first", "second")]
    pods = [pod(f"{g}-{i}", group=g) for g in ("first", "second") for i in range(6)]
    outcome = sim(node("n1"), node("n2"), *gangs, *pods)
    assert len(outcome.running(job="first")) == 6, "the older gang runs whole"
    assert outcome.bound(job="second") == []
    assert outcome.group("second")["phase"] == "Pending"
    waiting = outcome.condition("second", "Unschedulable")
    assert waiting is not None and waiting["status"] == "True"
    assert waiting["message"] == (
        "6/6 tasks in gang unschedulable: not admitted: minResources exceed the "
        "cluster's free resources: cpu 6 > 2 free"
    )
