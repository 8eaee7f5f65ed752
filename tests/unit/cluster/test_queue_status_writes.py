"""A Queue written with its status alone changed (the scheduler's write, every session a
queue's allocation moves) keeps the rest as parsed before and validates the status only
(``records.parse_queue``): the same Queue as parsing it whole, and the same refusal of a
bad status."""

from typing import Any

import pytest

from kbatch.cluster import records
from kbatch.cluster.errors import ObjectError
from kbatch.cluster.state import ClusterState
from kbatch.operators.scheduler.core.framework.shortcuts import ALL, Shortcuts

# Every Queue written validated whole, its status alone written or not.
WHOLE = Shortcuts().without("parsed_of_status_writes")


def queue(**status: Any) -> dict[str, Any]:
    written: dict[str, Any] = {
        "apiVersion": "scheduling.incubator.k8s.io/v1alpha1",
        "kind": "Queue",
        "metadata": {"name": "q"},
        "spec": {"weight": 3, "capability": {"cpu": "8", "memory": "1Gi"}},
    }
    if status:
        written["status"] = status
    return written


WRITES = [
    queue(allocated={"cpu": "2"}, running=1),
    queue(
        deserved={"cpu": "4"}, pending=2, inqueue=1, flow=1.5, flowUpdated="2024-01-01T00:00:00Z"
    ),
    queue(),  # the status dropped: the default one
]


def _parsed_or_refused(written: dict[str, Any], *last: Any, shortcuts: Shortcuts = ALL) -> object:
    try:
        return records.parse_queue(written, *last, shortcuts=shortcuts)
    except ObjectError as exc:
        return (exc.ref, exc.field, exc.why)


@pytest.mark.parametrize("written", WRITES)
def test_a_status_written_alone_gives_the_queue_parsed_whole(written: dict[str, Any]) -> None:
    before = records.parse_queue(queue(running=3))
    kept = records.parse_queue(written, before, queue(running=3))
    assert kept == records.parse_queue(written)
    assert kept.spec is before.spec and kept.metadata is before.metadata


@pytest.mark.parametrize(
    "changed",
    [
        {**queue(running=1), "spec": {"weight": 4}},
        {**queue(running=1), "spec": {"weight": 0}},  # refused whole
        {**queue(running=1), "metadata": {"name": "q", "labels": {"a": "b"}}},
    ],
)
def test_a_queue_written_with_more_than_its_status_is_parsed_whole(
    changed: dict[str, Any],
) -> None:
    before = records.parse_queue(queue())
    kept = _parsed_or_refused(changed, before, queue())
    assert kept == _parsed_or_refused(changed, before, queue(), None, shortcuts=WHOLE)
    if not isinstance(kept, tuple):
        assert kept.spec is not before.spec  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "bad", [{"running": -1}, {"allocated": {"cpu": "lots"}}, {"flow": "x"}, None]
)
def test_a_bad_status_written_alone_is_refused_as_the_long_way_refuses_it(bad: Any) -> None:
    before = records.parse_queue(queue())
    written = {**queue(), "status": bad}
    kept = _parsed_or_refused(written, before, queue())
    assert isinstance(kept, tuple) and kept == _parsed_or_refused(written)
    assert kept[1].startswith("status")


@pytest.mark.parametrize("shortcuts", [Shortcuts(), WHOLE])
def test_the_state_parses_a_queue_status_write_on_its_last_version(shortcuts: Shortcuts) -> None:
    state = ClusterState(shortcuts=shortcuts)
    state.apply(queue())
    first = state.queues()["q"]
    state.apply(queue(running=1))
    assert (state.queues()["q"].spec is first.spec) is shortcuts.parsed_of_status_writes
    assert state.queues()["q"].status.running == 1
    assert state.queues()["q"] == records.parse_queue(queue(running=1))
