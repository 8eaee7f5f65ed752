"""What the output says of a PodGroup's pods: surplus, topology domains, one line each."""

from typing import Any

from kbatch.sim import group_view

RACK = "kbatch.io/rack"


def group(name: str, **annotations: str) -> dict[str, Any]:
    return {"metadata": {"namespace": "ns", "name": name, "annotations": annotations}}


def pod(name: str, group: str, node: str | None, phase: str = "Running") -> dict[str, Any]:
    return {
        "metadata": {
            "namespace": "ns",
            "name": name,
            "annotations": {"scheduling.k8s.io/group-name": group},
        },
        "spec": {"nodeName": node} if node else {},
        "status": {"phase": phase},
    }


def node(name: str, **labels: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {k.replace("_", "/"): v for k, v in labels.items()}}
    }


def test_surplus_is_what_runs_beyond_the_minimum() -> None:
    assert [group_view.surplus(r, 4) for r in (0, 3, 4, 6)] == [0, 0, 0, 2]


def test_the_domains_of_the_pods_on_nodes_at_the_asked_level() -> None:
    groups = [
        group("a", **{"kbatch.io/topology-preferred": RACK}),
        group("b", **{"kbatch.io/topology-required": "kubernetes.io/hostname"}),
        group("plain"),
    ]
    nodes = [node("n1", **{"kbatch.io_rack": "r1"}), node("n2", **{"kbatch.io_rack": "r2"}),
             node("n3")]  # fmt: skip
    pods = [
        pod("a-0", "a", "n2"),
        pod("a-1", "a", "n1"),
        pod("a-2", "a", "n3"),  # a node outside every rack
        pod("a-3", "a", "n1", phase="Succeeded"),  # done: says nothing
        pod("a-4", "a", None),  # pending
        pod("b-0", "b", "n1"),  # the hostname level: every node has it
        pod("plain-0", "plain", "n1"),
    ]
    found = group_view.topology_fields(groups, pods, nodes)
    assert found == {
        ("ns", "a"): {"mode": "preferred", "level": RACK, "domains": ["n3 (no kbatch.io/rack)", "r1", "r2"]},
        ("ns", "b"): {"mode": "required", "level": "kubernetes.io/hostname", "domains": ["n1"]},
    }  # fmt: skip


def test_one_line_per_group_with_something_to_say() -> None:
    result = {
        "pods": [
            {"namespace": "ns", "name": "w0", "podGroup": "g", "role": "worker", "phase": "Running"},
        ],
        "podGroups": [
            {"namespace": "ns", "name": "g", "surplus": 1, "minTaskMember": {"worker": 1},
             "topology": {"mode": "preferred", "level": RACK, "domains": ["r1"]}},
            {"namespace": "ns", "name": "quiet", "surplus": 0},
        ],
    }  # fmt: skip
    assert group_view.summaries(result) == {
        ("ns", "g"): f"worker 1/1 · +1 surplus · preferred {RACK}: r1"
    }
