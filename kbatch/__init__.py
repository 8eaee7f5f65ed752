"""kbatch: a batch scheduler for Kubernetes in the tradition of kube-batch."""

__version__ = "0.1.0"
