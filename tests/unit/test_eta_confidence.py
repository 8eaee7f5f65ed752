"""The ETA's confidence: medians of finished pods are medium only when there are enough
of them and they vary little; a deadline is high."""

import math

from kbatch.visibility import eta, runtimes
from kbatch.visibility.runtimes import Runtime


def _history(samples: list[float]) -> Runtime:
    spread = runtimes.spread_of(samples)
    return Runtime(sorted(samples)[len(samples) // 2], runtimes.QUEUE, len(samples), "q", spread)


def test_the_spread_is_the_90th_percentile_over_the_10th() -> None:
    assert runtimes.spread_of([100.0] * 5) == 1.0
    # ranks 0..10: the 10th percentile is the second, 110; the 90th the tenth, 190
    assert runtimes.spread_of([100.0 + 10 * i for i in range(11)]) == 190 / 110
    assert math.isinf(runtimes.spread_of([0.0, 0.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0]))


def test_medians_of_runtimes_that_vary_widely_are_low_confidence() -> None:
    narrow = _history([600.0, 620.0, 640.0, 660.0, 700.0])
    wide = _history([130.0, 400.0, 1100.0, 2000.0, 3600.0])  # 2 min + an exponential
    few = _history([600.0, 610.0])
    deadline = Runtime(600.0, runtimes.DEADLINE)
    assert eta._confidence([deadline]) == "high"
    assert eta._confidence([deadline, narrow]) == "medium"
    assert eta._confidence([narrow, wide]) == "low"
    assert eta._confidence([narrow, few]) == "low"


def test_a_pending_pod_gets_the_spread_of_the_history_it_rests_on() -> None:
    class Job:
        uid, queue, has_pod_group, lifetime = "ns/g", "q", True, None

    history = runtimes.History(by_queue={"q": [100.0, 200.0, 300.0, 400.0, 500.0]})
    runtime = runtimes.pending_runtime({"spec": {}}, Job(), history)  # type: ignore[arg-type]
    assert (runtime.seconds, runtime.samples) == (300.0, 5)
    assert runtime.spread == 460 / 140
