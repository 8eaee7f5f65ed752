"""Queue validation (DESIGN §7): weight ≥ 1, and every field of the shape kbatch reads
(``records.parse_queue``: a capability's quantities not negative, ...) — a Queue the
scheduler would ignore is refused here, naming the field; the default queue, and a
queue that still has PodGroups, cannot be deleted."""

from collections.abc import Mapping
from typing import Any

from kbatch.api import DEFAULT_QUEUE
from kbatch.cluster import fields, records
from kbatch.cluster.fields import shown
from kbatch.webhooks.admission import result
from kbatch.webhooks.admission.result import Admission
from kbatch.webhooks.admission.view import ClusterView

SHOWN = 5  # PodGroups named in a refusal to delete


@result.refusing
def validate(obj: Mapping[str, Any], view: ClusterView) -> Admission:
    """A Queue created or updated."""
    weight = fields.mapping(obj, "spec").get("weight", 1)
    if isinstance(weight, bool) or not isinstance(weight, int) or weight < 1:
        return result.deny(
            "spec.weight", f"must be an integer ≥ 1 (the queue's share), not {shown(weight)}"
        )
    records.parse_queue(obj)
    return result.allow()


@result.refusing
def validate_delete(obj: Mapping[str, Any], view: ClusterView) -> Admission:
    """A Queue deleted (``obj`` is the Queue as it was)."""
    name = fields.string(obj, "metadata.name") or ""
    if name == DEFAULT_QUEUE:
        return result.deny(
            "metadata.name",
            "the default queue cannot be deleted: PodGroups without spec.queue go there",
            result.FORBIDDEN,
        )
    users = view.pod_groups_in_queue(name)
    if users:
        shown = ", ".join(users[:SHOWN]) + (", ..." if len(users) > SHOWN else "")
        return result.deny(
            "metadata.name",
            f"queue {name!r} cannot be deleted: {len(users)} PodGroup"
            f"{' still names' if len(users) == 1 else 's still name'} it in spec.queue ({shown}); "
            "delete them or wait for them to go first",
            result.FORBIDDEN,
        )
    return result.allow()
