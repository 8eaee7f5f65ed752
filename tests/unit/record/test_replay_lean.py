"""A replay's memory follows what is alive: its cluster state ends holding what the
recorded run's ended with, not every object the recording ever brought, and a replay
leaves nothing for the cyclic collector (it runs paused, as the simulator does)."""

import gc
from itertools import islice
from pathlib import Path

import pytest

from kbatch.operators.scheduler.core.framework.collector import collector_paused
from kbatch.operators.scheduler.core.runner import default_conf
from kbatch.record import replay
from kbatch.sim import manifests, runner, trace

SPEC = trace.TraceSpec(nodes=4, hours=4, seed=5)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, runner.Outcome]:
    directory = tmp_path_factory.mktemp("rec") / "recording"
    options = runner.Options(until=SPEC.seconds, record=(directory, 1 << 30), history=False)
    outcome = runner.Simulation(
        manifests.Manifests(), default_conf(), options, arriving=trace.trace_manifests(SPEC)
    ).run()
    return directory, outcome


def _keys(objects: list[dict[str, object]]) -> set[str]:
    return {f"{o['metadata']['namespace']}/{o['metadata']['name']}" for o in objects}  # type: ignore[index]


def test_the_replayed_state_holds_what_is_alive(recorded: tuple[Path, runner.Outcome]) -> None:
    directory, outcome = recorded
    replaying = replay.Replay(directory)
    result = replaying.run()
    assert result.total().differing == 0 and result.total().recorded > 0
    assert replaying.state is not None
    live = _keys(outcome.cluster.state.list("Pod"))
    made = sum(job.pods for job in trace.trace_jobs(SPEC))
    assert 0 < len(live) < made / 4  # most of the pods ran and are gone
    assert _keys(replaying.state.list("Pod")) == live
    assert _keys(replaying.state.list("PodGroup")) == _keys(outcome.cluster.state.list("PodGroup"))


def test_a_replay_leaves_nothing_for_the_cyclic_collector(
    recorded: tuple[Path, runner.Outcome],
) -> None:
    directory, _ = recorded
    replaying = replay.Replay(directory)
    records = replaying._records()
    gc.collect()
    with collector_paused():
        for record in islice(records, 400):  # the first sessions: caches filled
            replaying._take(record)
        gc.collect()
        first = replaying.result.sessions
        for record in records:
            replaying._take(record)
        assert replaying.result.sessions > first + 100, first
        assert gc.collect() == 0


def test_the_collector_is_paused_for_a_replay_and_handed_all_back(
    recorded: tuple[Path, runner.Outcome],
) -> None:
    directory, _ = recorded
    replaying = replay.Replay(directory)
    seen: list[tuple[bool, int]] = []
    take = replaying._take

    def watched(record: dict[str, object]) -> None:
        seen.append((gc.isenabled(), gc.get_freeze_count()))
        take(record)

    replaying._take = watched  # type: ignore[method-assign]
    assert replaying.run().total().differing == 0
    assert not any(enabled for enabled, _ in seen) and max(f for _, f in seen) > 0
    assert gc.isenabled() and gc.get_freeze_count() == 0  # as before the replay
