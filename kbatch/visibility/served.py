"""What ``kbatch run`` answers on its visibility API (``kbatch.visibility.api_server``):
``kbatch explain``, ``kbatch jobs`` and ``kbatch queues`` computed from what the
scheduler holds, so that they cost one request instead of listing and parsing the whole
cluster.

The line is computed as the commands compute it (``standing``: a session opened on the
informers' objects, sorted by the scheduler's own order keys), with each job's facts
(row, conditions, minimum, pods), and kept: a ``ServedLine``. An answer comes from the
last one while it is at most ``max_age`` seconds old or nothing has changed since it was
made. Older, it still answers, up to ``STALE_LIMIT``, while a thread makes a new one (such
an answer does not wait for it); older than that, or without the job asked
about (a second after it was made), a line is made first. While answers are asked for
(in the last ``WARM_FOR`` seconds) that thread keeps the line fresh, so that a user who
asks again (``watch kbatch jobs``) gets a line at most ``max_age`` and one making old;
the ETA publisher also hands over the session each of its rounds opens (``offer``).
Each answer says when its line was made (``asOf``). A line costs about a second on
1,000 nodes and 14,000 pods (the informers' objects parsed again into a state of its
own: the scheduler's is the loop's), an answer from it about a millisecond.

The estimate in an answer is the one ``kbatch run`` published on the PodGroup
(``published``), read off the state as it is when asked, or for a job no PodGroup of
kbatch's carries, the publisher's last one (``keep_unpublished``), whatever its age:
the asker decides whether it is fresh enough (``publishedAt``). Events are read when asked for
(the informers do not hold them).
"""

import logging
import math
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kbatch.api import DEFAULT_SCHEDULER_NAMES
from kbatch.cluster.state import ClusterState
from kbatch.config import SchedulerConf
from kbatch.operators.scheduler.core.framework.collector import collector_paused
from kbatch.operators.scheduler.core.framework.session import Session
from kbatch.visibility import eta_input, output, published, standing
from kbatch.visibility.rows import Estimate, JobRow, Line
from kbatch.visibility.standing import JobFacts

API_GROUP = "visibility.kbatch.io"
API_VERSION = "v1alpha1"
GROUP_VERSION = f"{API_GROUP}/{API_VERSION}"
MAX_AGE = 5.0  # seconds a line is answered from after the state changed
MIN_REBUILD = 1.0  # seconds between two lines made for a job the last one did not hold
WARM_FOR = 300.0  # seconds after an answer during which the line is kept fresh
# seconds a line that changed may still answer while it is made again (it is then the
# publisher's interval: its rounds hand over a line that often)
STALE_LIMIT = 30.0
Object = dict[str, Any]
Events = Callable[[str, str, Collection[str]], Sequence[Object]]  # namespace, group, pods
log = logging.getLogger("kbatch.visibility")


@dataclass(frozen=True)
class ServedLine:
    """The line as of ``made`` (epoch seconds), made of the state at ``generation``,
    with the facts of every job by its uid (``ns/name``; a pod of its own's
    ``pod:ns/name``)."""

    made: float
    generation: int
    line: Line
    facts: dict[str, JobFacts]

    def find(self, namespace: str, name: str) -> JobFacts | None:
        """The PodGroup ``namespace/name``, else the pod of its own of that name."""
        return standing.by_name(self.facts, namespace, name)


def served_line(session: Session, made: float, generation: int) -> ServedLine:
    """The line of ``session`` (opened at ``made`` on the state at ``generation``) and
    the facts of each of its jobs."""
    line = standing.line_of(session)
    rows: dict[tuple[str, str], Any] = {}
    for row in (*line.jobs, *line.running):
        rows.setdefault((row.namespace, row.name), row)  # (the first, as ``Line.find``)
    facts = {
        uid: standing.facts_of(session, job, rows.get((job.namespace, job.name)))
        for uid, job in session.jobs.items()
    }
    return ServedLine(made, generation, line, facts)


