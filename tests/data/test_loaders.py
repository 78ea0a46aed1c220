"""Tests for patarm.data loaders: every supported layout, every malformed-row reason, the manifest,
the file/memory/hub sources, atomic writing, and the real LLaMA-Factory demo files."""

from __future__ import annotations

import gzip
import hashlib
import json
import sys
import types
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from patarm.data import (
    REASONS,
    DataError,
    HubLoadError,
    LoadResult,
    Manifest,
    load_pairs,
    pair_from_row,
    write_pairs,
)


def user(text):
    return {"role": "user", "content": text}


def assistant(text):
    return {"role": "assistant", "content": text}


def write_jsonl(path: Path, rows) -> Path:
    with open(path, "w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(row if isinstance(row, str) else json.dumps(row))
            fh.write("\n")
    return path


GOOD = {"prompt": "What is 2+2?", "chosen": "4", "rejected": "5"}

# --------------------------------------------------------------------------- layouts


def test_standard_row():
    pair = pair_from_row({**GOOD, "score_gap": 0.5}, source_name="mine")
    assert pair.prompt == [user("What is 2+2?")]
    assert (pair.chosen, pair.rejected, pair.source, pair.domain) == ("4", "5", "mine", None)
    assert pair.metadata == {"score_gap": 0.5}
    blob = json.dumps([pair.prompt, "4", "5"], ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    assert pair.id == hashlib.sha1(blob.encode()).hexdigest()[:16]
    assert pair_from_row(dict(GOOD)).id == pair.id  # stable across calls


def test_conversational_row_and_prompt_repeated_in_responses():
    prompt = [{"role": "system", "content": "Be brief."}, user("Hi"), assistant("Hello"), user("2+2?")]
    row = {"prompt": prompt, "chosen": [assistant("4")], "rejected": [assistant("5")]}
    pair = pair_from_row(row)
    assert (pair.prompt, pair.chosen, pair.rejected) == (prompt, "4", "5")
    full = {"prompt": prompt, "chosen": prompt + [assistant("4")], "rejected": prompt + [assistant("5")]}
    assert pair_from_row(full).to_dict() == pair.to_dict()


def test_implicit_prompt_and_skywork_style():
    convo = [user("Name a colour"), assistant("Red"), user("Another?")]
    row = {"chosen": convo + [assistant("Blue")], "rejected": convo + [assistant("Red again")],
           "source": "magpie_ultra"}
    result = load_pairs([row], source_name="ignored")
    pair = result.pairs[0]
    assert (pair.prompt, pair.chosen, pair.rejected) == (convo, "Blue", "Red again")
    assert pair.source == "magpie_ultra"  # the row's own source wins
    assert result.manifest.extra["layouts"] == {"implicit_prompt": 1}
    assert load_pairs([row], layout="skywork").pairs[0].to_dict() == pair.to_dict()
    assert load_pairs([row], format="implicit_prompt").pairs[0].to_dict() == pair.to_dict()  # the older spelling


def test_sharegpt_with_system_and_multi_turn():
    row = {
        "conversations": [{"from": "human", "value": "Hi"}, {"from": "gpt", "value": "Hello!"},
                          {"from": "human", "value": "Tell a joke"}],
        "chosen": {"from": "gpt", "value": "A joke."}, "rejected": {"from": "gpt", "value": "No."},
        "system": "You are funny.",
    }
    pair = pair_from_row(row)
    assert pair.prompt == [{"role": "system", "content": "You are funny."}, user("Hi"),
                           assistant("Hello!"), user("Tell a joke")]
    assert (pair.chosen, pair.rejected, pair.question) == ("A joke.", "No.", "Tell a joke")
    assert pair.metadata == {}


def test_chosen_messages_with_content_parts_and_from_value():
    system = {"role": "system", "content": [{"type": "text", "value": "Sys"}], "loss_weight": 0.0}
    ask = {"from": "human", "value": [{"type": "text", "text": "Trans"}, {"type": "text", "text": "late"}]}
    row = {"chosen_messages": [system, ask, {"role": "assistant", "content": "Yes"}],
           "rejected_messages": [system, ask, {"from": "gpt", "value": [{"type": "text", "value": "No"}]}]}
    pair = pair_from_row(row)
    assert pair.prompt == [{"role": "system", "content": "Sys"}, user("Translate")]
    assert (pair.chosen, pair.rejected) == ("Yes", "No")


def test_canonical_row_round_trips(tmp_path):
    row = {"id": "p-1", "prompt": [user("Q")], "chosen": "A", "rejected": "B", "domain": "math",
           "source": "ours", "metadata": {"subset": "hard", "nested": {"k": [1, 2]}}}
    pair = pair_from_row(row)
    assert pair.to_dict() == row
    path = tmp_path / "pairs.jsonl"
    other = pair_from_row({**GOOD, "pair_id": 7}, source_name="theirs")
    assert write_pairs([pair, other], path) == 2
    back = load_pairs(path)
    assert [p.to_dict() for p in back] == [row, other.to_dict()]
    assert back[1].id == "7" and "pair_id" not in back[1].metadata
    assert back.manifest.extra["layouts"] == {"canonical": 2}


@settings(max_examples=40, deadline=None)
@given(
    prompt=st.text(min_size=1).filter(str.strip),
    chosen=st.text(min_size=1).filter(str.strip),
    rejected=st.text(min_size=1).filter(str.strip),
    domain=st.none() | st.sampled_from(["chat", "math", "code"]),
)
def test_property_canonical_round_trip(prompt, chosen, rejected, domain):
    if chosen.strip() == rejected.strip():
        return
    pair = pair_from_row({"prompt": prompt, "chosen": chosen, "rejected": rejected}, domain=domain)
    again = pair_from_row(json.loads(json.dumps(pair.to_dict())))
    assert again == pair


def test_source_domain_id_precedence_and_metadata_filtering():
    big = "x" * 5000
    row = {**GOOD, "id": 12, "domain": "math", "lang": "en", "huge": big, "copy": "4", "tags": ["a"]}
    pair = pair_from_row(row, source_name="fallback", domain="chat")
    assert (pair.id, pair.domain, pair.source) == ("12", "math", "fallback")
    assert pair.metadata == {"lang": "en", "tags": ["a"]}  # big values and response copies left out
    assert pair_from_row(dict(GOOD), domain="chat").domain == "chat"


# --------------------------------------------------------------------------- file sources


def test_jsonl_json_data_and_parquet_files(tmp_path):
    rows = [GOOD, {**GOOD, "chosen": "four"}]
    expected = [pair_from_row(r, source_name="pairs").to_dict() for r in rows]
    jsonl = write_jsonl(tmp_path / "pairs.jsonl", rows)
    (tmp_path / "pairs.json").write_text(json.dumps(rows))
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "pairs.json").write_text(json.dumps({"data": rows}))
    with gzip.open(tmp_path / "pairs.jsonl.gz", "wt") as fh:
        fh.write(jsonl.read_text())
    (tmp_path / "lines").mkdir()
    (tmp_path / "lines" / "pairs.json").write_text(jsonl.read_text())  # JSON lines saved as .json
    import pyarrow as pa
    import pyarrow.parquet as pq
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "pairs.parquet")
    for name in ["pairs.jsonl", "pairs.json", "sub/pairs.json", "pairs.jsonl.gz", "lines/pairs.json",
                 "pairs.parquet"]:
        result = load_pairs(tmp_path / name)
        assert [p.to_dict() for p in result] == expected, name
        assert result.manifest.extra["source"] == str(tmp_path / name)
        assert result.manifest.to_dict()["rows_in"] == 2 and result.manifest.consistent


