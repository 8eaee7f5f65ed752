"""Jumping over quiet ticks and leaving settled jobs out of snapshots change nothing.

Each workload runs twice: as ``kbatch simulate`` runs it, and with a session every
period and every job in every snapshot (``runner.Options.skip_quiet_ticks`` and
``leave_out_settled`` off). The full JSON must be the same, but for
``summary.sessions``, which counts the sessions that ran (fewer when jumping).
"""

import functools
from pathlib import Path
from typing import Any

import pytest

from kbatch.sim import runner, simulate, trace
from scenarios.objects import at, conf_map, job, node, pod, pod_group, queue

ROOT = Path(__file__).parents[2]
EXAMPLES = ROOT / "examples"
HERE = Path(__file__).parent
TESTDATA = ROOT.parent / "shared" / "armada-simulator-testdata"
Json = dict[str, Any]

FILES = {
    "gang-job": ([EXAMPLES / "sim-cluster.yaml", EXAMPLES / "gang-job.yaml"], None),
    "job-stream": ([EXAMPLES / "sim-cluster.yaml", EXAMPLES / "job-stream.yaml"], None),
    "two-queues": ([EXAMPLES / "sim-cluster.yaml", EXAMPLES / "two-queues.yaml"], "30m"),
    "suspended-job": ([EXAMPLES / "sim-cluster.yaml", EXAMPLES / "suspended-job.yaml"], "5m"),
    "seed-late-podgroup": ([HERE / "seed-late-podgroup.yaml"], "3m"),
    "seed-reclaim": ([HERE / "seed-reclaim.yaml"], "5m"),
    "backlog": ([HERE / "admission" / "backlog.yaml"], None),
    "reclaim-pingpong": ([HERE / "policy" / "reclaim-pingpong.yaml"], "3m"),
    "preempt-keeps-its-room": ([HERE / "policy" / "preempt-keeps-its-room.yaml"], "3m"),
}


def run_both(**inputs: Any) -> tuple[Json, Json]:
    """The JSON as simulated, and as simulated with every tick and every job."""
    quick = simulate(warn=lambda _: None, **inputs)
    every_tick = functools.partial(runner.Options, skip_quiet_ticks=False, leave_out_settled=False)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(runner, "Options", every_tick)
        slow = simulate(warn=lambda _: None, **inputs)
    return quick, slow


def assert_same_but_sessions(quick: Json, slow: Json) -> None:
    assert quick["summary"]["sessions"] <= slow["summary"]["sessions"]
    quick = {**quick, "summary": {**quick["summary"], "sessions": None}}
    slow = {**slow, "summary": {**slow["summary"], "sessions": None}}
    for key in slow:
        assert quick[key] == slow[key], key
    assert quick == slow


@pytest.mark.parametrize("name", sorted(FILES))
def test_manifests(name: str) -> None:
    files, until = FILES[name]
    quick, slow = run_both(paths=files, until=until)
    assert_same_but_sessions(quick, slow)


def test_a_lifetime_ending_while_work_waits() -> None:
    """The lifetime plugin's clock: the queue-a jobs become reclaimable at 2m, with no
    event of their own then (the jump must stop there)."""
    conf = conf_map(
        'actions: "enqueue, reclaim, allocate, backfill"\n'
        "tiers:\n"
        "- plugins: [{name: priority}, {name: gang}, {name: conformance}, {name: lifetime}]\n"
        "- plugins: [{name: drf}, {name: predicates}, {name: proportion}, {name: nodeorder}]\n"
    )
    docs: list[Any] = [conf, node("n1"), queue("a"), queue("b")]
    for i in range(4):
        group = pod_group(f"a{i}", queue="a")
        group["metadata"]["annotations"] = {"kbatch.io/lifetime": f"{90 + 10 * i}s"}
        docs += [group, pod(f"a{i}", group=f"a{i}", duration=f"{400 + i}s")]
    docs += [at(pod_group("b", queue="b"), "30s"), at(pod("b", cpu="2", group="b"), "30s")]
    quick, slow = run_both(documents=docs, until="10m")
    assert_same_but_sessions(quick, slow)
    assert quick["summary"]["evictions"] > 0, "the test must see a reclaim"


def test_an_event_told_again_while_nothing_happens() -> None:
    """A pod that cannot fit waits 15 minutes with nothing else happening: its events
    are told again every 5 minutes (the event filter's interval), jumps or not."""
    docs = [
        node("n1"),
        pod("long", cpu="3", duration="15m"),
        at(pod_group("waits", queue="default"), "10s"),
        at(pod("waits", cpu="2", group="waits"), "10s"),
    ]
    quick, slow = run_both(documents=docs)
    assert_same_but_sessions(quick, slow)
    told = [e["time"] for e in quick["events"] if e["name"] == "waits" and e["kind"] == "Pod"]
    assert len(told) > 3, told


def test_reserve_and_a_flood_of_small_jobs() -> None:
    """Nominations kept from session to session, while a stream of Jobs comes and goes."""
    conf = conf_map(
        'actions: "enqueue, allocate, backfill, reserve"\n'
        "tiers:\n"
        "- plugins: [{name: priority}, {name: gang}, {name: conformance}]\n"
        "- plugins: [{name: drf}, {name: predicates}, {name: proportion}, {name: nodeorder}]\n"
    )
    streams = [
        job(f"flood-{i}", completions=6, group="flood", duration=f"{50 + 1.5 * i}s")
        for i in range(4)
    ]
    docs: list[Any] = [conf, node("n1", cpu="2"), node("n2", cpu="2"), queue("a"), queue("b")]
    docs += [pod_group("flood", queue="a"), *streams]
    docs += [at(pod_group("big", queue="b"), "30s"), at(pod("big", cpu="2", group="big"), "30s")]
    quick, slow = run_both(documents=docs, until="8m")
    assert_same_but_sessions(quick, slow)


def test_a_tiny_trace() -> None:
    """Gangs of 1 to 64 pods held as Jobs until admitted, a few hours of a day."""
    docs = trace.trace_objects(trace.TraceSpec(nodes=2, hours=3.0, seed=1))
    quick, slow = run_both(documents=docs, until="3h")
    assert_same_but_sessions(quick, slow)
    assert quick["summary"]["binds"] > 0


@pytest.mark.skipif(not TESTDATA.is_dir(), reason=f"no Armada simulator testdata at {TESTDATA}")
def test_an_armada_workload() -> None:
    workloads = TESTDATA / "workloads" / "small-long_big-long"
    quick, slow = run_both(
        workload=workloads / "preemptible.yaml",
        cluster=TESTDATA / "clusters" / "tinyCluster.yaml",
        until="40m",
    )
    assert_same_but_sessions(quick, slow)
    assert quick["metrics"]["throughput"]["jobsStarted"] > 0
