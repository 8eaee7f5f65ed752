"""The Queue webhook (DESIGN §7): ``validate-queue`` checks a Queue's weight on create
and update, and refuses to delete the default Queue or one a PodGroup still names. The
decisions are ``admission.queue``'s; ``register`` (called by the server) adds the handler.
"""

from typing import Any

import kopf

from kbatch.api import GROUP, VERSION
from kbatch.webhooks import configuration, review
from kbatch.webhooks.admission import queue
from kbatch.webhooks.review import Budget, Runtime


def register(registry: kopf.OperatorRegistry, runtime: Runtime) -> None:
    """The Queue handler (one for create, update and delete: one path)."""

    @kopf.on.validate(
        GROUP,
        VERSION,
        "queues",
        id=configuration.VALIDATE_QUEUE,
        operations=["CREATE", "UPDATE", "DELETE"],
        registry=registry,
    )
    async def validate_queue(
        body: kopf.Body, warnings: list[str], operation: str = "", **_: Any
    ) -> None:
        budget = Budget(review.REVIEW_SECONDS)
        await review.wait_synced(runtime, budget)
        view = await review.view(runtime, budget)
        check = queue.validate_delete if operation == "DELETE" else queue.validate
        review.respond(check(dict(body), view), warnings)
