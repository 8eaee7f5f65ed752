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
