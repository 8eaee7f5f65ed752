"""The forecast's answers on seeded clusters (``eta_seeded``) are the ones written down
in ``eta_seeded_answers.json``: time, confidence and basis of every estimate, what the
first session told each job, where it started, and the forecast's step and sessions.
They were written by the forecast that parsed every object twice (into the session,
then again into the simulator), and hold whatever makes it faster."""

import json
from pathlib import Path

import pytest

from kbatch.operators.scheduler.core.framework.shortcuts import ALL
from scenarios import eta_seeded

EXPECTED = json.loads((Path(__file__).parent / "eta_seeded_answers.json").read_text())


@pytest.mark.parametrize("seed", eta_seeded.SEEDS)
def test_the_answers_on_a_seeded_cluster_are_the_written_ones(seed: int) -> None:
    got = eta_seeded.answers(eta_seeded.cluster(seed))
    expected = EXPECTED[str(seed)]
    assert got.keys() == expected.keys()
    for asked, answers in expected.items():
        assert got[asked] == answers, asked


@pytest.mark.parametrize("seed", eta_seeded.SEEDS)
def test_a_forward_run_that_keeps_no_history_answers_as_one_that_keeps_it(seed: int) -> None:
    """``Shortcuts.forward_without_history``: nothing the forward run leaves out (events,
    rows of departed work, creation times, complete Jobs) changes an answer."""
    objects = eta_seeded.cluster(seed)
    kept = eta_seeded.answers(objects, ALL.without("forward_without_history"))
    assert eta_seeded.answers(objects) == kept
