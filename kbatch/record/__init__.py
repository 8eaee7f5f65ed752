"""The flight recorder and its replay.

``store``: what a recording is and how it is written and read back (gzip-compressed
JSON-lines segments, rotated under a size bound) and the recorder that ``kbatch run``
and the simulator feed: every change to what the scheduler reads, each session's
time, conf and decisions, queued to a writer thread so that a session only enqueues.
``replay``: ``kbatch replay``, the same scheduler over a recording, decision by decision.
``workload`` (with ``as_submitted``): a recording as the simulator's input, its pods
submitted and running as recorded; ``playforward``: ``kbatch replay --config``, that
input simulated under the recorded conf and another, compared.
"""
