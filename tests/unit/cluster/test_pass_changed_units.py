"""A snapshot that hands most jobs on walks only the pods of the others
(``Shortcuts.pods_of_changed_units_only``): field by field, it is what a new builder makes
from every pod, on a state that shows every pod and on one that leaves settled jobs out
(the simulator's), with sessions in between; pods without a group, kept or made
again, keep their jobs in pod order; a unit with another scheduler's pod is walked whole;
and the pass does walk fewer pods."""

from typing import Any

import pytest

from kbatch.cluster.snapshot import SnapshotBuilder
from kbatch.operators.scheduler.core.framework.shortcuts import Shortcuts
from unit.cluster.test_kept_jobs import CONFS, QUIET_STEPS, nothing, session
from unit.cluster.test_snapshot_reuse import (
    QUEUE,
    RUNNING,
    Step,
    applying,
    compared_snapshots,
    group,
    node,
    pod,
)

ON_A = {"nodeName": "a"}
RUNNING_OWN = [pod(f"p{i}", None, spec=ON_A, status=RUNNING) for i in range(4)]
OWN_GROUPS: list[Step] = [
    applying(QUEUE, node("a"), *RUNNING_OWN),
    nothing,
    applying(pod("p2", None, spec=ON_A, status={"phase": "Succeeded"})),
    nothing,
    applying(pod("p0", None, "2", spec=ON_A, status=RUNNING)),  # the first again
    nothing,
    applying(pod("p4", None)),  # a new one, pending
    nothing,
]
THEIRS = {"schedulerName": "other", "nodeName": "a"}
MIXED: list[Step] = [
    applying(QUEUE, node("a"), group("m", minMember=1), pod("m-0", "m", spec=ON_A, status=RUNNING)),
    nothing,
    applying(pod("m-1", "m", spec=THEIRS, status=RUNNING)),  # another scheduler's, same unit
    nothing,
    applying(pod("m-2", "m", spec=ON_A, status=RUNNING)),
    nothing,
]


def passed(monkeypatch: pytest.MonkeyPatch) -> list[int | None]:
    """The pods each snapshot's pass walks (None: every pod)."""
    counts: list[int | None] = []
    to_pass = SnapshotBuilder._pods_to_pass

    def counted(self: SnapshotBuilder, *args: Any) -> Any:
        pods = to_pass(self, *args)
        counts.append(None if pods is None else len(pods))
        return pods

    monkeypatch.setattr(SnapshotBuilder, "_pods_to_pass", counted)
    return counts


@pytest.mark.parametrize("leave_out_settled", [False, True])
@pytest.mark.parametrize("conf_name", sorted(CONFS))
@pytest.mark.parametrize("steps", ["reuse", "own groups", "mixed"])
def test_a_pass_over_some_pods_builds_what_one_over_all_builds(
    steps: str, conf_name: str, leave_out_settled: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    counts = passed(monkeypatch)
    chosen = {"reuse": QUIET_STEPS, "own groups": OWN_GROUPS, "mixed": MIXED}[steps]
    for snap in compared_snapshots(chosen, leave_out_settled):
        session(snap, conf_name)
    kept_counts = counts[0::2]  # (the fresh builder's come between)
    assert any(count is not None for count in kept_counts)


def test_pods_without_a_group_keep_their_order(monkeypatch: pytest.MonkeyPatch) -> None:
    counts = passed(monkeypatch)
    orders = [[job.name for job in snap.jobs.values()] for snap in compared_snapshots(OWN_GROUPS)]
    assert orders[4] == ["p0", "p1", "p2", "p3"]  # p0 made again, the others kept
    assert orders[-1] == ["p0", "p1", "p2", "p3", "p4"]
    assert counts[0::2][4] == 1  # the pass walked p0 only


def test_a_unit_with_another_schedulers_pod_is_walked_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    counts = passed(monkeypatch)
    for _ in compared_snapshots(MIXED):
        pass
    assert counts[0::2][3] is None  # m, kept, has a jobless pod: every pod walked


def test_switched_off_every_pod_is_walked(monkeypatch: pytest.MonkeyPatch) -> None:
    counts = passed(monkeypatch)
    every_pod = Shortcuts().without("pods_of_changed_units_only")
    for _ in compared_snapshots(OWN_GROUPS, shortcuts=every_pod):
        pass
    assert set(counts) == {None}
