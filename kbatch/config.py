"""The scheduler configuration (DESIGN §4): actions and tiers of plugins, and the
network's topology levels (``topology: {levels: [...]}``, DESIGN §12).

Parsed and validated with pydantic. Errors name the YAML line and the field.
kube-batch's spellings are accepted (``disableJobOrder: true`` as well as
``enableJobOrder: false``).
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from kbatch.api import yaml_text
from kbatch.api.duration import parse_duration
from kbatch.api.errors import explain
from kbatch.config_base import ETA_BUDGET_SECONDS as ETA_BUDGET_SECONDS
from kbatch.config_base import ETA_FRESH_SECONDS as ETA_FRESH_SECONDS
from kbatch.config_base import ConfigError as ConfigError

# Seconds a group its own queue's work keeps out waits before it is admitted ahead of
# the room (``ReserveConf``): long enough that a job soon let in anyway keeps no room
# idle for it, short beside the jobs that starve (a whole-node job behind a flood).
DEFAULT_STARVING_AFTER = "30s"

# kube-batch's default, exactly: a queue's deserved share is a cap while it is over it,
# nothing is taken back, and a whole-node job can wait behind a flood of small ones for
# ever. examples/conf/kube-batch.yaml is this text; ``kbatch bench`` measures with it.
KUBE_BATCH_CONF = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
"""

# The default everywhere (``kbatch run`` without a conf, ``kbatch simulate``, the
# chart): kube-batch's tiers, plus room no queue within its share can use lent to queues
# over theirs (``borrowing``), taken back first when its owner asks (``reclaim``), and
# a whole-node job at the head of a queue within its share kept from starving behind
# small ones (``reserve``). DESIGN §14.
DEFAULT_CONF = """\
actions: "enqueue, reclaim, allocate, backfill, reserve"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
    arguments:
      borrowing: true
  - name: nodeorder
"""

# The per-function switches, as the config spells them after enable/disable.
SWITCHES = (
    "JobOrder",
    "JobReady",
    "JobPipelined",
    "TaskOrder",
    "Preemptable",
    "Reclaimable",
    "QueueOrder",
    "Predicate",
    "NodeOrder",
)


