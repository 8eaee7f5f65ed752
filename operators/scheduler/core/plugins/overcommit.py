"""The overcommit plugin (Volcano's, in its default conf): groups admitted past the idle
room, up to a factor of the cluster.

A group naming minResources is admitted (``Vote.PERMIT``) while what the admitted
groups still wait for, its own minResources added, fits in ``overcommit-factor`` times
the nodes' allocatable less what pods on them hold; past that it is refused
(``Vote.REJECT``), told by how much. Only the resources the group asks for are
compared, as Volcano compares them. With the default factor, 1.2, the groups admitted
may ask for a fifth more than the cluster holds: their pods exist and wait for room,
and start as it frees, with no admission between. A rejection stands over every
other plugin's permit (a queue's deserved share), as Volcano's does.

Volcano falls back to 1.2, with a warning, for a factor under 1; kbatch refuses the
conf, naming the argument.
"""

from collections.abc import Mapping
from typing import Any

import numpy as np

from kbatch.api.podgroup import PodGroupPhase
from kbatch.api.quantity import format_quantity
from kbatch.config import PluginOption
from kbatch.operators.scheduler.core.framework.info import JobInfo
from kbatch.operators.scheduler.core.framework.resources import EPSILON, shareable
from kbatch.operators.scheduler.core.framework.session import Session
from kbatch.operators.scheduler.core.framework.tiers import Vote
from kbatch.operators.scheduler.core.plugins import arguments

NAME = "overcommit"
FACTOR = "overcommit-factor"
DEFAULT_FACTOR = 1.2


def parse_arguments(args: Mapping[str, Any]) -> float:
    """The factor (a number, at least 1); ValueError naming the argument if not."""
    arguments.refuse_unknown(args, {FACTOR: "factor"}, NAME)
    factor = arguments.number(args, FACTOR, DEFAULT_FACTOR)
    if factor < 1.0:
        raise ValueError(f"{FACTOR} must be at least 1, not {factor:g}")
    return factor


class _Overcommit:
    def __init__(self, session: Session, factor: float) -> None:
        self.session, self.factor = session, factor
        self.mask = shareable(session.dims)
        nodes = session.nodes
        total, used = nodes.allocatable.sum(axis=0), nodes.used.sum(axis=0)
        self.room = (total * factor - used) * self.mask
        self.admitted = np.zeros(len(self.mask))  # what admitted groups still wait for
        for job in session.jobs.values():  # (resting ones too: their promise stands)
            unplaced = job.minimum_unplaced() if job.phase is PodGroupPhase.INQUEUE else None
            if unplaced is not None:
                self.admitted += unplaced * self.mask

    def enqueueable(self, job: JobInfo) -> tuple[Vote, str]:
        if job.min_resources is None:
            return Vote.ABSTAIN, ""
        need = job.min_resources * self.mask
        asked = need > EPSILON
        wanted = self.admitted + need
        over = asked & (wanted > self.room + EPSILON)
        if not over.any():
            return Vote.PERMIT, f"within overcommit-factor {self.factor:g} of the cluster"
        names = self.session.dims.names
        parts = [
            f"{names[i]} {format_quantity(names[i], need[i])} > "
            f"{format_quantity(names[i], max(self.room[i] - self.admitted[i], 0.0))} left"
            for i in np.flatnonzero(over)
        ]
        return Vote.REJECT, (
            f"the cluster would be overcommitted past overcommit-factor {self.factor:g}: "
            + ", ".join(parts)
        )

    def enqueued(self, job: JobInfo) -> None:
        unplaced = job.minimum_unplaced()
        if unplaced is not None:
            self.admitted += unplaced * self.mask


def on_session_open(session: Session, option: PluginOption) -> None:
    plugin = _Overcommit(session, parse_arguments(option.arguments))
    session.add_job_enqueueable_fn(plugin.enqueueable)
    session.add_event_handler(enqueue=plugin.enqueued)
