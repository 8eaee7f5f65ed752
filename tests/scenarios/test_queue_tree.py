"""Queues in a tree (DESIGN §14) through the simulator: each file in queue-tree/ says
in its header what must happen; these check it."""

from typing import Any

import pytest
import yaml

from scenarios.runner import HERE, Outcome, run


def cpu(outcome: Outcome, queue: str, field: str = "deserved") -> str:
    return str(outcome.queue(queue)[field].get("cpu", "0"))


def test_a_siblings_unused_share_stays_in_the_team() -> None:
    outcome = run("queue-tree/sibling-share.yaml", until="1m")
    deserved = {q: cpu(outcome, q) for q in ("team-a", "team-b", "a1", "a2", "b1", "b2")}
    assert deserved == {"team-a": "6", "team-b": "6", "a1": "5", "a2": "1", "b1": "3", "b2": "3"}
    assert len(outcome.running(job="ja1")) == 5
    assert len(outcome.running(job="ja2")) == 1
    assert len(outcome.running(job="jb1")) == 3
    assert len(outcome.running(job="jb2")) == 3
    # a parent's status is its subtree's
    assert cpu(outcome, "team-a", "allocated") == "6"
    assert cpu(outcome, "team-b", "request") == "16"


def test_a_guarantee_is_kept_while_the_team_is_idle() -> None:
    before = run("queue-tree/guarantee-idle.yaml", until="20s")
    assert len(before.running(job="jb1")) == 4
    assert cpu(before, "team-a") == "4"
    after = run("queue-tree/guarantee-idle.yaml", until="1m")
    assert len(after.running(job="ja1")) == 4
    assert len(after.running(job="jb1")) == 4
    assert after.summary["evictions"] == 0


def test_reclaim_takes_from_the_nearest_relatives_first() -> None:
    outcome = run("queue-tree/reclaim-nearest.yaml", until="2m")
    evicted = [e["name"] for e in outcome.events("Evict", kind="Pod")]
    assert evicted[0].startswith("ja1-"), evicted  # the sibling, though less over-served
    assert outcome.evictions(job="ja1") == 1
    assert outcome.evictions(job="jb1") == 5
    assert len(outcome.running(job="ja2")) == 6
    assert len(outcome.running(job="ja1")) == 6
    assert len(outcome.running(job="jb1")) == 12
    assert {q: cpu(outcome, q) for q in ("team-a", "team-b", "a1", "a2")} == {
        "team-a": "12",
        "team-b": "12",
        "a1": "6",
        "a2": "6",
    }


def test_a_parents_capability_caps_its_children_together() -> None:
    outcome = run("queue-tree/parent-capability.yaml", until="1m")
    assert len(outcome.running(job="ja1")) + len(outcome.running(job="ja2")) == 4
    assert len(outcome.running(job="jb1")) == 12
    assert cpu(outcome, "team-a") == "4"
    assert cpu(outcome, "team-a", "allocated") == "4"


def test_a_group_in_a_queue_with_children_waits_and_is_told_why() -> None:
    outcome = run("queue-tree/group-in-parent.yaml", until="30s")
    assert len(outcome.running(job="ja1")) == 2
    assert outcome.group("jteam")["phase"] == "Pending"
    assert outcome.bound(job="jteam") == []
    condition = outcome.condition("jteam", "Unschedulable")
    assert condition is not None
    assert "team-a has child queues (a1)" in condition["message"]


def test_the_webhooks_keep_groups_and_labelled_jobs_out_of_a_queue_with_children() -> None:
    outcome = run("queue-tree/leaves-only.yaml", until="30s")
    (rejected,) = outcome.events(reason="AdmissionRejected", kind="PodGroup")
    assert rejected["name"] == "pg-team"
    assert rejected["message"] == (
        "spec.queue: queue 'team-a' has child queues (a1): PodGroups go in leaf queues "
        "only; name one of its leaves"
    )
    (told,) = [e for e in outcome.events(reason="PodGroupRefused") if e["name"] == "in-team"]
    assert told["type"] == "Warning"
    assert told["message"].startswith(
        "metadata.labels[kbatch.io/queue]: PodGroup default/in-team not made, the Job "
        "waits, suspended: queue 'team-a' has child queues (a1)"
    )
    assert all(g["name"] != "in-team" for g in outcome.json["podGroups"])
    assert outcome.pods(job="in-team") == []
    assert len(outcome.running(job="in-a1")) == 2


def test_the_json_gives_parent_only_to_a_queue_under_another() -> None:
    outcome = run("queue-tree/leaves-only.yaml", until="5s")
    assert outcome.queue("a1")["parent"] == "team-a"
    assert "parent" not in outcome.queue("team-a")
    assert list(outcome.queue("a1")) == [
        "name", "parent", "weight", "deserved", "allocated", "request"
    ]  # fmt: skip


