"""Admission in the simulator (DESIGN §7): the webhooks' functions run on every object the
input creates — delayed pod creation, PodGroupMinResources, validation."""

from collections import defaultdict
from functools import cache

import yaml

from kbatch import sim
from kbatch.cluster.state import ClusterState
from kbatch.sim import clock, jobs, output, runner
from kbatch.sim.admission import SimAdmission
from kbatch.sim.backend import SimBackend
from kbatch.sim.jobsets import JobSetController
from kbatch.webhooks.admission import job as job_admission
from scenarios.objects import at, job, node, pod, pod_group, queue
from scenarios.runner import HERE, Outcome, header, run

BACKLOG = "admission/backlog.yaml"
# The backlog's rules are kube-batch's (a queue's deserved share is a cap while both
# wait, nothing is taken back): its conf, not the default that borrows and reclaims.
KUBE_BATCH = HERE.parents[1] / "examples" / "conf" / "kube-batch.yaml"
ADMITTED = ("Inqueue", "Running", "Unknown", "Completed")
PHASES = ("Pending", *ADMITTED)


@cache
def backlog() -> tuple[runner.Outcome, Outcome]:
    """The backlog's run (for its timeline) and its JSON (shared by the tests below)."""
    outcome = sim.run([HERE / BACKLOG], config=KUBE_BATCH)
    return outcome, Outcome(output.to_json(outcome))


def phase_changes(outcome: Outcome) -> dict[tuple[str, str], list[str]]:
    changes: dict[tuple[str, str], list[str]] = defaultdict(lambda: ["Pending"])
    for e in outcome.events(kind="PodGroup"):
        if e["reason"] in PHASES:
            changes[(e["namespace"], e["name"])].append(e["reason"])
    return changes


def test_the_backlog_header_says_what_is_checked() -> None:
    assert "no pod exists of a group that is not Inqueue or Running" in header(BACKLOG)


def test_no_pod_is_created_before_its_group_is_admitted() -> None:
    _, outcome = backlog()
    phase: dict[tuple[str, str], str] = {}
    created = 0
    for e in outcome.json["events"]:  # in the order things happened
        key = (e["namespace"], e["name"])
        if e["kind"] == "PodGroup" and e["reason"] in PHASES:
            phase[key] = e["reason"]
        elif e["kind"] == "Job" and e["reason"] == "SuccessfulCreate":
            assert phase.get(key) in ("Inqueue", "Running"), f"{e} while {phase.get(key)}"
            created += 1
    assert created == 100


def test_every_job_was_held_then_released_once() -> None:
    _, outcome = backlog()
    held = [(e["namespace"], e["name"]) for e in outcome.events(reason="Held", kind="Job")]
    released = [(e["namespace"], e["name"]) for e in outcome.events(reason="Released", kind="Job")]
    assert len(held) == 50 and sorted(held) == sorted(released)


def test_few_pods_ever_wait_for_a_node() -> None:
    """All 100 pods at once without delayed pod creation; here at most a cluster's worth."""
    timeline, _ = backlog()
    assert max(sample.pending for sample in timeline.timeline.samples) <= 8


def test_every_group_goes_pending_inqueue_running_completed() -> None:
    timeline, outcome = backlog()
    assert timeline.settled, "the backlog drains: nothing deadlocks"
    changes = phase_changes(outcome)
    assert len(changes) == 50
    assert {tuple(c) for c in changes.values()} == {("Pending", "Inqueue", "Running", "Completed")}
    assert {g["phase"] for g in outcome.json["podGroups"]} == {"Completed"}
    assert outcome.summary["binds"] == 100 and outcome.summary["evictions"] == 0


def test_min_resources_were_filled_from_the_jobs() -> None:
    timeline, _ = backlog()
    groups = timeline.cluster.state.list("PodGroup")
    assert {str(g["spec"].get("minResources")) for g in groups} == {"{'cpu': '2', 'pods': '2'}"}


def test_queues_keep_to_their_deserved_shares_while_both_wait() -> None:
    timeline, outcome = backlog()
    last_admitted: dict[str, float] = {}
    for e in outcome.events(reason="Inqueue", kind="PodGroup"):
        last_admitted[e["namespace"]] = e["time"]
    both_wait = min(last_admitted.values())  # both queues have a backlog until then
    samples = [s for s in timeline.timeline.samples if s.time < both_wait]
    gang = 2.0  # cpu: a gang more than the share may be the last one placed
    for sample in samples:
        for name in ("q-a", "q-b"):
            allocated, deserved = sample.queues[name]
            assert allocated <= deserved + gang, (sample.time, name, allocated, deserved)
    used = {"q-a": 0.0, "q-b": 0.0}
    for this, after in zip(samples, [*samples[1:], None], strict=True):
        until = after.time if after is not None else both_wait
        for name in used:
            used[name] += this.queues[name][0] * (until - this.time)
    assert 1.5 <= used["q-a"] / used["q-b"] <= 2.5, used  # weights 2 : 1


