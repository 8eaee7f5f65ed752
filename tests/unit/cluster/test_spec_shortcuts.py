"""Pods of one template share one parsed spec (``podspec.SHARED_SPECS``): switched off,
every pod's record is the same, on random pods of a few templates; and a bad spec is
refused alike either way."""

import random
from typing import Any

import pytest

from kbatch.cluster import pod_records, podspec, records
from kbatch.cluster.errors import ObjectError


def _pod(rng: random.Random, i: int) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": "kbatch",
        "containers": [
            {"name": "c", "resources": {"requests": {"cpu": rng.choice(["100m", "1", "2"])}}}
        ],
    }
    if rng.random() < 0.3:
        spec["nodeSelector"] = {"zone": rng.choice(["a", "b"])}
    if rng.random() < 0.3:
        spec["tolerations"] = [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]
    return {
        "kind": "Pod",
        "metadata": {
            "name": f"p{i}",
            "namespace": rng.choice(["default", "team"]),
            "uid": f"uid-{i}",
            "labels": {"app": rng.choice(["x", "y"])},
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": spec,
        "status": {"phase": "Pending"},
    }


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch) -> podspec.SharedSpecs:
    shared = podspec.SharedSpecs()
    monkeypatch.setattr(pod_records, "SHARED_SPECS", shared)
    return shared


@pytest.mark.parametrize("seed", range(5))
def test_shared_specs_parse_as_each_pod_alone(seed: int, fresh: podspec.SharedSpecs) -> None:
    pods = [_pod(random.Random(seed * 1000 + i), i) for i in range(300)]
    shared = [records.parse_pod(p) for p in pods]
    fresh.enabled = False
    alone = [records.parse_pod(p) for p in pods]
    assert shared == alone
    by_key: dict[str, podspec.ParsedSpec] = {}
    for record in shared:
        assert by_key.setdefault(record.spec.key, record.spec) is record.spec, "not shared"
    assert len({id(record.spec) for record in alone}) == len(alone), "the seam is off"


def test_a_bad_spec_is_refused_alike_after_a_good_one_of_its_shape(
    fresh: podspec.SharedSpecs,
) -> None:
    good = _pod(random.Random(1), 0)
    records.parse_pod(good)
    bad = _pod(random.Random(1), 1)
    bad["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
    with pytest.raises(ObjectError, match="cpu"):
        records.parse_pod(bad)


def test_past_its_size_the_oldest_template_is_parsed_anew(fresh: podspec.SharedSpecs) -> None:
    fresh.size = 2
    pods = [_pod(random.Random(7), 0) for _ in range(3)]
    for i, cpu in enumerate(("1", "2", "3")):
        pods[i]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = cpu
    first = records.parse_pod(pods[0]).spec
    assert records.parse_pod(pods[0]).spec is first
    records.parse_pod(pods[1])
    records.parse_pod(pods[2])
    again = records.parse_pod(pods[0]).spec
    assert again == first and again is not first


def test_a_shape_parsed_for_other_labels_is_not_parsed_again(
    fresh: podspec.SharedSpecs, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pods of a Job differ from its template's pod in their labels only (job-name,
    controller-uid): their spec is the template's, with their own labels and key."""
    first = _pod(random.Random(3), 0)
    second = _pod(random.Random(3), 1)
    second["metadata"]["labels"] = {"app": "z", "controller-uid": "u-1"}
    second["metadata"]["namespace"] = "elsewhere"
    fresh.enabled = False  # (parsed alone, not kept)
    expected = records.parse_pod(second).spec
    fresh.enabled = True
    records.parse_pod(first)

    def parsed_again(*args: object) -> None:
        raise AssertionError("a known shape parsed again")

    monkeypatch.setattr(podspec, "parse_spec", parsed_again)
    spec = records.parse_pod(second).spec
    assert spec == expected
    assert spec.key != records.parse_pod(first).spec.key
    assert spec.labels == (("app", "z"), ("controller-uid", "u-1"))
