"""A pod written with its status and its node alone changed, every other part the very
same object (a simulated bind, finish or condition: made of the state's last version)
keeps the rest of its last record (``records.parse_pod``): the same record as parsing it
whole, and the same refusal of a bad status; any other part written, even equal, is
parsed whole."""

import dataclasses
import inspect
import re
from typing import Any

import pytest

from kbatch.cluster import pod_records, records
from kbatch.cluster.errors import ObjectError
from kbatch.cluster.state import ClusterState
from kbatch.operators.scheduler.core.framework.shortcuts import Shortcuts

BEFORE: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "p",
        "namespace": "ns",
        "uid": "u1",
        "creationTimestamp": "2024-01-01T00:00:00Z",
        "labels": {"app": "a"},
        "annotations": {"scheduling.k8s.io/group-name": "g"},
    },
    "spec": {
        "schedulerName": "kbatch",
        "priority": 5,
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
    },
    "status": {"phase": "Pending"},
}
SCHEDULED = {"type": "PodScheduled", "status": "True"}
WRITES = {
    "bound": {
        **BEFORE,
        "spec": {**BEFORE["spec"], "nodeName": "n1"},
        "status": {
            "phase": "Running",
            "startTime": "2024-01-01T00:01:00Z",
            "conditions": [SCHEDULED],
        },
    },
    "finished": {**BEFORE, "status": {"phase": "Succeeded"}},
    "nominated": {**BEFORE, "status": {"phase": "Pending", "nominatedNodeName": "n2"}},
    "condition": {
        **BEFORE,
        "status": {"conditions": [{**SCHEDULED, "status": "False", "reason": "R", "message": "m"}]},
    },
    "status dropped": {key: part for key, part in BEFORE.items() if key != "status"},
}


def _parsed_whole(written: dict[str, Any]) -> object:
    """What ``parse_pod`` gives on the last version without keeping its record."""
    whole = Shortcuts().without("pod_record_of_status_writes")
    try:
        return records.parse_pod(written, records.parse_pod(BEFORE), BEFORE, whole)
    except ObjectError as exc:
        return (exc.ref, exc.field, exc.why)


def _parsed_kept(written: dict[str, Any]) -> tuple[object, int]:
    """What ``parse_pod`` gives on the last version, and how often it parsed whole."""
    before = records.parse_pod(BEFORE)
    whole = [0]
    fields_of = pod_records._pod_fields

    def counted(obj: Any) -> Any:
        whole[0] += 1
        return fields_of(obj)

    pod_records._pod_fields = counted  # type: ignore[assignment]
    try:
        return records.parse_pod(written, before, BEFORE), whole[0]
    except ObjectError as exc:
        return (exc.ref, exc.field, exc.why), whole[0]
    finally:
        pod_records._pod_fields = fields_of  # type: ignore[assignment]


@pytest.mark.parametrize("case", sorted(WRITES))
def test_a_status_or_node_written_alone_gives_the_record_parsed_whole(case: str) -> None:
    kept, parsed_whole = _parsed_kept(WRITES[case])
    assert parsed_whole == 0
    assert kept == _parsed_whole(WRITES[case])


OTHER_WRITES = {
    "labels": {**BEFORE, "metadata": {**BEFORE["metadata"], "labels": {"app": "b"}}},
    "equal metadata, another object": {**BEFORE, "metadata": dict(BEFORE["metadata"])},
    "a request": {
        **BEFORE,
        "spec": {
            **BEFORE["spec"],
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}],
        },
    },
    "priority": {**BEFORE, "spec": {**BEFORE["spec"], "priority": 7}},
    "a field more": {**BEFORE, "extra": {}},
    "bad node": {**BEFORE, "spec": {**BEFORE["spec"], "nodeName": 3}},
    "bad phase": {**BEFORE, "status": {"phase": 3}},
    "bad start": {**BEFORE, "status": {"startTime": "soon"}},
    "bad status": {**BEFORE, "status": ["Running"]},
}


@pytest.mark.parametrize("case", sorted(OTHER_WRITES))
def test_anything_else_written_is_parsed_whole(case: str) -> None:
    kept, parsed_whole = _parsed_kept(OTHER_WRITES[case])
    assert parsed_whole == 1
    assert kept == _parsed_whole(OTHER_WRITES[case])
    if case.startswith("bad"):
        assert isinstance(kept, tuple)


def test_the_state_keeps_the_record_of_a_write_handed_over(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    state = ClusterState()
    state.apply(BEFORE)
    raw = state.get("Pod", "ns", "p")
    assert raw is not None
    bound = {**raw, "spec": {**raw["spec"], "nodeName": "n1"}, "status": {"phase": "Running"}}
    with monkeypatch.context() as patched:  # not parsed whole
        patched.setattr(pod_records, "_pod_fields", None)
        state.apply(bound, owned=True)
    record = state.pod_record("ns", "p")
    assert record is not None and (record.node_name, record.phase) == ("n1", "Running")
    assert record == records.parse_pod(bound)


def test_the_first_status_of_a_pod_made_without_one_keeps_its_record(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A Job controller's pod has no status until its bind writes one (with its node):
    a status write too, that keeps the rest of the record (it was parsed whole)."""
    made = {key: part for key, part in BEFORE.items() if key != "status"}
    bound = {**WRITES["bound"], "metadata": made["metadata"]}
    before = records.parse_pod(made)
    with monkeypatch.context() as patched:  # not parsed whole
        patched.setattr(pod_records, "_pod_fields", None)
        kept = records.parse_pod(bound, before, made)
    assert kept == records.parse_pod(bound)
    assert kept.spec is before.spec and (kept.node_name, kept.phase) == ("n1", "Running")


def test_a_status_write_names_every_field_of_the_record() -> None:
    """The record of a status write is built field by field (not dataclasses.replace):
    a field added to PodRecord must be carried over there too, or this fails."""
    source = inspect.getsource(pod_records._pod_of_status_write)
    named = set(re.findall(r"^\s+(\w+)=", source, re.MULTILINE))
    init_fields = {f.name for f in dataclasses.fields(records.PodRecord) if f.init}
    assert init_fields <= named, init_fields - named
    kept, _ = _parsed_kept(WRITES["bound"])
    before = records.parse_pod(BEFORE)
    assert isinstance(kept, records.PodRecord)
    assert kept.spec is before.spec and (kept.task_status, kept.unit) != (None, "")
