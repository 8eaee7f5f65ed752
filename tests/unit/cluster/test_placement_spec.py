"""A pod's topology spread constraints, read as the API server and kube-scheduler read
them: defaults, and every value the API server refuses refused here naming the field."""

from typing import Any

import pytest

from kbatch.cluster import podspec
from kbatch.cluster.placement_spec import SELECTS_NOTHING, spread_constraints
from kbatch.cluster.podspec import parse_spec
from kbatch.operators.scheduler.core.framework.podspec import LabelSelector, SpreadConstraint

ZONE = "topology.kubernetes.io/zone"


def constraint(**more: Any) -> dict[str, Any]:
    return {
        "maxSkew": 1,
        "topologyKey": ZONE,
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "web"}},
        **more,
    }


def spec(*constraints: dict[str, Any]) -> dict[str, Any]:
    return {"containers": [{"name": "c"}], "topologySpreadConstraints": list(constraints)}


def test_a_constraint_is_read_with_kube_scheduler_s_defaults() -> None:
    (read,) = parse_spec("ns", {}, spec(constraint())).spread
    assert read == SpreadConstraint(
        max_skew=1,
        topology_key=ZONE,
        hard=True,
        selector=LabelSelector((("app", "web"),)),
        min_domains=1,
        honor_node_affinity=True,
        honor_taints=False,
    )


def test_every_field_is_read() -> None:
    raw = constraint(
        maxSkew=3,
        minDomains=2,
        nodeAffinityPolicy="Ignore",
        nodeTaintsPolicy="Honor",
        matchLabelKeys=["pod-template-hash"],
    )
    (read,) = spread_constraints(spec(raw))
    assert (read.max_skew, read.min_domains) == (3, 2)
    assert (read.honor_node_affinity, read.honor_taints) == (False, True)
    assert read.match_label_keys == ("pod-template-hash",)
    bound = read.selector_for({"pod-template-hash": "abc", "other": "x"})
    assert bound.match_labels == (("app", "web"), ("pod-template-hash", "abc"))
    assert read.selector_for({}) == read.selector


def test_no_label_selector_selects_no_pods_and_schedule_anyway_is_soft() -> None:
    raw = constraint(whenUnsatisfiable="ScheduleAnyway")
    del raw["labelSelector"]
    (read,) = spread_constraints(spec(raw))
    assert read.selector == SELECTS_NOTHING and not read.hard
    assert not read.selector.matches({"app": "web"})


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (constraint(maxSkew=0), r"\[0\]\.maxSkew: must be greater than zero, not 0"),
        (constraint(maxSkew=None), r"\[0\]\.maxSkew: must be greater than zero, not None"),
        (constraint(maxSkew="one"), r"\[0\]\.maxSkew"),
        (constraint(topologyKey=""), r"\[0\]\.topologyKey: required"),
        (constraint(whenUnsatisfiable="Later"), r"\[0\]\.whenUnsatisfiable: expected"),
        (constraint(whenUnsatisfiable=None), r"\[0\]\.whenUnsatisfiable: expected"),
        (constraint(minDomains=0), r"\[0\]\.minDomains: must be greater than zero"),
        (
            constraint(minDomains=2, whenUnsatisfiable="ScheduleAnyway"),
            r"\[0\]\.minDomains: only with whenUnsatisfiable DoNotSchedule",
        ),
        (constraint(nodeAffinityPolicy="Maybe"), r"\[0\]\.nodeAffinityPolicy: expected Honor"),
        (constraint(nodeTaintsPolicy="honor"), r"\[0\]\.nodeTaintsPolicy: expected Honor"),
        (constraint(matchLabelKeys=["app"]), r"\[0\]\.matchLabelKeys: 'app' is also in"),
        (
            constraint(labelSelector={"matchExpressions": [{"key": "a", "operator": "Near"}]}),
            r"\[0\]\.labelSelector\.matchExpressions\[0\]\.operator",
        ),
    ],
)
def test_a_bad_constraint_is_refused_naming_the_field(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=r"^spec\.topologySpreadConstraints" + message):
        parse_spec("ns", {}, spec(raw))


def test_two_constraints_of_one_key_and_kind_are_refused() -> None:
    with pytest.raises(ValueError, match=r"^spec\.topologySpreadConstraints\[1\]: duplicate"):
        spread_constraints(spec(constraint(), constraint(maxSkew=2)))
    soft = constraint(whenUnsatisfiable="ScheduleAnyway")
    assert len(spread_constraints(spec(constraint(), soft))) == 2


def test_the_constraints_are_part_of_a_spec_s_key() -> None:
    one = podspec.spec_key("ns", {}, spec(constraint()))
    assert one != podspec.spec_key("ns", {}, spec(constraint(maxSkew=2)))
    assert one != podspec.spec_key("ns", {}, {"containers": [{"name": "c"}]})
    assert "topologySpreadConstraints" in podspec.SPEC_KEY_FIELDS


def test_pods_of_one_shape_share_a_parse_and_bind_their_own_label_values() -> None:
    shared = podspec.SharedSpecs()
    raw = spec(constraint(matchLabelKeys=["job"]))
    first = shared.parse("ns", {"app": "web", "job": "a"}, raw)
    second = shared.parse("ns", {"app": "web", "job": "b"}, raw)
    assert first.spread is second.spread  # (the shape's parse, reused)
    (read,) = second.spread
    assert read.selector_for(dict(second.labels)).matches({"app": "web", "job": "b"})
    assert not read.selector_for(dict(second.labels)).matches({"app": "web", "job": "a"})


def anti_affinity(**term: Any) -> dict[str, Any]:
    body = {"topologyKey": "kubernetes.io/hostname", "labelSelector": {}, **term}
    rule = {"requiredDuringSchedulingIgnoredDuringExecution": [body]}
    return {"containers": [{"name": "c"}], "affinity": {"podAntiAffinity": rule}}


def test_a_pod_affinity_term_s_namespace_selector_is_read() -> None:
    def term(**more: Any) -> Any:
        (read,) = parse_spec("ns", {}, anti_affinity(**more)).affinity.anti_required
        return read

    assert term().namespace_selector is None
    assert term(namespaceSelector=None).namespace_selector is None
    assert term(namespaceSelector={}).namespace_selector == LabelSelector()
    read = term(namespaceSelector={"matchLabels": {"team": "red"}}, namespaces=["x"])
    assert read.namespace_selector == LabelSelector((("team", "red"),))
    assert read.namespaces == ("x",)
    bad = anti_affinity(namespaceSelector={"matchExpressions": [{"key": "t", "operator": "Is"}]})
    with pytest.raises(ValueError, match=r"\[0\]\.namespaceSelector\.matchExpressions\[0\]"):
        parse_spec("ns", {}, bad)
