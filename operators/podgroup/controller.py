"""The PodGroup controller: a new PodGroup shows ``phase: Pending`` after the leader's
next session (within a period or so), unless that session wrote its status already.

kube-batch's groups had an empty status until the scheduler first saw them. From
then on, running, succeeded and failed counts, the phase and the conditions are
kept by the scheduler's session close, which sees every pod of every group each
period and writes only what changed, by the rules of the core's ``podgroup_status``
(their one home).
The initial status waits for that session (``KubeBackend.initialise_pod_group_status``)
so that a restart with a thousand groups does not write ``Pending`` on each of them
just before the session decides them all.
"""

import logging
from typing import TYPE_CHECKING, Any

import kopf

from kbatch.api import GROUP, VERSION
from kbatch.operators.scheduler.core.framework import podgroup_status

if TYPE_CHECKING:
    from kbatch.operators.process import Runtime

log = logging.getLogger("kbatch.podgroup")


def register(registry: kopf.OperatorRegistry, runtime: "Runtime") -> None:
    # async: it only notes the group (no request), so kopf need not hand it to a thread
    @kopf.on.event(GROUP, VERSION, "podgroups", registry=registry)
    async def pod_group_event(
        type: str, body: kopf.Body, name: str, namespace: str | None, **_: Any
    ) -> None:
        if type != "DELETED" and runtime.leads() and podgroup_status.needs_initial_status(body):
            version = str(body.get("metadata", {}).get("resourceVersion") or "")
            runtime.cluster.initialise_pod_group_status(namespace or "default", name, version)
