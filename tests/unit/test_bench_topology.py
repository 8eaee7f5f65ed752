"""kbatch bench --topology's synthetic cluster and one small run (no timing asserts)."""

from collections import Counter

from kbatch import bench_topology


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
