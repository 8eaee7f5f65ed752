"""A JobSet kbatch holds, in the forecast: JobSet's controller made its Jobs suspended
with it, so its group has no pods yet; its Jobs count as held by kbatch
(``eta_input.held_with_jobsets``), and the forecast starts the group when kbatch would
release the JobSet."""

from prometheus_client import CollectorRegistry

from kbatch.api.times import rfc3339
from kbatch.metrics import SchedulerMetrics
from kbatch.operators.scheduler.core.runner import default_conf
from kbatch.sim import runner
from kbatch.sim.manifests import load_documents
from kbatch.visibility import eta, eta_input, published, standing
from kbatch.visibility.publisher import EtaPublisher, PublisherSettings
from kbatch.webhooks.admission import job as holding
from scenarios import live
from scenarios import objects as o
from scenarios.test_jobsets import jobset, replicated

NOW = 10.0
DOCUMENTS = [
    o.node("n1", cpu="4"),
    o.queue("q"),
    *live.gang("first", 4, duration="45s", deadline=45),
    jobset(replicated("workers", 2, 1, cpu="2", activeDeadlineSeconds=30), duration="30s"),
]


def cluster_now() -> tuple[standing.ClusterObjects, list[dict]]:
    """The cluster at NOW, as listed (the JobSet held behind 'first'), and its JobSets."""
    loaded = load_documents(DOCUMENTS)
    simulation = runner.Simulation(loaded, default_conf(), runner.Options(until=NOW))
    outcome = simulation.run()
    state = outcome.cluster.state
    objects = standing.ClusterObjects(
        now=NOW,
        nodes=state.list("Node"),
        pods=state.list("Pod"),
        pod_groups=state.list("PodGroup"),
        queues=state.list("Queue"),
        priority_classes=state.list("PriorityClass"),
        jobs=[record.obj for record in outcome.jobs.jobs.values()],
    )
    return objects, [record.obj for record in simulation.jobsets.sets.values()]


def estimate(objects: standing.ClusterObjects) -> eta.Estimate:
    session, _ = standing.open_session(objects, default_conf())
    return eta.forecast(session, objects, default_conf(), ["default/js"]).estimates["default/js"]


def test_the_jobs_of_a_held_jobset_are_marked_held_and_no_other() -> None:
    objects, jobsets = cluster_now()
    assert all(holding.is_held(js) for js in jobsets), "the JobSet is held at NOW"
    marked = eta_input.held_with_jobsets(objects.jobs, jobsets)
    assert sorted(j["metadata"]["name"] for j in marked if holding.is_held(j)) == [
        "js-workers-0",
        "js-workers-1",
    ]
    assert eta_input.held_with_jobsets(objects.jobs, []) == list(objects.jobs)


def test_a_held_jobset_s_group_starts_when_the_simulation_starts_it() -> None:
    objects, jobsets = cluster_now()
    unknown = estimate(objects)
    assert unknown.seconds is None, "without its JobSet, the group has nothing to run"
    marked = objects.__class__(**{**objects.__dict__, "jobs": eta_input.held_with_jobsets(
        objects.jobs, jobsets)})  # fmt: skip
    known = estimate(marked)
    started = live.start_of(DOCUMENTS, "js")
    assert started is not None
    assert known.seconds is not None and abs(known.seconds - (started - NOW)) <= 1.0, known
    assert known.confidence == "high", known


def test_kbatch_run_publishes_the_estimate_of_a_held_jobset_s_group() -> None:
    """The scheduler watches JobSets (where installed): its published estimate of the
    group reads the JobSet's Jobs as held, as ``explain --eta`` does."""
    objects, jobsets = cluster_now()
    state, _ = standing.load_state(objects)
    for held in jobsets:
        state.apply({**held, "kind": "JobSet"})
    writes: list[tuple[str, str, dict]] = []
    publisher = EtaPublisher(
        state,
        default_conf,
        lambda: True,
        lambda namespace, name, patch: writes.append((namespace, name, patch)),
        SchedulerMetrics(CollectorRegistry()),
        PublisherSettings(interval=30.0, budget=30.0),
        clock=lambda: NOW,
    )
    publisher.run_once()
    conditions = {name: patch["status"]["conditions"] for _, name, patch in writes}
    condition = published.find(conditions["js"])
    assert condition is not None
    started = live.start_of(DOCUMENTS, "js")
    assert started is not None
    assert condition["message"].startswith(f"starts at {rfc3339(started)}"), condition
