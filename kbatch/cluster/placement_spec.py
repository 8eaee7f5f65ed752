"""The placement constraints of a pod spec, read and checked as the API server does:
label selectors and node selector terms, affinity, tolerations, and topology spread.

Each ``spec.topologySpreadConstraints`` entry becomes a ``SpreadConstraint`` (what
``plugins.topology_spread`` reads). ``matchLabelKeys`` is kept as keys, bound to each
pod's own labels when checked: pods of one spec shape share one parse
(``podspec.SharedSpecs``).
"""

from collections.abc import Mapping
from typing import Any

from kbatch.cluster import fields
from kbatch.operators.scheduler.core.framework.podspec import (
    Affinity,
    LabelSelector,
    NodeSelectorTerm,
    Operator,
    PodAffinityTerm,
    PreferredNodeTerm,
    Requirement,
    SpreadConstraint,
    Toleration,
    WeightedPodAffinityTerm,
)

# A nil labelSelector selects no pods (Kubernetes: "a null label selector matches no
# objects"), unlike an empty one, which selects all: an In with no values is never true.
SELECTS_NOTHING = LabelSelector((), (Requirement("kbatch.io/nil-label-selector", Operator.IN, ()),))

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


def requirements(parent: Mapping[str, Any], key: str, at: str) -> tuple[Requirement, ...]:
    out = []
    for i, item in enumerate(fields.mappings(parent, key, at=at)):
        where = f"{at}.{key}[{i}]"
        try:
            operator = Operator(str(item.get("operator")))
        except ValueError as exc:
            raise ValueError(
                f"{where}.operator: expected one of {', '.join(o.value for o in Operator)}"
            ) from exc
        name = fields.string(item, "key", at=where)
        if not name:
            raise ValueError(f"{where}.key: required")
        values = tuple(str(v) for v in fields.sequence(item, "values", at=where))
        out.append(Requirement(name, operator, values))
    return tuple(out)


def node_term(term: Mapping[str, Any], at: str) -> NodeSelectorTerm:
    return NodeSelectorTerm(
        requirements(term, "matchExpressions", at), requirements(term, "matchFields", at)
    )


def label_selector(term: Mapping[str, Any], at: str, key: str = "labelSelector") -> LabelSelector:
    """The selector ``term.<key>`` (absent or null: ``SELECTS_NOTHING``)."""
    if term.get(key) is None:
        return SELECTS_NOTHING
    where = f"{at}.{key}"
    selector = fields.mapping(term, key, at=at)
    labels = fields.string_map(selector, "matchLabels", at=where)
    return LabelSelector(
        tuple(sorted(labels.items())), requirements(selector, "matchExpressions", where)
    )


def _pod_term(term: Mapping[str, Any], at: str) -> PodAffinityTerm:
    topology_key = fields.string(term, "topologyKey", at=at)
    if not topology_key:
        raise ValueError(f"{at}.topologyKey: required")
    namespaces = fields.sequence(term, "namespaces", at=at)
    namespace_selector = None  # (null: none; {}: every namespace)
    if term.get("namespaceSelector") is not None:
        namespace_selector = label_selector(term, at, "namespaceSelector")
    return PodAffinityTerm(
        label_selector(term, at),
        topology_key,
        tuple(str(n) for n in namespaces),
        namespace_selector,
    )


def _weight(term: Mapping[str, Any], at: str) -> int:
    weight = fields.integer(term, "weight", at=at)
    return 1 if weight is None else weight


def _pod_terms(
    affinity: Mapping[str, Any], key: str
) -> tuple[tuple[PodAffinityTerm, ...], tuple[WeightedPodAffinityTerm, ...]]:
    at = f"spec.affinity.{key}"
    required = tuple(
        _pod_term(t, f"{at}.{REQUIRED}[{i}]")
        for i, t in enumerate(fields.mappings(affinity, f"{key}.{REQUIRED}", at="spec.affinity"))
    )
    preferred = []
    for i, t in enumerate(fields.mappings(affinity, f"{key}.{PREFERRED}", at="spec.affinity")):
        where = f"{at}.{PREFERRED}[{i}]"
        term = fields.mapping(t, "podAffinityTerm", at=where)
        preferred.append(
            WeightedPodAffinityTerm(_weight(t, where), _pod_term(term, f"{where}.podAffinityTerm"))
        )
    return required, tuple(preferred)


