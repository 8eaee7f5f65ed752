"""The simulator reads upstream's PodGroups (``scheduling.k8s.io/v1alpha3``) as the
kbatch gangs they are scheduled as: pods that name one in ``spec.schedulingGroup``
are placed whole or not at all; a group that cannot be one is refused when due,
naming its field; another version of the API is skipped, as other unmodelled kinds."""

import re
from typing import Any

from kbatch.sim import simulate
from scenarios.objects import node, pod, queue


def upstream_group(name: str, min_count: int, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1alpha3",
        "kind": "PodGroup",
        "metadata": {"name": name, "labels": labels},
        "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}},
    }


def members(group: str, count: int, cpu: str) -> list[dict[str, Any]]:
    return [
        pod(f"{group}-{i}", cpu=cpu, schedulingGroup={"podGroupName": group}, duration="1m")
        for i in range(count)
    ]


def test_an_upstream_gang_is_placed_whole_or_not_at_all() -> None:
    docs = [
        node("n1", cpu="4"),
        queue("research"),
        upstream_group("fits", 3, **{"kbatch.io/queue": "research"}),
        *members("fits", 3, "1"),
        upstream_group("too-big", 3),
        *members("too-big", 3, "2"),  # room for one beside the first gang
    ]
    result = simulate(documents=docs, until="30s")
    placed = {p["name"] for p in result["pods"] if p["node"] is not None}
    assert placed == {"fits-0", "fits-1", "fits-2"}
    groups = {g["name"]: g for g in result["podGroups"]}
    assert groups["fits"]["queue"] == "research"
    assert groups["fits"]["phase"] == "Running"
    assert groups["too-big"]["phase"] != "Running"


def test_an_upstream_group_that_cannot_be_a_gang_is_refused_naming_its_field() -> None:
    notes: list[str] = []
    docs = [node("n1"), upstream_group("zero", 0), *members("zero", 1, "1")]
    result = simulate(documents=docs, warn=notes.append, until="10s")
    (warning,) = result["warnings"]
    assert (warning["kind"], warning["name"]) == ("PodGroup", "zero")
    assert re.match(
        r"spec\.schedulingPolicy\.gang\.minCount: must be at least 1", warning["message"]
    )


def test_another_version_of_upstreams_api_is_skipped() -> None:
    notes: list[str] = []
    other = {**upstream_group("g", 1), "apiVersion": "scheduling.k8s.io/v1alpha1"}
    simulate(documents=[node("n1"), other], warn=notes.append, until="1s")
    assert notes == [
        "skipped 1 PodGroup (scheduling.k8s.io/v1alpha1) object: "
        "the simulator does not model this kind"
    ]