class PluginOption(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="forbid", frozen=True)

    name: Annotated[str, Field(min_length=1)]
    arguments: dict[str, Any] = Field(default_factory=dict)
    enabled: dict[str, bool] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _collect_switches(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        rest: dict[str, Any] = {}
        enabled: dict[str, bool] = {}
        for key, value in data.items():
            switch = _switch_of(key)
            if switch is None:
                rest[key] = value
                continue
            if not isinstance(value, bool):
                raise ValueError(f"{key} must be true or false, not {value!r}")
            enabled[switch] = value if key.startswith("enable") else not value
        rest["enabled"] = enabled
        return rest

    def enables(self, switch: str) -> bool:
        """Is this plugin's function ``switch`` (e.g. 'JobOrder') switched on? Default: yes."""
        return self.enabled.get(switch, True)


def _switch_of(key: str) -> str | None:
    for prefix in ("enable", "disable"):
        if key.startswith(prefix) and key[len(prefix) :] in SWITCHES:
            return key[len(prefix) :]
    return None


class Tier(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    plugins: Annotated[tuple[PluginOption, ...], Field(min_length=1)]


class TopologyConf(BaseModel):
    """The network's levels as node label keys, outermost first (DESIGN §12)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    levels: Annotated[tuple[Annotated[str, Field(min_length=1)], ...], Field(min_length=1)]

    @field_validator("levels")
    @classmethod
    def _distinct(cls, levels: tuple[str, ...]) -> tuple[str, ...]:
        twice = sorted({level for level in levels if levels.count(level) > 1})
        if twice:
            raise ValueError(f"a level is listed twice: {', '.join(twice)}")
        return levels


class ReserveConf(BaseModel):
    """The reserve action's rule (DESIGN §11): how long a group that its own queue's
    running work keeps out waits Pending before enqueue admits it ahead of the idle room,
    for reserve to keep room for it as nodes drain (``starvingAfter``, a duration; 0: at
    once). Read only where ``reserve`` is among the actions."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    # As written (a recorded conf is dumped and read back), checked when read.
    starving_after: str = Field(DEFAULT_STARVING_AFTER, alias="starvingAfter")

    @field_validator("starving_after", mode="before")
    @classmethod
    def _duration(cls, value: Any) -> Any:
        parse_duration(value, "")  # (pydantic's error names reserve.starvingAfter)
        return value

    @property
    def starving_after_seconds(self) -> float:
        return parse_duration(self.starving_after, "reserve.starvingAfter")


# Volcano's action arguments (``configurations:``), by action: knobs of Volcano's own
# implementation (a cache of predicate errors, how many nodes preempt searches) that
# kbatch has no counterpart of. Accepted, so that Volcano's conf loads as it is, and
# not used (DESIGN §4, the conf reference says so); any other argument is refused.
VOLCANO_ACTION_KNOBS: dict[str, frozenset[str]] = {
    "allocate": frozenset({"predicateErrorCacheEnable"}),
    "backfill": frozenset({"predicateErrorCacheEnable"}),
    "reclaim": frozenset({"predicateErrorCacheEnable"}),
    "preempt": frozenset(
        {
            "predicateErrorCacheEnable",
            "enableTopologyAwarePreemption",
            "topologyAwarePreemptWorkerNum",
            "minCandidateNodesPercentage",
            "minCandidateNodesAbsolute",
            "maxCandidateNodesAbsolute",
        }
    ),
}


class ActionArguments(BaseModel):
    """One entry of Volcano's ``configurations:`` (an action's arguments)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Annotated[str, Field(min_length=1)]
    arguments: dict[str, Any] = Field(default_factory=dict)


class SchedulerConf(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    actions: tuple[str, ...]
    tiers: Annotated[tuple[Tier, ...], Field(min_length=1)]
    topology: TopologyConf | None = None
    reserve: ReserveConf = ReserveConf()
    configurations: tuple[ActionArguments, ...] = ()  # Volcano's; see VOLCANO_ACTION_KNOBS

    @field_validator("actions", mode="before")
    @classmethod
    def _split_actions(cls, value: Any) -> Any:
        if isinstance(value, str):
            names = tuple(part.strip() for part in value.split(",") if part.strip())
            if not names:
                raise ValueError("no action named")
            return names
        return value


@dataclass(frozen=True)
class Known:
    """The names a configuration may use (the registries of actions and plugins)."""

    actions: frozenset[str]
    plugins: frozenset[str]


def parse_conf(text: str, known: Known, source: str = "<scheduler conf>") -> SchedulerConf:
    """Parse and validate a scheduler configuration, or raise ConfigError naming the line."""
    try:
        data = yaml_text.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping with 'actions' and 'tiers'")
    try:
        conf = SchedulerConf.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = _describe(first["loc"])
        line = _line_of(yaml_text.compose(text), first["loc"])
        raise ConfigError(f"{source}{line}: {where}: {explain(first)}") from exc
    for i, action in enumerate(conf.actions):
        if action not in known.actions:
            raise ConfigError(
                f"{source}{_line_of(yaml_text.compose(text), ('actions',))}: "
                f"unknown action {action!r} "
                f"(known: {', '.join(sorted(known.actions))})"
            )
        if action in conf.actions[:i]:
            raise ConfigError(f"{source}: action {action!r} is listed twice")
    _check_configurations(conf, known, text, source)
    for t, tier in enumerate(conf.tiers):
        for p, plugin in enumerate(tier.plugins):
            if plugin.name not in known.plugins:
                line = _line_of(yaml_text.compose(text), ("tiers", t, "plugins", p, "name"))
                raise ConfigError(
                    f"{source}{line}: unknown plugin {plugin.name!r} "
                    f"(known: {', '.join(sorted(known.plugins))})"
                )
    return conf


def _check_configurations(conf: SchedulerConf, known: Known, text: str, source: str) -> None:
    """Each ``configurations`` entry names a known action, with only the Volcano knobs
    kbatch accepts for it; ConfigError naming the line otherwise."""
    for c, entry in enumerate(conf.configurations):
        line = _line_of(yaml_text.compose(text), ("configurations", c, "name"))
        if entry.name not in known.actions:
            raise ConfigError(
                f"{source}{line}: configurations[{c}]: unknown action {entry.name!r} "
                f"(known: {', '.join(sorted(known.actions))})"
            )
        knobs = VOLCANO_ACTION_KNOBS.get(entry.name, frozenset())
        for argument in entry.arguments:
            if argument not in knobs:
                accepted = ", ".join(sorted(knobs)) or "none"
                moved = _MOVED.get(argument, "")
                raise ConfigError(
                    f"{source}{line}: configurations[{c}]: unknown argument {argument!r} "
                    f"for action {entry.name} (kbatch reads none; Volcano's accepted and "
                    f"not used: {accepted}){moved}"
                )


# Where an action argument of Volcano's older releases went since.
_MOVED = {"overcommit-factor": "; it is the overcommit plugin's argument now"}


def _describe(loc: tuple[int | str, ...]) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(top)"


def _line_of(node: yaml.Node | None, loc: tuple[int | str, ...]) -> str:
    """' line N' for the YAML node at ``loc`` (or its nearest ancestor), '' if unknown."""
    found = node
    for part in loc:
        if isinstance(found, yaml.MappingNode):
            child = next((v for k, v in found.value if k.value == part), None)
        elif (
            isinstance(found, yaml.SequenceNode)
            and isinstance(part, int)
            and part < len(found.value)
        ):
            child = found.value[part]
        else:
            child = None
        if child is None:
            break
        found = child
    return f" line {found.start_mark.line + 1}" if found is not None else ""
