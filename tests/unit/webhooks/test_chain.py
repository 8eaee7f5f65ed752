"""Mutating then validating, as the API server orders them; merge patches."""

import subprocess
import sys
from pathlib import Path

from kbatch.webhooks.admission import chain, result
from unit.webhooks.world import World, job_obj, pod_group_obj, queue_obj


def test_a_pod_group_is_filled_then_validated() -> None:
    world = World().queue("q1").job("train", group="g", cpu="1")
    answer = chain.admit(pod_group_obj("g", min_member=2, queue="q1"), None, world.view)
    assert answer.allowed
    assert answer.patch == {"spec": {"minResources": {"cpu": "2", "pods": "2"}}}


def test_a_mutated_pod_group_can_still_be_refused_by_validation() -> None:
    world = World().job("train", group="g")
    answer = chain.admit(pod_group_obj("g", min_member=2, queue="nope"), None, world.view)
    assert not answer.allowed and answer.message.startswith("spec.queue:")


def test_queues_and_jobs_go_to_their_own_functions() -> None:
    view = World().view
    assert not chain.admit(queue_obj("q", weight=0), None, view).allowed
    assert chain.admit(job_obj("j", group="g"), None, view).patch["spec"] == {"suspend": True}
    # a Job replaced (not created) is not held again
    assert chain.admit(job_obj("j", group="g"), job_obj("j", group="g"), view).patch == {}


def test_other_objects_pass() -> None:
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}}
    assert chain.admit(node, None, World().view) == result.allow()


def test_merge_is_rfc_7386() -> None:
    obj = {"a": {"b": 1, "c": 2}, "l": [1, 2], "keep": True}
    patched = result.merge(obj, {"a": {"b": None, "d": {"e": None, "f": 3}}, "l": [3]})
    assert patched == {"a": {"c": 2, "d": {"f": 3}}, "l": [3], "keep": True}
    assert obj == {"a": {"b": 1, "c": 2}, "l": [1, 2], "keep": True}, "the input is not changed"


def test_a_merged_object_keeps_the_order_and_shares_nothing() -> None:
    obj = {"z": {"y": [1]}, "a": 1, "m": "text", "gone": {"x": 1}}
    patch = {"new2": {"n": [2]}, "m": {"k": 1}, "gone": None, "never": None, "new1": [3]}
    patched = result.merge(obj, patch)
    # obj's keys where they were (a replaced one too), new ones after in the patch's order
    assert list(patched) == ["z", "a", "m", "new2", "new1"]
    assert patched == {"z": {"y": [1]}, "a": 1, "m": {"k": 1}, "new2": {"n": [2]}, "new1": [3]}
    patched["z"]["y"].append(9)
    patched["new2"]["n"].append(9)
    patched["new1"].append(9)
    assert obj["z"] == {"y": [1]} and patch["new2"] == {"n": [2]} and patch["new1"] == [3]


def test_then_keeps_the_first_refusal_and_merges_patches() -> None:
    first = result.allow({"spec": {"a": 1}}, ("w1",))
    second = result.allow({"spec": {"b": 2}}, ("w2",))
    assert first.then(second) == result.allow({"spec": {"a": 1, "b": 2}}, ("w1", "w2"))
    refused = result.deny("spec.x", "no")
    assert first.then(refused).message == "spec.x: no" and not first.then(refused).allowed
    assert refused.then(first) == refused


def test_admission_imports_no_kopf_and_no_aiohttp(tmp_path: Path) -> None:
    """The admission functions are plain: the webhook server and the simulator share them.
    (A fresh interpreter, run outside the checkout so that the installed layout is seen.)"""
    code = (
        "import sys, kbatch.webhooks.admission.chain;"
        "print(','.join(m for m in ('kopf', 'aiohttp') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    assert out.stdout.strip() == ""