def test_blank_lines_are_not_rows_and_limit(tmp_path):
    path = write_jsonl(tmp_path / "p.jsonl", [GOOD, "", {**GOOD, "chosen": "four"}, {"bad": 1}])
    result = load_pairs(path, limit=2)
    assert len(result) == 2 and result.manifest.rows_in == 2  # stops before the bad row
    assert load_pairs(path, limit=0).manifest.rows_in == 0


def test_missing_file_and_bad_arguments(tmp_path):
    with pytest.raises(FileNotFoundError, match="not found: .*nope.jsonl"):
        load_pairs(tmp_path / "nope.jsonl")
    with pytest.raises(FileNotFoundError, match="data/missing.jsonl"):
        load_pairs("data/missing.jsonl")  # owner/name-shaped, but a file name, so not a hub id
    with pytest.raises(ValueError, match="on_error"):
        load_pairs([GOOD], on_error="ignore")
    with pytest.raises(ValueError, match="unknown preference-data layout 'alpaca'.*standard"):
        load_pairs([GOOD], layout="alpaca")
    (tmp_path / "p.csv").write_text("a,b\n")
    with pytest.raises(ValueError, match="unsupported file type"):
        load_pairs(tmp_path / "p.csv")


def test_broken_json_file_is_a_whole_file_error(tmp_path):
    (tmp_path / "p.json").write_text('[{"prompt": "q",')
    with pytest.raises(DataError, match="p.json.*not valid JSON"):
        load_pairs(tmp_path / "p.json", on_error="skip")


