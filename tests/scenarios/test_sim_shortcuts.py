"""The simulator's speed shortcuts change nothing: each is switched off and an Armada
workload's JSON, metrics and all, compared with it on; and all of them off at once
(``Shortcuts.none()``), on the Armada workload and on small random ones.

Every switch of ``Shortcuts`` (the state's, the scheduler's and the simulator's; each
field's docstring says what it keeps) is switched off in turn through the simulator's
options. The shortcuts that are no switch are replaced through their seam:

- ``status.condition``: one shared condition object for the same words (the gang
  plugin's words to every waiting group, every session);
- ``fields.copied``: raw objects copied by walking their dicts and lists, not deepcopy;
- ``gang.not_admitted_words`` and ``gang.not_admitted_event``: a group not admitted is
  worded, and its event made, once for the same words, not every session;
- ``gang.scheduled_words``: a running gang worded once for the same counts;
- ``gang.failed_scheduling``: a pod's FailedScheduling event made once for its words;
- ``SimBackend.record``: an event's object known by its uid alone (by name and uid, the
  long way);
- ``drf.ALL_AT_ONCE_AFTER``: every row and share taken at once once a session has asked
  that many one by one (each one by one, the long way).

The timeline's own shortcuts (``queues_of_jobs_without_tasks`` and the ``timeline_*``
ones) are compared on its samples and waits too: the JSON does not show them all.
"""

import copy
import random
from pathlib import Path
from typing import Any

import pytest

from kbatch.cluster import fields
from kbatch.operators.scheduler.core.framework import info
from kbatch.operators.scheduler.core.framework import podgroup_status as status
from kbatch.operators.scheduler.core.framework.outcome import Event, ObjectRef
from kbatch.operators.scheduler.core.framework.shortcuts import ALL, Shortcuts
from kbatch.operators.scheduler.core.plugins import drf, gang
from kbatch.sim import run, simulate
from kbatch.sim.backend import SimBackend
from scenarios.objects import at, node, pod, pod_group, queue

TESTDATA = Path(__file__).parents[2].parent / "shared" / "armada-simulator-testdata"
WORKLOAD = TESTDATA / "workloads" / "small-short_big-long" / "non-preemptible.yaml"
CLUSTER = TESTDATA / "clusters" / "cpu_1_1_2.yaml"
NO_TESTDATA = f"no Armada simulator testdata at {TESTDATA}"


def _record_by_name_and_uid(
    self: SimBackend, ref: ObjectRef, type_: str, reason: str, message: str
) -> None:
    self.events.record((ref, self._uid_of(ref)), ref, type_, reason, message, self.clock.now)


def _failed_scheduling_made_anew(task: info.TaskInfo, message: str) -> Event:
    return Event(
        ObjectRef("Pod", task.namespace, task.name), "Warning", "FailedScheduling", message
    )


SEAMS: dict[str, tuple[Any, str, Any]] = {
    "shared conditions": (gang, "condition", status.condition.__wrapped__),
    "copied raw objects": (fields, "copied", copy.deepcopy),
    "words not admitted": (gang, "not_admitted_words", gang.not_admitted_words.__wrapped__),
    "words scheduled": (gang, "scheduled_words", gang.scheduled_words.__wrapped__),
    "events not admitted": (gang, "not_admitted_event", gang.not_admitted_event.__wrapped__),
    "events by uid": (SimBackend, "record", _record_by_name_and_uid),
    "drf rows at once": (drf, "ALL_AT_ONCE_AFTER", 10**9),
    "failed scheduling told again": (gang, "failed_scheduling", _failed_scheduling_made_anew),
}


def _simulated(shortcuts: Shortcuts = ALL) -> dict[str, Any]:
    return simulate(
        workload=WORKLOAD, cluster=CLUSTER, until="10m", warn=lambda _: None, shortcuts=shortcuts
    )


def _same(quick: dict[str, Any], slow: dict[str, Any]) -> None:
    for key in slow:
        assert quick[key] == slow[key], key
    assert quick.keys() == slow.keys()
    assert quick["metrics"]["throughput"]["jobsStarted"] > 0
    assert any(g["phase"] == "Pending" for g in quick["podGroups"])  # some wait, unadmitted


@pytest.mark.skipif(not TESTDATA.is_dir(), reason=NO_TESTDATA)
@pytest.mark.parametrize("shortcut", Shortcuts.names())
def test_a_shortcut_switched_off_changes_nothing(shortcut: str) -> None:
    _same(_simulated(), _simulated(Shortcuts().without(shortcut)))


