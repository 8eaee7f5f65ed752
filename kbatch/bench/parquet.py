"""A small Parquet reader: the flat files Armada's simulator writes (``jobs.parquet``,
``queue_stats.parquet``), read without a Parquet library.

Armada writes them with xitongsys/parquet-go: one row group or more of flat columns
(required or optional, never nested), each column chunk an optional dictionary page and
data pages (version 1 or 2), values PLAIN or dictionary-encoded (PLAIN_DICTIONARY /
RLE_DICTIONARY indices in the RLE/bit-packed hybrid), pages compressed with SNAPPY or
not at all. That subset is what this reads; anything else (a nested column, another
codec or encoding) is a ``ParquetError`` naming the file, the column and what it met.

    columns = read_columns(Path("jobs.parquet"))  # {"queue": [...], "cpu": [...], ...}

The metadata is Thrift's compact protocol, decoded generically into field-id maps; the
field ids are parquet-format's (parquet.thrift).
"""

import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

MAGIC = b"PAR1"
# parquet.thrift's physical types, encodings, codecs and page types that this reads
BOOLEAN, INT32, INT64, FLOAT, DOUBLE, BYTE_ARRAY = 0, 1, 2, 4, 5, 6
PLAIN, PLAIN_DICTIONARY, RLE, RLE_DICTIONARY = 0, 2, 3, 8
UNCOMPRESSED, SNAPPY = 0, 1
DATA_PAGE, DICTIONARY_PAGE, DATA_PAGE_V2 = 0, 2, 3
REQUIRED, OPTIONAL = 0, 1
# the BYTE_ARRAY converted types (UTF8, ENUM, JSON) whose values are text
TEXT_CONVERTED = (0, 4, 19)
_FIXED = {INT32: ("<i", 4), INT64: ("<q", 8), FLOAT: ("<f", 4), DOUBLE: ("<d", 8)}

Struct = dict[int, Any]


class ParquetError(ValueError):
    """A file this reader cannot read, with the file and what it met."""


# --------------------------------------------------------------------------- Thrift
class _Compact:
    """Thrift's compact protocol over bytes, read into field-id maps."""

    def __init__(self, data: bytes, pos: int = 0) -> None:
        self.data, self.pos = data, pos

    def byte(self) -> int:
        if self.pos >= len(self.data):
            raise ParquetError("truncated Thrift data")
        b = self.data[self.pos]
        self.pos += 1
        return b

    def varint(self) -> int:
        shift = result = 0
        while True:
            b = self.byte()
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7

    def zigzag(self) -> int:
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def binary(self) -> bytes:
        size = self.varint()
        out = self.data[self.pos : self.pos + size]
        if len(out) != size:
            raise ParquetError("truncated Thrift data")
        self.pos += size
        return out

    def value(self, kind: int) -> Any:
        if kind in (1, 2):  # boolean true / false (as a field's type)
            return kind == 1
        if kind == 3:
            return struct.unpack("b", bytes([self.byte()]))[0]
        if kind in (4, 5, 6):  # i16, i32, i64
            return self.zigzag()
        if kind == 7:
            out = struct.unpack("<d", self.data[self.pos : self.pos + 8])[0]
            self.pos += 8
            return out
        if kind == 8:
            return self.binary()
        if kind in (9, 10):  # list, set
            head = self.byte()
            size, element = head >> 4, head & 0x0F
            if size == 15:
                size = self.varint()
            if element in (1, 2):  # booleans in a list are one byte each
                return [self.byte() == 1 for _ in range(size)]
            return [self.value(element) for _ in range(size)]
        if kind == 11:
            size = self.varint()
            kinds = self.byte() if size else 0
            return {self.value(kinds >> 4): self.value(kinds & 0x0F) for _ in range(size)}
        if kind == 12:
            return self.struct()
        raise ParquetError(f"unknown Thrift type {kind}")

    def struct(self) -> Struct:
        out: Struct = {}
        last = 0
        while True:
            head = self.byte()
            if head == 0:
                return out
            delta, kind = head >> 4, head & 0x0F
            last = last + delta if delta else self.zigzag()
            out[last] = self.value(kind)


# --------------------------------------------------------------------------- Snappy
def snappy_decompress(data: bytes) -> bytes:
    """Snappy's raw format: a varint length, then literals and back-references."""
    reader = _Compact(data)
    size = reader.varint()
    out = bytearray()
    pos = reader.pos
    while pos < len(data):
        tag = data[pos]
        pos += 1
        kind = tag & 3
        if kind == 0:  # a literal; lengths above 60 follow in 1 to 4 bytes
            length = tag >> 2
            if length >= 60:
                extra = length - 59
                length = int.from_bytes(data[pos : pos + extra], "little")
                pos += extra
            length += 1
            out += data[pos : pos + length]
            pos += length
            continue
        if kind == 1:
            length, offset = ((tag >> 2) & 7) + 4, ((tag >> 5) << 8) | data[pos]
            pos += 1
        else:
            width = 2 if kind == 2 else 4
            length, offset = (tag >> 2) + 1, int.from_bytes(data[pos : pos + width], "little")
            pos += width
        if offset == 0 or offset > len(out):
            raise ParquetError("corrupt Snappy data: a copy from before the start")
        start = len(out) - offset
        for i in range(length):  # may overlap what it writes
            out.append(out[start + i])
    if len(out) != size:
        raise ParquetError(f"corrupt Snappy data: {len(out)} bytes, not {size}")
    return bytes(out)


