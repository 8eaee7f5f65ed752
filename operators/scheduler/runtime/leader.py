"""Leader election on a coordination.k8s.io/v1 Lease: exactly one replica schedules.

The holder renews the lease every ``renew_seconds``; another replica takes it
over once it has not been renewed for ``lease_seconds``. Writes carry the
lease's resourceVersion, so two candidates cannot both win a takeover. A leader
that has not renewed within ``renew_deadline`` (two thirds of the lease, as
client-go's renewDeadline < leaseDuration) steps down: well before a peer may take
the lease, so that what it still sends cannot overlap the next leader's work.
"""

import logging
import socket
import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from kbatch import kubeapi

log = logging.getLogger("kbatch.leader")

MICRO = "%Y-%m-%dT%H:%M:%S.%fZ"


def _stamp(when: float) -> str:
    return datetime.fromtimestamp(when, UTC).strftime(MICRO)


def _parse(text: str | None) -> float:
    if not text:
        return 0.0
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


class LeaseElector:
    def __init__(
        self,
        api: kubeapi.ApiClient,
        namespace: str,
        name: str = "kbatch",
        lease_seconds: int = 15,
        renew_seconds: float = 2.0,
        renew_deadline: float | None = None,
        identity: str | None = None,
        on_change: Callable[[bool], None] = lambda _: None,
    ) -> None:
        self.api = api
        self.path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
        self.namespace = namespace
        self.name = name
        self.lease_seconds = lease_seconds
        self.renew_seconds = renew_seconds
        self.renew_deadline = lease_seconds * 2 / 3 if renew_deadline is None else renew_deadline
        if not renew_seconds < self.renew_deadline < lease_seconds:
            raise ValueError(
                f"leader election: need renew period ({renew_seconds}s) < renew deadline "
                f"({self.renew_deadline}s) < lease duration ({lease_seconds}s)"
            )
        self.identity = identity or f"{socket.gethostname()}-{uuid.uuid4().hex[:8]}"
        self.on_change = on_change
        self._leader = threading.Event()
        self._stop = threading.Event()
        self._renewed = 0.0
        self._thread = threading.Thread(target=self._run, name="kbatch-leader", daemon=True)

    def is_leader(self) -> bool:
        if self._leader.is_set() and time.time() - self._renewed > self.renew_deadline:
            self._set(False)  # could not renew in time: step down before a peer may take it
        return self._leader.is_set()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Step down; the lease is released so a peer can take over at once."""
        self._stop.set()
        self._thread.join(timeout=5)
        if self._leader.is_set():
            try:
                lease = self._get()
                if lease and lease["spec"].get("holderIdentity") == self.identity:
                    lease["spec"]["holderIdentity"] = ""
                    lease["spec"]["renewTime"] = _stamp(0)
                    kubeapi.request(self.api, "PUT", f"{self.path}/{self.name}", lease)
            except Exception as exc:
                log.info("could not release the lease: %s", exc)
            self._set(False)

    def _set(self, leader: bool) -> None:
        if leader == self._leader.is_set():
            return
        log.info("%s %s the lead", self.identity, "took" if leader else "lost")
        if leader:
            self.on_change(True)  # e.g. relist first: no session before the caches are fresh
            self._leader.set()
        else:
            self._leader.clear()
            self.on_change(False)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._set(self._try_acquire_or_renew())
            except Exception as exc:
                log.warning("leader election: %s", exc)
                self.is_leader()
            self._stop.wait(self.renew_seconds)

    def _get(self) -> dict[str, Any] | None:
        try:
            return kubeapi.request(self.api, "GET", f"{self.path}/{self.name}")
        except kubeapi.ApiError as exc:
            if exc.status == 404:
                return None
            raise

    def _try_acquire_or_renew(self) -> bool:
        now = time.time()
        lease = self._get()
        spec = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": self.lease_seconds,
            "renewTime": _stamp(now),
        }
        if lease is None:
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": {**spec, "acquireTime": _stamp(now), "leaseTransitions": 0},
            }
            return self._write("POST", self.path, body, now)
        held_by = lease["spec"].get("holderIdentity") or ""
        expires = _parse(lease["spec"].get("renewTime")) + float(
            lease["spec"].get("leaseDurationSeconds") or self.lease_seconds
        )
        if held_by != self.identity and held_by and expires > now:
            return False
        if held_by != self.identity:
            spec["acquireTime"] = _stamp(now)
            spec["leaseTransitions"] = int(lease["spec"].get("leaseTransitions") or 0) + 1
        lease["spec"].update(spec)
        return self._write("PUT", f"{self.path}/{self.name}", lease, now)

    def _write(self, method: str, path: str, body: dict[str, Any], now: float) -> bool:
        try:
            kubeapi.request(self.api, method, path, body)
        except kubeapi.ApiError as exc:
            if exc.status in (409, 422):
                return False  # someone else wrote first
            raise
        self._renewed = now
        return True