@pytest.mark.skipif(not TESTDATA.is_dir(), reason=NO_TESTDATA)
@pytest.mark.parametrize("seam", sorted(SEAMS))
def test_a_shortcut_replaced_through_its_seam_changes_nothing(
    seam: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    quick = _simulated()
    monkeypatch.setattr(*SEAMS[seam])
    _same(quick, _simulated())


@pytest.mark.skipif(not TESTDATA.is_dir(), reason=NO_TESTDATA)
def test_every_shortcut_off_gives_the_same_json() -> None:
    _same(_simulated(), _simulated(Shortcuts.none()))


def _random_documents(seed: int) -> list[dict[str, Any]]:
    """A small random cluster and workload: nodes, two queues, gangs and lone pods that
    come at random times and run for random durations, some too big to fit."""
    rng = random.Random(seed)
    documents: list[dict[str, Any]] = [queue("q1", 1), queue("q2", 3)]
    for n in range(rng.randint(1, 4)):
        documents.append(node(f"node-{n}", cpu=str(rng.choice([2, 4, 8]))))
    for g in range(rng.randint(2, 8)):
        size = rng.randint(1, 4)
        group = pod_group(f"g{g}", min_member=rng.randint(1, size), queue=rng.choice(["q1", "q2"]))
        submitted = f"{rng.randint(0, 20)}s"
        documents.append(at(group, submitted))
        for i in range(size):
            cpu = rng.choice(["500m", "1", "2", "3"])
            duration = f"{rng.randint(1, 30)}s"
            documents.append(
                at(pod(f"g{g}-{i}", cpu=cpu, group=f"g{g}", duration=duration), submitted)
            )
    for p in range(rng.randint(0, 5)):
        lone = pod(f"lone-{p}", cpu=rng.choice(["1", "2"]), duration=f"{rng.randint(1, 20)}s")
        documents.append(at(lone, f"{rng.randint(0, 20)}s"))
    return documents


@pytest.mark.parametrize("seed", range(12))
def test_random_workloads_give_the_same_json_with_every_shortcut_off(seed: int) -> None:
    documents = _random_documents(seed)
    quick = simulate(documents=documents, until="1m", warn=lambda _: None)
    slow = simulate(
        documents=documents, until="1m", warn=lambda _: None, shortcuts=Shortcuts.none()
    )
    assert slow == quick
    assert quick["podGroups"]


TIMELINE_SHORTCUTS = [name for name in Shortcuts.names() if name.startswith("timeline")] + [
    "queues_of_jobs_without_tasks"
]


@pytest.mark.skipif(not TESTDATA.is_dir(), reason=NO_TESTDATA)
@pytest.mark.parametrize("shortcut", [*TIMELINE_SHORTCUTS, "every one"])
def test_the_timeline_without_its_shortcut_is_the_same(shortcut: str) -> None:
    def sampled(shortcuts: Shortcuts = ALL) -> tuple[object, ...]:
        done = run(
            workload=WORKLOAD,
            cluster=CLUSTER,
            until="10m",
            warn=lambda _: None,
            shortcuts=shortcuts,
        ).timeline
        return done.samples, list(done.waits.items()), done.end

    quick = sampled()
    off = Shortcuts.none() if shortcut == "every one" else Shortcuts().without(shortcut)
    assert sampled(off) == quick
    samples = quick[0]
    assert any(sum(a for a, _ in s.queues.values()) for s in samples)  # type: ignore[attr-defined]


def _timeline(
    documents: list[dict[str, Any]], until: str, shortcuts: Shortcuts = ALL
) -> tuple[Any, ...]:
    """The run's timeline: its samples, its waits and its end."""
    done = run(documents=documents, until=until, warn=lambda _: None, shortcuts=shortcuts).timeline
    return done.samples, list(done.waits.items()), done.end


def test_pods_that_come_to_a_group_kept_without_tasks_are_counted() -> None:
    """A group's job without tasks is kept from one snapshot to the next while its
    PodGroup stays the same, and pods that come are put in it in place: no session
    touches them here (too big for the node), yet the timeline sees them wait."""
    late = [at(pod(f"late-{i}", cpu="4", group="late"), "5s") for i in range(3)]
    documents = [node(cpu="2"), pod_group("late", min_member=3), *late]
    quick = _timeline(documents, "8s")
    assert _timeline(documents, "8s", Shortcuts().without("timeline_sums")) == quick
    assert [(s.time, s.pending) for s in quick[0]] == [(0.0, 0), (5.0, 3)]  # type: ignore[attr-defined]


def test_a_job_kept_unchanged_that_its_session_touches_is_counted_anew() -> None:
    """A gang of one pod that runs and one that waits for room is kept from snapshot
    to snapshot unchanged while nothing of it is written; when another pod finishes, a
    session places its waiting pod (touching the kept job): the timeline sees it
    stop waiting, counted anew, not taken as the same as before."""
    documents = [
        node(cpu="2"),
        pod("blocker", cpu="1", duration="5s"),
        at(pod_group("gang", min_member=1), "1s"),
        *[at(pod(f"gang-{i}", cpu="1", group="gang"), "1s") for i in range(2)],
    ]
    quick = _timeline(documents, "9s")
    compared = Shortcuts().without("timeline_sums_by_unchanged_jobs")
    assert _timeline(documents, "9s", compared) == quick
    pending = [(s.time, s.pending) for s in quick[0]]  # type: ignore[attr-defined]
    assert (1.0, 1) in pending and pending[-1][1] == 0, pending