def _node_affinity(
    affinity: Mapping[str, Any],
) -> tuple[tuple[NodeSelectorTerm, ...] | None, tuple[PreferredNodeTerm, ...]]:
    at = "spec.affinity.nodeAffinity"
    node = fields.mapping(affinity, "nodeAffinity", at="spec.affinity")
    required = None
    if node.get(REQUIRED) is not None:
        terms = fields.mappings(node, f"{REQUIRED}.nodeSelectorTerms", at=at)
        where = f"{at}.{REQUIRED}.nodeSelectorTerms"
        required = tuple(node_term(t, f"{where}[{i}]") for i, t in enumerate(terms))
    preferred = []
    for i, t in enumerate(fields.mappings(node, PREFERRED, at=at)):
        where = f"{at}.{PREFERRED}[{i}]"
        preference = fields.mapping(t, "preference", at=where)
        preferred.append(
            PreferredNodeTerm(_weight(t, where), node_term(preference, f"{where}.preference"))
        )
    return required, tuple(preferred)


def parse_affinity(raw: Mapping[str, Any]) -> Affinity:
    node_required, node_preferred = _node_affinity(raw)
    pod_required, pod_preferred = _pod_terms(raw, "podAffinity")
    anti_required, anti_preferred = _pod_terms(raw, "podAntiAffinity")
    return Affinity(
        node_required, node_preferred, pod_required, pod_preferred, anti_required, anti_preferred
    )


def parse_tolerations(raw: list[Mapping[str, Any]]) -> tuple[Toleration, ...]:
    return tuple(_toleration(t) for t in raw)


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


FIELD = "topologySpreadConstraints"
DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
HONOR, IGNORE = "Honor", "Ignore"


def spread_constraints(spec: Mapping[str, Any]) -> tuple[SpreadConstraint, ...]:
    """The spec's constraints; ValueError('spec.topologySpreadConstraints[i].field: why')."""
    out: list[SpreadConstraint] = []
    seen: set[tuple[str, bool]] = set()
    for i, raw in enumerate(fields.mappings(spec, FIELD, at="spec")):
        at = f"spec.{FIELD}[{i}]"
        constraint = _constraint(raw, at)
        pair = (constraint.topology_key, constraint.hard)
        if pair in seen:
            raise ValueError(
                f"{at}: duplicate topologyKey {constraint.topology_key!r} with the same "
                "whenUnsatisfiable"
            )
        seen.add(pair)
        out.append(constraint)
    return tuple(out)


def _constraint(raw: Mapping[str, Any], at: str) -> SpreadConstraint:
    max_skew = fields.integer(raw, "maxSkew", at=at)
    if max_skew is None or max_skew <= 0:
        raise ValueError(f"{at}.maxSkew: must be greater than zero, not {max_skew!r}")
    topology_key = fields.string(raw, "topologyKey", at=at)
    if not topology_key:
        raise ValueError(f"{at}.topologyKey: required")
    when = fields.string(raw, "whenUnsatisfiable", at=at)
    if when not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
        raise ValueError(
            f"{at}.whenUnsatisfiable: expected {DO_NOT_SCHEDULE} or {SCHEDULE_ANYWAY}, not {when!r}"
        )
    hard = when == DO_NOT_SCHEDULE
    min_domains = fields.integer(raw, "minDomains", at=at)
    if min_domains is not None:
        if min_domains <= 0:
            raise ValueError(f"{at}.minDomains: must be greater than zero, not {min_domains}")
        if not hard:
            raise ValueError(f"{at}.minDomains: only with whenUnsatisfiable {DO_NOT_SCHEDULE}")
    keys = tuple(str(k) for k in fields.sequence(raw, "matchLabelKeys", at=at))
    selector = label_selector(raw, at)
    clash = sorted(set(keys) & {key for key, _ in selector.match_labels})
    if clash:
        raise ValueError(f"{at}.matchLabelKeys: {clash[0]!r} is also in labelSelector")
    return SpreadConstraint(
        max_skew=max_skew,
        topology_key=topology_key,
        hard=hard,
        selector=selector,
        min_domains=1 if min_domains is None else min_domains,
        honor_node_affinity=_policy(raw, "nodeAffinityPolicy", HONOR, at),
        honor_taints=_policy(raw, "nodeTaintsPolicy", IGNORE, at),
        match_label_keys=keys,
    )


def _policy(raw: Mapping[str, Any], name: str, default: str, at: str) -> bool:
    """Is the node inclusion policy ``name`` Honor?"""
    value = fields.string(raw, name, at=at) or default
    if value not in (HONOR, IGNORE):
        raise ValueError(f"{at}.{name}: expected {HONOR} or {IGNORE}, not {value!r}")
    return value == HONOR
