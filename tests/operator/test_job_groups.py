"""The PodGroups kbatch makes for Jobs labelled kbatch.io/queue (the operator's side):
the Job as the API server stores it after the Job webhook, on a fake API."""

from typing import Any

import kopf
import pytest

from kbatch import kubeapi
from kbatch.api import GROUP_NAME_ANNOTATION
from kbatch.kubeapi import ApiError
from kbatch.operators.jobs import controller, groups
from kbatch.webhooks import jobs as webhook_jobs
from kbatch.webhooks.admission import job, jobgroup
from unit.webhooks.world import World, job_obj

PODGROUPS = "/apis/scheduling.incubator.k8s.io/v1alpha1/namespaces/team/podgroups"
EVENTS = "/api/v1/namespaces/team/events"


class FakeApi:
    """kubeapi.request on a table of answers (an exception is raised), every call kept."""

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


def stored_job(name: str = "train", queue: str = "research", **fields: Any) -> dict[str, Any]:
    """A labelled Job as the API server stores it: through the Job webhook, with a uid."""
    obj = job_obj(name, namespace="team", cpu="2", memory="1Gi", **fields)
    obj["metadata"]["labels"] = {jobgroup.QUEUE_LABEL: queue}
    created = job.mutate(obj, World().view).applied_to(obj)
    created["metadata"]["uid"] = f"uid-{name}"
    return created


def posted(fake: FakeApi, path: str) -> list[Any]:
    return [body for method, at, body, _ in fake.calls if method == "POST" and at == path]


def test_a_labelled_jobs_group_is_made_owned_by_it(fake: FakeApi) -> None:
    world = World().queue("research")
    made = groups.GroupMaker(Runtime(world)).ensure(stored_job(parallelism=3))  # type: ignore[arg-type]
    assert made
    (group,) = posted(fake, PODGROUPS)
    assert group["metadata"]["name"] == "train"
    assert group["metadata"]["ownerReferences"] == [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "uid-train",
         "controller": True}
    ]  # fmt: skip
    assert group["spec"] == {
        "minMember": 3,
        "queue": "research",
        "minResources": {"cpu": "6", "memory": "3Gi", "pods": "3"},
    }
    (told,) = posted(fake, EVENTS)
    assert (told["reason"], told["type"]) == ("PodGroupCreated", "Normal")
    assert told["involvedObject"] == {
        "apiVersion": "batch/v1", "kind": "Job", "namespace": "team", "name": "train",
        "uid": "uid-train",
    }  # fmt: skip


def test_no_group_is_made_when_one_exists_or_the_job_is_not_one_to_group(fake: FakeApi) -> None:
    world = World().queue("research").pod_group("train", namespace="team")
    maker = groups.GroupMaker(Runtime(world))  # type: ignore[arg-type]
    assert maker.ensure(stored_job())  # the watched state has it
    own = job_obj("mine", namespace="team", group="hand-written")
    own["metadata"].update(uid="u", labels={jobgroup.QUEUE_LABEL: "research"})
    assert maker.ensure(own)  # its template names a group of its own: the user's
    finished = stored_job("done")
    finished["status"] = {"conditions": [{"type": "Complete", "status": "True"}]}
    assert maker.ensure(finished)
    assert maker.ensure(job_obj("plain", namespace="team"))
    assert fake.calls == []


def test_a_group_made_meanwhile_is_joined(fake: FakeApi) -> None:
    fake.answers[PODGROUPS] = ApiError(409, 'podgroups.scheduling... "train" already exists')
    maker = groups.GroupMaker(Runtime(World()))  # type: ignore[arg-type]
    assert maker.ensure(stored_job())
    assert posted(fake, EVENTS) == []


def test_a_refused_group_is_told_on_the_job_naming_the_label_once(fake: FakeApi) -> None:
    refusal = "spec.queue: queue 'research' does not exist; create it or name another queue"
    fake.answers[PODGROUPS] = ApiError(422, refusal)
    maker = groups.GroupMaker(Runtime(World()))  # type: ignore[arg-type]
    body = stored_job()
    assert not maker.ensure(body)
    assert not maker.ensure(body)  # the sweep again: not told twice
    assert len(posted(fake, PODGROUPS)) == 2
    (told,) = posted(fake, EVENTS)
    assert (told["reason"], told["type"]) == ("PodGroupRefused", "Warning")
    assert told["message"] == (
        "metadata.labels[kbatch.io/queue]: PodGroup team/train not made, the Job waits, "
        f"suspended: {refusal}"
    )


