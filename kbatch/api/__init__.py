"""The kube-batch compatible API: PodGroup and Queue as pydantic models.

Group/version ``scheduling.incubator.k8s.io/v1alpha1``. No I/O here; the CRD
manifests in ``crds/`` are generated from these models (``kbatch crds``).
"""

GROUP = "scheduling.incubator.k8s.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"

GROUP_NAME_ANNOTATION = "scheduling.k8s.io/group-name"
# A PodGroup's lifetime (DESIGN §11): a duration; "0" preemptible at any time.
LIFETIME_ANNOTATION = "kbatch.io/lifetime"
# A pod's role in its gang (DESIGN §12), counted against PodGroup spec.minTaskMember;
# Volcano's annotation is read too.
TASK_ROLE_ANNOTATION = "kbatch.io/task"
VOLCANO_TASK_ANNOTATION = "volcano.sh/task-spec"
# Topology-aware placement of a PodGroup (DESIGN §12): a level (node label key) whose one
# domain must (required) or should (preferred) hold all its pods.
TOPOLOGY_REQUIRED_ANNOTATION = "kbatch.io/topology-required"
TOPOLOGY_PREFERRED_ANNOTATION = "kbatch.io/topology-preferred"
DEFAULT_QUEUE = "default"
DEFAULT_SCHEDULER_NAMES = ("kbatch", "kube-batch")
