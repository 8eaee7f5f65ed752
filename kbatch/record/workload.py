"""A recording turned into the simulator's input: the recorded traffic, to be played
forward under any conf (``kbatch replay DIR --config CONF``).

From the records between ``start`` and ``end`` (seconds after the recording's first
record) it derives manifests the simulator reads (``kbatch.sim.manifests``), their
times relative to ``start``:

- each pod as it was submitted (its first recorded version: requests, labels,
  selectors, tolerations, priority, its PodGroup's name), without what the cluster
  wrote into it (node, status, uid), ``kbatch.io/sim-submit-at`` when it was first
  seen and ``kbatch.io/sim-duration`` how long it ran: from its bind to its
  Succeeded or Failed (a failed pod runs as long and then succeeds: the simulator's
  pods only succeed), or to its deletion if someone deleted it while it ran (it
  held its node that long). A pod still running at the end has no known runtime:
  it gets no duration, so it runs to the end of the window in both runs, as it did
  in the recording; so does a pod the scheduler evicted (its eviction is the conf's
  decision, to be made again or not); the count is ``runtimeUnknown``. A pod deleted before
  it ever started is left out (the simulator cannot withdraw a pod); one over before
  ``start`` is not in the window. A pod running at ``start`` keeps its node and the rest of its
  runtime; a pod or group submitted before ``start`` is submitted at 0. A pod
  another scheduler served comes bound to its node when it was bound there (it is
  not in the figures: the simulator schedules its own only).
- each PodGroup (minMember, queue, priority class, minResources) at the time it was
  first seen (not before its queue), when one of its pods is kept;
- Nodes, Queues (with their tree fields: parent, weight, capability, guarantee,
  borrowing and lending limits), PriorityClasses, Namespaces, ResourceQuotas,
  StorageClasses, CSINodes, PersistentVolumes and claims as they stood at ``start``, then every
  change of them as an update at its time (a claim or a PV without the binding the
  cluster wrote into it, to be bound again as the played run binds its pods; a PV a
  provisioner made left out, to be made again)
  (a Node's heartbeats, conditions reduced to type and status, are not changes);
  a Node deleted while recording is cordoned from then on (the simulator removes no
  nodes); a deleted Queue, PriorityClass or Namespace stays.
- the recorded conf in force at ``start`` (``conf``; a later change is noted).

The records are read from the last checkpoint before ``start`` (the state then,
``replay_marks.checkpoint_at``): what happened before it is either there or over
before the window, so the workload is the one the records from the recording's start
give. (A pod made again under the name of one before it in the window is named
``NAME-again-1``, and so on; pods over before the window do not count.)

What was recorded before the recording's first session (a live run's first lists,
which come in any order) is all there at the start.

``recorded`` gives the same figures the simulator's timeline gives of a run, of
what really happened (``kbatch.sim.compare.RunFigures``): per job (a PodGroup, or
a pod without one), its queue, when it was submitted (the first of its pods and
group) and when it started (when its minMember-th pod was bound).

The controllers behind the pods are not replayed: a pod a Job made again after an
eviction comes as the submission it was, whether or not the other conf would have
evicted the first. The scheduler reads a batch/v1 Job for its own
``activeDeadlineSeconds`` alone (what room may be lent to its pods), and the recorded
Jobs give it to the pods they made, as their own ``activeDeadlineSeconds`` unless
theirs is shorter (``jobDeadlinesOnPods``): counted from the pod's start rather than
the Job's, so the pods are lent room as before and the room they hold frees no later
than the recording's scheduler knew.
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kbatch.api import DEFAULT_QUEUE, DEFAULT_SCHEDULER_NAMES
from kbatch.cluster.job_records import owner_job
from kbatch.record import as_submitted, replay_marks
from kbatch.record.store import segments
from kbatch.sim import compare

Object = dict[str, Any]
FINISHED = ("Succeeded", "Failed")
DEFAULT_SCHEDULER = "default-scheduler"  # a pod's schedulerName when it names none
CLUSTER_KINDS = (
    "Namespace", "PriorityClass", "Queue", "StorageClass", "Node", "CSINode",
    "PersistentVolume", "ResourceQuota", "PersistentVolumeClaim",
)  # fmt: skip


@dataclass(slots=True)
class _Pod:
    obj: Object  # as first seen
    first: float  # seconds after ``start`` (negative: before it)
    name: str  # its name in the manifests (a name used again in them gets a suffix)
    node: str | None = None
    bound: float | None = None
    ended: float | None = None
    failed: bool = False
    deleted: float | None = None
    evicted: bool = False  # by the scheduler (its runtime then is not known)

    @property
    def gone(self) -> float | None:
        """When it stopped holding its node: finished or deleted (None: not seen to)."""
        return self.ended if self.ended is not None else self.deleted

    @property
    def runtime_end(self) -> float | None:
        """When its run ended of itself: finished, or deleted by someone other than the
        scheduler (None: still running, or evicted: the conf decides evictions)."""
        if self.ended is not None:
            return self.ended
        return None if self.evicted else self.deleted


@dataclass(slots=True)
class Workload:
    directory: str
    start: float
    seconds: float  # the window's length: the simulations run until then
    documents: list[Object]
    conf: Object | None  # the recorded conf in force at ``start`` (None: none recorded)
    recorded: compare.RunFigures
    binds: int  # binds the recorded sessions in the window made
    counts: dict[str, int]
    notes: list[str]
    recorded_version: str = ""
    stopped: segments.Stop | None = None
    scheduler_names: frozenset[str] = frozenset(DEFAULT_SCHEDULER_NAMES)


@dataclass(slots=True)
class _Deriving:
    """The walk over the records: each pod's life, each group and cluster object as
    first seen, the changes in the window, the conf and the binds made in it."""

    start: float
    end: float | None
    t0: float | None = None
    last: float = 0.0
    conf: Object | None = None
    conf_changes: int = 0
    binds: int = 0
    pods: list[_Pod] = field(default_factory=list)
    current: dict[str, _Pod] = field(default_factory=dict)  # "ns/name" -> its pod now
    groups: dict[str, tuple[Object, float]] = field(default_factory=dict)
    at_start: dict[tuple[str, str], Object] = field(default_factory=dict)
    latest: dict[tuple[str, str], Object] = field(default_factory=dict)
    changes: list[tuple[float, Object]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    opened: bool = False  # a session has begun
    first_seen: dict[tuple[str, str], float] = field(default_factory=dict)
    job_deadlines: dict[str, int] = field(default_factory=dict)  # Job uid -> its deadline

    def take(self, record: dict[str, Any]) -> bool:
        """One record; False once past ``end``."""
        t = float(record.get("t", self.last if self.t0 is None else self.t0 + self.last))
        if self.t0 is None:
            self.t0 = t
        if self.end is not None and t - self.t0 > self.end:
            self.last = self.end  # the recording goes on: the window is all of it
            return False
        self.last = round(t - self.t0, 3)  # (a live clock's nanoseconds say nothing here)
        at = round(self.last - self.start, 3)
        op = record.get("op")
        if op == "sess":
            self.opened = True
        if not self.opened:
            # Before the recording's first session (a live run's first lists come in
            # any order): all there at the start, as that session saw them.
            at = min(at, 0.0)
        if op == "conf":
            if at <= 0 or self.conf is None:
                self.conf = record.get("conf")
            elif record.get("conf") != self.conf:
                self.conf_changes += 1
        elif op == "out":
            self.binds += len(record.get("binds") or []) if at >= 0 else 0
            for key, *_ in record.get("evictions") or []:
                self._evicted(str(key))
        elif op == "as":
            self._bound(str(record.get("key")), str(record.get("node")), at)
        elif op == "ar":
            self._evicted(str(record.get("key")))
        elif op == "a":
            self._applied(record.get("o") or {}, at)
        elif op == "d":
            self._deleted(str(record.get("k")), str(record.get("key")), at)
        return True

    def count(self, what: str, n: int = 1) -> None:
        self.counts[what] = self.counts.get(what, 0) + n

    def _bound(self, key: str, node: str, at: float) -> None:
        pod = self.current.get(key)
        if pod is not None and pod.bound is None:
            pod.bound, pod.node = at, node

    def _evicted(self, key: str) -> None:
        pod = self.current.get(key)
        if pod is not None and pod.gone is None:
            pod.evicted = True

    def _applied(self, obj: Object, at: float) -> None:
        kind = obj.get("kind")
        if "apiVersion" not in obj and kind in as_submitted.API_VERSIONS:
            obj = {"apiVersion": as_submitted.API_VERSIONS[str(kind)], **obj}
        key = as_submitted.key_of(obj)
        if kind == "Pod":
            self._pod(obj, key, at)
        elif kind == "PodGroup":
            self.groups.setdefault(key, (obj, at))
        elif kind in CLUSTER_KINDS and not as_submitted.made_by_the_cluster(obj):
            self._cluster_object(str(kind), key, as_submitted.cluster_manifest(obj), at)
        elif kind == "Job":
            self._job(obj)

    def _job(self, obj: Object) -> None:
        """Note a Job's deadline (the state accepted it: a positive integer, or none)."""
        uid = (obj.get("metadata") or {}).get("uid")
        deadline = (obj.get("spec") or {}).get("activeDeadlineSeconds")
        if isinstance(uid, str) and isinstance(deadline, int):
            self.job_deadlines[uid] = deadline
        elif isinstance(uid, str):
            self.job_deadlines.pop(uid, None)  # (its deadline taken away)

    def _pod(self, obj: Object, key: str, at: float) -> None:
        uid = (obj.get("metadata") or {}).get("uid") or key
        pod = self.current.get(key)
        if pod is None or (pod.obj.get("metadata") or {}).get("uid", key) != uid:
            pod = self.current[key] = _Pod(obj, at, str(obj["metadata"]["name"]))
            self.pods.append(pod)
        node = (obj.get("spec") or {}).get("nodeName")
        if node and pod.bound is None:
            pod.bound, pod.node = at, str(node)
        phase = (obj.get("status") or {}).get("phase")
        if phase in FINISHED and pod.ended is None:
            pod.ended, pod.failed = at, phase == "Failed"

    def _deleted(self, kind: str, key: str, at: float) -> None:
        if kind == "Pod":
            pod = self.current.pop(key, None)
            if pod is not None and pod.gone is None:
                pod.deleted = at
            return
        ref = (kind, key)
        if ref not in self.latest:
            return
        if at <= 0:
            self.at_start.pop(ref, None)
            self.latest.pop(ref)
        elif kind == "Node":
            cordoned = as_submitted.cordoned(self.latest[ref])
            self.latest[ref] = cordoned
            self.changes.append((at, cordoned))
            self.count("nodesDeleted")
        else:
            self.count(f"{kind[0].lower()}{kind[1:]}sDeletedKept")

    def _cluster_object(self, kind: str, key: str, obj: Object, at: float) -> None:
        ref = (kind, key)
        known = self.latest.get(ref)
        if known == obj:
            return
        self.latest[ref] = obj
        self.first_seen.setdefault(ref, max(at, 0.0))
        if at <= 0:
            self.at_start[ref] = obj
        else:
            self.changes.append((at, obj))
            if known is not None:  # (new ones are counted with their kind's objects)
                self.count(f"{kind[0].lower()}{kind[1:]}Changes")


