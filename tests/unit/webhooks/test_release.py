"""The PodGroup operator's side of delayed pod creation: the API calls, on a fake API."""

from typing import Any

import pytest

from kbatch.api.podgroup import PodGroupPhase
from kbatch.operators.podgroup import controller
from kbatch.operators.scheduler.kube import ApiError
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
    monkeypatch.setattr(controller, "request", api.request)
    return api


def held_job(name: str) -> dict[str, Any]:
    obj = job_obj(name, group="g")
    return job.mutate(obj, World().view).applied_to(obj)


def test_held_jobs_of_an_admitted_group_are_released_if_still_held(fake: FakeApi) -> None:
    jobs = [held_job("a"), job_obj("mine", group="g", suspend=True), held_job("b")]
    released = controller.release_held_jobs(object(), "default", jobs, PodGroupPhase.INQUEUE)
    assert released == ["a", "b"]
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


def test_nothing_is_released_while_the_group_waits(fake: FakeApi) -> None:
    for phase in (None, PodGroupPhase.PENDING):
        assert controller.release_held_jobs(object(), "default", [held_job("a")], phase) == []
    assert fake.calls == []


def test_a_job_changed_since_is_left_alone(fake: FakeApi) -> None:
    fake.answers["/apis/batch/v1/namespaces/default/jobs/a"] = ApiError(422, "test failed")
    jobs = [held_job("a"), held_job("b")]
    assert controller.release_held_jobs(object(), "default", jobs, PodGroupPhase.RUNNING) == ["b"]


@pytest.mark.parametrize(
    ("version", "supported", "why"),
    [
        (
            {"major": "1", "minor": "20", "gitVersion": "v1.20.2"},
            False,
            "Kubernetes v1.20.2 has no Job spec.suspend (it came in 1.21)",
        ),
        ({"major": "1", "minor": "21+", "gitVersion": "v1.21.3-eks"}, False, "SuspendJob"),
        ({"major": "1", "minor": "22", "gitVersion": "v1.22.0"}, True, ""),
        ({"major": "1", "minor": "30", "gitVersion": "v1.30.1"}, True, ""),
    ],
)
def test_job_suspend_support_is_read_from_the_version(
    fake: FakeApi, version: dict[str, str], supported: bool, why: str
) -> None:
    fake.answers["/version"] = version
    answer = controller.job_suspend_support(object())
    assert answer[0] is supported and why in answer[1]


def test_an_unreadable_version_means_no_delayed_pod_creation(fake: FakeApi) -> None:
    fake.answers["/version"] = ApiError(403, "forbidden")
    supported, why = controller.job_suspend_support(object())
    assert not supported and "could not be read" in why
