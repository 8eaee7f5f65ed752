"""Volcano's scheduler conf, as its chart ships it (overcommit and binpack in the second
tier, gang's enablePreemptable), runs unchanged in the simulator: overcommit admits a
group past the idle room, up to 1.2 times the cluster, and refuses the next one saying
by how much, where kbatch's default conf admits only what the idle room holds."""

from pathlib import Path

from kbatch.sim import simulate
from scenarios.objects import Obj, node, pod, pod_group
from scenarios.runner import Outcome

VOLCANO_DEFAULT = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
"""


def gang(name: str) -> list[Obj]:
    """Two pods of 1.2 cpu for a minute; minResources 2.4 cpu."""
    group = pod_group(name, 2)
    group["spec"]["minResources"] = {"cpu": "2400m"}
    return [group, *(pod(f"{name}-{i}", cpu="1200m", group=name, duration="1m") for i in (0, 1))]


def run(config: Path | None) -> Outcome:
    docs = [node("n1", cpu="4"), *gang("a"), *gang("b"), *gang("c")]
    return Outcome(simulate(documents=docs, config=config, until="30s"))


def test_volcano_s_default_conf_admits_past_the_idle_room_up_to_its_factor(
    tmp_path: Path,
) -> None:
    conf = tmp_path / "volcano-scheduler.conf"
    conf.write_text(VOLCANO_DEFAULT)
    outcome = run(conf)
    phases = {name: outcome.group(name)["phase"] for name in "abc"}
    assert phases == {"a": "Running", "b": "Inqueue", "c": "Pending"}  # 2.4 + 2.4 <= 4.8
    refused = outcome.condition("c", "Unschedulable") or {}
    assert "overcommitted past overcommit-factor 1.2: cpu 2400m > 0 left" in refused["message"]
    assert [p["name"] for p in outcome.running()] == ["a-0", "a-1"]  # (b waits for room)


def test_kbatch_s_default_conf_admits_what_the_idle_room_holds() -> None:
    outcome = run(None)
    phases = {name: outcome.group(name)["phase"] for name in "abc"}
    assert phases == {"a": "Running", "b": "Pending", "c": "Pending"}
    refused = outcome.condition("b", "Unschedulable") or {}
    assert "cpu 2400m > 1600m free" in refused["message"]
