"""A tiny Parquet writer for the reader's tests: flat columns, written as
xitongsys/parquet-go writes Armada's simulator output (a dictionary page then
PLAIN_DICTIONARY indices, or PLAIN values; one data page per column chunk), compressed
with Snappy (literals and back-references made here) or not at all; or with optional
columns and version-2 data pages, which parquet-go can write too.

Written independently of the reader, from the format's specification: the Thrift
compact protocol, the RLE/bit-packed hybrid and Snappy's framing are encoded here.
"""

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

INT32, INT64, DOUBLE, BYTE_ARRAY = 1, 2, 5, 6
UTF8 = 0


@dataclass
class Column:
    name: str
    kind: int
    values: Sequence[Any]
    dictionary: bool = False
    optional: bool = False


# --------------------------------------------------------------------------- Thrift
def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        if n < 0x80:
            out.append(n)
            return bytes(out)
        out.append((n & 0x7F) | 0x80)
        n >>= 7


def _zigzag(n: int) -> bytes:
    return _varint((n << 1) ^ (n >> 63))


# A field: (id, thrift type, value); a struct is a list of fields.
I32, I64, BINARY, LIST, STRUCT = 5, 6, 8, 9, 12


def _value(kind: int, value: Any) -> bytes:
    if kind in (I32, I64):
        return _zigzag(value)
    if kind == BINARY:
        data = value.encode() if isinstance(value, str) else value
        return _varint(len(data)) + data
    if kind == STRUCT:
        return _struct(value)
    if kind == LIST:
        element, items = value
        head = (
            bytes([(len(items) << 4) | element])
            if len(items) < 15
            else bytes([0xF0 | element]) + _varint(len(items))
        )
        return head + b"".join(_value(element, item) for item in items)
    raise AssertionError(kind)


def _struct(fields: list[tuple[int, int, Any]]) -> bytes:
    out = bytearray()
    last = 0
    for field_id, kind, value in fields:
        if value is None:
            continue
        delta = field_id - last
        if 0 < delta < 16:
            out.append((delta << 4) | kind)
        else:
            out.append(kind)
            out += _zigzag(field_id)
        out += _value(kind, value)
        last = field_id
    out.append(0)
    return bytes(out)


# --------------------------------------------------------------------------- encodings
def snappy(data: bytes) -> bytes:
    """Snappy: literals of up to 64 bytes, and a copy wherever the previous 8 bytes
    repeat at the same place (so both element kinds are exercised)."""
    out = bytearray(_varint(len(data)))
    i = literal = 0
    while i < len(data):
        if i >= 8 and data[i : i + 8] == data[i - 8 : i] and i + 8 <= len(data):
            out += _literal(data[literal:i])
            out += bytes([((8 - 1) << 2) | 2]) + (8).to_bytes(2, "little")  # copy, 2-byte offset
            i += 8
            literal = i
        else:
            i += 1
    out += _literal(data[literal:])
    return bytes(out)


def _literal(data: bytes) -> bytes:
    out = bytearray()
    for start in range(0, len(data), 64):
        chunk = data[start : start + 64]
        if len(chunk) <= 60:
            out.append((len(chunk) - 1) << 2)
        else:
            out += bytes([60 << 2, len(chunk) - 1])
        out += chunk
    return bytes(out)


def _plain(kind: int, values: Sequence[Any]) -> bytes:
    if kind == INT32:
        return struct.pack(f"<{len(values)}i", *values)
    if kind == INT64:
        return struct.pack(f"<{len(values)}q", *values)
    if kind == DOUBLE:
        return struct.pack(f"<{len(values)}d", *values)
    out = bytearray()
    for value in values:
        data = value.encode()
        out += struct.pack("<I", len(data)) + data
    return bytes(out)


