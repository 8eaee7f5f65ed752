"""Who may use a queue, without webhooks (DESIGN §14): a group whose namespace the
queue's spec.namespaceSelector, or an ancestor's, does not select waits, told why,
naming the queue, the field and the namespace; the others are scheduled as before."""

from typing import Any

from kbatch.api import API_VERSION
from kbatch.cluster.state import ClusterState
from kbatch.operators.scheduler.core.runner import default_conf, open_session


def queue(name: str, parent: str | None = None, selector: dict | None = None) -> dict:
    spec: dict[str, Any] = {"weight": 1}
    if parent is not None:
        spec["parent"] = parent
    if selector is not None:
        spec["namespaceSelector"] = selector
    return {"apiVersion": API_VERSION, "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def namespace(name: str, **labels: str) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def pod_group(name: str, ns: str, queue_name: str) -> dict:
    return {
        "apiVersion": API_VERSION,
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": ns, "uid": f"uid-{ns}-{name}"},
        "spec": {"minMember": 1, "queue": queue_name},
    }


def verdicts(*objects: dict) -> dict[str, tuple[str, str]]:
    state = ClusterState()
    for obj in objects:
        state.apply(obj)
    session = open_session(state.snapshot(), default_conf(), now=0.0, uid="s1")
    out = {}
    for job in session.jobs.values():
        verdict = session.invalid_reason(job)
        if verdict is not None and verdict.reason != "NotEnoughTasks":  # (no pods here)
            out[f"{job.namespace}/{job.name}"] = (verdict.reason, verdict.message)
    return out


TEAM_A = {"matchLabels": {"team": "a"}}


def test_a_namespace_the_selector_does_not_select_waits_told_why() -> None:
    got = verdicts(
        namespace("a-dev", team="a"),
        namespace("b-dev", team="b"),
        queue("team-a", selector=TEAM_A),
        pod_group("ok", "a-dev", "team-a"),
        pod_group("pg", "b-dev", "team-a"),
    )
    assert got == {
        "b-dev/pg": (
            "NamespaceNotAllowed",
            "namespace 'b-dev' may not use queue 'team-a': its spec.namespaceSelector "
            "(team=a) does not select it",
        )
    }


def test_an_ancestors_selector_applies_to_its_leaves() -> None:
    got = verdicts(
        namespace("a-dev", team="a", env="dev"),
        namespace("a-prod", team="a", env="prod"),
        namespace("b-dev", team="b", env="dev"),
        queue("team-a", selector=TEAM_A),
        # wider than its parent: the parent's selector still keeps team b out
        queue(
            "dev",
            "team-a",
            {"matchExpressions": [{"key": "env", "operator": "In", "values": ["dev"]}]},
        ),
        pod_group("ok", "a-dev", "dev"),
        pod_group("prod", "a-prod", "dev"),
        pod_group("other-team", "b-dev", "dev"),
    )
    assert got["a-prod/prod"][1] == (
        "namespace 'a-prod' may not use queue 'dev': its spec.namespaceSelector "
        "(env In (dev)) does not select it"
    )
    assert got["b-dev/other-team"][1] == (
        "namespace 'b-dev' may not use queue 'dev': its ancestor 'team-a''s "
        "spec.namespaceSelector (team=a) does not select it"
    )
    assert set(got) == {"a-prod/prod", "b-dev/other-team"}


def test_a_namespace_not_seen_is_read_by_its_name() -> None:
    by_name = {
        "matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["ml"]}
        ]
    }
    got = verdicts(
        queue("q", selector=by_name),
        pod_group("ok", "ml", "q"),
        pod_group("pg", "web", "q"),
    )
    assert set(got) == {"web/pg"}


def test_no_selector_lets_every_namespace_in() -> None:
    got = verdicts(
        namespace("x", team="z"),
        queue("open"),
        queue("empty", selector={}),
        pod_group("a", "x", "open"),
        pod_group("b", "x", "empty"),
    )
    assert got == {}


def test_not_in_and_does_not_exist_hold_for_a_label_not_set() -> None:
    not_prod = {
        "matchExpressions": [
            {"key": "env", "operator": "NotIn", "values": ["prod"]},
            {"key": "frozen", "operator": "DoesNotExist"},
        ]
    }
    got = verdicts(
        namespace("plain"),
        namespace("prod", env="prod"),
        namespace("frozen", frozen="yes"),
        queue("q", selector=not_prod),
        pod_group("a", "plain", "q"),
        pod_group("b", "prod", "q"),
        pod_group("c", "frozen", "q"),
    )
    assert set(got) == {"prod/b", "frozen/c"}
