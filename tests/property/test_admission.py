"""The admission functions on malformed PodGroups, Queues and Jobs, against a cluster that
holds malformed Jobs too: every answer is an Admission (a refusal names the field, in
kbatch's words); nothing is raised."""

from collections.abc import Callable

from hypothesis import given
from hypothesis import strategies as st
from property import junk

from kbatch.cluster.state import ClusterState
from kbatch.webhooks.admission import chain, job, podgroup, queue
from kbatch.webhooks.admission.result import Admission
from kbatch.webhooks.admission.view import StateView

ADMITTED = ("PodGroup", "Queue", "Job")


def view_with(group_jobs: list[dict]) -> StateView:
    """Queues q1 (Open) and q2 (Closed), a PodGroup and a quota in ``default``, and the
    (possibly malformed) Jobs ``group_jobs`` known for every group."""
    state = ClusterState()
    closed = junk.queue("q2")
    closed["spec"]["state"] = "Closed"
    for obj in (junk.queue("default"), junk.queue("q1"), closed, junk.pod_group("other")):
        state.apply(obj)
    state.apply(junk.quota())
    return StateView(state, lambda namespace, group: group_jobs)


def _answered(test: str, admit: Callable[[], object]) -> None:
    junk.counted(test)
    try:
        answer = admit()
    except Exception as exc:
        junk.escaped(test, exc)
        return
    answers = answer if isinstance(answer, list) else [answer]
    for one in answers:
        if isinstance(one, Admission) and not one.allowed:
            field, _, _ = one.message.partition(": ")
            junk.check_refusal(test, field if " " not in field else "", one.message)


@junk.SETTINGS
@given(
    junk.objects(ADMITTED),
    st.one_of(st.none(), junk.objects(ADMITTED)),
    st.lists(junk.objects(("Job",)), max_size=2),
)
def test_admit_answers_every_object(obj: dict, old: dict | None, jobs: list[dict]) -> None:
    view = view_with(jobs)
    _answered("admit", lambda: chain.admit(obj, old, view))


@junk.SETTINGS
@given(junk.objects(ADMITTED), st.lists(junk.objects(("Job",)), max_size=2))
def test_each_admission_function_answers(obj: dict, jobs: list[dict]) -> None:
    """What the webhook server calls one by one, beyond ``admit``."""
    view = view_with(jobs)
    _answered("functions", lambda: podgroup.mutate(obj, None, view))
    _answered("functions", lambda: podgroup.validate(obj, None, view))
    _answered("functions", lambda: queue.validate(obj, view))
    _answered("functions", lambda: queue.validate_delete(obj, view))
    _answered("functions", lambda: job.mutate(obj, view))
    _answered("functions", lambda: podgroup.fill_from_job(obj, view) and None)
    _answered("functions", lambda: job.to_release([obj, *jobs], view) and None)


@junk.SETTINGS
@given(st.sampled_from(["cpu", "memory"]), st.sampled_from(["-5", "-1Gi", -2]))
def test_negative_quantities_are_refused_naming_the_field(resource: str, value: object) -> None:
    junk.counted("negative")
    view = view_with([])
    capped = junk.queue("q-neg")
    capped["spec"]["capability"] = {resource: value}
    answer = chain.admit(capped, None, view)
    assert answer.message == f"spec.capability.{resource}: must not be negative, not {value}"
    group = junk.pod_group()
    group["spec"]["minResources"] = {resource: value}
    answer = chain.admit(group, None, view)
    assert answer.message == f"spec.minResources.{resource}: must not be negative, not {value}"
