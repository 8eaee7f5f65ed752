"""Generated malformed input: well-formed objects of each kind kbatch reads, then broken at
random paths (a wrong type, a negative or garbage quantity, a field removed, nested junk).

Shared by the property tests, with the settings they run under and a tally of what
they generated. ``KBATCH_PROPERTY_EXAMPLES`` raises the examples per test (default
``EXAMPLES``); ``KBATCH_PROPERTY_TALLY=1`` counts escapes instead of failing on the
first one, and prints the tally at the end of the run (see ``conftest.py``).
"""

from __future__ import annotations

import copy
import os
from collections import Counter
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from kbatch.api import API_VERSION, GROUP_NAME_ANNOTATION

Obj = dict[str, Any]

EXAMPLES = 100
TALLY = os.environ.get("KBATCH_PROPERTY_TALLY") == "1"
GENERATED: Counter[str] = Counter()  # inputs tried, by test
ESCAPED: Counter[str] = Counter()  # inputs that raised what they must not, by test
FIRST_ESCAPES: dict[str, str] = {}  # one escape per test, for the tally's report

# Deterministic (derandomize) so that CI sees the same inputs every run; no database,
# no deadline (a 2-core CI box is slow now and then), nothing printed.
SETTINGS = settings(
    max_examples=int(os.environ.get("KBATCH_PROPERTY_EXAMPLES", EXAMPLES)),
    deadline=None,
    derandomize=True,
    database=None,
    print_blob=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# Library texts that must never reach a user.
FOREIGN_TEXT = ("pydantic", "Input should", "For further information", "Traceback")


def counted(test: str) -> None:
    GENERATED[test] += 1


def escaped(test: str, exc: BaseException) -> None:
    """An exception the code under test must not raise: tallied, or the test fails."""
    ESCAPED[test] += 1
    FIRST_ESCAPES.setdefault(test, f"{type(exc).__name__}: {exc}"[:300])
    if not TALLY:
        raise AssertionError(f"{type(exc).__name__} escaped: {exc}") from exc


def check_refusal(test: str, field: str, text: str) -> None:
    """A refusal must name a field and say why in kbatch's words (no library's text)."""
    if not field:
        escaped(test, AssertionError(f"no field named in {text!r}"))
    for foreign in FOREIGN_TEXT:
        if foreign in text:
            escaped(test, AssertionError(f"library text {foreign!r} in {text!r}"))


# ----------------------------------------------------------------------------- values
QUANTITIES = st.one_of(
    st.sampled_from(
        [
            "1",
            "500m",
            "4Gi",
            "0",
            "-5",
            "-0.5",
            "lots",
            "",
            " ",
            "1e3",
            "1e400",
            "4GB",
            "+2",
            "NaN",
            "Inf",
            "0x10",
            "1..2",
            "--1",
            "-1Ki",
            "9" * 40,
            "1E",
            ".5",
            "5.",
            "-",
        ]
    ),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.floats(allow_nan=True, allow_infinity=True),
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    QUANTITIES,
)
JUNK = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.one_of(st.text(max_size=8), st.integers()), inner, max_size=3),
    ),
    max_leaves=6,
)
# Keys a broken object may grow: real field names, so the junk lands where code reads.
KEYS = st.sampled_from(
    [
        "cpu",
        "memory",
        "name",
        "namespace",
        "spec",
        "status",
        "metadata",
        "queue",
        "minMember",
        "minResources",
        "weight",
        "capability",
        "state",
        "containers",
        "phase",
        "template",
        "annotations",
        "labels",
        "requests",
        "resources",
        "parallelism",
        "suspend",
        "scopes",
        "scopeSelector",
        "hard",
        "values",
        "operator",
        "scopeName",
        "key",
        "effect",
    ]
)


# ----------------------------------------------------------------------------- objects
def pod_group(name: str = "pg", queue: str = "q1") -> Obj:
    return {
        "apiVersion": API_VERSION,
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "minMember": 2,
            "queue": queue,
            "priorityClassName": "high",
            "minResources": {"cpu": "2", "memory": "1Gi"},
        },
        "status": {
            "phase": "Pending",
            "conditions": [{"type": "Unschedulable", "status": "True", "reason": "x"}],
            "running": 0,
        },
    }


