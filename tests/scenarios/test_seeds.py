"""The seed scenarios: each file's header says what must happen; these check it."""

from scenarios.runner import header, run, scenarios


def test_every_seed_has_a_test() -> None:
    seeds = {path.stem for path in scenarios() if path.stem.startswith("seed-")}
    tested = {
        name[len("test_") :].replace("_", "-")
        for name in globals()
        if name.startswith("test_seed_")
    }
    assert seeds == tested


def test_seed_gang_job() -> None:
    assert "all 6 pods bound at once" in header("seed-gang-job.yaml")
    outcome = run("seed-gang-job.yaml")
    bound = outcome.bound(job="qj-1")
    assert len(bound) == 6
    assert {p["phase"] for p in bound} == {"Running"}
    binds = outcome.events(reason="Scheduled", kind="Pod")
    assert len({e["time"] for e in binds}) == 1, "the gang is bound in one session"
    group = outcome.group("qj-1")
    assert (group["phase"], group["running"]) == ("Running", 6)


def test_seed_gang_too_few_pods() -> None:
    outcome = run("seed-gang-too-few-pods.yaml")
    assert outcome.bound(job="qj-1") == []
    assert len(outcome.pods(job="qj-1")) == 3
    # Inqueue where its Job was held until the group was admitted (delayed pod creation),
    # Pending where its 3 pods came first (too few for minMember: not admitted).
    assert outcome.group("qj-1")["phase"] in ("Inqueue", "Pending")
    condition = outcome.condition("qj-1", "Unschedulable")
    assert condition is not None and condition["status"] == "True"
    assert "3" in condition["message"] and "6" in condition["message"]


def test_seed_late_podgroup() -> None:
    outcome = run("seed-late-podgroup.yaml")
    assert len(outcome.bound(job="plain")) == 2
    assert len(outcome.bound(job="grouped")) == 4
    scheduled = {e["name"]: e["time"] for e in outcome.events(reason="Scheduled", kind="Pod")}
    assert {scheduled["plain-0"], scheduled["plain-1"]} == {0.0}
    grouped = {scheduled[f"grouped-{i}"] for i in range(4)}
    assert len(grouped) == 1 and grouped.pop() >= 10.0, "bound together, once the group exists"
    assert outcome.group("grouped")["phase"] == "Running"


def test_seed_priority() -> None:
    outcome = run("seed-priority.yaml")
    assert outcome.pod("high")["node"] == "node-1"
    assert outcome.pod("low")["node"] is None


def test_seed_proportion() -> None:
    outcome = run("seed-proportion.yaml")
    assert outcome.queue("queue-1")["deserved"] == {"cpu": "3", "memory": "9Gi"}
    assert outcome.queue("queue-2")["deserved"] == {"cpu": "6", "memory": "18Gi"}


def test_seed_reclaim() -> None:
    outcome = run("seed-reclaim.yaml")
    assert len(outcome.running(job="jc")) == 2
    assert outcome.summary["evictions"] == 2
    assert outcome.evictions(job="ja") == 1
    assert outcome.evictions(job="jb") == 1
    for name in ("a", "b", "c"):
        assert outcome.queue(name)["deserved"]["cpu"] == "2"
