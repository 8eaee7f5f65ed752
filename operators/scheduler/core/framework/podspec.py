"""The scheduling-relevant part of a pod spec, as typed, hashable values.

The cluster layer builds these from raw Kubernetes dicts once per pod; pods
stamped from one template share one ``PodTemplate`` object, so whatever a plugin
computes for one of them holds for all (DESIGN §10).
"""

from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from kbatch.operators.scheduler.core.framework.device_needs import DeviceNeeds
    from kbatch.operators.scheduler.core.framework.volume_needs import VolumeNeeds


class Operator(StrEnum):
    IN = "In"
    NOT_IN = "NotIn"
    EXISTS = "Exists"
    DOES_NOT_EXIST = "DoesNotExist"
    GT = "Gt"
    LT = "Lt"


@dataclass(frozen=True, slots=True)
class Requirement:
    """One ``matchExpressions`` entry (node selector terms and label selectors alike)."""

    key: str
    operator: Operator
    values: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """Requirements ANDed; ``match_fields`` supports ``metadata.name`` as Kubernetes does."""

    match_expressions: tuple[Requirement, ...] = ()
    match_fields: tuple[Requirement, ...] = ()


@dataclass(frozen=True, slots=True)
class PreferredNodeTerm:
    weight: int
    term: NodeSelectorTerm


@dataclass(frozen=True, slots=True)
class LabelSelector:
    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[Requirement, ...] = ()

    def matches(self, labels: dict[str, str]) -> bool:
        for key, value in self.match_labels:
            if labels.get(key) != value:
                return False
        return all(requirement_matches(req, labels) for req in self.match_expressions)


@dataclass(frozen=True, slots=True)
class PodAffinityTerm:
    selector: LabelSelector
    topology_key: str
    # The namespaces of the pods it selects: these, and those whose labels its
    # namespaceSelector matches ({}: all); neither set: the pod's own namespace.
    namespaces: tuple[str, ...] = ()
    namespace_selector: LabelSelector | None = None


@dataclass(frozen=True, slots=True)
class WeightedPodAffinityTerm:
    weight: int
    term: PodAffinityTerm


@dataclass(frozen=True, slots=True)
class Affinity:
    node_required: tuple[NodeSelectorTerm, ...] | None = None  # None: no requirement
    node_preferred: tuple[PreferredNodeTerm, ...] = ()
    pod_required: tuple[PodAffinityTerm, ...] = ()
    pod_preferred: tuple[WeightedPodAffinityTerm, ...] = ()
    anti_required: tuple[PodAffinityTerm, ...] = ()
    anti_preferred: tuple[WeightedPodAffinityTerm, ...] = ()

    @property
    def has_pod_terms(self) -> bool:
        return bool(
            self.pod_required or self.pod_preferred or self.anti_required or self.anti_preferred
        )


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    """One of ``spec.topologySpreadConstraints`` (kube-scheduler's PodTopologySpread)."""

    max_skew: int
    topology_key: str
    hard: bool  # whenUnsatisfiable: DoNotSchedule (a filter); else ScheduleAnyway (a score)
    selector: LabelSelector
    min_domains: int = 1  # fewer domains than this: the global minimum is taken as 0
    honor_node_affinity: bool = True  # nodeAffinityPolicy: Honor (the default) | Ignore
    honor_taints: bool = False  # nodeTaintsPolicy: Honor | Ignore (the default)
    # matchLabelKeys: the pod's values of these labels are ANDed into the selector
    match_label_keys: tuple[str, ...] = ()

    def selector_for(self, labels: dict[str, str]) -> LabelSelector:
        """The selector, with ``match_label_keys`` bound to the pod's ``labels``."""
        bound = tuple((key, labels[key]) for key in self.match_label_keys if key in labels)
        if not bound:
            return self.selector
        return LabelSelector(
            tuple(sorted({*self.selector.match_labels, *bound})), self.selector.match_expressions
        )


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""  # empty with operator Exists: tolerates every taint
    operator: str = "Equal"  # Equal | Exists
    value: str = ""
    effect: str = ""  # empty: every effect

    def tolerates(self, taint: "Taint") -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if not self.key:
            return self.operator == "Exists"
        if self.key != taint.key:
            return False
        return self.operator == "Exists" or self.value == taint.value


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"  # NoSchedule | PreferNoSchedule | NoExecute


@dataclass(frozen=True, slots=True)
class HostPort:
    port: int
    protocol: str = "TCP"
    host_ip: str = ""  # empty or 0.0.0.0: every address

    def conflicts(self, other: "HostPort") -> bool:
        if self.port != other.port or self.protocol != other.protocol:
            return False
        wild = ("", "0.0.0.0")
        return self.host_ip in wild or other.host_ip in wild or self.host_ip == other.host_ip


@dataclass(eq=False, slots=True)
class PodTemplate:
    """What the scheduler needs of a pod's spec; shared by pods of one template.

    ``request`` is a vector over the session's resource dimensions (it always
    asks 1 of ``pods``). Identity (``is``) is the sharing key.
    """

    namespace: str
    labels: dict[str, str]
    request: np.ndarray
    best_effort: bool
    node_selector: tuple[tuple[str, str], ...] = ()
    affinity: Affinity = field(default_factory=Affinity)
    tolerations: tuple[Toleration, ...] = ()
    host_ports: tuple[HostPort, ...] = ()
    priority_class_name: str = ""
    # spec.resourceClaims' names: devices of dynamic resource allocation
    resource_claims: tuple[str, ...] = ()
    # spec.preemptionPolicy ('': its PriorityClass's, ``Snapshot.non_preempting``)
    preemption_policy: str = ""
    # What its persistent volumes ask of a node, for a pending pod that names claims:
    # set by the cluster layer on a copy of its spec's template, shared by the pods of
    # that template whose needs are equal (``kbatch.cluster.volumes``); None: none.
    volumes: "VolumeNeeds | None" = None
    # What its resource claims ask of a node, for a pending pod that has some: set as
    # ``volumes`` is (``kbatch.cluster.devices``); None: not worked out (no node takes
    # a pod with claims then: ``predicates``).
    devices: "DeviceNeeds | None" = None
    # spec.topologySpreadConstraints (``plugins.topology_spread``)
    spread: tuple[SpreadConstraint, ...] = ()
    # Each container's image, init containers first, as nodes list them (image locality)
    images: tuple[str, ...] = ()


def requirement_matches(req: Requirement, labels: dict[str, str]) -> bool:
    """Label-selector semantics of one requirement against one label map."""
    present = req.key in labels
    value = labels.get(req.key, "")
    if req.operator is Operator.IN:
        return present and value in req.values
    if req.operator is Operator.NOT_IN:
        return not present or value not in req.values
    if req.operator is Operator.EXISTS:
        return present
    if req.operator is Operator.DOES_NOT_EXIST:
        return not present
    if not present or len(req.values) != 1:
        return False
    try:
        have, want = int(value), int(req.values[0])
    except ValueError:
        return False
    return have > want if req.operator is Operator.GT else have < want
