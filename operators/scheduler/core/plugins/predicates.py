"""The predicates plugin: may a task go on a node at all? (resource fit is the allocate action's)

Checks, in Kubernetes' order, each node reporting only the first check it fails
(as Kubernetes does, so the reasons' histogram counts every node once):

static — from the node's labels, taints and conditions, computed once per pod
template over all nodes and cached (the template's node selector, node
affinity, tolerations and QoS are the key):
  node Ready (and network available); not cordoned, unless the pod tolerates
  the ``node.kubernetes.io/unschedulable`` taint; nodeSelector and required
  node affinity; NoSchedule and NoExecute taints tolerated; and, when enabled,
  memory pressure (best-effort pods only, as Kubernetes), disk and PID pressure.
volumes — from the pod's persistent volume claims, as they stand (its template's
``volumes``, worked out by the cluster layer): a claim not found or not yet bound
by the PV controller bars every node; a bound PV's node affinity, and where a claim
bound on first use may be bound or provisioned, bar the nodes they do not match.
devices — from the pod's resource claims (its template's ``devices``, worked out by the
cluster layer): a claim not made yet, not found, or that kbatch cannot allocate bars
every node; an allocated claim's node selector, and where a claim's requests may be
allocated from the devices no claim holds, bar the nodes they do not match.
dynamic — from the pods on the nodes, evaluated for the nodes asked about:
  host ports; max pods; topology spread constraints that must hold
  (``DoNotSchedule``: see ``topology_spread``); required pod affinity and
  anti-affinity, and the existing pods' required anti-affinity (see ``pod_affinity``).
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from kbatch.config import PluginOption
from kbatch.operators.scheduler.core.framework.info import TaskInfo
from kbatch.operators.scheduler.core.framework.podspec import PodTemplate, Taint, Toleration
from kbatch.operators.scheduler.core.framework.resources import EPSILON, PODS
from kbatch.operators.scheduler.core.framework.session import Session
from kbatch.operators.scheduler.core.framework.signatures import Failures, Lasting
from kbatch.operators.scheduler.core.plugins import (
    arguments,
    node_index,
    pod_affinity,
    topology_spread,
)
from kbatch.operators.scheduler.core.plugins.device_checks import DeviceChecks
from kbatch.operators.scheduler.core.plugins.topology_spread import SpreadChecks
from kbatch.operators.scheduler.core.plugins.volume_checks import VolumeChecks

NAME = "predicates"

MEMORY_PRESSURE_ENABLE = "predicate.MemoryPressureEnable"
DISK_PRESSURE_ENABLE = "predicate.DiskPressureEnable"
PID_PRESSURE_ENABLE = "predicate.PIDPressureEnable"

NOT_READY = "node(s) were not ready"
NETWORK_UNAVAILABLE = "node(s) had unavailable network"
UNSCHEDULABLE = "node(s) were unschedulable"
NODE_SELECTOR = "node(s) didn't match node selector"
TAINTS = "node(s) had taints that the pod didn't tolerate"
MEMORY_PRESSURE = "node(s) had memory pressure"
DISK_PRESSURE = "node(s) had disk pressure"
PID_PRESSURE = "node(s) had pid pressure"
HOST_PORTS = "node(s) didn't have free ports for the requested pod ports"
TOO_MANY_PODS = "Too many pods"
EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"
POD_AFFINITY = "node(s) didn't match pod affinity rules"
POD_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
# A pod bound with its claims unallocated would never start on its node: one whose
# claims the cluster layer did not work out (``PodTemplate.devices``) is bound nowhere.
RESOURCE_CLAIMS = "pod has resource claims (spec.resourceClaims), which kbatch does not allocate"

# A cordoned node admits a pod that tolerates this taint (Kubernetes' CheckNodeUnschedulable).
UNSCHEDULABLE_TAINT = Taint("node.kubernetes.io/unschedulable", effect="NoSchedule")


@dataclass(frozen=True, slots=True)
class PredicatesArguments:
    memory_pressure: bool = False
    disk_pressure: bool = False
    pid_pressure: bool = False


def parse_arguments(args: Mapping[str, Any]) -> PredicatesArguments:
    """Validate the plugin's arguments (kube-batch's names); raise ValueError naming the bad one."""
    known = (MEMORY_PRESSURE_ENABLE, DISK_PRESSURE_ENABLE, PID_PRESSURE_ENABLE)
    arguments.refuse_unknown(args, known, NAME)
    return PredicatesArguments(
        memory_pressure=arguments.boolean(args, MEMORY_PRESSURE_ENABLE, False),
        disk_pressure=arguments.boolean(args, DISK_PRESSURE_ENABLE, False),
        pid_pressure=arguments.boolean(args, PID_PRESSURE_ENABLE, False),
    )


# What the static checks of a template depend on.
StaticKey = tuple[tuple[tuple[str, str], ...], object, tuple[Toleration, ...], bool, bool]


class StaticChecks:
    """The node-state checks, per template over all nodes, cached by what they depend on.
    Made of the node index alone (and the arguments): kept with it, across the sessions
    it serves (``of``)."""

    def __init__(self, index: node_index.NodeIndex, args: PredicatesArguments) -> None:
        self.index = index
        self.args = args
        index = self.index
        self.not_ready = index.condition_is_not("Ready", "True")
        self.network_unavailable = index.condition_is_not("NetworkUnavailable", "False")
        self.cordoned = index.unschedulable()
        self.memory_pressure = index.condition_is("MemoryPressure", "True")
        self.disk_pressure = index.condition_is("DiskPressure", "True")
        self.pid_pressure = index.condition_is("PIDPressure", "True")
        self._by_template: dict[PodTemplate, Failures] = {}
        self._by_value: dict[StaticKey, Failures] = {}
        self._lasting_by_template: dict[PodTemplate, Lasting] = {}
        self._lasting_by_value: dict[StaticKey, Failures] = {}

    @classmethod
    def of(cls, session: Session, args: PredicatesArguments) -> "StaticChecks":
        """The checks for ``session``'s nodes: those its node index keeps, if any, with
        what was learnt of templates by value (by template object: for this session)."""
        index = node_index.of(session)
        kept = index.derived.get((NAME, args))
        if not isinstance(kept, StaticChecks):
            kept = index.derived[(NAME, args)] = cls(index, args)
        kept.new_session()
        return kept

    def new_session(self) -> None:
        """Templates are told apart by object only within a session; by value the answers
        are kept (forgotten once there are more than ``node_index.MASKS_KEPT``)."""
        self._by_template = {}
        self._lasting_by_template = {}
        if len(self._by_value) + len(self._lasting_by_value) > node_index.MASKS_KEPT:
            self._by_value.clear()
            self._lasting_by_value.clear()

    def failures(self, template: PodTemplate) -> Failures:
        """(reason, mask over all nodes) for the failing static checks, each node once."""
        found = self._by_template.get(template)
        if found is None:
            found = self._by_value.get(key := _static_key(template))
            if found is None:
                found = first_failures(self._evaluate(template))
                self._by_value[key] = found
            self._by_template[template] = found
        return found

    def lasting(self, template: PodTemplate) -> Lasting:
        """What lasts of where pods of ``template`` may go (``LastingFn``): the nodes
        their node selector and required node affinity rule out, or a taint an admin set
        (``node_index.lasting``) they do not tolerate, or that lack a key of their topology
        spread constraints; one of them a node when they ask for host ports, one a domain
        of each key their required anti-affinity to their own kind names; how their
        spread constraints keep them apart (``topology_spread.lasting``); all on one node
        when they share a claim bound on first use, one at all when they share a
        ReadWriteOncePod claim; no node while a resource claim of theirs waits (not made
        yet, not found, or one kbatch cannot allocate)."""
        found = self._lasting_by_template.get(template)
        if found is None:
            barred = self._lasting_by_value.get(key := _static_key(template))
            if barred is None:
                untolerated = self.index.no_schedule.untolerated(template.tolerations, True)
                checks = [
                    (RESOURCE_CLAIMS, self._claimed(template)),
                    (NODE_SELECTOR, ~self._node_match(template)),
                    (TAINTS, untolerated > 0),
                ]
                barred = self._lasting_by_value[key] = first_failures(checks)
            claims = template.devices
            if claims is not None and claims.waiting:  # (no node takes it while so)
                barred = [(claims.waiting, np.ones(len(self.not_ready), dtype=bool))]
            needs = template.volumes  # (pods alike share its claims)
            together = needs is not None and bool(needs.unbound)
            alone = needs is not None and bool(needs.single_pod)
            found = Lasting(barred, _one_per(template), (), together, alone)
            if any(c.hard for c in template.spread):
                spread = topology_spread.lasting(self.index, template)
                barred = _then(barred, spread.barred)
                found = Lasting(barred, found.one_per, spread.skews, together, alone)
            self._lasting_by_template[template] = found
        return found

    def _claimed(self, template: PodTemplate) -> np.ndarray:
        """Every node for a pod with resource claims not worked out (none takes it), else
        none."""
        return np.full(len(self.not_ready), _unallocated(template))

    def _node_match(self, template: PodTemplate) -> np.ndarray:
        """The nodes whose labels match the template's node selector and affinity."""
        node_match = self.index.selector_mask(template.node_selector)
        required = template.affinity.node_required
        if required is not None:
            node_match = node_match & self.index.terms_mask(required)
        return node_match

    def _evaluate(self, template: PodTemplate) -> list[tuple[str, np.ndarray]]:
        index, args = self.index, self.args
        tolerations = template.tolerations
        tolerates_cordon = any(t.tolerates(UNSCHEDULABLE_TAINT) for t in tolerations)
        node_match = self._node_match(template)
        checks = [
            (RESOURCE_CLAIMS, self._claimed(template)),
            (NOT_READY, self.not_ready),
            (NETWORK_UNAVAILABLE, self.network_unavailable),
            (UNSCHEDULABLE, self.cordoned & (not tolerates_cordon)),
            (NODE_SELECTOR, ~node_match),
            (TAINTS, index.no_schedule.untolerated(tolerations) > 0),
        ]
        if args.memory_pressure and template.best_effort:
            checks.append((MEMORY_PRESSURE, self.memory_pressure))
        if args.disk_pressure:
            checks.append((DISK_PRESSURE, self.disk_pressure))
        if args.pid_pressure:
            checks.append((PID_PRESSURE, self.pid_pressure))
        return checks