def test_an_unreachable_server_is_not_told_as_a_refusal(fake: FakeApi) -> None:
    fake.answers[PODGROUPS] = kubeapi.Unreachable("connection refused")
    maker = groups.GroupMaker(Runtime(World()))  # type: ignore[arg-type]
    assert not maker.ensure(stored_job())
    assert posted(fake, EVENTS) == []


def test_the_sweep_makes_the_missing_groups_of_held_jobs_from_the_index(fake: FakeApi) -> None:
    """A Job whose group could not be made (its queue came later): the sweep makes it
    from what the Job index keeps of the Job."""
    body = stored_job()
    assert job.is_held(body)
    slim = webhook_jobs.slim_job(kopf.Body(body), "team", "train")
    index = {("team", "train"): [slim]}
    runtime = Runtime(World().queue("research"))
    controller.sweep_held_jobs(runtime, index, groups.GroupMaker(runtime))  # type: ignore[arg-type]
    (group,) = posted(fake, PODGROUPS)
    assert group["metadata"]["ownerReferences"][0]["uid"] == "uid-train"
    assert group["spec"]["queue"] == "research" and group["spec"]["minMember"] == 2
    released = [call for call in fake.calls if call[0] == "PATCH"]
    assert released == [], "the group is Pending: the Job stays held"


def test_the_job_event_handler_makes_the_group(fake: FakeApi) -> None:
    registry = kopf.OperatorRegistry()
    runtime = Runtime(World().queue("research"))
    controller.register(registry, runtime, webhook_jobs.DelayedPodCreation())  # type: ignore[arg-type]
    (handler,) = [h for h in registry._watching.get_all_handlers() if h.id == "make-job-pod-group"]
    assert handler.labels == {jobgroup.QUEUE_LABEL: kopf.PRESENT}
    body = stored_job()
    handler.fn(type="DELETED", body=kopf.Body(body))
    assert fake.calls == []
    handler.fn(type="ADDED", body=kopf.Body(body))
    (group,) = posted(fake, PODGROUPS)
    template = body["spec"]["template"]
    assert group["metadata"]["name"] == template["metadata"]["annotations"][GROUP_NAME_ANNOTATION]


class Settings:
    webhook_address = "127.0.0.1:0"
    webhook_cert_dir = None
    webhook_host = None
    manage_webhooks = False
    lock_namespace = "kbatch-system"


def test_the_job_index_reaches_the_handlers_by_its_keyword() -> None:
    """kopf passes an index to handlers as a keyword named by its id: the release and
    sweep handlers read ``jobs_by_group`` (and ``jobsets_by_group``), so that must be its id (by default it would
    be the function's qualified name, and they would see no Job at all)."""
    from kbatch.webhooks import server

    registry = kopf.OperatorRegistry()
    runtime = Runtime(World())
    runtime.settings = Settings()  # type: ignore[attr-defined]
    server.register(registry, runtime, webhook_jobs.DelayedPodCreation())  # type: ignore[arg-type]
    ids = [h.id for h in registry._indexing.get_all_handlers()]
    assert ids == ["jobs_by_group", "jobsets_by_group"]  # the JobSet handlers read the second


def test_a_queue_with_children_makes_no_group_till_the_label_names_a_leaf(fake: FakeApi) -> None:
    from unit.webhooks.test_queue_tree import tree_queue

    world = World()
    for queue in (tree_queue("org"), tree_queue("a1", "org"), tree_queue("a2", "org")):
        world.state.apply(queue)
    maker = groups.GroupMaker(Runtime(world))  # type: ignore[arg-type]
    assert not maker.ensure(stored_job(queue="org"))
    assert not maker.ensure(stored_job(queue="org"))  # the sweep again: told once
    assert posted(fake, PODGROUPS) == []
    (event,) = posted(fake, EVENTS)
    assert event["reason"] == "PodGroupRefused" and event["type"] == "Warning"
    assert event["message"] == (
        "metadata.labels[kbatch.io/queue]: PodGroup team/train not made, the Job waits, "
        "suspended: queue 'org' has child queues (a1, a2): PodGroups go in leaf queues "
        "only; name one of its leaves (the group is made once the label names a leaf queue)"
    )
    assert maker.ensure(stored_job(queue="a1"))  # the label fixed: nothing was lost
    (group,) = posted(fake, PODGROUPS)
    assert group["spec"]["queue"] == "a1"
