"""The API models: defaults, clear rejections, kube-batch manifests, phase rules, quantities."""

from decimal import Decimal
from typing import Any

import pytest
import yaml
from kubernetes.utils import parse_quantity
from pydantic import BaseModel, ValidationError

from kbatch.api.podgroup import PodGroup, PodGroupPhase
from kbatch.api.quantity import format_quantity
from kbatch.api.queue import Queue, QueueState
from kbatch.operators.scheduler.core.framework.podgroup_status import next_phase


def podgroup(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "pg", "namespace": "default"}, "spec": spec}


def queue(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "q1"}, "spec": spec}


# --- defaults ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "manifest", "field", "expected"),
    [
        (PodGroup, podgroup(), "min_member", 1),
        (PodGroup, podgroup(), "queue", "default"),
        (PodGroup, podgroup(), "min_resources", None),
        (PodGroup, podgroup(), "priority_class_name", None),
        (PodGroup, {"metadata": {"name": "pg"}}, "min_member", 1),
        (Queue, queue(), "weight", 1),
        (Queue, queue(), "state", QueueState.OPEN),
        (Queue, queue(), "reclaimable", True),
        (Queue, queue(), "capability", None),
        (Queue, {"metadata": {"name": "q1"}}, "weight", 1),
    ],
)
def test_spec_defaults(
    model: type[PodGroup | Queue], manifest: dict[str, Any], field: str, expected: object
) -> None:
    assert getattr(model.model_validate(manifest).spec, field) == expected


def test_status_defaults() -> None:
    group = PodGroup.model_validate(podgroup())
    assert group.status.phase is PodGroupPhase.PENDING
    assert (group.status.running, group.status.succeeded, group.status.failed) == (0, 0, 0)
    assert group.status.conditions == ()
    assert Queue.model_validate(queue()).status.deserved == {}


