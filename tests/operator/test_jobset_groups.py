"""The PodGroups kbatch makes for JobSets labelled kbatch.io/queue, and their release
(the operator's side): the JobSet as the API server stores it after the JobSet webhook,
on a fake API."""

from typing import Any

import kopf
import pytest

from kbatch import kubeapi
from kbatch.operators.jobs import groups, jobsets
from kbatch.webhooks import jobs as webhook_jobs
from kbatch.webhooks import jobsets as webhook_jobsets
from kbatch.webhooks.admission import job, jobsetgroup
from unit.webhooks.test_jobsetgroup import jobset
from unit.webhooks.world import World

PODGROUPS = "/apis/scheduling.incubator.k8s.io/v1alpha1/namespaces/team/podgroups"
EVENTS = "/api/v1/namespaces/team/events"
JOBSET = "/apis/jobset.x-k8s.io/v1alpha2/namespaces/team/jobsets/train"


class FakeApi:
    """kubeapi.request on a table of answers (an exception is raised; else {}), every
    call kept."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, Any, str]] = []
        self.answers: dict[str, Any] = {}

    def request(
        self, api: object, method: str, path: str, body: Any = None,
        content_type: str = "application/json", timeout: float = 30,
    ) -> Any:  # fmt: skip
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


class Runtime:
    def __init__(self, world: World) -> None:
        self.api = object()
        self.state = world.state

    def leads(self) -> bool:
        return True

    def synced(self) -> bool:
        return True


def posted(fake: FakeApi, path: str) -> list[Any]:
    return [body for method, at, body, _ in fake.calls if method == "POST" and at == path]


def stored_jobset(world: World | None = None) -> dict[str, Any]:
    """A labelled JobSet as the API server stores it: through the webhook, with a uid."""
    obj = jobset()
    created = jobsetgroup.mutate(obj, (world or World()).view).applied_to(obj)
    created["metadata"]["uid"] = "uid-train"
    return created


def delayed() -> webhook_jobs.DelayedPodCreation:
    known = webhook_jobs.DelayedPodCreation()
    known.supported = True
    return known


def patches(fake: FakeApi) -> list[tuple[str, Any]]:
    return [(path, body) for method, path, body, _ in fake.calls if method == "PATCH"]


def test_a_labelled_jobsets_group_is_made_owned_by_it(fake: FakeApi) -> None:
    runtime = Runtime(World())
    assert groups.GroupMaker(runtime, jobsets.JOBSET).ensure(stored_jobset())  # type: ignore[arg-type]
    (group,) = posted(fake, PODGROUPS)
    assert group["metadata"]["ownerReferences"][0]["kind"] == "JobSet"
    assert group["spec"]["minMember"] == 5
    (told,) = posted(fake, EVENTS)
    assert told["reason"] == "PodGroupCreated"
    assert told["message"] == "made PodGroup team/train for the JobSet's pods"
    assert told["involvedObject"]["apiVersion"] == "jobset.x-k8s.io/v1alpha2"
    assert told["involvedObject"]["kind"] == "JobSet"


def test_a_refused_group_is_told_on_the_jobset_naming_the_label(fake: FakeApi) -> None:
    refusal = "spec.queue: queue 'default' does not exist; create it or name another queue"
    fake.answers[PODGROUPS] = kubeapi.ApiError(422, refusal)
    maker = groups.GroupMaker(Runtime(World()), jobsets.JOBSET)  # type: ignore[arg-type]
    assert not maker.ensure(stored_jobset())
    (told,) = posted(fake, EVENTS)
    assert (told["reason"], told["involvedObject"]["kind"]) == ("PodGroupRefused", "JobSet")
    assert told["message"] == (
        "metadata.labels[kbatch.io/queue]: PodGroup team/train not made, the JobSet waits, "
        f"suspended: {refusal}"
    )


def handlers(runtime: Runtime) -> dict[str, Any]:
    registry = kopf.OperatorRegistry()
    jobsets.register(registry, runtime, delayed())  # type: ignore[arg-type]
    return {h.id: h for h in registry._watching.get_all_handlers()}


def test_the_jobset_event_makes_the_group_and_releases_only_once_admitted(fake: FakeApi) -> None:
    world = World()
    body = stored_jobset()
    handler = handlers(Runtime(world))["make-jobset-pod-group"]
    handler.fn(type="ADDED", body=kopf.Body(body))
    assert len(posted(fake, PODGROUPS)) == 1
    assert patches(fake) == [], "the group is not admitted: the JobSet stays held"

    world.pod_group("train", namespace="team", min_member=5, phase="Inqueue")
    handler.fn(type="MODIFIED", body=kopf.Body(body))
    ((path, patch),) = patches(fake)
    assert path == JOBSET
    mark = body["metadata"]["annotations"][job.HELD_ANNOTATION]
    assert patch == [
        {"op": "test", "path": "/metadata/annotations/kbatch.io~1held", "value": mark},
        {"op": "remove", "path": "/metadata/annotations/kbatch.io~1held"},
        {"op": "replace", "path": "/spec/suspend", "value": False},
    ]


def test_the_groups_admission_releases_the_held_jobset_of_the_index(fake: FakeApi) -> None:
    slim = webhook_jobsets.slim_jobset(stored_jobset(), "team", "train")
    index = {("team", "train"): [slim]}
    handler = handlers(Runtime(World()))["release-held-jobsets"]
    group = {
        "metadata": {"name": "train"},
        "spec": {"minMember": 5},
        "status": {"phase": "Pending"},
    }
    handler.fn(type="MODIFIED", body=kopf.Body(group), namespace="team", name="train",
               jobsets_by_group=index)  # fmt: skip
    assert patches(fake) == []
    group["status"] = {"phase": "Inqueue"}
    handler.fn(type="MODIFIED", body=kopf.Body(group), namespace="team", name="train",
               jobsets_by_group=index)  # fmt: skip
    assert [path for path, _ in patches(fake)] == [JOBSET]


def test_the_sweep_makes_the_missing_group_of_a_held_jobset(fake: FakeApi) -> None:
    runtime = Runtime(World())
    slim = webhook_jobsets.slim_jobset(stored_jobset(), "team", "train")
    jobsets.sweep_held_jobsets(
        runtime, {("team", "train"): [slim]}, groups.GroupMaker(runtime, jobsets.JOBSET)
    )  # type: ignore[arg-type]
    (group,) = posted(fake, PODGROUPS)
    assert group["metadata"]["ownerReferences"][0]["uid"] == "uid-train"
    assert group["spec"]["minMember"] == 5 and patches(fake) == []


def test_the_index_keeps_only_jobsets_kbatch_groups() -> None:
    registry = kopf.OperatorRegistry()
    runtime = Runtime(World())
    webhook_jobsets.register(registry, runtime, delayed())  # type: ignore[arg-type]
    (index,) = registry._indexing.get_all_handlers()
    assert index.id == "jobsets_by_group"
    kept = index.fn(body=kopf.Body(stored_jobset()), namespace="team", name="train")
    assert kept[("team", "train")]["metadata"]["uid"] == "uid-train"
    assert index.fn(body=kopf.Body(jobset(queue=None)), namespace="team", name="train") is None
