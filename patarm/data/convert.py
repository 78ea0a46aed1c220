"""Raw rows -> validated PreferencePairs, through the layout registry.

`convert_stream` runs a stream of (row index, raw row) through a named layout, or through per-row
auto-detection, and yields one item per manifest row: a PreferencePair, a `Drop`, or the problem that
stopped it. `assemble` applies the checks every layout shares and builds the pair (id, source, domain,
metadata from the row's small extra columns).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from patarm.data.layouts import Drop, Layout, Parts, RowProblem, detect_layout, resolve_layout
from patarm.data.schema import DataError, Message, PreferencePair
from patarm.io import MAX_DEPTH, SURROGATE_MESSAGE, lone_surrogate, nesting_depth

# Reason codes a row can be dropped for (the keys of `Manifest.dropped`).
REASONS = (
    # the row is malformed (an error unless on_error="skip")
    "not_an_object", "missing_field", "wrong_type", "empty_prompt", "empty_response",
    "identical_responses", "prompt_mismatch", "bad_prompt", "ambiguous_layout",
    # the line could not be read (patarm.io)
    "bad_json", "bad_encoding", "duplicate_key", "non_finite", "too_deep",
    # the data itself says the row holds no preference (always dropped and counted)
    "tie", "both_bad", "multi_turn", "low_score_ratio", "too_few_responses",
)

# Row keys every layout understands; they never go into `metadata` as extras.
COMMON_KEYS = frozenset({"id", "domain", "source", "metadata"})

# Extra row fields longer than this (as text / JSON) are not copied into metadata: metadata rides
# along with every pair through training, so it must stay small.
METADATA_MAX_CHARS = 1024

# One item of `convert_stream`: (row index, the raw row, PreferencePair | Drop | RowProblem | DataError, layout).
Item = tuple[int, Any, Any, str | None]


# json.dumps(..., ensure_ascii=False, sort_keys=True, separators=(",", ":")) without building an encoder per call.
_ID_JSON = json.JSONEncoder(ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode


def stable_id(prompt: list[Message], chosen: str, rejected: str) -> str:
    """Content id for rows without one: sha1 of the canonical JSON of [prompt, chosen, rejected]."""
    return hashlib.sha1(_ID_JSON([prompt, chosen, rejected]).encode("utf-8")).hexdigest()[:16]


def _text_ok(value: str, field: str) -> None:
    """A text the pair keeps must be encodable: JSON lines are read without a whole-line surrogate scan."""
    found = lone_surrogate(value)
    if found:
        raise RowProblem(field, "bad_encoding", "the text " + SURROGATE_MESSAGE.format(found))


def _check(prompt: list[Message], chosen: str, rejected: str) -> None:
    """The checks every layout shares, once the row is in canonical form."""
    if not prompt:
        raise RowProblem("prompt", "empty_prompt", "the prompt has no messages")
    if prompt[-1]["role"] != "user":
        raise RowProblem("prompt", "bad_prompt",
                         f"the prompt's last message must be from the user, not the {prompt[-1]['role']}")
    if not prompt[-1]["content"].strip():
        raise RowProblem("prompt", "empty_prompt", "the last user message is empty")
    for name, value in (("chosen", chosen), ("rejected", rejected)):
        if not isinstance(value, str):
            raise RowProblem(name, "wrong_type", f"expected text, got {type(value).__name__}")
        if not value.strip():
            raise RowProblem(name, "empty_response", "the response is empty or whitespace only")
    if chosen.strip() == rejected.strip():
        raise RowProblem("rejected", "identical_responses", "chosen and rejected are the same text")
    # isascii() is O(1): the encodability check only runs on non-ASCII texts.
    if not (chosen.isascii() and rejected.isascii()):
        _text_ok(chosen, "chosen")
        _text_ok(rejected, "rejected")
    for message in prompt:
        if not message["content"].isascii():
            _text_ok(message["content"], f"prompt[{prompt.index(message)}].content")


def _as_json(key: str, value: Any) -> str | None:
    """`value` as JSON text, or None when it is not JSON (NaN / inf, bytes, dates...); raises RowProblem
    when it is nested deeper than MAX_DEPTH or holds a lone surrogate."""
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    except RecursionError:
        raise RowProblem(key, "too_deep", f"nested deeper than {MAX_DEPTH} levels") from None
    except (TypeError, ValueError):
        return None
    if text.count("[") + text.count("{") > MAX_DEPTH and nesting_depth(value) > MAX_DEPTH:
        raise RowProblem(key, "too_deep", f"nested deeper than {MAX_DEPTH} levels")
    _text_ok(text, key)
    return text


def _small(key: str, value: Any, chosen: str, rejected: str) -> bool:
    """Whether an extra row field is small enough, and not a response copy, to keep in metadata."""
    if value is None or isinstance(value, (bool, int)):
        return True
    if isinstance(value, float):
        return math.isfinite(value)  # NaN / inf (parquet, rows in memory) are not JSON: never written
    if isinstance(value, str):
        if len(value) > METADATA_MAX_CHARS or value == chosen or value == rejected:
            return False
        _text_ok(value, key)
        return True
    if isinstance(value, (list, dict)):
        text = _as_json(key, value)
        return text is not None and len(text) <= METADATA_MAX_CHARS
    return False  # images, bytes, dates...: not JSON, would break pairs.jsonl


def _metadata(row: dict[str, Any], consumed: frozenset, chosen: str, rejected: str) -> dict[str, Any]:
    """The row's own `metadata` (whatever its size, minus values that are not JSON) plus its unknown small
    extra fields."""
    base = row.get("metadata")
    meta = dict(base) if isinstance(base, dict) else {}
    if meta and _as_json("metadata", meta) is None:
        meta = {k: v for k, v in meta.items() if _as_json(f"metadata.{k}", v) is not None}
    elif base is not None and not isinstance(base, dict) and _small("metadata", base, chosen, rejected):
        meta["metadata"] = base
    for key, value in row.items():
        if key in consumed or key in COMMON_KEYS:
            continue
        if key not in meta and _small(key, value, chosen, rejected):
            meta[key] = value
    return meta


def _optional_str(value: Any, fallback: str | None) -> str | None:
    if value is None or value == "":
        return fallback
    return value if isinstance(value, str) else str(value)


def assemble(row: dict[str, Any], parts: Parts, source_name: str | None = None,
             domain: str | None = None) -> PreferencePair:
    """Validate a layout's parts and build the pair; raises RowProblem."""
    prompt, chosen, rejected, consumed, extra, raw_id, own_source, own_domain = parts
    _check(prompt, chosen, rejected)
    if raw_id is None and "id" not in consumed:
        raw_id = row.get("id")
    if raw_id is None or raw_id == "":
        raw_id = row.get("pair_id")
        consumed = consumed | {"pair_id"}  # it becomes the id, no need to keep a copy
    metadata = _metadata(row, consumed, chosen, rejected)
    if extra:
        metadata.update(extra)
    return PreferencePair(
        id=stable_id(prompt, chosen, rejected) if raw_id is None or raw_id == "" else str(raw_id),
        prompt=prompt,
        chosen=chosen,
        rejected=rejected,
        domain=own_domain or _optional_str(None if "domain" in consumed else row.get("domain"), domain),
        source=own_source or _optional_str(None if "source" in consumed else row.get("source"), source_name),
        metadata=metadata,
    )