def _bit_packed(values: Sequence[int], width: int) -> bytes:
    """One bit-packed run of the hybrid (values padded to a multiple of 8)."""
    padded = [*values, *[0] * (-len(values) % 8)]
    bits = sum(v << (i * width) for i, v in enumerate(padded))
    groups = len(padded) // 8
    return _varint((groups << 1) | 1) + bits.to_bytes(groups * width, "little")


def _rle(value: int, count: int, width: int) -> bytes:
    return _varint(count << 1) + value.to_bytes((width + 7) // 8, "little")


# --------------------------------------------------------------------------- the file
def write(path: Path, columns: list[Column], compress: bool = True, v2: bool = False) -> None:
    rows = len(columns[0].values)
    body = bytearray(b"PAR1")
    chunks = []
    codec = 1 if compress else 0
    squeeze = snappy if compress else bytes
    for column in columns:
        present = [v for v in column.values if v is not None]
        dictionary_offset = None
        if column.dictionary:
            entries = list(dict.fromkeys(present))
            page = _plain(column.kind, entries)
            packed = squeeze(page)
            header = [
                (1, I32, 2),
                (2, I32, len(page)),
                (3, I32, len(packed)),
                (7, STRUCT, [(1, I32, len(entries)), (2, I32, 0)]),
            ]
            dictionary_offset = len(body)
            body += _struct(header) + packed
            width = max(1, (len(entries) - 1).bit_length())
            indices = [entries.index(v) for v in present]
            # the first value as an RLE run, the rest bit-packed: both kinds of run
            values = bytes([width]) + _rle(indices[0], 1, width) + _bit_packed(indices[1:], width)
            encoding = 2
        else:
            values = _plain(column.kind, present)
            encoding = 0
        levels = b""
        if column.optional:
            defined = [0 if v is None else 1 for v in column.values]
            levels = _bit_packed(defined, 1)
        data_offset = len(body)
        if v2:
            packed = squeeze(values)
            header = [
                (1, I32, 3),
                (2, I32, len(levels) + len(values)),
                (3, I32, len(levels) + len(packed)),
                (
                    8,
                    STRUCT,
                    [
                        (1, I32, rows),
                        (2, I32, rows - len(present)),
                        (3, I32, rows),
                        (4, I32, encoding),
                        (5, I32, len(levels)),
                        (6, I32, 0),
                    ],
                ),
            ]
            body += _struct(header) + levels + packed
        else:
            raw = (struct.pack("<I", len(levels)) + levels if column.optional else b"") + values
            packed = squeeze(raw)
            header = [
                (1, I32, 0),
                (2, I32, len(raw)),
                (3, I32, len(packed)),
                (5, STRUCT, [(1, I32, rows), (2, I32, encoding), (3, I32, 3), (4, I32, 3)]),
            ]
            body += _struct(header) + packed
        meta = [
            (1, I32, column.kind),
            (2, LIST, (I32, [encoding])),
            (3, LIST, (BINARY, [column.name])),
            (4, I32, codec),
            (5, I64, rows),
            (6, I64, 0),
            (7, I64, 0),
            (9, I64, data_offset),
            (11, I64, dictionary_offset),
        ]
        chunks.append([(2, I64, data_offset), (3, STRUCT, meta)])
    schema = [[(4, BINARY, "root"), (5, I32, len(columns))]]
    for column in columns:
        schema.append(
            [
                (1, I32, column.kind),
                (3, I32, 1 if column.optional else 0),
                (4, BINARY, column.name),
                (6, I32, UTF8 if column.kind == BYTE_ARRAY else None),
            ]
        )
    group = [(1, LIST, (STRUCT, chunks)), (2, I64, 0), (3, I64, rows)]
    footer = _struct(
        [(1, I32, 1), (2, LIST, (STRUCT, schema)), (3, I64, rows), (4, LIST, (STRUCT, [group]))]
    )
    body += footer + struct.pack("<I", len(footer)) + b"PAR1"
    path.write_bytes(bytes(body))
