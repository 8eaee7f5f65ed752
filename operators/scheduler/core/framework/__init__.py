"""The scheduling framework: session, statement, tiers, and the scheduler-side models.

Pure Python + numpy. It sees the cluster only through ``interface.Backend``.
"""
