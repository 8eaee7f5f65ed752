"""kbatch's admission webhooks under kopf (DESIGN §7): ``register(registry, runtime,
delayed)`` adds them to ``kbatch run``'s one kopf registry when ``--webhook-address`` is
given. This module is the wiring: the HTTPS endpoint at startup (and, for
``--manage-webhooks``, the configurations pointing at it), their removal at cleanup, and
each kind's handlers, registered by its own module — ``jobs`` (the Job index and
``mutate-job``), ``podgroups`` (``mutate-podgroup``, ``validate-podgroup``) and
``queues`` (``validate-queue``). (The held Jobs' release is a controller's:
``kbatch.operators.jobs``.)

The handlers are thin: they gather what the admission functions read and answer with
what those functions decide; ``review`` is what every review shares (its time budget,
waiting for the watches to sync, the state it reads). Paths, rules and failure
policies: ``configuration.py`` and webhooks/README.md.
"""

import logging
import time
from typing import Any

import kopf

from kbatch.webhooks import configuration, endpoint, jobs, jobsets, podgroups, queues
from kbatch.webhooks.review import Object, Runtime


class RefusalsAreAnswers(logging.Filter):
    """kopf logs each refusal of a webhook as an error ("Webhook 'validate-queue' failed
    permanently: ..."); for kbatch a refusal is an answer: INFO. Other failures stay errors."""

    PREFIXES = tuple(f"Webhook '{hook.path}' failed permanently: " for hook in configuration.HOOKS)

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno == logging.ERROR and record.getMessage().startswith(self.PREFIXES):
            record.levelno, record.levelname = logging.INFO, "INFO"
        return True


def register(
    registry: kopf.OperatorRegistry, runtime: Runtime, delayed: jobs.DelayedPodCreation
) -> None:
    """The admission handlers and the Job index (when webhooks are on). ``delayed``:
    whether Jobs are held (learned at start when not known yet)."""
    settings = runtime.settings
    if not settings.webhook_address:
        return
    kopf_objects = logging.getLogger("kopf.objects")
    if not any(isinstance(f, RefusalsAreAnswers) for f in kopf_objects.filters):
        kopf_objects.addFilter(RefusalsAreAnswers())

    @kopf.on.startup(registry=registry)
    def webhook_server(settings: kopf.OperatorSettings, **_: Any) -> None:
        skip = ("kube-system", runtime.settings.lock_namespace)

        def serving(client_config: Object) -> None:
            """The server listens: point the configurations at it (when kbatch keeps
            them), and redo what was refused while it could not answer."""
            if runtime.settings.manage_webhooks:
                configuration.apply(runtime.api, configuration.configurations(client_config, skip))
            runtime.webhooks_serving()

        if runtime.settings.manage_webhooks:  # a killed run's, refusing all at a dead address
            configuration.remove_stale(runtime.api)
        settings.admission.server = endpoint.server(
            runtime.settings.webhook_address,
            runtime.settings.webhook_cert_dir,
            runtime.settings.webhook_host,
            serving,
        )
        settings.admission.managed = None  # kbatch writes its own (configuration.py)
        delayed.learn(runtime.api, time.monotonic())

    if settings.manage_webhooks:

        @kopf.on.cleanup(registry=registry)
        def remove_webhook_configurations(**_: Any) -> None:
            configuration.remove(runtime.api)

    jobs.register(registry, runtime, delayed)
    jobsets.register(registry, runtime, delayed)
    podgroups.register(registry, runtime)
    queues.register(registry, runtime)
