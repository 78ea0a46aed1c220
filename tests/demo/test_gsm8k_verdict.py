"""The judge's verdict in probability (patarm.demo.gsm8k.verdict): the expected score of stated facts, and P(pass)
read at a judgment's own `correct ::` — batched with left padding, equal to one judgment at a time."""

import pytest

from patarm.demo.gsm8k.verdict import expected_records, expected_score, verdict_probabilities, verdict_summary

FACTS = ("<eval>\nfinal answer :: 26\nreference answer :: 18\ncorrect :: {v}\nwrong steps :: 1 of 2\n"
         "last step :: 26\nfollows :: yes\nunused numbers :: none\n</eval>\n<score>3</score>")


@pytest.mark.parametrize("p, score", [(1.0, 9.0), (0.0, 3.0), (0.25, 4.5)])
def test_expected_score_marginalises_the_verdict_only(p, score):
    # one issue (a wrong step): pass -> 10 - 1, fail -> 4 - 1, whatever the verdict written
    assert expected_score(FACTS.format(v="fail"), p) == pytest.approx(score)
    assert expected_score(FACTS.format(v="pass"), p) == pytest.approx(score)


def test_expected_score_needs_a_mounted_reference_and_every_fact():
    hidden = FACTS.format(v="unknown").replace("reference answer :: 18", "reference answer :: not mounted")
    assert expected_score(hidden, 0.9) is None
    assert expected_score(FACTS.format(v="fail").replace("wrong steps :: 1 of 2\n", ""), 0.9) is None
    assert expected_score(FACTS.format(v="fail"), None) is None
    # its own `follows` counts: a stated `follows :: no` is a second issue
    assert expected_score(FACTS.format(v="fail").replace("follows :: yes", "follows :: no"), 1.0) == 8.0


def test_the_verdict_is_held_against_the_truth():
    from patarm.demo.gsm8k.report import verdict_table

    said = lambda v: FACTS.format(v=v)  # noqa: E731
    records = [{"texts": [said("pass"), said("fail"), said("fail"), "no judgment"],
                "correct": [True, True, False, False], "p_pass": [0.4, 0.3, 0.2, None]},
               {"texts": [said("fail"), said("fail")], "correct": [True, False], "p_pass": [0.1, 0.05]}]
    v = verdict_summary(records)
    # 5 verdicts (the unreadable one is not a verdict): 1 says pass; right: pass/True, fail/False twice -> 3 of 5
    assert v["verdicts"] == 5 and v["said_pass"] == pytest.approx(0.2) and v["accuracy"] == pytest.approx(0.6)
    assert v["correct_share"] == pytest.approx(0.6)
    # P(pass) of correct 0.4, 0.3, 0.1 against incorrect 0.2, 0.05: 5 of 6 orderings right
    assert v["p_pass_auc"] == pytest.approx(5 / 6)
    # medians: of 0.4, 0.3, 0.1 and of 0.2, 0.05
    assert v["p_pass_median"] == {"correct": 0.3, "incorrect": pytest.approx(0.125)}
    assert "p_pass_auc" not in verdict_summary([{k: r[k] for k in ("texts", "correct")} for r in records])
    assert verdict_summary([{"texts": ["no judgment"], "correct": [True]}]) is None
    report = {"arms": {"reference": {"stages": {"sft": {"verdict": v}, "base": {}}}}}
    assert "| SFT | reference | 5 | 0.200 | 0.600 | 0.600 | 0.833 | 0.300 / 0.125 |" in verdict_table(report)
    del v["p_pass_median"]  # a report written before the medians were
    assert "| SFT | reference | 5 | 0.200 | 0.600 | 0.600 | 0.833 | — |" in verdict_table(report)
    assert verdict_table({"arms": {"reference": {"stages": {"base": {}}}}}) == ""


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from patarm.models import load_causal_lm
    from patarm.models.tiny import build_tiny_judge

    out = tmp_path_factory.mktemp("tiny")
    texts = [FACTS.format(v=v) for v in ("pass", "fail")] * 20 + ["Judge the solution. Tom has 16 apples. A: 28"] * 4
    build_tiny_judge(texts, out, vocab_size=600, hidden_size=32, num_layers=1)
    return load_causal_lm(str(out))


def test_batched_probabilities_equal_one_at_a_time(tiny):
    model, tok = tiny
    prompts = [[{"role": "user", "content": "Judge the solution. " + "Tom has 16 apples. " * k + "A: 28"}]
               for k in (1, 4, 2)]
    texts = [FACTS.format(v="pass"), "<eval>\nfinal answer :: 28\n</eval>\n<score>5</score>", FACTS.format(v="fail")]
    batched = verdict_probabilities(model, tok, prompts, texts, batch_size=3)
    alone = [verdict_probabilities(model, tok, [p], [t], batch_size=1)[0] for p, t in zip(prompts, texts)]
    assert batched[1] is None and alone[1] is None  # no `correct ::` stated: no verdict to read
    assert batched[0] == pytest.approx(alone[0], abs=1e-4) and batched[2] == pytest.approx(alone[2], abs=1e-4)
    assert 0.0 < batched[0] < 1.0
    # the same evidence up to `correct ::` gives the same probability whatever verdict was written after it
    assert batched[0] == pytest.approx(verdict_probabilities(model, tok, prompts[:1], texts[2:], 1)[0], abs=1e-4)
    assert tok.padding_side == "left"


