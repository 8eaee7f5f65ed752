"""proportion's deserved shares kept from one open to the next (``proportion_kept``)
are, to the bit, those water-filled anew (``Shortcuts.deserved_shares`` off), with the
rationed dimensions and the shares the queues are ordered by, at every step of random
sequences of opens: jobs coming, going and changing, queues coming and going, and
weights, capabilities and the cluster's total changed now and then."""

import random
from typing import Any

import numpy as np
import pytest

from kbatch.operators.scheduler.core.framework.kept import KeptAcrossSessions
from kbatch.operators.scheduler.core.framework.shortcuts import ALL, Shortcuts
from kbatch.operators.scheduler.core.plugins import proportion
from kbatch.operators.scheduler.core.plugins.proportion_kept import KeptShares
from unit.plugins.test_queue_sums import World

WATER_FILLED = proportion.deserved_shares
LONG_WAY = Shortcuts().without("deserved_shares")


@pytest.fixture
def fills(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the opens that water-filled."""
    taken = [0]

    def counted(*args: Any) -> Any:
        taken[0] += 1
        return WATER_FILLED(*args)

    monkeypatch.setattr(proportion, "deserved_shares", counted)
    return taken


def _shares(session: Any) -> tuple[dict[str, bytes], bytes, dict[str, float]]:
    opened = proportion._Proportion(session)
    deserved = {name: queue.deserved.tobytes() for name, queue in opened.queues.items()}
    shares = {name: queue.current_share() for name, queue in opened.queues.items()}
    return deserved, opened.rationed.tobytes(), shares


def _varied(
    world: World, kept: KeptAcrossSessions, rng: random.Random, shortcuts: Shortcuts
) -> Any:
    """A session on ``world``'s jobs, its queues' weights and capabilities and the
    total drawn from ``rng`` (the same draws give the same session)."""
    session = world.session(kept, shortcuts)
    if rng.random() < 0.7:
        return session
    if rng.random() < 0.3:
        session.total = world.dims.vector(
            {"cpu": rng.choice([8000, 64000]), "memory": 2**35, "pods": 100}
        )
    for queue in session.queues.values():
        if rng.random() < 0.3:
            queue.weight = rng.randint(1, 4)
        if rng.random() < 0.3:
            queue.capability = world.dims.vector(
                {"cpu": rng.choice([1000, 4000]), "memory": 2**34, "pods": 50}
            )
    return session


@pytest.mark.parametrize("seed", range(12))
def test_kept_shares_are_those_water_filled_at_every_open(seed: int, fills: list[int]) -> None:
    world, kept, opens = World(seed), KeptAcrossSessions(), 0
    for step in range(60):
        state = random.Random(seed * 1000 + step)
        quick = _shares(_varied(world, kept, state, ALL))
        state = random.Random(seed * 1000 + step)
        long_way = _shares(_varied(world, KeptAcrossSessions(), state, LONG_WAY))
        assert quick == long_way, step
        opens += 1
        if step % 3 == 0:  # now and then, opens on the same jobs
            world.step()
    assert 2 * opens - fills[0] >= opens // 4  # kept shares were used, not only filled


def test_another_request_is_filled_anew(fills: list[int]) -> None:
    world, kept = World(3), KeptAcrossSessions()
    first = _shares(world.session(kept))
    assert _shares(world.session(kept)) == first
    assert fills[0] == 1
    world.add()
    while world.jobs[f"ns/j{world.made}"].min_resources is None:
        world.add()  # a job that asks for something
    _shares(world.session(kept))
    assert fills[0] == 2


def test_the_long_way_keeps_nothing(fills: list[int]) -> None:
    world, kept = World(5), KeptAcrossSessions()
    _shares(world.session(kept))
    assert kept.get(KeptShares) is not None
    _shares(world.session(kept, LONG_WAY))
    _shares(world.session(kept, LONG_WAY))
    assert fills[0] == 3 and kept.get(KeptShares) is None


def test_a_session_gets_its_own_copy() -> None:
    world, kept = World(7), KeptAcrossSessions()
    first = proportion._Proportion(world.session(kept))
    for queue in first.queues.values():
        queue.deserved += 1.0  # what one session does to its shares stays its own
    first.rationed[:] = True
    again = proportion._Proportion(world.session(kept))
    fresh = proportion._Proportion(world.session(KeptAcrossSessions(), LONG_WAY))
    for name, queue in again.queues.items():
        assert np.array_equal(queue.deserved, fresh.queues[name].deserved)
    assert np.array_equal(again.rationed, fresh.rationed)