def _one_per(template: PodTemplate) -> tuple[str, ...]:
    """The label keys of which a domain takes one pod of ``template`` at most ('': a
    node): its host ports conflict with its own, and a required anti-affinity term
    that selects its own kind keeps a second out of the first's domain."""
    keys = [""] if template.host_ports else []
    for term in template.affinity.anti_required:
        kind = (template, template.namespace)
        if pod_affinity.term_matches(term, template.namespace, kind):
            keys.append(term.topology_key)
    return tuple(keys)


def _static_key(template: PodTemplate) -> StaticKey:
    """What the static checks of ``template`` depend on."""
    return (
        template.node_selector,
        template.affinity.node_required,
        template.tolerations,
        template.best_effort,
        _unallocated(template),
    )


def _unallocated(template: PodTemplate) -> bool:
    """Has the pod resource claims whose devices were not worked out?"""
    return bool(template.resource_claims) and template.devices is None


def _then(first: Failures, then: Failures) -> Failures:
    """``first``, then what of ``then`` fails on nodes none of ``first`` does."""
    if not then:
        return first
    taken = None
    for _, failed in first:
        taken = failed if taken is None else taken | failed
    return first + first_failures(list(then), taken)


def first_failures(
    checks: list[tuple[str, np.ndarray]], taken: np.ndarray | None = None
) -> Failures:
    """Keep each node only under the first check it fails (and none already ``taken``)."""
    out: Failures = []
    for reason, failed in checks:
        if taken is not None:
            failed = failed & ~taken
        if failed.any():
            out.append((reason, failed))
            taken = failed if taken is None else taken | failed
    return out


