"""JSON read and written fast: orjson where it reads and writes what ``json`` does,
``json`` itself where it does not.

orjson decodes a watch event, a page of pods or a recording's line two to three times
faster than ``json`` (the simulated day's recording, 2.6 million lines: 17 CPU s of
decoding down to 7) and encodes several times faster. It refuses some of what ``json``
takes (NaN and Infinity, lone surrogates in a string, an integer beyond 64 bits to
write); such a document is read, or written, by ``json`` instead, so what is accepted and
what an error says are ``json``'s. Two differences are kept: an integer beyond 64 bits
is read as the nearest float (no field kbatch reads holds one: Kubernetes' integers are
int32 and int64), and a float that is not a number is written as ``null`` (valid JSON),
where ``json`` writes ``NaN`` (which is not)."""

import json
from typing import Any

import orjson

# keys that are not strings (numbers, None, booleans) written as strings, as json does
_DUMP_OPTIONS = orjson.OPT_NON_STR_KEYS
_CANONICAL_OPTIONS = orjson.OPT_NON_STR_KEYS | orjson.OPT_SORT_KEYS


def loads(data: bytes | str) -> Any:
    """The value of the JSON document ``data`` (bytes: UTF-8); ValueError (a
    ``json.JSONDecodeError``, or a ``UnicodeDecodeError``) when it is none."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        text = data.decode() if isinstance(data, bytes | bytearray) else data
        return json.loads(text)


def dumps(value: Any) -> bytes:
    """``value`` as compact JSON (no spaces), UTF-8 encoded; TypeError for what JSON
    cannot hold."""
    try:
        return orjson.dumps(value, option=_DUMP_OPTIONS)
    except orjson.JSONEncodeError:
        return json.dumps(value, separators=(",", ":")).encode()


def canonical(value: Any) -> str:
    """``value`` as one text that is the same for equal values and differs for different
    ones (to key a cache by): compact JSON, keys sorted, and what JSON cannot hold as
    its ``str``. TypeError for what it cannot write even so (an integer beyond 64 bits,
    a lone surrogate)."""
    return orjson.dumps(value, default=str, option=_CANONICAL_OPTIONS).decode()
