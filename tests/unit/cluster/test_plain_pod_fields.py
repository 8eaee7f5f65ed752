"""A pod whose fields have the plain types of decoded JSON is read with those types
checked together (``pod_records._plain_fields``); any other is read field by field.
Both give the same record, and for a bad pod the same refusal, naming the pod and the
field that reading it field by field names first."""

import copy
from typing import Any

import pytest

from kbatch.cluster import pod_fields, pod_records
from kbatch.cluster.errors import ObjectError


class Text(str):
    """A string of another type: read field by field."""


POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "w-0",
        "namespace": "team",
        "uid": "u-1",
        "creationTimestamp": "2026-01-01T00:00:00Z",
        "labels": {"job-name": "w", "app": "a"},
        "annotations": {"kbatch.io/task": "worker", "note": "x"},
        "ownerReferences": [{"kind": "Job", "name": "w", "uid": "j", "controller": True}],
    },
    "spec": {
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}}],
        "schedulerName": "kbatch",
        "priority": 5,
        "priorityClassName": "high",
        "terminationGracePeriodSeconds": 30,
        "nodeName": "n1",
        "tolerations": [{"key": "gpu", "operator": "Exists"}],
    },
    "status": {
        "phase": "Running",
        "nominatedNodeName": "n2",
        "startTime": "2026-01-01T00:01:00Z",
        "conditions": [{"type": "PodScheduled", "status": "True"}],
    },
}


def _with(**parts: dict[str, Any]) -> dict[str, Any]:
    """POD with ``parts`` (metadata=..., spec=..., status=...) merged into its own."""
    pod = copy.deepcopy(POD)
    for part, values in parts.items():
        pod[part] = {**pod[part], **values}
    return pod


GOOD = {
    "as listed": POD,
    "no status": {key: part for key, part in POD.items() if key != "status"},
    "null status": {**POD, "status": None},
    "bare": _with(
        metadata={"labels": None, "annotations": None, "uid": None, "namespace": ""},
        spec={"priority": None, "nodeName": "", "schedulerName": None},
        status={"conditions": None, "phase": None, "startTime": None},
    ),
    "upstream group": _with(spec={"schedulingGroup": {"podGroupName": "g"}}),
    "empty upstream group": _with(spec={"schedulingGroup": {"podGroupName": ""}}),
    "annotated group": _with(
        metadata={"annotations": {"scheduling.k8s.io/group-name": "a"}},
        spec={"schedulingGroup": 5},  # not read: the annotation names the group
    ),
    "deleting": _with(metadata={"deletionTimestamp": "2026-01-01T00:02:00Z"}),
    "a label of another string type": _with(metadata={"labels": {"app": Text("a")}}),
    "a label key of another type": _with(metadata={"labels": {1: "a"}}),
}

BAD = {
    "metadata a list": {**POD, "metadata": []},
    "no name": _with(metadata={"name": ""}),
    "a name not a string": _with(metadata={"name": 3}),
    "namespace": _with(metadata={"namespace": 3}),
    "uid": _with(metadata={"uid": 5}),
    "labels empty text": _with(metadata={"labels": ""}),
    "labels a list": _with(metadata={"labels": []}),
    "a label value": _with(metadata={"labels": {"app": 1}}),
    "annotations": _with(metadata={"annotations": "x"}),
    "an annotation value": _with(metadata={"annotations": {"note": True}}),
    "created": _with(metadata={"creationTimestamp": "soon"}),
    "created a number": _with(metadata={"creationTimestamp": 5}),
    "spec a list": {**POD, "spec": []},
    "no spec": {key: part for key, part in POD.items() if key != "spec"},
    "no containers": _with(spec={"containers": []}),
    "containers a map": _with(spec={"containers": {}}),
    "a container not a map": _with(spec={"containers": ["c"]}),
    "node": _with(spec={"nodeName": 3}),
    "scheduler": _with(spec={"schedulerName": []}),
    "priority text": _with(spec={"priority": "1"}),
    "priority a bool": _with(spec={"priority": True}),
    "grace period": _with(spec={"terminationGracePeriodSeconds": "30"}),
    "priority class": _with(spec={"priorityClassName": 3}),
    "upstream group not a map": _with(spec={"schedulingGroup": "g"}),
    "upstream group name": _with(spec={"schedulingGroup": {"podGroupName": 3}}),
    "a request": _with(spec={"containers": [{"resources": {"requests": {"cpu": "lots"}}}]}),
    "a toleration": _with(spec={"tolerations": [{"operator": "Maybe"}]}),
    "status a list": {**POD, "status": ["Running"]},
    "status empty text": {**POD, "status": ""},
    "phase": _with(status={"phase": 3}),
    "nominated": _with(status={"nominatedNodeName": 1}),
    "started": _with(status={"startTime": "soon"}),
    "conditions a map": _with(status={"conditions": {}}),
    "conditions empty text": _with(status={"conditions": ""}),
    "a condition": _with(status={"conditions": ["x"]}),
    "created and conditions": _with(
        metadata={"creationTimestamp": "soon"}, status={"conditions": "x"}
    ),
    "created and upstream group": _with(
        metadata={"creationTimestamp": "soon"}, spec={"schedulingGroup": "g"}
    ),
    "a request and conditions": _with(
        spec={"containers": [{"resources": {"requests": {"cpu": "lots"}}}]},
        status={"conditions": "x"},
    ),
}


def _parse(obj: dict[str, Any], *, plain: bool, monkeypatch: pytest.MonkeyPatch) -> object:
    """parse_pod's record of ``obj`` (or its refusal), with the plain reading or without."""
    with monkeypatch.context() as patched:
        if not plain:
            patched.setattr(pod_records, "_plain_fields", lambda obj: None)
        try:
            return pod_records.parse_pod(obj)
        except ObjectError as exc:
            return (exc.ref, exc.field, exc.why)


@pytest.mark.parametrize("case", sorted(GOOD))
def test_a_good_pod_gives_the_record_read_field_by_field(
    case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    record = _parse(GOOD[case], plain=True, monkeypatch=monkeypatch)
    assert isinstance(record, pod_records.PodRecord)
    assert record == _parse(GOOD[case], plain=False, monkeypatch=monkeypatch)


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_pod_gets_the_refusal_read_field_by_field(
    case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    refusal = _parse(BAD[case], plain=True, monkeypatch=monkeypatch)
    assert isinstance(refusal, tuple) and refusal[0].startswith("Pod ") and refusal[1]
    assert refusal == _parse(BAD[case], plain=False, monkeypatch=monkeypatch)


def test_a_listed_pod_is_read_plainly() -> None:
    """The pods the other tests compare take the plain reading (else they compare
    the field-by-field reading with itself)."""
    for case in ("as listed", "no status", "null status", "bare", "upstream group", "deleting"):
        assert pod_fields.plain_fields(GOOD[case]) is not None, case
    assert pod_fields.plain_fields(GOOD["a label of another string type"]) is None
