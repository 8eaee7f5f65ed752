"""The recorder: what the scheduler reads and decides, queued, written by a thread of its own.

Everything that calls it only puts a tuple on a queue (the objects themselves, not
copies: the cluster state never changes an object it holds, it replaces it). The
writer thread takes what is queued between sessions (or after a second of one), turns
the tuples into records (``segments``) and keeps, for each kind, the objects held now,
in the order the state holds them: a new segment starts with them (its checkpoint), so
that it can be replayed from without the segments before.

The records, one JSON line each, every one with ``op`` and ``t`` (the recorder's clock:
the monotonic clock of ``kbatch run``, the simulated time of the simulator):

- ``a`` an object applied to the state (``o``); ``r`` one it refused (``o``);
- ``d`` an object dropped (``k`` its kind, ``key``);
- ``as`` / ``ar`` a bind / an eviction sent and assumed (``key``, ``node``);
  ``c`` one confirmed, ``f`` one forgotten, ``k`` one kept assumed ``s`` seconds more;
- ``snap`` a snapshot taken (where it stands among the changes; ``th`` the thread);
- ``sched`` a new scheduler (at start, and on taking the lead again);
- ``conf`` the scheduler conf from the next session on (``conf``);
- ``sess`` a session begins (``th`` its thread); ``now`` its time as it reads it;
  ``out`` its decisions (``binds``, ``evictions``, ``nominations``, ``groups``,
  ``queues``).
"""

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from kbatch import __version__
from kbatch.config import SchedulerConf
from kbatch.record.store import segments
from kbatch.record.store.checkpoint import Checkpoint

log = logging.getLogger("kbatch.record")

FLUSH_SECONDS = 1.0
DEFAULT_MAX_BYTES = 256 * 1024 * 1024
# Items waiting for the writer beyond which the live recorder drops (and says so) rather
# than let the scheduler's memory grow without end behind a disk that cannot keep up.
QUEUE_LIMIT = 1_000_000
# Records the writer writes before it looks whether a session has begun.
WRITE_BATCH = 256
_CLOSE = ("close",)