# --------------------------------------------------------------------------- values
def _hybrid(data: bytes, pos: int, width: int, count: int) -> list[int]:
    """``count`` integers of the RLE/bit-packed hybrid from ``pos`` (no length prefix)."""
    out: list[int] = []
    reader = _Compact(data, pos)
    size = (width + 7) // 8
    mask = (1 << width) - 1
    while len(out) < count:
        header = reader.varint()
        if header & 1:  # bit-packed groups of 8, least significant bit first
            groups = header >> 1
            chunk = data[reader.pos : reader.pos + groups * width]
            reader.pos += groups * width
            bits = int.from_bytes(chunk, "little")
            out.extend((bits >> (i * width)) & mask for i in range(groups * 8))
        else:
            value = int.from_bytes(data[reader.pos : reader.pos + size], "little")
            reader.pos += size
            out.extend([value] * (header >> 1))
    return out[:count]


def _plain(data: bytes, pos: int, kind: int, count: int) -> list[Any]:
    if kind in _FIXED:
        fmt, size = _FIXED[kind]
        return list(struct.unpack_from(f"<{count}{fmt[1]}", data, pos))
    if kind == BYTE_ARRAY:
        out = []
        for _ in range(count):
            (size,) = struct.unpack_from("<I", data, pos)
            out.append(data[pos + 4 : pos + 4 + size])
            pos += 4 + size
        return out
    if kind == BOOLEAN:
        return [bool((data[pos + i // 8] >> (i % 8)) & 1) for i in range(count)]
    raise ParquetError(f"physical type {kind}")


# --------------------------------------------------------------------------- the file
def read_columns(path: Path) -> dict[str, list[Any]]:
    """Every column of a flat Parquet file, by name, in file order (text as str)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ParquetError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    if len(data) < 12 or data[:4] != MAGIC or data[-4:] != MAGIC:
        raise ParquetError(f"{path}: not a Parquet file (no PAR1 at both ends)")
    (size,) = struct.unpack("<I", data[-8:-4])
    try:
        meta = _Compact(data, len(data) - 8 - size).struct()
        schema = {e[4].decode(): e for e in meta.get(2, [])[1:]}
        if any(e.get(5) for e in schema.values()):
            raise ParquetError("a nested column (only flat files are read)")
        columns: dict[str, list[Any]] = {name: [] for name in schema}
        for group in meta.get(4, []):
            for chunk in group[1]:
                column = chunk[3]
                name = ".".join(p.decode() for p in column[3])
                if name not in schema:
                    raise ParquetError(f"column {name!r} is not in the schema")
                try:
                    columns[name] += _chunk(data, column, schema[name])
                except ParquetError as exc:
                    raise ParquetError(f"column {name!r}: {exc}") from None
    except (ParquetError, KeyError, IndexError, struct.error) as exc:
        why = exc if isinstance(exc, ParquetError) else f"malformed ({type(exc).__name__})"
        raise ParquetError(f"{path}: {why}") from None
    return columns


def _chunk(data: bytes, column: Struct, element: Struct) -> list[Any]:
    kind, codec, count = column[1], column[4], column[5]
    if codec not in (UNCOMPRESSED, SNAPPY):
        raise ParquetError(f"codec {codec} (only uncompressed and Snappy are read)")
    decompress: Callable[[bytes], bytes] = snappy_decompress if codec == SNAPPY else bytes
    optional = element.get(3, REQUIRED) == OPTIONAL
    text = kind == BYTE_ARRAY and element.get(6) in TEXT_CONVERTED
    pos = column.get(11) or column[9]  # the dictionary page first, where there is one
    dictionary: list[Any] = []
    out: list[Any] = []
    while len(out) < count:
        reader = _Compact(data, pos)
        header = reader.struct()
        body = data[reader.pos : reader.pos + header[3]]
        pos = reader.pos + header[3]
        if header[1] == DICTIONARY_PAGE:
            dictionary = _plain(decompress(body), 0, kind, header[7][1])
        elif header[1] == DATA_PAGE:
            out += _page(decompress(body), header[5], kind, optional, dictionary)
        elif header[1] == DATA_PAGE_V2:
            out += _page_v2(body, header[8], kind, optional, dictionary, decompress)
        else:
            raise ParquetError(f"page type {header[1]}")
    return [v.decode() if text and v is not None else v for v in out]


def _page(
    page: bytes, header: Struct, kind: int, optional: bool, dictionary: list[Any]
) -> list[Any]:
    count, pos = header[1], 0
    defined = [1] * count
    if optional:  # v1: the levels' byte length, then the levels (bit width 1)
        (size,) = struct.unpack_from("<I", page, 0)
        defined = _hybrid(page, 4, 1, count)
        pos = 4 + size
    return _values(page, pos, header[2], kind, defined, dictionary)


def _page_v2(
    body: bytes,
    header: Struct,
    kind: int,
    optional: bool,
    dictionary: list[Any],
    decompress: Callable[[bytes], bytes],
) -> list[Any]:
    count, levels = header[1], header[5] + header.get(6, 0)
    defined = _hybrid(body, header.get(6, 0), 1, count) if optional else [1] * count
    values = body[levels:] if header.get(7) is False else decompress(body[levels:])
    return _values(values, 0, header[4], kind, defined, dictionary)


def _values(
    page: bytes, pos: int, encoding: int, kind: int, defined: list[int], dictionary: list[Any]
) -> list[Any]:
    present = sum(defined)
    if encoding == PLAIN:
        found = _plain(page, pos, kind, present)
    elif encoding in (PLAIN_DICTIONARY, RLE_DICTIONARY):
        indices = _hybrid(page, pos + 1, page[pos], present) if present else []
        if any(i >= len(dictionary) for i in indices):
            raise ParquetError("a dictionary index past the dictionary")
        found = [dictionary[i] for i in indices]
    else:
        raise ParquetError(f"encoding {encoding} (only PLAIN and dictionary are read)")
    values = iter(found)
    return [next(values) if d else None for d in defined]
