"""An Nsight Compute report's layout, checked before ncu_report reads it: ncu_report spends memory on whatever a
file declares (a report padded with 300 MB of zeros took 9 GB and 135 s to refuse), so kbench first walks the
layout, reading its headers alone, and refuses a file whose layout does not add up.

The layout (every report Nsight Compute 2025.3 wrote, and Extra-P's reader of 2021): "NVR\\0", a uint32 size and
the file header (a protobuf message), then blocks to the file's end. A block is a uint32 size, a block header
(protobuf: field 1 its number of sources, field 2 of results, field 5 its payload's size in bytes) and the payload,
one entry (a uint32 size and a message) per source and result. A real report has ~2 blocks per kernel, each a few
KB or more; zeros read as a block or entry of size 0, which no report holds.
"""

from __future__ import annotations

import mmap
import struct
from pathlib import Path

from kbench import inputs
from kbench.errors import ConfigError

MAGIC = b"NVR\x00"  # the first bytes of every .ncu-rep
SOURCES, RESULTS, PAYLOAD = 1, 2, 5  # the block header's fields kbench reads
MAX_RECORDS = 1 << 18  # blocks and entries together: ~130,000 kernels; the walk of as many takes ~0.5 s
MAX_FIELDS = 64  # a block header's fields read before its payload size (real ones: 4 or 5)


class Corrupt(Exception):
    """Where and why the layout does not add up (turned into one ConfigError naming the file)."""

    def __init__(self, why: str, at: int) -> None:
        super().__init__(why)
        self.at = at


def check(path: Path) -> None:
    """ConfigError (exit 4) unless ``path`` is laid out as an Nsight Compute report to its last byte; TooLarge
    (exit 2) when it is over the size limit. Reads the headers alone (memory-mapped)."""
    size = inputs.check_size(path)
    with path.open("rb") as f:
        if size < len(MAGIC) + 4 or f.read(len(MAGIC)) != MAGIC:
            raise ConfigError(f"{path} is not a readable Nsight Compute report (no NVR header)")
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            try:
                walk(mapped)
            except Corrupt as e:
                raise ConfigError(
                    f"{path} is a truncated or corrupt Nsight Compute report: {e} at byte {e.at:,} of {size:,}"
                ) from None


def walk(buf: mmap.mmap | bytes) -> int:
    """The number of blocks of a report's layout (``buf`` starts with the magic); Corrupt where it does not add up."""
    end = len(buf)
    pos = _sized(buf, len(MAGIC), end, "the file header")
    records = 0
    while pos < end:
        start = pos
        header_end = _sized(buf, pos, end, "a block header")
        sources, results, payload = _block_header(buf, pos + 4, header_end)
        if payload > end - header_end:
            raise Corrupt(f"a block's payload of {payload:,} bytes runs past the file's end", start)
        pos, payload_end = header_end, header_end + payload
        entries = 0
        while pos < payload_end:
            _message_starts(buf, pos + 4, payload_end)
            pos = _sized(buf, pos, payload_end, "a payload entry")
            entries += 1
            if entries > sources + results:
                break
        if entries != sources + results:
            raise Corrupt(f"a block declares {sources + results:,} entries but its payload holds {entries:,}", start)
        records += 1 + entries
        if records > MAX_RECORDS:
            raise Corrupt(f"more than {MAX_RECORDS:,} blocks and entries (no report kbench reads has as many)", start)
    return records


def _sized(buf: mmap.mmap | bytes, pos: int, end: int, what: str) -> int:
    """The end of the size-prefixed record at ``pos`` (a uint32 size, then that many bytes, never none)."""
    if end - pos < 4:
        raise Corrupt(f"{what}'s size is cut short", pos)
    size: int = struct.unpack_from("<I", buf, pos)[0]
    if size == 0:
        raise Corrupt(f"{what} of size 0 (zeros where a record belongs)", pos)
    if size > end - pos - 4:
        raise Corrupt(f"{what} of {size:,} bytes runs past its end", pos)
    return pos + 4 + size


def _varint(buf: mmap.mmap | bytes, pos: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while pos < end and shift < 64:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
    raise Corrupt("a block header's number is cut short", pos)


def _message_starts(buf: mmap.mmap | bytes, pos: int, end: int) -> None:
    """A protobuf message begins at ``pos`` with a field numbered 1 or more (zeros never do)."""
    if pos < end and _varint(buf, pos, end)[0] >> 3 == 0:
        raise Corrupt("a payload entry that is no protobuf message (zeros where a record belongs)", pos)


def _block_header(buf: mmap.mmap | bytes, pos: int, end: int) -> tuple[int, int, int]:
    """Its number of sources, of results and its payload's size (an absent field is 0, as protobuf has it)."""
    found = {SOURCES: 0, RESULTS: 0, PAYLOAD: 0}
    for _ in range(MAX_FIELDS):
        if pos >= end:
            return found[SOURCES], found[RESULTS], found[PAYLOAD]
        _message_starts(buf, pos, end)
        key, pos = _varint(buf, pos, end)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos, end)
            found[number] = value
        elif wire in (1, 2, 5):  # 8 bytes, length-delimited, 4 bytes: skipped
            length, pos = (8, pos) if wire == 1 else (4, pos) if wire == 5 else _varint(buf, pos, end)
            pos += length
            if pos > end:
                raise Corrupt("a block header's field runs past the header's end", pos)
        else:
            raise Corrupt(f"a block header field of protobuf wire type {wire}", pos)
        if number > PAYLOAD:  # protobuf writes fields in their numbers' order: the rest is not needed
            return found[SOURCES], found[RESULTS], found[PAYLOAD]
    raise Corrupt(f"a block header of more than {MAX_FIELDS} fields", pos)
