"""Strict JSON text: what the readers in `patarm.io` accept.

`loads` refuses what a plain JSON reader lets through silently: duplicate keys (the last one would win),
NaN / Infinity (not JSON), and, when asked, nesting deeper than MAX_DEPTH and lone surrogate escapes
("\\ud800", half of an emoji, which no UTF-8 writer can write). `sniff` says what a file's first bytes
are when they are not UTF-8 text (UTF-16, gzip, binary...).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

MAX_DEPTH = 100  # nesting levels a row may have; real preference rows have fewer than ten
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


class JSONProblem(ValueError):
    """Why a JSON text was refused: a manifest reason code and a message (with the position when known)."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason, self.message = reason, message


def _unique_keys(pairs: list) -> dict:
    obj = dict(pairs)
    if len(obj) != len(pairs):  # a plain JSON reader would keep the last value silently
        seen: set = set()
        key = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise JSONProblem("duplicate_key", f"the key {key!r} appears twice in one object; keep one of them")
    return obj


def _no_constant(name: str) -> float:
    raise JSONProblem("non_finite", f"{name} is not a JSON number (non-finite numbers are not allowed)")


def _finite_float(literal: str) -> float:
    value = float(literal)
    if math.isinf(value):
        raise JSONProblem("non_finite", f"the number {literal[:40]} overflows to infinity")
    return value


_DECODER = json.JSONDecoder(object_pairs_hook=_unique_keys, parse_constant=_no_constant, parse_float=_finite_float)
_SCAN = _DECODER.scan_once
_SPACE = frozenset(" \t\r\n")  # JSON's whitespace


def nesting_depth(value: Any) -> int:
    """Nesting depth of a parsed JSON value (a scalar: 0), without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, (dict, list)):
            deepest = max(deepest, depth)
            stack.extend((child, depth + 1) for child in (node.values() if isinstance(node, dict) else node))
    return deepest


def lone_surrogate(text: str) -> str | None:
    """The first lone surrogate in `text` as an escape ("\\ud800"), or None; O(1) for ASCII text."""
    if text.isascii():
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"\\u{ord(exc.object[exc.start]):04x}"
    return None


SURROGATE_MESSAGE = "holds the escape {}, half of a surrogate pair and not a character (text cut inside an emoji?)"


def loads(text: str, start: int = 0, check: bool = True) -> tuple[Any, int]:
    """One strict JSON value from `text` at `start` -> (value, end index). Raises JSONProblem for invalid
    JSON, duplicate keys and NaN / Infinity, and with `check` for nesting deeper than MAX_DEPTH and lone
    surrogate escapes. The JSON-lines reader passes check=False: those two whole-text scans cost as much
    as the parse on long lines, so the loader checks the values a pair keeps instead (patarm.data.convert)."""
    try:
        value, end = _SCAN(text, start)  # the C scanner itself: JSONDecoder.raw_decode minus a Python frame
    except StopIteration as stop:
        raise JSONProblem("bad_json", f"not valid JSON (expecting a value at {_position(text, stop.value)})") from None
    except json.JSONDecodeError as exc:
        raise JSONProblem("bad_json", f"not valid JSON ({exc.msg} at {_position(text, exc.pos)})") from None
    except RecursionError:
        raise JSONProblem("too_deep", f"nested deeper than {MAX_DEPTH} levels") from None
    except JSONProblem:
        raise
    except ValueError as exc:  # e.g. an integer literal too long to convert
        raise JSONProblem("bad_json", f"not valid JSON ({exc})") from None
    if check:
        brackets = text.count("[", start, end) + text.count("{", start, end)
        if brackets > MAX_DEPTH and nesting_depth(value) > MAX_DEPTH:
            raise JSONProblem("too_deep", f"nested deeper than {MAX_DEPTH} levels")
        if _SURROGATE_ESCAPE.search(text, start, end):
            found = lone_surrogate(json.dumps(value, ensure_ascii=False))
            if found:
                raise JSONProblem("bad_encoding", "the text " + SURROGATE_MESSAGE.format(found))
    return value, end


def _position(text: str, pos: int) -> str:
    """"line L, column C" of a character offset (just the column for one-line texts)."""
    line = text.count("\n", 0, pos) + 1
    column = pos - text.rfind("\n", 0, pos)
    return f"line {line}, column {column}" if "\n" in text.rstrip("\r\n") else f"column {column}"


def loads_line(text: str, check: bool = True) -> Any:
    """A whole JSON text holding one value (a JSON line); see `loads`."""
    start = len(text) - len(text.lstrip(" \t\r\n")) if text[:1] in _SPACE else 0
    value, end = loads(text, start, check)
    if end != len(text) and not text[end:].isspace():
        raise JSONProblem("bad_json", f"not valid JSON (extra data after the value, at {_position(text, end)})")
    return value


_MAGIC = (
    (b"\xff\xfe\x00\x00", "UTF-32 text (it starts with a UTF-32 byte-order mark): re-save it as UTF-8"),
    (b"\x00\x00\xfe\xff", "UTF-32 text (it starts with a UTF-32 byte-order mark): re-save it as UTF-8"),
    (b"\xff\xfe", "UTF-16 text (it starts with a UTF-16 byte-order mark): re-save it as UTF-8"),
    (b"\xfe\xff", "UTF-16 text (it starts with a UTF-16 byte-order mark): re-save it as UTF-8"),
    (b"\x1f\x8b", "gzip-compressed data: name it .jsonl.gz / .json.gz, or decompress it"),
    (b"PK\x03\x04", "a zip archive: extract it first"),
    (b"PAR1", "a parquet file: give it the .parquet suffix"),
    (b"BZh", "bzip2-compressed data: decompress it first"),
    (b"\xfd7zXZ\x00", "xz-compressed data: decompress it first"),
    (b"\x28\xb5\x2f\xfd", "zstd-compressed data: decompress it first"),
)


def sniff(head: bytes) -> str | None:
    """What a file's first bytes say it is when that is not UTF-8 text; None when it looks like text."""
    for magic, what in _MAGIC:
        if head.startswith(magic):
            return what
    if head.count(0) * 8 >= len(head) > 0:  # text never holds NUL bytes; UTF-16 holds one in every other
        even, odd = head[0::2].count(0), head[1::2].count(0)
        if max(even, odd) * 5 >= len(head) * 2 and min(even, odd) * 10 <= len(head):
            return "UTF-16 text without a byte-order mark: re-save it as UTF-8"
        return "binary data, not text"
    if head.decode("utf-8", "replace").count("\ufffd") * 8 > len(head):
        return "binary data, or text in another encoding than UTF-8: re-save it as UTF-8"
    return None

