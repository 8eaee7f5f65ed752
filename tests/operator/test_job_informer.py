"""The scheduler's informer of batch/v1 Jobs (their own deadlines: ``job_records``): the
Jobs listed reach the snapshot, and where kbatch may not list them (an RBAC made for
an older kbatch) it runs without them rather than not at all."""

from typing import Any

import pytest

from kbatch import kubeapi
from kbatch.cluster.state import ClusterState
from kbatch.operators.scheduler.core.framework.info import JobDeadline
from kbatch.operators.scheduler.runtime.informer import RESOURCES, Informer
from tests.operator.test_upstream_groups import Api, fake, listed

JOBS = next(r for r in RESOURCES if r.kind == "Job")


class JobsApi(Api):
    """``Api``, whose discovery serves batch/v1 jobs."""

    def request(
        self, _api: Any, method: str, path: str, body: Any = None, content_type: str = ""
    ) -> Any:
        if method == "GET" and path == "/apis/batch/v1":
            return {"resources": [{"name": "jobs"}, {"name": "jobs/status"}]}
        return super().request(_api, method, path, body, content_type)


def run_informer(state: ClusterState, api: Api) -> None:
    informer = Informer(object(), JOBS, state)  # type: ignore[arg-type]
    informer.start()
    assert informer.synced.wait(10)
    informer.stop()


def test_listed_jobs_give_their_deadlines_to_the_snapshot(monkeypatch: pytest.MonkeyPatch) -> None:
    job = {"metadata": {"name": "j", "namespace": "ns", "uid": "uid-j"},
           "spec": {"activeDeadlineSeconds": 60}}  # fmt: skip
    api = fake(monkeypatch, JobsApi(lists=[listed(job)]))
    state = ClusterState()
    run_informer(state, api)
    assert api.paths[0] == "/apis/batch/v1/jobs"
    assert state.snapshot().job_deadlines == {"uid-j": JobDeadline(60.0, None)}


def test_where_kbatch_may_not_list_jobs_it_runs_without_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api = fake(monkeypatch, JobsApi(lists=[kubeapi.ApiError(403, "forbidden")]))
    state = ClusterState()
    run_informer(state, api)
    assert state.list("Job") == [] and state.snapshot().job_deadlines == {}
