"""Run a scenario file and read its outcome, whatever ran it.

A scenario is a YAML file of ordinary Kubernetes manifests whose header
comment says what must happen. ``run`` gives back an ``Outcome`` over
DESIGN §5's JSON contract; tests assert through its accessors only, so the
same tests can later take their JSON from a real cluster (a backend that
applies the files and reads the objects back into the same shape).

    outcome = run("seed-gang-job.yaml")
    assert outcome.group("qj-1")["phase"] == "Running"
    assert len(outcome.bound(job="qj-1")) == 6
"""

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kbatch.sim import simulate

HERE = Path(__file__).parent
Json = dict[str, Any]
Backend = Callable[..., Json]


def path_of(name: str | Path) -> Path:
    """A scenario by file name (in tests/scenarios) or by path."""
    path = Path(name)
    return path if path.is_absolute() or path.exists() else HERE / path


def header(name: str | Path) -> str:
    """The scenario's leading comment: what it expects, in words."""
    lines = []
    for line in path_of(name).read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        lines.append(line.lstrip("# ").rstrip())
    return "\n".join(lines)


def scenarios() -> list[Path]:
    return sorted(HERE.glob("*.yaml"))


def run(*names: str | Path, backend: Backend = simulate, **options: Any) -> "Outcome":
    """Run the scenario files together (``options``: until, period, config, documents)."""
    return Outcome(backend([path_of(n) for n in names], **options))


@dataclass(frozen=True)
class Outcome:
    json: Json

    def pods(
        self, job: str | None = None, group: str | None = None, ns: str = "default"
    ) -> list[Json]:
        """Pods in ``ns``; of Job ``job`` (named ``<job>-<n>``) or PodGroup ``group`` if given."""
        return [
            p
            for p in self.json["pods"]
            if p["namespace"] == ns
            and (job is None or p["name"].rpartition("-")[0] == job)
            and (group is None or p["podGroup"] == group)
        ]

    def pod(self, name: str, ns: str = "default") -> Json:
        return _only(self.json["pods"], f"pod {ns}/{name}", namespace=ns, name=name)

    def bound(self, job: str | None = None, group: str | None = None) -> list[Json]:
        """Pods on a node, running or finished there."""
        return [p for p in self.pods(job, group) if p["node"] is not None]

    def running(self, job: str | None = None, group: str | None = None) -> list[Json]:
        return [p for p in self.pods(job, group) if p["phase"] == "Running"]

    def evictions(self, job: str | None = None, group: str | None = None) -> int:
        return sum(p["evictions"] for p in self.pods(job, group))

    def group(self, name: str, ns: str = "default") -> Json:
        return _only(self.json["podGroups"], f"podgroup {ns}/{name}", namespace=ns, name=name)

    def condition(self, group: str, type_: str, ns: str = "default") -> Json | None:
        found = [c for c in self.group(group, ns)["conditions"] if c["type"] == type_]
        return found[0] if found else None

    def queue(self, name: str) -> Json:
        return _only(self.json["queues"], f"queue {name}", name=name)

    def events(self, reason: str | None = None, kind: str | None = None) -> list[Json]:
        return [
            e
            for e in self.json["events"]
            if (reason is None or e["reason"] == reason) and (kind is None or e["kind"] == kind)
        ]

    @property
    def summary(self) -> Json:
        return dict(self.json["summary"])


def _only(rows: list[Json], what: str, **match: str) -> Json:
    found = [r for r in rows if all(r.get(k) == v for k, v in match.items())]
    if len(found) != 1:
        raise AssertionError(f"expected one {what}, found {len(found)}")
    return found[0]