def on_session_open(session: Session, option: PluginOption) -> None:
    args = parse_arguments(option.arguments)
    static = StaticChecks.of(session, args)
    pod_checks = pod_affinity.of(session)
    nodes = session.nodes
    pods_dim = session.dims.index[PODS]
    volumes = VolumeChecks(static.index, session)
    devices = DeviceChecks(static.index, session)
    spread = SpreadChecks(pod_checks)

    def predicate(task: TaskInfo, idx: np.ndarray) -> Failures:
        template = task.template
        failures = static.failures(template)
        needs = template.volumes
        if needs is not None:  # (a claim that waits fails the pod whole, as a PreFilter)
            barred = volumes.failures(needs)
            failures = barred if needs.waiting else _then(failures, barred)
        claims = template.devices
        if claims is not None:  # (so does a claim that waits, as DynamicResources' PreFilter)
            barred = devices.failures(claims)
            failures = barred if claims.waiting else _then(failures, barred)
        fixed = [(reason, mask[idx]) for reason, mask in failures]
        fixed = [(reason, failed) for reason, failed in fixed if failed.any()]
        dynamic: list[tuple[str, np.ndarray]] = []
        if template.host_ports:
            dynamic.append((HOST_PORTS, pod_checks.port_conflicts(template)[idx]))
        too_many = nodes.used[idx, pods_dim] + 1 > nodes.allocatable[idx, pods_dim] + EPSILON
        dynamic.append((TOO_MANY_PODS, too_many))
        if template.spread and any(c.hard for c in template.spread):
            dynamic.extend((reason, mask[idx]) for reason, mask in spread.failures(task))
        if (
            session.anti_affinity_pods
            or template.affinity.pod_required
            or template.affinity.anti_required
        ):
            dynamic.extend(_pod_affinity(pod_checks, task, idx))
        taken = np.zeros(len(idx), dtype=bool)
        for _, failed in fixed:
            taken |= failed
        return fixed + first_failures(dynamic, taken)

    session.add_predicate_fn(predicate)
    session.add_lasting_fn(static.lasting)


def _pod_affinity(
    checks: pod_affinity.PodChecks, task: TaskInfo, idx: np.ndarray
) -> list[tuple[str, np.ndarray]]:
    """Existing pods' anti-affinity first, then the task's affinity, then its anti-affinity."""
    affinity = task.template.affinity
    out: list[tuple[str, np.ndarray]] = []
    checks.pods.refresh()  # anti_kinds grows as pods with anti-affinity are placed
    if checks.pods.anti_kinds:
        out.append((EXISTING_ANTI_AFFINITY, checks.existing_anti_affinity(task)[idx]))
    if affinity.pod_required:
        out.append((POD_AFFINITY, checks.affinity(task)[idx]))
    if affinity.anti_required:
        out.append((POD_ANTI_AFFINITY, checks.anti_affinity(task)[idx]))
    return out
