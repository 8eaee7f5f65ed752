"""The simulator's speed shortcuts change nothing (issue 12): each is switched off
through its seam and an Armada workload's JSON, metrics and all, compared with it on.

- ``status.condition``: one shared condition object for the same words (the gang
  plugin's words to every waiting group, every session);
- ``metrics.COUNT_JOBS_THAT_NEVER_HELD``: jobs without a task add nothing to the queues'
  allocation, and are counted as waiting in one step;
- ``timeline.NAME_QUEUES_OF_JOBS_WITHOUT_TASKS``: nor to the report's samples (compared on their own:
  the JSON does not show them);
- ``job_sums.KEEP_SUMS_OF_UNCHANGED_JOBS``: the timeline's samples and waits worked out
  from the jobs that changed since the last tick (the JSON's metrics read the waits; the
  samples, and the order the waits were first seen in, are compared on their own);
- ``job_sums.SAID_ONLY``: the timeline looks only at the jobs the snapshot did not
  hand on and those its session said it changed (at every job, the long way);
- ``fields.copied``: raw objects copied by walking their dicts and lists, not deepcopy;
- ``records.KEEP_RECORD_OF_STATUS_WRITES``: a pod written with its status and node alone
  changed, its other parts the same objects, keeps the rest of its last record (parsed
  whole, the long way);
- ``cluster.HAND_OVER_WRITES``: the simulator's writes (binds, finishes, statuses) handed
  to the state as they are, not copied (copied, the long way);
- ``cluster.HAND_OVER_STATUSES``: a PodGroup's or Queue's status written with the model
  it was dumped from, taken as parsed (validated again from the dump, the long way);
- ``gang.not_admitted_words`` and ``gang.not_admitted_event``: a group not admitted is
  worded, and its event made, once for the same words, not every session;
- ``gang.scheduled_words``: a running gang worded once for the same counts;
- ``enqueue.REFUSED_QUEUE_STAYS_FIRST``: a queue's line of refusals without a turn
  through the heap each;
- ``enqueue.REFUSE_ALIKE_AT_ONCE``: a session that admits no group refuses them kind
  by kind, without putting the line in order;
- ``SimBackend.record``: an event's object known by its uid alone (by name and uid, the
  long way);
- ``group_parts.KEEP_JOBS_WITHOUT_TASKS``: a group's job without tasks handed from one
  snapshot to the next (made anew every snapshot, the long way);
- ``group_parts.KEEP_PARTS_OF_STATUS_WRITES``: the parts of a group whose status alone
  was written taken from its last version's;
- ``kept_jobs.KEEP_UNCHANGED_JOBS``: a job with tasks that nothing wrote and no session
  touched handed from one snapshot to the next (made anew every snapshot, the long way);
- ``next_jobs.JOBS_FROM_LAST``: a snapshot's jobs made from the last one's by what was
  written and what sessions said they changed (every group walked, the long way);
- ``next_jobs.ORDER_FROM_CHANGES``: their order known from how the shown groups say it
  changed (a list of every group compared, the long way);
- ``kept_nodes.KNOWN_UNITS_ONLY``: the nodes to place again found from the units the
  snapshot says it did not hand on (from every unit, the long way);
- ``kept_nodes.KEEP_UNCHANGED_NODES``: a snapshot of the same node records is made of the
  last one's nodes, only those whose tasks may differ placed again (every node made and
  every task placed, the long way);
- ``node_index.KEEP_BY_VERSION``: the node index kept, without a comparison, for a node
  set of the same Node records (compared node by node, the long way);
- ``session.COUNT_BY_NODE_SET``: the pods with required anti-affinity, counted by the
  node set as tasks come and go (every node's tasks walked when asked, the long way);
- ``snapshot.PASS_CHANGED_UNITS_ONLY``: a snapshot that hands most jobs on walks the pods
  of the others only (every pod, the long way);
- ``job_status.KEEP_STATUSES_OF_UNTOUCHED_JOBS``: a job's status, kept by the last
  session that did not touch it and worked out from the same inputs, not worked out again;
- ``info.SUMS_FROM_ZEROS_BY_BINCOUNT``: a snapshot's sums from zeros by ``np.bincount``
  (by ``np.add.at``, the long way);
- ``clock.KEEP_TIMESTAMPS``: the recent seconds' timestamps kept, not formatted anew;
- ``job_status.KEEP_QUEUE_STATUSES``: a queue's status rendered and built once for the
  same sums and counts (every queue's rendered and built every session, the long way);
- ``drf.LAZY_SHARES``: a job's drf row and share worked out when a session first needs
  them, from its allocation as at the open (every job's at the open, the long way);
- ``queue_sums.KEEP_QUEUE_SUMS``: proportion's queue sums at session open kept from the
  last session's by the jobs that changed (every job added up, the long way);
- ``job_status.PASS_QUIET_GANGS``: a running gang the last close told only that it is
  scheduled, unchanged since, is not asked again whether it is valid and ready (every
  gang asked, every session, the long way);
- ``drf.HOLDING_NOTHING_FIRST``: a job without tasks keyed 0.0 without taking its row
  (share() of its row of zeros, the long way);
- ``drf.ALL_AT_ONCE_AFTER``: every row and share taken at once once a session has asked
  that many one by one (each one by one, the long way).
"""

