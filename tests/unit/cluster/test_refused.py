"""A Queue the cluster has but kbatch refuses: ClusterState remembers why, until it is
fixed or gone, and the scheduler tells its PodGroups why it is ignored (QueueInvalid),
never that it does not exist."""

import pytest

from kbatch.api import API_VERSION
from kbatch.cluster.errors import ObjectError
from kbatch.cluster.state import ClusterState
from kbatch.operators.scheduler.core.runner import default_conf, open_session

WHY = "spec.capability.cpu: must not be negative, not -5"


def queue(name: str = "q-capneg", cpu: str = "-5") -> dict:
    return {
        "apiVersion": API_VERSION,
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"weight": 1, "capability": {"cpu": cpu}},
    }


def pod_group(name: str = "pg", queue_name: str = "q-capneg") -> dict:
    return {
        "apiVersion": API_VERSION,
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {"minMember": 1, "queue": queue_name},
    }


def refused_state() -> ClusterState:
    state = ClusterState()
    with pytest.raises(ObjectError, match=r"Queue q-capneg: spec\.capability\.cpu: must not be"):
        state.apply(queue())
    return state


def test_a_refused_queue_is_remembered_with_why() -> None:
    state = refused_state()
    assert state.refusal("Queue", "", "q-capneg") == WHY
    assert state.refused("Queue") == {"q-capneg": WHY}
    assert "q-capneg" not in state.queues()
    assert state.snapshot().refused_queues == {"q-capneg": WHY}


def test_the_refusal_goes_when_the_queue_is_fixed() -> None:
    state = refused_state()
    state.apply(queue(cpu="5"))
    assert state.refusal("Queue", "", "q-capneg") is None
    assert state.snapshot().refused_queues == {}


def test_the_refusal_goes_when_the_queue_is_deleted() -> None:
    state = refused_state()
    state.delete("Queue", "", "q-capneg")
    assert state.refusal("Queue", "", "q-capneg") is None


def test_a_relist_keeps_refusals_it_lists_and_forgets_the_rest() -> None:
    state = refused_state()
    with pytest.raises(ObjectError):
        state.apply(queue("q-other"))
    errors = state.replace("Queue", [queue("q-other")])
    assert [str(e) for e in errors] == [f"Queue q-other: {WHY}"]
    assert state.refused("Queue") == {"q-other": WHY}


def test_a_refused_update_keeps_the_last_good_version_and_says_why() -> None:
    state = ClusterState()
    state.apply(queue(cpu="5"))
    with pytest.raises(ObjectError):
        state.apply(queue())
    assert "q-capneg" in state.queues()
    assert state.refusal("Queue", "", "q-capneg") == WHY


def verdicts(state: ClusterState) -> dict[str, tuple[str, str]]:
    session = open_session(state.snapshot(), default_conf(), now=0.0, uid="s1")
    out = {}
    for job in session.jobs.values():
        verdict = session.invalid_reason(job)
        if verdict is not None:
            out[job.name] = (verdict.reason, verdict.message)
    return out


def test_pod_groups_of_an_ignored_queue_are_told_why() -> None:
    state = refused_state()
    state.apply(pod_group())
    assert verdicts(state) == {
        "pg": ("QueueInvalid", f"queue 'q-capneg' is ignored: {WHY}"),
    }


def test_pod_groups_of_a_missing_queue_are_told_it_does_not_exist() -> None:
    state = ClusterState()
    state.apply(pod_group(queue_name="nosuch"))
    assert verdicts(state) == {"pg": ("QueueNotFound", "queue 'nosuch' does not exist")}


def test_pods_of_a_refused_pod_group_are_told_it_is_ignored() -> None:
    """Not 'does not exist': the PodGroup is there, and kbatch says why it ignores it."""
    from kbatch.operators.scheduler.core.runner import close_session

    state = ClusterState()
    bad = pod_group()
    bad["spec"]["minResources"] = {"cpu": "-1"}
    with pytest.raises(ObjectError):
        state.apply(bad)
    state.apply(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "p",
                "namespace": "default",
                "uid": "uid-p",
                "annotations": {"scheduling.k8s.io/group-name": "pg"},
            },
            "spec": {"schedulerName": "kbatch", "containers": [{"name": "c"}]},
        }
    )
    outcome = close_session(open_session(state.snapshot(), default_conf(), now=0.0, uid="s"))
    told = [(e.ref.name, e.reason, e.message) for e in outcome.events]
    assert told == [
        (
            "p",
            "FailedScheduling",
            "PodGroup default/pg is ignored by kbatch (spec.minResources.cpu: must not be "
            "negative, not -1): the pod waits until it is fixed",
        )
    ]
