"""Who may use a queue, live (DESIGN §14): a Queue's spec.namespaceSelector on a real
API server. The webhook refuses a PodGroup from a namespace the selector does not
select, naming the queue, the field and the namespace; a group from a selected
namespace is admitted. kbatch run watches Namespaces: relabel the namespace after its
waiting group was admitted by the webhook and the scheduler keeps the group Pending,
telling it why (its condition and an event); label it back and it waits for room as
before.

The ``kbatch run`` with webhooks of tests/e2e/test_webhooks.py (its module fixture).
"""

from __future__ import annotations

from typing import Any

import pytest

from e2e.test_webhooks import Webhooks, eventually, pod_group, pod_groups, refusal
from e2e.test_webhooks import webhooks as webhooks  # the module's kbatch run (a fixture)
from kbatch.kubeapi import request

pytestmark = pytest.mark.e2e


def labelled_namespace(webhooks: Webhooks, stem: str, team: str) -> str:
    name = f"e2e-{stem}-{webhooks.suffix}"
    body = {"metadata": {"name": name, "labels": {"e2e-team": team}}}
    request(webhooks.api, "POST", "/api/v1/namespaces", body)
    webhooks.namespaces.append(name)
    return name


def relabel(webhooks: Webhooks, namespace: str, team: str) -> None:
    patch = {"metadata": {"labels": {"e2e-team": team}}}
    request(
        webhooks.api, "PATCH", f"/api/v1/namespaces/{namespace}", patch,
        "application/merge-patch+json",
    )  # fmt: skip


def status_of(webhooks: Webhooks, namespace: str, name: str) -> dict[str, Any]:
    return request(webhooks.api, "GET", f"{pod_groups(namespace)}/{name}").get("status") or {}


def test_a_queue_takes_groups_only_from_the_namespaces_it_selects(webhooks: Webhooks) -> None:
    team_a = f"a-{webhooks.suffix}"
    selector = {"matchLabels": {"e2e-team": team_a}}
    queue = webhooks.queue("team-a", weight=1, namespaceSelector=selector)
    ours = labelled_namespace(webhooks, "ns-a", team_a)
    theirs = labelled_namespace(webhooks, "ns-b", "b")

    refused = refusal(webhooks.api, "POST", pod_groups(theirs), pod_group("g", queue=queue))
    assert refused.status == 403
    assert (
        f"spec.queue: namespace '{theirs}' may not use queue '{queue}': its "
        f"spec.namespaceSelector (e2e-team={team_a}) does not select it"
    ) in str(refused)

    # Admitted: no pods and no minResources, the scheduler makes it Inqueue at once.
    request(webhooks.api, "POST", pod_groups(ours), pod_group("first", queue=queue))
    eventually(
        "the group of a selected namespace is admitted",
        lambda: status_of(webhooks, ours, "first").get("phase") == "Inqueue" or None,
    )

    # The namespace moves to another team. A group admitted by the webhook before it
    # did, and waiting (more than the cluster has), is held for its namespace, told why.
    waiting = pod_group("second", queue=queue, minResources={"cpu": "100000"})
    request(webhooks.api, "POST", pod_groups(ours), waiting)
    eventually(
        "the big group waits for room",
        lambda: reason_of(webhooks, ours, "second") == "NotEnoughResources" or None,
    )
    relabel(webhooks, ours, "b")
    told = (
        f"namespace '{ours}' may not use queue '{queue}': its spec.namespaceSelector "
        f"(e2e-team={team_a}) does not select it"
    )
    eventually(
        "the group is held for its namespace",
        lambda: reason_of(webhooks, ours, "second") == "NamespaceNotAllowed" or None,
    )
    status = status_of(webhooks, ours, "second")
    assert status.get("phase", "Pending") == "Pending"
    (condition,) = status["conditions"]
    assert condition["message"] == told
    events = request(
        webhooks.api, "GET", f"/api/v1/namespaces/{ours}/events?fieldSelector="
        "involvedObject.name%3Dsecond",
    )["items"]  # fmt: skip
    assert any(e["reason"] == "Unschedulable" and e["message"] == told for e in events), events
    # Selected again: it waits for room as before.
    relabel(webhooks, ours, team_a)
    eventually(
        "the group waits for room again once its namespace is selected",
        lambda: reason_of(webhooks, ours, "second") == "NotEnoughResources" or None,
    )


def reason_of(webhooks: Webhooks, namespace: str, name: str) -> str | None:
    conditions = status_of(webhooks, namespace, name).get("conditions") or []
    return next((c.get("reason") for c in conditions if c["type"] == "Unschedulable"), None)
