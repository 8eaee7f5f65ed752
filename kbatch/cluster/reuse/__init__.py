"""The caches that reuse work from one snapshot (and its session) to the next.

kube-scheduler's cache keeps its NodeInfo objects between scheduling cycles and, at
each cycle, copies into the snapshot only the nodes whose generation moved. kbatch's
snapshot builder (``kbatch.cluster.snapshot``) does the same for everything a session
reads: on a busy cluster most jobs, tasks and nodes are unchanged between two sessions,
so each is kept from the last snapshot while nothing changed it, and what was kept is
said in one place, the snapshot's ``Delta`` (``framework.delta``): its generation, the
jobs kept unchanged, and those that changed, appeared or went.

Each module here keeps one kind of thing, and says in its first line what it keeps and
when it is dropped:

- ``per_object``: what each pod, PodGroup and Node works out to (its template, task,
  group parts, allocatable row), worked out as it arrives;
- ``kept_tasks``: each pod's TaskInfo, made as the pod arrives;
- ``group_parts``: what a PodGroup's job is made from, and its job while it has no
  tasks;
- ``kept_jobs``: the last snapshot's jobs with tasks, for the next one to keep;
- ``next_jobs``: the next snapshot's jobs made from the last one's by what changed;
- ``kept_nodes``: the last snapshot's nodes, while no Node was written;
- ``settled``: which pods and PodGroups a snapshot shows, finished work left out;
- ``pod_units``: the pods by unit, in snapshot order.

Two caches that reuse work across sessions live in the scheduler core instead, because
the core may not import the cluster state: the resting gangs
(``core/framework/resting.py``) and the sums over a snapshot's jobs
(``core/framework/job_sums.py``, for proportion and the simulator's timeline). They read
only the snapshot's delta.
"""
