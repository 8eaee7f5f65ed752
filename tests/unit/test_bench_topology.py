"""kbatch bench --topology's synthetic cluster, one small run, and the command line (no timing
asserts)."""

import json
from collections import Counter

import pytest

from kbatch.bench import topology as bench_topology
from kbatch.cli import main as cli


def test_the_cluster_has_four_levels_and_gangs_of_eight_to_sixty_four() -> None:
    objects = list(bench_topology.topology_objects(200, 1_000, prefer=True))
    nodes = [o for o in objects if o["kind"] == "Node"]
    assert len(nodes) == 200
    assert set(nodes[0]["metadata"]["labels"]) == set(bench_topology.LEVELS)
    racks = Counter(n["metadata"]["labels"][bench_topology.RACK] for n in nodes)
    assert set(racks.values()) == {bench_topology.NODES_PER_RACK}
    groups = [o for o in objects if o["kind"] == "PodGroup"]
    sizes = [g["spec"]["minMember"] for g in groups]
    assert sum(sizes) == 1_000 and all(1 <= s <= 64 for s in sizes)
    assert {g["metadata"]["annotations"]["kbatch.io/topology-preferred"] for g in groups} == {
        bench_topology.RACK
    }


def test_every_gang_that_prefers_a_rack_gets_one() -> None:
    result = bench_topology.run_once(200, 1_000, prefer=True)
    assert result["binds"] == 1_000
    assert result["gangs_in_one_rack"] == result["gangs"]


def test_topology_from_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    """Both runs in fresh processes; one line with both times and their ratio."""
    assert cli.main(["bench", "--topology", "--size", "40x100"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    result = json.loads(line)
    assert (result["nodes"], result["pods"], result["binds"]) == (40, 100, 100)
    assert result["gangs"] == 5  # 8, 16, 24, 32 and 20 of a 40
    assert result["gangs_in_one_rack"] == result["gangs"]
    assert {"seconds", "plain_seconds", "plain_gangs_in_one_rack", "ratio"} <= set(result)


def test_topology_sizes_need_not_fill_gangs_of_ten_but_must_be_positive(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.main(["bench", "--topology", "--size", "40x0"]) == 2
    assert "must be positive" in capsys.readouterr().err
    assert cli.main(["bench", "--topology", "--backlog"]) == 2
    assert "--topology goes with neither" in capsys.readouterr().err