class VisibilityView:
    """The line ``kbatch run`` answers from: made of ``state`` with the conf of
    ``conf`` (a function: the conf file may change), kept as the module docstring says.
    Thread-safe: answers come from the API server's threads, offers from the publisher,
    refreshes from a thread of its own (``start``)."""

    def __init__(
        self,
        state: ClusterState,
        conf: Callable[[], SchedulerConf],
        conf_source: str,
        scheduler_names: frozenset[str] = frozenset(DEFAULT_SCHEDULER_NAMES),
        max_age: float = MAX_AGE,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.state = state
        self.conf = conf
        self.conf_source = conf_source
        self.scheduler_names = scheduler_names
        self.max_age = max_age
        self.clock = clock
        self.lines_made = 0  # lines made here (not offered)
        # the publisher's last estimates of jobs with no PodGroup of kbatch's (by uid)
        self._unpublished: Mapping[str, Mapping[str, str]] = {}
        self._latest: ServedLine | None = None
        self._asked = -math.inf  # when an answer was last asked for (clock)
        self._lock = threading.Lock()  # guards the two above; never held while making
        self._making = threading.Lock()  # one line made at a time
        self._stop = threading.Event()
        self._wake = threading.Event()  # an answer came from a stale line: remake it now
        self._thread = threading.Thread(
            target=self._keep_warm, name="kbatch-visibility-line", daemon=True
        )

    def start(self) -> None:
        """Keep the line fresh while it is asked for (``WARM_FOR``)."""
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()

    def offer(self, session: Session, made: float, generation: int) -> None:
        """A session opened elsewhere on this state (the publisher's), as of ``made``."""
        self._keep(served_line(session, made, generation))

    def keep_unpublished(self, conditions: Mapping[str, Mapping[str, str]]) -> None:
        """The last round's estimates of the waiting jobs with no PodGroup of kbatch's
        to carry them (a pod of its own, another API's group), as the condition each
        would carry (the publisher's)."""
        self._unpublished = dict(conditions)

    def current(self, uid: str | None = None) -> ServedLine:
        """The line to answer from: the last one while it answers (``_answers``), else
        one made now. A stale line that still answers wakes the thread to remake it."""
        with self._lock:
            latest, now = self._latest, self.clock()
            self._asked = now
        if latest is not None and self._answers(latest, now, uid):
            if self._stale(latest, now):
                self._wake.set()
            return latest
        return self._make(now)

    def refresh(self) -> float:
        """One turn of the keep-warm thread: a new line when the last one is stale,
        while an answer was asked for in the last ``WARM_FOR`` seconds. The seconds to
        wait before the next turn."""
        with self._lock:
            latest, now, asked = self._latest, self.clock(), self._asked
        if now - asked > WARM_FOR:
            return self.max_age
        if latest is None or self._stale(latest, now):
            latest = self._make(now)
        return max(latest.made + self.max_age - now, MIN_REBUILD)

    def _keep_warm(self) -> None:
        wait = self.max_age
        while not self._stop.is_set():
            self._wake.wait(wait)
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                wait = self.refresh()
            except Exception:  # a bug: logged, the answers go on (made when asked)
                log.exception("visibility API: the line could not be made")
                wait = self.max_age

    def _make(self, asked: float) -> ServedLine:
        """A line made now, unless one made since ``asked`` is there when this one's turn
        comes (answers meanwhile come from the last line: the lock is not held)."""
        with self._making:
            with self._lock:
                latest = self._latest
            if latest is not None and latest.made >= asked:
                return latest
            with collector_paused():
                now, generation = self.clock(), self.state.generation
                objects = eta_input.listed(self.state, now)
                session, _ = standing.open_session(objects, self.conf(), self.scheduler_names)
                try:
                    made = served_line(session, now, generation)
                finally:
                    session.forget_functions()
            self.lines_made += 1
            return self._keep(made)

    def _keep(self, served: ServedLine) -> ServedLine:
        """``served`` as the last line, unless a newer one is there already."""
        with self._lock:
            if self._latest is None or self._latest.made <= served.made:
                self._latest = served
            return self._latest

    def _stale(self, latest: ServedLine, now: float) -> bool:
        return latest.generation != self.state.generation and now - latest.made > self.max_age

    def _answers(self, latest: ServedLine, now: float, uid: str | None) -> bool:
        """Whether ``latest`` answers for job ``uid`` (None: all): while at most
        ``max_age`` old or unchanged, and up to ``STALE_LIMIT`` old (the thread remakes it
        meanwhile); not when it lacks the job and a second has passed since."""
        unchanged = latest.generation == self.state.generation
        if not unchanged and now - latest.made > STALE_LIMIT:
            return False
        if uid is None or unchanged or now - latest.made < MIN_REBUILD:
            return True
        namespace, _, name = uid.partition("/")
        return latest.find(namespace, name) is not None

    def explanation(self, namespace: str, name: str, events: Events) -> dict[str, Any] | None:
        """``kbatch explain``'s data for the PodGroup (or pod of its own) ``namespace/
        name``, with the events ``events(namespace, name, pods)`` lists of it and of the
        pods whose events it shows (``JobFacts.event_pods``); None when there is none."""
        served = self.current(f"{namespace}/{name}")
        facts = served.find(namespace, name)
        if facts is None:
            return None
        story = standing.story_of(served.line, facts, events(namespace, name, facts.event_pods))
        estimate = self.published_estimate(facts.row, served.made)
        return output.explanation_data(story, served.made, estimate, self.conf_source)

    def published_estimate(self, row: JobRow, now: float) -> Estimate | None:
        """The estimate published on the job's PodGroup now (the state's, not the line's:
        the publisher writes after it offers its line), else the publisher's last one of
        a job with no PodGroup of kbatch's (``keep_unpublished``), whatever its age, seen
        from ``now``."""
        group = (
            self.state.get("PodGroup", row.namespace, row.name) if row.kind == "PodGroup" else None
        )
        read = None if group is None else published.read(group, now, math.inf)
        if read is None:  # none on a group: the last round's of a job without one of ours
            kept = self._unpublished.get(output.job_uid(row))
            read = None if kept is None else published.read_condition(kept, now, math.inf)
        return None if read is None else read.estimate

    def waiting_jobs(self, namespace: str | None = None) -> dict[str, Any]:
        """``kbatch jobs``'s data: the waiting jobs (of ``namespace``; None: all), each
        with the estimate published on it."""
        served = self.current()
        jobs = []
        for row in served.line.jobs:
            if namespace is not None and row.namespace != namespace:
                continue
            estimate = self.published_estimate(row, served.made)
            jobs.append(output.job_data(row, estimate, served.made))
        return output.jobs_data(jobs, output.micro_time(served.made), self.conf_source)

    def queue_summaries(self) -> dict[str, Any]:
        """``kbatch queues``' data: every queue of the line, in queue order."""
        served = self.current()
        as_of = output.micro_time(served.made)
        return output.queues_data(served.line.queues, as_of, self.conf_source)
