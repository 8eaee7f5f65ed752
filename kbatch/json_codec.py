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
import re
from typing import Any

import orjson

# keys that are not strings (numbers, None, booleans) written as strings, as json does
_DUMP_OPTIONS = orjson.OPT_NON_STR_KEYS
_CANONICAL_OPTIONS = orjson.OPT_NON_STR_KEYS | orjson.OPT_SORT_KEYS
_INDENTED_OPTIONS = orjson.OPT_NON_STR_KEYS | orjson.OPT_INDENT_2
# What orjson writes as it is and ``json`` (its ``ensure_ascii``) escapes: DEL and
# every character beyond ASCII (in a JSON text, only ever inside a string).
_BEYOND_ASCII = re.compile("[\x7f-\U0010ffff]")


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


def dumps_indented(value: Any) -> str:
    """``value`` as ``json.dumps(value, indent=2)`` writes it (what the command line
    prints with ``-o json``), but for a float that is not a number (``null``, as
    ``dumps`` writes it) and how a float under 1e-4 is spelled (``1e-7`` for ``1e-07``,
    ``0.00001`` for ``1e-05``: the same number). orjson also writes some of what
    ``json`` refuses (a dataclass, a datetime, a UUID, an Enum's member); TypeError
    for the rest of what JSON cannot hold."""
    try:
        text = orjson.dumps(value, option=_INDENTED_OPTIONS).decode()
    except orjson.JSONEncodeError:  # (a lone surrogate, an integer beyond 64 bits, ...)
        return json.dumps(value, indent=2)
    return text if text.isascii() and "\x7f" not in text else _BEYOND_ASCII.sub(_escaped, text)


def _escaped(character: re.Match[str]) -> str:
    """A character as ``json`` escapes it: ``\\u`` and its UTF-16 code unit(s)."""
    code = ord(character.group())
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 | code >> 10:04x}\\u{0xDC00 | code & 0x3FF:04x}"


def canonical(value: Any) -> str:
    """``value`` as one text that is the same for equal values and differs for different
    ones (to key a cache by): compact JSON, keys sorted, and what JSON cannot hold as
    its ``str``. TypeError for what it cannot write even so (an integer beyond 64 bits,
    a lone surrogate)."""
    return orjson.dumps(value, default=str, option=_CANONICAL_OPTIONS).decode()
