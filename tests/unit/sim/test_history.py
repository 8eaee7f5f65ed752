"""A run that keeps no history (``runner.Options.history`` False) holds what is alive
and nothing of what is over, and decides and records exactly what a run that keeps
it does."""

import gzip
from pathlib import Path

from kbatch.operators.scheduler.core.runner import default_conf
from kbatch.record.store import segments
from kbatch.sim import manifests, runner, trace

# Waves of jobs of a few minutes to an hour on 4 nodes: most are over by the end.
SPEC = trace.TraceSpec(nodes=4, hours=6, seed=5)


def _run(history: bool, record: Path | None = None) -> runner.Outcome:
    options = runner.Options(
        until=SPEC.seconds, history=history, record=None if record is None else (record, 1 << 30)
    )
    return runner.Simulation(
        manifests.Manifests(), default_conf(), options, arriving=trace.trace_manifests(SPEC)
    ).run()


def _records(directory: Path) -> list[bytes]:
    """The recording's records, without the header lines (they carry the wall clock)."""
    lines = []
    for _, path in segments.segment_files(directory):
        with gzip.open(path, "rb") as stream:
            lines += [line for line in stream if b'"segment"' not in line[:200]]
    return lines


def test_without_history_only_the_live_work_is_held(tmp_path: Path) -> None:
    kept, lean = _run(True, tmp_path / "kept"), _run(False, tmp_path / "lean")
    assert (lean.totals.sessions, lean.totals.binds) == (kept.totals.sessions, kept.totals.binds)
    # the same decisions and the same changes, record for record
    assert _records(tmp_path / "lean") == _records(tmp_path / "kept")

    state = lean.cluster.state
    live_groups = {
        (g["metadata"]["namespace"], g["metadata"]["name"]) for g in state.list("PodGroup")
    }
    all_jobs = len(trace.trace_jobs(SPEC))
    assert 0 < len(live_groups) < all_jobs / 4  # most of the jobs are over and gone
    assert len(kept.jobs.jobs) == all_jobs
    # the Job controller holds the Jobs of the live groups, and none of those gone
    assert set(lean.jobs.jobs) == live_groups
    assert len(lean.jobs._by_uid) == len(live_groups)
    # nothing of what is over: no events, rows, creation times or timeline
    assert kept.cluster.event_log and not lean.cluster.event_log
    assert kept.cluster.departed.pods and not lean.cluster.departed.pods
    assert not lean.cluster.departed.groups and not lean.cluster.departed.removed
    assert not lean.cluster.created_at and not lean.timeline.samples
    # what the simulator keeps per pod is of the pods in the state
    pods = {(p["metadata"]["namespace"], p["metadata"]["name"]) for p in state.list("Pod")}
    assert set(lean.cluster.pods) == pods
    assert {key for key, _ in lean.cluster.group_pods.items()} <= live_groups
    assert len(lean.cluster._uids_by_ref) <= len(pods) + 2 * len(live_groups) + 20
