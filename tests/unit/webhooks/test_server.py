"""What the webhook server adds around the admission functions: each review answers
within the configurations' timeoutSeconds, with kbatch's own 503 when it cannot."""

import asyncio

import kopf
import pytest

from kbatch.webhooks import configuration, review


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds


class NeverSynced:
    def synced(self) -> bool:
        return False


def test_the_longest_review_fits_in_the_webhook_timeout() -> None:
    """Waiting for the caches, then a Queue read and a Job list (each at most
    LOOKUP_TIMEOUT_SECONDS), all within REVIEW_SECONDS, less than timeoutSeconds."""
    longest_wait = review.REVIEW_SECONDS - review.LOOKUP_RESERVE_SECONDS
    reads = 2 * review.LOOKUP_TIMEOUT_SECONDS
    assert longest_wait + reads <= review.REVIEW_SECONDS < configuration.TIMEOUT_SECONDS


def test_unsynced_caches_get_kbatchs_503_before_the_timeout() -> None:
    clock = FakeClock()
    budget = review.Budget(review.REVIEW_SECONDS, clock)
    with pytest.raises(kopf.AdmissionError) as refused:
        asyncio.run(review.wait_synced(NeverSynced(), budget, clock.sleep))  # type: ignore[arg-type]
    assert refused.value.code == 503 and "try again" in str(refused.value)
    waited = clock.now - 100.0
    assert waited <= review.REVIEW_SECONDS - review.LOOKUP_RESERVE_SECONDS + 0.05


def test_a_read_gets_only_what_is_left_of_the_review() -> None:
    clock = FakeClock()
    budget = review.Budget(review.REVIEW_SECONDS, clock)
    assert budget.lookup_timeout() == review.LOOKUP_TIMEOUT_SECONDS
    clock.now += review.REVIEW_SECONDS - 0.5
    assert 0 < budget.lookup_timeout() < 0.5
    clock.now += 0.5
    assert budget.lookup_timeout() == 0.0  # no time for it: the caller says so


class Runtime:
    """A synced runtime over a state with a Queue that selects namespaces."""

    def __init__(self, namespaces: dict[str, dict[str, str]] | None = None) -> None:
        from kbatch.api import API_VERSION
        from kbatch.cluster.state import ClusterState

        self.state = ClusterState()
        self.api = object()
        spec = {"weight": 1, "namespaceSelector": {"matchLabels": {"team": "a"}}}
        self.state.apply(
            {"apiVersion": API_VERSION, "kind": "Queue", "metadata": {"name": "q"}, "spec": spec}
        )
        for name, labels in (namespaces or {}).items():
            self.state.apply(
                {"apiVersion": "v1", "kind": "Namespace",
                 "metadata": {"name": name, "labels": labels}}
            )  # fmt: skip

    def synced(self) -> bool:
        return True


def test_a_namespace_the_watch_has_not_brought_is_listed_by_name(monkeypatch) -> None:
    """A queue selects namespaces and the PodGroup's namespace is not watched yet: the
    review lists it by name (the grant the watch has), and decides on its labels."""
    from kbatch import kubeapi
    from kbatch.webhooks.admission import queue as queues

    asked: list[str] = []

    def listed(api: object, method: str, path: str, **_: object) -> dict:
        asked.append(f"{method} {path}")
        item = {"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": "fresh", "labels": {"team": "b"}}}  # fmt: skip
        return {"items": [item]}

    monkeypatch.setattr(kubeapi.client, "request", listed)
    runtime = Runtime()
    budget = review.Budget(review.REVIEW_SECONDS)
    view = asyncio.run(review.view(runtime, budget, queue_name="q", namespace="fresh"))  # type: ignore[arg-type]
    assert asked == ["GET /api/v1/namespaces?fieldSelector=metadata.name%3Dfresh"]
    assert view.namespace_labels("fresh") == {"team": "b"}
    assert "namespace 'fresh' may not use queue 'q'" in str(
        queues.namespace_refusal("q", "fresh", view)
    )
    # watched already: no read
    asked.clear()
    watched = Runtime({"known": {"team": "a"}})
    asyncio.run(review.view(watched, budget, queue_name="q", namespace="known"))  # type: ignore[arg-type]
    assert asked == []


def test_a_namespace_that_cannot_be_read_gets_kbatchs_503(monkeypatch) -> None:
    from kbatch import kubeapi

    def failing(*_: object, **__: object) -> dict:
        raise kubeapi.ApiError(500, "down")

    monkeypatch.setattr(kubeapi.client, "request", failing)
    budget = review.Budget(review.REVIEW_SECONDS)
    with pytest.raises(kopf.AdmissionError) as refused:
        asyncio.run(review.view(Runtime(), budget, queue_name="q", namespace="x"))  # type: ignore[arg-type]
    assert refused.value.code == 503 and "Namespace 'x'" in str(refused.value)