# --------------------------------------------------------------------------- refusals
def test_refused_objects_are_not_created_and_say_why() -> None:
    outcome = run("admission/refusals.yaml")
    refused = {
        (e["namespace"], e["name"]): e["message"]
        for e in outcome.events(reason="AdmissionRejected", kind="PodGroup")
    }
    assert refused == {
        ("capped", "second"): (
            "spec.minResources.cpu: the PodGroups of namespace capped would need 4 "
            "(2 for 1 other PodGroup + 2 for this one), more than ResourceQuota "
            "capped/compute allows (hard requests.cpu: 3)"
        ),
        ("capped", "third"): (  # its fill, when its Job came
            "spec.minResources.cpu: the PodGroups of namespace capped would need 4 "
            "(2 for 1 other PodGroup + 2 for this one), more than ResourceQuota "
            "capped/compute allows (hard requests.cpu: 3)"
        ),
        ("default", "closed"): "spec.queue: queue 'shut' is Closed: it admits no new PodGroups",
        ("default", "lost"): (
            "spec.queue: queue 'nowhere' does not exist; create it or name another queue"
        ),
    }
    names = {(g["namespace"], g["name"]) for g in outcome.json["podGroups"]}
    assert names == {("capped", "first"), ("capped", "third"), ("default", "filled")}
    state = sim.run([HERE / "admission/refusals.yaml"]).cluster.state
    assert "minResources" not in state.get("PodGroup", "capped", "third")["spec"]
    assert outcome.pods(job="second", ns="capped") == [], "the refused group's Job stays held"
    assert len(outcome.running(job="filled")) == 3
    assert phase_changes(outcome)[("default", "filled")] == ["Pending", "Inqueue", "Running"]


def test_a_group_admitted_before_its_job_comes_does_not_hold_it() -> None:
    """Without a known Job nothing is filled: the group is admitted at once (DESIGN §3);
    its Job, created after that, is not held. One created in the same tick is."""
    late = [node(), pod_group("g", min_member=2), at(job("j", parallelism=2, group="g"), "5s")]
    outcome = run(documents=late)
    assert outcome.events(reason="Held") == []
    assert len(outcome.running(job="j")) == 2
    same_tick = run(documents=[node(), pod_group("g", min_member=2), job("j", 2, group="g")])
    assert [e["name"] for e in same_tick.events(reason="Held")] == ["j"]
    assert len(same_tick.running(job="j")) == 2


def test_a_backlog_whose_pod_groups_come_before_their_jobs_is_held_too() -> None:
    """kube-batch's usual order (its examples, the chart's NOTES): each PodGroup first.
    Its Job fills its minResources (PodGroupMinResources) and is held until it is
    admitted: only pods of admitted groups ever exist, a cluster's worth at most."""
    documents = list(yaml.safe_load_all((HERE / BACKLOG).read_text()))
    reordered = []
    for document in documents:
        if document["kind"] == "PodGroup" and reordered and reordered[-1]["kind"] == "Job":
            reordered.insert(len(reordered) - 1, document)
        else:
            reordered.append(document)
    assert [d["kind"] for d in reordered[4:6]] == ["PodGroup", "Job"]
    outcome = sim.run(documents=reordered, config=KUBE_BATCH)
    groups = outcome.cluster.state.list("PodGroup")
    assert {str(g["spec"].get("minResources")) for g in groups} == {"{'cpu': '2', 'pods': '2'}"}
    assert max(sample.pending for sample in outcome.timeline.samples) <= 8
    events = Outcome(output.to_json(outcome))
    phase: dict[tuple[str, str], str] = {}
    for e in events.json["events"]:  # in the order things happened
        key = (e["namespace"], e["name"])
        if e["kind"] == "PodGroup" and e["reason"] in PHASES:
            phase[key] = e["reason"]
        elif e["kind"] == "Job" and e["reason"] == "SuccessfulCreate":
            assert phase.get(key) in ("Inqueue", "Running"), f"{e} while {phase.get(key)}"
    assert len(events.events(reason="Held", kind="Job")) == 50


def test_a_group_created_before_its_job_is_filled_when_the_job_comes() -> None:
    """PodGroupMinResources in the simulator's admission, the PodGroup first (the
    simulator itself creates Jobs first when both are due at once)."""
    cluster = SimBackend(ClusterState(), clock.SimClock())
    controller = jobs.JobController(cluster)
    admission = SimAdmission(cluster, controller, JobSetController(cluster, controller))
    cluster.create(queue("default"))
    for obj in (pod_group("g", min_member=2), job("j", parallelism=2, cpu="500m", group="g")):
        obj["metadata"]["namespace"] = "default"
        runner.create(cluster, controller, obj, admission)
    filled = cluster.state.get("PodGroup", "default", "g")
    assert filled is not None and filled["spec"]["minResources"] == {"cpu": "1", "pods": "2"}
    assert job_admission.is_held(controller.jobs[("default", "j")].obj)


