"""``fields.copied``, the simulator's copy of a raw object, gives what ``copy.deepcopy``
gives, and shares nothing that could be changed in place with what it copied."""

import copy
import datetime
from collections import OrderedDict

from hypothesis import given
from hypothesis import strategies as st

from kbatch.cluster import fields

SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
ODD = st.builds(lambda t: (t, [t]), st.text()) | st.just(datetime.date(2026, 1, 1))
TREES = st.recursive(
    SCALARS | ODD,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=5), inner, max_size=4)
        | st.builds(OrderedDict, st.dictionaries(st.text(max_size=3), inner, max_size=3))
    ),
    max_leaves=30,
)


def _containers(value: object) -> list[object]:
    """Every changeable container in ``value``, itself included."""
    found: list[object] = []
    if isinstance(value, (dict, list)):
        found.append(value)
    items = value.values() if isinstance(value, dict) else value
    if isinstance(items, (list, tuple, type({}.values()))):
        for item in items:
            found.extend(_containers(item))
    return found


@given(TREES)
def test_copied_is_deepcopy(tree: object) -> None:
    result = fields.copied(tree)
    assert result == copy.deepcopy(tree)
    assert type(result) is type(tree)
    originals = {id(c) for c in _containers(tree)}
    assert not any(id(c) in originals for c in _containers(result))
