"""Benchmarks, each runnable alone and measuring one thing.

``scheduling`` (``kbatch bench``: one scheduling session on synthetic clusters, the
session after it on a full backlog, and the simulated day's trace), ``topology``
(``kbatch bench --topology``: topology-aware gang placement against plain placement),
``webhooks`` (admission latency of ``kbatch run``'s handlers, without HTTP), and
``armada_sim`` (``kbatch bench --armada-sim``: Armada's own simulator beside kbatch's on
Armada's workload and cluster files, reading its Parquet output with ``parquet`` and
comparing decisions with ``armada_decisions``).
"""
