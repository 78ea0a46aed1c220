"""The IFEval recipe's input files: a malformed Alpaca or IFEval file is named with its row and field (the
project's DataError), not a traceback."""

from __future__ import annotations

import json

import pytest

from patarm.demo.ifeval.prompts import PromptSettings, build_prompts


def _alpaca(tmp_path):
    path = tmp_path / "alpaca.json"
    path.write_text(json.dumps([{"instruction": f"Write note {i}.", "input": "", "output": "x"} for i in range(40)]))
    return path


def _ifeval(tmp_path, prompts):
    path = tmp_path / "input_data.jsonl"
    path.write_text("".join(json.dumps({"key": i, "prompt": p, "instruction_id_list": ["punctuation:no_comma"],
                                        "kwargs": [{}]}) + "\n" for i, p in enumerate(prompts)))
    return path


@pytest.mark.parametrize("content, where", [
    ("{not json", r"alpaca.json: cannot read the Alpaca file"),
    ('{"instruction": "x"}', r"alpaca.json: expected a JSON list .* got a dict"),
    ('[{"instruction": "a", "input": ""}, {"text": "b"}]',
     r"alpaca.json, row 1, field 'instruction': no 'instruction'"),
])
def test_a_bad_alpaca_file_is_named_with_its_row_and_field(tmp_path, content, where):
    alpaca = tmp_path / "alpaca.json"
    alpaca.write_text(content)
    with pytest.raises(ValueError, match=where):
        build_prompts(alpaca, _ifeval(tmp_path, ["unrelated"]), PromptSettings())


def test_a_file_that_is_not_ifevals_input_is_named_with_the_line_that_lacks_a_prompt(tmp_path):
    ifeval = tmp_path / "input_data.jsonl"
    ifeval.write_text('{"prompt": "a"}\n{"key": 2}\n')
    with pytest.raises(ValueError, match=r"input_data.jsonl, field 'prompt': not IFEval's input_data.jsonl: line 2 "):
        build_prompts(_alpaca(tmp_path), ifeval, PromptSettings())
