"""The server's `verdict-lines` readout: a judgment's score is the judge's belief in its own `:: pass|fail` lines,
read from its logits after its own text — equal to reading them one at a time, on the template's scale."""

import pytest

from patarm.backends import GenerationOptions
from patarm.backends.hf import HFBackend
from patarm.serve.scorer import JudgeScorer, ScoreItem

LINES = "<eval>\nno_comma :: 3 commas :: fail\ntitle :: pass\nfollowed :: 1 of 2\n</eval>\n<score>6</score>"
BARE = "<eval>\nfine\n</eval>\n<score>4</score>"


class Fixed(HFBackend):
    """The real tiny model and tokenizer; its judgments fixed, so that the readout reads known lines (sampling, so
    that n > 1 items are judged by it, not by a greedy view of the model)."""

    texts = {"lines": LINES, "bare": BARE}

    def generate(self, prompts, num_samples=1, seed=None, **kw):
        return [[self.texts["bare" if "no lines" in p[-1]["content"] else "lines"]] * num_samples for p in prompts]


@pytest.fixture(scope="module")
def backend(tmp_path_factory):
    from patarm.models import load_causal_lm
    from patarm.models.tiny import build_tiny_judge

    out = tmp_path_factory.mktemp("judge")
    build_tiny_judge([LINES, BARE, "Write a title. no lines"] * 10, out, vocab_size=400, hidden_size=32, num_layers=1)
    model, tokenizer = load_causal_lm(str(out))
    return Fixed(model.eval(), tokenizer, GenerationOptions(max_new_tokens=8, batch_size=2, temperature=0.7))


def test_the_score_is_the_mean_belief_in_the_verdict_lines_on_the_templates_scale(backend):
    from patarm.eval.readout import line_beliefs

    plain = JudgeScorer(backend, "pointwise-compact")
    read = JudgeScorer(backend, "pointwise-compact", readout="verdict-lines")
    items = [ScoreItem("Write a title.", "Sea"), ScoreItem("Write a title. no lines", "Sea"),
             ScoreItem("Write a title, twice.", "Sky", n=2)]
    written, believed = plain.score(items), read.score(items)
    assert [r.scores for r in written] == [[6.0], [4.0], [6.0, 6.0]]
    head = backend.render(plain.prepare(items[0]).messages)
    (said,) = line_beliefs(backend.model, backend.tokenizer, [head], [LINES], batch_size=1)
    assert set(said) == {"no_comma", "title"} and all(0 < p < 1 for p in said.values())
    assert believed[0].scores[0] == pytest.approx(1 + 9 * (said["no_comma"] + said["title"]) / 2, abs=1e-3)
    assert believed[0].mean == believed[0].scores[0]
    assert believed[1].scores == [4.0]  # no verdict line: the written score
    assert len(believed[2].scores) == 2 and believed[2].mean == pytest.approx(sum(believed[2].scores) / 2)
    assert believed[0].judgments[0].score == 6  # the judgment itself is what the judge wrote


def test_the_readout_needs_a_backend_with_logits_and_a_known_name(backend):
    class Remote:
        def generate(self, prompts, num_samples=1, seed=None):
            return [[LINES]] * len(prompts)

    with pytest.raises(ValueError, match="needs the hf backend, not a Remote"):
        JudgeScorer(Remote(), "pointwise-compact", readout="verdict-lines")
    with pytest.raises(ValueError, match="readout must be one of"):
        JudgeScorer(backend, "pointwise-compact", readout="mean")


def test_the_cli_refuses_the_readout_on_vllm():
    from patarm.cli.serve import ServeArguments

    with pytest.raises(ValueError, match="--score_readout verdict-lines reads the judge's logits"):
        ServeArguments(backend="vllm", score_readout="verdict-lines")
