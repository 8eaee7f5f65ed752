"""Queue: a weighted share of the cluster (cluster-scoped).

Queues form a tree (DESIGN §14), with Volcano's field names so that its manifests
read the same: ``spec.parent`` names the parent Queue (absent, or Volcano's
``root``: a child of the root), ``spec.weight`` is the share among siblings,
``spec.capability`` caps the whole subtree, ``spec.guarantee.resource`` is room
kept for the subtree even while it is idle, and ``spec.deserved`` (Volcano's
capacity plugin) a share claimed before the weights divide the rest.
``borrowingLimit`` and ``lendingLimit`` bound what the subtree takes beyond its
deserved share and what leaves it. ``spec.namespaceSelector`` (a label selector on
Namespaces, as on Kueue's ClusterQueue) says which namespaces' PodGroups and Jobs may
name the queue; its ancestors' selectors apply too, so a child is never wider than
its parent. The model refuses what one Queue alone
gets wrong (itself as its parent, a guarantee above its capability), naming
the field; what needs the other Queues (a missing parent, a cycle) is the
webhook's and the scheduler's (``framework.queue_tree``).

Its status is the scheduler's: what the queue deserves, holds and asks for, and
(with the ``flow`` plugin, DESIGN §11) its flow — its usage with a decaying memory
of the past — and when that was measured, kept here so that a restart or a
failover of the scheduler keeps the history.
"""

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_core import InitErrorDetails

from kbatch.api.meta import ObjectMeta
from kbatch.api.quantity import ResourceList, parse_quantity
from kbatch.api.selector import LabelSelector
from kbatch.api.times import rfc3339_seconds

# The tree's root, as Volcano names it: ``spec.parent: root`` is a top-level queue.
ROOT_QUEUE = "root"


class QueueState(StrEnum):
    OPEN = "Open"
    CLOSED = "Closed"


_MODEL = ConfigDict(populate_by_name=True, frozen=True, extra="forbid")


def refusal(loc: tuple[str, ...], value: object, why: str) -> ValidationError:
    """A validation error on the field at ``loc`` (from the model validated), saying ``why``
    in kbatch's words (``kbatch.api.errors.explain`` reads a value_error's own text)."""
    detail = InitErrorDetails(
        type="value_error", loc=loc, input=value, ctx={"error": ValueError(why)}
    )
    return ValidationError.from_exception_data("Queue", [detail])


class QueueGuarantee(BaseModel):
    """Room kept for the queue's subtree, never lent outside it."""

    model_config = _MODEL

    resource: ResourceList = Field(default_factory=dict)


class QueueSpec(BaseModel):
    model_config = _MODEL

    weight: Annotated[int, Field(ge=1, strict=True)] = 1
    capability: ResourceList | None = None
    reclaimable: bool = True
    state: QueueState = QueueState.OPEN
    parent: Annotated[str, Field(min_length=1)] | None = None
    guarantee: QueueGuarantee | None = None
    deserved: ResourceList | None = None
    borrowing_limit: ResourceList | None = Field(default=None, alias="borrowingLimit")
    lending_limit: ResourceList | None = Field(default=None, alias="lendingLimit")
    # Which Namespaces may name the queue (absent: any). A child never reaches wider
    # than its ancestors: their selectors apply to it too (``admits``).
    namespace_selector: LabelSelector | None = Field(default=None, alias="namespaceSelector")

    @model_validator(mode="after")
    def _guarantee_within_capability(self) -> "QueueSpec":
        """A guarantee is room the subtree may use, so never more than its capability."""
        if self.guarantee is None or self.capability is None:
            return self
        for resource, amount in self.guarantee.resource.items():
            cap = self.capability.get(resource)
            if cap is not None and parse_quantity(amount) > parse_quantity(cap):
                raise refusal(
                    ("guarantee", "resource", resource),
                    amount,
                    f"{amount} is above spec.capability.{resource} ({cap}): a guarantee is "
                    "room the queue may use, so at most its capability",
                )
        return self

    def parent_name(self) -> str:
        """The parent's name: ``root`` for a top-level queue (no ``spec.parent``)."""
        return self.parent or ROOT_QUEUE


def _checked_time(text: str) -> str:
    rfc3339_seconds(text)
    return text


Timestamp = Annotated[
    str, AfterValidator(_checked_time), Field(json_schema_extra={"format": "date-time"})
]


class QueueStatus(BaseModel):
    model_config = _MODEL

    deserved: ResourceList = Field(default_factory=dict)
    allocated: ResourceList = Field(default_factory=dict)
    request: ResourceList = Field(default_factory=dict)
    pending: Annotated[int, Field(ge=0)] = 0
    inqueue: Annotated[int, Field(ge=0)] = 0
    running: Annotated[int, Field(ge=0)] = 0
    # The flow plugin's (absent without it): the queue's flow in cost units (its
    # resourceWeights; by default cpu cores) and when it was measured.
    flow: Annotated[float, Field(ge=0, allow_inf_nan=False, strict=True)] | None = None
    flow_updated: Timestamp | None = Field(default=None, alias="flowUpdated")


class Queue(BaseModel):
    model_config = ConfigDict(populate_by_name=True, frozen=True, extra="ignore")

    api_version: Literal["scheduling.incubator.k8s.io/v1alpha1"] = Field(
        default="scheduling.incubator.k8s.io/v1alpha1", alias="apiVersion"
    )
    kind: Literal["Queue"] = "Queue"
    metadata: ObjectMeta
    spec: QueueSpec = Field(default_factory=QueueSpec)
    status: QueueStatus = Field(default_factory=QueueStatus)

    @model_validator(mode="after")
    def _not_its_own_parent(self) -> "Queue":
        if self.spec.parent == self.metadata.name:
            raise refusal(
                ("spec", "parent"),
                self.spec.parent,
                f"queue {self.metadata.name!r} cannot be its own parent",
            )
        return self
