"""The IFEval judge's P(pass) at its own constraint lines (patarm.demo.ifeval.readout): where each line's verdict is
read, the probability equal batched and alone and to the model's own softmax there, the expected score, the AUC
against the checkers, and the recipe's dev-pair measurement by it (added to a cached greedy one)."""

from __future__ import annotations

import json

import pytest

from helpers import IFEVAL_ROW as ROW
from helpers import ifeval_pair_row as _row
from patarm.demo.ifeval.pairs import label_pairs
from patarm.demo.ifeval.readout import belief_auc, constraint_beliefs, expected_score, verdict_points
from patarm.demo.ifeval.teacher import judgment_text

BLUE, COMMA = "The sea is blue.", "The sea, it is calm."  # the checkers: no_comma pass / fail; existence pass / fail


def test_verdict_points_are_just_after_each_constraint_lines_last_separator():
    text = ("<eval>\nno_comma :: 3 commas :: fail\nexistence :: pass\nno_comma :: pass\nfollowed :: 0 of 2\n"
            "</eval>\n<score>1</score>")
    points = verdict_points(text)
    assert [name for name, _ in points] == ["no_comma", "existence"]  # the first line a name; `followed` no verdict
    assert [text[cut:cut + 5] for _, cut in points] == [" fail", " pass"]
    assert text[:points[0][1]].endswith("no_comma :: 3 commas ::")
    assert verdict_points("no lines") == []


def test_expected_score_is_the_teachers_scale_with_the_mean_belief_over_the_stated_constraints():
    assert expected_score(ROW, {"no_comma": 1.0, "existence": 0.0}) == pytest.approx(5.5)  # teacher: 1 of 2 -> 6
    assert expected_score(ROW, {"no_comma": 0.5}) == pytest.approx(5.5)  # existence not stated: not counted
    assert expected_score(ROW, {"title": 1.0}) is None  # none of the row's constraints stated


def test_the_belief_is_held_against_the_checkers():
    responses = [(ROW, BLUE), (ROW, COMMA), (ROW, COMMA)]
    beliefs = [{"no_comma": 0.9, "existence": 0.4}, {"no_comma": 0.2, "existence": 0.6}, {"no_comma": 0.95}]
    measured = belief_auc(responses, beliefs)
    # followed: no_comma 0.9, existence 0.4; not followed: no_comma 0.2, 0.95, existence 0.6
    assert measured["lines"] == 5 and measured["auc"] == pytest.approx(3 / 6)
    assert measured["by_id"]["punctuation:no_comma"] == {"auc": 0.5, "followed": 1, "not_followed": 2}
    assert measured["by_id"]["keywords:existence"] == {"auc": 0.0, "followed": 1, "not_followed": 1}
    assert belief_auc([(ROW, BLUE)], [{"no_comma": 0.9}])["auc"] is None  # one class only


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from patarm.models import load_causal_lm
    from patarm.models.tiny import build_tiny_judge

    out = tmp_path_factory.mktemp("tiny")
    texts = [judgment_text(ROW, r) for r in (BLUE, COMMA)] * 20 + [ROW["prompt"]] * 4
    build_tiny_judge(texts, out, vocab_size=600, hidden_size=32, num_layers=1)
    return load_causal_lm(str(out))


def test_beliefs_batched_equal_one_at_a_time_and_the_models_own_softmax(tiny):
    import torch

    model, tok = tiny
    prompts = [[{"role": "user", "content": ROW["prompt"] + " " + BLUE * k}] for k in (1, 5, 2)]
    texts = [judgment_text(ROW, BLUE), "<eval>\nno verdicts\n</eval>\n<score>5</score>", judgment_text(ROW, COMMA)]
    batched = constraint_beliefs(model, tok, prompts, texts, batch_size=16)
    alone = [constraint_beliefs(model, tok, [p], [t], batch_size=1)[0] for p, t in zip(prompts, texts)]
    assert set(batched[0]) == {"no_comma", "existence"} and batched[1] == {} == alone[1]
    for b, a in zip(batched, alone):
        assert b == pytest.approx(a, abs=1e-4)
    head = tok.apply_chat_template(prompts[0], tokenize=False, add_generation_prompt=True)
    cut = dict(verdict_points(texts[0]))["existence"]
    ids = tok(head + texts[0][:cut], add_special_tokens=False, return_tensors="pt")
    with torch.inference_mode():
        logits = model(**ids).logits[0, -1]
    two = [tok(w, add_special_tokens=False).input_ids[0] for w in (" pass", " fail")]
    assert batched[0]["existence"] == pytest.approx(logits[two].softmax(-1)[0].item(), abs=1e-4)
    rows = []  # a judgment given twice (a response in two pairs) is read once: one row per line
    hook = model.register_forward_hook(lambda m, args, kwargs, out: rows.append(len(kwargs["input_ids"])),
                                       with_kwargs=True)
    try:
        twice = constraint_beliefs(model, tok, prompts[:1] * 2, texts[:1] * 2, batch_size=16)
    finally:
        hook.remove()
    assert rows == [2] and twice[0] == twice[1] == pytest.approx(batched[0], abs=1e-4)


