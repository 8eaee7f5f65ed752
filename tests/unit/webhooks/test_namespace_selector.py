"""Who may use a queue (DESIGN §14): a PodGroup, a labelled Job or a labelled JobSet
naming a queue whose spec.namespaceSelector (or an ancestor's) does not select its
namespace is refused, naming the queue, the field and the namespace; a selector of the
wrong shape is refused naming its field."""

from typing import Any

import pytest

from kbatch.api import API_VERSION
from kbatch.api.selector import LabelSelector, namespace_labels, not_carried
from kbatch.webhooks.admission import job, jobgroup, podgroup, queue
from unit.webhooks.test_jobgroup import labelled
from unit.webhooks.test_jobsetgroup import jobset
from unit.webhooks.world import World, pod_group_obj

Obj = dict[str, Any]
TEAM_A = {"matchLabels": {"team": "a"}}


def selected_queue(name: str, selector: Obj | None, parent: str | None = None) -> Obj:
    spec: Obj = {"weight": 1}
    if selector is not None:
        spec["namespaceSelector"] = selector
    if parent is not None:
        spec["parent"] = parent
    return {"apiVersion": API_VERSION, "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def world() -> World:
    built = World()
    for name, team in (("a-dev", "a"), ("team", "b"), ("default", "b")):
        built.state.apply(
            {"apiVersion": "v1", "kind": "Namespace",
             "metadata": {"name": name, "labels": {"team": team}}}
        )  # fmt: skip
    built.state.apply(selected_queue("team-a", TEAM_A))
    built.state.apply(selected_queue("a1", None, parent="team-a"))
    built.state.apply(selected_queue("open", None))
    built.state.apply(selected_queue("solo", TEAM_A))
    return built


def test_a_pod_group_from_a_namespace_not_selected_is_refused_naming_the_rule() -> None:
    answer = podgroup.validate(pod_group_obj("pg", "team", queue="solo"), None, world().view)
    assert not answer.allowed and answer.code == 403
    assert answer.message == (
        "spec.queue: namespace 'team' may not use queue 'solo': its spec.namespaceSelector "
        "(team=a) does not select it"
    )
    ok = podgroup.validate(pod_group_obj("pg", "a-dev", queue="solo"), None, world().view)
    assert ok.allowed


def test_an_ancestors_selector_applies_to_a_leaf_without_one() -> None:
    answer = podgroup.validate(pod_group_obj("pg", "team", queue="a1"), None, world().view)
    assert not answer.allowed
    assert "queue 'a1': its ancestor 'team-a''s spec.namespaceSelector (team=a)" in answer.message
    assert podgroup.validate(pod_group_obj("pg", "a-dev", queue="a1"), None, world().view).allowed
    assert podgroup.validate(pod_group_obj("pg", "team", queue="open"), None, world().view).allowed


def test_a_group_kept_in_its_queue_is_not_asked_again() -> None:
    obj = pod_group_obj("pg", "team", queue="solo")
    assert podgroup.validate(obj, obj, world().view).allowed  # an update, same queue


def test_a_labelled_job_naming_a_queue_its_namespace_may_not_use_is_refused() -> None:
    answer = job.mutate(labelled(queue="a1"), world().view)  # namespace default: team b
    assert not answer.allowed and answer.code == 403
    assert answer.message == (
        f"{jobgroup.QUEUE_FIELD}: namespace 'default' may not use queue 'a1': its ancestor "
        "'team-a''s spec.namespaceSelector (team=a) does not select it"
    )
    assert job.mutate(labelled(queue="open"), world().view).allowed


def test_a_labelled_job_in_a_namespace_not_seen_yet_is_left_to_its_groups_admission() -> None:
    obj = labelled(queue="solo")
    obj["metadata"]["namespace"] = "new"
    assert job.mutate(obj, world().view).allowed


def test_a_labelled_jobset_naming_a_queue_its_namespace_may_not_use_is_refused() -> None:
    from kbatch.webhooks.admission import jobsetgroup

    answer = jobsetgroup.mutate(jobset(queue="solo"), world().view)
    assert not answer.allowed
    assert answer.message.startswith(
        f"{jobgroup.QUEUE_FIELD}: namespace 'team' may not use queue 'solo'"
    )


BAD = [
    ({"matchExpressions": [{"key": "team", "operator": "In"}]},
     "spec.namespaceSelector.matchExpressions[0]: operator In needs a non-empty values list"),
    ({"matchExpressions": [{"key": "team", "operator": "Exists", "values": ["a"]}]},
     "spec.namespaceSelector.matchExpressions[0]: operator Exists takes no values"),
    ({"matchExpressions": [{"key": "team", "operator": "Is", "values": ["a"]}]},
     "spec.namespaceSelector.matchExpressions[0].operator: must be"),
    ({"matchExpressions": [{"operator": "Exists"}]},
     "spec.namespaceSelector.matchExpressions[0].key"),
    ({"matchLabels": {"team": 1}}, "spec.namespaceSelector.matchLabels.team"),
    ({"matchLabel": {"team": "a"}}, "spec.namespaceSelector.matchLabel: unknown field"),
]  # fmt: skip


@pytest.mark.parametrize(("selector", "refusal"), BAD, ids=[b[1] for b in BAD])
def test_a_bad_selector_is_refused_naming_the_field(selector: Obj, refusal: str) -> None:
    answer = queue.validate(selected_queue("q", selector), World().view)
    assert not answer.allowed
    assert answer.message.startswith(refusal), answer.message


EXISTS = {"matchExpressions": [{"key": "team", "operator": "Exists"}]}
A_DEV = {"matchLabels": {"team": "a", "env": "dev"}}


def test_a_childs_selector_wider_than_its_parents_is_refused_naming_both() -> None:
    answer = queue.validate(selected_queue("a2", EXISTS, "team-a"), world().view)
    assert not answer.allowed
    assert answer.message == (
        "spec.namespaceSelector: queue 'a2' may not be wider than its parent 'team-a': its "
        "selector (team) does not carry team=a; a child's selector carries every requirement "
        "of its parent's and ancestors', or is left out to take its parent's"
    )


def test_a_child_narrower_than_its_parent_or_without_a_selector_is_admitted() -> None:
    assert queue.validate(selected_queue("a2", A_DEV, "team-a"), world().view).allowed
    assert queue.validate(selected_queue("a2", None, "team-a"), world().view).allowed
    assert queue.validate(selected_queue("o1", EXISTS, "open"), world().view).allowed


def test_a_grandchild_carries_its_grandparents_selector_through_a_parent_without_one() -> None:
    """a1 sets no selector: it is team-a's, and a child of a1 must carry it."""
    answer = queue.validate(
        selected_queue("a1x", {"matchLabels": {"env": "dev"}}, "a1"), world().view
    )
    assert not answer.allowed
    assert "queue 'a1x' may not be wider than its parent 'a1'" in answer.message
    assert "does not carry team=a;" in answer.message
    assert queue.validate(selected_queue("a1x", A_DEV, "a1"), world().view).allowed


def test_moving_a_queue_under_a_narrower_parent_is_refused() -> None:
    there = world()
    there.state.apply(selected_queue("o1", EXISTS, "open"))
    answer = queue.validate(selected_queue("o1", EXISTS, "team-a"), there.view)
    assert not answer.allowed and "wider than its parent 'team-a'" in answer.message


def test_narrowing_a_parent_past_a_childs_selector_is_refused_naming_the_child() -> None:
    there = world()
    there.state.apply(selected_queue("a2", A_DEV, "team-a"))
    narrower = selected_queue("team-a", {"matchLabels": {"team": "a", "tier": "gold"}})
    answer = queue.validate(narrower, there.view)
    assert not answer.allowed
    assert answer.message == (
        "spec.namespaceSelector: the change would leave child queue 'a2' wider than its "
        "parent 'team-a': 'a2''s selector (env=dev,team=a) does not carry tier=gold; narrow "
        "'a2''s selector first"
    )
    # a1 (no selector) takes team-a's whatever it becomes; a2 carries env=dev already
    assert queue.validate(selected_queue("team-a", A_DEV), there.view).allowed


def test_a_parent_gaining_a_selector_is_checked_against_grandchildren_too() -> None:
    there = world()
    there.state.apply(selected_queue("o1", None, "open"))
    there.state.apply(selected_queue("o1x", EXISTS, "o1"))
    answer = queue.validate(selected_queue("open", TEAM_A), there.view)
    assert not answer.allowed
    assert "child queue 'o1x' wider than its parent 'o1'" in answer.message
    assert "does not carry team=a" in answer.message


def test_a_tree_written_before_the_rule_keeps_taking_other_updates() -> None:
    """A wide child applied without the webhook: its weight may still change; its
    selector may not stay wide when it changes; its parent's selector may not change
    and leave it so. Its parent's selector still holds its groups."""
    there = world()
    wide = selected_queue("a2", EXISTS, "team-a")
    there.state.apply(wide)
    heavier = selected_queue("a2", EXISTS, "team-a")
    heavier["spec"]["weight"] = 3
    assert queue.validate(heavier, there.view).allowed
    other = selected_queue("a2", {"matchLabels": {"env": "dev"}}, "team-a")
    assert not queue.validate(other, there.view).allowed
    parent = selected_queue("team-a", {"matchLabels": {"team": "a", "x": "y"}})
    assert "child queue 'a2'" in queue.validate(parent, there.view).message
    refused = podgroup.validate(pod_group_obj("pg", "team", queue="a2"), None, there.view)
    assert "its ancestor 'team-a''s spec.namespaceSelector" in refused.message


CARRIED = [
    # (child, parents' selectors, not carried)
    ({"matchLabels": {"team": "a", "env": "dev"}}, [{"matchLabels": {"team": "a"}}], []),
    ({"matchLabels": {"team": "b"}}, [{"matchLabels": {"team": "a"}}], ["team=a"]),
    ({}, [{"matchLabels": {"team": "a"}}], ["team=a"]),
    ({"matchLabels": {"x": "y"}}, [], []),
    ({"matchExpressions": [{"key": "t", "operator": "In", "values": ["b", "a"]}]},
     [{"matchExpressions": [{"key": "t", "operator": "In", "values": ["a", "b"]}]}], []),
    ({"matchExpressions": [{"key": "t", "operator": "In", "values": ["a"]}]},
     [{"matchExpressions": [{"key": "t", "operator": "In", "values": ["a", "b"]}]}],
     ["t In (a, b)"]),  # narrower, but not written as the parent writes it: syntactic
    ({"matchExpressions": [{"key": "t", "operator": "In", "values": ["a"]}]},
     [{"matchLabels": {"t": "a"}}], ["t=a"]),
    ({"matchExpressions": [{"key": "t", "operator": "NotIn", "values": ["a"]}]},
     [{"matchExpressions": [{"key": "t", "operator": "In", "values": ["a"]}]}], ["t In (a)"]),
    ({"matchLabels": {"team": "a"}, "matchExpressions": [{"key": "t", "operator": "Exists"}]},
     [{"matchExpressions": [{"key": "t", "operator": "Exists"}]},
      {"matchLabels": {"team": "a", "org": "x"}},
      {"matchLabels": {"org": "x"}}], ["org=x"]),  # every ancestor's, each named once
]  # fmt: skip


@pytest.mark.parametrize(("child", "parents", "missing"), CARRIED)
def test_a_child_carries_each_requirement_of_the_selectors_above_it(
    child: Obj, parents: list[Obj], missing: list[str]
) -> None:
    above = [LabelSelector.model_validate(p) for p in parents]
    assert not_carried(LabelSelector.model_validate(child), above) == missing


MATCHES = [
    # (selector, labels, selected)
    ({}, {}, True),
    ({"matchLabels": {"team": "a"}}, {"team": "a", "x": "y"}, True),
    ({"matchLabels": {"team": "a"}}, {"team": "b"}, False),
    ({"matchLabels": {"team": "a"}}, {}, False),
    ({"matchExpressions": [{"key": "t", "operator": "In", "values": ["a", "b"]}]}, {"t": "b"}, True),
    ({"matchExpressions": [{"key": "t", "operator": "In", "values": ["a"]}]}, {}, False),
    ({"matchExpressions": [{"key": "t", "operator": "NotIn", "values": ["a"]}]}, {}, True),
    ({"matchExpressions": [{"key": "t", "operator": "NotIn", "values": ["a"]}]}, {"t": "a"}, False),
    ({"matchExpressions": [{"key": "t", "operator": "Exists"}]}, {"t": ""}, True),
    ({"matchExpressions": [{"key": "t", "operator": "Exists"}]}, {}, False),
    ({"matchExpressions": [{"key": "t", "operator": "DoesNotExist"}]}, {}, True),
    ({"matchExpressions": [{"key": "t", "operator": "DoesNotExist"}]}, {"t": "a"}, False),
    ({"matchLabels": {"team": "a"},
      "matchExpressions": [{"key": "env", "operator": "In", "values": ["dev"]}]},
     {"team": "a", "env": "prod"}, False),
]  # fmt: skip


@pytest.mark.parametrize(("selector", "labels", "selected"), MATCHES)
def test_selector_matching_is_kubernetes(
    selector: Obj, labels: dict[str, str], selected: bool
) -> None:
    assert LabelSelector.model_validate(selector).matches(labels) is selected


def test_every_namespace_carries_its_name_label() -> None:
    assert namespace_labels("ml", {"team": "a"}) == {
        "team": "a",
        "kubernetes.io/metadata.name": "ml",
    }
    assert namespace_labels("ml") == {"kubernetes.io/metadata.name": "ml"}
