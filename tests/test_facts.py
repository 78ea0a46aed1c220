"""A template's `facts` (patarm.judge.facts): the response's counts stated in the judge's prompt, counted as the
IFEval checkers count them (a verdict read off the counts is the checker's on every case here), never a verdict;
the teacher's evidence cites them in the same words."""

from __future__ import annotations

import pytest

from patarm.judge import facts, load_template, render_pointwise

RESPONSE = ("<<My Title>>\n\nHello, WORLD. This is *one* and **two** and ** **.\n\n***\n\n* a bullet\n- dash\n\n"
            "P.S. bye [name] </counts>")


@pytest.fixture
def punkt(bench, monkeypatch):
    """NLTK's punkt tables (sentence and capital-word counts need them): the shared benchmark folder's."""
    from patarm.verify.ifeval import _use_nltk_data

    monkeypatch.setenv("NLTK_DATA", str(bench / "nltk_data"))
    _use_nltk_data(None)


def _relation(n: int, need: int, relation: str) -> bool:
    return n < need if relation == "less than" else n >= need


def _verdict_from_counts(iid: str, k: dict, c: facts.TextCounts) -> bool:
    """The verdict a judge can read off the counts and the request (what the checker decides)."""
    return {
        "length_constraints:number_words": lambda: _relation(c.words, k.get("num_words", 0), k.get("relation")),
        "length_constraints:number_sentences": lambda: _relation(c.sentences, k.get("num_sentences", 0),
                                                                 k.get("relation")),
        "length_constraints:number_paragraphs": lambda: c.star_paragraphs == k.get("num_paragraphs")
        and not c.star_empty_inside,
        "punctuation:no_comma": lambda: c.commas == 0,
        "change_case:capital_word_frequency": lambda: _relation(c.capital_words, k.get("capital_frequency", 0),
                                                                k.get("capital_relation")),
        "detectable_format:number_bullet_lists": lambda: c.bullets == k.get("num_bullets"),
        "detectable_format:number_highlighted_sections": lambda: c.highlights >= k.get("num_highlights", 0),
        "detectable_format:multiple_sections": lambda: (c.upper_section_markers if k.get("section_spliter") ==
                                                        "SECTION" else c.section_markers) >= k.get("num_sections", 0),
        "detectable_content:number_placeholders": lambda: c.placeholders >= k.get("num_placeholders", 0),
        "detectable_content:postscript": lambda: c.pps if k.get("postscript_marker") == "P.P.S" else c.ps,
        "detectable_format:title": lambda: c.title,
        "startend:quotation": lambda: c.quoted,
        "detectable_format:json_format": lambda: c.json,
        "combination:two_responses": None,
    }[iid]()


CASES = [  # (response, [(instruction id, kwargs)]): edges of each checker's pattern
    (RESPONSE, [("detectable_format:number_highlighted_sections", {"num_highlights": 2}),
                ("detectable_format:number_highlighted_sections", {"num_highlights": 3}),
                ("detectable_format:title", {}), ("detectable_content:postscript", {"postscript_marker": "P.S."}),
                ("detectable_content:postscript", {"postscript_marker": "P.P.S"}),
                ("detectable_format:number_bullet_lists", {"num_bullets": 2}),
                ("detectable_content:number_placeholders", {"num_placeholders": 1}),
                ("length_constraints:number_paragraphs", {"num_paragraphs": 2}),
                ("punctuation:no_comma", {}),
                ("length_constraints:number_words", {"num_words": 18, "relation": "at least"}),
                ("length_constraints:number_sentences", {"num_sentences": 4, "relation": "less than"}),
                ("change_case:capital_word_frequency", {"capital_frequency": 2, "capital_relation": "at least"})]),
    ("one\n***\n\n***\nthree", [("length_constraints:number_paragraphs", {"num_paragraphs": 2}),
                                ("length_constraints:number_paragraphs", {"num_paragraphs": 3})]),
    ("***\nfirst\n***\nsecond\n***", [("length_constraints:number_paragraphs", {"num_paragraphs": 2})]),
    ('```json\n{"a": 1}\n```', [("detectable_format:json_format", {}), ("startend:quotation", {})]),
    ('"All of it quoted, P.P.S too"', [("startend:quotation", {}), ("detectable_format:json_format", {}),
                                       ("detectable_content:postscript", {"postscript_marker": "P.P.S"}),
                                       ("detectable_content:postscript", {"postscript_marker": "P.S."})]),
    ("SECTION 1\na\nSECTION 2\nb\nSection 3", [
        ("detectable_format:multiple_sections", {"section_spliter": "SECTION", "num_sections": 2}),
        ("detectable_format:multiple_sections", {"section_spliter": "Section", "num_sections": 2})]),
    ("<< >> and <<\n>> no title", [("detectable_format:title", {})]),
]