def _pod_manifest(
    pod: _Pod, seconds: float, ours: bool, job_deadline: int | None = None
) -> tuple[Object, float, float | None] | None:
    """The pod's manifest, when it is submitted and when it starts in the recording
    (None: left out: over before the window, or withdrawn before it started). A pod
    another scheduler serves (not ``ours``) comes bound where it was, when it was (the
    simulator schedules only its own; the room it took is what matters here)."""
    gone = pod.gone
    if gone is not None and gone <= 0:
        return None
    if pod.bound is None and (pod.deleted is not None or not ours):
        return None
    spec = {k: v for k, v in (pod.obj.get("spec") or {}).items() if k != "nodeName"}
    own = spec.get("activeDeadlineSeconds")
    if job_deadline is not None and not (isinstance(own, int) and own <= job_deadline):
        spec["activeDeadlineSeconds"] = job_deadline  # (its Job's: see the module's doc)
    obj = {k: v for k, v in pod.obj.items() if k != "status"}
    obj["metadata"] = {**as_submitted.own_metadata(pod.obj), "name": pod.name}
    bound = pod.bound if pod.bound is not None and pod.bound <= seconds else None
    end = pod.runtime_end
    runtime = None if bound is None or end is None else end - max(bound, 0.0)
    first = pod.first
    if bound is not None and (bound < 0 or not ours):  # bound before, or by another
        spec["nodeName"] = pod.node
        first = bound
    obj["spec"] = spec
    return as_submitted.at(obj, first, runtime), max(first, 0.0), bound


