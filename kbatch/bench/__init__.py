"""Benchmarks, each runnable alone and measuring one thing.

``scheduling`` (``kbatch bench``: one scheduling session on synthetic clusters, the
session after it on a full backlog, and the simulated day's trace), ``topology``
(``kbatch bench --topology``: topology-aware gang placement against plain placement)
and ``webhooks`` (admission latency of ``kbatch run``'s handlers, without HTTP).
"""