def _not_an_object(row: Any) -> RowProblem:
    return RowProblem(None, "not_an_object", f"expected a JSON object, got {type(row).__name__}")


def _per_row(rows: Iterable[tuple[int, Any]], layout: Layout | None, options: Mapping[str, Any] | None) -> Iterator:
    """(index, row, Parts | Drop | RowProblem | DataError, layout name) through per-row layouts."""
    resolved: dict[str, dict] = {}  # layout name -> its options (auto mode passes every option to every layout)
    for index, row in rows:
        if not isinstance(row, dict):
            yield index, row, row if isinstance(row, DataError) else _not_an_object(row), None
            continue
        try:
            found = layout or detect_layout(row)
            opts = resolved.get(found.name)
            if opts is None:
                opts = resolved[found.name] = found.resolve_options(options, strict=layout is not None)
            if found.convert is None:
                raise RowProblem(None, "wrong_type", f"rows in the {found.name!r} layout are read as a whole set: "
                                 f"pass layout={found.name!r} (--layout {found.name})")
            out = found.convert(row, opts)
        except RowProblem as problem:
            yield index, row, problem, None
            continue
        except RecursionError:
            yield index, row, RowProblem(None, "too_deep", "the row is nested too deeply to read"), None
            continue
        if type(out) is list:
            for item in out:
                yield index, row, item, found.name
        else:
            yield index, row, out, found.name


