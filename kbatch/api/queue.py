"""Queue: a weighted share of the cluster (cluster-scoped)."""

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from kbatch.api.meta import ObjectMeta
from kbatch.api.quantity import ResourceList


class QueueState(StrEnum):
    OPEN = "Open"
    CLOSED = "Closed"


_MODEL = ConfigDict(populate_by_name=True, frozen=True, extra="forbid")


class QueueSpec(BaseModel):
    model_config = _MODEL

    weight: Annotated[int, Field(ge=1, strict=True)] = 1
    capability: ResourceList | None = None
    reclaimable: bool = True
    state: QueueState = QueueState.OPEN


class QueueStatus(BaseModel):
    model_config = _MODEL

    deserved: ResourceList = Field(default_factory=dict)
    allocated: ResourceList = Field(default_factory=dict)
    request: ResourceList = Field(default_factory=dict)
    pending: Annotated[int, Field(ge=0)] = 0
    inqueue: Annotated[int, Field(ge=0)] = 0
    running: Annotated[int, Field(ge=0)] = 0


class Queue(BaseModel):
    model_config = ConfigDict(populate_by_name=True, frozen=True, extra="ignore")

    api_version: Literal["scheduling.incubator.k8s.io/v1alpha1"] = Field(
        default="scheduling.incubator.k8s.io/v1alpha1", alias="apiVersion"
    )
    kind: Literal["Queue"] = "Queue"
    metadata: ObjectMeta
    spec: QueueSpec = Field(default_factory=QueueSpec)
    status: QueueStatus = Field(default_factory=QueueStatus)
