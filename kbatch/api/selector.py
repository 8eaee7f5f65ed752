"""A Kubernetes label selector (``matchLabels`` and ``matchExpressions``), as a Queue's
``spec.namespaceSelector`` writes it (Kueue's ClusterQueue has the same field): which
Namespaces may name the queue (DESIGN §14).

The rules are Kubernetes' own (``metav1.LabelSelector``): every ``matchLabels`` pair and
every expression must hold; ``In`` and ``NotIn`` take a non-empty ``values`` list,
``Exists`` and ``DoesNotExist`` none; ``NotIn`` and ``DoesNotExist`` hold for a label that
is absent; an empty selector (``{}``) selects every namespace. A selector written
otherwise is refused naming the field, as the API server refuses one on a Deployment.

Every Namespace is read with the label ``kubernetes.io/metadata.name`` set to its
name, as the API server sets it since Kubernetes 1.21: so a selector may name
namespaces by name, and a namespace the reader has not seen (a simulation's, made
on first use; one the watch has not brought yet) is read by its name alone.
"""

from collections.abc import Callable, Iterable, Iterator, Mapping
from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, model_validator

NAME_LABEL = "kubernetes.io/metadata.name"


class Operator(StrEnum):
    IN = "In"
    NOT_IN = "NotIn"
    EXISTS = "Exists"
    DOES_NOT_EXIST = "DoesNotExist"


_MODEL = ConfigDict(populate_by_name=True, frozen=True, extra="forbid")
_WITH_VALUES = frozenset({Operator.IN, Operator.NOT_IN})


class Requirement(BaseModel):
    """A label key, an operator (In, NotIn, Exists, DoesNotExist) and its values."""

    model_config = _MODEL

    key: Annotated[str, Field(min_length=1, max_length=317)]
    operator: Operator
    values: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _values_fit_the_operator(self) -> "Requirement":
        if self.operator in _WITH_VALUES and not self.values:
            raise ValueError(
                f"operator {self.operator.value} needs a non-empty values list "
                f"(the values of label {self.key!r} it tests)"
            )
        if self.operator not in _WITH_VALUES and self.values:
            raise ValueError(
                f"operator {self.operator.value} takes no values (it tests whether label "
                f"{self.key!r} is set at all)"
            )
        return self

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.operator is Operator.EXISTS:
            return self.key in labels
        if self.operator is Operator.DOES_NOT_EXIST:
            return self.key not in labels
        found = self.key in labels and labels[self.key] in self.values
        return found if self.operator is Operator.IN else not found

    def __str__(self) -> str:
        if self.operator in _WITH_VALUES:
            return f"{self.key} {self.operator.value} ({', '.join(self.values)})"
        return self.key if self.operator is Operator.EXISTS else f"!{self.key}"


class LabelSelector(BaseModel):
    """A label selector: every matchLabels pair and every matchExpressions entry holds."""

    model_config = _MODEL

    match_labels: dict[str, str] = Field(default_factory=dict, alias="matchLabels")
    match_expressions: list[Requirement] = Field(default_factory=list, alias="matchExpressions")

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(labels.get(k) == v for k, v in self.match_labels.items()) and all(
            requirement.matches(labels) for requirement in self.match_expressions
        )

    def __str__(self) -> str:
        """As kubectl writes a selector: ``team=a,tier In (gold, silver)``."""
        parts = [f"{k}={v}" for k, v in sorted(self.match_labels.items())]
        parts += [str(requirement) for requirement in self.match_expressions]
        return ",".join(parts) or "(every namespace)"


def not_carried(child: LabelSelector, parents: Iterable[LabelSelector]) -> list[str]:
    """The requirements of ``parents`` (a queue's ancestors' selectors, all of which
    apply) that ``child`` does not carry, as kubectl writes them; none when ``child`` is
    no wider. Containment is syntactic: each matchLabels pair must be among the child's
    matchLabels, each matchExpressions entry among its entries (the same key, operator
    and values, in any order). A narrower child written otherwise (``team In (a)`` for
    ``team=a``) is not recognised: it is written as its parent writes it."""
    carried = _requirements(child)
    missing: dict[tuple[str, str, frozenset[str]], str] = {}
    for parent in parents:
        missing.update((k, text) for k, text in _requirements(parent).items() if k not in carried)
    return list(missing.values())


def _requirements(selector: LabelSelector) -> dict[tuple[str, str, frozenset[str]], str]:
    """Each requirement of ``selector``, by what identifies it, as kubectl writes it."""
    found = {("=", k, frozenset((v,))): f"{k}={v}" for k, v in selector.match_labels.items()}
    for requirement in selector.match_expressions:
        key = (requirement.operator.value, requirement.key, frozenset(requirement.values))
        found[key] = str(requirement)
    return found


def namespace_labels(name: str, labels: Mapping[str, str] | None = None) -> dict[str, str]:
    """A Namespace's labels as a selector reads them: ``labels`` (None: not known) with
    ``kubernetes.io/metadata.name`` set to its name."""
    return {**(labels or {}), NAME_LABEL: name}


def barring_queue(
    queue: str,
    labels: Mapping[str, str],
    selector_and_parent: Callable[[str], tuple[LabelSelector | None, str | None] | None],
) -> tuple[str, LabelSelector] | None:
    """The first queue, from ``queue`` up through its ancestors, whose namespaceSelector
    does not select a namespace of ``labels`` (that queue and its selector); None when
    every one of them does (or sets none). ``selector_and_parent`` as for
    ``selectors_upward``."""
    for name, selector in selectors_upward(queue, selector_and_parent):
        if not selector.matches(labels):
            return name, selector
    return None


def selectors_upward(
    queue: str,
    selector_and_parent: Callable[[str], tuple[LabelSelector | None, str | None] | None],
) -> Iterator[tuple[str, LabelSelector]]:
    """Each queue from ``queue`` up through its ancestors that sets a namespaceSelector,
    with that selector: all of them apply to the groups below. ``selector_and_parent(name)``:
    that queue's selector and its parent's name (None at the top), or None for a queue
    not known — the walk stops there (a missing parent is another rule's refusal). A
    cycle of parents stops the walk where it comes back."""
    met: set[str] = set()
    current: str | None = queue
    while current is not None and current not in met:
        met.add(current)
        found = selector_and_parent(current)
        if found is None:
            return
        selector, parent = found
        if selector is not None:
            yield current, selector
        current = parent


def barred_message(namespace: str, queue: str, barring: tuple[str, LabelSelector]) -> str:
    """Why namespace ``namespace`` may not use ``queue``: ``barring`` is the queue (it, or
    an ancestor) whose spec.namespaceSelector does not select it, and that selector."""
    owner, selector = barring
    whose = "its" if owner == queue else f"its ancestor {owner!r}'s"
    return (
        f"namespace {namespace!r} may not use queue {queue!r}: {whose} spec.namespaceSelector "
        f"({selector}) does not select it"
    )
