"""A pod's spec, parsed once: its resource request (Kubernetes semantics) and the
placement constraints the predicates read (selectors, affinity, tolerations, ports).
"""

import threading
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from kbatch import json_codec
from kbatch.cluster import fields, node_images
from kbatch.cluster.placement_spec import parse_affinity, parse_tolerations, spread_constraints
from kbatch.cluster.quantity import amounts
from kbatch.operators.scheduler.core.framework.podspec import (
    Affinity,
    HostPort,
    SpreadConstraint,
    Toleration,
)

PODS = "pods"
SPREAD = "topologySpreadConstraints"


@dataclass(frozen=True, slots=True)
class ParsedSpec:
    """What every pod of one template shares; ``key`` identifies the template."""

    key: str
    namespace: str
    labels: tuple[tuple[str, str], ...]
    request: tuple[tuple[str, float], ...]  # includes pods: 1
    node_selector: tuple[tuple[str, str], ...]
    affinity: Affinity
    tolerations: tuple[Toleration, ...]
    host_ports: tuple[HostPort, ...]
    priority_class_name: str
    resource_claims: tuple[str, ...] = ()  # spec.resourceClaims' names (DRA)
    preemption_policy: str = ""  # spec.preemptionPolicy ('': its PriorityClass's)
    spread: tuple[SpreadConstraint, ...] = ()  # spec.topologySpreadConstraints
    # Each container's image (init containers first), with the tag kube-scheduler gives
    # one that names none (``node_images.normalized``): image locality's
    images: tuple[str, ...] = ()


def _container_requests(container: Mapping[str, Any], where: str) -> dict[str, float]:
    """A container's requests; each defaults to its limit (as the API server defaults it)."""
    limits = amounts(
        fields.mapping(container, "resources.limits", at=where), f"{where}.resources.limits"
    )
    requests = amounts(
        fields.mapping(container, "resources.requests", at=where), f"{where}.resources.requests"
    )
    return {**limits, **requests}


def _add(total: dict[str, float], more: Mapping[str, float]) -> None:
    for name, value in more.items():
        total[name] = total.get(name, 0.0) + value


def _at_least(total: dict[str, float], floor: Mapping[str, float]) -> None:
    for name, value in floor.items():
        total[name] = max(total.get(name, 0.0), value)


def is_sidecar(container: Mapping[str, Any]) -> bool:
    """An init container with ``restartPolicy: Always`` runs beside the app (Kubernetes 1.29+)."""
    return container.get("restartPolicy") == "Always"


def pod_request(spec: Mapping[str, Any]) -> dict[str, float]:
    """What the pod requests, by Kubernetes' rule (``resourcehelper.PodRequests``, KEP-753):

    the sum of its containers and of its sidecars (init containers with
    ``restartPolicy: Always``), at least the peak of its init phase — init
    container i needs its own request plus the sidecars started before it; a
    sidecar needs all sidecars up to and including itself — but where the pod itself
    requests cpu, memory or hugepages (``pod_level``) — plus ``overhead``.
    """
    total = containers_request(spec)
    total.update(pod_level(spec, total))
    _add(total, amounts(fields.mapping(spec, "overhead", at="spec"), "spec.overhead"))
    total[PODS] = 1.0
    return total


def containers_request(spec: Mapping[str, Any]) -> dict[str, float]:
    """What the pod's containers request, their sidecars and init phase counted
    (``resourcehelper.AggregateContainerRequests``)."""
    total: dict[str, float] = {}
    for i, container in enumerate(fields.mappings(spec, "containers", at="spec")):
        _add(total, _container_requests(container, f"spec.containers[{i}]"))
    sidecars: dict[str, float] = {}
    init_peak: dict[str, float] = {}
    for i, container in enumerate(fields.mappings(spec, "initContainers", at="spec")):
        requests = _container_requests(container, f"spec.initContainers[{i}]")
        if is_sidecar(container):
            _add(total, requests)
            _add(sidecars, requests)
            _at_least(init_peak, sidecars)
        else:
            running = dict(sidecars)
            _add(running, requests)
            _at_least(init_peak, running)
    _at_least(total, init_peak)
    return total