def test_a_job_held_before_its_group_is_released_when_the_group_is_too_big_for_it() -> None:
    """kube-batch's example (parallelism 3, minMember 6), the Job first: held while the
    group does not exist; when it comes, 3 pods can never make 6, so the Job goes at
    once and the group stays Pending saying why (held, the group would be admitted
    with no pods and reserve room its 3 pods can never use)."""
    qj = job("qj", parallelism=3, cpu="100m", group="qj")  # 6 × 100m fit: it would be admitted
    late = [node(), qj, at(pod_group("qj", min_member=6), "2s")]
    outcome = run(documents=late)
    (held,) = outcome.events(reason="Held", kind="Job")
    (released,) = outcome.events(reason="Released", kind="Job")
    assert (held["time"], released["time"]) == (0.0, 2.0)
    assert "make 3 pods, fewer than its minMember 6" in released["message"]
    assert len(outcome.pods(job="qj")) == 3 and outcome.bound(job="qj") == []
    assert outcome.group("qj")["phase"] == "Pending"
    assert phase_changes(outcome)[("default", "qj")] == ["Pending"]


def test_a_job_not_held_says_why() -> None:
    """A group waiting Pending (its minResources do not fit) gets a Job of 3 pods for
    its minMember 6: not held, with an event saying why."""
    waiting = pod_group("qj", min_member=6)
    waiting["spec"]["minResources"] = {"cpu": "60"}
    documents = [node(), waiting, at(job("qj", parallelism=3, group="qj"), "1s")]
    outcome = run(documents=documents)
    (event,) = outcome.events(reason="NotHeld", kind="Job")
    assert event["message"].startswith("Job not held: the Jobs of PodGroup default/qj make 3")
    assert outcome.events(reason="Held") == [] and len(outcome.pods(job="qj")) == 3


def test_a_group_with_no_pods_yet_is_admitted_but_not_one_with_too_few() -> None:
    """Enqueue admits a group whose pods do not exist yet (they wait for it), not one
    whose pods exist and are too few for minMember (it could never run)."""
    waiting = run(documents=[node(), pod_group("g", min_member=6)])
    assert waiting.group("g")["phase"] == "Inqueue"
    few = [node(), pod_group("g", min_member=6)] + [pod(f"p{i}", group="g") for i in range(3)]
    outcome = run(documents=few)
    assert outcome.group("g")["phase"] == "Pending"
    assert outcome.bound(group="g") == []


def test_a_held_gang_whose_pods_never_fit_the_nodes_keeps_no_one_out() -> None:
    """12 cpu in all fit the gang's minResources, so it is admitted before its pods
    exist (its Job is held); once they do, nodes of 4 and 8 cpu hold only 1 + 2 of its
    3-cpu pods. It then goes back to Pending, saying why, and holds no room: the 1-cpu
    job after it runs, not waits for ever on an idle cluster (found by
    tests/property/test_invariants.py)."""
    documents = [
        node("n1", cpu="4"),
        node("n2", cpu="8"),
        pod_group("never", min_member=4),
        job("never", parallelism=4, cpu="3", group="never"),
        at(pod_group("small"), "6s"),
        at(job("small", cpu="1", group="small", duration="5s"), "6s"),
    ]
    outcome = run(documents=documents, until="1m")
    assert outcome.group("never")["phase"] == "Pending"
    assert outcome.condition("never", "Unschedulable")["message"] == (
        "4/4 tasks in gang unschedulable: not admitted: 4 pods of cpu 3 never fit on the "
        "nodes, even empty: they hold 3 of them"
    )
    assert outcome.group("small")["phase"] == "Completed"


def test_in_a_queue_tree_too_a_gang_whose_pods_never_fit_keeps_no_one_out() -> None:
    """Queue a's children a1 and a2, a2 guaranteed 1 cpu: a1 may have 15 of the 16 cpu,
    enough for a1's gang of three 5-cpu pods, which two 8-cpu nodes hold only two of.
    The tree counts an admitted gang against the other subtrees' guarantees, so while
    that gang was admitted a1's 1-cpu job was told a2's guarantee kept its cpu free, for
    ever (found by the property test's gangs over queue trees). Sent back to Pending, it
    counts no more."""
    a1, a2 = queue("a1"), queue("a2")
    a1["spec"]["parent"] = a2["spec"]["parent"] = "a"
    a2["spec"]["guarantee"] = {"resource": {"cpu": "1"}}
    documents = [node("n0", cpu="8"), node("n1", cpu="8"), queue("a"), queue("b"), a1, a2]
    documents += [pod_group("wide", min_member=3, queue="a1"), pod_group("one", queue="a1")]
    documents += [job("wide", parallelism=3, cpu="5", group="wide", duration="5s")]
    documents += [job("one", cpu="1", group="one", duration="5s")]
    outcome = run(documents=documents, until="1m")
    assert outcome.group("wide")["phase"] == "Pending"
    assert outcome.group("one")["phase"] == "Completed"