import copy
from pathlib import Path
from typing import Any

import pytest

from kbatch.cluster import (
    fields,
    group_parts,
    kept_jobs,
    kept_nodes,
    next_jobs,
    records,
    snapshot,
)
from kbatch.operators.scheduler.core.actions import enqueue
from kbatch.operators.scheduler.core.framework import info, job_status, resting, session
from kbatch.operators.scheduler.core.framework import podgroup_status as status
from kbatch.operators.scheduler.core.framework.outcome import Event, ObjectRef
from kbatch.operators.scheduler.core.plugins import drf, gang, node_index, queue_sums
from kbatch.sim import backend as sim_backend
from kbatch.sim import clock, job_sums, metrics, run, simulate, timeline
from kbatch.sim.backend import SimBackend
from scenarios.objects import at, node, pod, pod_group

TESTDATA = Path(__file__).parents[2].parent / "shared" / "armada-simulator-testdata"
WORKLOAD = TESTDATA / "workloads" / "small-short_big-long" / "non-preemptible.yaml"
CLUSTER = TESTDATA / "clusters" / "cpu_1_1_2.yaml"


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
    "jobs that never held": (metrics, "COUNT_JOBS_THAT_NEVER_HELD", False),
    "copied raw objects": (fields, "copied", copy.deepcopy),
    "words not admitted": (gang, "not_admitted_words", gang.not_admitted_words.__wrapped__),
    "words scheduled": (gang, "scheduled_words", gang.scheduled_words.__wrapped__),
    "events not admitted": (gang, "not_admitted_event", gang.not_admitted_event.__wrapped__),
    "refused queue first": (enqueue, "REFUSED_QUEUE_STAYS_FIRST", False),
    "alike refused at once": (enqueue, "REFUSE_ALIKE_AT_ONCE", False),
    "events by uid": (SimBackend, "record", _record_by_name_and_uid),
    "jobs kept without tasks": (group_parts, "KEEP_JOBS_WITHOUT_TASKS", False),
    "group parts of status writes": (group_parts, "KEEP_PARTS_OF_STATUS_WRITES", False),
    "jobs kept with tasks": (kept_jobs, "KEEP_UNCHANGED_JOBS", False),
    "nodes kept": (kept_nodes, "KEEP_UNCHANGED_NODES", False),
    "pods of changed units": (snapshot, "PASS_CHANGED_UNITS_ONLY", False),
    "node index by version": (node_index, "KEEP_BY_VERSION", False),
    "anti-affinity pods by node set": (session, "COUNT_BY_NODE_SET", False),
    "statuses kept": (job_status, "KEEP_STATUSES_OF_UNTOUCHED_JOBS", False),
    "sums by bincount": (info, "SUMS_FROM_ZEROS_BY_BINCOUNT", False),
    "timeline sums kept": (job_sums, "KEEP_SUMS_OF_UNCHANGED_JOBS", False),
    "timestamps kept": (clock, "KEEP_TIMESTAMPS", False),
    "queue statuses kept": (job_status, "KEEP_QUEUE_STATUSES", False),
    "drf shares when needed": (drf, "LAZY_SHARES", False),
    "queue sums kept": (queue_sums, "KEEP_QUEUE_SUMS", False),
    "quiet gangs passed": (job_status, "PASS_QUIET_GANGS", False),
    "drf keys of jobs holding nothing": (drf, "HOLDING_NOTHING_FIRST", False),
    "drf rows at once": (drf, "ALL_AT_ONCE_AFTER", 10**9),
    "quiet gangs rest": (resting, "REST_QUIET_GANGS", False),
    "queue sums by jobs handed on": (queue_sums, "HANDED_ON_UNCHANGED", False),
    "pod specs of equal inputs": (records, "KEEP_SPEC_OF_EQUAL_INPUTS", False),
    "failed scheduling told again": (gang, "failed_scheduling", _failed_scheduling_made_anew),
    "jobs without tasks handed on": (kept_jobs, "HAND_ON_JOBS_WITHOUT_TASKS", False),
    "groups and queues of status writes": (records, "KEEP_PARSED_OF_STATUS_WRITES", False),
    "jobs from the last snapshot's": (next_jobs, "JOBS_FROM_LAST", False),
    "their order from the groups' changes": (next_jobs, "ORDER_FROM_CHANGES", False),
    "nodes of units not handed on": (kept_nodes, "KNOWN_UNITS_ONLY", False),
    "writes handed over": (sim_backend, "HAND_OVER_WRITES", False),
    "pod records of status writes": (records, "KEEP_RECORD_OF_STATUS_WRITES", False),
    "statuses handed over": (sim_backend, "HAND_OVER_STATUSES", False),
}


