"""The layout registry: one name per layout, unambiguous detection, refusals that list what was tried,
options, and column renaming through `load_pairs`."""

from __future__ import annotations

import pytest

from patarm.data import LAYOUTS, DataError, detect_layout, load_pairs, pair_from_row
from patarm.data.layouts import ALIASES, RowProblem, resolve_layout

GOOD = {"prompt": "What is 2+2?", "chosen": "4", "rejected": "5"}


def test_registry_names_aliases_and_keys_are_consistent():
    assert len(LAYOUTS) == len({layout.name for layout in LAYOUTS.values()})
    assert not set(ALIASES) & set(LAYOUTS)  # an alias never shadows a layout name
    for name, layout in LAYOUTS.items():
        assert layout.name == name and layout.summary
        assert (layout.convert is None) != (layout.stream is None), name  # exactly one way to convert
        assert layout.keys or layout.fits or layout.stream, name  # every layout is reachable by detection...
        assert resolve_layout(name) is layout
    for alias, name in ALIASES.items():
        assert resolve_layout(alias) is LAYOUTS[name]
    keyed = [layout for layout in LAYOUTS.values() if layout.keys]
    # ...and no keyed layout's keys contain another's, so a native row never matches two of them.
    for a in keyed:
        for b in keyed:
            assert a is b or not a.keys <= b.keys, (a.name, b.name)


def test_unrecognised_row_lists_every_layout_tried_and_why():
    with pytest.raises(DataError) as info:
        pair_from_row({"question": "q", "answer": "a"})
    text = str(info.value)
    assert info.value.reason == "missing_field" and "unrecognised layout" in text
    for name in LAYOUTS:
        assert f"{name}:" in text, name
    assert "sharegpt: no 'conversations'" in text and "--layout NAME" in text


def test_ambiguous_row_is_refused_naming_the_candidates():
    row = {"context": [], "response1": "a", "response2": "b", "overall_preference": 1, "conversations": []}
    with pytest.raises(RowProblem, match="several layouts") as info:
        detect_layout(row)
    assert info.value.reason == "ambiguous_layout"
    assert "sharegpt" in str(info.value) and "helpsteer3" in str(info.value)


def test_columns_rename_before_detection():
    rows = [{"input": "Write f.", "accepted": "def f(): pass", "rejected": "f = 1"}]
    result = load_pairs(rows, columns={"prompt": "input", "chosen": "accepted"})
    assert (result[0].question, result[0].chosen) == ("Write f.", "def f(): pass")
    assert result.manifest.extra["layouts"] == {"standard": 1}


def test_helpsteer_layouts_through_load_pairs_and_auto_detection():
    ctx = [{"role": "user", "content": "2+2?"}]
    rows = [{"domain": "stem", "context": ctx, "response1": "4", "response2": "5", "overall_preference": -2},
            {"domain": "stem", "context": ctx, "response1": "5", "response2": "4", "overall_preference": 3},
            {"domain": "stem", "context": ctx, "response1": "4", "response2": "four", "overall_preference": 0}]
    result = load_pairs(rows)  # detected: HelpSteer3's columns are its own
    assert [p.chosen for p in result] == ["4", "4"] and result[0].domain == "stem"
    assert result[0].metadata == {"preference_strength": 2}
    m = result.manifest
    assert (m.rows_in, m.rows_out, dict(m.dropped), m.extra["layouts"]) == (3, 2, {"tie": 1}, {"helpsteer3": 2})
    rated = [{"prompt": "Hi", "response": r, "helpfulness": h} for r, h in (("apple", 4), ("rock", 1))]
    result = load_pairs(rated)  # a whole-set layout, recognised from its first row
    assert (result[0].chosen, result[0].rejected, result.manifest.extra["layouts"]) == \
        ("apple", "rock", {"helpsteer2_ratings": 1})


def test_layout_options_are_checked():
    with pytest.raises(ValueError, match="layout 'standard' has no option 'axis'"):
        load_pairs([GOOD], layout="standard", layout_options={"axis": "safer"})


def test_docs_table_lists_every_layout_alias_and_option():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "data-layouts.md").read_text(encoding="utf-8")
    rows = {line.split("|")[1].strip(): line for line in text.splitlines() if line.startswith("| `")}
    for name, layout in LAYOUTS.items():
        row = next((line for head, line in rows.items() if head.startswith(f"`{name}`")), None)
        assert row is not None, name
        for alias in layout.aliases:
            assert f"`{alias}`" in row.split("|")[1], (name, alias)
        for option in layout.options:
            assert f"`{option}`" in row, (name, option)