def test_a_gang_for_nodes_the_cluster_lacks_keeps_no_one_out() -> None:
    """Two 4-cpu pods for nodes labelled gpu=yes, on a cluster without one: 8 of its 16
    cpu fit the gang's minResources, and, once admitted, it held them for ever, so the
    gang after it (10 cpu) was told the cluster's free room was too small, on an idle
    cluster. The pods never fit, so the gang is not admitted and says why."""
    picky = job("picky", parallelism=2, cpu="4", group="picky")
    picky["spec"]["template"]["spec"]["nodeSelector"] = {"gpu": "yes"}
    documents = [node("n1", cpu="8"), node("n2", cpu="8"), pod_group("picky", min_member=2)]
    documents += [picky, at(pod_group("small", min_member=2), "3s")]
    documents += [at(job("small", parallelism=2, cpu="5", group="small", duration="5s"), "3s")]
    outcome = run(documents=documents, until="1m")
    assert outcome.group("picky")["phase"] == "Pending"
    assert outcome.condition("picky", "Unschedulable")["message"] == (
        "2/2 tasks in gang unschedulable: not admitted: 2 pods of cpu 4 never fit on the "
        "nodes, even empty: they hold 0 of them (2 node(s) didn't match node selector)"
    )
    assert outcome.group("small")["phase"] == "Completed"


def test_a_gang_with_a_pod_that_fits_no_node_keeps_no_one_out() -> None:
    """A gang needs both its pods, of 9 cpu and 1 cpu, on nodes of 4 and 8: its 9 cpu of
    minResources fit the cluster's 12, but the big pod fits no node. Judged by its
    smallest pod alone it was admitted and held 9 cpu for ever, and the gang after it
    (8 cpu) was told only 3 were free."""
    big = pod_group("g", min_member=2)
    big["spec"]["minResources"] = {"cpu": "9"}
    documents = [node("n1", cpu="4"), node("n2", cpu="8"), big]
    documents += [pod("g-big", cpu="9", group="g"), pod("g-small", cpu="1", group="g")]
    documents += [at(pod_group("after", min_member=2), "3s")]
    documents += [at(pod(f"after-{i}", cpu="4", group="after"), "3s") for i in range(2)]
    outcome = run(documents=documents, until="1m")
    assert outcome.group("g")["phase"] == "Pending"
    assert outcome.condition("g", "Unschedulable")["message"] == (
        "2/2 tasks in gang unschedulable: not admitted: 1 of its 2 pods (cpu 9) fits on no "
        "node, even empty: 1 left of the 2 it needs at once"
    )
    assert len(outcome.bound(group="after")) == 2


def test_a_gang_whose_pods_keep_each_other_off_a_node_is_counted_a_node_each() -> None:
    """Three pods asking for host port 80 on two 8-cpu nodes: their 3 cpu fit many
    times over, but one of them a node. Admitted, the gang held its 3 cpu for ever and
    the gang after it (14 cpu) was told only 13 of the 16 were free, on an idle
    cluster. On three nodes it runs, a pod on each."""
    ports = pod_group("ports", min_member=3)
    ports["spec"]["minResources"] = {"cpu": "3"}
    pods = [pod(f"ports-{i}", group="ports") for i in range(3)]
    for p in pods:
        p["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 80}]
    after = [at(pod_group("after", min_member=2), "3s")]
    after += [at(pod(f"after-{i}", cpu="7", group="after"), "3s") for i in range(2)]
    outcome = run(documents=[node("n1", cpu="8"), node("n2", cpu="8"), ports, *pods, *after])
    assert outcome.group("ports")["phase"] == "Pending"
    assert outcome.condition("ports", "Unschedulable")["message"] == (
        "3/3 tasks in gang unschedulable: not admitted: 3 pods of cpu 1 never fit on the "
        "nodes, even empty: they hold 2 of them (at most one per node)"
    )
    assert len(outcome.bound(group="after")) == 2
    three = [node(f"n{i}", cpu="8") for i in range(3)]
    outcome = run(documents=[*three, ports, *pods])
    assert sorted(p["node"] for p in outcome.bound(group="ports")) == ["n0", "n1", "n2"]
