"""The images nodes list (status.images): read and refused naming the field, kept
beside the Node records so that a pull changes no record, and given to snapshots."""

from typing import Any

import pytest

from kbatch.cluster import node_images
from kbatch.cluster.errors import ObjectError
from kbatch.cluster.podspec import parse_spec, shape_key
from kbatch.cluster.state import ClusterState

MIB = 1024 * 1024


def node(name: str, *images: tuple[list[Any], Any]) -> dict[str, Any]:
    status: dict[str, Any] = {
        "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
        "conditions": [{"type": "Ready", "status": "True"}],
    }
    if images:
        status["images"] = [{"names": names, "sizeBytes": size} for names, size in images]
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "status": status}


def test_every_name_of_an_image_is_read_with_its_size() -> None:
    obj = node("n1", (["reg.io/train@sha256:ab", "reg.io/train:v1"], 5 * MIB), (["pause:3"], 1))
    assert node_images.read(obj) == {
        "reg.io/train@sha256:ab": 5 * MIB,
        "reg.io/train:v1": 5 * MIB,
        "pause:3": 1,
    }
    assert node_images.read(node("n2")) == {}


@pytest.mark.parametrize(
    ("image", "field", "why"),
    [
        ((["a:1"], -1), "status.images[0].sizeBytes", "must not be negative, not -1"),
        ((["a:1"], "big"), "status.images[0].sizeBytes", "expected an integer"),
        (([""], 1), "status.images[0].names[0]", "must be an image's name, not ''"),
        (("a:1", 1), "status.images[0].names", "expected a list"),
    ],
)
def test_a_bad_image_list_refuses_the_node_naming_the_field(
    image: tuple[Any, Any], field: str, why: str
) -> None:
    state = ClusterState()
    with pytest.raises(ObjectError) as refused:
        state.apply(node("n1", image))
    assert refused.value.field == field and why in refused.value.why
    assert state.refusal("Node", "", "n1") is not None
    state.apply(node("n2", (["a:1"], 1)))  # (the rest keeps working)
    assert dict(state.snapshot().node_images) == {"n2": {"a:1": 1}}


@pytest.mark.parametrize(
    ("image", "listed"),
    [
        ("train", "train:latest"),
        ("reg.io:5000/team/train", "reg.io:5000/team/train:latest"),
        ("reg.io:5000/team/train:v2", "reg.io:5000/team/train:v2"),
        ("train@sha256:ab", "train@sha256:ab"),
    ],
)
def test_a_container_s_image_is_named_as_nodes_list_it(image: str, listed: str) -> None:
    assert node_images.normalized(image) == listed


def test_a_pull_changes_no_node_record_but_the_next_snapshot_sees_it() -> None:
    state = ClusterState()
    state.apply(node("a"))
    state.apply(node("b", (["x:1"], MIB)))
    before = state.snapshot()
    assert dict(before.node_images) == {"b": {"x:1": MIB}}
    assert state.snapshot().node_images is before.node_images  # (nothing changed)
    generation = state.generation
    state.apply(node("a", (["train:v1"], 700 * MIB)))
    assert state.generation == generation
    after = state.snapshot()
    assert after.nodes.static_version is before.nodes.static_version
    assert dict(after.node_images) == {"a": {"train:v1": 700 * MIB}, "b": {"x:1": MIB}}
    assert dict(before.node_images) == {"b": {"x:1": MIB}}  # (a snapshot's own, kept)
    state.delete("Node", "", "a")
    assert dict(state.snapshot().node_images) == {"b": {"x:1": MIB}}


def test_a_spec_s_images_are_its_containers_init_first_and_part_of_its_shape() -> None:
    spec = {
        "initContainers": [{"name": "fetch", "image": "busybox"}],
        "containers": [{"name": "main", "image": "reg.io/train:v1"}, {"name": "side"}],
    }
    assert parse_spec("ns", {}, spec).images == (
        "busybox:latest",
        "reg.io/train:v1",
        ":latest",  # (no image: counted as a container, held by no node)
    )
    other = {**spec, "containers": [{"name": "main", "image": "reg.io/train:v2"}]}
    assert shape_key(spec) != shape_key(other)
    with pytest.raises(ValueError, match=r"spec.containers\[0\].image"):
        parse_spec("ns", {}, {"containers": [{"name": "main", "image": 7}]})
