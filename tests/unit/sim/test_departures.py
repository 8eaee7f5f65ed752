"""Finished work leaves the simulator's state (``kbatch.sim.departures``) and the output
does not change: the same run with every finished pod kept says the same, byte for byte."""

import json

from kbatch.operators.scheduler.core.runner import default_conf
from kbatch.sim import manifests, output, runner
from kbatch.sim.trace import TraceSpec, trace_objects


def _run(leave_out_settled: bool) -> runner.Outcome:
    spec = TraceSpec(nodes=4, hours=2)
    loaded = manifests.load_documents(trace_objects(spec), "<trace>")
    options = runner.Options(until=spec.seconds, leave_out_settled=leave_out_settled)
    return runner.Simulation(loaded, default_conf(), options).run()


def test_finished_work_leaves_the_state_and_the_output_stays_the_same() -> None:
    kept, let_go = _run(False), _run(True)
    assert not kept.cluster.departed.pods and not kept.cluster.departed.groups
    departed = let_go.cluster.departed
    assert departed.pods and departed.groups
    live = {
        (p["metadata"]["namespace"], p["metadata"]["name"])
        for p in let_go.cluster.state.list("Pod")
    }
    assert live.isdisjoint(departed.pods)
    assert all(row.phase == "Succeeded" and row.node for row in departed.pods.values())
    # what the simulator kept of a departed pod went with it
    assert not set(departed.pods) & set(let_go.cluster.pods)
    assert len(live) + len(departed.pods) == len(kept.cluster.state.list("Pod"))
    same = json.dumps(output.to_json(kept), sort_keys=True)
    assert json.dumps(output.to_json(let_go), sort_keys=True) == same
