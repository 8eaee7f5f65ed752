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
exists. For pods alike (a Job's, a gang's template) it is exact. Pods unlike are
first counted by whether each fits on some node at all: a gang whose pods that do are
fewer than minMember, or fewer than a role's minimum, never runs either. A node the
pods may never go on as the nodes stand (``Session.lasting``: their node
selector or required node affinity matches none of its labels, or it has a taint an
admin set that they do not tolerate) holds none of them: a gang for nodes the cluster
lacks would otherwise hold the room it was promised for ever too. What comes and goes
(a node not ready, cordoned, its conditions' taints) is not held against a gang. Pods
alike that ask for host ports, or have a required anti-affinity to their own kind,
count one at most on a node, or in a domain of the anti-affinity's topology key; pods
alike whose topology spread constraints select them count as they can spread
(``_skewed``: no domain more than the skew above the emptiest); pods alike that share a
claim bound on first use count on one node (its volume is made for the first one's). A
gang that requires one domain of a level is counted domain by domain. A gang whose
pods' resource claims want more of the devices their requests select than there are,
all free, never runs either (``device_needs.too_few_devices``).
"""

from collections import Counter
from collections.abc import Hashable
from dataclasses import dataclass

import numpy as np

from kbatch.api.quantity import format_quantity
from kbatch.operators.scheduler.core.framework import topology
from kbatch.operators.scheduler.core.framework.device_needs import too_few_devices
from kbatch.operators.scheduler.core.framework.info import REQUIRED, JobInfo
from kbatch.operators.scheduler.core.framework.podspec import PodTemplate
from kbatch.operators.scheduler.core.framework.resources import EPSILON, PODS
from kbatch.operators.scheduler.core.framework.session import Session
from kbatch.operators.scheduler.core.framework.signatures import DomainSkew, Failures, Lasting

# The verdicts given in a session (its nodes' allocatable, labels and taints do not
# change within one), by what they were asked of: a gang's pod template (its id: the
# pods of a Job or a gang share one) or its templates and roles with their pod counts
# (pods unlike), its minMember, and the level of which it requires one domain, if it
# does: alike gangs are asked once.
Verdicts = dict[Hashable, str | None]
NOTHING_LASTS = Lasting()


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
    if session.node_devices is not None:  # (pods with resource claims wait: DRA's)
        why = too_few_devices([task.template for task in job.tasks.values()], job.min_member)
        if why is not None:
            return why
    template = first.template
    for task in tasks:
        if task.template is not template:
            return _unlike(session, job, verdicts)
    level = _required_level(job)
    key = (id(template), job.min_member, level)
    if key not in verdicts:
        lasting = session.lasting(template)
        asked = _Asked(template.request, job.min_member, lasting.barred, True, level)
        verdicts[key] = _verdict(session, asked, lasting)
    return verdicts[key]


def _unlike(session: Session, job: JobInfo, verdicts: Verdicts) -> str | None:
    """``never_fits`` of a gang whose pods have templates of their own: the pods that
    fit on no node (alone, empty) left out, against minMember and each role's minimum;
    then the rest judged by their smallest request, resource by resource, on the nodes
    some of them may go on."""
    kinds = Counter((id(task.template), task.role) for task in job.tasks.values())
    level = _required_level(job)
    roles = tuple(sorted(job.min_task_member.items()))
    key = (tuple(sorted(kinds.items())), job.min_member, level, roles)
    if key in verdicts:
        return verdicts[key]
    templates = {id(task.template): task.template for task in job.tasks.values()}
    barred = {tid: session.lasting(t).barred for tid, t in templates.items()}
    # (a pod fits on some node unless none holds one: -1, nothing tells, is not none)
    fits = {tid: _held(session, t.request, barred[tid], level) != 0 for tid, t in templates.items()}
    verdicts[key] = _too_few_fit(job, kinds, fits, templates, barred, session)
    if verdicts[key] is None:
        fitting = [tid for tid in templates if fits[tid]]
        smallest = np.min(np.stack([templates[tid].request for tid in fitting]), axis=0)
        everywhere = np.ones(len(session.nodes), dtype=bool)  # (to every template)
        for tid in fitting:
            everywhere &= _any_of(barred[tid], len(everywhere))
        reasons = [(reason, mask & everywhere) for reason, mask in barred[fitting[0]]]
        alike = len({templates[tid].request.tobytes() for tid in fitting}) == 1
        asked = _Asked(smallest, job.min_member, reasons, alike, level)
        verdicts[key] = _verdict(session, asked)
    return verdicts[key]


def _too_few_fit(
    job: JobInfo,
    kinds: Counter[tuple[int, str]],
    fits: dict[int, bool],
    templates: dict[int, PodTemplate],
    barred: dict[int, Failures],
    session: Session,
) -> str | None:
    """Why too few of the pods fit on some node to make minMember, or a role's minimum:
    '1 of its 2 pods (cpu 9) fits on no node, even empty: 1 left of the 2 it needs at
    once'; None when enough do."""
    unfit = [tid for tid in templates if not fits[tid]]
    if not unfit:
        return None
    fitting = sum(count for (tid, _), count in kinds.items() if fits[tid])
    if fitting < job.min_member:
        shown = _unfit(session, unfit, templates, barred)
        return _too_few(len(job.tasks), shown, fitting, job.min_member)
    for role, minimum in sorted(job.min_task_member.items()):
        pods = sum(count for (_, r), count in kinds.items() if r == role)
        of_role = sum(count for (tid, r), count in kinds.items() if r == role and fits[tid])
        if of_role < minimum:
            shown = _unfit(
                session, [tid for tid in unfit if (tid, role) in kinds], templates, barred
            )
            return f"role {role}: {_too_few(pods, shown, of_role, minimum)}"
    return None


def _too_few(pods: int, shown: str, fitting: int, minimum: int) -> str:
    """'1 of its 2 pods (cpu 9) fits on no node, even empty: 1 left of the 2 it needs at
    once'."""
    verb = "fits" if pods - fitting == 1 else "fit"
    return (
        f"{pods - fitting} of its {pods} pods ({shown}) {verb} on no node, even empty: "
        f"{fitting} left of the {minimum} it needs at once"
    )


def _unfit(
    session: Session,
    unfit: list[int],
    templates: dict[int, PodTemplate],
    barred: dict[int, Failures],
) -> str:
    """'cpu 9', or 'at least cpu 4; 2 node(s) didn't match node selector': what the
    pods that fit on no node ask for (the smallest), and why the first is barred."""
    requests = {templates[tid].request.tobytes(): templates[tid].request for tid in unfit}
    smallest = np.min(np.stack(list(requests.values())), axis=0)
    return _words(session, smallest, alike=len(requests) == 1) + _why(barred[unfit[0]], "; ")


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


def _held(
    session: Session,
    request: np.ndarray,
    barred: Failures,
    level: str | None,
    lasting: Lasting = NOTHING_LASTS,
) -> int:
    """How many pods of ``request`` the empty nodes hold, none ``barred``, as ``lasting``
    says of pods alike: one at most in a domain of each key of its ``one_per``, spread as
    its ``skews`` say, all on one node if ``together``, one at all if ``alone`` (in the
    largest domain of ``level``, if given); -1 when nothing tells (no node, no resource
    asked, no domain of the level: topology's own check says so)."""
    allocatable = session.nodes.allocatable
    counted = np.flatnonzero(session.room_dims & (request > EPSILON))
    if not len(allocatable) or not counted.size:
        return -1
    per_node = np.floor((allocatable[:, counted] + EPSILON) / request[counted]).min(axis=1)
    slots = allocatable[:, session.dims.index[PODS]]
    # (a node whose allocatable gives no pod count takes pods all the same)
    per_node = np.where(slots > 0, np.minimum(per_node, slots), per_node)
    per_node[_any_of(barred, len(per_node))] = 0
    if "" in lasting.one_per or lasting.alone:
        per_node = np.minimum(per_node, 1)
    levels = topology.levels_of(session)
    spread = [levels.ids(key)[0] for key in lasting.one_per if key]
    skews = lasting.skews
    together = lasting.together or lasting.alone

    def most(among: np.ndarray) -> int:
        held = min(
            _capped(per_node[among], [c[among] for c in spread]),
            _skewed(per_node[among], skews, among),
        )
        return min(held, int(per_node[among].max())) if together else held

    if level is None:
        return most(np.ones(len(per_node), dtype=bool))
    ids, names = levels.ids(level)
    if not names:
        return -1
    return max(most(ids == d) for d in range(len(names)))


def _skewed(
    per_node: np.ndarray, skews: tuple[DomainSkew, ...], among: np.ndarray | None = None
) -> int:
    """The most pods ``per_node`` hold spread as each of ``skews`` says (of the nodes
    ``among``, if given): with ``m`` in the emptiest of its domains (0 while there are
    fewer than its minimum), none holds more than ``m`` + its skew, so at most the sum
    over its domains of min(room, m + skew); the best ``m`` is the smallest room."""
    held = float(per_node.sum())
    for skew in skews:
        ids = skew.domains if among is None else skew.domains[among]
        inside = ids >= 0
        room = np.bincount(ids[inside], weights=per_node[inside])
        counted = np.bincount(ids[inside]) > 0  # (the domains of these nodes)
        room = room[counted]
        least = float(room.min()) if len(room) >= skew.min_domains and len(room) else 0.0
        most = float(np.minimum(room, least + skew.max_skew).sum())
        held = min(held, most + float(per_node[~inside].sum()))
    return int(held)


def _capped(per_node: np.ndarray, spread: list[np.ndarray]) -> int:
    """The pods ``per_node`` hold, one at most in a domain of each of ``spread`` (per
    node, its domain's number; -1: it has none, and holds as many as it has room for)."""
    held = float(per_node.sum())
    for ids in spread:
        inside = ids >= 0
        domains = np.bincount(ids[inside], weights=per_node[inside])
        held = min(held, float(np.minimum(domains, 1).sum() + per_node[~inside].sum()))
    return int(held)


def _verdict(
    session: Session,
    asked: _Asked,
    lasting: Lasting = NOTHING_LASTS,
) -> str | None:
    """Why ``asked`` never fits (None: it may), ``lasting`` as ``_held`` takes it (pods
    alike only)."""
    held = _held(session, asked.request, asked.barred, asked.level, lasting)
    if held < 0 or held >= asked.count:
        return None
    pods = _words(session, asked.request, asked.alike)
    spread = [f"at most one per {key or 'node'}" for key in lasting.one_per]
    spread += [f"spread over {s.key} with a skew of {s.max_skew} at most" for s in lasting.skews]
    if lasting.alone:
        spread.append("one at a time: they share a ReadWriteOncePod claim")
    elif lasting.together:
        spread.append("all on one node, where the volume of a claim they share is made")
    why = "; ".join(filter(None, [_why(asked.barred, ""), *spread]))
    why = f" ({why})" if why else ""
    if asked.count == 1:
        return f"a pod of {pods} fits on no node, even empty{why}"
    if asked.level is None:
        where, holds = "on the nodes", "they hold"
    else:
        where, holds = f"in one {asked.level} domain", "the largest holds"
    return (
        f"{asked.count} pods of {pods} never fit {where}, even empty: {holds} {held} of them{why}"
    )


def _why(barred: Failures, before: str) -> str:
    """'2 node(s) didn't match node selector' after ``before``; '' when none is barred."""
    why = "; ".join(f"{int(mask.sum())} {reason}" for reason, mask in barred if mask.any())
    return f"{before}{why}" if why else ""


def _words(session: Session, request: np.ndarray, alike: bool) -> str:
    """'cpu 3, memory 1Gi' (what a pod asks for, of the room enqueue counts)."""
    dims = session.dims.names
    counted = np.flatnonzero(session.room_dims & (request > EPSILON))
    asked = ", ".join(f"{dims[i]} {format_quantity(dims[i], request[i])}" for i in counted)
    return asked if alike else f"at least {asked}"