def test_only_the_namespaces_a_queue_selects_may_use_it() -> None:
    outcome = run("queue-tree/namespace-selector.yaml", until="30s")
    rule = "its spec.namespaceSelector (team=a) does not select it"
    refused = {e["name"]: e["message"] for e in outcome.events(reason="AdmissionRejected")}
    assert refused == {
        "jb": f"metadata.labels[kbatch.io/queue]: namespace 'b-dev' may not use queue "
        f"'team-a': {rule}",
        "pb": f"spec.queue: namespace 'b-dev' may not use queue 'team-a': {rule}",
    }
    running = [
        p["namespace"] + "/" + p["name"] for p in outcome.json["pods"] if p["phase"] == "Running"
    ]
    # a-dev is team a; shared has no selector
    assert sorted(running) == ["a-dev/ja-0", "a-dev/ja-1", "b-dev/shared-0", "b-dev/shared-1"]
    # relabelled after its group was admitted by the webhook: the scheduler holds it
    assert outcome.group("jm", ns="moving")["phase"] == "Pending"
    assert outcome.pods(job="jm", ns="moving") == []
    (condition,) = outcome.group("jm", ns="moving")["conditions"]
    assert condition["reason"] == "NamespaceNotAllowed"
    told = f"namespace 'moving' may not use queue 'team-a': {rule}"
    assert condition["message"] == told
    assert [e["message"] for e in outcome.events(reason="Unschedulable", kind="PodGroup")
            if e["name"] == "jm"][-1] == told  # fmt: skip


# ----------------------------------------------------------------------- borrowing
KUBE_BATCH = HERE.parents[1] / "examples" / "conf" / "kube-batch.yaml"
BORROW = "queue-tree/borrow-idle-room.yaml"


def test_a_queue_over_its_share_borrows_room_no_one_else_can_use() -> None:
    outcome = run(BORROW, until="20s")
    assert len(outcome.running(job="r-small")) == 1  # 14 of 16 cpu busy
    assert outcome.group("b-big1")["phase"] == "Pending"
    borrowing = outcome.condition("r-small", "kbatch.io/Borrowing")
    assert borrowing is not None and borrowing["status"] == "True"
    assert "borrows room of queue batch" in borrowing["message"]
    assert outcome.condition("r0", "kbatch.io/Borrowing") is None  # placed within its share


def test_the_borrowed_job_is_the_first_reclaimed_when_the_owner_needs_the_room() -> None:
    outcome = run(BORROW, until="1m")
    evicted = [e["name"] for e in outcome.events("Evict", kind="Pod")]
    assert evicted == ["r-small-0"], evicted  # research keeps its 12, above 10.67
    assert len(outcome.running(job="b-fits")) == 4
    assert all(len(outcome.running(job=f"r{i}")) == 1 for i in range(6))


def test_kube_batchs_conf_keeps_the_strict_wait() -> None:
    outcome = run(BORROW, until="1m", config=KUBE_BATCH)
    assert outcome.bound(job="r-small") == []
    condition = outcome.condition("r-small", "Unschedulable")
    assert condition is not None
    assert "queue research is using its deserved share" in condition["message"]
    assert outcome.condition("r-small", "kbatch.io/Borrowing") is None
    assert outcome.summary["evictions"] == 0


def with_limits(research: dict[str, str] | None, batch: dict[str, str] | None) -> list[Any]:
    """The borrowing scenario, research with ``research`` as its borrowingLimit and batch
    with ``batch`` as its lendingLimit (None: not set)."""
    documents = list(yaml.safe_load_all((HERE / BORROW).read_text()))
    for document in documents:
        name = document["metadata"]["name"]
        if document["kind"] == "Queue" and name == "research" and research is not None:
            document["spec"]["borrowingLimit"] = research
        if document["kind"] == "Queue" and name == "batch" and batch is not None:
            document["spec"]["lendingLimit"] = batch
    return documents


@pytest.mark.parametrize(
    ("research", "batch", "borrows"),
    [
        # research holds 12 of its deserved 10.67: the 2-cpu job takes it 3.33 beyond
        ({"cpu": "4"}, None, True),
        ({"cpu": "3"}, None, False),
        # batch's nominal share is 5.33 cpu, all unused: lending 1 keeps 4.33 of the
        # 4 idle cpu in it; lending 4 keeps 1.33, leaving 2.67 to borrow
        (None, {"cpu": "1"}, False),
        (None, {"cpu": "4"}, True),
    ],
)
def test_borrowing_and_lending_limits_cap_what_is_borrowed(
    research: dict[str, str] | None, batch: dict[str, str] | None, borrows: bool
) -> None:
    outcome = run(documents=with_limits(research, batch), until="20s")
    assert len(outcome.running(job="r-small")) == (1 if borrows else 0)
    if not borrows:
        condition = outcome.condition("r-small", "Unschedulable")
        assert condition is not None
        assert (
            "research is using its deserved share and may borrow no more" in (condition["message"])
        )
