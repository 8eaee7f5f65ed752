"""The held-Job controller (the release side of delayed pod creation: the API calls, on a
fake API, and the sweep), and how admission learns whether Jobs can be held."""

from collections.abc import Callable
from typing import Any

import kopf
import pytest

from kbatch import kubeapi
from kbatch.kubeapi import ApiError
from kbatch.operators.jobs import controller
from kbatch.webhooks import jobs as webhook_jobs
from kbatch.webhooks.admission import job
from unit.webhooks.world import World, job_obj


class FakeApi:
    def __init__(self, answers: dict[str, Any] | None = None) -> None:
        self.calls: list[tuple[str, str, Any, str]] = []
        self.answers = answers or {}

    def request(
        self,
        api: object,
        method: str,
        path: str,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float = 30,
    ) -> Any:
        self.calls.append((method, path, body, content_type))
        answer = self.answers.get(path, {})
        if isinstance(answer, Exception):
            raise answer
        return answer


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeApi:
    api = FakeApi()
    monkeypatch.setattr(kubeapi.client, "request", api.request)
    return api


def held_job(name: str, group: str = "g") -> dict[str, Any]:
    obj = job_obj(name, group=group)
    return job.mutate(obj, World().view).applied_to(obj)


def test_held_jobs_are_released_if_still_held(fake: FakeApi) -> None:
    jobs = [held_job("a"), job_obj("mine", group="g", suspend=True), held_job("b")]
    released = controller.release_held_jobs(object(), jobs)
    assert released == ["default/a", "default/b"]
    method, path, patch, content_type = fake.calls[0]
    assert (method, path, content_type) == (
        "PATCH",
        "/apis/batch/v1/namespaces/default/jobs/a",
        "application/json-patch+json",
    )
    held = jobs[0]["metadata"]["annotations"][job.HELD_ANNOTATION]
    assert patch == [
        {"op": "test", "path": "/metadata/annotations/kbatch.io~1held", "value": held},
        {"op": "remove", "path": "/metadata/annotations/kbatch.io~1held"},
        {"op": "replace", "path": "/spec/suspend", "value": False},
    ]


def test_a_job_changed_since_is_left_alone(fake: FakeApi) -> None:
    fake.answers["/apis/batch/v1/namespaces/default/jobs/a"] = ApiError(422, "test failed")
    jobs = [held_job("a"), held_job("b")]
    assert controller.release_held_jobs(object(), jobs) == ["default/b"]


def test_a_failed_release_does_not_stop_the_others(fake: FakeApi) -> None:
    fake.answers["/apis/batch/v1/namespaces/default/jobs/a"] = ApiError(500, "etcd is slow")
    assert controller.release_held_jobs(object(), [held_job("a"), held_job("b")]) == ["default/b"]


# --------------------------------------------------------------------------- the sweep
class Runtime:
    def __init__(self, state: Any) -> None:
        self.api = object()
        self.state = state


def test_the_sweep_releases_every_held_job_whose_group_is_admitted(fake: FakeApi) -> None:
    """No event comes for a held Job of an Inqueue group (it has no pods): after a
    failover, a restart or a failed release, only the sweep releases it."""
    world = World().pod_group("ready", phase="Inqueue").pod_group("waiting", phase="Pending")
    index = {
        ("default", "ready"): [held_job("r1", "ready"), held_job("r2", "ready")],
        ("default", "waiting"): [held_job("w", "waiting")],
        ("default", "gone"): [held_job("x", "gone")],
    }
    controller.sweep_held_jobs(Runtime(world.state), index)  # type: ignore[arg-type]
    patched = [path.rpartition("/")[2] for _, path, _, _ in fake.calls]
    assert patched == ["r1", "r2"]


def test_the_sweep_runs_on_taking_the_lead_then_periodically() -> None:
    schedule = controller.SweepSchedule(interval=30.0)
    assert not schedule.due(leads=False, now=0.0)
    assert schedule.due(leads=True, now=1.0)  # the lead is taken: at once
    assert not schedule.due(leads=True, now=30.0)
    assert schedule.due(leads=True, now=31.0)
    assert not schedule.due(leads=False, now=32.0)
    assert schedule.due(leads=True, now=33.0)  # taken again: at once


