"""Volcano's scheduling.volcano.sh/v1beta1 PodGroups and Queues read as kbatch's own
(DESIGN §14) through the simulator: volcano/hierarchical-queue.yaml is Volcano's
documented hierarchical-queue example (https://volcano.sh/en/docs/hierarchical_queue/),
its queues and its vcjob unchanged; its header says what must happen."""

from scenarios.objects import node, pod
from scenarios.runner import Outcome, run

QUEUES = ("child-queue-a", "child-queue-b", "subchild-queue-a1", "subchild-queue-a2")


def cpu(outcome: Outcome, field: str) -> dict[str, str]:
    return {q: str(outcome.queue(q)[field].get("cpu", "0")) for q in QUEUES}


def test_volcanos_hierarchical_queue_example_gets_the_deserved_shares_its_page_gives() -> None:
    outcome = run("volcano/hierarchical-queue.yaml", until="2m")
    documented = {
        "child-queue-a": "64",
        "child-queue-b": "64",
        "subchild-queue-a1": "32",
        "subchild-queue-a2": "32",
    }
    assert cpu(outcome, "deserved") == documented
    assert cpu(outcome, "allocated") == documented
    assert outcome.queue("subchild-queue-a1")["deserved"]["memory"] == "64Gi"
    assert outcome.queue("subchild-queue-a1")["parent"] == "child-queue-a"
    assert "parent" not in outcome.queue("child-queue-a")  # parent: root is top level
    assert len(outcome.running(job="job-a-test")) + len(outcome.running(job="fill-a1")) == 32
    assert len(outcome.running(job="fill-a2")) == 32
    assert len(outcome.running(job="fill-b")) == 64
    (job_a,) = [g for g in outcome.json["podGroups"] if g["name"].startswith("job-a-")]
    assert job_a["phase"] == "Running"  # the vcjob's, as Volcano's controller names it
    assert [j["phase"] for j in outcome.json["volcanoJobs"]] == ["Running"]


def test_with_one_small_job_kbatchs_deserved_is_what_the_subtree_asks() -> None:
    # Where kbatch's documented rule differs from Volcano's page: Volcano shows a
    # queue's configured deserved (32 cpu for subchild-queue-a1); kbatch's deserved is
    # capped at what the subtree asks (DESIGN §14), the rest going to whoever asks.
    outcome = run("volcano/hierarchical-queue.yaml", until="20s")
    assert cpu(outcome, "deserved") == {
        "child-queue-a": "1",
        "child-queue-b": "0",
        "subchild-queue-a1": "1",
        "subchild-queue-a2": "0",
    }
    assert len(outcome.running(job="job-a-test")) == 1


QUEUE = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue"}


def test_a_volcano_queue_kbatch_cannot_honour_is_refused_naming_the_field() -> None:
    affinity = {"nodeGroupAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": ["g"]}}
    documents = [
        {**QUEUE, "metadata": {"name": "grouped"}, "spec": {"affinity": affinity}},
        {**QUEUE, "metadata": {"name": "typed"}, "spec": {"type": "x", "weight": 2}},
    ]
    outcome = run(documents=documents, until="5s")
    (rejected,) = outcome.events(reason="AdmissionRejected", kind="Queue")
    assert rejected["name"] == "grouped"
    assert rejected["message"].startswith("spec.affinity: kbatch has no node groups per queue")
    assert outcome.queue("typed")["weight"] == 2


def test_an_elastic_vcjobs_group_starts_with_min_member_pods_as_in_volcano() -> None:
    # The PodGroup Volcano's Job controller writes for minAvailable 2 of a master and three
    # workers of 1 cpu (each task's replicas as its minimum), on one node of 2 cpu: Volcano
    # skips the per-task minimums (they add up past minMember), so two pods start.
    group = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "elastic"},
        "spec": {"minMember": 2, "minTaskMember": {"master": 1, "worker": 3}},
    }
    pods = [pod("elastic-master-0", group="elastic")]
    pods += [pod(f"elastic-worker-{i}", group="elastic") for i in range(3)]
    for made in pods:
        role = made["metadata"]["name"].split("-")[1]
        made["metadata"]["annotations"]["volcano.sh/task-spec"] = role
    outcome = run(documents=[node("n", cpu="2"), group, *pods], until="5s")
    assert len(outcome.running()) == 2
    assert outcome.group("elastic")["phase"] == "Running"
