"""Where work stands in a live cluster, recomputed with the scheduler's own code and
never stored: what ``kbatch queues``, ``kbatch jobs`` and ``kbatch explain`` show.

``standing`` (each queue's and waiting job's place in line, and why it waits), ``eta``
(when a waiting job starts: the simulator run forward from the cluster as it is),
``eta_input`` (the live cluster as the simulator's input), ``runtimes`` (how long pods
run, and where each figure comes from) and ``output`` (the tables and the JSON/YAML).
"""
