"""Reading Armada's simulator YAML: field names matched as Armada's decoder matches them
(case-insensitively), every value type-checked with its path, and the fields kbatch
reads past collected for one warning per file. Shared by the ClusterSpec and
WorkloadSpec readers (``kbatch.sim.workload``, ``kbatch.sim.armada_templates``).
"""

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from kbatch.api import TOPOLOGY_REQUIRED_ANNOTATION, yaml_text
from kbatch.api.errors import shown
from kbatch.cluster.quantity import amount
from kbatch.sim import clock, manifests

NAMESPACE = "armada"
CLUSTER_LABEL = "armadaproject.io/clusterName"
POOL_LABEL = "armadaproject.io/pool"
QUEUE_ANNOTATION = "kbatch.io/armada-queue"
TEMPLATE_LABEL = "kbatch.io/armada-template"
JOB_SET_LABEL = "kbatch.io/armada-job-set"
TOPOLOGY_REQUIRED = TOPOLOGY_REQUIRED_ANNOTATION
PREEMPTIBLE, DEFAULT_CLASS = "armada-preemptible", "armada-default"
ARMADA_PRIORITY = 30000
DEFAULT_PODS = "10000"

Object = dict[str, Any]


def _keys(*names: str) -> dict[str, str]:
    """Known field names by their lowercase (Armada's decoder matches them so)."""
    return {name.lower(): name for name in names}


WORKLOAD_KEYS = _keys("name", "randomSeed", "queues")
QUEUE_KEYS = _keys("name", "weight", "jobTemplates")
TEMPLATE_KEYS = _keys(
    *["id", "number", "priorityClassName", "requirements", "runtimeDistribution"],
    *["earliestSubmitTime", "earliestSubmitTimeFromDependencyCompletion", "gangCardinality"],
    *["gangNodeUniformityLabel", "dependencies", "repeat", "jobSet", "queuePriority"],
)
REQUIREMENT_KEYS = _keys(
    "resourceRequirements", "nodeSelector", "tolerations", "affinity", "annotations"
)
CLUSTER_SPEC_KEYS = _keys(
    "name", "clusters", "workflowManagerDelayDistribution", "pendingDelayDistribution"
)
# Armada's fields that kbatch reads past (named in the warning, as unknown ones are).
NOT_MODELLED = ("queuePriority", "workflowManagerDelayDistribution", "pendingDelayDistribution")


class Reader:
    """One file's fields, type-checked with their paths; what it ignores, collected."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.ignored: list[str] = []

    def error(self, path: str, why: str) -> manifests.ManifestError:
        return manifests.ManifestError(f"{self.source}: {path}: {why}")

    def fields(self, value: object, path: str, known: Mapping[str, str] | None) -> dict[str, Any]:
        """A map's known fields by kbatch's spelling (``known`` None: every key)."""
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.error(path or "(the document)", f"expected a map, not {shown(value)}")
        out = {}
        for key, item in value.items():
            name = str(key) if known is None else known.get(str(key).lower())
            if name is None or name in NOT_MODELLED:
                self.ignored.append(f"{path}.{key}" if path else str(key))
            elif item is not None:
                out[name] = item
        return out

    def items(self, value: object, path: str) -> list[Any]:
        if value is not None and not isinstance(value, list):
            raise self.error(path, f"expected a list, not {shown(value)}")
        return value or []

    def integer(self, value: object, path: str, minimum: int = 0) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise self.error(path, f"expected an integer >= {minimum}, not {shown(value)}")
        return value

    def string(self, value: object, path: str) -> str:
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise self.error(path, f"expected a string, not {shown(value)}")
        return str(value)

    def duration(self, value: object, path: str) -> float:
        try:
            return 0.0 if value is None else clock.parse_duration(value, f"{self.source}: {path}")
        except clock.DurationError as exc:
            raise manifests.ManifestError(str(exc)) from exc

    def quantities(self, value: object, path: str) -> dict[str, str]:
        out = {}
        for name, quantity in self.fields(value, path, None).items():
            try:
                amount(name, quantity)
            except ValueError as exc:
                raise self.error(f"{path}.{name}", str(exc)) from exc
            out[name] = str(quantity)
        return out

    def string_map(self, value: object, path: str) -> dict[str, str]:
        found = self.fields(value, path, None)
        return {k: self.string(v, f"{path}.{k}") for k, v in found.items()}

    def warning(self) -> str | None:
        if not self.ignored:
            return None
        return f"{self.source}: ignoring fields kbatch does not read: {', '.join(self.ignored)}"


def read_yaml(path: Path) -> object:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise manifests.ManifestError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise manifests.ManifestError(f"{path}: not UTF-8 text: {exc.reason}") from exc
    try:
        return yaml_text.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise manifests.ManifestError(f"{path}{line}: not valid YAML: {problem}") from exc


def slug(text: str) -> str:
    """A Kubernetes name of ``text``: lowercase, [a-z0-9-], no leading or trailing '-'."""
    return re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
