"""JudgeScorer on a stub backend: rendering options, skills, parsing, and one backend call per distinct n."""

import pytest

from patarm.serve.scorer import JudgeScorer, Sampling, ScoreItem

GOOD = "<rubric>1. Follows the constraint.</rubric><eval>ok</eval><score>7</score>"
SKILL_OUT = "<eval>\nconstraint :: pass :: no letter e\n</eval>\n<score>8</score>"


class StubBackend:
    """Answers every prompt with `text` and records each call's prompts and n."""

    def __init__(self, text=GOOD):
        self.text, self.calls = text, []

    def generate(self, prompts, num_samples=1, seed=None):
        self.calls.append((prompts, num_samples))
        return [[self.text] * num_samples for _ in prompts]


def test_items_are_rendered_with_their_options_and_grouped_by_n():
    backend = StubBackend()
    scorer = JudgeScorer(backend, template="pointwise-compact")
    items = [ScoreItem("Say hi.", "hi", n=2), ScoreItem("Add 2+2.", "4", domain="math", n=1),
             ScoreItem([{"role": "user", "content": "Q"}], "A", template="pointwise", rubric_mode="primary", n=2)]
    results = scorer.score(items)
    assert sorted(n for _, n in backend.calls) == [1, 2] and len(backend.calls) == 2
    assert [r.scores for r in results] == [[7.0, 7.0], [7.0], [7.0, 7.0]] and results[0].mean == 7.0
    by_n = {n: prompts for prompts, n in backend.calls}
    compact, full = by_n[2]  # items 0 and 2, in order
    assert "Say hi." in compact[-1]["content"] and "Rubric: " in compact[-1]["content"] and len(compact) == 1
    assert full[0]["role"] == "system" and "impartial expert judge" in full[0]["content"]
    assert "Correctness" in by_n[1][0][-1]["content"]  # the math domain's primary rubric

@pytest.mark.parametrize("item, says", [
    (ScoreItem("p", "r", template="../../etc/passwd"), "is not bundled"),
    (ScoreItem("p", "r", template="pairwise"), "is pairwise"),
    (ScoreItem("p", "r", domain="astrology"), "no primary rubric for domain 'astrology'"),
    (ScoreItem("p", "r", skill="../bank"), "is not in the bundled bank"),
    (ScoreItem("p", "r", resources=[{"id": "ref", "type": "reference", "content": "x"}]), "give `skill` too"),
])
def test_bad_options_are_refused_before_queueing(item, says):
    with pytest.raises(ValueError, match=says):
        JudgeScorer(StubBackend()).prepare(item)


def test_a_skill_item_uses_static_routing_with_its_mounted_resources():
    backend = StubBackend(SKILL_OUT)
    item = ScoreItem("Write a word without the letter e.", "sky", domain="instruction-following",
                     skill="reward-judge", resources=[{"id": "ref-1", "type": "reference", "content": "UNIQUE-REF"}])
    (result,) = JudgeScorer(backend).score([item])
    prompt = backend.calls[0][0][0]
    assert "UNIQUE-REF" in prompt[-1]["content"] and prompt[0]["role"] == "system"
    assert result.scores == [8.0]
    assert [(e.criterion, e.assessment) for e in result.judgments[0].evidence] == [("constraint", "pass")]


def test_chat_completion_sampling_reaches_the_hf_backend():
    from patarm.backends import GenerationOptions
    from patarm.backends.hf import HFBackend
    from patarm.serve.scorer import with_sampling

    class Tok:
        pad_token_id = 0

    base = HFBackend(object(), Tok(), GenerationOptions(max_new_tokens=512))
    view = with_sampling(base, Sampling(max_tokens=7, temperature=0.5, top_p=0.9))
    assert (view.options.max_new_tokens, view.options.temperature, view.options.top_p) == (7, 0.5, 0.9)
    assert base.options.max_new_tokens == 512 and view.model is base.model
    with pytest.raises(NotImplementedError):
        with_sampling(StubBackend(), Sampling())