def queue(name: str = "q1") -> Obj:
    return {
        "apiVersion": API_VERSION,
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"weight": 2, "capability": {"cpu": "8"}, "reclaimable": True, "state": "Open"},
        "status": {"deserved": {"cpu": "1"}, "pending": 0},
    }


def _pod_spec() -> Obj:
    return {
        "schedulerName": "kbatch",
        "priorityClassName": "high",
        "nodeSelector": {"zone": "a"},
        "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "z", "operator": "In", "values": ["a"]}]}
                    ]
                }
            }
        },
        "containers": [
            {
                "name": "c",
                "image": "busybox",
                "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
                "ports": [{"containerPort": 80, "hostPort": 8080}],
            }
        ],
        "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "2"}}}],
        "overhead": {"cpu": "100m"},
    }


def pod(name: str = "p", group: str = "pg") -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {"app": "a"},
            "annotations": {GROUP_NAME_ANNOTATION: group},
            "creationTimestamp": "2024-01-01T00:00:00Z",
        },
        "spec": _pod_spec(),
        "status": {"phase": "Pending"},
    }


def job(name: str = "j", group: str = "pg") -> Obj:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "default", "labels": {"a": "b"}},
        "spec": {
            "parallelism": 2,
            "completions": 4,
            "suspend": False,
            "template": {
                "metadata": {"annotations": {GROUP_NAME_ANNOTATION: group}},
                "spec": {**_pod_spec(), "restartPolicy": "Never"},
            },
        },
    }


def jobset(name: str = "js") -> Obj:
    """A labelled JobSet, held (as kbatch's webhook leaves one whose group waits)."""
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": "js-uid",
            "labels": {"kbatch.io/queue": "q"},
            "annotations": {"kbatch.io/held": "its group waits"},
        },
        "spec": {
            "suspend": True,
            "successPolicy": {"operator": "All"},
            "failurePolicy": {"maxRestarts": 1},
            "replicatedJobs": [
                {"name": "leader", "replicas": 1, "template": job("leader")},
                {
                    "name": "workers",
                    "replicas": 2,
                    "template": job("workers"),
                    "dependsOn": [{"name": "leader", "status": "Ready"}],
                },
            ],
        },
    }


def node(name: str = "n1") -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"zone": "a"}},
        "spec": {"taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]},
        "status": {
            "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def quota(name: str = "rq") -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "hard": {"requests.cpu": "8", "memory": "8Gi"},
            "scopes": ["PriorityClass"],
            "scopeSelector": {
                "matchExpressions": [
                    {"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}
                ]
            },
        },
    }


def priority_class(name: str = "high") -> Obj:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": 1000,
        "globalDefault": False,
    }


def namespace(name: str = "team") -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": {"t": "a"}},
    }


def claim(name: str = "data") -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "storageClassName": "local",
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}},
            "selector": {"matchLabels": {"disk": "ssd"}},
        },
    }


def volume(name: str = "disk-1") -> Obj:
    zone = {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a"]}
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "labels": {"disk": "ssd"}},
        "spec": {
            "storageClassName": "local",
            "accessModes": ["ReadWriteOnce"],
            "capacity": {"storage": "10Gi"},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [zone]}]}},
            "claimRef": {"namespace": "default", "name": "data"},
            "csi": {"driver": "disk.csi.example.com", "volumeHandle": "vol-1"},
        },
        "status": {"phase": "Available"},
    }


def storage_class(name: str = "local") -> Obj:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": "example.com/disks",
        "volumeBindingMode": "WaitForFirstConsumer",
        "allowedTopologies": [
            {"matchLabelExpressions": [{"key": "topology.kubernetes.io/zone", "values": ["a"]}]}
        ],
    }


def csi_node(name: str = "node-1") -> Obj:
    driver = {"name": "disk.csi.example.com", "nodeID": name, "allocatable": {"count": 8}}
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSINode",
        "metadata": {"name": name},
        "spec": {"drivers": [driver]},
    }