# --------------------------------------------------------------------------- the hub


def fake_datasets(monkeypatch, load):
    module = types.ModuleType("datasets")
    module.load_dataset = load
    monkeypatch.setitem(sys.modules, "datasets", module)


def test_hub_id_offline_gives_a_clear_error(monkeypatch):
    def offline(repo_id, split):
        raise ConnectionError("Couldn't reach 'owner/prefs' on the Hub (LocalEntryNotFoundError)")

    fake_datasets(monkeypatch, offline)
    with pytest.raises(HubLoadError) as info:
        load_pairs("owner/prefs")
    text = str(info.value)
    assert "owner/prefs" in text and "Hugging Face hub" in text and "local file path also works" in text
    assert isinstance(info.value.__cause__, ConnectionError)


def test_hub_id_loads_rows_with_split(monkeypatch):
    calls = []
    fake_datasets(monkeypatch, lambda repo_id, split: calls.append((repo_id, split)) or [GOOD])
    result = load_pairs("owner/prefs", split="test")
    assert calls == [("owner/prefs", "test")]
    assert result.pairs[0].source == "owner/prefs"
    assert result.manifest.extra["split"] == "test"


# --------------------------------------------------------------------------- malformed rows

MSGS = [user("Q"), assistant("A")]
BAD_ROWS = [  # (row, reason, field named in the message)
    ([1, 2], "not_an_object", None),
    ({"prompt": "q", "chosen": "a"}, "missing_field", "rejected"),
    ({"question": "q", "answer": "a"}, "missing_field", "chosen"),
    ({"chosen": "a", "rejected": "b"}, "missing_field", "prompt"),
    ({"conversations": [{"from": "human", "value": "q"}], "chosen": {"from": "gpt", "value": "a"}},
     "missing_field", "rejected"),
    ({"chosen": [user("Q")], "rejected": MSGS}, "missing_field", "chosen"),
    ({"prompt": "q", "chosen": 3, "rejected": "b"}, "wrong_type", "chosen"),
    ({"prompt": [{"role": "user"}], "chosen": "a", "rejected": "b"}, "wrong_type", "prompt[0].content"),
    ({"prompt": [{"role": "robot", "content": "q"}], "chosen": "a", "rejected": "b"}, "wrong_type",
     "prompt[0].role"),
    ({"prompt": "q", "chosen": [assistant("a"), assistant("b")], "rejected": "b"}, "wrong_type", "chosen"),
    ({"prompt": [user([{"type": "image", "url": "x"}])], "chosen": "a", "rejected": "b"}, "wrong_type",
     "prompt[0].content[0]"),
    ({"prompt": "q", "chosen": "   ", "rejected": "b"}, "empty_response", "chosen"),
    ({"prompt": "q", "chosen": "a", "rejected": ""}, "empty_response", "rejected"),
    ({"prompt": " \n", "chosen": "a", "rejected": "b"}, "empty_prompt", "prompt"),
    ({"prompt": [], "chosen": "a", "rejected": "b"}, "empty_prompt", "prompt"),
    ({"prompt": "q", "chosen": " same", "rejected": "same\n"}, "identical_responses", "rejected"),
    ({"chosen": [user("Q1"), assistant("A")], "rejected": [user("Q2"), assistant("B")]},
     "prompt_mismatch", "rejected"),
    ({"chosen_messages": [user("Q"), assistant("x"), user("R"), assistant("A")],
      "rejected_messages": [user("Q"), assistant("y"), user("R"), assistant("B")]},
     "prompt_mismatch", "rejected_messages"),
    ({"prompt": MSGS, "chosen": "a", "rejected": "b"}, "bad_prompt", "prompt"),
    ({"prompt": [{"role": "system", "content": "s"}], "chosen": "a", "rejected": "b"}, "bad_prompt", "prompt"),
]


@pytest.mark.parametrize("row, reason, field", BAD_ROWS, ids=[f"{r}-{i}" for i, (_, r, _) in enumerate(BAD_ROWS)])
def test_malformed_row_raises_naming_file_row_and_field(tmp_path, row, reason, field):
    path = write_jsonl(tmp_path / "prefs.jsonl", [GOOD, GOOD, row])
    with pytest.raises(DataError) as info:
        load_pairs(path)
    err = info.value
    assert (err.reason, err.row, err.line, err.field, err.path) == (reason, 2, 3, field, str(path))
    assert "prefs.jsonl, line 3" in str(err) and reason in str(err)  # the third line: what an editor shows
    if field:
        assert f"field '{field}'" in str(err)
    assert reason in REASONS


