"""Seeded clusters for the ETA's answers to be held against: a small cluster simulated
up to ``NOW`` (``scenarios.live``), with running and waiting gangs in three queues,
deadlines, lifetimes and runtimes only history knows, pods of their own, a priority
class, a grace period, a Job held for its PodGroup; and every waiting job's answer."""

import random
from typing import Any

from kbatch.operators.scheduler.core.framework.shortcuts import ALL, Shortcuts
from kbatch.operators.scheduler.core.runner import default_conf
from kbatch.visibility import eta, standing
from scenarios import live
from scenarios import objects as o

NOW = 120.0
SEEDS = (1, 2, 3)
Obj = dict[str, Any]


def documents(seed: int) -> list[Obj]:
    rng = random.Random(seed)
    docs: list[Obj] = [o.node(f"n{i}", cpu=rng.choice(("4", "8"))) for i in range(5)]
    docs += [o.queue(f"q{i}", weight=i + 1) for i in range(3)]
    docs.append(
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "urgent"},
            "value": 1000,
        }
    )
    for i in range(24):
        duration = rng.randint(10, 200)
        kind = rng.choice(("deadline", "deadline", "lifetime", "history", "history"))
        gang = live.gang(
            f"g{i:02d}",
            rng.randint(1, 4),
            str(rng.randint(1, 3)),
            queue=f"q{rng.randrange(3)}",
            duration=f"{duration}s",
            deadline=duration if kind == "deadline" else None,
            lifetime=f"{duration}s" if kind == "lifetime" else None,
            submit_at=f"{rng.randint(0, 110)}s",
        )
        for doc in gang:
            if doc["kind"] == "Pod" and rng.random() < 0.2:
                doc["spec"]["priorityClassName"] = "urgent"
            if doc["kind"] == "Pod" and rng.random() < 0.2:
                doc["spec"]["terminationGracePeriodSeconds"] = 30
        docs += gang
    for i in range(4):
        extra = {"activeDeadlineSeconds": 90} if i % 2 else {}
        pod = o.pod(f"own-{i}", cpu="1", duration="90s", **extra)
        docs.append(o.at(pod, f"{rng.randint(0, 110)}s"))
    group = o.pod_group("held", 2, "q1")
    group["spec"]["minResources"] = {"cpu": "2"}
    job = o.job("held", parallelism=2, group="held", duration="60s")
    docs += [o.at(job, "100s"), o.at(group, "100s")]
    docs.append(o.pod("theirs", scheduler="default-scheduler"))
    return docs


def cluster(seed: int) -> standing.ClusterObjects:
    return live.cluster_at(documents(seed), NOW)


def answers(objects: standing.ClusterObjects, shortcuts: Shortcuts = ALL) -> dict[str, Any]:
    """What the forecast says when asked of every waiting job, and of one of them (the
    middle one by uid): ``forecast_answers``; ``shortcuts``: the forecast's."""
    conf = default_conf()
    session, _ = standing.open_session(objects, conf)
    waiting = sorted(uid for uid, job in session.jobs.items() if standing.is_waiting(job))
    one = waiting[len(waiting) // 2]
    return {
        "all": forecast_answers(eta.forecast(session, objects, conf, waiting, shortcuts=shortcuts)),
        one: forecast_answers(eta.forecast(session, objects, conf, [one], shortcuts=shortcuts)),
    }


def forecast_answers(result: eta.Forecast) -> dict[str, Any]:
    """Each estimate, what the first session told each job asked about, where each
    started; and the forecast's step, sessions and why it stopped."""
    return {
        "estimates": {uid: e.to_json() for uid, e in sorted(result.estimates.items())},
        "first": {uid: list(told) for uid, told in sorted(result.first.items())},
        "nodes": dict(sorted(result.nodes.items())),
        "step": result.step,
        "sessions": result.sessions,
        "stopped": result.stopped,
    }
