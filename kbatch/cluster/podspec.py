"""A pod's spec, parsed once: its resource request (Kubernetes semantics) and the
placement constraints the predicates read (selectors, affinity, tolerations, ports).
"""

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kbatch.cluster.quantity import amounts
from kbatch.operators.scheduler.framework.podspec import (
    Affinity,
    HostPort,
    LabelSelector,
    NodeSelectorTerm,
    Operator,
    PodAffinityTerm,
    PreferredNodeTerm,
    Requirement,
    Toleration,
    WeightedPodAffinityTerm,
)

PODS = "pods"


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


def pod_request(spec: Mapping[str, Any]) -> dict[str, float]:
    """max(sum of containers, largest init container) per resource, plus overhead.

    A container's requests default to its limits where a request is absent (as
    the API server defaults them).
    """

    def container_requests(container: Mapping[str, Any], where: str) -> dict[str, float]:
        resources = container.get("resources") or {}
        limits = amounts(resources.get("limits"), f"{where}.resources.limits")
        requests = amounts(resources.get("requests"), f"{where}.resources.requests")
        return {**limits, **requests}

    total: dict[str, float] = {}
    for i, container in enumerate(spec.get("containers") or []):
        for name, value in container_requests(container, f"spec.containers[{i}]").items():
            total[name] = total.get(name, 0.0) + value
    for i, container in enumerate(spec.get("initContainers") or []):
        for name, value in container_requests(container, f"spec.initContainers[{i}]").items():
            total[name] = max(total.get(name, 0.0), value)
    for name, value in amounts(spec.get("overhead"), "spec.overhead").items():
        total[name] = total.get(name, 0.0) + value
    total[PODS] = 1.0
    return total


def parse_spec(namespace: str, labels: Mapping[str, str], spec: Mapping[str, Any]) -> ParsedSpec:
    """Raise ValueError('field: why') for a spec the scheduler cannot use."""
    request = pod_request(spec)
    selector = spec.get("nodeSelector") or {}
    if not isinstance(selector, Mapping):
        raise ValueError("spec.nodeSelector: expected a map of labels")
    affinity = _affinity(spec.get("affinity") or {})
    tolerations = parse_tolerations(spec.get("tolerations"))
    ports = tuple(
        HostPort(int(p["hostPort"]), str(p.get("protocol", "TCP")), str(p.get("hostIP", "")))
        for c in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]
        for p in c.get("ports") or []
        if p.get("hostPort")
    )
    key = json.dumps(
        [
            namespace,
            labels,
            request,
            selector,
            spec.get("affinity"),
            spec.get("tolerations"),
            [(p.port, p.protocol, p.host_ip) for p in ports],
            spec.get("priorityClassName", ""),
        ],
        sort_keys=True,
        default=str,
    )
    return ParsedSpec(
        key=key,
        namespace=namespace,
        labels=tuple(sorted((str(k), str(v)) for k, v in labels.items())),
        request=tuple(sorted(request.items())),
        node_selector=tuple(sorted((str(k), str(v)) for k, v in selector.items())),
        affinity=affinity,
        tolerations=tolerations,
        host_ports=ports,
        priority_class_name=str(spec.get("priorityClassName") or ""),
    )


def _requirements(items: Any, field: str) -> tuple[Requirement, ...]:
    out = []
    for i, item in enumerate(items or []):
        try:
            operator = Operator(item["operator"])
        except (KeyError, ValueError, TypeError) as exc:
            raise ValueError(
                f"{field}[{i}].operator: expected one of {', '.join(o.value for o in Operator)}"
            ) from exc
        values = tuple(str(v) for v in item.get("values") or [])
        out.append(Requirement(str(item["key"]), operator, values))
    return tuple(out)


def _node_term(term: Mapping[str, Any], field: str) -> NodeSelectorTerm:
    return NodeSelectorTerm(
        _requirements(term.get("matchExpressions"), f"{field}.matchExpressions"),
        _requirements(term.get("matchFields"), f"{field}.matchFields"),
    )


def _label_selector(selector: Mapping[str, Any] | None, field: str) -> LabelSelector:
    selector = selector or {}
    return LabelSelector(
        tuple(sorted((str(k), str(v)) for k, v in (selector.get("matchLabels") or {}).items())),
        _requirements(selector.get("matchExpressions"), f"{field}.matchExpressions"),
    )


def _pod_term(term: Mapping[str, Any], field: str) -> PodAffinityTerm:
    if not term.get("topologyKey"):
        raise ValueError(f"{field}.topologyKey: required")
    return PodAffinityTerm(
        _label_selector(term.get("labelSelector"), f"{field}.labelSelector"),
        str(term["topologyKey"]),
        tuple(str(n) for n in term.get("namespaces") or []),
    )


def _pod_terms(
    block: Mapping[str, Any], field: str
) -> tuple[tuple[PodAffinityTerm, ...], tuple[WeightedPodAffinityTerm, ...]]:
    required_field = f"{field}.requiredDuringSchedulingIgnoredDuringExecution"
    preferred_field = f"{field}.preferredDuringSchedulingIgnoredDuringExecution"
    required = tuple(
        _pod_term(t, f"{required_field}[{i}]")
        for i, t in enumerate(block.get("requiredDuringSchedulingIgnoredDuringExecution") or [])
    )
    preferred = tuple(
        WeightedPodAffinityTerm(
            int(t.get("weight", 1)),
            _pod_term(t["podAffinityTerm"], f"{preferred_field}[{i}].podAffinityTerm"),
        )
        for i, t in enumerate(block.get("preferredDuringSchedulingIgnoredDuringExecution") or [])
    )
    return required, preferred


def _affinity(raw: Mapping[str, Any]) -> Affinity:
    node = raw.get("nodeAffinity") or {}
    field = "spec.affinity.nodeAffinity"
    required_block = node.get("requiredDuringSchedulingIgnoredDuringExecution")
    node_required = None
    if required_block is not None:
        node_required = tuple(
            _node_term(
                t, f"{field}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[{i}]"
            )
            for i, t in enumerate(required_block.get("nodeSelectorTerms") or [])
        )
    node_preferred = tuple(
        PreferredNodeTerm(int(t.get("weight", 1)), _node_term(t.get("preference") or {}, field))
        for t in node.get("preferredDuringSchedulingIgnoredDuringExecution") or []
    )
    pod_required, pod_preferred = _pod_terms(
        raw.get("podAffinity") or {}, "spec.affinity.podAffinity"
    )
    anti_required, anti_preferred = _pod_terms(
        raw.get("podAntiAffinity") or {}, "spec.affinity.podAntiAffinity"
    )
    return Affinity(
        node_required, node_preferred, pod_required, pod_preferred, anti_required, anti_preferred
    )


def parse_tolerations(raw: Any) -> tuple[Toleration, ...]:
    return tuple(_toleration(t) for t in raw or [])


def _toleration(raw: Mapping[str, Any]) -> Toleration:
    operator = str(raw.get("operator") or "Equal")
    if operator not in ("Equal", "Exists"):
        raise ValueError(f"spec.tolerations: operator must be Equal or Exists, not {operator!r}")
    return Toleration(
        key=str(raw.get("key") or ""),
        operator=operator,
        value=str(raw.get("value") or ""),
        effect=str(raw.get("effect") or ""),
    )
