"""Queue validation (DESIGN §7): weight ≥ 1, and every field of the shape kbatch reads
(``records.parse_queue``: a capability's quantities not negative, a guarantee within
the capability, not itself as its parent, ...) — a Queue the scheduler would ignore is
refused here, naming the field. In the queue tree (DESIGN §14) its ``spec.parent`` must
exist and lead up to the root without a cycle, and no Queue may take the root's name.
The default queue, and a queue that still has PodGroups, cannot be deleted."""

from collections.abc import Mapping
from typing import Any

from kbatch.api import DEFAULT_QUEUE
from kbatch.api.queue import ROOT_QUEUE, Queue
from kbatch.cluster import fields, records
from kbatch.cluster.fields import shown
from kbatch.cluster.quantity import amounts
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
    queue = records.parse_queue(obj)
    if queue.metadata.name == ROOT_QUEUE:
        return result.deny(
            "metadata.name",
            f"{ROOT_QUEUE!r} is the queue tree's root, kept by the scheduler: a top-level "
            "queue leaves spec.parent out (or names root)",
        )
    quantities = {
        "spec.guarantee.resource": queue.spec.guarantee.resource if queue.spec.guarantee else None,
        "spec.deserved": queue.spec.deserved,
        "spec.borrowingLimit": queue.spec.borrowing_limit,
        "spec.lendingLimit": queue.spec.lending_limit,
    }
    for path, values in quantities.items():
        try:
            amounts(values, path)
        except ValueError as exc:
            where, _, why = str(exc).partition(": ")
            return result.deny(where, why)
    wrong_parent = parent_refusal(queue, view)
    if wrong_parent is not None:
        return result.deny("spec.parent", wrong_parent)
    return result.allow()


def parent_refusal(queue: Queue, view: ClusterView) -> str | None:
    """Why ``queue``'s parent cannot be: it does not exist (or kbatch refuses it), or
    following the parents up from it comes back to a queue already met, a cycle."""
    met = [queue.metadata.name]
    current = queue.spec.parent
    while current is not None and current != ROOT_QUEUE:
        if current in met:
            return "a cycle of parents: " + " → ".join([*met[met.index(current) :], current])
        found = view.queue(current)
        if found is None:
            refused = view.queue_refusal(current)
            if refused is not None:
                return f"queue {current!r} is refused ({refused})"
            if len(met) == 1:
                return f"queue {current!r} does not exist"
            return f"its ancestor {met[-1]!r} names a queue that does not exist, {current!r}"
        met.append(current)
        current = found.spec.parent
    return None


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