def pod_level(spec: Mapping[str, Any], containers: Mapping[str, float]) -> dict[str, float]:
    """The pod's own requests (``spec.resources``, KEP-2837, on by default from
    Kubernetes 1.34) of what it may ask for as a whole: cpu, memory and hugepages-*,
    which stand for its containers'. Where it sets a limit and no request, the API
    server defaults the request to its containers' sum, else (they ask for none of it)
    to the limit; so does this (a manifest read as the served pod would be)."""
    at = "spec.resources"
    requests = amounts(fields.mapping(spec, "resources.requests", at="spec"), f"{at}.requests")
    limits = amounts(fields.mapping(spec, "resources.limits", at="spec"), f"{at}.limits")
    for name, limit in limits.items():
        if name not in requests:
            requests[name] = containers.get(name, limit)
    return {name: value for name, value in requests.items() if _whole_pod(name)}


HUGEPAGES = "hugepages-"


def _whole_pod(name: str) -> bool:
    """May a pod ask for ``name`` as a whole (``spec.resources``)?"""
    return name in ("cpu", "memory") or name.startswith(HUGEPAGES)


# The spec fields ``spec_key`` reads (of containers, some of theirs): a pod whose
# namespace, labels and these are as another's has its key (``pod_records._same_inputs``).
SPEC_KEY_FIELDS = (
    "containers",
    "initContainers",
    "overhead",
    "nodeSelector",
    "affinity",
    "tolerations",
    "priorityClassName",
    "resourceClaims",
    "resources",
    "preemptionPolicy",
    "topologySpreadConstraints",
)


def spec_key(namespace: str, labels: Mapping[str, str], spec: Mapping[str, Any]) -> str:
    """Names everything ``parse_spec`` reads: specs with equal keys parse alike."""
    return _owner_key(namespace, labels) + shape_key(spec)


def _owner_key(namespace: str, labels: Mapping[str, str]) -> str:
    """The part of a spec's key that names its pod's namespace and labels."""
    return json_codec.canonical([namespace, labels])


def _read_of(container: object) -> object:
    """What ``parse_spec`` reads of a container."""
    if not isinstance(container, Mapping):
        return container
    return [
        container.get("resources"),
        container.get("ports"),
        container.get("restartPolicy"),
        container.get("image"),
    ]


def shape_key(spec: Mapping[str, Any]) -> str:
    """Names everything ``parse_spec`` reads of the spec itself (not the pod's namespace
    and labels): the pods of one Job differ only in their labels (``job-name``,
    ``controller-uid``), those of two Jobs of one template in these too."""
    containers, inits = spec.get("containers"), spec.get("initContainers")
    return json_codec.canonical(
        [
            [_read_of(c) for c in containers] if isinstance(containers, list) else containers,
            [_read_of(c) for c in inits] if isinstance(inits, list) else inits,
            *(spec.get(k) for k in ("overhead", "nodeSelector", "affinity", "tolerations")),
            spec.get("priorityClassName", ""),
            *([["resourceClaims", spec["resourceClaims"]]] if spec.get("resourceClaims") else ()),
            *([["resources", spec["resources"]]] if spec.get("resources") else ()),
            *(
                [["preemptionPolicy", spec["preemptionPolicy"]]]
                if "preemptionPolicy" in spec
                else ()
            ),
            *([["spread", spec[SPREAD]]] if spec.get(SPREAD) else ()),
        ]
    )


