"""Queue validation (DESIGN §7): weight ≥ 1, and every field of the shape kbatch reads
(``records.parse_queue``: a capability's quantities not negative, a guarantee within the
capability, not itself as its parent, ...) — a Queue the scheduler would ignore is
refused here, naming the field. In the queue tree (DESIGN §14) its ``spec.parent`` must
exist and lead up to the root without a cycle, no Queue may take the root's name, and a
parent's children's guarantees may not add up to more than its capability (checked both
when a child is written and when the parent is). A ``spec.namespaceSelector`` of the
wrong shape is refused naming the field, and so is one wider than the parent's: a child
that sets a selector carries every requirement of its parent's and ancestors'
(``selector_refusal``), and a parent's selector may not change so as to leave a child's
wider. (The ancestors' selectors apply to a child's groups anyway, ``namespace_refusal``:
the rule keeps what a child says true.) The default queue, a queue that still has
PodGroups, and a queue that still has child queues cannot be deleted."""

from collections.abc import Callable, Iterator, Mapping
from decimal import Decimal
from typing import Any

from kbatch.api import DEFAULT_QUEUE, selector
from kbatch.api.quantity import parse_quantity
from kbatch.api.queue import ROOT_QUEUE, Queue
from kbatch.api.selector import LabelSelector, not_carried, selectors_upward
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
    over = guarantees_refusal(queue, view)
    if over is not None:
        return result.deny(*over)
    wider = selector_refusal(queue, view)
    if wider is not None:
        return result.deny("spec.namespaceSelector", wider)
    return result.allow()


def selector_refusal(queue: Queue, view: ClusterView) -> str | None:
    """Why ``queue`` as written leaves a queue wider than its parent: its own
    spec.namespaceSelector, or a descendant's, not carrying every requirement of the
    selectors above it (``selector.not_carried``). A queue without a selector takes its
    parent's, always allowed. Asked on a create, and on an update only when the selector
    or the parent changes: another field's update leaves a tree written before the rule
    as it was (its groups are held by every ancestor's selector anyway)."""
    name = queue.metadata.name
    stored = view.queue(name)
    if stored is not None and _selector_and_parent(stored) == _selector_and_parent(queue):
        return None

    def queue_of(other: str) -> Queue | None:
        return queue if other == name else view.queue(other)

    own, parent = _selector_and_parent(queue)
    if own is not None and parent is not None:
        missing = not_carried(own, _selectors_from(parent, queue_of))
        if missing:
            return (
                f"queue {name!r} may not be wider than its parent {parent!r}: its selector "
                f"({own}) does not carry {', '.join(missing)}; a child's selector carries "
                "every requirement of its parent's and ancestors', or is left out to take "
                "its parent's"
            )
    for child in _descendants(name, view):
        found = view.queue(child)
        selector, above = _selector_and_parent(found) if found else (None, None)
        if selector is None or above is None:
            continue
        missing = not_carried(selector, _selectors_from(above, queue_of))
        if missing:
            return (
                f"the change would leave child queue {child!r} wider than its parent "
                f"{above!r}: {child!r}'s selector ({selector}) does not carry "
                f"{', '.join(missing)}; narrow {child!r}'s selector first"
            )
    return None


def _selector_and_parent(queue: Queue) -> tuple[LabelSelector | None, str | None]:
    """A queue's own selector, and its parent (None at the top)."""
    parent = queue.spec.parent
    return queue.spec.namespace_selector, None if parent == ROOT_QUEUE else parent


def _selectors_from(start: str, queue_of: Callable[[str], Queue | None]) -> list[LabelSelector]:
    """The selectors set on ``start`` and each of its ancestors: all apply below them.
    The walk stops at a queue not known, and where a cycle of parents comes back."""

    def selector_and_parent(name: str) -> tuple[LabelSelector | None, str | None] | None:
        queue = queue_of(name)
        return None if queue is None else _selector_and_parent(queue)

    return [found for _, found in selectors_upward(start, selector_and_parent)]


def _descendants(name: str, view: ClusterView) -> Iterator[str]:
    """Every queue under ``name``, parents first (each once, whatever cycles)."""
    met = {name}
    waiting = list(view.queue_children(name))
    while waiting:
        child = waiting.pop(0)
        if child in met:
            continue
        met.add(child)
        yield child
        waiting.extend(view.queue_children(child))