Kept = list[tuple[_Pod, float, float | None]]  # a pod, its submission, its start


def _figures(deriving: _Deriving, kept: Kept) -> compare.RunFigures:
    """What really happened, as the simulator's timeline sums up a run."""
    by_job: dict[str, list[tuple[float, float | None]]] = {}
    queue_of: dict[str, str] = {}
    need: dict[str, int] = {}
    for pod, submitted, bound in kept:
        group = as_submitted.group_of(pod.obj)
        if group is not None and group in deriving.groups:
            obj, first = deriving.groups[group]
            job = f"PodGroup {group}"
            spec = obj.get("spec") or {}
            queue_of[job] = str(spec.get("queue") or DEFAULT_QUEUE)
            need[job] = max(int(spec.get("minMember") or 1), 1)
            by_job.setdefault(job, []).append((max(first, 0.0), None))
        else:
            job = f"Pod {pod.obj['metadata'].get('namespace', 'default')}/{pod.name}"
            queue_of[job], need[job] = DEFAULT_QUEUE, 1
        by_job.setdefault(job, []).append((submitted, bound))
    jobs = {}
    for job, times in by_job.items():
        starts = sorted(b for _, b in times if b is not None)
        n = need[job]
        started = max(starts[n - 1], 0.0) if len(starts) >= n else None
        jobs[job] = compare.JobStart(queue_of[job], min(s for s, _ in times), started)
    return compare.RunFigures("recorded", jobs)


