"""The API server refuses malformed PodGroups and Queues by the CRDs' schema alone
(no webhook involved), with a 422 whose message names the field."""

from typing import Any

import pytest

from kbatch.api import GROUP, VERSION
from kbatch.kubeapi import ApiError, request

pytestmark = pytest.mark.e2e

PODGROUPS = f"/apis/{GROUP}/{VERSION}/namespaces/default/podgroups"
QUEUES = f"/apis/{GROUP}/{VERSION}/queues"


def podgroup(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "PodGroup",
        "metadata": {"name": "malformed", "namespace": "default"},
        "spec": spec,
    }


def queue(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Queue",
        "metadata": {"name": "malformed"},
        "spec": spec,
    }


@pytest.mark.parametrize(
    ("path", "body", "field", "why"),
    [
        (PODGROUPS, podgroup({"minMember": "six"}), "spec.minMember", "integer"),
        (PODGROUPS, podgroup({"minMember": 0}), "spec.minMember", "greater than or equal to 1"),
        (QUEUES, queue({"weight": "heavy"}), "spec.weight", "integer"),
        (QUEUES, queue({"weight": 0}), "spec.weight", "greater than or equal to 1"),
    ],
    ids=["minMember-six", "minMember-0", "weight-heavy", "weight-0"],
)
def test_schema_refuses(
    session_api: Any, crds: None, path: str, body: dict[str, Any], field: str, why: str
) -> None:
    with pytest.raises(ApiError) as refused:
        request(session_api, "POST", path, body)
    assert refused.value.status == 422, refused.value
    message = str(refused.value)
    assert field in message and why in message, message
    with pytest.raises(ApiError) as missing:
        request(session_api, "GET", f"{path}/malformed")
    assert missing.value.status == 404, "nothing was stored"
