"""The default queue is made as a replica takes the lead, and again while it leads."""

from typing import Any

import pytest

from kbatch.kubeapi import ApiError
from kbatch.operators.queue import controller


def test_made_while_the_lead_is_being_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    """The elector runs its hooks before it says it leads: the first try does not ask."""
    made: list[Any] = []
    monkeypatch.setattr(controller, "ensure_default_queue", made.append)
    controller._until_made("api", leads=lambda: False, sleep=lambda _: None)
    assert made == ["api"]


def test_tried_again_while_it_leads_and_not_after(monkeypatch: pytest.MonkeyPatch) -> None:
    tries: list[str] = []

    def refused(api: Any) -> None:
        tries.append(api)
        raise ApiError(503, "the webhooks do not answer yet")

    leading = iter([True, True, False])
    monkeypatch.setattr(controller, "ensure_default_queue", refused)
    controller._until_made("api", leads=lambda: next(leading), sleep=lambda _: None)
    assert len(tries) == 3  # at once, then twice while leading


def test_a_made_queue_ends_the_tries(monkeypatch: pytest.MonkeyPatch) -> None:
    answers = iter([ApiError(503, "not yet"), None])

    def ensure(api: Any) -> None:
        answer = next(answers)
        if answer is not None:
            raise answer

    monkeypatch.setattr(controller, "ensure_default_queue", ensure)
    controller._until_made("api", leads=lambda: True, sleep=lambda _: None)
    assert next(answers, "done") == "done"