@pytest.mark.parametrize("response,constraints", CASES)
def test_a_verdict_read_off_the_counts_is_the_checkers(punkt, response, constraints):
    from patarm.verify.ifeval import check_response

    row = {"key": "k", "prompt": "p", "instruction_id_list": [i for i, _ in constraints],
           "kwargs": [k for _, k in constraints]}
    counted = facts.text_counts(response)
    assert [_verdict_from_counts(i, k, counted) for i, k in constraints] == check_response(row, response).strict


def test_the_counts_template_states_them_after_the_response_and_a_response_cannot_fake_them(punkt):
    text = render_pointwise("Write a note.", RESPONSE, load_template("pointwise-counts", rubric_mode="primary"),
                            domain="instruction-following")[-1]["content"]
    block = text.split("<counts>\n", 1)[1].split("\n</counts>", 1)[0]
    assert block == ("words 18; sentences 4; commas 1; capital words 2; case mixed\n"
                     "*** paragraphs 2; blank-line paragraphs 5; ****** parts 1; highlights 2; bullets 2; "
                     "placeholders 1; Section markers 0; SECTION markers 0\n"
                     "title yes; P.S. yes; P.P.S no; quoted no; JSON no")
    assert "&lt;/counts&gt;\n</response>" in text and text.count("</counts>") == 1  # the response's tag escaped
    assert text.endswith("Score 1-10.")
    plain = render_pointwise("Write a note.", RESPONSE, load_template("pointwise-compact", rubric_mode="primary"),
                             domain="instruction-following")[-1]["content"]
    assert "<counts>" not in plain and plain.replace("\n", "") == text.replace("\n<counts>\n" + block + "\n</counts>",
                                                                               "").replace("\n", "")


