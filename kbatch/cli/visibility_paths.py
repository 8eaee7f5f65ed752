"""Where ``kbatch queues``, ``jobs`` and ``explain`` list what they read of a cluster."""

from kbatch.api import GROUP, VERSION

# kind -> the collection across all namespaces
COLLECTIONS = {
    "Node": "/api/v1/nodes",
    "Pod": "/api/v1/pods",
    "PodGroup": f"/apis/{GROUP}/{VERSION}/podgroups",
    "Queue": f"/apis/{GROUP}/{VERSION}/queues",
    "PriorityClass": "/apis/scheduling.k8s.io/v1/priorityclasses",
    "ResourceQuota": "/api/v1/resourcequotas",
    "Job": "/apis/batch/v1/jobs",
    "PersistentVolumeClaim": "/api/v1/persistentvolumeclaims",
    "PersistentVolume": "/api/v1/persistentvolumes",
    "StorageClass": "/apis/storage.k8s.io/v1/storageclasses",
    "CSINode": "/apis/storage.k8s.io/v1/csinodes",
}
JOBSETS = "/apis/jobset.x-k8s.io/v1alpha2/jobsets"
# What is said when a user may not list a kind the commands do without (none listed then)
VOLUMES_UNKNOWN = "pods with persistent volumes are foreseen as waiting for them"
OPTIONAL = {
    "PersistentVolumeClaim": VOLUMES_UNKNOWN,
    "PersistentVolume": VOLUMES_UNKNOWN,
    "StorageClass": VOLUMES_UNKNOWN,
    "CSINode": "nodes' CSI attach limits are not counted",
}
