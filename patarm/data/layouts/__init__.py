"""The registry of preference-data layouts: a name -> how its rows become pairs.

A new layout is one module defining a `Layout` (see `base.py`) and one line in `_REGISTERED` below.
`resolve_layout` turns a name or alias into a Layout; `detect_layout` recognises a row's layout: a layout
whose `keys` the row has wins; with none, the key-less layouts' `fits` tests are tried in order; several
keyed matches, or none at all, are a `RowProblem` that lists the layouts tried and why each failed.
"""

from __future__ import annotations

from typing import Any

from patarm.data.layouts import anthropic, helpsteer, llamafactory, rated, reasoning, trl, ultrafeedback
from patarm.data.layouts.base import Drop, Layout, Option, Parts, RowProblem

_REGISTERED: tuple[Layout, ...] = (
    trl.STANDARD,
    trl.CONVERSATIONAL,
    trl.CANONICAL,
    trl.IMPLICIT_PROMPT,
    llamafactory.SHAREGPT,
    llamafactory.MESSAGES,
    helpsteer.HELPSTEER3,
    helpsteer.HELPSTEER2_PREFERENCE,
    helpsteer.HELPSTEER2_RATINGS,
    anthropic.HH_RLHF,
    anthropic.NECTAR,
    rated.SHP,
    rated.PKU_SAFERLHF,
    rated.CHATBOT_ARENA,
    ultrafeedback.ULTRAFEEDBACK,
    ultrafeedback.ULTRAFEEDBACK_BINARIZED,
    reasoning.MATH_STEP_DPO,
    reasoning.CODE_PREFERENCE_PAIRS,
)

LAYOUTS: dict[str, Layout] = {layout.name: layout for layout in _REGISTERED}
ALIASES: dict[str, str] = {alias: layout.name for layout in _REGISTERED for alias in layout.aliases}
_KEYED = tuple(layout for layout in _REGISTERED if layout.keys)
_BY_TYPE = tuple(layout for layout in _REGISTERED if not layout.keys and layout.fits is not None)
_MATCH_CACHE: dict[tuple, Layout | tuple] = {}  # a row's key tuple -> its keyed layout, or all its keyed matches

__all__ = ["LAYOUTS", "ALIASES", "Layout", "Option", "Parts", "Drop", "RowProblem", "resolve_layout",
           "detect_layout", "layout_names"]


def layout_names() -> str:
    """The accepted names, for help texts and errors."""
    return ", ".join(("auto",) + tuple(LAYOUTS)) + " (aliases: " + ", ".join(sorted(ALIASES)) + ")"


def resolve_layout(name: str | None) -> Layout | None:
    """The Layout named `name` (or an alias); None for "auto" / None. Unknown names raise ValueError."""
    if name is None or name == "auto":
        return None
    layout = LAYOUTS.get(ALIASES.get(name, name))
    if layout is None:
        raise ValueError(f"unknown preference-data layout {name!r}; expected one of: {layout_names()}")
    return layout


def _keyed_matches(keys: tuple) -> Layout | tuple[Layout, ...]:
    """The one keyed layout a row with these keys is in, else every keyed layout it matches (maybe none)."""
    present = frozenset(keys)
    matches = tuple(layout for layout in _KEYED if layout.keys <= present)
    found = matches[0] if len(matches) == 1 else matches
    if len(_MATCH_CACHE) < 4096:  # rows of one file share a handful of key orders
        _MATCH_CACHE[keys] = found
    return found


def detect_layout(row: dict[str, Any]) -> Layout:
    """The layout of one row (see the module docstring); raises RowProblem when it is not unambiguous."""
    keys = tuple(row)
    matches = _MATCH_CACHE.get(keys)  # this runs on every row: one dict lookup once a key order was seen
    if matches is None:
        matches = _keyed_matches(keys)
    if type(matches) is Layout:
        return matches
    if matches:
        names = ", ".join(layout.name for layout in matches)
        raise RowProblem(None, "ambiguous_layout",
                         f"the row fits several layouts ({names}); name one with layout=NAME (--layout NAME)")
    for layout in _BY_TYPE:
        if layout.fits(row):
            return layout
    tried = "; ".join(f"{layout.name}: {layout.refusal(row)}" for layout in _REGISTERED)
    missing = "chosen" if row.get("chosen") is None else "rejected" if row.get("rejected") is None else "prompt"
    raise RowProblem(missing, "missing_field",
                     f"unrecognised layout (keys: {sorted(map(str, row))[:12]}); layouts tried: {tried}. "
                     "Name one with layout=NAME (--layout NAME), or rename columns with columns=")