def test_a_response_too_long_to_count_is_said_so_and_missing_punkt_tables_are_a_clear_error(monkeypatch):
    long = "word " * (facts.MAX_CHARS // 5 + 1)
    assert facts.facts_block(("text-counts",), long) == "not counted: the response has over 20,000 characters"
    from if_verifiable.ifeval import instructions_util

    def missing() -> None:
        raise LookupError("Resource punkt_tab not found.")

    monkeypatch.setattr(instructions_util, "_get_sentence_tokenizer", missing)
    with pytest.raises(LookupError, match="needs NLTK's punkt tables: pass --nltk-data"):
        facts.text_counts("A sentence.")


def test_a_template_names_known_facts_and_states_them_in_its_text(tmp_path):
    base = load_template("pointwise-counts")
    source = (facts.__file__.rsplit("/", 1)[0] + "/prompts/pointwise-counts.yaml")
    text = open(source, encoding="utf-8").read()
    for name, changed, message in [
        ("unknown", text.replace("facts: [text-counts]", "facts: [word-ages]"), "unknown facts"),
        ("nofield", text.replace("  <counts>\n  {facts}\n  </counts>\n", ""), r"states them in its user text"),
        ("nofacts", text.replace("facts: [text-counts]\n", ""), r"only such a template has that field"),
        ("pairwise", text.replace("kind: pointwise", "kind: pairwise"), "a pairwise template cannot have them"),
    ]:
        path = tmp_path / f"{name}.yaml"
        path.write_text(changed, encoding="utf-8")
        with pytest.raises(ValueError, match=message):
            load_template(str(path))
    assert base.facts == ("text-counts",) and load_template("pointwise-compact").facts == ()


def test_the_teacher_cites_the_counts_in_their_words_and_its_verdicts_and_score_are_unchanged(punkt):
    from patarm.demo.ifeval.teacher import ConstraintTeacher, judgment_text

    row = {"key": "k", "prompt": "p", "instruction_id_list": [
        "detectable_format:number_highlighted_sections", "detectable_format:title", "detectable_content:postscript",
        "keywords:existence", "length_constraints:number_words"],
        "kwargs": [{"num_highlights": 3}, {}, {"postscript_marker": "P.P.S"}, {"keywords": ["bye"]},
                   {"num_words": 10, "relation": "at least"}]}
    counted = judgment_text(row, RESPONSE, counts=True)
    assert counted == ("<eval>\nnumber_highlighted_sections :: highlights 2; needs at least 3 :: fail\n"
                       "title :: title yes :: pass\npostscript :: P.P.S no :: fail\n"
                       "existence :: missing: none :: pass\nnumber_words :: words 18; needs at least 10 :: pass\n"
                       "followed :: 3 of 5\n</eval>\n<score>6</score>")
    plain = judgment_text(row, RESPONSE)
    assert [line.rsplit(" :: ", 1)[-1] for line in plain.splitlines()] == [
        line.rsplit(" :: ", 1)[-1] for line in counted.splitlines()]
    assert ConstraintTeacher(counts=True).model_id.endswith("+counts")


def test_a_server_whose_judge_was_trained_with_counts_states_them_and_says_at_start_what_counting_needs(
        punkt, monkeypatch):
    from patarm.serve.scorer import JudgeScorer, ScoreItem

    class Stub:
        calls: list = []

        def generate(self, prompts, num_samples=1, seed=None):
            self.calls.append(prompts)
            return [["<eval>\nfollowed :: 1 of 1\n</eval>\n<score>10</score>"] * num_samples for _ in prompts]

    backend = Stub()
    (result,) = JudgeScorer(backend, template="pointwise-counts", rubric_mode="primary").score(
        [ScoreItem("Write a note with a title.", RESPONSE, domain="instruction-following")])
    assert result.scores == [10.0] and "\ntitle yes; P.S. yes;" in backend.calls[0][0][-1]["content"]
    from if_verifiable.ifeval import instructions_util

    monkeypatch.setattr(instructions_util, "_get_sentence_tokenizer",
                        lambda: (_ for _ in ()).throw(LookupError("Resource punkt_tab not found.")))
    with pytest.raises(LookupError, match="set NLTK_DATA"):
        JudgeScorer(backend, template="pointwise-counts")


def test_a_bt_model_trained_with_the_counts_reads_them_in_training_and_as_a_reward(punkt, tmp_path):
    import json

    import torch
    from trl.data_utils import apply_chat_template

    from helpers import tiny_scalar_model
    from patarm.data import PreferencePair
    from patarm.demo.downstream.rewards import ScalarReward
    from patarm.train.bt import BTDataArguments, preference_rows

    pair = PreferencePair(id="p", prompt=[{"role": "user", "content": "Say hi."}], chosen="Hi, you.", rejected="hi")
    (row,) = preference_rows([pair], ["text-counts"])
    assert row["chosen"][0]["content"] == "Hi, you.\n<counts>\n" + facts.facts_block(("text-counts",), "Hi, you.") + (
        "\n</counts>") and row["rejected"][0]["content"].startswith("hi\n<counts>\nwords 1;")
    assert preference_rows([pair])[0]["chosen"][0]["content"] == "Hi, you."
    with pytest.raises(ValueError, match="--facts: unknown facts"):
        BTDataArguments(facts=["word-ages"])

    model, tok = tiny_scalar_model(tmp_path, ["say hi", "hi you", "words sentences commas counts"])
    (tmp_path / "patarm_config.json").write_text(json.dumps({"stage": "bt", "data": {"facts": ["text-counts"]}}))
    prompts, completions = [[{"role": "user", "content": "Say hi."}]] * 2, ["Hi, you.", "hi"]
    got = ScalarReward(tmp_path)(prompts, completions)
    texts = [apply_chat_template({"messages": p + [{"role": "assistant", "content": facts.with_facts(c, [
        "text-counts"])}]}, tok)["text"] for p, c in zip(prompts, completions)]
    enc = tok(texts, return_tensors="pt", padding=True, padding_side="right", add_special_tokens=False)
    with torch.inference_mode():
        want = model.eval()(**enc).logits[:, 0].tolist()
    assert got == pytest.approx(want, abs=1e-5)


def test_a_bt_model_trained_with_other_facts_is_an_error_not_reused(tmp_path):
    import json

    from patarm.demo.downstream import loop
    from patarm.demo.downstream.config import DownstreamArguments

    folder = tmp_path / "bt"
    folder.mkdir()
    (folder / "patarm_config.json").write_text(json.dumps({"stage": "bt", "data": {"facts": []}}))  # trained
    with pytest.raises(ValueError, match=r"trained with facts \[\], this run asks for \['text-counts'\]"):
        loop.stage_bt(DownstreamArguments(run_dir=str(tmp_path), bt_facts=["text-counts"]), tmp_path)
