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
# backoffLimit's default when backoffLimitPerIndex is set (then failures count per index)
NO_BACKOFF_LIMIT = 2**31 - 1
POLICY_ACTIONS = ("Count", "FailIndex", "FailJob", "Ignore")
COMPLETION_MODES = ("NonIndexed", "Indexed")


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
    indexed: bool = False  # spec.completionMode Indexed (``kbatch.sim.job_indexes``)
    per_index_limit: int | None = None  # spec.backoffLimitPerIndex
    max_failed_indexes: int | None = None  # spec.maxFailedIndexes


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
    indexed, per_index, most_failed = _indexing(job, ref, completions)
    parallelism = 1 if parallelism is None else parallelism
    completions = parallelism if completions is None else completions
    limit = DEFAULT_BACKOFF_LIMIT if per_index is None else NO_BACKOFF_LIMIT
    limit = limit if backoff_limit is None else backoff_limit
    on_disruption = _on_disruption(job, ref)
    return JobSpec(
        parallelism, completions, bool(suspend), limit, deadline, on_disruption,
        indexed, per_index, most_failed,
    )  # fmt: skip


def _indexing(
    job: Object, ref: str, completions: int | None
) -> tuple[bool, int | None, int | None]:
    """(Indexed, backoffLimitPerIndex, maxFailedIndexes), refused as the API server's
    validation refuses them: Indexed needs completions; the per-index limit needs
    Indexed, and maxFailedIndexes the per-index limit, at most completions."""
    try:
        mode = fields.string(job, "spec.completionMode") or "NonIndexed"
        per_index = fields.integer(job, "spec.backoffLimitPerIndex")
        most_failed = fields.integer(job, "spec.maxFailedIndexes")
    except fields.FieldError as exc:
        raise ObjectError(ref, exc.field, exc.why) from exc
    if mode not in COMPLETION_MODES:
        allowed = " or ".join(COMPLETION_MODES)
        raise ObjectError(ref, "spec.completionMode", f"must be {allowed}, not {mode!r}")
    indexed = mode == "Indexed"
    if indexed and completions is None:
        raise ObjectError(ref, "spec.completions", "required when completionMode is Indexed")
    for name, number in (("backoffLimitPerIndex", per_index), ("maxFailedIndexes", most_failed)):
        if number is not None and number < 0:
            raise ObjectError(ref, f"spec.{name}", f"expected a non-negative integer, not {number}")
    if per_index is not None and not indexed:
        raise ObjectError(ref, "spec.backoffLimitPerIndex", "only for completionMode Indexed")
    if most_failed is not None and per_index is None:
        raise ObjectError(ref, "spec.maxFailedIndexes", "only with spec.backoffLimitPerIndex")
    if most_failed is not None and completions is not None and most_failed > completions:
        why = f"must be at most spec.completions ({completions}), not {most_failed}"
        raise ObjectError(ref, "spec.maxFailedIndexes", why)
    return indexed, per_index, most_failed


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
