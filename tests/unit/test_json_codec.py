"""``kbatch.json_codec``: what it reads and writes is what ``json`` reads and writes,
but for the two differences its docstring names."""

import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kbatch import json_codec

# JSON's values, as Kubernetes objects hold them (64-bit integers, finite floats)
VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(VALUES)
def test_what_it_writes_reads_back_as_json_reads_it(value: Any) -> None:
    written = json_codec.dumps(value)
    assert json.loads(written) == value
    assert json_codec.loads(written) == value
    assert json_codec.loads(written.decode()) == value
    assert b"\n" not in written  # one line of a recording


@given(VALUES)
def test_it_reads_what_json_writes(value: Any) -> None:
    assert json_codec.loads(json.dumps(value).encode()) == json.loads(json.dumps(value))
    assert json_codec.loads(json.dumps(value, ensure_ascii=False)) == value


@pytest.mark.parametrize(
    "document",
    [
        b'{"a": NaN, "b": Infinity, "c": -Infinity}',  # refused by orjson
        b'["\\ud800"]',  # a lone surrogate: refused by orjson
        b'{"name": "caf\xc3\xa9", "n": 3}',  # UTF-8, as bytes and as text
        '{"name": "café"}',
    ],
)
def test_it_reads_what_json_reads_as_json_reads_it_what_orjson_refuses_too(
    document: bytes | str,
) -> None:
    got, want = json_codec.loads(document), json.loads(document)
    assert json.dumps(got, sort_keys=True) == json.dumps(want, sort_keys=True)


def test_infinite_and_not_a_number_floats_are_read_as_json_reads_them() -> None:
    got = json_codec.loads(b"[NaN, Infinity, -Infinity]")
    assert math.isnan(got[0]) and got[1:] == [math.inf, -math.inf]


@pytest.mark.parametrize(
    ("document", "error"),
    [
        (b"{bad", json.JSONDecodeError),
        (b'{"a": 1', json.JSONDecodeError),
        (b"", json.JSONDecodeError),
        (b'{"a": "\xff"}', UnicodeDecodeError),  # not UTF-8
    ],
)
def test_what_is_not_json_is_a_value_error(document: bytes, error: type[Exception]) -> None:
    with pytest.raises(error):
        json_codec.loads(document)
    assert issubclass(error, ValueError)


def test_it_writes_what_orjson_refuses_as_json_writes_it() -> None:
    big = 2**70  # beyond 64 bits
    assert json_codec.dumps({"n": big}) == b'{"n":1180591620717411303424}'
    assert json.loads(json_codec.dumps({"n": big})) == {"n": big}
    assert json_codec.dumps(["\ud800"]) == b'["\\ud800"]'  # a lone surrogate, escaped


def test_keys_that_are_not_strings_are_written_as_json_writes_them() -> None:
    value = {1: "a", None: "b", 2.5: "c", "d": 4}
    assert json.loads(json_codec.dumps(value)) == json.loads(json.dumps(value))


def test_what_json_cannot_hold_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        json_codec.dumps({"a": {1, 2}})
    with pytest.raises(TypeError):
        json_codec.dumps({"a": object()})


def test_a_float_that_is_not_a_number_is_written_as_null() -> None:
    assert json_codec.dumps([math.nan, 1.5]) == b"[null,1.5]"


@given(VALUES)
def test_a_canonical_text_reads_back_and_ignores_key_order(value: Any) -> None:
    text = json_codec.canonical(value)
    assert json.loads(text) == value
    if isinstance(value, dict):
        assert json_codec.canonical(dict(reversed(value.items()))) == text


@given(VALUES, VALUES)
def test_different_values_have_different_canonical_texts(a: Any, b: Any) -> None:
    same_json = json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    assert (json_codec.canonical(a) == json_codec.canonical(b)) == same_json


def test_a_canonical_text_writes_what_json_cannot_hold_as_its_str() -> None:
    class Odd:
        def __str__(self) -> str:
            return "odd"

    assert json_codec.canonical({"b": Odd(), "a": {2: "x", 1: "y"}}) == (
        '{"a":{"1":"y","2":"x"},"b":"odd"}'
    )
    with pytest.raises(TypeError):
        json_codec.canonical({"n": 2**70})


# JSON's values whose text ``json`` and orjson spell alike (floats aside: below 1e-4
# the two spell the same number differently)
EXACT_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.text()
    | st.sampled_from([0.0, -0.0, 1.5, 2.0, 0.1, 1e16, 1.23e300, 123456.789]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(EXACT_VALUES)
def test_an_indented_text_is_the_one_json_writes(value: Any) -> None:
    assert json_codec.dumps_indented(value) == json.dumps(value, indent=2)


@given(VALUES)
def test_an_indented_text_reads_back(value: Any) -> None:
    assert json.loads(json_codec.dumps_indented(value)) == value


@pytest.mark.parametrize(
    "value",
    [
        {"message": "phase Pending \u2192 Inqueue"},  # the simulator's events say so
        ["\x7f", "caf\u00e9", "\u2028", "\U0001f600", "\ue000\uffff"],  # escaped by json
        {"n": 2**70, "s": "\ud800"},  # refused by orjson: written by json
        {1: [], None: {}, 2.5: "x"},  # keys that are not strings
    ],
)
def test_an_indented_text_escapes_and_falls_back_as_json_writes(value: Any) -> None:
    assert json_codec.dumps_indented(value) == json.dumps(value, indent=2)


def test_an_indented_text_of_what_json_cannot_hold_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        json_codec.dumps_indented({"a": {1, 2}})


def test_an_indented_text_of_a_float_that_is_not_a_number_is_null() -> None:
    assert json_codec.dumps_indented([math.nan]) == "[\n  null\n]"