def not_a_leaf(name: str, children: list[str]) -> str:
    """Why no PodGroup may go in queue ``name``, which has ``children``."""
    listed = ", ".join(children[:SHOWN]) + (", ..." if len(children) > SHOWN else "")
    return (
        f"queue {name!r} has child queues ({listed}): PodGroups go in leaf queues only; "
        "name one of its leaves"
    )


def namespace_refusal(queue_name: str, namespace: str, view: ClusterView) -> str | None:
    """Why namespace ``namespace`` may not name queue ``queue_name``: the queue's, or an
    ancestor's, ``spec.namespaceSelector`` does not select it (DESIGN §14); None when
    every selector on the way up does, or none is set."""

    def rule(name: str) -> tuple[LabelSelector | None, str | None] | None:
        found = view.queue(name)
        if found is None:
            return None
        parent = found.spec.parent
        return found.spec.namespace_selector, None if parent == ROOT_QUEUE else parent

    labels = selector.namespace_labels(namespace, view.namespace_labels(namespace))
    barring = selector.barring_queue(queue_name, labels, rule)
    return None if barring is None else selector.barred_message(namespace, queue_name, barring)


def guarantees_refusal(queue: Queue, view: ClusterView) -> tuple[str, str] | None:
    """(field, why) when ``queue`` as written takes its parent's children's guarantees
    past the parent's capability, or its own capability below its children's."""
    name = queue.metadata.name
    parent = view.queue(queue.spec.parent) if queue.spec.parent else None
    if parent is not None and parent.spec.capability:
        siblings = [view.queue(c) for c in view.queue_children(parent.metadata.name)]
        children = [q for q in siblings if q is not None and q.metadata.name != name]
        over = _over(parent.spec.capability, [*children, queue], set(_guaranteed(queue)))
        if over is not None:
            resource, total, cap, listed = over
            return (
                f"spec.guarantee.resource.{resource}",
                f"the guarantees of queue {parent.metadata.name!r}'s children would add up "
                f"to {total} ({listed}), more than its spec.capability.{resource} {cap}",
            )
    if queue.spec.capability:
        found = [view.queue(c) for c in view.queue_children(name)]
        over = _over(queue.spec.capability, [q for q in found if q is not None], None)
        if over is not None:
            resource, total, cap, listed = over
            return (
                f"spec.capability.{resource}",
                f"{cap} is less than its children's guarantees add up to, {total} ({listed})",
            )
    return None


def _over(
    capability: Mapping[str, Any], children: list[Queue], among: set[str] | None
) -> tuple[str, str, str, str] | None:
    """(resource, the children's total, the capability, each child's) for the first
    resource (of ``among``, or any) in which ``children``'s guarantees add up to more
    than ``capability``."""
    for resource, cap in sorted(capability.items()):
        if among is not None and resource not in among:
            continue
        given = [(q.metadata.name, _guaranteed(q).get(resource)) for q in children]
        given = [(child, amount) for child, amount in given if amount is not None]
        total = sum((parse_quantity(amount) for _, amount in given), Decimal(0))
        if total > parse_quantity(cap):
            listed = ", ".join(f"{child} {amount}" for child, amount in given)
            return resource, _number(total), str(cap), listed
    return None


def _guaranteed(queue: Queue) -> Mapping[str, Any]:
    return queue.spec.guarantee.resource if queue.spec.guarantee else {}


def _number(amount: Decimal) -> str:
    """A quantity's amount as a plain number (no exponent, no trailing zeros)."""
    return format(amount.normalize(), "f")


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
    children = view.queue_children(name)
    if children:
        listed = ", ".join(children[:SHOWN]) + (", ..." if len(children) > SHOWN else "")
        return result.deny(
            "metadata.name",
            f"queue {name!r} cannot be deleted: {len(children)} queue"
            f"{' still names' if len(children) == 1 else 's still name'} it in spec.parent "
            f"({listed}); delete them or give them another parent first",
            result.FORBIDDEN,
        )
    return result.allow()
