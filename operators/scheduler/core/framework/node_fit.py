"""Gangs whose pods never fit on the cluster's nodes, even all empty.

Enqueue promises an admitted group its minResources out of the cluster's idle room,
and holds that room for it until its pods are placed. The cluster's room added up may
hold a gang that no packing of its pods onto the nodes does: four pods of 3 cpu on
nodes of 4 and 8 cpu (12 in all, but 1 + 2 pods). Such a gang would hold its promised
room for ever and keep every other group out, the cluster idle. So enqueue admits no
gang whose pods cannot all run at once on the empty nodes, and sends one admitted
before its pods existed (a Job held for it: delayed pod creation) back to Pending once
they show it; the gang plugin says so of a gang that is tried all the same (a conf
without enqueue).

The check is sound, never refusing a gang that fits: each node holds at most as many
of the gang's pods as it has room for its smallest request in every resource (and as
its pod count allows); if the nodes together hold fewer than minMember so, no packing
exists. For pods alike (a Job's, a gang's template) it is exact. A node the pods may
never go on as the nodes stand (``Session.lasting_failures``: their node selector or
required node affinity matches none of its labels, or it has a taint an admin set that
they do not tolerate) holds none of them: a gang for nodes the cluster lacks would
otherwise hold the room it was promised for ever too. What comes and goes (a node not
ready, cordoned, its conditions' taints) is not held against a gang.
"""

from dataclasses import dataclass

import numpy as np

from kbatch.api.quantity import format_quantity
from kbatch.operators.scheduler.core.framework import topology
from kbatch.operators.scheduler.core.framework.info import REQUIRED, JobInfo
from kbatch.operators.scheduler.core.framework.resources import EPSILON, PODS
from kbatch.operators.scheduler.core.framework.session import Session
from kbatch.operators.scheduler.core.framework.signatures import Failures

# The verdicts given in a session (its nodes' allocatable, labels and taints do not
# change within one), by a gang's pod template (its id: the pods of a Job or a gang
# share one) or smallest request and the nodes barred to all its templates (pods
# unlike), and its minMember: alike gangs are asked once.
# (and the level of which it requires one domain, if it does)
Verdicts = dict[tuple[int | bytes, int, str | None], str | None]


def never_fits(session: Session, job: JobInfo, verdicts: Verdicts) -> str | None:
    """Why ``job``'s minMember pods can never run at once on the session's nodes, even
    all empty, e.g. '4 pods of cpu 3 never fit on the nodes, even empty: they hold 3 of
    them' (in one domain of the level it requires, if it does); None when they may, or
    when its pods are not known yet. (Asked of every gang waiting, every session: alike
    pods are told by their shared template, a look at each.)"""
    tasks = iter(job.tasks.values())
    first = next(tasks, None)
    if first is None:
        return None
    template = first.template
    for task in tasks:
        if task.template is not template:
            return _unlike(session, job, verdicts)
    level = _required_level(job)
    key = (id(template), job.min_member, level)
    if key not in verdicts:
        barred = session.lasting_failures(template)
        asked = _Asked(template.request, job.min_member, barred, True, level)
        verdicts[key] = _verdict(session, asked)
    return verdicts[key]


def _unlike(session: Session, job: JobInfo, verdicts: Verdicts) -> str | None:
    """``never_fits`` of a gang whose pods have templates of their own: judged by their
    smallest request, resource by resource, on the nodes some of them may go on."""
    tasks = job.tasks.values()
    requests = {id(task.request): task.request for task in tasks}
    smallest = np.min(np.stack(list(requests.values())), axis=0)
    templates = {id(task.template): task.template for task in tasks}
    failures = [session.lasting_failures(template) for template in templates.values()]
    barred = np.ones(len(session.nodes), dtype=bool)  # (to every template)
    for failed in failures:
        barred &= _any_of(failed, len(barred))
    level = _required_level(job)
    key = (smallest.tobytes() + np.packbits(barred).tobytes(), job.min_member, level)
    if key not in verdicts:
        reasons = [(reason, mask & barred) for reason, mask in failures[0]]
        asked = _Asked(smallest, job.min_member, reasons, len(requests) == 1, level)
        verdicts[key] = _verdict(session, asked)
    return verdicts[key]


def _required_level(job: JobInfo) -> str | None:
    """The level of which the job's pods must all be in one domain, if one is."""
    request = job.topology
    return request.level if request is not None and request.mode == REQUIRED else None


def _any_of(failures: Failures, size: int) -> np.ndarray:
    """The nodes that fail any of ``failures``."""
    barred = np.zeros(size, dtype=bool)
    for _, failed in failures:
        barred |= failed
    return barred


@dataclass(frozen=True, slots=True)
class _Asked:
    """What is asked of the nodes: ``count`` pods of ``request`` (the smallest, when
    ``alike`` is False), on no node ``barred``, in one domain of ``level`` (if given)."""

    request: np.ndarray
    count: int
    barred: Failures
    alike: bool
    level: str | None


def _verdict(session: Session, asked: _Asked) -> str | None:
    allocatable = session.nodes.allocatable
    request = asked.request
    counted = np.flatnonzero(session.room_dims & (request > EPSILON))
    if not len(allocatable) or not counted.size:
        return None
    per_node = np.floor((allocatable[:, counted] + EPSILON) / request[counted]).min(axis=1)
    slots = allocatable[:, session.dims.index[PODS]]
    # (a node whose allocatable gives no pod count takes pods all the same)
    per_node = np.where(slots > 0, np.minimum(per_node, slots), per_node)
    per_node[_any_of(asked.barred, len(per_node))] = 0
    if asked.level is None:
        held, where, holds = int(per_node.sum()), "on the nodes", "they hold"
    else:  # (a level no node has a label of: topology's own check says so)
        ids, names = topology.levels_of(session).ids(asked.level)
        inside = ids >= 0
        domains = np.bincount(ids[inside], weights=per_node[inside], minlength=len(names))
        held = int(domains.max()) if len(names) else 0
        where, holds = f"in one {asked.level} domain", "the largest holds"
    if held >= asked.count or (asked.level is not None and not len(names)):
        return None
    dims = session.dims.names
    pods = ", ".join(f"{dims[i]} {format_quantity(dims[i], request[i])}" for i in counted)
    pods = pods if asked.alike else f"at least {pods}"
    why = "; ".join(f"{int(mask.sum())} {reason}" for reason, mask in asked.barred if mask.any())
    why = f" ({why})" if why else ""
    if asked.count == 1:
        return f"a pod of {pods} fits on no node, even empty{why}"
    held_of = f"{holds} {held} of them{why}"
    return f"{asked.count} pods of {pods} never fit {where}, even empty: {held_of}"
