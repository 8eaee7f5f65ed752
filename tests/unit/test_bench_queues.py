"""kbatch bench --queues: the same jobs in flat queues or in a tree of queues, and the
two side by side (--versus-flat)."""

import json
from collections import Counter
from typing import Any

import pytest

from kbatch.bench import scheduling as bench
from kbatch.bench.queue_layout import FLAT_10, QueueLayout
from kbatch.cli import main as cli


def _queues(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o["spec"] for o in objects if o["kind"] == "Queue"}


def _depth(queues: dict[str, dict[str, Any]], name: str) -> int:
    parent = queues[name].get("parent")
    return 1 if parent is None else 1 + _depth(queues, parent)


def test_the_tree_has_100_leaves_three_deep_and_jobs_only_in_leaves() -> None:
    objects = list(bench.synthetic_objects(10, 2_000, QueueLayout.parse("tree:4x5x5")))
    queues = _queues(objects)
    parents = {spec["parent"] for spec in queues.values() if "parent" in spec}
    leaves = {name for name in queues if name not in parents} - {"default"}
    assert len(leaves) == 100
    assert {_depth(queues, leaf) for leaf in leaves} == {3}
    assert sum(1 for q in queues.values() if "parent" not in q) == 4 + 1  # and default
    used = Counter(o["spec"]["queue"] for o in objects if o["kind"] == "PodGroup")
    assert set(used) == leaves  # every leaf has jobs, and nothing else has
    assert set(used.values()) == {2}  # 200 jobs, two a leaf


def test_each_leaf_weighs_the_same_share_in_the_tree_as_flat() -> None:
    tree = _queues(list(QueueLayout.parse("tree:4x5x5").queue_objects()))
    flat = _queues(list(QueueLayout.parse("flat:100").queue_objects()))
    assert set(flat) == {f"q{i}" for i in range(100)} | {"default"}

    def share(queues: dict[str, dict[str, Any]], name: str) -> float:
        parent = queues[name].get("parent")
        siblings = sum(q["weight"] for q in queues.values() if q.get("parent") == parent)
        own = queues[name]["weight"] / siblings
        return own if parent is None else own * share(queues, parent)

    for name in flat:
        assert share(tree, name) == pytest.approx(share(flat, name))
    assert flat["q13"]["weight"] == 4  # leaf i weighs i % 10 + 1


def test_flat_10_is_the_bench_as_it_was() -> None:
    queues = _queues(list(FLAT_10.queue_objects()))
    assert queues == {**{f"q{i}": {"weight": i + 1} for i in range(10)}, "default": {"weight": 1}}


@pytest.mark.parametrize("text", ["tree:4x5x5", "flat:100", "tree:2x3"])
def test_a_layout_reads_back_as_written(text: str) -> None:
    assert str(QueueLayout.parse(text)) == text


@pytest.mark.parametrize("text", ["tree:100", "flat:4x5", "tree:4x0x5", "ring:4", "flat:", "4x5x5"])
def test_a_bad_layout_is_refused_naming_the_forms(text: str) -> None:
    with pytest.raises(ValueError, match=r"expected flat:N .* or tree:AxBxC"):
        QueueLayout.parse(text)


def test_tree_and_flat_bind_the_same_pods() -> None:
    """3 nodes x 32 cpu hold 9 of the 30 gangs, in the tree as in flat queues."""
    conf = bench.bench_conf()
    tree = bench.run_size(3, 300, conf, QueueLayout.parse("tree:2x3x2"))
    flat = bench.run_size(3, 300, conf, QueueLayout.parse("flat:12"))
    assert (tree["queues"], flat["queues"]) == ("tree:2x3x2", "flat:12")
    assert tree["binds"] == flat["binds"] == 90
    roomy = bench.run_size(20, 200, conf, QueueLayout.parse("tree:4x5x5"))
    assert roomy["binds"] == bench.run_size(20, 200, conf, QueueLayout.parse("flat:100"))["binds"]
    assert roomy["binds"] == 200


def test_versus_flat_prints_both_and_their_ratio(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["bench", "--size", "20x200", "--queues", "tree:4x5x5", "--versus-flat", "--rounds", "1"]
    assert cli.main(args) == 0
    (line,) = capsys.readouterr().out.splitlines()
    result = json.loads(line)
    assert (result["queues"], result["flat_queues"]) == ("tree:4x5x5", "flat:100")
    assert result["binds"] == result["flat_binds"] == 200
    tree_s, flat_s = result["seconds_min_median_max"], result["flat_seconds_min_median_max"]
    assert tree_s[0] <= tree_s[1] <= tree_s[2] and flat_s[0] <= flat_s[1] <= flat_s[2]
    assert result["ratio"] == pytest.approx(tree_s[1] / flat_s[1], abs=1e-3)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--queues", "tree:4x5x0"], "--queues 'tree:4x5x0': expected"),
        (["--versus-flat"], "--versus-flat needs a tree"),
        (["--queues", "tree:2x2x2", "--versus-flat", "--rounds", "0"], "--rounds 0"),
        (["--trace", "--queues", "tree:2x2x2"], "--queues and --versus-flat go with none"),
    ],
)
def test_bad_queue_options_are_usage_errors(
    args: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["bench", "--size", "2x20", *args]) == 2
    assert says in capsys.readouterr().err
