"""The collector's pauses overlap across threads (``kbatch run``'s ETA forecast beside a
session): it resumes when the last one ends, not the first."""

import gc
import threading

from kbatch.operators.scheduler.core.framework.collector import collector_paused


def test_the_collector_resumes_when_the_last_pause_ends_not_the_first() -> None:
    assert gc.isenabled()
    first, second = collector_paused(), collector_paused()
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)  # (not the last in, first out)
    assert not gc.isenabled(), "the second pause is still in force"
    second.__exit__(None, None, None)
    assert gc.isenabled()


def test_pauses_in_two_threads() -> None:
    began, end = threading.Event(), threading.Event()

    def other() -> None:
        with collector_paused():
            began.set()
            end.wait(5)

    thread = threading.Thread(target=other)
    thread.start()
    began.wait(5)
    with collector_paused():
        pass
    assert not gc.isenabled(), "the other thread's pause is still in force"
    end.set()
    thread.join(5)
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off() -> None:
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