def _simulated() -> dict[str, Any]:
    return simulate(workload=WORKLOAD, cluster=CLUSTER, until="10m", warn=lambda _: None)


@pytest.mark.skipif(not TESTDATA.is_dir(), reason=f"no Armada simulator testdata at {TESTDATA}")
@pytest.mark.parametrize("seam", sorted(SEAMS))
def test_a_shortcut_switched_off_changes_nothing(
    seam: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    quick = _simulated()
    module, name, long_way = SEAMS[seam]
    monkeypatch.setattr(module, name, long_way)
    slow = _simulated()
    for key in slow:
        assert quick[key] == slow[key], key
    assert quick["metrics"]["throughput"]["jobsStarted"] > 0
    assert any(g["phase"] == "Pending" for g in quick["podGroups"])  # some wait, unadmitted


TIMELINE_SEAMS = {
    "queues of jobs without tasks": (timeline, "NAME_QUEUES_OF_JOBS_WITHOUT_TASKS"),
    "timeline sums kept": (job_sums, "KEEP_SUMS_OF_UNCHANGED_JOBS"),
    "timeline sums by jobs handed on": (job_sums, "HANDED_ON_UNCHANGED"),
    "timeline sums by jobs said changed": (job_sums, "SAID_ONLY"),
}


@pytest.mark.skipif(not TESTDATA.is_dir(), reason=f"no Armada simulator testdata at {TESTDATA}")
@pytest.mark.parametrize("seam", sorted(TIMELINE_SEAMS))
def test_the_timeline_without_its_shortcut_is_the_same(
    seam: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def sampled() -> tuple[object, ...]:
        done = run(workload=WORKLOAD, cluster=CLUSTER, until="10m", warn=lambda _: None).timeline
        return done.samples, list(done.waits.items()), done.end

    quick = sampled()
    monkeypatch.setattr(*TIMELINE_SEAMS[seam], False)
    assert sampled() == quick
    samples = quick[0]
    assert any(sum(a for a, _ in s.queues.values()) for s in samples)  # type: ignore[attr-defined]


def _timeline(documents: list[dict[str, Any]], until: str) -> tuple[Any, ...]:
    """The run's timeline: its samples, its waits and its end."""
    done = run(documents=documents, until=until, warn=lambda _: None).timeline
    return done.samples, list(done.waits.items()), done.end


def test_pods_that_come_to_a_group_handed_on_without_tasks_are_counted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A group's job without tasks is handed from one snapshot to the next while its
    PodGroup stays the same, and pods that come are put in it in place: no session
    touches them here (too big for the node), yet the timeline sees them wait."""
    late = [at(pod(f"late-{i}", cpu="4", group="late"), "5s") for i in range(3)]
    documents = [node(cpu="2"), pod_group("late", min_member=3), *late]
    quick = _timeline(documents, "8s")
    monkeypatch.setattr(job_sums, "KEEP_SUMS_OF_UNCHANGED_JOBS", False)
    assert _timeline(documents, "8s") == quick
    assert [(s.time, s.pending) for s in quick[0]] == [(0.0, 0), (5.0, 3)]  # type: ignore[attr-defined]


def test_a_job_handed_on_that_its_session_touches_is_counted_anew(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A gang of one pod that runs and one that waits for room is handed from snapshot
    to snapshot unchanged while nothing of it is written; when another pod finishes, a
    session places its waiting pod (touching the handed-on job): the timeline sees it
    stop waiting, counted anew, not taken as the same as before."""
    documents = [
        node(cpu="2"),
        pod("blocker", cpu="1", duration="5s"),
        at(pod_group("gang", min_member=1), "1s"),
        *[at(pod(f"gang-{i}", cpu="1", group="gang"), "1s") for i in range(2)],
    ]
    quick = _timeline(documents, "9s")
    monkeypatch.setattr(job_sums, "HANDED_ON_UNCHANGED", False)
    assert _timeline(documents, "9s") == quick
    pending = [(s.time, s.pending) for s in quick[0]]  # type: ignore[attr-defined]
    assert (1.0, 1) in pending and pending[-1][1] == 0, pending
