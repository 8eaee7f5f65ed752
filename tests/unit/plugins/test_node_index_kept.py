"""The node index (and the predicates' static checks made of it) is kept from one
session to the next while the nodes say the same (``Shortcuts.node_index_across_sessions``;
kept by the scheduler, ``Session.kept``):
sessions on random clusters whose nodes change now and then answer the same with it as
with an index made afresh for every session, and a change to any node's labels, taints,
cordon or conditions — in place, too — makes a new one."""

import random

import numpy as np
import pytest

from builders import Cluster, plugin_conf, scores_by_node
from kbatch.cluster.state import ClusterState
from kbatch.operators.scheduler.core import runner
from kbatch.operators.scheduler.core.framework.kept import KeptAcrossSessions
from kbatch.operators.scheduler.core.framework.podspec import (
    Affinity,
    NodeSelectorTerm,
    Operator,
    PreferredNodeTerm,
    Requirement,
    Taint,
    Toleration,
)
from kbatch.operators.scheduler.core.framework.shortcuts import ALL, Shortcuts
from kbatch.operators.scheduler.core.plugins import node_index
from unit.cluster.test_snapshot_reuse import QUEUE, node

CONF = plugin_conf("predicates", "nodeorder")
ZONES = ["a", "b", "c"]


def random_node_state(rnd: random.Random) -> dict[str, object]:
    return {
        "labels": {"zone": rnd.choice(ZONES)} if rnd.random() < 0.8 else {},
        "taints": (Taint("gpu"),) if rnd.random() < 0.3 else (),
        "unschedulable": rnd.random() < 0.1,
        "conditions": {"Ready": "True" if rnd.random() < 0.9 else "False"},
    }


def answers(cluster: Cluster, kept: KeptAcrossSessions, shortcuts: Shortcuts) -> list[object]:
    """Every template's predicate failures and scores, node by node, in sessions that
    take ``shortcuts`` and go on from ``kept``."""
    out: list[object] = []
    templates = [
        cluster.template(),
        cluster.template(node_selector={"zone": "a"}),
        cluster.template(tolerations=(Toleration("gpu", operator="Exists"),)),
        cluster.template(
            affinity=Affinity(
                node_required=(NodeSelectorTerm((Requirement("zone", Operator.IN, ("b",)),)),),
                node_preferred=(
                    PreferredNodeTerm(
                        5, NodeSelectorTerm((Requirement("zone", Operator.IN, ("c",)),))
                    ),
                ),
            )
        ),
    ]
    for i, template in enumerate(templates):
        task = cluster.job(f"asks{i}").task(template)
        # (the task's job is in this session's snapshot)
        session = cluster.open(CONF, shortcuts=shortcuts, kept=kept)
        _, failures = session.predicate(task, session.nodes.all)
        out.append(sorted((reason, np.flatnonzero(failed).tolist()) for reason, failed in failures))
        out.append(scores_by_node(session, task))
    return out


def steps(seed: int, shortcuts: Shortcuts = ALL) -> list[list[object]]:
    """Sessions of one scheduler on one cluster whose nodes change now and then."""
    kept = KeptAcrossSessions()
    rnd = random.Random(seed)
    states = [random_node_state(rnd) for _ in range(rnd.randint(1, 5))]
    out = []
    for _ in range(6):
        if rnd.random() < 0.5:
            states[rnd.randrange(len(states))] = random_node_state(rnd)
        cluster = Cluster()
        for n, state in enumerate(states):
            cluster.node(f"n{n}", **state)  # type: ignore[arg-type]
        out.append(answers(cluster, kept, shortcuts))
    return out


@pytest.mark.parametrize("seed", range(40))
def test_kept_index_answers_as_one_made_for_each_session(seed: int) -> None:
    kept = steps(seed)
    assert steps(seed, Shortcuts().without("node_index_across_sessions")) == kept


def test_the_index_is_kept_while_the_nodes_say_the_same_and_made_anew_on_any_change() -> None:
    cluster = Cluster().node("n1", labels={"zone": "a"}).node("n2")
    kept = KeptAcrossSessions()
    first = node_index.of(cluster.open(CONF, kept=kept))
    assert node_index.of(cluster.open(CONF, kept=kept)) is first
    assert node_index.of(cluster.open(CONF)) is not first  # another scheduler's
    assert node_index.of(cluster.open(CONF, kept=kept)) is first
    labels = cluster.nodes[0][0].labels
    labels["zone"] = "b"  # in place: the very dict the kept index was made of
    changed = node_index.of(cluster.open(CONF, kept=kept))
    assert changed is not first
    assert changed.column("zone").among(("b",)).tolist() == [True, False]
    for change in (
        {"taints": (Taint("gpu"),)},
        {"unschedulable": True},
        {"conditions": {"Ready": "False"}},
        {"name": "n0"},
    ):
        before = node_index.of(cluster.open(CONF, kept=kept))
        info = cluster.nodes[1][0]
        for field, value in change.items():
            setattr(info, field, value)
        assert node_index.of(cluster.open(CONF, kept=kept)) is not before, change


def test_node_sets_of_one_version_keep_the_index_without_a_comparison(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A snapshot of the same Node records (kbatch.cluster.reuse.kept_nodes) gives its node set
    the last one's version: the index is kept without comparing every node; a node
    written is a new version and a new index."""
    compared: list[int] = []
    compare = node_index.static_state
    monkeypatch.setattr(
        node_index, "static_state", lambda nodes: compared.append(1) or compare(nodes)
    )
    state = ClusterState()
    for obj in (QUEUE, node("a"), node("b", zone="z1")):
        state.apply(obj)
    kept, conf = KeptAcrossSessions(), runner.default_conf()

    def index(shortcuts: Shortcuts = ALL) -> node_index.NodeIndex:
        session = runner.open_session(state.snapshot(), conf, 0.0, "s", None, shortcuts, kept)
        return node_index.of(session)

    first = index()
    compared.clear()  # (an index is made of them)
    second = index()
    assert second is first and compared == []
    assert index(Shortcuts().without("node_index_by_version")) is first and compared == [1]
    state.apply(node("b", zone="z2"))
    third = index()
    assert third is not first and third.column("zone").among(("z2",)).tolist() == [False, True]
