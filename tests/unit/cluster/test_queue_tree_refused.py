"""Queues the tree refuses (DESIGN §14), without webhooks: the scheduler leaves them out
and tells their groups why, naming spec.parent; a group in a queue with children is
told that PodGroups go in leaf queues. The rest of the tree works."""

from kbatch.api import API_VERSION
from kbatch.cluster.state import ClusterState
from kbatch.operators.scheduler.core.runner import default_conf, open_session


def queue(name: str, parent: str | None = None) -> dict:
    spec: dict = {"weight": 1}
    if parent is not None:
        spec["parent"] = parent
    return {"apiVersion": API_VERSION, "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def pod_group(name: str, queue_name: str) -> dict:
    return {
        "apiVersion": API_VERSION,
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {"minMember": 1, "queue": queue_name},
    }


def verdicts(*objects: dict) -> tuple[dict[str, tuple[str, str]], set[str]]:
    state = ClusterState()
    for obj in objects:
        state.apply(obj)
    session = open_session(state.snapshot(), default_conf(), now=0.0, uid="s1")
    out = {}
    for job in session.jobs.values():
        verdict = session.invalid_reason(job)
        if verdict is not None and verdict.reason != "NotEnoughTasks":  # (no pods here)
            out[job.name] = (verdict.reason, verdict.message)
    return out, set(session.queues)


def test_a_queue_under_a_missing_parent_is_left_out_and_its_groups_told_why() -> None:
    got, queues = verdicts(
        queue("team-a"),
        queue("a1", "team-a"),
        queue("lost", "nope"),
        queue("under-lost", "lost"),
        pod_group("ok", "a1"),
        pod_group("pg", "lost"),
        pod_group("pg2", "under-lost"),
    )
    assert queues == {"team-a", "a1"}
    assert got == {
        "pg": ("QueueInvalid", "queue 'lost' is ignored: spec.parent: queue 'nope' does not exist"),
        "pg2": (
            "QueueInvalid",
            "queue 'under-lost' is ignored: spec.parent: its parent 'lost' is left out of "
            "the tree (spec.parent: queue 'nope' does not exist)",
        ),
    }


def test_a_cycle_of_parents_is_left_out() -> None:
    got, queues = verdicts(queue("x", "y"), queue("y", "x"), pod_group("pg", "x"))
    assert "x" not in queues and "y" not in queues
    assert got["pg"][0] == "QueueInvalid"
    assert "spec.parent: a cycle of parents: x → y → x" in got["pg"][1]


def test_a_group_in_a_queue_with_children_waits_told_the_children() -> None:
    got, _ = verdicts(
        queue("team-a"), queue("a1", "team-a"), queue("a2", "team-a"), pod_group("pg", "team-a")
    )
    assert got == {
        "pg": (
            "QueueNotLeaf",
            "queue 'team-a' has child queues (a1, a2): PodGroups go in leaf queues only",
        )
    }


def test_flat_queues_are_left_as_they_are() -> None:
    got, queues = verdicts(queue("root"), queue("b"), pod_group("pg", "b"))
    assert queues == {"root", "b"} and got == {}
