"""What the simulated job controller reads of a batch/v1 Job's spec (``job_spec``), refused
naming the field where the API server's validation would refuse it."""

from dataclasses import dataclass
from typing import Any

from kbatch.cluster import fields
from kbatch.cluster.errors import ObjectError
from kbatch.operators.scheduler.core.framework.outcome import DISRUPTION_TARGET
from kbatch.sim import manifests

Object = dict[str, Any]

DEFAULT_BACKOFF_LIMIT = 6
POLICY_ACTIONS = ("Count", "FailIndex", "FailJob", "Ignore")


@dataclass(frozen=True, slots=True)
class JobSpec:
    """What the controller reads of a Job's spec (``job_spec``)."""

    parallelism: int = 1
    completions: int = 1
    suspend: bool = False
    backoff_limit: int = DEFAULT_BACKOFF_LIMIT
    deadline: int | None = None  # spec.activeDeadlineSeconds
    # What its podFailurePolicy does with a pod evicted with the DisruptionTarget condition
    # (Count: without a rule for it, as without a policy; Ignore; FailJob).
    on_disruption: str = "Count"


def job_spec(job: Object) -> JobSpec:
    """What the controller reads of ``job``'s spec, or ObjectError naming the field, as
    the API server's validation would refuse it; the pod template must be well formed."""
    ref = manifests.ref_of(job)
    try:
        parallelism, completions, backoff_limit, deadline = (
            fields.integer(job, f"spec.{name}")
            for name in ("parallelism", "completions", "backoffLimit", "activeDeadlineSeconds")
        )
        suspend = fields.value(job, "spec.suspend")
        fields.string_map(job, "spec.template.metadata.labels")
        manifests.template_annotations(job)
        template_spec = fields.value(job, "spec.template.spec")
    except fields.FieldError as exc:
        raise ObjectError(ref, exc.field, exc.why) from exc
    counts = (("parallelism", parallelism), ("completions", completions))
    for name, number in (*counts, ("backoffLimit", backoff_limit)):
        if number is not None and number < 0:
            raise ObjectError(
                ref, f"spec.{name}", f"expected a non-negative integer, not {number!r}"
            )
    if deadline is not None and deadline <= 0:
        raise ObjectError(
            ref, "spec.activeDeadlineSeconds", f"expected a positive integer, not {deadline!r}"
        )
    if not isinstance(suspend, bool | None):
        raise ObjectError(ref, "spec.suspend", f"expected true or false, not {suspend!r}")
    if not isinstance(template_spec, dict):
        raise ObjectError(ref, "spec.template.spec", "a Job needs a pod template")
    parallelism = 1 if parallelism is None else parallelism
    completions = parallelism if completions is None else completions
    limit = DEFAULT_BACKOFF_LIMIT if backoff_limit is None else backoff_limit
    on_disruption = _on_disruption(job, ref)
    return JobSpec(parallelism, completions, bool(suspend), limit, deadline, on_disruption)


def _on_disruption(job: Object, ref: str) -> str:
    """The action of the first ``spec.podFailurePolicy`` rule on the DisruptionTarget pod
    condition (status True), or Count; rules on exit codes never match a simulated pod."""
    try:
        rules = fields.mappings(job, "spec.podFailurePolicy.rules")
        for i, rule in enumerate(rules):
            at = f"spec.podFailurePolicy.rules[{i}]"
            action = fields.string(rule, "action", at=at)
            if action not in POLICY_ACTIONS:
                allowed = ", ".join(POLICY_ACTIONS)
                raise fields.FieldError(f"{at}.action", f"must be one of {allowed}, not {action!r}")
            for condition in fields.mappings(rule, "onPodConditions", at=at):
                status = condition.get("status", "True")
                if condition.get("type") == DISRUPTION_TARGET and status == "True":
                    return action
    except fields.FieldError as exc:
        raise ObjectError(ref, exc.field, exc.why) from exc
    return "Count"
