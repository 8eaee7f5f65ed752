"""The switchboard of kbatch's shortcuts: each is a piece of work kept or skipped for
speed (mostly work kept from the last snapshot or session), and each has a
straightforward way that gives the same answer. One frozen ``Shortcuts`` is handed to
the cluster state, the scheduler (and through it every session) and the simulator;
tests switch a shortcut off here to hold it to the straightforward answer.

It lives in the core because the core reads it and imports no outer layer; the cluster
state and the simulator import it from here.
"""

import dataclasses
from dataclasses import dataclass
from typing import Self


@dataclass(frozen=True, slots=True)
class Shortcuts:
    """Which shortcuts are on (all of them by default; ``none()``: the straightforward
    way everywhere). Each field keeps, when on, what its name says; off, the work is
    done anew each time.

    The cluster state's records (``kbatch.cluster.records``):
      pod_record_of_status_writes: a pod whose status and node alone were written keeps
        the rest of its last record (off: parsed whole);
      pod_spec_of_equal_inputs: a pod's parsed spec kept while the labels and spec
        fields it was parsed from are equal (off: keyed again at every update);
      parsed_of_status_writes: a PodGroup or Queue whose status alone was written keeps
        the rest as parsed (off: validated whole).
      pod_records_of_source: a pod made of another state's (the ETA's forward run, of
        the listed pods) takes that one's record but for its identity, times and status
        (off: parsed whole).
    The snapshot builder (``kbatch.cluster``):
      task_runs: a job's tasks accounted run by run of one template, role, priority and
        status (off: task by task);
      lookup_runs: a pod's spec and unit looked up once per run of pods alike (off: per
        pod);
      unchanged_jobs: a job with tasks that nothing wrote and no session touched kept
        from one snapshot to the next (off: made anew);
      unchanged_jobs_without_tasks: a job without tasks kept the same way;
      jobs_from_last_snapshot: a snapshot's jobs made from the last one's by what was
        written and what sessions said they changed (off: every group walked);
      job_order_from_changes: their order known from how the shown groups changed (off:
        every group compared);
      pods_of_changed_units_only: the pass walks the pods of the jobs that changed since
        the last snapshot (off: every pod);
      group_parts_of_status_writes: a group whose status alone was written keeps its
        last version's parts (off: worked out anew);
      jobs_without_tasks: a group's job without tasks kept from one snapshot to the next;
      unchanged_nodes: a snapshot of the same Node records made of the last one's nodes,
        only those whose tasks may differ placed again (off: every node made);
      nodes_of_known_units_only: those nodes found from the units that changed (off:
        from every unit);
      task_places: a task's place in snapshot order kept on it once looked up (off:
        looked up at every sort of a node's tasks).
    The scheduler's sessions (``kbatch.operators.scheduler.core``):
      refused_queue_stays_first: enqueue's queue first in line keeps its turn through its
        refusals (off: a turn through the heap each);
      refuse_alike_at_once: a session that admits no group refuses them kind by kind
        (off: the line put in order);
      statuses_of_untouched_jobs: a job's status kept by the last session that did not
        touch it, from the same inputs (off: worked out again);
      pass_quiet_gangs: a running gang whose only condition at the last close was that it
        is scheduled is not asked again whether it is valid and ready;
      queue_statuses: a queue's status built once for the same sums and counts;
      rest_quiet_gangs: running gangs nothing changed rest through the session (off:
        every pass walks every job);
      preemptor_queue_keys: preempt's and reclaim's queue order keys kept while no task
        changed (off: asked before every job);
      count_anti_affinity_when_asked: the pods with required anti-affinity counted when
        first asked (off: at the open);
      count_anti_affinity_by_node_set: counted by the node set as tasks come and go (off:
        every node's tasks walked);
      sums_by_bincount: a snapshot's sums from zeros by ``np.bincount`` (off:
        ``np.add.at``);
      bound_by_what_may_go: eviction tries only nodes where the jobs that may lose
        anything hold enough;
      bound_by_offered: and where what the plugins could offer for the task makes room;
      drf_shares_when_needed: a job's drf share worked out when first needed (off: every
        job's at the open);
      drf_holding_nothing_first: a job without tasks keyed 0.0 without its row;
      queue_sums: proportion's queue sums kept from the last session's by the jobs that
        changed (off: every job added up);
      queue_sums_by_unchanged_jobs: the jobs the snapshot's delta keeps unchanged not
        compared (off: each compared);
      deserved_shares: proportion's deserved shares between flat queues kept from the
        last open while the total and the queues' weights, requests and capabilities
        are the same (off: water-filled at every open);
      node_index_across_sessions: the node index kept while the nodes say the same;
      node_index_by_version: kept, without a comparison, for the same Node records.
    The simulator (``kbatch.sim``):
      timestamps: the recent seconds' timestamps kept, not formatted anew;
      hand_over_writes: the simulator's writes handed to the state as they are (off:
        copied);
      hand_over_statuses: a status written with the model it was dumped from, taken as
        parsed (off: validated again);
      count_jobs_that_never_held: jobs without a task add nothing to the metrics' sums;
      timeline_sums: the timeline's samples and waits worked out from the jobs that
        changed since the last tick (off: every job);
      timeline_sums_by_unchanged_jobs: the jobs the snapshot's delta keeps unchanged not
        compared;
      timeline_by_jobs_said_changed: only the jobs the delta says changed, and those
        sessions changed, looked at;
      queues_of_jobs_without_tasks: the samples' queues of jobs without tasks named at
        once.
    The ETA's forecast (``kbatch.visibility.eta``):
      forward_without_history: its forward run keeps no history (``runner.Options.history``
        False: no event log but the refusals, no rows of departed work, no creation
        times), which no forecast reads (off: kept, as any simulation keeps it).
    """

    pod_record_of_status_writes: bool = True
    pod_spec_of_equal_inputs: bool = True
    parsed_of_status_writes: bool = True
    pod_records_of_source: bool = True
    task_runs: bool = True
    lookup_runs: bool = True
    unchanged_jobs: bool = True
    unchanged_jobs_without_tasks: bool = True
    jobs_from_last_snapshot: bool = True
    job_order_from_changes: bool = True
    pods_of_changed_units_only: bool = True
    group_parts_of_status_writes: bool = True
    jobs_without_tasks: bool = True
    unchanged_nodes: bool = True
    nodes_of_known_units_only: bool = True
    task_places: bool = True
    refused_queue_stays_first: bool = True
    refuse_alike_at_once: bool = True
    statuses_of_untouched_jobs: bool = True
    pass_quiet_gangs: bool = True
    queue_statuses: bool = True
    rest_quiet_gangs: bool = True
    preemptor_queue_keys: bool = True
    count_anti_affinity_when_asked: bool = True
    count_anti_affinity_by_node_set: bool = True
    sums_by_bincount: bool = True
    bound_by_what_may_go: bool = True
    bound_by_offered: bool = True
    drf_shares_when_needed: bool = True
    drf_holding_nothing_first: bool = True
    queue_sums: bool = True
    queue_sums_by_unchanged_jobs: bool = True
    deserved_shares: bool = True
    node_index_across_sessions: bool = True
    node_index_by_version: bool = True
    timestamps: bool = True
    hand_over_writes: bool = True
    hand_over_statuses: bool = True
    count_jobs_that_never_held: bool = True
    timeline_sums: bool = True
    timeline_sums_by_unchanged_jobs: bool = True
    timeline_by_jobs_said_changed: bool = True
    queues_of_jobs_without_tasks: bool = True
    forward_without_history: bool = True

    @classmethod
    def none(cls) -> Self:
        """Every shortcut off: the straightforward way everywhere."""
        return cls(**dict.fromkeys(cls.names(), False))

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """Every shortcut's name, in the fields' order."""
        return tuple(field.name for field in dataclasses.fields(cls))

    def without(self, *names: str) -> Self:
        """These shortcuts off, the others as they are; an unknown name is refused."""
        unknown = sorted(set(names) - set(self.names()))
        if unknown:
            raise ValueError(f"Shortcuts: no shortcut named {', '.join(unknown)}")
        return dataclasses.replace(self, **dict.fromkeys(names, False))


# Every shortcut on, as kbatch runs (immutable: shared as the default).
ALL = Shortcuts()
