"""A pod's parsed spec: its request by Kubernetes' rules, and its affinity terms."""

import json
import re
from typing import Any

import pytest

from kbatch.cluster import pod_records, podspec, records
from kbatch.cluster.podspec import PODS, parse_spec, pod_request


def container(cpu: str, restart_policy: str | None = None) -> dict[str, Any]:
    result: dict[str, Any] = {"name": "c", "resources": {"requests": {"cpu": cpu}}}
    if restart_policy is not None:
        result["restartPolicy"] = restart_policy
    return result


def sidecar(cpu: str) -> dict[str, Any]:
    return container(cpu, "Always")


@pytest.mark.parametrize(
    ("containers", "inits", "cpu"),
    [
        # Plain init containers run one at a time, before the app: the larger wins.
        ([container("1")], [container("2")], 2.0),
        ([container("3")], [container("2")], 3.0),
        # A sidecar runs beside the app: it adds to the sum.
        ([container("1")], [sidecar("1")], 2.0),
        ([container("1"), container("2")], [sidecar("1"), sidecar("1")], 5.0),
        # An init container after a sidecar runs beside it: 1 + 3 during init.
        ([container("1")], [sidecar("1"), container("3")], 4.0),
        # ... but not beside a sidecar that starts after it: max(3, 1 + 1).
        ([container("1")], [container("3"), sidecar("1")], 3.0),
        # KEP-753's example: InitContainerUse = sidecars before i + init i.
        ([container("5")], [sidecar("1"), sidecar("1"), container("1")], 7.0),
        ([container("1")], [sidecar("1"), sidecar("1"), container("4")], 6.0),
        # restartPolicy other than Always is a plain init container.
        ([container("1")], [container("1", "OnFailure"), container("1")], 1.0),
    ],
)
def test_sidecars_count_as_kubernetes_counts_them(
    containers: list[dict[str, Any]], inits: list[dict[str, Any]], cpu: float
) -> None:
    request = pod_request({"containers": containers, "initContainers": inits})
    assert request == {"cpu": cpu * 1000, PODS: 1.0}  # millicores


def test_overhead_adds_to_sidecars_and_containers() -> None:
    spec = {
        "containers": [container("1")],
        "initContainers": [sidecar("500m")],
        "overhead": {"cpu": "250m"},
    }
    assert pod_request(spec)["cpu"] == 1750


def pod_term(**term: Any) -> dict[str, Any]:
    return {
        "containers": [container("1")],
        "affinity": {
            "podAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "zone", **term}]
            }
        },
    }


@pytest.mark.parametrize(
    ("term", "labels", "matches"),
    [
        ({}, {}, False),  # a nil labelSelector selects no pods
        ({}, {"app": "x"}, False),
        ({"labelSelector": None}, {"app": "x"}, False),
        ({"labelSelector": {}}, {"app": "x"}, True),  # an empty one selects all
        ({"labelSelector": {"matchLabels": {"app": "x"}}}, {"app": "x"}, True),
        ({"labelSelector": {"matchLabels": {"app": "x"}}}, {"app": "y"}, False),
    ],
)
def test_a_pod_affinity_term_without_a_label_selector_selects_no_pods(
    term: dict[str, Any], labels: dict[str, str], matches: bool
) -> None:
    parsed = parse_spec("default", {}, pod_term(**term))
    (required,) = parsed.affinity.pod_required
    assert required.selector.matches(labels) is matches


def pod(cpu: str = "1", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default", "uid": "u1", "labels": {"a": "b"}},
        "spec": {"containers": [container(cpu)], **spec},
    }


@pytest.mark.parametrize("raw", [False, True], ids=["keyed", "compared"])
def test_an_unchanged_pod_reuses_its_parsed_spec(raw: bool) -> None:
    first = records.parse_pod(pod())
    bound = {**pod(), "spec": {**pod()["spec"], "nodeName": "n"}, "status": {"phase": "Running"}}
    again = records.parse_pod(bound, first, pod() if raw else None)
    assert again.spec is first.spec


def test_a_spec_with_equal_inputs_is_not_keyed_again(monkeypatch: pytest.MonkeyPatch) -> None:
    first = records.parse_pod(pod())

    def keyed(*_: object) -> bool:
        raise AssertionError("keyed again")

    monkeypatch.setattr(pod_records, "_same_spec", keyed)
    monkeypatch.setattr(pod_records, "_parsed_spec", keyed)
    assert records.parse_pod(pod(), first, pod()).spec is first.spec


@pytest.mark.parametrize(
    "changed",
    [
        pod(cpu="2"),  # an in-place resize
        pod(nodeSelector={"zone": "a"}),
        pod(affinity={"podAntiAffinity": {}}),
        pod(tolerations=[{"key": "k", "operator": "Exists"}]),
        pod(priorityClassName="high"),
        pod(initContainers=[sidecar("1")]),
        pod(overhead={"cpu": "1"}),
    ],
)
@pytest.mark.parametrize("raw", [False, True], ids=["keyed", "compared"])
def test_a_changed_pod_is_parsed_again(changed: dict[str, Any], raw: bool) -> None:
    first = records.parse_pod(pod())
    again = records.parse_pod(changed, first, pod() if raw else None)
    assert again.spec != first.spec
    assert again.spec == records.parse_pod(changed).spec