# --- rejections -------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "manifest", "loc", "message"),
    [
        (PodGroup, podgroup(minMember=0), ("spec", "minMember"), "greater than or equal to 1"),
        (PodGroup, podgroup(minMember=-3), ("spec", "minMember"), "greater than or equal to 1"),
        (PodGroup, podgroup(minMember="6"), ("spec", "minMember"), "valid integer"),
        (PodGroup, podgroup(minMember=True), ("spec", "minMember"), "valid integer"),
        (PodGroup, podgroup(queue=""), ("spec", "queue"), "at least 1 character"),
        (
            PodGroup,
            podgroup(minResources={"cpu": "-1"}),
            ("spec", "minResources", "cpu"),
            "must not be negative, not -1",
        ),
        (
            PodGroup,
            podgroup(minResources={"memory": "abc"}),
            ("spec", "minResources", "memory"),
            "'abc' is not a Kubernetes quantity",
        ),
        (
            PodGroup,
            podgroup(minResources={"memory": "4GB"}),
            ("spec", "minResources", "memory"),
            "'4GB' is not a Kubernetes quantity",
        ),
        (PodGroup, podgroup(minMeber=6), ("spec", "minMeber"), "Extra inputs are not permitted"),
        (Queue, queue(weight=0), ("spec", "weight"), "greater than or equal to 1"),
        (Queue, queue(weight=1.5), ("spec", "weight"), "valid integer"),
        (Queue, queue(state="Paused"), ("spec", "state"), "'Open' or 'Closed'"),
        (
            Queue,
            queue(capability={"cpu": True}),
            ("spec", "capability", "cpu"),
            "must be a string or a number, not bool",
        ),
        (
            Queue,
            queue(extendClusters=[]),
            ("spec", "extendClusters"),
            "Extra inputs are not permitted",
        ),
        (Queue, queue(parent="q1"), ("spec", "parent"), "queue 'q1' cannot be its own parent"),
        (Queue, queue(parent=""), ("spec", "parent"), "at least 1 character"),
        (
            Queue,
            queue(capability={"cpu": "4", "memory": "8Gi"}, guarantee={"resource": {"cpu": 5}}),
            ("spec", "guarantee", "resource", "cpu"),
            "5 is above spec.capability.cpu (4): a guarantee is room the queue may use",
        ),
        (
            Queue,
            queue(capability={"memory": "1Gi"}, guarantee={"resource": {"memory": "1025Mi"}}),
            ("spec", "guarantee", "resource", "memory"),
            "1025Mi is above spec.capability.memory (1Gi)",
        ),
        (Queue, queue(guarantee={"cpu": 1}), ("spec", "guarantee", "cpu"), "Extra inputs"),
        (Queue, queue(deserved={"cpu": "-1"}), ("spec", "deserved", "cpu"), "must not be negative"),
        (
            PodGroup,
            {**podgroup(), "status": {"phase": "Done"}},
            ("status", "phase"),
            "'Pending', 'Inqueue', 'Running', 'Unknown' or 'Completed'",
        ),
    ],
)
def test_rejections_name_the_field_and_the_reason(
    model: type[BaseModel], manifest: dict[str, Any], loc: tuple[str, ...], message: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        model.model_validate(manifest)
    errors = {error["loc"]: error["msg"] for error in caught.value.errors()}
    assert loc in errors, errors
    assert message in errors[loc]


@pytest.mark.parametrize(
    "spec",
    [
        {"capability": {"cpu": "4"}, "guarantee": {"resource": {"cpu": "4000m"}}},
        {"capability": {"cpu": "4"}, "guarantee": {"resource": {"memory": "64Gi"}}},
        {"guarantee": {"resource": {"cpu": "64"}}},
        {"guarantee": {}},
        {"parent": "root"},
    ],
)
def test_a_guarantee_at_or_beside_the_capability_is_accepted(spec: dict[str, Any]) -> None:
    Queue.model_validate(queue(**spec))


def test_volcano_s_tree_fields_read_as_written() -> None:
    spec = Queue.model_validate(
        queue(
            parent="team-a",
            guarantee={"resource": {"cpu": "2"}},
            deserved={"cpu": 32, "memory": "64Gi"},
            borrowingLimit={"cpu": "8"},
            lendingLimit={"cpu": "4"},
        )
    ).spec
    assert spec.parent == "team-a" and spec.parent_name() == "team-a"
    assert spec.guarantee is not None and spec.guarantee.resource == {"cpu": "2"}
    assert spec.deserved == {"cpu": "32", "memory": "64Gi"}
    assert (spec.borrowing_limit, spec.lending_limit) == ({"cpu": "8"}, {"cpu": "4"})
    assert Queue.model_validate(queue()).spec.parent_name() == "root"


# --- kube-batch (and Volcano-style) manifests -------------------------------

KUBE_BATCH_MANIFESTS = """
apiVersion: scheduling.incubator.k8s.io/v1alpha1
kind: PodGroup
metadata:
  name: qj-1
spec:
  minMember: 6
---
apiVersion: scheduling.incubator.k8s.io/v1alpha1
kind: PodGroup
metadata:
  name: qj-2
  namespace: batch
spec:
  minMember: 2
  queue: q1
  priorityClassName: high-priority
status:
  phase: Running
  running: 2
  succeeded: 0
  failed: 0
  conditions:
  - type: Unschedulable
    status: "True"
    transitionID: 1f5bc41c-8ad6-4bd4-9b0e-2e9c2e1c6a11
    lastTransitionTime: "2019-05-07T12:00:00Z"
    reason: NotEnoughResources
    message: 3/6 tasks in gang unschedulable
---
apiVersion: scheduling.incubator.k8s.io/v1alpha1
kind: Queue
metadata:
  name: default
spec:
  weight: 1
---
apiVersion: scheduling.incubator.k8s.io/v1alpha1
kind: Queue
metadata:
  name: q2
spec:
  weight: 2
  capability:
    cpu: "8"
    memory: 16Gi
  reclaimable: false
  state: Closed
---
apiVersion: scheduling.incubator.k8s.io/v1alpha1
kind: PodGroup
metadata:
  name: volcano-style
spec:
  minMember: 3
  queue: q2
  minResources:
    cpu: 1500m
    memory: 3Gi
    nvidia.com/gpu: "2"
"""


@pytest.mark.parametrize(
    "manifest",
    list(yaml.safe_load_all(KUBE_BATCH_MANIFESTS)),
    ids=lambda manifest: str(manifest["metadata"]["name"]),
)
def test_manifests_are_accepted_unchanged(manifest: dict[str, Any]) -> None:
    model = PodGroup if manifest["kind"] == "PodGroup" else Queue
    parsed = model.model_validate(manifest)
    assert parsed.model_dump(mode="json", by_alias=True, exclude_unset=True) == manifest


def test_numeric_quantities_become_kubernetes_strings() -> None:
    group = PodGroup.model_validate(podgroup(minResources={"cpu": 4, "memory": "8Gi"}))
    assert group.spec.min_resources == {"cpu": "4", "memory": "8Gi"}


# --- phase rules (DESIGN §2) -------------------------------------------------

P = PodGroupPhase


@pytest.mark.parametrize(
    ("current", "counts", "admitted", "expected"),
    [
        # Pending until admitted; Inqueue once the enqueue action admits it.
        (P.PENDING, (3, 0, 0, 3), False, P.PENDING),
        (P.PENDING, (3, 0, 0, 3), True, P.INQUEUE),
        (P.INQUEUE, (3, 0, 0, 3), False, P.INQUEUE),
        (P.INQUEUE, (3, 2, 0, 3), False, P.INQUEUE),
        # Running once ≥ minMember of its pods run or succeeded.
        (P.INQUEUE, (3, 3, 0, 3), True, P.RUNNING),
        (P.INQUEUE, (3, 2, 1, 2), True, P.RUNNING),
        (P.PENDING, (1, 1, 0, 1), False, P.RUNNING),
        (P.RUNNING, (3, 4, 0, 4), False, P.RUNNING),
        # Unknown if it was Running and dropped below minMember with pods still running.
        (P.RUNNING, (3, 2, 0, 3), False, P.UNKNOWN),
        (P.UNKNOWN, (3, 1, 0, 3), False, P.UNKNOWN),
        (P.UNKNOWN, (3, 3, 0, 3), False, P.RUNNING),
        # ... and back to waiting (kube-batch's rule) when none of them runs any more.
        (P.RUNNING, (3, 0, 0, 3), False, P.PENDING),
        (P.RUNNING, (3, 0, 0, 3), True, P.INQUEUE),
        # Completed when all its pods finished and ≥ minMember succeeded.
        (P.RUNNING, (3, 0, 3, 0), False, P.COMPLETED),
        (P.RUNNING, (2, 0, 2, 0), False, P.COMPLETED),
        (P.COMPLETED, (3, 0, 3, 0), False, P.COMPLETED),
        (P.RUNNING, (3, 1, 3, 1), False, P.RUNNING),  # one pod still running
    ],
)
def test_next_phase(
    current: PodGroupPhase,
    counts: tuple[int, int, int, int],
    admitted: bool,
    expected: PodGroupPhase,
) -> None:
    min_member, scheduled, succeeded, unfinished = counts
    phase = next_phase(
        current,
        min_member=min_member,
        scheduled=scheduled,
        succeeded=succeeded,
        unfinished=unfinished,
        admitted=admitted,
    )
    assert phase is expected


def test_all_finished_with_too_few_successes_is_not_completed() -> None:
    phase = next_phase(
        P.RUNNING, min_member=3, scheduled=0, succeeded=2, unfinished=0, admitted=False
    )
    assert phase is not P.COMPLETED


# --- format_quantity ---------------------------------------------------------

GI = 2**30


@pytest.mark.parametrize(
    ("resource", "amount", "expected"),
    [
        ("cpu", 3000, "3"),
        ("cpu", 500, "500m"),
        ("cpu", 1500, "1500m"),
        ("cpu", 0, "0"),
        ("cpu", 250.4, "250m"),
        ("memory", 9 * GI, "9Gi"),
        ("memory", 9.0 * GI, "9Gi"),
        ("memory", 1.5 * GI, "1536Mi"),
        ("memory", 1536, "1536"),
        ("memory", 1023, "1023"),
        ("memory", 3 * 2**20 + 1, "3145729"),
        ("memory", 100.6, "101"),
        ("memory", 10**9, "1000000000"),
        ("memory", 0, "0"),
        ("memory", 2**60, "1Ei"),
        ("ephemeral-storage", 2**40, "1Ti"),
        ("hugepages-2Mi", 2**21, "2Mi"),
        ("nvidia.com/gpu", 2, "2"),
        ("nvidia.com/gpu", 0, "0"),
        ("nvidia.com/gpu", 0.5, "500m"),
        ("pods", 110, "110"),
    ],
)
def test_format_quantity(resource: str, amount: float, expected: str) -> None:
    text = format_quantity(resource, amount)
    assert text == expected
    # Kubernetes reads it back as the amount, rounded as documented (cpu to millicores,
    # bytes to whole bytes, anything else to milli-units).
    if resource == "cpu":
        exact = Decimal(round(amount)) / 1000
    elif resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-"):
        exact = Decimal(round(amount))
    else:
        exact = Decimal(round(amount * 1000)) / 1000
    assert parse_quantity(text) == exact  # type: ignore[no-untyped-call]
