"""The cluster layer: Kubernetes objects (raw dicts) in, the scheduler core's snapshot out.

Shared by both backends: the simulator and the Kubernetes watch cache feed a
``ClusterState``; it parses each object once, when it changes, and builds a
session's snapshot from the parsed records.
"""