def test_broken_json_line_raises_with_its_line(tmp_path):
    path = write_jsonl(tmp_path / "prefs.jsonl", [GOOD, '{"prompt": "q", "chosen": ', GOOD])
    with pytest.raises(DataError, match=r"prefs.jsonl, line 2: not valid JSON") as info:
        load_pairs(path)
    assert info.value.reason == "bad_json"


def test_pair_from_row_defaults_to_memory_path():
    with pytest.raises(DataError, match=r"<memory>, row 5, field 'chosen'"):
        pair_from_row({"prompt": "q", "chosen": None, "rejected": "b"}, index=5)


def test_skip_counts_every_reason_and_keeps_the_manifest_consistent(tmp_path):
    rows = [GOOD] + [row for row, _, _ in BAD_ROWS] + ["{not json", {**GOOD, "chosen": "four"}]
    path = write_jsonl(tmp_path / "prefs.jsonl", rows)
    result = load_pairs(path, on_error="skip")
    expected = {}
    for _, reason, _ in BAD_ROWS:
        expected[reason] = expected.get(reason, 0) + 1
    expected["bad_json"] = 1
    manifest = result.manifest
    assert isinstance(result, LoadResult) and isinstance(manifest, Manifest)
    assert dict(manifest.dropped) == expected
    assert (manifest.rows_in, manifest.rows_out, len(result)) == (len(rows), 2, 2)
    assert manifest.consistent
    assert "line 2" in manifest.examples["not_an_object"]
    assert manifest.extra["layouts"] == {"standard": 2}
    out = tmp_path / "manifest.json"
    manifest.write(str(out))
    assert json.loads(out.read_text())["dropped"]["bad_prompt"] == 2


def test_named_layout_rejects_other_layouts():
    with pytest.raises(DataError) as info:
        pair_from_row(GOOD, layout="sharegpt")
    assert (info.value.reason, info.value.field) == ("missing_field", "conversations")
    conversational = {"prompt": [user("q")], "chosen": [assistant("a")], "rejected": [assistant("b")]}
    with pytest.raises(DataError) as info:
        pair_from_row(conversational, layout="standard")
    assert (info.value.reason, info.value.field) == ("wrong_type", "prompt")
    assert pair_from_row(conversational, layout="conversational").chosen == "a"


# --------------------------------------------------------------------------- writing


def test_write_pairs_is_atomic(tmp_path):
    path = tmp_path / "out" / "pairs.jsonl"
    good = [pair_from_row(GOOD)]
    write_pairs(good, path)
    before = path.read_text()

    def exploding():
        yield good[0]
        raise RuntimeError("crash mid-write")

    with pytest.raises(RuntimeError):
        write_pairs(exploding(), path)
    assert path.read_text() == before
    assert sorted(p.name for p in path.parent.iterdir()) == ["pairs.jsonl"]  # no temp file left


# --------------------------------------------------------------------------- real data


@pytest.fixture
def real_file(bench):
    def find(name: str) -> Path:
        path = bench / "preference-pairs" / name
        if not path.is_file():
            pytest.skip(f"shared benchmark data not found at {path}")
        return path
    return find


def test_real_llamafactory_sharegpt_demo(real_file):
    result = load_pairs(real_file("dpo_en_demo.json"))
    manifest = result.manifest
    assert (len(result), manifest.rows_in, dict(manifest.dropped)) == (300, 300, {})
    assert manifest.consistent and manifest.extra["layouts"] == {"sharegpt": 300}
    # The demo repeats five rows verbatim (e.g. rows 13 and 157): counted, not dropped.
    assert manifest.extra["duplicate_ids"] == 5
    assert all(p.prompt[-1]["role"] == "user" and p.source == "dpo_en_demo" for p in result)
    assert sum(p.prompt[0]["role"] == "system" for p in result) == 80


def test_real_llamafactory_v1_messages_demo(real_file):
    result = load_pairs(real_file("v1_dpo_demo.jsonl"))
    assert (len(result), dict(result.manifest.dropped)) == (10, {})
    assert result.manifest.extra["layouts"] == {"messages": 10}
    assert all([m["role"] for m in p.prompt] == ["system", "user"] for p in result)
    # Every rejected reply starts with a stray space; the loader keeps responses verbatim.
    assert all(p.rejected.startswith(" ") and not p.chosen.startswith(" ") for p in result)
