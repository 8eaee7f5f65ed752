"""The line: waiting jobs in the order kbatch considers them, their positions and reasons."""

import pytest

from builders import Cluster, vec
from kbatch.api.podgroup import ConditionType, PodGroupPhase
from kbatch.operators.scheduler.core.framework.info import TaskStatus
from kbatch.operators.scheduler.core.framework.podgroup_status import condition
from kbatch.operators.scheduler.core.runner import default_conf
from kbatch.visibility import standing as visibility
from scenarios import live
from scenarios import objects as o

PRIORITY_FIRST = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
"""


def names(line: visibility.Line) -> list[str]:
    return [row.name for row in line.jobs]


def full_cluster() -> Cluster:
    """One node, full: whatever waits, waits."""
    cluster = Cluster().node("n1", cpu=4)
    cluster.job("holder", phase=PodGroupPhase.RUNNING).tasks(
        4, cpu=1, status=TaskStatus.RUNNING, node="n1"
    )
    return cluster


def test_a_queue_s_jobs_go_by_priority_then_by_age() -> None:
    cluster = full_cluster()
    cluster.job("young", created=30.0).tasks(1)
    cluster.job("urgent", priority=100, created=40.0).tasks(1)
    cluster.job("old", created=10.0).tasks(1)
    line = visibility.line_of(cluster.open(PRIORITY_FIRST))
    assert names(line) == ["urgent", "old", "young"]
    assert [(r.queue_position, r.position) for r in line.jobs] == [(1, 1), (2, 2), (3, 3)]


def test_queues_go_in_queue_order_and_each_queue_s_line_follows_in_turn() -> None:
    """proportion orders queues by share: the queue holding nothing goes first."""
    cluster = Cluster().node("n1", cpu=4).queue("busy").queue("idle")
    cluster.job("busy-running", queue="busy", phase=PodGroupPhase.RUNNING).tasks(
        4, cpu=1, status=TaskStatus.RUNNING, node="n1"
    )
    cluster.job("busy-1", queue="busy", created=1.0).tasks(1)
    cluster.job("idle-1", queue="idle", created=2.0).tasks(1)
    cluster.job("idle-2", queue="idle", created=3.0).tasks(1)
    line = visibility.line_of(cluster.open())
    assert [q.name for q in line.queues if q.waiting] == ["idle", "busy"]
    assert [(r.name, r.queue_position, r.position) for r in line.jobs] == [
        ("idle-1", 1, 1),
        ("idle-2", 2, 2),
        ("busy-1", 1, 3),
    ]
    busy = next(q for q in line.queues if q.name == "busy")
    assert (busy.running, busy.inqueue, busy.waiting) == (1, 1, 1)
    assert busy.allocated == {"cpu": "4", "memory": "4Gi"}
    assert busy.share > 0 and next(q for q in line.queues if q.name == "idle").share == 0


def unschedulable(message: str):
    return condition(ConditionType.UNSCHEDULABLE, True, "NotEnoughResources", message)


@pytest.mark.parametrize(
    ("setup", "reason"),
    [
        (
            lambda c: setattr(
                c.job("j", phase=PodGroupPhase.INQUEUE).tasks(2).job,
                "conditions",
                (unschedulable("2/2 tasks in gang unschedulable: 1 Insufficient cpu"),),
            ),
            "2/2 tasks in gang unschedulable: 1 Insufficient cpu",
        ),
        (
            lambda c: c.job("j", phase=PodGroupPhase.PENDING).tasks(1),
            "waiting to be admitted (enqueue)",
        ),
        (
            lambda c: c.job("j", phase=PodGroupPhase.INQUEUE).tasks(1),
            "admitted, waiting for room for its minimum",
        ),
        (lambda c: c.job("j", min_member=3).tasks(1), "1/3 tasks in gang"),  # gang: too few pods
    ],
    ids=["published-condition", "pending", "inqueue", "invalid-in-session"],
)
def test_the_reason_says_why_in_words(setup, reason: str) -> None:
    cluster = full_cluster()
    setup(cluster)
    (row,) = visibility.line_of(cluster.open()).jobs
    assert reason in row.reason


def test_a_job_of_a_missing_queue_is_listed_last_and_never_considered() -> None:
    cluster = full_cluster()
    cluster.job("lost", queue="nope", created=1.0).tasks(1)
    cluster.job("fine", created=2.0).tasks(1)
    line = visibility.line_of(cluster.open())
    assert [(r.name, r.position, r.queue_position) for r in line.jobs] == [
        ("fine", 1, 1),
        ("lost", None, None),
    ]
    assert line.jobs[1].reason == "queue 'nope' does not exist"


def test_jobs_that_started_are_not_in_line_and_running_ones_are_listed_apart() -> None:
    cluster = full_cluster()
    cluster.job("done", phase=PodGroupPhase.COMPLETED).tasks(1, status=TaskStatus.SUCCEEDED)
    line = visibility.line_of(cluster.open())
    assert line.jobs == [] and [r.name for r in line.running] == ["holder"]


# ----------------------------------------------------------------------------- from objects
def objects_of(*documents: dict, now: float = 100.0) -> visibility.ClusterObjects:
    kinds: dict[str, list[dict]] = {}
    for doc in documents:
        kinds.setdefault(doc["kind"], []).append(doc)
    return visibility.ClusterObjects(
        now=now,
        nodes=kinds.get("Node", []),
        pods=kinds.get("Pod", []),
        pod_groups=kinds.get("PodGroup", []),
        queues=kinds.get("Queue", []),
        events=kinds.get("Event", []),
    )


def stamped(doc: dict, created: str) -> dict:
    doc["metadata"]["creationTimestamp"] = created
    return doc


def test_the_line_of_listed_objects_ignores_what_kbatch_refuses_and_says_so() -> None:
    bad = o.pod_group("bad", 1)
    bad["spec"]["minMember"] = 0
    objects = objects_of(
        o.node("n1", cpu="1"),
        o.queue("default"),
        stamped(o.pod_group("second", 1), "2024-01-01T00:00:10Z"),
        stamped(o.pod("second-0", group="second"), "2024-01-01T00:00:10Z"),
        stamped(o.pod_group("first", 1), "2024-01-01T00:00:05Z"),
        stamped(o.pod("first-0", cpu="2", group="first"), "2024-01-01T00:00:05Z"),
        bad,
    )
    line = visibility.line(objects, default_conf())
    assert names(line) == ["first", "second"]  # drf: both hold nothing; then the older
    assert len(line.warnings) == 1 and "PodGroup bad" in line.warnings[0]
    assert "spec.minMember" in line.warnings[0]


def event(obj: str, reason: str, when: str, kind: str = "Pod") -> dict:
    return {
        "kind": "Event",
        "metadata": {"name": f"{obj}.{reason}", "namespace": "default"},
        "involvedObject": {"kind": kind, "name": obj, "namespace": "default"},
        "type": "Warning",
        "reason": reason,
        "message": f"{reason} of {obj}",
        "lastTimestamp": when,
    }


def test_explain_tells_the_whole_story() -> None:
    documents = [
        o.node("n1", cpu="2"),
        *live.gang("running", 2, duration="60s", deadline=60),
        *live.gang("ahead", 2, submit_at="1s"),
        *live.gang("me", 2, submit_at="2s"),
    ]
    objects = live.cluster_at(documents, 5.0)
    objects = visibility.ClusterObjects(
        **{
            **objects.__dict__,
            "events": [
                event("me-1", "FailedScheduling", "1970-01-01T00:00:03Z"),
                event("me", "Unschedulable", "1970-01-01T00:00:02Z", kind="PodGroup"),
                event("ahead-0", "FailedScheduling", "1970-01-01T00:00:01Z"),  # not its
            ],
        }
    )
    session, _ = visibility.open_session(objects, default_conf())
    line = visibility.line_of(session)
    story = visibility.explain(session, line, objects, "default", "me")
    assert story is not None
    assert (story.job.queue_position, story.job.position, story.ahead) == (2, 2, 1)
    assert [r.name for r in story.ahead_in_queue] == ["ahead"]
    assert [r.name for r in story.running_in_queue] == ["running"]
    assert story.pods == {"Pending": 2}
    assert story.min_resources == {"cpu": "2", "pods": "2"}
    assert [c["type"] for c in story.conditions] == ["Unschedulable"]
    assert [(e["object"], e["reason"]) for e in story.events] == [
        ("PodGroup/me", "Unschedulable"),
        ("Pod/me-1", "FailedScheduling"),
    ]
    assert visibility.explain(session, line, objects, "default", "nobody") is None


def test_explain_a_pod_of_its_own() -> None:
    objects = live.cluster_at([o.node("n1", cpu="1"), o.pod("big", cpu="2")], 3.0)
    session, _ = visibility.open_session(objects, default_conf())
    story = visibility.explain(session, visibility.line_of(session), objects, "default", "big")
    assert story is not None and story.job.kind == "Pod"
    assert story.job.position == 1 and "Insufficient cpu" in story.job.reason


def test_quantities_leave_out_zero_and_unbounded_amounts() -> None:
    dims = Cluster().snapshot().dims
    vector = vec(cpu=1.5, memory=2)
    vector[dims.index["nvidia.com/gpu"]] = float("inf")
    assert visibility.quantities(dims, vector) == {"cpu": "1500m", "memory": "2Gi"}


def test_kbatch_queues_lists_the_tree_each_queue_with_its_subtree() -> None:
    from kbatch.visibility import output

    cluster = Cluster().node("n1", cpu=8)
    for name, parent in (("team-a", None), ("team-b", None), ("a1", "team-a"), ("a2", "team-a")):
        cluster.queue(name)
        cluster.queues[name].parent = parent
    cluster.job("run-a1", queue="a1", phase=PodGroupPhase.RUNNING).tasks(
        2, cpu=1, status=TaskStatus.RUNNING, node="n1"
    )
    cluster.job("wait-a2", queue="a2", phase=PodGroupPhase.PENDING).tasks(1, cpu=100)
    line = visibility.line_of(cluster.open())
    tree = [(q.name, q.depth) for q in line.queues if q.name != "default"]
    at = tree.index(("team-a", 0))
    # team-a's children right after it (in queue order: a2, holding nothing, first)
    assert tree[at + 1 : at + 3] == [("a2", 1), ("a1", 1)]
    assert ("team-b", 0) in tree and len(tree) == 4
    team_a = next(q for q in line.queues if q.name == "team-a")
    assert (team_a.running, team_a.pending, team_a.allocated["cpu"]) == (1, 1, "2")
    assert output.queue_data(next(q for q in line.queues if q.name == "a1"))["parent"] == "team-a"
    assert "parent" not in output.queue_data(team_a)
    rendered = [row for row in output.queues_table(line.queues).columns[0].cells]
    assert "  └ a1" in rendered


def test_explain_says_a_group_runs_on_borrowed_room() -> None:
    """``kbatch explain`` shows the kbatch.io/Borrowing condition's words as a fact."""
    from rich.console import Console

    from kbatch.visibility import output
    from kbatch.visibility.standing import Explanation, JobRow

    row = JobRow(
        "default", "r-small", "PodGroup", "research", "Running", 1, 1, 1, 0, 0.0, None, None, ""
    )
    words = "queue research is over its deserved share and borrows room of queue batch"
    borrowing = {"type": "kbatch.io/Borrowing", "status": "True", "message": words}
    story = Explanation(row, [borrowing], {}, {"Running": 1}, [], 0, [], [])
    console = Console(width=200, record=True)
    console.print(output.explanation(story, 10.0, None, "the default"))
    facts = [line for line in console.export_text().splitlines() if line.startswith("Borrowing")]
    assert facts and "borrows room of queue batch" in facts[0]
    story = Explanation(row, [{**borrowing, "status": "False"}], {}, {}, [], 0, [], [])
    console = Console(width=200, record=True)
    console.print(output.explanation(story, 10.0, None, "the default"))
    assert not [line for line in console.export_text().splitlines() if line.startswith("Borrow")]
