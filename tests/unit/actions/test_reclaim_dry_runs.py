"""reclaim asks once, not once per job, whether alike waiting jobs fit without evicting
(its dry run): jobs whose tasks are all pending, of the same shape and templates, in the
same session state, get the same answer. A job of another template is asked on its own.

The cluster: full nodes running gangs of an over-served queue, and one empty node on
which each small gang of the other queue fits (the full ones over-serve their queue),
so reclaim leaves them to allocate.
"""

import pytest

from builders import Cluster, run_actions
from kbatch.operators.scheduler.core.actions import reclaim
from kbatch.operators.scheduler.core.framework.info import TaskStatus


def cluster() -> Cluster:
    made = Cluster()
    made.queue("big", weight=1).queue("small", weight=3)
    for i in range(3):
        made.node(f"n{i}", cpu=32, memory=64)
        made.job(f"run{i}", queue="big", min_member=4).tasks(
            4, cpu=8, status=TaskStatus.RUNNING, node=f"n{i}"
        )
    made.node("idle", cpu=4, memory=64)
    one, two = made.template(cpu=1), made.template(cpu=2)
    for name, template in [("w0", one), ("w1", one), ("other", two), ("w2", one)]:
        job = made.job(name, queue="small", min_member=2)
        for _ in range(2):
            job.task(template)
    return made


def dry_runs(monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], list[bool], object]:
    """The jobs reclaim's dry run was made for, its answers, and what reclaim decided."""
    asked: list[str] = []
    answers: list[bool] = []
    dry_run = reclaim.fits_without_eviction

    def counted(session, placer, job, pending):  # type: ignore[no-untyped-def]
        asked.append(job.name)
        answers.append(dry_run(session, placer, job, pending))
        return answers[-1]

    with monkeypatch.context() as patched:
        patched.setattr(reclaim, "fits_without_eviction", counted)
        sent = run_actions(cluster().open(), "reclaim")
    return asked, answers, (sent.evictions, sent.binds, sent.nominations)


def test_alike_jobs_are_dry_run_once(monkeypatch: pytest.MonkeyPatch) -> None:
    asked, answers, decided = dry_runs(monkeypatch)
    assert asked == ["w0", "other"]
    assert answers == [True, True]
    with monkeypatch.context() as patched:
        patched.setattr(reclaim, "_shape", lambda job: job.uid)  # no two jobs alike
        every_job, every_answer, decided_each = dry_runs(monkeypatch)
    assert sorted(every_job) == ["other", "w0", "w1", "w2"]
    assert every_answer == [True] * 4
    assert decided == decided_each
