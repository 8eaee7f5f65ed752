"""The seed scenarios: each file's header says what must happen; these check it.

Each seed's check is a function of an Outcome, whoever produced it: the
simulator here, a real cluster in tests/e2e/test_seeds_cluster.py (``CHECKS``).
"""

from collections.abc import Callable

from scenarios.runner import Outcome, header, run, scenarios


def test_every_seed_has_a_test() -> None:
    seeds = {path.stem for path in scenarios() if path.stem.startswith("seed-")}
    tested = {
        name[len("test_") :].replace("_", "-")
        for name in globals()
        if name.startswith("test_seed_")
    }
    assert seeds == tested
    assert {name.removesuffix(".yaml") for name in CHECKS} == seeds


def check_gang_job(outcome: Outcome) -> None:
    bound = outcome.bound(job="qj-1")
    assert len(bound) == 6
    assert {p["phase"] for p in bound} == {"Running"}
    binds = outcome.events(reason="Scheduled", kind="Pod")
    assert len({e["time"] for e in binds}) == 1, "the gang is bound in one session"
    group = outcome.group("qj-1")
    assert (group["phase"], group["running"]) == ("Running", 6)


def check_gang_too_few_pods(outcome: Outcome) -> None:
    assert outcome.bound(job="qj-1") == []
    assert len(outcome.pods(job="qj-1")) == 3
    # Its Job is not held (or no longer: 3 pods can never make minMember 6), so the
    # pods exist and enqueue does not admit the group (webhooks/README.md).
    assert outcome.group("qj-1")["phase"] == "Pending"
    condition = outcome.condition("qj-1", "Unschedulable")
    assert condition is not None and condition["status"] == "True"
    assert "3" in condition["message"] and "6" in condition["message"]


def check_late_podgroup(outcome: Outcome) -> None:
    assert len(outcome.bound(job="plain")) == 2
    assert len(outcome.bound(job="grouped")) == 4
    scheduled = {e["name"]: e["time"] for e in outcome.events(reason="Scheduled", kind="Pod")}
    assert {scheduled[p["name"]] for p in outcome.pods(job="plain")} == {0.0}
    grouped = {scheduled[p["name"]] for p in outcome.pods(job="grouped")}
    assert len(grouped) == 1 and grouped.pop() >= 10.0, "bound together, once the group exists"
    assert outcome.group("grouped")["phase"] == "Running"


def check_priority(outcome: Outcome) -> None:
    assert outcome.pod("high")["node"] == "node-1"
    assert outcome.pod("low")["node"] is None


def check_proportion(outcome: Outcome) -> None:
    assert outcome.queue("queue-1")["deserved"] == {"cpu": "3", "memory": "9Gi"}
    assert outcome.queue("queue-2")["deserved"] == {"cpu": "6", "memory": "18Gi"}


def check_reclaim(outcome: Outcome) -> None:
    assert len(outcome.running(job="jc")) == 2
    assert outcome.summary["evictions"] == 2
    assert outcome.evictions(job="ja") == 1
    assert outcome.evictions(job="jb") == 1
    for name in ("a", "b", "c"):
        assert outcome.queue(name)["deserved"]["cpu"] == "2"


CHECKS: dict[str, Callable[[Outcome], None]] = {
    "seed-gang-job.yaml": check_gang_job,
    "seed-gang-too-few-pods.yaml": check_gang_too_few_pods,
    "seed-late-podgroup.yaml": check_late_podgroup,
    "seed-priority.yaml": check_priority,
    "seed-proportion.yaml": check_proportion,
    "seed-reclaim.yaml": check_reclaim,
}


def test_seed_gang_job() -> None:
    assert "all 6 pods bound at once" in header("seed-gang-job.yaml")
    check_gang_job(run("seed-gang-job.yaml"))


def test_seed_gang_too_few_pods() -> None:
    check_gang_too_few_pods(run("seed-gang-too-few-pods.yaml"))


def test_seed_late_podgroup() -> None:
    check_late_podgroup(run("seed-late-podgroup.yaml"))


def test_seed_priority() -> None:
    check_priority(run("seed-priority.yaml"))


def test_seed_proportion() -> None:
    check_proportion(run("seed-proportion.yaml"))


def test_seed_reclaim() -> None:
    check_reclaim(run("seed-reclaim.yaml"))
