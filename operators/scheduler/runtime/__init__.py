"""The scheduler's Kubernetes runtime: watches (informer), leader election, the
scheduling loop, health, and the backend that applies a session's outcome to the API
server — all API calls through ``kbatch.kubeapi``, the one client module.
"""
