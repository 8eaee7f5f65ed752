"""The PodGroups kbatch makes for Jobs labelled ``kbatch.io/queue`` (DESIGN §15).

The Job webhook pointed such a Job's pod template at a group named as the Job and
held the Job (``kbatch.webhooks.admission.jobgroup``); here the group is made,
owned by the Job, once the Job exists (the ownerReference needs its uid): on the
Job's events, and by the held-Job sweep for a Job whose group could not be made
yet (its queue did not exist, the API server was away). The held-Job controller
then releases the Job once the group is admitted, as for any group.

A group the API server refuses (its queue does not exist, a ResourceQuota, ...)
is told on the Job as a Warning event ``PodGroupRefused`` carrying the refusal,
which names the field (the label when it is the queue); the Job stays held, and
the sweep tries again. A Job whose label names a queue with child queues is told so
the same way, and its group is not made (without the PodGroup webhook too), until
the label names a leaf queue or the queue's children are gone. A PodGroup of that
name that exists already is the one the Job joins (a hand-written group, or one
being deleted with an older Job of the same name: the sweep makes the new one once
it is gone).
"""

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from kbatch import kubeapi
from kbatch.api import GROUP, VERSION
from kbatch.webhooks.admission import job, jobgroup
from kbatch.webhooks.admission.view import StateView

if TYPE_CHECKING:
    from kbatch.operators.process import Runtime

log = logging.getLogger("kbatch.jobs")

REFUSED, MADE = jobgroup.REFUSED, jobgroup.MADE
COMPONENT = "kbatch"
FINISHED = frozenset({"Complete", "Completed", "Failed"})  # a Job's, a JobSet's
Object = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Owner:
    """The kind of workload a GroupMaker makes PodGroups for: whether kbatch makes an
    object's group, and the group."""

    api_version: str
    kind: str
    makes_group: Callable[[Mapping[str, Any], frozenset[str]], bool]
    pod_group_for: Callable[[Mapping[str, Any]], Object]


JOB = Owner(
    "batch/v1",
    "Job",
    jobgroup.makes_group,
    lambda body: jobgroup.pod_group_for(body, job.pods_made(body)),
)


class GroupMaker:
    """Makes the PodGroups of labelled Jobs (or of another ``owner`` kind: JobSets);
    remembers what it told each object (by uid) so that a sweep that fails again for
    the same reason does not tell it again."""

    def __init__(self, runtime: "Runtime", owner: Owner = JOB) -> None:
        self.runtime = runtime
        self.owner = owner
        self._told: dict[str, str] = {}

    def wanted(self, body: Mapping[str, Any]) -> bool:
        """Whether kbatch makes ``body``'s PodGroup and it is not there yet (as far as
        the watched state knows)."""
        if not self.owner.makes_group(body, self.runtime.state.scheduler_names):
            return False
        meta, status = body.get("metadata") or {}, body.get("status") or {}
        if meta.get("deletionTimestamp") or not meta.get("uid"):
            return False
        conditions = status.get("conditions") or []
        if any(c.get("type") in FINISHED and c.get("status") == "True" for c in conditions):
            return False
        namespace = meta.get("namespace") or "default"
        return self.runtime.state.pod_group(f"{namespace}/{meta['name']}") is None

    def ensure(self, body: Mapping[str, Any]) -> bool:
        """Make ``body``'s PodGroup if kbatch makes it and it is missing; True when it
        exists now (made here, or found)."""
        if not self.wanted(body):
            return True
        not_leaf = jobgroup.queue_not_leaf(body, StateView(self.runtime.state), self.owner.kind)
        if not_leaf is not None:
            self.tell(body, "Warning", REFUSED, not_leaf)
            return False
        group = self.owner.pod_group_for(body)
        meta = group["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        path = f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/podgroups"
        try:
            kubeapi.request(self.runtime.api, "POST", path, group)
        except kubeapi.ApiError as exc:
            if exc.status == 409:
                return True  # it exists: the Job's pods join it
            if exc.status in (0, 429) or exc.status >= 500:
                log.warning("PodGroup %s/%s for its %s not made yet: %s", namespace, name,
                            self.owner.kind, exc)  # fmt: skip
                return False
            message = jobgroup.refusal_message(body, str(exc), self.owner.kind)
            self.tell(body, "Warning", REFUSED, message)
            return False
        self._told.pop(str(body["metadata"]["uid"]), None)
        kind = self.owner.kind
        self.tell(body, "Normal", MADE, f"made PodGroup {namespace}/{name} for the {kind}'s pods")
        log.info("made PodGroup %s/%s for its %s", namespace, name, kind)
        return True

    def tell(self, body: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        """An Event on the Job (once per Job and message), or the owner kind's object."""
        meta = body["metadata"]
        uid = str(meta.get("uid") or "")
        if type_ == "Warning" and self._told.get(uid) == message:
            return
        self._told[uid] = message
        namespace = meta.get("namespace") or "default"
        try:
            kubeapi.request(
                self.runtime.api,
                "POST",
                f"/api/v1/namespaces/{namespace}/events",
                event(meta, type_, reason, message, self.owner),
            )
        except kubeapi.ApiError as exc:
            log.warning("event %s on %s %s/%s not recorded: %s", reason, self.owner.kind,
                        namespace, meta.get("name"), exc)  # fmt: skip
        if type_ == "Warning":
            log.warning("%s %s/%s: %s", self.owner.kind, namespace, meta.get("name"), message)


def event(
    meta: Mapping[str, Any], type_: str, reason: str, message: str, owner: Owner = JOB
) -> Object:
    """A core/v1 Event on a Job (or on an object of the ``owner`` kind)."""
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    namespace = meta.get("namespace") or "default"
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{meta['name']}.", "namespace": namespace},
        "involvedObject": {
            "apiVersion": owner.api_version,
            "kind": owner.kind,
            "namespace": namespace,
            "name": meta["name"],
            "uid": str(meta.get("uid") or ""),
        },
        "reason": reason,
        "message": message[:1024],
        "type": type_,
        "source": {"component": COMPONENT},
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }
