"""A PodGroup written with its status alone changed keeps the rest as parsed before and
validates the status only (``records.parse_pod_group``): the same PodGroup as parsing
it whole, and the same refusal of a bad status; the snapshot's parts of its job are then
the last version's with the new status' (``group_parts.status_parts``)."""

from typing import Any

import pytest

from kbatch.api.podgroup import PodGroupPhase, PodGroupStatus
from kbatch.api.queue import QueueStatus
from kbatch.cluster import records
from kbatch.cluster.errors import ObjectError
from kbatch.cluster.reuse import group_parts
from kbatch.cluster.state import ClusterState
from kbatch.operators.scheduler.core.framework.resources import Dims
from kbatch.operators.scheduler.core.framework.shortcuts import Shortcuts

# Every PodGroup written validated whole, its status alone written or not.
WHOLE = Shortcuts().without("parsed_of_status_writes")


def group(**status: Any) -> dict[str, Any]:
    written: dict[str, Any] = {
        "apiVersion": "scheduling.incubator.k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "g", "namespace": "ns", "annotations": {"kbatch.io/lifetime": "1h"}},
        "spec": {"minMember": 2, "queue": "q", "minResources": {"cpu": "2"}},
    }
    if status:
        written["status"] = status
    return written


CONDITION = {"type": "Unschedulable", "status": "True", "reason": "r", "message": "m"}
WRITES = [
    group(phase="Inqueue"),
    group(phase="Running", running=2, conditions=[CONDITION]),
    group(),  # the status dropped: the default one
    group(
        phase="Pending", conditions=[{**CONDITION, "lastTransitionTime": "2024-01-01T00:00:00Z"}]
    ),
]


@pytest.mark.parametrize("written", WRITES)
def test_a_status_written_alone_gives_the_group_parsed_whole(written: dict[str, Any]) -> None:
    before = records.parse_pod_group(group(phase="Pending"))
    kept = records.parse_pod_group(written, before, group(phase="Pending"))
    assert kept == records.parse_pod_group(written)
    assert kept.spec is before.spec and kept.metadata is before.metadata


@pytest.mark.parametrize(
    "changed",
    [
        {**group(phase="Inqueue"), "spec": {"minMember": 3, "queue": "q"}},
        {**group(phase="Inqueue"), "metadata": {"name": "g", "namespace": "ns"}},
        {**group(phase="Inqueue"), "apiVersion": "scheduling.incubator.k8s.io/v1alpha1x"},
    ],
)
def test_a_group_written_with_more_than_its_status_is_parsed_whole(
    changed: dict[str, Any],
) -> None:
    before = records.parse_pod_group(group(phase="Pending"))
    try:
        whole: object = records.parse_pod_group(
            changed, before, group(phase="Pending"), shortcuts=WHOLE
        )
    except ObjectError as exc:
        whole = (exc.ref, exc.field, exc.why)
    try:
        kept: object = records.parse_pod_group(changed, before, group(phase="Pending"))
    except ObjectError as exc:
        kept = (exc.ref, exc.field, exc.why)
    assert kept == whole
    if not isinstance(kept, tuple):
        assert kept.spec is not before.spec  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "bad", [{"phase": "Sleeping"}, {"running": -1}, {"conditions": [{"type": "X"}]}, None]
)
def test_a_bad_status_written_alone_is_refused_as_the_long_way_refuses_it(bad: Any) -> None:
    before = records.parse_pod_group(group(phase="Pending"))
    written = {**group(), "status": bad}
    with pytest.raises(ObjectError) as whole:
        records.parse_pod_group(written)
    with pytest.raises(ObjectError) as kept:
        records.parse_pod_group(written, before, group(phase="Pending"))
    assert (kept.value.ref, kept.value.field, kept.value.why) == (
        whole.value.ref,
        whole.value.field,
        whole.value.why,
    )
    assert whole.value.field.startswith("status")


