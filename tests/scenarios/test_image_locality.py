"""Image locality (kube-scheduler's ImageLocality, Volcano's ``imagelocality.weight``)
through the simulator: of two equal nodes, a pod goes to the one that lists its image,
with the default conf and with a Volcano conf naming the weight; weighed 0, to the
first by name, as without the image."""

from pathlib import Path

import pytest

from kbatch.sim import simulate
from scenarios.objects import Obj, node, pod
from scenarios.runner import Outcome

MIB = 1024 * 1024
IMAGE = "reg.example/team/train:v3"


def holding(name: str, *images: str) -> Obj:
    made = node(name, cpu="8")
    made["status"]["images"] = [
        {"names": [f"{image.split(':')[0]}@sha256:0{i}", image], "sizeBytes": 800 * MIB}
        for i, image in enumerate(images)
    ]
    return made


def trainer(name: str, image: str = IMAGE) -> Obj:
    made = pod(name, cpu="2")
    made["spec"]["containers"][0]["image"] = image
    return made


def volcano_conf(tmp_path: Path, weight: int) -> Path:
    conf = tmp_path / "volcano-scheduler.conf"
    conf.write_text(
        'actions: "enqueue, allocate, backfill"\n'
        "tiers:\n"
        "- plugins:\n  - name: priority\n  - name: gang\n  - name: conformance\n"
        "- plugins:\n  - name: drf\n  - name: predicates\n  - name: proportion\n"
        f"  - name: nodeorder\n    arguments:\n      imagelocality.weight: {weight}\n"
    )
    return conf


def bound_to(outcome: Outcome) -> dict[str, str | None]:
    return {p["name"]: p["node"] for p in outcome.pods()}


def test_a_pod_goes_to_the_node_holding_its_image_with_the_default_conf() -> None:
    docs = [node("a", cpu="8"), holding("b", IMAGE), trainer("t"), trainer("u", "other:v1")]
    placed = bound_to(Outcome(simulate(documents=docs, until="1m")))
    assert placed == {"t": "b", "u": "a"}  # (u: the nodes tie, the first by name)


@pytest.mark.parametrize(("weight", "expected"), [(1, "b"), (0, "a")])
def test_a_volcano_conf_s_image_locality_weight_is_read(
    tmp_path: Path, weight: int, expected: str
) -> None:
    docs = [node("a", cpu="8"), holding("b", IMAGE), trainer("t")]
    outcome = Outcome(simulate(documents=docs, config=volcano_conf(tmp_path, weight), until="1m"))
    assert bound_to(outcome) == {"t": expected}


def test_an_image_named_without_a_tag_is_found_as_latest() -> None:
    docs = [node("a", cpu="8"), holding("b", "reg.example/train:latest")]
    docs.append(trainer("t", "reg.example/train"))
    assert bound_to(Outcome(simulate(documents=docs, until="1m"))) == {"t": "b"}


def test_a_node_with_a_bad_image_list_is_refused_naming_the_field() -> None:
    bad = holding("b", IMAGE)
    bad["status"]["images"][0]["sizeBytes"] = -5
    warned: list[str] = []
    docs = [node("a", cpu="8"), bad, trainer("t")]
    outcome = Outcome(simulate(documents=docs, until="1m", warn=warned.append))
    assert warned == ["Node b refused: status.images[0].sizeBytes: must not be negative, not -5"]
    assert bound_to(outcome) == {"t": "a"}  # (the rest goes on)