def test_expected_records_score_every_candidate(tiny, tmp_path):
    model, tok = tiny
    model.save_pretrained(tmp_path / "m")
    tok.save_pretrained(tmp_path / "m")
    records = [{"problem": "p", "correct": [True, False], "texts": [FACTS.format(v="pass"), "no judgment"],
                "scores": [9.0, None], "valid": [True, False]}]
    out = expected_records(str(tmp_path / "m"), records, lambda t: [[{"role": "user", "content": "Judge."}]] * 2)
    assert out[0]["scores"][1] is None and out[0]["valid"] == [True, False]
    p = out[0]["p_pass"][0]
    assert out[0]["scores"][0] == pytest.approx(p * 9 + (1 - p) * 3)


def test_a_tokenizer_that_cannot_tell_the_verdicts_apart_is_an_error():
    class Tok:
        def __call__(self, text, add_special_tokens=False):
            return type("E", (), {"input_ids": [7, 8]})()

    with pytest.raises(ValueError, match="same token 7"):
        verdict_probabilities(None, Tok(), [[]], ["correct :: pass"])


def _scaled_bf16(model, factor):
    """A bf16 copy of the tiny judge whose LM head is `factor` times larger: logits at a trained judge's magnitude."""
    import copy

    import torch

    m = copy.deepcopy(model)
    head = m.get_output_embeddings()
    head.weight = torch.nn.Parameter(head.weight.detach().clone() * factor)  # untied from the input embeddings
    return m.to(torch.bfloat16)


def test_a_bf16_judges_verdict_logits_are_taken_in_fp32(tiny):
    """At logits of ~20 a bf16 judge's own logits step by 0.125, so its P(pass) ties different judgments; the two
    words' logits taken in fp32 from the head's input fall between those steps, and agree with the model's own within
    its rounding."""
    import torch

    from patarm.demo.gsm8k.verdict import verdict_logits, word_ids

    model, tok = tiny
    m = _scaled_bf16(model, 100.0)
    ids = word_ids(tok)
    chats = [[{"role": "user", "content": "Judge the solution. " + "Tom has 16 apples. " * k + "A: 28"}]
             for k in range(1, 13)]
    prompts = [tok.apply_chat_template(c, tokenize=False, add_generation_prompt=True)
               + FACTS.split("correct ::")[0] + "correct ::" for c in chats]
    side, tok.padding_side = tok.padding_side, "left"
    enc = tok(prompts, add_special_tokens=False, padding=True, return_tensors="pt")
    tok.padding_side = side
    with torch.inference_mode():
        own = m(**enc, logits_to_keep=1).logits[:, -1][:, list(ids)].float()
        exact = verdict_logits(m, enc, ids)
    assert own.abs().max() > 8  # the magnitude where bf16 rounding shows
    on_grid = lambda x: (x == x.bfloat16().float())  # noqa: E731 — a value bf16 can hold exactly
    assert on_grid(own).all()  # the model's own logits: rounded to bf16's grid
    assert (~on_grid(exact)).float().mean() > 0.9  # read in fp32: between its steps
    probs = verdict_probabilities(m, tok, chats, [FACTS.format(v="fail")] * len(chats), batch_size=12)
    assert probs == pytest.approx(exact.softmax(-1)[:, 0].tolist(), rel=1e-4)  # what the recipe reads
    assert probs != pytest.approx(own.softmax(-1)[:, 0].tolist(), rel=1e-3)
    assert torch.allclose(exact, own, rtol=1 / 64, atol=0.05)


def test_logits_transformed_after_the_head_are_an_error(tiny):
    """A model that changes its logits after the LM head (here: doubled) cannot be read from the head's input."""
    import torch

    from patarm.demo.gsm8k.verdict import verdict_logits, word_ids

    model, tok = tiny
    m = _scaled_bf16(model, 50.0).float()
    forward = m.forward

    def doubled(*a, **k):
        out = forward(*a, **k)
        out.logits = out.logits * 2
        return out

    m.forward = doubled
    enc = tok(["Judge the solution. A: 28 correct ::"], add_special_tokens=False, return_tensors="pt")
    with torch.inference_mode(), pytest.raises(ValueError, match="not its LM head's product"):
        verdict_logits(m, enc, word_ids(tok))