def derive(
    directory: Path,
    start: float | None = None,
    end: float | None = None,
    warn: Callable[[str], None] = lambda _: None,
) -> Workload:
    """The workload recorded in ``directory`` between ``start`` and ``end`` seconds after
    its first record, read from the last checkpoint before ``start`` (the state
    then; the records before it are not read). RecordingError: no recording there, or
    nothing in it to replay."""
    begin = (
        None
        if not start
        else replay_marks.checkpoint_at(replay_marks.session_marks(directory), start)
    )
    reading = segments.Reading(directory, first_segment=0 if begin is None else begin.segment)
    deriving = _Deriving(start or 0.0, end)
    if begin is not None:  # (its times count from the recording's first record)
        deriving.t0, deriving.opened = begin.first, begin.sessions > 0
    for record in reading.records():
        if not deriving.take(record):
            break
    if reading.stopped is not None:
        warn(f"the recording stops early: {reading.stopped}")
    seconds = deriving.last - deriving.start
    header = reading.headers[0] if reading.headers else {}
    names = frozenset(header.get("scheduler_names") or DEFAULT_SCHEDULER_NAMES)
    pods, kept = _kept_pods(deriving, seconds, names)
    if not kept or seconds <= 0:
        window = f"between {start or 0:g} s and {deriving.last:g} s"
        raise segments.RecordingError(
            f"{directory}: nothing to replay {window}: no pod waited or ran there"
        )
    groups = {g for pod, _, _ in kept if (g := as_submitted.group_of(pod.obj)) in deriving.groups}
    notes = _notes(deriving)
    for note in notes:
        warn(note)
    kinds = [kind for kind, _ in deriving.latest]
    counts = {
        "pods": len(pods),
        "groups": len(groups),
        "nodes": kinds.count("Node"),
        "queues": kinds.count("Queue"),
        **deriving.counts,
    }
    return Workload(
        str(directory),
        deriving.start,
        seconds,
        [*_cluster_documents(deriving, groups), *pods],
        deriving.conf,
        _figures(deriving, kept),
        deriving.binds,
        counts,
        notes,
        str(header.get("kbatch", "unknown")),
        reading.stopped,
        names,
    )