@pytest.mark.parametrize("shortcuts", [Shortcuts(), WHOLE])
def test_the_state_parses_a_status_write_on_its_last_version(shortcuts: Shortcuts) -> None:
    state = ClusterState(shortcuts=shortcuts)
    state.apply(group(phase="Pending"))
    first = state.pod_groups()["ns/g"]
    state.apply(group(phase="Inqueue"))
    kept = state.pod_groups()["ns/g"]
    assert (kept.spec is first.spec) is shortcuts.parsed_of_status_writes
    assert kept == records.parse_pod_group(group(phase="Inqueue"))


@pytest.mark.parametrize("written", WRITES)
def test_the_parts_of_a_status_written_alone_are_those_worked_out_whole(
    written: dict[str, Any],
) -> None:
    """What a snapshot makes a group's job from (``group_parts``): of a status write, the
    last version's parts with the new status', the same as worked out anew."""
    dims = Dims.of(["cpu"])
    before = records.parse_pod_group(group(phase="Pending"))
    last = group_parts.group_parts("ns/g", before, dims)
    kept = records.parse_pod_group(written, before, group(phase="Pending"))
    parts = group_parts.status_parts(last, kept)
    whole = group_parts.group_parts("ns/g", kept, dims)
    assert parts is not None and parts.group is kept
    assert (parts.head, parts.tail, parts.names_class) == (
        whole.head,
        whole.tail,
        whole.names_class,
    )
    assert parts.min_resources is not None and whole.min_resources is not None
    assert parts.min_resources.tobytes() == whole.min_resources.tobytes()
    assert parts.tail[0] == 3600.0  # the lifetime, kept


def test_the_parts_of_a_group_written_whole_are_worked_out_anew() -> None:
    dims = Dims.of(["cpu"])
    before = records.parse_pod_group(group(phase="Pending"))
    last = group_parts.group_parts("ns/g", before, dims)
    changed = {**group(phase="Inqueue"), "spec": {"minMember": 3, "queue": "q"}}
    assert group_parts.status_parts(last, records.parse_pod_group(changed, before, group())) is None


@pytest.mark.parametrize("written", [w for w in WRITES if "status" in w])
def test_a_status_handed_over_with_its_model_is_that_model(written: dict[str, Any]) -> None:
    """The simulator hands its status writes over with the model they were dumped from
    (``SimBackend._write_status``): that very model is the status parsed, and the group
    is what validating the dump gives."""
    before = records.parse_pod_group(group(phase="Pending"))
    model = PodGroupStatus.model_validate(written["status"])
    dumped = {**group(), "status": model.model_dump(mode="json", by_alias=True, exclude_none=True)}
    kept = records.parse_pod_group(dumped, before, group(phase="Pending"), model)
    assert kept.status is model
    assert kept == records.parse_pod_group(dumped)
    assert kept.spec is before.spec


def test_a_model_handed_over_with_more_than_a_status_written_is_not_taken() -> None:
    """Only a write of the status alone takes the model: one that changes more is
    parsed whole (and a status that is not the model's kind is validated)."""
    before = records.parse_pod_group(group(phase="Pending"))
    model = PodGroupStatus(phase=PodGroupPhase.INQUEUE)
    changed = {**group(phase="Inqueue"), "spec": {"minMember": 3, "queue": "q"}}
    whole = records.parse_pod_group(changed, before, group(phase="Pending"), model)
    assert whole.spec.min_member == 3 and whole.status is not model
    queue_status = QueueStatus()
    other = records.parse_pod_group(
        group(phase="Inqueue"), before, group(phase="Pending"), queue_status
    )
    assert other.status == model and other.status is not model


def test_the_state_takes_a_handed_over_status_of_a_status_write() -> None:
    state = ClusterState()
    state.apply(group(phase="Pending"))
    model = PodGroupStatus(phase=PodGroupPhase.RUNNING, running=2)
    dumped = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    state.apply({**group(), "status": dumped}, status=model)
    assert state.pod_groups()["ns/g"].status is model
    assert state.get("PodGroup", "ns", "g")["status"] == dumped