def _first_object(rows: Iterator[tuple[int, Any]]) -> tuple[list, Any]:
    """The rows read up to the first dict (to be replayed) and that dict (None when there is none)."""
    head = []
    for item in rows:
        head.append(item)
        if isinstance(item[1], dict):
            return head, item[1]
    return head, None


def convert_stream(rows: Iterable[tuple[int, Any]], layout: str | Layout | None = None,
                   options: Mapping[str, Any] | None = None) -> Iterator[Item]:
    """One item per manifest row (see the module docstring) for raw (index, row) pairs.

    `layout` None / "auto" detects each row's layout; a whole-set layout (e.g. helpsteer2_ratings) is
    used for the whole stream when the first object row is in it.
    """
    chosen = resolve_layout(layout) if not isinstance(layout, Layout) else layout
    rows = iter(rows)
    if chosen is None:
        head, first = _first_object(rows)
        rows = itertools.chain(head, rows)
        if first is not None:
            try:
                found = detect_layout(first)
            except RowProblem:
                found = None
            if found is not None and found.stream is not None:
                chosen = found
    if chosen is None or chosen.stream is None:
        if chosen is not None:
            chosen.resolve_options(options)  # unknown options fail before any row is read
        yield from _per_row(rows, chosen, options)
        return
    for index, row, out in chosen.stream(rows, chosen.resolve_options(options)):
        if isinstance(out, (Parts, Drop, RowProblem, DataError)):
            yield index, row, out, chosen.name if isinstance(out, (Parts, Drop)) else None
        else:
            yield index, row, _not_an_object(out), None


def rename_columns(rows: Iterable[tuple[int, Any]], columns: Mapping[str, str]) -> Iterator[tuple[int, Any]]:
    """Rows with a layout's field names: `columns` maps the layout's name -> the source's column name
    (e.g. {"prompt": "input", "chosen": "accepted"}); the source's own column is removed."""
    for index, row in rows:
        if isinstance(row, dict):
            row = dict(row)
            for target, column in columns.items():
                if column in row:
                    row[target] = row.pop(column)
        yield index, row


def pair_from_row(row: Any, *, layout: str = "auto", layout_options: Mapping[str, Any] | None = None,
                  path: str = "<memory>", index: int = 0, source_name: str | None = None,
                  domain: str | None = None, format: str | None = None) -> PreferencePair:
    """Convert and validate one raw row into a PreferencePair; raises DataError naming path and row.
    A row that yields no pair (a tie) raises too, with the drop's reason. `format` is an alias of `layout`."""
    name = format if format is not None else layout
    for _, raw, out, _ in convert_stream([(index, row)], name, layout_options):
        if isinstance(out, Parts):
            try:
                return assemble(raw, out, source_name, domain)
            except RowProblem as problem:
                out = problem
        if isinstance(out, Drop):
            raise DataError(path, index, None, out.reason, out.message)
        raise DataError(path, index, out.field, out.reason, out.message)
    raise DataError(path, index, None, "missing_field", "the row yields no pair")
