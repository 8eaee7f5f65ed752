"""What the binder writes to a pod's ResourceClaims before its Binding, as kube-scheduler's
DynamicResources PreBind does: the allocation kbatch chose (``devices.bind_writes``) and
the pod among those the claim is reserved for, in the claim's status (its status
subresource). Read afresh and replaced against its version, again on a conflict (the
pods of a gang that share a claim are bound at once, each adding itself)."""

from typing import Any

from kbatch import kubeapi
from kbatch.cluster import devices
from kbatch.cluster.devices import ClaimWrite

RESOURCE_API = "/apis/resource.k8s.io/v1"
ATTEMPTS = 3  # (conflicts: other pods of the claim reserving it meanwhile)


class ClaimNotReady(Exception):
    """A claim could not be allocated or reserved for the pod: not a bind."""


def path_of(namespace: str, name: str) -> str:
    return f"{RESOURCE_API}/namespaces/{namespace}/resourceclaims/{name}"


def write_claim(api: Any, write: ClaimWrite, pod: str, uid: str) -> None:
    """Allocate ``write``'s claim (if it says so) and reserve it for the pod ``pod``
    (``uid``); ClaimNotReady when it is allocated meanwhile, or the writes fail."""
    claim = write.claim
    path = path_of(claim.namespace, claim.name)
    for attempt in range(ATTEMPTS):
        try:
            found = kubeapi.request(api, "GET", path)
            status = found.get("status") or {}
            if write.results:
                if status.get("allocation") is not None:
                    raise ClaimNotReady(f'resourceclaim "{claim.name}" was allocated meanwhile')
                status["allocation"] = devices.allocation_of(write)
            reserved = list(status.get("reservedFor") or [])
            if not any(ref.get("uid") == uid for ref in reserved):
                reserved.append({"resource": "pods", "name": pod, "uid": uid})
            status["reservedFor"] = reserved
            found["status"] = status
            kubeapi.request(api, "PUT", f"{path}/status", found)
            return
        except kubeapi.ApiError as exc:
            if exc.status != 409 or attempt == ATTEMPTS - 1:
                raise ClaimNotReady(f'resourceclaim "{claim.name}": {exc}') from exc