def _kept_pods(
    deriving: _Deriving, seconds: float, names: frozenset[str]
) -> tuple[list[Object], Kept]:
    """The pods' manifests, and what the recorded figures need of each of those that
    schedulers ``names`` serve; counted (those over before the window are not in it,
    and not counted: how many there were depends on where the recording was read from)."""
    pods: list[Object] = []
    kept: Kept = []
    used: dict[tuple[str, str], int] = {}  # pods made of each namespace and name so far
    for pod in deriving.pods:
        ours = (pod.obj.get("spec") or {}).get("schedulerName", DEFAULT_SCHEDULER) in names
        job_deadline = deriving.job_deadlines.get(owner_job(pod.obj) or "")
        made = _pod_manifest(pod, seconds, ours, job_deadline)
        if made is None:
            if pod.gone is None or pod.gone > 0:
                deriving.count("podsLeftOut")
            continue
        obj, submitted, bound = made
        key = (str(obj["metadata"].get("namespace") or ""), pod.name)
        again = used[key] = used.get(key, 0) + 1
        if again > 1:  # (a pod made again under the name of one in the window before it)
            pod.name = obj["metadata"]["name"] = f"{pod.name}-again-{again - 1}"
        pods.append(obj)
        if not ours:
            deriving.count("otherSchedulersPods")
            continue
        kept.append((pod, submitted, bound))
        deriving.count("failedRunAsSucceeded", int(pod.failed and pod.ended is not None))
        deriving.count("runtimeUnknown", int(bound is not None and pod.runtime_end is None))
        deriving.count("evicted", int(pod.evicted))
        deriving.count("runningAtStart", int(bound is not None and bound < 0))
        deriving.count("jobDeadlinesOnPods", int(job_deadline is not None))
    return pods, kept


def _cluster_documents(deriving: _Deriving, groups: set[str]) -> list[Object]:
    """What the pods run on and in, as it stood at the start and as it changed, and
    the kept pods' PodGroups."""
    # (by kind, each in the order first seen: as the simulator creates them, whether the
    # recording was read from its start or from a checkpoint, which lists kind by kind)
    at_start = sorted(deriving.at_start.items(), key=lambda item: CLUSTER_KINDS.index(item[0][0]))
    documents = [as_submitted.at(obj, 0.0) for _, obj in at_start]
    documents += [as_submitted.at(obj, at) for at, obj in deriving.changes]
    for key, (obj, at) in deriving.groups.items():
        if key in groups:
            # Not before its queue: the simulator's admission refuses a group naming a
            # queue that does not exist yet, where a watch may bring the two either way.
            queue = str((obj.get("spec") or {}).get("queue") or DEFAULT_QUEUE)
            at = max(at, deriving.first_seen.get(("Queue", queue), 0.0))
            documents.append(as_submitted.at(as_submitted.without_status(obj), at))
    return documents


def _notes(deriving: _Deriving) -> list[str]:
    notes = []
    if deriving.conf_changes:
        notes.append(
            f"the recorded conf changed {deriving.conf_changes} time(s) in the window; the "
            "baseline runs the one in force at its start throughout"
        )
    if deriving.conf is None:
        notes.append("the recording holds no conf; the baseline runs the default conf")
    return notes