JOB_SPEC = "io.k8s.api.batch.v1.JobSpec"
BATCH_URL = "/openapi/v3/apis/batch/v1?hash=ABC"


def job_spec(*fields: str) -> dict[str, Any]:
    return {"type": "object", "properties": {name: {} for name in fields}}


def serves_v3(fake: FakeApi, *fields: str) -> None:
    """An API server with OpenAPI v3 whose JobSpec has ``fields``."""
    fake.answers["/openapi/v3"] = {"paths": {"apis/batch/v1": {"serverRelativeURL": BATCH_URL}}}
    fake.answers[BATCH_URL] = {"components": {"schemas": {JOB_SPEC: job_spec(*fields)}}}


def serves_v2_only(fake: FakeApi, *fields: str) -> None:
    """An API server without OpenAPI v3 (before 1.24): the whole v2 document."""
    fake.answers["/openapi/v3"] = ApiError(404, "the server could not find the requested resource")
    fake.answers["/openapi/v2"] = {"definitions": {JOB_SPEC: job_spec(*fields)}}


def test_an_unreadable_schema_is_asked_again_until_it_is_read(fake: FakeApi) -> None:
    delayed = webhook_jobs.DelayedPodCreation()
    fake.answers["/openapi/v3"] = kubeapi.Unreachable("connection refused")
    delayed.learn(object(), now=0.0)
    assert delayed.supported is None
    serves_v3(fake, "parallelism", "suspend")
    delayed.learn(object(), now=0.5)  # backing off: not asked yet
    assert delayed.supported is None and len(fake.calls) == 1
    delayed.learn(object(), now=1.0)
    assert delayed.supported is True and len(fake.calls) == 3
    delayed.learn(object(), now=100.0)  # known: never asked again
    assert len(fake.calls) == 3


@pytest.mark.parametrize("serves", [serves_v3, serves_v2_only])
def test_job_suspend_support_is_read_from_the_servers_schema(
    fake: FakeApi, serves: Callable[..., None]
) -> None:
    fake.answers["/version"] = {"major": "1", "minor": "20", "gitVersion": "v1.20.2"}
    serves(fake, "parallelism", "suspend")
    assert webhook_jobs.job_suspend_support(object()) == (True, "")
    serves(fake, "parallelism")
    supported, why = webhook_jobs.job_suspend_support(object())
    assert supported is False
    assert why == "the API server (Kubernetes v1.20.2) has no Job spec.suspend " + (
        "(Kubernetes 1.21 brought it)"
    )
    assert not any(path == "/version" for _, path, _, _ in fake.calls[:3]), (
        "the version is read for the message only, after the schema decided"
    )


def test_a_server_without_batch_v1_holds_no_job(fake: FakeApi) -> None:
    fake.answers["/openapi/v3"] = {"paths": {"api/v1": {"serverRelativeURL": "/openapi/v3/api/v1"}}}
    fake.answers["/version"] = kubeapi.Unreachable("gone")
    assert webhook_jobs.job_suspend_support(object()) == (
        False,
        "the API server serves no batch/v1 Job",
    )


@pytest.mark.parametrize("failing", ["/openapi/v3", "/openapi/v2"])
def test_an_unreadable_schema_is_not_an_answer(fake: FakeApi, failing: str) -> None:
    serves_v2_only(fake, "suspend")
    fake.answers[failing] = ApiError(503, "unavailable")
    supported, why = webhook_jobs.job_suspend_support(object())
    assert supported is None and "schema could not be read" in why


def test_the_job_index_reaches_the_handlers_that_read_it() -> None:
    """kopf passes an index to a handler as the keyword its id names: the release
    handlers, the sweep and the webhooks all read ``jobs_by_group``."""
    registry = kopf.OperatorRegistry()
    webhook_jobs.register(registry, object(), webhook_jobs.DelayedPodCreation())  # type: ignore[arg-type]
    indexes = [handler.id for handler in registry._indexing.get_all_handlers()]
    assert indexes == ["jobs_by_group"]
