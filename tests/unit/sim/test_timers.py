"""The kubelet's alarms: pods due at times, taken in the order they were first seen."""

from kbatch.sim.timers import Alarms


def alarms(times: dict[str, float | None], order: list[str]) -> Alarms[str]:
    return Alarms(times.get, order.index)


def test_due_keys_come_in_their_order_not_their_times() -> None:
    times: dict[str, float | None] = {"a": 5.0, "b": 3.0, "c": 9.0}
    due = alarms(times, ["c", "a", "b"])
    for key, at in times.items():
        assert at is not None
        due.set(key, at)
    assert due.next() == 3.0
    assert due.pop_due(6.0) == ["a", "b"]
    assert due.next() == 9.0
    assert due.pop_due(6.0) == []


def test_a_time_changed_or_cleared_drops_the_old_alarm() -> None:
    times: dict[str, float | None] = {"a": 5.0, "b": 7.0}
    due = alarms(times, ["a", "b"])
    due.set("a", 5.0)
    due.set("b", 7.0)
    times["a"] = 8.0
    due.set("a", 8.0)
    times["b"] = None
    assert due.next() == 8.0
    assert due.pop_due(7.5) == []
    assert due.pop_due(8.0) == ["a"]
    assert due.next() is None


def test_a_key_set_twice_for_one_time_is_due_once() -> None:
    times: dict[str, float | None] = {"a": 2.0}
    due = alarms(times, ["a"])
    due.set("a", 2.0)
    due.set("a", 2.0)
    assert due.pop_due(2.0) == ["a"]
