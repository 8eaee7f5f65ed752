"""The scheduler configuration loader on generated confs: a conf that cannot be used is a
ConfigError saying where and why; nothing else comes out."""

import yaml
from hypothesis import given
from hypothesis import strategies as st
from property import junk

from kbatch.config import ConfigError
from kbatch.operators.scheduler.core.runner import KNOWN, load_conf

PLUGIN_KEYS = st.sampled_from(
    ["name", "arguments", "enableJobOrder", "disablePredicate", "enabledNodeOrder", "weight"]
)
PLUGIN_NAMES = st.one_of(st.sampled_from(sorted(KNOWN.plugins)), junk.JUNK)
ARGUMENT_KEYS = st.sampled_from(
    [
        "nodeaffinity.weight",
        "leastrequested.weight",
        "binpack.weight",
        "binpack.resources",
        "binpack.cpu",
        "predicate.MemoryPressureEnable",
        "weight",
        "x",
    ]
)
PLUGINS = st.fixed_dictionaries(
    {"name": PLUGIN_NAMES},
    optional={
        "arguments": st.one_of(st.dictionaries(ARGUMENT_KEYS, junk.JUNK, max_size=3), junk.JUNK),
        "enableJobOrder": junk.JUNK,
        "disablePredicate": st.booleans(),
    },
)
ACTIONS = st.one_of(
    st.lists(st.sampled_from(sorted(KNOWN.actions)), max_size=4).map(", ".join),
    st.lists(st.sampled_from(sorted(KNOWN.actions))),
    junk.JUNK,
)
CONFS = st.fixed_dictionaries(
    {},
    optional={
        "actions": ACTIONS,
        "tiers": st.one_of(
            st.lists(st.fixed_dictionaries({"plugins": st.lists(PLUGINS, max_size=3)}), max_size=3),
            st.lists(st.dictionaries(PLUGIN_KEYS, junk.JUNK, max_size=2), max_size=2),
            junk.JUNK,
        ),
        "extra": junk.JUNK,
    },
)
TEXTS = st.one_of(
    CONFS.map(lambda conf: yaml.safe_dump(conf, allow_unicode=True)),
    st.text(max_size=40),
    st.sampled_from(["actions: [", "{", "- a\n- b", "actions: enqueue\ntiers: !!python/none"]),
)


@junk.SETTINGS
@given(TEXTS)
def test_conf_loader_raises_only_config_error(text: str) -> None:
    junk.counted("conf")
    try:
        load_conf(text)
    except ConfigError:
        pass
    except Exception as exc:
        junk.escaped("conf", exc)