class SharedSpecs:
    """Parsed specs by key, shared by every pod of one template: a list of 10,000 pods of
    a few templates parses a few specs, not 10,000 (half the cost of a cold start's pod
    list). A spec of a shape parsed before for other labels (another pod of a Job, the
    pods of another Job of its template) is that one's with its own namespace, labels
    and key, not parsed again. Bounded: past ``size`` keys (and shapes) the oldest is
    parsed anew when next seen. ``enabled`` False parses every spec (tests compare the
    two)."""

    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self.enabled = True
        self._parsed: dict[str, ParsedSpec] = {}
        self._shapes: dict[str, ParsedSpec] = {}
        self._lock = threading.Lock()  # informers of several kinds parse side by side

    def parse(
        self, namespace: str, labels: Mapping[str, str], spec: Mapping[str, Any]
    ) -> ParsedSpec:
        """``parse_spec``'s result, the one parsed for an equal key if there is one."""
        try:
            shape = shape_key(spec)
            key = _owner_key(namespace, labels) + shape
        except (TypeError, ValueError):  # not even keyable: parse_spec names the field
            return parse_spec(namespace, labels, spec)
        if not self.enabled:
            return parse_spec(namespace, labels, spec)
        with self._lock:
            known = self._parsed.get(key)
            of_shape = self._shapes.get(shape) if known is None else None
        if known is not None:
            return known
        if of_shape is not None:
            parsed = replace(of_shape, key=key, namespace=namespace, labels=_label_pairs(labels))
        else:
            parsed = parse_spec(namespace, labels, spec, key)
        with self._lock:
            _bounded_put(self._parsed, key, parsed, self.size)
            if of_shape is None:
                _bounded_put(self._shapes, shape, parsed, self.size)
        return parsed


def _bounded_put(known: dict[str, ParsedSpec], key: str, parsed: ParsedSpec, size: int) -> None:
    if len(known) >= size:
        del known[next(iter(known))]
    known[key] = parsed


SHARED_SPECS = SharedSpecs()


def parse_spec(
    namespace: str, labels: Mapping[str, str], spec: Mapping[str, Any], key: str | None = None
) -> ParsedSpec:
    """Raise ValueError('field: why') for a spec the scheduler cannot use. ``key``: its
    ``spec_key``, when the caller has it."""
    request = pod_request(spec)
    selector = fields.string_map(spec, "nodeSelector", at="spec")
    affinity = parse_affinity(fields.mapping(spec, "affinity", at="spec"))
    tolerations = parse_tolerations(fields.mappings(spec, "tolerations", at="spec"))
    ports = _host_ports(spec)
    return ParsedSpec(
        key=spec_key(namespace, labels, spec) if key is None else key,
        namespace=namespace,
        labels=_label_pairs(labels),
        request=tuple(sorted(request.items())),
        node_selector=tuple(sorted(selector.items())),
        affinity=affinity,
        tolerations=tolerations,
        host_ports=ports,
        priority_class_name=fields.string(spec, "priorityClassName", at="spec") or "",
        resource_claims=fields.names(spec, "resourceClaims", at="spec"),
        preemption_policy=_preemption_policy(spec),
        spread=spread_constraints(spec),
        images=_images(spec),
    )


def _images(spec: Mapping[str, Any]) -> tuple[str, ...]:
    images = []
    for part in ("initContainers", "containers"):
        for i, container in enumerate(fields.mappings(spec, part, at="spec")):
            image = fields.string(container, "image", at=f"spec.{part}[{i}]") or ""
            images.append(node_images.normalized(image))
    return tuple(images)


def _preemption_policy(spec: Mapping[str, Any]) -> str:
    return preemption_policy(spec.get("preemptionPolicy"), "spec.preemptionPolicy")


def preemption_policy(value: object, field: str) -> str:
    """A pod's or PriorityClass's ``preemptionPolicy`` ('' when not set: its class's, or
    PreemptLowerPriority); FieldError naming ``field`` unless one of Kubernetes' two."""
    if value is not None and value not in ("PreemptLowerPriority", "Never"):
        why = f"must be 'PreemptLowerPriority' or 'Never', not {fields.shown(value)}"
        raise fields.FieldError(field, why)
    return value or ""


def _label_pairs(labels: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((str(k), str(v)) for k, v in labels.items()))


def _host_ports(spec: Mapping[str, Any]) -> tuple[HostPort, ...]:
    ports = []
    for part in ("containers", "initContainers"):
        for i, container in enumerate(fields.mappings(spec, part, at="spec")):
            where = f"spec.{part}[{i}].ports"
            for j, port in enumerate(fields.mappings(container, "ports", at=where[:-6])):
                host_port = fields.integer(port, "hostPort", at=f"{where}[{j}]")
                if host_port:
                    protocol = fields.string(port, "protocol", at=f"{where}[{j}]") or "TCP"
                    host_ip = fields.string(port, "hostIP", at=f"{where}[{j}]") or ""
                    ports.append(HostPort(host_port, protocol, host_ip))
    return tuple(ports)
