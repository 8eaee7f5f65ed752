"""Upstream's PodGroups (KEP-4671, ``scheduling.k8s.io`` v1beta1 or v1alpha3) in the live
runtime.

``UpstreamGroups`` is what their informer applies to: each upstream PodGroup goes into
the ClusterState as the kbatch PodGroup ``upstream_groups.kbatch_object`` makes of it,
so the scheduler sees an ordinary gang. Upstream's object has no field for kbatch's
status of it (phase, counts): that is kept here, per group, and given to each new
version of the object; a new leader starts from what upstream's condition says. When a
session decides a group's status, ``keep_status`` holds it and returns the upstream
condition to write (the backend writes it: ``runtime.cluster``).

A kbatch PodGroup and an upstream one of the same namespace and name: kbatch's own is
scheduled, upstream's is ignored with a warning until it is written again.

``serves``: whether the API server serves a resource, by discovery (never by version).
"""

import threading
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from kbatch import kubeapi
from kbatch.api.podgroup import PodGroupStatus
from kbatch.cluster import fields, records, upstream_groups
from kbatch.cluster.errors import ObjectError
from kbatch.cluster.state import ClusterState


def serves(api: kubeapi.ApiClient, group_version: str, plural: str) -> bool:
    """Does the server's discovery document of ``group_version`` list ``plural``? False
    when the group/version is not served at all; ApiError when the server does not
    answer (the caller backs off)."""
    path = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
    try:
        body = kubeapi.request(api, "GET", path)
    except kubeapi.ApiError as exc:
        if exc.status == 404:
            return False
        raise
    resources = body.get("resources") or []
    return any(isinstance(r, Mapping) and r.get("name") == plural for r in resources)


def _key(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    return str(meta.get("namespace") or "default"), str(meta.get("name") or "")


class UpstreamGroups:
    """Upstream PodGroups as kbatch PodGroups in ``state`` (an informer's store)."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self._lock = threading.Lock()
        # by namespace/name: the upstream object as last seen, and kbatch's status of
        # it with the uid it is of (a group made again under the name starts anew)
        self._seen: dict[tuple[str, str], Mapping[str, Any]] = {}
        self._status: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {}
        # (namespace, name, uid) of the groups told DisruptionTarget: once each
        self._disrupted: set[tuple[str, str, str]] = set()

    def apply(self, obj: Mapping[str, Any], owned: bool = False) -> None:
        """Put the upstream PodGroup ``obj`` in the state as kbatch's; ObjectError (and
        the state unchanged) when it cannot be scheduled as one."""
        key = _key(obj)
        obj = obj if owned else fields.copied(dict(obj))
        uid = str((obj.get("metadata") or {}).get("uid") or "")
        with self._lock:
            held = self.state.get("PodGroup", *key)
            if held is not None and not upstream_groups.is_upstream(held):
                ref = records.ref_of({**obj, "kind": "PodGroup"})
                why = "a kbatch PodGroup of this name in the namespace is scheduled instead"
                raise ObjectError(ref, "metadata.name", why)
            kept = self._status.get(key)
            status = kept[1] if kept is not None and kept[0] == uid else None
            made = upstream_groups.kbatch_object(obj, status)
            self.state.apply(made, owned=True)
            self._seen[key] = obj
            if status is None:
                self._status.pop(key, None)

    def delete(self, kind: str, namespace: str, name: str) -> None:
        key = (namespace or "default", name)
        with self._lock:
            self._seen.pop(key, None)
            self._status.pop(key, None)
            self._disrupted = {told for told in self._disrupted if told[:2] != key}
            if upstream_groups.is_upstream(self.state.get("PodGroup", *key)):
                self.state.delete("PodGroup", *key)

    def replace(
        self, kind: str, objects: Iterable[Mapping[str, Any]], owned: bool = False
    ) -> list[ObjectError]:
        """Make the upstream groups exactly ``objects`` (a relist); those refused are
        returned, the rest applied."""
        errors: list[ObjectError] = []
        listed = set()
        for obj in objects:
            listed.add(_key(obj))
            try:
                self.apply(obj, owned=owned)
            except ObjectError as exc:
                errors.append(exc)
        with self._lock:
            gone = set(self._seen) - listed
        for namespace, name in gone:
            self.delete(kind, namespace, name)
        return errors

    def disruption(self, namespace: str, name: str, message: str) -> dict[str, Any] | None:
        """The ``DisruptionTarget`` condition to write to the upstream group one of whose
        pods kbatch evicts (``message`` says which and why), or None: told already, or
        not an upstream group kbatch holds."""
        key = (namespace or "default", name)
        with self._lock:
            upstream = self._seen.get(key)
            if upstream is None:
                return None
            told = (*key, str((upstream.get("metadata") or {}).get("uid") or ""))
            if told in self._disrupted:
                return None
            self._disrupted.add(told)
        return upstream_groups.disruption_to_write(upstream, message, _now())

    def keep_status(
        self, namespace: str, name: str, status: PodGroupStatus
    ) -> dict[str, Any] | None:
        """Hold kbatch's ``status`` of the upstream group (the state shows it at once);
        the ``PodGroupInitiallyScheduled`` condition to write to the upstream object, or
        None when there is nothing new to write or the group has no pod of ours (it is
        then another scheduler's to write about, if anyone's)."""
        key = (namespace or "default", name)
        with self._lock:
            upstream = self._seen.get(key)
            if upstream is None:
                return None
            uid = str((upstream.get("metadata") or {}).get("uid") or "")
            dumped = status.model_dump(mode="json", by_alias=True, exclude_none=True)
            self._status[key] = (uid, dumped)
            made = upstream_groups.kbatch_object(upstream, dumped)
            self.state.apply(made, owned=True, status=status)
        if not self.state.has_pod_of_ours(f"{key[0]}/{key[1]}"):
            return None
        return upstream_groups.condition_to_write(status, upstream, _now())


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
