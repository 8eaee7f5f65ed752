"""``model_copies.replaced`` against pydantic's own ``model_copy(update=...)``: the same
class, fields, fields set, extra and private values, and the original untouched."""

from types import MappingProxyType
from typing import Any

import pytest
from pydantic import BaseModel

from kbatch.api.meta import ObjectMeta
from kbatch.api.podgroup import (
    ConditionType,
    PodGroup,
    PodGroupCondition,
    PodGroupPhase,
    PodGroupStatus,
)
from kbatch.api.queue import QueueStatus
from kbatch.cluster import fields
from kbatch.cluster.fields import FieldError
from kbatch.operators.scheduler.core.framework.model_copies import replaced

GROUP = PodGroup.model_validate(
    {
        "apiVersion": "scheduling.incubator.k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "g", "namespace": "ns"},
        "spec": {"minMember": 2, "queue": "q"},
    }
)
CONDITION = PodGroupCondition(type=ConditionType.UNSCHEDULABLE, status="True", reason="r")

CASES: list[tuple[BaseModel, dict[str, Any]]] = [
    (GROUP, {"status": PodGroupStatus(phase=PodGroupPhase.RUNNING, running=2)}),
    (PodGroupStatus(), {"phase": PodGroupPhase.INQUEUE, "running": 1, "failed": 0}),
    (CONDITION, {"last_transition_time": "2026-01-01T00:00:00Z", "transition_id": "s1"}),
    (QueueStatus(pending=1, flow=0.5), {"flow": None, "flow_updated": None}),
    (ObjectMeta.model_validate({"name": "a", "uid": "u", "extraField": 1}), {"name": "b"}),
]


@pytest.mark.parametrize(("model", "update"), CASES)
def test_replaced_is_model_copy(model: BaseModel, update: dict[str, Any]) -> None:
    before = model.model_dump()
    made, copied = replaced(model, update), model.model_copy(update=update)
    assert type(made) is type(copied)
    assert made.__dict__ == copied.__dict__
    assert made.__pydantic_fields_set__ == copied.__pydantic_fields_set__
    assert made.__pydantic_extra__ == copied.__pydantic_extra__
    assert made.__pydantic_private__ == copied.__pydantic_private__
    assert made == copied and made.model_dump() == copied.model_dump()
    assert made is not model and model.model_dump() == before  # the original as it was
    assert made.__dict__ is not model.__dict__


def test_value_reads_maps_and_names_the_step_that_is_not_one() -> None:
    obj = {"spec": {"a": MappingProxyType({"b": 1})}, "list": [1]}
    assert fields.value(obj, "spec.a.b") == 1
    assert fields.value(obj, "spec.missing.b") is None
    assert fields.value(obj, "") is obj
    with pytest.raises(FieldError) as raised:
        fields.value(obj, "list.x", at="items[0]")
    assert raised.value.field == "items[0].list"