def test_a_pod_with_other_labels_is_parsed_again() -> None:
    """(Labels are what pod affinity terms of other pods match.)"""
    first = records.parse_pod(pod())
    relabelled = pod()
    relabelled["metadata"]["labels"] = {"a": "c"}
    again = records.parse_pod(relabelled, first, pod())
    assert again.spec is not first.spec and again.spec.key != first.spec.key


@pytest.mark.parametrize(
    "spec",
    [
        {"containers": [{"name": "c", "resources": {"requests": {"memory": "1Gi", "cpu": "1"}}}]},
        {
            "containers": [{"name": "c", "ports": [{"hostPort": 80}], "restartPolicy": "Always"}],
            "initContainers": ["not a map"],
            "nodeSelector": {"b": "2", "a": "1"},
            "tolerations": [{"key": "k", "operator": "Exists"}],
            "priorityClassName": "high",
            "overhead": {"cpu": 1.5},
        },
        {"containers": "not a list", "affinity": {"nodeAffinity": {"z": object}}},
    ],
)
def test_a_spec_key_is_the_json_of_what_it_names(spec: dict[str, Any]) -> None:
    """The key's text: compact JSON, sorted keys, anything else as str (one encoder for
    every key)."""

    def read_of(c: object) -> object:
        return (
            [c.get(k) for k in ("resources", "ports", "restartPolicy", "image")]
            if isinstance(c, dict)
            else c
        )

    containers, inits = spec.get("containers"), spec.get("initContainers")
    named = [
        [read_of(c) for c in containers] if isinstance(containers, list) else containers,
        [read_of(c) for c in inits] if isinstance(inits, list) else inits,
        *(spec.get(k) for k in ("overhead", "nodeSelector", "affinity", "tolerations")),
        spec.get("priorityClassName", ""),
    ]
    labels = {"b": "x", "a": "y"}

    def compact(value: object) -> str:
        return json.dumps(value, sort_keys=True, default=str, separators=(",", ":"))

    expected = compact(["ns", labels]) + compact(named)
    assert podspec.spec_key("ns", labels, spec) == expected


def test_resource_claims_are_read_by_name_and_part_of_the_spec_s_key() -> None:
    """Pods that differ only in their claims are of different templates: no node takes
    one with claims (``predicates``), every node may take one without."""
    plain: dict[str, Any] = {"containers": [container("1")]}
    claimed = {**plain, "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}]}
    assert parse_spec("ns", {}, claimed).resource_claims == ("gpu",)
    assert parse_spec("ns", {}, plain).resource_claims == ()
    assert podspec.spec_key("ns", {}, claimed) != podspec.spec_key("ns", {}, plain)
    assert "resourceClaims" in podspec.SPEC_KEY_FIELDS


@pytest.mark.parametrize(
    ("claims", "field"),
    [
        ("gpu", "spec.resourceClaims"),
        (["gpu"], "spec.resourceClaims[0]"),
        ([{"resourceClaimName": "x"}], "spec.resourceClaims[0].name"),
    ],
)
def test_bad_resource_claims_name_the_field(claims: object, field: str) -> None:
    with pytest.raises(ValueError, match=rf"^{re.escape(field)}: "):
        parse_spec("ns", {}, {"containers": [container("1")], "resourceClaims": claims})


@pytest.mark.parametrize(
    ("resources", "cpu", "memory"),
    [
        ({}, 1.5, 1.0),  # the containers' sum
        ({"requests": {"cpu": "4"}}, 4.0, 1.0),  # the pod's own cpu; memory its containers'
        ({"requests": {"cpu": "2", "memory": "8Gi"}}, 2.0, 8.0),  # both its own
        ({"limits": {"cpu": "3", "memory": "2Gi"}}, 1.5, 1.0),  # defaulted to their sum
        ({"limits": {"cpu": "3", "hugepages-2Mi": "1Gi"}}, 1.5, 1.0),  # none asks: the limit
        ({"requests": {"nvidia.com/gpu": "1"}}, 1.5, 1.0),  # not a pod-level resource
    ],
)
def test_a_pod_s_own_requests_stand_for_its_containers(
    resources: dict[str, Any], cpu: float, memory: float
) -> None:
    """Kubernetes' PodRequests with pod-level resources (KEP-2837), overhead added after."""
    containers = [
        {"name": "a", "resources": {"requests": {"cpu": "1", "memory": "512Mi"}}},
        {"name": "b", "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}}},
    ]
    spec = {"containers": containers, "resources": resources, "overhead": {"cpu": "100m"}}
    request = pod_request(spec)
    assert (request["cpu"], request["memory"]) == (cpu * 1000 + 100, memory * 2**30)
    assert "nvidia.com/gpu" not in request
    if "hugepages-2Mi" in resources.get("limits", {}):
        assert request["hugepages-2Mi"] == 2**30


def test_a_pod_s_preemption_policy_is_read_and_checked() -> None:
    spec: dict[str, Any] = {"containers": [container("1")], "preemptionPolicy": "Never"}
    assert parse_spec("ns", {}, spec).preemption_policy == "Never"
    assert parse_spec("ns", {}, {"containers": [container("1")]}).preemption_policy == ""
    with pytest.raises(ValueError, match=r"^spec\.preemptionPolicy: must be"):
        parse_spec("ns", {}, {**spec, "preemptionPolicy": "Always"})
