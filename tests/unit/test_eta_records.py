"""The ETA's forward run takes its pods' records from the state of the listed pods it was
made of (``ClusterState.records_from``), not parsed again: the same records as a whole
parse gives (``Shortcuts.pod_records_of_source`` off)."""

import time

from kbatch.cluster import records
from kbatch.operators.scheduler.core.framework.shortcuts import ALL
from kbatch.operators.scheduler.core.runner import default_conf
from kbatch.sim import runner
from kbatch.visibility import eta, eta_input, standing
from scenarios import live
from scenarios import objects as o


def forward_records(objects: standing.ClusterObjects, shortcuts, monkeypatch) -> tuple[dict, int]:
    """The forward run's pod records after its import, and how many pods it parsed whole."""
    conf = default_conf()
    session, _ = standing.open_session(objects, conf)
    plan = eta_input.plan_of(session, objects)
    parsed = [0]
    whole = records.parse_pod

    def counted(*args, **kwargs):
        parsed[0] += 1
        return whole(*args, **kwargs)

    monkeypatch.setattr(records, "parse_pod", counted)
    options = runner.Options(period=1.0, until=60.0, shortcuts=shortcuts)
    limits = eta._Limits(10, time.perf_counter() + 60)
    asked = {uid for uid, job in session.jobs.items() if standing.is_waiting(job)}
    forward = eta._Forward(plan, conf, options, limits, session.jobs, asked, objects.loaded.state)
    monkeypatch.undo()
    state = forward.cluster.state
    pods = {r.uid: r for r in (state.pod_record(*key.split("/")) for key in _keys(state))}
    return pods, parsed[0]


def _keys(state) -> list[str]:
    return [f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in state.list("Pod")]


def test_forward_pods_take_the_listed_records_and_read_as_parsed_whole(monkeypatch) -> None:
    documents = [
        o.node("n1", cpu="4"),
        *live.gang("first", 4, duration="45s", deadline=45),
        *live.gang("second", 4, duration="30s"),
        *live.gang("third", 2, duration="30s", submit_at="2s"),
    ]
    objects = live.cluster_at(documents, 10.0)
    taken, parsed_taken = forward_records(objects, ALL, monkeypatch)
    whole, parsed_whole = forward_records(
        objects, ALL.without("pod_records_of_source"), monkeypatch
    )
    assert len(taken) == 10 and taken == whole
    assert (parsed_taken, parsed_whole) == (0, 10)