class Recorder:
    """Queues what it is told; its writer thread writes it to ``directory`` under
    ``max_bytes``. ``clock``: the time each record carries. ``limit``: the items that
    may wait for the writer (None: no limit; the simulator's, which may wait for it).
    ``checkpoint_bytes``: a new segment, starting from a checkpoint, at least every so
    many compressed bytes (None: ``segments.CHECKPOINT_BYTES``)."""

    def __init__(
        self,
        directory: Path,
        max_bytes: int = DEFAULT_MAX_BYTES,
        clock: Callable[[], float] = time.monotonic,
        header: dict[str, Any] | None = None,
        limit: int | None = QUEUE_LIMIT,
        checkpoint_bytes: int | None = None,
    ) -> None:
        self.clock = clock
        self.limit = limit
        self.dropped = 0
        # Items queued so far (changed by every thread that reports, so under a lock: a
        # count lost to two threads at once would let ``written`` return early), and
        # written so far (the writer's count).
        self._put_count = 0
        self._put_lock = threading.Lock()
        self._written = 0
        self._queue: queue.SimpleQueue[tuple[Any, ...]] = queue.SimpleQueue()
        self._state = Checkpoint()  # what the records written so far build
        self._last_conf: SchedulerConf | None = None
        # Clear while a session runs (``session`` to ``ended``): the writer waits for it, so
        # that it takes the interpreter between sessions rather than from one (on a busy
        # machine each hand-over of the interpreter costs the session a wait for a CPU);
        # a second at most, so that a long or failed session holds no flush back.
        self._between = threading.Event()
        self._between.set()
        full_header = {
            "kbatch": __version__,
            "format": segments.FORMAT,
            "started": time.time(),
            **(header or {}),
        }
        self.writer = segments.SegmentWriter(
            directory, max_bytes, full_header, self._checkpoint, checkpoint_bytes
        )
        self._thread = threading.Thread(target=self._run, name="kbatch-recorder", daemon=True)
        self._thread.start()

    # What the cluster state tells (kbatch.cluster.state.StateObserver).

    def applied(self, kind: str, key: str, obj: dict[str, Any]) -> None:
        self._put(("a", self.clock(), kind, key, obj))

    def refused(self, obj: dict[str, Any]) -> None:
        self._put(("r", self.clock(), obj))

    def dropped_object(self, kind: str, key: str) -> None:
        self._put(("d", self.clock(), kind, key))

    def assumed(self, op: str, key: str, value: str | float | None = None) -> None:
        """``op``: as (bound to node ``value``), ar (releasing), c (confirmed), f
        (forgotten), k (kept ``value`` seconds more)."""
        self._put((op, self.clock(), key, value))

    def snapshotted(self) -> None:
        self._put(("snap", self.clock(), threading.get_ident()))

    # What the scheduling loop tells (``hooks``).

    def new_scheduler(self) -> None:
        self._put(("sched", self.clock()))

    def conf(self, conf: SchedulerConf) -> None:
        """The conf of the next session: recorded when it is not the last one's."""
        if conf is not self._last_conf:
            self._last_conf = conf
            self._put(("conf", self.clock(), conf))

    def session(self) -> None:
        """A session begins on this thread: its snapshot is the next this thread takes
        (another thread's may come between: the thread tells them apart)."""
        self._between.clear()
        self._put(("sess", self.clock(), threading.get_ident()))

    def now(self, value: float) -> None:
        self._put(("now", self.clock(), value))

    def decided(self, decisions: tuple[Any, ...]) -> None:
        self._put(("out", self.clock(), decisions))

    def ended(self) -> None:
        """The session's outcome is applied: the writer may take its turn."""
        self._between.set()

    def _put(self, item: tuple[Any, ...]) -> None:
        with self._put_lock:
            if self.limit is not None and self._queue.qsize() >= self.limit:
                self.dropped += 1
                return
            self._put_count += 1
            self._queue.put(item)

    def close(self, timeout: float | None = 30.0) -> None:
        """Write what is queued, flush, and stop the writer."""
        self._queue.put(_CLOSE)
        self._thread.join(timeout)

    # The writer thread.

    def _run(self) -> None:
        last_flush = time.monotonic()
        told_dropped = 0
        try:
            while True:
                self._between.wait(FLUSH_SECONDS)  # a session running: after it
                items = self._taken()
                closing = bool(items) and items[-1] is _CLOSE
                self._write(items[:-1] if closing else items)
                if closing:
                    break
                if not items or time.monotonic() - last_flush >= FLUSH_SECONDS:
                    if self.dropped > told_dropped:
                        self.writer.write({"op": "gap", "t": self.clock(), "n": self.dropped})
                        log.error("recording: %d records dropped", self.dropped - told_dropped)
                        told_dropped = self.dropped
                    self.writer.flush()
                    last_flush = time.monotonic()
            self.writer.flush()
        except Exception:  # a recorder that cannot write must not end the scheduler
            log.exception("recording stopped")
        finally:
            self.writer.close()

    def _write(self, items: list[tuple[Any, ...]]) -> None:
        """Write ``items``, pausing (a flush interval at most) when a session begins
        meanwhile: a large batch, such as a full cluster's first lists, takes longer to
        write than the time between two sessions."""
        for start in range(0, len(items), WRITE_BATCH):
            if start and not self._between.is_set():
                self._between.wait(FLUSH_SECONDS)
            for item in items[start : start + WRITE_BATCH]:
                self.writer.write(self._record(item))
            self._written += min(WRITE_BATCH, len(items) - start)

    def written(self, timeout: float | None = None) -> bool:
        """Wait until everything queued before this call is written (not yet flushed);
        False if ``timeout`` seconds passed first."""
        target = self._put_count
        deadline = None if timeout is None else time.monotonic() + timeout
        while self._written < target and self._thread.is_alive():
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(0.005)
        return self._written >= target

    def _taken(self) -> list[tuple[Any, ...]]:
        """Everything queued now, up to the close if it is queued (none after waiting
        FLUSH_SECONDS for the first)."""
        try:
            items = [self._queue.get(timeout=FLUSH_SECONDS)]
        except queue.Empty:
            return []
        for _ in range(self._queue.qsize()):  # (this thread alone takes from the queue)
            if items[-1] is _CLOSE:
                break
            items.append(self._queue.get_nowait())
        return items

    def _record(self, item: tuple[Any, ...]) -> dict[str, Any]:
        op, t = item[0], item[1]
        self._state.last_t = t
        if op == "a":
            _, _, kind, key, obj = item
            self._state.applied(kind, key, obj)
            return {"op": "a", "t": t, "o": obj}
        if op == "d":
            self._state.dropped(item[2], item[3])
            return {"op": "d", "t": t, "k": item[2], "key": item[3]}
        if op == "r":
            return {"op": "r", "t": t, "o": item[2]}
        if op in ("as", "ar", "c", "f", "k"):
            self._state.assumed(op, t, item[2], item[3])
            record = {"op": op, "t": t, "key": item[2]}
            if op == "k":
                record["s"] = item[3]
            elif item[3] is not None:
                record["node"] = item[3]
            return record
        if op == "conf":
            self._state.conf = item[2].model_dump(mode="json", exclude_defaults=True)
            return {"op": "conf", "t": t, "conf": self._state.conf}
        if op == "now":
            return {"op": "now", "t": t, "now": item[2]}
        if op == "out":
            return {"op": "out", "t": t, **decisions_json(item[2])}
        if op in ("sess", "snap"):
            return {"op": op, "t": t, "th": item[2]}
        return {"op": op, "t": t}

    def _checkpoint(self) -> Iterator[dict[str, Any]]:
        """A new segment's first records (``Checkpoint.records``), at the time of the
        last record written (the writer may run behind the clock: the simulator's by
        whole simulated hours)."""
        last = self._state.last_t
        return self._state.records(self.clock() if last is None else last)


def decisions_json(decisions: tuple[Any, ...]) -> dict[str, Any]:
    """A session's decisions (``hooks.decisions``) as a record's fields."""
    binds, evictions, nominations, groups, queues = decisions
    return {
        "binds": binds,
        "evictions": evictions,
        "nominations": nominations,
        "groups": [[key, _dumped(status)] for key, status in groups],
        "queues": [[name, _dumped(status)] for name, status in queues],
    }


def _dumped(status: Any) -> Any:
    return status.model_dump(mode="json", by_alias=True, exclude_none=True)


def state_header(
    scheduler_names: frozenset[str], leave_out_settled: bool, assumed_ttl: float | None, clock: str
) -> dict[str, Any]:
    """The header fields a replay builds its cluster state by: as the recorded one."""
    return {
        "scheduler_names": sorted(scheduler_names),
        "leave_out_settled": leave_out_settled,
        "assumed_ttl": assumed_ttl,
        "clock": clock,
    }
