"""Pods with ``spec.activeDeadlineSeconds``: the simulated kubelet stops them at their
deadline, as a real one does (phase Failed, reason DeadlineExceeded); and reserve lends
the room it keeps for a whole-node job to jobs whose walltime ends before that job
could start (DESIGN §11, ``framework.lending``)."""

from typing import Any

from kbatch.sim import simulate
from scenarios.objects import at, job, node, pod, pod_group

Json = dict[str, Any]


def phases(until: str) -> dict[str, Json]:
    """Three pods on one node: one that would run 60 s with a 30 s deadline, one that
    ends in 20 s within its 30 s deadline, one with a 45 s deadline and no runtime
    (it would run for ever), and one made at 10 s with a 30 s deadline."""
    docs = [
        node("n1"),
        pod("past-it", duration="60s", activeDeadlineSeconds=30),
        pod("within-it", duration="20s", activeDeadlineSeconds=30),
        pod("endless", activeDeadlineSeconds=45),
        at(pod("later", duration="1h", activeDeadlineSeconds=30), "10s"),
    ]
    run = simulate(documents=docs, until=until)
    return {p["name"]: p for p in run["pods"]}


def test_a_pod_past_its_deadline_fails_then_and_one_within_it_succeeds() -> None:
    before = phases("29s")
    assert {name: p["phase"] for name, p in before.items()} == {
        "past-it": "Running",
        "within-it": "Succeeded",
        "endless": "Running",
        "later": "Running",
    }
    after = phases("50s")
    assert {name: p["phase"] for name, p in after.items()} == {
        "past-it": "Failed",
        "within-it": "Succeeded",
        "endless": "Failed",
        "later": "Failed",  # made at 10 s: its deadline counts from its start, 40 s
    }
    assert phases("39s")["later"]["phase"] == "Running"


def kept_room(walltimes: bool, groups: bool, long_deadlines: bool = True) -> dict[str, float]:
    """Two 4-cpu nodes, each half held until 100 s by a pod whose walltime
    (activeDeadlineSeconds) says so. At 1 s a gang of two 4-cpu pods comes: reserve
    keeps both nodes for it. From 2 s, every 10 s, a 1-cpu job of 30 s comes, as a bare
    pod or a one-pod PodGroup, with a 40 s walltime or none. When each pod first ran."""
    deadline = {"activeDeadlineSeconds": 100} if long_deadlines else {}
    docs = [node("n1", cpu="4"), node("n2", cpu="4")]
    for i in (1, 2):
        docs.append(pod(f"long-{i}", cpu="2", duration="100s", nodeName=f"n{i}", **deadline))
    docs.append(at(pod_group("big", min_member=2), "1s"))
    docs += [at(pod(f"big-{i}", cpu="4", group="big"), "1s") for i in range(2)]
    walltime = {"activeDeadlineSeconds": 40} if walltimes else {}
    for t in range(2, 80, 10):
        group = f"small-{t}" if groups else None
        if group is not None:
            docs.append(at(pod_group(group), f"{t}s"))
        docs.append(at(pod(f"small-{t}", duration="30s", group=group, **walltime), f"{t}s"))
    run = simulate(documents=docs, until="5m")
    return {e["name"]: e["time"] for e in run["events"] if e["reason"] == "Scheduled"}


def test_reserve_lends_the_room_it_keeps_to_jobs_whose_walltime_ends_in_time() -> None:
    """The gang's room is sure to be free at 100 s (the long pods' deadlines): a small job
    whose 40 s walltime ends by then runs in it at once (those of 42 s and 52 s, which
    waited without walltimes), one that would not (62 s, 72 s) waits, and the gang
    starts at 100 s all the same."""
    without = kept_room(walltimes=False, groups=False)
    lent = kept_room(walltimes=True, groups=False)
    assert without["big-0"] == lent["big-0"] == lent["big-1"] == 100.0
    for t in (42, 52):
        assert f"small-{t}" not in without
        assert lent[f"small-{t}"] == t, (t, lent)
    for t in (62, 72):
        assert f"small-{t}" not in lent, (t, lent)  # it would still run at 100 s


def test_a_pending_group_is_not_admitted_on_room_kept_for_another() -> None:
    """Enqueue does not count kept room as idle, walltimes or not (``framework.lending``
    says why): the small groups wait as they did."""
    assert kept_room(walltimes=True, groups=True) == kept_room(walltimes=False, groups=True)


def test_no_room_is_lent_while_the_kept_jobs_start_is_not_known() -> None:
    """Without deadlines on the pods in the gang's way its start is not known: nothing
    may be lent, whatever the small jobs' walltimes."""
    lent = kept_room(walltimes=True, groups=False, long_deadlines=False)
    unlent = kept_room(walltimes=False, groups=False, long_deadlines=False)
    assert lent == unlent
    assert "small-42" not in lent


def deadline_job(name: str, seconds: int | None, cpu: str = "1", **template: Any) -> Json:
    """A one-pod Job of 30 s (100 s on a named node) with its own activeDeadlineSeconds."""
    made = job(name, cpu=cpu, duration="100s" if template else "30s")
    made["spec"]["template"]["spec"].update(template)
    if seconds is not None:
        made["spec"]["activeDeadlineSeconds"] = seconds
    return made


def kept_room_of_jobs(job_deadlines: bool) -> dict[str, float]:
    """``kept_room``'s cluster with the long and the small pods made by Jobs, the
    deadlines on the Jobs (100 s and 40 s) or nowhere: when each Job's pod first ran."""
    docs = [node("n1", cpu="4"), node("n2", cpu="4")]
    long_deadline, small_deadline = (100, 40) if job_deadlines else (None, None)
    for i in (1, 2):
        docs.append(deadline_job(f"long-{i}", long_deadline, cpu="2", nodeName=f"n{i}"))
    docs.append(at(pod_group("big", min_member=2), "1s"))
    docs += [at(pod(f"big-{i}", cpu="4", group="big"), "1s") for i in range(2)]
    docs += [at(deadline_job(f"small-{t}", small_deadline), f"{t}s") for t in range(2, 80, 10)]
    run = simulate(documents=docs, until="5m")
    return {
        e["name"].rpartition("-")[0] if e["name"].startswith("small") else e["name"]: e["time"]
        for e in run["events"]
        if e["reason"] == "Scheduled"
    }


def test_reserve_lends_kept_room_by_the_deadlines_of_jobs_as_of_pods() -> None:
    """The deadlines on the Jobs, not their pods (how Jobs mostly carry them): the job
    controller ends the pods by then, so the room is lent as in
    ``test_reserve_lends_the_room_it_keeps_to_jobs_whose_walltime_ends_in_time``."""
    without = kept_room_of_jobs(job_deadlines=False)
    lent = kept_room_of_jobs(job_deadlines=True)
    assert without["big-0"] == lent["big-0"] == lent["big-1"] == 100.0
    for t in (42, 52):
        assert f"small-{t}" not in without
        assert lent[f"small-{t}"] == t, (t, lent)
    for t in (62, 72):
        assert f"small-{t}" not in lent, (t, lent)
