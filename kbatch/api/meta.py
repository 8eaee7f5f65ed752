"""The part of ObjectMeta that kbatch reads and writes."""

from pydantic import BaseModel, ConfigDict, Field


class ObjectMeta(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="allow", frozen=True)

    name: str = Field(min_length=1, max_length=253)
    namespace: str | None = None
    uid: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    creation_timestamp: str | None = Field(default=None, alias="creationTimestamp")
    resource_version: str | None = Field(default=None, alias="resourceVersion")
