"""What a fresh simulated cluster has before any input: the ``default`` namespace, the
system priority classes and (our operator's) default queue."""

from kbatch.api import DEFAULT_QUEUE
from kbatch.sim.backend import SimBackend

# The priority classes every Kubernetes cluster has.
SYSTEM_PRIORITY_CLASSES = {
    "system-cluster-critical": 2000000000,
    "system-node-critical": 2000001000,
}


def make_defaults(cluster: SimBackend) -> None:
    """What a fresh cluster has: the ``default`` namespace, the system priority classes,
    and (our operator's) default queue."""
    cluster.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
    for name, value in SYSTEM_PRIORITY_CLASSES.items():
        cluster.create(
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": name},
                "value": value,
            }
        )
    cluster.create(
        {
            "apiVersion": "scheduling.incubator.k8s.io/v1alpha1",
            "kind": "Queue",
            "metadata": {"name": DEFAULT_QUEUE},
            "spec": {"weight": 1},
        }
    )
