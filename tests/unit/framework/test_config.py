"""Scheduler configuration: parsed strictly, errors name the line and the field."""

import json
import re
from pathlib import Path

import pytest

from kbatch.bench.scheduling import bench_conf
from kbatch.config import KUBE_BATCH_CONF, ConfigError
from kbatch.operators.scheduler.core import runner

GOOD = """\
actions: "enqueue, reclaim, allocate, backfill, preempt"
tiers:
- plugins:
  - name: priority
  - name: gang
    disableJobOrder: true
  - name: conformance
- plugins:
  - name: drf
  - name: predicates
    arguments:
      predicate.MemoryPressureEnable: true
  - name: proportion
  - name: nodeorder
"""


def test_the_design_example_parses_with_both_switch_spellings() -> None:
    conf = runner.load_conf(GOOD.replace("reclaim, ", "").replace(", preempt", ""))
    assert conf.actions == ("enqueue", "allocate", "backfill")
    gang = conf.tiers[0].plugins[1]
    assert not gang.enables("JobOrder") and gang.enables("JobReady")
    assert conf.tiers[1].plugins[1].arguments == {"predicate.MemoryPressureEnable": True}


def test_default_conf_is_the_design_default() -> None:
    """kube-batch's tiers; borrowing, reclaim and reserve on (DESIGN §14)."""
    conf = runner.default_conf()
    assert conf.actions == ("enqueue", "reclaim", "allocate", "backfill", "reserve")
    assert [[p.name for p in t.plugins] for t in conf.tiers] == [
        ["priority", "gang", "conformance"],
        ["drf", "predicates", "proportion", "nodeorder"],
    ]
    assert conf.tiers[1].plugins[2].arguments == {"borrowing": True}


def test_the_kube_batch_conf_file_is_kube_batchs_default() -> None:
    """examples/conf/kube-batch.yaml, the documented way back to kube-batch's behaviour,
    is KUBE_BATCH_CONF, the conf ``kbatch bench`` measures with."""
    path = Path(__file__).parents[3] / "examples" / "conf" / "kube-batch.yaml"
    conf = runner.load_conf_file(path)
    assert conf == runner.load_conf(KUBE_BATCH_CONF)
    assert conf.actions == ("enqueue", "allocate", "backfill")
    assert all(not p.arguments for t in conf.tiers for p in t.plugins)
    assert bench_conf().tiers == conf.tiers