def test_the_recipe_ranks_the_dev_pairs_by_the_belief_and_adds_it_to_a_cached_measurement(tmp_path, monkeypatch):
    from patarm.demo.downstream.reward_models import reward_model_accuracy, reward_models_paired
    from patarm.demo.ifeval import judge, readout
    from patarm.demo.ifeval.recipe import parse_args
    from patarm.judge import load_template

    pairs, _, _ = label_pairs([_row(0), _row(1)], [[BLUE, COMMA]] * 2)
    said = "<eval>\nno_comma :: pass\nexistence :: pass\nfollowed :: 2 of 2\n</eval>\n<score>10</score>"

    class Backend:  # greedy: the same judgment of both sides, every pair a tie
        cache = type("Cache", (), {"close": lambda self: None})()

        def generate(self, prompts, k, seed=None):
            return [[said] for _ in prompts]

    beliefs = {BLUE: {"no_comma": 0.7, "existence": 0.6}, COMMA: {"no_comma": 0.6}}  # chosen 6.85 > rejected 6.4
    calls = []

    def fake_beliefs(model, tokenizer, prompts, texts, batch_size):
        calls.append(len(prompts))
        return [dict(beliefs[p]) for p in prompts]

    monkeypatch.setattr(judge, "_renderer", lambda args, model: lambda pair, response, template: response)
    monkeypatch.setattr(judge, "_judge_backend", lambda *a: Backend())
    monkeypatch.setattr(readout, "constraint_beliefs", fake_beliefs)
    class Tok:  # the two verdict words start with different tokens (or, `same`, with one)
        same = False

        def __call__(self, text, add_special_tokens=False):
            return type("E", (), {"input_ids": [7 if self.same or "pass" in text else 8]})()

    tok = Tok()
    monkeypatch.setattr("patarm.models.load_causal_lm", lambda *a, **k: (type("M", (), {"eval": lambda s: s})(), tok))
    template, clock = load_template("pointwise-compact", rubric_mode="primary"), judge.Clock()
    base = ["--run_dir", str(tmp_path), "--nltk_data", ""]
    measured = judge.judge_accuracy(parse_args(base + ["--judge_readout", "false"]), tmp_path, pairs, template, clock)
    assert (measured["accuracy"], measured["ties"], "readout" in measured, calls) == (0.0, 2, False, [])
    tok.same = True  # a tokenizer that cannot tell the words apart: the error names the model and the way out
    with pytest.raises(ValueError, match="export: the tokenizer starts .*--judge_readout false"):
        judge.judge_accuracy(parse_args(base), tmp_path, pairs, template, clock)
    tok.same = False
    measured = judge.judge_accuracy(parse_args(base), tmp_path, pairs, template, clock)  # cached; the belief added
    read = measured["readout"]
    assert (read["accuracy"], read["ties"], read["unreadable"], read["right"], calls) == (1.0, 0, 0, [1.0, 1.0], [4])
    # the checkers: BLUE follows both, COMMA neither; P(pass) 0.7 / 0.6 against 0.6 on no_comma
    assert read["p_pass"]["by_id"]["punctuation:no_comma"] == {"auc": 1.0, "followed": 2, "not_followed": 2}
    assert json.loads((tmp_path / "eval" / "judge_pairs.json").read_text())["readout"]["accuracy"] == 1.0
    judge.judge_accuracy(parse_args(base), tmp_path, pairs, template, clock)
    assert calls == [4]  # measured once
    rm = reward_model_accuracy(parse_args(base), None)
    assert set(rm) == {"judge", "judge P(pass)"}  # the report lists both
    rm["bt"] = {"accuracy": 0.5, "right": [1.0, 0.0]}
    assert reward_models_paired(rm)["judge P(pass) vs bt"]["difference"] == 0.5
