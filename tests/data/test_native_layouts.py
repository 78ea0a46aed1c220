"""The preference sets people have, in their native layouts: real rows from ../shared/benchmarks (tests skip
without them) and hand-written rows from the dataset cards' schemas (tests/data/fixtures, see its README).
Every layout loads by auto-detection and by name, and the manifest accounts for every row."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from helpers import run_cli
from patarm.data import DataError, load_pairs
from patarm.prep.io import read_pairs

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="module")
def layouts_dir(bench) -> Path:
    folder = bench / "preference-layouts"
    if not folder.is_dir():
        pytest.skip(f"real native-layout rows not found at {folder}")
    return folder


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def loaded(source, **kwargs):
    result = load_pairs(source, **kwargs)
    m = result.manifest
    assert m.rows_in == m.rows_out + sum(m.dropped.values()) and m.rows_out == len(result)
    return result


# --------------------------------------------------------------------------- real rows


def test_pku_saferlhf_real_rows_both_axes(layouts_dir):
    path = layouts_dir / "pku_saferlhf.jsonl"
    raw = rows(path)
    better = loaded(path)  # detected
    assert better.manifest.extra["layouts"] == {"pku_saferlhf": 10}
    safer = loaded(path, layout="pku", layout_options={"axis": "safer"})
    for row, b, s in zip(raw, better, safer):
        # The file's own checksums prove which response each side took: sha256(prompt + response).
        for pair, key in ((b, "better_response_id"), (s, "safer_response_id")):
            winner = row[key]
            digest = hashlib.sha256((row["prompt"] + pair.chosen).encode()).hexdigest()
            assert digest == row[f"response_{winner}_sha256"]
            assert pair.rejected == row[f"response_{1 - winner}"] and pair.question == row["prompt"]
        assert b.metadata["chosen_safe"] == row[f"is_response_{row['better_response_id']}_safe"]
        assert b.metadata["safer_agrees"] == (row["better_response_id"] == row["safer_response_id"])
        assert "response_0_sha256" not in b.metadata and b.metadata["prompt_source"] == row["prompt_source"]
    disagree = [i for i, row in enumerate(raw) if row["better_response_id"] != row["safer_response_id"]]
    assert disagree and all(better[i].chosen == safer[i].rejected for i in disagree)
    harmful = next(p for p in safer if p.metadata["rejected_harm_categories"])
    assert all(isinstance(c, str) for c in harmful.metadata["rejected_harm_categories"])


def test_shp_real_row_and_score_ratio(layouts_dir):
    path = layouts_dir / "shp.jsonl"
    row = rows(path)[0]
    pair = loaded(path)[0]
    preferred, other = ("A", "B") if row["labels"] == 1 else ("B", "A")
    assert (pair.chosen, pair.rejected, pair.question) == (row[f"human_ref_{preferred}"], row[f"human_ref_{other}"],
                                                           row["history"])
    assert pair.metadata["score_ratio"] == row["score_ratio"] and pair.metadata["subreddit"] == "askculinary"
    assert pair.domain is None  # SHP's "askculinary_train" is not a judge domain
    strict = loaded(path, layout="shp", layout_options={"min_score_ratio": 3})
    assert (len(strict), dict(strict.manifest.dropped)) == (0, {"low_score_ratio": 1})


def test_helpsteer3_real_rows(layouts_dir):
    path = layouts_dir / "helpsteer3_preference.jsonl"
    raw = rows(path)
    result = loaded(path)
    assert result.manifest.extra["layouts"] == {"helpsteer3": 2}
    for row, pair in zip(raw, result):
        first_better = row["overall_preference"] < 0
        assert pair.chosen == row["response1" if first_better else "response2"]
        assert pair.prompt == row["context"] and pair.domain == row["domain"]
        assert pair.metadata["language"] == row["language"]
    assert len(result[1].prompt) == 7  # the multi-turn example keeps its whole context


def test_ultrafeedback_binarized_real_row_is_a_tie(layouts_dir):
    path = layouts_dir / "ultrafeedback_binarized.jsonl"
    row = rows(path)[0]
    dropped = loaded(path)
    assert (len(dropped), dict(dropped.manifest.dropped)) == (0, {"tie": 1})  # 8.5 vs 8.5: no preference
    kept = loaded(path, layout="ultrafeedback_binarized", layout_options={"keep_ties": True})
    pair = kept[0]
    assert pair.prompt == [{"role": "user", "content": row["prompt"]}]
    assert (pair.chosen, pair.rejected) == (row["chosen"][-1]["content"], row["rejected"][-1]["content"])
    assert pair.metadata == {"prompt_id": row["prompt_id"], "score_chosen": 8.5, "score_rejected": 8.5}


def test_every_real_file_through_the_cli(layouts_dir, tmp_path, capsys):
    for path in sorted(layouts_dir.glob("*.jsonl")):
        out = tmp_path / path.stem
        prep_main(["normalize", "--input", str(path), "--output", str(out)])
        manifest = json.loads((out / "manifest.json").read_text())
        assert manifest["rows_in"] == manifest["rows_out"] + sum(manifest["dropped"].values()) == len(rows(path))
        assert len(read_pairs(out, allow_empty=True)) == manifest["rows_out"]
    prep_main(["normalize", "--input", str(layouts_dir / "pku_saferlhf.jsonl"), "--output", str(tmp_path / "s"),
               "--layout", "pku_saferlhf", "--layout-options", '{"axis": "safer"}'])
    assert json.loads((tmp_path / "s" / "manifest.json").read_text())["config"]["layout_options"] == {"axis": "safer"}


# --------------------------------------------------------------------------- card-faithful fixtures


def test_hh_rlhf_transcripts():
    path = FIXTURES / "hh_rlhf.jsonl"
    with pytest.raises(DataError, match=r"hh_rlhf.jsonl, line 3, field 'rejected'.*differ before") as info:
        load_pairs(path)
    assert info.value.reason == "prompt_mismatch"
    result = loaded(path, on_error="skip")
    assert result.manifest.extra["layouts"] == {"hh_rlhf": 2}
    assert dict(result.manifest.dropped) == {"prompt_mismatch": 1, "empty_response": 1}
    one, multi = result
    assert one.prompt == [{"role": "user", "content": "How do I keep basil fresh?"}]
    assert one.rejected == "Put it in the freezer."
    assert [m["role"] for m in multi.prompt] == ["user", "assistant", "user"]
    assert (multi.prompt[1]["content"], multi.chosen, multi.rejected) == ("7.", "101 is prime.", "100.")
    assert loaded(path, layout="anthropic_hh", on_error="skip").pairs == result.pairs


def test_chatbot_arena_ties_both_bad_and_multi_turn():
    path = FIXTURES / "chatbot_arena.jsonl"
    result = loaded(path)
    assert dict(result.manifest.dropped) == {"tie": 1, "both_bad": 1, "multi_turn": 1}
    a_wins, b_wins = result
    assert (a_wins.chosen, a_wins.rejected, a_wins.metadata["model_chosen"]) == ("144", "124", "model-x")
    assert (b_wins.chosen, b_wins.rejected, b_wins.metadata["model_chosen"]) == ("Lima", "Quito", "model-y")
    assert "openai_moderation" not in a_wins.metadata and a_wins.metadata["language"] == "English"
    first = loaded(path, layout="arena", layout_options={"multi_turn": "first_turn"})
    assert dict(first.manifest.dropped) == {"tie": 1, "both_bad": 1}
    assert (first[2].question, first[2].chosen, first[2].rejected) == \
        ("Tell a joke", "Why did the chicken cross the road?", "No.")


def test_ultrafeedback_raw_best_against_a_seeded_pick():
    path = FIXTURES / "ultrafeedback.jsonl"
    result = loaded(path)
    assert dict(result.manifest.dropped) == {"tie": 1, "too_few_responses": 1}
    pair = result[0]
    assert pair.chosen.startswith("Grey clouds") and pair.metadata["model_chosen"] == "m3"
    assert pair.source == "evol_instruct" and pair.metadata["score_chosen"] == 8.5
    picks = {seed: loaded(path, layout_options={"seed": seed})[0].rejected for seed in range(12)}
    assert len(set(picks.values())) > 1 and pair.chosen not in picks.values()  # the pick varies, never the best
    reordered = list(reversed(rows(path)))
    assert loaded(reordered, layout="ultrafeedback")[0].rejected == pair.rejected  # order does not matter
    by_rating = loaded(path, layout="ultrafeedback", layout_options={"score": "mean_rating", "keep_ties": True})
    assert by_rating[0].metadata["score_chosen"] == 5.0 and len(by_rating) == 2
    with pytest.raises(ValueError, match="option 'score' must be one of"):
        load_pairs(path, layout="ultrafeedback", layout_options={"score": "stars"})


@pytest.mark.parametrize("pairs, expected", [("best_worst", 2), ("best_rest", 6 + 2), ("adjacent", 6 + 2),
                                              ("all", 21 + 3)])
def test_nectar_pairs_from_rankings(pairs, expected):
    result = loaded(FIXTURES / "nectar.jsonl", layout_options={"pairs": pairs})
    assert len(result) == expected and result.manifest.extra["layouts"] == {"nectar": expected}
    assert all(p.metadata["rank_chosen"] < p.metadata["rank_rejected"] for p in result)
    first = result[0]
    assert first.prompt == [{"role": "user", "content": "Give me a synonym for happy."}]
    assert first.chosen == "Joyful." and first.source == "sharegpt"
    multi = [p for p in result if len(p.prompt) == 3]
    assert multi and multi[0].prompt[1] == {"role": "assistant", "content": "7"}
    assert multi[0].source == "lmsys-chat-1m,anthropic-hh"
    if pairs == "best_worst":
        assert (first.rejected, first.metadata["model_rejected"]) == ("Happy.", "anthropic")


def test_nectar_tied_ranks_are_dropped_and_counted():
    row = {"prompt": "\n\nHuman: Hi\n\nAssistant: ", "answers": [
        {"answer": "Hello!", "model": "a", "rank": 1}, {"answer": "Hey.", "model": "b", "rank": 2},
        {"answer": "Yo.", "model": "c", "rank": 2}]}
    result = loaded([row], layout_options={"pairs": "all"})
    assert (len(result), dict(result.manifest.dropped)) == (2, {"tie": 1})


def test_math_step_dpo_uses_whole_solutions():
    result = loaded(FIXTURES / "math_step_dpo.jsonl")
    raw = rows(FIXTURES / "math_step_dpo.jsonl")
    assert result.manifest.extra["layouts"] == {"math_step_dpo": 2}
    for row, pair in zip(raw, result):
        assert (pair.question, pair.chosen, pair.rejected) == (row["prompt"], row["full_chosen"], row["full_rejected"])
        assert pair.metadata == {"dataset": row["dataset"], "answer": row["answer"]}


def test_code_preference_pairs():
    with pytest.raises(DataError, match=r"line 2, field 'rejected'.*same text"):
        load_pairs(FIXTURES / "code_preference_pairs.jsonl")
    result = loaded(FIXTURES / "code_preference_pairs.jsonl", on_error="skip", domain="code")
    assert result.manifest.extra["layouts"] == {"code_preference_pairs": 1}
    assert dict(result.manifest.dropped) == {"identical_responses": 1}
    assert (result[0].question, result[0].domain) == ("Write a Python function that returns the square of x.", "code")


def test_paper_config_reads_the_code_and_math_sets_by_layout():
    from patarm.config import parse_stage
    from patarm.prep.pipeline import PipelineArguments, plan

    repo = Path(__file__).resolve().parents[2]
    (config,) = parse_stage((PipelineArguments,), ["--config", str(repo / "configs/prep/paper.yaml")], prog="t")
    steps = {s["name"]: s["cfg"] for s in plan(config)}
    assert (steps["code_pref"].layout, steps["math_step_dpo"].layout) == ("code_preference_pairs", "math_step_dpo")
    for name, fixture in (("code_pref", "code_preference_pairs"), ("math_step_dpo", "math_step_dpo")):
        cfg = steps[name]
        result = loaded(FIXTURES / f"{fixture}.jsonl", layout=cfg.layout, on_error=cfg.on_error, domain=cfg.domain)
        assert len(result) >= 1 and all(p.domain == cfg.domain for p in result)


def prep_main(argv: list[str]) -> None:
    run_cli("prep", *argv)