def test_proportion_refuses_an_unknown_argument_or_a_bad_borrowing() -> None:
    text = KUBE_BATCH_CONF.replace("- name: proportion", "- name: proportion\n    arguments: {%s}")
    with pytest.raises(ConfigError, match="unknown argument 'borrow' for plugin proportion"):
        runner.load_conf(text % "borrow: true")
    with pytest.raises(ConfigError, match="borrowing must be true or false, not 'maybe'"):
        runner.load_conf(text % "borrowing: maybe")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            'actions: "enqueue, alocate"\ntiers:\n- plugins:\n  - name: gang\n',
            "line 1: unknown action 'alocate'",
        ),
        (
            'actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n  - name: gnag\n',
            "line 5: unknown plugin 'gnag'",
        ),
        ('actions: "allocate"\ntiers: []\n', "tiers: must have at least 1 item"),
        ('actions: "allocate"\n', "tiers: required"),
        (
            'actions: "allocate"\ntiers:\n- plugins: []\n',
            "line 3: tiers[0].plugins: must have at least 1 item",
        ),
        (
            'actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n    enableJobOrder: "no"\n',
            "enableJobOrder must be true or false",
        ),
        (
            'actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n    colour: red\n',
            "colour: unknown field",
        ),
        ("actions: 3\ntiers:\n- plugins:\n  - name: gang\n", "actions"),
        ('actions: ""\ntiers:\n- plugins:\n  - name: gang\n', "no action named"),
        ("actions: [unclosed\n", "not valid YAML"),
        ("- just\n- a list\n", "expected a mapping"),
        ('actions: "allocate, allocate"\ntiers:\n- plugins:\n  - name: gang\n', "listed twice"),
        (
            'actions: "allocate"\ntiers:\n- plugins:\n  - name: predicates\n    arguments: {predicate.MemoryPressureEnable: maybe}\n',
            "tiers[0] plugin predicates: arguments: predicate.MemoryPressureEnable must be true or false",
        ),
        (
            'actions: "allocate"\ntiers:\n- plugins:\n  - name: nodeorder\n    arguments: {leastrequested.weight: -1}\n',
            "plugin nodeorder: arguments: leastrequested.weight",
        ),
        (
            'actions: "enqueue, reserve"\ntiers:\n- plugins:\n  - name: gang\n'
            "reserve: {starvingAfter: 30}\n",
            "line 5: reserve.starvingAfter: 30 is not a duration: write it as a string",
        ),
        (
            'actions: "enqueue, reserve"\ntiers:\n- plugins:\n  - name: gang\n'
            "reserve: {after: 30s}\n",
            "line 5: reserve.after: unknown field",
        ),
    ],
)
def test_bad_configs_are_refused_with_a_clear_error(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        runner.load_conf(text, "conf.yaml")
    assert message in str(caught.value)
    assert str(caught.value).startswith("conf.yaml")


def test_reserve_waits_30s_before_a_group_goes_ahead_of_the_room_unless_told() -> None:
    assert runner.default_conf().reserve.starving_after_seconds == 30.0
    told = runner.load_conf(KUBE_BATCH_CONF + "reserve:\n  starvingAfter: 2m\n")
    assert told.reserve.starving_after_seconds == 120.0
    # as a recording keeps it, and reads it back
    dumped = json.dumps(told.model_dump(mode="json", exclude_defaults=True))
    assert runner.load_conf(dumped) == told


VOLCANO_TUNED = """\
actions: "enqueue, allocate, backfill, preempt"
configurations:
- name: preempt
  arguments:
    minCandidateNodesPercentage: 20
    enableTopologyAwarePreemption: false
- name: allocate
  arguments:
    predicateErrorCacheEnable: true
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: overcommit
  - name: predicates
  - name: proportion
  - name: nodeorder
    arguments:
      imagelocality.weight: 1
"""


def test_volcano_s_action_configurations_are_accepted_and_kept() -> None:
    """Volcano's own knobs per action (``configurations:``): accepted, so that a tuned
    Volcano conf loads as it is; kbatch has no counterpart and reads none of them."""
    conf = runner.load_conf(VOLCANO_TUNED)
    assert [entry.name for entry in conf.configurations] == ["preempt", "allocate"]
    assert conf.configurations[0].arguments["minCandidateNodesPercentage"] == 20
    again = runner.load_conf(json.dumps(conf.model_dump(mode="json")))  # (as recorded)
    assert again == conf


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (
            "- name: preempt\n  arguments:\n    minCandidateNodes: 5\n",
            "line 3: configurations[0]: unknown argument 'minCandidateNodes' for action "
            "preempt (kbatch reads none; Volcano's accepted and not used: "
            "enableTopologyAwarePreemption, maxCandidateNodesAbsolute",
        ),
        (
            "- name: enqueue\n  arguments:\n    overcommit-factor: 1.5\n",
            "unknown argument 'overcommit-factor' for action enqueue (kbatch reads none; "
            "Volcano's accepted and not used: none); it is the overcommit plugin's argument now",
        ),
        ("- name: shuffle\n", "line 3: configurations[0]: unknown action 'shuffle'"),
        ("- arguments: {}\n", "configurations[0].name"),
    ],
)
def test_a_bad_action_configuration_is_refused_naming_it(entry: str, message: str) -> None:
    text = (
        'actions: "enqueue, allocate"\nconfigurations:\n'
        + entry
        + "tiers:\n- plugins:\n  - name: gang\n"
    )
    with pytest.raises(ConfigError, match=re.escape(message)):
        runner.load_conf(text)
