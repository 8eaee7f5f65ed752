"""PodGroup: a gang of pods that is scheduled all or nothing.

A superset of kube-batch's v1alpha1 PodGroup (as Volcano's v1beta1 is): every
kube-batch manifest validates unchanged.
"""

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from kbatch.api import DEFAULT_QUEUE
from kbatch.api.meta import ObjectMeta
from kbatch.api.quantity import ResourceList


class PodGroupPhase(StrEnum):
    PENDING = "Pending"
    INQUEUE = "Inqueue"
    RUNNING = "Running"
    UNKNOWN = "Unknown"
    COMPLETED = "Completed"


class ConditionType(StrEnum):
    UNSCHEDULABLE = "Unschedulable"
    SCHEDULED = "Scheduled"
    # The group runs on room borrowed from another queue's unused share (DESIGN §14):
    # the first reclaimed when that queue asks for it again.
    BORROWING = "kbatch.io/Borrowing"
    # When a waiting group is estimated to start: kbatch run's ETA publisher writes it
    # (kbatch.visibility.published); the sessions keep it as they keep any condition.
    ESTIMATED_START = "kbatch.io/EstimatedStart"


_MODEL = ConfigDict(populate_by_name=True, frozen=True, extra="forbid")


class PodGroupSpec(BaseModel):
    """What the gang needs before any of it may run."""

    model_config = _MODEL

    min_member: Annotated[int, Field(ge=1, alias="minMember", strict=True)] = 1
    queue: Annotated[str, Field(min_length=1)] = DEFAULT_QUEUE
    priority_class_name: str | None = Field(default=None, alias="priorityClassName")
    min_resources: ResourceList | None = Field(default=None, alias="minResources")
    # Per role (a pod's kbatch.io/task annotation): how many of its pods must run too.
    min_task_member: dict[str, Annotated[int, Field(ge=0, strict=True)]] | None = Field(
        default=None, alias="minTaskMember"
    )


class PodGroupCondition(BaseModel):
    model_config = _MODEL

    type: ConditionType
    status: Literal["True", "False", "Unknown"]
    reason: str = ""
    message: str = ""
    last_transition_time: str | None = Field(default=None, alias="lastTransitionTime")
    transition_id: str | None = Field(default=None, alias="transitionID")


class PodGroupStatus(BaseModel):
    model_config = _MODEL

    phase: PodGroupPhase = PodGroupPhase.PENDING
    conditions: tuple[PodGroupCondition, ...] = ()
    running: Annotated[int, Field(ge=0)] = 0
    succeeded: Annotated[int, Field(ge=0)] = 0
    failed: Annotated[int, Field(ge=0)] = 0


class PodGroup(BaseModel):
    model_config = ConfigDict(populate_by_name=True, frozen=True, extra="ignore")

    api_version: Literal["scheduling.incubator.k8s.io/v1alpha1"] = Field(
        default="scheduling.incubator.k8s.io/v1alpha1", alias="apiVersion"
    )
    kind: Literal["PodGroup"] = "PodGroup"
    metadata: ObjectMeta
    spec: PodGroupSpec = Field(default_factory=PodGroupSpec)
    status: PodGroupStatus = Field(default_factory=PodGroupStatus)