def resource_claim(name: str = "gpu") -> Obj:
    request = {
        "deviceClassName": "gpu",
        "selectors": [{"cel": {"expression": 'device.attributes["g.example.com"].model == "a"'}}],
        "allocationMode": "ExactCount",
        "count": 2,
    }
    host = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}
    result = {"request": "r", "driver": "g.example.com", "pool": "p", "device": "d0"}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default", "uid": "u1"},
        "spec": {
            "devices": {
                "requests": [{"name": "r", "exactly": request}],
                "constraints": [{"requests": ["r"], "matchAttribute": "g.example.com/numa"}],
            }
        },
        "status": {
            "allocation": {
                "devices": {"results": [result]},
                "nodeSelector": {"nodeSelectorTerms": [host]},
            },
            "reservedFor": [{"resource": "pods", "name": "p", "uid": "u2"}],
        },
    }


def device_class(name: str = "gpu") -> Obj:
    selector = {"cel": {"expression": 'device.driver == "g.example.com"'}}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [selector]},
    }


def resource_slice(name: str = "node-1-gpus") -> Obj:
    device = {
        "name": "d0",
        "attributes": {"model": {"string": "a"}, "numa": {"int": 0}},
        "capacity": {"memory": {"value": "80Gi"}},
    }
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {
            "driver": "g.example.com",
            "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 1},
            "nodeName": "node-1",
            "devices": [device],
        },
    }


BASES: dict[str, Callable[[], Obj]] = {
    "PodGroup": pod_group,
    "Queue": queue,
    "Pod": pod,
    "Job": job,
    "JobSet": jobset,
    "Node": node,
    "ResourceQuota": quota,
    "PriorityClass": priority_class,
    "Namespace": namespace,
    "PersistentVolumeClaim": claim,
    "PersistentVolume": volume,
    "StorageClass": storage_class,
    "CSINode": csi_node,
    "ResourceClaim": resource_claim,
    "DeviceClass": device_class,
    "ResourceSlice": resource_slice,
}


def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into ``obj`` (map keys and list indexes), parents before children."""
    out = [prefix] if prefix else []
    if isinstance(obj, dict):
        for key, item in obj.items():
            out += _paths(item, (*prefix, key))
    elif isinstance(obj, list):
        for index, item in enumerate(obj):
            out += _paths(item, (*prefix, index))
    return out


def _at(obj: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        obj = obj[step]
    return obj


@st.composite
def broken(draw: st.DrawFn, base: Obj, breaks: int = 3) -> Obj:
    """``base`` with up to ``breaks`` paths replaced by junk or quantities, removed, or
    grown a junk key; the kind's identity (apiVersion, kind) usually kept."""
    obj = copy.deepcopy(base)
    for _ in range(draw(st.integers(min_value=1, max_value=breaks))):
        paths = _paths(obj)
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        if path[:1] in (("apiVersion",), ("kind",)) and draw(st.integers(0, 9)):
            continue
        parent = _at(obj, path[:-1])
        action = draw(st.sampled_from(["junk", "quantity", "remove", "grow", "negative"]))
        if action == "remove":
            del parent[path[-1]]
        elif action == "quantity":
            parent[path[-1]] = draw(QUANTITIES)
        elif action == "negative":
            parent[path[-1]] = draw(st.sampled_from(["-5", -1, "-1Gi", "-500m", -0.25]))
        elif action == "grow" and isinstance(parent[path[-1]], dict):
            parent[path[-1]][draw(KEYS)] = draw(JUNK)
        else:
            parent[path[-1]] = draw(JUNK)
    return obj


def objects(kinds: tuple[str, ...] = tuple(BASES)) -> st.SearchStrategy[Obj]:
    """A broken object of one of ``kinds`` (sometimes left whole)."""
    return st.sampled_from(kinds).flatmap(
        lambda kind: st.one_of(st.just(BASES[kind]()), broken(BASES[kind]()))
    )
