"""The objects of a run may arrive as a stream, read as they come due
(``kbatch.sim.arrivals``): the run creates the same objects in the same order as one
given the whole list, and the trace's jobs are made one by one."""

import json
from collections.abc import Iterator
from itertools import islice

import pytest

from kbatch.operators.scheduler.core.runner import default_conf
from kbatch.sim import arrivals, manifests, output, runner, trace

SPEC = trace.TraceSpec(nodes=4, hours=2, seed=3)


def _drained(stream: arrivals.Arrivals) -> list[manifests.Manifest]:
    taken = []
    while stream.peek() is not None:
        taken.append(stream.pop())
    return taken


def test_the_stream_comes_out_as_the_whole_list_sorted() -> None:
    eager = manifests.load_documents(trace.trace_objects(SPEC), "<trace>").objects
    streamed = _drained(arrivals.Arrivals(trace.trace_manifests(SPEC)))
    assert any(m.kind == "PodGroup" for m in streamed)
    assert streamed == sorted(eager, key=lambda m: m.due)


def test_ties_are_sorted_by_kind_then_input_order() -> None:
    docs = [
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": n, "namespace": "default"}}
        for n in ("p1", "p2")
    ]
    docs.insert(1, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}})
    later = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "y"}}
    later["metadata"]["annotations"] = {manifests.SUBMIT_AT: "5s"}
    loaded = manifests.load_documents([*docs, later]).objects
    names = [m.name for m in _drained(arrivals.Arrivals(loaded))]
    assert names == ["x", "p1", "p2", "y"]


def test_an_object_out_of_time_order_is_refused_naming_it() -> None:
    items = list(islice(trace.trace_manifests(SPEC), 40))
    late = items[-1]
    early = next(m for m in reversed(items) if m.submit_at < late.submit_at)
    stream = arrivals.Arrivals([*(m for m in items if m is not early), early])
    with pytest.raises(manifests.ManifestError, match=f"{early.ref}: due at .* before"):
        _drained(stream)


def test_a_run_reads_the_stream_only_as_far_as_its_clock() -> None:
    read: list[manifests.Manifest] = []
    spec = trace.TraceSpec(nodes=20, hours=2, seed=3)

    def counted() -> Iterator[manifests.Manifest]:
        for item in trace.trace_manifests(spec):
            read.append(item)
            yield item

    half = spec.seconds / 2
    runner.Simulation(
        manifests.Manifests(), default_conf(), runner.Options(until=half), arriving=counted()
    ).run()
    every = list(trace.trace_manifests(spec))
    next_time = min(m.submit_at for m in every if m.submit_at > half)
    due = [m for m in every if m.submit_at <= next_time]
    # what was due by then, those due next (the clock looks ahead to them), and the
    # first object after them (where the next time ends); not the rest of the day
    assert read == every[: len(due) + 1]
    assert len(every) > len(read) + 20


def test_a_run_fed_the_stream_says_what_one_fed_the_list_says() -> None:
    options = runner.Options(until=SPEC.seconds)
    loaded = manifests.load_documents(trace.trace_objects(SPEC), "<trace>")
    eager = runner.Simulation(loaded, default_conf(), options).run()
    streamed = runner.Simulation(
        manifests.Manifests(), default_conf(), options, arriving=trace.trace_manifests(SPEC)
    ).run()
    assert streamed.totals.binds > 0
    same = json.dumps(output.to_json(eager), sort_keys=True)
    assert json.dumps(output.to_json(streamed), sort_keys=True) == same
