"""Queue: a weighted share of the cluster (cluster-scoped).

Its status is the scheduler's: what the queue deserves, holds and asks for, and
(with the ``flow`` plugin, DESIGN §11) its flow — its usage with a decaying memory
of the past — and when that was measured, kept here so that a restart or a
failover of the scheduler keeps the history.
"""

import math
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

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


def rfc3339(seconds: float) -> str:
    """A Kubernetes timestamp (RFC 3339, whole seconds, UTC) for epoch ``seconds``."""
    return datetime.fromtimestamp(math.floor(seconds), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def rfc3339_seconds(text: str) -> float:
    """Epoch seconds of an RFC 3339 time with a zone (``Z`` or an offset); ValueError
    otherwise."""
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        parsed = None
    if parsed is None or parsed.tzinfo is None or "T" not in text.upper():
        raise ValueError(f"{text!r} is not an RFC 3339 time (e.g. 2024-05-01T12:00:00Z)")
    return parsed.timestamp()


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
