"""The switchboard (``Shortcuts``): all on by default, all off by ``none()``, one or more
off by ``without`` (an unknown name refused, naming it), and frozen: a scheduler's
shortcuts cannot be changed under it."""

import dataclasses

import pytest

from kbatch.operators.scheduler.core.framework.shortcuts import ALL, Shortcuts


def test_all_on_by_default_and_all_off_by_none() -> None:
    names = Shortcuts.names()
    assert len(names) == 44 and len(set(names)) == 44
    assert all(getattr(Shortcuts(), name) is True for name in names)
    assert all(getattr(Shortcuts.none(), name) is False for name in names)
    assert Shortcuts() == ALL


def test_without_switches_off_those_named_only() -> None:
    off = Shortcuts().without("queue_sums", "task_runs")
    assert [name for name in Shortcuts.names() if not getattr(off, name)] == [
        "task_runs",
        "queue_sums",
    ]
    assert off.without() == off and Shortcuts.none().without("timestamps") == Shortcuts.none()


def test_an_unknown_name_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="no shortcut named keep_everything, nope"):
        Shortcuts().without("queue_sums", "nope", "keep_everything")


def test_the_switchboard_is_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        Shortcuts().queue_sums = False  # type: ignore[misc]
    assert not hasattr(Shortcuts(), "__dict__")  # slotted: no stray attribute either
